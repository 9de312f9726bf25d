"""Issue 20: a block two requests hold is freed by the last of them to release it in the tick's order.

When two holders of a shared block leave in one tick, the block's count reaches 0 by the
release of the one the tick's order reaches last (aborts by (arrival, id), victims as
preempted, finishers in running order), so that request's ``freed`` list gives it back
(docs/serving.md, "Freeing").  ``refcount_exact`` judges it, whatever the order of the
ids in ``finished`` (which carries no rule), in the oracle, the online shadow and the
blocks form's derivation."""

from __future__ import annotations

import copy
import importlib.util
import os

import impl
import spec.serving as serving
from proofs.online.driver import from_block_tables

HERE = os.path.dirname(os.path.abspath(__file__))
BUGGY = os.path.join(HERE, "corpus", "serving", "buggy", "cache_hit_on_held_block_not_counted.py")
CONFIG = {"max_seqs": 2, "token_budget": 8, "block_size": 2, "num_blocks": 8, "chunked_prefill": True,
          "prefix_caching": True}
# both finish in tick 1; request 1 hits blocks 0 and 1 of request 0 in tick 0, and comes after it in running order
SAME_TICK = [{"id": 0, "arrival": 0, "prompt": 5, "tokens": [1, 2, 3, 4, 5], "output": 2},
             {"id": 1, "arrival": 0, "prompt": 5, "tokens": [1, 2, 3, 4, 6], "output": 2}]


def _buggy():
    spec_ = importlib.util.spec_from_file_location("cache_hit_on_held_block_not_counted", BUGGY)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


def check(result, policy="none"):
    return [(v.invariant, v.message) for v in serving.check(copy.deepcopy(SAME_TICK), dict(CONFIG), result, policy=policy)]


def test_the_spec_frees_the_shared_blocks_under_the_last_finisher_in_running_order():
    result = serving.run(copy.deepcopy(SAME_TICK), dict(CONFIG))
    assert result["trace"][0]["hits"] == [[1, [0, 1]]]
    assert result["trace"][1]["finished"] == [0, 1]
    assert result["trace"][1]["freed"] == [[0, [2]], [1, [0, 1, 3]]]
    assert impl.serve(copy.deepcopy(SAME_TICK), dict(CONFIG)) == result
    assert check(result, "fcfs") == []


def test_the_order_of_finished_ids_carries_no_rule_but_the_lister_does():
    result = impl.serve(copy.deepcopy(SAME_TICK), dict(CONFIG))
    swapped = copy.deepcopy(result)
    swapped["trace"][1]["finished"] = [1, 0]  # a set: any order
    assert check(swapped) == []
    first = copy.deepcopy(result)  # the shared blocks under the first finisher: its release does not bring them to 0
    first["trace"][1]["freed"] = [[0, [0, 1, 2]], [1, [3]]]
    found = check(first)
    assert found and found[0][0] == "refcount_exact", found
    assert "frees block 0 for request 0 (finishes), but request 1 also holds it" in found[0][1]


def test_the_corpus_bug_is_caught_by_the_safety_row_when_both_holders_finish_in_one_tick():
    """cache_hit_on_held_block_not_counted: the hit takes no reference, so the first finisher's release frees the
    block; before this rule only matches_reference (fcfs) saw it on this call."""
    result = _buggy().serve(copy.deepcopy(SAME_TICK), dict(CONFIG))
    assert result["trace"][1]["freed"] == [[0, [0, 1, 2]], [1, [3]]]
    for policy in ("none", "fcfs"):
        assert check(result, policy)[0][0] == "refcount_exact"


def test_the_blocks_form_derives_the_lister_from_running_order_not_the_finished_list():
    held = {0: [0, 1, 2], 1: [0, 1, 3]}
    entry = {"scheduled": [[0, 1], [1, 1]], "preempted": [], "aborted": [], "finished": [1, 0],
             "blocks": {0: [0, 1, 2], 1: [0, 1, 3]}}
    derived = from_block_tables(entry, held, serving.Config(**CONFIG))
    assert derived["freed"] == [[0, [2]], [1, [0, 1, 3]]]


class _Scripted:
    """An online engine that answers each step with the next of ``entries`` (the lists form)."""

    def __init__(self, entries):
        self.entries = list(entries)

    def add_request(self, request):
        pass

    def abort(self, request_id):
        pass

    def step(self):
        return copy.deepcopy(self.entries.pop(0)) if self.entries else None


def test_the_online_shadow_judges_the_lister_too():
    from proofs.online.driver import drive

    entries = [{key: value for key, value in entry.items() if key != "tick"}
               for entry in impl.serve(copy.deepcopy(SAME_TICK), dict(CONFIG))["trace"]]
    entries[1]["finished"] = [1, 0]
    assert "stopped" not in drive(_Scripted(entries), copy.deepcopy(SAME_TICK), dict(CONFIG))
    entries[1]["freed"] = [[0, [0, 1, 2]], [1, [3]]]
    stopped = drive(_Scripted(entries), copy.deepcopy(SAME_TICK), dict(CONFIG))["stopped"]
    assert stopped["invariant"] == "refcount_exact" and stopped["tick"] == 1, stopped
