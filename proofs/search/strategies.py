"""Hypothesis strategies for the input domain, and the catalogue of bad inputs.

``valid_calls`` covers the whole domain, not only small numbers: 0 to 30 jobs, ids
negative and beyond 64 bits, arrivals from 0 to past 2**64 (idle jumps make those
cheap), tokens from 1 to thousands under a total-work cap, slots from 1 to more than
the jobs, both policies, and deliberate ties in arrival, in tokens and in the FIFO
key.  Everything shrinks towards fewer jobs, then smaller slots, tokens, arrivals
and ids.

``bad_calls`` lists one call per class of bad input, systematically (every field
times every kind of bad value, missing and extra keys, repeated ids, bad slots, bad
continuous, a non-list, a non-dict job); ``corrupted_calls`` then combines them.
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

MAX_JOBS = 30
WORK_CAP = 3000  # total tokens per call: keeps one call within milliseconds
ARRIVAL_BASES = (0, 7, 2**31, 2**32, 2**63, 2**64, 2**70)
ID_BASES = (0, -(2**63), 2**64, -(10**20))


class JobList(list):
    """A list subclass: inside the domain, as every subclass of list is."""

    def __repr__(self) -> str:
        return f"JobList({list(self)!r})"


class JobDict(dict):
    """A dict subclass: inside the domain, as every subclass of dict is."""

    def __repr__(self) -> str:
        return f"JobDict({dict(self)!r})"


class IntSubclass(int):
    """An int subclass: not ``type(x) is int``, so outside the domain."""

    def __repr__(self) -> str:
        return f"IntSubclass({int(self)})"


@st.composite
def valid_calls(draw, max_jobs: int = MAX_JOBS, work_cap: int = WORK_CAP):
    """A valid (jobs, slots, continuous), shrinking towards the smallest input."""
    n = draw(st.integers(0, max_jobs))
    arrival_base = draw(st.sampled_from(ARRIVAL_BASES))
    arrival_spread = draw(st.sampled_from((0, 3, 12, 60)))  # 0: every job ties on arrival
    token_pool = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    long_jobs = draw(st.integers(0, 7)) == 0  # one input in eight has some long requests
    id_base = draw(st.sampled_from(ID_BASES))
    ids = draw(st.lists(st.integers(-3, 3 * max_jobs), min_size=n, max_size=n, unique=True))
    jobs = []
    work = 0
    for job_id in ids:
        if long_jobs and draw(st.integers(0, 3)) == 3:
            tokens = draw(st.integers(7, work_cap))
        else:
            tokens = draw(st.sampled_from(token_pool) | st.integers(1, 6))
        tokens = max(1, min(tokens, work_cap - work - (n - len(jobs) - 1)))
        work += tokens
        arrival = arrival_base + draw(st.integers(0, arrival_spread))
        jobs.append({"id": id_base + job_id, "arrival": arrival, "tokens": tokens})
    slots = draw(st.integers(1, max(1, n + 2)) | st.sampled_from((1, 2, 3)))
    continuous = draw(st.booleans())
    container = draw(st.sampled_from(("list", "list", "list", "tuple", "subclasses")))
    if container == "tuple":
        jobs = tuple(jobs)
    elif container == "subclasses":
        jobs = JobList(JobDict(job) for job in jobs)
    return jobs, slots, continuous


def _job(job_id=0, arrival=0, tokens=1, **override):
    job = {"id": job_id, "arrival": arrival, "tokens": tokens}
    job.update(override)
    return job


BAD_VALUES = {
    "bool": True,
    "float": 1.0,
    "fraction": 1.5,
    "nan": math.nan,
    "inf": math.inf,
    "str": "1",
    "None": None,
    "int subclass": IntSubclass(1),
}


def bad_calls() -> list[tuple[str, tuple]]:
    """One (rule, call) per class of bad input; each call must raise ValueError."""
    ok = _job(0)
    calls = []
    for field in ("id", "arrival", "tokens"):
        for kind, value in BAD_VALUES.items():
            calls.append((f"jobs[0].{field} is {kind}", ([_job(**{field: value})], 1, True)))
    calls += [
        ("jobs[0].arrival < 0", ([_job(arrival=-1)], 1, True)),
        ("jobs[0].tokens == 0", ([_job(tokens=0)], 1, True)),
        ("jobs[0].tokens < 0", ([_job(tokens=-1)], 1, True)),
        ("repeated id", ([ok, _job(0, arrival=1)], 1, True)),
        ("repeated id, static", ([ok, _job(0)], 2, False)),
        ("extra key", ([dict(ok, priority=0)], 1, True)),
    ]
    for key in ("id", "arrival", "tokens"):
        calls.append((f"missing key {key!r}", ([{k: v for k, v in ok.items() if k != key}], 1, True)))
    for kind, value in {"zero": 0, "negative": -1, "bool": True, "float": 1.0, "str": "1", "None": None}.items():
        calls.append((f"slots is {kind}", ([ok], value, True)))
    for kind, value in {"int 1": 1, "int 0": 0, "None": None, "str": "True"}.items():
        calls.append((f"continuous is {kind}", ([ok], 1, value)))
    for kind, value in {"None": None, "dict": ok, "str": "jobs", "int": 3, "set": {1, 2}}.items():
        calls.append((f"jobs is a {kind}", (value, 1, True)))
    for kind, value in {"None": None, "list": [0, 0, 1], "tuple": (0, 0, 1), "int": 5}.items():
        calls.append((f"a job is a {kind}", ([value], 1, True)))
    return calls


@st.composite
def corrupted_calls(draw):
    """A valid call with one or two things broken, anywhere in it."""
    jobs, slots, continuous = draw(valid_calls(max_jobs=6))
    jobs = [dict(job) for job in jobs] or [_job()]
    for _ in range(draw(st.integers(1, 2))):
        damage = draw(st.sampled_from(("field", "missing", "extra", "repeat", "slots", "continuous")))
        index = draw(st.integers(0, len(jobs) - 1))
        if damage == "field":
            field = draw(st.sampled_from(("id", "arrival", "tokens")))
            bad = BAD_VALUES | {"negative": -1, "zero": 0}
            choice = draw(st.sampled_from(sorted(bad)))
            if (field, choice) in (("id", "negative"), ("id", "zero"), ("arrival", "zero")):
                choice = "str"  # those values are valid there
            jobs[index][field] = bad[choice]
        elif damage == "missing":
            jobs[index].pop(draw(st.sampled_from(("id", "arrival", "tokens"))), None)
        elif damage == "extra":
            jobs[index]["extra"] = 0
        elif damage == "repeat":
            jobs.append(dict(jobs[index]))
        elif damage == "slots":
            slots = draw(st.sampled_from((0, -2, True, 2.0, "2", None)))
        else:
            continuous = draw(st.sampled_from((0, 1, None, "False")))
    return jobs, slots, continuous
