"""The SMT engine: Z3 proves the registry's state invariants inductive over an encoding of ``spec.step``.

What it establishes: Init => Inv and Inv and Step => Inv' for the bound each ledger
row states. Modules: ``model`` (the encoding of one tick), ``claims`` (the ledger of
claims) and ``run`` (each claim in a killable child with a time limit).
"""
