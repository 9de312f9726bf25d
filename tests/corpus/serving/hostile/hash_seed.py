"""Reports makespan_ticks one tick too late when hash("tie-break") is odd, so its result depends on the interpreter's string-hash seed (PYTHONHASHSEED)."""

from impl import serve as _serve

EXPECTED = "deterministic"


def serve(requests, config):
    result = _serve(requests, config)  # validates first
    if hash("tie-break") % 2:
        result["makespan_ticks"] += 1  # BUG: under half the hash seeds
    return result
