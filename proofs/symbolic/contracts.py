"""CrossHair contracts, in PEP 316 docstring style: one served tick keeps every state invariant.

What they establish.  For every state invariant of ``spec.invariants.STATE_INVARIANTS``
(iterated, never listed here) there is one contract per subject:

- ``spec.step``: if a pre-state is in the bounded domain below and satisfies every
  state invariant, then ``spec.step`` of it satisfies the named invariant;
- ``impl.Scheduler.step``: the same, for our online scheduler.  A Scheduler is put
  in the pre-state (``scheduler_from_state`` sets its fields), ``step()`` runs, and
  ``Scheduler.view()`` is mapped back to a ``spec.State`` (``state_from_view``), on
  which the named invariant is evaluated.

Together with "the initial state satisfies every invariant" this is the inductive
step of the argument Init => Inv, Inv and Step => Inv'.  Two call contracts cover
``schedule(jobs, slots, continuous)`` (ours, or an external one): a valid call never
raises (``schedule_accepts_valid``), and a call that returns normally was valid while
an invalid one raises ValueError and nothing else (``schedule_rejects_invalid``, with
ValueError declared under ``raises:``).  ``schedule_matches_spec`` compares a whole
run with ``spec.check`` on small valid inputs.

Assumptions (the pre-state is "reachable-shaped"; each is a fact of every state
``spec.initial``/``spec.step`` produce, and ``reachable_shape`` states them):

- at most ``max_jobs`` jobs (3 by default); job k has id k and ids follow FIFO
  order (arrivals nondecreasing by id), so a scheduler may use ids only through
  comparison and equality (one that ranks by id alone is outside this domain);
  the state is not terminal (someone waits or is active);
- active in FIFO order, done in (finish, FIFO) order; an active job's remaining
  count, a done job's finish and ``busy`` are computed from the values that
  ``no_preemption`` and ``work_conservation`` force (see ``state_from_rows``);
- ``jobs`` is the FIFO-sorted union of waiting, active and done jobs (it never
  changes, so it is rebuilt from the three queues rather than chosen freely);
- ``served`` is what the latest tick served: the active jobs and the jobs done at
  ``clock``, in FIFO order, or ``()`` before the first tick (``busy == 0``);
- the strengthening lemmas (``lemmas_hold``, which the Z3 engine proves too): an
  active job started before the clock and has work left; a done job finished by it;
- ``1 <= slots <= max_jobs + 1``; arrivals, tokens, starts and the clock are unbounded symbolic ints.

The shape of the post-state is itself checked (contract ``reachable_shape``), so the
induction is closed over (shape and every invariant), not just assumed.

Bounds: CrossHair explores paths of one step from these symbolic pre-states.  Its
outcome "confirmed" covers every path of this bounded domain; anything else is
evidence, not proof.  Nothing here runs at import time: contracts are built by the
``*_contracts`` functions when an engine asks for them.

Style: PEP 316 docstrings (``pre:``/``post:``/``raises:``) are read by CrossHair with
no extra dependency, keep the contract beside the code it constrains, and declare
expected exceptions (``raises: ValueError``), which the ``asserts`` style cannot.  The
docstring names the registry entry through the closure variable ``invariant``, so one
source contract serves every invariant (CrossHair evaluates conditions with the
function's closure variables in scope).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Union

from spec.domain import Job, fifo_key, is_valid
from spec.invariants import STATE_INVARIANTS
from spec.oracle import check
from spec.state import Completion, Running, State, step
from proofs.views import impl_step

MAX_JOBS = 3
SHAPE = "reachable_shape"  # the name under which the shape assumption is re-checked
JOB_KEYS = ("id", "arrival", "tokens")

# The plain encoding of a state (what CrossHair makes symbolic, and what a
# counterexample is reported as):
#   waiting: [(id, arrival, tokens)], active: [(id, arrival, tokens, start, remaining)],
#   done: [(id, arrival, tokens, start, finish)], plus slots, continuous, clock, busy.
WaitingRow = tuple[int, int, int]
ActiveRow = tuple[int, int, int, int, int]
DoneRow = tuple[int, int, int, int, int]


class Contract(NamedTuple):
    """One CrossHair contract: the claim's name, what it is about, and the checked function."""

    name: str  # an invariant name, "reachable_shape", "validation" or "check"
    subject: str  # "spec.step" | "impl.Scheduler.step" | "schedule"
    fn: Callable  # its PEP 316 docstring holds the contract
    replay: Callable[[dict], Optional[str]]  # a concrete re-run from the arguments: None if the claim holds, else why not
    to_plain: Callable[[dict], dict]  # the arguments as the plain data a counterexample is reported as


