"""Third-party schedulers from PyPI (nano-vllm, vidur) checked through the online protocol, and the harness fix they needed.

Each engine's tests run when its pinned package is installed (``pip install
'.[engines]'`` and ``pip install --no-deps -r examples/engines/requirements-no-deps.txt``)
and are skipped, saying so, otherwise.  The fixed scenarios' entries are derived by hand
from each engine's code (docs/engines.md walks through them); the short verify runs are
slow.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

import spec.serving as serving
from proofs.online.driver import EngineError, drive
from proofs.targets import load_callable, parse_target

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ENGINES = os.path.join(ROOT, "examples", "engines")
PACKAGES = {"nanovllm_npu": "nanovllmnpu", "nanovllm_fork": "nanovllm",
            "vidur_vllm": "vidur", "vidur_sarathi": "vidur", "vidur_orca": "vidur"}
INSTALL = "pip install '.[engines]' && pip install --no-deps -r examples/engines/requirements-no-deps.txt"


def adapter(name):
    """The adapter's ``make``, or a skip naming the package that is missing."""
    package = PACKAGES[name]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed (the engines extra: {INSTALL})")
    for needed in ("numpy", "xxhash") if package.startswith("nanovllm") else ():
        if importlib.util.find_spec(needed) is None:
            pytest.skip(f"{needed} is not installed (the engines extra: {INSTALL})")
    return load_callable(parse_target(os.path.join(ENGINES, f"{name}.py") + ":make"))


def config(max_seqs, budget, block_size, num_blocks, chunked=False):
    return {"max_seqs": max_seqs, "token_budget": budget, "block_size": block_size, "num_blocks": num_blocks,
            "chunked_prefill": chunked}


def entry(tick, scheduled=(), preempted=(), aborted=(), freed=(), allocated=(), finished=()):
    return {"tick": tick, "scheduled": [list(p) for p in scheduled], "preempted": list(preempted),
            "aborted": list(aborted), "freed": [[i, list(b)] for i, b in freed],
            "allocated": [[i, list(b)] for i, b in allocated], "finished": list(finished)}


def steps(engine, requests, count):
    """Add every request, then step ``count`` times; the entries and views (an engine without clock)."""
    for request in requests:
        engine.add_request(dict(request))
    return [(engine.step(), engine.view()) for _ in range(count)]


# -- the harness: a request preempted and re-admitted in one tick ----------------------


class Scripted:
    """An engine that answers each step with the next of ``entries``."""

    def __init__(self, entries):
        self.entries = list(entries)

    def add_request(self, request):
        pass

    def abort(self, request_id):
        pass

    def step(self):
        return self.entries.pop(0) if self.entries else None


REQUEUED = [{"id": 0, "arrival": 0, "prompt": 2, "output": 3}]
REQUEUED_CONFIG = config(1, 8, 2, 2)


def requeued_entries(freed_on_preemption=True):
    preempt_freed = [[0, [0]]] if freed_on_preemption else []
    return [
        {"scheduled": [[0, 2]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0]]], "finished": []},
        {"scheduled": [[0, 3]], "preempted": [0], "aborted": [], "freed": preempt_freed,
         "allocated": [[0, [0, 1]]], "finished": []},
        {"scheduled": [[0, 1]], "preempted": [], "aborted": [], "freed": [[0, [0, 1]]], "allocated": [],
         "finished": [0]},
    ]


def test_a_request_preempted_and_readmitted_in_one_tick_may_get_its_freed_blocks_back():
    result = drive(Scripted(requeued_entries()), REQUEUED, REQUEUED_CONFIG)
    assert "stopped" not in result
    assert serving.check(REQUEUED, REQUEUED_CONFIG, result, policy="none") == []
    assert result["recomputed_tokens"] == 2 and result["requests"][0]["preemptions"] == 1


