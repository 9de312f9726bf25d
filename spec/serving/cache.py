"""Prefix caching: the block pool, the cache of full blocks by chain, hits, eviction and freeing (issue 20).

The rules, after vLLM v1's KV cache manager (``vllm/v1/core/block_pool.py`` and
``kv_cache_manager.py``), in the words the step (``spec.serving.state``) uses them:

- A block j of request r holds positions ``j*block_size .. (j+1)*block_size - 1`` of
  r's known sequence (its prompt's tokens, then its generated ones).  A full block is
  identified by its **chain**: the whole known sequence from position 0 to
  ``(j+1)*block_size`` (vLLM's chained block hash, without collisions).  A prompt
  whose ``tokens`` the caller did not give equals no other request's, and a generated
  token is its request's own, so a chain that reaches past the given tokens is its
  request's own (``("own", id, j)``), the same after a preemption.
- Each block has a reference count: the running requests whose table holds it.  The
  **free queue** holds exactly the blocks of count 0.  It starts as ``0, 1, ...,
  num_blocks - 1``; a new block is taken from its head; blocks whose count reaches 0
  are appended to its tail.  So every never-taken id comes before every given-back
  one, and the pool takes the ids in the order 0, 1, 2, ... first: ``Pool`` keeps the
  queue as ``fresh`` (the never-taken ids ``fresh..num_blocks-1``, in order) followed
  by ``returned``.
- The **cache** maps a chain to the blocks registered under it, in registration
  order, without de-duplication (two blocks may hold one chain).  Registering: when a
  request is scheduled n tokens, every block of its table that is full once those n
  are computed and is not registered yet is registered under its chain, at once
  (a request scheduled later in the same tick may hit it).
- A **hit**: admission (computed 0) takes, for j = 0, 1, ... while ``(j+1)*block_size
  <= known - 1`` and the chain of its block j is cached, the earliest-registered
  block of that chain (``longest_hit``).  Hit blocks join its table, their counts
  grow by one, and one whose count was 0 leaves the free queue (``claim``), before
  any new block is taken.
- Taking a block from the head **evicts** it: if registered, that block (only that
  block) leaves the cache; its KV is overwritten (``take``).
- **Freeing**: the count of each block of the table drops by 1; the blocks that reach
  0 are appended to the tail in reverse table order (``give_back``), and stay
  registered until taken.

What each block holds (``content``, the KV computed into it) is kept apart from the
cache (what the index offers): the safety claim ``no_false_sharing`` reads the first,
the policy claim ``longest_prefix_hit`` the second.  In the spec's own runs they agree
(a block is registered exactly when it is full, under the chain it holds).

Where the model differs from vLLM, on purpose: no null block (vLLM reserves block 0,
so its ids are judged up to renaming); a chain is the exact token sequence, not a
hash; one KV cache group; no watermark, no speculative or lookahead tokens, no
external (connector) hits; and the free-block count a waiting request needs is
checked once for the chunk it is admitted with, as vLLM's ``allocate_slots`` does.

Everything here is pure: each function returns a new ``Pool``.
"""

from __future__ import annotations

from typing import NamedTuple

from spec.serving.domain import Request

Chain = tuple  # ("prompt", token ids from position 0) for a chain of given tokens, ("own", id, j) otherwise


class Pool(NamedTuple):
    """The KV blocks with prefix caching on: the free queue, the cache, and what each taken block holds."""

    fresh: int = 0  # ids fresh..num_blocks-1 were never taken: the free queue's head part, in id order
    returned: tuple[int, ...] = ()  # ids given back at count 0, in the order they came: the queue's tail part
    cache: tuple[tuple[Chain, int], ...] = ()  # (chain, block) registrations, in registration order
    content: tuple[Chain | None, ...] = ()  # per taken id 0..fresh-1: the chain whose KV it holds, or None (not full)


def chain(request: Request, j: int, block_size: int) -> Chain:
    """The chain of block j of ``request``: its known sequence up to ``(j+1)*block_size``, as a comparable value."""
    end = (j + 1) * block_size
    if request.tokens is not None and end <= request.prompt:
        return ("prompt", request.tokens[:end])
    return ("own", request.id, j)


def free_count(pool: Pool, num_blocks: int) -> int:
    """The length of the free queue: the blocks of count 0."""
    return num_blocks - pool.fresh + len(pool.returned)


def free_queue(pool: Pool, num_blocks: int) -> tuple[int, ...]:
    """The free queue, head first (for reading; a pool of 2**40 blocks is kept as ``fresh`` for this reason)."""
    return tuple(range(pool.fresh, num_blocks)) + pool.returned


def lookup(pool: Pool, wanted: Chain) -> int | None:
    """The earliest-registered block of chain ``wanted``, or None when the cache has none."""
    for registered, block in pool.cache:
        if registered == wanted:
            return block
    return None


def is_registered(pool: Pool, block: int) -> bool:
    """True when ``block`` is in the cache (under whatever chain)."""
    return any(registered_block == block for _, registered_block in pool.cache)


def longest_hit(pool: Pool, request: Request, known: int, block_size: int) -> tuple[int, ...]:
    """The blocks an admission of ``request`` (``known`` tokens) takes from the cache, in table order.

    For j = 0, 1, ... while block j is full within the first ``known - 1`` tokens (at least
    one token is always computed) and its chain is cached: the earliest-registered block."""
    hits = []
    j = 0
    while (j + 1) * block_size <= known - 1:
        block = lookup(pool, chain(request, j, block_size))
        if block is None:
            break
        hits.append(block)
        j += 1
    return tuple(hits)


def claim(pool: Pool, blocks) -> Pool:
    """``blocks`` (hit blocks of count 0) leave the free queue; they stay registered."""
    leaving = set(blocks)
    return pool._replace(returned=tuple(b for b in pool.returned if b not in leaving))


def take(pool: Pool, count: int, num_blocks: int) -> tuple[Pool, tuple[int, ...]]:
    """Take ``count`` blocks from the head of the free queue (the caller knows that many are free).

    Each taken block is evicted: it leaves the cache if registered, and holds nothing yet."""
    fresh_taken = tuple(range(pool.fresh, min(pool.fresh + count, num_blocks)))
    reused = pool.returned[: count - len(fresh_taken)]
    taken = fresh_taken + reused
    evicted = set(reused)
    content = tuple(None if b in evicted else c for b, c in enumerate(pool.content)) + (None,) * len(fresh_taken)
    return (
        Pool(
            pool.fresh + len(fresh_taken),
            pool.returned[len(reused):],
            tuple(entry for entry in pool.cache if entry[1] not in evicted),
            content,
        ),
        taken,
    )


def give_back(pool: Pool, blocks) -> Pool:
    """Blocks whose count reached 0 (in table order) join the tail of the free queue, last block first."""
    return pool._replace(returned=pool.returned + tuple(reversed(tuple(blocks))))


def register(pool: Pool, request: Request, table: tuple[int, ...], tokens: int, block_size: int) -> Pool:
    """The blocks of ``table`` that are full once ``tokens`` are computed hold their chains; those not in the cache join it."""
    cache, content = list(pool.cache), list(pool.content)
    registered = {block for _, block in cache}
    for j in range(tokens // block_size):
        block = table[j]
        content[block] = chain(request, j, block_size)
        if block not in registered:
            cache.append((content[block], block))
            registered.add(block)
    return pool._replace(cache=tuple(cache), content=tuple(content))


__all__ = [
    "Chain",
    "Pool",
    "chain",
    "claim",
    "free_count",
    "free_queue",
    "give_back",
    "is_registered",
    "longest_hit",
    "lookup",
    "register",
    "take",
]
