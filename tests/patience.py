"""CrossHair searches in tests, run once more with longer limits when the machine was too slow for the first.

A search for a known bug is bounded by time: CrossHair's CPU limit per contract and the wall time the sandbox gives
its child (proofs.symbolic.engine), or the wall time of a behaviour diff (proofs.symbolic.diff).  Beside other work
the child gets a fraction of a core and is killed before its CPU limit: the contract is ``incomplete``, the diff
returns fewer calls.  That is honest, but it says nothing about the bug.  As the harness does for a target that
times out (only a time-out that passes with a larger limit may be called flaky), such a test searches once more with
``LONGER`` times every limit, and what that search finds or misses is the test's outcome.  On a quiet machine the
first search is the only one; a search that ran to its end and missed the bug is never retried.
"""

from proofs.symbolic.diff import crosshair_differences
from proofs.symbolic.engine import INCOMPLETE

LONGER = 4  # a child that got a quarter of a core the first time (a load of about 8 on 2 cores) still finishes


def contracts_searched(run, *, budget_seconds: float, per_condition_seconds: float, **options) -> list:
    """``run(budget_seconds=..., per_condition_seconds=..., **options)`` (run_crosshair or run_serving_crosshair),
    again with LONGER times both limits if a contract came back ``incomplete`` (killed at its wall time)."""
    results = run(budget_seconds=budget_seconds, per_condition_seconds=per_condition_seconds, **options)
    if any(result.outcome == INCOMPLETE for result in results):
        results = run(budget_seconds=budget_seconds * LONGER, per_condition_seconds=per_condition_seconds * LONGER,
                      **options)
    return results


def differences_found(old, new, seconds: float) -> list:
    """``crosshair_differences(old, new, seconds)``, again with LONGER and then LONGER**2 times the seconds while it
    finds none.  A diff stops at its wall time and cannot say whether it was cut short, and it splits that time
    among its phases (calls of 0, 1, 2, 3 jobs), so beside a load of 7 on 2 cores the phase that holds the bug got
    too little CPU even at 4x (measured: the late admission, found in 13 s quiet, missed in 60 s there)."""
    for factor in (1, LONGER, LONGER**2):
        found = crosshair_differences(old, new, seconds * factor)
        if found:
            return found
    return []
