"""The Hypothesis engine: search for a call that breaks an invariant, then minimise it.

What it establishes: for the calls it tried, the target kept every invariant of the
registry (``spec.check`` on every result, plus validation, input_unchanged,
deterministic and termination).  It is a search, not a proof: a pass says that no
counterexample was found within the examples and the budget, which the summary names.

What it runs, in order, stopping at the first counterexample (``--all`` goes on):
1. counterexamples saved by earlier runs for this target, replayed first;
2. every class of bad input, systematically (``strategies.bad_calls``);
   then the bulk phase (proofs.search.bulk): many cheap seeded calls aimed at the
   corners of the coverage model, in batches, judged in this process; a finding goes
   through the same minimiser and record as one of the conformance search;
3. valid calls across the whole domain, steered by ``hypothesis.target`` towards long
   queues, ties, large gaps between the policies and the corners of the coverage model
   (a failure that does not repeat in a fresh process is reported as ``deterministic``);
4. repeated calls, each in a fresh process and after other calls, rejected ones
   included, and in fresh interpreters exec'd with other string-hash seeds
   (``deterministic``; ``proofs.sandbox.fresh_hash_seeds``: from ``--seed`` when given);
5. bad inputs combined at random (``strategies.corrupted_calls``);
6. for our own impl (through its factory) and for an online target, the stateful test
   through the online protocol (proofs.online.stateful).

Every valid call judged by the bulk phase or the conformance search is measured
against the coverage model (``self.coverage``: per corner, how many calls reached it).

Every check keeps an account (``CheckAccount``): how many calls it tried, how many it
planned, and whether it ran to its end.  A check that the deadline cut short, or that
never started, leaves the run ``incomplete`` (never a pass); ``budget_to_finish``
estimates, from the measured rates, the ``--budget`` that would have finished them.

Bounds: the target runs in a child process (proofs.sandbox) with a wall-clock
limit per call (a hang is a ``termination`` counterexample once it is confirmed at
the full limit in a fresh process) and a memory cap; the whole run stops at its
deadline, and minimisation has a deadline of its own.

What a failure is, and how it is confirmed: a call whose result (or exception) breaks
an invariant is an observation, a FAIL whether or not it happens again.  It is
minimised, then confirmed, in this order, and the counterexample says how
(``Counterexample.reproduced``, with the calls that came before it):
1. alone, as the first call of a fresh process (``alone``; its history is empty);
   a wrong result confirmed so is then tried in the fresh interpreters with other hash
   seeds: if one of them gives another result, it is reported as ``deterministic`` (the
   result depends on the interpreter's string-hash seed), with two seeds that disagree;
2. as the repeated-call check (``deterministic``), when it fails only after other calls;
3. in a fresh process after the calls its process had answered before it, with a limit
   ``RETRY_FACTOR`` times larger (``history``: that history is then shortened, calls
   dropped and the rest made as small as the model's smallest call, while it still
   fails, and saved with it);
4. none of these: still a FAIL, reported with the call, the result, the broken rule and
   "did not reproduce alone: the bug depends on earlier calls or on chance" (``no``),
   saved with the calls its process had answered before it.
Only a time-out or a death is not an observation (the machine may have stalled): one
that passes on the retry with the larger limit is ``flaky``, listed in ``flaky`` and in
the verdict line, never a counterexample, and the search goes on; after
``FLAKY_PER_CHECK`` of them a check stops, unfinished (a larger ``--call-timeout``, not a
larger budget, would let it finish).
"""

from __future__ import annotations

import copy
import glob
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from collections import Counter
from typing import Callable, NamedTuple

from hypothesis import HealthCheck, Phase, Verbosity, event, given, settings
from hypothesis import target as hypothesis_target
from hypothesis import strategies as st

from proofs import models
from proofs.counterexample import HISTORY_LIMIT, Counterexample
from proofs.sandbox import (DEFAULT_LOAD_SECONDS, DIED, FRESH_INTERPRETERS, TIMED_OUT, HarnessError, TargetProcess, fresh_hash_seeds,
                            harness_collector, run_once)
from proofs.search.coverage import Coverage
from proofs.search.judge import (Finding, judge_hash_seed_dependence, judge_invalid_call, judge_repeated_call,
                                 judge_seeded_pair, judge_valid_call)
from proofs.search.database import GuardedDatabase

