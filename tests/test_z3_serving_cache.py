"""Prefix caching in the Z3 ledger: refcount_exact and no_false_sharing inductive over the per-block pool system.

Each proved row is proved at small n and refuted by its mutant with a run of pool events
from Init; the two validation rows are checked on caching states of the spec that runs
and refuted by their mutants, naming the state, the block and what moved; the states
reach the corners the caching rules turn on; a changed cache rule in a copy of the spec
makes the validation fail (tests/test_z3_conformance.py runs ``prove`` on such copies).
"""

import pytest

import spec.serving as S
from proofs.smt import serving_cache as SC
from proofs.smt import serving_claims as C
from proofs.smt import serving_model as M


@pytest.mark.parametrize("name", SC.ROWS_PROVED)
def test_each_caching_row_is_proved_and_refuted_by_its_mutant_with_a_run(name):
    proved = SC.prove_row(name, 3)
    assert proved["status"] == "proved" and proved["hypotheses"] == "yes", proved
    refuted = SC.prove_row(name, 2, SC.REFUTED_BY[name])
    assert refuted["status"] == "refuted", refuted
    cex = refuted["counterexample"]
    assert cex["breaks"] == name and cex["run"] and cex["events"] == len(cex["run"]), cex


def test_the_refcount_mutant_needs_a_second_holder():
    """The refuting run of release_shared_block: a block hit by a second request, then released by the first."""
    cex = SC.prove_row(SC.RC, 2, "release_shared_block")["counterexample"]
    kinds = [step.split("(")[0] for step in cex["run"]]
    assert "hit" in kinds and kinds[-1] == "release", cex


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_validation_rows_check_the_spec_that_runs(n):
    cases = SC.caching_states(n)
    assert cases and all(c.state.pool is not None for c in cases)
    assert SC.check_step(n, cases)["status"] == "checked"
    assert SC.check_predicates(n, cases)["status"] == "checked"


@pytest.mark.parametrize("row", [SC.STEP_ROW, SC.PREDICATE_ROW])
def test_the_validation_rows_are_refuted_by_their_mutants(row):
    check = SC.check_step if row == SC.STEP_ROW else SC.check_predicates
    result = check(3, SC.caching_states(3), SC.REFUTED_BY[row])
    assert result["status"] == "refuted", result
    cex = result["counterexample"]
    assert {"n", "state", "field", "spec", "encoding"} <= set(cex) and "serve(" in cex["state"], cex
    assert "'prefix_caching': True" in cex["state"], cex


def test_the_caching_states_reach_the_corners():
    corners = set()
    for n in (2, 3, 4):
        for case in SC.caching_states(n):
            if case.reachable and not S.is_terminal(case.state):
                corners |= set(SC._corners(case.state, S.step(case.state)))
    assert {"hit", "hit on a block held by another", "eviction", "preempts", "aborts",
            "a release keeps a shared block", "finishes", "resumes a preempted request"} <= corners, sorted(corners)


def test_the_drawn_states_break_the_registry_and_the_predicates_see_it():
    from spec.serving.invariants import BY_NAME

    drawn = [c for n in (2, 3, 4) for c in SC.caching_states(n) if not c.reachable]
    broken = {name for c in drawn for name in ("refcount_exact", "no_false_sharing")
              if not BY_NAME[name].holds(c.state)}
    assert broken == {"refcount_exact", "no_false_sharing"}, broken


def test_the_abstraction_refuses_a_block_twice_in_one_table():
    state = next(c.state for c in SC.caching_states(2) if c.reachable and any(p.blocks for p in c.state.running))
    p = next(p for p in state.running if p.blocks)
    doubled = state._replace(running=tuple(q._replace(blocks=q.blocks + q.blocks[:1]) if q.id == p.id else q
                                           for q in state.running))
    with pytest.raises(ValueError, match="times"):
        SC.abstract(doubled, p.blocks[0], SC.Codes())


def test_the_caching_rows_are_in_the_serving_ledger_with_their_mutants():
    claims = {c.claim: c for c in C.claims(2)}
    for name in SC.ROWS_PROVED + (SC.STEP_ROW, SC.PREDICATE_ROW):
        assert name in claims and claims[name].refuted_by in M.MUTANTS, name
    for name in SC.ROWS_PROVED:  # a proof counts only with the caching validation and the rows it assumes
        assert {SC.STEP_ROW, SC.PREDICATE_ROW} <= set(claims[name].depends), name
    assert claims[SC.STEP_ROW].kind == claims[SC.PREDICATE_ROW].kind == "validation"
    assert claims[SC.RC].kind == claims[SC.NFS].kind == "invariant" and claims[SC.LEMMA].kind == "lemma"
