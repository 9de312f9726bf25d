"""The serving replay with prefix caching on: blocks by content and count (safety), the rules' pool (policy).

Two parts, both driven by ``spec.serving.result_checks.Replay`` tick by tick:

- ``CacheBook``, for every policy: it follows the engine's own tables and judges them
  by what the blocks hold, never by a cache the engine keeps.  Block ids are first
  renamed in the order the engine first takes each one (``allocated``), so that 0, 1,
  2, ... are the ids the spec's pool takes first: an engine whose pool starts
  elsewhere (vLLM reserves block 0) is not flagged, and more than ``num_blocks``
  distinct ids is ``kv_capacity``.  Per block it keeps its holders (its reference
  count) and its content: the chain whose KV was computed into it (a full block), set
  when a scheduled request fills it and reset when the block is taken from the pool.
  ``no_false_sharing``: a hit block holds the hitting request's own chain at that
  position, and no request writes into a block another one holds.
  ``refcount_exact``: a block is taken from the pool only at count 0, a freed block
  was held by its request and reaches count 0 by the release, never twice, and a
  block that reaches count 0 is given back (else a leak), in the freed list of the
  request whose release brings it there.  A release's blocks are judged per role (the
  tick's aborts, its victims, its finishers), the role's requests taken in the tick's
  release order (aborts by (arrival, id), victims as preempted, finishers in running
  order), whatever the order of ids within ``aborted`` and ``finished``, which carries
  no rule: a block several of them hold is freed by the last of them.
- ``RulesPool``, for the FCFS policy: the free queue and the cache as the rules of
  ``spec.serving.cache`` build them from the engine's tables (releases in the tick's
  order: aborts by (arrival, id), victims as preempted, finishers in running order,
  each last block first; registration at scheduling).  ``longest_prefix_hit``: each
  admission's hits are the cache's longest run; ``lru_eviction``: each new block is
  the queue's head.  After a difference it follows the engine, so one wrong take
  does not read as a run of them.

Both cost what the tick touches: a chain of given tokens is interned block by block
(parent, block tokens) -> int, so no chain is ever rebuilt from position 0.
"""

from __future__ import annotations

from spec.serving.domain import blocks_for
from spec.serving.observation import Tick
from spec.serving.replay_state import Order

_HIT_CAP = "known - 1"


