"""The Hypothesis engine: search for a call that breaks an invariant, then minimise it.

What it establishes: for the calls it tried, the target kept every invariant of its
model's registry (``spec.check`` or ``spec.serving.check`` on every result, plus
validation, input_unchanged, deterministic and termination); the model
(``proofs.models``) supplies the strategies, the oracle and the minimiser.  It is a search, not a proof: a pass says that no
counterexample was found within the examples and the budget, which the summary names.

What it runs, in order, stopping at the first counterexample (``--all`` goes on):
1. counterexamples saved by earlier runs for this target, replayed first;
2. every class of bad input, systematically (``strategies.bad_calls``);
3. valid calls across the whole domain, steered by ``hypothesis.target`` towards long
   queues, ties and large gaps between the policies (a failure that does not repeat
   in a fresh process is reported as ``deterministic``);
4. repeated calls, each in a fresh process and after other calls, rejected ones
   included (``deterministic``); then related calls side by side (proofs.search.relations:
   both policies, one slot, a slot per job);
5. bad inputs combined at random (``strategies.corrupted_calls``);
6. for our own impl, the stateful test of the online Scheduler (proofs.search.stateful).

Bounds: the target runs in a child process with a wall-clock limit per call (a hang
is a ``termination`` counterexample) and a memory cap; the whole run stops at its
deadline, and minimisation has a deadline of its own.
"""

from __future__ import annotations

import copy
import glob
import json
import os
import time
from collections import Counter
from typing import Callable, NamedTuple

from hypothesis import HealthCheck, Verbosity, event, given, settings
from hypothesis import strategies as st

from proofs import models
from proofs.counterexample import Counterexample
from proofs.sandbox import TargetProcess
from proofs.search.judge import Finding, judge_invalid_call, judge_repeated_call, judge_valid_call
from proofs.search.database import GuardedDatabase
from proofs.search.relations import broken_relations, related_calls

ENGINE = "hypothesis"
HYPOTHESIS_SHRINK_SECONDS = 0.3  # then the deterministic minimiser takes over
HANG_PROBE_SECONDS = 0.25  # the limit of one probe while a hang is minimised (then confirmed at the full limit)
CHECKS = ("replay", "validation", "conformance", "deterministic", "metamorphic", "corrupted_validation", "stateful")
EXAMPLES = {"conformance": 500, "metamorphic": 60, "deterministic": 30, "validation": 200, "stateful": 60}


def examples_for(conformance: int) -> dict:
    """Examples per check when the conformance search gets ``conformance`` of them."""
    scale = conformance / EXAMPLES["conformance"]
    return {check: max(10, round(count * scale)) for check, count in EXAMPLES.items()}


class BudgetExhausted(BaseException):
    """Raised inside a Hypothesis test to end the search at the deadline (not a failure)."""


class HandOver(BaseException):
    """Raised inside a Hypothesis test to hand a failure to the deterministic minimiser:
    when the target hangs (shrinking call by call would cost a timeout each), or when
    Hypothesis's own shrinking has had its time.  Hypothesis has already saved the
    failing examples it saw in its database, so the next run replays them first."""


class Falsified(Exception):
    """The Hypothesis test's failure: the call broke the invariant being searched for."""


class Found(NamedTuple):
    counterexample: Counterexample
    actual: object  # the target's result on the minimal input, when it returned one