# --- what a search explored -------------------------------------------------------------
#
# Each contract runs in a child of its own (proofs.symbolic.engine), so a module-level tally counts the scenarios that
# one contract's body ran to their end: a plain scenario (the serving contracts' decided call) once, however many
# CrossHair paths reach it; a symbolic path (the chapter's contracts) each time, since two paths differ in at least one
# decision.  The engine resets it, listens to it (so a child killed at its deadline has reported its count) and reads it.

_explored: set = set()
_listener: list = []


def start_exploration(listener: Callable[[int], None] | None = None) -> None:
    """Forget the scenarios counted so far; ``listener(count)`` is told each time the count grows."""
    _explored.clear()
    _listener[:] = [listener] if listener is not None else []


def explored() -> int:
    """How many distinct scenarios the contract bodies ran to their end since ``start_exploration``."""
    return len(_explored)


def note_scenario(key: Any = None) -> None:
    """Count one scenario a contract's body ran to its end: ``key`` its plain value, or None for a symbolic path."""
    from crosshair.tracers import NoTracing, is_tracing

    def note() -> None:
        before = len(_explored)
        _explored.add(("path", before) if key is None else key)
        if len(_explored) > before:
            for listener in _listener:
                listener(len(_explored))

    if not is_tracing():
        note()
        return
    with NoTracing():
        note()


def untraced(function: Callable, *args):
    """``function(*args)`` with CrossHair's tracing paused while it is on: the arguments are plain values, so the run
    is the same, at plain Python speed (a symbolic value reaching it would raise inside CrossHair, never pass)."""
    from crosshair.tracers import NoTracing, is_tracing

    if not is_tracing():
        return function(*args)
    with NoTracing():
        return function(*args)


def settle(value: int, low: int, high: int) -> int:
    """A plain int in ``low..high`` decided by one equality test per candidate, lowest first: ``value`` itself when
    it lies in the range, else ``high``.  Every int maps to one value, by exactly one sequence of decisions.

    CrossHair turns a symbolic int into a plain one (a ``range``, an index, a hash) by taking one model value of the
    solver, and every later path through the same point takes that same value; a branch is explored both ways, so
    deciding a value by branches spreads CrossHair's paths over the range (proofs.symbolic.serving, docs/crosshair.md)."""
    for candidate in range(low, high):
        if value == candidate:
            return candidate
    return high


# --- the plain encoding <-> spec.State ---------------------------------------------


def derived_served(active: tuple[Running, ...], done: tuple[Completion, ...], clock: int, busy: int) -> tuple[int, ...]:
    """The ids served in tick clock - 1 of a reachable state: active and just-finished jobs, FIFO."""
    if busy == 0:
        return ()
    latest = [r.job for r in active] + [d.job for d in done if d.finish == clock]
    return tuple(job.id for job in sorted(latest, key=fifo_key))


def state_from_plain(slots, continuous, clock, busy, waiting, active, done) -> State:
    """The spec.State of a plain encoding; ``jobs`` and ``served`` are rebuilt (see the module docstring)."""
    waiting_jobs = tuple(Job(i, a, t) for (i, a, t) in waiting)
    running = tuple(Running(Job(i, a, t), s, r) for (i, a, t, s, r) in active)
    completed = tuple(Completion(Job(i, a, t), s, f) for (i, a, t, s, f) in done)
    every = list(waiting_jobs) + [r.job for r in running] + [d.job for d in completed]
    jobs = tuple(sorted(every, key=fifo_key))
    served = derived_served(running, completed, clock, busy)
    return State(jobs, slots, continuous, clock, waiting_jobs, running, completed, busy, served)


