"""An engine whose process dies (os._exit) when it has to preempt: the sandbox contains the crash."""

EXPECTED = "termination"

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "online_correct"))
from clock_free import Engine as _Correct  # noqa: E402


class Engine(_Correct):
    """The clock-free engine, killing its own process at the first preemption."""

    def step(self):
        entry = super().step()
        if entry["preempted"]:
            os._exit(3)  # the bug: a hard crash, as a segfault in native code would be
        return entry


def make(config):
    """A fresh engine for ``config``."""
    return Engine(config)
