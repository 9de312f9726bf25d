"""Hypothesis strategies for the input domain, and the catalogue of bad inputs.

``valid_calls`` covers the whole domain, not only small numbers.  Small inputs (0 to
30 jobs) have arrivals in one of three shapes: clustered within 60 ticks of a base
from 0 to past 2**64 (same-tick arrivals included), apart by long idle gaps (up to
2**41 ticks between neighbours), or scattered over extremes (0 together with 2**32,
2**63, 2**64, 2**70 in one call); ids dense around one base, spread wide (negative
and beyond 64 bits, up to 2**80 apart), or scattered over extremes; tokens from 1 to
thousands under a total-work cap; slots from 1 to more than the jobs; both
policies; lists, tuples and subclasses.  One input in eight is large: 33 to 2000
cheap jobs (1 to 3 tokens each, slots enough to finish within about 250 busy
ticks, and jobs times busy ticks under 50 000), built from a few drawn numbers so that it stays within Hypothesis's buffer
and shrinks by its job count.  Ties: arrivals tie (same-tick arrivals) and tokens
tie; the FIFO key ``(arrival, id)`` never ties, since ids are unique, so the order
of two jobs is always fixed by the spec.  Everything shrinks towards fewer jobs,
then smaller slots, tokens, arrivals and ids.

``features`` names the interesting cases a call falls in (the engine reports how
often each was drawn, as Hypothesis ``event``s and in ``--json``); ``Bounds``
measures the ranges of jobs, slots, arrivals, tokens and ids of the calls actually
made, which every PASS line states.

``bad_calls`` lists one call per class of bad input, systematically (every field
times every kind of bad value, missing and extra keys, repeated ids, bad slots, bad
continuous, a non-list, a non-dict job); ``corrupted_calls`` then combines them.
"""

from __future__ import annotations

import math
import random

from proofs.search.built import built_once, st
from proofs.search.values import IntSubclass, JobDict, JobList  # noqa: F401 (the strategies' home of these names)

MAX_JOBS = 30
WORK_CAP = 3000  # total tokens per call: keeps one call within milliseconds
ARRIVAL_BASES = (0, 7, 2**31, 2**32, 2**63, 2**64, 2**70)
ARRIVAL_EXTREMES = (0, 1, 2**32 - 1, 2**32, 2**63, 2**64, 2**70)
IDLE_GAPS = (1, 2, 1000, 2**32, 2**40)
ID_BASES = (0, -(2**63), 2**64, -(10**20))
ID_EXTREMES = (0, -1, 2**31, -(2**63), 2**63, 2**64, -(10**20), 2**80)
LARGE_JOBS = (500, 1000, 2000)  # besides 33..300
LARGE_BUSY_TICKS = 250  # slots are drawn so that a large input keeps every slot busy at most this long ...
LARGE_JOB_TICKS = 50_000  # ... and jobs times busy ticks stays under this (a scheduler that scans every job each tick stays fast)
HUGE_ARRIVAL = 2**32
WIDE_IDS = 2**64


def _arrivals(draw, n: int) -> list[int]:
    shape = draw(st.sampled_from(("clustered", "clustered", "idle gaps", "extremes")))
    if shape == "clustered":
        base = draw(st.sampled_from(ARRIVAL_BASES))
        spread = draw(st.sampled_from((0, 3, 12, 60)))  # 0: every job arrives on the same tick
        return [base + draw(st.integers(0, spread)) for _ in range(n)]
    if shape == "idle gaps":
        clock = draw(st.sampled_from((0, 0, 2**32, 2**63)))
        arrivals = []
        for _ in range(n):
            clock += draw(st.sampled_from((0, 0, *IDLE_GAPS)) | st.integers(0, 2**41))
            arrivals.append(clock)
        return arrivals
    return [draw(st.sampled_from(ARRIVAL_EXTREMES)) + draw(st.integers(0, 2)) for _ in range(n)]


def _ids(draw, n: int) -> list[int]:
    shape = draw(st.sampled_from(("dense", "dense", "wide", "extremes")))
    if shape == "dense":
        base = draw(st.sampled_from(ID_BASES))
        return [base + i for i in draw(st.lists(st.integers(-3, 3 * MAX_JOBS), min_size=n, max_size=n, unique=True))]
    if shape == "wide":
        return draw(st.lists(st.integers(-(2**80), 2**80), min_size=n, max_size=n, unique=True))
    near = st.builds(lambda base, offset: base + offset, st.sampled_from(ID_EXTREMES), st.integers(-2, 2))
    return draw(st.lists(near, min_size=n, max_size=n, unique=True))