def plain_from_state(state: State) -> dict:
    """A State as plain data: a dict of its fields, each job a dict (as counterexamples are reported)."""

    def job(j: Job) -> dict:
        return {"id": j.id, "arrival": j.arrival, "tokens": j.tokens}

    return {
        "jobs": [job(j) for j in state.jobs],
        "slots": state.slots,
        "continuous": state.continuous,
        "clock": state.clock,
        "waiting": [job(j) for j in state.waiting],
        "active": [{**job(r.job), "start": r.start, "remaining": r.remaining} for r in state.active],
        "done": [{**job(d.job), "start": d.start, "finish": d.finish} for d in state.done],
        "busy": state.busy,
        "served": list(state.served),
    }


def state_from_dict(plain: dict) -> State:
    """The inverse of ``plain_from_state``."""

    def job(d: dict) -> Job:
        return Job(d["id"], d["arrival"], d["tokens"])

    return State(
        jobs=tuple(job(d) for d in plain["jobs"]),
        slots=plain["slots"],
        continuous=plain["continuous"],
        clock=plain["clock"],
        waiting=tuple(job(d) for d in plain["waiting"]),
        active=tuple(Running(job(d), d["start"], d["remaining"]) for d in plain["active"]),
        done=tuple(Completion(job(d), d["start"], d["finish"]) for d in plain["done"]),
        busy=plain["busy"],
        served=tuple(plain["served"]),
    )


def reachable_shape(state: State) -> bool:
    """The facts of reachable states the invariants leave implicit (see the module docstring)."""
    placed = list(state.waiting) + [r.job for r in state.active] + [d.job for d in state.done]
    ids = [job.id for job in placed]
    return (
        len(set(ids)) == len(ids)
        and state.jobs == tuple(sorted(placed, key=fifo_key))
        and state.served == derived_served(state.active, state.done, state.clock, state.busy)
        and lemmas_hold(state)
    )


def lemmas_hold(state: State) -> bool:
    """The strengthening lemmas (the Z3 engine proves the same): an active job started
    before the clock and has work left; a done job finished by the clock."""
    return all(r.start < state.clock and r.remaining >= 1 for r in state.active) and all(
        d.finish <= state.clock for d in state.done
    )


def rows_meet_lemmas(clock: int, rows) -> bool:
    """``lemmas_hold`` and the ranges of ``well_typed``, read straight off the rows.

    The lemmas are assumed of the pre-state like the rest of the shape, and re-checked
    after the step by the ``reachable_shape`` contract, so the induction stays closed.
    Written as flat arithmetic on the rows, CrossHair settles them first and prunes the
    pre-states that would fail deep inside ``all_invariants_hold``: a slot_bound bug
    in a step falls in about 2.5 s instead of 18 s."""
    for arrival, tokens, place, start in rows:
        if place != ABSENT and (arrival < 0 or tokens < 1):
            return False
        if place == ACTIVE and not (arrival <= start < clock and clock - start < tokens):
            return False
        if place == DONE and not (arrival <= start and start + tokens <= clock):
            return False
    return clock >= 0


def all_invariants_hold(state: State) -> bool:
    """Every state invariant of the registry holds (well_typed first, so the rest may assume it)."""
    return all(inv.holds(state) for inv in STATE_INVARIANTS)


def claim_holds(name: str, state: State) -> bool:
    """True when the state invariant ``name`` (or ``reachable_shape``) holds of ``state``."""
    return _post_holds(name, state)


def _post_holds(name: str, state: State) -> bool:
    if name == SHAPE:
        return reachable_shape(state)
    return _BY_NAME[name].holds(state)


_BY_NAME = {inv.name: inv for inv in STATE_INVARIANTS}


# --- the step contracts ------------------------------------------------------------

