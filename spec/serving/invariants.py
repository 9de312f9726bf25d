"""The serving model's invariant registry: every claim the harness checks for it, by name, listed once.

Same shape as the chapter's registry (``spec.invariants``), with the shared Invariant
type and families (``spec.registry``): ``well_typed`` first, then the policy-free
safety invariants (the chapter's names where the claim carries over, then the token
budget and the KV-cache claims, prefix caching's among them), then vLLM's FCFS policy
(its prefix-cache rules first), then the result's arithmetic and the per-call claims.  An engine with another policy (priorities, SJF,
another victim rule) must still pass every safety invariant; it is checked with
``policy="none"``.

A state predicate reads one State between ticks (``latest`` is what the latest tick
did).  A claim about a transition (which request the running pass preempts, which
blocks an admission hits, which blocks a tick takes) has no state predicate; the
oracle judges it by replaying the result's trace (``spec.serving.result_checks``), and
the step is its reference.

With prefix caching off (``state.pool`` is None) the caching claims hold at once and
every other claim is the one of issue 10.  With it on, the safety claims judge blocks
by what they hold (``Pool.content``) and by their counts, never by the policy's cache:
an engine that registers at admission, or de-duplicates, passes them.
"""

from __future__ import annotations

from collections import Counter

from spec.registry import FAMILIES, Invariant, broken_in, build_registry
from spec.serving import cache, result_checks
from spec.serving.cache import Pool
from spec.serving.domain import Config, Request, blocks_for, fcfs_key
from spec.serving.state import Ended, Entry, Ledger, Progress, State

__all__ = ["BY_NAME", "FAMILIES", "INVARIANTS", "NAMES", "STATE_INVARIANTS", "broken_state_invariants"]


def _progress(state: State) -> list[Progress]:
    """Every request's progress: waiting, running, finished, aborted."""
    return (
        list(state.waiting)
        + list(state.running)
        + [e.progress for e in state.finished]
        + [e.progress for e in state.aborted]
    )


def _by_id(state: State) -> dict[int, Progress]:
    return {p.id: p for p in _progress(state)}


# --- state predicates -------------------------------------------------------------


