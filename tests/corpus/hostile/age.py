"""Hostile to the summary: correct until its process is 3 s old, then every makespan is one tick too long.

A fresh process answers correctly, so the failure never reproduces alone: verify must still report the wrong
result it saw as a FAIL (never "nothing broken", never a budget that would not help), and its counts must not
exceed what was planned without saying why.  ``HOSTILE_AGE_SECONDS`` (default 3) sets the age, so that a test
can make it 0 (wrong from the first call of a process that lives at all: a plain bug) or large (never wrong)
and not depend on the machine's speed.
"""

import os
import time

from impl import schedule as _schedule

EXPECTED = "metrics_consistent"
AGE = float(os.environ.get("HOSTILE_AGE_SECONDS", "3"))
BORN = time.monotonic()  # the target is loaded in the fresh child that answers its calls


def schedule(jobs, slots, continuous):
    result = _schedule(jobs, slots, continuous)  # validates first
    if time.monotonic() - BORN >= AGE:
        result["makespan_ticks"] += 1
    return result
