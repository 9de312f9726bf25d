"""The Z3 encoding against ``spec.step``: the proofs are about the model the harness runs.

For reachable states (a valid input run some steps with ``spec.step``) and for
arbitrary representable states, ``trans`` with the state's values plugged in has
exactly one successor, and it is ``spec.step``'s; every encoded predicate agrees
with the registry's Python predicate.
"""

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spec
from proofs.smt import model as M
from spec.invariants import BY_NAME

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def valid_calls(draw):
    n = draw(st.integers(0, 4))
    ids = draw(st.lists(st.integers(-3, 9), min_size=n, max_size=n, unique=True))
    jobs = [{"id": i, "arrival": draw(st.integers(0, 6)), "tokens": draw(st.integers(1, 4))} for i in ids]
    return jobs, draw(st.integers(1, 3)), draw(st.booleans())


def reachable_states(jobs, slots, continuous):
    state = spec.initial(jobs, slots, continuous)
    states = [state]
    while not spec.is_terminal(state):
        state = spec.step(state)
        states.append(state)
    return states


def successors(val, limit=2):
    """The successor valuations the encoding allows from ``val`` (at most ``limit``)."""
    M.reset_indicators()
    n = len(val["ids"])
    inp = M.make_inputs(n)
    s, t = M.make_vars(inp, "s"), M.make_vars(inp, "t")
    solver = z3.SimpleSolver()
    solver.add(M.pin(inp, s, val))
    solver.add(M.trans(inp, s, t))
    solver.add(M.indicator_defs())
    found = []
    while len(found) < limit and solver.check() == z3.sat:
        nxt = M.read_frame(solver.model(), inp, t)
        found.append(M.normalized(nxt))
        solver.add(z3.Not(z3.And(M.pin(inp, t, nxt, constants=False))))
    return found


def encoded_truth(val):
    """Each encoded predicate (and lemma) evaluated at a valuation."""
    M.reset_indicators()
    n = len(val["ids"])
    inp = M.make_inputs(n)
    s = M.make_vars(inp, "s")
    preds = {name: f(inp, s) for name, f in {**M.PREDICATES, **M.LEMMAS}.items()}
    solver = z3.SimpleSolver()
    solver.add(M.pin(inp, s, val))
    solver.add(M.indicator_defs())
    assert solver.check() == z3.sat, f"valuation {val!r} is not consistent with the indicator definitions"
    model = solver.model()
    return {name: z3.is_true(model.eval(p, model_completion=True)) for name, p in preds.items()}


def same_state(a, b):
    return a._replace(done=tuple(sorted(a.done))) == b._replace(done=tuple(sorted(b.done)))


@SETTINGS
@given(valid_calls())
def test_trans_is_spec_step_on_reachable_states(call):
    for state in reachable_states(*call)[:-1]:
        val = M.valuation_of_state(state)
        assert same_state(M.state_of_valuation(val), state), f"valuation does not round-trip: {state}"
        expected = M.normalized(M.valuation_of_state(spec.step(state)))
        found = successors(val)
        assert found == [expected], f"state {state}: encoding gives {found}, spec.step gives {expected}"


@SETTINGS
@given(valid_calls())
def test_terminal_states_have_no_successor(call):
    final = reachable_states(*call)[-1]
    assert successors(M.valuation_of_state(final)) == []


@SETTINGS
@given(valid_calls())
def test_predicates_agree_with_the_registry_on_reachable_states(call):
    for state in reachable_states(*call):
        truth = encoded_truth(M.valuation_of_state(state))
        for name in M.PREDICATES:
            assert truth[name] == BY_NAME[name].holds(state), f"{name} on {state}"
        assert all(truth[name] for name in M.LEMMAS), f"a lemma fails on reachable {state}: {truth}"


@st.composite
def arbitrary_valuations(draw):
    """Any representable state: sorted distinct jobs, admitted prefix, arbitrary per-job fields."""
    n = draw(st.integers(1, 4))
    keys = sorted(draw(st.lists(st.tuples(st.integers(0, 4), st.integers(-2, 6)), min_size=n, max_size=n,
                                unique_by=lambda k: k[1])))
    small = st.integers(-2, 7)
    return {
        "ids": [k[1] for k in keys],
        "arr": [k[0] for k in keys],
        "tok": [draw(st.integers(1, 4)) for _ in range(n)],
        "slots": draw(st.integers(1, 3)),
        "continuous": draw(st.booleans()),
        "clock": draw(st.integers(0, 8)),
        "busy": draw(st.integers(0, 8)),
        "adm": draw(st.integers(0, n)),
        "rem": [draw(small) for _ in range(n)],
        "start": [draw(small) for _ in range(n)],
        "fin": [draw(small) for _ in range(n)],
        "dn": [draw(st.booleans()) for _ in range(n)],
        "srv": [draw(st.booleans()) for _ in range(n)],
    }


@SETTINGS
@given(arbitrary_valuations())
def test_predicates_agree_with_the_registry_on_arbitrary_states(val):
    state = M.state_of_valuation(val)
    truth = encoded_truth(val)
    for name in M.PREDICATES:
        assert truth[name] == BY_NAME[name].holds(state), f"{name} on {state}"


@SETTINGS
@given(arbitrary_valuations())
def test_trans_is_spec_step_on_arbitrary_states(val):
    state = M.state_of_valuation(val)
    found = successors(val)
    if spec.is_terminal(state):
        assert found == []
        return
    expected = M.normalized(M.valuation_of_state(spec.step(state)))
    assert found == [expected], f"state {state}: encoding gives {found}, spec.step gives {expected}"


