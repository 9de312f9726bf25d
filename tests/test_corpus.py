"""The harness tells the buggy corpus from the correct one: every bug caught, by the right name.

Each file in tests/corpus/buggy/ has one bug and names, in EXPECTED, the invariant it
breaks; `schedcheck verify` must fail it with that invariant first.  The schedulers in
tests/corpus/correct/ were written independently of impl/ and must pass, as must impl.
"""

import json
import pathlib
import re

import pytest

import spec
from proofs.cli.main import main
from proofs.counterexample import parse_input_repr

CORPUS = pathlib.Path(__file__).parent / "corpus"
BUGGY = sorted(p for p in (CORPUS / "buggy").glob("*.py") if p.name != "__init__.py")
CORRECT = sorted(p for p in (CORPUS / "correct").glob("*.py") if p.name != "__init__.py")


def expected_of(path: pathlib.Path) -> str:
    return re.search(r'^EXPECTED = "(\w+)"', path.read_text(), re.M).group(1)


def verify(tmp_path, target, *extra):
    report = tmp_path / "report.json"
    code = main([
        "verify", target, "--seed", "0", "--budget", "40", "--json", str(report),
        "--db", str(tmp_path / "db"), "--save-dir", str(tmp_path / "saved"), *extra,
    ])
    return code, json.loads(report.read_text())


def test_the_corpus_is_big_enough():
    assert len(BUGGY) >= 25 and len(CORRECT) >= 3


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.stem)
def test_every_buggy_scheduler_is_caught_with_the_right_invariant(tmp_path, path, capsys):
    code, report = verify(tmp_path, f"{path}:schedule")
    assert code == 1, capsys.readouterr().out
    assert report["verdict"] == "fail"
    first = report["counterexamples"][0]
    assert first["property"] == expected_of(path), capsys.readouterr().out
    assert first["input_repr"].startswith("schedule(")
    # a validation counterexample is a call outside the domain; any other is a call inside it
    if first["property"] != "signature" and first["check"] in ("validation", "conformance", "deterministic"):
        call = parse_input_repr(first["input_repr"])
        assert spec.is_valid(*call) == (first["check"] != "validation"), first


@pytest.mark.parametrize("path", CORRECT, ids=lambda p: p.stem)
def test_independent_correct_schedulers_pass(tmp_path, path, capsys):
    code, report = verify(tmp_path, f"{path}:schedule", "--examples", "200")
    assert code == 0, capsys.readouterr().out
    assert report["verdict"] == "pass" and report["target"] == f"{path}:schedule" and report["counterexamples"] == []
    assert report["bounds"]["jobs"][1] > 32  # the search tried inputs larger than a 32-entry queue


def test_our_impl_passes_including_the_stateful_test(tmp_path, capsys):
    code, report = verify(tmp_path, "impl:schedule", "--examples", "200")
    assert code == 0, capsys.readouterr().out
    assert report["verdict"] == "pass"
