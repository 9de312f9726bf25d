"""The online, iteration-level API: submit, step, and read the state between ticks."""

import pytest

from impl import Scheduler


def test_step_by_step_matches_worked_example_1():
    engine = Scheduler(2, True)
    for i, tokens in enumerate([1, 4, 2, 3]):
        engine.submit({"id": i, "arrival": 0, "tokens": tokens})
    served = []
    while not engine.idle:
        served.append(engine.step())
    assert served == [[0, 1], [1, 2], [1, 2], [1, 3], [3], [3]]
    assert engine.clock == 6
    assert [(job.id, job.finish) for job in engine.completed] == [(0, 1), (2, 3), (1, 4), (3, 6)]


def test_reads_clock_active_and_waiting_between_ticks():
    engine = Scheduler(1, False)
    engine.submit({"id": 1, "arrival": 0, "tokens": 2})
    engine.submit({"id": 0, "arrival": 0, "tokens": 1})
    assert engine.waiting == [(0, 0, 1), (1, 0, 2)]
    assert engine.step() == [0]
    assert engine.clock == 1
    assert engine.step() == [1]
    assert [(job.id, job.remaining) for job in engine.active] == [(1, 1)]
    assert engine.waiting == []


def test_submit_rejects_retroactive_arrival():
    engine = Scheduler(1, True)
    engine.submit({"id": 0, "arrival": 0, "tokens": 1})
    engine.step()
    engine.submit({"id": 1, "arrival": 1, "tokens": 1})  # arriving exactly at the clock is fine
    with pytest.raises(ValueError, match=r"job.arrival=0: expected an int >= the clock 1"):
        engine.submit({"id": 2, "arrival": 0, "tokens": 1})


def test_submit_validates_like_schedule():
    engine = Scheduler(1, True)
    with pytest.raises(ValueError, match=r"job.tokens=1.5: expected an int >= 1"):
        engine.submit({"id": 0, "arrival": 0, "tokens": 1.5})
    engine.submit({"id": 0, "arrival": 0, "tokens": 1})
    with pytest.raises(ValueError, match=r"job.id=0: ids must be unique"):
        engine.submit({"id": 0, "arrival": 3, "tokens": 1})


def test_idle_engine_jumps_to_next_arrival_and_empty_step_keeps_clock():
    engine = Scheduler(2, True)
    assert engine.step() == []
    assert engine.clock == 0
    engine.submit({"id": 0, "arrival": 10**20, "tokens": 1})
    assert engine.step() == [0]
    assert engine.clock == 10**20 + 1


@pytest.mark.parametrize("slots, continuous", [(0, True), (1, 1)])
def test_constructor_validates(slots, continuous):
    with pytest.raises(ValueError):
        Scheduler(slots, continuous)
