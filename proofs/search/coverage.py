"""The coverage model: the corners where scheduler bugs live, one registry per model.

A corner is a situation a scheduler meets rarely and gets wrong often: every slot
busy while a job waits, a tick whose tokens add up to exactly the budget, the last
free KV block taken by an admission, a request preempted a second time, an abort
that lands on the tick a request finished, the clock stepping past 2**31 - 1.  Each
corner is a name, a one-sentence description and a predicate over a valid call and
its reference run (``spec.run`` / ``spec.serving.run``): the reference is what a
correct scheduler does, so "the call reaches the corner" means that every correct
scheduler is driven through it, whatever the target under check does.

What it establishes: nothing about the target.  It measures the search: how many of
the calls it judged reached each corner (``Coverage``), which the text report, the
JSON report and the PASS line give (a PASS names every corner no call reached).  The
search aims at each corner (proofs.search.aim: one generator per corner, for
Hypothesis and for the bulk phase), and tests/corpus/ holds, per corner, a one-bug
scheduler that only calls reaching that corner expose (its ``CORNER`` line).

What it assumes: the reference run is correct (the test suite checks that it keeps
every invariant of the registry), so replaying its trace needs no checks; a
predicate reads the reference's trace and records and the call, never the target.

Bounds: a predicate costs one pass over the reference's trace (``facts``, computed
once per call for all corners of a model), linear in the trace's entries and the
ids they list.

The registries, in order: ``CHAPTER`` (the chapter's model), ``SERVING`` (the
serving model), and ``SERVING_CACHE``, the place of the prefix-caching corners
(shared prefixes on and off block boundaries, hits on held and free blocks, a hit on
a block about to be evicted, a hit after a preemption, an abort of a shared block),
counted only for a target the search draws prefix caching for (``caching``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, deque
from typing import Callable, NamedTuple

INT32_MAX = 2**31 - 1  # the largest signed 32-bit int: a common "never" sentinel, and where an int32 clock wraps
BUDGET_KS = range(1, 9)  # budget_exact_k for k = 1..8


class Corner(NamedTuple):
    """A named situation of a run: its one-sentence description and the predicate that says a call reaches it."""

    name: str
    doc: str
    reached: Callable[["Facts"], bool]


class Facts:
    """What the corners of a model read from one call and its reference run, computed in one pass."""

    __slots__ = (
        "call", "reference", "n", "jumps", "ticks", "max_waiting", "max_busy", "full_with_queue", "budget_exact",
        "budget_cut", "pool_emptied", "seqs_full_with_queue", "preempt_running", "preempted_twice", "resumed", "aborts",
        "cache",
    )

    def __init__(self, call, reference) -> None:
        self.call = call
        self.reference = reference
        self.n = len(call[0])
        self.jumps: list = []  # (from tick, to tick) of every idle jump, the first one from tick 0 included
        self.ticks: set = set()  # the ticks of the reference's trace entries near INT32_MAX
        self.max_waiting = 0  # chapter: the most arrived jobs waiting for a slot at one tick, before its admissions
        self.max_busy = 0  # chapter: the most jobs served in one tick
        self.full_with_queue = False  # chapter: every slot busy while an arrived job waits
        self.budget_exact: set = set()  # serving: k such that a tick's k scheduled requests spend exactly the budget
        self.budget_cut = False  # serving: the budget left (> 0) was smaller than what the next request needed
        self.pool_emptied = False  # serving: an admission took the last free block
        self.seqs_full_with_queue = False  # serving: max_seqs run and an arrived request waits, after the waiting pass
        self.preempt_running = 0  # serving: the most requests running at the start of a tick that preempted
        self.preempted_twice = False  # serving: a resumed request was preempted again
        self.resumed = False  # serving: a preempted request was admitted again
        self.aborts: set = set()  # serving: "waiting", "running", "preempted", "just finished"
        self.cache: set = set()  # the prefix-caching corners reached (cache_facts)


def _jumps(facts: Facts, ticks) -> None:
    """The idle jumps of a trace given its entries' ticks in order (the clock starts at tick 0)."""
    clock = 0
    for tick in ticks:
        if tick > clock:
            facts.jumps.append((clock, tick))
        if INT32_MAX - 1 <= tick <= INT32_MAX + 1:
            facts.ticks.add(tick)
        clock = tick + 1


