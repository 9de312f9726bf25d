"""The transition system: a frozen State, the one-tick ``step``, and the reference ``run``.

A run starts in ``initial(jobs, slots, continuous)`` and applies ``step`` until
``is_terminal``.  One step is one served tick t, in this order:

1. jobs whose last token was served in tick t-1 have left (``step`` moves them to
   ``done`` as soon as their remaining count reaches 0, with finish = t);
2. if nothing is active and no waiting job has arrived by t, the clock jumps to the
   earliest waiting arrival;
3. admission in FIFO order by (arrival, id): continuous admits arrived jobs while
   fewer than ``slots`` are active; static admits only into an empty batch;
4. every active job is served one token; one whose remaining count reaches 0
   finishes at t+1.

Everything here is pure: a step returns a new State and never mutates its argument.

``run_by_steps`` is the reference result by definition (``step`` to the end);
``run`` computes the same result a stretch of identical steps at a time
(``stretches``), so that the reference costs O(jobs log jobs) besides its trace;
tests/test_properties.py checks the two are equal.
"""

from __future__ import annotations

import heapq
from typing import Iterator, NamedTuple

from spec.domain import Job, fifo_key, validate
from spec.metrics import result_from_run


class Running(NamedTuple):
    """An admitted job that still has tokens to be served."""

    job: Job
    start: int
    remaining: int


class Completion(NamedTuple):
    """A finished job: the tick it started and the tick after its last token."""

    job: Job
    start: int
    finish: int


class State(NamedTuple):
    """Everything the scheduler knows between two ticks."""

    jobs: tuple[Job, ...]  # every job of the run, in FIFO order; never changes
    slots: int
    continuous: bool
    clock: int  # the next tick to run
    waiting: tuple[Job, ...]  # not yet admitted, in FIFO order
    active: tuple[Running, ...]  # admitted and unfinished, in admission order
    done: tuple[Completion, ...]  # finished, in order of finish
    busy: int  # (tick, job) services so far
    served: tuple[int, ...]  # ids served in the latest tick (clock - 1); () before the first


def initial(jobs, slots, continuous) -> State:
    """The state before tick 0 of a valid call (raises ValueError outside the domain)."""
    ordered = tuple(sorted(validate(jobs, slots, continuous), key=fifo_key))
    return State(ordered, slots, continuous, 0, ordered, (), (), 0, ())


def is_terminal(state: State) -> bool:
    """True when no job is waiting or active: the run is over."""
    return not state.waiting and not state.active


def step(state: State) -> State:
    """Run one served tick: leave, jump, admit, serve (see the module docstring)."""
    assert not is_terminal(state), "step() of a terminal state"
    tick = state.clock
    waiting = state.waiting
    if not state.active and waiting[0].arrival > tick:
        tick = waiting[0].arrival  # idle: jump to the earliest arrival (waiting is FIFO-sorted)

    admitted = 0
    if state.continuous or not state.active:
        room = state.slots - len(state.active)
        while admitted < room and admitted < len(waiting) and waiting[admitted].arrival <= tick:
            admitted += 1
    active = state.active + tuple(Running(job, tick, job.tokens) for job in waiting[:admitted])

    still_running = []
    finished = []
    for running in active:
        left = running.remaining - 1
        if left == 0:
            finished.append(Completion(running.job, running.start, tick + 1))
        else:
            still_running.append(running._replace(remaining=left))

    return state._replace(
        clock=tick + 1,
        waiting=waiting[admitted:],
        active=tuple(still_running),
        done=state.done + tuple(finished),
        busy=state.busy + len(active),
        served=tuple(running.job.id for running in active),
    )


def submit(state: State, job: Job) -> State:
    """An arrival in the online model: the job joins the waiting queue in FIFO order.

    Only a job with a new id that arrives no earlier than the clock may be submitted
    (no retroactive entry), so it sorts after every job admitted so far."""
    assert job.arrival >= state.clock, f"submit {job}: arrival before the clock {state.clock}"
    assert all(job.id != other.id for other in state.jobs), f"submit {job}: id already used"
    return state._replace(
        jobs=tuple(sorted(state.jobs + (job,), key=fifo_key)),
        waiting=tuple(sorted(state.waiting + (job,), key=fifo_key)),
    )


def run_by_steps(jobs, slots, continuous) -> dict:
    """The reference result by definition: ``step`` from ``initial`` to the end, one entry per step."""
    state = initial(jobs, slots, continuous)
    trace = []
    while not is_terminal(state):
        state = step(state)
        trace.append({"tick": state.clock - 1, "served": list(state.served)})
    return result_from_run(state, trace)


def run(jobs, slots, continuous) -> dict:
    """The reference result of ``schedule(jobs, slots, continuous)``: ``run_by_steps``, a stretch of steps at a time.

    Between two ticks at which a job finishes or is admitted, every ``step`` serves the
    same jobs, so this applies step's phases (leave, jump, admit, serve) once per
    stretch and writes the stretch's entries at once: O(jobs log jobs) work besides the
    trace itself.  tests/test_properties.py checks it equals ``run_by_steps``."""
    return run_valid(validate(jobs, slots, continuous), slots, continuous)


def run_valid(parsed: tuple[Job, ...], slots: int, continuous: bool) -> dict:
    """``run`` of a call already validated (``parsed`` = ``validate(jobs, slots, continuous)``)."""
    ordered = tuple(sorted(parsed, key=fifo_key))
    done: list[Completion] = []
    trace = []
    busy = clock = 0
    for first, until, served in stretches(ordered, slots, continuous, done):
        trace.extend([{"tick": tick, "served": served[:]} for tick in range(first, until)])
        busy += len(served) * (until - first)
        clock = until
    final = State(ordered, slots, continuous, clock, (), (), tuple(done), busy, ())
    return result_from_run(final, trace)


def stretches(ordered: tuple[Job, ...], slots: int, continuous: bool, done: list) -> Iterator[tuple[int, int, list]]:
    """The reference run as stretches ``(first, until, served)``: ticks first..until-1 each serve ``served``.

    ``ordered`` is the jobs in FIFO order; each admitted job's Completion is appended to
    ``done`` when it is admitted (its finish is start + tokens: no job is paused)."""
    head = 0  # ordered[head:] are not admitted
    active: dict[int, None] = {}  # the admitted, unfinished ids, in admission order
    finishing: list[tuple[int, int]] = []  # heap of the active jobs' (finish tick, id)
    clock = 0
    while head < len(ordered) or active:
        # 2. jump: nothing active and nothing arrived
        if not active and ordered[head].arrival > clock:
            clock = ordered[head].arrival
        # 3. admit in FIFO order
        if continuous or not active:
            while head < len(ordered) and len(active) < slots and ordered[head].arrival <= clock:
                job = ordered[head]
                head += 1
                active[job.id] = None
                heapq.heappush(finishing, (clock + job.tokens, job.id))
                done.append(Completion(job, clock, clock + job.tokens))
        # 4. serve the same jobs until the next finish or the next admission into a free slot
        until = finishing[0][0]
        if continuous and head < len(ordered) and len(active) < slots:
            until = min(until, ordered[head].arrival)
        yield clock, until, list(active)
        clock = until
        # 1. leave: the jobs whose last token was served in the tick before ``clock``
        while finishing and finishing[0][0] == clock:
            del active[heapq.heappop(finishing)[1]]


def remaining_work(state: State) -> int:
    """The ranking function: tokens not yet served; every step decreases it by at least one."""
    return sum(job.tokens for job in state.waiting) + sum(r.remaining for r in state.active)
