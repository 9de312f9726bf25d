"""Admits the arrived job with the fewest tokens first, not the (arrival, id) head."""

import heapq

from impl.scheduler import Active, Finished
from impl.scheduler import Scheduler as _Correct

EXPECTED = "fifo_order"


class Scheduler(_Correct):
    def step(self) -> list[int]:
        if self.idle:
            return []
        tick = self.clock
        if not self._active and self._waiting[0][0] > tick:
            tick = self._waiting[0][0]
        if self.continuous or not self._active:
            while self._waiting and len(self._active) < self.slots and self._waiting[0][0] <= tick:
                arrival, job_id, tokens = self._pop_shortest(tick)  # BUG
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

    def _pop_shortest(self, tick: int) -> tuple[int, int, int]:
        arrived = [entry for entry in self._waiting if entry[0] <= tick]
        chosen = min(arrived, key=lambda entry: (entry[2], entry[0], entry[1]))  # BUG: fewest tokens first
        self._waiting.remove(chosen)
        heapq.heapify(self._waiting)
        return chosen
