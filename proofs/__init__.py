"""The engines that check any scheduler against the spec, and the ``schedcheck`` command.

- ``proofs.sandbox``: the one place a target runs (a killable child process);
- ``proofs.search``: Hypothesis (search, differential);
- ``proofs.online``: the clock-free online protocol (driver, the entries' shadow state, the stateful test);
- ``proofs.symbolic``: CrossHair (one-step contracts);
- ``proofs.smt``: Z3 (inductive proofs);
- ``proofs.report``: text, timeline, JSON, JUnit and SARIF reports;
- ``proofs.cli``: one module per subcommand;
- ``proofs.outcomes``: the verdicts and exit codes every command shares.
"""
