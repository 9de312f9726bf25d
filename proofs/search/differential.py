"""Differential search: the smallest input on which two schedulers behave differently.

What it establishes: for the calls it tried, OLD and NEW behaved alike, or here is
the smallest call on which they part, with each side judged against the spec:

- ``regression``: NEW breaks an invariant that OLD kept;
- ``fix``: OLD broke an invariant that NEW keeps, and NEW breaks none that OLD kept;
- ``both conform``: they differ, yet both meet the spec (extra result keys, say);
- ``both broken``: they differ, and both break the same invariants.

A change is a ``fix`` only if NEW broke nothing on any call searched: once a fixing
difference is seen the search goes on (to its examples or its deadline), and any
call on which NEW breaks an invariant ends it and decides the verdict (``regression``
when OLD kept that invariant there, else ``both broken``); the fix is kept in
``DifferentialSearch.differences`` and reported too.

Behaviour is compared as a caller sees it: the returned value, or the kind of
exception (two ValueErrors with different messages behave alike), a hang or a death.
Both targets run isolated (proofs.sandbox).  It is a search, not a proof of
equivalence: the calls it tries are those of the verify engine (bad inputs
systematically, then valid calls across the domain, then corrupted ones); the
diff command adds CrossHair's diffbehavior (proofs.symbolic.diff) in what is
left of the budget, and sends what it finds through ``classify_call``.
"""

from __future__ import annotations

import copy
import time
from typing import NamedTuple

from hypothesis import HealthCheck, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed

from proofs import models
from proofs.sandbox import Outcome, TargetProcess
from proofs.search.judge import judge_invalid_call, judge_valid_call

class Side(NamedTuple):
    outcome: Outcome
    broken: list  # invariant names, root cause first (the judge's order)

    def describe(self) -> str:
        if self.outcome.kind == "returned":
            return "returned a result"
        if self.outcome.kind == "raised":
            return f"raised {self.outcome.error}"
        return self.outcome.error


class Difference(NamedTuple):
    call: tuple
    classification: str
    old: Side
    new: Side
    engine: str = "hypothesis"


def behaviour(outcome: Outcome) -> tuple:
    """What a caller can observe of one call."""
    if outcome.kind == "returned":
        return ("returned", outcome.result)
    if outcome.kind == "raised":
        return ("raised", outcome.error_type)
    return (outcome.kind,)


def classify(old_broken: list, new_broken: list) -> str:
    if set(new_broken) - set(old_broken):
        return "regression"
    if old_broken and set(old_broken) - set(new_broken):
        return "fix"
    return "both conform" if not old_broken else "both broken"