ENGINE = "hypothesis"
HYPOTHESIS_SHRINK_SECONDS = 0.3  # then the deterministic minimiser takes over
HANG_PROBE_SECONDS = 0.25  # the limit of one probe while a hang is minimised (then confirmed at the full limit)
RETRY_FACTOR = 4  # a failure seen once only is retried with this many times the per-call limit
CONFIRMATIONS = 3  # fresh processes a result that breaks an invariant must break it in to be called "alone"
FLAKY_PER_CHECK = 3  # after this many flaky failures a check stops (and is unfinished)
CHECKS = ("replay", "validation", "bulk", "conformance", "deterministic", "corrupted_validation", "stateful")
EXAMPLES = {"conformance": 500, "bulk": 2000, "deterministic": 30, "validation": 200, "stateful": 60}
# target calls per example of the deterministic check (proofs.search.judge.judge_repeated_call): 7 in the
# harness's interpreter, one per fresh interpreter
REPEATED_CALLS = 7 + FRESH_INTERPRETERS
UNITS = {"stateful": "programs"}  # what a check counts; every other check counts calls to the target
OUR_FACTORIES = {"chapter": "impl:make_scheduler", "serving": "impl:make_serving"}  # our impl, online
STALLS = {TIMED_OUT: "time-out", DIED: "death"}  # the only failures that may be flaky
REPLAY_ATTEMPTS = 1000  # a failure that did not reproduce (``no``) is replayed at least this many times
REPLAY_PER_CALL = 7  # ... and at least this many times the calls its process had made when it was seen
HISTORY_ATTEMPTS = 20  # a failure that needed its history (or the repeated-call check) is replayed up to this many
# times, each from fresh processes: a history-dependent bug fails on the first, one that also needs chance may not


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


class _RootCause(Exception):
    """Raised by the predicate of a hang's minimisation: ``call`` returned a result that breaks
    ``invariant`` first, which shows what the hang hides; it is minimised towards instead."""

    def __init__(self, call, invariant: str) -> None:
        super().__init__(invariant)
        self.call, self.invariant = call, invariant


@dataclass
class CheckAccount:
    """How far one check got: what it tried, what it planned, whether it ran to its end."""

    check: str  # a name of CHECKS
    planned: int  # calls (programs, for the stateful test) the check means to try
    tried: int = 0
    finished: bool = False
    seconds: float = 0.0  # wall-clock time spent in the check
    stopped: str = ""  # why it did not finish: "deadline", "not started: deadline", "counterexample", "flaky"
    note: str = ""  # what else was run and not counted in ``tried`` (a stateful test's shrinking runs)

    @property
    def unit(self) -> str:
        return UNITS.get(self.check, "calls")

    def to_json(self) -> dict:
        data = {"check": self.check, "unit": self.unit, "tried": self.tried, "planned": self.planned,
                "finished": self.finished, "stopped": self.stopped, "seconds": round(self.seconds, 3)}
        return data | ({"note": self.note} if self.note else {})


def cut_short(accounts) -> list:
    """The accounts of checks the deadline cut short or never let start (a counterexample's stop is not one)."""
    return [a for a in accounts if not a.finished and a.stopped != "counterexample"]


UNSTARTED_COST = {"deterministic": 4, "stateful": 10}  # a check not started: its cost per unit, in calls measured
# (a repeated call starts two fresh processes per seven calls; a program makes dozens of calls)
BUDGET_MARGIN = 1.5  # the advice's margin over the estimate: later examples are larger, and the load varies