def well_typed(state: State) -> bool:
    """Every field of the state (and of a result) has its type and range: exact ints, a bool, limits >= 1, counters >= 0, known ids.

    The other invariants assume it, as TLA+ specifications assume TypeOK."""

    def is_int(value, low=None) -> bool:
        return type(value) is int and (low is None or value >= low)

    def is_opt(value) -> bool:
        return value is None or type(value) is int

    def is_request(r) -> bool:
        return (
            isinstance(r, Request)
            and is_int(r.id)
            and is_int(r.arrival, 0)
            and is_int(r.prompt, 1)
            and is_int(r.output, 1)
            and (r.abort is None or is_int(r.abort, r.arrival))
            and (r.tokens is None or (isinstance(r.tokens, tuple) and len(r.tokens) == r.prompt
                                      and all(is_int(t) for t in r.tokens)))
        )

    def is_progress(p) -> bool:
        return (
            isinstance(p, Progress)
            and is_request(p.request)
            and all(is_int(v, 0) for v in (p.computed, p.generated, p.preemptions, p.total, p.recomputed, p.cached))
            and isinstance(p.blocks, tuple)
            and all(is_int(b) for b in p.blocks)
            and all(is_opt(v) for v in (p.start, p.first_token, p.admitted))
        )

    def is_pairs(pairs, second) -> bool:
        return isinstance(pairs, tuple) and all(
            isinstance(pair, tuple) and len(pair) == 2 and is_int(pair[0]) and second(pair[1]) for pair in pairs
        )

    def is_ids(ids) -> bool:
        return isinstance(ids, tuple) and all(is_int(i) for i in ids)

    def is_blocks(blocks) -> bool:
        return is_ids(blocks)

    def is_pool(pool) -> bool:
        if pool is None:
            return not config.prefix_caching
        return (
            isinstance(pool, Pool)
            and bool(config.prefix_caching)
            and is_int(pool.fresh, 0)
            and pool.fresh <= config.num_blocks
            and is_ids(pool.returned)
            and isinstance(pool.cache, tuple)
            and all(isinstance(pair, tuple) and len(pair) == 2 and is_int(pair[1]) for pair in pool.cache)
            and isinstance(pool.content, tuple)
            and len(pool.content) == pool.fresh
        )

    config, latest = state.config, state.latest
    return (
        isinstance(config, Config)
        and all(is_int(v, 1) for v in config[:4])
        and type(config.chunked_prefill) is bool
        and type(config.reserve_full_sequence) is bool
        and config.prefix_caching in (None, False, True)
        and type(config.prefix_caching) in (type(None), bool)
        and is_pool(state.pool)
        and is_int(state.clock, 0)
        and isinstance(state.requests, tuple)
        and all(is_request(r) for r in state.requests)
        and all(isinstance(q, tuple) for q in (state.waiting, state.running, state.finished, state.aborted))
        and all(is_progress(p) for p in state.waiting + state.running)
        and all(isinstance(e, Ended) and is_progress(e.progress) and is_int(e.tick) for e in state.finished + state.aborted)
        and isinstance(state.ledger, Ledger)
        and all(is_int(v, 0) for v in state.ledger)
        and (
            latest is None
            or (
                isinstance(latest, Entry)
                and is_int(latest.tick, 0)
                and is_pairs(latest.scheduled, is_int)
                and is_ids(latest.preempted)
                and is_ids(latest.aborted)
                and is_pairs(latest.freed, is_blocks)
                and is_pairs(latest.allocated, is_blocks)
                and is_ids(latest.finished)
                and (latest.hits is None or is_pairs(latest.hits, is_blocks))
                and (config.prefix_caching or not latest.hits)
                and _latest_ids(latest) <= {r.id for r in state.requests}
            )
        )
    )


def _latest_ids(latest: Entry) -> set:
    """Every request id the latest tick's entry names."""
    named = {i for i, _ in latest.scheduled + latest.freed + latest.allocated + (latest.hits or ())}
    return named | set(latest.preempted) | set(latest.aborted) | set(latest.finished)


def no_duplicate_active(state: State) -> bool:
    """No request id is running twice, nor scheduled twice in one tick.

    A request served twice returns two answers and takes two sequences' memory."""
    running = [p.id for p in state.running]
    scheduled = [i for i, _ in state.latest.scheduled] if state.latest else []
    return len(set(running)) == len(running) and len(set(scheduled)) == len(scheduled)


def no_start_before_arrival(state: State) -> bool:
    """Nothing is scheduled before its arrival, nor at or after its abort tick; no request starts before it arrives.

    Otherwise the engine computes for a request not sent yet, or for one its client cancelled."""
    if any(p.start is not None and p.start < p.request.arrival for p in _progress(state)):
        return False
    if state.latest is None:
        return True
    requests = {r.id: r for r in state.requests}
    tick = state.latest.tick
    for request_id, _ in state.latest.scheduled:
        request = requests.get(request_id)
        if request is None or tick < request.arrival or (request.abort is not None and tick >= request.abort):
            return False
    return True


def slot_bound(state: State) -> bool:
    """At most ``max_seqs`` requests are running, and at most ``max_seqs`` were scheduled in the latest tick.

    The cap on running sequences is what bounds the engine's batch and its latency."""
    limit = state.config.max_seqs
    return len(state.running) <= limit and (state.latest is None or len(state.latest.scheduled) <= limit)


def nonnegative_remaining(state: State) -> bool:
    """Every request has 0 <= computed <= known (0 while waiting) and generated <= output, and every scheduled n >= 1.

    A count outside its range means tokens computed or generated that nobody asked for."""
    for p in _progress(state):
        if not (0 <= p.computed <= p.known and 0 <= p.generated <= p.request.output):
            return False
    if any(p.computed != 0 for p in state.waiting):
        return False
    if any(p.generated >= p.request.output for p in state.waiting + state.running):
        return False
    return state.latest is None or all(n >= 1 for _, n in state.latest.scheduled)


