"""The Z3 claims and the ``prove`` ledger: everything proved at a small n, broken encodings refuted, unknown and vacuous never a pass."""

import argparse
import json
import os
import time

import pytest
import z3

from proofs import outcomes
from proofs.cli import prove as prove_command
from proofs.smt import claims as z3_claims
from proofs.smt import model as z3_model
from proofs.smt import run as z3_run

SMALL = 3


@pytest.fixture(scope="module")
def ledger():
    return prove_command.prove(max_jobs=SMALL, budget=60, policy_jobs=SMALL)


def test_every_claim_passes_at_a_small_n_with_the_status_of_its_kind(ledger):
    failed = [(r["claim"], r["status"], r["detail"]) for r in ledger if not z3_run.passes(r)]
    assert not failed
    assert z3_run.verdict(ledger) == "pass" and z3_run.exit_code(ledger) == 0
    status = {r["claim"]: r["status"] for r in ledger}
    assert status["encoding matches spec.step"] == status["predicates match the registry"] == "checked"
    for name in list(z3_claims.BY_CONSTRUCTION) + ["every_job_completes_once"]:
        assert status[name] == "by construction", name
    assert {status[name] for name in status if name.startswith("lemma:")} == {"lemma"}
    assert {status[name] for name in z3_claims.state_invariant_names() if name not in z3_claims.BY_CONSTRUCTION
            and name != "every_job_completes_once"} == {"proved"}
    text = prove_command.render(ledger, seconds=False)
    assert f"verdict: pass  ({sum(s == 'proved' for s in status.values())} proved, 3 by construction, 6 lemmas, " \
           "2 checked against the spec" in text


def test_the_ledger_covers_every_registry_state_invariant_and_theorem(ledger):
    names = {r["claim"] for r in ledger}
    assert set(z3_claims.state_invariant_names()) <= names
    for theorem in ("step_total", "termination_ranking", "slot_bound (abstraction)", "work_conservation (abstraction)",
                    "abstraction_refinement", "policy_continuous_starts_no_later"):
        assert theorem in names
    assert {f"rule_needed:{rule}" for rule in z3_model.RULES} <= names


def test_every_row_states_its_bound_as_it_is(ledger):
    """Per-job rows hold for every n from 1 to the bound; the abstraction rows rest on a refinement proved only that far."""
    rows = {r["claim"]: r for r in ledger}
    for name in z3_claims.state_invariant_names() + [f"lemma:{x}" for x in z3_model.LEMMAS]:
        expected = "by construction" if name in z3_claims.BY_CONSTRUCTION else f"n <= {SMALL}"
        assert rows[name]["bound"] == expected, rows[name]
    for name in ("step_total", "termination_ranking", "abstraction_refinement", "slot_bound (abstraction)",
                 "work_conservation (abstraction)", "policy_continuous_starts_no_later"):
        assert rows[name]["bound"] == f"n <= {SMALL}", rows[name]
    assert not any("any n" in r["bound"] for r in ledger)
    assert all(r["hypotheses_satisfiable"] == ("-" if r["kind"] == "validation" else "yes") for r in ledger)


def test_domain_rule_counterexamples_are_concrete(ledger):
    rows = {r["claim"]: r for r in ledger}
    for rule in z3_model.RULES:
        cex = rows[f"rule_needed:{rule}"]["counterexample"]
        assert cex["without_rule"] == rule and cex["breaks"] == z3_claims.RULE_TARGETS[rule]
        assert cex["call"].startswith("schedule([")
    assert "/" in rows["rule_needed:tokens_integral"]["counterexample"]["call"]  # a fractional token count
    assert "slots=0" in rows["rule_needed:slots_positive"]["counterexample"]["call"] or "slots=-" in (
        rows["rule_needed:slots_positive"]["counterexample"]["call"])


def test_arrival_nonnegative_row_says_it_breaks_the_clock_bound_at_step_0(ledger):
    cex = {r["claim"]: r for r in ledger}["rule_needed:arrival_nonnegative"]["counterexample"]
    assert cex["after_steps"] == 0 and cex["state"]["clock"] == 0 and cex["state"]["busy"] == 0
    assert "clock bound" in cex["shows"] and "initial state" in cex["shows"] and "not for runs to end" in cex["shows"]


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


