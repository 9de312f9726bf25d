"""Static and continuous FIFO batching over integer ticks, with an online step-by-step API.

``Scheduler`` is shaped like Orca's serving loop: the caller submits requests and
regains control after every tick, which serves one token to every active request.
Waiting requests sit in a heap keyed by (arrival, id), so a tick costs
O(active + admitted * log waiting) and never rescans the queue; an idle engine
jumps straight to the next arrival, so huge arrival ticks cost nothing.

``schedule(jobs, slots, continuous)`` validates a whole batch of requests and runs it
event by event: the set of active jobs changes only when one finishes or one is
admitted, so it jumps from one such tick to the next (O(jobs log jobs) scheduling)
and only writes the trace, one entry per served tick, in O(services).
"""

from __future__ import annotations

import heapq
from typing import Any, NamedTuple

from impl.collector import paused
from impl.validation import check_continuous, check_job, check_jobs, check_slots


class Active(NamedTuple):
    id: int
    arrival: int
    tokens: int
    start: int
    remaining: int


class Finished(NamedTuple):
    id: int
    arrival: int
    tokens: int
    start: int
    finish: int


class Scheduler:
    """An iteration-level FIFO scheduler: ``submit`` requests, then ``step`` one tick at a time."""

    def __init__(self, slots: int, continuous: bool) -> None:
        check_slots(slots)
        check_continuous(continuous)
        self.slots = slots
        self.continuous = continuous
        self.clock = 0  # the next tick to run
        self.busy = 0  # (tick, job) services so far
        self.last_served: list[int] = []
        self._waiting: list[tuple[int, int, int]] = []  # heap of (arrival, id, tokens)
        self._active: list[Active] = []  # admission order, which is FIFO order
        self._finished: list[Finished] = []  # in order of finish
        self._ids: set[int] = set()

    def submit(self, job: dict) -> None:
        """Queue one request; it may not arrive before the current clock (no retroactive entry)."""
        job_id, arrival, tokens = check_job(job, "job")
        if job_id in self._ids:
            raise ValueError(f"job.id={job_id!r}: ids must be unique; this id was already submitted")
        if arrival < self.clock:
            raise ValueError(f"job.arrival={arrival!r}: expected an int >= the clock {self.clock}; no retroactive entry")
        self._ids.add(job_id)
        heapq.heappush(self._waiting, (arrival, job_id, tokens))

    @property
    def idle(self) -> bool:
        """True when nothing is active or waiting."""
        return not self._active and not self._waiting

    def step(self) -> list[int]:
        """Run one tick and return the ids it served, in FIFO order ([] when idle: the clock stays)."""
        if self.idle:
            return []
        tick = self.clock
        if not self._active and self._waiting[0][0] > tick:
            tick = self._waiting[0][0]
        if self.continuous or not self._active:
            while self._waiting and len(self._active) < self.slots and self._waiting[0][0] <= tick:
                arrival, job_id, tokens = heapq.heappop(self._waiting)
                self._active.append(Active(job_id, arrival, tokens, tick, tokens))
        served = [job.id for job in self._active]
        running = []
        for job in self._active:
            if job.remaining == 1:
                self._finished.append(Finished(job.id, job.arrival, job.tokens, job.start, tick + 1))
            else:
                running.append(job._replace(remaining=job.remaining - 1))
        self._active = running
        self.busy += len(served)
        self.clock = tick + 1
        self.last_served = served
        return served

    @property
    def active(self) -> list[Active]:
        """The admitted, unfinished jobs, in FIFO order (a copy)."""
        return list(self._active)

    @property
    def waiting(self) -> list[tuple[int, int, int]]:
        """The queued jobs as (id, arrival, tokens), in FIFO order (a copy; O(w log w))."""
        return [(job_id, arrival, tokens) for arrival, job_id, tokens in sorted(self._waiting)]

    @property
    def completed(self) -> list[Finished]:
        """The finished jobs, in order of finish (a copy)."""
        return list(self._finished)

    def view(self) -> tuple:
        """A pure snapshot of the state: (clock, waiting, active, finished, busy, last served), all tuples."""
        return (
            self.clock,
            tuple(self.waiting),
            tuple(self._active),
            tuple(self._finished),
            self.busy,
            tuple(self.last_served),
        )


def schedule(jobs: Any, slots: Any, continuous: Any) -> dict:
    """Run every job to completion under static (False) or continuous (True) FIFO batching."""
    check_slots(slots)
    check_continuous(continuous)
    rows = check_jobs(jobs)
    with paused():  # one container per served tick and per job, none in a cycle (impl/collector.py)
        return _run(rows, slots, continuous)


def _run(rows: list[tuple[int, int, int]], slots: int, continuous: bool) -> dict:
    """The result of a valid call, event by event (see the module docstring)."""
    queue = sorted(rows, key=lambda row: (row[1], row[0]))  # (id, arrival, tokens) in FIFO order
    count = len(queue)
    head = 0  # queue[head:] have not been admitted
    active: dict[int, None] = {}  # the admitted, unfinished ids, in admission order
    leaving: dict[int, list[int]] = {}  # finish tick -> the ids that finish then
    finishes: list[int] = []  # heap of the ticks in ``leaving``
    completed = []
    trace = []
    busy = 0
    tick = 0
    while head < count or active:
        # jump: an idle engine waits for the next arrival
        if not active and queue[head][1] > tick:
            tick = queue[head][1]
        # admit, in FIFO order: into free slots (continuous) or into an empty batch (static)
        if continuous or not active:
            while head < count and len(active) < slots and queue[head][1] <= tick:
                job_id, arrival, tokens = queue[head]
                head += 1
                active[job_id] = None
                finish = tick + tokens
                if finish in leaving:
                    leaving[finish].append(job_id)
                else:
                    leaving[finish] = [job_id]
                    heapq.heappush(finishes, finish)
                completed.append(
                    {"id": job_id, "arrival": arrival, "tokens": tokens, "start": tick, "finish": finish,
                     "wait": tick - arrival, "turnaround": finish - arrival}
                )
        # serve: the same jobs every tick until the next finish, or the next admission into a free slot
        until = finishes[0]
        if continuous and head < count and len(active) < slots and queue[head][1] < until:
            until = queue[head][1]
        served = list(active)
        trace.append({"tick": tick, "served": served})
        trace.extend([{"tick": later, "served": served[:]} for later in range(tick + 1, until)])
        busy += len(served) * (until - tick)
        tick = until
        # leave: the jobs whose last token was served in the tick before this one
        if finishes[0] == tick:
            for job_id in leaving.pop(heapq.heappop(finishes)):
                del active[job_id]
    completed.sort(key=lambda record: record["id"])
    makespan = max((record["finish"] for record in completed), default=0)
    return {
        "makespan_ticks": makespan,
        "busy_slots": busy,
        "utilization": busy / (slots * makespan) if makespan else 0.0,
        "completed": completed,
        "trace": trace,
    }
