"""The Z3 encoding of the serving tick against ``spec.serving.step``: the proofs are about the model the harness runs.

For every state of the reference run of a valid serve call (aborts, preemption,
chunked and unchunked prefill, tight pools and budgets), ``trans`` with the
state's values plugged in has exactly one successor, and it decodes to
``spec.serving.step``'s next state (block ids as counts); terminal states have
none; each encoded predicate agrees with the registry's Python predicate.
"""

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spec.serving as S
from proofs.smt import serving_model as M
from spec.serving.invariants import BY_NAME

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAST = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def calls(draw, max_requests=4):
    """Valid serve calls, small: tight pools and budgets so that preemption and aborts happen."""
    chunked = draw(st.booleans())
    block_size = draw(st.integers(1, 3))
    count = draw(st.integers(1, max_requests))
    ids = draw(st.lists(st.integers(-3, 9), min_size=count, max_size=count, unique=True))
    requests = []
    for request_id in ids:
        arrival = draw(st.integers(0, 4))
        request = {"id": request_id, "arrival": arrival, "prompt": draw(st.integers(1, 6)), "output": draw(st.integers(1, 4))}
        if draw(st.integers(0, 2)) == 0:
            request["abort"] = arrival + draw(st.integers(0, 6))
        requests.append(request)
    works = [r["prompt"] + r["output"] - 1 for r in requests]
    peak = max(-(-w // block_size) for w in works)
    budget = draw(st.integers(1, 8)) if chunked else max(works) + draw(st.sampled_from([0, 0, 2]))
    config = {"max_seqs": draw(st.integers(1, 3)), "token_budget": budget, "block_size": block_size,
              "num_blocks": peak + draw(st.sampled_from([0, 0, 1, 3])), "chunked_prefill": chunked}
    assert S.is_valid(requests, config), (requests, config)
    return requests, config


def reachable(requests, config):
    state = S.initial(requests, config)
    out = [state]
    while not S.is_terminal(state):
        state = S.step(state)
        out.append(state)
    return out


def _frame(val, mutant=None):
    inp = M.make_inputs(len(val["rid"]), block_size=val["block_size"])
    s, t = M.make_vars(inp, "s"), M.make_vars(inp, "t")
    trans, terms = M.transition(inp, s, t, mutant)
    solver = z3.Solver()
    solver.add(M.pin(inp, s, val))
    solver.add(trans)
    args = list(terms.block_args) + M.frame_block_args(inp, s) + M.frame_block_args(inp, t)
    solver.add(M.blocks_exact(inp, args))
    return inp, s, t, solver


def successors(val, mutant=None, limit=2):
    inp, s, t, solver = _frame(val, mutant)
    found = []
    while len(found) < limit and solver.check() == z3.sat:
        nxt = M.read_frame(solver.model(), inp, t)
        found.append(nxt)
        solver.add(z3.Not(z3.And(M.pin(inp, t, nxt, constants=False))))
    return found


def test_an_s2_preemption_tick_is_spec_step():
    from tests.serving_examples import S2_CONFIG, S2_REQUESTS

    states = reachable(S2_REQUESTS, S2_CONFIG)
    for state, nxt in zip(states, states[1:]):
        found = successors(M.valuation_of_state(state))
        assert len(found) == 1, f"{len(found)} successors of {state}"
        assert M.decode(found[0]) == M.normal_form(nxt), (state, found[0])


def check_trans_is_spec_step(call):
    states = reachable(*call)
    for state, nxt in zip(states, states[1:]):
        val = M.valuation_of_state(state)
        found = successors(val)
        assert len(found) == 1, f"{len(found)} successors of {state}"
        assert M.decode(found[0]) == M.normal_form(nxt), f"encoding differs from spec.serving.step at {state}"
    assert successors(M.valuation_of_state(states[-1])) == [], "a terminal state has a successor"


@FAST
@given(calls(max_requests=3))
def test_trans_is_spec_step_on_reachable_states(call):
    check_trans_is_spec_step(call)


@pytest.mark.slow
@SETTINGS
@given(calls())
def test_trans_is_spec_step_on_many_reachable_states(call):
    check_trans_is_spec_step(call)


def encoded_truth(val, names):
    inp = M.make_inputs(len(val["rid"]), block_size=val["block_size"])
    s = M.make_vars(inp, "s")
    solver = z3.Solver()
    solver.add(M.pin(inp, s, val))
    solver.add(M.blocks_exact(inp, M.frame_block_args(inp, s)))
    solver.add(M.frame_defs(inp, s))
    assert solver.check() == z3.sat
    model = solver.model()
    out = {}
    for name in names:
        f = M.PREDICATES.get(name) or M.LEMMAS[name]
        out[name] = z3.is_true(model.eval(f(inp, s), model_completion=True))
    return out


def check_predicates(call):
    for state in reachable(*call):
        val = M.valuation_of_state(state)
        truth = encoded_truth(val, list(M.PREDICATES) + list(M.LEMMAS))
        for name in M.PREDICATES:
            assert truth[name] == BY_NAME[name].holds(state), f"{name} disagrees at {state}"
        for name in M.LEMMAS:
            assert truth[name], f"lemma {name} is false at reachable {state}"


@FAST
@given(calls(max_requests=3))
def test_predicates_agree_with_the_registry_and_lemmas_hold_on_reachable_states(call):
    check_predicates(call)


@pytest.mark.slow
@SETTINGS
@given(calls())
def test_predicates_agree_with_the_registry_on_many_reachable_states(call):
    check_predicates(call)


def test_every_registry_state_invariant_is_encoded_or_said_not_to_be():
    from proofs.smt import serving_blocks as B

    names = {inv.name for inv in S.STATE_INVARIANTS}
    assert names == set(M.PREDICATES) | set(B.PREDICATES) | set(M.NOT_ENCODED)


# Each step mutant is a real change of the step: every one refutes, with a concrete run from Init, a row
# that the unmutated encoding proves (tests/test_z3_serving_claims.py::test_every_row_is_refuted_by_its_mutant).


def test_the_contradictory_step_has_no_successor():
    from tests import serving_examples as E

    assert successors(M.valuation_of_state(S.initial(E.S1_REQUESTS, E.S1_CONFIG)), "contradictory_step") == []


# running_first and work_conserving hold on every reachable state, so agreement there cannot tell an encoding
# that is always true: here the latest entry is broken the two ways those claims forbid, and the encoding must
# say False exactly where the registry does.
_TAMPER_CALLS = [
    ([{"id": 0, "arrival": 0, "prompt": 6, "output": 3}, {"id": 1, "arrival": 1, "prompt": 2, "output": 2},
      {"id": 2, "arrival": 1, "prompt": 3, "output": 2}],
     {"max_seqs": 3, "token_budget": 8, "block_size": 2, "num_blocks": 8, "chunked_prefill": True}),
    ([{"id": 0, "arrival": 0, "prompt": 3, "output": 2}, {"id": 1, "arrival": 0, "prompt": 2, "output": 4},
      {"id": 2, "arrival": 2, "prompt": 2, "output": 1}],
     {"max_seqs": 2, "token_budget": 5, "block_size": 1, "num_blocks": 6, "chunked_prefill": False}),
]


def _tampered(state):
    """Copies of ``state`` whose latest entry drops one scheduled request, or schedules one of them one token fewer."""
    latest = state.latest
    if latest is None:
        return []
    out = []
    for k, (rid, amount) in enumerate(latest.scheduled):
        rest = latest.scheduled[:k] + latest.scheduled[k + 1:]
        out.append(state._replace(latest=latest._replace(scheduled=rest)))
        if amount >= 2:
            fewer = latest.scheduled[:k] + ((rid, amount - 1),) + latest.scheduled[k + 1:]
            out.append(state._replace(latest=latest._replace(scheduled=fewer)))
    return out


def test_running_first_and_work_conserving_encodings_reject_what_the_registry_rejects():
    names = ("running_first", "work_conserving")
    broken = {name: 0 for name in names}
    for call in _TAMPER_CALLS:
        for state in reachable(*call):
            for bad in _tampered(state):
                truth = encoded_truth(M.valuation_of_state(bad), names)
                for name in names:
                    expected = BY_NAME[name].holds(bad)
                    assert truth[name] == expected, f"{name} disagrees at {bad}"
                    broken[name] += not expected
    assert all(broken.values()), f"no tampered state breaks some claim: {broken}"
