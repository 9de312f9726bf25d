"""`schedcheck diff`: no difference between correct schedulers; a minimal, classified one otherwise."""

import json
import pathlib
import shutil
import subprocess
import sys

from proofs.cli.main import main
from proofs.search.differential import classify

ROOT = pathlib.Path(__file__).parent.parent
CORRECT = ROOT / "tests" / "corpus" / "correct"
LATE = ROOT / "tests" / "corpus" / "buggy" / "same_tick_arrival_admitted_late.py"


def diff(tmp_path, *args):
    report = tmp_path / "diff.json"
    code = main(["diff", *args, "--seed", "0", "--json", str(report)])
    return code, json.loads(report.read_text())


def test_two_correct_schedulers_do_not_differ(tmp_path, capsys):
    code, report = diff(tmp_path, f"{CORRECT / 'event_driven.py'}:schedule", f"{CORRECT / 'tick_by_tick.py'}:schedule", "--examples", "150", "--budget", "30")
    assert code == 0
    assert report["verdict"] == "no difference" and report["differences"] == []
    assert capsys.readouterr().out.startswith("SAME ")


def test_a_subtly_late_admission_is_a_minimal_regression(tmp_path, capsys):
    code, report = diff(tmp_path, f"{CORRECT / 'event_driven.py'}:schedule", f"{LATE}:schedule")
    assert code == 1
    (found,) = report["differences"]
    assert found["classification"] == "regression"
    assert found["old"]["broken"] == [] and found["new"]["broken"][0] == "continuous_backfills"
    assert found["input"] == {
        "jobs": [{"id": 0, "arrival": 0, "tokens": 2}, {"id": 1, "arrival": 1, "tokens": 1}],
        "slots": 2,
        "continuous": True,
    }
    out = capsys.readouterr().out
    assert out.startswith("DIFF regression") and "old      slot0" in out


def test_the_reverse_change_is_a_fix_and_exits_0(tmp_path, capsys):
    code, report = diff(tmp_path, f"{LATE}:schedule", f"{CORRECT / 'heap_queue.py'}:schedule")
    assert code == 0
    assert report["verdict"] == "fix"


def test_classification():
    assert classify([], ["slot_bound"]) == "regression"
    assert classify(["slot_bound"], []) == "fix"
    assert classify(["slot_bound"], ["slot_bound"]) == "both broken"
    assert classify([], []) == "both conform"
    assert classify(["slot_bound"], ["fifo_order"]) == "regression"


def test_base_revision_compares_the_working_tree_impl_with_a_commit(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(ROOT / "impl", repo / "impl", ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    run = lambda: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "proofs.cli.main", "diff", "--base", "HEAD", "--seed", "0", "--examples", "100", "--budget", "30"],
        cwd=repo, capture_output=True, text=True, timeout=120,
    )
    same = run()
    assert same.returncode == 0 and same.stdout.startswith("SAME impl:schedule@HEAD and impl:schedule")
    scheduler = repo / "impl" / "scheduler.py"
    scheduler.write_text(scheduler.read_text().replace("self._waiting[0][0] <= tick", "self._waiting[0][0] < tick or not self._active and self._waiting[0][0] <= tick"))
    changed = run()
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert changed.stdout.startswith("DIFF regression")
