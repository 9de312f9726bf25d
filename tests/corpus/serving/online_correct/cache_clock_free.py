"""A clock-free online serving engine with prefix caching, in the shape of vLLM v1's KV cache manager (issue 20).

Written from the contract of issue 20 alone.  The harness numbers the ticks (README,
"Checking an online engine"): `make(config)` gives an engine with `add_request`,
`abort`, `step() -> entry` (with `hits`) and `view()`.  The block pool is a list of
`Block` objects (created when first taken, so a huge pool costs nothing) with a
reference count and the hash they are cached under, a doubly linked free queue with
O(1) removal from the middle (a hit on a free block), and `cached`, a dict from a
block hash to a dict {block id: block} in insertion order (registration order; no
de-duplication).  Each request keeps the hashes of every full block of its known
sequence, appended as its tokens become known (`_hash_blocks`); a hash is an int
interned from (parent hash, the block's tokens), so equal hashes mean equal whole
prefixes.  Each step: aborts in (arrival, id) order, the running pass (preempting the
newest while blocks are short), the FCFS waiting pass (the longest cached run capped
at known - 1, hit blocks pulled out of the free queue before new ones are taken from
its head, fit counted with the evictable hits), caching every block that is full
once the scheduled tokens are computed, then compute, and the finished free their
tables last block first.
"""

DOMAIN = {"prefix_caching": [False, True]}  # prefix caching supported: the search draws it (proofs/models/declared.py)


class Block:
    """One KV block: its id, its reference count, the hash it is cached under, and its free-queue links."""

    __slots__ = ("block_id", "ref_cnt", "block_hash", "prev", "next")

    def __init__(self, block_id):
        self.block_id, self.ref_cnt, self.block_hash, self.prev, self.next = block_id, 0, None, None, None


class FreeQueue:
    """The free queue: the never-used ids in id order, then a doubly linked list of the freed blocks."""

    def __init__(self, num_blocks):
        self.num_blocks, self.next_unused, self.size = num_blocks, 0, 0
        self.head, self.tail = None, None  # the linked part

    def __len__(self):
        return self.num_blocks - self.next_unused + self.size

    def popleft(self, blocks):
        if self.next_unused < self.num_blocks:
            block = Block(self.next_unused)
            blocks[block.block_id] = block
            self.next_unused += 1
            return block
        block = self.head
        self.remove(block)
        return block

    def append(self, block):
        block.prev, block.next = self.tail, None
        if self.tail is None:
            self.head = block
        else:
            self.tail.next = block
        self.tail = block
        self.size += 1

    def remove(self, block):
        if block.prev is None:
            self.head = block.next
        else:
            block.prev.next = block.next
        if block.next is None:
            self.tail = block.prev
        else:
            block.next.prev = block.prev
        block.prev = block.next = None
        self.size -= 1


class Request:
    """A request's tokens, progress and block table."""

    def __init__(self, request):
        self.request_id, self.arrival = request["id"], request["arrival"]
        self.prompt, self.output = request["prompt"], request["output"]
        given = request.get("tokens")
        self.token_ids = (list(given) if given is not None
                          else [("prompt", self.request_id, p) for p in range(self.prompt)])
        self.num_output = 0
        self.num_computed_tokens = 0
        self.block_table = []
        self.block_hashes = []

    @property
    def num_tokens(self):
        return len(self.token_ids)

    @property
    def key(self):
        return (self.arrival, self.request_id)


