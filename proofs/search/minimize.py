"""The deterministic final minimisation of a failing call.

Hypothesis's shrinker gets close; this pass makes the answer canonical, so the same
bug gives the same counterexample on every run.  It greedily tries smaller calls,
in the order of what "smaller" means to a reader: fewer jobs first (dropped, or two
neighbours merged into one with their tokens summed), then smaller slots, tokens,
arrivals and ids, then the list nearer id order (a swap of neighbours at a time),
and keeps a candidate only when it still breaks the same invariant.  A number is
shrunk to the smallest value that still fails without assuming failure is monotone
in it (``smallest_failing_scan``: the smallest values one by one, then bisection).
The bisection helpers are shared with the serving model's minimiser
(``proofs.search.minimize_serving``).  It repeats
until nothing changes or its deadline passes, and never returns a call that was
not seen to fail.
"""

from __future__ import annotations

import time
from typing import Callable

import spec

Call = tuple  # (jobs, slots, continuous)


def size_key(call: Call) -> tuple:
    """How big a valid call looks to a reader: jobs, then slots, tokens, arrivals, ids, then static before continuous."""
    jobs, slots, continuous = call
    return (
        len(jobs),
        slots,
        sum(job["tokens"] for job in jobs),
        sum(job["arrival"] for job in jobs),
        sum(abs(job["id"]) for job in jobs),
        [job["id"] for job in jobs],
        continuous,
    )


def smallest_failing(value: int, low: int, fails_with: Callable[[int], bool]) -> int:
    """The smallest v in [low, value) with fails_with(v) (else value), searching as if failure were monotone.

    ``fails_with`` is never asked about ``value`` itself, which is known to fail."""
    if value <= low:
        return value
    if fails_with(low):
        return low
    passing, failing = low, value  # invariant: fails_with(failing) held (or is the original)
    while failing - passing > 1:
        middle = (passing + failing) // 2
        if fails_with(middle):
            failing = middle
        else:
            passing = middle
    return failing


SCAN = 4  # the smallest values of a number tried one by one before bisecting the rest


def smallest_failing_scan(value: int, low: int, fails_with: Callable[[int], bool], scan: int = SCAN) -> int:
    """The smallest v in [low, value) with fails_with(v) (else value), without assuming failure is monotone in v.

    A bug need not show for every larger value (a budget of 2 may fail where 3 passes, a
    block size may fail only where it divides a prompt), and bisection alone then stops at
    a larger value than needed.  So the ``scan`` smallest values are tried one by one
    first; then the rest is bisected; then, if that found nothing smaller, ``value - 1``
    (the next round of the minimiser goes on from there).  ``fails_with`` is never asked
    about ``value`` itself, which is known to fail."""
    if value <= low:
        return value
    top = min(value, low + scan)
    for candidate in range(low, top):
        if fails_with(candidate):
            return candidate
    if top >= value:
        return value
    found = smallest_failing(value, top, fails_with)
    if found == value and value - 1 > top and fails_with(value - 1):
        return value - 1
    return found


def _like(template, jobs: list):
    """``jobs`` in the containers ``template`` uses (a tuple, a list or dict subclass)."""
    job_type = type(template[0]) if template else dict
    rebuilt = [job_type(job) for job in jobs]
    return rebuilt if type(template) is list else type(template)(rebuilt)


def smallest_failing_coarse(value: int, low: int, fails_with: Callable[[int], bool]) -> int:
    """As ``smallest_failing``, in steps of a factor 16 while the value is large: for
    failures that cost a timeout each (a hang), a few probes rather than one per bit;
    a small value (at most 64) is still bisected, in at most six probes."""
    if value <= low:
        return value
    if fails_with(low):
        return low
    while value // 16 > low and fails_with(value // 16):
        value //= 16
    if value <= 64:
        return smallest_failing(value, low, fails_with)
    return value


