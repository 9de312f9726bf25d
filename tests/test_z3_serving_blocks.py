"""The per-block Z3 encoding against ``spec.serving.step``: the block-id proofs are about the model the harness runs.

On every state of the reference run of valid serve calls, and for every block id the
state or its successor names plus the pool's ends and one id on each side of it: the
spec's allocations keep the allocator's contract the encoding assumes (each id
``_lowest_free`` takes is below num_blocks and not held at that call, and the
encoding's ``free`` term says exactly that, pop timing included); with the spec's
takes plugged in, the count and per-block step has exactly one successor and its
per-block frame is the successor's; each per-block predicate, over those ids, equals
the registry's Python predicate (with the count part for kv_capacity and kv_exact),
also on states broken the ways kv_exclusive, kv_capacity and kv_exact forbid.
"""

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spec.serving as S
import spec.serving.state as spec_state
from proofs.smt import serving_blocks as B
from proofs.smt import serving_model as M
from spec.serving.invariants import BY_NAME
from tests.test_z3_serving_model import calls

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAST = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def recorded_step(state, monkeypatch):
    """``spec.serving.step(state)`` and, per call of its allocator in order, (held set at the call, ids taken)."""
    calls_ = []
    original = spec_state._lowest_free

    def spy(held, count):
        taken = original(held, count)
        calls_.append((frozenset(held), taken))
        return taken

    with monkeypatch.context() as patch:
        patch.setattr(spec_state, "_lowest_free", spy)
        nxt = S.step(state)
    return nxt, calls_


def ids_named(state) -> set:
    progress = list(state.waiting) + list(state.running) + [e.progress for e in state.finished + state.aborted]
    named = {b for p in progress for b in p.blocks}
    if state.latest is not None:
        named |= {b for _, blocks in state.latest.allocated + state.latest.freed for b in blocks}
    return named


def candidates(*states) -> list:
    """Every id the states name, the pool's ends, and one id on each side of the pool."""
    top = states[0].config.num_blocks
    return sorted(set().union(*(ids_named(s) for s in states)) | {-1, 0, top - 1, top})


def check_step(state, prev, monkeypatch):
    nxt, allocations = recorded_step(state, monkeypatch)
    latest = nxt.latest
    assert [taken for _, taken in allocations] == [blocks for _, blocks in latest.allocated], "allocator calls"
    index = {r.id: i for i, r in enumerate(state.requests)}
    val = M.valuation_of_state(state)
    inp = M.make_inputs(len(state.requests), block_size=state.config.block_size)
    s, t = M.make_vars(inp, "s"), M.make_vars(inp, "t")
    bs, bt = B.make_bvars(inp, "s"), B.make_bvars(inp, "t")
    bk = B.make_block()
    trans, terms = M.transition(inp, s, t)
    btrans, bterms = B.block_transition(inp, s, bs, bt, terms, bk)
    solver = z3.Solver()
    solver.add(*M.pin(inp, s, val), trans, btrans)
    solver.add(*M.blocks_exact(inp, list(terms.block_args) + M.frame_block_args(inp, s) + M.frame_block_args(inp, t)))
    assert solver.check() == z3.sat, f"no count successor of {state}"
    count_next = M.pin(inp, t, M.read_frame(solver.model(), inp, t), False)
    solver.push()  # the count successor is unique (tests/test_z3_serving_model.py checks it is the spec's)
    solver.add(z3.Not(z3.And(count_next)))
    assert solver.check() == z3.unsat, f"a second count successor of {state}"
    solver.pop()
    solver.add(*count_next)
    top = state.config.num_blocks
    allocators = {index[rid]: k for k, (rid, _) in enumerate(latest.allocated)}
    for block in candidates(state, nxt):
        solver.push()
        solver.add(bk == block, *B.pin_block(inp, bs, B.block_valuation(state, prev, block)))
        for i in range(inp.n):
            k = allocators.get(i)
            solver.add(bterms.take[i] == z3.BoolVal(k is not None and block in allocations[k][1]))
        assert solver.check() == z3.sat, f"the spec's allocation of block {block} is not a step of the encoding: {state}"
        model = solver.model()
        for i in range(inp.n):
            allocates = z3.is_true(model.eval(bterms.allocates[i], model_completion=True))
            assert allocates == (i in allocators), f"request {state.requests[i].id} allocates: {allocates}"
            if i in allocators:
                held, _ = allocations[allocators[i]]
                free = z3.is_true(model.eval(bterms.free[i], model_completion=True))
                assert free == (0 <= block < top and block not in held), (
                    f"block {block} free at request {state.requests[i].id}'s allocation: encoding {free}, "
                    f"spec {0 <= block < top and block not in held} (held {sorted(held)}) at {state}")
        expected = B.block_valuation(nxt, state, block)
        got = {name: [model.eval(bt.per[name][i], model_completion=True).as_long() for i in range(inp.n)]
               for name in B.FIELDS}
        assert got == expected, f"block {block}: encoding {got}, spec {expected} after {state}"
        solver.add(z3.Not(z3.And(B.pin_block(inp, bt, expected))))
        assert solver.check() == z3.unsat, f"block {block}: a second successor of {state}"
        solver.pop()
    return nxt


