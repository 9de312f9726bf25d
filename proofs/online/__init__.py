"""The clock-free online protocol: drive an engine object tick by tick and check it.

Modules: ``driver`` (``drive`` and ``drive_chapter``: the harness numbers the ticks and
writes the contract's result; the adapters the sandbox child runs), ``shadow`` (the
state an engine's reports imply, on which the registry's state predicates run) and
``stateful`` (the rule-based stateful test of a target engine against the spec's step,
one sandbox message per call).
"""
