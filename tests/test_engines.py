"""Third-party schedulers from PyPI (nano-vllm, vidur) checked through the online protocol, and the harness fix they needed.

Each engine's tests run when its pinned package is installed (``pip install
'.[engines]'`` and ``pip install --no-deps -r examples/engines/requirements-no-deps.txt``)
and are skipped, saying so, otherwise.  The fixed scenarios' entries are derived by hand
from each engine's code (docs/engines.md walks through them); the short verify runs are
slow.
"""

import copy
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


def test_nanovllm_decodes_past_the_token_budget_when_max_seqs_exceeds_it():
    """Finding 11: the decode pass counts sequences only (docs/engines.md)."""
    requests = [{"id": i, "arrival": 0, "prompt": 1, "output": 2} for i in range(3)]
    over = config(3, 2, 2, 3)
    result = drive(adapter("nanovllm_npu")(over), requests, over)
    assert [e["scheduled"] for e in result["trace"]] == [[[0, 1], [1, 1]], [[2, 1]], [[0, 1], [1, 1], [2, 1]]]
    assert [v.invariant for v in serving.check(requests, over, result, policy="none")] == ["token_budget"]


# -- nano-vllm's own hash cache, with shared prompts (issue 20; docs/engines.md, findings 12 to 15) ----------


def cached(max_seqs, budget, block_size, num_blocks):
    return dict(config(max_seqs, budget, block_size, num_blocks), prefix_caching=True)


def prompt_of(request_id, arrival, tokens, output, **more):
    return {"id": request_id, "arrival": arrival, "prompt": len(tokens), "tokens": list(tokens), "output": output,
            **more}


def findings(requests, config_, result, policy):
    return [v.invariant for v in serving.check(copy.deepcopy(requests), config_, result, policy=policy)]


P1_UNCHUNKED = [prompt_of(0, 0, [1, 2, 3, 4], 1), prompt_of(1, 1, [1, 2, 3, 4, 5], 1)]
P1_CONFIG = cached(2, 8, 2, 8)


def test_nanovllm_npu_hits_a_shared_prompt_as_the_model_does():
    """Issue 20's P1, unchunked: request 1 takes blocks 0 and 1 from nano-vllm's own hash cache and computes 1 token."""
    result = drive(adapter("nanovllm_npu")(P1_CONFIG), P1_UNCHUNKED, P1_CONFIG)
    assert [(e["scheduled"], e["hits"], e["allocated"], e["freed"]) for e in result["trace"]] == [
        ([[0, 4]], [], [[0, [0, 1]]], [[0, [0, 1]]]),
        ([[1, 1]], [[1, [0, 1]]], [[1, [2]]], [[1, [0, 1, 2]]]),
    ]
    assert result["cache_hit_tokens"] == 4
    assert findings(P1_UNCHUNKED, P1_CONFIG, result, "fcfs") == []


def test_nanovllm_fork_unregisters_a_block_when_its_count_reaches_0():
    """Finding 14: the fork's deallocate drops the hash of a freed block, so P1's request 1 hits nothing."""
    result = drive(adapter("nanovllm_fork")(P1_CONFIG), P1_UNCHUNKED, P1_CONFIG)
    assert result["trace"][1]["hits"] == [] and result["trace"][1]["scheduled"] == [[1, 5]]
    assert findings(P1_UNCHUNKED, P1_CONFIG, result, "none") == []
    assert findings(P1_UNCHUNKED, P1_CONFIG, result, "fcfs")[0] == "longest_prefix_hit"


WHOLE = [prompt_of(0, 0, [1, 2, 3, 4], 1), prompt_of(1, 1, [1, 2, 3, 4], 1)]


def test_nanovllm_npu_hits_a_whole_prompt_and_schedules_0_tokens():
    """Finding 12: no known - 1 cap, so a prompt cached whole is scheduled 0 tokens (nonnegative_remaining, either policy)."""
    result = drive(adapter("nanovllm_npu")(P1_CONFIG), WHOLE, P1_CONFIG)
    assert result["trace"][1]["scheduled"] == [[1, 0]] and result["trace"][1]["hits"] == [[1, [0, 1]]]
    for policy in ("none", "fcfs"):
        assert findings(WHOLE, P1_CONFIG, result, policy)[0] == "nonnegative_remaining"


