"""vLLM 0.33.0's own v1 scheduler with prefix caching off: ``vllm_v1.py``'s adapter, its declared domain narrowed.

What it establishes: ``schedcheck verify --model serving --online
examples/engines/vllm_v1_uncached.py:make --policy fcfs`` checks vLLM's scheduler
against the model's FCFS policy tick by tick (who runs, how many tokens each, whom a
tick preempts, which blocks it frees), with ``enable_prefix_caching`` false in every
call.  With caching on, vLLM and the model part on one documented design choice (a
freed block that holds no hash goes to the head of vLLM's free queue, where the model
appends every freed block: docs/engines.md V6), so that campaign runs under
``--policy none``; this one keeps the policy in CI for everything else.

Everything else (the mapping, the fake tokens, the bounds) is ``vllm_v1.py``'s: this
file only re-exports its ``make``.  The declaration below is that file's with
``prefix_caching`` narrowed to ``[False]`` (read from this file's source, as every
target's is).
"""

from __future__ import annotations

from vllm_v1 import make  # noqa: F401  (the target: examples/engines/vllm_v1_uncached.py:make)

DOMAIN = {
    "reserve_full_sequence": [False, True],  # scheduler_reserve_full_isl, both values (true is vLLM's default)
    "prefix_caching": [False],  # enable_prefix_caching off: the model's free-queue order is vLLM's (V6)
    "token_budget": {"min": "max_seqs"},
    "unchunked": {"prompt_plus_output": {"max": "token_budget"}},
}
