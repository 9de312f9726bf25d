"""Reading any implementation's result: the ``well_typed`` check.

``observe`` never raises on a malformed result: whatever the result is, it returns
either an Observation (the result has the contract's shape) or the ``well_typed``
Violation that says what is wrong with it.  It runs in time linear in the result, the
ids of a trace entry type-checked at once (one pass of ``map(type, ...)``); the
services each job got are the replay's to count (``spec.result_checks``).
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Any, NamedTuple

from spec.domain import Job
from spec.registry import Findings, Violation, short, type_error

RESULT_KEYS = ("makespan_ticks", "busy_slots", "utilization", "completed", "trace")
COMPLETED_KEYS = ("id", "arrival", "tokens", "start", "finish", "wait", "turnaround")


class Observation(NamedTuple):
    """A well-typed result, with the input it answers and the services it claims."""

    jobs: tuple[Job, ...]  # input order
    slots: int
    continuous: bool
    result: dict
    completed: list  # the result's `completed` entries, each a dict with int fields
    ticks: list  # each trace entry's tick, in the result's order
    served: list  # each trace entry's served ids (as a list), in the result's order
    findings: Findings = Findings({})  # invariant -> its earliest Violation, once the trace is replayed (spec.result_checks)

    @property
    def by_id(self) -> dict:
        return {job.id: job for job in self.jobs}


_short = short
_type_error = type_error


def observe(jobs: tuple[Job, ...], slots: int, continuous: bool, result: Any) -> Observation | Violation:
    """Check the result's shape and collect its services; a malformed result gives a Violation."""
    if not isinstance(result, dict):
        return _type_error("result", result, "a dict with keys " + ", ".join(RESULT_KEYS))
    for key in RESULT_KEYS:
        if key not in result:
            return Violation("well_typed", f"result: missing key {key!r}", expected=key)
    for key in ("makespan_ticks", "busy_slots"):
        if type(result[key]) is not int:
            return _type_error(f"result[{key!r}]", result[key], "an int")
    if type(result["utilization"]) is not float:
        return _type_error("result['utilization']", result["utilization"], "a float")

    completed = result["completed"]
    if not isinstance(completed, (list, tuple)):
        return _type_error("result['completed']", completed, "a list of dicts")
    if not _plain_records(completed):
        for index, entry in enumerate(completed):
            where = f"completed[{index}]"
            if not isinstance(entry, dict):
                return _type_error(where, entry, "a dict with keys " + ", ".join(COMPLETED_KEYS))
            for key in COMPLETED_KEYS:
                if key not in entry:
                    return Violation("well_typed", f"{where}: missing key {key!r}", expected=key)
                if type(entry[key]) is not int:
                    return _type_error(f"{where}[{key!r}]", entry[key], "an int")

    trace = result["trace"]
    if not isinstance(trace, (list, tuple)):
        return _type_error("result['trace']", trace, "a list of {'tick', 'served'} dicts")
    plain = _plain_trace(trace)
    if plain is not None:
        ticks, served = plain
    else:
        ticks, served = [], []
        for index, entry in enumerate(trace):
            if not isinstance(entry, dict) or "tick" not in entry or "served" not in entry:
                return _type_error(f"trace[{index}]", entry, "a dict with keys 'tick' and 'served'")
            tick, ids = entry["tick"], entry["served"]
            if type(tick) is not int:
                return _type_error(f"trace[{index}]['tick']", tick, "an int")
            if not isinstance(ids, (list, tuple)) or not _INT_ONLY.issuperset(map(type, ids)):
                return _type_error(f"trace[{index}]['served']", ids, "a list of int ids")
            ticks.append(tick)
            served.append(ids if type(ids) is list else list(ids))
    return Observation(tuple(jobs), slots, continuous, result, list(completed), ticks, served)


# The common case read in bulk, each pass over the values in C: every record or entry
# exactly a dict, every field or id exactly an int, every served list exactly a list.
# Anything else is read entry by entry above, which names the first malformed part.
_INT_ONLY = frozenset((int,))
_DICT_ONLY = frozenset((dict,))
_LIST_ONLY = frozenset((list,))


def _plain_records(completed) -> bool:
    """True when every record is a dict with every field of COMPLETED_KEYS an int."""
    if not _DICT_ONLY.issuperset(map(type, completed)):
        return False
    try:
        return all(_INT_ONLY.issuperset(map(type, map(itemgetter(key), completed))) for key in COMPLETED_KEYS)
    except KeyError:
        return False


def _plain_trace(trace) -> tuple[list, list] | None:
    """(ticks, served lists) when every entry is a dict with an int tick and a list of int ids, else None."""
    if not _DICT_ONLY.issuperset(map(type, trace)):
        return None
    try:
        ticks = list(map(itemgetter("tick"), trace))
        served = list(map(itemgetter("served"), trace))
    except KeyError:
        return None
    plain = (
        _INT_ONLY.issuperset(map(type, ticks))
        and _LIST_ONLY.issuperset(map(type, served))
        and _INT_ONLY.issuperset(map(type, chain.from_iterable(served)))
    )
    return (ticks, served) if plain else None