def work_conservation(state: State) -> bool:
    """The token ledger balances per request and in total: computed + cache hits = useful + recomputed + aborted (+ still cached), and a request finishes with exactly prompt + output - 1 cached.

    Every computed token is accounted once, so recompute and cancellation are measured, not hidden."""
    for p in state.waiting + state.running:
        if p.total + p.cached != p.computed + p.recomputed:
            return False
    for e in state.finished:
        p = e.progress
        if p.computed != p.request.work or p.total + p.cached != p.request.work + p.recomputed:
            return False
    for e in state.aborted:
        if e.progress.total + e.progress.cached != e.progress.computed + e.progress.recomputed:
            return False
    everyone = _progress(state)
    ledger = state.ledger
    cached = sum(p.computed for p in state.running)
    return (
        ledger.computed == sum(p.total for p in everyone)
        and ledger.hit == sum(p.cached for p in everyone)
        and ledger.recomputed == sum(p.recomputed for p in everyone)
        and ledger.aborted == sum(e.progress.computed for e in state.aborted)
        and ledger.useful == sum(e.progress.request.work for e in state.finished)
        and ledger.computed + ledger.hit == ledger.useful + ledger.recomputed + ledger.aborted + cached
    )


def every_job_completes_once(state: State) -> bool:
    """Each request is in exactly one of waiting, running, finished and aborted; a finished one has all its output, an aborted one left exactly at its abort tick.

    A request lost from every queue never ends; one in two places is served twice; a late abort wastes work."""
    placed = Counter(p.id for p in _progress(state))
    if placed != Counter(r.id for r in state.requests):
        return False
    requests = {r.id: r for r in state.requests}
    if any(p.request != requests[p.id] for p in _progress(state)):
        return False
    if any(e.progress.generated != e.progress.request.output for e in state.finished):
        return False
    if any(e.tick != e.progress.request.abort for e in state.aborted):
        return False
    return all(p.request.abort is None or p.request.abort >= state.clock for p in state.waiting + state.running)


def termination(state: State) -> bool:
    """The clock never passes the latest arrival plus the tokens computed and the requests aborted so far.

    Every tick past the last arrival does work, so no engine idles while requests wait; with the ranking function ``remaining_work`` every FCFS run ends."""
    latest = max((r.arrival for r in state.requests), default=0)
    return state.clock <= latest + state.ledger.computed + len(state.aborted)


def token_budget(state: State) -> bool:
    """The latest tick scheduled at most ``token_budget`` tokens, all requests together.

    The per-iteration token budget is what bounds an iteration's latency."""
    return state.latest is None or sum(n for _, n in state.latest.scheduled) <= state.config.token_budget


def kv_capacity(state: State) -> bool:
    """Every block id held, allocated or freed is in 0..num_blocks-1, and at most num_blocks distinct blocks are held.

    A block outside the pool is memory the engine does not have."""
    limit = state.config.num_blocks
    held = [b for p in state.running for b in p.blocks]
    latest = state.latest
    named = held + ([b for _, blocks in latest.allocated + latest.freed for b in blocks] if latest else [])
    return all(0 <= b < limit for b in named) and len(set(held)) <= limit


def no_false_sharing(state: State) -> bool:
    """Every block a running request holds at a position its cached tokens fill holds the KV of that request's own chain there, and a block being written is held by no one else.

    A block shared across different prefixes, partly filled, or overwritten after an eviction gives silently wrong output."""
    pool = state.pool
    if pool is None:
        return True
    size = state.config.block_size
    holders = Counter(b for p in state.running for b in set(p.blocks))
    for p in state.running:
        full = p.computed // size
        for j, block in enumerate(p.blocks):
            if j < full:
                if not (0 <= block < len(pool.content) and pool.content[block] == cache.chain(p.request, j, size)):
                    return False
            elif holders[block] > 1:
                return False
    return True


