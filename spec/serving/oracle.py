"""The serving oracle: ``check`` judges any implementation's ``serve`` result for one valid call.

It runs every invariant of the serving registry that a result can show (one replay of
the trace finds them all), then compares the result with the reference run, block ids
excepted (with prefix caching, up to the renaming fixed by the order the engine first
takes each id), and lists what it found root cause first (``spec.registry.root_cause_first``:
by family, safety before policy; within one, those found during the trace's entries by
tick, then those only its end shows, registry order breaking ties; the reference's
difference last: a leak at an abort's tick before the starvation it causes later).  The
order of ids within an entry's ``aborted`` or ``finished`` carries no rule: they are
compared as sets.  ``policy="none"`` judges an engine with another
policy: the policy family and ``matches_reference`` are skipped, safety and metrics
remain.  It never raises on a malformed result (that is a ``well_typed`` Violation);
it raises ValueError only when the call itself is outside the domain, or for an
unknown policy.
"""

from __future__ import annotations

import math
from typing import Any

from spec.registry import Violation, root_cause_first
from spec.serving.domain import validate
from spec.serving.invariants import INVARIANTS
from spec.serving.metrics import CACHE_ENTRY_KEY, CACHE_RECORD_KEY, CACHE_TOTAL_KEY, ENTRY_KEYS, TOTAL_KEYS
from spec.serving.observation import observe
from spec.serving.result_checks import replay
from spec.serving.state import run

POLICIES = ("fcfs", "none")


def check(requests: Any, config: Any, result: Any, reference: dict | None = None, policy: str = "fcfs") -> list[Violation]:
    """Every invariant the result breaks, each at its earliest tick, root cause first (``root_cause_first``).

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
                found = first_difference(expected, result, observation.trace, bool(parsed_config.prefix_caching))
            except Exception as error:  # an odd but well-typed value that cannot be compared
                found = Violation("matches_reference", f"the result could not be compared: {error!r}")
        elif invariant.check_result is not None:
            found = invariant.check_result(observation)
        else:
            found = None
        if found is not None:
            violations.append(found)
    outside = [v for v in violations if v.invariant == "matches_reference"]  # not the replay's: after what it found
    replayed = [v for v in violations if v.invariant != "matches_reference"]
    return root_cause_first(replayed, INVARIANTS, observation.findings.late) + outside


ORDERLESS = ("aborted", "finished")  # lists whose order carries no rule: compared as sets
BLOCK_KEYS = ("freed", "allocated", CACHE_ENTRY_KEY)


def comparable(entry: dict, rename: dict | None = None) -> dict:
    """A trace entry as the reference comparison reads it: plain lists, ``aborted`` and ``finished`` sorted (their
    order carries no rule), ``hits`` present (absent reads as empty), and each block list as its length, or with
    ``rename`` (prefix caching on) as its ids renamed in the order the engine first takes them.  Without prefix
    caching the freed lists of the aborted, and those of the finished, are sorted by request too; with it their
    order is the free queue's, a rule."""
    out = {key: [list(x) if isinstance(x, (list, tuple)) else x for x in entry[key]] for key in ENTRY_KEYS[1:]}
    out["tick"] = entry["tick"]
    if rename is None and len(out["freed"]) > 1:
        preempted = out["preempted"]
        aborted = set(out["aborted"])

        def role(pair):
            if pair[0] in aborted:
                return (0, pair[0])
            return (1, preempted.index(pair[0])) if pair[0] in preempted else (2, pair[0])

        out["freed"] = sorted(out["freed"], key=role)
    for key in ORDERLESS:
        out[key] = sorted(out[key])
    out[CACHE_ENTRY_KEY] = [list(pair) for pair in entry.get(CACHE_ENTRY_KEY, ())]
    for key in BLOCK_KEYS:
        if rename is None:
            out[key] = [[i, len(blocks)] for i, blocks in out[key]]
        else:
            out[key] = [[i, [rename.get(b, b) for b in blocks]] for i, blocks in out[key]]
    return out


_plain = comparable  # the stateful test's name for it (proofs/online/stateful.py)


def shown(entry: dict, key: str) -> list:
    """An entry's list as the user reads it: block lists with their ids, never their lengths."""
    return [[x[0], list(x[1])] if key in BLOCK_KEYS else list(x) if isinstance(x, (list, tuple)) else x
            for x in entry.get(key, ())]


def first_takes(trace) -> dict:
    """The renaming of prefix caching: each block id of ``trace`` to the order in which it first appears, reading each
    entry's ``allocated``, then its ``hits``, then its ``freed`` (as ``spec.serving.replay_cache.CacheBook`` does):
    for a correct engine, the order in which it first takes each id."""
    rename: dict = {}
    for entry in trace:
        for key in ("allocated", CACHE_ENTRY_KEY, "freed"):
            for _, blocks in entry.get(key, ()):
                for block in blocks:
                    rename.setdefault(block, len(rename))
    return rename


