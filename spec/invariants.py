"""The invariant registry: every claim the harness checks, by name, listed once.

Every engine iterates ``INVARIANTS``: the oracle ``check`` runs each invariant's
check over a result, the Hypothesis stateful test and the CrossHair contracts
evaluate each state predicate after every step, and the Z3 engine proves each
state predicate inductive.  Order matters: ``well_typed`` comes first (as TLA+'s
TypeOK) so that the others may assume it, then the policy-free safety invariants,
then the FIFO policy rules, then the result's arithmetic and the per-call claims.

The safety family holds for any scheduler of this kind; the policy family is the
FIFO iteration-level policy.  A later model with prefill, token budgets, KV blocks,
preemption and cancellation keeps the safety family unchanged and replaces the
policy family.

A state predicate reads one State between ticks (``served`` is what the latest
tick served).  Each state predicate here has a twin in ``spec.result_checks``: the
rule of the incremental ``Replay`` that checks the same claim over any
implementation's trace, in time linear in the trace (the oracle and ``schedcheck
trace`` both drive that one Replay).
"""

from __future__ import annotations

from collections import Counter

from spec import result_checks
from spec.domain import Job, fifo_key
from spec.registry import FAMILIES, Invariant, broken_in, build_registry  # FAMILIES, Invariant: re-exported
from spec.state import Completion, Running, State

# --- state predicates -------------------------------------------------------------


def well_typed(state: State) -> bool:
    """Every field of the state has its type and range: ints, a bool, slots >= 1, a clock and busy count >= 0.

    The other invariants assume it, as TLA+ specifications assume TypeOK."""

    def is_int(value) -> bool:
        return type(value) is int

    def is_job(job) -> bool:
        return (
            isinstance(job, Job)
            and all(is_int(value) for value in job)
            and job.arrival >= 0
            and job.tokens >= 1
        )

    return (
        is_int(state.slots)
        and state.slots >= 1
        and type(state.continuous) is bool
        and is_int(state.clock)
        and state.clock >= 0
        and is_int(state.busy)
        and state.busy >= 0
        and isinstance(state.jobs, tuple)
        and all(is_job(job) for job in state.jobs)
        and all(is_job(job) for job in state.waiting)
        and all(
            isinstance(r, Running) and is_job(r.job) and is_int(r.start) and is_int(r.remaining)
            for r in state.active
        )
        and all(
            isinstance(d, Completion) and is_job(d.job) and is_int(d.start) and is_int(d.finish)
            for d in state.done
        )
        and all(is_int(job_id) for job_id in state.served)
    )


def no_duplicate_active(state: State) -> bool:
    """No job id is active twice, nor served twice in one tick.

    A request served twice returns two answers and takes two slots."""
    active_ids = [r.job.id for r in state.active]
    return len(set(active_ids)) == len(active_ids) and len(set(state.served)) == len(state.served)


def no_start_before_arrival(state: State) -> bool:
    """No job starts before it arrives.

    Otherwise the engine serves a request that has not been sent yet."""
    return all(r.start >= r.job.arrival for r in state.active) and all(
        d.start >= d.job.arrival for d in state.done
    )


def slot_bound(state: State) -> bool:
    """At most ``slots`` jobs are active, and at most ``slots`` were served in the latest tick.

    An overfull batch exceeds the engine's memory and its latency budget."""
    return len(state.active) <= state.slots and len(state.served) <= state.slots


def nonnegative_remaining(state: State) -> bool:
    """Every active job has between 0 and its tokens left to serve.

    A negative remaining count means tokens were produced that nobody asked for."""
    return all(0 <= r.remaining <= r.job.tokens for r in state.active)


def work_conservation(state: State) -> bool:
    """The services so far equal the tokens delivered: busy = served tokens of active and done jobs.

    Every slot-tick is accounted to exactly one job's token, none lost, none invented."""
    delivered = sum(r.job.tokens - r.remaining for r in state.active)
    delivered += sum(d.job.tokens for d in state.done)
    return state.busy == delivered


def every_job_completes_once(state: State) -> bool:
    """Each job is in exactly one of waiting, active and done, so at the end each is done once.

    A job lost from every queue never finishes; a job in two places is served twice."""
    placed = [job.id for job in state.waiting]
    placed += [r.job.id for r in state.active]
    placed += [d.job.id for d in state.done]
    return Counter(placed) == Counter(job.id for job in state.jobs)


def termination(state: State) -> bool:
    """The clock never passes the latest arrival plus the work served so far, so every run ends by max(arrival) + sum(tokens).

    Together with the ranking function ``remaining_work``, this is why no request waits forever."""
    latest = max((job.arrival for job in state.jobs), default=0)
    return state.clock <= latest + state.busy


