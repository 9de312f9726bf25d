"""The mutation score of the harness on impl/ is recorded (docs/mutation.md) and guarded.

The full campaign (``schedcheck mutation-score``, minutes) is not run here.  What runs
here: the recorded results must meet the recorded score, a fresh results file (if one
was written to .schedcheck/mutation.json) must too, and the killer must kill three
hand-made mutants of impl/, each in a copy of impl/."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDED = os.path.join(ROOT, "docs", "mutation-results.json")
FRESH = os.path.join(ROOT, ".schedcheck", "mutation.json")


def recorded_score() -> float:
    with open(os.path.join(ROOT, "docs", "mutation.md")) as handle:
        match = re.search(r"^Recorded mutation score: ([0-9.]+)%", handle.read(), re.M)
    assert match, "docs/mutation.md does not state 'Recorded mutation score: N%'"
    return float(match.group(1))


def check(path: str) -> None:
    from proofs.cli.mutation import score

    with open(path) as handle:
        figures = json.load(handle)
    computed = score(figures["killed"], figures["survived"], figures["timeout"])
    assert computed == figures["score"], f"{path}: score {figures['score']} does not follow from its counts"
    assert figures["score"] >= recorded_score(), (
        f"{path}: mutation score {figures['score']}% is below the recorded {recorded_score()}%; "
        f"survivors: {figures['survivors']}"
    )


def test_the_recorded_results_meet_the_recorded_score():
    check(RECORDED)


@pytest.mark.skipif(not os.path.exists(FRESH), reason="no fresh results: run `schedcheck mutation-score` first")
def test_a_fresh_run_meets_the_recorded_score():
    check(FRESH)


MUTANTS = {
    "admits_one_too_many": ("scheduler.py", "len(self._active) < self.slots", "len(self._active) <= self.slots"),
    "finishes_one_tick_late": ("scheduler.py", "finish = tick + tokens", "finish = tick + tokens + 1"),  # schedule's
    "accepts_zero_slots": ("validation.py", "slots < 1:", "slots < 0:"),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_killer_kills_a_hand_made_mutant(tmp_path, name):
    filename, old, new = MUTANTS[name]
    shutil.copytree(os.path.join(ROOT, "impl"), tmp_path / "impl", ignore=shutil.ignore_patterns("__pycache__"))
    source = (tmp_path / "impl" / filename).read_text()
    assert source.count(old) == 1, f"impl/{filename} changed: the mutant {name} no longer applies"
    (tmp_path / "impl" / filename).write_text(source.replace(old, new))
    command = [sys.executable, "-m", "proofs.cli.main", "verify", "impl:schedule", "--budget", "30", "--seed", "0",
               "--db", "none", "--examples", "50", "--save-dir", str(tmp_path / "saved")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 1, f"the mutant {name} survived:\n{run.stdout}{run.stderr}"
    assert run.stdout.startswith("FAIL "), run.stdout


def test_a_harness_error_is_not_a_kill(tmp_path):
    from proofs.cli.mutation import HARNESS_ERROR, harness_errors, killer_source, reclassify, score

    errors = tmp_path / "harness-errors.txt"
    killer = tmp_path / "test_killer.py"
    killer.write_text(killer_source(-1, 0, 10, str(errors)))  # --budget -1: verify exits 2 before any search
    env = dict(os.environ, PYTHONPATH=ROOT, MUTANT_UNDER_TEST="impl.scheduler.x_step__mutmut_7")
    run = subprocess.run([sys.executable, "-m", "pytest", str(killer), "-q", "-p", "no:cacheprovider"],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr  # the test does not fail, so mutmut does not count a kill
    assert harness_errors(str(errors)) == {"impl.scheduler.x_step__mutmut_7"}
    statuses = {"killed": ["a", "impl.scheduler.x_step__mutmut_7"], "survived": ["b"]}
    moved = reclassify(statuses, harness_errors(str(errors)))
    assert moved == {"killed": ["a"], "survived": ["b"], HARNESS_ERROR: ["impl.scheduler.x_step__mutmut_7"]}
    assert statuses["killed"] == ["a", "impl.scheduler.x_step__mutmut_7"]  # the caller's dict is not modified
    assert score(len(moved["killed"]), len(moved["survived"]), 0) == 50.0
    assert harness_errors(str(tmp_path / "absent.txt")) == set()
