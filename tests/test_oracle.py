"""``spec.check`` is silent on correct results and names the right invariant on broken ones."""

import copy

import pytest

import impl
import spec
from spec.oracle import first_difference
from tests.conftest import jobs_of

EXAMPLE1 = jobs_of([1, 4, 2, 3])


def completed(*rows):
    """completed entries from (id, arrival, tokens, start, finish) rows."""
    return [
        {"id": i, "arrival": a, "tokens": g, "start": s, "finish": f, "wait": s - a, "turnaround": f - a}
        for i, a, g, s, f in rows
    ]


def result(trace, rows, slots):
    makespan = max((row[4] for row in rows), default=0)
    busy = sum(len(served) for _, served in trace)
    return {
        "makespan_ticks": makespan,
        "busy_slots": busy,
        "utilization": busy / (slots * makespan) if makespan else 0.0,
        "completed": completed(*rows),
        "trace": [{"tick": t, "served": served} for t, served in trace],
    }


def broken(continuous, mutate):
    good = copy.deepcopy(impl.schedule(EXAMPLE1, 2, continuous))
    mutate(good)
    return good


def set_trace(index, served):
    def mutate(res):
        res["trace"][index]["served"] = served

    return mutate


CASES = {
    "well_typed: None": ("well_typed", EXAMPLE1, 2, True, None),
    "well_typed: str utilization": ("well_typed", EXAMPLE1, 2, True, broken(True, lambda r: r.update(utilization="0.8"))),
    "well_typed: float finish": ("well_typed", EXAMPLE1, 2, True, broken(True, lambda r: r["completed"][0].update(finish=1.0))),
    "well_typed: missing trace": ("well_typed", EXAMPLE1, 2, True, broken(True, lambda r: r.pop("trace"))),
    "no_duplicate_active": ("no_duplicate_active", EXAMPLE1, 2, True, broken(True, set_trace(4, [3, 3]))),
    "no_start_before_arrival": (
        "no_start_before_arrival",
        [{"id": 0, "arrival": 2, "tokens": 1}],
        1,
        True,
        result([(1, [0])], [(0, 2, 1, 1, 2)], 1),
    ),
    "slot_bound": ("slot_bound", EXAMPLE1, 1, True, impl.schedule(EXAMPLE1, 2, True)),
    "nonnegative_remaining": ("nonnegative_remaining", EXAMPLE1, 2, True, broken(True, set_trace(1, [0, 1]))),
    "work_conservation": ("work_conservation", EXAMPLE1, 2, True, broken(True, lambda r: r["trace"].pop())),
    "every_job_completes_once": (
        "every_job_completes_once", EXAMPLE1, 2, True, broken(True, lambda r: r["completed"].pop(2))
    ),
    "termination": (  # the trace is right, but the run claims to end past max(arrival) + sum(tokens)
        "termination",
        [{"id": 0, "arrival": 0, "tokens": 1}],
        1,
        True,
        dict(result([(0, [0])], [(0, 0, 1, 0, 1)], 1), makespan_ticks=2, utilization=0.5),
    ),
    "fifo_order: shortest first": (
        "fifo_order",
        [{"id": 0, "arrival": 0, "tokens": 3}, {"id": 1, "arrival": 0, "tokens": 1}],
        1,
        True,
        result([(0, [1]), (1, [0]), (2, [0]), (3, [0])], [(0, 0, 3, 1, 4), (1, 0, 1, 0, 1)], 1),
    ),
    "fifo_order: served list order": ("fifo_order", EXAMPLE1, 2, True, broken(True, set_trace(1, [2, 1]))),
    "no_preemption": (
        "no_preemption",
        [{"id": 0, "arrival": 0, "tokens": 2}, {"id": 1, "arrival": 0, "tokens": 1}],
        1,
        True,
        result([(0, [0]), (1, [1]), (2, [0])], [(0, 0, 2, 0, 3), (1, 0, 1, 1, 2)], 1),
    ),
    "continuous_backfills": ("continuous_backfills", EXAMPLE1, 2, True, impl.schedule(EXAMPLE1, 2, False)),
    "continuous_backfills: late by one tick": (
        "continuous_backfills",
        [{"id": 0, "arrival": 0, "tokens": 2}, {"id": 1, "arrival": 2, "tokens": 1}],
        1,
        True,
        result([(0, [0]), (1, [0]), (3, [1])], [(0, 0, 2, 0, 2), (1, 2, 1, 3, 4)], 1),
    ),
    "static_batch_boundary: joins a running batch": (
        "static_batch_boundary", EXAMPLE1, 2, False, impl.schedule(EXAMPLE1, 2, True)
    ),
    "static_batch_boundary: half-empty batch": (
        "static_batch_boundary",
        jobs_of([2, 2]),
        2,
        False,
        result([(0, [0]), (1, [0]), (2, [1]), (3, [1])], [(0, 0, 2, 0, 2), (1, 0, 2, 2, 4)], 2),
    ),
    "metrics_consistent: utilization": (
        "metrics_consistent", EXAMPLE1, 2, True, broken(True, lambda r: r.update(utilization=0.5))
    ),
    "metrics_consistent: makespan": (
        "metrics_consistent", EXAMPLE1, 2, False, broken(False, lambda r: r.update(makespan_ticks=8))
    ),
    "metrics_consistent: wait": (
        "metrics_consistent", EXAMPLE1, 2, True, broken(True, lambda r: r["completed"][3].update(wait=0))
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_names_the_broken_invariant_first(case):
    name, jobs, slots, continuous, res = CASES[case]
    violations = spec.check(jobs, slots, continuous, res)
    assert violations, f"{case}: no violation reported"
    assert violations[0].invariant == name, violations


def test_check_lists_the_root_cause_first():
    """Family by family (safety before policy); within one, the order they break in the replay: during the trace
    by tick, then what only its end shows; the reference's difference last (tests/test_root_cause.py has more)."""
    jobs = [{"id": 0, "arrival": 0, "tokens": 1}]
    found = [(v.invariant, v.tick) for v in spec.check(jobs, 1, True, result([(5, [0])], [(0, 0, 1, 5, 6)], 1))]
    assert found == [("termination", 5), ("continuous_backfills", 0), ("matches_reference", 0)]
    name, jobs, slots, continuous, res = CASES["nonnegative_remaining"]  # tick 1 serves job 0 twice; its record is right
    found = [v.invariant for v in spec.check(jobs, slots, continuous, res)]
    assert found[0] == "nonnegative_remaining" and found[-1] == "matches_reference"


@pytest.mark.parametrize("continuous", [False, True])
def test_check_is_silent_on_the_reference(continuous):
    assert spec.check(EXAMPLE1, 2, continuous, spec.run(EXAMPLE1, 2, continuous)) == []


def test_every_result_invariant_has_a_broken_case():
    covered = {name for name, *_ in CASES.values()}
    with_result_check = {inv.name for inv in spec.INVARIANTS if inv.check_result is not None}
    assert with_result_check - covered == set()


@pytest.mark.parametrize(
    "garbage",
    [
        [],
        "result",
        {"makespan_ticks": 1},
        {"makespan_ticks": 7, "busy_slots": 10, "utilization": 0.7, "completed": [None], "trace": []},
        {"makespan_ticks": 7, "busy_slots": 10, "utilization": 0.7, "completed": [], "trace": [{"tick": "0"}]},
        {"makespan_ticks": 7, "busy_slots": 10, "utilization": 0.7, "completed": [], "trace": [{"tick": 0, "served": None}]},
    ],
)
def test_malformed_results_are_violations_not_exceptions(garbage):
    violations = spec.check(EXAMPLE1, 2, True, garbage)
    assert [v.invariant for v in violations] == ["well_typed"]


def test_a_result_that_raises_when_read_is_a_violation():
    class Hostile(dict):
        def __contains__(self, key):
            raise RuntimeError("boom")

    violations = spec.check(EXAMPLE1, 2, True, Hostile())
    assert violations[0].invariant == "well_typed"
    assert "boom" in violations[0].message


def test_first_difference_names_the_first_tick_where_results_part():
    good = spec.run(EXAMPLE1, 2, True)
    other = copy.deepcopy(good)
    other["trace"][3]["served"] = [3, 1]
    found = first_difference(good, other)
    assert (found.invariant, found.tick) == ("matches_reference", 3)
    assert first_difference(good, copy.deepcopy(good)) is None


def test_nonsense_values_do_not_crash_the_checks():
    nonsense = result([(-(10**30), [0, 1, 2, 3, 99]), (2**80, [])], [(0, 0, 1, -5, 10**40)], 2)
    names = [v.invariant for v in spec.check(EXAMPLE1, 2, True, nonsense)]
    assert "slot_bound" in names and "every_job_completes_once" in names