class CacheBook:
    """The engine's blocks as its entries show them, judged by content and count (see the module docstring)."""

    def __init__(self, replay) -> None:
        self.replay = replay
        self.size = replay.config.block_size
        self.limit = replay.config.num_blocks
        self.canonical: dict[int, int] = {}  # the engine's id -> the order it was first taken
        self.original: list[int] = []  # the order first taken -> the engine's id
        self.holders: dict[int, set] = {}  # block -> the running requests holding it (never empty)
        self.content: dict[int, object] = {}  # block -> the chain of the KV computed into it (full blocks only)
        self.interned: dict[tuple, int] = {}  # (parent chain, block tokens) -> chain number
        self.prompt_chains: dict[int, list] = {}  # request -> its prompt's full-block chains, by position
        self.pending: list = []  # this tick's hits, judged after its writes
        self.shared_writes: list = []  # this tick's writes into blocks another request holds: (writer, j, block)

    # --- names ---------------------------------------------------------------------

    def name(self, block: int) -> int:
        """The engine's own id of a renamed block (messages print what the user reads)."""
        return self.original[block] if 0 <= block < len(self.original) else block

    def names(self, blocks) -> list:
        return [self.name(b) for b in blocks]

    def _rename_ids(self, blocks, t: int, request_id: int) -> list:
        out = []
        for block in blocks:
            renamed = self.canonical.get(block)
            if renamed is None:
                renamed = self.canonical[block] = len(self.original)
                self.original.append(block)
                if renamed == self.limit:
                    self.replay.report(
                        "kv_capacity",
                        f"tick {t}: request {request_id} is given block {block}, the {renamed + 1}th distinct block id "
                        f"the engine uses; the pool has num_blocks={self.limit}",
                        tick=t, ids=[request_id], expected=f"<= {self.limit} distinct ids", actual=renamed + 1,
                    )
            out.append(renamed)
        return out

    def rename(self, entry: Tick) -> Tick:
        """The entry with every block id renamed: new ids in the order first taken, allocations first."""
        t = entry.tick
        allocated = [(i, self._rename_ids(blocks, t, i)) for i, blocks in entry.allocated]
        hits = [(i, self._rename_ids(blocks, t, i)) for i, blocks in entry.hits]
        freed = [(i, self._rename_ids(blocks, t, i)) for i, blocks in entry.freed]
        return entry._replace(allocated=allocated, hits=hits, freed=freed)

    # --- chains ----------------------------------------------------------------------

    def chain(self, request_id: int, j: int):
        """The chain of block j of a request: an interned number for given prompt tokens, else (id, j), its own."""
        request = self.replay.of[request_id].request
        if request.tokens is None or (j + 1) * self.size > request.prompt:
            return (request_id, j)
        chains = self.prompt_chains.get(request_id)
        if chains is None:
            chains = self.prompt_chains[request_id] = []
            parent, tokens, size = -1, request.tokens, self.size
            for start in range(0, request.prompt - size + 1, size):
                key = (parent, tokens[start:start + size])
                parent = self.interned.setdefault(key, len(self.interned))
                chains.append(parent)
        return chains[j]

    def describe(self, content, request_id: int, j: int) -> str:
        if content is None:
            return "no full block's KV (a partial block, or one overwritten when it was taken from the pool)"
        if isinstance(content, tuple):
            other, position = content
            return f"request {other}'s own tokens at block {position}"
        return "the KV of another prefix"

    # --- the tick's events, in the replay's order --------------------------------------

    def _hold(self, request_id: int, block: int) -> None:
        self.holders.setdefault(block, set()).add(request_id)
        self.replay.owner.setdefault(block, request_id)
        self.replay.of[request_id].held[block] = None

    def release(self, t: int, why: str, leaving, freed: list) -> None:
        """The requests ``leaving`` (one role of the tick: aborted, preempted or finished), in the tick's release
        order, give their tables back; a block several of them hold is freed by the last of them."""
        replay, of = self.replay, self.replay.of
        last = {block: request_id for request_id in leaving for block in of[request_id].held}
        listed: dict[int, int] = {}
        for request_id, blocks in freed:
            r = of[request_id]
            if len(set(blocks)) != len(blocks):
                twice = next(b for b in blocks if blocks.count(b) > 1)
                replay.report(
                    "kv_exclusive", f"tick {t} frees block {self.name(twice)} of request {request_id} twice ({why})",
                    tick=t, ids=[request_id], actual=self.names(blocks),
                )
            given = set(blocks)
            in_table = [b for b in r.held if b in given]
            if len(in_table) == len(blocks) and in_table != list(blocks):
                replay.report(
                    "metrics_consistent",
                    f"tick {t} frees request {request_id}'s blocks as {self.names(blocks)}, not in table order "
                    f"{self.names(in_table)}",
                    tick=t, ids=[request_id], expected=self.names(in_table), actual=self.names(blocks),
                )
            for block in blocks:
                if block not in r.held:
                    holder = next(iter(self.holders.get(block, ())), None)
                    whose = "no request holds it" if holder is None else f"request {holder} holds it"
                    replay.report(
                        "refcount_exact",
                        f"tick {t} frees block {self.name(block)} for request {request_id} ({why}), which does not hold "
                        f"it: {whose}",
                        tick=t, ids=[request_id] + ([holder] if holder not in (None, request_id) else []),
                        actual=self.name(block),
                    )
                elif listed.get(block, request_id) != request_id:
                    replay.report(
                        "refcount_exact",
                        f"tick {t} frees block {self.name(block)} twice, for requests {listed[block]} and {request_id}",
                        tick=t, ids=[listed[block], request_id], actual=self.name(block),
                    )
                else:
                    listed[block] = request_id
        gone = []
        for request_id in leaving:
            r = of[request_id]
            for block in r.held:
                holders = self.holders[block]
                holders.discard(request_id)
                if not holders:
                    del self.holders[block]
                    replay.owner.pop(block, None)
                    gone.append((block, request_id))
                elif replay.owner.get(block) == request_id:
                    replay.owner[block] = next(iter(holders))
            r.held = {}
        for block, request_id in listed.items():
            if block not in self.holders and last.get(block, request_id) != request_id:
                replay.report(
                    "refcount_exact",
                    f"tick {t} frees block {self.name(block)} for request {request_id} ({why}), but request "
                    f"{last[block]} also holds it and releases it later in the tick's order, so the count reaches 0 "
                    f"by request {last[block]}'s release",
                    tick=t, ids=[request_id, last[block]], expected=last[block], actual=request_id,
                )
            if block in self.holders:
                others = sorted(self.holders[block])
                replay.report(
                    "refcount_exact",
                    f"tick {t} frees block {self.name(block)} for request {request_id} ({why}) while request "
                    f"{others[0]} still holds it (count {len(others)})",
                    tick=t, ids=[request_id, others[0]], expected="count 0 when freed", actual=len(others),
                )
        for block, request_id in gone:
            if block not in listed:
                replay.report(
                    "refcount_exact",
                    f"block {self.name(block)} of request {request_id} reaches count 0 when it {why} in tick {t}, "
                    "but freed does not give it back: a leak",
                    tick=t, ids=[request_id], expected="freed", actual=self.name(block),
                )

    def release_some(self, t: int, request_id: int, blocks: list) -> None:
        """A request that did not leave gives some blocks back (the contract never does): they leave its table."""
        r = self.replay.of[request_id]
        for block in blocks:
            if block in r.held:
                del r.held[block]
                holders = self.holders[block]
                holders.discard(request_id)
                if not holders:
                    del self.holders[block]
                    self.replay.owner.pop(block, None)
                elif self.replay.owner.get(block) == request_id:
                    self.replay.owner[block] = next(iter(holders))
        self.release(t, "neither aborted, preempted nor finished", (), [(request_id, blocks)])

    def hit(self, t: int, request_id: int, blocks: list) -> None:
        """An admission takes ``blocks`` from the cache: they start its table (their contents are judged after the writes)."""
        r = self.replay.of[request_id]
        for block in blocks:
            if block in r.held:
                self.replay.report(
                    "kv_exclusive", f"tick {t}: request {request_id} hits block {self.name(block)} twice",
                    tick=t, ids=[request_id], actual=self.names(blocks),
                )
                continue
            self._hold(request_id, block)
        self.pending.append((request_id, blocks))

    def take(self, t: int, request_id: int, blocks: list) -> None:
        """Blocks taken from the pool for ``request_id``: each at count 0, its old content gone."""
        r = self.replay.of[request_id]
        for block in blocks:
            holders = self.holders.get(block)
            if block in r.held:
                self.replay.report(
                    "kv_exclusive", f"tick {t}: request {request_id} is given block {self.name(block)} it holds already",
                    tick=t, ids=[request_id], actual=self.name(block),
                )
            elif holders:
                holder = sorted(holders)[0]
                self.replay.report(
                    "refcount_exact",
                    f"tick {t} takes block {self.name(block)} from the pool for request {request_id} while its count "
                    f"is {len(holders)} (request {holder} holds it)",
                    tick=t, ids=[request_id, holder], actual=self.name(block),
                )
            self._hold(request_id, block)
            self.content[block] = None

    def write(self, t: int, request_id: int, before: int, after: int) -> None:
        """A scheduled request computes its tokens ``before..after-1``: the blocks they fill hold its chain."""
        size = self.size
        first, last = before // size, blocks_for(after, size)
        if first >= last:
            return
        table = list(self.replay.of[request_id].held)
        for j in range(first, min(last, len(table))):
            block = table[j]
            if (j + 1) * size <= after:
                self.content[block] = self.chain(request_id, j)
            if len(self.holders.get(block, ())) > 1:
                self.shared_writes.append((request_id, j, block))

    def judge(self, t: int) -> None:
        """After the tick's writes: each hit block holds the hitting request's own chain at its position, and a
        block written while another request holds it holds, for each holder it is full for, that holder's chain."""
        size, of = self.size, self.replay.of
        for request_id, blocks in self.pending:
            for j, block in enumerate(blocks):
                have = self.content.get(block)
                if have != self.chain(request_id, j):
                    self.replay.report(
                        "no_false_sharing",
                        f"tick {t}: request {request_id} hits block {self.name(block)} for its tokens "
                        f"{j * size}..{(j + 1) * size - 1}, but the block holds {self.describe(have, request_id, j)}",
                        tick=t, ids=[request_id], actual=self.name(block),
                    )
        for writer, j, block in self.shared_writes:
            for holder in sorted(self.holders.get(block, ())):
                if holder == writer:
                    continue
                position = list(of[holder].held).index(block)
                full = (position + 1) * size <= of[holder].cached
                if not full or self.content.get(block) != self.chain(holder, position):
                    self.replay.report(
                        "no_false_sharing",
                        f"tick {t} writes request {writer}'s tokens {j * size}..{(j + 1) * size - 1} into block "
                        f"{self.name(block)}, which request {holder} holds for "
                        + (f"its own tokens {position * size}..{(position + 1) * size - 1}" if full
                           else "tokens it is still writing"),
                        tick=t, ids=[writer, holder], actual=self.name(block),
                    )
        self.pending = []
        self.shared_writes = []