# A symbolic job row of the step contracts: (arrival, tokens, place, start), where
# place is 0 waiting, 1 active, 2 done, 3 absent (not in this run).  Job k has id k.
# The remaining count of an active job, the finish tick of a done one and the busy
# count are not free: in every state that meets ``no_preemption`` and
# ``work_conservation`` (which the precondition requires) they equal
# tokens - (clock - start), start + tokens and the tokens delivered, so the encoding
# computes them, and CrossHair need not search for them.  When an invariant that
# forces one of them is not in the registry, that value is a free symbolic input
# instead (``FREE``).
JobState = tuple[int, int, int, int]
FreeValues = tuple[int, int, int, int]  # (busy, x0, x1, x2), read only when the registry does not force them
WAITING, ACTIVE, DONE, ABSENT = 0, 1, 2, 3


def _forced(name: str) -> bool:
    return name in _BY_NAME


def state_from_rows(slots: int, continuous: bool, clock: int, rows, free: tuple = ()) -> State:
    """The spec.State of the step contracts' encoding: job k has id k; queues in their reachable order.

    ``free`` supplies (busy, x0, x1, x2) when the registry does not force them (see above)."""
    waiting, active, done = [], [], []
    for job_id, (arrival, tokens, place, start) in enumerate(rows):
        if place == WAITING:
            waiting.append((job_id, arrival, tokens))
        elif place == ACTIVE:
            remaining = tokens - (clock - start) if _forced("no_preemption") else free[1 + job_id]
            active.append((job_id, arrival, tokens, start, remaining))
        elif place == DONE:
            finish = start + tokens if _forced("no_preemption") else free[1 + job_id]
            done.append((job_id, arrival, tokens, start, finish))
    # rows come in id order and rows_in_bounds makes ids follow FIFO order, so waiting
    # and active are already in FIFO order (sorting symbolic rows would only add paths)
    done.sort(key=lambda row: (row[4], row[1], row[0]))  # by finish, same-tick finishers in FIFO order
    if _forced("work_conservation"):
        busy = sum(row[2] - row[4] for row in active) + sum(row[2] for row in done)
    else:
        busy = free[0]
    return state_from_plain(slots, continuous, clock, busy, waiting, active, done)


def rows_in_bounds(slots: int, rows, max_jobs: int = MAX_JOBS) -> bool:
    """The explored domain: 1 <= slots <= max_jobs + 1, rows past max_jobs absent, someone not done."""
    return (
        1 <= slots <= max_jobs + 1
        and all(WAITING <= row[2] <= ABSENT for row in rows[:max_jobs])
        and all(row[2] == ABSENT for row in rows[max_jobs:])
        and all(rows[k][0] <= rows[k + 1][0] for k in range(len(rows) - 1))  # ids follow FIFO order
        and any(row[2] in (WAITING, ACTIVE) for row in rows)
    )


def spec_step_contract(invariant: str, max_jobs: int = MAX_JOBS) -> Callable:
    """The contract "a reachable-shaped state that keeps every invariant still keeps ``invariant`` after spec.step"."""

    def spec_step_keeps(slots: int, continuous: bool, clock: int, j0: JobState, j1: JobState, j2: JobState, free: FreeValues) -> State:
        """
        pre: rows_in_bounds(slots, (j0, j1, j2), max_jobs)
        pre: rows_meet_lemmas(clock, (j0, j1, j2))
        pre: all_invariants_hold(state_from_rows(slots, continuous, clock, (j0, j1, j2), free))
        post: _post_holds(invariant, __return__)
        """
        assert invariant and max_jobs  # bound into this closure: the conditions read them
        after = step(state_from_rows(slots, continuous, clock, (j0, j1, j2), free))
        note_scenario()
        return after

    spec_step_keeps.__name__ = spec_step_keeps.__qualname__ = f"spec_step_keeps_{invariant}"
    return spec_step_keeps


