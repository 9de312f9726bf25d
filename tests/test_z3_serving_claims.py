"""The serving model's Z3 ledger: every encoded row proved, each refuted by its mutant, vacuity detected, the report's shape.

The fast tests run the rows at n = 1 in-process; the whole ledger at the default
bound and every mutant are ``slow``.
"""

import argparse
import json
import pathlib
from functools import partial

import pytest
import z3

from proofs.cli import main as cli
from proofs.smt import serving_claims as C
from proofs.smt import serving_model as M
from proofs.smt import run as R
from spec.serving import STATE_INVARIANTS


def run_rows(n, mutant=None, only=None):
    out = {}
    for claim in C.claims(n, mutant):
        if only is None or claim.claim in only:
            out[claim.claim] = claim.run()
    return out


@pytest.fixture(scope="module")
def ledger_n1():
    return run_rows(1)


@pytest.mark.slow
def test_every_encoded_row_passes_at_n1_and_the_rest_are_unknown(ledger_n1):
    for name, result in ledger_n1.items():
        if name in M.NOT_ENCODED:
            assert result["status"] == "unknown", name
        elif name == C.FINDING:
            assert result["status"] == "refuted", result  # the conjecture it names is refuted: its result
        elif name in C.conformance.ROWS + (C.SC.STEP_ROW, C.SC.PREDICATE_ROW):
            assert result["status"] == "checked", (name, result)
        else:
            assert result["status"] == "proved", (name, result)  # the ledger then reads lemma / by construction
            assert result["hypotheses"] == "yes", name


def test_the_ledger_covers_every_serving_state_invariant():
    names = {c.claim for c in C.claims(1)}
    assert {inv.name for inv in STATE_INVARIANTS} <= names
    assert {"step_total", "lemma:blocks_for_axioms", "termination_ranking", "rule_needed:feasible_pool",
            "rule_needed:feasible_budget"} <= names


def test_unencoded_invariants_are_never_counted_as_proved(monkeypatch):
    # Every state invariant is encoded now; the mechanism still stands for a new one that is not.
    monkeypatch.setitem(M.NOT_ENCODED, "kv_exclusive", "an invariant without an encoding")
    claims = [R.Claim(name, "not encoded", "-", partial(C._not_encoded, name)) for name in M.NOT_ENCODED]
    rows = R.run_claims(claims, budget=30, workers=1)
    assert rows and all(r["status"] == "unknown" for r in rows)
    assert R.exit_code(rows) == 2


def test_every_row_names_a_mutant_and_every_mutant_is_used():
    claims = C.claims(1)
    assert all(c.refuted_by in M.MUTANTS for c in claims if c.claim not in M.NOT_ENCODED)
    used = {c.refuted_by for c in claims}
    assert set(M.MUTANTS) - used <= {"drop_feasible_budget"}, set(M.MUTANTS) - used


@pytest.mark.slow
def test_rule_needed_rows_show_a_concrete_run_that_never_ends(ledger_n1):
    for rule in C.RULES:
        result = ledger_n1[f"rule_needed:{rule}"]
        cex = result["counterexample"]
        assert result["status"] == "proved" and cex["without_rule"] == rule and cex["call"].startswith("serve(")
        requests, config = _call(cex["call"])
        import spec.serving as S

        assert not S.is_valid(requests, config), "the run breaks no domain rule"
        state = _unchecked_initial(requests, config)  # spec.serving.step itself, outside the domain
        seen = []
        for _ in range(12):
            state = S.step(state)
            seen.append((state.waiting, state.running))
        assert not S.is_terminal(state) and seen[-1] == seen[-2] == seen[-3], "the run does not loop"


