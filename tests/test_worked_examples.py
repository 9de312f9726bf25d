"""The chapter's worked examples and boundary cases, for the reference run and our impl alike."""

import pytest

import impl
import spec
from tests.conftest import jobs_of

SCHEDULERS = {"spec.run": spec.run, "impl.schedule": impl.schedule}


@pytest.fixture(params=sorted(SCHEDULERS))
def schedule(request):
    return SCHEDULERS[request.param]


def served_per_tick(result):
    return [entry["served"] for entry in result["trace"]]


def test_example1_static(schedule, example1):
    result = schedule(example1, 2, False)
    assert result["makespan_ticks"] == 7
    assert result["busy_slots"] == 10
    assert result["utilization"] == 10 / 14
    assert [job["finish"] for job in result["completed"]] == [1, 4, 6, 7]
    assert served_per_tick(result) == [[0, 1], [1], [1], [1], [2, 3], [2, 3], [3]]


def test_example1_continuous(schedule, example1):
    result = schedule(example1, 2, True)
    assert result["makespan_ticks"] == 6
    assert result["busy_slots"] == 10
    assert result["utilization"] == 10 / 12
    assert [job["finish"] for job in result["completed"]] == [1, 4, 3, 6]
    assert [job["wait"] for job in result["completed"]] == [0, 0, 1, 3]
    assert served_per_tick(result) == [[0, 1], [1, 2], [1, 2], [1, 3], [3], [3]]
    assert [entry["tick"] for entry in result["trace"]] == [0, 1, 2, 3, 4, 5]


def test_example1_hand_written_ledger(schedule, example1):
    """The chapter's independent event ledger for the continuous case."""
    running = [[0, 1], [1, 2], [1, 2], [1, 3], [3], [3]]
    assert served_per_tick(schedule(example1, 2, True)) == running
    work = sum(len(row) for row in running)
    counts = {job["id"]: sum(job["id"] in row for row in running) for job in example1}
    assert work == 10
    assert counts == {job["id"]: job["tokens"] for job in example1}
    assert max(map(len, running)) == 2
    assert work / (2 * len(running)) == 10 / 12


def test_example2_late_arrival_keeps_initial_idleness(schedule):
    jobs = jobs_of([4, 4], arrival=3)
    static, continuous = schedule(jobs, 2, False), schedule(jobs, 2, True)
    assert static == continuous
    assert [job["finish"] for job in static["completed"]] == [7, 7]
    assert static["makespan_ticks"] == 7
    assert static["utilization"] == 8 / 14


def test_single_request(schedule):
    result = schedule([{"id": 7, "arrival": 2, "tokens": 3}], 1, True)
    assert result["completed"] == [
        {"id": 7, "arrival": 2, "tokens": 3, "start": 2, "finish": 5, "wait": 0, "turnaround": 3}
    ]
    assert result["makespan_ticks"] == 5
    assert result["utilization"] == 3 / 5


def test_no_jobs(schedule):
    for continuous in (False, True):
        result = schedule([], 3, continuous)
        assert result == {"makespan_ticks": 0, "busy_slots": 0, "utilization": 0.0, "completed": [], "trace": []}


def test_more_slots_than_jobs_means_no_wait_under_continuous(schedule):
    jobs = [{"id": i, "arrival": a, "tokens": t} for i, (a, t) in enumerate([(0, 5), (1, 1), (1, 3), (4, 2)])]
    result = schedule(jobs, 5, True)
    assert [job["wait"] for job in result["completed"]] == [0, 0, 0, 0]


def test_equal_jobs_arriving_together_make_policies_equal(schedule):
    jobs = jobs_of([3, 3, 3, 3, 3], arrival=2)
    assert schedule(jobs, 2, False) == schedule(jobs, 2, True)


def test_one_slot_makes_policies_equal(schedule, example1):
    assert schedule(example1, 1, False) == schedule(example1, 1, True)


def test_arrival_exactly_at_a_tick_boundary_is_admitted_that_tick(schedule):
    """Job 1 arrives at tick 2, exactly when job 0's slot frees: it starts at 2, not 3."""
    jobs = [{"id": 0, "arrival": 0, "tokens": 2}, {"id": 1, "arrival": 2, "tokens": 1}]
    result = schedule(jobs, 1, True)
    assert result["completed"][1]["start"] == 2
    assert served_per_tick(result) == [[0], [0], [1]]


def test_late_arrival_after_idle_gap(schedule):
    jobs = [{"id": 0, "arrival": 0, "tokens": 1}, {"id": 1, "arrival": 10, "tokens": 2}]
    result = schedule(jobs, 2, False)
    assert [entry["tick"] for entry in result["trace"]] == [0, 10, 11]
    assert result["makespan_ticks"] == 12
    assert result["utilization"] == 3 / 24


def test_huge_arrivals_jump_instead_of_ticking(schedule):
    late = 2**70
    jobs = [{"id": -(2**65), "arrival": late, "tokens": 2}, {"id": 3, "arrival": late + 1, "tokens": 1}]
    result = schedule(jobs, 1, True)
    assert [entry["tick"] for entry in result["trace"]] == [late, late + 1, late + 2]
    assert result["makespan_ticks"] == late + 3


def test_every_start_is_at_or_after_arrival(schedule):
    jobs = [{"id": i, "arrival": (i * 7) % 5, "tokens": 1 + i % 3} for i in range(9)]
    for continuous in (False, True):
        for job in schedule(jobs, 2, continuous)["completed"]:
            assert job["start"] >= job["arrival"]


def test_fifo_ties_break_by_id_not_by_input_order_or_length(schedule):
    jobs = [{"id": 5, "arrival": 0, "tokens": 1}, {"id": 2, "arrival": 0, "tokens": 9}]
    result = schedule(jobs, 1, True)
    assert served_per_tick(result)[0] == [2]