STALE = [prompt_of(0, 0, [1, 2, 3, 4], 1), prompt_of(1, 0, [5, 6, 3, 4], 1), prompt_of(2, 0, [1, 2, 3, 4, 9], 1)]
STALE_CONFIG = cached(1, 8, 2, 3)


def test_nanovllm_npu_hits_a_stale_hash_into_another_prefixs_block():
    """Finding 13: block 1, evicted and refilled with [5, 6 | 3, 4], keeps its old hash entry for [1, 2 | 3, 4];
    allocate compares only the block's own tokens, so request 2 reads request 1's KV (no_false_sharing)."""
    result = drive(adapter("nanovllm_npu")(STALE_CONFIG), STALE, STALE_CONFIG)
    assert result["trace"][1]["allocated"] == [[1, [2, 1]]]  # block 1 taken from the pool for the other prefix
    assert result["trace"][2]["hits"] == [[2, [0, 1]]]
    assert findings(STALE, STALE_CONFIG, result, "none") == ["no_false_sharing"]
    fork = drive(adapter("nanovllm_fork")(STALE_CONFIG), STALE, STALE_CONFIG)  # its fix drops the stale entry
    assert fork["trace"][2]["hits"] == [] and findings(STALE, STALE_CONFIG, fork, "none") == []


FIT = [prompt_of(0, 0, [1, 2, 3, 4], 3), prompt_of(1, 1, [1, 2, 3, 4, 5], 1)]
FIT_CONFIG = cached(2, 8, 2, 4)


def test_nanovllm_counts_every_hit_block_when_fitting():
    """Finding 15: can_allocate wants a free block for each of the sequence's blocks, held hits too, so request 1
    (2 hits held by request 0, 1 new block, 2 free) waits until request 0 finishes (work_conserving under fcfs)."""
    result = drive(adapter("nanovllm_npu")(FIT_CONFIG), FIT, FIT_CONFIG)
    assert [e["scheduled"] for e in result["trace"]] == [[[0, 4]], [[0, 1]], [[0, 1]], [[1, 1]]]
    assert findings(FIT, FIT_CONFIG, result, "none") == []
    assert findings(FIT, FIT_CONFIG, result, "fcfs")[0] == "work_conserving"


SAME_TICK = [prompt_of(0, 0, [1, 2, 3, 4, 5], 2), prompt_of(1, 0, [1, 2, 3, 4, 6], 2)]


@pytest.mark.parametrize("name", ["nanovllm_npu", "nanovllm_fork"])
def test_nanovllm_frees_shared_blocks_under_the_last_holder_of_the_tick(name):
    """Two holders of blocks 0 and 1 finish in one tick: the last in running order lists them (docs/serving.md)."""
    config_ = cached(2, 8, 2, 8)
    result = drive(adapter(name)(config_), SAME_TICK, config_)
    assert result["trace"][1]["hits"] == [[1, [0, 1]]]
    assert result["trace"][2]["freed"] == [[0, [2]], [1, [0, 1, 3]]]
    assert findings(SAME_TICK, config_, result, "none") == []


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
OUTSIDE = os.path.join(COUNTEREXAMPLES, "outside-domain")


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(p for p in os.listdir(COUNTEREXAMPLES) if p.endswith(".json")
                                        and not p.startswith("vllm_v1-")))