class DifferentialSearch:
    def __init__(self, old: TargetProcess, new: TargetProcess, deadline: float, seed: int | None = None,
                 examples: int = 500, model=None) -> None:
        self.old, self.new = old, new
        self.model = model or models.get()  # the model both are judged by (proofs.models)
        self.deadline = deadline
        self.seed = seed
        self.examples = examples
        self.calls_tried = 0
        self.unfinished: list[str] = []
        self.bounds = self.model.new_bounds()  # the ranges of the valid calls made (the SAME line states them)
        self.differences: list[Difference] = []  # every minimised difference found, the deciding one first
        self._fix = None  # the first call seen on which NEW fixes what OLD broke, and breaks nothing
        self._still = None  # the first call seen on which both behave alike and NEW breaks an invariant

    def _sides(self, call, seconds: float | None = None) -> tuple[Side, Side]:
        self.calls_tried += 1
        valid = self.model.is_valid(*call)
        if valid:
            self.bounds.add(call)
        sides = []
        for process in (self.old, self.new):
            outcome = process.call(*copy.deepcopy(call), seconds=seconds)
            if valid:
                broken = judge_valid_call(outcome, *call, model=self.model)
            else:
                broken = judge_invalid_call(outcome, "an invalid input")
            sides.append(Side(outcome, list(dict.fromkeys(f.invariant for f in broken))))
        return sides[0], sides[1]

    def _differs(self, call, seconds: float | None = None) -> bool:
        old, new = self._sides(call, seconds)
        return behaviour(old.outcome) != behaviour(new.outcome)

    def _difference(self, call) -> Difference:
        old, new = self._sides(call)
        return Difference(call, classify(old.broken, new.broken), old, new)

    def classify_call(self, call, engine: str) -> Difference | None:
        """Minimise and classify a differing call another engine found; None if it does not differ here."""
        call = copy.deepcopy(call)
        if not self._differs(call):
            return None  # the difference did not survive the isolated re-run
        old, new = self._sides(call)
        hang = "timed_out" in (old.outcome.kind, new.outcome.kind)
        if self.model.is_valid(*call):
            small = self.model.minimize_valid(call, self._differs, self._shrink_seconds(), coarse=hang)
        else:
            small = self.model.minimize_invalid(call, self._differs, self._shrink_seconds())
        return self._difference(small)._replace(engine=engine)

    def _deciding(self, call) -> bool:
        """True when ``call`` decides the verdict: they differ other than by a clean fix, or NEW breaks an
        invariant after a fix was seen (a call on which both behave alike and NEW breaks one is kept for later)."""
        old, new = self._sides(call)
        if behaviour(old.outcome) != behaviour(new.outcome):
            if new.broken or not old.broken:
                return True
            self._fix = self._fix or copy.deepcopy(call)  # a clean fix: search on for anything NEW breaks
            return False
        if new.broken:
            if self._fix is not None:
                return True
            self._still = self._still or copy.deepcopy(call)
        return False

    def _decide(self, call) -> Difference:
        """The minimised difference of a deciding call: by what NEW breaks there, else by the difference itself."""
        old, new = self._sides(call)
        minimize = self.model.minimize_valid if self.model.is_valid(*call) else self.model.minimize_invalid
        if not new.broken:
            return self.classify_call(call, "hypothesis") or self._difference(call)
        wanted = new.broken[0]
        kept = wanted not in old.broken

        def still(candidate) -> bool:
            o, n = self._sides(candidate)
            return wanted in n.broken and (not kept or wanted not in o.broken)

        small = minimize(call, still, self._shrink_seconds())
        found = self._difference(small)
        if found.classification != "regression" and set(found.new.broken) - set(found.old.broken):
            found = found._replace(classification="regression")
        return found

    def _fixes(self, call) -> bool:
        """True when OLD and NEW differ on ``call`` and it is a fix there (NEW breaks nothing OLD kept, and less)."""
        old, new = self._sides(call)
        return behaviour(old.outcome) != behaviour(new.outcome) and classify(old.broken, new.broken) == "fix"

    def _minimal_fix(self) -> Difference | None:
        """The first fixing call seen, minimised so that it stays a fix."""
        call = self._fix
        if not self._fixes(call):
            return None  # it did not fix again in the isolated re-run
        minimize = self.model.minimize_valid if self.model.is_valid(*call) else self.model.minimize_invalid
        return self._difference(minimize(call, self._fixes, self._shrink_seconds()))

    def run(self) -> Difference | None:
        """The minimised difference that decides the verdict (a ``fix`` only if NEW broke nothing searched), or None."""
        found = self._run()
        if found is None and self._fix is not None and self._still is not None:
            found = self._decide(self._still)  # NEW still breaks what it broke before the fix was seen
        if found is None and self._fix is not None:
            found = self._minimal_fix()
        if found is not None:
            self.differences.insert(0, found)
        if self._fix is not None and found is not None and found.classification != "fix":
            fix = self._minimal_fix()
            if fix is not None:
                self.differences.append(fix)
        return found

    def _run(self) -> Difference | None:
        for rule, call in self.model.bad_calls():
            if time.monotonic() >= self.deadline:
                self.unfinished.append("validation")
                return None
            if self._deciding(call):
                return self._decide(call)
        for strategy, name in ((self.model.valid_calls(), "valid calls"), (self.model.corrupted_calls(), "corrupted calls")):
            found = self._search(strategy, name)
            if found is not None:
                return found
        return None

    def _shrink_seconds(self) -> float:
        return max(2.0, min(10.0, self.deadline + 5.0 - time.monotonic()))

    def _search(self, strategy, name: str) -> Difference | None:
        state = {"call": None}

        class Stop(BaseException):
            pass

        def test(call):
            if time.monotonic() >= self.deadline:
                self.unfinished.append(name)
                raise Stop
            if self._deciding(call):
                state["call"] = copy.deepcopy(call)
                raise Stop  # the deterministic minimiser below shrinks it

        runner = settings(
            max_examples=self.examples, deadline=None, database=None, derandomize=False,
            suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
        )(given(strategy)(test))
        if self.seed is not None:
            runner = hypothesis_seed(self.seed)(runner)
        try:
            runner()
        except Stop:
            pass
        if state["call"] is None:
            return None
        return self._decide(state["call"])
