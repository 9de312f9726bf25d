"""The oracle: ``check`` judges any implementation's result for one valid call.

It runs every invariant of the registry that a result can show (one replay of the
trace, ``spec.result_checks.Replay``, finds them all: the same rules ``schedcheck
trace`` applies to a stream), then compares the result with the reference run, and
lists what it found root cause first (``spec.registry.root_cause_first``: by family,
safety before policy; within one, in the order they break in the replay of the trace,
those found during its entries by tick, then those only its end shows, registry order
breaking ties; the reference's difference last), as ``schedcheck trace`` chooses.  It never raises on a malformed result (missing keys, wrong types,
nonsense values are Violations of ``well_typed``); it raises ValueError only when the
call itself is outside the domain.  Its cost is linear: O(entries + jobs log jobs)
steps plus O(services) of list comparison.
"""

from __future__ import annotations

import gc
from operator import itemgetter
from typing import Any

from spec.domain import fifo_key, validate
from spec.invariants import INVARIANTS
from spec.metrics import completion_record, utilization
from spec.observation import COMPLETED_KEYS, Observation, Violation, observe
from spec.registry import root_cause_first
from spec.result_checks import replay
from spec.state import Completion, stretches


def check(jobs: Any, slots: Any, continuous: Any, result: Any, reference: dict | None = None) -> list[Violation]:
    """Every invariant the result breaks, each at its earliest tick, root cause first (``root_cause_first``).

    ``reference`` may pass in ``spec.run(jobs, slots, continuous)`` when the caller has it.
    """
    parsed = validate(jobs, slots, continuous)
    collecting = gc.isenabled()
    gc.disable()  # the reference is a container per tick, none in a cycle: no collector passes over them
    try:
        return _judge(parsed, jobs, slots, continuous, result, reference)
    finally:
        if collecting:
            gc.enable()


def _judge(parsed, jobs, slots, continuous, result, reference) -> list[Violation]:
    try:
        observation = observe(parsed, slots, continuous, result)
    except Exception as error:  # a result object may raise from anything it is asked
        return [Violation("well_typed", f"the result could not be read: {error!r}")]
    if isinstance(observation, Violation):
        return [observation]
    ordered = tuple(sorted(parsed, key=fifo_key))  # FIFO order, for the replay and the reference alike
    try:
        observation = observation._replace(findings=replay(observation, ordered))
    except Exception as error:  # a well-shaped result whose values the replay cannot follow
        return [Violation("well_typed", f"the result's trace could not be replayed: {error!r}")]
    violations = [
        found
        for invariant in INVARIANTS
        if invariant.check_result is not None
        for found in [invariant.check_result(observation)]
        if found is not None
    ]
    if reference is None:
        difference = _differs_from_the_run(ordered, slots, continuous, observation)
    else:
        difference = first_difference(reference, result, observation)
    violations = root_cause_first(violations, INVARIANTS, observation.findings.late)
    if difference is not None:
        violations.append(difference)  # outside the replay: after what it found
    return violations


def first_difference(expected: dict, actual: dict, read: Observation | None = None) -> Violation | None:
    """The ``matches_reference`` Violation at the first tick or job where two well-typed results part.

    ``read`` may pass ``actual`` as ``observe`` read it, so that equal traces are
    compared at once (its ticks and served lists are exact lists of ints)."""
    trace = expected["trace"]
    same = (
        read is not None
        and list(map(itemgetter("tick"), trace)) == read.ticks
        and list(map(itemgetter("served"), trace)) == read.served
    )
    if not same:
        for index, (want, got) in enumerate(zip(trace, actual["trace"])):
            if want["tick"] != got["tick"] or list(want["served"]) != list(got["served"]):
                return _entry_differs(index, want, got)
        if len(trace) != len(actual["trace"]):
            longer = max(trace, actual["trace"], key=len)
            first_extra = longer[min(len(trace), len(actual["trace"]))]
            return _length_differs(len(trace), len(actual["trace"]), first_extra["tick"])
    return _records_differ(expected, actual)


def _differs_from_the_run(ordered, slots: int, continuous: bool, obs: Observation) -> Violation | None:
    """``first_difference(spec.run(...), result)``, the reference's trace compared as it is made, never built
    (``ordered``: the jobs in FIFO order)."""
    done: list = []
    ticks, served_lists = obs.ticks, obs.served
    length = len(ticks)
    index = busy = makespan = 0
    reference = stretches(ordered, slots, continuous, done)
    for first, until, served in reference:
        busy += len(served) * (until - first)
        makespan = until
        end = index + until - first
        if end <= length and ticks[index:end] == list(range(first, until)) and served_lists[index:end] == [served] * (end - index):
            index = end
            continue
        for tick in range(first, until):  # the stretch differs: find the first entry that does
            if index == length:  # the result's trace ends first: how long is the reference's?
                entries = index + until - tick + sum(later - start for start, later, _ in reference)
                return _length_differs(entries, length, tick)
            if ticks[index] != tick or served_lists[index] != served:
                return _entry_differs(index, {"tick": tick, "served": list(served)}, obs.result["trace"][index])
            index += 1
    if index != length:
        return _length_differs(index, length, ticks[index])
    done.sort(key=_by_id)
    expected = {
        "makespan_ticks": makespan,
        "busy_slots": busy,
        "utilization": utilization(busy, slots, makespan),
        "completed": done,  # completion_record(d) of each, built only for a message (_row, _record)
    }
    return _records_differ(expected, obs.result)


def _entry_differs(index: int, want: dict, got: dict) -> Violation:
    return Violation(
        "matches_reference",
        f"trace entry {index}: expected tick {want['tick']} serving {list(want['served'])}, "
        f"got tick {got['tick']} serving {list(got['served'])}",
        tick=min(want["tick"], got["tick"]),
        expected=want,
        actual=got,
    )


def _length_differs(expected: int, actual: int, tick: int) -> Violation:
    return Violation(
        "matches_reference",
        f"the trace has {actual} served ticks, expected {expected}",
        tick=tick,
        expected=expected,
        actual=actual,
    )


def _by_id(done: Completion) -> int:
    return done.job.id


def _row(done: Completion) -> tuple:
    """``completion_record(done)``'s values, in COMPLETED_KEYS order."""
    job = done.job
    return job.id, job.arrival, job.tokens, done.start, done.finish, done.start - job.arrival, done.finish - job.arrival


_RECORD_ROW = itemgetter(*COMPLETED_KEYS)


def _records_differ(expected: dict, actual: dict) -> Violation | None:
    """The first of the records and totals where ``actual`` parts from ``expected``, whose ``completed``
    holds record dicts or Completions (a record is then built only when it differs)."""
    for want, got in zip(expected["completed"], actual["completed"]):
        if type(want) is Completion:
            try:
                if _row(want) == _RECORD_ROW(got):  # a well-typed record: every field an int, so this is equality
                    continue
            except KeyError:
                pass
            want = completion_record(want)
        if want != got and want != {key: got.get(key) for key in want}:
            return Violation(
                "matches_reference",
                f"job {want['id']}: expected {want}, got {got}",
                job=want["id"],
                expected=want,
                actual=got,
            )
    for key in ("makespan_ticks", "busy_slots", "utilization"):
        if expected[key] != actual[key]:
            return Violation(
                "matches_reference", f"{key}: expected {expected[key]!r}, got {actual[key]!r}",
                expected=expected[key], actual=actual[key],
            )
    if len(expected["completed"]) != len(actual["completed"]):
        return Violation(
            "matches_reference",
            f"completed has {len(actual['completed'])} entries, expected {len(expected['completed'])}",
        )
    return None