def refcount_exact(state: State) -> bool:
    """Every block's count is the number of running requests holding it, and the free queue holds exactly the blocks of count 0, each once; the latest tick freed only blocks that reached count 0.

    A count too high leaks a block forever; too low returns a block to the pool while a request still reads it."""
    pool = state.pool
    if pool is None:
        return True
    held = {b for p in state.running for b in p.blocks}
    returned = pool.returned
    if len(set(returned)) != len(returned) or any(not 0 <= b < pool.fresh for b in returned):
        return False
    if held & set(returned) or any(not 0 <= b < pool.fresh for b in held):
        return False
    if len(held) + len(returned) != pool.fresh:  # a taken id neither held nor in the queue: a leak
        return False
    latest = state.latest
    if latest is None:
        return True
    freed = [b for _, blocks in latest.freed for b in blocks]
    retaken = {b for _, blocks in latest.allocated + (latest.hits or ()) for b in blocks}
    return all(b not in held or b in retaken for b in freed)


def kv_exclusive(state: State) -> bool:
    """No block is held twice by one request nor, without prefix caching, by two; none was allocated twice in the latest tick, and no freed list repeats a block.

    A shared block lets one request overwrite another's KV cache: silently wrong output."""
    if state.pool is None:
        held = [b for p in state.running for b in p.blocks]
        if len(set(held)) != len(held):
            return False
    elif any(len(set(p.blocks)) != len(p.blocks) for p in state.running):
        return False
    if state.latest is None:
        return True
    allocated = [b for _, blocks in state.latest.allocated for b in blocks]
    freed_ids = [i for i, _ in state.latest.freed]
    return (
        len(set(allocated)) == len(allocated)
        and len(set(freed_ids)) == len(freed_ids)
        and all(len(set(blocks)) == len(blocks) for _, blocks in state.latest.freed)
    )


def kv_exact(state: State) -> bool:
    """A running request holds exactly ceil(cached tokens / block_size) blocks, hits included, every other holds none, and the latest tick's freed lists gave back what the finished and aborted held and no one else holds.

    A block not given back is leaked: the pool shrinks until nothing can run."""
    size = state.config.block_size
    if any(len(p.blocks) != blocks_for(p.computed, size) for p in state.running):
        return False
    if any(p.blocks for p in state.waiting) or any(e.progress.blocks for e in state.finished + state.aborted):
        return False
    latest = state.latest
    if latest is None:
        return True
    freed = {i: blocks for i, blocks in latest.freed}
    left = set(latest.finished) | set(latest.aborted) | set(latest.preempted)
    if any(i not in left for i in freed):
        return False
    ended = {e.progress.id: e.progress for e in state.finished + state.aborted}
    if any(i not in ended for i in latest.finished + latest.aborted):
        return False
    shared = state.pool is not None  # with caching, a release gives back only the blocks no one else holds
    for request_id in latest.finished:
        given, held = len(freed.get(request_id, ())), blocks_for(ended[request_id].request.work, size)
        if given > held or (given < held and not shared):
            return False
    for request_id in latest.aborted:
        given, held = len(freed.get(request_id, ())), blocks_for(ended[request_id].computed, size)
        if given > held or (given < held and not shared):
            return False
    held_now = {b for p in state.running for b in p.blocks}
    freed_by_finish = {b for i in latest.finished for b in freed.get(i, ())}
    return all(b in held_now or b in freed_by_finish for _, blocks in latest.allocated for b in blocks)