class Search:
    """One verify run of the Hypothesis engine against one target."""

    def __init__(
        self,
        process: TargetProcess,
        deadline: float,
        *,
        seed: int | None = None,
        find_all: bool = False,
        saved_dir: str | None = None,
        progress: Callable[[str, int], None] | None = None,
        examples: dict | None = None,
        backend: str = "hypothesis",
        database=None,
        model=None,
    ) -> None:
        self.process = process
        self.model = model or models.get()  # the model of the spec the target is judged by (proofs.models)
        self.backend = backend
        self.deadline = deadline
        self.seed = seed
        self.find_all = find_all
        self.database = database  # an ExampleDatabase (proofs.search.database.open_database), or None
        self.saved_dir = saved_dir
        self.progress = progress or (lambda check, count: None)
        self.examples = dict(EXAMPLES, **(examples or {}))
        self.found: list[Found] = []
        self.calls_tried = 0
        self.unfinished: list[str] = []
        self.bounds = self.model.new_bounds()  # the ranges of the valid calls actually made (every PASS line states them)
        self.statistics: dict[str, Counter] = {}  # per check: how often each interesting case was drawn

    # -- the run ---------------------------------------------------------------------

    def run(self, stateful: bool = False, only=None) -> list[Found]:
        """Run every check in order (or only those named in ``only``, from CHECKS);
        return the counterexamples found."""
        steps = [
            ("replay", "replay", self._replay_saved),
            ("validation", "validation", self._systematic_validation),
            ("conformance", "conformance", self._conformance),
            ("deterministic", "deterministic", self._deterministic),
            *([("metamorphic", "metamorphic", self._metamorphic)] if self.model.has_relations else []),
            ("corrupted_validation", "validation", self._corrupted_validation),
        ]
        if stateful:
            steps.append(("stateful", "stateful", self._stateful))
        for check, name, step in steps:
            if only is not None and check not in only:
                continue
            if self._done():
                break
            if time.monotonic() >= self.deadline:
                self.unfinished.append(name)
                continue
            step()
        return self.found

    def _done(self) -> bool:
        return bool(self.found) and not self.find_all

    @property
    def known(self) -> set[str]:
        return {found.counterexample.property for found in self.found}

    def _record(self, check: str, call, finding: Finding, rule: str = "") -> None:
        cex = Counterexample(finding.invariant, ENGINE, check, tuple(call), finding.message, rule, model=self.model.name)
        self.found.append(Found(cex, finding.result))

    # -- judging one call ------------------------------------------------------------

    def _valid(self, call, seconds: float | None = None, reference: dict | None = None) -> list[Finding]:
        self.calls_tried += 1
        self.bounds.add(call)
        outcome = self.process.call(*copy.deepcopy(call), seconds=seconds)
        return judge_valid_call(outcome, *call, reference=reference, model=self.model)

    def _valid_steered(self, call) -> list[Finding]:
        """Judge a valid call, and point Hypothesis at the corners that hide bugs (the model's ``steer``)."""
        return self._valid(call, reference=self.model.steer(call))

    def _invalid(self, call, rule: str) -> list[Finding]:
        self.calls_tried += 1
        return judge_invalid_call(self.process.call(*copy.deepcopy(call)), rule)

    def _repeated(self, call) -> list[Finding]:
        self.calls_tried += 7
        self.bounds.add(call)
        return judge_repeated_call(self.process, copy.deepcopy(call), self.model)

    # -- the checks --------------------------------------------------------------------

    def _replay_saved(self) -> None:
        """Counterexamples an earlier run saved for this target come first."""
        if not self.saved_dir:
            return
        for path in sorted(glob.glob(os.path.join(self.saved_dir, "*.json"))):
            try:
                with open(path) as handle:
                    data = json.load(handle)
                if (data.get("target") != self.process.target.text or data.get("engine") != ENGINE
                        or data.get("model", models.DEFAULT) != self.model.name):
                    continue
                cex = Counterexample.from_json(data)
            except (OSError, ValueError, KeyError, TypeError, SyntaxError):
                continue  # not one of ours, or damaged: the search below covers it anyway
            findings = self._judge(cex.check, cex.call, cex.rule)
            wanted = [f for f in findings if f.invariant == cex.property and f.invariant not in self.known]
            if wanted:
                self._record(cex.check, cex.call, wanted[0], cex.rule)
                if self._done():
                    return

    def _judge(self, check: str, call, rule: str = "") -> list[Finding]:
        if check == "validation":
            return self._invalid(call, rule)
        if check == "deterministic":
            return self._repeated(call)
        if check == "conformance":
            return self._valid(call)
        return []

    def _systematic_validation(self) -> None:
        for rule, call in self.model.bad_calls():
            if time.monotonic() >= self.deadline:
                self.unfinished.append("validation")
                return
            findings = [f for f in self._invalid(call, rule) if f.invariant not in self.known]
            if findings:
                wanted = findings[0].invariant
                small = self.model.minimize_invalid(
                    call, lambda c: any(f.invariant == wanted for f in self._invalid(c, rule)), self._shrink_seconds()
                )
                self._record("validation", small, self._invalid(small, rule)[0], rule)
                if self._done():
                    return
            self.progress("validation", self.calls_tried)

    def _conformance(self) -> None:
        self._search("conformance", self.model.valid_calls(), self._valid_steered, self._minimize_valid)

    def _metamorphic(self) -> None:
        """Related calls (both policies, one slot, a slot per job) judged side by side."""

        def judge(pair):
            jobs, slots = pair
            results = {}
            for call in related_calls(jobs, slots):
                self.calls_tried += 1
                self.bounds.add(call)
                outcome = self.process.call(*copy.deepcopy(call))
                findings = judge_valid_call(outcome, *call, model=self.model)
                if findings:
                    pair_call["call"] = call
                    return findings
                results[(call[1], call[2])] = outcome.result
            broken = broken_relations(jobs, slots, results)
            if broken:  # every call conformed, yet a relation broke: the relation is wrong
                raise AssertionError(f"relation broken by conforming results: {broken[0]}")
            return []

        pair_call = {}
        pairs = st.tuples(self.model.valid_calls(max_jobs=12).map(lambda call: list(call[0])), st.integers(1, 4))
        self._search(
            "metamorphic", pairs, judge,
            lambda pair, wanted: self._minimize_valid(pair_call["call"], wanted),
            drawn=lambda pair: (pair[0], pair[1], True),
        )

    def _deterministic(self) -> None:
        self._search("deterministic", self.model.valid_calls(max_jobs=8), self._repeated, self._minimize_repeated)

    def _corrupted_validation(self) -> None:
        def judge(call):
            assert not self.model.is_valid(*call), f"corrupted_calls drew a valid call: {call!r}"
            return self._invalid(call, "a corrupted input")

        def minimize(call, wanted):
            def fails(c):
                return any(f.invariant == wanted for f in judge(c))

            small = self.model.minimize_invalid(call, fails, self._shrink_seconds())
            return small, [f for f in judge(small) if f.invariant == wanted][0]

        self._search("validation", self.model.corrupted_calls(), judge, minimize, rule="a corrupted input")

    def _stateful(self) -> None:
        if self.model.name == "serving":
            from proofs.search.serving_stateful import run_stateful
        else:
            from proofs.search.stateful import run_stateful

        failure = run_stateful(self.examples["stateful"], self.seed)
        if failure is not None:
            invariant, message, program = failure
            cex = Counterexample(invariant, ENGINE, "stateful", tuple(self.model.example_call),
                                 message + "\n" + program, model=self.model.name)
            self.found.append(Found(cex, None))

    # -- search and minimisation ---------------------------------------------------------

    def _shrink_seconds(self) -> float:
        return max(2.0, min(10.0, self.deadline + 5.0 - time.monotonic()))

    def _minimize_valid(self, call, wanted: str):
        hang = wanted == "termination"

        def fails_within(seconds):
            return lambda candidate: any(f.invariant == wanted for f in self._valid(candidate, seconds))

        # A hang is first minimised with short probes (every probe that still hangs costs
        # its whole limit), numbers shrinking by factors of 16; the result must then hang
        # at the search's own limit too.  If it does not (the target is merely slow near
        # that size), minimise again at the full limit, from that result with its numbers
        # one step (x16) larger if that hangs, else from the original: a counterexample
        # never merely takes a while.
        total = self._shrink_seconds()
        passes = [(HANG_PROBE_SECONDS, 0.6 * total), (None, 0.4 * total)] if hang else [(None, total)]
        start = call
        for seconds, minimising in passes:
            small = self.model.minimize_valid(start, fails_within(seconds), minimising, coarse=hang)
            self.process.close()  # judge the minimal call in a fresh process: nothing came before
            findings = [f for f in self._valid(small) if f.invariant == wanted]
            if findings:
                return small, findings[0]
            larger = self.model.one_step_larger(small)
            start = larger if fails_within(None)(larger) else call
        # it fails only after earlier calls: that is a claim about history
        for candidate in (small, call):
            if any(f.invariant == "deterministic" for f in self._repeated(candidate)):
                return self._minimize_repeated(candidate, "deterministic")
        return call, Finding(wanted, "failed during the search, but not again in a fresh process")

    def _minimize_repeated(self, call, wanted: str):
        def fails(candidate) -> bool:
            return any(f.invariant == wanted for f in self._repeated(candidate))

        small = self.model.minimize_valid(call, fails, self._shrink_seconds())
        findings = [f for f in self._repeated(small) if f.invariant == wanted]
        if not findings:
            small, findings = call, [Finding(wanted, "failed once; did not fail again")]
        return small, findings[0]

    def _count(self, check: str, call) -> None:
        """Record the interesting cases a drawn valid call falls in, as Hypothesis events and in ``statistics``."""
        counter = self.statistics.setdefault(check, Counter())
        counter["drawn"] += 1
        if not self.model.is_valid(*call):
            return
        for name in self.model.features(call):
            event(name)
            counter[name] += 1

    def _search(self, check: str, strategy, judge, minimize, rule: str = "", drawn=None) -> None:
        """Run one Hypothesis search until it fails, runs out of examples or of time."""
        while not self._done():
            ignore = set(self.known)
            state = {"locked": None, "call": None, "since": None}
            database = GuardedDatabase(self.database) if self.database is not None else None

            def stop(reason):
                """End the search on an example that did not fail: not one to save."""
                if database is not None:
                    database.skip_next_save()
                raise reason

            def test(call):
                if time.monotonic() >= self.deadline:
                    stop(BudgetExhausted)
                self._count(check, drawn(call) if drawn else call)
                findings = [f for f in judge(call) if f.invariant not in ignore]
                self.progress(check, self.calls_tried)
                if state["locked"] is not None:
                    findings = [f for f in findings if f.invariant == state["locked"]]
                if not findings:
                    if state["since"] is not None and time.monotonic() - state["since"] > HYPOTHESIS_SHRINK_SECONDS:
                        stop(HandOver)
                    return
                state["locked"] = state["locked"] or findings[0].invariant
                state["call"] = copy.deepcopy(call)
                state["since"] = state["since"] or time.monotonic()
                hanging = findings[0].invariant == "termination" and "did not return" in findings[0].message
                if hanging or time.monotonic() - state["since"] > HYPOTHESIS_SHRINK_SECONDS:
                    raise HandOver
                raise Falsified(findings[0].message)

            runner = settings(
                max_examples=self.examples[check],
                deadline=None,
                database=database,
                suppress_health_check=list(HealthCheck),
                report_multiple_bugs=False,
                verbosity=Verbosity.quiet,
                print_blob=False,
                backend=self.backend,
            )(given(strategy)(test))
            runner.hypothesis.inner_test._hypothesis_internal_add_digest = (
                f"schedcheck:{self.process.target.text}:{check}:{sorted(ignore)}".encode()
            )
            if self.seed is not None:
                # not hypothesis.seed(), which also switches the example database off: a
                # seeded run (the ci profile) must still replay what other runs found
                runner._hypothesis_internal_use_seed = self.seed
            try:
                runner()
            except BudgetExhausted:
                if state["call"] is None:
                    self.unfinished.append(check)
            except HandOver:
                pass
            except Exception:  # Falsified, or Hypothesis's Flaky errors around it
                if state["call"] is None:
                    raise
            if state["call"] is None:
                return
            small, finding = minimize(state["call"], state["locked"])
            replay_as = "conformance" if check == "metamorphic" else check
            self._record("deterministic" if finding.invariant == "deterministic" else replay_as, small, finding, rule)
