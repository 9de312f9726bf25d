"""The executable specification of a FIFO batch scheduler: what a correct schedule is.

- ``spec.domain``: the valid inputs (``validate``, ``is_valid``);
- ``spec.state``: the frozen ``State``, the pure one-tick ``step`` and the reference ``run``
  (``run_by_steps`` by definition; ``run`` the same, a stretch of steps at a time);
- ``spec.invariants``: the registry ``INVARIANTS`` that every engine iterates;
- ``spec.metrics``: how wait, turnaround, makespan and utilization are defined;
- ``spec.result_checks``: the incremental ``Replay`` of a trace, every result check's rules;
- ``spec.oracle``: ``check``, which judges any implementation's result.

The serving model (prefill, token budget, KV blocks, preemption, aborts) is the
package ``spec.serving``, in the same layout; what both models share (the Invariant
type, its families, Violation) lives once in ``spec.registry``.

Plain Python with no engine imports, so that every engine can read it.
"""

from spec.domain import Job, fifo_key, is_valid, validate
from spec.invariants import BY_NAME, INVARIANTS, NAMES, STATE_INVARIANTS, Invariant, broken_state_invariants
from spec.observation import Violation
from spec.oracle import check
from spec.state import Completion, Running, State, initial, is_terminal, remaining_work, run, run_by_steps, step, submit

__all__ = [
    "BY_NAME",
    "Completion",
    "INVARIANTS",
    "Invariant",
    "Job",
    "NAMES",
    "Running",
    "STATE_INVARIANTS",
    "State",
    "Violation",
    "broken_state_invariants",
    "check",
    "fifo_key",
    "initial",
    "is_terminal",
    "is_valid",
    "remaining_work",
    "run",
    "run_by_steps",
    "step",
    "submit",
    "validate",
]
