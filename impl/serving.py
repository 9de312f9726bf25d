"""The serving model's scheduler: vLLM-style FCFS under a sequence cap, a token budget and a KV-block pool.

``ServingScheduler`` runs one iteration per ``step()``: aborts, then the running pass
(each running request, oldest admission first, gets the rest of its known tokens up
to the budget, preempting the newest running request while blocks are short), then,
if nobody was preempted, FCFS admissions from the waiting queue, then the compute.

The structures keep a tick's cost proportional to what the tick does, never to the
size of the queue or of the pool:
- waiting, FIFO part: requests in (arrival, id) order as an array with a cursor; an
  online add that would break the order goes to a heap instead, and the head is the
  smaller of the two heads;
- waiting, front part: a deque of preempted requests (each put back at the front);
- aborted waiting requests are removed lazily, when they reach a head;
- aborts: a heap keyed by (abort tick, arrival, id);
- running: a doubly linked list in running order (O(1) unlink, O(1) tail), walked
  only while the budget lasts;
- free blocks: a min-heap of given-back ids plus a counter below which every id has
  been handed out once, so a pool of 2**40 blocks costs nothing;
- an idle engine jumps to the next arrival in O(1).

With ``prefix_caching`` on (issue 20) the blocks come from ``impl.serving_cache.PrefixPool``
instead: reference counts, a free queue (new blocks from its head, a release's blocks
that reach count 0 at its tail, last block first) and a cache of full blocks by chain.
A scheduled request registers its blocks that its tokens fill; an admission first takes
its longest cached prefix (capped at known - 1 tokens), which counts as cached tokens,
not computed ones, and fits only if its new blocks and its hit blocks of count 0 fit
in the free queue.

``serve(requests, config)`` validates everything, then drives a ServingScheduler to the end
(with the cyclic garbage collector paused while the result is built: impl/collector.py).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

from impl.collector import paused
from impl.serving_cache import PrefixPool
from impl.serving_validation import Config, Row, check_config, check_feasible, check_request_fields, check_requests

WAITING, RUNNING, FINISHED, ABORTED = "waiting", "running", "finished", "aborted"


class _Request:
    """One request's mutable state inside the scheduler (never handed to the caller)."""

    __slots__ = (
        "id", "arrival", "prompt", "output", "abort", "given_abort", "status", "generated", "computed",
        "total", "blocks", "start", "first_token", "finish", "aborted", "preemptions", "prev", "next",
        "tokens", "hit_tokens", "chains", "registered",
    )

    def __init__(self, row: Row) -> None:
        self.id = row.id
        self.arrival = row.arrival
        self.prompt = row.prompt
        self.output = row.output
        self.given_abort = row.abort  # as the caller gave it (None: no abort key)
        self.abort = row.abort  # the tick at which it is aborted, lowered by ServingScheduler.abort
        self.status = WAITING
        self.generated = 0
        self.computed = 0  # tokens whose KV is cached now
        self.total = 0  # every token computed for it, recompute included
        self.blocks: list[int] = []  # held block ids, in the order taken
        self.start = None
        self.first_token = None
        self.finish = None
        self.aborted = None
        self.preemptions = 0
        self.prev: _Request | None = None
        self.next: _Request | None = None
        self.tokens = row.tokens  # the prompt's token ids, or None
        self.hit_tokens = 0  # tokens taken from cache hits, over all its admissions
        self.chains: list[int] = []  # the chain numbers of its full blocks so far (prefix caching)
        self.registered = 0  # how many leading blocks of its table are in the cache

    def chain(self, pool: PrefixPool, j: int, block_size: int) -> int:
        """The chain number of its block j (full): the same for every request with the same tokens up to its end."""
        chains = self.chains
        while len(chains) <= j:
            k = len(chains)
            start, end = k * block_size, (k + 1) * block_size
            parent = chains[-1] if chains else -1
            if self.tokens is not None and end <= self.prompt:
                chains.append(pool.number(parent, self.tokens[start:end]))
            else:  # a token of its own (unnamed prompt, or generated) is in it: no other request has this chain
                chains.append(pool.number(parent, ((self.id, start),)))
        return chains[j]

    def record(self, caching_keys: bool) -> dict:
        row = {"id": self.id, "arrival": self.arrival, "prompt": self.prompt, "output": self.output}
        if self.given_abort is not None:
            row["abort"] = self.given_abort
        if self.tokens is not None:
            row["tokens"] = list(self.tokens)
        row.update(
            start=self.start, first_token=self.first_token, finish=self.finish, aborted=self.aborted,
            generated=self.generated, preemptions=self.preemptions, computed=self.total,
        )
        if caching_keys:
            row["cached"] = self.hit_tokens
        return row


