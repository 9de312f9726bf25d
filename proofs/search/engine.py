"""The Hypothesis engine: search for a call that breaks an invariant, then minimise it.

What it establishes: for the calls it tried, the target kept every invariant of the
registry (``spec.check`` on every result, plus validation, input_unchanged,
deterministic and termination).  It is a search, not a proof: a pass says that no
counterexample was found within the examples and the budget, which the summary names.

What it runs, in order, stopping at the first counterexample (``--all`` goes on):
1. counterexamples saved by earlier runs for this target, replayed first;
2. every class of bad input, systematically (``strategies.bad_calls``);
3. valid calls across the whole domain, steered by ``hypothesis.target`` towards long
   queues, ties and large gaps between the policies (a failure that does not repeat
   in a fresh process is reported as ``deterministic``);
4. repeated calls, each in a fresh process and after other calls, rejected ones
   included (``deterministic``);
5. bad inputs combined at random (``strategies.corrupted_calls``);
6. for our own impl (through its factory) and for an online target, the stateful test
   through the online protocol (proofs.online.stateful).

Every check keeps an account (``CheckAccount``): how many calls it tried, how many it
planned, and whether it ran to its end.  A check that the deadline cut short, or that
never started, leaves the run ``incomplete`` (never a pass); ``budget_to_finish``
estimates, from the measured rates, the ``--budget`` that would have finished them.

Bounds: the target runs in a child process (proofs.sandbox) with a wall-clock
limit per call (a hang is a ``termination`` counterexample once it is confirmed at
the full limit in a fresh process) and a memory cap; the whole run stops at its
deadline, and minimisation has a deadline of its own.

A failure is reported only if it reproduces in a fresh process.  One that does not
(not on the minimised call, not on the original, not as a ``deterministic`` failure)
is retried once more: a fresh process is given the same calls the failing one had
answered, then the failing call with a limit ``RETRY_FACTOR`` times larger.  If it
fails again it is reported (saying so); if not it is flaky: listed in ``flaky`` and
in the report, never a counterexample, and the search goes on.
"""

from __future__ import annotations

import copy
import glob
import json
import math
import os
import time
from dataclasses import dataclass
from collections import Counter
from typing import Callable, NamedTuple

from hypothesis import HealthCheck, Verbosity, event, given, settings
from hypothesis import strategies as st

from proofs import models
from proofs.counterexample import Counterexample
from proofs.sandbox import HarnessError, TargetProcess, harness_collector, run_once
from proofs.search.judge import Finding, judge_invalid_call, judge_repeated_call, judge_valid_call
from proofs.search.database import GuardedDatabase

ENGINE = "hypothesis"
HYPOTHESIS_SHRINK_SECONDS = 0.3  # then the deterministic minimiser takes over
HANG_PROBE_SECONDS = 0.25  # the limit of one probe while a hang is minimised (then confirmed at the full limit)
RETRY_FACTOR = 4  # a failure seen once only is retried with this many times the per-call limit
FLAKY_PER_CHECK = 3  # after this many flaky failures a check stops (and is unfinished)
CHECKS = ("replay", "validation", "conformance", "deterministic", "corrupted_validation", "stateful")
EXAMPLES = {"conformance": 500, "deterministic": 30, "validation": 200, "stateful": 60}
REPEATED_CALLS = 7  # target calls per example of the deterministic check (proofs.search.judge.judge_repeated_call)
UNITS = {"stateful": "programs"}  # what a check counts; every other check counts calls to the target
OUR_FACTORIES = {"chapter": "impl:make_scheduler", "serving": "impl:make_serving"}  # our impl, online


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


@dataclass
class CheckAccount:
    """How far one check got: what it tried, what it planned, whether it ran to its end."""

    check: str  # a name of CHECKS
    planned: int  # calls (programs, for the stateful test) the check means to try
    tried: int = 0
    finished: bool = False
    seconds: float = 0.0  # wall-clock time spent in the check
    stopped: str = ""  # why it did not finish: "deadline", "not started: deadline", "counterexample"

    @property
    def unit(self) -> str:
        return UNITS.get(self.check, "calls")

    def to_json(self) -> dict:
        return {"check": self.check, "unit": self.unit, "tried": self.tried, "planned": self.planned,
                "finished": self.finished, "stopped": self.stopped, "seconds": round(self.seconds, 3)}


def cut_short(accounts) -> list:
    """The accounts of checks the deadline cut short or never let start (a counterexample's stop is not one)."""
    return [a for a in accounts if not a.finished and a.stopped != "counterexample"]


