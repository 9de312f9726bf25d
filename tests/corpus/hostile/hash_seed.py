"""Reports makespan_ticks one tick too late when hash("tie-break") is odd, so its result depends on the interpreter's string-hash seed (PYTHONHASHSEED)."""

from impl import schedule as _schedule

EXPECTED = "deterministic"


def schedule(jobs, slots, continuous):
    result = _schedule(jobs, slots, continuous)  # validates first
    if hash("tie-break") % 2:
        result["makespan_ticks"] += 1  # BUG: under half the hash seeds
    return result