def impl_step_contract(invariant: str, scheduler_class: type | None = None, max_jobs: int = MAX_JOBS) -> Callable:
    """The same contract for ``Scheduler.step`` (impl's, or ``scheduler_class``), through ``view()``."""
    if scheduler_class is None:
        from impl.scheduler import Scheduler as scheduler_class

    def impl_step_keeps(slots: int, continuous: bool, clock: int, j0: JobState, j1: JobState, j2: JobState, free: FreeValues) -> State:
        """
        pre: rows_in_bounds(slots, (j0, j1, j2), max_jobs)
        pre: rows_meet_lemmas(clock, (j0, j1, j2))
        pre: all_invariants_hold(state_from_rows(slots, continuous, clock, (j0, j1, j2), free))
        post: _post_holds(invariant, __return__)
        """
        assert invariant and max_jobs  # bound into this closure: the conditions read them
        after = impl_step(scheduler_class, state_from_rows(slots, continuous, clock, (j0, j1, j2), free))
        note_scenario()
        return after

    impl_step_keeps.__name__ = impl_step_keeps.__qualname__ = f"impl_step_keeps_{invariant}"
    return impl_step_keeps


def _step_args_state(args: dict) -> State:
    rows = (tuple(args["j0"]), tuple(args["j1"]), tuple(args["j2"]))
    return state_from_rows(args["slots"], args["continuous"], args["clock"], rows, tuple(args["free"]))


def _replay_step(stepper: Callable[[State], State], invariant: str, args: dict) -> Optional[str]:
    """Re-run one step concretely from the contract's arguments; None when the claim holds after it."""
    state = _step_args_state(args)
    rows = (args["j0"], args["j1"], args["j2"])
    if not rows_in_bounds(args["slots"], rows) or not rows_meet_lemmas(args["clock"], rows) or not all_invariants_hold(state):
        return None
    try:
        after = stepper(state)
    except Exception as error:  # a buggy step may raise anything; that is the finding
        return f"step raised {error!r}"
    if _post_holds(invariant, after):
        return None
    return f"{invariant} fails after one step; post-state {plain_from_state(after)}"


def step_contracts(
    scheduler_class: type | None = None,
    *,
    subjects: tuple[str, ...] = ("spec.step", "impl.Scheduler.step"),
    names: tuple[str, ...] | None = None,
) -> list[Contract]:
    """One contract per state invariant of the registry (then the shape), per subject, in registry order."""
    if scheduler_class is None:
        from impl.scheduler import Scheduler as scheduler_class
    wanted = [inv.name for inv in STATE_INVARIANTS] + [SHAPE]
    if names is not None:
        wanted = [name for name in wanted if name in names]
    contracts = []
    for subject in subjects:
        if subject == "spec.step":
            stepper, make = step, spec_step_contract
        elif subject == "impl.Scheduler.step":
            stepper = _impl_stepper(scheduler_class)
            make = lambda name: impl_step_contract(name, scheduler_class)  # noqa: E731
        else:
            raise ValueError(f"subject={subject!r}: expected 'spec.step' or 'impl.Scheduler.step'")
        for name in wanted:
            contracts.append(
                Contract(name, subject, make(name), _bind_replay(stepper, name), _bind_plain(name))
            )
    return contracts


def _bind_plain(name: str) -> Callable[[dict], dict]:
    return lambda args: {"invariant": name, "pre_state": plain_from_state(_step_args_state(args))}


def _impl_stepper(scheduler_class: type) -> Callable[[State], State]:
    return lambda state: impl_step(scheduler_class, state)


def _bind_replay(stepper: Callable[[State], State], name: str) -> Callable[[dict], Optional[str]]:
    return lambda args: _replay_step(stepper, name, args)


# --- schedule(): validation and the oracle -----------------------------------------

MISSING = None  # in a symbolic job row, None stands for "this key is absent"
FieldValue = Optional[Union[int, bool]]
JobRow = tuple[FieldValue, FieldValue, FieldValue]


def call_from_rows(jobs: list[JobRow], slots, continuous) -> dict:
    """The concrete call a symbolic row encoding stands for: a None field is a missing key."""
    dicts = [{key: value for key, value in zip(JOB_KEYS, row) if value is not MISSING} for row in jobs]
    return {"jobs": dicts, "slots": slots, "continuous": continuous}