def _spinner():
    while True:  # burns CPU until the CPU budget ends it
        pass


def test_a_claim_that_uses_up_its_cpu_budget_is_unknown_never_proved():
    rows = z3_run.run_claims([z3_run.Claim("spins", "inductive", "n=1", _spinner)], budget=1, wall=60)
    assert rows[0]["status"] == "unknown" and "whole CPU budget of 1 s" in rows[0]["detail"], rows[0]
    assert rows[0]["cpu_seconds"] == 1.0
    assert z3_run.verdict(rows) == outcomes.UNKNOWN and z3_run.exit_code(rows) == 2


def _sleeper():
    time.sleep(30)
    return {"status": "proved", "counterexample": None}


def test_the_wall_clock_safety_net_really_stops_a_claim():
    rows = z3_run.run_claims([z3_run.Claim("sleeps", "inductive", "n=1", _sleeper)], budget=0.5, wall=1)
    assert rows[0]["status"] == "unknown" and "killed at the wall-clock safety net of 1 s" in rows[0]["detail"]
    assert z3_run.wall_limit(120) == 4 * 120 + 30  # the default net: a CPU budget finishes under a load of 4x


def test_each_row_reports_the_cpu_it_used(ledger):
    assert all(isinstance(r["cpu_seconds"], float) and r["cpu_seconds"] >= 0 for r in ledger)


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
    assert all(set(r) == {"claim", "status", "kind", "method", "bound", "hypotheses_satisfiable", "refuted_by",
                          "seconds", "cpu_seconds", "counterexample"} for r in data["results"])
    assert all(r["refuted_by"] in z3_model.MUTANTS for r in data["results"])
    pairs = {(r["status"], r["hypotheses_satisfiable"]) for r in data["results"]}
    assert {("proved", "yes"), ("checked", "-")} <= pairs <= {("proved", "yes"), ("checked", "-"), ("lemma", "yes"),
                                                              ("by construction", "yes")}
    assert [r["claim"] for r in data["results"]][:2] == ["encoding matches spec.step", "predicates match the registry"]
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


# --- hypotheses, totality, construction, mutants, bounds (issue 9) -----------------------------------


def test_a_vacuous_row_is_never_a_pass():
    vacuous = lambda: {"status": "vacuous", "counterexample": None, "hypotheses": "no", "detail": "x"}  # noqa: E731
    rows = z3_run.run_claims([z3_run.Claim("empty", "inductive", "n <= 1", vacuous, (), "no_jump")], budget=10)
    assert rows[0]["status"] == "vacuous" and rows[0]["hypotheses_satisfiable"] == "no"
    assert z3_run.verdict(rows) == outcomes.UNKNOWN and z3_run.exit_code(rows) == 2


@pytest.mark.parametrize("name", ["slot_bound", "termination", "well_typed", "lemma:finished_by_clock"])
def test_unsatisfiable_hypotheses_make_a_claim_vacuous_not_proved(monkeypatch, name):
    """With a domain that no input satisfies, every check's negation is unsat: the claim must say vacuous."""
    domain = z3_model.domain
    monkeypatch.setattr(z3_model, "domain", lambda *a, **k: domain(*a, **k) + [z3.BoolVal(False)])
    bare = name.removeprefix("lemma:")
    result = z3_claims.up_to(lambda n: z3_claims.prove_inductive(bare, n), 2)
    assert result["status"] == "vacuous" and result["hypotheses"] == "no", result


def test_contradictory_step_fails_totality_and_leaves_nothing_proved_that_rests_on_the_step():
    rows = {r["claim"]: r for r in prove_command.prove(max_jobs=2, budget=60, policy_jobs=2, mutant="contradictory_step")}
    assert rows["step_total"]["status"] == "refuted"
    assert rows["step_total"]["counterexample"]["breaks"] == "step_total"
    for name in ("slot_bound", "termination", "termination_ranking", "work_conservation"):
        assert rows[name]["status"] == "vacuous" and rows[name]["hypotheses_satisfiable"] == "no", rows[name]
    assert rows["fifo_order"]["status"] != "proved"  # by construction, but about a step that is not spec.step's
    assert not [name for name, r in rows.items() if r["status"] == "proved"]


