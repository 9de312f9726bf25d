"""Calls aimed at the corners of the coverage model: one generator per corner, for Hypothesis and for the bulk phase.

Each generator (a *recipe*) builds a valid call from a *chooser*, which makes every
choice (an int in a range, a bool).  Two choosers run the same recipes:

- ``DrawChooser`` draws each choice from Hypothesis (``st.integers``, ``st.booleans``),
  so the Hypothesis search can aim at a corner, shrink what it finds and keep it in its
  example database (``aimed_calls``, a branch of each model's ``valid_calls``);
- ``RandomChooser`` takes them from a seeded ``random.Random`` and records them, for
  the bulk phase (proofs.search.bulk): a call costs a few microseconds, and the
  recorded choices, prefixed by the branch and the recipe, are exactly what Hypothesis
  would draw to make the same call, so a failing bulk call can be stored in the
  example database as one Hypothesis replays (``choices_for``).

The recipes are swarm-style: each draws a few feature switches first (ties in
arrival, idle gaps, ids spread wide or negative, aborts, a tight pool, chunked
prefill, containers other than a list), so one call exercises some features hard
and leaves the others out (Groce et al., "Swarm testing", 2012).  A recipe is named
after the corner it aims at (proofs.search.coverage); ``generic`` aims at none.  Every
call a recipe builds is inside the model's domain (tests/test_coverage.py draws
thousands and checks).  Large recipes (more than 30 jobs) are marked, so that the
throughput of the bulk phase can be measured on inputs of at most 30 jobs or requests.
"""

from __future__ import annotations

import random
from typing import Callable, NamedTuple

from proofs.search.built import built_once, st
from proofs.search.coverage import BUDGET_KS, INT32_MAX
from proofs.search.values import JobDict, JobList

AIMED_BRANCH = 3  # valid_calls draws integers(0, AIMED_BRANCH) first; this value takes the aimed branch


class RandomChooser:
    """Choices from a seeded ``random.Random``, recorded in the order made (as Hypothesis would record them)."""

    __slots__ = ("rng", "random", "choices", "arranged")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.random = rng.random
        self.choices: list = []
        self.arranged = None  # (items, config, rebuild) of the call's last two choices (``arrange``), for a variant

    def integer(self, low: int, high: int) -> int:
        span = high - low + 1
        # a float scaled for a span well within its 53 bits (uniform enough for a search, and 3x cheaper than randint)
        value = low + int(self.random() * span) if span < 2**40 else self.rng.randint(low, high)
        self.choices.append(value)
        return value

    def boolean(self) -> bool:
        value = self.random() < 0.5
        self.choices.append(value)
        return value

    def pick(self, options):
        return options[self.integer(0, len(options) - 1)]


