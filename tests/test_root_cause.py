"""Root cause first (issue 21): a counterexample names the rule that breaks first in the replay of its trace.

When a result breaks several rules, both oracles list them in the order they break
(by tick, registry order breaking ties), the judge keeps that order, and the search
locks onto and minimises towards the first.  A hang shows no trace: while it is
minimised, a smaller call whose result breaks a rule shows what the hang hid, and
that rule is minimised towards instead.  An invalid call that hangs or dies was
accepted: it breaks ``validation``, not ``termination``.  Two one-bug schedulers of
the serving corpus showed the later symptom before (``termination`` with 2 requests):
an abort that leaks its blocks and a request larger than the pool that is accepted.
"""

import copy
import pathlib
import time

import spec
import spec.serving
from proofs import models
from proofs.sandbox import DIED, RETURNED, TIMED_OUT, Outcome, TargetProcess
from proofs.search.engine import Search
from proofs.search.judge import judge_invalid_call, judge_valid_call
from proofs.targets import parse_target
from proofs.trace.check import _first as trace_first
from spec.registry import Invariant, Violation, root_cause_first

SERVING_BUGGY = pathlib.Path(__file__).parent / "corpus" / "serving" / "buggy"

# the abort leaks request 0's block at tick 1; the engine then gives up on request 1, which never finishes
LEAK_CALL = (
    [{"id": 0, "arrival": 0, "prompt": 1, "output": 3, "abort": 1}, {"id": 1, "arrival": 0, "prompt": 1, "output": 4}],
    {"max_seqs": 2, "token_budget": 2, "block_size": 1, "num_blocks": 6, "chunked_prefill": True},
)


def _leak_then_starve() -> dict:
    """The reference result of LEAK_CALL, but the abort's block is never given back and the run stops after tick 2."""
    result = copy.deepcopy(spec.serving.run(*LEAK_CALL))
    result["trace"][1]["freed"] = []
    result["trace"][1]["allocated"] = [[1, [2]]]
    result["trace"][2]["allocated"] = [[1, [3]]]
    del result["trace"][3]
    result["requests"][1].update(finish=None, generated=3, computed=3)
    result.update(makespan_ticks=3, computed_tokens=4, useful_tokens=0)
    return result


def test_root_cause_first_orders_by_family_then_tick_then_the_end_then_registry_order():
    registry = [Invariant(name, family, "", None, None) for name, family in
                (("a", "safety"), ("b", "safety"), ("c", "safety"), ("p", "policy"), ("m", "metrics"))]
    found = [Violation("m", "", tick=0), Violation("p", "", tick=1), Violation("a", "", tick=None),
             Violation("c", "", tick=5), Violation("b", "", tick=5), Violation("a", "", tick=7)]
    assert [(v.invariant, v.tick) for v in root_cause_first(found, registry)] == [
        ("b", 5), ("c", 5), ("a", 7), ("a", None), ("p", 1), ("m", 0)]
    # found only at the end of the trace (a request never finished, a record): after those found during it
    assert [v.invariant for v in root_cause_first(found[:5], registry, late={"b"})] == ["c", "a", "b", "p", "m"]


def test_the_caching_rows_break_ties_as_issue_20_orders_them():
    """At one tick, the sharing claims right after kv_capacity (before kv_exact), the cache's policy rows first among
    the policy's; an earlier tick still comes first within a family, and the safety family before the policy."""
    at_once = ["running_first", "fcfs_admission", "lru_eviction", "longest_prefix_hit",
               "kv_exact", "refcount_exact", "no_false_sharing", "kv_capacity"]
    found = [Violation(name, "", tick=4) for name in at_once]
    assert [v.invariant for v in root_cause_first(found, spec.serving.INVARIANTS)] == [
        "kv_capacity", "no_false_sharing", "refcount_exact", "kv_exact",
        "longest_prefix_hit", "lru_eviction", "fcfs_admission", "running_first"]
    found = [Violation("lru_eviction", "", tick=1), Violation("kv_exact", "", tick=3), Violation("refcount_exact", "", tick=2)]
    assert [v.invariant for v in root_cause_first(found, spec.serving.INVARIANTS)] == [
        "refcount_exact", "kv_exact", "lru_eviction"]


def test_the_serving_oracle_reports_a_leak_before_the_starvation_it_causes():
    found = spec.serving.check(*LEAK_CALL, _leak_then_starve())
    names = [v.invariant for v in found]
    # every_job_completes_once comes before kv_exact in the registry, but breaks later (tick 2, the end)
    assert names.index("every_job_completes_once") > 0 and names.index("kv_exact") == 0, found
    assert (found[0].tick, found[0].ids) == (1, (0,))
    assert names[-1] == "matches_reference"  # outside the replay: after all it found