def fifo_order(state: State) -> bool:
    """Jobs are admitted in (arrival, id) order only: every admitted job precedes every waiting one.

    A hidden priority (shortest first, say) starves the requests it does not favour."""
    waiting_keys = [fifo_key(job) for job in state.waiting]
    active_keys = [fifo_key(r.job) for r in state.active]
    admitted_keys = active_keys + [fifo_key(d.job) for d in state.done]
    return (
        waiting_keys == sorted(waiting_keys)
        and active_keys == sorted(active_keys)
        and (not waiting_keys or not admitted_keys or max(admitted_keys) < waiting_keys[0])
    )


def no_preemption(state: State) -> bool:
    """A started job is served in every tick from its start until it finishes.

    Then turnaround = wait + tokens, and no request is paused halfway through."""
    return all(r.job.tokens - r.remaining == state.clock - r.start for r in state.active) and all(
        d.finish - d.start == d.job.tokens for d in state.done
    )


def continuous_backfills(state: State) -> bool:
    """Under the continuous policy, no slot stayed free in the latest tick while an arrived job waited.

    This is the point of iteration-level scheduling: a freed slot is refilled at the next tick."""
    if not state.continuous or not state.served:
        return True
    latest_tick = state.clock - 1
    return len(state.served) == state.slots or all(job.arrival > latest_tick for job in state.waiting)


def static_batch_boundary(state: State) -> bool:
    """Under the static policy, all active jobs started together, and a batch that started in the latest tick took every arrived job up to ``slots``.

    A static batch is admitted only into an empty engine and then runs to its end."""
    if state.continuous:
        return True
    if len({r.start for r in state.active}) > 1:
        return False
    latest_tick = state.clock - 1
    starts = {r.job.id: r.start for r in state.active}
    starts.update((d.job.id, d.start) for d in state.done)
    fresh_batch = bool(state.served) and all(starts.get(i) == latest_tick for i in state.served)
    if fresh_batch and len(state.served) < state.slots:
        return all(job.arrival > latest_tick for job in state.waiting)
    return True


STATE_PREDICATES = (
    well_typed,
    no_duplicate_active,
    no_start_before_arrival,
    slot_bound,
    nonnegative_remaining,
    work_conservation,
    every_job_completes_once,
    termination,
    fifo_order,
    no_preemption,
    continuous_backfills,
    static_batch_boundary,
)

_FAMILY = {
    "well_typed": "type",
    "no_duplicate_active": "safety",
    "no_start_before_arrival": "safety",
    "slot_bound": "safety",
    "nonnegative_remaining": "safety",
    "work_conservation": "safety",
    "every_job_completes_once": "safety",
    "termination": "safety",
    "fifo_order": "policy",
    "no_preemption": "policy",
    "continuous_backfills": "policy",
    "static_batch_boundary": "policy",
}

# --- claims that are not about one state -------------------------------------------

_OTHER_CLAIMS = (
    (
        "metrics_consistent",
        "metrics",
        """The result's numbers agree with its trace: starts, finishes, waits, turnarounds, makespan, busy slots and utilization.

        Dashboards and SLOs are computed from these numbers, not from the trace.""",
    ),
    (
        "matches_reference",
        "metrics",
        """The result equals the reference run's (``spec.run``) on every job and every tick.

        The named invariants can all hold while the schedule is still not the FIFO one.""",
    ),
    (
        "validation",
        "call",
        """Every call outside the domain raises ValueError, and every call inside it does not.

        A scheduler that accepts 1.5 tokens never finishes that request; one that rejects a valid request drops it.""",
    ),
    (
        "input_unchanged",
        "call",
        """A call leaves the caller's jobs list and job dicts exactly as they were.

        The caller still owns them: a scheduler that edits them corrupts the next request.""",
    ),
    (
        "deterministic",
        "call",
        """The same call gives the same result every time, whatever calls came before it, rejected ones included.

        A scheduler that keeps state between calls gives answers no test can reproduce.""",
    ),
)


INVARIANTS: tuple[Invariant, ...] = build_registry(
    STATE_PREDICATES + _OTHER_CLAIMS, _FAMILY, result_checks.RESULT_CHECKS
)
BY_NAME: dict[str, Invariant] = {inv.name: inv for inv in INVARIANTS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
STATE_INVARIANTS: tuple[Invariant, ...] = tuple(inv for inv in INVARIANTS if inv.holds is not None)


def broken_state_invariants(state: State) -> list[str]:
    """The names of the state invariants that ``state`` breaks, in registry order."""
    return broken_in(STATE_INVARIANTS, state)
