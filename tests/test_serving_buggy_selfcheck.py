"""Each buggy serving scheduler has a live bug with its stated symptom, and behaves like the correct base where its bug cannot show.

For every file in tests/corpus/serving/buggy/ this runs one small input on which the bug
shows (the result breaks the claim its EXPECTED names, or the call raises, hangs, accepts
a bad input, mutates its input or answers differently the second time) and one input on
which the file's result equals the base's, so that each file holds one targeted bug.  The
base, tests/serving_buggy_base.py, is checked against the worked examples S1-S3 first.
"""

import copy
import importlib
import json
import multiprocessing
import os
import pathlib
import re
import signal

import pytest

from tests.serving_buggy_base import serve as base_serve

BUGGY = pathlib.Path(__file__).parent / "corpus" / "serving" / "buggy"
# the prefix-caching files (cache_*) derive from another base: tests/test_serving_cache_buggy_selfcheck.py
FILES = sorted(p.stem for p in BUGGY.glob("*.py") if p.name != "__init__.py" and not p.name.startswith("cache_"))


def cfg(max_seqs, token_budget, block_size, num_blocks, chunked):
    return {"max_seqs": max_seqs, "token_budget": token_budget, "block_size": block_size,
            "num_blocks": num_blocks, "chunked_prefill": chunked}


def req(rid, arrival, prompt, output, abort=None):
    out = {"id": rid, "arrival": arrival, "prompt": prompt, "output": output}
    if abort is not None:
        out["abort"] = abort
    return out


S1 = ([req(0, 0, 6, 2), req(1, 0, 2, 3)], cfg(2, 4, 2, 8, True))
S2 = ([req(0, 0, 2, 3), req(1, 0, 1, 2)], cfg(2, 8, 1, 4, True))
S3 = ([req(0, 0, 3, 4, abort=2), req(1, 1, 2, 1)], cfg(1, 8, 4, 2, False))
ONE = ([req(0, 0, 1, 1)], cfg(1, 1, 1, 1, False))
PREFILL_ONLY = ([req(0, 0, 3, 1), req(1, 0, 2, 1)], cfg(2, 8, 4, 4, True))  # no decode, no preemption

S1_TRACE = [
    {"tick": 0, "scheduled": [[0, 4]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0, 1]]], "finished": []},
    {"tick": 1, "scheduled": [[0, 2], [1, 2]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [2]], [1, [3]]], "finished": []},
    {"tick": 2, "scheduled": [[0, 1], [1, 1]], "preempted": [], "aborted": [], "freed": [[0, [0, 1, 2, 4]]], "allocated": [[0, [4]], [1, [5]]], "finished": [0]},
    {"tick": 3, "scheduled": [[1, 1]], "preempted": [], "aborted": [], "freed": [[1, [3, 5]]], "allocated": [], "finished": [1]},
]
S2_TRACE = [
    {"tick": 0, "scheduled": [[0, 2], [1, 1]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0, 1]], [1, [2]]], "finished": []},
    {"tick": 1, "scheduled": [[0, 1]], "preempted": [1], "aborted": [], "freed": [[1, [2]]], "allocated": [[0, [3]]], "finished": []},
    {"tick": 2, "scheduled": [[0, 1]], "preempted": [], "aborted": [], "freed": [[0, [0, 1, 3, 2]]], "allocated": [[0, [2]]], "finished": [0]},
    {"tick": 3, "scheduled": [[1, 2]], "preempted": [], "aborted": [], "freed": [[1, [0, 1]]], "allocated": [[1, [0, 1]]], "finished": [1]},
]
S3_TRACE = [
    {"tick": 0, "scheduled": [[0, 3]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0]]], "finished": []},
    {"tick": 1, "scheduled": [[0, 1]], "preempted": [], "aborted": [], "freed": [], "allocated": [], "finished": []},
    {"tick": 2, "scheduled": [[1, 2]], "preempted": [], "aborted": [0], "freed": [[0, [0]], [1, [0]]], "allocated": [[1, [0]]], "finished": [1]},
]
S_TOTALS = {
    "S1": (11, 11, 0, 0, 4, 11 / 16, 0),
    "S2": (7, 6, 1, 0, 4, 7 / 32, 1),
    "S3": (6, 2, 0, 4, 3, 6 / 24, 0),
}
S_ROWS = {
    "S1": [(0, 0, 2, 3, None, 2, 0, 7), (1, 1, 2, 4, None, 3, 0, 4)],
    "S2": [(0, 0, 1, 3, None, 3, 0, 4), (1, 0, 1, 4, None, 2, 1, 3)],
    "S3": [(0, 0, 1, None, 2, 2, 0, 4), (1, 2, 3, 3, None, 1, 0, 2)],
}
ROW_KEYS = ("id", "start", "first_token", "finish", "aborted", "generated", "preemptions", "computed")
TOTAL_KEYS = ("computed_tokens", "useful_tokens", "recomputed_tokens", "aborted_tokens", "makespan_ticks",
              "token_utilization", "preemptions")


