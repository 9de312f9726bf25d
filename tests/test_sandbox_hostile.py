"""Hostile targets against the sandbox, each with the verdict a user expects (tests/corpus/hostile, tests/corpus/serving/hostile).

- ``pickled_object``: a wrong makespan, and an extra key holding an object whose unpickling
  would switch the harness's judge off: FAIL with the right invariant, and the object's code
  never runs (before: PASS, the code ran in the harness on every call);
- ``extra_object_key``: a correct scheduler whose result has extra keys holding objects: PASS,
  each dropped key noted in the text report and the JSON (before: FAIL well_typed,
  ModuleNotFoundError);
- ``hash_seed``: wrong when hash("tie-break") is odd: FAIL deterministic whatever the
  harness's own PYTHONHASHSEED (before: PASS under 1, another invariant under 2), saved with
  two seeds that replay repeats under a third.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from proofs.cli.main import main

CORPUS = pathlib.Path(__file__).parent / "corpus"
MODELS = {"chapter": (CORPUS / "hostile", "schedule"), "serving": (CORPUS / "serving" / "hostile", "serve")}
ROOT = pathlib.Path(__file__).parent.parent


def target(model: str, name: str) -> str:
    folder, function = MODELS[model]
    return f"{folder / (name + '.py')}:{function}"


def expected_of(model: str, name: str) -> str:
    text = (MODELS[model][0] / f"{name}.py").read_text()
    return re.search(r'^EXPECTED = "(\w+)"', text, re.M).group(1)


def verify(tmp_path, model, name, *extra):
    report = tmp_path / "report.json"
    code = main(["verify", target(model, name), "--model", model, "--seed", "0", "--examples", "30", "--budget", "60",
                 "--db", "none", "--save-dir", str(tmp_path / "saved"), "--json", str(report), *extra])
    return code, json.loads(report.read_text())


@pytest.mark.parametrize("model", MODELS)
def test_a_result_built_to_run_code_when_unpickled_runs_none_and_fails_with_the_right_invariant(
        model, tmp_path, monkeypatch, capsys):
    marker = tmp_path / "ran"
    monkeypatch.setenv("SCHEDCHECK_HOSTILE_MARKER", str(marker))
    code, report = verify(tmp_path, model, "pickled_object")
    out = capsys.readouterr().out
    assert not marker.exists(), marker.read_text()  # its code ran nowhere: not in the harness, not in a child
    assert code == 1 and report["verdict"] == "fail", out
    assert report["counterexamples"][0]["property"] == expected_of(model, "pickled_object") == "metrics_consistent"
    assert [d["key"] for d in report["dropped"]] == ["result['debug']"]


@pytest.mark.parametrize("model", MODELS)
def test_extra_keys_holding_objects_are_dropped_noted_and_never_a_failure(model, tmp_path, capsys):
    code, report = verify(tmp_path, model, "extra_object_key")
    out = capsys.readouterr().out
    assert code == 0 and report["verdict"] == "pass" == expected_of(model, "extra_object_key"), out
    records = "completed" if model == "chapter" else "requests"
    keys = {d["key"]: d["type"] for d in report["dropped"]}
    assert keys == {
        "result['engine']": "schedcheck_target_extra_object_key.EngineHandle",
        "result['trace'][*]['batch']": "schedcheck_target_extra_object_key.Batch",
        f"result['{records}'][*]['handle']": "schedcheck_target_extra_object_key.Batch",
    }
    assert all(d["calls"] > 0 for d in report["dropped"])
    lines = [line for line in out.splitlines() if line.startswith("dropped ")]
    assert len(lines) == 3 and all("an extra key, never compared" in line for line in lines), out
    assert "dropped result['engine'] (a schedcheck_target_extra_object_key.EngineHandle, not plain data)" in out


def _cli(tmp_path, hash_seed, *argv):
    """The CLI in a fresh harness with its own PYTHONHASHSEED (a fork would share this process's)."""
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    run = subprocess.run([sys.executable, "-m", "proofs.cli.main", *argv], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=600)
    return run.returncode, run.stdout, run.stderr


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("harness_seed", [1, pytest.param(2, marks=pytest.mark.slow)])  # hash("tie-break") is even under 1, odd under 2 (2: the slow run)
def test_a_result_that_depends_on_the_hash_seed_fails_deterministic_whatever_the_harness_seed(
        model, harness_seed, tmp_path):
    saved = tmp_path / "saved"
    code, out, err = _cli(tmp_path, harness_seed, "verify", target(model, "hash_seed"), "--model", model, "--seed", "0",
                          "--examples", "30", "--budget", "90", "--db", "none", "--save-dir", str(saved))
    assert code == 1 and out.startswith("FAIL deterministic "), out + err
    assert expected_of(model, "hash_seed") == "deterministic"
    (path,) = saved.glob("*.json")
    cex = json.loads(path.read_text())
    assert cex["property"] == "deterministic" and len(cex["hash_seeds"]) == 2 and harness_seed in cex["hash_seeds"]
    # replay repeats it exactly, in the two saved interpreters, whatever the replaying harness's own seed
    code, out, err = _cli(tmp_path, 3, "replay", str(path))
    seeds = cex["hash_seeds"]
    assert code == 1 and out.startswith("FAIL deterministic "), out + err
    assert f"PYTHONHASHSEED={seeds[0]} and PYTHONHASHSEED={seeds[1]}" in out
