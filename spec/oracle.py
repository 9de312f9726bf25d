"""The oracle: ``check`` judges any implementation's result for one valid call.

It runs every invariant of the registry that a result can show, in registry order
(one replay of the trace, ``spec.result_checks.Replay``, finds them all: the same
rules ``schedcheck trace`` applies to a stream), then compares the result with the
reference run.  It never raises on a malformed result (missing keys, wrong types,
nonsense values are Violations of ``well_typed``); it raises ValueError only when the
call itself is outside the domain.  Its cost is linear: O(entries + jobs log jobs)
steps plus O(services) of list comparison.
"""

from __future__ import annotations

import gc
from typing import Any

from spec.domain import validate
from spec.invariants import INVARIANTS
from spec.observation import Violation, observe
from spec.result_checks import replay
from spec.state import run


def check(jobs: Any, slots: Any, continuous: Any, result: Any, reference: dict | None = None) -> list[Violation]:
    """Every invariant the result breaks, each at its earliest tick, in registry order.

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
    try:
        observation = observation._replace(findings=replay(observation))
    except Exception as error:  # a well-shaped result whose values the replay cannot follow
        return [Violation("well_typed", f"the result's trace could not be replayed: {error!r}")]
    violations = [
        found
        for invariant in INVARIANTS
        if invariant.check_result is not None
        for found in [invariant.check_result(observation)]
        if found is not None
    ]
    expected = run(jobs, slots, continuous) if reference is None else reference
    difference = first_difference(expected, result)
    if difference is not None:
        violations.append(difference)
    return violations


def first_difference(expected: dict, actual: dict) -> Violation | None:
    """The ``matches_reference`` Violation at the first tick or job where two well-typed results part."""
    for index, (want, got) in enumerate(zip(expected["trace"], actual["trace"])):
        if want["tick"] != got["tick"] or list(want["served"]) != list(got["served"]):
            tick = min(want["tick"], got["tick"])
            return Violation(
                "matches_reference",
                f"trace entry {index}: expected tick {want['tick']} serving {list(want['served'])}, "
                f"got tick {got['tick']} serving {list(got['served'])}",
                tick=tick,
                expected=want,
                actual=got,
            )
    if len(expected["trace"]) != len(actual["trace"]):
        longer = max(expected["trace"], actual["trace"], key=len)
        first_extra = longer[min(len(expected["trace"]), len(actual["trace"]))]
        return Violation(
            "matches_reference",
            f"the trace has {len(actual['trace'])} served ticks, expected {len(expected['trace'])}",
            tick=first_extra["tick"],
            expected=len(expected["trace"]),
            actual=len(actual["trace"]),
        )
    for want, got in zip(expected["completed"], actual["completed"]):
        if want != {key: got.get(key) for key in want}:
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
