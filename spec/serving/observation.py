"""Reading any implementation's serving result: the ``well_typed`` check, then one replay of its trace.

``observe`` never raises on a malformed result: it returns either an Observation (the
result has the contract's shape, and the replay's findings) or the ``well_typed``
Violation that says what is wrong with it.  Lists may be tuples, dicts and lists may
be subclasses, and extra keys are ignored.  It runs in time linear in the result.
Prefix caching's ``hits`` (an entry), ``cached`` (a record) and ``cache_hit_tokens``
(the totals) may be absent: absent reads as empty or 0.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from spec.registry import Findings, Violation, type_error
from spec.serving.domain import Config, Request
from spec.serving.metrics import CACHE_ENTRY_KEY, CACHE_RECORD_KEY, CACHE_TOTAL_KEY, ENTRY_KEYS, RECORD_KEYS, TOTAL_KEYS

RESULT_KEYS = ("trace", "requests") + TOTAL_KEYS
INT_TOTALS = tuple(key for key in TOTAL_KEYS if key != "token_utilization")
_LISTS = (list, tuple)


class Tick(NamedTuple):
    """One trace entry of a well-typed result, its lists as Python lists of ints and (id, ...) pairs."""

    index: int  # its position in the trace
    tick: int
    scheduled: list  # [[id, n]]: exact two-item lists (the caller's own when they are exactly that)
    preempted: list  # [id]
    aborted: list  # [id]
    freed: list  # [(id, [block])]
    allocated: list  # [(id, [block])]
    finished: list  # [id]
    hits: list | tuple = ()  # [(id, [block])]: prefix caching's hits (absent: none)


class Observation(NamedTuple):
    """A well-typed result, the call it answers, and what replaying its trace found."""

    requests: tuple[Request, ...]  # input order
    config: Config
    result: dict
    trace: list  # Tick per entry, in the result's order
    records: list  # the result's `requests` entries (dicts)
    policy: str  # "fcfs" or "none"
    findings: Findings  # invariant name -> its earliest Violation (and which the end found), from spec.serving.result_checks.replay
    cache_hit_tokens: int = 0  # the result's total (absent: 0)

    @property
    def by_id(self) -> dict:
        return {request.id: request for request in self.requests}


def _int(value: Any) -> bool:
    return type(value) is int


def _ids(value: Any, known: set, where: str, key: str) -> list | Violation:
    if type(value) is list and (not value or all(type(item) is int and item in known for item in value)):
        return value  # the common case: an exact list of known int ids
    what = f"{where}[{key!r}]"
    if not isinstance(value, _LISTS):
        return type_error(what, value, "a list of request ids")
    out = []
    for position, item in enumerate(value):
        if not _int(item):
            return type_error(f"{what}[{position}]", item, "an int request id")
        if item not in known:
            return Violation("well_typed", f"{what}[{position}]={item}: not the id of any request", actual=item, job=item)
        out.append(item)
    return out


def _pairs(value: Any, known: set, where: str, key: str) -> list | Violation:
    """[id, n] pairs (key 'scheduled'), or (id, blocks) pairs, blocks a list of int block ids (key 'freed', 'allocated', 'hits')."""
    blocks = key != "scheduled"
    second = "blocks" if blocks else "n"
    if type(value) is list and not value:
        return value
    if not blocks and type(value) is list:  # the common case: exact [int id, int n] lists of known requests, kept as given
        for pair in value:
            if type(pair) is not list or len(pair) != 2:
                break
            request_id, n = pair
            if type(request_id) is not int or type(n) is not int or request_id not in known:
                break
        else:
            return value
    what = f"{where}[{key!r}]"
    if not isinstance(value, _LISTS):
        return type_error(what, value, f"a list of [id, {second}] pairs")
    out = []
    for position, pair in enumerate(value):
        # the common case first: an exact [int id, int] or [int id, [int, ...]] pair of a known request
        if type(pair) is list and len(pair) == 2:
            request_id, other = pair
            if type(request_id) is int and request_id in known:
                if not blocks:
                    if type(other) is int:
                        out.append(pair)
                        continue
                elif type(other) is list and all(type(block) is int for block in other):
                    out.append((request_id, other))
                    continue
        where = f"{what}[{position}]"
        if not isinstance(pair, _LISTS) or len(pair) != 2:
            return type_error(where, pair, f"an [id, {second}] pair")
        request_id, other = pair[0], pair[1]
        if not _int(request_id):
            return type_error(f"{where}[0]", request_id, "an int request id")
        if request_id not in known:
            return Violation(
                "well_typed", f"{where}[0]={request_id}: not the id of any request", actual=request_id, job=request_id
            )
        if second == "n":
            if not _int(other):
                return type_error(f"{where}[1]", other, "an int number of tokens")
            out.append([request_id, other])
        else:
            if not isinstance(other, _LISTS) or not all(_int(block) for block in other):
                return type_error(f"{where}[1]", other, "a list of int block ids")
            out.append((request_id, list(other)))
    return out


def read_entry(index: int, entry: Any, known: set, where: str | None = None) -> Tick | Violation:
    """One trace entry as a Tick, or the ``well_typed`` Violation naming ``where`` (default ``trace[index]``)."""
    where = f"trace[{index}]" if where is None else where
    if type(entry) is not dict or len(entry) != 7 or type(entry.get("tick")) is not int:  # else: the keys are below
        if not isinstance(entry, dict):
            return type_error(where, entry, "a dict with keys " + ", ".join(ENTRY_KEYS))
        for key in ENTRY_KEYS:
            if key not in entry:
                return Violation("well_typed", f"{where}: missing key {key!r}", expected=key)
        if not _int(entry["tick"]):
            return type_error(f"{where}['tick']", entry["tick"], "an int")
    try:
        parts = (
            _pairs(entry["scheduled"], known, where, "scheduled"),
            _ids(entry["preempted"], known, where, "preempted"),
            _ids(entry["aborted"], known, where, "aborted"),
            _pairs(entry["freed"], known, where, "freed"),
            _pairs(entry["allocated"], known, where, "allocated"),
            _ids(entry["finished"], known, where, "finished"),
        )
    except KeyError:  # seven keys, but not the entry's: name the first one missing
        key = next(key for key in ENTRY_KEYS if key not in entry)
        return Violation("well_typed", f"{where}: missing key {key!r}", expected=key)
    for part in parts:
        if isinstance(part, Violation):
            return part
    if CACHE_ENTRY_KEY in entry:
        hits = _pairs(entry[CACHE_ENTRY_KEY], known, where, CACHE_ENTRY_KEY)
        if isinstance(hits, Violation):
            return hits
        return Tick(index, entry["tick"], *parts, hits)
    return Tick(index, entry["tick"], *parts)


def _record(index: int, record: Any) -> Violation | None:
    where = f"requests[{index}]"
    if not isinstance(record, dict):
        return type_error(where, record, "a dict with the request's keys and " + ", ".join(RECORD_KEYS))
    for key in ("id", "arrival", "prompt", "output") + RECORD_KEYS:
        if key not in record:
            return Violation("well_typed", f"result {where}: missing key {key!r}", expected=key)
    for key in ("id", "arrival", "prompt", "output", "generated", "preemptions", "computed"):
        if not _int(record[key]):
            return type_error(f"result {where}[{key!r}]", record[key], "an int")
    for key in ("start", "first_token", "finish", "aborted"):
        if record[key] is not None and not _int(record[key]):
            return type_error(f"result {where}[{key!r}]", record[key], "an int or None")
    if "abort" in record and not _int(record["abort"]):
        return type_error(f"result {where}['abort']", record["abort"], "an int")
    if CACHE_RECORD_KEY in record and not _int(record[CACHE_RECORD_KEY]):
        return type_error(f"result {where}[{CACHE_RECORD_KEY!r}]", record[CACHE_RECORD_KEY], "an int")
    return None


def observe(requests: tuple[Request, ...], config: Config, result: Any, policy: str = "fcfs") -> Observation | Violation:
    """Check the result's shape; a malformed result gives the ``well_typed`` Violation.

    The Observation's ``findings`` are empty: ``spec.serving.result_checks.replay`` fills them."""
    if not isinstance(result, dict):
        return type_error("result", result, "a dict with keys " + ", ".join(RESULT_KEYS))
    for key in RESULT_KEYS:
        if key not in result:
            return Violation("well_typed", f"result: missing key {key!r}", expected=key)
    for key in INT_TOTALS:
        if not _int(result[key]):
            return type_error(f"result[{key!r}]", result[key], "an int")
    if not isinstance(result["token_utilization"], float):
        return type_error("result['token_utilization']", result["token_utilization"], "a float")
    hit_tokens = result.get(CACHE_TOTAL_KEY, 0)
    if not _int(hit_tokens):
        return type_error(f"result[{CACHE_TOTAL_KEY!r}]", hit_tokens, "an int")
    records = result["requests"]
    if not isinstance(records, _LISTS):
        return type_error("result['requests']", records, "a list of request records")
    for index, record in enumerate(records):
        broken = _record(index, record)
        if broken is not None:
            return broken
    trace = result["trace"]
    if not isinstance(trace, _LISTS):
        return type_error("result['trace']", trace, "a list of trace entries")
    known = {request.id for request in requests}
    ticks = []
    for index, entry in enumerate(trace):
        parsed = read_entry(index, entry, known)
        if isinstance(parsed, Violation):
            return parsed
        ticks.append(parsed)
    return Observation(tuple(requests), config, result, ticks, list(records), policy, Findings({}), hit_tokens)
