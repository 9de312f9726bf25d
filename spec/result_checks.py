"""Each invariant checked over a result: the twin of its state predicate, for any implementation.

A check reads an Observation (a well-typed result and its per-job services) and
returns the Violation at the earliest tick where its invariant breaks, or None.
Each runs in time linear in the trace, up to a sort of the jobs.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from typing import Callable

from spec.domain import fifo_key
from spec.metrics import utilization
from spec.observation import Observation, Violation
from spec.registry import earliest

RESULT_CHECKS: dict[str, Callable[[Observation], Violation | None]] = {}


def _checks(name: str):
    def register(fn):
        RESULT_CHECKS[name] = fn
        return fn

    return register


_earliest = earliest


def _observed_start(obs: Observation, job_id: int) -> int | None:
    services = obs.services.get(job_id)
    return services.first if services else None


@_checks("no_duplicate_active")
def _no_duplicate_active(obs: Observation) -> Violation | None:
    for tick, served in obs.trace:
        if len(set(served)) == len(served):
            continue
        repeated = [job_id for job_id, n in Counter(served).items() if n > 1]
        if repeated:
            return Violation(
                "no_duplicate_active",
                f"tick {tick} serves job {repeated[0]} {served.count(repeated[0])} times: {list(served)}",
                tick=tick,
                job=repeated[0],
                expected=1,
                actual=served.count(repeated[0]),
            )
    return None


@_checks("no_start_before_arrival")
def _no_start_before_arrival(obs: Observation) -> Violation | None:
    candidates = []
    for job in obs.jobs:
        services = obs.services.get(job.id)
        if services and services.first < job.arrival:
            candidates.append(
                Violation(
                    "no_start_before_arrival",
                    f"job {job.id} arrives at {job.arrival} but is served at tick {services.first}",
                    tick=services.first,
                    job=job.id,
                    expected=f">= {job.arrival}",
                    actual=services.first,
                )
            )
    arrival_of = {job.id: job.arrival for job in obs.jobs}
    for entry in obs.completed:
        arrival = arrival_of.get(entry["id"])
        if arrival is not None and entry["start"] < arrival:
            candidates.append(
                Violation(
                    "no_start_before_arrival",
                    f"job {entry['id']} arrives at {arrival} but its start is {entry['start']}",
                    tick=entry["start"],
                    job=entry["id"],
                    expected=f">= {arrival}",
                    actual=entry["start"],
                )
            )
    return _earliest(candidates)


@_checks("slot_bound")
def _slot_bound(obs: Observation) -> Violation | None:
    for tick, served in obs.trace:
        if len(served) > obs.slots:
            return Violation(
                "slot_bound",
                f"tick {tick} serves {list(served)}: {len(served)} jobs in {obs.slots} slots",
                tick=tick,
                expected=f"<= {obs.slots}",
                actual=len(served),
            )
    return None


@_checks("nonnegative_remaining")
def _nonnegative_remaining(obs: Observation) -> Violation | None:
    tokens = {job.id: job.tokens for job in obs.jobs}
    count: Counter = Counter()
    for tick, served in obs.trace:
        for job_id in served:
            count[job_id] += 1
            if job_id in tokens and count[job_id] == tokens[job_id] + 1:
                return Violation(
                    "nonnegative_remaining",
                    f"job {job_id} needs {tokens[job_id]} tokens but tick {tick} serves it once more",
                    tick=tick,
                    job=job_id,
                    expected=f"<= {tokens[job_id]} services",
                    actual=f"{tokens[job_id] + 1} services",
                )
    return None


@_checks("work_conservation")
def _work_conservation(obs: Observation) -> Violation | None:
    known = obs.by_id
    candidates = []
    for job_id, services in obs.services.items():
        if job_id not in known:
            candidates.append(
                Violation(
                    "work_conservation",
                    f"tick {services.first} serves job {job_id}, which is not in the input",
                    tick=services.first,
                    job=job_id,
                )
            )
    for job in obs.jobs:
        served = obs.services[job.id].count if job.id in obs.services else 0
        if served != job.tokens:
            last = obs.services[job.id].last if served else None
            candidates.append(
                Violation(
                    "work_conservation",
                    f"job {job.id} needs {job.tokens} tokens but is served {served} times",
                    tick=last,
                    job=job.id,
                    expected=job.tokens,
                    actual=served,
                )
            )
    return _earliest(candidates)


@_checks("every_job_completes_once")
def _every_job_completes_once(obs: Observation) -> Violation | None:
    listed = Counter(entry["id"] for entry in obs.completed)
    for job in obs.jobs:
        if listed[job.id] != 1:
            return Violation(
                "every_job_completes_once",
                f"job {job.id} appears {listed[job.id]} times in completed",
                job=job.id,
                expected=1,
                actual=listed[job.id],
            )
    known = obs.by_id
    for job_id in listed:
        if job_id not in known:
            return Violation(
                "every_job_completes_once",
                f"completed lists job {job_id}, which is not in the input",
                job=job_id,
                expected=None,
                actual=job_id,
            )
    return None


@_checks("termination")
def _termination(obs: Observation) -> Violation | None:
    bound = max((job.arrival for job in obs.jobs), default=0) + sum(job.tokens for job in obs.jobs)
    for tick, _served in obs.trace:
        if tick >= bound:
            return Violation(
                "termination",
                f"tick {tick} is served, past max(arrival) + sum(tokens) = {bound}",
                tick=tick,
                expected=f"< {bound}",
                actual=tick,
            )
    if obs.result["makespan_ticks"] > bound:
        return Violation(
            "termination",
            f"makespan {obs.result['makespan_ticks']} is past max(arrival) + sum(tokens) = {bound}",
            expected=f"<= {bound}",
            actual=obs.result["makespan_ticks"],
        )
    return None


@_checks("fifo_order")
def _fifo_order(obs: Observation) -> Violation | None:
    key_of = {job.id: fifo_key(job) for job in obs.jobs}
    candidates = []
    for tick, served in obs.trace:
        keys = [key_of[i] for i in served if i in key_of]
        if keys != sorted(keys):
            candidates.append(
                Violation(
                    "fifo_order",
                    f"tick {tick} lists {list(served)}, not in (arrival, id) order",
                    tick=tick,
                    expected=sorted((i for i in served if i in key_of), key=key_of.get),
                    actual=list(served),
                )
            )
            break
    started = sorted((job for job in obs.jobs if job.id in obs.services), key=fifo_key)
    for earlier, later in zip(started, started[1:]):
        earlier_start = obs.services[earlier.id].first
        later_start = obs.services[later.id].first
        if later_start < earlier_start:
            candidates.append(
                Violation(
                    "fifo_order",
                    f"job {later.id} (arrival {later.arrival}) starts at tick {later_start}, before "
                    f"job {earlier.id} (arrival {earlier.arrival}), which is ahead of it in FIFO order "
                    f"and starts at tick {earlier_start}",
                    tick=later_start,
                    job=later.id,
                    expected=f"start >= {earlier_start}",
                    actual=later_start,
                )
            )
    return _earliest(candidates)


@_checks("no_preemption")
def _no_preemption(obs: Observation) -> Violation | None:
    candidates = []
    for job in obs.jobs:
        services = obs.services.get(job.id)
        if services and services.last - services.first + 1 != services.count:
            candidates.append(
                Violation(
                    "no_preemption",
                    f"job {job.id} is served {services.count} times between ticks {services.first} "
                    f"and {services.last}: it was paused",
                    tick=services.first,
                    job=job.id,
                    expected=f"{services.last - services.first + 1} consecutive ticks",
                    actual=services.count,
                )
            )
    return _earliest(candidates)


def _first_idle_slot_while_waiting(obs: Observation, blocks_admission) -> Violation | None:
    """The earliest tick at which an arrived job waits although the policy would admit it.

    ``blocks_admission(tick_index)`` says whether the trace entry at that index had no
    room for a waiting job; a tick missing from the trace is idle and has room.
    """
    ticks = [tick for tick, _ in obs.trace]
    if ticks != sorted(set(ticks)):
        return None  # a trace out of order is metrics_consistent's to report
    # stop_at[k]: the first index >= k whose entry had room, or after which a tick is missing
    stop_at = [len(ticks)] * (len(ticks) + 1)
    for k in range(len(ticks) - 1, -1, -1):
        gap_after = k + 1 == len(ticks) or ticks[k + 1] != ticks[k] + 1
        stop_at[k] = k if (not blocks_admission(k) or gap_after) else stop_at[k + 1]
    candidates = []
    for job in obs.jobs:
        start = _observed_start(obs, job.id)
        if start is None or start <= job.arrival:
            continue
        k = bisect.bisect_left(ticks, job.arrival)
        if k == len(ticks) or ticks[k] != job.arrival:
            bad_tick = job.arrival  # nothing served at its arrival tick: an idle engine
        else:
            k = stop_at[k]
            bad_tick = ticks[k] if not blocks_admission(k) else ticks[k] + 1
        if bad_tick < start:
            candidates.append(
                Violation(
                    "",
                    f"job {job.id} arrived at {job.arrival} and waits at tick {bad_tick} "
                    f"although the engine had room for it (it starts at {start})",
                    tick=bad_tick,
                    job=job.id,
                    expected=f"start {bad_tick}",
                    actual=start,
                )
            )
    return _earliest(candidates)


@_checks("continuous_backfills")
def _continuous_backfills(obs: Observation) -> Violation | None:
    if not obs.continuous:
        return None
    found = _first_idle_slot_while_waiting(obs, lambda k: len(obs.trace[k][1]) >= obs.slots)
    return found._replace(invariant="continuous_backfills") if found else None


@_checks("static_batch_boundary")
def _static_batch_boundary(obs: Observation) -> Violation | None:
    if obs.continuous:
        return None
    for tick, served in obs.trace:
        starts = {_observed_start(obs, i) for i in served}
        if len(starts) > 1:
            return Violation(
                "static_batch_boundary",
                f"tick {tick} serves {list(served)}, which started at different ticks "
                f"{sorted(s for s in starts if s is not None)}: a job joined a running batch",
                tick=tick,
                expected="one batch start",
                actual=sorted(s for s in starts if s is not None),
            )

    def batch_is_running(k: int) -> bool:
        tick, served = obs.trace[k]
        fresh = all(_observed_start(obs, i) == tick for i in served)
        return not fresh or len(served) >= obs.slots

    found = _first_idle_slot_while_waiting(obs, batch_is_running)
    return found._replace(invariant="static_batch_boundary") if found else None


@_checks("metrics_consistent")
def _metrics_consistent(obs: Observation) -> Violation | None:
    def broken(message, **where) -> Violation:
        return Violation("metrics_consistent", message, **where)

    previous = None
    for tick, served in obs.trace:
        if previous is not None and tick <= previous:
            return broken(f"trace tick {tick} follows tick {previous}: ticks must ascend", tick=tick)
        if not served:
            return broken(f"trace tick {tick} serves nothing: list only ticks that serve", tick=tick)
        previous = tick
    ids = [entry["id"] for entry in obs.completed]
    if ids != sorted(ids):
        return broken(f"completed is ordered {ids}, not by id", expected=sorted(ids), actual=ids)

    known = obs.by_id
    for entry in obs.completed:
        job = known.get(entry["id"])
        services = obs.services.get(entry["id"])
        if job is None or services is None:
            continue  # reported by every_job_completes_once and work_conservation
        expect = {
            "arrival": job.arrival,
            "tokens": job.tokens,
            "start": services.first,
            "finish": services.last + 1,
            "wait": entry["start"] - job.arrival,
            "turnaround": entry["finish"] - job.arrival,
        }
        for field, value in expect.items():
            if entry[field] != value:
                return broken(
                    f"job {job.id}: {field}={entry[field]}, expected {value}",
                    job=job.id,
                    tick=services.first,
                    expected=value,
                    actual=entry[field],
                )
    result = obs.result
    makespan = max((entry["finish"] for entry in obs.completed), default=0)
    busy = sum(len(served) for _, served in obs.trace)
    expected = {"makespan_ticks": makespan, "busy_slots": busy}
    for field, value in expected.items():
        if result[field] != value:
            return broken(f"{field}={result[field]}, expected {value}", expected=value, actual=result[field])
    ratio = utilization(busy, obs.slots, makespan)
    if not math.isclose(result["utilization"], ratio, rel_tol=1e-9, abs_tol=0.0):
        return broken(
            f"utilization={result['utilization']!r}, expected {busy}/({obs.slots}*{makespan}) = {ratio!r}",
            expected=ratio,
            actual=result["utilization"],
        )
    return None
