"""Input checks for the scheduler: reject anything outside the domain before any work.

Written independently of spec/ on purpose: the scheduler under check must not lean
on the checker, so a mistake in one is not silently shared by the other.
"""

from __future__ import annotations

from typing import Any

FIELDS = ("id", "arrival", "tokens")
RULES = {"id": ("an int", None), "arrival": ("an int >= 0", 0), "tokens": ("an int >= 1", 1)}


def check_slots(slots: Any) -> None:
    if type(slots) is not int or slots < 1:
        raise ValueError(f"slots={slots!r}: expected an int >= 1")


def check_continuous(continuous: Any) -> None:
    if type(continuous) is not bool:
        raise ValueError(f"continuous={continuous!r}: expected a bool (True or False)")


def check_job(job: Any, where: str) -> tuple[int, int, int]:
    """Return (id, arrival, tokens) of a well-formed job dict, or raise ValueError naming ``where``."""
    if not isinstance(job, dict):
        raise ValueError(f"{where}={job!r}: expected a dict with keys id, arrival, tokens")
    missing = [field for field in FIELDS if field not in job]
    if missing:
        raise ValueError(f"{where}: missing key {missing[0]!r}")
    extra = [key for key in job if key not in FIELDS]
    if extra:
        raise ValueError(f"{where}: unexpected key {extra[0]!r}; a job has exactly id, arrival, tokens")
    for field in FIELDS:
        value = job[field]
        rule, least = RULES[field]
        if type(value) is not int or (least is not None and value < least):
            raise ValueError(f"{where}.{field}={value!r}: expected {rule}")
    return job["id"], job["arrival"], job["tokens"]


def check_jobs(jobs: Any) -> list[tuple[int, int, int]]:
    """Return every job as (id, arrival, tokens), in input order, or raise ValueError."""
    if not isinstance(jobs, (list, tuple)):
        raise ValueError(f"jobs={jobs!r}: expected a list or tuple of job dicts")
    rows = []
    seen: set[int] = set()
    for index, job in enumerate(jobs):
        # the common case, checked without building a message: a dict of exactly three valid ints
        if isinstance(job, dict) and len(job) == 3 and "id" in job and "arrival" in job and "tokens" in job:
            job_id, arrival, tokens = job["id"], job["arrival"], job["tokens"]
            if type(job_id) is int and type(arrival) is int and type(tokens) is int and arrival >= 0 and tokens >= 1:
                if job_id in seen:
                    first = next(i for i, other in enumerate(jobs) if other["id"] == job_id)
                    raise ValueError(f"jobs[{index}].id={job_id!r}: ids must be unique (also jobs[{first}].id)")
                seen.add(job_id)
                rows.append((job_id, arrival, tokens))
                continue
        check_job(job, f"jobs[{index}]")  # raises, naming the broken rule
        raise AssertionError(f"jobs[{index}]={job!r} passed check_job but not the fast check")
    return rows