def _entry(tick: int, scheduled: list, preempted: list, aborted: list, freed: list, allocated: list, finished: list,
           hits: list | None = None) -> dict:
    entry = {
        "tick": tick, "scheduled": scheduled, "preempted": preempted, "aborted": aborted,
        "freed": freed, "allocated": allocated, "finished": finished,
    }
    if hits is not None:
        entry["hits"] = hits
    return entry


def _copy_entry(entry: dict) -> dict:
    hits = entry.get("hits")
    return _entry(
        entry["tick"],
        [list(pair) for pair in entry["scheduled"]],
        list(entry["preempted"]),
        list(entry["aborted"]),
        [[rid, list(blocks)] for rid, blocks in entry["freed"]],
        [[rid, list(blocks)] for rid, blocks in entry["allocated"]],
        list(entry["finished"]),
        None if hits is None else [[rid, list(blocks)] for rid, blocks in hits],
    )


class ServingScheduler:
    """An iteration-level FCFS serving scheduler: ``add_request``, ``abort``, then ``step`` one tick at a time."""

    def __init__(self, config: Any) -> None:
        self._config: Config = check_config(config)
        self.clock = 0  # the next tick to run
        self._requests: dict[int, _Request] = {}
        # waiting queue: front (preempted), then the FIFO array from the cursor merged with the late heap
        self._front: deque[_Request] = deque()
        self._fifo: list[_Request] = []
        self._cursor = 0
        self._late: list[tuple[int, int, _Request]] = []
        self._waiting = 0  # live waiting requests, in all three parts
        # running list: doubly linked, in running order
        self._head: _Request | None = None
        self._tail: _Request | None = None
        self._running = 0
        self._aborts: list[tuple[int, int, int]] = []  # heap of (abort tick, arrival, id)
        self._free: list[int] = []  # heap of given-back block ids, all below _fresh
        self._fresh = 0  # ids >= _fresh were never handed out
        config = self._config
        self._pool = PrefixPool(config.num_blocks) if config.prefix_caching else None  # prefix caching's blocks
        self._caching_keys = config.prefix_caching is not None  # entries, records and totals name the cache
        self._hit_tokens = 0
        self._trace: list[dict] = []
        self._last_work = -1  # last tick with scheduled work
        self._computed_tokens = 0
        self._useful_tokens = 0
        self._recomputed_tokens = 0
        self._aborted_tokens = 0
        self._preemptions = 0

    # -- the caller's side -------------------------------------------------------

    def add_request(self, request: Any) -> None:
        """Queue one request; it may not arrive before the clock, and its id must be new."""
        row = check_request_fields(request, "request")
        if row.id in self._requests:
            raise ValueError(f"request.id={row.id!r}: ids must be unique; this id was already added")
        if row.arrival < self.clock:
            raise ValueError(f"request.arrival={row.arrival!r}: expected an int >= the clock {self.clock}; no retroactive entry")
        check_feasible(row, self._config, "request")
        self._enqueue(row)

    def abort(self, request_id: Any) -> None:
        """Abort a waiting or running request at the next tick that runs (or at its arrival, if later)."""
        if type(request_id) is not int:
            raise ValueError(f"request_id={request_id!r}: expected an int, the id of an added request")
        state = self._requests.get(request_id)
        if state is None:
            raise ValueError(f"request_id={request_id!r}: unknown id; no request with this id was added")
        if state.status == FINISHED:
            raise ValueError(f"request_id={request_id!r}: already finished at tick {state.finish}; only a waiting or running request can be aborted")
        if state.status == ABORTED:
            raise ValueError(f"request_id={request_id!r}: already aborted at tick {state.aborted}; only a waiting or running request can be aborted")
        tick = max(self.clock, state.arrival)
        if state.abort is None or tick < state.abort:
            state.abort = tick
            heapq.heappush(self._aborts, (tick, state.arrival, state.id))

    @property
    def idle(self) -> bool:
        """True when nothing is waiting or running."""
        return self._running == 0 and self._waiting == 0

    def view(self) -> dict:
        """A snapshot of the state: the clock, the waiting queue and the running list in order, the blocks held."""
        waiting = [state.id for state in self._front if state.status == WAITING]
        rest = [state for state in self._fifo[self._cursor:] if state.status == WAITING]
        rest.extend(state for _, _, state in self._late if state.status == WAITING)
        rest.sort(key=lambda state: (state.arrival, state.id))
        waiting.extend(state.id for state in rest)
        running, blocks = [], {}
        node = self._head
        while node is not None:
            running.append(node.id)
            blocks[node.id] = list(node.blocks)
            node = node.next
        return {"clock": self.clock, "waiting": waiting, "running": running, "blocks": blocks}

    def step(self) -> dict | None:
        """Run one tick (after jumping over an idle gap) and return its trace entry, or None when idle."""
        entry = self._tick()
        return None if entry is None else _copy_entry(entry)

    def result(self) -> dict:
        """The result of everything so far, in the format ``serve`` returns."""
        return self._result([_copy_entry(entry) for entry in self._trace])

    # -- internals ---------------------------------------------------------------

    def _enqueue(self, row: Row) -> None:
        state = _Request(row)
        self._requests[row.id] = state
        fifo = self._fifo
        if self._cursor < len(fifo) and (row.arrival, row.id) < (fifo[-1].arrival, fifo[-1].id):
            heapq.heappush(self._late, (row.arrival, row.id, state))
        else:
            fifo.append(state)
        self._waiting += 1
        if row.abort is not None:
            heapq.heappush(self._aborts, (row.abort, row.arrival, row.id))

    def _fifo_head(self) -> _Request | None:
        """The first live request of the FIFO part (array or late heap), dropping aborted ones on the way."""
        fifo, cursor = self._fifo, self._cursor
        while cursor < len(fifo) and fifo[cursor].status != WAITING:
            cursor += 1
        if cursor > 4096 and cursor * 2 > len(fifo):
            del fifo[:cursor]
            cursor = 0
        self._cursor = cursor
        late = self._late
        while late and late[0][2].status != WAITING:
            heapq.heappop(late)
        first = fifo[cursor] if cursor < len(fifo) else None
        if late and (first is None or (late[0][0], late[0][1]) < (first.arrival, first.id)):
            return late[0][2]
        return first

    def _waiting_head(self) -> _Request | None:
        front = self._front
        while front and front[0].status != WAITING:
            front.popleft()
        if front:
            return front[0]
        return self._fifo_head()

    def _pop_waiting_head(self, state: _Request) -> None:
        if self._front:
            self._front.popleft()
        elif self._late and self._late[0][2] is state:
            heapq.heappop(self._late)
        else:
            self._cursor += 1
        self._waiting -= 1

    def _unlink(self, state: _Request) -> None:
        if state.prev is None:
            self._head = state.next
        else:
            state.prev.next = state.next
        if state.next is None:
            self._tail = state.prev
        else:
            state.next.prev = state.prev
        state.prev = state.next = None
        self._running -= 1

    def _append_running(self, state: _Request) -> None:
        state.prev = self._tail
        state.next = None
        if self._tail is None:
            self._head = state
        else:
            self._tail.next = state
        self._tail = state
        self._running += 1

    def _free_count(self) -> int:
        if self._pool is not None:
            return self._pool.free()
        return len(self._free) + self._config.num_blocks - self._fresh

    def _take(self, count: int) -> list[int]:
        """Hand out ``count`` free block ids: lowest first, or (prefix caching) from the free queue's head."""
        if self._pool is not None:
            return self._pool.take(count)
        free, taken = self._free, []
        while count and free:
            taken.append(heapq.heappop(free))
            count -= 1
        if count:
            taken.extend(range(self._fresh, self._fresh + count))
            self._fresh += count
        return taken

    def _give_back(self, state: _Request, freed: list) -> None:
        if self._pool is not None:  # prefix caching: only the blocks whose count reaches 0 go back
            if state.blocks:
                gone = self._pool.release(state.blocks)
                if gone:
                    freed.append([state.id, gone])
                state.blocks = []
            state.registered = 0
            return
        if state.blocks:
            for block in state.blocks:
                heapq.heappush(self._free, block)
            freed.append([state.id, state.blocks])
            state.blocks = []

    def _register(self, state: _Request, tokens: int) -> None:
        """Prefix caching: the blocks of ``state`` that ``tokens`` fill join the cache (at scheduling, as vLLM)."""
        full = tokens // self._config.block_size
        pool, size, blocks = self._pool, self._config.block_size, state.blocks
        for j in range(state.registered, full):
            pool.register(blocks[j], state.chain(pool, j, size))
        if full > state.registered:
            state.registered = full

    def _hits(self, state: _Request) -> list[int]:
        """Prefix caching: the longest run of its leading blocks in the cache, within its first known - 1 tokens."""
        pool, size = self._pool, self._config.block_size
        limit = (state.prompt + state.generated - 1) // size
        hits = []
        for j in range(limit):
            block = pool.cached(state.chain(pool, j, size))
            if block is None:
                break
            hits.append(block)
        return hits

    def _run_aborts(self, tick: int, freed: list) -> list[int]:
        """Contract step 2: every unfinished request with abort <= tick leaves; return their ids in (arrival, id) order."""
        aborts = self._aborts
        due = []
        while aborts and aborts[0][0] <= tick:
            _, _, request_id = heapq.heappop(aborts)
            state = self._requests[request_id]
            if state.status == WAITING or state.status == RUNNING:
                due.append((state.arrival, state.id, state, state.status))
                state.status = ABORTED  # marks it, so a second heap entry for it is skipped
        due.sort(key=lambda item: (item[0], item[1]))
        for _, _, state, status in due:
            state.aborted = tick
            if status == RUNNING:
                self._unlink(state)
                self._give_back(state, freed)
                self._aborted_tokens += state.computed
                state.computed = 0
            else:
                self._waiting -= 1  # left in its queue, dropped when it reaches a head
        return [item[1] for item in due]

    def _tick(self) -> dict | None:
        if self.idle:
            return None
        tick = self.clock
        freed: list = []
        while True:
            aborted = self._run_aborts(tick, freed)
            if self._running:
                break
            head = self._waiting_head()
            if head is not None and head.arrival <= tick:
                break
            if head is None and not aborted:
                return None
            if aborted or head is None:  # an abort-only tick, or everything left
                entry = _entry(tick, [], [], aborted, freed, [], [], [] if self._caching_keys else None)
                self._trace.append(entry)
                self.clock = tick + 1
                return entry
            tick = head.arrival  # contract step 3: jump over the idle gap
        config = self._config
        block_size = config.block_size
        budget = config.token_budget
        scheduled: list[tuple[_Request, int]] = []
        preempted: list[int] = []
        allocated: list = []
        hits_of: list = []
        pool = self._pool
        free = self._free
        # contract step 4: the running pass
        state = self._head
        while state is not None and budget:
            computed = state.computed
            n = state.prompt + state.generated - computed
            if n > budget:
                n = budget
            extra = -(-(computed + n) // block_size) - len(state.blocks)
            if extra > 0:
                self_preempted = False
                while (len(free) + config.num_blocks - self._fresh if pool is None else pool.free()) < extra:
                    victim = self._tail
                    self._unlink(victim)
                    self._give_back(victim, freed)
                    self._recomputed_tokens += victim.computed
                    victim.computed = 0
                    victim.status = WAITING
                    victim.preemptions += 1
                    self._preemptions += 1
                    self._front.appendleft(victim)
                    self._waiting += 1
                    preempted.append(victim.id)
                    if victim is state:
                        self_preempted = True
                        break
                if self_preempted:
                    break
                taken = self._take(extra)
                state.blocks.extend(taken)
                allocated.append([state.id, taken])
            if pool is not None:
                self._register(state, computed + n)
            scheduled.append((state, n))
            budget -= n
            state = state.next
        # contract step 5: the waiting pass, FCFS without skipping
        if not preempted:
            chunked = config.chunked_prefill
            while budget and self._running < config.max_seqs:
                head = self._waiting_head()
                if head is None or head.arrival > tick:
                    break
                hits = self._hits(head) if pool is not None else ()
                start = len(hits) * block_size
                n = head.prompt + head.generated - start
                if chunked:
                    n = min(n, budget)
                elif n > budget:
                    break
                need = -(-(start + n) // block_size) - len(hits)
                # reserve_full_sequence: blocks for the whole known length must be free, though only the chunk's are taken
                fit = -(-(head.prompt + head.generated) // block_size) - len(hits) if config.reserve_full_sequence else need
                if hits:  # hit blocks of count 0 leave the free queue too
                    fit += sum(1 for block in hits if block not in pool.count)
                if self._free_count() < fit:
                    break
                self._pop_waiting_head(head)
                self._append_running(head)
                head.status = RUNNING
                if head.start is None:
                    head.start = tick
                if hits:
                    pool.hold(hits)
                    head.computed = start
                    head.hit_tokens += start
                    self._hit_tokens += start
                    hits_of.append([head.id, list(hits)])
                taken = self._take(need)
                head.blocks = list(hits) + taken if hits else taken
                allocated.append([head.id, list(taken)])
                if pool is not None:
                    head.registered = len(hits)
                    self._register(head, start + n)
                scheduled.append((head, n))
                budget -= n
        # contract step 6: the compute
        finished: list[int] = []
        scheduled_ids = []
        computed_now = 0
        for state, n in scheduled:
            scheduled_ids.append([state.id, n])
            computed = state.computed + n
            state.computed = computed
            state.total += n
            computed_now += n
            if computed == state.prompt + state.generated:
                state.generated += 1
                if state.first_token is None:
                    state.first_token = tick + 1
                if state.generated == state.output:
                    state.status = FINISHED
                    state.finish = tick + 1
                    self._useful_tokens += state.prompt + state.output - 1
                    self._unlink(state)
                    self._give_back(state, freed)  # free from tick + 1 on: nothing takes blocks before then
                    finished.append(state.id)
        self._computed_tokens += computed_now
        if scheduled:
            self._last_work = tick
        entry = _entry(tick, scheduled_ids, preempted, aborted, freed, allocated, finished,
                       hits_of if self._caching_keys else None)
        self._trace.append(entry)
        self.clock = tick + 1
        return entry

    def _result(self, trace: list[dict]) -> dict:
        makespan = self._last_work + 1
        budget = self._config.token_budget
        keys = self._caching_keys
        result = {
            "trace": trace,
            "requests": [self._requests[request_id].record(keys) for request_id in sorted(self._requests)],
            "makespan_ticks": makespan,
            "computed_tokens": self._computed_tokens,
            "useful_tokens": self._useful_tokens,
            "recomputed_tokens": self._recomputed_tokens,
            "aborted_tokens": self._aborted_tokens,
            "token_utilization": self._computed_tokens / (budget * makespan) if makespan else 0.0,
            "preemptions": self._preemptions,
        }
        if keys:
            result["cache_hit_tokens"] = self._hit_tokens
        return result


def serve(requests: Any, config: Any) -> dict:
    """Run every request to its end (finished or aborted) under the serving model's FCFS policy."""
    checked = check_config(config)
    rows = check_requests(requests, checked)
    with paused():  # several containers per tick, none left in a cycle (impl/collector.py)
        engine = ServingScheduler({key: value for key, value in checked._asdict().items() if value is not None})
        for row in sorted(rows, key=lambda row: (row.arrival, row.id)):
            engine._enqueue(row)
        while engine._tick() is not None:
            pass
        return engine._result(engine._trace)
