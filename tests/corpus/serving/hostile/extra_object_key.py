"""A correct serving scheduler whose result carries extra keys holding objects (the engine's handle, and a batch object per trace entry and per request record), which the contract allows."""

from impl import serve as _serve

EXPECTED = "pass"  # a correct scheduler: PASS, its extra keys dropped (noted in the report), never compared


class EngineHandle:
    """What an engine might hand back for debugging: not plain data."""


class Batch:
    def __init__(self, tick):
        self.tick = tick


def serve(requests, config):
    result = _serve(requests, config)
    result["engine"] = EngineHandle()
    for entry in result["trace"]:
        entry["batch"] = Batch(entry["tick"])
    for record in result["requests"]:
        record["handle"] = Batch(record["start"])
    return result
