"""schedcheck replay judges a saved counterexample the way it was found, and never calls a failing input a pass."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREEMPTS_OLDEST = os.path.join(ROOT, "tests", "corpus", "serving", "buggy", "preempts_oldest.py") + ":serve"
# found by `schedcheck verify --model serving tests/corpus/serving/buggy/preempts_oldest.py:serve --seed 0`
REQUESTS = [[0, 0, 1, 9], [1, 1, 1, 1], [2, 1, 1, 8], [3, 1, 1, 2], [4, 1, 1, 2], [5, 1, 1, 3]]
CONFIG = {"max_seqs": 3, "token_budget": 3, "block_size": 2, "num_blocks": 9, "chunked_prefill": True}


def saved(tmp_path, **fields):
    """Write a counterexample to preempt_newest, as verify saves it, with ``fields`` added."""
    requests = [dict(zip(("id", "arrival", "prompt", "output"), r)) for r in REQUESTS]
    data = {"model": "serving", "property": "preempt_newest", "engine": "hypothesis", "check": "conformance",
            "input": {"requests": requests, "config": CONFIG}, "input_repr": "", "message": "", "rule": "",
            "target": PREEMPTS_OLDEST} | fields
    path = tmp_path / "cex.json"
    path.write_text(json.dumps(data))
    return str(path)


def replay(*args):
    return subprocess.run([sys.executable, "-m", "proofs.cli.main", "replay", *args],
                          capture_output=True, text=True, timeout=120)


def test_a_counterexample_found_under_fcfs_fails_again(tmp_path):
    run = replay(saved(tmp_path, policy="fcfs"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.startswith("FAIL preempt_newest"), run.stdout


def test_replay_judges_with_the_policy_it_was_found_under(tmp_path):
    run = replay(saved(tmp_path, policy="none"))  # the victim rule is FCFS's: no policy, no violation
    assert run.returncode == 0 and run.stdout.startswith("PASS"), run.stdout + run.stderr
    forced = replay(saved(tmp_path, policy="none"), "--policy", "fcfs")
    assert forced.returncode == 1 and forced.stdout.startswith("FAIL preempt_newest"), forced.stdout + forced.stderr


def test_an_input_that_now_fails_another_way_is_not_a_pass(tmp_path):
    run = replay(saved(tmp_path, property="kv_exact", policy="fcfs"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.startswith("# the counterexample to kv_exact no longer breaks it, but breaks preempt_newest")


def test_an_unknown_policy_exits_2_with_one_line(tmp_path):
    run = replay(saved(tmp_path), "--policy", "lifo")
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "lifo" in run.stderr, run.stderr