# -- the chapter's model -----------------------------------------------------------------------------


def chapter_facts(call, reference) -> Facts:
    """One pass over the chapter's reference run: idle jumps, the longest queue, the busiest tick."""
    jobs, slots, continuous = call
    facts = Facts(call, reference)
    trace = reference["trace"]
    _jumps(facts, [entry["tick"] for entry in trace])
    if not jobs:
        return facts
    arrivals = sorted(job["arrival"] for job in jobs)
    starts = sorted(done["start"] for done in reference["completed"])
    # waiting for a slot at tick t, before its admissions: arrived by t, not started before t (the most is at an arrival)
    facts.max_waiting = max(bisect_right(arrivals, t) - bisect_left(starts, t) for t in set(arrivals))
    for entry in trace:
        tick, busy = entry["tick"], len(entry["served"])
        if busy > facts.max_busy:
            facts.max_busy = busy
        if busy == slots and bisect_right(arrivals, tick) > bisect_right(starts, tick):  # a job waits after admissions
            facts.full_with_queue = True
    return facts


def _arrivals(facts: Facts) -> list:
    return [job["arrival"] for job in facts.call[0]]


def _ids(facts: Facts) -> list:
    return [job["id"] for job in facts.call[0]]


def _span(values: list) -> int:
    return max(values) - min(values) if values else 0


def _jumped(facts: Facts, mid_run: bool = False, length: int = 1, to: int | None = None) -> bool:
    return any((not mid_run or start > 0) and end - start >= length and (to is None or end == to)
               for start, end in facts.jumps)


def _stepped_past_int32(facts: Facts) -> bool:
    return INT32_MAX in facts.ticks and INT32_MAX + 1 in facts.ticks


CHAPTER = (
    Corner("one_slot", "One slot serves two or more jobs, one after another.",
           lambda f: f.call[1] == 1 and f.n >= 2),
    Corner("same_tick_arrivals", "Two or more jobs arrive on the same tick.",
           lambda f: len(set(_arrivals(f))) < f.n),
    Corner("full_with_queue", "Every slot is busy while an arrived job waits.",
           lambda f: f.full_with_queue),
    Corner("idle_gap", "The clock jumps over an idle stretch after some work was done.",
           lambda f: _jumped(f, mid_run=True)),
    Corner("idle_jump_2_32", "The clock jumps 2**32 ticks or more at once over an idle stretch.",
           lambda f: _jumped(f, length=2**32)),
    Corner("arrival_span_2_32", "The arrivals of one call span 2**32 ticks or more (0 together with 2**32, say).",
           lambda f: _span(_arrivals(f)) >= 2**32),
    Corner("arrival_2_64", "A job arrives at tick 2**64 or later.",
           lambda f: any(a >= 2**64 for a in _arrivals(f))),
    Corner("idle_jump_to_int32_max", "The clock jumps over an idle stretch to tick 2**31 - 1, a common 'never' sentinel.",
           lambda f: _jumped(f, to=INT32_MAX)),
    Corner("steps_past_int32_max", "Jobs are served at tick 2**31 - 1 and at 2**31: the clock steps past the signed 32-bit limit.",
           _stepped_past_int32),
    Corner("negative_id", "A job has a negative id.",
           lambda f: any(i < 0 for i in _ids(f))),
    Corner("ids_spread_2_64", "The ids of one call span 2**64 or more.",
           lambda f: _span(_ids(f)) >= 2**64),
    Corner("id_beyond_64_bits", "A job's id lies outside the signed 64-bit range.",
           lambda f: any(not -(2**63) <= i < 2**63 for i in _ids(f))),
    Corner("queue_over_32", "More than 32 arrived jobs wait for a slot at one tick (counted before its admissions).",
           lambda f: f.max_waiting > 32),
    Corner("queue_over_200", "More than 200 arrived jobs wait for a slot at one tick (counted before its admissions).",
           lambda f: f.max_waiting > 200),
    Corner("busy_slots_256", "256 jobs or more are served in one tick (256 slots or more, all busy).",
           lambda f: f.max_busy >= 256),
    Corner("over_300_jobs", "One call has 300 jobs or more.",
           lambda f: f.n >= 300),
)


