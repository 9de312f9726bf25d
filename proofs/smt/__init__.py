"""The SMT engine: Z3 proves the registry's state invariants inductive over encodings of the spec's step.

What it establishes: first, that each encoding agrees with the spec that runs on a fixed
set of states per n (``conformance``: every proof depends on it); then Init => Inv and
Inv and Step => Inv' for every n up to the bound each ledger row states, each check only
after its hypotheses are found satisfiable (else the row is vacuous), the step total,
the serving passes' budget, seats, exclusivity and capacity for any n (``serving_fold``),
and each row refuted under a named mutant.  Modules: ``model`` and ``serving_model`` (the
encodings of one tick and their mutants), ``serving_blocks`` (one symbolic block id),
``serving_fold`` (the passes as loops over positions, any n), ``claims`` and
``serving_claims`` (the ledgers), ``conformance`` (the encodings against the spec that
runs) and ``run`` (each claim in a killable child with a CPU budget).
"""
