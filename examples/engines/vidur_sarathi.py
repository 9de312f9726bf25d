"""vidur 0.0.9's Sarathi-style replica scheduler, checked online through the serving protocol.

Install: ``pip install --no-deps vidur==0.0.9`` (its scheduler modules need nothing
else).  The adapter, its loading, its stubs and its mapping are ``vidur_common``'s
(read its docstring).
"""

from vidur_common import VidurAdapter, load

# what this scheduler supports (schedcheck draws only inside it): it always chunks prefills (chunk_size)
DOMAIN = {"chunked_prefill": [True]}

MODULES = load("sarathi")  # the engine's modules, imported once, as an adapter imports its engine


def make(config):
    """A fresh vidur Sarathi-style replica scheduler for the serving ``config``, behind the online protocol."""
    return VidurAdapter(config, MODULES, "sarathi")