def test_every_registry_state_invariant_has_an_encoding():
    assert [inv.name for inv in spec.STATE_INVARIANTS] == list(M.PREDICATES)


MUTANT_PROBES = [
    ([{"id": 0, "arrival": 0, "tokens": 2}, {"id": 1, "arrival": 0, "tokens": 2}], 1, True),
    ([{"id": 0, "arrival": 0, "tokens": 2}, {"id": 1, "arrival": 0, "tokens": 2}], 1, False),
    ([{"id": 0, "arrival": 0, "tokens": 1}, {"id": 1, "arrival": 0, "tokens": 2}], 1, False),
    ([{"id": 0, "arrival": 3, "tokens": 1}], 1, True),
    ([{"id": 0, "arrival": 0, "tokens": 1}, {"id": 1, "arrival": 0, "tokens": 3}, {"id": 2, "arrival": 0, "tokens": 1}], 2, False),
    ([{"id": 0, "arrival": 0, "tokens": 3}, {"id": 1, "arrival": 1, "tokens": 1}], 2, True),
]


def mutant_successors(val, mutant, limit=2):
    """The successor valuations the mutated step allows from ``val`` (at most ``limit``)."""
    M.reset_indicators()
    inp = M.make_inputs(len(val["ids"]))
    s, t = M.make_vars(inp, "s"), M.make_vars(inp, "t")
    solver = z3.SimpleSolver()
    solver.add(M.pin(inp, s, val))
    solver.add(M.trans(inp, s, t, mutant))
    solver.add(M.indicator_defs())
    found = []
    while len(found) < limit and solver.check() == z3.sat:
        nxt = M.read_frame(solver.model(), inp, t)
        found.append(M.normalized(nxt))
        solver.add(z3.Not(z3.And(M.pin(inp, t, nxt, constants=False))))
    return found


@pytest.mark.parametrize("mutant", sorted(set(M.MUTANTS) - set(M.ENCODING_MUTANTS) - set(M.PREDICATE_MUTANTS)))
def test_each_step_mutant_differs_from_spec_step_somewhere(mutant):
    """A mutant that equals spec.step everywhere would make its refutation test meaningless."""
    differs = False
    for call in MUTANT_PROBES:
        for state in reachable_states(*call)[:-1]:
            got = mutant_successors(M.valuation_of_state(state), mutant)
            differs |= got != [M.normalized(M.valuation_of_state(spec.step(state)))]
    assert differs, f"mutant {mutant} behaves like spec.step on every probe"


def test_the_contradictory_step_has_no_successor_anywhere():
    for call in MUTANT_PROBES:
        for state in reachable_states(*call)[:-1]:
            assert mutant_successors(M.valuation_of_state(state), "contradictory_step") == []


@pytest.mark.parametrize("mutant", M.ENCODING_MUTANTS)
def test_each_encoding_mutant_admits_an_input_the_domain_rejects(mutant):
    M.reset_indicators()
    inp = M.make_inputs(2)
    solver = z3.SimpleSolver()
    solver.add(M.domain(inp, mutant=mutant))
    solver.add(z3.Not(z3.And(M.domain(inp))))
    assert solver.check() == z3.sat


# --- the policy theorem's timed transition against spec.step ---------------------------------


def timed_successors(val, limit=2):
    """The successor valuations ``timed_trans`` allows from ``val`` (at most ``limit``)."""
    M.reset_indicators()
    inp = M.make_inputs(len(val["ids"]))
    s, t = M.make_vars(inp, "s"), M.make_vars(inp, "t")
    solver = z3.SimpleSolver()
    solver.add(M.pin(inp, s, val))
    solver.add(M.timed_trans(inp, s, t))
    solver.add(M.indicator_defs())
    found = []
    while len(found) < limit and solver.check() == z3.sat:
        nxt = M.read_frame(solver.model(), inp, t)
        found.append(M.normalized(nxt))
        solver.add(z3.Not(z3.And(M.pin(inp, t, nxt, constants=False))))
    return found


def idle(state):
    return spec.is_terminal(state) or (not state.active and state.waiting[0].arrival > state.clock)


def timed_run(state):
    """spec's run taken one clock tick at a time, as the policy theorem's relation takes it (to the end)."""
    states = [state]
    while not spec.is_terminal(state):
        state = state._replace(clock=state.clock + 1, served=()) if idle(state) else spec.step(state)
        states.append(state)
    return states


@SETTINGS
@given(valid_calls())
def test_timed_trans_is_spec_step_one_tick_at_a_time(call):
    """A serving state moves as spec.step; an idle or terminal one only advances its clock, with nothing served."""
    for state in timed_run(spec.initial(*call)):
        expected_state = state._replace(clock=state.clock + 1, served=()) if idle(state) else spec.step(state)
        found = timed_successors(M.valuation_of_state(state))
        assert found == [M.normalized(M.valuation_of_state(expected_state))], f"state {state}: timed_trans gives {found}"


@SETTINGS
@given(valid_calls())
def test_the_timed_run_has_spec_steps_starts_and_finishes(call):
    """Idle ticks change nothing but the clock: the timed run serves exactly spec's batches and ends with spec's done."""
    plain = reachable_states(*call)
    timed = timed_run(spec.initial(*call))
    assert [s.served for s in timed if s.served] == [s.served for s in plain if s.served]
    assert sorted(timed[-1].done) == sorted(plain[-1].done) and timed[-1].busy == plain[-1].busy
