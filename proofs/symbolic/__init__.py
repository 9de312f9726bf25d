"""The symbolic engine: CrossHair checks one-step contracts of the spec and of our online scheduler.

What it establishes: for each contract, either a counterexample, or that CrossHair's
path exploration found none within its time (a bounded result), or that it exhausted
every path (``confirmed``, within the stated bounds). Modules: ``contracts`` (the
PEP 316 contracts, one per registry state invariant), ``engine`` (runs them),
``bridge`` (their outcomes as ``schedcheck verify`` findings) and ``diff``
(CrossHair's diffbehavior for ``schedcheck diff``).
"""
