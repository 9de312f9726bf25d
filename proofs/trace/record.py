"""A trace recorded from an online target, driven through the clock-free protocol of issue 11.

The harness numbers the ticks; the engine has no clock.  Before each step it adds the
requests whose arrival is at or before the tick it is about to run (same-tick
arrivals in id order) and calls ``abort`` for the unfinished requests whose abort tick
it is; when every request added so far has ended it jumps to the next arrival without
stepping; it reads each entry without its ``tick`` (an engine's own ``tick`` key is
replaced by the harness's).  Serving: ``make(config)`` with ``add_request``,
``abort`` and ``step() -> entry``; the chapter's: ``make(slots, continuous)`` with
``submit(job)`` and ``step() -> served ids``.

Bounds: it stops when every request has ended, when ``step`` returns None, or after
``max_steps`` steps (default: the latest arrival plus four times the work, so an
engine that never ends still gives a finite trace, which the checker then judges).
The target runs in this process (it is the user's own engine, not contained).

``record`` uses the online protocol driver (``proofs.online.driver``: ``drive`` and
``drive_chapter``, which also stop at the first entry a correct engine could not have
given) when this tree has it, and otherwise the one small loop here (``drive``), kept
apart so that the lead can unify the two.
"""

from __future__ import annotations

from typing import Iterator


def drive(engine, model: str, requests: list, max_steps: int | None = None) -> Iterator[dict]:
    """Yield the engine's trace entries, one per step, ticks numbered by the harness."""
    size = (lambda r: r["prompt"] + r["output"]) if model == "serving" else (lambda r: r["tokens"])
    pending = sorted(requests, key=lambda r: (r["arrival"], r["id"]))
    aborts = sorted((r["abort"], r["arrival"], r["id"]) for r in requests if r.get("abort") is not None)
    if max_steps is None:
        max_steps = max((r["arrival"] for r in requests), default=0) + 4 * sum(size(r) for r in requests) + 16
    tokens = {r["id"]: r.get("tokens") for r in requests}
    served: dict = {}
    live: set = set()
    clock, next_add, next_abort, steps = 0, 0, 0, 0
    while next_add < len(pending) or live:
        if not live:
            clock = max(clock, pending[next_add]["arrival"])  # idle: jump over the gap without stepping
        while next_add < len(pending) and pending[next_add]["arrival"] <= clock:
            request = dict(pending[next_add])
            if model == "serving":
                engine.add_request(request)
            else:
                engine.submit(request)
            live.add(request["id"])
            next_add += 1
        while next_abort < len(aborts) and aborts[next_abort][0] <= clock:
            request_id = aborts[next_abort][2]
            if request_id in live:
                engine.abort(request_id)
            next_abort += 1
        if steps >= max_steps:
            return
        steps += 1
        out = engine.step()
        if out is None:
            return
        if model == "serving":
            entry = {key: value for key, value in dict(out).items() if key != "tick"}
            entry = {"tick": clock, **entry}
            live.difference_update(entry.get("finished", ()), entry.get("aborted", ()))
        else:
            entry = {"tick": clock, "served": list(out)}
            for job_id in entry["served"]:
                served[job_id] = served.get(job_id, 0) + 1
                if served[job_id] == tokens.get(job_id):
                    live.discard(job_id)
        yield entry
        clock += 1


def record(engine, model: str, requests: list, config: dict):
    """The trace entries of ``engine`` on ``requests``: through ``proofs.online.driver`` when present, else ``drive``."""
    try:
        from proofs.online import driver
    except ImportError:  # the online driver is not in this tree yet
        return drive(engine, model, requests)
    if model == "serving":
        return driver.drive(engine, requests, config)["trace"]
    return driver.drive_chapter(engine, requests, config["slots"], config["continuous"])["trace"]


def make_engine(factory, model: str, config: dict):
    """The engine a factory makes: ``make(config)`` (serving) or ``make(slots, continuous)`` (the chapter's)."""
    if model == "serving":
        return factory(dict(config))
    return factory(config["slots"], config["continuous"])
