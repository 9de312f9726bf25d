"""Our online Scheduler seen as a spec State, and put into one.

The CrossHair contracts and the stateful test both compare ``impl.Scheduler`` with
``spec.step``; this is the one mapping between the two.  ``Scheduler.view()`` is the
Scheduler's pure snapshot; ``scheduler_from_state`` sets impl's private fields, so a
scheduler class passed in must keep impl's field layout.
"""

from __future__ import annotations

from spec.domain import Job
from spec.state import Completion, Running, State


def scheduler_from_state(scheduler_class: type, state: State):
    """A Scheduler (impl's field layout) put in ``state``: construct it, then set its fields."""
    from impl.scheduler import Active, Finished

    engine = scheduler_class(state.slots, state.continuous)
    engine.clock = state.clock
    engine.busy = state.busy
    engine.last_served = list(state.served)
    engine._waiting = [(job.arrival, job.id, job.tokens) for job in state.waiting]  # FIFO-sorted is a heap
    engine._active = [Active(r.job.id, r.job.arrival, r.job.tokens, r.start, r.remaining) for r in state.active]
    engine._finished = [Finished(d.job.id, d.job.arrival, d.job.tokens, d.start, d.finish) for d in state.done]
    engine._ids = {job.id for job in state.jobs}
    return engine


def state_from_view(view: tuple, before: State) -> State:
    """The spec.State of ``Scheduler.view()``; the run's jobs, slots and policy come from ``before``."""
    clock, waiting, active, finished, busy, served = view
    return State(
        jobs=before.jobs,
        slots=before.slots,
        continuous=before.continuous,
        clock=clock,
        waiting=tuple(Job(*row) for row in waiting),
        active=tuple(Running(Job(a[0], a[1], a[2]), a[3], a[4]) for a in active),
        done=tuple(Completion(Job(f[0], f[1], f[2]), f[3], f[4]) for f in finished),
        busy=busy,
        served=tuple(served),
    )


def impl_step(scheduler_class: type, state: State) -> State:
    """One ``Scheduler.step()`` from ``state``, seen through ``view()`` as a spec.State."""
    engine = scheduler_from_state(scheduler_class, state)
    engine.step()
    return state_from_view(engine.view(), state)
