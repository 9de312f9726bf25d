"""The clock-free online protocol: the harness drives an engine object tick by tick and writes its result.

An online engine has no clock (vLLM's has none).  For the serving model it is made by
``make(config)`` and has ``add_request(request)``, ``abort(request_id)`` and
``step() -> entry`` (one trace entry: scheduled, preempted, aborted, freed, allocated,
finished); for the chapter's model ``make(slots, continuous)`` gives ``submit(job)``
and ``step() -> served ids``.  An optional ``view()`` shows the state between steps
(serving: ``{"waiting": ids, "running": ids, "blocks": {id: [block ids]}}``; chapter:
waiting and running ids).

What ``drive`` does, exactly:
- it numbers the ticks; before the step of tick t it adds every request with arrival
  <= t not yet added (in (arrival, id) order, as a copy without its ``abort`` key, with
  its ``tokens`` when the caller gave them),
  then calls ``abort(id)`` for every added, unfinished request whose abort tick is t
  (in (arrival, id) order);
- when no added request is unfinished, it jumps to the next arrival without stepping;
  when none is left to add either, the drive ends;
- it reads each entry without its tick: a ``tick`` key is ignored, the harness's tick
  is recorded; other unknown keys are dropped; an engine that exposes its block tables
  instead of ``allocated`` and ``freed`` gives ``blocks``: {id: [block ids]}, every
  running request's table as the tick ran it (after its allocations, before the
  finished give theirs back), from which the two lists are derived
  (``from_block_tables``), and every table is judged (``ServingShadow.check_tables``:
  a waiting request's table, or one shared with another request, is reported too);
- ``None``, or an entry whose lists are all empty, is an idle tick: it is left out of
  the trace (the contract has no entries for idle ticks) and the clock moves on; after
  ``IDLE_LIMIT`` idle steps in a row with requests unfinished the drive ends there, and
  those requests end unfinished in the result (the oracle reports them);
- an entry that is not well shaped ends the drive: it is recorded as returned, so the
  oracle reports ``well_typed``;
- the drive ends at the first tick whose entry the harness cannot follow as a correct
  engine's (``proofs.online.shadow``: blocks not given back, a block held twice or out
  of range, a block count off, a request served before it was added or after it
  ended), since a leak would otherwise starve the run and the rest of it follows from
  that tick: the result so far is returned with ``stopped`` ({invariant, message,
  tick}); the online model then reports the oracle's violations before that tick, and
  that one;
- an exception from the engine ends the drive: a ValueError is raised again as a
  ValueError naming the call and the tick (a valid call rejected: ``validation``), any
  other as ``EngineError`` (``termination``);
- an engine that never finishes is bounded by the call's time limit: the whole drive is
  one sandboxed call (``termination``).
The result is in the model's contract format (the trace at the harness's ticks; the
per-request records and totals derived from the entries by the model's rules), so the
model's oracle judges it unchanged; problems seen through ``view()`` are added under
the extra key ``view_violations`` ([{invariant, message, tick}]), which the online
model reports as violations too.
"""

from __future__ import annotations

import copy

import spec
import spec.serving as serving
from spec.metrics import completion_record, utilization
from proofs.online.shadow import ChapterShadow, ServingShadow, entry_problem, is_idle

IDLE_LIMIT = 64  # idle steps in a row, with requests unfinished, after which the drive ends


class EngineError(Exception):
    """The engine raised something other than ValueError during the drive."""


def _call(what: str, tick: int, function, *args):
    """Call one method of the engine; re-raise what it raises naming the call and the tick."""
    try:
        return function(*args)
    except ValueError as error:
        raise ValueError(f"tick {tick}: engine.{what} raised ValueError: {error}") from None
    except Exception as error:  # the engine's failure, reported as the drive's
        raise EngineError(f"tick {tick}: engine.{what} raised {type(error).__name__}: {error}") from None


def _first_problem(shadow) -> dict | None:
    """The first problem the entries showed (a leak, a block held twice, a request served after it ended), or None."""
    for invariant, message, tick in shadow.problems:
        return {"invariant": invariant, "message": message, "tick": tick}
    return None


