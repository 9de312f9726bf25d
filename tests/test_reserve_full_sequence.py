"""The serving model's policy switch ``reserve_full_sequence`` (vLLM's ``scheduler_reserve_full_isl``), on the spec and impl.

Worked example R1 (issue 19's probe; docs/serving.md has the timelines): ``max_seqs 2,
token_budget 2, block_size 2, num_blocks 3, chunked_prefill True``; request 0 (prompt 1,
output 2) and request 1 (prompt 5, output 1) arrive at 0.  Off, request 1's first chunk
(1 token, 1 block) is admitted at tick 0 beside request 0; on, request 1 waits until
the 3 blocks of its whole known length are free (tick 2), though it takes only its
chunk's block then.
"""

import pytest
from hypothesis import HealthCheck, given, settings

import impl
import spec.serving as serving
from proofs.search.serving import valid_calls

R1 = [{"id": 0, "arrival": 0, "prompt": 1, "output": 2}, {"id": 1, "arrival": 0, "prompt": 5, "output": 1}]
R1_CONFIG = {"max_seqs": 2, "token_budget": 2, "block_size": 2, "num_blocks": 3, "chunked_prefill": True}


def entry(tick, scheduled=(), freed=(), allocated=(), finished=()):
    return {"tick": tick, "scheduled": [list(p) for p in scheduled], "preempted": [], "aborted": [],
            "freed": [[i, list(b)] for i, b in freed], "allocated": [[i, list(b)] for i, b in allocated],
            "finished": list(finished)}


R1_OFF = [
    entry(0, scheduled=[[0, 1], [1, 1]], allocated=[[0, [0]], [1, [1]]]),
    entry(1, scheduled=[[0, 1], [1, 1]], freed=[[0, [0]]], finished=[0]),
    entry(2, scheduled=[[1, 2]], allocated=[[1, [0]]]),
    entry(3, scheduled=[[1, 1]], allocated=[[1, [2]]], freed=[[1, [1, 0, 2]]], finished=[1]),
]
R1_ON = [
    entry(0, scheduled=[[0, 1]], allocated=[[0, [0]]]),  # request 1's 5 tokens need 3 blocks: 2 are free
    entry(1, scheduled=[[0, 1]], freed=[[0, [0]]], finished=[0]),
    entry(2, scheduled=[[1, 2]], allocated=[[1, [0]]]),  # 3 free: admitted, taking its chunk's one block
    entry(3, scheduled=[[1, 2]], allocated=[[1, [1]]]),
    entry(4, scheduled=[[1, 1]], allocated=[[1, [2]]], freed=[[1, [0, 1, 2]]], finished=[1]),
]


def _plain(trace):
    return [{k: [list(x) if isinstance(x, tuple) else x for x in v] if isinstance(v, (list, tuple)) else v
             for k, v in e.items()} for e in trace]


@pytest.mark.parametrize("reserve, expected, makespan", [(None, R1_OFF, 4), (False, R1_OFF, 4), (True, R1_ON, 5)])
@pytest.mark.parametrize("run", [serving.run, impl.serve], ids=["spec", "impl"])
def test_worked_example_r1(run, reserve, expected, makespan):
    config = R1_CONFIG if reserve is None else dict(R1_CONFIG, reserve_full_sequence=reserve)
    result = run(R1, config)
    assert _plain(result["trace"]) == expected
    assert result["makespan_ticks"] == makespan
    assert serving.check(R1, config, result, policy="fcfs") == []


def test_an_engine_without_the_reservation_breaks_work_conserving_under_the_switch():
    off = impl.serve(R1, R1_CONFIG)
    on = dict(R1_CONFIG, reserve_full_sequence=True)
    names = {v.invariant for v in serving.check(R1, on, off, policy="fcfs")}
    assert "work_conserving" in names and "matches_reference" in names
    assert serving.check(R1, on, off, policy="none") == []  # a policy, not a safety rule
    names = {v.invariant for v in serving.check(R1, R1_CONFIG, impl.serve(R1, on), policy="fcfs")}
    assert "work_conserving" in names


@pytest.mark.parametrize("value", [1, 0, None, "True"])
def test_the_switch_is_exactly_a_bool(value):
    config = dict(R1_CONFIG, reserve_full_sequence=value)
    for run in (serving.run, impl.serve):
        with pytest.raises(ValueError, match=r"config.reserve_full_sequence=.*expected a bool"):
            run(R1, config)
    assert not serving.is_valid(R1, config)


@settings(max_examples=200, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(valid_calls(max_requests=6, many=False))
def test_without_chunking_the_switch_changes_nothing(call):
    """Unchunked, an admission computes the whole known length: the reservation is the allocation."""
    requests, config = call
    longest = max((r["prompt"] + r["output"] - 1 for r in requests), default=1)
    config = dict(config, chunked_prefill=False, token_budget=max(config["token_budget"], longest))
    assert serving.is_valid(requests, config)  # the budget now holds every request: no call is skipped
    on = serving.run(requests, dict(config, reserve_full_sequence=True))
    assert on["trace"] == serving.run(requests, config)["trace"]
    assert impl.serve(requests, dict(config, reserve_full_sequence=True))["trace"] == on["trace"]
