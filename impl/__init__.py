"""Our schedulers under check: the chapter's FIFO batching and the serving model's FCFS (never import spec/)."""

from impl.scheduler import Scheduler, schedule
from impl.serving import ServingScheduler, serve
from impl.online import make_scheduler, make_serving

__all__ = ["Scheduler", "ServingScheduler", "make_scheduler", "make_serving", "schedule", "serve"]
