"""Judging one call of a target: from what it did to the invariants it broke.

Every engine goes through here, so a counterexample means the same thing whichever
engine found it.  The claims are the model's registry (``spec.INVARIANTS`` or
``spec.serving.INVARIANTS``, through ``proofs.models``); what a call can show beyond
a result is mapped onto them:

- no result in time, an exception other than ValueError on a valid call, or the
  process dying: ``termination`` (every valid call ends by returning a result);
- ValueError on a valid call, or anything but ValueError on an invalid one: ``validation``;
- the input modified: ``input_unchanged``;
- a different result for the same call (in a fresh process, after other calls, or in a
  fresh interpreter with another string-hash seed, ``PYTHONHASHSEED``): ``deterministic``;
- a result: whatever the model's oracle (``spec.check``, ``spec.serving.check``) finds,
  in its order: root cause first (the rule that breaks first in the replay of the trace);
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
from proofs.sandbox import (DIED, HarnessError, Outcome, RAISED, RETURNED, TIMED_OUT, TargetProcess,
                            fresh_hash_seeds, harness_hash_seed)

OBSERVED = (RETURNED, RAISED)  # the kinds of outcome that show what the target did (never flaky)
EXTRA_SEEDS = 4  # other hash seeds tried for one that gives the harness's own result, when its seed is random


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


def judge_valid_call(outcome: Outcome, *call, reference: dict | None = None, model=None) -> list[Finding]:
    """The invariants a call inside the domain broke, root cause first ([] if none): the oracle's
    findings in its order (the first to break in the replay of the trace first), then ``input_unchanged``."""
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
    if not outcome.sendable:
        findings = [Finding("well_typed", f"the result is not plain data: {outcome.error}")]
    else:
        findings = [Finding(violation.invariant, violation.message, violation, outcome.result)
                    for violation in model.check(call, outcome.result, reference)]
    if outcome.mutated:
        findings.append(Finding("input_unchanged", describe_change(call, outcome.args_after, model.parameters)))
    return findings


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
    """The invariants a call outside the domain broke: it must raise ValueError, before any work, and nothing else.

    An invalid call that hangs or dies was accepted (a target that rejects it raises at
    once): that breaks ``validation``, the root cause, not ``termination``, whose claim is
    that every valid call ends."""
    _no_harness_error(outcome)
    if outcome.kind in (TIMED_OUT, DIED):
        return [Finding("validation", f"an invalid call ({rule}) was accepted, not rejected: {outcome.error}; "
                                      "expected ValueError before any work", kind=outcome.kind)]
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


def judge_repeated_call(process: TargetProcess, call, model=None, hash_seeds: tuple = ()) -> list[Finding]:
    """The call in a fresh process, then in another fresh process after other calls (for the
    chapter's model the other policy, one more slot, rejected inputs), then once more at once,
    then in a fresh interpreter per seed of ``hash_seeds`` (exec'd with that PYTHONHASHSEED: a
    fork shares the harness's string hashes): all must agree.  A repeat in the harness's
    interpreter that times out or dies is a ``termination`` finding of that kind (which may turn
    out flaky), never a difference between results."""
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
    return _against_fresh_interpreters(process, call, first, hash_seeds, model)


def _fresh_call(process: TargetProcess, seed: int, call) -> Outcome:
    """The call in a fresh worker of the fresh interpreter with ``PYTHONHASHSEED=seed`` (``timed_out``,
    without a call, if that interpreter's import is not done by the run's deadline)."""
    if not process.fresh_ready((seed,)):
        return Outcome("timed_out", error=f"the fresh interpreter (PYTHONHASHSEED={seed}) was not ready in time")
    other = process.fresh(seed)
    other.close()
    outcome = other.call(*call)
    _no_harness_error(outcome)
    return outcome


def _harness_seed_text() -> str:
    seed = harness_hash_seed()
    return f"PYTHONHASHSEED={seed}" if seed is not None else "a random PYTHONHASHSEED"


def _seed_like(process: TargetProcess, call, wanted, tried: tuple, model) -> int | None:
    """A hash seed whose fresh interpreter gives ``wanted`` (an outcome, or a predicate on one) on the
    call: the harness's own, if it is fixed, or one of ``EXTRA_SEEDS`` others (None if none does).
    Each is tried, not assumed: replay runs exactly these interpreters."""
    matches = wanted if callable(wanted) else (lambda outcome: _same(wanted, outcome, model))
    own = harness_hash_seed()
    for seed in ((own,) if own is not None else ()) + fresh_hash_seeds(tried[0], EXTRA_SEEDS, skip=tried):
        try:
            if matches(_fresh_call(process, seed, call)):
                return seed
        finally:
            process.end_fresh(seed)  # one more interpreter alive per seed tried would add up
    return None


def _against_fresh_interpreters(process, call, first: Outcome, hash_seeds: tuple, model) -> list[Finding]:
    """``first`` (the call in a fresh process of the harness's interpreter) against the call in a
    fresh interpreter per hash seed.  A time-out or a death there is no finding (it is not a result)."""
    if not hash_seeds or not hasattr(process, "fresh") or not process.fresh_ready(hash_seeds):
        return []  # (not ready by the run's deadline: counted in process.fresh_late, the check is unfinished)
    seen: dict = {}
    for seed in hash_seeds:
        outcome = _fresh_call(process, seed, call)
        if outcome.kind in (TIMED_OUT, DIED):
            continue
        seen[seed] = outcome
        if _same(first, outcome, model):
            continue
        # two known seeds that disagree, so that replay repeats it whatever its own seed
        agreeing = [s for s, o in seen.items() if _same(first, o, model)]
        other = agreeing[0] if agreeing else _seed_like(process, call, first, tuple(hash_seeds), model)
        where = f"PYTHONHASHSEED={other}" if other is not None else _harness_seed_text()
        return [Finding(
            "deterministic",
            f"in a fresh interpreter with PYTHONHASHSEED={seed} this call gave a different result than in a fresh "
            f"process of the harness's interpreter ({_harness_seed_text()})"
            + (f"; a fresh interpreter with {where} gives the harness's result" if other is not None else
               f"; none of {EXTRA_SEEDS} other seeds gave the harness's result, so a replay may not repeat it"),
            result=outcome.result if outcome.kind == RETURNED else None,
            hash_seeds=(other, seed) if other is not None else (seed,),
        )]
    return []


def judge_seeded_pair(process: TargetProcess, call, hash_seeds: tuple, model=None) -> list[Finding]:
    """A saved ``deterministic`` counterexample's two hash seeds again: the call in a fresh
    interpreter with each; they must agree."""
    model = model or models.get()
    first_seed, second_seed = hash_seeds
    process.fresh_ready(hash_seeds)  # both imports side by side
    first, second = _fresh_call(process, first_seed, call), _fresh_call(process, second_seed, call)
    if any(outcome.kind in (TIMED_OUT, DIED) for outcome in (first, second)) or _same(first, second, model):
        return []
    return [Finding(
        "deterministic",
        f"in fresh interpreters with PYTHONHASHSEED={first_seed} and PYTHONHASHSEED={second_seed} this call gave "
        f"two different results",
        result=second.result if second.kind == RETURNED else None, hash_seeds=(first_seed, second_seed),
    )]


def judge_hash_seed_dependence(process: TargetProcess, call, finding: Finding, hash_seeds: tuple,
                               model=None) -> Finding:
    """A broken invariant seen (and seen again) on ``call`` in fresh processes of the harness's
    interpreter, checked in a fresh interpreter per seed of ``hash_seeds``: if one gives another
    result there, the result depends on the interpreter's string hashes, and the finding is
    ``deterministic`` (with a seed that breaks it and one that does not); else ``finding`` itself."""
    model = model or models.get()
    if not hash_seeds or not hasattr(process, "fresh") or finding.result is None or not process.fresh_ready(hash_seeds):
        return finding
    shown = model.contract_part(finding.result)
    breaks: list = []
    for seed in hash_seeds:
        outcome = _fresh_call(process, seed, call)
        if outcome.kind in (TIMED_OUT, DIED):
            continue
        if outcome.kind == RETURNED and outcome.sendable and model.contract_part(outcome.result) == shown:
            breaks.append(seed)
            continue
        failing = breaks[0] if breaks else _seed_like(
            process, call, lambda o: o.kind == RETURNED and o.sendable and model.contract_part(o.result) == shown,
            tuple(hash_seeds), model)
        also = f", as in a fresh interpreter with PYTHONHASHSEED={failing}" if failing not in (None, harness_hash_seed()) else ""
        return finding._replace(
            invariant="deterministic",
            message=f"this call breaks {finding.invariant} in a fresh process of the harness's interpreter "
            f"({_harness_seed_text()}){also}, but gives another result in a fresh interpreter with "
            f"PYTHONHASHSEED={seed}: its result depends on the interpreter's string-hash seed "
            f"({finding.invariant}: {finding.message})",
            hash_seeds=(failing, seed) if failing is not None else (seed,),
        )
    return finding
