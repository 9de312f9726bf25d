"""The input domain: exactly which calls ``schedule(jobs, slots, continuous)`` must accept.

A valid call has ``slots`` an int >= 1, ``continuous`` a bool, and ``jobs`` a list
or tuple of dicts with exactly the keys ``id``, ``arrival`` and ``tokens``, each of
type ``int`` (not bool, not any other subclass), with ``arrival >= 0``,
``tokens >= 1`` and no id repeated.  Ints of any size are valid.

Every other call is outside the domain and must raise ValueError before doing any
work.  The termination argument rests on these rules: integer tokens >= 1 make the
remaining work a natural number that every serving tick decreases (proofs/smt/claims.py
shows what breaks when each rule is dropped).
"""

from __future__ import annotations

from typing import Any, NamedTuple

JOB_KEYS = ("id", "arrival", "tokens")


class Job(NamedTuple):
    """One request: its id, the tick it arrives and the tokens it needs."""

    id: int
    arrival: int
    tokens: int


def fifo_key(job: Job) -> tuple[int, int]:
    """The admission order: earlier arrival first, then smaller id, and nothing else."""
    return (job.arrival, job.id)


def _is_int(value: Any) -> bool:
    return type(value) is int


def validate(jobs: Any, slots: Any, continuous: Any) -> tuple[Job, ...]:
    """Return the jobs of a valid call, in input order; raise ValueError naming the first broken rule."""
    if not _is_int(slots) or slots < 1:
        raise ValueError(f"slots={slots!r}: expected an int >= 1")
    if type(continuous) is not bool:
        raise ValueError(f"continuous={continuous!r}: expected a bool (True or False)")
    if not isinstance(jobs, (list, tuple)):
        raise ValueError(f"jobs={jobs!r}: expected a list or tuple of job dicts")
    parsed = []
    first_index_of: dict[int, int] = {}
    for index, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise ValueError(f"jobs[{index}]={job!r}: expected a dict with keys id, arrival, tokens")
        for key in JOB_KEYS:
            if key not in job:
                raise ValueError(f"jobs[{index}]: missing key {key!r}")
        for key in job:
            if key not in JOB_KEYS:
                raise ValueError(f"jobs[{index}]: unexpected key {key!r}; a job has exactly id, arrival, tokens")
        job_id, arrival, tokens = job["id"], job["arrival"], job["tokens"]
        if type(job_id) is not int:
            raise ValueError(f"jobs[{index}].id={job_id!r}: expected an int")
        if type(arrival) is not int or arrival < 0:
            raise ValueError(f"jobs[{index}].arrival={arrival!r}: expected an int >= 0")
        if type(tokens) is not int or tokens < 1:
            raise ValueError(f"jobs[{index}].tokens={tokens!r}: expected an int >= 1")
        if job_id in first_index_of:
            raise ValueError(
                f"jobs[{index}].id={job_id!r}: ids must be unique (also jobs[{first_index_of[job_id]}].id)"
            )
        first_index_of[job_id] = index
        parsed.append(Job(job_id, arrival, tokens))
    return tuple(parsed)


def is_valid(jobs: Any, slots: Any, continuous: Any) -> bool:
    """True exactly when ``schedule(jobs, slots, continuous)`` is in the domain."""
    try:
        validate(jobs, slots, continuous)
    except ValueError:
        return False
    return True
