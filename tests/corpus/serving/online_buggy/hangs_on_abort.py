"""An engine whose step() never returns once a request has been aborted (a busy loop): the sandbox's time limit contains it."""

EXPECTED = "termination"

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "online_correct"))
from clock_free import Engine as _Correct  # noqa: E402


class Engine(_Correct):
    """The clock-free engine, hanging in the first step after an abort."""

    def step(self):
        while self.to_abort:  # the bug: spins forever
            pass
        return super().step()


def make(config):
    """A fresh engine for ``config``."""
    return Engine(config)
