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

Every finding keeps the kind of outcome it came from (``Finding.kind``).  A result
returned or an exception raised is an observation (``observed``): what the target
did, a FAIL whether or not it happens again.  A time-out or a death is not: the
machine may have stalled, so only these may end as ``flaky`` (proofs.search.engine).
"""

from __future__ import annotations

from typing import NamedTuple

import spec
from proofs import models
from proofs.sandbox import DIED, HarnessError, Outcome, RAISED, RETURNED, TIMED_OUT, TargetProcess

OBSERVED = (RETURNED, RAISED)  # the kinds of outcome that show what the target did (never flaky)


class Finding(NamedTuple):
    """A broken invariant on one call, with what the harness saw."""

    invariant: str
    message: str
    violation: spec.Violation | None = None  # from spec.check, when there is a result
    result: object = None  # the target's result, when it returned one
    hash_seeds: tuple = ()  # deterministic: two PYTHONHASHSEED values whose fresh interpreters disagree on the call
    kind: str = RETURNED  # the sandbox outcome it came from: returned, raised, timed_out or died
    history: tuple | None = None  # the calls a fresh process answered before the call, when it was confirmed so
    reproduced: str = ""  # how it was confirmed: "alone", "history" or "no" (proofs.counterexample.REPRODUCED)

    @property
    def observed(self) -> bool:
        """A result or an exception the target gave: a fact, whether or not it happens again."""
        return self.kind in OBSERVED


def _first(findings: list[Finding], model) -> list[Finding]:
    order = {name: index for index, name in enumerate(model.names)}
    return sorted(findings, key=lambda f: order.get(f.invariant, -1))


def judge_valid_call(outcome: Outcome, *call, reference: dict | None = None, model=None) -> list[Finding]:
    """The invariants a call inside the domain broke, in the model's registry order ([] if none)."""
    model = model or models.get()
    _no_harness_error(outcome)
    if outcome.kind == TIMED_OUT:
        return [Finding("termination", f"the call {outcome.error}", kind=TIMED_OUT)]
    if outcome.kind == DIED:
        return [Finding("termination", outcome.error, kind=DIED)]
    if outcome.kind == RAISED:
        if outcome.error_type == "ValueError":
            return [Finding("validation", f"a valid call raised {outcome.error}", kind=RAISED)]
        return [Finding("termination", f"a valid call raised {outcome.error} instead of returning a result", kind=RAISED)]
    findings = []
    if outcome.mutated:
        findings.append(Finding("input_unchanged", describe_change(call, outcome.args_after, model.parameters)))
    if not outcome.sendable:
        findings.append(Finding("well_typed", f"the result is not plain data: {outcome.error}"))
        return _first(findings, model)
    for violation in model.check(call, outcome.result, reference):
        findings.append(Finding(violation.invariant, violation.message, violation, outcome.result))
    return _first(findings, model)


def describe_change(before: tuple, after: tuple | None, names: tuple) -> str:
    """How a call changed its arguments: the first argument that differs and, in a list, its first
    element that differs, before and after (or what else changed)."""
    if after is None:
        return f"the call modified the caller's {names[0]}, which cannot be shown as the call left them"
    for name, old_arg, new_arg in zip(names, before, after):
        if old_arg == new_arg and type(old_arg) is type(new_arg):
            continue
        where = f"the call modified the caller's {name}: "
        if type(new_arg) is not type(old_arg):
            return where + f"the {type(old_arg).__name__} became a {type(new_arg).__name__}"
        if not isinstance(old_arg, (list, tuple)):
            return where + f"{name} was {_short(old_arg)}, after the call {_short(new_arg)}"
        if len(new_arg) != len(old_arg):
            return where + f"it had {len(old_arg)} items and has {len(new_arg)} after the call"
        for index, (old, new) in enumerate(zip(old_arg, new_arg)):
            if old != new or type(old) is not type(new):
                line = where + f"{name}[{index}] was {_short(old)}, after the call {_short(new)}"
                ids = [item.get("id") if isinstance(item, dict) else None for item in old_arg]
                new_ids = [item.get("id") if isinstance(item, dict) else None for item in new_arg]
                if sorted(map(repr, ids)) == sorted(map(repr, new_ids)) and ids != new_ids:
                    line += f" (the {name} were reordered: ids {_short(ids)} became {_short(new_ids)})"
                return line
    return f"the call modified the caller's {names[0]}: a value changed in place (its repr did not)"


def _short(value, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def judge_invalid_call(outcome: Outcome, rule: str) -> list[Finding]:
    """The invariants a call outside the domain broke: it must raise ValueError and nothing else."""
    _no_harness_error(outcome)
    if outcome.kind in (TIMED_OUT, DIED):
        return [Finding("termination", f"an invalid call ({rule}): {outcome.error}", kind=outcome.kind)]
    if outcome.kind == RAISED:
        if outcome.error_type == "ValueError":
            return []
        return [Finding("validation", f"an invalid call ({rule}) raised {outcome.error}, expected ValueError", kind=RAISED)]
    return [Finding("validation", f"an invalid call ({rule}) returned a result, expected ValueError")]


def _no_harness_error(outcome: Outcome) -> None:
    if outcome.kind == "harness_error":
        raise HarnessError(f"the sandbox failed, not the target: {outcome.error}")


def _same(first: Outcome, second: Outcome, model) -> bool:
    """Two outcomes alike as the contract sees them (extra result keys may hold anything: never compared)."""
    return ((first.kind, model.contract_part(first.result), first.error)
            == (second.kind, model.contract_part(second.result), second.error))


def _stalled(outcome: Outcome, where: str) -> list[Finding]:
    """A time-out or a death of a repeated call: ``termination`` (not an observation), never ``deterministic``."""
    _no_harness_error(outcome)
    if outcome.kind in (TIMED_OUT, DIED):
        text = f"the call {outcome.error}" if outcome.kind == TIMED_OUT else outcome.error
        return [Finding("termination", f"{text} ({where})", kind=outcome.kind)]
    return []


def judge_repeated_call(process: TargetProcess, call, model=None) -> list[Finding]:
    """The call in a fresh process, then in another fresh process after other calls (for the
    chapter's model the other policy, one more slot, rejected inputs), then once more at once:
    all must agree.  A repeat that times out or dies is a ``termination`` finding of that
    kind (which may turn out flaky), never a difference between results."""
    model = model or models.get()
    process.close()  # nothing came before: the next call starts a fresh process
    first = process.call(*call)
    _no_harness_error(first)
    broken = judge_valid_call(first, *call, model=model)
    if any(f.invariant == "termination" for f in broken):
        return broken
    process.close()
    for other in model.calls_between(call):
        _no_harness_error(process.call(*other))
    again = process.call(*call)
    stalled = _stalled(again, "in a fresh process after other calls")
    if stalled:
        return stalled
    if not _same(first, again, model):
        return [Finding(
            "deterministic",
            "after other calls (other settings, rejected inputs), "
            "this call gave a different result than in a fresh process",
            result=again.result,
        )]
    third = process.call(*call)
    stalled = _stalled(third, "made twice in a row")
    if stalled:
        return stalled
    if not _same(again, third, model):
        return [Finding("deterministic", "the same call, made twice in a row, gave two different results",
                        result=third.result)]
    return []
