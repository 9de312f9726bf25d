"""The chapter's model checked one trace entry at a time: the incremental replay of a stream of ``{"tick", "served"}``.

``Replay(jobs, slots, continuous)`` keeps, per job, its services so far, its start and
whether it finished, and, for the run, the active jobs (admission order), the first
job in FIFO order not yet started, the latest tick and the services so far; it keeps
no trace entry, so its memory is bounded by the jobs, never by the trace.  ``tick``
replays one entry and records each broken claim under its invariant at the earliest
tick it shows; ``end`` checks what only the end of the trace can show (every job
served all its tokens, hence finished once); ``check_totals`` compares a run's totals.

The claims are the registry's (``spec.invariants``), read off a trace: safety
(``no_duplicate_active``, ``no_start_before_arrival``, ``slot_bound``,
``nonnegative_remaining``, ``work_conservation``, ``every_job_completes_once``,
``termination``), the FIFO policy unless ``policy="none"`` (``fifo_order``,
``no_preemption``, ``continuous_backfills``, ``static_batch_boundary``), and the
trace's own rules (``metrics_consistent``: ticks ascend, no empty entry).  A tick
missing from the trace is idle: nothing was served in it.
"""

from __future__ import annotations

import math
from collections import Counter

from spec.domain import fifo_key
from spec.metrics import utilization
from spec.registry import Violation

POLICIES = ("fifo", "none")


class Replay:
    """One pass over a chapter trace; ``found`` maps each invariant to its earliest Violation."""

    def __init__(self, jobs, slots: int, continuous: bool, policy: str = "fifo") -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy={policy!r}: expected one of {', '.join(POLICIES)}")
        self.slots, self.continuous = slots, continuous
        self.policy = policy != "none"
        self.job = {job.id: job for job in jobs}
        self.order = [job.id for job in sorted(jobs, key=fifo_key)]
        self.position = {job_id: index for index, job_id in enumerate(self.order)}
        self.first_unstarted = 0  # index into order
        self.count: dict[int, int] = {}
        self.start: dict[int, int] = {}
        self.last: dict[int, int] = {}
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

    def tick(self, tick: int, served: list) -> None:
        """Replay one entry: the ticks before it were idle, then ``served`` is served one token each at ``tick``."""
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
        known = [job_id for job_id in dict.fromkeys(served) if job_id in self.job]
        for job_id in served:
            if job_id not in self.job:
                self.report(
                    "work_conservation", f"tick {tick} serves job {job_id}, which is not in the input",
                    tick=tick, job=job_id,
                )
        if self.policy:
            keys = [fifo_key(self.job[i]) for i in known]
            if keys != sorted(keys):
                self.report(
                    "fifo_order", f"tick {tick} lists {list(served)}, not in (arrival, id) order",
                    tick=tick, expected=sorted(known, key=lambda i: fifo_key(self.job[i])), actual=list(served),
                )
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
                self.start[job_id] = tick
                starters.append(job_id)
                self.active[job_id] = None
                if tick < job.arrival:
                    self.report(
                        "no_start_before_arrival", f"job {job_id} arrives at {job.arrival} but is served at tick {tick}",
                        tick=tick, job=job_id, expected=f">= {job.arrival}", actual=tick,
                    )
            if count == job.tokens + 1:
                self.report(
                    "nonnegative_remaining", f"job {job_id} needs {job.tokens} tokens but tick {tick} serves it once more",
                    tick=tick, job=job_id, expected=f"<= {job.tokens} services", actual=f"{job.tokens + 1} services",
                )
        self.busy += len(served)
        if self.policy:
            self._policy_after(tick, served, known, starters)
        for job_id in known:
            if self.count[job_id] >= self.job[job_id].tokens:
                self.active.pop(job_id, None)
                self.finish_max = max(self.finish_max, tick + 1)

    def _policy_after(self, tick: int, served: list, known: list, starters: list) -> None:
        head = self._waiting_head()
        late = [i for i in starters if head is not None and self.position[i] > self.position[head.id]]
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
        starts = {self.start[i] for i in known}
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

    def end(self) -> None:
        """The end-of-trace claims, at the trace's last tick: every job was served its tokens, so each finished once."""
        for job_id in self.order:
            job = self.job[job_id]
            served = self.count.get(job_id, 0)
            if served < job.tokens:
                self.report(
                    "work_conservation", f"job {job_id} needs {job.tokens} tokens but is served {served} times",
                    tick=self.previous, job=job_id, expected=job.tokens, actual=served,
                )
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
