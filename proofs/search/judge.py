"""Judging one call of a target: from what it did to the invariants it broke.

Every engine goes through here, so a counterexample means the same thing whichever
engine found it.  The claims are the model's registry (``spec.INVARIANTS`` or
``spec.serving.INVARIANTS``, through ``proofs.models``); what a call can show beyond
a result is mapped onto them:

- no result in time, an exception other than ValueError on a valid call, or the
  process dying: ``termination`` (every valid call ends by returning a result);
- ValueError on a valid call, or anything but ValueError on an invalid one: ``validation``;
- the input modified: ``input_unchanged``;
- a different result for the same call: ``deterministic``;
- a result: whatever the model's oracle (``spec.check``, ``spec.serving.check``) finds;
- a failure of the sandbox itself (``harness_error``): no finding at all, but
  ``proofs.sandbox.HarnessError``, which ends the run with exit 2 (the table of
  outcome kinds to verdicts is in proofs.sandbox).
"""

from __future__ import annotations

from typing import NamedTuple

import spec
from proofs import models
from proofs.sandbox import HarnessError, Outcome, TargetProcess


class Finding(NamedTuple):
    """A broken invariant on one call, with what the harness saw."""

    invariant: str
    message: str
    violation: spec.Violation | None = None  # from spec.check, when there is a result
    result: object = None  # the target's result, when it returned one


def _first(findings: list[Finding], model) -> list[Finding]:
    order = {name: index for index, name in enumerate(model.names)}
    return sorted(findings, key=lambda f: order.get(f.invariant, -1))


def judge_valid_call(outcome: Outcome, *call, reference: dict | None = None, model=None) -> list[Finding]:
    """The invariants a call inside the domain broke, in the model's registry order ([] if none)."""
    model = model or models.get()
    _no_harness_error(outcome)
    if outcome.kind == "timed_out":
        return [Finding("termination", f"the call {outcome.error}")]
    if outcome.kind == "died":
        return [Finding("termination", outcome.error)]
    if outcome.kind == "raised":
        if outcome.error_type == "ValueError":
            return [Finding("validation", f"a valid call raised {outcome.error}")]
        return [Finding("termination", f"a valid call raised {outcome.error} instead of returning a result")]
    findings = []
    if outcome.mutated:
        findings.append(Finding("input_unchanged", f"the call modified the caller's {model.parameters[0]}"))
    if not outcome.sendable:
        findings.append(Finding("well_typed", f"the result is not plain data: {outcome.error}"))
        return _first(findings, model)
    for violation in model.check(call, outcome.result, reference):
        findings.append(Finding(violation.invariant, violation.message, violation, outcome.result))
    return _first(findings, model)


def judge_invalid_call(outcome: Outcome, rule: str) -> list[Finding]:
    """The invariants a call outside the domain broke: it must raise ValueError and nothing else."""
    _no_harness_error(outcome)
    if outcome.kind in ("timed_out", "died"):
        return [Finding("termination", f"an invalid call ({rule}): {outcome.error}")]
    if outcome.kind == "raised":
        if outcome.error_type == "ValueError":
            return []
        return [Finding("validation", f"an invalid call ({rule}) raised {outcome.error}, expected ValueError")]
    return [Finding("validation", f"an invalid call ({rule}) returned a result, expected ValueError")]


def _no_harness_error(outcome: Outcome) -> None:
    if outcome.kind == "harness_error":
        raise HarnessError(f"the sandbox failed, not the target: {outcome.error}")


def _same(first: Outcome, second: Outcome) -> bool:
    return (first.kind, first.result, first.error) == (second.kind, second.result, second.error)


def judge_repeated_call(process: TargetProcess, call, model=None) -> list[Finding]:
    """The call in a fresh process, then in another fresh process after other calls (for the
    chapter's model the other policy, one more slot, rejected inputs), then once more at once:
    all must agree."""
    model = model or models.get()
    process.close()  # nothing came before: the next call starts a fresh process
    first = process.call(*call)
    _no_harness_error(first)
    broken = judge_valid_call(first, *call, model=model)
    if any(f.invariant == "termination" for f in broken):
        return broken
    process.close()
    for other in model.calls_between(call):
        process.call(*other)
    again = process.call(*call)
    if not _same(first, again):
        return [Finding(
            "deterministic",
            "after other calls (other settings, rejected inputs), "
            "this call gave a different result than in a fresh process",
            result=again.result,
        )]
    if not _same(again, process.call(*call)):
        return [Finding("deterministic", "the same call, made twice in a row, gave two different results")]
    return []
