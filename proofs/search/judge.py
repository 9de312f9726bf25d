"""Judging one call of a target: from what it did to the invariants it broke.

Every engine goes through here, so a counterexample means the same thing whichever
engine found it.  The claims are the registry's (``spec.INVARIANTS``); what a call
can show beyond a result is mapped onto them:

- no result in time, an exception other than ValueError on a valid call, or the
  process dying: ``termination`` (every valid call ends by returning a result);
- ValueError on a valid call, or anything but ValueError on an invalid one: ``validation``;
- the input modified: ``input_unchanged``;
- a different result for the same call: ``deterministic``;
- a result: whatever ``spec.check`` finds.
"""

from __future__ import annotations

from typing import NamedTuple

import spec
from proofs.sandbox import Outcome, TargetProcess
from spec.observation import COMPLETED_KEYS, RESULT_KEYS

ORDER = {name: index for index, name in enumerate(spec.NAMES)}


class Finding(NamedTuple):
    """A broken invariant on one call, with what the harness saw."""

    invariant: str
    message: str
    violation: spec.Violation | None = None  # from spec.check, when there is a result
    result: object = None  # the target's result, when it returned one


def _first(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: ORDER.get(f.invariant, -1))


def judge_valid_call(outcome: Outcome, jobs, slots, continuous, reference: dict | None = None) -> list[Finding]:
    """The invariants a call inside the domain broke, in registry order ([] if none)."""
    if outcome.kind == "timeout":
        return [Finding("termination", f"the call {outcome.error}")]
    if outcome.kind == "died":
        return [Finding("termination", outcome.error)]
    if outcome.kind == "raised":
        if outcome.error_type == "ValueError":
            return [Finding("validation", f"a valid call raised {outcome.error}")]
        return [Finding("termination", f"a valid call raised {outcome.error} instead of returning a result")]
    findings = []
    if outcome.mutated:
        findings.append(Finding("input_unchanged", "the call modified the caller's jobs: " + describe_change(jobs, outcome.jobs_after)))
    if outcome.kind == "unpicklable":
        findings.append(Finding("well_typed", f"the result is not plain data: {outcome.error}"))
        return _first(findings)
    for violation in spec.check(jobs, slots, continuous, outcome.result, reference):
        findings.append(Finding(violation.invariant, violation.message, violation, outcome.result))
    return _first(findings)


def describe_change(before, after) -> str:
    """How a call changed its jobs: the first job that differs, before and after (or what else changed)."""
    if after is None:
        return "they cannot be shown as the call left them"
    if type(after) is not type(before):
        return f"the {type(before).__name__} became a {type(after).__name__}"
    if len(after) != len(before):
        return f"it had {len(before)} jobs and has {len(after)} after the call"
    for index, (old, new) in enumerate(zip(before, after)):
        if old != new or type(old) is not type(new):
            line = f"jobs[{index}] was {_short(old)}, after the call {_short(new)}"
            ids = [job.get("id") if isinstance(job, dict) else None for job in before]
            new_ids = [job.get("id") if isinstance(job, dict) else None for job in after]
            if sorted(map(repr, ids)) == sorted(map(repr, new_ids)) and ids != new_ids:
                line += f" (the jobs were reordered: ids {_short(ids)} became {_short(new_ids)})"
            return line
    return "a value changed in place (its repr did not)"


def _short(value, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def judge_invalid_call(outcome: Outcome, rule: str) -> list[Finding]:
    """The invariants a call outside the domain broke: it must raise ValueError and nothing else."""
    if outcome.kind in ("timeout", "died"):
        return [Finding("termination", f"an invalid call ({rule}): {outcome.error}")]
    if outcome.kind == "raised":
        if outcome.error_type == "ValueError":
            return []
        return [Finding("validation", f"an invalid call ({rule}) raised {outcome.error}, expected ValueError")]
    return [Finding("validation", f"an invalid call ({rule}) returned a result, expected ValueError")]


def contract_part(result):
    """The part of a result the contract fixes: its keys, each ``completed`` entry's and each
    trace entry's (extra keys are allowed and may hold anything, so no check compares them)."""
    if not isinstance(result, dict) or any(key not in result for key in RESULT_KEYS):
        return result  # not the contract's shape: well_typed says so, compare it whole
    part = {key: result[key] for key in RESULT_KEYS}
    completed, trace = part["completed"], part["trace"]
    if isinstance(completed, (list, tuple)):
        part["completed"] = [
            {key: entry[key] for key in COMPLETED_KEYS if key in entry} if isinstance(entry, dict) else entry
            for entry in completed
        ]
    if isinstance(trace, (list, tuple)):
        part["trace"] = [
            {key: entry[key] for key in ("tick", "served") if key in entry} if isinstance(entry, dict) else entry
            for entry in trace
        ]
    return part


def _same(first: Outcome, second: Outcome) -> bool:
    return (first.kind, contract_part(first.result), first.error) == (second.kind, contract_part(second.result), second.error)


def rejected_variants(call) -> list[tuple]:
    """Invalid calls that a validator rejects only after reading every job of ``call``."""
    jobs, slots, continuous = call
    late_zero = list(jobs) + [{"id": _fresh_id(jobs), "arrival": 0, "tokens": 0}]
    repeated = list(jobs) + [dict(jobs[0])] if jobs else [{"id": 0, "arrival": 0, "tokens": 0}]
    return [(late_zero, slots, continuous), (repeated, slots, continuous)]


def _fresh_id(jobs) -> int:
    return max((job["id"] for job in jobs), default=0) + 1


def judge_repeated_call(process: TargetProcess, call) -> list[Finding]:
    """The call in a fresh process, then in another fresh process after other calls (the
    other policy, one more slot, rejected inputs), then once more at once: all must agree."""
    jobs, slots, continuous = call
    process.close()  # nothing came before: the next call starts a fresh process
    first = process.call(*call)
    broken = judge_valid_call(first, *call)
    if any(f.invariant == "termination" for f in broken):
        return broken
    process.close()
    for other in [(jobs, slots, not continuous), (jobs, slots + 1, continuous)] + rejected_variants(call):
        process.call(*other)
    again = process.call(*call)
    if not _same(first, again):
        return [Finding(
            "deterministic",
            "after calls with the other policy, one more slot and rejected inputs, "
            "this call gave a different result than in a fresh process",
            result=again.result,
        )]
    if not _same(again, process.call(*call)):
        return [Finding("deterministic", "the same call, made twice in a row, gave two different results")]
    return []