def fcfs_admission(state: State) -> bool:
    """The waiting queue is the preempted requests, then the never-admitted ones in (arrival, id) order, and every admitted request precedes every never-admitted waiting one in that order.

    FCFS is the fairness promise: no request is overtaken by a later one, however well it fits."""
    fresh = [p for p in state.waiting if p.start is None]
    if any(p.start is None for p in state.waiting[: len(state.waiting) - len(fresh)]):
        return False
    keys = [fcfs_key(p.request) for p in fresh]
    if keys != sorted(keys):
        return False
    started = [fcfs_key(p.request) for p in _progress(state) if p.start is not None]
    return not keys or not started or max(started) < keys[0]


def running_first(state: State) -> bool:
    """Each tick schedules the running requests first, greedily in running order (each min(known - computed, budget left)), before any admission.

    Admitting new work while a running request starves turns a long request into an endless one."""
    latest = state.latest
    if latest is None:
        return True
    everyone = _by_id(state)
    if any(i not in everyone for i, _ in latest.scheduled):
        return False
    fresh = [everyone[i].admitted == latest.tick and i not in latest.preempted for i, _ in latest.scheduled]
    if fresh != sorted(fresh):  # False (running) entries first, then True (admitted)
        return False
    if any(fresh):
        scheduled = {i for i, _ in latest.scheduled}
        return all(p.id in scheduled for p in state.running if p.admitted != latest.tick)
    return True


def no_admission_after_preemption(state: State) -> bool:
    """A tick that preempted admitted nobody.

    Admitting while preempting evicts one request to let in another, the thrashing vLLM's scheduler avoids."""
    latest = state.latest
    if latest is None or not latest.preempted:
        return True
    everyone = _by_id(state)
    return all(i in everyone and everyone[i].admitted != latest.tick for i, _ in latest.scheduled)


def work_conserving(state: State) -> bool:
    """In a tick without preemption, each admission got the chunk its rule says, and the waiting pass stopped only because the head had not arrived, max_seqs ran, the budget was spent, or the head did not fit (its chunk's blocks, or with reserve_full_sequence its whole known length's).

    An admission pass that stops early leaves memory and budget idle while requests wait."""
    latest = state.latest
    if latest is None or latest.preempted or not latest.scheduled:
        return True
    config = state.config
    size = config.block_size
    everyone = _by_id(state)
    hit_of = dict(latest.hits or ())
    budget = config.token_budget
    for request_id, n in latest.scheduled:
        p = everyone.get(request_id)
        if p is None:
            return False
        if p.admitted == latest.tick:
            start = len(hit_of.get(request_id, ())) * size  # the tokens its hits gave it
            whole_generated = n == p.request.prompt + p.generated - 1 - start  # the rest of its known length, and it generated
            chunk = config.chunked_prefill and n == budget and n < p.request.prompt + p.generated - start
            if not (whole_generated or chunk):
                return False
        budget -= n
    if not state.waiting:
        return True
    head = state.waiting[0]
    freed = dict(latest.freed)
    running_then = len(state.running) + len(latest.finished)
    # the blocks held when the waiting pass stopped: the running ones' now, and those the finishers gave back since
    held_then = {b for p in state.running for b in p.blocks} | {b for i in latest.finished for b in freed.get(i, ())}
    free_then = config.num_blocks - len(held_then)
    if head.request.arrival > latest.tick or running_then >= config.max_seqs or budget <= 0:
        return True
    hits = () if state.pool is None else cache.longest_hit(state.pool, head.request, head.known, size)
    start = len(hits) * size
    n = head.known - start
    if config.chunked_prefill:
        n = min(n, budget)
    elif n > budget:
        return True
    evictable = sum(1 for b in hits if b not in held_then)
    tokens = head.known if config.reserve_full_sequence else start + n  # the whole known length, or its chunk
    return blocks_for(tokens, size) - len(hits) + evictable > free_then


