"""The serving model's transition system: a frozen State, the one-tick ``step``, and the reference ``run``.

A run starts in ``initial(requests, config)`` and applies ``step`` until
``is_terminal``.  One step is one tick t of the contract (issue 10; README, "Checking a serving scheduler"), in order:

1. requests that finished in tick t-1 have left (``step`` frees their blocks at the
   end of the tick they finish in, and records the ``freed`` entry there);
2. aborts: every unfinished request with ``abort <= t`` leaves, from the waiting
   queue or the running list; its blocks are freed, its cached tokens are aborted work;
3. idle jump: if nothing is running and no waiting request has arrived by t, the clock
   jumps to the earliest waiting arrival and step 2 applies there (a tick in which
   aborts left nothing to do ends after step 2: its entry lists only the aborts);
4. running pass, in running order under ``budget = token_budget``: each request r gets
   ``n = min(known - computed, budget)`` tokens and the blocks they need, the lowest free
   ids first; while fewer blocks are free than r needs, the last running request is
   preempted (blocks back, computed to 0, to the front of the waiting queue); if r
   itself is preempted the pass ends;
5. waiting pass, only if nobody was preempted in this tick: the head is admitted while
   it has arrived, fewer than ``max_seqs`` run and budget is left, with its whole known
   length (a chunk of at most the budget under chunked prefill; without it the pass
   stops when that does not fit) and the blocks for it (else the pass stops: FCFS); with
   ``reserve_full_sequence`` it fits only if the free blocks hold its whole known
   length, though it takes only the blocks for its chunk (vLLM's
   ``scheduler_reserve_full_isl``);
6. compute: every scheduled request's computed grows by its n; when computed == known
   an output token is generated; a request with all its output finishes at t + 1.

With ``prefix_caching`` on (issue 20; the pool and cache rules are ``spec.serving.cache``)
the same six steps run with these changes: new blocks come from the head of the free
queue instead of the lowest free ids; a scheduled request registers its blocks that are
full once its n tokens are computed; an admission first takes its longest cached prefix
(``cache.longest_hit``), starts its computed at ``hits * block_size``, and fits only if
its new blocks plus its hit blocks of count 0 are at most the free queue's length; and
each release (abort, preemption, finish, in that order within the tick) gives back only
the blocks whose count reaches 0, last block first.  With it off every rule is as above.

Everything here is pure: a step returns a new State and never mutates its argument.
"""

from __future__ import annotations

from collections import deque
from itertools import count as naturals
from itertools import filterfalse, islice
from typing import NamedTuple

from collections import Counter

from spec.serving import cache
from spec.serving.cache import Pool
from spec.serving.domain import Config, Request, blocks_for, check_feasible, check_tokens, fcfs_key, validate
from spec.serving.metrics import result_from_run, trace_entry


class Progress(NamedTuple):
    """One unfinished request's progress: cached tokens, output so far, blocks held, and its counters."""

    request: Request
    computed: int = 0  # tokens whose KV is cached now
    generated: int = 0  # output tokens so far
    blocks: tuple[int, ...] = ()  # block ids held, in the order taken
    start: int | None = None  # the tick of its first admission
    first_token: int | None = None  # the tick after its first output token
    preemptions: int = 0
    total: int = 0  # every token computed for it, recompute included
    recomputed: int = 0  # the cached tokens its preemptions gave back
    admitted: int | None = None  # the tick of its latest admission
    cached: int = 0  # tokens it took from cache hits, over all its admissions (prefix caching)

    @property
    def id(self) -> int:
        return self.request.id

    @property
    def known(self) -> int:
        """prompt + generated: the tokens whose KV it needs before it can generate the next one."""
        return self.request.prompt + self.generated


class Ended(NamedTuple):
    """A request that left: its progress as it left (blocks given back) and the tick: finish, or abort."""

    progress: Progress
    tick: int


class Ledger(NamedTuple):
    """The token ledger: every computed token is useful, recomputed later, aborted, or still cached."""

    computed: int = 0  # sum of n over all ticks
    useful: int = 0  # prompt + output - 1 of every finished request
    recomputed: int = 0  # cached tokens given back by preemptions
    aborted: int = 0  # cached tokens of requests at the moment they were aborted
    hit: int = 0  # tokens taken from cache hits at admissions (prefix caching): not computed, yet cached