def test_a_request_preempted_readmitted_and_finished_in_one_tick_gives_back_both_lists():
    requests = [{"id": 0, "arrival": 0, "prompt": 2, "output": 2}]
    entries = [
        {"scheduled": [[0, 2]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0]]], "finished": []},
        {"scheduled": [[0, 3]], "preempted": [0], "aborted": [], "freed": [[0, [0]], [0, [0, 1]]],
         "allocated": [[0, [0, 1]]], "finished": [0]},
    ]
    result = drive(Scripted(entries), requests, REQUEUED_CONFIG)
    assert "stopped" not in result
    assert serving.check(requests, REQUEUED_CONFIG, result, policy="none") == []


def test_a_preempted_request_that_keeps_its_blocks_is_still_a_leak():
    result = drive(Scripted(requeued_entries(freed_on_preemption=False)), REQUEUED, REQUEUED_CONFIG)
    assert result["stopped"]["invariant"] == "kv_exclusive" or result["stopped"]["invariant"] == "kv_exact"
    assert result["stopped"]["tick"] == 1


# -- nano-vllm -------------------------------------------------------------------------

PREFILL_FIRST = [{"id": 0, "arrival": 0, "prompt": 3, "output": 2}, {"id": 1, "arrival": 1, "prompt": 2, "output": 1}]
PREFILL_FIRST_CONFIG = config(2, 8, 2, 4)


@pytest.mark.parametrize("name", ["nanovllm_npu", "nanovllm_fork"])
def test_nanovllm_runs_a_prefill_only_batch_before_the_decodes(name):
    result = drive(adapter(name)(PREFILL_FIRST_CONFIG), PREFILL_FIRST, PREFILL_FIRST_CONFIG)
    assert result["trace"] == [
        entry(0, scheduled=[[0, 3]], allocated=[[0, [0, 1]]]),
        entry(1, scheduled=[[1, 2]], allocated=[[1, [2]]], freed=[[1, [2]]], finished=[1]),  # request 0 waits
        entry(2, scheduled=[[0, 1]], freed=[[0, [0, 1]]], finished=[0]),
    ]
    assert serving.check(PREFILL_FIRST, PREFILL_FIRST_CONFIG, result, policy="none") == []


PREEMPTION = [{"id": 0, "arrival": 0, "prompt": 2, "output": 3}, {"id": 1, "arrival": 0, "prompt": 1, "output": 3}]
PREEMPTION_CONFIG = config(2, 4, 2, 2)


def test_nanovllm_npu_preempts_the_newest_and_recomputes_it():
    result = drive(adapter("nanovllm_npu")(PREEMPTION_CONFIG), PREEMPTION, PREEMPTION_CONFIG)
    assert result["trace"] == [
        entry(0, scheduled=[[0, 2], [1, 1]], allocated=[[0, [0]], [1, [1]]]),
        entry(1, scheduled=[[0, 1]], preempted=[1], freed=[[1, [1]]], allocated=[[0, [1]]]),
        entry(2, scheduled=[[0, 1]], freed=[[0, [0, 1]]], finished=[0]),
        entry(3, scheduled=[[1, 2]], allocated=[[1, [1]]]),  # prompt 1 + 1 generated, recomputed
        entry(4, scheduled=[[1, 1]], allocated=[[1, [0]]], freed=[[1, [1, 0]]], finished=[1]),
    ]
    assert serving.check(PREEMPTION, PREEMPTION_CONFIG, result, policy="none") == []


def test_nanovllm_fork_keeps_a_preempted_sequence_in_running_then_crashes():
    engine = adapter("nanovllm_fork")(PREEMPTION_CONFIG)
    (first, _), (second, view) = steps(engine, PREEMPTION, 2)
    assert second["preempted"] == [1] and second["scheduled"] == [[0, 1]]
    assert 1 in view["waiting"] and 1 in view["running"]  # the bug: preempt() leaves it in running
    with pytest.raises(IndexError):
        engine.step()  # the decode pass appends to request 1's empty block table
    with pytest.raises(EngineError, match="IndexError"):
        drive(adapter("nanovllm_fork")(PREEMPTION_CONFIG), PREEMPTION, PREEMPTION_CONFIG)


