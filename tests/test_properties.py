"""Properties of the spec and of impl over the whole domain (Hypothesis)."""

import copy
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import impl
from proofs.models.chapter import ChapterModel
import spec
from proofs.search.strategies import valid_calls
from proofs.targets import load_callable, parse_target

CORRECT = pathlib.Path(__file__).parent / "corpus" / "correct"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


INDEPENDENT = [
    load_callable(parse_target(f"{path}:schedule")) for path in sorted(CORRECT.glob("*.py")) if path.stem != "__init__"
]


@FAST
@given(valid_calls())
def test_every_state_of_every_reference_run_keeps_every_state_invariant(call):
    state = spec.initial(*call)
    assert spec.broken_state_invariants(state) == []
    while not spec.is_terminal(state):
        before = spec.remaining_work(state)
        state = spec.step(state)
        assert spec.broken_state_invariants(state) == [], state
        assert spec.remaining_work(state) < before  # the ranking function decreases


@FAST
@given(valid_calls())
def test_the_reference_run_is_the_fold_of_step(call):
    assert spec.run(*call) == spec.run_by_steps(*call)


CHAPTER = ChapterModel()


@FAST
@given(valid_calls())
def test_impl_agrees_with_the_reference_and_three_independent_schedulers(call):
    result = impl.schedule(*call)
    assert spec.check(*call, result) == []
    for schedule in INDEPENDENT:  # extra keys are allowed (one correct scheduler reports its policy): never compared
        assert CHAPTER.contract_part(schedule(*call)) == result


def assert_leaves_input_unchanged_and_is_deterministic(schedule, call):
    """``schedule`` leaves the caller's container, its job objects and their fields as they were, and repeats itself."""
    jobs = call[0]
    container, members = type(jobs), [id(job) for job in jobs]
    snapshot = copy.deepcopy(list(jobs))
    first = schedule(*call)
    assert type(jobs) is container and [id(job) for job in jobs] == members, "the jobs container was reordered or replaced"
    assert list(jobs) == snapshot, "a job was modified"
    assert schedule(*call) == first, "a second call gave another result"


@FAST
@given(valid_calls())
def test_impl_leaves_the_input_unchanged_and_is_deterministic(call):
    assert_leaves_input_unchanged_and_is_deterministic(impl.schedule, call)


def test_the_input_check_catches_a_scheduler_that_touches_its_input():
    sorts = load_callable(parse_target(f"{CORRECT.parent / 'buggy' / 'sorts_caller_list.py'}:schedule"))
    late_first = ([{"id": 1, "arrival": 5, "tokens": 1}, {"id": 0, "arrival": 0, "tokens": 2}], 1, True)
    with pytest.raises(AssertionError, match="reordered"):
        assert_leaves_input_unchanged_and_is_deterministic(sorts, copy.deepcopy(late_first))

    def bumps_tokens(jobs, slots, continuous):
        result = impl.schedule(jobs, slots, continuous)
        jobs[0]["tokens"] += 0
        jobs[0]["extra"] = True
        return result

    with pytest.raises(AssertionError, match="modified"):
        assert_leaves_input_unchanged_and_is_deterministic(bumps_tokens, copy.deepcopy(late_first))