class Entry(NamedTuple):
    """What one tick did, as the result's trace entry records it (tuples instead of lists)."""

    tick: int
    scheduled: tuple[tuple[int, int], ...]  # (id, n): running pass order, then admissions
    preempted: tuple[int, ...]  # in order of preemption
    aborted: tuple[int, ...]  # in (arrival, id) order
    freed: tuple[tuple[int, tuple[int, ...]], ...]  # by the aborted, the preempted, then the finished
    allocated: tuple[tuple[int, tuple[int, ...]], ...]  # in scheduled order
    finished: tuple[int, ...]  # in scheduled order
    hits: tuple[tuple[int, tuple[int, ...]], ...] | None = None  # in admission order; None: the config names no caching


class State(NamedTuple):
    """Everything the scheduler knows between two ticks."""

    requests: tuple[Request, ...]  # every request of the run, in FCFS order
    config: Config
    clock: int  # the next tick to run
    waiting: tuple[Progress, ...]  # queue order: preempted ones at the front, then FCFS order
    running: tuple[Progress, ...]  # running order: admission order, a resumed request at the end
    finished: tuple[Ended, ...]  # in order of finishing; tick = finish
    aborted: tuple[Ended, ...]  # in order of aborting; tick = the abort tick
    ledger: Ledger
    latest: Entry | None  # the latest tick's entry (clock - 1 or earlier, after an idle jump); None before the first
    pool: Pool | None = None  # the free queue and the cache with prefix caching on (spec.serving.cache); None when off


def initial(requests, config) -> State:
    """The state before tick 0 of a valid call (raises ValueError outside the domain)."""
    parsed, parsed_config = validate(requests, config)
    ordered = tuple(sorted(parsed, key=fcfs_key))
    pool = Pool() if parsed_config.prefix_caching else None
    return State(ordered, parsed_config, 0, tuple(Progress(r) for r in ordered), (), (), (), Ledger(), None, pool)


def is_terminal(state: State) -> bool:
    """True when no request is waiting or running: the run is over."""
    return not state.waiting and not state.running


def _lowest_free(held, count: int) -> tuple[int, ...]:
    """The ``count`` lowest block ids not in ``held`` (the caller knows that many are free)."""
    return tuple(islice(filterfalse(held.__contains__, naturals()), count))


def _release(progress: Progress, count: Counter) -> tuple[int, ...]:
    """``progress`` gives its table back: each block's count drops by one; the blocks that reach 0, in table order.

    Without prefix caching no block is shared, so that is the whole table."""
    gone = []
    for block in progress.blocks:
        count[block] -= 1
        if not count[block]:
            del count[block]
            gone.append(block)
    return tuple(gone)


def _take(state_pool: Pool | None, count: Counter, number: int, num_blocks: int) -> tuple[Pool | None, tuple[int, ...]]:
    """``number`` new blocks: the lowest free ids (caching off), or the free queue's head (caching on)."""
    if state_pool is None:
        return None, _lowest_free(count, number)
    return cache.take(state_pool, number, num_blocks)


