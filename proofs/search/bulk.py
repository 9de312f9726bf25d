"""The bulk phase: many cheap calls aimed at the corners, sent to the sandboxed target in batches, judged in the parent.

What it establishes: for every call it made, the target kept every invariant of the
registry, as the conformance search would have judged it; it reports, per corner of
the coverage model (proofs.search.coverage), how many of its calls reached it.  Like
every search it is not a proof.

How: calls are built outside Hypothesis's per-example machinery, by the recipes of
proofs.search.aim driven by a seeded ``random.Random`` (``RandomChooser``): a call
costs microseconds to build, where a Hypothesis example costs milliseconds
(docs/performance.md).  Each call built is sent twice: as built, and as a *variant*
with the same requests (jobs) in another container and another caller's order (its
last two choices changed, ``aim.variant``).  Both have the same reference run, since the
spec sorts the requests and reads them as plain dicts (tests/test_coverage.py checks
``spec.run`` and ``spec.serving.run`` give equal results on both, for every recipe), so
one reference run judges two calls; the variant probes what a scheduler does with the
caller's order and containers.  A batch of calls goes to the target's own sandbox child in one
message; while the child runs them, the parent computes their reference runs.  The
child answers, per call, the result encoded by ``marshal`` (format 2: plain data
only, no references, so equal plain data of equal types in the same key order gives
equal bytes) and written as hex text, or why it has none: a batch's answer is a list
of strings and numbers, plain data for any transport of the sandbox (bytes would not
be one).

Judging (the soundness argument).  Every invariant of the registry is a property of
the call and the result, and the reference run keeps every one of them: the test suite
checks ``spec.check`` / ``spec.serving.check`` of the reference on thousands of calls
(tests/test_properties.py, tests/test_serving_spec.py) and in every correct-corpus
campaign.  A result whose encoding is byte for byte the reference's is the same plain
data, of the same types (marshal tells an int from a bool or a float, a list from a
tuple), as the reference, so it keeps every invariant too, and the full oracle has
nothing to find: the bulk phase accepts it without running it.  This holds under
``--policy none`` as well (the reference keeps the policy-free invariants).  Any other
answer (different bytes, an exception, a result marshal cannot encode, a call slower
than the per-call limit, a batch that mutated its input, died, hung or answered
garbage) is never decoded here: each such call runs again alone through the ordinary
path (``TargetProcess.call`` on the search's own child, then ``judge_valid_call`` with
the full oracle), so what the parent reads from the target crosses the sandbox's own
transport only, and every finding, message and verdict is the ordinary one.  The
bytes are compared, never decoded: a hostile target controls them.

A finding is handed to the ordinary minimiser and recorded as a ``conformance``
counterexample, exactly as a failing Hypothesis example is (``Search._minimize_valid``:
minimised, confirmed in a fresh process, flaky if it does not fail again), and the
choices that built it are saved in the example database under the conformance
search's key (``aim.choices_for``), so the next run's Hypothesis search replays it
first, through the ordinary path.

Bounds: the per-call limit holds inside a batch: the child arms an alarm per call, so a
call that overruns it in Python code is interrupted and answered ``SLOW``, and one
that returns late is answered so too; such a call runs again alone, and if it passes
there its time-out is still an observation, handed to the ordinary minimiser like a
conformance search's (confirmed at the full limit in a fresh process, else flaky).  A
whole batch has a wall-clock limit of twice the per-call limit plus four times its
expected length; a batch that meets it (a hang in C code, where no alarm runs) has
its calls run alone, and the next batches are sized for calls that slow.  A batch
whose child died, that changed its input or that answered garbage has its calls run
alone too; if every one keeps every invariant, a batch whose child died is noted as
flaky (not attributed to a call, never a counterexample), while one that returned
wrongly (changed its input, garbage) stops the phase unfinished: a wrong result is
never forgiven, so the run is not a pass.  A time-out seen in a batch is handed over
as a time-out (flaky if it passes at the full limit); any other finding as the result
or exception it is (a FAIL, ``did not reproduce`` if it does not fail again).  Calls that run again are taken
smallest first, so that a finding starts as small as the batch allows.  Batches grow
from 8 calls until one takes about a quarter of the per-call limit (at most 256).  The
phase stops at its planned number of calls, at the run's deadline, or at the first
finding (after which the engine hands it over and, with ``--all``, goes on).

A wrong answer that shows only in the bulk phase's own child (after the calls that
child had answered) and not when the call runs again in the search's child is still
a finding: the parent then asks that child for what the call gave in the batch, as
plain data through the sandbox's own transport (never decoded from the bytes), judges
it with the full oracle, and hands it over with the calls the child had answered
before it as its history (a result is a fact: ``did not reproduce`` at worst, never
flaky).
"""