@pytest.mark.parametrize("name, call, trace", [("S1", S1, S1_TRACE), ("S2", S2, S2_TRACE), ("S3", S3, S3_TRACE)])
def test_the_base_reproduces_the_worked_examples(name, call, trace):
    result = base_serve(*copy.deepcopy(call))
    assert result["trace"] == trace
    assert tuple(result[k] for k in TOTAL_KEYS) == S_TOTALS[name]
    assert [tuple(row[k] for k in ROW_KEYS) for row in result["requests"]] == S_ROWS[name]
    assert [set(row) - set(ROW_KEYS) for row in result["requests"]] == [set(r) - {"id"} for r in call[0]]
    json.dumps(result)  # plain data


# -- what a trace shows -------------------------------------------------------------------


def _ceil(a, b):
    return -(-a // b)


def over_budget(result, call):
    return any(sum(n for _, n in e["scheduled"]) > call[1]["token_budget"] for e in result["trace"])


def block_events(result, call):
    """The problems a replay of the trace's blocks shows (leak, alloc_held, free_unheld, wrong_count)."""
    bs = call[1]["block_size"]
    held, computed, problems = {}, {}, set()

    def free(e, ids):
        for rid, blocks in e["freed"]:
            if rid in ids:
                for b in blocks:
                    if held.get(b) != rid:
                        problems.add("free_unheld")
                    held.pop(b, None)

    for e in result["trace"]:
        leaving = set(e["aborted"]) | set(e["preempted"]) | set(e["finished"])
        free(e, set(e["aborted"]) | set(e["preempted"]))  # before the tick's allocations
        for rid, n in e["scheduled"]:
            computed[rid] = computed.get(rid, 0) + n
        for rid, blocks in e["allocated"]:
            for b in blocks:
                if b in held:
                    problems.add("alloc_held")
                held[b] = rid
        free(e, set(e["finished"]) - set(e["aborted"]) - set(e["preempted"]))  # after them
        for rid in leaving:
            if rid in held.values():
                problems.add("leak")
            for b in [b for b, owner in held.items() if owner == rid]:
                del held[b]
            if rid in e["aborted"] or rid in e["preempted"]:
                computed[rid] = 0
            if rid in e["finished"]:
                computed.pop(rid, None)
        for rid, c in computed.items():
            if c and sum(owner == rid for owner in held.values()) != _ceil(c, bs):
                problems.add("wrong_count")
    return problems


def max_running(result):
    """The most requests running at once, replayed from the trace."""
    running, most = set(), 0
    for e in result["trace"]:
        running -= set(e["aborted"]) | set(e["preempted"])
        running |= {rid for rid, _ in e["scheduled"]}
        most = max(most, len(running))
        running -= set(e["finished"])
    return most


def first_difference(result, reference):
    for got, want in zip(result["trace"], reference["trace"]):
        if got != want:
            return got, want
    return None


def without_blocks(result):
    """The result with the block ids left out of its trace (another allocator may pick other free blocks)."""
    trace = [{k: v for k, v in e.items() if k not in ("freed", "allocated")} for e in result["trace"]]
    return dict(result, trace=trace)


def ledger_broken(result, call):
    return result["computed_tokens"] != result["useful_tokens"] + result["recomputed_tokens"] + result["aborted_tokens"]


def at_first_difference(result, reference, claim):
    """Whether the traces part and ``claim(got_entry, want_entry)`` holds where they first do."""
    parted = first_difference(result, reference)
    return parted is not None and claim(*parted)


def admitted_less(result, reference):
    return at_first_difference(
        result, reference, lambda got, want: sum(n for _, n in got["scheduled"]) < sum(n for _, n in want["scheduled"]))


def scheduled_before_arrival(result, call):
    arrivals = {r["id"]: r["arrival"] for r in call[0]}
    return any(e["tick"] < arrivals[rid] for e in result["trace"] for rid, _ in e["scheduled"])


def unfinished(result):
    return any(r["finish"] is None and r["aborted"] is None for r in result["requests"])


def served_at_or_after_abort(result, call):
    aborts = {r["id"]: r["abort"] for r in call[0] if "abort" in r}
    return any(rid in aborts and e["tick"] >= aborts[rid] for e in result["trace"] for rid, _ in e["scheduled"])


# -- the cases: file -> (input that shows the bug, its symptom, input that hides it) ----------

# A symptom is a function (result, reference, call) -> bool, or one of the call-level
# kinds "raises", "hangs", "accepts", "rejects" (ValueError on a valid call), "mutates", "nondeterministic".
CASES = {
    "abort_applied_one_tick_late": (
        ([req(0, 0, 1, 2, abort=1)], cfg(1, 2, 1, 2, False)),
        lambda res, ref, call: served_at_or_after_abort(res, call), S1),
    "abort_leaks_blocks": (
        ([req(0, 0, 1, 2, abort=1)], cfg(1, 2, 1, 2, False)),
        lambda res, ref, call: "leak" in block_events(res, call), S1),
    "aborted_tokens_counts_generated": (
        ([req(0, 0, 2, 1, abort=1)], cfg(1, 1, 1, 2, True)),
        lambda res, ref, call: ledger_broken(res, call), S2),
    "accepts_abort_before_arrival": (
        ([req(0, 3, 1, 1, abort=2)], cfg(1, 1, 1, 1, False)), "accepts", S3),
    "accepts_request_larger_than_pool": (  # peak need 2 blocks, the pool 1: accepted, then it waits forever
        ([req(0, 0, 1, 2)], cfg(1, 1, 1, 1, True)), "accepts", S3),
    "accepts_bool_fields": (
        ([req(0, 0, True, 1)], cfg(1, 1, 1, 1, False)), "accepts", S3),
    "allocator_reissues_fresh_ids": (
        ([req(0, 0, 1, 1), req(1, 0, 2, 2)], cfg(1, 2, 1, 3, True)),
        lambda res, ref, call: "alloc_held" in block_events(res, call), S1),
    "admission_counts_preempted_as_running": (
        ([req(0, 0, 2, 5), req(1, 0, 2, 2)], cfg(2, 2, 2, 4, True)),
        lambda res, ref, call: admitted_less(res, ref), S1),
    "admits_during_preempting_tick": (
        ([req(0, 1, 2, 2), req(1, 0, 1, 3)], cfg(2, 3, 1, 5, True)),
        lambda res, ref, call: any(set(e["preempted"]) & {i for i, _ in e["scheduled"]} for e in res["trace"]), S2),
    "block_pool_cached_across_calls": (
        S1, "nondeterministic", ([], cfg(1, 1, 1, 8, False))),
    "budget_overshoot_by_one_chunk": (
        ([req(0, 0, 1, 1), req(1, 0, 2, 1)], cfg(2, 2, 1, 3, True)),
        lambda res, ref, call: over_budget(res, call), S1),
    "crash_on_no_requests": (([], cfg(1, 1, 1, 1, False)), "raises", S1),
    "decode_charged_as_prefill": (
        ([req(0, 0, 2, 2), req(1, 0, 1, 1)], cfg(2, 2, 1, 4, True)),
        lambda res, ref, call: admitted_less(res, ref), PREFILL_ONLY),
    "double_free_after_preemption": (
        ([req(0, 0, 1, 2), req(1, 0, 2, 2, abort=2)], cfg(2, 3, 2, 2, False)),
        lambda res, ref, call: "free_unheld" in block_events(res, call), S2),
    "finish_leaks_last_block": (
        ([req(0, 0, 1, 1)], cfg(1, 1, 1, 1, False)),
        lambda res, ref, call: "leak" in block_events(res, call), ([req(0, 0, 1, 1, abort=0)], cfg(1, 1, 1, 1, False))),
    "finishes_one_token_early": (
        ([req(0, 0, 1, 2)], cfg(1, 1, 1, 2, True)),
        lambda res, ref, call: any(r["finish"] is not None and r["generated"] < r["output"] for r in res["requests"]),
        PREFILL_ONLY),
    "first_prefill_not_chunked": (
        ([req(0, 0, 2, 1)], cfg(1, 1, 1, 2, True)),
        lambda res, ref, call: over_budget(res, call), S3),
    "first_token_on_partial_chunk": (
        ([req(0, 0, 2, 1)], cfg(1, 1, 1, 2, True)),
        lambda res, ref, call: res["requests"][0]["first_token"] < ref["requests"][0]["first_token"], S2),
    "generated_counted_twice_after_recompute": (
        ([req(0, 0, 1, 2), req(1, 0, 1, 2)], cfg(2, 2, 1, 2, False)),
        lambda res, ref, call: any(r["generated"] > r["output"] for r in res["requests"]), S1),
    "growth_block_not_removed_from_pool": (
        ([req(0, 0, 1, 3)], cfg(1, 1, 1, 3, True)),
        lambda res, ref, call: "alloc_held" in block_events(res, call), PREFILL_ONLY),
    "held_blocks_estimated_off_at_multiple": (
        ([req(0, 0, 1, 3)], cfg(1, 1, 1, 3, True)),
        lambda res, ref, call: "wrong_count" in block_events(res, call), S3),
    "makespan_off_by_one": (
        ([req(0, 0, 1, 1)], cfg(1, 1, 1, 1, False)),
        lambda res, ref, call: res["makespan_ticks"] == max(e["tick"] for e in res["trace"]), ([], cfg(1, 1, 1, 1, False))),
    "non_chunked_admission_chunks": (
        ([req(0, 0, 1, 1), req(1, 0, 4, 1)], cfg(2, 4, 1, 4, False)),
        lambda res, ref, call: any(n < 4 for e in res["trace"] for i, n in e["scheduled"] if i == 1 and e["tick"] == 0), S3),
    "preempted_to_back_of_queue": (
        ([req(0, 0, 1, 2), req(1, 0, 2, 2), req(2, 0, 1, 1)], cfg(2, 3, 2, 2, False)),
        lambda res, ref, call: at_first_difference(res, ref, lambda got, want: got["scheduled"][0] != want["scheduled"][0]),
        S2),
    "preemption_keeps_spare_block": (
        ([req(0, 0, 1, 3), req(1, 1, 1, 2)], cfg(2, 2, 2, 3, True)),
        lambda res, ref, call: res["preemptions"] > ref["preemptions"], S1),
    "preempts_oldest": (
        ([req(0, 0, 1, 3), req(1, 1, 1, 2), req(2, 0, 1, 3)], cfg(3, 3, 2, 3, False)),
        lambda res, ref, call: at_first_difference(res, ref, lambda got, want: got["preempted"] != want["preempted"] != []), S2),
    "recompute_chunk_drops_generated": (
        ([req(0, 0, 1, 2), req(1, 0, 1, 2)], cfg(2, 2, 1, 2, False)),
        lambda res, ref, call: admitted_less(res, ref), S1),
    "recompute_not_counted": (
        ([req(0, 1, 2, 1), req(1, 0, 1, 3)], cfg(2, 2, 2, 2, True)),
        lambda res, ref, call: ledger_broken(res, call), S1),
    "resumed_not_counted_against_max_seqs": (
        ([req(0, 0, 4, 2), req(1, 1, 1, 1), req(2, 0, 1, 2), req(3, 0, 1, 1)], cfg(2, 5, 2, 3, False)),
        lambda res, ref, call: max_running(res) > call[1]["max_seqs"] >= max_running(ref), S2),
    "skips_head_that_does_not_fit": (
        ([req(0, 1, 2, 1), req(1, 1, 1, 1), req(2, 0, 1, 2)], cfg(2, 3, 1, 3, False)),
        lambda res, ref, call: at_first_difference(res, ref, lambda got, want: [i for i, _ in got["scheduled"]] == [2, 1]), S1),
    "speculative_double_schedule": (
        ([req(0, 0, 1, 2)], cfg(1, 2, 2, 1, False)),
        lambda res, ref, call: any(len({i for i, _ in e["scheduled"]}) < len(e["scheduled"]) for e in res["trace"]), S1),
    "spins_when_head_does_not_fit": (
        ([req(0, 0, 2, 2), req(1, 0, 1, 1)], cfg(2, 2, 2, 2, True)), "hangs", S1),
    "utilization_over_max_seqs": (
        ([req(0, 0, 1, 1)], cfg(1, 2, 1, 1, False)),
        lambda res, ref, call: res["token_utilization"] != res["computed_tokens"] / (2 * res["makespan_ticks"]),
        ([req(0, 0, 1, 1)], cfg(2, 2, 1, 1, False))),
    "waiting_abort_ignored": (
        ([req(0, 0, 1, 1, abort=0)], cfg(1, 1, 1, 1, False)),
        lambda res, ref, call: served_at_or_after_abort(res, call), S1),
    # the corner corpus (issue 21): each bug shows only on calls that reach its CORNER (tests/test_coverage.py)
    "admits_one_past_max_seqs": (
        ([req(0, 0, 3, 2), req(1, 0, 1, 1)], cfg(1, 32, 2, 18, False)),
        lambda res, ref, call: max_running(res) > call[1]["max_seqs"], S1),
    "overshoots_budget_with_1_running": (
        ([req(0, 0, 3, 1)], cfg(2, 1, 2, 24, True)), lambda res, ref, call: over_budget(res, call), S1),
    "overshoots_budget_with_2_running": (
        ([req(0, 0, 1, 4), req(1, 2, 4, 1)], cfg(4, 2, 3, 57, True)), lambda res, ref, call: over_budget(res, call), S1),
    "overshoots_budget_with_3_running": (
        ([req(0, 0, 1, 4), req(1, 1, 1, 7), req(2, 2, 4, 2)], cfg(5, 3, 2, 70, True)),
        lambda res, ref, call: over_budget(res, call), S1),
    "overshoots_budget_with_4_running": (
        ([req(0, 1, 1, 5), req(1, 1, 2, 4), req(2, 1, 2, 6), req(3, 2, 4, 1)], cfg(6, 4, 4, 91, True)),
        lambda res, ref, call: over_budget(res, call), S1),
    "overshoots_budget_with_5_running": (
        ([req(0, 0, 1, 8), req(1, 0, 2, 4), req(2, 1, 1, 4), req(3, 1, 2, 4), req(4, 2, 7, 2)], cfg(5, 5, 4, 101, True)),
        lambda res, ref, call: over_budget(res, call), S1),
    "overshoots_budget_with_6_running": (
        ([req(0, 0, 1, 4), req(1, 1, 2, 5), req(2, 1, 1, 6), req(3, 1, 1, 4), req(4, 1, 1, 5), req(5, 2, 10, 2)],
         cfg(8, 6, 3, 125, True)),
        lambda res, ref, call: over_budget(res, call), S1),
    "overshoots_budget_with_7_running": (
        ([req(0, 0, 1, 5), req(1, 0, 1, 4), req(2, 0, 2, 4), req(3, 1, 1, 7), req(4, 1, 3, 5), req(5, 1, 1, 4),
          req(6, 2, 13, 2)], cfg(7, 7, 1, 155, True)),
        lambda res, ref, call: over_budget(res, call), S1),
    "overshoots_budget_with_8_running": (
        ([req(0, 0, 1, 5), req(1, 0, 2, 5), req(2, 0, 1, 4), req(3, 0, 2, 4), req(4, 1, 1, 4), req(5, 1, 1, 4),
          req(6, 1, 1, 4), req(7, 2, 9, 3)], cfg(8, 8, 2, 180, True)),
        lambda res, ref, call: over_budget(res, call), S1),
    "running_pass_budget_plus_one_from_4": (
        ([req(0, 0, 10, 4), req(1, 0, 3, 4), req(2, 0, 2, 5), req(3, 0, 9, 5), req(4, 0, 8, 3)], cfg(8, 8, 3, 14, True)),
        lambda res, ref, call: over_budget(res, call), S1),
    "partial_first_chunk_refused": (
        ([req(0, 0, 1, 3), req(1, 1, 2, 1)], cfg(5, 2, 2, 60, True)), lambda res, ref, call: admitted_less(res, ref), S3),
    "admission_keeps_a_spare_block": (
        ([req(0, 0, 1, 1), req(1, 0, 1, 1)], cfg(4, 2**20, 4, 2, False)), lambda res, ref, call: admitted_less(res, ref), S1),
    "second_preemption_not_counted": (
        ([req(0, 0, 1, 13), req(1, 1, 2, 14)], cfg(5, 8, 2, 10, True)),
        lambda res, ref, call: res["preemptions"] < ref["preemptions"], S2),
    "admission_counts_waiting_preempted": (
        ([req(0, 1, 3, 10), req(1, 2, 3, 14)], cfg(2, 8, 2, 10, True)), lambda res, ref, call: admitted_less(res, ref), S1),
    "unstarted_abort_ignored": (
        ([req(0, 1, 1, 5, abort=1)], cfg(64, 5, 1, 9, False)), lambda res, ref, call: served_at_or_after_abort(res, call), S3),
    "preempted_abort_ignored": (
        ([req(0, 2, 2, 3), req(1, 2, 3, 3, abort=5)], cfg(5, 8, 2, 3, False)),
        lambda res, ref, call: served_at_or_after_abort(res, call), S3),
    "abort_at_finish_tick_applied": (
        ([req(0, 4, 1, 1, abort=5), req(1, 4, 2, 5)], cfg(3, 2**20, 2, 32, True)),
        lambda res, ref, call: any(r["finish"] is not None and r["aborted"] is not None for r in res["requests"]), S3),
    "rejects_request_needing_whole_pool": (([req(0, 0, 1, 1)], cfg(1, 1, 1, 1, True)), "rejects", S1),
    "budget_left_after_idle": (
        ([req(0, 0, 1, 1), req(1, 2, 1, 1, abort=3)], cfg(2, 1, 1, 13, False)),
        lambda res, ref, call: admitted_less(res, ref), S1),
    "idle_jump_in_32_bits": (
        ([req(0, 2**64, 1, 1)], cfg(8, 1, 3, 8, False)), lambda res, ref, call: scheduled_before_arrival(res, call), S3),
    "int32_max_as_no_arrival": (
        ([req(0, 2**31 - 1, 1, 1)], cfg(1, 1, 3, 30, False)), lambda res, ref, call: unfinished(res), S3),
    "tick_counter_int32": (
        ([req(0, 2**31 - 1, 1, 2)], cfg(2, 1, 1, 30, True)),
        lambda res, ref, call: any(e["tick"] < 0 for e in res["trace"]), S3),
    "writes_finish_into_caller_requests": (
        ([req(0, 0, 1, 1)], cfg(1, 1, 1, 1, False)), "mutates", ([], cfg(1, 1, 1, 1, False))),
}


class Hung(Exception):
    pass


def call_with_limit(fn, call, seconds=1.0):
    """Calls ``fn`` on a private copy of ``call`` and raises Hung when it runs past ``seconds``."""

    def stop(signum, frame):
        raise Hung

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*copy.deepcopy(call))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def rejects_in_a_child(fn, call, seconds=2.0) -> bool:
    """Whether ``fn`` raises ValueError on ``call``, run in a forked child (an accepted call may then
    loop forever, growing its memory: the child is killed at ``seconds``, which counts as accepted)."""
    child = multiprocessing.get_context("fork").Process(target=_exit_with_verdict, args=(fn, call))
    child.start()
    child.join(seconds)
    if child.is_alive():
        child.kill()
        child.join()
        return False
    return child.exitcode == REJECTED