def _unchecked_initial(requests, config):
    from spec.serving.domain import Config, Request, fcfs_key
    from spec.serving.state import Ledger, Progress, State

    parsed = sorted((Request(r["id"], r["arrival"], r["prompt"], r["output"], r.get("abort")) for r in requests),
                    key=fcfs_key)
    cfg = Config(*(config[k] for k in ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill")))
    return State(tuple(parsed), cfg, 0, tuple(Progress(r) for r in parsed), (), (), (), Ledger(), None)


def _call(text):
    inner = text[len("serve("):-1]
    requests, config = eval(f"({inner})", {"True": True, "False": False})  # our own printed literal
    return requests, config


def test_an_unsatisfiable_domain_makes_rows_vacuous_never_proved(monkeypatch):
    original = M.domain
    monkeypatch.setattr(M, "domain", lambda inp, mutant=None: original(inp, mutant) + [z3.BoolVal(False)])
    results = run_rows(1, only={"slot_bound", "kv_capacity", "step_total", "termination_ranking", "no_duplicate_active"})
    for name, result in results.items():
        assert result["status"] == "vacuous", (name, result)


@pytest.mark.parametrize("mutant,row", [("admit_while_le_seqs", "slot_bound"), ("budget_plus_one", "token_budget"),
                                        ("contradictory_step", "step_total")])
def test_a_mutant_refutes_its_row_with_a_concrete_run(mutant, row):
    n = 2 if mutant == "admit_while_le_seqs" else 1
    result = run_rows(n, mutant, only={row})[row]
    assert result["status"] == "refuted", result
    assert result["counterexample"]["call"].startswith("serve(")


@pytest.mark.parametrize("row", ["running_first", "work_conserving"])
def test_the_fcfs_pass_rows_are_proved_at_n2_and_refuted_by_their_mutant(row):
    proved = run_rows(2, only={row})[row]
    assert proved["status"] == "proved" and proved["hypotheses"] == "yes", proved
    mutant = C.REFUTED_BY[row]
    refuted = run_rows(2, mutant, only={row})[row]
    assert refuted["status"] == "refuted", refuted
    cex = refuted["counterexample"]
    assert cex["breaks"] == row and cex["call"].startswith("serve(") and cex["after_steps"] >= 1, cex
    import spec.serving as S

    assert S.is_valid(*_call(cex["call"])), "the run is outside the domain"


@pytest.mark.parametrize("row", sorted(C.CASES))
def test_a_proof_by_cases_is_proved_and_a_split_that_misses_a_case_is_rejected(row, monkeypatch):
    """Each split row is proved at n = 3 by cases; with one case of one part left out (a split whose guards do not
    cover every state) the row is not proved but ``unknown``, the split rejected."""
    proved = C.prove_inductive(row, 3)
    assert proved["status"] == "proved" and "by cases" in proved["detail"], proved
    split = C.CASES[row]

    def missing_case(*args):
        parts = split(*args)
        at = next(k for k, (_, cases) in enumerate(parts) if len(cases) > 1)  # a part with a real split
        part, cases = parts[at]
        return parts[:at] + [(part, cases[1:])] + parts[at + 1:]

    monkeypatch.setitem(C.CASES, row, missing_case)
    rejected = C.prove_inductive(row, 3)
    assert rejected["status"] == "unknown" and "rejected" in rejected["detail"], rejected


def test_a_case_that_fails_is_a_counterexample_not_a_rejection():
    """Under the row's mutant the split still covers every state, and a case's model is a counterexample: the row is
    refuted by a concrete run, as without the split."""
    for row in sorted(C.CASES):
        result = C.prove_inductive(row, 2, C.REFUTED_BY[row])
        assert result["status"] == "refuted" and result["counterexample"]["breaks"] == row, result


def test_the_default_bound_is_the_documented_one():
    from proofs.cli import prove

    n = prove.DEFAULT_MAX_REQUESTS
    claims = {c.claim: c for c in C.claims(n)}
    bounds = {name: c.bound for name, c in claims.items()}
    assert bounds["termination"] == bounds["termination_ranking"] == bounds["lemma:ranks"] == f"n <= {n}"
    for name, cap in C.CAPPED.items():
        assert bounds[C.row_name(name)] == (f"n <= {cap} (cost)" if cap < n else f"n <= {n}"), name
        if cap < n and name in C.ANY_N:  # what a consecution at n assumes of it, its any-n row justifies
            assert C.ANY_N[name] in claims["termination_ranking"].depends or name != "kv_capacity"
    for name in ("running_first", "work_conserving", "slot_bound", "token_budget", "kv_capacity"):
        assert bounds[name] == f"n <= {n}", (name, bounds[name])  # issue 22: every row at n <= 8
    assert "kv_capacity" in claims["termination"].depends  # the bounded row itself, at n
    for name in C.POLICY_ROWS:  # assumed by no consecution, so no row waits on them (step_total included)
        assert not any(name in c.depends for c in claims.values() if c.claim != C.LONE), name  # LONE assumes all at n = 1
        assert not any(name in support for row, support in C.SUPPORT.items() if row != name), name
    docs = (pathlib.Path(__file__).parent.parent / "docs" / "prove.md").read_text()
    assert f"The default is `--max-requests {n}`" in docs


def test_the_step_names_are_defined_one_at_a_time():
    for n in (1, 2, 3):
        inp = M.make_inputs(n)
        names = M.step_terms(inp, M.make_vars(inp, "0"), tag="x").names
        assert names and C._triangular(names), n
        assert len({d.arg(0).get_id() for d in names}) == len(names), "two names share a constant"
        assert not C._triangular(names[::-1]), "a definition that reads a later name must be refused"
        assert not C._triangular(names + names[:1]), "a name defined twice must be refused"


def test_cli_json_shape_and_exit_code(tmp_path, capsys):
    path = tmp_path / "serving.json"
    code = cli.main(["prove", "--model", "serving", "--max-requests", "1", "--claims", "blocks_for",
                     "--json", str(path), "--no-seconds"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[0] == "schedcheck prove  engine=z3  model=serving"
    report = json.loads(path.read_text())
    assert report["verdict"] == "pass"
    assert [r["claim"] for r in report["results"]] == ["encoding matches spec.step", "folds match spec.step",
                                                       "predicates match the registry",
                                                       "caching encoding matches spec.step",
                                                       "caching predicates match the registry",
                                                       "lemma:blocks_for_axioms"]  # the validation runs every time
    for r in report["results"]:
        assert set(r) == {"claim", "status", "kind", "method", "bound", "hypotheses_satisfiable", "refuted_by",
                          "seconds", "cpu_seconds", "counterexample"}
    assert [(r["status"], r["hypotheses_satisfiable"]) for r in report["results"]] == [
        ("checked", "-"), ("checked", "-"), ("checked", "-"), ("checked", "-"), ("checked", "-"), ("lemma", "yes")]


def test_cli_a_mutant_of_the_other_model_is_a_usage_error(capsys):
    assert cli.main(["prove", "--model", "serving", "--mutant", "admit_one_per_tick"]) == 2
    assert "not a mutant of the serving model" in capsys.readouterr().err
    assert cli.main(["prove", "--model", "serving", "--max-requests", "0"]) == 2
    assert capsys.readouterr().err == "schedcheck: error: --max-requests=0: expected an int >= 1\n"


def test_the_serving_gate_runs_prove_for_the_serving_model(monkeypatch, tmp_path, capsys):
    seen = []

    def handler(args):
        seen.append(args.model)
        rows = [{"claim": "slot_bound", "status": "proved", "method": "inductive", "bound": "n <= 5", "seconds": 0.1,
                 "counterexample": None}]
        pathlib.Path(args.json).write_text(json.dumps({"verdict": "pass", "results": rows}))
        return 0

    def build_parser(original=cli.build_parser):
        parser = original()
        (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        del commands.choices["prove"]
        prove = commands.add_parser("prove")
        prove.add_argument("--budget", type=float)
        prove.add_argument("--model", default="chapter")
        prove.add_argument("--json")
        prove.set_defaults(handler=handler)
        return parser

    monkeypatch.setattr(cli, "build_parser", build_parser)
    args = cli.build_parser().parse_args(["gate", "--model", "serving", "--skip", "verify", "--out",
                                          str(tmp_path / "reports"), "--no-seconds"])
    args.run_cli = lambda argv: cli.main(argv)
    code = args.handler(args)
    out = capsys.readouterr().out
    assert seen == ["serving"], out
    assert "prove              spec    proved" in out, out
    # with verify skipped no step checked the target: the gate is incomplete whatever prove says (tests/test_gate.py)
    assert code == 2 and "gate: incomplete (exit 2): no step checked the target" in out, out


# --- slow: the whole ledger and every mutant -------------------------------------------------


@pytest.mark.slow
def test_the_default_ledger_proves_every_encoded_row(tmp_path, capsys):
    path = tmp_path / "serving.json"
    code = cli.main(["prove", "--model", "serving", "--json", str(path), "--no-seconds"])
    report = json.loads(path.read_text())
    for r in report["results"]:
        if r["claim"] in M.NOT_ENCODED:
            assert r["status"] == "unknown"
        else:
            assert R.passes(r), r
    assert code == (2 if M.NOT_ENCODED else 0)


def test_the_finding_is_a_real_run_of_spec_serving():
    result = C.prove_finding()
    assert result["status"] == "refuted", result  # the conjecture is refuted: the finding
    import spec.serving as S

    requests, config = _call(result["counterexample"]["call"])
    assert S.is_valid(requests, config)
    assert max(r["preemptions"] for r in S.run(requests, config)["requests"]) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("claim", [c.claim for c in C.claims(1) if c.claim not in M.NOT_ENCODED])
def test_every_row_is_refuted_by_its_mutant(claim):
    mutant = next(c.refuted_by for c in C.claims(1) if c.claim == claim)
    n = 3 if claim in ("fcfs_admission", "no_admission_after_preemption") else 2
    result = run_rows(n, mutant, only={claim})[claim]
    expected = "vacuous" if claim in C.BY_CONSTRUCTION else "unknown" if claim == C.FINDING else "refuted"
    assert result["status"] == expected, (claim, mutant, result)  # a finding's refutation is no longer found


def test_a_row_is_never_bounded_above_what_it_assumes(monkeypatch):
    """An induction at n needs what it assumes at n: capping a lemma lowers every row that assumes it (no any-n row
    covers a lemma), and the capped row's bound is stated as it is."""
    monkeypatch.setitem(C.CAPPED, "ranks", 5)
    bounds = C.caps(8)
    assert bounds["ranks"] == 5
    for name, support in C.SUPPORT.items():
        if "ranks" in support:
            assert bounds[name] <= 5, name
    for name, support in C.SUPPORT.items():  # transitively: a row is bounded by everything it assumes, not covered
        assert all(bounds[name] <= bounds[a] for a in support if a not in C.ANY_N), name
    claims = {c.claim: c for c in C.claims(8)}
    assert claims["fcfs_admission"].bound == "n <= 5 (cost)" and claims["lemma:ranks"].bound == "n <= 5 (cost)"
