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


def token_utilization(computed: int, token_budget: int, makespan: int) -> float:
    """The fraction of the token budget of ticks [0, makespan) that was computed; 0.0 for an empty run."""
    return computed / (token_budget * makespan) if makespan else 0.0


def trace_entry(entry: Entry) -> dict:
    """The result's JSON-able trace entry of one tick (lists, not tuples)."""
    return {
        "tick": entry.tick,
        "scheduled": [[i, n] for i, n in entry.scheduled],
        "preempted": list(entry.preempted),
        "aborted": list(entry.aborted),
        "freed": [[i, list(blocks)] for i, blocks in entry.freed],
        "allocated": [[i, list(blocks)] for i, blocks in entry.allocated],
        "finished": list(entry.finished),
    }


def request_record(ended: Ended, finished: bool) -> dict:
    """The ``requests`` record of one request that left: the caller's keys, then its counters."""
    progress = ended.progress
    request = progress.request
    record = {"id": request.id, "arrival": request.arrival, "prompt": request.prompt, "output": request.output}
    if request.abort is not None:
        record["abort"] = request.abort
    record.update(
        start=progress.start,
        first_token=progress.first_token,
        finish=ended.tick if finished else None,
        aborted=None if finished else ended.tick,
        generated=progress.generated,
        preemptions=progress.preemptions,
        computed=progress.total,
    )
    return record


def result_from_run(final: State, trace: list[dict]) -> dict:
    """The result dict of a finished run, in the contract's shape."""
    records = [request_record(e, True) for e in final.finished] + [request_record(e, False) for e in final.aborted]
    records.sort(key=lambda record: record["id"])
    makespan = max((entry["tick"] + 1 for entry in trace if entry["scheduled"]), default=0)
    ledger = final.ledger
    return {
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