class Engine:
    """A clock-free FCFS serving engine with vLLM-style automatic prefix caching."""

    def __init__(self, config):
        self.max_seqs, self.budget = config["max_seqs"], config["token_budget"]
        self.block_size, self.chunked = config["block_size"], config["chunked_prefill"]
        self.caching = config.get("prefix_caching", False)
        self.blocks = {}  # block id -> Block, for the ids taken at least once
        self.free_queue = FreeQueue(config["num_blocks"])
        self.lowest_free = []  # caching off: freed ids kept sorted (lowest first), before the unused ones
        self.cached = {}  # block hash -> {block id: block}, in registration order
        self.interned = {}
        self.front, self.fresh, self.running = [], [], []  # preempted (head first), never admitted, running
        self.to_abort = []

    # ---- the client side ----

    def add_request(self, request):
        req = Request(request)
        self._hash_blocks(req)
        at = len(self.fresh)
        while at > 0 and self.fresh[at - 1].key > req.key:
            at -= 1
        self.fresh.insert(at, req)

    def abort(self, request_id):
        self.to_abort.append(request_id)

    def view(self):
        return {"waiting": [r.request_id for r in self.front + self.fresh],
                "running": [r.request_id for r in self.running],
                "blocks": {r.request_id: [b.block_id for b in r.block_table] for r in self.running}}

    # ---- the block pool ----

    def _hash_blocks(self, req):
        if not self.caching:
            return
        bs = self.block_size
        while (len(req.block_hashes) + 1) * bs <= req.num_tokens:
            j = len(req.block_hashes)
            parent = req.block_hashes[-1] if j else None
            key = (parent, tuple(req.token_ids[j * bs:(j + 1) * bs]))
            req.block_hashes.append(self.interned.setdefault(key, len(self.interned)))

    def _num_free(self):
        return len(self.free_queue) if self.caching else len(self.lowest_free) + len(self.free_queue)

    def _new_blocks(self, k):
        out = []
        for _ in range(k):
            if not self.caching and self.lowest_free:
                block = self.blocks[self.lowest_free.pop(0)]
            elif not self.caching:
                block = self.free_queue.popleft(self.blocks)
            else:
                block = self.free_queue.popleft(self.blocks)
                if block.block_hash is not None:  # eviction
                    holders = self.cached[block.block_hash]
                    del holders[block.block_id]
                    if not holders:
                        del self.cached[block.block_hash]
                    block.block_hash = None
            block.ref_cnt = 1
            out.append(block)
        return out

    def _free(self, req, freed):
        zero = []
        for block in req.block_table:
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                zero.append(block)
        req.block_table = []
        if zero:
            freed.append([req.request_id, [b.block_id for b in zero]])
        for block in reversed(zero):
            if self.caching:
                self.free_queue.append(block)
            else:
                self.lowest_free.append(block.block_id)
        self.lowest_free.sort()

    def _cache_full_blocks(self, req, num_tokens):
        if not self.caching:
            return
        for j in range(num_tokens // self.block_size):
            block = req.block_table[j]
            if block.block_hash is None:
                block.block_hash = req.block_hashes[j]
                self.cached.setdefault(block.block_hash, {})[block.block_id] = block

    def _computed_blocks(self, req):
        hits = []
        if self.caching:
            limit = (req.num_tokens - 1) // self.block_size
            for block_hash in req.block_hashes[:limit]:
                holders = self.cached.get(block_hash)
                if not holders:
                    break
                hits.append(next(iter(holders.values())))
        return hits

    # ---- one iteration ----

    def _preempt_last(self, freed, preempted):
        victim = self.running.pop()
        self._free(victim, freed)
        victim.num_computed_tokens = 0
        self.front.insert(0, victim)
        preempted.append(victim.request_id)
        return victim

    def step(self):
        freed, allocated, preempted, scheduled, hits_entry = [], [], [], [], []
        due = sorted((r for r in self.front + self.fresh + self.running if r.request_id in self.to_abort),
                     key=lambda r: r.key)
        self.to_abort = []
        for req in due:
            for queue in (self.front, self.fresh, self.running):
                if req in queue:
                    queue.remove(req)
            self._free(req, freed)
        budget, bs = self.budget, self.block_size
        i = 0
        while i < len(self.running):
            req = self.running[i]
            n = min(req.num_tokens - req.num_computed_tokens, budget)
            if n > 0:
                need = -(-(req.num_computed_tokens + n) // bs) - len(req.block_table)
                victim = None
                while self._num_free() < need and victim is not req:
                    victim = self._preempt_last(freed, preempted)
                if victim is req:
                    break
                if need > 0:
                    new = self._new_blocks(need)
                    req.block_table.extend(new)
                    allocated.append([req.request_id, [b.block_id for b in new]])
                self._cache_full_blocks(req, req.num_computed_tokens + n)
                scheduled.append((req, n))
                budget -= n
            i += 1
        while not preempted and (self.front or self.fresh) and budget > 0 and len(self.running) < self.max_seqs:
            queue = self.front if self.front else self.fresh
            req = queue[0]
            hits = self._computed_blocks(req)
            computed = len(hits) * bs
            n = req.num_tokens - computed
            if self.chunked:
                n = min(n, budget)
            elif n > budget:
                break
            need = -(-(computed + n) // bs) - len(hits)
            if need + sum(1 for b in hits if b.ref_cnt == 0) > self._num_free():
                break
            queue.pop(0)
            for block in hits:  # touch: out of the free queue before anything is taken from its head
                if block.ref_cnt == 0:
                    self.free_queue.remove(block)
                block.ref_cnt += 1
            new = self._new_blocks(need)
            req.block_table = hits + new
            req.num_computed_tokens = computed
            if hits:
                hits_entry.append([req.request_id, [b.block_id for b in hits]])
            allocated.append([req.request_id, [b.block_id for b in new]])
            self._cache_full_blocks(req, computed + n)
            self.running.append(req)
            scheduled.append((req, n))
            budget -= n
        finished = []
        for req, n in scheduled:
            req.num_computed_tokens += n
            if req.num_computed_tokens == req.num_tokens:
                req.token_ids.append(("gen", req.request_id, req.num_output))
                req.num_output += 1
                self._hash_blocks(req)
                if req.num_output == req.output:
                    finished.append(req)
        for req in [r for r in self.running if r in finished]:
            self.running.remove(req)
            self._free(req, freed)
        return {"scheduled": [[r.request_id, n] for r, n in scheduled], "preempted": preempted,
                "aborted": [r.request_id for r in due], "freed": freed, "allocated": allocated,
                "finished": [r.request_id for r in finished], "hits": hits_entry}


def make(config):
    """A fresh engine for ``config``."""
    return Engine(config)
