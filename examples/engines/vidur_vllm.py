"""vidur 0.0.9's vLLM-style replica scheduler, checked online through the serving protocol.

Install: ``pip install --no-deps vidur==0.0.9`` (its scheduler modules need nothing
else).  The adapter, its loading, its stubs and its mapping are ``vidur_common``'s
(read its docstring).
"""

from vidur_common import VidurAdapter, load

# what this scheduler supports (schedcheck draws only inside it): it never chunks a prefill
DOMAIN = {"chunked_prefill": [False]}

MODULES = load("vllm")  # the engine's modules, imported once, as an adapter imports its engine


def make(config):
    """A fresh vidur vLLM-style replica scheduler for the serving ``config``, behind the online protocol."""
    return VidurAdapter(config, MODULES, "vllm")
