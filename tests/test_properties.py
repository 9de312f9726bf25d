"""Properties of the spec and of impl over the whole domain (Hypothesis)."""

import pathlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import impl
import spec
from proofs.search.relations import check_relations
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
def test_impl_agrees_with_the_reference_and_three_independent_schedulers(call):
    result = impl.schedule(*call)
    assert spec.check(*call, result) == []
    for schedule in INDEPENDENT:
        assert schedule(*call) == result


@FAST
@given(valid_calls())
def test_impl_leaves_the_input_unchanged_and_is_deterministic(call):
    jobs = call[0]
    snapshot = [dict(job) for job in jobs]
    first = impl.schedule(*call)
    assert [dict(job) for job in jobs] == snapshot and type(jobs) is type(call[0])
    assert impl.schedule(*call) == first


@FAST
@given(valid_calls(max_jobs=12), st.integers(1, 4))
def test_metamorphic_relations_hold_for_the_reference_and_impl(call, slots):
    jobs = list(call[0])
    assert check_relations(spec.run, jobs, slots) == []
    assert check_relations(impl.schedule, jobs, slots) == []


def test_relations_catch_schedulers_that_break_them():
    def always_static(jobs, slots, continuous):
        return impl.schedule(jobs, slots, False)

    def policies_swapped(jobs, slots, continuous):
        return impl.schedule(jobs, slots, not continuous)

    staggered = [{"id": 0, "arrival": 0, "tokens": 3}, {"id": 1, "arrival": 1, "tokens": 1}]
    assert [r.split(":")[0] for r in check_relations(always_static, staggered, 2)] == ["enough_slots_no_wait"]
    example1 = [{"id": i, "arrival": 0, "tokens": n} for i, n in enumerate([1, 4, 2, 3])]
    assert check_relations(policies_swapped, example1, 2)[0].startswith("continuous_never_starts_later: job 2")