def test_every_reported_counterexample_replays(path):
    adapter(path.split("-")[0])
    with open(os.path.join(COUNTEREXAMPLES, path)) as handle:
        wanted = json.load(handle)["property"]
    done = subprocess.run([sys.executable, "-m", "proofs.cli", "replay", os.path.join(COUNTEREXAMPLES, path)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.startswith(f"FAIL {wanted} "), done.stdout[:500]


@pytest.mark.parametrize("path", sorted(os.listdir(OUTSIDE)))
def test_a_difference_of_domain_found_before_the_declaration_is_no_longer_judged(path):
    """Findings 4, 6, 8 and Orca's token budget: calls outside what the engine declares (docs/engines.md)."""
    done = subprocess.run([sys.executable, "-m", "proofs.cli", "replay", os.path.join(OUTSIDE, path)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "outside the domain" in done.stderr and done.stdout == ""


# -- vLLM 0.33.0's own v1 scheduler (its own venv: examples/engines/install-vllm.sh VENV) ----------

VLLM_INSTALL = ("examples/engines/install-vllm.sh VENV, then VENV/bin/python -m pytest tests/test_engines.py "
                "(docs/engines.md)")


def vllm():
    """The vLLM adapter's module (vLLM imported once per process), or a skip saying how to install it."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip(f"vllm is not installed in this venv: {VLLM_INSTALL}")
    return sys.modules[load_callable(parse_target(os.path.join(ENGINES, "vllm_v1.py") + ":make")).__module__]


VLLM_PREEMPTION = [{"id": 0, "arrival": 0, "prompt": 4, "output": 5}, {"id": 1, "arrival": 0, "prompt": 3, "output": 5}]
VLLM_PREEMPTION_CONFIG = config(2, 64, 4, 3, chunked=True)


def test_vllm_preempts_the_newest_recomputes_it_and_reports_its_pool_without_the_null_block():
    module = vllm()
    result = drive(module.make(VLLM_PREEMPTION_CONFIG), VLLM_PREEMPTION, VLLM_PREEMPTION_CONFIG)
    assert module.VERSION == "0.33.0"
    assert result["trace"] == [
        entry(0, scheduled=[[0, 4], [1, 3]], allocated=[[0, [0]], [1, [1]]]),
        entry(1, scheduled=[[0, 1], [1, 1]], allocated=[[0, [2]]]),  # request 0's 5th token needs a 2nd block
        entry(2, scheduled=[[0, 1]], preempted=[1], freed=[[1, [1]]]),  # its 6th fits; request 1's 5th does not
        entry(3, scheduled=[[0, 1]]),
        entry(4, scheduled=[[0, 1]], freed=[[0, [0, 2]]], finished=[0]),
        # request 1 recomputes prompt 3 + its 2 tokens; vLLM's free queue hands out 2 then 0 (block ids aside)
        entry(5, scheduled=[[1, 5]], allocated=[[1, [2, 0]]]),
        entry(6, scheduled=[[1, 1]]),
        entry(7, scheduled=[[1, 1]], freed=[[1, [2, 0]]], finished=[1]),
    ]
    for policy in ("none", "fcfs"):
        assert serving.check(VLLM_PREEMPTION, VLLM_PREEMPTION_CONFIG, result, policy=policy) == []


def test_vllm_aborts_through_finish_requests_and_frees_at_once():
    module = vllm()
    engine = module.make(VLLM_PREEMPTION_CONFIG)
    for request in VLLM_PREEMPTION:
        engine.add_request(dict(request))
    first = engine.step()
    assert first["blocks"] == {0: [0], 1: [1]}
    engine.abort(1)
    engine.abort(1)  # vLLM ignores a second abort of a finished request: listed once
    assert engine.view()["blocks"] == {0: [0]} and engine.view()["running"] == [0]
    second = engine.step()
    assert second["aborted"] == [1] and second["scheduled"] == [[0, 1]]


def test_vllm_rejects_what_its_declared_domain_leaves_out():
    module = vllm()
    with pytest.raises(ValueError, match="max_num_seqs"):
        module.make(config(4, 2, 2, 8, chunked=True))  # token_budget 2 < max_seqs 4
    unchunked = config(1, 4, 1, 8)
    assert module.max_model_len(unchunked) == 4  # vLLM wants max_num_batched_tokens >= max_model_len
    # prompt 2 + output 3 = 5 > 4: outside the domain vllm_v1.DOMAIN declares, and vLLM caps it at 4 known tokens
    requests = [{"id": 0, "arrival": 0, "prompt": 2, "output": 3}]
    result = drive(module.make(unchunked), requests, unchunked)
    assert result["requests"][0]["generated"] == 2


FULL_SEQUENCE = [{"id": 0, "arrival": 0, "prompt": 1, "output": 2}, {"id": 1, "arrival": 0, "prompt": 5, "output": 1}]
FULL_SEQUENCE_CONFIG = config(2, 2, 2, 3, chunked=True)


@pytest.mark.parametrize("reserve", [False, True])
def test_vllm_reserve_full_isl_admits_only_when_the_whole_known_sequence_fits(reserve):
    """Issue 19's probe: with vLLM's default (scheduler_reserve_full_isl=True) request 1 (prompt 5, 3 blocks)
    waits until 3 blocks are free; without it, its first chunk (1 block) is admitted at tick 0."""
    module = vllm()
    make_config = dict(FULL_SEQUENCE_CONFIG, reserve_full_sequence=reserve)
    result = drive(module.make(make_config), FULL_SEQUENCE, FULL_SEQUENCE_CONFIG)
    first = result["trace"][0]["scheduled"]
    assert first == ([[0, 1]] if reserve else [[0, 1], [1, 1]])
    assert serving.check(FULL_SEQUENCE, FULL_SEQUENCE_CONFIG, result, policy="none") == []
    assert (serving.check(FULL_SEQUENCE, FULL_SEQUENCE_CONFIG, result, policy="fcfs") == []) is (not reserve)


def test_vllm_aborts_in_the_clients_order_and_the_fcfs_stateful_check_accepts_it():
    """V3: vLLM lists two aborts of one tick in the order the client sent them ([8, 5]); since the oracle reads
    `aborted` as a set, the fcfs stateful check passes the program that used to fail (docs/engines.md)."""
    import proofs.online.stateful as stateful
    from proofs.sandbox import TargetProcess

    module = vllm()
    config_ = config(2, 8, 2, 8, chunked=True)
    requests = [{"id": 5, "arrival": 0, "prompt": 2, "output": 4}, {"id": 8, "arrival": 0, "prompt": 2, "output": 4}]
    engine = module.make(config_)
    for request in requests:
        engine.add_request(dict(request))
    engine.step()
    engine.abort(8)
    engine.abort(5)
    assert engine.step()["aborted"] == [8, 5]
    target = parse_target(os.path.join(ENGINES, "vllm_v1.py") + ":make")
    with TargetProcess(target, call_seconds=60, shape=stateful.SHAPES["serving"], adapter=stateful.session) as process:

        class Client(stateful.ServingClient):
            pass

        Client.process, Client.policy = process, "fcfs"
        Client.record = {"deadline": float("inf"), "since": None, "shrink": float("inf")}
        client = Client()  # each call below raises StateMismatch on a failure: nothing is swallowed
        client.do_make(config_)
        for request in requests:
            client.do_add(dict(request))
        client.do_step()
        client.do_abort(8)
        client.do_abort(5)
        client.do_step()
    assert client.shadow.trace[1]["aborted"] == [8, 5] and client.spec_trace[1]["aborted"] == [5, 8]


# vLLM with enable_prefix_caching (issue 20): issue 20's P1 and the hand-made calls refine the model exactly; P2
# shows vLLM 0.33.0's free queue putting a block without a hash (a partial one) at its head (docs/engines.md V6)
VLLM_CACHED = cached(2, 8, 2, 8) | {"chunked_prefill": True}


@pytest.mark.parametrize("requests", [
    P1_UNCHUNKED, WHOLE, SAME_TICK,
    [prompt_of(0, 0, [1, 2, 3, 4, 5], 4, abort=2), prompt_of(1, 1, [1, 2, 3, 4, 6], 2)],  # an abort of a sharer
    [prompt_of(0, 0, [1, 2], 3), prompt_of(1, 0, [3, 4], 3)],  # a victim hits its own blocks (4 blocks)
], ids=["P1", "whole prompt", "same tick", "abort", "preemption"])
def test_vllm_with_prefix_caching_refines_the_model(requests):
    module = vllm()
    config_ = dict(VLLM_CACHED, num_blocks=4) if requests[0]["tokens"] == [1, 2] else VLLM_CACHED
    result = drive(module.make(config_), copy.deepcopy(requests), config_)
    assert result["trace"] == serving.run(copy.deepcopy(requests), config_)["trace"]
    assert findings(requests, config_, result, "fcfs") == []


def test_vllm_puts_a_freed_block_without_a_hash_at_the_head_of_its_free_queue():
    """Issue 20's P2: request 2's partial block 1 goes back to the head (block_pool.free_blocks: "LIFO reuse of
    non-cached blocks"), so request 3 takes blocks 1, 2 where the model, which appends every freed block to the
    tail, takes 2, 1: lru_eviction under fcfs, every safety claim kept."""
    module = vllm()
    requests = [prompt_of(0, 0, [1, 2, 3, 4], 1), prompt_of(1, 0, [9, 9], 1), prompt_of(2, 0, [1, 2, 7], 1),
                prompt_of(3, 0, [1, 2, 3, 4, 5], 1)]
    config_ = dict(VLLM_CACHED, max_seqs=1, num_blocks=3)
    result = drive(module.make(config_), copy.deepcopy(requests), config_)
    assert result["trace"][3]["hits"] == [[3, [0]]] and result["trace"][3]["allocated"] == [[3, [1, 2]]]
    assert serving.run(copy.deepcopy(requests), config_)["trace"][3]["allocated"] == [[3, [2, 1]]]
    assert findings(requests, config_, result, "none") == []
    assert findings(requests, config_, result, "fcfs")[0] == "lru_eviction"


ALL_CACHING = "prefix_caching=False or True"


@pytest.mark.slow
@pytest.mark.parametrize(("adapter_file", "policy", "caching"), [
    ("vllm_v1.py", "none", ALL_CACHING),  # fcfs with prefix caching fails on V6 alone (docs/engines.md)
    ("vllm_v1_uncached.py", "fcfs", "prefix_caching=False"),  # the policy tick by tick where the model and vLLM agree
])
def test_verify_checks_vllm_and_ends_with_a_verdict(adapter_file, policy, caching, tmp_path):
    vllm()
    usage = subprocess.run([sys.executable, "-m", "proofs.cli", "verify", "--help"], capture_output=True, text=True,
                           cwd=ROOT).stdout
    if "--load-timeout" not in usage:
        pytest.skip("this schedcheck has no --load-timeout (the sandbox's zygote, issue 18): vLLM's import exceeds "
                    "the default import limit of a sandbox child")
    command = [sys.executable, "-m", "proofs.cli", "verify", "--model", "serving", "--online",
               os.path.join(ENGINES, adapter_file) + ":make", "--policy", policy, "--examples", "40",
               "--seed", "0", "--db", "none", "--save-dir", str(tmp_path), "--budget", "300", "--load-timeout", "300"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0 and last.startswith("PASS"), done.stdout[-3000:] + done.stderr[-3000:]
    assert last.endswith(f"declared domain: reserve_full_sequence=False or True; {caching}; "
                         "token_budget >= max_seqs; without chunked prefill, every request's prompt + output <= "
                         "token_budget")


def test_the_uncached_vllm_adapter_declares_vllm_v1s_domain_with_caching_off():
    """vllm_v1_uncached.py narrows vllm_v1.py's declaration in prefix_caching alone (read from both sources)."""
    from proofs.models import declared

    full, uncached = (declared.read(parse_target(os.path.join(ENGINES, name) + ":make"))
                      for name in ("vllm_v1.py", "vllm_v1_uncached.py"))
    assert full["prefix_caching"] == [False, True] and uncached["prefix_caching"] == [False]
    assert {**full, "prefix_caching": [False]} == uncached


# -- SGLang 0.5.23: its admission, KV allocation, radix cache and allocator on CPU (examples/engines/sglang_kv.py) --


def sglang_kv():
    if importlib.util.find_spec("sglang") is None:
        pytest.skip(f"sglang is not installed in this venv: examples/engines/install-vllm.sh VENV --sglang, then "
                    "VENV/bin/python -m pytest tests/test_engines.py (docs/engines.md)")
    sys.path.insert(0, ENGINES)
    import sglang_kv as module

    return module


def test_sglang_keeps_the_block_claims_on_seeded_workloads_with_prefix_hits():
    module = sglang_kv()
    counts = [module.run(seed, 15) for seed in range(3)]
    assert all(c["admitted"] > 0 for c in counts)
    assert sum(c["hit_tokens"] for c in counts) > 0  # the radix tree was hit, not only filled


def test_the_sglang_check_catches_a_lost_slot_and_a_slot_held_twice():
    module = sglang_kv()
    engine = module.Engine(8)
    engine.check("fresh")
    engine.allocator.free_pages = engine.allocator.free_pages[1:]  # a slot nobody holds and nobody can take
    with pytest.raises(module.Broken, match="kv_capacity: .*lost"):
        engine.check("one slot dropped")
    engine = module.Engine(8)
    engine.allocator.free_pages = torch_cat_first_twice(engine.allocator.free_pages)
    with pytest.raises(module.Broken, match="kv_capacity: .*free twice"):
        engine.check("one slot free twice")


def torch_cat_first_twice(pages):
    import torch

    return torch.cat((pages, pages[:1]))