# -- the serving model -----------------------------------------------------------------------------------


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def serving_facts(call, reference) -> Facts:
    """One pass over the serving reference's trace, replaying its queues, budget and pool.

    The replay follows the reference's own rules (the module docstring of
    spec.serving.state): the running pass is the prefix of ``scheduled`` whose requests
    ran at the tick's start, admissions the rest; preempted requests go to the front of
    the waiting queue; blocks are freed by aborts and preemptions before the waiting
    pass and by finishers after it."""
    requests, config = call
    facts = Facts(call, reference)
    trace = reference["trace"]
    _jumps(facts, [entry["tick"] for entry in trace])
    budget, max_seqs, chunked = config["token_budget"], config["max_seqs"], config["chunked_prefill"]
    arrival = {r["id"]: r["arrival"] for r in requests}
    known = {r["id"]: r["prompt"] for r in requests}  # prompt + generated
    computed = dict.fromkeys(known, 0)
    held = dict.fromkeys(known, 0)  # blocks held per request
    preemptions = dict.fromkeys(known, 0)
    started: set = set()
    running: list = []
    in_running: set = set()
    waiting = deque(sorted(known, key=lambda i: (arrival[i], i)))
    free = config["num_blocks"]
    no_blocks: dict = {}
    for entry in trace:
        tick = entry["tick"]
        for rid in entry["aborted"]:
            if rid in in_running:
                facts.aborts.add("running")
                running.remove(rid)
                in_running.discard(rid)
            else:
                facts.aborts.add("preempted" if rid in started else "waiting")
                waiting.remove(rid)
            free += held[rid]
            held[rid] = 0
        at_start = len(running)
        allocated = {rid: len(blocks) for rid, blocks in entry["allocated"]} if entry["allocated"] else no_blocks
        scheduled = entry["scheduled"]
        used = 0
        index = 0
        while index < len(scheduled) and scheduled[index][0] in in_running:  # the running pass
            rid, n = scheduled[index]
            if n < known[rid] - computed[rid] and n == budget - used:
                facts.budget_cut = True
            used += n
            index += 1
        preempted = entry["preempted"]
        if preempted:
            facts.preempt_running = max(facts.preempt_running, at_start)
            for rid in preempted:
                running.remove(rid)
                in_running.discard(rid)
                free += held[rid]
                held[rid] = computed[rid] = 0
                preemptions[rid] += 1
                if preemptions[rid] >= 2:
                    facts.preempted_twice = True
                waiting.appendleft(rid)
        for rid, n in scheduled[:index]:
            free -= allocated.get(rid, 0)
        for rid, n in scheduled[index:]:  # the waiting pass: admissions, from the front of the queue
            if n < known[rid] and n == budget - used:
                facts.budget_cut = True
            used += n
            free -= allocated.get(rid, 0)
            if free == 0:
                facts.pool_emptied = True
            if rid in started:
                facts.resumed = True
            waiting.remove(rid)
            running.append(rid)
            in_running.add(rid)
            started.add(rid)
        if not preempted and waiting and arrival[waiting[0]] <= tick:  # why the waiting pass stopped
            if len(running) >= max_seqs:
                facts.seqs_full_with_queue = True
            elif not chunked and 0 < budget - used < known[waiting[0]]:
                facts.budget_cut = True
        if used == budget:
            facts.budget_exact.add(len(scheduled))
        for rid, n in scheduled:  # compute
            done = computed[rid] + n
            computed[rid] = done
            held[rid] += allocated.get(rid, 0)
            if done == known[rid]:
                known[rid] = done + 1
        for rid in entry["finished"]:
            running.remove(rid)
            in_running.discard(rid)
            free += held[rid]
            held[rid] = 0
    for record in reference["requests"]:
        if record.get("abort") is not None and record["finish"] is not None and record["abort"] == record["finish"]:
            facts.aborts.add("just finished")
    if config.get("prefix_caching"):
        facts.cache = cache_facts(call, reference)
    return facts


