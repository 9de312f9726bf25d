"""The serving oracle: ``check`` judges any implementation's ``serve`` result for one valid call.

It runs every invariant of the serving registry that a result can show, in registry
order (one replay of the trace finds them all), then compares the result with the
reference run, block ids excepted.  ``policy="none"`` judges an engine with another
policy: the policy family and ``matches_reference`` are skipped, safety and metrics
remain.  It never raises on a malformed result (that is a ``well_typed`` Violation);
it raises ValueError only when the call itself is outside the domain, or for an
unknown policy.
"""

from __future__ import annotations

import math
from typing import Any

from spec.registry import Violation
from spec.serving.domain import validate
from spec.serving.invariants import INVARIANTS
from spec.serving.metrics import ENTRY_KEYS, TOTAL_KEYS
from spec.serving.observation import observe
from spec.serving.result_checks import replay
from spec.serving.state import run

POLICIES = ("fcfs", "none")


def check(requests: Any, config: Any, result: Any, reference: dict | None = None, policy: str = "fcfs") -> list[Violation]:
    """Every invariant the result breaks, each at its earliest tick, in registry order.

    ``reference`` may pass in ``spec.serving.run(requests, config)`` when the caller has it."""
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r}: expected one of {', '.join(POLICIES)}")
    parsed, parsed_config = validate(requests, config)
    try:
        observation = observe(parsed, parsed_config, result, policy)
    except Exception as error:  # a result object may raise from anything it is asked
        return [Violation("well_typed", f"the result could not be read: {error!r}")]
    if isinstance(observation, Violation):
        return [observation]
    try:
        observation = observation._replace(findings=replay(observation))
    except Exception as error:  # a well-shaped result whose values the replay cannot follow
        return [Violation("well_typed", f"the result's trace could not be replayed: {error!r}")]
    violations = []
    for invariant in INVARIANTS:
        if policy == "none" and (invariant.family == "policy" or invariant.name == "matches_reference"):
            continue
        if invariant.name == "matches_reference":
            expected = run(requests, config) if reference is None else reference
            try:
                found = first_difference(expected, result, observation.trace)
            except Exception as error:  # an odd but well-typed value that cannot be compared
                found = Violation("matches_reference", f"the result could not be compared: {error!r}")
        elif invariant.check_result is not None:
            found = invariant.check_result(observation)
        else:
            found = None
        if found is not None:
            violations.append(found)
    return violations


def _plain(entry: dict) -> dict:
    """A trace entry as plain lists, its block lists replaced by their lengths."""
    out = {key: [list(x) if isinstance(x, (list, tuple)) else x for x in entry[key]] for key in ENTRY_KEYS[1:]}
    out["tick"] = entry["tick"]
    out["freed"] = [[i, len(blocks)] for i, blocks in entry["freed"]]
    out["allocated"] = [[i, len(blocks)] for i, blocks in entry["allocated"]]
    return out


def _same_entry(want: dict, tick) -> bool:
    """True when the reference's entry ``want`` equals the Tick that ``observe`` read, block ids excepted.

    A Tick's lists are exact lists of ints (observe's work), so these comparisons are
    list equality and nothing a result's own types could override; equal here means
    ``_plain`` of both entries is equal."""
    return (
        want["tick"] == tick.tick
        and want["scheduled"] == tick.scheduled
        and want["preempted"] == tick.preempted
        and want["aborted"] == tick.aborted
        and want["finished"] == tick.finished
        and [(i, len(blocks)) for i, blocks in want["freed"]] == [(i, len(blocks)) for i, blocks in tick.freed]
        and [(i, len(blocks)) for i, blocks in want["allocated"]] == [(i, len(blocks)) for i, blocks in tick.allocated]
    )


def first_difference(expected: dict, actual: dict, read: list | None = None) -> Violation | None:
    """The ``matches_reference`` Violation at the first tick or request where two well-typed results part.

    ``read`` may pass ``actual``'s trace as ``observe`` read it (``Observation.trace``),
    so that an entry equal to the reference's is passed over without being rebuilt."""
    for index, (want, got) in enumerate(zip(expected["trace"], actual["trace"])):
        if read is not None and _same_entry(want, read[index]):
            continue
        want_plain, got_plain = _plain(want), _plain(got)
        if want_plain != got_plain:
            parts = [key for key in ENTRY_KEYS if want_plain[key] != got_plain[key]]
            ids = sorted({p[0] if isinstance(p, list) else p for key in parts[1:] for p in want_plain[key] + got_plain[key]})
            return Violation(
                "matches_reference",
                f"trace entry {index} (tick {got['tick']}) differs from the reference in {', '.join(parts)}: "
                f"expected {want_plain[parts[0]]}, got {got_plain[parts[0]]}",
                tick=min(want["tick"], got["tick"]),
                job=ids[0] if ids else None,
                expected=want_plain,
                actual=got_plain,
                ids=tuple(ids),
            )
    if len(expected["trace"]) != len(actual["trace"]):
        longer = max(expected["trace"], actual["trace"], key=len)
        first_extra = longer[min(len(expected["trace"]), len(actual["trace"]))]
        return Violation(
            "matches_reference",
            f"the trace has {len(actual['trace'])} entries, the reference {len(expected['trace'])}",
            tick=first_extra["tick"],
            expected=len(expected["trace"]),
            actual=len(actual["trace"]),
        )
    for want, got in zip(expected["requests"], actual["requests"]):
        if want != {key: got.get(key) for key in want} or ("abort" in got) != ("abort" in want):
            return Violation(
                "matches_reference",
                f"request {want['id']}: expected {want}, got {dict(got)}",
                job=want["id"],
                expected=want,
                actual=dict(got),
                ids=(want["id"],),
            )
    if len(expected["requests"]) != len(actual["requests"]):
        return Violation(
            "matches_reference",
            f"requests has {len(actual['requests'])} records, the reference {len(expected['requests'])}",
        )
    for key in TOTAL_KEYS:
        want, got = expected[key], actual[key]
        same = math.isclose(want, got, rel_tol=1e-9, abs_tol=0.0) if key == "token_utilization" else want == got
        if not same:
            return Violation("matches_reference", f"{key}: expected {want!r}, got {got!r}", expected=want, actual=got)
    return None


__all__ = ["POLICIES", "check", "first_difference"]
