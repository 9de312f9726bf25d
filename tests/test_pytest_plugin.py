"""`pytest --schedcheck TARGET`: one test item per invariant, failing where the harness finds a counterexample."""

import importlib.metadata
import os
import pathlib
import subprocess
import sys

import pytest

import spec

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
NAMES = [inv.name for inv in spec.INVARIANTS] + ["signature"]


def entry_point_registered():
    return any(ep.name == "schedcheck" and ep.value == "proofs.pytest_plugin"
               for ep in importlib.metadata.entry_points(group="pytest11"))


def run_pytest(cwd, *args, autoload=False):
    """pytest in a fresh process in an empty folder (so only the plugin's items exist)."""
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", *args]
    if not autoload:  # load this checkout's plugin explicitly, and nothing from entry points twice
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        command[3:3] = ["-p", "proofs.pytest_plugin"]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=180)


def outcomes(output):
    """{test name: PASSED/FAILED} from pytest's -rA summary (skips are listed there without a node id)."""
    found = {}
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "::" in rest:
            found[rest.split("::")[-1].split(" ")[0]] = word
    return found


QUICK = ["--schedcheck-seed", "0", "--schedcheck-examples", "40", "--schedcheck-budget", "30"]


def test_a_buggy_scheduler_fails_the_invariant_it_breaks(tmp_path):
    target = f"{CORPUS / 'buggy' / 'admits_one_too_many.py'}:schedule"
    run = run_pytest(tmp_path, "--schedcheck", target, *QUICK)
    assert run.returncode == 1, run.stdout + run.stderr
    seen = outcomes(run.stdout)
    assert set(seen) == set(NAMES)
    assert seen["slot_bound"] == "FAILED" and seen["well_typed"] == "PASSED"
    # the failure shows the counterexample report and how to replay it
    assert "FAIL slot_bound  engine=hypothesis" in run.stdout and "expected slot0" in run.stdout
    assert "replay: schedcheck replay .schedcheck/counterexamples/" in run.stdout
    assert (tmp_path / ".schedcheck" / "counterexamples").is_dir()  # verify ran once, in this folder


def test_a_correct_scheduler_passes_every_item(tmp_path):
    target = f"{CORPUS / 'correct' / 'heap_queue.py'}:schedule"
    run = run_pytest(tmp_path, "--schedcheck", target, *QUICK)
    assert run.returncode == 0, run.stdout + run.stderr
    assert outcomes(run.stdout) == {name: "PASSED" for name in NAMES}
    assert f"{len(NAMES)} passed" in run.stdout


def test_a_run_cut_short_by_its_budget_passes_no_item(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\nimport impl\n\n\ndef schedule(jobs, slots, continuous):\n"
                    "    time.sleep(0.05)\n    return impl.schedule(jobs, slots, continuous)\n")
    run = run_pytest(tmp_path, "--schedcheck", f"{slow}:schedule", "--schedcheck-seed", "0",
                     "--schedcheck-budget", "3")
    assert run.returncode == 1, run.stdout + run.stderr
    assert set(outcomes(run.stdout).values()) == {"FAILED"}
    assert "incomplete (never a pass); --schedcheck-budget" in run.stdout and "conformance: tried" in run.stdout


def test_items_can_be_selected_and_sit_beside_the_suites_own_tests(tmp_path):
    (tmp_path / "test_own.py").write_text("def test_own():\n    assert True\n")
    target = f"{CORPUS / 'buggy' / 'admits_one_too_many.py'}:schedule"
    run = run_pytest(tmp_path, "--schedcheck", target, *QUICK, "-k", "slot_bound or test_own")
    assert run.returncode == 1, run.stdout + run.stderr
    assert outcomes(run.stdout) == {"test_own": "PASSED", "slot_bound": "FAILED"}
    assert f"1 failed, 1 passed, {len(NAMES) - 1} deselected" in run.stdout


def test_a_target_with_the_wrong_signature_cannot_run_and_fails_every_item(tmp_path):
    # a function with other parameters is a usage error of verify (exit 2), not a counterexample
    target = f"{CORPUS / 'not_a_target' / 'wrong_signature.py'}:schedule"
    run = run_pytest(tmp_path, "--schedcheck", target, *QUICK)
    assert run.returncode == 1, run.stdout + run.stderr
    assert set(outcomes(run.stdout).values()) == {"FAILED"}
    assert "could not run (exit 2)" in run.stdout
    assert "cannot be called as schedule(jobs, slots, continuous)" in run.stdout


def test_a_target_that_cannot_be_loaded_fails_every_item(tmp_path):
    run = run_pytest(tmp_path, "--schedcheck", "no/such/file.py:schedule", *QUICK)
    assert run.returncode == 1
    assert set(outcomes(run.stdout).values()) == {"FAILED"}
    assert "could not run (exit 2)" in run.stdout and "no such file" in run.stdout


def test_without_the_option_the_plugin_adds_nothing(tmp_path):
    run = run_pytest(tmp_path)
    assert run.returncode == 5  # no tests collected
    assert "schedcheck" in run_pytest(tmp_path, "--help").stdout


@pytest.mark.skipif(not entry_point_registered(), reason="the pytest11 entry point is not in the installed metadata yet")
def test_the_entry_point_loads_the_plugin(tmp_path):
    target = f"{CORPUS / 'correct' / 'heap_queue.py'}:schedule"
    run = run_pytest(tmp_path, "--schedcheck", target, *QUICK, "-k", "well_typed", autoload=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert outcomes(run.stdout) == {"well_typed": "PASSED"}
