"""The models a target can be checked against, each as one object every engine and report goes through.

A model bundles what the engines need to know about one of the spec's models: its
entry function (``schedule(jobs, slots, continuous)`` or ``serve(requests, config)``),
its domain and oracle (from ``spec`` or ``spec.serving``), the Hypothesis strategies
and catalogue of bad inputs, the minimiser, how a call is written as Python and as
JSON, and its timeline.  The engines never import a model's spec directly: they are
handed a ``Model``, so one search, one judge, one report and one CLI serve both.

- ``chapter``: the chapter's model (slots, one token per tick, static vs continuous FIFO);
- ``serving``: prefill and decode, chunked prefill under a token budget, KV blocks,
  recompute preemption and aborts, with vLLM's FCFS policy (``--policy none``:
  safety only, for engines with another policy).
"""

from __future__ import annotations

NAMES = ("chapter", "serving")
DEFAULT = "chapter"


def get(name: str | None = None, policy: str | None = None, online: bool = False):
    """The model called ``name`` (default: the chapter's), judging with ``policy``; ``online``: its online protocol."""
    if online:
        from proofs.models.online import OnlineModel

        return OnlineModel(get(name, policy))
    name = name or DEFAULT
    if name == "chapter":
        from proofs.models.chapter import ChapterModel

        return ChapterModel(policy)
    if name == "serving":
        from proofs.models.serving import ServingModel

        return ServingModel(policy)
    raise ValueError(f"model={name!r}: expected one of {', '.join(NAMES)}")


def of_function(function: str) -> str:
    """The model whose entry function is called ``function`` (``serve`` -> serving), else the chapter's."""
    return "serving" if function == "serve" else DEFAULT
