"""nano-vllm's scheduler as published on PyPI by nano-vllm-fork 20260210 (nano-vllm with classifier-free-guidance pairs added), checked online.

Install: ``pip install --no-deps nano-vllm-fork==20260210`` plus numpy and xxhash (the
``engines`` extra).  Its ``Scheduler`` rewrote nano-vllm's decode loop (a copy of the
running deque, preemption from its front); no request here is a CFG pair
(``cfg_scale`` 1.0), so the plain paths run.  The adapter, its loading and its
mapping are ``nanovllm_common``'s (read its docstring).
"""

from nanovllm_common import NanoVLLMAdapter, load

# what nano-vllm supports (schedcheck draws only inside it): no chunked prefill (its prefill pass takes a
# whole prompt or none), blocks of 2 tokens or more (may_append's arithmetic; its Config wants multiples of 256),
# and prefix caching always on (its BlockManager hashes every full block: there is no switch)
DOMAIN = {"chunked_prefill": [False], "block_size": {"min": 2}, "prefix_caching": [True]}

PACKAGE = "nanovllm"
MODULES = load(PACKAGE)  # the engine's modules, imported once, as an adapter imports its engine


def make(config):
    """A fresh nano-vllm-fork scheduler for the serving ``config``, behind the online protocol."""
    return NanoVLLMAdapter(config, MODULES, PACKAGE)
