"""Metric definitions: how a run's completions and trace become the result dict.

For a job with arrival a, start s, finish f and tokens g: wait = s - a and
turnaround = f - a, and since a started job is never paused, turnaround = wait + g.
The makespan is the last finish (0 with no jobs); utilization is busy / (slots *
makespan), whose window starts at tick 0, so idleness before the first arrival counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spec.state import Completion, State


def utilization(busy: int, slots: int, makespan: int) -> float:
    """The fraction of slot-ticks in [0, makespan) that served a token; 0.0 for an empty run."""
    return busy / (slots * makespan) if makespan else 0.0


def completion_record(done: Completion) -> dict:
    """The ``completed`` entry of one finished job."""
    job = done.job
    return {
        "id": job.id,
        "arrival": job.arrival,
        "tokens": job.tokens,
        "start": done.start,
        "finish": done.finish,
        "wait": done.start - job.arrival,
        "turnaround": done.finish - job.arrival,
    }


def result_from_run(final: State, trace: list[dict]) -> dict:
    """The result dict of a finished run, in the contract's shape."""
    makespan = max((done.finish for done in final.done), default=0)
    return {
        "makespan_ticks": makespan,
        "busy_slots": final.busy,
        "utilization": utilization(final.busy, final.slots, makespan),
        "completed": [completion_record(done) for done in sorted(final.done, key=lambda d: d.job.id)],
        "trace": trace,
    }