def test_the_by_construction_rows_need_no_step_and_are_not_counted_as_inductive(ledger):
    rows = {r["claim"]: r for r in ledger}
    for name in z3_claims.BY_CONSTRUCTION:
        assert rows[name]["method"] == "by construction" and rows[name]["bound"] == "by construction"
        for n in (1, 4):  # the negation is unsat over the representation alone
            assert z3_claims.prove_by_construction(name, n)["status"] == "proved"
    assert rows["every_job_completes_once"]["method"] == "by construction"
    inductive = {r["claim"] for r in ledger if r["method"] == "inductive"}
    assert not inductive & (set(z3_claims.BY_CONSTRUCTION) | {"every_job_completes_once"})
    text = prove_command.render(ledger, seconds=False)
    assert ", 3 by construction, " in text


def test_every_row_names_a_mutant_and_each_mutant_refutes_its_row():
    """A proof that no mutant can break proves nothing: each row's named mutant makes Z3 refute that very row."""
    claims = z3_claims.claims(SMALL, policy_jobs=SMALL)
    assert all(c.refuted_by in z3_model.MUTANTS for c in claims), [c.claim for c in claims if c.refuted_by not in z3_model.MUTANTS]
    rows = z3_run.run_claims(z3_claims.mutant_rows(SMALL, policy_jobs=SMALL), budget=120)
    assert [r["claim"] for r in rows] == [c.claim for c in claims]
    not_refuted = [(r["claim"], r["refuted_by"], r["status"], r["detail"]) for r in rows if r["status"] != "refuted"]
    assert not not_refuted


def test_every_mutant_is_used_by_some_row():
    named = {c.refuted_by for c in z3_claims.claims(2, policy_jobs=2)}
    assert named == set(z3_model.MUTANTS)


def test_per_job_rows_are_proved_for_every_n_up_to_the_bound(monkeypatch):
    """A claim that fails only for one job is refuted, though it holds at the bound itself."""
    slot_bound = z3_model.PREDICATES["slot_bound"]
    broken = lambda inp, s: z3.And(slot_bound(inp, s), z3.BoolVal(inp.n != 1))  # noqa: E731
    monkeypatch.setitem(z3_model.PREDICATES, "slot_bound", broken)
    assert z3_claims.prove_inductive("slot_bound", SMALL)["status"] == "proved"
    row = next(c for c in z3_claims.claims(SMALL) if c.claim == "slot_bound")
    assert row.bound == f"n <= {SMALL}"
    result = row.run()
    assert result["status"] == "refuted" and result["detail"].startswith("at n=1:"), result


def test_the_policy_theorem_checks_its_hypotheses(ledger):
    row = {r["claim"]: r for r in ledger}["policy_continuous_starts_no_later"]
    assert row["status"] == "proved" and row["hypotheses_satisfiable"] == "yes"
    assert row["bound"] == f"n <= {SMALL}" and row["detail"].startswith(f"n = 1..{SMALL}:")


