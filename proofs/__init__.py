"""The engines that check any scheduler against the spec, and the ``schedcheck`` command.

- ``proofs.sandbox``: the one place anything that may hang or crash runs (a killable child
  in its own process group), with one outcome type that every engine maps to its verdict;
- ``proofs.search``: Hypothesis (search, differential);
- ``proofs.online``: the clock-free online protocol (driver, the entries' shadow state, the stateful test);
- ``proofs.symbolic``: CrossHair (one-step contracts);
- ``proofs.smt``: Z3 (inductive proofs);
- ``proofs.report``: text, timeline, JSON, JUnit and SARIF reports;
- ``proofs.cli``: one module per subcommand;
- ``proofs.outcomes``: the verdicts and exit codes every command shares.
"""