def test_nanovllm_counts_max_num_seqs_per_batch_not_per_running_set():
    requests = [{"id": 0, "arrival": 0, "prompt": 1, "output": 2}, {"id": 1, "arrival": 0, "prompt": 1, "output": 1}]
    one = config(1, 2, 2, 2)
    result = drive(adapter("nanovllm_npu")(one), requests, one)
    assert result["trace"][1] == entry(1, scheduled=[[1, 1]], allocated=[[1, [1]]], freed=[[1, [1]]], finished=[1])
    assert "slot_bound" in {v.invariant for v in serving.check(requests, one, result, policy="none")}


# -- vidur -----------------------------------------------------------------------------

RESTART = [{"id": 0, "arrival": 0, "prompt": 1, "output": 5}]
RESTART_CONFIG = config(1, 5, 3, 2)


def test_vidur_vllm_preempts_with_a_full_pool_then_fails_its_own_assertion_on_the_recompute():
    engine = adapter("vidur_vllm")(RESTART_CONFIG)
    answers = [answer for answer, _ in steps(engine, RESTART, 5)]
    assert [a["scheduled"] for a in answers[:4]] == [[[0, 1]]] * 4
    assert answers[3]["allocated"] == [[0, [1]]]
    # tick 4: 5 tokens fit the 2 blocks it holds, but vLLM v0's rule wants one free block
    assert answers[4] == {"scheduled": [], "preempted": [0], "aborted": [], "finished": [],
                          "freed": [[0, [0, 1]]], "allocated": []}
    with pytest.raises(AssertionError):
        engine.step()  # Request.restart() does not reset the stage's token count


def test_vidur_sarathi_restarts_and_readmits_in_one_step_then_fails_its_own_assertion():
    engine = adapter("vidur_sarathi")(RESTART_CONFIG)
    answers = [answer for answer, _ in steps(engine, RESTART, 4)]
    assert [a["scheduled"] for a in answers] == [[[0, 1]]] * 4
    with pytest.raises(AssertionError):
        engine.step()


def test_vidur_orca_reserves_the_longest_request_for_every_request():
    requests = [{"id": 0, "arrival": 0, "prompt": 2, "output": 2}, {"id": 1, "arrival": 0, "prompt": 2, "output": 2}]
    two = config(2, 8, 2, 4)
    result = drive(adapter("vidur_orca")(two), requests, two)
    assert result["trace"][0] == entry(0, scheduled=[[0, 2]], allocated=[[0, [0, 1, 2, 3]]])
    assert result["stopped"]["invariant"] == "kv_exact"


def test_vidur_resets_its_global_ids_in_every_make():
    make = adapter("vidur_vllm")
    first = make(RESTART_CONFIG)
    first.add_request(dict(RESTART[0]))
    first.add_request(dict(RESTART[0], id=1))
    assert first._requests[1].id == 1
    second = make(RESTART_CONFIG)  # a fresh engine numbers its requests from 0 again
    second.add_request(dict(RESTART[0]))
    assert second._requests[0].id == 0


# -- the harness's verdicts (slow: each is a short verify run in the sandbox) ----------


@pytest.mark.slow
@pytest.mark.parametrize("name, expected", [
    ("nanovllm_npu", "slot_bound"), ("nanovllm_fork", "slot_bound"),
    ("vidur_vllm", "termination"), ("vidur_sarathi", "kv_exact"), ("vidur_orca", "kv_exact"),
])
def test_verify_reports_each_engine(name, expected):
    adapter(name)
    command = [sys.executable, "-m", "proofs.cli", "verify", "--model", "serving", "--online",
               os.path.join(ENGINES, f"{name}.py") + ":make", "--policy", "none", "--budget", "30",
               "--seed", "0", "--db", "none", "--all"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"FAIL {expected} " in done.stdout


COUNTEREXAMPLES = os.path.join(ENGINES, "counterexamples")


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(os.listdir(COUNTEREXAMPLES)))
def test_every_reported_counterexample_replays(path):
    adapter(path.split("-")[0])
    with open(os.path.join(COUNTEREXAMPLES, path)) as handle:
        wanted = json.load(handle)["property"]
    done = subprocess.run([sys.executable, "-m", "proofs.cli", "replay", os.path.join(COUNTEREXAMPLES, path)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.startswith(f"FAIL {wanted} "), done.stdout[:500]
