"""Reports makespan_ticks one tick too early, and adds an extra key holding an object whose unpickling would run code that switches the harness's judge off."""

from impl import serve as _serve

EXPECTED = "metrics_consistent"

# What a pickle of Payload runs wherever it is loaded: it leaves a mark (a line naming the
# process, in the file SCHEDCHECK_HOSTILE_MARKER names) and, in a harness, replaces the
# search's judge by one that finds nothing, so that the wrong makespan would pass.
CODE = """
import os, sys
marker = os.environ.get("SCHEDCHECK_HOSTILE_MARKER")
if marker:
    with open(marker, "a") as handle:
        handle.write(f"ran in process {os.getpid()}\\n")
engine = sys.modules.get("proofs.search.engine")
if engine is not None:
    engine.judge_valid_call = lambda *args, **kwargs: []
"""


class Payload:
    """An object whose pickle, once loaded, runs CODE."""

    def __reduce__(self):
        return exec, (CODE,)


def serve(requests, config):
    result = _serve(requests, config)  # validates first
    if result["makespan_ticks"]:
        result["makespan_ticks"] -= 1  # BUG: one tick too early
    result["debug"] = Payload()
    return result