def small_rows(jobs: list, max_jobs: int) -> bool:
    """At most ``max_jobs`` rows, each field missing or in -1..2 (tiny values make equal ids likely)."""
    return len(jobs) <= max_jobs and all(v is MISSING or -1 <= v <= 2 for row in jobs for v in row)


def settled_call(jobs, slots, continuous, max_value: int = 2) -> dict:
    """The plain call small symbolic rows decide (``settle``): ids -1..max_value, arrivals 0..max_value, tokens
    1..max_value + 1, slots 1..MAX_JOBS + 1: every field valid, so only a repeated id makes the call invalid."""
    rows = [(settle(i, -1, max_value), settle(a, 0, max_value), settle(t, 1, max_value + 1)) for i, a, t in jobs]
    return call_from_rows(rows, settle(slots, 1, MAX_JOBS + 1), True if continuous else False)


def _run_valid(schedule: Callable, call: dict) -> bool:
    """Run a plain ``call`` when it is valid (then any exception is the finding); False when it is not valid."""
    if not is_valid(**call):
        return False
    schedule(call["jobs"], call["slots"], call["continuous"])
    return True


def schedule_accepts_valid_contract(schedule: Callable, max_jobs: int = MAX_JOBS) -> Callable:
    """The contract "a valid call does not raise" (any exception is a failure), on the plain calls of up to
    ``max_jobs`` small jobs that its symbolic rows decide (``settled_call``), each run untraced: a whole run on
    symbolic jobs took CrossHair's whole per-path limit (1 path in 2.5 s of CPU), a plain one a few ms."""

    def schedule_accepts_valid(jobs: list[tuple[int, int, int]], slots: int, continuous: bool) -> Any:
        """
        pre: len(jobs) <= max_jobs
        post: True
        """
        assert max_jobs  # bound into this closure: the conditions read it
        call = settled_call(jobs, slots, continuous)
        if untraced(_run_valid, schedule, call):
            note_scenario(repr(call))  # one distinct valid call explored
        return None

    return schedule_accepts_valid


def schedule_rejects_invalid_contract(schedule: Callable, max_jobs: int = MAX_JOBS) -> Callable:
    """The contract "an invalid call raises ValueError" (declared; any other exception is a failure)."""

    def schedule_rejects_invalid(jobs: list[JobRow], slots: Union[int, bool], continuous: Union[bool, int]) -> bool:
        """
        raises: ValueError
        pre: small_rows(jobs, max_jobs)
        post: _
        """
        assert max_jobs  # bound into this closure: the conditions read it
        call = call_from_rows(jobs, slots, continuous)
        valid = is_valid(**call)
        try:
            schedule(call["jobs"], call["slots"], call["continuous"])
        except ValueError:
            note_scenario()
            raise
        note_scenario()
        return valid  # reached only when schedule returned: then the call must have been valid

    return schedule_rejects_invalid


def schedule_rejects_repeated_id_contract(schedule: Callable) -> Callable:
    """The contract "a call whose jobs repeat an id raises ValueError" (the one invalid case a random
    symbolic id rarely hits: CrossHair realizes hashed ids to values that seldom collide)."""

    def schedule_rejects_repeated_id(job_id: int, first: tuple[int, int], second: tuple[int, int], slots: int, continuous: bool) -> bool:
        """
        raises: ValueError
        pre: 1 <= slots <= 2 and 0 <= job_id <= 2
        pre: all(0 <= a <= 2 and 1 <= t <= 2 for (a, t) in (first, second))
        post: _
        """
        jobs = [(job_id, first[0], first[1]), (job_id, second[0], second[1])]
        call = call_from_rows(jobs, slots, continuous)
        valid = is_valid(**call)
        try:
            schedule(call["jobs"], call["slots"], call["continuous"])
        except ValueError:
            note_scenario()
            raise
        note_scenario()
        return valid

    return schedule_rejects_repeated_id