def budget_to_finish(accounts, budget: float, share: float = 1.0) -> int | None:
    """The ``--budget`` (whole seconds) that would let every cut-short check finish, estimated from
    the measured rate of each check (or, for one that never started, the rate of all calls measured);
    ``share`` is the fraction of ``--budget`` the Hypothesis engine gets.  None when nothing was cut
    short, or when a check stopped for a reason a larger budget does not remove (flaky time-outs):
    advice is given only when it would finish the run."""
    short = cut_short(accounts)
    if not short or any(not a.stopped.endswith("deadline") for a in short):
        return None
    tried = sum(a.tried for a in accounts if a.unit == "calls")
    seconds = sum(a.seconds for a in accounts if a.unit == "calls")
    overall = seconds / tried if tried else 1.0  # seconds per call; 1 s when nothing was measured
    extra = 0.0
    for account in short:
        rate = account.seconds / account.tried if account.tried else overall * UNSTARTED_COST.get(account.check, 1)
        extra += max(0, account.planned - account.tried) * rate
    return int(math.ceil(BUDGET_MARGIN * (budget + extra / share)))


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
        self._seen: Finding | None = None  # the finding the search saw first, before minimisation
        self._seen_at: dict | None = None  # how far into its process it was seen: {"calls", "seconds"}
        self._child = (None, 0.0)  # the current child's list of calls (its identity) and when it started
        self.bounds = self.model.new_bounds()  # the ranges of the valid calls actually made (every PASS line states them)
        self.statistics: dict[str, Counter] = {}  # per check: how often each interesting case was drawn
        # per corner of the coverage model (the caching ones too where caching is drawn): the judged calls reaching it
        self.coverage = Coverage(self.model.name, getattr(self.model, "draws_caching", False))
        # the PYTHONHASHSEED of each fresh interpreter the determinism check compares with (proofs.sandbox)
        self.hash_seeds = fresh_hash_seeds(seed) if isinstance(process, TargetProcess) else ()
        if self.hash_seeds:
            process.fresh_until = deadline  # their imports never hold the run past its deadline

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
            ("bulk", self._bulk),
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
        if check == "bulk" and not isinstance(self.process, TargetProcess):
            return 0  # a target in this process (the crosshair backend) has no child to batch calls to
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

    def _record(self, check: str, call, finding: Finding, rule: str = "", at: dict | None = None) -> None:
        self.found.append(Found(self.counterexample(check, call, finding, rule, at), finding.result))

    def counterexample(self, check: str, call, finding: Finding, rule: str = "", at: dict | None = None) -> Counterexample:
        """The counterexample of ``finding`` on ``call``, with what reproduces it (its history, how it
        was confirmed, the run's seed; ``at``: where in its process a failure that did not reproduce was seen)."""
        history = finding.history
        cut = 0
        if history is not None and len(history) > HISTORY_LIMIT:
            cut, history = len(history) - HISTORY_LIMIT, history[-HISTORY_LIMIT:]
        return Counterexample(finding.invariant, ENGINE, check, tuple(call), finding.message, rule, model=self.model.name,
                              history=None if history is None else tuple(tuple(c) for c in history),
                              reproduced=finding.reproduced, seed=self.seed, history_cut=cut, hash_seeds=finding.hash_seeds,
                              observed_at=at if finding.reproduced == "no" else None)

    # -- judging one call ------------------------------------------------------------

    def _track_child(self) -> None:
        """Note when the current child started (the first call sent to it), for ``_where``."""
        history = getattr(self.process, "history", None)
        if history is not None and history is not self._child[0]:
            self._child = (history, time.monotonic())

    def _where(self) -> dict:
        """How far into its process the call just collected was: the calls it answered, the seconds it has lived."""
        history = getattr(self.process, "history", None) or []
        return {"calls": len(history), "seconds": round(time.monotonic() - self._child[1], 3)}

    def _before(self) -> list:
        """The calls the current child answered before the one just collected."""
        return list(getattr(self.process, "history", [None])[:-1])

    def _valid(self, call, seconds: float | None = None, reference: dict | None = None, steer: bool = False) -> list[Finding]:
        """Judge a valid call; with ``steer``, the reference is computed (``model.steer``) while the child runs it."""
        self.calls_tried += 1
        self.bounds.add(call)
        self.process.submit(*self._sendable(call), seconds=seconds)
        self._track_child()
        if steer:
            try:
                reference = self.model.steer(call)
                reached = self.coverage.add(call, reference, "hypothesis")
                hypothesis_target(float(len(reached)), label="corners reached")
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

    def _invalid(self, call, rule: str, seconds: float | None = None) -> list[Finding]:
        self.calls_tried += 1
        self.process.submit(*self._sendable(call), seconds=seconds)
        self._track_child()
        return judge_invalid_call(self.process.collect(), rule)

    def _repeated(self, call, hash_seeds: tuple = ()) -> list[Finding]:
        """The deterministic check of one call; with a saved counterexample's two ``hash_seeds``, those seeds' fresh interpreters."""
        self.calls_tried += REPEATED_CALLS if len(hash_seeds) != 2 else 2
        self.bounds.add(call)
        if len(hash_seeds) == 2:
            return judge_seeded_pair(self.process, copy.deepcopy(call), hash_seeds, self.model)
        return judge_repeated_call(self.process, copy.deepcopy(call), self.model, self.hash_seeds)

    # -- the checks --------------------------------------------------------------------

    def _replay_saved(self) -> bool:
        """Counterexamples an earlier run saved for this target come first, each replayed exactly
        (its history, its program); False if one stopped the run."""
        for path in self._saved_files():
            self._account.tried += 1
            try:
                with open(path) as handle:
                    data = json.load(handle)
                if (data.get("target") != self.process.target.text or data.get("engine") != ENGINE
                        or data.get("model", models.DEFAULT) != self.model.name):
                    continue
                cex = Counterexample.from_json(data)
            except (OSError, ValueError, KeyError, TypeError, SyntaxError, RecursionError):
                continue  # not one of ours, or damaged: the search below covers it anyway
            if cex.check in ("conformance", "deterministic") and not self.model.is_valid(*cex.call):
                continue  # outside the domain the target declares (proofs.models.declared): never charged
            if cex.property in self.known or cex.check in ("step", "trace"):
                continue
            replayed = self.replay(cex, factory=data.get("factory"), attempts=1)
            wanted = [f for f in replayed.findings if f.invariant == cex.property]
            if wanted:
                finding = wanted[0]._replace(history=cex.history, reproduced=cex.reproduced or "alone")
                if cex.check == "stateful":
                    self.found.append(Found(cex._replace(message=finding.message, program=replayed.program or cex.program,
                                                         seed=self.seed), None))
                else:
                    self._record(cex.check, cex.call, finding, cex.rule, cex.observed_at)
                if self._done():
                    return False
        return True

    def _judge(self, check: str, call, rule: str = "", hash_seeds: tuple = ()) -> list[Finding]:
        if check == "validation":
            return self._invalid(call, rule)
        if check == "deterministic":
            return self._repeated(call, hash_seeds)
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
                self._seen, self._history, self._seen_at = findings[0], self._before(), self._where()
                small, finding = self._confirm_invalid(call, findings[0].invariant, rule)
                at, self._seen, self._history, self._seen_at = self._seen_at, None, [], None
                if finding is None:  # a time-out or a death that did not happen again: flaky
                    continue
                self._record("validation", small, finding, rule, at)
                if self._done():
                    return False
            self.progress("validation", self.calls_tried)
        return True

    def database_key(self, check: str) -> bytes:
        """The example database key of ``check``'s Hypothesis search: its examples are saved and replayed under it."""
        text = f"schedcheck:{self.process.target.text}:{self.model.name}:{check}:{sorted(self.known)}"
        return hashlib.sha384(text.encode()).digest()

    def _bulk(self) -> bool:
        """The bulk phase (proofs.search.bulk); a finding is minimised and recorded as a conformance one."""
        from hypothesis.database import choices_to_bytes

        from proofs.search.aim import choices_for
        from proofs.search.bulk import BulkPhase

        if not isinstance(self.process, TargetProcess):
            return True  # nothing planned
        if self.database is not None and next(iter(self.database.fetch(self.database_key("conformance"))), None):
            # what the example database holds for the conformance search comes first, as it did before the bulk phase
            self._search("conformance", self.model.valid_calls(), self._valid_steered, self._minimize_valid,
                         phases=(Phase.explicit, Phase.reuse))
            if self._done():
                return False
        phase = BulkPhase(self, self.examples["bulk"], self.seed)
        self.bulk = phase
        flaky_before = len(self.flaky)
        while not phase.run():
            if phase.found is None:
                self._account.stopped = phase.stopped or "deadline"
                return False
            call, finding, index, choices = phase.found
            phase.found = None
            if self.database is not None:  # the next run's conformance search replays it first
                self.database.save(self.database_key("conformance"), choices_to_bytes(
                    choices_for(self.model.name, index, choices, phase.caching)))
            # handed over as a conformance search's finding is: what was seen, the calls its child answered before it
            self._history, self._seen, self._seen_at = phase.history, finding, phase.seen_at
            try:
                small, again = self._minimize_valid(call, finding.invariant)
            finally:
                at = self._seen_at
                self._history, self._seen, self._seen_at = [], None, None
            if again is not None:
                self._record("deterministic" if again.invariant == "deterministic" else "conformance", small, again,
                             at=at)
                if self._done():
                    return False
            elif len(self.flaky) - flaky_before >= FLAKY_PER_CHECK:
                self._account.stopped = "flaky"
                return False
        return True

    def _confirm_invalid(self, call, wanted: str, rule: str):
        """Minimise an invalid call that broke ``wanted``, then confirm it alone in a fresh process;
        (call, finding), or (call, None) when it was a time-out or death that passed again (flaky)."""
        def fails(candidate) -> bool:
            return any(f.invariant == wanted for f in self._invalid(candidate, rule))

        small = self.model.minimize_invalid(call, fails, self._shrink_seconds())
        for candidate in (small, call):
            self.process.close()  # alone, as the first call of a fresh process
            again = [f for f in self._invalid(candidate, rule) if f.invariant == wanted]
            if again:
                return candidate, self._alone(candidate, wanted, again[0],
                                              lambda c, seconds=None: self._invalid(c, rule, seconds))
        seen = self._seen
        if seen is not None and seen.observed:
            return call, self._unreproduced(seen, self._history)
        what = STALLS.get(seen.kind, "failure") if seen is not None else "failure"
        self.flaky.append(self._flaky_entry(wanted, call, seen, f"an invalid call ({rule}): a {what} once, but not "
                                            "again alone in a fresh process"))
        return call, None

    def _conformance(self) -> bool:
        return self._search("conformance", self.model.valid_calls(), self._valid_steered, self._minimize_valid)

    def _deterministic(self) -> bool:
        late = getattr(self.process, "fresh_late", 0)
        finished = self._search(
            "deterministic", self.model.valid_calls(max_jobs=8), self._repeated, self._minimize_repeated, per_example=REPEATED_CALLS
        )
        if finished and getattr(self.process, "fresh_late", 0) > late:  # a fresh interpreter was not ready in time
            self._account.stopped = "deadline"
            return False
        return finished

    def _corrupted_validation(self) -> bool:
        def judge(call):
            assert not self.model.is_valid(*call), f"corrupted_calls drew a valid call: {call!r}"
            return self._invalid(call, "a corrupted input")

        def minimize(call, wanted):
            return self._confirm_invalid(call, wanted, "a corrupted input")

        return self._search(
            "validation", self.model.corrupted_calls(), judge, minimize, rule="a corrupted input", replay_as="validation"
        )

    def _stateful(self) -> bool:
        """The stateful test through the online protocol: the online target, or our impl's factory
        (the engine lives in a sandbox child; the test stops at the run's deadline)."""
        from proofs.online.stateful import run_stateful

        target = self._factory()
        policy = "none" if self.model.policy == "none" else "fcfs"
        account: dict = {}
        failure = run_stateful(target, self.model.name, self.examples["stateful"], self.seed, policy=policy,
                               call_seconds=self.process.call_seconds or 1.0, deadline=self.deadline,
                               account=account, domain=getattr(self.model, "declared", None),
                               load_seconds=getattr(self.process, "load_seconds", DEFAULT_LOAD_SECONDS))
        self._account.tried = account.get("programs", 0)
        notes = []
        if account.get("shrinking"):
            notes.append(f"the failing program was then run {account['shrinking']} more times by Hypothesis's "
                         "shrinking (not counted)")
        if account.get("discarded"):
            notes.append(f"{account['discarded']} more were started and discarded by Hypothesis, their data "
                         "exhausted (not counted)")
        self._account.note = "; ".join(notes)
        if account.get("flaky"):  # a time-out or death that passed on a retry: not a counterexample
            self.flaky += account["flaky"]
            self._account.stopped = "flaky"
            return False
        if failure is None and not account.get("finished", True):
            return False  # the deadline stopped it: not every planned program ran
        if failure is not None:
            cex = Counterexample(failure.invariant, ENGINE, "stateful", tuple(self.model.example_call),
                                 failure.text, model=self.model.name, history=(), reproduced=failure.reproduced,
                                 seed=self.seed, program=failure.program)
            self.found.append(Found(cex, None))
            return False
        return True

    def _factory(self, text: str | None = None):
        """The online factory the stateful test drives: ``text``, the online target, or our impl's factory."""
        from proofs.targets import parse_target

        if text:
            return parse_target(text)
        if getattr(self.model, "online", False):
            return self.process.target
        return parse_target(OUR_FACTORIES[self.model.name])

    # -- search and minimisation ---------------------------------------------------------

    def _shrink_seconds(self) -> float:
        return max(2.0, min(10.0, self.deadline + 5.0 - time.monotonic()))

    def _minimize_valid(self, call, wanted: str):
        """The smallest call whose root cause (its first finding not already known) is ``wanted``.

        A ``termination`` failure without a result (a hang, a death, a crash) shows no tick:
        whatever broke before it cannot be seen.  While it is minimised, a smaller call whose
        result breaks a rule shows it: that rule is the root cause (a leak at an abort's tick
        that starves a later request into a hang), and it is minimised towards instead."""
        hang = wanted == "termination"

        def fails_within(seconds):
            def fails(candidate) -> bool:
                cause = self._root_cause(self._valid(candidate, seconds))
                if cause is None:
                    return False
                if hang and cause.violation is not None and cause.invariant != wanted:
                    raise _RootCause(candidate, cause.invariant)
                return cause.invariant == wanted
            return fails

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
            try:
                small = self.model.minimize_valid(start, fails_within(seconds), minimising, coarse=hang)
            except _RootCause as root:
                return self._minimize_valid(root.call, root.invariant)
            self.process.close()  # judge the minimal call in a fresh process: nothing came before
            findings = [f for f in self._valid(small) if f.invariant == wanted]
            if findings:
                finding = self._alone(small, wanted, findings[0], self._valid)
                if finding is not None and finding.reproduced == "alone" and finding.result is not None and self.hash_seeds:
                    # a wrong result, alone, in the harness's interpreter: the same in fresh ones with other hash seeds?
                    self.calls_tried += len(self.hash_seeds)
                    finding = judge_hash_seed_dependence(self.process, small, finding, self.hash_seeds, self.model)
                return small, finding
            larger = self.model.one_step_larger(small)
            start = larger if fails_within(None)(larger) else call
        # it fails only after earlier calls: that is a claim about history, if the repeated-call check confirms it
        for candidate in (small, call):
            if any(f.invariant == "deterministic" for f in self._repeated(candidate)):
                repeated, finding = self._minimize_repeated(candidate, "deterministic")
                if finding is not None:
                    return repeated, finding
                break  # chance made the repeats differ once: what was seen is judged below
        return call, self._retry(call, wanted, self._history, self._seen)

    def _root_cause(self, findings: list[Finding]) -> Finding | None:
        """The first finding of a call not already reported (the judge lists them root cause first), or None."""
        known = self.known
        return next((f for f in findings if f.invariant not in known), None)

    def _retry(self, call, wanted: str, history: list, seen: Finding | None = None) -> Finding | None:
        """The failure once more in a fresh process, after the calls that came before it, with a
        larger limit.  The finding if it fails again (its history then shortened: ``_shrink_history``);
        else, when what was first ``seen`` is an observation (a result, an exception), that finding,
        saying it did not reproduce; else None: a time-out or death that passed, flaky (in ``flaky``)."""
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
        findings = judge_valid_call(self._last_outcome(call, limit), *call, model=self.model)
        first = [f for f in findings if f.invariant == wanted] or [f for f in findings if f.observed]
        if first:
            kept = list(history[:replayed])
            if first[0].observed and kept:
                kept = self._shrink_history(call, first[0].invariant, kept, limit)
                if not self._fails_after(call, first[0].invariant, kept, limit):  # once more: or it was chance
                    return self._unreproduced(first[0], history)
            if kept:
                how = (f"after {len(kept)} calls saved with it, shortened from the {len(history)} its process had "
                       "answered before it" if len(kept) < len(history) else
                       f"after the {len(kept)} calls its process had answered before it, saved with it")
            else:
                how = "as its first call"
            return first[0]._replace(
                message=f"{first[0].message} (it did not fail again alone in a fresh process, but did in a fresh "
                        f"process with a {limit:g} s limit, {how})",
                history=tuple(kept), reproduced="history" if kept else "alone")
        if seen is not None and seen.observed:
            return self._unreproduced(seen, history)
        what = STALLS.get(seen.kind, "failure") if seen is not None else "failure"
        self.flaky.append(self._flaky_entry(wanted, call, seen, (
            f"a {what} once, but not again in a fresh process: not alone, nor after the {replayed} "
            f"(of {len(history)}) calls its process had answered before it, with a {limit:g} s limit"
            if history else
            f"a {what} once, but not again in a fresh process, alone or with a {limit:g} s limit"
        )))
        return None

    def _alone(self, call, wanted: str, finding: Finding, judge) -> Finding | None:
        """``finding``, seen as the first call of a fresh process, confirmed so ``CONFIRMATIONS`` times in all:
        ``alone`` when every one failed, else ``no`` (it failed in some fresh processes only: chance), saying
        how many.  A time-out is instead tried once more with a limit ``RETRY_FACTOR`` times larger: it is a
        hang only if it does not return then either; if it returns, its result is judged, and a call that was
        merely slow (a loaded machine) is flaky: None, recorded in ``flaky``.  A death is confirmed once."""
        if finding.kind == TIMED_OUT:
            own = self.process.call_seconds or 1.0  # the retry's limit: larger, but never past the run's bound
            limit = max(own, min(own * RETRY_FACTOR, self.deadline + 5.0 - time.monotonic()))
            self.process.close()
            again = judge(call, limit)
            if any(f.invariant == wanted and f.kind == TIMED_OUT for f in again):
                return finding._replace(message=f"{finding.message}, nor within {limit:g} s in another fresh process",
                                        history=(), reproduced="alone")
            broken = [f for f in again if f.observed]
            if broken:  # slow, and then wrong: what it returned is the finding
                return self._alone(call, broken[0].invariant, broken[0], judge)
            self.flaky.append(self._flaky_entry(wanted, call, finding, (
                f"{finding.message} in a fresh process, but returned a correct result within {limit:g} s in "
                "another: slow, not hung")))
            return None
        if not finding.observed:
            return finding._replace(history=(), reproduced="alone")
        failed = 1
        for _ in range(CONFIRMATIONS - 1):
            self.process.close()
            failed += any(f.invariant == wanted for f in judge(call))
        if failed == CONFIRMATIONS:
            return finding._replace(history=(), reproduced="alone")
        self._seen_at = {"calls": 1, "seconds": 0.0}
        return finding._replace(
            message=f"{finding.message} (did not reproduce alone: it failed in {failed} of {CONFIRMATIONS} fresh "
                    "processes as their first call, so the bug depends on chance)", history=(), reproduced="no")

    def _flaky_entry(self, wanted: str, call, seen: Finding | None, message: str) -> dict:
        """One flaky failure, as the report lists it: a time-out or a death that did not happen again."""
        return {"invariant": wanted, "kind": STALLS.get(seen.kind, "failure") if seen is not None else "failure",
                "size": self.model.size(call), "input_repr": self._repr(call), "message": message}

    def _unreproduced(self, seen: Finding, history: list) -> Finding:
        """What was seen, as a FAIL that did not reproduce: the call's result and broken rule, and the calls before it."""
        return seen._replace(
            message=f"{seen.message} (did not reproduce alone: the bug depends on earlier calls or on chance; "
                    f"seen after the {len(history)} calls its process had answered before it, saved with it)",
            history=tuple(history), reproduced="no")

    def _shrink_history(self, call, wanted: str, history: list, limit: float) -> list:
        """The fewest calls of ``history``, each as small as the model's smallest call where possible,
        after which ``call`` still breaks ``wanted`` in a fresh process (within the minimiser's time)."""
        stop = time.monotonic() + self._shrink_seconds()

        def fails(candidate: list) -> bool:
            return self._fails_after(call, wanted, candidate, limit)

        chunks = 2
        while history and time.monotonic() < stop:
            size = max(1, len(history) // chunks)
            for begin in range(0, len(history), size):
                candidate = history[:begin] + history[begin + size:]
                if time.monotonic() < stop and fails(candidate):
                    history, chunks = candidate, max(2, chunks - 1)
                    break
            else:
                if size == 1:
                    break
                chunks = min(2 * chunks, len(history))
        smallest = tuple(self.model.example_call)
        for index in range(len(history)):
            if time.monotonic() >= stop:
                break
            if tuple(history[index]) != smallest:
                candidate = history[:index] + [smallest] + history[index + 1:]
                if fails(candidate):
                    history = candidate
        return history

    def _fails_after(self, call, wanted: str, history: list, limit: float) -> bool:
        """Whether ``call`` breaks ``wanted`` in a fresh process after the calls ``history``."""
        self.process.close()
        for earlier in history:
            self.calls_tried += 1
            self.process.call(*self._sendable(earlier), seconds=limit)
        return any(f.invariant == wanted for f in judge_valid_call(self._last_outcome(call, limit), *call,
                                                                   model=self.model))

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
        if findings:  # a claim about history: the calls before are the check's own (``calls_between``)
            return small, findings[0]._replace(history=(), reproduced="history")
        seen = self._seen
        if seen is not None and seen.invariant != wanted:
            return call, None  # the search saw another rule broken (_minimize_valid): its caller judges that
        if seen is not None and seen.observed:
            return call, seen._replace(
                message=f"{seen.message} (did not reproduce when the repeated-call check ran again: the bug "
                        "depends on chance)", history=(), reproduced="no")
        self.flaky.append(self._flaky_entry(wanted, call, seen,
                                            "failed once in the repeated-call check, but not again in fresh processes"))
        return call, None

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
                replay_as: str | None = None, drawn=None, phases=None) -> bool:
        """Run one Hypothesis search until it fails, runs out of examples or of time;
        True when it ran every example it planned (``check`` names its example count).  After
        a flaky time-out it goes on with the examples it has left, so ``tried`` never passes ``planned``."""
        account = self._account
        replay_as = replay_as or check
        flaky_before = len(self.flaky)
        while not self._done():
            if len(self.flaky) - flaky_before >= FLAKY_PER_CHECK:
                account.stopped = "flaky"  # it keeps timing out once and never again: stop here, unfinished
                return False
            left = self.examples[check] - account.tried // per_example
            if left <= 0:
                return True  # every planned example ran (in rounds, around a flaky time-out)
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
                if state["locked"] is not None and findings and findings[0].invariant != state["locked"]:
                    findings = []  # it fails, but its root cause is another rule: not this failure
                if not findings:
                    if state["since"] is not None and time.monotonic() - state["since"] > HYPOTHESIS_SHRINK_SECONDS:
                        stop(HandOver)
                    return
                state["locked"] = state["locked"] or findings[0].invariant
                if state["call"] is None or findings[0].observed or not state["finding"].observed:
                    # what the search saw: a result or exception is kept over a later time-out
                    state["call"], state["finding"] = copy.deepcopy(call), findings[0]
                    state["history"], state["at"] = self._before(), self._where()  # before this call
                state["since"] = state["since"] or time.monotonic()
                hanging = findings[0].invariant in ("termination", "validation") and "did not return" in findings[0].message
                if hanging or time.monotonic() - state["since"] > HYPOTHESIS_SHRINK_SECONDS:
                    raise HandOver
                raise Falsified(findings[0].message)

            runner = settings(
                max_examples=left,
                deadline=None,
                derandomize=False,  # seeded by --seed only, not by Hypothesis's ci profile (loaded when CI is set)
                database=database,
                suppress_health_check=list(HealthCheck),
                report_multiple_bugs=False,
                verbosity=Verbosity.quiet,
                print_blob=False,
                backend=self.backend,
                **({"phases": phases} if phases is not None else {}),
            )(given(strategy)(test))
            runner._hypothesis_internal_database_key = self.database_key(check)  # the bulk phase saves under it too
            if self.seed is not None:
                # not hypothesis.seed(), which also switches the example database off: a
                # seeded run (the ci profile) must still replay what other runs found
                runner._hypothesis_internal_use_seed = self.seed + len(self.flaky) - flaky_before
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
            self._history, self._seen, self._seen_at = state.get("history") or [], state["finding"], state.get("at")
            try:
                small, finding = minimize(state["call"], state["locked"])
            finally:
                at = self._seen_at
                self._history, self._seen, self._seen_at = [], None, None
            if finding is None:
                continue  # a flaky time-out or death: not a counterexample; search on
            self._record("deterministic" if finding.invariant == "deterministic" else replay_as, small, finding, rule, at)
        return False

    # -- replay ------------------------------------------------------------------------

    def replay(self, cex: Counterexample, factory: str | None = None, attempts: int | None = None) -> "Replayed":
        """Run ``cex`` again exactly as it was saved: in a fresh process, its history, then its call
        (the repeated-call check for ``deterministic``; its program on a fresh engine for ``stateful``).

        How often depends on how it reproduced when found (``attempts`` caps it): ``alone``, once;
        ``history``, up to ``HISTORY_ATTEMPTS`` times, each in a fresh process after its history; ``no``
        (it did not reproduce), in one process after its history, again and again until it fails, or
        until it has had ``REPLAY_ATTEMPTS`` attempts (at least ``REPLAY_PER_CALL`` times the calls its
        process had made when it was seen) and as long as that process had lived when it was seen (an
        age), or until the deadline."""
        started = time.monotonic()
        seen = cex.observed_at or {}
        if cex.reproduced == "no":
            wanted = max(REPLAY_ATTEMPTS, REPLAY_PER_CALL * int(seen.get("calls", 0)))
            if cex.check in ("deterministic", "stateful"):
                wanted = REPLAY_ATTEMPTS // 10  # each attempt is a whole check or program
        elif cex.reproduced == "history":
            wanted = HISTORY_ATTEMPTS
        else:
            wanted = 1
        wanted = min(wanted, attempts) if attempts is not None else wanted
        lasting = 1.5 * float(seen.get("seconds", 0.0)) if cex.reproduced == "no" else 0.0
        if cex.check == "stateful":
            return self._replay_program(cex, factory, wanted, started)
        made, findings = 0, []
        while not findings:
            if made == 0 or (cex.reproduced != "no" and cex.check != "deterministic"):
                self.process.close()  # a fresh process, its history, then the call
                for earlier in cex.history or ():
                    self.process.call(*self._sendable(earlier))
            made += 1
            findings = self._judge(cex.check, cex.call, cex.rule, cex.hash_seeds)
            if time.monotonic() >= self.deadline or (made >= wanted and time.monotonic() - started >= lasting):
                break
        return Replayed(findings, made, time.monotonic() - started, len(cex.history or ()))

    def _replay_program(self, cex: Counterexample, factory: str | None, wanted_attempts: int, started: float) -> "Replayed":
        from proofs.online.stateful import run_program

        if cex.program is None:
            return Replayed([], 0, 0.0, 0, unreadable=True)
        policy = "none" if self.model.policy == "none" else "fcfs"
        made, failure = 0, None
        while failure is None and made < wanted_attempts and time.monotonic() < self.deadline:
            made += 1
            failure = run_program(self._factory(factory), self.model.name, list(cex.program), policy,
                                  call_seconds=self.process.call_seconds or 1.0,
                                  load_seconds=getattr(self.process, "load_seconds", DEFAULT_LOAD_SECONDS))
        if failure is None:
            return Replayed([], made, time.monotonic() - started, 0)
        return Replayed([Finding(failure.invariant, failure.text)], made, time.monotonic() - started, 0,
                        program=failure.program)


class Replayed(NamedTuple):
    """What replaying one counterexample showed."""

    findings: list  # the invariants broken on the attempt that failed ([] if none did)
    attempts: int  # how many times its call (or program) ran
    seconds: float
    history: int  # calls of history replayed before the first attempt
    program: tuple | None = None  # a stateful replay: the program that failed, as data
    unreadable: bool = False  # a stateful counterexample whose program could not be read (format 1)
