"""The SMT engine: Z3 proves the registry's state invariants inductive over an encoding of ``spec.step``.

What it establishes: Init => Inv and Inv and Step => Inv' for every n up to the bound
each ledger row states, each check only after its hypotheses are found satisfiable
(else the row is vacuous), the step total, and each row refuted under a named mutant.
Modules: ``model`` (the encoding of one tick and its mutants), ``claims`` (the ledger
of claims) and ``run`` (each claim in a killable child with a time limit).
"""