def test_cli_prints_the_ledger_columns(capsys):
    assert _run_cli(["prove", "--max-jobs", "2", "--policy-jobs", "2", "--claims", "fifo_order", "--no-seconds"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["claim", "status", "method", "bound", "hyp", "sat", "refuted", "by"]
    fifo = next(line for line in lines if line.startswith("fifo_order "))
    assert "by construction" in fifo and "unsorted_jobs" in fifo and " yes " in fifo
    total = next(line for line in lines if line.startswith("step_total "))
    assert "witness" in total and "n <= 2" in total and "contradictory_step" in total


def test_junit_and_sarif_carry_the_ledger_fields(tmp_path):
    from proofs.report import ci as ci_reports

    rows = prove_command.prove(max_jobs=2, budget=60, only=["fifo_order"], policy_jobs=2)
    report = json.loads(json.dumps(prove_command.as_json(rows), default=str))
    xml = ci_reports.junit_xml("prove", report)
    assert 'name="hypotheses_satisfiable" value="yes"' in xml and 'name="refuted_by" value="unsorted_jobs"' in xml
    assert 'name="method" value="by construction"' in xml
    log = ci_reports.sarif_log("prove", report)
    claims = {c["claim"]: c for c in log["runs"][0]["properties"]["claims"]}
    assert claims["fifo_order"]["refuted_by"] == "unsorted_jobs" and claims["fifo_order"]["hypotheses_satisfiable"] == "yes"
    assert claims["step_total"]["bound"] == "n <= 2" and claims["step_total"]["method"] == "witness"


@pytest.mark.parametrize("prover", [
    lambda: z3_claims.prove_total(2), lambda: z3_claims.prove_termination(2), lambda: z3_claims.prove_refinement(2),
    lambda: z3_claims.prove_jump_is_idle_ticks(2), lambda: z3_claims.prove_policy(2),
    lambda: z3_claims.prove_by_construction("fifo_order", 2), lambda: z3_claims.prove_placement(2),
    lambda: z3_claims.prove_worked_example("worked_example_2_static"),
], ids=["step_total", "termination_ranking", "abstraction_refinement", "jump_is_idle_ticks", "policy", "fifo_order",
        "every_job_completes_once", "worked_example"])
def test_every_kind_of_proof_checks_its_hypotheses(monkeypatch, prover):
    domain = z3_model.domain
    monkeypatch.setattr(z3_model, "domain", lambda *a, **k: domain(*a, **k) + [z3.BoolVal(False)])
    z3_model.reset_indicators()
    result = prover()
    assert result["status"] == "vacuous" and result["hypotheses"] == "no", result


def test_the_default_bounds_are_the_documented_ones():
    parser = argparse.ArgumentParser()
    prove_command.register(parser.add_subparsers())
    args = parser.parse_args(["prove"])
    assert (args.max_jobs, args.policy_jobs) == (prove_command.DEFAULT_MAX_JOBS, prove_command.DEFAULT_POLICY_JOBS) == (16, 16)
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "prove.md")
    with open(docs, encoding="utf-8") as handle:
        text = handle.read()
    assert "Defaults: `--max-jobs 16` (every per-job row for n = 1..16), `--policy-jobs 16`" in text


def test_every_chapter_check_uses_the_configured_arithmetic_solver(monkeypatch):
    seen = []
    monkeypatch.setattr(z3.Solver, "set", lambda self, *args, **keys: seen.append(args))
    z3_claims._solver()
    assert seen == [("arith.solver", z3_claims.ARITH_SOLVER)]
    seen.clear()
    monkeypatch.setattr(z3_claims, "ARITH_SOLVER", None)
    z3_claims._solver()
    assert seen == []  # Z3's default arithmetic solver


def test_the_reports_read_the_statuses_of_every_kind():
    """JUnit, SARIF and HTML: by construction, lemma, checked and a finding's refutation pass; a refuted validation
    row fails and carries the state, the field and both values."""
    from proofs.report import ci as ci_reports
    from proofs.report import html

    def row(claim, status, kind, cex=None):
        return {"claim": claim, "status": status, "kind": kind, "method": "m", "bound": "b",
                "hypotheses_satisfiable": "yes", "refuted_by": "no_jump", "seconds": 0.1, "cpu_seconds": 0.1,
                "counterexample": cex}

    disagreement = {"n": 4, "state": "schedule([...]) after 3 step(s)", "field": "busy", "spec": 1, "encoding": 2}
    rows = [row("fifo_order", "by construction", "construction"), row("lemma:x", "lemma", "lemma"),
            row("predicates match the registry", "checked", "validation"),
            row("finding:y", "refuted", "finding", {"call": "serve()", "breaks": "y"}),
            row("encoding matches spec.step", "refuted", "validation", disagreement)]
    report = {"verdict": z3_run.verdict(rows), "results": rows}
    assert report["verdict"] == "fail" and z3_run.exit_code(rows) == 1
    assert z3_run.verdict(rows[:4]) == "pass"  # a finding's refutation is its result
    xml = ci_reports.junit_xml("prove", report)
    assert 'failures="1"' in xml and "field: busy: the spec gives 1, the encoding 2" in xml
    log = ci_reports.sarif_log("prove", report)
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["encoding matches spec.step"]
    page = html.prove_page(report)
    assert "1 by construction, 1 lemmas, 1 checked against the spec, 1 findings" in page
    assert "field: busy: the spec gives 1, the encoding 2" in page
