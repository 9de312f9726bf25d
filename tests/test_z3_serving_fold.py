"""The serving tick as folds over positions, for any number of requests (``proofs.smt.serving_fold``).

token_budget, kv_capacity and kv_exclusive are proved for every n by induction over the
passes' iterations, each refuted by its mutant with a concrete run of the loops; the
loops are the spec's (unrolled on the validation's states they give exactly
``spec.serving.step``'s passes, and a changed loop is caught); nothing in them depends
on n.
"""

import pytest
import z3

import spec.serving as S
from proofs.smt import conformance as C
from proofs.smt import serving_claims
from proofs.smt import serving_fold as F

ROWS = {"token_budget (any n)": F.prove_budget, "kv_capacity (any n)": F.prove_capacity,
        "kv_exclusive (any n)": F.prove_exclusive, "slot_bound (any n)": F.prove_seats,
        "lemma:filter_sums": F.prove_filter_sums}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_each_any_n_row_is_proved_and_refuted_by_its_mutant(row):
    proved = ROWS[row]()
    assert proved["status"] == "proved" and proved["hypotheses"] == "yes", proved
    mutant = serving_claims.REFUTED_BY[row]
    refuted = ROWS[row](mutant)
    assert refuted["status"] == "refuted", (row, mutant, refuted)
    if row != "lemma:filter_sums":  # a failed loop obligation counts only with a run of the loops that breaks the claim
        run = refuted["counterexample"]
        assert run["breaks"] == row and run["running"], run


def test_the_any_n_rows_are_in_the_ledger_with_their_bound():
    rows = {c.claim: c for c in serving_claims.claims(2)}
    for name in ("token_budget (any n)", "kv_capacity (any n)", "kv_exclusive (any n)", "slot_bound (any n)"):
        assert rows[name].bound.startswith("any n") and rows[name].kind == "invariant", rows[name]
        assert C.FOLD_ROW in rows[name].depends  # only about loops that were checked against the spec that runs
    assert "kv_exclusive (any n)" in rows["kv_capacity (any n)"].depends
    assert rows["lemma:filter_sums"].kind == "lemma"


def test_no_obligation_mentions_a_number_of_requests():
    """The loops' obligations are built from no n: the same formulas whatever the ledger's bound."""
    d = F.make_data()
    parts = ("budget", "capacity", "exclusive", "seats")
    texts = [str(z3.And(h + [g])) for _, h, g in F._loop_checks(d, None, parts)]
    assert texts == [str(z3.And(h + [g])) for _, h, g in F._loop_checks(F.make_data(), None, parts)]
    assert all("R" in t for t in texts[:1])  # the length is a symbol


@pytest.mark.parametrize("n", [1, 4])
def test_the_loops_run_exactly_as_the_spec_on_the_validation_states(n):
    assert C.check_serving_folds(n, C.serving_states(n))["status"] == "checked"


def test_a_changed_loop_disagrees_with_the_spec():
    for mutant in ("budget_plus_one", "pool_plus_one"):
        assert C.check_serving_folds(4, C.serving_states(4), mutant)["status"] == "refuted", mutant


def test_a_spec_allocation_of_a_held_id_is_not_a_run_of_the_loops():
    state = S.initial([{"id": 0, "arrival": 0, "prompt": 2, "output": 3}, {"id": 1, "arrival": 0, "prompt": 2,
                                                                            "output": 2}],
                      {"max_seqs": 2, "token_budget": 8, "block_size": 1, "num_blocks": 6, "chunked_prefill": False})
    state = S.step(state)
    nxt = S.step(state)
    held = state.running[0].blocks[0]
    entry = nxt.latest
    rid, blocks = entry.allocated[0]
    bad = entry._replace(allocated=((rid, (held,) + blocks[1:]),) + entry.allocated[1:])  # the allocator reuses a held id
    d = F.make_data()
    running = len(state.running)
    u = F.unroll(d, 3 * running + 1, len(state.waiting) + 1)
    solver = z3.Solver()
    solver.add(*u.constraints, *F.pin_state(d, state, bad), *F.pin_takes(d, state, bad),
               *F.blocks_exact_at(d, 1, F.blk_terms(d, u)))
    assert solver.check() == z3.unsat