def busy_ticks(n: int) -> int:
    """The most ticks a large input of ``n`` jobs may keep its slots busy."""
    return max(10, min(LARGE_BUSY_TICKS, LARGE_JOB_TICKS // n))


@built_once
@st.composite
def large_calls(draw):
    """A valid call of 33 to 2000 cheap jobs, built from a few drawn numbers (the deterministic minimiser shrinks it)."""
    n = draw(st.integers(33, 300) | st.sampled_from(LARGE_JOBS))
    max_tokens = draw(st.integers(1, 3))
    burst = draw(st.sampled_from((n, 1, 7, 50)))  # jobs that arrive on the same tick
    gap = draw(st.sampled_from((0, 1, 3, HUGE_ARRIVAL, 2**40)))
    arrival_base = draw(st.sampled_from((0, 0, 2**32, 2**63)))
    id_base = draw(st.sampled_from(ID_BASES))
    stride = draw(st.sampled_from((1, 1, 3, 2**40 + 1)))
    rng = random.Random(draw(st.integers(0, 2**32)))
    tokens = [rng.randint(1, max_tokens) for _ in range(n)]
    fewest = max(1, -(-sum(tokens) // busy_ticks(n)))
    slots = fewest + draw(st.integers(0, 8) | st.sampled_from((32, 64)))
    order = list(range(n))
    if draw(st.booleans()):
        rng.shuffle(order)  # the caller's order is not the FIFO order
    jobs = [{"id": id_base + stride * i, "arrival": arrival_base + (i // burst) * gap, "tokens": tokens[i]} for i in order]
    return jobs, slots, draw(st.booleans())


@built_once
@st.composite
def small_calls(draw, max_jobs: int = MAX_JOBS, work_cap: int = WORK_CAP):
    """A valid call of at most ``max_jobs`` jobs, arrivals and ids in every shape."""
    n = draw(st.integers(0, max_jobs))
    token_pool = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    long_jobs = draw(st.integers(0, 7)) == 0  # one input in eight has some long requests
    arrivals = _arrivals(draw, n)
    ids = _ids(draw, n)
    jobs = []
    work = 0
    for job_id, arrival in zip(ids, arrivals):
        if long_jobs and draw(st.integers(0, 3)) == 3:
            tokens = draw(st.integers(7, work_cap))
        else:
            tokens = draw(st.sampled_from(token_pool) | st.integers(1, 6))
        tokens = max(1, min(tokens, work_cap - work - (n - len(jobs) - 1)))
        work += tokens
        jobs.append({"id": job_id, "arrival": arrival, "tokens": tokens})
    slots = draw(st.integers(1, max(1, n + 2)) | st.sampled_from((1, 2, 3)))
    return jobs, slots, draw(st.booleans())


@built_once
@st.composite
def valid_calls(draw, max_jobs: int = MAX_JOBS, work_cap: int = WORK_CAP, large: bool | None = None):
    """A valid (jobs, slots, continuous), shrinking towards the smallest input; large ones only when ``large`` (default: with the default ``max_jobs``).

    With the default arguments, one call in four comes from a generator aimed at a corner of the
    coverage model (``proofs.search.aim``), the others from the whole domain as below."""
    if max_jobs == MAX_JOBS and work_cap == WORK_CAP and large is None:
        from proofs.search.aim import AIMED_BRANCH, aimed_calls

        if draw(st.integers(0, AIMED_BRANCH)) == AIMED_BRANCH:
            return draw(aimed_calls("chapter"))
    large = (max_jobs == MAX_JOBS) if large is None else large
    if large and all(draw(st.tuples(*[st.booleans()] * 3))):  # one in eight, shrinking to small
        jobs, slots, continuous = draw(large_calls())
    else:
        jobs, slots, continuous = draw(small_calls(max_jobs, work_cap))
    container = draw(st.sampled_from(("list", "list", "list", "tuple", "subclasses")))
    if container == "tuple":
        jobs = tuple(jobs)
    elif container == "subclasses":
        jobs = JobList(JobDict(job) for job in jobs)
    return jobs, slots, continuous


def features(call) -> list[str]:
    """The interesting cases a valid call falls in, each named as the engine's statistics show it."""
    jobs, slots, continuous = call
    named = ["continuous" if continuous else "static"]
    n = len(jobs)
    named.append("no jobs" if n == 0 else "1 job" if n == 1 else "2-32 jobs" if n <= 32 else
                 "33-299 jobs" if n < 300 else "300+ jobs")
    if not jobs:
        return named
    arrivals = sorted(job["arrival"] for job in jobs)
    ids = [job["id"] for job in jobs]
    if len(set(arrivals)) < n:
        named.append("same-tick arrivals")
    if any(b - a >= HUGE_ARRIVAL for a, b in zip(arrivals, arrivals[1:])):
        named.append("idle gap >= 2**32")
    if arrivals[-1] >= HUGE_ARRIVAL:
        named.append("arrival >= 2**32")
    if arrivals[-1] >= 2**64:
        named.append("arrival >= 2**64")
    if arrivals[0] == 0 and arrivals[-1] >= HUGE_ARRIVAL:
        named.append("arrivals 0 and >= 2**32 together")
    if min(ids) < 0:
        named.append("negative id")
    if max(ids) - min(ids) >= WIDE_IDS:
        named.append("ids spread >= 2**64")
    if any(abs(i) >= 2**63 for i in ids):
        named.append("id beyond 64 bits")
    if slots == 1:
        named.append("one slot")
    if slots > n:
        named.append("more slots than jobs")
    if max(job["tokens"] for job in jobs) >= 100:
        named.append("job of 100+ tokens")
    if type(jobs) is not list:
        named.append("tuple or subclass")
    return named


def measure(call) -> dict:
    """The sizes of one valid call: ``{field: (low, high)}`` for jobs, slots, arrivals, tokens and ids."""
    jobs, slots, _ = call
    sizes = {"jobs": (len(jobs), len(jobs)), "slots": (slots, slots)}
    for field, key in (("arrivals", "arrival"), ("tokens", "tokens"), ("ids", "id")):
        values = [job[key] for job in jobs]
        if values:
            sizes[field] = (min(values), max(values))
    return sizes


class Bounds:
    """The ranges of the valid calls actually made (by default the chapter's: jobs, slots, arrivals, tokens, ids)."""

    def __init__(self, measure=measure, shown=("jobs", "slots", "arrivals", "tokens")) -> None:
        self.measure = measure
        self.shown = shown
        self.calls = 0
        self.low: dict = {}
        self.high: dict = {}

    def _see(self, field: str, low, high) -> None:
        self.low[field] = low if field not in self.low else min(self.low[field], low)
        self.high[field] = high if field not in self.high else max(self.high[field], high)

    def add(self, call) -> None:
        """Count one valid call the target was given."""
        self.calls += 1
        for field, (low, high) in self.measure(call).items():
            self._see(field, low, high)

    def merge(self, other: "Bounds") -> None:
        """Add the calls ``other`` measured."""
        self.calls += other.calls
        for field in other.low:
            self._see(field, other.low[field], other.high[field])

    def to_json(self) -> dict:
        """``{"valid_calls": N, "jobs": [low, high], ...}`` for the fields seen."""
        return {"valid_calls": self.calls} | {f: [self.low[f], self.high[f]] for f in self.low}

    def describe(self) -> str:
        """``jobs 0..2000, slots 1..64, arrivals 0..2**40, tokens 1..1000``, for the fields seen."""
        return ", ".join(f"{f} {number(self.low[f])}..{number(self.high[f])}" for f in self.shown if f in self.low)


def number(value: int) -> str:
    """An int as a reader takes it in: small ones in full, large ones as a power of two and a remainder."""
    if abs(value) < 10**6:
        return str(value)
    sign = "-" if value < 0 else ""
    power = abs(value).bit_length() - 1
    rest = abs(value) - 2**power
    if rest == 0:
        return f"{sign}2**{power}"
    if rest < 10**6:
        return f"{sign}(2**{power}+{rest})" if sign else f"2**{power}+{rest}"
    return f"{sign}~2**{power}"


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


@built_once
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