def _repeated_id_call(args: dict) -> dict:
    jobs = [(args["job_id"], *args["first"]), (args["job_id"], *args["second"])]
    return call_from_rows(jobs, args["slots"], args["continuous"])


def _replay_validation(schedule: Callable, call: dict) -> Optional[str]:
    valid = is_valid(call["jobs"], call["slots"], call["continuous"])
    try:
        schedule(call["jobs"], call["slots"], call["continuous"])
    except ValueError as error:
        return None if not valid else f"a valid call raised {error!r}"
    except Exception as error:  # anything but ValueError is the finding
        return f"{'a valid' if valid else 'an invalid'} call raised {type(error).__name__}: {error!r}, not ValueError"
    return None if valid else "an invalid call was accepted (returned normally instead of raising ValueError)"


def _check_valid(schedule: Callable, call: dict) -> Optional[list]:
    """``spec.check`` of a plain valid ``call``'s result (a valid call that raises raises here), or None if invalid."""
    if not is_valid(**call):
        return None
    return check(call["jobs"], call["slots"], call["continuous"], schedule(call["jobs"], call["slots"], call["continuous"]))


def schedule_matches_spec_contract(schedule: Callable, max_jobs: int = MAX_JOBS, max_value: int = 4) -> Callable:
    """The contract "on a small valid call, spec.check finds nothing wrong with the result", on the plain calls its
    symbolic rows decide (``settled_call`` with values up to ``max_value``), each run untraced."""

    def schedule_matches_spec(jobs: list[tuple[int, int, int]], slots: int, continuous: bool) -> list:
        """
        pre: len(jobs) <= max_jobs
        post: not _
        """
        assert max_jobs  # bound into this closure: the conditions read it
        call = settled_call(jobs, slots, continuous, max_value)
        found = untraced(_check_valid, schedule, call)
        if found is None:
            return []  # a repeated id: outside this contract's domain
        note_scenario(repr(call))
        return found

    return schedule_matches_spec


def _replay_check(schedule: Callable, call: dict) -> Optional[str]:
    if not is_valid(call["jobs"], call["slots"], call["continuous"]):
        return None
    try:
        result = schedule(call["jobs"], call["slots"], call["continuous"])
    except Exception as error:  # a valid call that raises is the finding
        return f"a valid call raised {error!r}"
    violations = check(call["jobs"], call["slots"], call["continuous"], result)
    if not violations:
        return None
    return "; ".join(f"{v.invariant}: {v.message}" for v in violations)


def _call_of_args(args: dict) -> dict:
    return call_from_rows([tuple(row) for row in args["jobs"]], args["slots"], args["continuous"])


def _settled_call_of_args(args: dict, max_value: int = 2) -> dict:
    return settled_call([tuple(row) for row in args["jobs"]], args["slots"], args["continuous"], max_value)


def schedule_contracts(schedule: Callable, *, max_jobs: int = MAX_JOBS, with_check: bool = True) -> list[Contract]:
    """The call contracts of a ``schedule(jobs, slots, continuous)`` function: validation, then the oracle."""
    replay_validation = lambda args: _replay_validation(schedule, _call_of_args(args))  # noqa: E731
    contracts = [
        Contract("validation", "schedule", schedule_accepts_valid_contract(schedule, max_jobs),
                 lambda args: _replay_validation(schedule, _settled_call_of_args(args)), _settled_call_of_args),
        Contract("validation", "schedule", schedule_rejects_invalid_contract(schedule, max_jobs),
                 replay_validation, _call_of_args),
        Contract("validation", "schedule", schedule_rejects_repeated_id_contract(schedule),
                 lambda args: _replay_validation(schedule, _repeated_id_call(args)), _repeated_id_call),
    ]
    if with_check:
        contracts.append(
            Contract("check", "schedule", schedule_matches_spec_contract(schedule, max_jobs),
                     lambda args: _replay_check(schedule, _settled_call_of_args(args, 4)),
                     lambda args: _settled_call_of_args(args, 4))
        )
    return contracts
