"""When two jobs finish in the same tick, only the first is recorded as finished."""

import heapq

from impl.scheduler import Active, Finished
from impl.scheduler import Scheduler as _Correct

EXPECTED = "every_job_completes_once"


class Scheduler(_Correct):
    def step(self) -> list[int]:
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
                if len(self._finished) >= 2 and self._finished[-2].finish == tick + 1:
                    self._finished.pop()  # BUG: a second same-tick finisher is lost
            else:
                running.append(job._replace(remaining=job.remaining - 1))
        self._active = running
        self.busy += len(served)
        self.clock = tick + 1
        self.last_served = served
        return served
