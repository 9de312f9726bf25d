"""Hostile to the verdicts: correct, except that about 1 call in 600 (``random.random()``) reports a makespan one
tick too long.

A result that breaks the spec is an observation, whatever the chance of seeing it again: verify must report it
as a FAIL (``metrics_consistent``, or whichever rule the wrong makespan breaks first), saying that it did not
reproduce alone, never forgive it as flaky.  ``HOSTILE_CHANCE_ONE_IN`` (default 600) sets the odds, so that a
test can make the bug common and stay fast; this file keeps the issue's 1 in 600.
"""

import os
import random

from impl import schedule as _schedule

EXPECTED = "metrics_consistent"
ONE_IN = int(os.environ.get("HOSTILE_CHANCE_ONE_IN", "600"))


def schedule(jobs, slots, continuous):
    result = _schedule(jobs, slots, continuous)  # validates first
    if random.random() < 1 / ONE_IN:
        result["makespan_ticks"] += 1
    return result
