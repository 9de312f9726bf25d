"""The Z3 claims and the ``prove`` ledger: everything proved at a small n, broken encodings refuted, unknown never a pass."""

import argparse
import json
import time

import pytest

from proofs.cli import prove as prove_command
from proofs.smt import claims as z3_claims
from proofs.smt import model as z3_model
from proofs.smt import run as z3_run

SMALL = 3


@pytest.fixture(scope="module")
def ledger():
    return prove_command.prove(max_jobs=SMALL, budget=60, policy_jobs=SMALL)


def test_every_claim_is_proved_at_a_small_n(ledger):
    not_proved = [(r["claim"], r["status"], r["detail"]) for r in ledger if r["status"] != "proved"]
    assert not not_proved
    assert z3_run.verdict(ledger) == "pass" and z3_run.exit_code(ledger) == 0


def test_the_ledger_covers_every_registry_state_invariant_and_theorem(ledger):
    names = {r["claim"] for r in ledger}
    assert set(z3_claims.state_invariant_names()) <= names
    for theorem in ("termination_ranking", "slot_bound (any n)", "work_conservation (any n)",
                    "abstraction_refinement", "policy_continuous_starts_no_later"):
        assert theorem in names
    assert {f"rule_needed:{rule}" for rule in z3_model.RULES} <= names
    assert {r["bound"] for r in ledger if r["method"] == "abstraction" and "any n" in r["claim"]} == {"any n"}


def test_domain_rule_counterexamples_are_concrete(ledger):
    rows = {r["claim"]: r for r in ledger}
    for rule in z3_model.RULES:
        cex = rows[f"rule_needed:{rule}"]["counterexample"]
        assert cex["without_rule"] == rule and cex["breaks"] == z3_claims.RULE_TARGETS[rule]
        assert cex["call"].startswith("schedule([")
    assert "/" in rows["rule_needed:tokens_integral"]["counterexample"]["call"]  # a fractional token count
    assert "slots=0" in rows["rule_needed:slots_positive"]["counterexample"]["call"] or "slots=-" in (
        rows["rule_needed:slots_positive"]["counterexample"]["call"])


def test_worked_examples_are_proved_on_the_encoding(ledger):
    rows = {r["claim"]: r for r in ledger}
    for name in z3_claims.WORKED_EXAMPLES:
        assert rows[name]["status"] == "proved", rows[name]


def test_mutant_admitting_while_active_le_slots_refutes_slot_bound():
    rows = prove_command.prove(max_jobs=SMALL, budget=60, mutant="admit_while_le_slots", only=["slot_bound"])
    row = {r["claim"]: r for r in rows}["slot_bound"]
    assert row["status"] == "refuted"
    assert row["counterexample"]["breaks"] == "slot_bound"
    state = row["counterexample"]["state"]
    assert len(state["active"]) > 0 and "slots=" in row["counterexample"]["call"]
    assert z3_run.exit_code(rows) == 1 and z3_run.verdict(rows) == "fail"


def test_a_tiny_budget_makes_claims_unknown_never_proved():
    rows = prove_command.prove(max_jobs=SMALL, budget=0.001, only=["worked_example_1"])
    assert rows and all(r["status"] == "unknown" for r in rows)
    assert z3_run.verdict(rows) == "fail" and z3_run.exit_code(rows) == 2


def _sleeper():
    time.sleep(30)
    return {"status": "proved", "counterexample": None}


def test_the_wall_clock_limit_really_stops_a_claim():
    rows = z3_run.run_claims([z3_run.Claim("sleeps", "inductive", "n=1", _sleeper)], budget=0.5)
    assert rows[0]["status"] == "unknown" and "killed" in rows[0]["detail"]


def test_a_proof_that_assumes_an_unproved_row_is_unknown():
    proved = lambda: {"status": "proved", "counterexample": None}  # noqa: E731
    refuted = lambda: {"status": "refuted", "counterexample": {"x": 1}}  # noqa: E731
    rows = z3_run.run_claims([
        z3_run.Claim("base", "inductive", "n=1", refuted),
        z3_run.Claim("uses_base", "inductive", "n=1", proved, ("base",)),
        z3_run.Claim("uses_that", "inductive", "n=1", proved, ("uses_base",)),
    ], budget=10)
    assert [r["status"] for r in rows] == ["refuted", "unknown", "unknown"]


def test_a_registry_invariant_without_an_encoding_fails_loudly(monkeypatch):
    fewer = {name: f for name, f in z3_model.PREDICATES.items() if name != "slot_bound"}
    monkeypatch.setattr(z3_model, "PREDICATES", fewer)
    with pytest.raises(KeyError, match="slot_bound"):
        z3_claims.claims(2)


def _run_cli(argv):
    parser = argparse.ArgumentParser(prog="schedcheck")
    prove_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_cli_json_shape_and_stable_output(tmp_path, capsys):
    path = tmp_path / "prove.json"
    argv = ["prove", "--max-jobs", "2", "--claims", "worked_example", "--claims", "rule_needed:ids",
            "--json", str(path), "--no-seconds"]
    assert _run_cli(argv) == 0
    first = capsys.readouterr().out
    data = json.loads(path.read_text())
    assert data["verdict"] == "pass"
    assert all(set(r) == {"claim", "status", "method", "bound", "seconds", "counterexample"} for r in data["results"])
    assert {r["status"] for r in data["results"]} == {"proved"}
    assert "without ids_unique: Z3 breaks no_duplicate_active" in first
    assert _run_cli(argv[:-1] + ["--no-seconds"]) == 0
    second = capsys.readouterr().out
    assert [line for line in first.splitlines() if "schedule(" not in line and "#" not in line] == [
        line for line in second.splitlines() if "schedule(" not in line and "#" not in line]


def test_cli_mutant_exit_code_and_row(capsys):
    assert _run_cli(["prove", "--max-jobs", "2", "--mutant", "admit_while_le_slots", "--claims", "slot_bound",
                     "--no-seconds"]) == 1
    out = capsys.readouterr().out
    assert any(line.startswith("slot_bound ") and "refuted" in line for line in out.splitlines())
    assert "counterexample: breaks slot_bound" in out
