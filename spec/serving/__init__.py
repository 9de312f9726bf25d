"""The serving model: prefill, chunked prefill under a token budget, KV-cache blocks, preemption and aborts.

- ``spec.serving.domain``: the valid inputs (``validate``, ``is_valid``);
- ``spec.serving.state``: the frozen ``State``, the pure one-tick ``step``, ``submit``,
  ``cancel`` and the reference ``run``;
- ``spec.serving.cache``: prefix caching's block pool and cache rules (the free queue,
  chains, registration, hits, eviction, freeing), which the step runs when
  ``prefix_caching`` is on;
- ``spec.serving.invariants``: the registry ``INVARIANTS`` that every engine iterates;
- ``spec.serving.metrics``: how the per-request records and the totals are defined;
- ``spec.serving.oracle``: ``check``, which judges any implementation's result, by one
  replay of its trace (``result_checks``, with ``replay_policy``, ``replay_cache``,
  ``replay_records`` and ``replay_state``).

Plain Python with no engine imports, the same layout as the chapter's model in ``spec``.
"""

from spec.serving.cache import Pool
from spec.serving.domain import Config, Request, fcfs_key, is_valid, validate
from spec.serving.state import (
    Ended,
    Entry,
    Ledger,
    Progress,
    State,
    cancel,
    initial,
    is_terminal,
    remaining_work,
    run,
    step,
    submit,
)
from spec.serving.invariants import BY_NAME, INVARIANTS, NAMES, STATE_INVARIANTS, broken_state_invariants
from spec.serving.oracle import POLICIES, check
from spec.registry import Invariant, Violation

__all__ = [
    "BY_NAME",
    "Config",
    "Ended",
    "Entry",
    "INVARIANTS",
    "Invariant",
    "Ledger",
    "NAMES",
    "POLICIES",
    "Pool",
    "Progress",
    "Request",
    "STATE_INVARIANTS",
    "State",
    "Violation",
    "broken_state_invariants",
    "cancel",
    "check",
    "fcfs_key",
    "initial",
    "is_terminal",
    "is_valid",
    "remaining_work",
    "run",
    "step",
    "submit",
    "validate",
]