def from_block_tables(entry, held: dict, config=None, abort_key=None) -> dict:
    """The entry with ``allocated`` and ``freed`` derived from ``blocks``, the block tables the tick ran with.

    ``held`` maps each running request to the blocks it held before the tick.  New ids
    in a scheduled request's table are allocated (in ``scheduled`` order); the aborted
    and preempted give back what they held and their table no longer shows, the finished what their table shows, and any
    other request whose table lost ids gives those back (which the oracle reports).

    With prefix caching on (``config``, a ``spec.serving.Config``): an admitted request's
    hits are the first ``len(table) - ceil(n / block_size)`` blocks of its table (n its
    scheduled tokens), the rest are allocated; and a leaver's freed list holds only the
    blocks no table holds any more (their count reached 0), each under the last of the
    leavers to give it back in the tick's release order: the aborted (sorted by
    ``abort_key``, a request id's (arrival, id), when given), the preempted in order, the
    finished in their order in ``scheduled`` (running order)."""
    tables = entry["blocks"]
    if not (isinstance(tables, dict) and all(type(k) is int and isinstance(v, (list, tuple)) for k, v in tables.items())
            and all(isinstance(entry.get(key), (list, tuple)) for key in ("scheduled", "aborted", "preempted", "finished"))):
        return entry  # not readable: entry_problem names what is missing
    if config is not None and config.prefix_caching:
        return _from_cached_tables(entry, tables, held, config.block_size, abort_key)
    derived = {key: value for key, value in entry.items() if key != "blocks"}
    allocated = []
    for pair in entry["scheduled"]:
        request_id = pair[0] if isinstance(pair, (list, tuple)) and pair else None
        new = [b for b in tables.get(request_id, ()) if b not in held.get(request_id, ())]
        if new:
            allocated.append([request_id, new])
    freed, leaving = [], set()
    for key in ("aborted", "preempted"):
        for request_id in entry[key]:
            leaving.add(request_id)
            given = [b for b in held.get(request_id, ()) if b not in tables.get(request_id, ())]
            if given:  # what its table still shows, it kept: a leak the oracle reports
                freed.append([request_id, given])
    for request_id in entry["finished"]:
        leaving.add(request_id)
        if tables.get(request_id):
            freed.append([request_id, list(tables[request_id])])
    for request_id, blocks in held.items():
        lost = [b for b in blocks if b not in tables.get(request_id, ())]
        if request_id not in leaving and lost:
            freed.append([request_id, lost])
    derived["allocated"], derived["freed"] = allocated, freed
    derived["blocks"] = {request_id: list(table) for request_id, table in tables.items()}  # every table is judged too
    return derived


