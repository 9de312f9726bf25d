"""Hostile to replay: a counter that misbehaves on the 5th call its process answers (a makespan one tick too long).

Alone in a fresh process every call is right; the failure needs the four calls before it.  verify must save
the calls that came before it (shortened to four) and say it depends on them; ``schedcheck replay`` must make
them again first and fail, and ``replay --pytest`` must write a test that fails on this file.
"""

from impl import schedule as _schedule

EXPECTED = "metrics_consistent"
CALLS = [0]  # the calls this process has answered


def schedule(jobs, slots, continuous):
    result = _schedule(jobs, slots, continuous)  # validates first: a rejected call is not counted
    CALLS[0] += 1
    if CALLS[0] == 5:
        result["makespan_ticks"] += 1
    return result