def _renamings(expected: dict, actual: dict, caching: bool) -> tuple:
    if not caching:
        return None, None
    return first_takes(expected["trace"]), first_takes(actual["trace"])


def _same_entry(want: dict, tick, caching: bool) -> bool:
    """True when the reference's entry ``want`` equals the Tick that ``observe`` read, block ids excepted.

    A Tick's lists are exact lists of ints (observe's work), so these comparisons are
    list equality and nothing a result's own types could override; equal here means
    ``comparable`` of both entries is equal.  With prefix caching (ids compared up to renaming) it says False."""
    return (
        not caching
        and want["tick"] == tick.tick
        and want["scheduled"] == tick.scheduled
        and want["preempted"] == tick.preempted
        and want["aborted"] == tick.aborted
        and want["finished"] == tick.finished
        and [(i, len(blocks)) for i, blocks in want["freed"]] == [(i, len(blocks)) for i, blocks in tick.freed]
        and [(i, len(blocks)) for i, blocks in want["allocated"]] == [(i, len(blocks)) for i, blocks in tick.allocated]
        and [(i, len(blocks)) for i, blocks in want.get(CACHE_ENTRY_KEY, ())]
        == [(i, len(blocks)) for i, blocks in tick.hits]
    )


def _entry_difference(index: int, want: dict, got: dict, want_plain: dict, got_plain: dict, caching: bool) -> Violation:
    keys = ("tick",) + ENTRY_KEYS[1:] + (CACHE_ENTRY_KEY,)
    parts = [key for key in keys if want_plain[key] != got_plain[key]]
    ids = sorted({p[0] if isinstance(p, list) else p for key in parts[1:] for p in want_plain[key] + got_plain[key]})
    first = parts[0]
    if first == "tick":
        expected, actual = want["tick"], got["tick"]
    else:
        expected, actual = shown(want, first), shown(got, first)
    note = ""
    if first != "tick" and sorted(map(repr, want_plain[first])) == sorted(map(repr, got_plain[first])):
        note = " (the same items in another order: this list's order is a rule)"
    elif first in BLOCK_KEYS:
        note = (" (block ids compared up to the renaming fixed by the order the engine first takes them)" if caching
                else " (block ids may differ: the lists are compared by their lengths)")
    return Violation(
        "matches_reference",
        f"trace entry {index} (tick {got['tick']}) differs from the reference in {', '.join(parts)}: "
        f"expected {expected}, got {actual}{note}",
        tick=min(want["tick"], got["tick"]),
        job=ids[0] if ids else None,
        expected={key: shown(want, key) if key != "tick" else want["tick"] for key in keys},
        actual={key: shown(got, key) if key != "tick" else got["tick"] for key in keys},
        ids=tuple(ids),
    )


def _record_differs(want: dict, got) -> bool:
    for key, value in want.items():
        other = got.get(key, 0 if key == CACHE_RECORD_KEY else None)
        if key == "tokens":
            if not isinstance(other, (list, tuple)) or list(other) != value:
                return True
        elif other != value:
            return True
    return ("abort" in got) != ("abort" in want)


def first_difference(expected: dict, actual: dict, read: list | None = None, caching: bool = False) -> Violation | None:
    """The ``matches_reference`` Violation at the first tick or request where two well-typed results part.

    ``read`` may pass ``actual``'s trace as ``observe`` read it (``Observation.trace``),
    so that an entry equal to the reference's is passed over without being rebuilt.
    ``caching`` (prefix caching on): block ids are compared up to the renaming fixed by
    the order each result first takes them, not by the lengths of the lists."""
    want_names, got_names = _renamings(expected, actual, caching)
    for index, (want, got) in enumerate(zip(expected["trace"], actual["trace"])):
        if read is not None and _same_entry(want, read[index], caching):
            continue
        want_plain, got_plain = comparable(want, want_names), comparable(got, got_names)
        if want_plain != got_plain:
            return _entry_difference(index, want, got, want_plain, got_plain, caching)
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
        if _record_differs(want, got):
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
    totals = TOTAL_KEYS + ((CACHE_TOTAL_KEY,) if CACHE_TOTAL_KEY in expected else ())
    for key in totals:
        want, got = expected[key], actual.get(key, 0)
        same = math.isclose(want, got, rel_tol=1e-9, abs_tol=0.0) if key == "token_utilization" else want == got
        if not same:
            return Violation("matches_reference", f"{key}: expected {want!r}, got {got!r}", expected=want, actual=got)
    return None


__all__ = ["POLICIES", "check", "comparable", "first_difference", "first_takes"]
