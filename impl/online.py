"""Our schedulers as online engines of the clock-free protocol: factories the harness drives (public API only)."""

from __future__ import annotations

from typing import Any

from impl.scheduler import Scheduler
from impl.serving import ServingScheduler


class ChapterEngine:
    """impl.Scheduler behind the chapter's protocol: ``submit(job)``, ``step() -> served ids``, ``view()``."""

    def __init__(self, slots: Any, continuous: Any) -> None:
        self.scheduler = Scheduler(slots, continuous)

    def submit(self, job: dict) -> None:
        """Queue one job (its arrival is not before the clock)."""
        self.scheduler.submit(job)

    def step(self) -> list[int]:
        """Run one tick and return the ids served in it."""
        return self.scheduler.step()

    def view(self) -> dict:
        """The waiting and running job ids, in queue and admission order."""
        return {"waiting": [job[0] for job in self.scheduler.waiting], "running": [job.id for job in self.scheduler.active]}


def make_scheduler(slots: Any, continuous: Any) -> ChapterEngine:
    """A fresh online chapter engine: what ``schedcheck verify --online impl:make_scheduler`` drives."""
    return ChapterEngine(slots, continuous)


def make_serving(config: Any) -> ServingScheduler:
    """A fresh online serving engine: what ``schedcheck verify --model serving --online impl:make_serving`` drives."""
    return ServingScheduler(config)