def step(state: State) -> State:
    """Run one tick: leave, abort, jump, running pass, waiting pass, compute (see the module docstring)."""
    assert not is_terminal(state), "step() of a terminal state"
    config = state.config
    size = config.block_size
    pool = state.pool  # None: caching off
    tick = state.clock
    waiting = list(state.waiting)
    running = list(state.running)
    while True:  # steps 2 and 3: aborts, then the idle jump to the earliest waiting arrival
        leaving = [p for p in waiting + running if p.request.abort is not None and p.request.abort <= tick]
        if leaving or running or any(p.request.arrival <= tick for p in waiting):
            break
        tick = min(p.request.arrival for p in waiting)

    count = Counter(block for p in running for block in p.blocks)  # each block's reference count
    leaving.sort(key=lambda p: fcfs_key(p.request))
    if leaving:
        gone = {p.id for p in leaving}
        waiting = [p for p in waiting if p.id not in gone]
        running = [p for p in running if p.id not in gone]
    freed = []
    for p in leaving:
        given = _release(p, count)
        if given:
            freed.append((p.id, given))
            pool = pool if pool is None else cache.give_back(pool, given)
    aborted = tuple(Ended(p._replace(blocks=()), tick) for p in leaving)
    ledger = state.ledger
    if leaving:
        ledger = ledger._replace(aborted=ledger.aborted + sum(p.computed for p in leaving))

    scheduled: list[tuple[int, int]] = []
    allocated: list[tuple[int, tuple[int, ...]]] = []
    hits: list[tuple[int, tuple[int, ...]]] = []
    preempted: list[int] = []
    budget = config.token_budget
    index = 0
    while index < len(running):  # step 4: the running pass
        r = running[index]
        n = min(r.known - r.computed, budget)
        if n == 0:
            index += 1
            continue
        extra = blocks_for(r.computed + n, size) - len(r.blocks)
        while config.num_blocks - len(count) < extra:
            victim = running.pop()
            given = _release(victim, count)
            if given:
                freed.append((victim.id, given))
                pool = pool if pool is None else cache.give_back(pool, given)
            ledger = ledger._replace(recomputed=ledger.recomputed + victim.computed)
            waiting.insert(
                0,
                victim._replace(
                    computed=0,
                    blocks=(),
                    preemptions=victim.preemptions + 1,
                    recomputed=victim.recomputed + victim.computed,
                ),
            )
            preempted.append(victim.id)
            if len(running) == index:
                break  # r itself was the victim
        if len(running) == index:
            break  # the running pass ends
        if extra > 0:
            pool, new = _take(pool, count, extra, config.num_blocks)
            count.update(new)
            r = running[index] = r._replace(blocks=r.blocks + new)
            allocated.append((r.id, new))
        if pool is not None:
            pool = cache.register(pool, r.request, r.blocks, r.computed + n, size)
        scheduled.append((r.id, n))
        budget -= n
        index += 1

    if not preempted:  # step 5: the waiting pass, FCFS, no skipping
        while (
            waiting
            and waiting[0].request.arrival <= tick
            and len(running) < config.max_seqs
            and budget > 0
        ):
            head = waiting[0]
            hit = () if pool is None else cache.longest_hit(pool, head.request, head.known, size)
            computed = len(hit) * size
            n = head.known - computed
            if config.chunked_prefill:
                n = min(n, budget)
            elif n > budget:
                break
            need = blocks_for(computed + n, size) - len(hit)
            # reserve_full_sequence: room for its whole known length, though it takes only its chunk's blocks
            fit = blocks_for(head.known, size) - len(hit) if config.reserve_full_sequence else need
            evictable = [block for block in hit if block not in count]  # hit blocks of count 0, in the free queue
            if config.num_blocks - len(count) < fit + len(evictable):
                break
            waiting.pop(0)
            if evictable:
                pool = cache.claim(pool, evictable)
            count.update(hit)
            pool, new = _take(pool, count, need, config.num_blocks)
            count.update(new)
            table = hit + new
            if pool is not None:
                pool = cache.register(pool, head.request, table, computed + n, size)
            start = tick if head.start is None else head.start
            running.append(
                head._replace(computed=computed, blocks=table, start=start, admitted=tick, cached=head.cached + computed)
            )
            scheduled.append((head.id, n))
            allocated.append((head.id, new))
            if hit:
                hits.append((head.id, hit))
                ledger = ledger._replace(hit=ledger.hit + computed)
            budget -= n

    tokens_of = dict(scheduled)  # step 6: compute
    still_running = []
    finished = []
    computed_now = useful_now = 0
    for r in running:
        n = tokens_of.get(r.id)
        if n is None:
            still_running.append(r)
            continue
        computed, generated, first_token = r.computed + n, r.generated, r.first_token
        if computed == r.known:
            generated += 1
            first_token = tick + 1 if first_token is None else first_token
        r = Progress(  # r._replace(computed=, generated=, first_token=, total=), built at once (it is per service)
            r.request, computed, generated, r.blocks, r.start, first_token, r.preemptions, r.total + n, r.recomputed,
            r.admitted, r.cached,
        )
        computed_now += n
        if generated == r.request.output:
            useful_now += r.request.work
            given = _release(r, count)
            if given:
                freed.append((r.id, given))
                pool = pool if pool is None else cache.give_back(pool, given)
            finished.append(Ended(r._replace(blocks=()), tick + 1))
        else:
            still_running.append(r)

    ledger = Ledger(
        ledger.computed + computed_now, ledger.useful + useful_now, ledger.recomputed, ledger.aborted, ledger.hit
    )
    entry = Entry(
        tick,
        tuple(scheduled),
        tuple(preempted),
        tuple(p.id for p in leaving),
        tuple(freed),
        tuple(allocated),
        tuple(done.progress.id for done in finished),
        None if config.prefix_caching is None else tuple(hits),
    )
    return state._replace(
        clock=tick + 1,
        waiting=tuple(waiting),
        running=tuple(still_running),
        finished=state.finished + tuple(finished),
        aborted=state.aborted + aborted,
        ledger=ledger,
        latest=entry,
        pool=pool,
    )