from __future__ import annotations

import functools
import marshal
import random
import signal
import time

from proofs.sandbox import RAISED, RETURNED, TIMED_OUT, Outcome, TargetProcess
from proofs.search import aim, coverage
from proofs.search.judge import Finding, judge_valid_call

LARGE_SHARE = 4  # a small recipe's weight against a large one's
MARSHAL_FORMAT = 2  # no back-references: the bytes depend on the data, never on object identity
FIRST_BATCH = 8
MAX_BATCH = 256
BATCH_SHARE = 0.25  # a batch should take about this share of the per-call limit
SLOW, RAISED_IN_BATCH, UNSENDABLE = "slow", "raised", "unsendable"


# -- the child's side ---------------------------------------------------------------------------------


class BatchAdapter:
    """Turns the target loaded in the sandbox child into a runner of batches (``inner`` first: an online driver).

    A module-level class, so that a sandbox that pickles its adapter (to send it to a
    zygote, say) can send this one."""

    def __init__(self, inner=None) -> None:
        self.inner = inner

    def __call__(self, function):
        if self.inner is not None:
            function = self.inner(function)
        return functools.partial(run_batch, function)


class _Overrun(BaseException):
    """Raised in the child by the per-call alarm when a call of a batch overruns the per-call limit."""


def _overrun(signum, frame):
    raise _Overrun


_KEPT: list = []  # in the child: what each call of the last batch gave, for ``run_batch(None, positions)``


def run_batch(function, calls, seconds):
    """In the child: each call of ``calls`` in order, answered as ``(RETURNED, marshal bytes as hex)``,
    ``(SLOW, seconds)`` (it overran the per-call limit: an alarm interrupts a call that runs Python code, the
    batch's own limit ends one that does not), ``(RAISED_IN_BATCH, exception class name)`` or
    ``(UNSENDABLE, "")``; then the child's CPU seconds for the batch.

    ``run_batch(function, None, positions)``: what those calls of the last batch gave, as plain data through
    the sandbox's own transport: ``[(RETURNED, result)]`` or ``[(RAISED_IN_BATCH, "Type: message")]``."""
    if calls is None:
        return [_KEPT[position] if 0 <= position < len(_KEPT) else (UNSENDABLE, "") for position in seconds]
    clock = time.perf_counter
    answers = []
    _KEPT.clear()
    cpu = time.process_time()
    previous = signal.signal(signal.SIGALRM, _overrun)
    try:
        for call in calls:
            started = clock()
            try:
                signal.setitimer(signal.ITIMER_REAL, seconds)
                try:
                    result = function(*call)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except _Overrun:
                answers.append((SLOW, clock() - started))
                _KEPT.append((SLOW, ""))
                continue
            except BaseException as error:  # the target may raise anything: the ordinary path judges it again
                answers.append((RAISED_IN_BATCH, type(error).__name__))
                _KEPT.append((RAISED_IN_BATCH, f"{type(error).__name__}: {str(error)[:500]}"))
                continue
            _KEPT.append((RETURNED, result))
            spent = clock() - started
            if spent > seconds:
                answers.append((SLOW, spent))
                continue
            try:
                answers.append((RETURNED, marshal.dumps(result, MARSHAL_FORMAT).hex()))
            except BaseException:  # not plain data (a subclass, an object, a cycle): the ordinary transport judges it
                answers.append((UNSENDABLE, ""))
    finally:
        signal.signal(signal.SIGALRM, previous)
    return answers, time.process_time() - cpu


