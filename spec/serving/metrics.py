"""Metric definitions of the serving model: how a run's records and trace become the result dict.

Per request: ``start`` is its first admission tick, ``first_token`` the tick after its
first output token, ``finish`` the tick after its last one (None if aborted),
``aborted`` its abort tick (or None), ``computed`` every token computed for it,
recompute included.  Totals: ``makespan_ticks`` is the last tick with scheduled work
plus one (0 if none); ``computed_tokens`` the sum of n over the trace;
``useful_tokens`` the sum of prompt + output - 1 over finished requests;
``recomputed_tokens`` the cached tokens given back by preemptions; ``aborted_tokens``
the cached tokens of each request when it is aborted; ``token_utilization`` is
computed_tokens / (token_budget * makespan_ticks), 0.0 for an empty run.  Work
conservation: computed = useful + recomputed + aborted.

With prefix caching (issue 20) a request's ``cached`` is the tokens it took from cache
hits over all its admissions, and ``cache_hit_tokens`` their total; ``computed`` keeps
its meaning (hits excluded), and work conservation becomes computed + cache_hit_tokens
= useful + recomputed + aborted, where recomputed and aborted count the tokens a
request held (computed or hit) when it was preempted or aborted.  An entry's ``hits``
lists the blocks each admitted request took from the cache.  These three keys are in
the result exactly when the caller's config names ``prefix_caching`` (True or False),
so a call of today gets today's result; an engine may omit them (absent reads as
empty or 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spec.serving.state import Ended, Entry, State

RECORD_KEYS = ("start", "first_token", "finish", "aborted", "generated", "preemptions", "computed")
TOTAL_KEYS = (
    "makespan_ticks",
    "computed_tokens",
    "useful_tokens",
    "recomputed_tokens",
    "aborted_tokens",
    "token_utilization",
    "preemptions",
)
ENTRY_KEYS = ("tick", "scheduled", "preempted", "aborted", "freed", "allocated", "finished")
CACHE_ENTRY_KEY = "hits"  # optional in an entry: [[id, [block ids]], ...], the blocks each admission hit
CACHE_RECORD_KEY = "cached"  # optional in a record: tokens taken from hits
CACHE_TOTAL_KEY = "cache_hit_tokens"  # optional total: every request's cached


def token_utilization(computed: int, token_budget: int, makespan: int) -> float:
    """The fraction of the token budget of ticks [0, makespan) that was computed; 0.0 for an empty run."""
    return computed / (token_budget * makespan) if makespan else 0.0


def trace_entry(entry: Entry) -> dict:
    """The result's JSON-able trace entry of one tick (lists, not tuples); ``hits`` when the config names caching."""
    out = {
        "tick": entry.tick,
        "scheduled": [[i, n] for i, n in entry.scheduled],
        "preempted": list(entry.preempted),
        "aborted": list(entry.aborted),
        "freed": [[i, list(blocks)] for i, blocks in entry.freed],
        "allocated": [[i, list(blocks)] for i, blocks in entry.allocated],
        "finished": list(entry.finished),
    }
    if entry.hits is not None:
        out["hits"] = [[i, list(blocks)] for i, blocks in entry.hits]
    return out


def request_record(ended: Ended, finished: bool, caching_keys: bool = False) -> dict:
    """The ``requests`` record of one request that left: the caller's keys, then its counters (``cached`` too when
    ``caching_keys``)."""
    progress = ended.progress
    request = progress.request
    record = {"id": request.id, "arrival": request.arrival, "prompt": request.prompt, "output": request.output}
    if request.abort is not None:
        record["abort"] = request.abort
    if request.tokens is not None:
        record["tokens"] = list(request.tokens)
    record.update(
        start=progress.start,
        first_token=progress.first_token,
        finish=ended.tick if finished else None,
        aborted=None if finished else ended.tick,
        generated=progress.generated,
        preemptions=progress.preemptions,
        computed=progress.total,
    )
    if caching_keys:
        record["cached"] = progress.cached
    return record


def result_from_run(final: State, trace: list[dict]) -> dict:
    """The result dict of a finished run, in the contract's shape."""
    keys = final.config.prefix_caching is not None
    records = [request_record(e, True, keys) for e in final.finished] + [request_record(e, False, keys) for e in final.aborted]
    records.sort(key=lambda record: record["id"])
    makespan = max((entry["tick"] + 1 for entry in trace if entry["scheduled"]), default=0)
    ledger = final.ledger
    result = {
        "trace": trace,
        "requests": records,
        "makespan_ticks": makespan,
        "computed_tokens": ledger.computed,
        "useful_tokens": ledger.useful,
        "recomputed_tokens": ledger.recomputed,
        "aborted_tokens": ledger.aborted,
        "token_utilization": token_utilization(ledger.computed, final.config.token_budget, makespan),
        "preemptions": sum(record["preemptions"] for record in records),
    }
    if keys:
        result["cache_hit_tokens"] = ledger.hit
    return result