def _common(one, other) -> int:
    """The length of the longest common prefix of two token sequences."""
    n = 0
    for a, b in zip(one, other):
        if a != b:
            break
        n += 1
    return n


def cache_facts(call, reference) -> set:
    """The prefix-caching corners a call with ``prefix_caching`` reaches, from one pass over its reference's trace.

    The replay tracks each block's holders (``allocated`` and ``hits`` add one, a request's
    preemption, abort or finish drops it from every block of its table) and the blocks sitting in
    the free queue with their cached contents (``freed`` puts them there, a hit or an allocation
    takes them out: an allocation of a block that was freed is the eviction of what it cached); blocks
    freed by aborts and preemptions enter the queue before the tick's waiting pass, by finishers after it.  Within
    a tick the replay goes in scheduling order (the running pass, then each admission's hits before its new blocks),
    so a hit sees the blocks and prompts of the requests scheduled before it in the same tick."""
    requests, config = call
    bs = config["block_size"]
    tokens = {r["id"]: tuple(r["tokens"]) for r in requests if r.get("tokens") is not None}
    reached: set = set()
    tables: dict = {}
    holders: dict = {}
    free: set = set()  # blocks in the free queue that were used before: cached, evictable
    preempted_once: set = set()
    started: list = []

    def drop(rid, aborted=False):
        for block in tables.pop(rid, []):
            others = holders.get(block, set()) - {rid}
            if aborted and others:
                reached.add("abort_of_shared_block")
            holders[block] = others

    for entry in reference["trace"]:
        for rid in entry["aborted"]:
            drop(rid, aborted=True)
        for rid in entry["preempted"]:
            drop(rid)
            preempted_once.add(rid)
        finishing = set(entry["finished"])
        for rid, blocks in entry["freed"]:  # what aborts and preemptions free, before the waiting pass
            if rid not in finishing:
                free.update(blocks)
        evicting = any(block in free for _, blocks in entry["allocated"] for block in blocks)
        hits = dict(entry["hits"])
        allocated = dict(entry["allocated"])
        for rid, _ in entry["scheduled"]:  # in scheduling order: a hit sees what earlier requests of its tick took
            blocks = hits.get(rid, ())
            if blocks:
                if any(block in free for block in blocks):
                    reached.add("hit_on_free_block")
                    if evicting:
                        reached.add("hit_while_evicting")
                if rid in preempted_once:
                    reached.add("hit_after_preemption")
                if any(holders.get(block) for block in blocks):
                    reached.add("hit_on_held_block")
                mine = tokens.get(rid)
                if mine is not None:
                    shared = max((_common(mine, tokens[o]) for o in started if o in tokens and o != rid), default=0)
                    if shared:
                        reached.add("shared_prefix_on_block_boundary" if shared % bs == 0 else
                                    "shared_prefix_off_block_boundary")
            for block in (*blocks, *allocated.get(rid, ())):
                free.discard(block)
                holders.setdefault(block, set()).add(rid)
            tables.setdefault(rid, []).extend(blocks)
            tables[rid].extend(allocated.get(rid, ()))
            if rid not in started:
                started.append(rid)
        for rid in entry["finished"]:
            drop(rid)
        for rid, blocks in entry["freed"]:  # what the finishers free, after it
            if rid in finishing:
                free.update(blocks)
    return reached


