"""One injected bug of impl/serving.py per serving state invariant, for the CrossHair serving contracts.

Each mutant is impl/serving.py with one textual change (the original text occurs
exactly once), loaded as its own module; ``make(name)`` is its online engine factory.
The invariant a mutant is listed under is the one whose contract must find it.

``CACHE_MUTANTS``: one bug of the prefix-caching code per caching claim
(``proofs.symbolic.serving.CACHING_CLAIMS``), in impl/serving_cache.py (its
``PrefixPool`` then replaces the one impl/serving.py imports) or impl/serving.py;
``make_cached(name)`` is its online engine factory, for the caching subjects.
"""

from __future__ import annotations

import os
import types

SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "impl", "serving.py")
POOL_SOURCE = os.path.join(os.path.dirname(SOURCE), "serving_cache.py")

# invariant -> (what the bug does, original text, mutated text)
MUTANTS = {
    "no_duplicate_active": (
        "a request scheduled for more than one token is listed twice in the entry",
        "            scheduled_ids.append([state.id, n])\n",
        "            scheduled_ids.append([state.id, n])\n            if n > 1:\n                scheduled_ids.append([state.id, 0])\n",
    ),
    "no_start_before_arrival": (
        "an abort is applied one tick late, so the request is scheduled at its abort tick",
        "        while aborts and aborts[0][0] <= tick:\n",
        "        while aborts and aborts[0][0] < tick:\n",
    ),
    "slot_bound": (
        "the waiting pass admits while running <= max_seqs",
        "            while budget and self._running < config.max_seqs:\n",
        "            while budget and self._running <= config.max_seqs:\n",
    ),
    "nonnegative_remaining": (
        "the running pass asks for one token more than the request still needs",
        "            n = state.prompt + state.generated - computed\n",
        "            n = state.prompt + state.generated - computed + 1\n",
    ),
    "work_conservation": (
        "a request with more than one output token finishes one token early",
        "                if state.generated == state.output:\n",
        "                if state.generated == max(1, state.output - 1):\n",
    ),
    "every_job_completes_once": (
        "a finished request is not unlinked from the running list, so it is shown running",
        "                    self._unlink(state)\n                    self._give_back(state, freed)  # free",
        "                    self._running -= 1\n                    self._give_back(state, freed)  # free",
    ),
    "token_budget": (
        "a chunked admission takes one token more than the budget left",
        "                    n = min(n, budget)\n",
        "                    n = min(n, budget + 1)\n",
    ),
    "kv_capacity": (
        "fresh block ids start at 1, so the last one is num_blocks",
        "            taken.extend(range(self._fresh, self._fresh + count))\n",
        "            taken.extend(range(self._fresh + 1, self._fresh + count + 1))\n",
    ),
    "kv_exclusive": (
        "the allocator hands the last fresh block out again",
        "            self._fresh += count\n",
        "            self._fresh += count - 1\n",
    ),
    "kv_exact": (
        "a request that leaves gives back all its blocks but lists only the first as freed",
        "            freed.append([state.id, state.blocks])\n",
        "            freed.append([state.id, state.blocks[:1]])\n",
    ),
}

# caching claim -> (what the bug does, the file it is in, original text, mutated text)
CACHE_MUTANTS = {
    "no_false_sharing": (
        "a block taken from the free queue is not evicted: its stale chain stays in the cache and a later request "
        "hits it after another request's KV overwrote it",
        POOL_SOURCE,
        "            chain = chain_of.pop(block, None)\n",
        "            chain = None\n",
    ),
    "refcount_exact": (
        "a release does not decrement the count of a block another request still holds, so it never reaches 0",
        POOL_SOURCE,
        "                count[block] = held\n",
        "                count[block] = held + 1\n",
    ),
    "kv_exact": (
        "an admission with hits takes new blocks for its whole prompt, its hit blocks counted again",
        SOURCE,
        "                need = -(-(start + n) // block_size) - len(hits)\n",
        "                need = -(-(start + n) // block_size)\n",
    ),
}


def _exec(path: str, original: str, mutated: str, label: str, **names) -> types.ModuleType:
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    base = os.path.basename(path)
    assert text.count(original) == 1, f"mutant {label}: its original text occurs {text.count(original)} times in {base}"
    module = types.ModuleType(f"impl_{base[:-3]}_mutant_{label}")
    module.__file__ = path
    exec(compile(text.replace(original, mutated), f"<mutant {label} of impl/{base}>", "exec"), module.__dict__)
    module.__dict__.update(names)
    return module


def make_cached(name: str):
    """The online engine factory ``make(config)`` of the caching mutant ``name`` (prefix caching then on in the
    configs the caching contracts give it)."""
    _, path, original, mutated = CACHE_MUTANTS[name]
    if path == POOL_SOURCE:
        pool = _exec(POOL_SOURCE, original, mutated, f"cache_{name}").PrefixPool
        with open(SOURCE, encoding="utf-8") as handle:
            head = handle.read().splitlines(keepends=True)[0]  # any text that occurs once: the module is unchanged
        module = _exec(SOURCE, head, head, f"cache_{name}")
        module.PrefixPool = pool  # the scheduler builds its pool from this module's name
    else:
        module = _exec(SOURCE, original, mutated, f"cache_{name}")
    scheduler_class = module.ServingScheduler
    return lambda config: scheduler_class(config)


def load(name: str) -> types.ModuleType:
    """impl/serving.py with the mutant ``name`` applied, as a fresh module."""
    _, original, mutated = MUTANTS[name]
    with open(SOURCE, encoding="utf-8") as handle:
        text = handle.read()
    assert text.count(original) == 1, f"mutant {name}: its original text occurs {text.count(original)} times in impl/serving.py"
    module = types.ModuleType(f"impl_serving_mutant_{name}")
    module.__file__ = SOURCE
    exec(compile(text.replace(original, mutated), f"<mutant {name} of impl/serving.py>", "exec"), module.__dict__)
    return module


def make(name: str):
    """The online engine factory ``make(config)`` of the mutant ``name``."""
    scheduler_class = load(name).ServingScheduler
    return lambda config: scheduler_class(config)