REJECTED = 3


def _exit_with_verdict(fn, call):
    try:
        fn(*copy.deepcopy(call))
    except ValueError:
        os._exit(REJECTED)
    os._exit(0)


def load(name):
    return importlib.import_module(f"tests.corpus.serving.buggy.{name}")


def test_every_buggy_file_has_a_case_and_the_corpus_is_big_enough():
    assert sorted(CASES) == FILES
    assert len(FILES) >= 30


@pytest.mark.parametrize("name", FILES)
def test_the_file_has_a_one_sentence_docstring_and_an_expected_invariant(name):
    text = (BUGGY / f"{name}.py").read_text()
    module = load(name)
    doc = module.__doc__
    assert doc and "\n" not in doc and doc.endswith(".") and doc.count(". ") == 0, doc
    assert re.search(r'^EXPECTED = "(\w+)"', text, re.M).group(1) == module.EXPECTED
    assert text.count("# BUG") >= 1


@pytest.mark.parametrize("name", FILES)
def test_the_bug_is_live(name):
    serve = load(name).serve
    call, symptom, _ = CASES[name]
    if symptom == "accepts":
        with pytest.raises(ValueError):
            base_serve(*copy.deepcopy(call))
        assert not rejects_in_a_child(serve, call)  # returns, or accepted and never returns: not rejected
        return
    if symptom == "rejects":
        base_serve(*copy.deepcopy(call))  # a valid call: the base returns
        with pytest.raises(ValueError):
            serve(*copy.deepcopy(call))
        return
    reference = base_serve(*copy.deepcopy(call))
    if symptom == "raises":
        with pytest.raises(Exception) as caught:
            serve(*copy.deepcopy(call))
        assert caught.type is not ValueError
        return
    if symptom == "hangs":
        with pytest.raises(Hung):
            call_with_limit(serve, call)
        return
    if symptom == "mutates":
        mine = copy.deepcopy(call)
        result = serve(*mine)
        assert mine != call and result == reference
        return
    if symptom == "nondeterministic":
        first = call_with_limit(serve, call)
        second = call_with_limit(serve, call)
        assert second != first
        assert without_blocks(first) == without_blocks(second) == without_blocks(reference)
        return
    assert not symptom(reference, reference, call)  # the symptom is the bug's, not the input's
    result = call_with_limit(serve, call)
    assert result != reference
    assert symptom(result, reference, call), json.dumps(result["trace"])


@pytest.mark.parametrize("name", FILES)
def test_the_bug_is_invisible_where_it_cannot_show(name):
    serve = load(name).serve
    _, _, quiet = CASES[name]
    assert call_with_limit(serve, quiet) == base_serve(*copy.deepcopy(quiet))


def test_the_base_handles_a_huge_pool_and_huge_ticks_without_enumerating_them():
    huge = 10**18
    result = call_with_limit(base_serve, ([req(0, huge, 1, 2, abort=huge + 1)], cfg(1, 2, huge, huge, False)))
    assert result["trace"][0]["tick"] == huge and result["trace"][0]["allocated"] == [[0, [0]]]
    assert result["requests"][0]["aborted"] == huge + 1 and result["makespan_ticks"] == huge + 1
