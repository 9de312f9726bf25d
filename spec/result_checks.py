"""Each chapter invariant checked over a trace by one incremental replay, for any implementation.

``Replay(jobs, slots, continuous, policy)`` reads one trace entry at a time (``tick``)
and keeps, per job, its services so far, its start and its last served tick, and, for
the run, the started and unfinished jobs (admission order), the jobs served in the
latest entry, the first job in FIFO order not yet started, the latest tick and the
services so far.  It keeps no entry, so its memory is bounded by the jobs, never by
the trace.  Every broken claim is recorded in ``found`` under its invariant at the
earliest tick it shows (the first one found wins).  ``end`` checks what only the end
of a trace shows (every job served all its tokens, hence finished once);
``check_totals`` compares a run's totals; ``close`` ends a whole result: ``end``, the
``completed`` records, then the totals.

One set of rules, two drivers: the whole-result oracle (``spec.check``, through
``replay``) and ``schedcheck trace`` (a stream of entries, proofs/trace/check.py).

The claims are the registry's (``spec.invariants``), read off a trace: safety
(``no_duplicate_active``, ``no_start_before_arrival``, ``slot_bound``,
``nonnegative_remaining``, ``work_conservation``, ``every_job_completes_once``,
``termination``), the FIFO policy unless ``policy="none"`` (``fifo_order``,
``no_preemption``, ``continuous_backfills``, ``static_batch_boundary``), and the
result's own arithmetic (``metrics_consistent``: ticks ascend, no empty entry, the
records and totals agree with the trace).  A tick missing from the trace is idle.

Cost: an entry that continues the one before it (the next tick; first the jobs served
then that have tokens left, in the same order; then jobs that start now) is judged in
time proportional to the jobs that start or finish in it, the continuing part by one
list comparison: for such an entry every rule below reduces to a check on the jobs
that start (see ``_continues``).  Any other entry goes through every rule job by job
(``_any_entry``).  A whole replay is O(entries + jobs) steps plus O(services) of list
comparison.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from operator import itemgetter
from typing import Callable, Sequence

from spec.domain import fifo_key
from spec.metrics import utilization
from spec.observation import Observation
from spec.registry import Findings, Violation, replay_finding

POLICIES = ("fifo", "none")

# the invariants a replay can find, in registry order; each result check reads obs.findings
CHECKED = (
    "no_duplicate_active",
    "no_start_before_arrival",
    "slot_bound",
    "nonnegative_remaining",
    "work_conservation",
    "every_job_completes_once",
    "termination",
    "fifo_order",
    "no_preemption",
    "continuous_backfills",
    "static_batch_boundary",
    "metrics_consistent",
)


RECORD_FIELDS = ("arrival", "tokens", "start", "finish", "wait", "turnaround")  # a record's fields read off the trace
_RECORD_FIELDS = itemgetter(*RECORD_FIELDS)

RESULT_CHECKS: dict[str, Callable[[Observation], Violation | None]] = {name: replay_finding(name) for name in CHECKED}


class Replay:
    """One pass over a chapter trace; ``found`` maps each invariant to its earliest Violation."""

    def __init__(self, jobs, slots: int, continuous: bool, policy: str = "fifo", ordered=None) -> None:
        """``ordered`` may pass ``sorted(jobs, key=fifo_key)`` when the caller has it."""
        if policy not in POLICIES:
            raise ValueError(f"policy={policy!r}: expected one of {', '.join(POLICIES)}")
        self.slots, self.continuous = slots, continuous
        self.policy = policy != "none"
        self.job = {job.id: job for job in jobs}
        self.order = [job.id for job in (sorted(jobs, key=fifo_key) if ordered is None else ordered)]
        self.position = {job_id: index for index, job_id in enumerate(self.order)}
        self.first_unstarted = 0  # index into order
        # A job's services so far: count[id] + (previous - run[id] + 1) while it is in
        # ``run`` (served in every entry since tick run[id]), count[id] otherwise; the
        # same for its last served tick (previous, or last[id]).
        self.count: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.run: dict[int, int] = {}  # the jobs served in the latest entry with tokens left, in its order
        self.run_list: list[int] = []  # list(run)
        self.due: dict[int, list[int]] = {}  # tick -> the jobs of run whose last token it serves
        self.due_ticks: list[int] = []  # heap of due's ticks (some stale: no longer in due)
        self.single_until = 0  # replay_trace: entries before this index are replayed one by one
        self.start: dict[int, int] = {}
        self.active: dict[int, None] = {}  # started and unfinished, in admission order
        self.previous: int | None = None
        self.busy = 0
        self.finish_max = 0
        self.bound = max((job.arrival for job in jobs), default=0) + sum(job.tokens for job in jobs)
        self.found: dict[str, Violation] = {}

    def report(self, name: str, message: str, tick=None, job=None, expected=None, actual=None) -> None:
        if name not in self.found:
            ids = () if job is None else (job,)
            self.found[name] = Violation(name, message, tick=tick, job=job, expected=expected, actual=actual, ids=ids)

    # --- the services ledger -----------------------------------------------------

    def services(self, job_id: int) -> int:
        """The services of ``job_id`` so far."""
        since, previous = self.run.get(job_id), self.previous
        if since is None or previous is None:
            return self.count.get(job_id, 0)
        return self.count.get(job_id, 0) + previous - since + 1

    def _leave_run(self, job_id: int) -> None:
        """Write down the services of a job of ``run`` and take it out."""
        previous = self.previous
        assert previous is not None, "a job of run was served in the latest entry"
        self.count[job_id] = self.services(job_id)
        self.last[job_id] = previous
        del self.run[job_id]

    def _join_run(self, tick: int, job_id: int) -> None:
        """``job_id``, served at ``tick`` (counted in count[]), has tokens left: it continues from here."""
        self.count[job_id] -= 1
        self.run[job_id] = tick
        due = tick + self.job[job_id].tokens - self.count[job_id] - 1
        if due in self.due:
            self.due[due].append(job_id)
        else:
            self.due[due] = [job_id]
            heapq.heappush(self.due_ticks, due)

    def _finish(self, job_id: int, tick: int) -> None:
        self.active.pop(job_id, None)
        self.finish_max = max(self.finish_max, tick + 1)

    # --- the rules ----------------------------------------------------------------

    def _waiting_head(self):
        """The first job in FIFO order that has not started (None when all have)."""
        while self.first_unstarted < len(self.order) and self.order[self.first_unstarted] in self.start:
            self.first_unstarted += 1
        return self.job[self.order[self.first_unstarted]] if self.first_unstarted < len(self.order) else None

    def _idle(self, first: int, last: int) -> None:
        """Ticks ``first..last`` served nothing: no started job may be left unfinished, no arrived job may wait."""
        if first > last or not self.policy:
            return
        if self.active:
            job_id = next(iter(self.active))
            self.report(
                "no_preemption", f"job {job_id} started at tick {self.start[job_id]} is not served at tick {first}: "
                "it was paused", tick=first, job=job_id, expected="served", actual="not served",
            )
        head = self._waiting_head()
        if head is not None and head.arrival <= last:
            at = max(head.arrival, first)
            name = "continuous_backfills" if self.continuous else "static_batch_boundary"
            self.report(
                name, f"job {head.id} arrived at {head.arrival} and waits at tick {at} although the engine is idle",
                tick=at, job=head.id, expected=f"start {at}", actual="waiting",
            )

    def _order(self, tick: int, served: list, known: list) -> None:
        """fifo_order: the entry lists its known jobs in (arrival, id) order."""
        keys = [fifo_key(self.job[i]) for i in known]
        if keys != sorted(keys):
            self.report(
                "fifo_order", f"tick {tick} lists {list(served)}, not in (arrival, id) order",
                tick=tick, expected=sorted(known, key=lambda i: fifo_key(self.job[i])), actual=list(served),
            )

    def _bounds(self, tick: int, served: list) -> None:
        """slot_bound and termination: at most ``slots`` jobs, and a tick before max(arrival) + sum(tokens)."""
        if len(served) > self.slots:
            self.report(
                "slot_bound", f"tick {tick} serves {list(served)}: {len(served)} jobs in {self.slots} slots",
                tick=tick, expected=f"<= {self.slots}", actual=len(served),
            )
        if tick >= self.bound:
            self.report(
                "termination", f"tick {tick} is served, past max(arrival) + sum(tokens) = {self.bound}",
                tick=tick, expected=f"< {self.bound}", actual=tick,
            )

    def _starts(self, tick: int, job_id: int) -> None:
        """``job_id`` is served for the first time at ``tick``: no_start_before_arrival."""
        job = self.job[job_id]
        self.start[job_id] = tick
        self.active[job_id] = None
        if tick < job.arrival:
            self.report(
                "no_start_before_arrival", f"job {job_id} arrives at {job.arrival} but is served at tick {tick}",
                tick=tick, job=job_id, expected=f">= {job.arrival}", actual=tick,
            )

    def tick(self, tick: int, served: list) -> None:
        """Replay one entry: the ticks before it were idle, then ``served`` is served one token each at ``tick``."""
        if self._continues(tick, served):
            return
        self._any_entry(tick, served)

    def replay_trace(self, ticks: list, served: list) -> None:
        """Replay a whole trace (``ticks[i]`` serves ``served[i]``): ``tick`` on each entry, a plain stretch at a time.

        A plain stretch is entries that each continue the one before with no job
        starting or finishing: the next ticks, each serving exactly ``run``, up to the
        next tick at which a job of run is served its last token.  ``tick`` would judge
        each by ``_continues`` with no newcomer and no job ending, which checks only
        slot_bound, termination and, continuous, a free slot while the FIFO head has
        arrived; over the stretch those are monotone in the tick (run and the head do
        not change), so ``_plain_stretch`` judges the stretch at once, its entries
        compared by two list comparisons."""
        index, length = 0, len(ticks)
        continues, any_entry = self._continues, self._any_entry
        while index < length:
            if index >= self.single_until and self.run_list:
                taken = self._plain_stretch(ticks, served, index)
                if taken:
                    index += taken
                    continue
            if not continues(ticks[index], served[index]):
                any_entry(ticks[index], served[index])
            index += 1

    def _plain_stretch(self, ticks: list, served: list, index: int) -> int:
        """Judge the plain stretch at ``index`` and return its length, or return 0 and change nothing."""
        run_list, previous = self.run_list, self.previous
        if not run_list or previous is None:
            return 0
        if self.policy and len(self.active) != len(run_list) and "no_preemption" not in self.found:
            return 0
        due_ticks = self.due_ticks
        while due_ticks[0] not in self.due:
            heapq.heappop(due_ticks)
        first = previous + 1
        end = min(len(ticks), index + due_ticks[0] - first)  # the entries before the next due tick
        count = end - index
        if count < 4:
            self.single_until = end  # too short to be worth a comparison: one by one
            return 0
        if ticks[index:end] != list(range(first, first + count)) or served[index:end] != [run_list] * count:
            self.single_until = end  # not plain: one by one up to the due tick (so no stretch is compared twice)
            return 0
        last = first + count - 1
        size = len(run_list)
        if size > self.slots:
            self._bounds(first, run_list)
        if last >= self.bound:
            self._bounds(max(first, self.bound), run_list)
        if self.policy and self.continuous and size < self.slots:
            head = self._waiting_head()
            if head is not None and head.arrival <= last:
                self._policy_after(max(first, head.arrival), run_list, (), set())
        self.busy += size * count
        self.previous = last
        return count

    def _continues(self, tick: int, served: list) -> bool:
        """Judge an entry that continues the latest one and return True, or return False and change nothing.

        Such an entry is the next tick, lists first exactly ``run`` (the jobs served in
        the latest entry with tokens left, in its order), then only jobs never served.
        For it, job by job, ``_any_entry`` would find: no repeat (run is a set, the
        newcomers are new and distinct), no unknown job, no started job missing (a
        started job outside run was reported when it first went missing, else the
        entry goes the long way), no job past
        its tokens; the FIFO order of run was checked when it was listed, so only the
        newcomers' places are left; the static batch's start set is run's one start
        (else reported) plus this tick's, if jobs start now.  So it checks only those."""
        previous = self.previous
        run_list = self.run_list
        width = len(run_list)
        size = len(served)
        if previous is None or tick != previous + 1 or size == 0:
            return False
        if size == width:
            if served != run_list:
                return False
            newcomers: Sequence[int] = ()
        else:
            if size < width or served[:width] != run_list:
                return False
            newcomers = served[width:]
            distinct: set[int] = set(newcomers)
            if len(distinct) != len(newcomers) or not distinct <= self.job.keys() or not self.start.keys().isdisjoint(distinct):
                return False  # a repeat, an unknown job or one served before: the long way
        if self.policy and len(self.active) != width and "no_preemption" not in self.found:
            return False  # a started job that is not in run has not been reported yet (an entry out of order)
        self.previous = tick
        if size > self.slots or tick >= self.bound:
            self._bounds(tick, served)
        if newcomers:
            job_of, start, active, count, run, due = self.job, self.start, self.active, self.count, self.run, self.due
            for job_id in newcomers:  # _starts, then _join_run with one service counted
                job = job_of[job_id]
                start[job_id] = tick
                active[job_id] = None
                if tick < job.arrival:
                    self._starts(tick, job_id)  # reports no_start_before_arrival
                count[job_id] = 0
                run[job_id] = tick
                last = tick + job.tokens - 1
                if last in due:
                    due[last].append(job_id)
                else:
                    due[last] = [job_id]
                    heapq.heappush(self.due_ticks, last)
            if self.policy:
                if "fifo_order" not in self.found:
                    edge = served[width - 1:] if width else newcomers
                    ranks = list(map(self.position.__getitem__, edge))  # FIFO ranks: the order of fifo_key
                    if ranks != sorted(ranks):
                        self._order(tick, served, served)
                starts = {tick, self.start[run_list[0]]} if width else {tick}
                self._policy_after(tick, served, newcomers, starts)
        elif self.policy and self.continuous and size < self.slots:
            self._policy_after(tick, served, (), set())  # (static: no job starts, one batch: nothing to judge)
        self.busy += size
        ending = self.due.pop(tick, None)
        if ending:
            count, last, run, active = self.count, self.last, self.run, self.active
            for job_id in ending:  # _leave_run, then _finish
                count[job_id] += tick - run.pop(job_id) + 1
                last[job_id] = tick
                active.pop(job_id, None)
            self.finish_max = max(self.finish_max, tick + 1)
        if newcomers or ending:
            self.run_list = list(self.run)
        return True

    def _any_entry(self, tick: int, served: list) -> None:
        """Judge any entry, job by job, with every rule."""
        for job_id in list(self.run):
            self._leave_run(job_id)
        self.due.clear()
        self.due_ticks.clear()
        previous = self.previous
        if previous is not None and tick <= previous:
            self.report("metrics_consistent", f"trace tick {tick} follows tick {previous}: ticks must ascend", tick=tick)
        if not served:
            self.report("metrics_consistent", f"trace tick {tick} serves nothing: list only ticks that serve", tick=tick)
        self._idle(0 if previous is None else previous + 1, tick - 1)
        self.previous = tick if previous is None else max(previous, tick)
        if len(set(served)) != len(served):
            twice = [i for i, n in Counter(served).items() if n > 1][0]
            self.report(
                "no_duplicate_active", f"tick {tick} serves job {twice} {served.count(twice)} times: {list(served)}",
                tick=tick, job=twice, expected=1, actual=served.count(twice),
            )
        self._bounds(tick, served)
        known = [job_id for job_id in dict.fromkeys(served) if job_id in self.job]
        for job_id in served:
            if job_id not in self.job:
                self.report(
                    "work_conservation", f"tick {tick} serves job {job_id}, which is not in the input",
                    tick=tick, job=job_id,
                )
        if self.policy:
            self._order(tick, served, known)
            missing = [job_id for job_id in self.active if job_id not in set(known)]
            if missing:
                self.report(
                    "no_preemption", f"job {missing[0]} started at tick {self.start[missing[0]]} is not served at "
                    f"tick {tick}: it was paused", tick=tick, job=missing[0], expected="served", actual="not served",
                )
        starters = []
        for job_id in known:
            job = self.job[job_id]
            count = self.count.get(job_id, 0) + 1
            self.count[job_id] = count
            self.last[job_id] = tick
            if job_id not in self.start:
                self._starts(tick, job_id)
                starters.append(job_id)
            if count == job.tokens + 1:
                self.report(
                    "nonnegative_remaining", f"job {job_id} needs {job.tokens} tokens but tick {tick} serves it once more",
                    tick=tick, job=job_id, expected=f"<= {job.tokens} services", actual=f"{job.tokens + 1} services",
                )
        self.busy += len(served)
        if self.policy:
            self._policy_after(tick, served, starters, {self.start[i] for i in known})
        for job_id in known:
            if self.count[job_id] >= self.job[job_id].tokens:
                self._finish(job_id, tick)
            elif tick == self.previous:
                self._join_run(tick, job_id)
        self.run_list = list(self.run)

    def _policy_after(self, tick: int, served: list, starters: Sequence[int], starts: set) -> None:
        """fifo_order of the jobs that start now; continuous_backfills, or static_batch_boundary given the start ticks served."""
        head = self._waiting_head()
        late = []
        if head is not None and starters:
            position = self.position
            ahead = position[head.id]
            late = [i for i in starters if position[i] > ahead]
        if late:
            later = self.job[late[0]]
            self.report(
                "fifo_order", f"job {later.id} (arrival {later.arrival}) starts at tick {tick}, before job {head.id} "
                f"(arrival {head.arrival}), which is ahead of it in FIFO order and has not started",
                tick=tick, job=later.id, expected=f"job {head.id} first", actual=tick,
            )
        room = len(served) < self.slots
        if self.continuous:
            if room and head is not None and head.arrival <= tick:
                self.report(
                    "continuous_backfills", f"job {head.id} arrived at {head.arrival} and waits at tick {tick} "
                    f"although {self.slots - len(served)} slots are free", tick=tick, job=head.id,
                    expected=f"start {tick}", actual="waiting",
                )
            return
        if len(starts) > 1:
            self.report(
                "static_batch_boundary", f"tick {tick} serves {list(served)}, which started at different ticks "
                f"{sorted(starts)}: a job joined a running batch", tick=tick, expected="one batch start",
                actual=sorted(starts),
            )
        elif starts == {tick} and room and head is not None and head.arrival <= tick:
            self.report(
                "static_batch_boundary", f"job {head.id} arrived at {head.arrival} and waits at tick {tick} although "
                f"the batch that starts then has {self.slots - len(served)} free slots", tick=tick, job=head.id,
                expected=f"start {tick}", actual="waiting",
            )

    # --- the end ------------------------------------------------------------------

    def end(self) -> None:
        """The end-of-trace claims, at the trace's last tick: every job was served its tokens, so each finished once."""
        for job_id in list(self.run):
            self._leave_run(job_id)
        self.due.clear()
        self.due_ticks.clear()
        self.run_list = []
        for job_id in self.order:
            job = self.job[job_id]
            served = self.count.get(job_id, 0)
            if served != job.tokens:
                self.report(
                    "work_conservation", f"job {job_id} needs {job.tokens} tokens but is served {served} times",
                    tick=self.previous, job=job_id, expected=job.tokens, actual=served,
                )
            if served < job.tokens:
                self.report(
                    "every_job_completes_once",
                    f"job {job_id} is still {'active' if served else 'waiting'} after the last tick: it never finishes",
                    tick=self.previous, job=job_id,
                )

    def check_totals(self, totals: dict) -> None:
        """The run's totals (makespan_ticks, busy_slots, utilization) against what the trace says."""
        expected = {"makespan_ticks": self.finish_max, "busy_slots": self.busy}
        for field, value in expected.items():
            if totals[field] != value:
                self.report("metrics_consistent", f"{field}={totals[field]}, expected {value}",
                            expected=value, actual=totals[field])
        ratio = utilization(self.busy, self.slots, self.finish_max)
        if not math.isclose(totals["utilization"], ratio, rel_tol=1e-9, abs_tol=0.0):
            self.report(
                "metrics_consistent",
                f"utilization={totals['utilization']!r}, expected {self.busy}/({self.slots}*{self.finish_max}) = {ratio!r}",
                expected=ratio, actual=totals["utilization"],
            )

    def close(self, completed: list, result: dict) -> None:
        """End a whole result: ``end``, then its ``completed`` records against the trace, then its totals."""
        self.end()
        ids = [entry["id"] for entry in completed]
        listed = Counter(ids)
        for job_id in self.order:
            if listed[job_id] != 1:
                self.report(
                    "every_job_completes_once", f"job {job_id} appears {listed[job_id]} times in completed",
                    job=job_id, expected=1, actual=listed[job_id],
                )
        for job_id in listed:
            if job_id not in self.job:
                self.report(
                    "every_job_completes_once", f"completed lists job {job_id}, which is not in the input",
                    job=job_id, expected=None, actual=job_id,
                )
        if ids != sorted(ids):
            self.report("metrics_consistent", f"completed is ordered {ids}, not by id", expected=sorted(ids), actual=ids)
        job_of, start, last = self.job, self.start, self.last
        for entry in completed:  # each record: its start against its arrival, then every field against the trace
            job = job_of.get(entry["id"])
            if job is None:
                continue  # reported by every_job_completes_once
            if entry["start"] < job.arrival:
                self.report(
                    "no_start_before_arrival", f"job {job.id} arrives at {job.arrival} but its start is {entry['start']}",
                    tick=entry["start"], job=job.id, expected=f">= {job.arrival}", actual=entry["start"],
                )
            if job.id not in start:
                continue  # reported by every_job_completes_once and work_conservation
            expect = (
                job.arrival, job.tokens, start[job.id], last[job.id] + 1,
                entry["start"] - job.arrival, entry["finish"] - job.arrival,
            )
            if _RECORD_FIELDS(entry) != expect:  # every field an int (well_typed): equal fields, nothing to say
                for field, value in zip(RECORD_FIELDS, expect):
                    if entry[field] != value:
                        self.report(
                            "metrics_consistent", f"job {job.id}: {field}={entry[field]}, expected {value}",
                            job=job.id, tick=start[job.id], expected=value, actual=entry[field],
                        )
                        break
        if result["makespan_ticks"] > self.bound:
            self.report(
                "termination", f"makespan {result['makespan_ticks']} is past max(arrival) + sum(tokens) = {self.bound}",
                expected=f"<= {self.bound}", actual=result["makespan_ticks"],
            )
        self.check_totals(result)


def replay(obs: Observation, ordered=None) -> Findings:
    """Replay the result's trace once and return each broken invariant's earliest Violation (and which the end found).

    ``ordered`` may pass the jobs in FIFO order."""
    state = Replay(obs.jobs, obs.slots, obs.continuous, ordered=ordered)
    state.replay_trace(obs.ticks, obs.served)
    during = len(state.found)
    state.close(obs.completed, obs.result)
    return Findings(state.found, list(state.found)[during:])