def runs(call):
    state = S.initial(*call)
    prev = None
    out = [(state, prev)]
    while not S.is_terminal(state):
        prev, state = state, S.step(state)
        out.append((state, prev))
    return out


def check_trans(call, monkeypatch):
    for state, prev in runs(call)[:-1]:
        check_step(state, prev, monkeypatch)


@FAST
@given(calls(max_requests=3))
def test_block_step_is_spec_step_on_reachable_states(call):
    with pytest.MonkeyPatch.context() as monkeypatch:
        check_trans(call, monkeypatch)


@pytest.mark.slow
@SETTINGS
@given(calls())
def test_block_step_is_spec_step_on_many_reachable_states(call):
    with pytest.MonkeyPatch.context() as monkeypatch:
        check_trans(call, monkeypatch)


# Found by a random search over spec.serving.step: in tick 3, request 2 allocates first while the victim still
# holds its ids, then request 0's growth pops the victim and takes one of them.
POP_CALL = ([{"id": 0, "arrival": 2, "prompt": 3, "output": 4}, {"id": 1, "arrival": 2, "prompt": 4, "output": 1},
             {"id": 2, "arrival": 1, "prompt": 1, "output": 5}],
            {"max_seqs": 3, "token_budget": 5, "block_size": 1, "num_blocks": 7, "chunked_prefill": True})


def test_a_victims_id_is_held_at_an_earlier_allocation_and_free_at_a_later_one(monkeypatch):
    """The pop timing: the encoding's free term says held, then free, for the same id in one tick, as the spec does."""
    seen = 0
    for state, prev in runs(POP_CALL)[:-1]:
        nxt, allocations = recorded_step(state, monkeypatch)
        victims = {b for rid, blocks in nxt.latest.freed if rid in nxt.latest.preempted for b in blocks}
        late = False
        for k, (_, taken) in enumerate(allocations):
            reused = victims & set(taken)
            late = late or any(b in allocations[j][0] for j in range(k) for b in reused)
        if late:  # check_step compares the encoding's free term with the spec at every allocation of the tick
            check_step(state, prev, monkeypatch)
            seen += 1
    assert seen, "no tick takes a victim's id after an allocation at which it was still held"


def encoded(state, prev, blocks) -> list:
    """Per id of ``blocks``: each per-block row at it, and the count predicates, on a concrete state."""
    inp = M.make_inputs(len(state.requests), block_size=state.config.block_size)
    s, b = M.make_vars(inp, "s"), B.make_bvars(inp, "s")
    bk = B.make_block()
    rows = {name: f(inp, s, b, bk) for name, f in B.ROWS.items()}
    rows.update({f"{name} (count)": M.PREDICATES[name](inp, s) for name in ("kv_capacity", "kv_exact")})
    solver = z3.Solver()
    solver.add(*M.pin(inp, s, M.valuation_of_state(state)))
    solver.add(*M.blocks_exact(inp, M.frame_block_args(inp, s)), *M.frame_defs(inp, s))
    out = []
    for block in blocks:
        solver.push()
        solver.add(bk == block, *B.pin_block(inp, b, B.block_valuation(state, prev, block)))
        assert solver.check() == z3.sat
        model = solver.model()
        out.append({name: z3.is_true(model.eval(term, model_completion=True)) for name, term in rows.items()})
        solver.pop()
    return out


def registry_agrees(state, prev) -> dict:
    """The registry's id claims on ``state`` and the encoding's over every candidate id; asserts they agree."""
    per_block = encoded(state, prev, candidates(state))
    ours = {
        "kv_exclusive": all(e["kv_exclusive"] for e in per_block),
        "kv_capacity": per_block[0]["kv_capacity (count)"] and all(e["kv_capacity (ids)"] for e in per_block),
        "kv_exact": per_block[0]["kv_exact (count)"] and all(e["kv_exact (ids)"] for e in per_block),
    }
    for name, value in ours.items():
        assert value == BY_NAME[name].holds(state), f"{name}: encoding {value}, registry {not value} at {state}"
    return {"rows": per_block, **ours}


def check_predicates(call):
    for state, prev in runs(call):
        found = registry_agrees(state, prev)
        for row in found["rows"]:
            assert row["kv_freed_gives_back"] and row["lemma:block_holders"], f"a per-block row is false at {state}"


@FAST
@given(calls(max_requests=3))
def test_block_predicates_agree_with_the_registry_on_reachable_states(call):
    check_predicates(call)


