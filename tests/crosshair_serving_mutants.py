"""One injected bug of impl/serving.py per serving state invariant, for the CrossHair serving contracts.

Each mutant is impl/serving.py with one textual change (the original text occurs
exactly once), loaded as its own module; ``make(name)`` is its online engine factory.
The invariant a mutant is listed under is the one whose contract must find it.
"""

from __future__ import annotations

import os
import types

SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "impl", "serving.py")

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