def test_the_chapter_oracle_reports_the_earliest_break_first():
    jobs = [{"id": 0, "arrival": 0, "tokens": 1}, {"id": 1, "arrival": 0, "tokens": 2}]
    result = {  # job 0 is served again at tick 1, then beside job 1 in the one slot at tick 2
        "trace": [{"tick": 0, "served": [0]}, {"tick": 1, "served": [0]}, {"tick": 2, "served": [1, 0]},
                  {"tick": 3, "served": [1]}],
        "completed": [{"id": 0, "arrival": 0, "tokens": 1, "start": 0, "finish": 1, "wait": 0, "turnaround": 1},
                      {"id": 1, "arrival": 0, "tokens": 2, "start": 2, "finish": 4, "wait": 2, "turnaround": 4}],
        "makespan_ticks": 4, "busy_slots": 5, "utilization": 1.25,
    }
    found = [(v.invariant, v.tick) for v in spec.check(jobs, 1, True, result)]
    # slot_bound comes before nonnegative_remaining in the registry, but breaks later; the safety family
    # before the policy's fifo_order (tick 2) and the record (judged at the end), the reference last
    assert found == [("nonnegative_remaining", 1), ("slot_bound", 2), ("termination", 3), ("work_conservation", 3),
                     ("fifo_order", 2), ("metrics_consistent", 0), ("matches_reference", 1)]


def test_the_judge_keeps_the_oracles_order_and_the_trace_checker_agrees():
    result = _leak_then_starve()
    findings = judge_valid_call(Outcome(RETURNED, result=result), *LEAK_CALL, model=models.get("serving"))
    assert findings[0].invariant == "kv_exact"
    replay = spec.serving.result_checks.Replay(*spec.serving.validate(*LEAK_CALL))
    for entry in spec.serving.observation.observe(*spec.serving.validate(*LEAK_CALL), result, "fcfs").trace:
        replay.tick(entry)
        if replay.found:  # the trace checker stops at the first entry during which something breaks
            break
    assert trace_first(replay.found, spec.serving.INVARIANTS)[0].invariant == "kv_exact"


def test_an_invalid_call_that_hangs_or_dies_breaks_validation():
    for kind, error in ((TIMED_OUT, "did not return within 1 s"), (DIED, "the target's process died (signal 9)")):
        (finding,) = judge_invalid_call(Outcome(kind, error=error), "peak KV need exceeds the pool")
        assert finding.invariant == "validation"
        assert "was accepted" in finding.message and error in finding.message


def test_a_hang_is_minimised_towards_the_leak_that_causes_it():
    """abort_leaks_blocks hangs on two requests (the leaked block starves request 1); one request shows the leak."""
    model = models.get("serving")
    hanging = (
        [{"id": 0, "arrival": 0, "prompt": 1, "output": 2, "abort": 1}, {"id": 1, "arrival": 0, "prompt": 9, "output": 7}],
        {"max_seqs": 1, "token_budget": 1, "block_size": 2, "num_blocks": 8, "chunked_prefill": True},
    )
    target = parse_target(f"{SERVING_BUGGY / 'abort_leaks_blocks.py'}:serve")
    with TargetProcess(target, call_seconds=1.0, shape=model.shape) as process:
        search = Search(process, time.monotonic() + 120, model=model)
        assert [f.invariant for f in search._valid(hanging)] == ["termination"]  # what the search met first
        small, finding = search._minimize_valid(hanging, "termination")
    assert finding is not None and finding.invariant == "kv_exact", finding
    (request,) = small[0]
    assert finding.violation.tick == request["abort"] and finding.violation.ids == (request["id"],)


def test_a_request_larger_than_the_pool_that_is_accepted_is_validation():
    model = models.get("serving")
    target = parse_target(f"{SERVING_BUGGY / 'accepts_request_larger_than_pool.py'}:serve")
    with TargetProcess(target, call_seconds=1.0, shape=model.shape) as process:
        search = Search(process, time.monotonic() + 120, model=model)
        (found,) = search.run(only=("validation",))
    cex = found.counterexample
    assert (cex.property, cex.check) == ("validation", "validation"), cex
    assert not spec.serving.is_valid(*cex.call) and len(cex.call[0]) == 1
    assert "was accepted" in cex.message
