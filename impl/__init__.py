"""Our schedulers under check: the chapter's FIFO batching and the serving model's FCFS (never import spec/)."""

from impl.scheduler import Scheduler, schedule
from impl.serving import ServingScheduler, serve

__all__ = ["Scheduler", "ServingScheduler", "schedule", "serve"]
