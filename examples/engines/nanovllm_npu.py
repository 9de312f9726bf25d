"""nano-vllm's scheduler as published on PyPI by nano-vllm-npu 0.0.2 (upstream nano-vllm's ``Scheduler`` and ``BlockManager``), checked online.

Install: ``pip install --no-deps nano-vllm-npu==0.0.2`` plus numpy and xxhash (the
``engines`` extra); the upstream ``nano-vllm`` is not on PyPI.  The adapter, its
loading and its mapping are ``nanovllm_common``'s (read its docstring).
"""

from nanovllm_common import NanoVLLMAdapter, load

PACKAGE = "nanovllmnpu"
MODULES = load(PACKAGE)  # the engine's modules, imported once, as an adapter imports its engine


def make(config):
    """A fresh nano-vllm-npu scheduler for the serving ``config``, behind the online protocol."""
    return NanoVLLMAdapter(config, MODULES, PACKAGE)