_FAMILY = {
    "well_typed": "type",
    "no_duplicate_active": "safety",
    "no_start_before_arrival": "safety",
    "slot_bound": "safety",
    "nonnegative_remaining": "safety",
    "work_conservation": "safety",
    "every_job_completes_once": "safety",
    "termination": "safety",
    "token_budget": "safety",
    "kv_capacity": "safety",
    "no_false_sharing": "safety",
    "refcount_exact": "safety",
    "kv_exclusive": "safety",
    "kv_exact": "safety",
    "fcfs_admission": "policy",
    "running_first": "policy",
    "no_admission_after_preemption": "policy",
    "work_conserving": "policy",
}

# --- claims that are not about one state ----------------------------------------------

_LONGEST_PREFIX_HIT = (
    "longest_prefix_hit",
    "policy",
    """Each admission takes, for positions 0, 1, ... of its known sequence capped at known - 1 tokens, the earliest-registered block of each cached chain, as long a run as the cache holds, and no block that is not registered.

    A shorter hit recomputes what is cached; a longer one, or a hit on the whole sequence, computes nothing for the next token.""",
)

_LRU_EVICTION = (
    "lru_eviction",
    "policy",
    """Every new block comes from the head of the free queue, which releases fill at the tail in the tick's order (aborts in (arrival, id) order, victims, then finishers in running order), each last block first.

    The tail of a sequence is evicted first and the oldest free block before a newer one, so the prefixes most likely to recur stay cached.""",
)

_PREEMPT_NEWEST = (
    "preempt_newest",
    "policy",
    """The running pass preempts only while the request it serves is short of blocks, and then the newest running request (the last of the running list).

    The newest has the least cached work to lose; preempting the oldest can starve it forever.""",
)

_OTHER_CLAIMS = (
    (
        "metrics_consistent",
        "metrics",
        """The result's numbers agree with its trace: per-request start, first_token, finish, aborted, generated and preemptions, makespan, utilization, and the trace's order rules.

        Dashboards and SLOs (time to first token, goodput) are computed from these numbers, not from the trace.""",
    ),
    (
        "matches_reference",
        "metrics",
        """The result equals the reference run's (``spec.serving.run``) on every tick and every request, block ids excepted (with prefix caching, up to the renaming fixed by the order ids are first taken).

        The named invariants can all hold while the schedule is still not vLLM's FCFS one; another allocator may pick other free blocks, which safety checks.""",
    ),
    (
        "validation",
        "call",
        """Every call outside the domain raises ValueError with the fixed message, and every call inside it does not.

        A scheduler that accepts a request that can never fit hangs; one that rejects a valid request drops it.""",
    ),
    (
        "input_unchanged",
        "call",
        """A call leaves the caller's requests list, request dicts and config dict exactly as they were.

        The caller still owns them: a scheduler that edits them corrupts the next call.""",
    ),
    (
        "deterministic",
        "call",
        """The same call gives the same result every time, whatever calls came before it, rejected ones included.

        A scheduler that keeps state between calls gives answers no test can reproduce.""",
    ),
)


# --- the registry, in order ------------------------------------------------------------

CLAIMS = (
    well_typed,
    no_duplicate_active,
    no_start_before_arrival,
    slot_bound,
    nonnegative_remaining,
    work_conservation,
    every_job_completes_once,
    termination,
    token_budget,
    kv_capacity,
    no_false_sharing,
    refcount_exact,
    kv_exclusive,
    kv_exact,
    _LONGEST_PREFIX_HIT,
    _LRU_EVICTION,
    fcfs_admission,
    running_first,
    _PREEMPT_NEWEST,
    no_admission_after_preemption,
    work_conserving,
) + _OTHER_CLAIMS

INVARIANTS: tuple[Invariant, ...] = build_registry(CLAIMS, _FAMILY, result_checks.RESULT_CHECKS)
BY_NAME: dict[str, Invariant] = {inv.name: inv for inv in INVARIANTS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
STATE_INVARIANTS: tuple[Invariant, ...] = tuple(inv for inv in INVARIANTS if inv.holds is not None)


def broken_state_invariants(state: State) -> list[str]:
    """The names of the state invariants that ``state`` breaks, in registry order."""
    return broken_in(STATE_INVARIANTS, state)