def budget_to_finish(accounts, budget: float, share: float = 1.0) -> int | None:
    """The ``--budget`` (whole seconds) that would let every cut-short check finish, estimated from
    the measured rate of each check (or, for one that never started, the rate of all calls measured);
    ``share`` is the fraction of ``--budget`` the Hypothesis engine gets.  None when nothing was cut short."""
    short = cut_short(accounts)
    if not short:
        return None
    tried = sum(a.tried for a in accounts if a.unit == "calls")
    seconds = sum(a.seconds for a in accounts if a.unit == "calls")
    overall = seconds / tried if tried else 1.0  # seconds per call; 1 s when nothing was measured
    extra = 0.0
    for account in short:
        rate = account.seconds / account.tried if account.tried else overall * (10 if account.unit == "programs" else 1)
        extra += max(0, account.planned - account.tried) * rate
    return int(math.ceil(1.2 * (budget + extra / share)))


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
        self.unfinished: list[str] = []  # the checks the deadline cut short or never let start
        self.checks: list[CheckAccount] = []  # one account per check run (or due to run), in order
        self._account = CheckAccount("none", 0)  # the account of the check now running
        self.flaky: list[dict] = []  # failures seen once that did not reproduce: not counterexamples
        self._history: list = []  # the calls the failing call's process had answered before it
        self.bounds = self.model.new_bounds()  # the ranges of the valid calls actually made (every PASS line states them)
        self.statistics: dict[str, Counter] = {}  # per check: how often each interesting case was drawn

    # -- the run ---------------------------------------------------------------------

    def run(self, stateful: bool = False, only=None) -> list[Found]:
        """Run every check in order (or only those named in ``only``, from CHECKS);
        return the counterexamples found.  ``self.checks`` then holds one account per check."""
        with harness_collector():  # the oracle allocates a state per tick: collect young objects less often
            return self._run(stateful, only)

    def _run(self, stateful: bool, only) -> list[Found]:
        steps = [
            ("replay", self._replay_saved),
            ("validation", self._systematic_validation),
            ("conformance", self._conformance),
            ("deterministic", self._deterministic),
            ("corrupted_validation", self._corrupted_validation),
        ]
        if stateful:
            steps.append(("stateful", self._stateful))
        for check, step in steps:
            if only is not None and check not in only:
                continue
            account = CheckAccount(check, self._planned(check))
            self.checks.append(account)
            self._account = account
            if self._done():
                account.stopped = "counterexample"
                continue
            if time.monotonic() >= self.deadline:
                account.stopped = "not started: deadline"
                self.unfinished.append(check)
                continue
            started = time.monotonic()
            before = len(self.found)
            try:
                account.finished = step() is not False
            finally:
                account.seconds = time.monotonic() - started
            if not account.finished and not account.stopped:
                account.stopped = "counterexample" if len(self.found) > before else "deadline"
            if account.stopped == "deadline" and check not in self.unfinished:
                self.unfinished.append(check)
        return self.found

    def _planned(self, check: str) -> int:
        """How many calls (programs, for the stateful test) ``check`` means to try."""
        if check == "replay":
            return len(self._saved_files())
        if check == "validation":
            return len(self.model.bad_calls())
        if check == "deterministic":
            return self.examples["deterministic"] * REPEATED_CALLS
        if check == "corrupted_validation":
            return self.examples["validation"]
        return self.examples[check]

    def _saved_files(self) -> list[str]:
        if not self.saved_dir:
            return []
        return sorted(glob.glob(os.path.join(self.saved_dir, "*.json")))

    def _done(self) -> bool:
        return bool(self.found) and not self.find_all

    @property
    def known(self) -> set[str]:
        return {found.counterexample.property for found in self.found}

    def _record(self, check: str, call, finding: Finding, rule: str = "") -> None:
        cex = Counterexample(finding.invariant, ENGINE, check, tuple(call), finding.message, rule, model=self.model.name)
        self.found.append(Found(cex, finding.result))

    # -- judging one call ------------------------------------------------------------

    def _valid(self, call, seconds: float | None = None, reference: dict | None = None, steer: bool = False) -> list[Finding]:
        """Judge a valid call; with ``steer``, the reference is computed (``model.steer``) while the child runs it."""
        self.calls_tried += 1
        self.bounds.add(call)
        self.process.submit(*self._sendable(call), seconds=seconds)
        if steer:
            try:
                reference = self.model.steer(call)
            except BaseException:
                self.process.collect()  # the call in flight ends before anything else is sent
                raise
        outcome = self.process.collect()
        return judge_valid_call(outcome, *call, reference=reference, model=self.model)

    def _valid_steered(self, call) -> list[Finding]:
        """Judge a valid call, and point Hypothesis at the corners that hide bugs (the model's ``steer``)."""
        return self._valid(call, steer=True)

    def _sendable(self, call) -> tuple:
        """The arguments to hand the target: ``call`` itself for a child (it gets a pickled copy, so
        the harness's objects stay as they are), a deep copy for a target in this process."""
        return call if isinstance(self.process, TargetProcess) else copy.deepcopy(call)

    def _invalid(self, call, rule: str) -> list[Finding]:
        self.calls_tried += 1
        return judge_invalid_call(self.process.call(*self._sendable(call)), rule)

    def _repeated(self, call) -> list[Finding]:
        self.calls_tried += 7
        self.bounds.add(call)
        return judge_repeated_call(self.process, copy.deepcopy(call), self.model)

    # -- the checks --------------------------------------------------------------------

    def _replay_saved(self) -> bool:
        """Counterexamples an earlier run saved for this target come first; False if one stopped the run."""
        for path in self._saved_files():
            self._account.tried += 1
            try:
                with open(path) as handle:
                    data = json.load(handle)
                if (data.get("target") != self.process.target.text or data.get("engine") != ENGINE
                        or data.get("model", models.DEFAULT) != self.model.name):
                    continue
                cex = Counterexample.from_json(data)
            except (OSError, ValueError, KeyError, TypeError, SyntaxError):
                continue  # not one of ours, or damaged: the search below covers it anyway
            if cex.check in ("conformance", "deterministic") and not self.model.is_valid(*cex.call):
                continue  # outside the domain the target declares (proofs.models.declared): never charged
            findings = self._judge(cex.check, cex.call, cex.rule)
            wanted = [f for f in findings if f.invariant == cex.property and f.invariant not in self.known]
            if wanted:
                self._record(cex.check, cex.call, wanted[0], cex.rule)
                if self._done():
                    return False
        return True

    def _judge(self, check: str, call, rule: str = "") -> list[Finding]:
        if check == "validation":
            return self._invalid(call, rule)
        if check == "deterministic":
            return self._repeated(call)
        if check == "conformance":
            return self._valid(call)
        return []

    def _systematic_validation(self) -> bool:
        """Every class of bad input once; True when every one was tried."""
        for rule, call in self.model.bad_calls():
            if time.monotonic() >= self.deadline:
                self._account.stopped = "deadline"
                return False
            self._account.tried += 1
            findings = [f for f in self._invalid(call, rule) if f.invariant not in self.known]
            if findings:
                wanted = findings[0].invariant
                small = self.model.minimize_invalid(
                    call, lambda c: any(f.invariant == wanted for f in self._invalid(c, rule)), self._shrink_seconds()
                )
                again = [f for f in self._invalid(small, rule) if f.invariant == wanted]
                if not again:  # it did not fail again: flaky, not a counterexample
                    self.flaky.append({"invariant": wanted, "size": self.model.size(call),
                                       "input_repr": self._repr(call), "message": f"an invalid call ({rule}) failed once, but not again"})
                    continue
                self._record("validation", small, again[0], rule)
                if self._done():
                    return False
            self.progress("validation", self.calls_tried)
        return True

    def _conformance(self) -> bool:
        return self._search("conformance", self.model.valid_calls(), self._valid_steered, self._minimize_valid)

    def _deterministic(self) -> bool:
        return self._search(
            "deterministic", self.model.valid_calls(max_jobs=8), self._repeated, self._minimize_repeated, per_example=REPEATED_CALLS
        )

    def _corrupted_validation(self) -> bool:
        def judge(call):
            assert not self.model.is_valid(*call), f"corrupted_calls drew a valid call: {call!r}"
            return self._invalid(call, "a corrupted input")

        def minimize(call, wanted):
            def fails(c):
                return any(f.invariant == wanted for f in judge(c))

            small = self.model.minimize_invalid(call, fails, self._shrink_seconds())
            for candidate in (small, call):
                again = [f for f in judge(candidate) if f.invariant == wanted]
                if again:
                    return candidate, again[0]
            self.flaky.append({"invariant": wanted, "size": self.model.size(call),
                               "input_repr": self._repr(call), "message": "an invalid call failed once, but not again"})
            return call, None

        return self._search(
            "validation", self.model.corrupted_calls(), judge, minimize, rule="a corrupted input", replay_as="validation"
        )

    def _stateful(self) -> bool:
        """The stateful test through the online protocol: the online target, or our impl's factory
        (the engine lives in a sandbox child; the test stops at the run's deadline)."""
        from proofs.online.stateful import run_stateful
        from proofs.targets import parse_target

        if getattr(self.model, "online", False):
            target = self.process.target
        else:
            target = parse_target(OUR_FACTORIES[self.model.name])
        policy = "none" if self.model.policy == "none" else "fcfs"
        account: dict = {}
        failure = run_stateful(target, self.model.name, self.examples["stateful"], self.seed, policy=policy,
                               call_seconds=self.process.call_seconds or 1.0, deadline=self.deadline,
                               account=account, domain=getattr(self.model, "declared", None))
        self._account.tried = account.get("programs", 0)
        if failure is None and not account.get("finished", True):
            return False  # the deadline stopped it: not every planned program ran
        if failure is not None:
            invariant, message, program = failure
            cex = Counterexample(invariant, ENGINE, "stateful", tuple(self.model.example_call),
                                 program, model=self.model.name)
            self.found.append(Found(cex, None))
            return False
        return True

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
        again = self._retry(call, wanted, self._history)
        if again is not None:
            return call, again
        return call, None  # flaky: recorded by _retry, not a counterexample

    def _retry(self, call, wanted: str, history: list) -> Finding | None:
        """The failure once more in a fresh process, after the calls that came before it,
        with a larger limit; the finding if it fails again, else None (and it is flaky)."""
        limit = (self.process.call_seconds or 1.0) * RETRY_FACTOR
        stop = time.monotonic() + self._shrink_seconds()
        self.process.close()
        replayed = 0
        for earlier in history:
            if time.monotonic() > stop:
                break
            self.calls_tried += 1
            self.process.call(*self._sendable(earlier), seconds=limit)
            replayed += 1
        first = [f for f in judge_valid_call(self._last_outcome(call, limit), *call, model=self.model)
                 if f.invariant == wanted]
        after = f"after the {replayed} calls its process had answered before it" if replayed else "as the first call"
        if first:
            return first[0]._replace(message=(
                f"{first[0].message} (it did not fail again alone in a fresh process, but did in a fresh "
                f"process {after}, with a {limit:g} s limit)"
            ))
        self.flaky.append({
            "invariant": wanted,
            "size": self.model.size(call),
            "input_repr": self._repr(call),
            "message": (
                f"failed once, but not again in a fresh process: not alone, nor after the {replayed} "
                f"(of {len(history)}) calls its process had answered before it, with a {limit:g} s limit"
                if history else
                f"failed once, but not again in a fresh process, alone or with a {limit:g} s limit"
            ),
        })
        return None

    def _repr(self, call) -> str:
        """The call as runnable Python, as a counterexample would print it."""
        return Counterexample("", ENGINE, "conformance", tuple(call), "", model=self.model.name).input_repr()

    def _last_outcome(self, call, limit: float):
        self.calls_tried += 1
        return self.process.call(*self._sendable(call), seconds=limit)

    def _minimize_repeated(self, call, wanted: str):
        def fails(candidate) -> bool:
            return any(f.invariant == wanted for f in self._repeated(candidate))

        small = self.model.minimize_valid(call, fails, self._shrink_seconds())
        findings = [f for f in self._repeated(small) if f.invariant == wanted]
        if not findings:
            small = call
            findings = [f for f in self._repeated(call) if f.invariant == wanted]
        if not findings:
            self.flaky.append({
                "invariant": wanted, "size": self.model.size(call),
                "input_repr": self._repr(call),
                "message": "failed once in the repeated-call check, but not again in fresh processes",
            })
            return call, None
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

    def _search(self, check: str, strategy, judge, minimize, rule: str = "", per_example: int = 1,
                replay_as: str | None = None, drawn=None) -> bool:
        """Run one Hypothesis search until it fails, runs out of examples or of time;
        True when its last round ran every example it planned (``check`` names its example count)."""
        account = self._account
        replay_as = replay_as or check
        flaky_before = len(self.flaky)
        while not self._done():
            if len(self.flaky) - flaky_before >= FLAKY_PER_CHECK:
                account.stopped = "flaky"  # it keeps failing once and never again: stop here, unfinished
                return False
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
                if state["call"] is None:
                    account.tried += per_example
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
                state["history"] = list(getattr(self.process, "history", [None])[:-1])  # before this call
                state["since"] = state["since"] or time.monotonic()
                hanging = findings[0].invariant == "termination" and "did not return" in findings[0].message
                if hanging or time.monotonic() - state["since"] > HYPOTHESIS_SHRINK_SECONDS:
                    raise HandOver
                raise Falsified(findings[0].message)

            runner = settings(
                max_examples=self.examples[check],
                deadline=None,
                derandomize=False,  # seeded by --seed only, not by Hypothesis's ci profile (loaded when CI is set)
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
                    account.stopped = "deadline"
                    return False
            except HandOver:
                pass
            except Exception:  # Falsified, or Hypothesis's Flaky errors around it
                if state["call"] is None:
                    raise
            if state["call"] is None:
                return True  # every planned example ran
            self._history = state.get("history") or []
            small, finding = minimize(state["call"], state["locked"])
            self._history = []
            if finding is None:
                continue  # flaky: not a counterexample; search on
            self._record("deterministic" if finding.invariant == "deterministic" else replay_as, small, finding, rule)
        return False