def _whole_pool(facts: Facts) -> bool:
    """A request's peak KV need is exactly the pool."""
    requests, config = facts.call
    return any(_blocks(r["prompt"] + r["output"] - 1, config["block_size"]) == config["num_blocks"] for r in requests)


def _budget_exact(k: int) -> Corner:
    return Corner(f"budget_exact_{k}", f"A tick's {k} scheduled request{'s' if k > 1 else ''} spend exactly the token budget.",
                  lambda f: k in f.budget_exact)


SERVING = (
    Corner("max_seqs_full_with_queue", "max_seqs requests run while an arrived request waits, after the waiting pass.",
           lambda f: f.seqs_full_with_queue),
    *(_budget_exact(k) for k in BUDGET_KS),
    Corner("budget_left_below_chunk", "The budget left in a tick is above 0 but below what the next request needs "
           "(its chunk is cut, or an unchunked head waits).", lambda f: f.budget_cut),
    Corner("pool_emptied_by_admission", "An admission takes the last free KV block.",
           lambda f: f.pool_emptied),
    Corner("preemption_with_3_running", "A request is preempted in a tick that started with three or more running.",
           lambda f: f.preempt_running >= 3),
    Corner("preempted_resumed", "A preempted request is admitted again, to recompute what it lost.",
           lambda f: f.resumed),
    Corner("preempted_twice", "A resumed request is preempted again.",
           lambda f: f.preempted_twice),
    Corner("abort_waiting", "A request is aborted before it was ever admitted.",
           lambda f: "waiting" in f.aborts),
    Corner("abort_running", "A running request is aborted.",
           lambda f: "running" in f.aborts),
    Corner("abort_preempted", "A preempted request is aborted while it waits to resume.",
           lambda f: "preempted" in f.aborts),
    Corner("abort_just_finished", "A request's abort tick is the tick it finished, so the abort must change nothing.",
           lambda f: "just finished" in f.aborts),
    Corner("request_needs_whole_pool", "A request needs exactly the whole pool at its peak "
           "(ceil((prompt + output - 1) / block_size) == num_blocks).", _whole_pool),
    Corner("idle_gap", "The clock jumps over an idle stretch after some work was done.",
           lambda f: _jumped(f, mid_run=True)),
    Corner("idle_jump_2_32", "The clock jumps 2**32 ticks or more at once over an idle stretch.",
           lambda f: _jumped(f, length=2**32)),
    Corner("idle_jump_to_int32_max", "The clock jumps over an idle stretch to tick 2**31 - 1, a common 'never' sentinel.",
           lambda f: _jumped(f, to=INT32_MAX)),
    Corner("steps_past_int32_max", "Requests are scheduled at tick 2**31 - 1 and at 2**31: the clock steps past the "
           "signed 32-bit limit.", _stepped_past_int32),
)

# The prefix-caching corners (issue 20) come here once spec/serving has the cache and
# the reference run reports its hits: a prefix shared on a block boundary, one shared
# off it (a partial block), and a hit on a block that the same tick evicts.  Each gets
# its generator in proofs.search.aim and its one-bug scheduler in tests/corpus/.
def _cached(name: str, doc: str) -> Corner:
    return Corner(name, doc, lambda f: name in f.cache)