def minimize_valid_call(call: Call, fails: Callable[[Call], bool], seconds: float = 10.0, coarse: bool = False) -> Call:
    """Shrink a valid call that ``fails`` to a canonical smaller one that still fails.

    Plain lists of plain dicts are tried first; if the failure needs a tuple or a
    subclass, every candidate keeps the containers of the original.  ``coarse``
    shrinks numbers by factors of 16 instead of bisecting them, for failures that
    cost a timeout to observe."""
    deadline = time.monotonic() + seconds
    smallest = smallest_failing_coarse if coarse else smallest_failing_scan
    template = call[0]
    best = call
    plain = ([dict(job) for job in template], call[1], call[2])
    if type(template) is not list or any(type(job) is not dict for job in template):
        if fails(plain):
            best, template = plain, plain[0]
    else:
        best = plain

    def attempt(candidate: Call) -> bool:
        nonlocal best
        if time.monotonic() > deadline or size_key(candidate) >= size_key(best):
            return False
        if fails(candidate):
            best = candidate
            return True
        return False

    def with_jobs(jobs) -> Call:
        return (_like(template, list(jobs)), best[1], best[2])

    def with_field(index: int, field: str, value: int) -> Call:
        jobs = [dict(job) for job in best[0]]
        jobs[index][field] = value
        return with_jobs(jobs)

    changed = True
    while changed and time.monotonic() < deadline:
        before = best
        # fewer jobs: halves first, then quarters and so on (a large input shrinks in
        # a few dozen probes), then one at a time from the end
        chunks = [len(best[0]) // 2]
        while chunks[-1] > 1:
            chunks.append(chunks[-1] // 2)
        for chunk in chunks if len(best[0]) > 8 else (len(best[0]) // 2, 1):
            index = len(best[0]) - chunk
            while chunk and index >= 0:
                attempt(with_jobs(best[0][:index] + best[0][index + chunk :]))
                index -= chunk
        # fewer jobs, the same work: two jobs next to each other become one
        index = len(best[0]) - 2
        while index >= 0:
            jobs = [dict(job) for job in best[0]]
            jobs[index]["tokens"] += jobs[index + 1]["tokens"]
            attempt(with_jobs(jobs[: index + 1] + jobs[index + 2 :]))
            index -= 1
        # the canonical form, a probe each: arrivals shifted so the earliest is 0, ids
        # 0..n-1 in FIFO order, the list in id order
        earliest = min((job["arrival"] for job in best[0]), default=0)
        if earliest:
            attempt(with_jobs([dict(job, arrival=job["arrival"] - earliest) for job in best[0]]))
        order = sorted(range(len(best[0])), key=lambda i: (best[0][i]["arrival"], best[0][i]["id"]))
        renumbered = [dict(job) for job in best[0]]
        for new_id, index in enumerate(order):
            renumbered[index]["id"] = new_id
        attempt(with_jobs(renumbered))
        attempt(with_jobs(sorted(best[0], key=lambda job: job["id"])))
        # nearer id order, a swap of neighbours at a time: a failure that needs the list out
        # of order (the call sorts it in place) keeps only the disorder it needs
        swapped = True
        while swapped and time.monotonic() < deadline:
            swapped = False
            for index in range(len(best[0]) - 1):
                if best[0][index]["id"] > best[0][index + 1]["id"]:
                    jobs = list(best[0])
                    jobs[index], jobs[index + 1] = jobs[index + 1], jobs[index]
                    swapped = attempt(with_jobs(jobs)) or swapped
        in_order = sorted(best[0], key=lambda job: job["id"])
        for index in reversed(range(len(in_order) - 1)):  # id order but for one swap, the smallest (last) first
            jobs = list(in_order)
            jobs[index], jobs[index + 1] = jobs[index + 1], jobs[index]
            if attempt(with_jobs(jobs)):
                break
        if best[2] is True:
            attempt((best[0], best[1], False))
        # smaller slots
        smallest(best[1], 1, lambda s: attempt((best[0], s, best[2])))
        # smaller tokens, then earlier arrivals, job by job
        for field, low in (("tokens", 1), ("arrival", 0)):
            for index in range(len(best[0])):
                current = best[0][index][field]
                smallest(current, low, lambda v, i=index, f=field: attempt(with_field(i, f, v)))
        changed = best != before
    return best


def minimize_invalid_call(call: Call, fails: Callable[[Call], bool], seconds: float = 5.0) -> Call:
    """Shrink an invalid call by dropping the jobs that are not needed for it to fail.

    A candidate must stay outside the domain: dropping the second of two jobs with one
    id makes a valid call, which a target that accepts repeated ids rightly accepts."""
    deadline = time.monotonic() + seconds
    jobs, slots, continuous = call
    if not isinstance(jobs, (list, tuple)):
        return call
    best = list(jobs)
    index = len(best) - 1
    while index >= 0 and time.monotonic() < deadline:
        candidate = best[:index] + best[index + 1 :]
        if not spec.is_valid(candidate, slots, continuous) and fails((candidate, slots, continuous)):
            best = candidate
        index -= 1
    return (type(jobs)(best) if isinstance(jobs, tuple) else best, slots, continuous)