@pytest.mark.slow
@SETTINGS
@given(calls())
def test_block_predicates_agree_with_the_registry_on_many_reachable_states(call):
    check_predicates(call)


def _tampered(state):
    """Copies of ``state`` broken in the ways kv_exclusive, kv_capacity and kv_exact forbid."""
    out = []
    running = list(state.running)
    top = state.config.num_blocks
    for k, p in enumerate(running):
        if p.blocks:
            twice = running[:k] + [p._replace(blocks=p.blocks + p.blocks[:1])] + running[k + 1:]
            out.append(state._replace(running=tuple(twice)))  # one request holds an id twice
            outside = running[:k] + [p._replace(blocks=p.blocks[:-1] + (top,))] + running[k + 1:]
            out.append(state._replace(running=tuple(outside)))  # an id outside the pool
            for m, q in enumerate(running):
                if m != k:
                    shared = list(running)
                    shared[m] = q._replace(blocks=q.blocks[:-1] + p.blocks[:1]) if q.blocks else q
                    out.append(state._replace(running=tuple(shared)))  # two requests share an id
    latest = state.latest
    if latest is not None and latest.allocated:
        rid, blocks = latest.allocated[0]
        out.append(state._replace(latest=latest._replace(allocated=latest.allocated + ((rid, blocks[:1]),))))
        holder = [p for p in running if blocks[0] in p.blocks]
        if holder:  # the allocated id is neither held nor freed by a finish
            p = holder[0]
            gone = tuple(q._replace(blocks=tuple(b for b in q.blocks if b != blocks[0]) + (top + 5,)) if q is p else q
                         for q in running)
            out.append(state._replace(running=gone))
    if latest is not None and latest.freed:
        rid, blocks = latest.freed[0]
        out.append(state._replace(latest=latest._replace(freed=((rid, blocks + blocks[:1]),) + latest.freed[1:])))
        out.append(state._replace(latest=latest._replace(freed=((rid, ()),) + latest.freed)))  # two freed entries
    return out


_TAMPER_CALLS = [
    ([{"id": 0, "arrival": 0, "prompt": 3, "output": 3}, {"id": 1, "arrival": 0, "prompt": 2, "output": 3}],
     {"max_seqs": 2, "token_budget": 8, "block_size": 1, "num_blocks": 6, "chunked_prefill": False}),
]


def test_block_predicates_reject_what_the_registry_rejects():
    broken = {"kv_exclusive": 0, "kv_capacity": 0, "kv_exact": 0}
    for call in _TAMPER_CALLS:
        for state, prev in runs(call):
            for bad in _tampered(state):
                found = registry_agrees(bad, prev)
                for name in broken:
                    broken[name] += not found[name]
    assert all(broken.values()), f"no tampered state breaks some claim: {broken}"


def _check_refuted(name, n):
    refuted = B.prove_row(name, n, B.REFUTED_BY[name])
    assert refuted["status"] == "refuted", (name, refuted)
    cex = refuted["counterexample"]
    assert cex["breaks"] == name and cex["call"].startswith("serve(") and cex["after_steps"] >= 1, cex
    inner = cex["call"][len("serve("):-1]
    assert S.is_valid(*eval(f"({inner})", {"True": True, "False": False})), "the run is outside the domain"


def test_kv_exclusive_is_proved_at_n2_and_refuted_by_allocating_a_held_id():
    proved = B.prove_row("kv_exclusive", 2)
    assert proved["status"] == "proved" and proved["hypotheses"] == "yes", proved
    _check_refuted("kv_exclusive", 1)


@pytest.mark.slow
def test_the_block_rows_are_proved_at_n2_and_each_refuted_by_its_mutant():
    for name in B.ROWS:
        proved = B.prove_row(name, 2)
        assert proved["status"] == "proved" and proved["hypotheses"] == "yes", (name, proved)
        _check_refuted(name, 2)


def test_every_block_mutant_is_a_serving_mutant_and_refutes_a_row():
    assert set(B.MUTANTS) <= set(M.MUTANTS)
    assert set(B.REFUTED_BY.values()) == set(B.MUTANTS)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40).flatmap(lambda pool: st.tuples(
    st.just(pool), st.sets(st.integers(0, pool - 1), max_size=pool), st.integers(0, pool))))
def test_the_spec_allocator_keeps_the_contract_on_any_held_set(case):
    """The contract the per-block step assumes, of ``_lowest_free`` on any held set (not only reachable ones): count distinct ids, none held, all in the pool when that many are free."""
    pool, held, count = case
    count = min(count, pool - len(held))
    taken = spec_state._lowest_free(set(held), count)
    assert len(taken) == len(set(taken)) == count, taken
    assert not set(taken) & held and all(0 <= b < pool for b in taken), (pool, sorted(held), taken)
    assert list(taken) == sorted(b for b in range(pool) if b not in held)[:count], "not the lowest free ids"