SERVING_CACHE: tuple = (
    _cached("shared_prefix_on_block_boundary", "A request hits cached blocks of a prompt it shares with an earlier "
            "request up to a block boundary."),
    _cached("shared_prefix_off_block_boundary", "A request hits cached blocks of a prompt it shares with an earlier "
            "request past a block boundary (the partial block is not shared)."),
    _cached("hit_on_held_block", "A request hits a block another running request holds (its count goes above 1)."),
    _cached("hit_on_free_block", "A request hits a cached block sitting in the free queue (evictable, count 0)."),
    _cached("hit_while_evicting", "A hit on a block in the free queue in a tick whose allocations evict cached blocks "
            "from the same queue."),
    _cached("hit_after_preemption", "A preempted request hits cached blocks when it is admitted again."),
    _cached("abort_of_shared_block", "A request is aborted while another request holds one of its blocks."),
)

REGISTRIES = {"chapter": CHAPTER, "serving": SERVING}
CACHING = {"serving": SERVING_CACHE}  # counted only where the search draws prefix caching (proofs.models.declared)
FACTS = {"chapter": chapter_facts, "serving": serving_facts}


def corners(model: str, caching: bool = False) -> tuple:
    """The corners of ``model`` ("chapter" or "serving"), in registry order; with ``caching``, the prefix-caching ones too."""
    return REGISTRIES[model] + (CACHING.get(model, ()) if caching else ())


def names(model: str, caching: bool = False) -> tuple:
    return tuple(corner.name for corner in corners(model, caching))


def reached(model: str, call, reference, caching: bool = False) -> list[str]:
    """The names of the corners of ``model`` that the valid ``call``, whose reference run is ``reference``, reaches."""
    facts = FACTS[model](call, reference)
    return [corner.name for corner in corners(model, caching) if corner.reached(facts)]


class Coverage:
    """How many judged calls reached each corner of a model (every corner listed, reached or not); with
    ``caching`` (a target the search draws prefix caching for), the prefix-caching corners too."""

    def __init__(self, model: str, caching: bool = False) -> None:
        self.model = model
        self.caching = caching
        self.calls = 0  # the calls whose corners were measured
        self.counts: Counter = Counter()
        self.phases: dict[str, Counter] = {}  # per phase ("hypothesis", "bulk"): the same counts

    def add(self, call, reference, phase: str = "hypothesis") -> list[str]:
        """Count one valid call with its reference run; return the corners it reached."""
        names_reached = reached(self.model, call, reference, self.caching)
        self.add_names(names_reached, phase)
        return names_reached

    def add_names(self, names_reached, phase: str = "hypothesis", calls: int = 1) -> None:
        self.calls += calls
        counter = self.phases.setdefault(phase, Counter())
        counter["calls"] += calls
        for name in names_reached:
            self.counts[name] += 1
            counter[name] += 1

    def merge(self, other: "Coverage") -> None:
        self.caching = self.caching or other.caching
        self.calls += other.calls
        self.counts.update(other.counts)
        for phase, counter in other.phases.items():
            self.phases.setdefault(phase, Counter()).update(counter)

    def names(self) -> tuple:
        return names(self.model, self.caching)

    def unreached(self) -> list[str]:
        return [name for name in self.names() if not self.counts[name]]

    def to_json(self) -> dict:
        """``{"calls": N, "corners": {name: calls reaching it, ...} (registry order), "by_phase": {...}}``."""
        return {
            "calls": self.calls,
            "corners": {name: self.counts[name] for name in self.names()},
            "by_phase": {phase: {"calls": counter["calls"], **{name: counter[name] for name in self.names()}}
                         for phase, counter in sorted(self.phases.items())},
            "unreached": self.unreached(),
        }

    def lines(self) -> list[str]:
        """One line per corner: the calls that reached it, in total and per phase."""
        phases = sorted(self.phases)
        width = max(len(name) for name in self.names())
        out = []
        for corner in corners(self.model, self.caching):
            per_phase = ", ".join(f"{phase} {self.phases[phase][corner.name]}" for phase in phases)
            out.append(f"corner  {corner.name:{width}} {self.counts[corner.name]:>7} calls"
                       + (f"  ({per_phase})" if len(phases) > 1 else ""))
        return out