# -- the parent's side -----------------------------------------------------------------------------------


def caching_recipe() -> "aim.Recipe":
    """The bulk phase's recipe of calls with prefix caching, for a target the search draws caching for."""
    from proofs.search.serving import build_caching_call

    return aim.Recipe("prefix_caching", build_caching_call)


class BulkPhase:
    """One bulk phase of a verify run against ``search``'s target (proofs.search.engine.Search)."""

    def __init__(self, search, planned: int, seed: int | None, max_size: int | None = None) -> None:
        self.search = search
        self.model = search.model
        self.planned = planned
        self.seed = random.randrange(2**32) if seed is None else seed
        book = aim.recipes(self.model.name)
        # a large recipe (more than 30 jobs) is drawn a quarter as often as a small one: its calls cost 10x more
        self.recipes = [(index, recipe) for index, recipe in enumerate(book)
                        if max_size is None or max_size > 30 or not recipe.large
                        for _ in range(1 if recipe.large else LARGE_SHARE)]
        self.caching = bool(getattr(self.model, "draws_caching", False))
        if self.caching:  # calls with prefix caching from prompt families: two in five, as valid_calls draws them
            self.recipes += [(aim.CACHING_RECIPE, caching_recipe())] * (2 * len(self.recipes) // 3)
        self.rng = random.Random(self.seed)
        self.batch = FIRST_BATCH
        self.per_call = 0.005  # the child's expected seconds per call, measured batch by batch
        self.calls = 0  # calls judged
        self.rerun = 0  # calls judged again through the ordinary path
        self.references = 0  # reference runs computed (a call and its variant share one)
        self.variants = True  # send every call built in a second container and order too
        self.history: list = []  # the calls the search's own child answered before a finding (for a retry after them)
        self.child_seconds = 0.0  # the child's CPU time spent in batches
        self.found = None  # (call, finding, recipe index, choices) of the first finding
        self.seen_at = None  # how far into the search's child that finding was seen ({"calls", "seconds"})
        self.stopped = ""  # why the phase stopped short without a finding, when not the deadline

    def _process(self) -> TargetProcess:
        """A sandbox child of its own for the batches, made like the search's (same target, limits and shape)."""
        search = self.search
        same = {name: getattr(search.process, name) for name in ("memory_bytes", "load_seconds")
                if hasattr(search.process, name)}
        return TargetProcess(search.process.target, call_seconds=search.process.call_seconds or 1.0,
                             shape=self.model.shape, adapter=BatchAdapter(getattr(self.model, "adapter", None)), **same)

    def _build(self) -> list:
        """A call built by a recipe, and its variant: [(call, recipe index, choices), ...], one reference run for all.

        For a target that declares its domain (proofs.models.declared), each is moved inside it as the
        Hypothesis search's calls are (``fit``), and a recipe whose call cannot be is drawn again."""
        declared = getattr(self.model, "declared", None) is not None
        for _ in range(100):
            index, recipe = self.recipes[self.rng.randrange(len(self.recipes))]
            chooser = aim.RandomChooser(self.rng)
            group = [(recipe.build(chooser), index, chooser.choices)]
            if self.variants and chooser.arranged is not None:
                order = (chooser.choices[-1] + 1 + self.rng.randrange(aim.ORDERS - 1)) % aim.ORDERS  # another order
                call, choices = aim.variant(chooser, self.rng.randrange(aim.KINDS), order)
                group.append((call, index, choices))
            if not declared:
                return group
            group = [(self.model.fit(call), index, choices) for call, index, choices in group]
            if all(self.model.is_valid(*call) for call, _, _ in group):
                return group
        raise RuntimeError("the bulk phase's recipes built no call inside the declared domain in 100 tries")

    def run(self) -> bool:
        """Run batches until ``planned`` calls are judged (True), or the deadline or a finding stops it (False)."""
        search = self.search
        limit = search.process.call_seconds or 1.0
        with self._process() as process:
            sent, born = [], time.monotonic()  # the calls this bulk child answered before the batch, since when
            while self.calls < self.planned:
                if time.monotonic() >= search.deadline:
                    return False
                groups, size = [], 0
                while size < min(self.batch, self.planned - self.calls):
                    groups.append(self._build()[:self.planned - self.calls - size])
                    size += len(groups[-1])
                built = [entry for group in groups for entry in group]
                calls = [entry[0] for entry in built]
                seconds = min(2 * limit + 4 * size * self.per_call, max(0.1, search.deadline + 1.0 - time.monotonic()))
                started = time.monotonic()
                process.submit(calls, limit, seconds=seconds)
                references, expected, reached = [], [], []
                for group in groups:  # one reference run, its encoding and its corners per group
                    reference = self.model.reference(group[0][0])
                    encoded = marshal.dumps(reference, MARSHAL_FORMAT).hex()
                    corners = coverage.reached(self.model.name, group[0][0], reference, search.coverage.caching)
                    references += [reference] * len(group)
                    expected += [encoded] * len(group)
                    reached += [corners] * len(group)
                self.references += len(groups)
                outcome = process.collect()
                answers = self._answers(outcome, size)
                if answers is not None:
                    self._measure(answers[1], size, time.monotonic() - started)
                    answers = answers[0]
                # every call whose answer is not the reference's bytes runs again alone, the smallest first (so
                # that a finding is as small as the batch allows); the first finding ends the batch
                others = [position for position in range(size) if not (
                    answers is not None and answers[position][0] == RETURNED and answers[position][1] == expected[position])]
                others.sort(key=lambda position: (self.model.size(calls[position]), position))
                judged = set(range(size)) - set(others)
                for position in others:
                    call, index, choices = built[position]
                    findings = self._ordinary(call, references[position])
                    judged.add(position)
                    if not findings and answers is not None and answers[position][0] in (RETURNED, RAISED_IN_BATCH):
                        # it passed alone, but what the batch's child gave is an observation too: judged in full
                        findings = self._kept(process, position, call, references[position])
                        if findings:
                            self.history = sent + calls[:position]
                            self.seen_at = {"calls": len(self.history) + 1,
                                            "seconds": round(time.monotonic() - born, 3)}
                    if not findings and answers is not None and answers[position][0] == SLOW:
                        # a time-out seen in the batch is an observation, as in the conformance search: the
                        # ordinary minimiser confirms it at the full limit in a fresh process, or calls it flaky
                        findings = [Finding("termination", f"the call did not return within {limit:g} s "
                                                           "(in a batch of the bulk phase)", kind=TIMED_OUT)]
                    if findings:
                        self._count([built[p] for p in sorted(judged)], [reached[p] for p in sorted(judged)])
                        self.found = (call, findings[0], index, choices)
                        return False
                self._count(built, reached)
                search.progress("bulk", search.calls_tried)
                if answers is None and outcome.kind == TIMED_OUT:
                    # no call was seen to overrun its own limit (the alarm would have said): the batch was
                    # only longer than its own limit, so the next ones are sized for calls this slow
                    self.per_call = max(self.per_call, seconds / size)
                    self.batch = max(1, min(self.batch, int(BATCH_SHARE * limit / self.per_call)))
                elif answers is None and not self._unattributed(outcome, size):
                    return False  # a wrong answer of the batch that no call gave alone: not a pass, never flaky
                sent += calls
                if answers is None or any(answer[0] == SLOW for answer in answers):
                    process.close()  # a batch that died, hung, overran or answered garbage: the next one starts afresh
                    sent, born = [], time.monotonic()
        return True

    def _unattributed(self, outcome: Outcome, size: int) -> bool:
        """A batch whose child died, that changed its input or answered garbage, every call of which then kept
        every invariant alone.  A death is noted as flaky (a death that did not come back), never a counterexample;
        a batch that returned wrongly (changed its input, garbage) is a wrong result no call gave alone: never
        flaky, the phase stops unfinished (False), so the run is not a pass."""
        if outcome.kind == RETURNED:
            what = "changed its input" if outcome.mutated else "answered something other than a batch's answers"
            self.stopped = f"a batch of {size} calls {what}, no call alone"
            return False
        invariant, what = "termination", f"ended: {outcome.error or outcome.kind}"
        self.search.flaky.append({
            "invariant": invariant, "kind": "time-out" if outcome.kind == TIMED_OUT else "death", "size": size,
            "input_repr": f"a batch of {size} calls of the bulk phase",
            "message": f"a batch of {size} calls {what}, but each call alone kept every invariant: not attributed "
                       "to a call, not counted"})
        return True

    def _answers(self, outcome: Outcome, size: int):
        """The batch's (answers, child CPU seconds), or None when it must be judged call by call."""
        if outcome.kind != RETURNED or outcome.mutated or not outcome.sendable:
            return None
        value = outcome.result
        if not (isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], (list, tuple))
                and len(value[0]) == size and isinstance(value[1], float)):
            return None
        if not all(isinstance(answer, (list, tuple)) and len(answer) == 2 and type(answer[0]) is str
                   for answer in value[0]):
            return None
        return list(value[0]), value[1]

    def _measure(self, child_cpu: float, size: int, wall: float) -> None:
        """Learn the child's seconds per call, and size the next batch to a quarter of the per-call limit."""
        self.child_seconds += child_cpu
        limit = self.search.process.call_seconds or 1.0
        self.per_call = max(1e-5, 0.5 * self.per_call + 0.5 * wall / size)
        self.batch = max(1, min(MAX_BATCH, int(BATCH_SHARE * limit / self.per_call)))

    def _ordinary(self, call, reference) -> list:
        """The call alone through the ordinary path: the search's own child, the full oracle."""
        search = self.search
        self.rerun += 1
        search.calls_tried += 1
        outcome = search.process.call(*call)
        search._track_child()
        self.history = list(getattr(search.process, "history", [None])[:-1])  # what that child answered before it
        self.seen_at = search._where()
        ignore = search.known
        return [f for f in judge_valid_call(outcome, *call, reference=reference, model=self.model)
                if f.invariant not in ignore]

    def _kept(self, process: TargetProcess, position: int, call, reference) -> list:
        """What the batch's child gave for the call at ``position`` of its last batch, fetched through the
        sandbox's own transport as plain data and judged with the full oracle: a wrong result or an exception
        seen there is a finding (a fact, whether or not it happens again), never decoded from its bytes."""
        process.submit(None, [position], seconds=max(1.0, self.search.process.call_seconds or 1.0))
        outcome = process.collect()
        if not (outcome.sendable and isinstance(outcome.result, list) and len(outcome.result) == 1
                and isinstance(outcome.result[0], (list, tuple)) and len(outcome.result[0]) == 2):
            return []  # the child cannot say: the ordinary path's verdict stands
        kind, value = outcome.result[0]
        if kind == RETURNED:
            given = Outcome(RETURNED, result=value)
        elif kind == RAISED_IN_BATCH and isinstance(value, str):
            given = Outcome(RAISED, error=value, error_type=value.split(":", 1)[0])
        else:
            return []
        ignore = self.search.known
        return [f._replace(message=f"{f.message} (in a batch of the bulk phase)")
                for f in judge_valid_call(given, *call, reference=reference, model=self.model) if f.invariant not in ignore]

    def _count(self, built, reached) -> None:
        search = self.search
        for (call, _, _), corners in zip(built, reached):
            search.bounds.add(call)
            search.coverage.add_names(corners, "bulk")
        self.calls += len(built)
        search.calls_tried += len(built)
        search._account.tried += len(built)