def submit(state: State, request: Request) -> State:
    """An arrival in the online model: a request with a new id and ``arrival >= clock`` joins the waiting queue.

    It takes its FCFS place among the requests never admitted (behind every preempted one);
    raises ValueError when it is not a valid request for this state."""
    if not isinstance(request, Request):
        raise ValueError(f"request={request!r}: expected a spec.serving.Request")
    fields = Request._fields
    for name, value in zip(fields, request):
        if name in ("abort", "tokens") and value is None:
            continue
        if name == "tokens":
            request = request._replace(tokens=check_tokens(value, request.prompt, "request.tokens"))
        elif type(value) is not int:
            raise ValueError(f"request.{name}={value!r}: expected an int")
    if request.arrival < state.clock:
        raise ValueError(f"request.arrival={request.arrival!r}: expected an int >= clock={state.clock}")
    if request.prompt < 1 or request.output < 1:
        raise ValueError(f"request {request}: prompt and output must be ints >= 1")
    if request.abort is not None and request.abort < request.arrival:
        raise ValueError(f"request.abort={request.abort!r}: expected an int >= arrival={request.arrival}")
    if any(other.id == request.id for other in state.requests):
        raise ValueError(f"request.id={request.id!r}: ids must be unique (already submitted)")
    check_feasible(request, "request", state.config)
    waiting = list(state.waiting)
    position = len(waiting)
    while position > 0 and waiting[position - 1].start is None and fcfs_key(waiting[position - 1].request) > fcfs_key(request):
        position -= 1
    waiting.insert(position, Progress(request))
    return state._replace(
        requests=tuple(sorted(state.requests + (request,), key=fcfs_key)),
        waiting=tuple(waiting),
    )


def cancel(state: State, request_id: int) -> State:
    """An online abort: the waiting or running request is aborted at tick max(clock, its arrival).

    Raises ValueError when no waiting or running request has that id."""
    for field in ("waiting", "running"):
        queue = getattr(state, field)
        for position, progress in enumerate(queue):
            if progress.id == request_id and type(progress.id) is type(request_id):
                request = progress.request
                tick = max(state.clock, request.arrival)
                if request.abort is not None:
                    tick = min(tick, request.abort)
                changed = request._replace(abort=tick)
                queue = queue[:position] + (progress._replace(request=changed),) + queue[position + 1 :]
                requests = tuple(changed if r.id == request_id else r for r in state.requests)
                return state._replace(**{field: queue, "requests": requests})
    raise ValueError(f"request_id={request_id!r}: no waiting or running request has this id")


def run(requests, config) -> dict:
    """The reference result of ``serve(requests, config)``, built on ``step``, in time linear in the run.

    It is the online run that submits each request at its arrival (``submit``) and
    retires each request in the tick it ends: a step reads only the requests that have
    arrived and not ended (a request not yet arrived can neither be admitted nor be
    aborted, its abort tick being >= its arrival), so the state it steps holds only
    those, and a tick costs what its live requests cost, not what the whole input does.
    When nothing is live, the next arrivals are submitted first and the step's idle jump
    goes to them, as from ``initial(requests, config)``; the test suite checks that both
    give the same run."""
    parsed, _ = validate(requests, config)
    arrivals = deque(sorted(parsed, key=fcfs_key))
    state = initial([], config)
    trace, finished, aborted = [], [], []
    while arrivals or not is_terminal(state):
        if is_terminal(state):  # idle: the next arrivals come in, and the step jumps to them
            first = arrivals[0].arrival
            while arrivals and arrivals[0].arrival == first:
                state = submit(state, arrivals.popleft())
        while arrivals and arrivals[0].arrival <= state.clock:
            state = submit(state, arrivals.popleft())
        state = step(state)
        entry = state.latest
        assert entry.scheduled or entry.aborted, f"tick {entry.tick} did nothing: {entry}"
        trace.append(trace_entry(entry))
        finished += state.finished
        aborted += state.aborted
        state = _retire(state)
    return result_from_run(state._replace(finished=tuple(finished), aborted=tuple(aborted)), trace)


def _retire(state: State) -> State:
    """The state without the requests that have ended (finished or aborted): the rest of the run never reads them."""
    if not state.finished and not state.aborted:
        return state
    ended = {e.progress.id for e in state.finished + state.aborted}
    return state._replace(
        requests=tuple(r for r in state.requests if r.id not in ended), finished=(), aborted=()
    )


def remaining_work(state: State) -> int:
    """The ranking function: every step decreases it by at least one, so every run ends.

    It counts each unfinished request once plus its prompt + output - 1, less what the
    head of the running list has cached: the head is never preempted (the KV rule), so
    each tick it computes at least one token, or it leaves, or an abort removes a request;
    what the others have cached does not count, as a preemption may take it back."""
    unfinished = state.waiting + state.running
    head = state.running[0].computed if state.running else 0
    return len(unfinished) + sum(p.request.work for p in unfinished) - head
