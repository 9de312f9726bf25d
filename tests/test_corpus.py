"""The harness tells the buggy corpus from the correct one: every bug caught, by the right name.

Each file in tests/corpus/buggy/ has one bug and names, in EXPECTED, the invariant it
breaks; `schedcheck verify` must fail it with that invariant first.  The schedulers in
tests/corpus/correct/ were written independently of impl/ and must pass, as must impl.
The files in tests/corpus/not_a_target/ name something that is not a function of the
contract's shape: nothing can be called, so no counterexample exists, and verify must
refuse them as a usage error (exit 2, one line naming EXPECTED), not fail them.
"""

import json
import pathlib

import pytest

import spec
from proofs.cli.main import main
from proofs.counterexample import parse_input_repr
from tests.corpus_names import also_of, expected_of

pytestmark = pytest.mark.slow  # a campaign: `python -m pytest -n 2 -m slow` (README)

CORPUS = pathlib.Path(__file__).parent / "corpus"
BUGGY = sorted(p for p in (CORPUS / "buggy").glob("*.py") if p.name != "__init__.py")
CORRECT = sorted(p for p in (CORPUS / "correct").glob("*.py") if p.name != "__init__.py")
NOT_A_TARGET = sorted(p for p in (CORPUS / "not_a_target").glob("*.py") if p.name != "__init__.py")
FUNCTION = {"engine_class.py": "Engine"}  # the name each not_a_target file is checked by (default schedule)


# The outcome of a campaign must not depend on the machine's speed or load: the seed and the examples are fixed, the
# budget is a safety net far above the time the planned checks take on 2 quiet cores (seconds: they end when done,
# not at the budget), and a call gets 10 s (not 1 s) before it counts as a hang, except where a hang or a death is
# the bug under test, which shows whatever the limit.
SAFETY_BUDGET = "600"
LOADED_CALL_SECONDS = "10"


def verify(tmp_path, target, *extra, hang_bug=False):
    report = tmp_path / "report.json"
    code = main([
        "verify", target, "--seed", "0", "--budget", SAFETY_BUDGET, "--json", str(report),
        "--db", str(tmp_path / "db"), "--save-dir", str(tmp_path / "saved"), *extra,
        *([] if hang_bug else ["--call-timeout", LOADED_CALL_SECONDS]),
    ])
    return code, json.loads(report.read_text())


def test_the_corpus_is_big_enough():
    assert len(BUGGY) >= 25 and len(CORRECT) >= 3


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.stem)
def test_every_buggy_scheduler_is_caught_with_the_right_invariant(tmp_path, path, capsys):
    code, report = verify(tmp_path, f"{path}:schedule", hang_bug=expected_of(path) == "termination")
    assert code == 1, capsys.readouterr().out
    assert report["verdict"] == "fail"
    first = report["counterexamples"][0]
    assert first["property"] in (expected_of(path), *also_of(path)), capsys.readouterr().out
    assert first["input_repr"].startswith("schedule(")
    # a validation counterexample is a call outside the domain; any other is a call inside it
    if first["property"] != "signature" and first["check"] in ("validation", "conformance", "deterministic"):
        call = parse_input_repr(first["input_repr"])
        assert spec.is_valid(*call) == (first["check"] != "validation"), first


@pytest.mark.parametrize("path", CORRECT, ids=lambda p: p.stem)
def test_independent_correct_schedulers_pass(tmp_path, path, capsys):
    code, report = verify(tmp_path, f"{path}:schedule", "--examples", "200")
    assert code == 0, capsys.readouterr().out
    # the richer report: besides the old keys, how far every planned check got (all of them to the end)
    checks = report["checks"]
    assert report["verdict"] == "pass" and report["target"] == f"{path}:schedule" and report["counterexamples"] == []
    assert set(report) <= {"verdict", "target", "seconds", "counterexamples", "checks", "calls", "bounds", "statistics",
                           "corners", "flaky"}  # a flaky failure is logged, not counted
    assert [c["check"] for c in checks] == ["replay", "validation", "bulk", "conformance", "deterministic",
                                            "corrupted_validation"]
    assert all(c["finished"] and c["stopped"] == "" and c["unit"] == "calls" for c in checks), checks
    planned = {c["check"]: c["planned"] for c in checks}
    # deterministic: 7 calls in the harness's interpreter and one per fresh interpreter (other hash seeds), per example
    assert planned["conformance"] == 200 and planned["bulk"] == 800
    assert planned["deterministic"] == 9 * 12 and planned["corrupted_validation"] == 80
    assert all(0 < c["tried"] for c in checks if c["check"] != "replay")
    assert report["bounds"]["jobs"][1] > 32  # the search tried inputs larger than a 32-entry queue


def test_our_impl_passes_including_the_stateful_test(tmp_path, capsys):
    code, report = verify(tmp_path, "impl:schedule", "--examples", "200")
    assert code == 0, capsys.readouterr().out
    assert report["verdict"] == "pass"
    assert report["checks"][-1]["check"] == "stateful" and report["checks"][-1]["unit"] == "programs"
    assert all(c["finished"] for c in report["checks"]), report["checks"]


@pytest.mark.parametrize("path", NOT_A_TARGET, ids=lambda p: p.stem)
def test_a_target_of_the_wrong_shape_is_a_usage_error_not_a_counterexample(tmp_path, path, capsys):
    report = tmp_path / "report.json"
    code = main(["verify", f"{path}:{FUNCTION.get(path.name, 'schedule')}", "--seed", "0", "--budget", "40",
                 "--json", str(report), "--db", "none", "--save-dir", str(tmp_path / "saved")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and expected_of(path) in err, err
    assert "schedule(jobs, slots, continuous)" in err  # the hint: what a target must be
    assert not report.exists() and not (tmp_path / "saved").exists()  # no made-up counterexample saved
