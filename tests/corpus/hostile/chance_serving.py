"""Hostile to the verdicts, serving model: correct, except that about 1 call in 600 (``random.random()``) reports
a makespan one tick too long.  As ``chance.py``: a FAIL that did not reproduce alone, never a flaky pass;
``HOSTILE_CHANCE_ONE_IN`` (default 600) sets the odds."""

import os
import random

from impl import serve as _serve

EXPECTED = "metrics_consistent"
ONE_IN = int(os.environ.get("HOSTILE_CHANCE_ONE_IN", "600"))


def serve(requests, config):
    result = _serve(requests, config)  # validates first
    if random.random() < 1 / ONE_IN:
        result["makespan_ticks"] += 1
    return result
