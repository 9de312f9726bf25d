"""Our scheduler under check: static and continuous FIFO batching (never imports spec/)."""

from impl.scheduler import Scheduler, schedule

__all__ = ["Scheduler", "schedule"]
