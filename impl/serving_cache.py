"""The serving scheduler's KV block pool with prefix caching (vLLM v1's block pool, our own code).

Written from the contract (README, "Prefix caching"), independently of spec/: the
scheduler under check must not lean on the checker.  Each operation costs what it
touches, never the size of the pool or of the cache:

- the free queue is the never-taken ids ``fresh..num_blocks-1`` (a counter: a pool of
  2**40 blocks costs nothing) followed by the given-back ids in an insertion-ordered
  dict (O(1) append at the tail, pop at the head, removal of a hit block anywhere);
- the cache maps a chain number to an insertion-ordered dict of the blocks registered
  under it (the first is the earliest registered), and each registered block to its
  chain, so an eviction is O(1);
- a chain is numbered once: (the parent chain's number, the block's tokens) -> a new
  number; a token the caller did not give (an unnamed prompt token, a generated one)
  is ``(request id, position)``, which no other request has, so two chains share a
  number exactly when their whole prefixes are equal.
"""

from __future__ import annotations


class PrefixPool:
    """Blocks, reference counts, the free queue and the cache of full blocks by chain."""

    __slots__ = ("num_blocks", "fresh", "returned", "count", "cache", "chain_of", "numbers")

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.fresh = 0  # ids below were taken at least once
        self.returned: dict[int, None] = {}  # given back at count 0, oldest first
        self.count: dict[int, int] = {}  # block -> running requests holding it (absent: 0)
        self.cache: dict[int, dict[int, None]] = {}  # chain number -> its blocks, earliest registered first
        self.chain_of: dict[int, int] = {}  # registered block -> chain number
        self.numbers: dict[tuple, int] = {}  # (parent number, block tokens) -> chain number

    def free(self) -> int:
        """The length of the free queue (the blocks of count 0)."""
        return self.num_blocks - self.fresh + len(self.returned)

    def number(self, parent: int, tokens: tuple) -> int:
        """The chain number of a block of ``tokens`` after the chain ``parent`` (-1 for the first block)."""
        key = (parent, tokens)
        found = self.numbers.get(key)
        if found is None:
            found = self.numbers[key] = len(self.numbers)
        return found

    def cached(self, chain: int) -> int | None:
        """The earliest-registered block of ``chain``, or None."""
        blocks = self.cache.get(chain)
        return next(iter(blocks)) if blocks else None

    def hold(self, blocks) -> int:
        """Hit blocks join a table: counts grow, a block at count 0 leaves the free queue; returns how many did."""
        left = 0
        count, returned = self.count, self.returned
        for block in blocks:
            held = count.get(block, 0)
            if not held:
                del returned[block]
                left += 1
            count[block] = held + 1
        return left

    def take(self, number: int) -> list[int]:
        """``number`` blocks from the head of the free queue, each evicted from the cache (the caller checked room)."""
        taken = []
        fresh = self.fresh
        if fresh < self.num_blocks:
            upto = min(self.num_blocks, fresh + number)
            taken = list(range(fresh, upto))
            self.fresh = upto
        returned, chain_of, cache = self.returned, self.chain_of, self.cache
        while len(taken) < number:
            block = next(iter(returned))
            del returned[block]
            chain = chain_of.pop(block, None)
            if chain is not None:
                registered = cache[chain]
                del registered[block]
                if not registered:
                    del cache[chain]
            taken.append(block)
        count = self.count
        for block in taken:
            count[block] = 1
        return taken

    def release(self, table: list[int]) -> list[int]:
        """A table given back: counts drop; the blocks at 0 (in table order) join the queue's tail, last first."""
        count = self.count
        gone = []
        for block in table:
            held = count[block] - 1
            if held:
                count[block] = held
            else:
                del count[block]
                gone.append(block)
        returned = self.returned
        for block in reversed(gone):
            returned[block] = None
        return gone

    def register(self, block: int, chain: int) -> None:
        """A full block joins the cache under its chain, unless it is registered already."""
        if block not in self.chain_of:
            self.chain_of[block] = chain
            self.cache.setdefault(chain, {})[block] = None