class DrawChooser:
    """Choices drawn from Hypothesis inside an ``@st.composite``, so that they shrink."""

    __slots__ = ("draw",)

    def __init__(self, draw) -> None:
        self.draw = draw

    def integer(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def boolean(self) -> bool:
        return self.draw(st.booleans())

    def pick(self, options):
        return options[self.integer(0, len(options) - 1)]


class Recipe(NamedTuple):
    """A generator of valid calls aimed at one corner (``generic``: at none)."""

    corner: str
    build: Callable  # build(chooser) -> a valid call
    large: bool = False  # may build more than 30 jobs or requests


# -- shared pieces ----------------------------------------------------------------------------------------

ID_BASES = (0, 0, 7, -(2**63), 2**64, -(10**20), 2**63 - 3)


def _id_list(c, n: int, wide: bool) -> list[int]:
    """``n`` unique ids: dense from a base (ascending, descending or interleaved), or spread wide."""
    if wide:
        base = c.pick((-(2**80), -(2**63) - 2, 0, 2**63 - 1, 2**64))
        step = c.pick((2**40 + 1, 2**62 + 7, 2**64 + 3))
    else:
        base, step = c.pick(ID_BASES), c.pick((1, 1, 3, -1))
    order = c.integer(0, 2)  # 0: ascending with the call's order, 1: descending, 2: interleaved
    if order == 1:
        positions = range(n - 1, -1, -1)
    elif order == 2:
        positions = [*range(0, n, 2), *range(1, n, 2)]
    else:
        positions = range(n)
    return [base + step * p for p in positions]


KINDS = 5  # how the items are held: 0-2 a list, 3 a tuple, 4 list and dict subclasses
ORDERS = 3  # the order the caller lists them in: 0 as built, 1 reversed, 2 every other one first


def arrange(items: list, config, kind: int, order: int):
    """``items`` (and ``config``, when given) in the container ``kind`` and the caller's order ``order``."""
    if order == 1:
        items = items[::-1]
    elif order == 2:
        items = items[::2] + items[1::2]
    if kind == 3:
        items = tuple(items)
    elif kind == 4:
        items = JobList(JobDict(item) for item in items)
        if config is not None:
            config = JobDict(config)
    return items if config is None else (items, config)


def _container(c, items: list, config=None, rebuild=None):
    """The call's last two choices: the container and the caller's order of the items (neither changes the
    reference run: the spec sorts the items and reads them as plain dicts)."""
    kind, order = c.integer(0, KINDS - 1), c.integer(0, ORDERS - 1)
    if isinstance(c, RandomChooser):
        c.arranged = (items, config, rebuild)
    return arrange(items, config, kind, order)


def variant(chooser: "RandomChooser", kind: int, order: int) -> tuple:
    """The call ``chooser`` last built, in another container and order, and the choices that build it."""
    items, config, rebuild = chooser.arranged
    arranged = arrange(items, config, kind, order)
    return (rebuild(arranged) if rebuild is not None else arranged), [*chooser.choices[:-2], kind, order]


# -- the chapter's model --------------------------------------------------------------------------------------


def _jobs(c, n: int, arrivals: list[int], max_tokens: int, wide_ids: bool = False, ids=None) -> list[dict]:
    ids = ids if ids is not None else _id_list(c, n, wide_ids)
    return [{"id": i, "arrival": a, "tokens": c.integer(1, max_tokens)} for i, a in zip(ids, arrivals)]


def _burst_arrivals(c, n: int, base: int = 0, spread: int | None = None) -> list[int]:
    spread = c.pick((0, 1, 3, 12)) if spread is None else spread
    return [base + c.integer(0, spread) for _ in range(n)]


def _chapter_call(c, jobs: list, slots: int, continuous: bool | None = None):
    continuous = c.boolean() if continuous is None else continuous
    return _container(c, jobs, rebuild=lambda arranged: (arranged, slots, continuous)), slots, continuous


def chapter_generic(c):
    """Up to 30 jobs with swarm switches: ties, idle gaps, wide ids, long jobs, the policy."""
    n = c.integer(0, 30)
    ties, gaps, wide, long_jobs = c.boolean(), c.boolean(), c.boolean(), c.boolean()
    base = c.pick((0, 0, 5, 2**31 - 3, 2**32, 2**63, 2**64))
    arrivals, clock = [], base
    for _ in range(n):
        if gaps and c.integer(0, 3) == 0:
            clock += c.pick((1, 2, 9, 40, 1000, 2**32, 2**40))
        elif not ties:
            clock += c.integer(0, 3)
        arrivals.append(clock)
    jobs = []
    ids = _id_list(c, n, wide)
    for job_id, arrival in zip(ids, arrivals):
        tokens = c.integer(7, 200) if long_jobs and c.integer(0, 3) == 0 else c.integer(1, 6)
        jobs.append({"id": job_id, "arrival": arrival, "tokens": tokens})
    return _chapter_call(c, jobs, c.integer(1, max(1, n + 2)))


def chapter_one_slot(c):
    n = c.integer(2, 12)
    return _chapter_call(c, _jobs(c, n, _burst_arrivals(c, n), 6), 1)


def chapter_same_tick(c):
    n = c.integer(2, 16)
    base = c.pick((0, 3, 2**32, 2**64))
    return _chapter_call(c, _jobs(c, n, _burst_arrivals(c, n, base, c.pick((0, 1, 2))), 5), c.integer(1, n))


def chapter_full_with_queue(c):
    slots = c.integer(1, 6)
    n = slots + c.integer(1, 8)
    return _chapter_call(c, _jobs(c, n, _burst_arrivals(c, n), 5), slots)


def _bursts(c, n: int, gap: Callable[[int], int], first: int = 0, max_tokens: int = 4, wide: bool = False):
    """Jobs in two to four bursts, each burst's arrivals ``gap(busy)`` after the previous burst's work could end."""
    bursts = c.integer(2, 4)
    arrivals, clock, work = [], first, 0
    for index in range(n):
        if index and index % max(1, n // bursts) == 0:
            clock += work + gap(work)
            work = 0
        arrivals.append(clock)
        work += max_tokens
    return _jobs(c, n, arrivals, max_tokens, wide)


def chapter_idle_gap(c):
    n = c.integer(2, 14)
    jobs = _bursts(c, n, lambda work: c.integer(1, 30))
    return _chapter_call(c, jobs, c.integer(1, 4))


def chapter_idle_jump_2_32(c):
    n = c.integer(1, 12)
    start = c.pick((0, 0, 2**32, 2**63))
    if n == 1 or c.boolean():  # the jump from tick 0 itself
        arrivals = _burst_arrivals(c, n, start + 2**32 + c.integer(0, 3))
        return _chapter_call(c, _jobs(c, n, arrivals, 4), c.integer(1, 4))
    return _chapter_call(c, _bursts(c, n, lambda work: 2**32 + c.integer(0, 3), start), c.integer(1, 4))


def chapter_arrival_span(c):
    n = c.integer(2, 12)
    high = c.pick((2**32, 2**32 + 1, 2**33, 2**40, 2**64))
    arrivals = [c.pick((0, 1, 5, high - 1, high, high + 3)) for _ in range(n)]
    arrivals[c.integer(0, n - 1)] = 0
    arrivals[c.integer(0, n - 1)] = high
    return _chapter_call(c, _jobs(c, n, arrivals, 4), c.integer(1, 4))


def chapter_arrival_2_64(c):
    n = c.integer(1, 10)
    base = c.pick((2**64, 2**64 - 2, 2**70))
    arrivals = _burst_arrivals(c, n, base)
    if c.boolean():
        arrivals[0] = c.pick((0, 2**63))
    return _chapter_call(c, _jobs(c, n, arrivals, 4), c.integer(1, 4))


def chapter_jump_to_int32_max(c):
    n = c.integer(1, 8)
    arrivals = [INT32_MAX] * n
    if n > 1 and c.boolean():  # some work first, then idle until 2**31 - 1
        for index in range(c.integer(1, n - 1)):
            arrivals[index] = c.integer(0, 40)
    return _chapter_call(c, _jobs(c, n, sorted(arrivals), 4), c.integer(1, 3))


def chapter_steps_past_int32(c):
    n = c.integer(1, 8)
    arrivals = [INT32_MAX - c.integer(0, 3) for _ in range(n)]
    return _chapter_call(c, _jobs(c, n, arrivals, 6), c.integer(1, 3))


def _tied_jobs(c, ids: list[int]):
    """Jobs with these ids arriving in one or two ticks, so that ids break the FIFO ties."""
    return [{"id": i, "arrival": c.integer(0, 1), "tokens": c.integer(1, 4)} for i in ids]


def chapter_negative_id(c):
    n = c.integer(2, 10)
    base = c.pick((-1, -3, -(2**31), -(2**63), -(10**20)))
    ids = [base + k * c.pick((1, 1, 2, 5)) if k else base for k in range(n)]
    ids = list(dict.fromkeys(ids))
    if c.boolean():
        ids = ids[::-1]
    return _chapter_call(c, _tied_jobs(c, ids), c.integer(1, 3))


def chapter_ids_spread(c):
    n = c.integer(2, 10)
    low = c.pick((-(2**63), -(2**63) - 1, -1, 0, -(10**20)))
    ids = [low, low + 2**64 + c.integer(0, 3)] + [low + c.integer(1, 2**64) * 2 + 1 for _ in range(n - 2)]
    ids = list(dict.fromkeys(ids))
    if c.boolean():
        ids = ids[::-1]
    return _chapter_call(c, _tied_jobs(c, ids), c.integer(1, 3))


def chapter_id_beyond_64(c):
    n = c.integer(1, 10)
    base = c.pick((2**63, 2**63 + 1, -(2**63) - 1, 2**64, 2**80, -(2**80)))
    ids = list(dict.fromkeys([base + c.integer(-2, 2) * c.pick((1, 2**40)) for _ in range(n)]))
    ids += [c.integer(-3, 3) for _ in range(c.integer(0, 3))]
    ids = list(dict.fromkeys(ids))
    return _chapter_call(c, _tied_jobs(c, ids), c.integer(1, 3))


def _many_jobs(c, n: int, max_tokens: int, burst: int, id_base: int = 0):
    """``n`` cheap jobs from one drawn seed (drawing each field would cost a draw per field)."""
    rng = random.Random(c.integer(0, 2**32))
    stride = c.pick((1, 1, 3))
    order = list(range(n))
    if c.boolean():
        rng.shuffle(order)
    return [{"id": id_base + stride * i, "arrival": (i // burst) * rng.randint(0, 2), "tokens": rng.randint(1, max_tokens)}
            for i in order]


def chapter_queue_over_32(c):
    n = c.integer(34, 80)
    return _chapter_call(c, _many_jobs(c, n, c.integer(1, 3), n), c.integer(1, 4))


def chapter_queue_over_200(c):
    """All at once, so more than 200 wait before the first admissions; slots enough that jobs times busy ticks stays
    far under strategies.LARGE_JOB_TICKS (a scheduler, or an online drive, that scans every job each tick stays fast)."""
    n = c.integer(202, 260)
    return _chapter_call(c, _many_jobs(c, n, 1, n), c.integer(8, 64))


def chapter_busy_256(c):
    slots = c.integer(256, 290)
    n = slots + c.integer(1, 12)
    return _chapter_call(c, _many_jobs(c, n, c.integer(1, 2), n, c.pick((0, -(2**63)))), slots)


def chapter_over_300_jobs(c):
    n = c.integer(300, 340)
    return _chapter_call(c, _many_jobs(c, n, 1, c.pick((n, 50))), c.integer(8, 64))


CHAPTER = (
    Recipe("generic", chapter_generic),
    Recipe("one_slot", chapter_one_slot),
    Recipe("same_tick_arrivals", chapter_same_tick),
    Recipe("full_with_queue", chapter_full_with_queue),
    Recipe("idle_gap", chapter_idle_gap),
    Recipe("idle_jump_2_32", chapter_idle_jump_2_32),
    Recipe("arrival_span_2_32", chapter_arrival_span),
    Recipe("arrival_2_64", chapter_arrival_2_64),
    Recipe("idle_jump_to_int32_max", chapter_jump_to_int32_max),
    Recipe("steps_past_int32_max", chapter_steps_past_int32),
    Recipe("negative_id", chapter_negative_id),
    Recipe("ids_spread_2_64", chapter_ids_spread),
    Recipe("id_beyond_64_bits", chapter_id_beyond_64),
    Recipe("queue_over_32", chapter_queue_over_32, large=True),
    Recipe("queue_over_200", chapter_queue_over_200, large=True),
    Recipe("busy_slots_256", chapter_busy_256, large=True),
    Recipe("over_300_jobs", chapter_over_300_jobs, large=True),
)


# -- the serving model ----------------------------------------------------------------------------------------


def _config(max_seqs: int, token_budget: int, block_size: int, num_blocks: int, chunked: bool) -> dict:
    return {"max_seqs": max_seqs, "token_budget": token_budget, "block_size": block_size, "num_blocks": num_blocks,
            "chunked_prefill": chunked}


def _limit(config: dict) -> int:
    """The most tokens ``prompt + output - 1`` a request may need under ``config``."""
    limit = config["num_blocks"] * config["block_size"]
    return limit if config["chunked_prefill"] else min(limit, config["token_budget"])


def _request(rid: int, arrival: int, prompt: int, output: int, limit: int, abort: int | None = None) -> dict:
    """A request cut down to fit ``limit`` (output first, then prompt), so the call stays valid."""
    output = max(1, min(output, limit))
    prompt = max(1, min(prompt, limit - output + 1))
    request = {"id": rid, "arrival": arrival, "prompt": prompt, "output": output}
    if abort is not None:
        request["abort"] = max(arrival, abort)
    return request


def _serving_call(c, requests: list, config: dict, wide_ids: bool = False):
    ids = _id_list(c, len(requests), wide_ids)
    for request, rid in zip(requests, ids):
        request["id"] = rid
    return _container(c, requests, config)


def _maybe_abort(c, arrival: int, chance: bool) -> int | None:
    if not chance or c.integer(0, 3):
        return None
    return arrival + c.pick((0, 1, 2, 3, 5, 9, 17))


def serving_generic(c):
    """Up to 30 requests with swarm switches: aborts, chunking, a tight pool, a tight budget, ties, gaps, wide ids."""
    aborts, chunked, tight_pool, tight_budget, ties, gaps, wide = (c.boolean() for _ in range(7))
    block_size = c.pick((1, 1, 2, 3, 4, 16))
    budget = c.integer(1, 8) if tight_budget else c.pick((8, 16, 64, 2**20))
    n = c.integer(0, 30 if c.integer(0, 3) == 0 else 10)
    peak = c.integer(1, 12)
    num_blocks = -(-peak // block_size) + (c.integer(0, 2) if tight_pool else c.integer(0, 40))
    config = _config(c.pick((1, 2, 3, 4, 8, 64)), budget, block_size, num_blocks, chunked)
    limit = _limit(config)
    base = c.pick((0, 0, 5, INT32_MAX - 4, 2**40, 2**64))
    requests, clock = [], base
    for _ in range(n):
        if gaps and c.integer(0, 3) == 0:
            clock += c.pick((2, 9, 40, 2**32, 2**40))
        elif not ties:
            clock += c.integer(0, 2)
        prompt, output = c.integer(1, 10), c.integer(1, 6)
        requests.append(_request(0, clock, prompt, output, limit, _maybe_abort(c, clock, aborts)))
    return _serving_call(c, requests, config, wide)


def serving_max_seqs(c):
    max_seqs = c.integer(1, 4)
    n = max_seqs + c.integer(1, 4)
    config = _config(max_seqs, c.pick((4, 8, 32, 2**20)), c.integer(1, 4), c.integer(8, 40), c.boolean())
    limit = _limit(config)
    requests = [_request(0, c.integer(0, 2), c.integer(1, 6), c.integer(1, 6), limit) for _ in range(n)]
    return _serving_call(c, requests, config)


def _budget_exact(k: int):
    def build(c):
        """k requests running at once: k - 1 decoding and one long prefill cut by the budget, or k decodes at a budget of k."""
        budget = k + c.integer(0, 6)
        config = _config(k + c.integer(0, 2), budget, c.integer(1, 4), 0, True)
        config["num_blocks"] = k * 20 + c.integer(0, 20)
        limit = _limit(config)
        requests = [_request(0, c.integer(0, 1), c.integer(1, 3), c.integer(4, 8), limit) for _ in range(k - 1)]
        requests.append(_request(0, c.integer(0, 2), c.integer(budget, 4 * budget), c.integer(1, 4), limit))
        for _ in range(c.integer(0, 2)):
            requests.append(_request(0, c.integer(0, 6), c.integer(1, 8), c.integer(1, 4), limit))
        if c.boolean():  # k decodes only: the budget is exactly k
            config["token_budget"] = k
        return _serving_call(c, requests, config)

    build.__name__ = f"serving_budget_exact_{k}"
    return build


def serving_budget_cut(c):
    chunked = c.boolean()
    budget = c.integer(2, 12)
    config = _config(c.integer(2, 6), budget, c.integer(1, 3), 60, chunked)
    limit = _limit(config)
    requests = [_request(0, c.integer(0, 3), c.integer(1, budget), c.integer(1, 4), limit) for _ in range(c.integer(2, 8))]
    return _serving_call(c, requests, config)


def serving_pool_emptied(c):
    block_size = c.integer(1, 4)
    n = c.integer(1, 6)
    prompts = [c.integer(1, 8) for _ in range(n)]
    fill = c.integer(1, n)  # the first ``fill`` admissions take the whole pool
    num_blocks = sum(-(-p // block_size) for p in prompts[:fill])
    config = _config(c.integer(fill, fill + 2), 2**20 if c.boolean() else sum(prompts) + c.integer(0, 4), block_size,
                     num_blocks, c.boolean())
    limit = _limit(config)
    requests = [_request(0, 0, p, c.integer(1, 4), limit) for p in prompts]
    return _serving_call(c, requests, config)


def _pressure(c, at_least: int, aborts: bool = False):
    """Short prompts, long outputs, a pool for only some of them: decode growth preempts, resumes and preempts again."""
    block_size = c.integer(1, 2)
    config = _config(c.integer(at_least, at_least + 3), c.pick((8, 16, 2**20)), block_size, c.integer(3, 10), c.boolean())
    limit = _limit(config)
    requests = []
    for _ in range(c.integer(at_least, at_least + 4)):
        arrival = c.integer(0, 2)
        abort = arrival + c.integer(2, 14) if aborts and c.integer(0, 2) else None
        requests.append(_request(0, arrival, c.integer(1, 3), c.integer(limit // 2, limit), limit, abort))
    return _serving_call(c, requests, config)


def serving_preempt_3(c):
    return _pressure(c, 3)


def serving_preempted_twice(c):
    return _pressure(c, 2)


def serving_resumed(c):
    return _pressure(c, 1)


def serving_abort_preempted(c):
    return _pressure(c, 3, aborts=True)


def serving_abort_waiting(c):
    config = _config(c.integer(1, 2), c.pick((2, 4, 2**20)), c.integer(1, 4), 40, c.boolean())
    limit = _limit(config)
    requests = [_request(0, 0, c.integer(1, 8), c.integer(2, 8), limit)]
    for _ in range(c.integer(1, 5)):
        arrival = c.integer(0, 4)
        requests.append(_request(0, arrival, c.integer(1, 6), c.integer(1, 4), limit, arrival + c.integer(0, 4)))
    return _serving_call(c, requests, config)


def serving_abort_running(c):
    config = _config(c.integer(2, 6), c.pick((1, 2, 4, 2**20)), c.integer(1, 4), 60, c.boolean())
    limit = _limit(config)
    requests = []
    for _ in range(c.integer(1, 6)):
        arrival = c.integer(0, 3)
        requests.append(_request(0, arrival, c.integer(1, 8), c.integer(2, 8), limit,
                                 arrival + c.integer(1, 6) if c.boolean() else None))
    return _serving_call(c, requests, config)


def serving_abort_just_finished(c):
    """Requests that never wait for one another (a huge budget, max_seqs and pool): each finishes at arrival + output,
    and some abort exactly then (or one tick earlier, in its last tick)."""
    n = c.integer(1, 6)
    config = _config(n + c.integer(0, 2), 2**20, c.integer(1, 4), 0, c.boolean())
    config["num_blocks"] = n * 16
    requests = []
    for _ in range(n):
        arrival, output = c.integer(0, 4), c.integer(1, 6)
        abort = arrival + output - c.integer(0, 1) if c.boolean() else None
        requests.append(_request(0, arrival, c.integer(1, 12), output, 16 * config["block_size"], abort))
    return _serving_call(c, requests, config)


def serving_whole_pool(c):
    block_size = c.integer(1, 4)
    num_blocks = c.integer(1, 8)
    chunked = c.boolean()
    tokens = c.integer((num_blocks - 1) * block_size + 1, num_blocks * block_size)  # prompt + output - 1
    config = _config(c.integer(1, 3), tokens if not chunked else c.pick((1, 3, tokens, 2**20)), block_size, num_blocks, chunked)
    output = c.integer(1, tokens)
    requests = [_request(0, 0, tokens - output + 1, output, tokens)]
    for _ in range(c.integer(0, 3)):
        requests.append(_request(0, c.integer(0, 6), c.integer(1, 4), c.integer(1, 3), _limit(config)))
    return _serving_call(c, requests, config)


def _at_ticks(c, arrivals: list[int]):
    config = _config(c.integer(1, 3), c.pick((1, 4, 2**20)), c.integer(1, 4), 30, c.boolean())
    limit = _limit(config)
    requests = [_request(0, a, c.integer(1, 6), c.integer(1, 6), limit) for a in arrivals]
    return _serving_call(c, requests, config)


def serving_idle_gap(c):
    n = c.integer(2, 8)
    first = c.integer(1, n - 1)
    gap = c.pick((20, 60, 2**32 + 100, 2**40))
    return _at_ticks(c, [c.integer(0, 2) for _ in range(first)] + [gap + c.integer(0, 2) for _ in range(n - first)])


def serving_idle_jump_2_32(c):
    n = c.integer(1, 6)
    base = c.pick((0, 2**32))
    return _at_ticks(c, [base + 2**32 + 100 * k + c.integer(0, 3) for k in range(n)])


def serving_jump_to_int32_max(c):
    n = c.integer(1, 5)
    early = c.integer(0, n - 1)
    return _at_ticks(c, [c.integer(0, 5) for _ in range(early)] + [INT32_MAX] * (n - early))


def serving_steps_past_int32(c):
    return _at_ticks(c, [INT32_MAX - c.integer(0, 3) for _ in range(c.integer(1, 5))])


SERVING = (
    Recipe("generic", serving_generic),
    Recipe("max_seqs_full_with_queue", serving_max_seqs),
    *(Recipe(f"budget_exact_{k}", _budget_exact(k)) for k in BUDGET_KS),
    Recipe("budget_left_below_chunk", serving_budget_cut),
    Recipe("pool_emptied_by_admission", serving_pool_emptied),
    Recipe("preemption_with_3_running", serving_preempt_3),
    Recipe("preempted_resumed", serving_resumed),
    Recipe("preempted_twice", serving_preempted_twice),
    Recipe("abort_waiting", serving_abort_waiting),
    Recipe("abort_running", serving_abort_running),
    Recipe("abort_preempted", serving_abort_preempted),
    Recipe("abort_just_finished", serving_abort_just_finished),
    Recipe("request_needs_whole_pool", serving_whole_pool),
    Recipe("idle_gap", serving_idle_gap),
    Recipe("idle_jump_2_32", serving_idle_jump_2_32),
    Recipe("idle_jump_to_int32_max", serving_jump_to_int32_max),
    Recipe("steps_past_int32_max", serving_steps_past_int32),
)

RECIPES = {"chapter": CHAPTER, "serving": SERVING}


def recipes(model: str) -> tuple:
    """The recipes of ``model``: ``generic`` first, then one per corner in registry order."""
    return RECIPES[model]


LARGE_KEPT = 0  # a large recipe drawn by Hypothesis runs when integers(0, LARGE_ODDS) gives this, else ``generic`` does
LARGE_ODDS = 15  # so one in sixteen: large inputs cost Hypothesis milliseconds per example, and large_calls draws them too


@built_once
@st.composite
def aimed_calls(draw, model: str):
    """A valid call of ``model`` from one of its recipes (Hypothesis chooses which, and shrinks within it);
    a large recipe is kept one time in sixteen, else the generic one runs."""
    book = RECIPES[model]
    recipe = book[draw(st.integers(0, len(book) - 1))]
    if recipe.large and draw(st.integers(0, LARGE_ODDS)) != LARGE_KEPT:
        recipe = book[0]
    return recipe.build(DrawChooser(draw))


CACHING_RECIPE = -1  # the index the bulk phase gives its prefix-caching recipe (proofs.search.serving.build_caching_call)
CACHED_BRANCHES = (3, 4)  # valid_calls(caching=True) draws integers(0, 4) first; these values draw caching_calls


def choices_for(model: str, index: int, recipe_choices: list, caching: bool = False) -> tuple:
    """The choices Hypothesis draws, in ``model``'s ``valid_calls()``, to make the call recipe ``index`` made
    from ``recipe_choices`` (the aimed branch, the recipe, a large recipe kept, then the recipe's own choices);
    with ``caching``, first the branch of ``valid_calls(caching=True)`` (proofs.search.serving._caching_or)."""
    if index == CACHING_RECIPE:
        return (CACHED_BRANCHES[0], *recipe_choices)
    kept = (LARGE_KEPT,) if RECIPES[model][index].large else ()
    return (*((0,) if caching else ()), AIMED_BRANCH, index, *kept, *recipe_choices)