class RulesPool:
    """The free queue and the cache the FCFS rules build from the engine's tables (``spec.serving.cache``)."""

    def __init__(self, book: CacheBook) -> None:
        self.book = book
        self.replay = book.replay
        self.size = book.size
        self.limit = book.limit
        self.fresh = 0  # ids fresh..num_blocks-1 were never taken (except those in taken_ahead)
        self.taken_ahead: set = set()  # never-queued ids the engine took out of order
        self.returned = Order()  # ids given back at count 0, queue order
        self.count: dict[int, int] = {}  # block -> holders, by the engine's tables
        self.table: dict[int, list] = {}  # request -> its blocks, in table order
        self.done: dict[int, int] = {}  # request -> how many leading blocks of its table are registered
        self.registry: dict = {}  # chain -> blocks registered under it, in registration order
        self.chain_of: dict[int, object] = {}  # registered block -> its chain

    def free_len(self) -> int:
        return self.limit - self.fresh - len(self.taken_ahead) + len(self.returned)

    def head(self) -> int | None:
        while self.fresh in self.taken_ahead:
            self.taken_ahead.discard(self.fresh)
            self.fresh += 1
        if self.fresh < self.limit:
            return self.fresh
        return self.returned.first

    def evictable(self, blocks) -> int:
        """How many of ``blocks`` have count 0 (in the free queue)."""
        return sum(1 for block in blocks if not self.count.get(block))

    def release(self, request_id: int) -> None:
        """The rules' release: each block's count drops by one; those at 0 join the queue's tail, last block first."""
        table = self.table.pop(request_id, ())
        self.done.pop(request_id, None)
        gone = []
        for block in table:
            left = self.count.get(block, 1) - 1
            if left > 0:
                self.count[block] = left
            else:
                self.count.pop(block, None)
                gone.append(block)
        for block in reversed(gone):
            self.returned.push_back(block)

    def _leave_queue(self, block: int) -> None:
        if block in self.returned:
            self.returned.remove(block)
        elif block >= self.fresh and block not in self.taken_ahead:
            if block == self.fresh:
                self.fresh += 1
            else:
                self.taken_ahead.add(block)

    def take(self, t: int, request_id: int, blocks: list) -> None:
        """The engine's new blocks for a request, each judged against the queue's head, then followed."""
        name = self.book.name
        for block in blocks:
            head = self.head()
            if block != head:
                where = "the free queue is empty" if head is None else f"the head of the free queue is block {name(head)}"
                self.replay.report(
                    "lru_eviction",
                    f"tick {t} takes block {name(block)} for request {request_id}; {where}",
                    tick=t, ids=[request_id], expected=None if head is None else name(head), actual=name(block),
                )
            if not self.count.get(block):
                self._leave_queue(block)
            chain = self.chain_of.pop(block, None)  # evicted from the cache
            if chain is not None:
                registered = self.registry[chain]
                registered.remove(block)
                if not registered:
                    del self.registry[chain]
            self.count[block] = self.count.get(block, 0) + 1
            self.table.setdefault(request_id, []).append(block)

    def longest_hit(self, request_id: int, known: int) -> list:
        """The blocks the rules give an admission: the earliest-registered block per cached chain, capped at known - 1."""
        hits, j = [], 0
        while (j + 1) * self.size <= known - 1:
            registered = self.registry.get(self.book.chain(request_id, j))
            if not registered:
                break
            hits.append(registered[0])
            j += 1
        return hits

    def admit(self, t: int, request_id: int, known: int, hits: list) -> None:
        """Judge an admission's hits against the rules' (``longest_prefix_hit``), then follow the engine's."""
        expected = self.longest_hit(request_id, known)
        if hits != expected:
            name = self.book.names
            self.replay.report(
                "longest_prefix_hit",
                f"tick {t} admits request {request_id} with hits {name(hits)}; the cache's longest prefix "
                f"(the earliest-registered block per chain, capped at {_HIT_CAP} = {known - 1} tokens) is "
                f"{name(expected)}",
                tick=t, ids=[request_id], expected=name(expected), actual=name(hits),
            )
        table = self.table.setdefault(request_id, [])
        for block in hits:
            if not self.count.get(block):
                self._leave_queue(block)
            self.count[block] = self.count.get(block, 0) + 1
            table.append(block)
        self.done[request_id] = sum(1 for block in hits if block in self.chain_of)

    def register(self, request_id: int, tokens: int) -> None:
        """A scheduled request's blocks that are full once ``tokens`` are computed join the cache, if not in it."""
        table = self.table.get(request_id, ())
        full = min(tokens // self.size, len(table))
        for j in range(self.done.get(request_id, 0), full):
            block = table[j]
            if block not in self.chain_of:
                chain = self.chain_of[block] = self.book.chain(request_id, j)
                self.registry.setdefault(chain, []).append(block)
        self.done[request_id] = max(full, self.done.get(request_id, 0))