def _from_cached_tables(entry, tables: dict, held: dict, block_size: int, abort_key=None) -> dict:
    """``from_block_tables`` with prefix caching on (see there)."""
    derived = {key: value for key, value in entry.items() if key != "blocks"}
    allocated, hits = [], []
    for pair in entry["scheduled"]:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and type(pair[1]) is int):
            continue
        request_id, n = pair
        table = list(tables.get(request_id, ()))
        if request_id in held:
            new = [b for b in table if b not in held[request_id]]
        else:  # admitted in this tick: its cached prefix, then its new blocks
            cut = max(0, len(table) - -(-n // block_size))
            if cut:
                hits.append([request_id, table[:cut]])
            new = table[cut:]
        if new:
            allocated.append([request_id, new])
    # the tick's release order (docs/serving.md): aborts by (arrival, id) when ``abort_key`` gives it, victims as
    # preempted, finishers in running order (their order in ``scheduled``), whatever the order of ``finished``
    aborted = list(entry["aborted"])
    if abort_key is not None and all(type(i) is int for i in aborted):
        aborted.sort(key=abort_key)
    early = aborted + list(entry["preempted"])
    running = {pair[0]: k for k, pair in enumerate(entry["scheduled"]) if isinstance(pair, (list, tuple)) and pair}
    late = sorted(entry["finished"], key=lambda i: running.get(i, len(running)))
    gone_ids = set(early) | set(late)
    freed = []
    # the aborted and preempted give back before any block is taken: a block is freed if no one else held it then
    held_then = {b for i, table in held.items() if i not in early for b in table}
    given = {i: [b for b in held.get(i, ()) if b not in tables.get(i, ()) and b not in held_then] for i in early}
    freed += _last_givers(early, given)
    # the finished give back at the end of the tick: a block is freed if no table that stays shows it
    kept = {b for i, table in tables.items() if i not in gone_ids for b in table}
    kept |= {b for i, table in held.items() if i not in gone_ids and i not in tables for b in table}
    given = {i: [b for b in tables.get(i, ()) if b not in kept] for i in late}
    freed += _last_givers(late, given)
    for request_id, blocks in held.items():
        lost = [b for b in blocks if b not in tables.get(request_id, ())]
        if request_id not in gone_ids and lost:
            freed.append([request_id, lost])
    derived["allocated"], derived["freed"], derived["hits"] = allocated, freed, hits
    derived["blocks"] = {request_id: list(table) for request_id, table in tables.items()}  # every table is judged too
    return derived


def _last_givers(order: list, given: dict) -> list:
    """[id, blocks] per request of ``order``: each block under the last request that gives it back (its count reaches
    0 by that release), in table order."""
    last = {}
    for request_id in order:
        for block in given.get(request_id, ()):
            last[block] = request_id
    out = []
    for request_id in order:
        blocks = [b for b in given.get(request_id, ()) if last.get(b) == request_id]
        if blocks:
            out.append([request_id, blocks])
    return out


def _client_copy(request: dict) -> dict:
    return {key: copy.deepcopy(value) for key, value in request.items() if key != "abort"}


def drive(engine, requests, config) -> dict:
    """Run ``requests`` through the online serving ``engine`` under ``config`` and return the contract's result."""
    parsed, parsed_config = serving.validate(requests, config)
    by_id = {request["id"]: request for request in requests}
    order = sorted(parsed, key=serving.fcfs_key)
    shadow = ServingShadow(parsed_config)
    has_view = callable(getattr(engine, "view", None))
    trace, view_violations = [], []
    seen_views: set[str] = set()
    added, tick, idle = 0, 0, 0
    stopped = None
    while True:
        if not shadow.live:
            if added == len(order):
                break
            tick = max(tick, order[added].arrival)  # the idle gap: no step
        while added < len(order) and order[added].arrival <= tick:
            request = order[added]
            _call(f"add_request({_client_copy(by_id[request.id])!r})", tick, engine.add_request,
                  _client_copy(by_id[request.id]))
            shadow.add(request._replace(abort=None), copy.deepcopy(by_id[request.id]))
            added += 1
        for request_id in sorted(shadow.live, key=lambda i: serving.fcfs_key(shadow.rows[i].request)):
            abort = shadow.rows[request_id].caller.get("abort")
            if abort is not None and abort <= tick and shadow.rows[request_id].request.abort is None:
                _call(f"abort({request_id!r})", tick, engine.abort, request_id)
                shadow.set_abort(request_id, tick)
        entry = _call("step()", tick, engine.step)
        if isinstance(entry, dict) and "blocks" in entry and "allocated" not in entry and "freed" not in entry:
            entry = from_block_tables(entry, shadow.held(), parsed_config,
                                      lambda i: serving.fcfs_key(shadow.rows[i].request) if i in shadow.rows else (0, i))
        if entry is not None and entry_problem(entry) is not None:
            trace.append(entry)  # as returned: the oracle names what is wrong with it
            break
        if entry is None or is_idle(entry):
            idle += 1
            shadow.clock = tick + 1
        else:
            idle = 0
            trace.append(shadow.apply(tick, entry))
            stopped = _first_problem(shadow)
            if stopped is not None:
                break
        if has_view:
            for invariant, message, at in shadow.view_problems(_call("view()", tick, engine.view), tick):
                if invariant not in seen_views:
                    seen_views.add(invariant)
                    view_violations.append({"invariant": invariant, "message": message, "tick": at})
        if idle >= IDLE_LIMIT and shadow.live:
            break
        tick += 1
    result = shadow.result(trace)
    if view_violations:
        result["view_violations"] = view_violations
    if stopped is not None:
        result["stopped"] = stopped
    return result


def drive_chapter(engine, jobs, slots, continuous) -> dict:
    """Run ``jobs`` through the online chapter ``engine`` (``submit``, ``step``) and return the contract's result."""
    parsed = spec.validate(jobs, slots, continuous)
    by_id = {job["id"]: job for job in jobs}
    order = sorted(parsed, key=spec.fifo_key)
    shadow = ChapterShadow(slots, continuous)
    has_view = callable(getattr(engine, "view", None))
    trace, view_violations = [], []
    seen_views: set[str] = set()
    added, tick, idle = 0, 0, 0
    stopped = None
    while True:
        if not shadow.live:
            if added == len(order):
                break
            tick = max(tick, order[added].arrival)
        while added < len(order) and order[added].arrival <= tick:
            job = order[added]
            _call(f"submit({by_id[job.id]!r})", tick, engine.submit, copy.deepcopy(by_id[job.id]))
            shadow.add(job)
            added += 1
        served = _call("step()", tick, engine.step)
        if not isinstance(served, (list, tuple)) or not all(type(i) is int for i in served):
            trace.append({"tick": tick, "served": served})  # as returned: the oracle names what is wrong
            break
        if served:
            idle = 0
            shadow.apply(tick, list(served))
            trace.append({"tick": tick, "served": list(served)})
            stopped = _first_problem(shadow)
            if stopped is not None:
                break
        else:
            idle += 1
            shadow.clock = tick + 1
        if has_view:
            for invariant, message, at in shadow.view_problems(_call("view()", tick, engine.view), tick):
                if invariant not in seen_views:
                    seen_views.add(invariant)
                    view_violations.append({"invariant": invariant, "message": message, "tick": at})
        if idle >= IDLE_LIMIT and shadow.live:
            break
        tick += 1
    state = shadow.state()
    makespan = max((done.finish for done in state.done), default=0)
    result = {
        "makespan_ticks": makespan,
        "busy_slots": state.busy,
        "utilization": utilization(state.busy, slots, makespan),
        "completed": [completion_record(d) for d in sorted(state.done, key=lambda d: d.job.id)],
        "trace": trace,
    }
    if view_violations:
        result["view_violations"] = view_violations
    if stopped is not None:
        result["stopped"] = stopped
    return result


# -- what the sandbox child runs (proofs.sandbox.TargetProcess's ``adapter``) ---------------


def serving_call(make):
    """The call the sandbox makes of a serving factory: ``drive(make(config), requests, config)``."""

    def call(requests, config):
        serving.validate(requests, config)
        return drive(_call("make(config)", 0, make, copy.deepcopy(config)), requests, config)

    return call


def chapter_call(make):
    """The call the sandbox makes of a chapter factory: ``drive_chapter(make(slots, continuous), ...)``."""

    def call(jobs, slots, continuous):
        spec.validate(jobs, slots, continuous)
        return drive_chapter(_call("make(slots, continuous)", 0, make, slots, continuous), jobs, slots, continuous)

    return call


NO_VIEW = "<no view()>"


def session(make):
    """One engine kept in the child across messages, for the stateful test: ``(op, *args) -> answer``.

    Ops: ``("make", *factory args)``; ``("add", request)`` (add_request, or submit for the
    chapter's model); ``("abort", id)``; ``("step",)`` answers ``(step's return, view() or NO_VIEW)``."""
    box = {}

    def call(op, *args):
        if op == "make":
            box["engine"] = make(*args)
            return None
        engine = box["engine"]
        if op == "add":
            add = getattr(engine, "add_request", None) or engine.submit
            return add(*args)
        if op == "abort":
            return engine.abort(*args)
        if op == "step":
            answer = engine.step()
            view = engine.view() if callable(getattr(engine, "view", None)) else NO_VIEW
            return answer, view
        raise ValueError(f"op={op!r}: expected make, add, abort or step")

    return call
