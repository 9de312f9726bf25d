"""The independently written correct serving schedulers agree exactly with each other and with S1-S3.

tests/corpus/serving/correct/ holds four schedulers of the serving model (issue 10),
each written from the contract alone; one of them (unusual_result_shapes) returns
tuples, dict subclasses and extra keys, which the contract allows, so it is compared
after normalising those away.  Agreement alone could hide a reading shared by all,
so the consequences of the contract that do not depend on a reading (the token
ledger, every block given back, the budget and the seat cap) are checked as well.
"""

import copy
import json
import pathlib
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proofs.targets import load_callable, parse_target

CORRECT = pathlib.Path(__file__).parent / "corpus" / "serving" / "correct"
NAMES = ["tick_by_tick", "event_heaps", "online_engine", "unusual_result_shapes"]
SERVE = {name: load_callable(parse_target(f"{CORRECT / name}.py:serve")) for name in NAMES}
MAKE = load_callable(parse_target(f"{CORRECT / 'online_engine'}.py:make"))
PLAIN = [name for name in NAMES if name != "unusual_result_shapes"]

ENTRY_KEYS = ["tick", "scheduled", "preempted", "aborted", "freed", "allocated", "finished"]
REQUEST_FIELDS = ["start", "first_token", "finish", "aborted", "generated", "preemptions", "computed"]
TOTAL_KEYS = ["makespan_ticks", "computed_tokens", "useful_tokens", "recomputed_tokens", "aborted_tokens",
              "token_utilization", "preemptions"]

FAST = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


# ---------------------------------------------------------------- the worked examples

def trace_of(*lines):
    return [json.loads(line) for line in lines]


S1 = (
    [{"id": 0, "arrival": 0, "prompt": 6, "output": 2}, {"id": 1, "arrival": 0, "prompt": 2, "output": 3}],
    {"max_seqs": 2, "token_budget": 4, "block_size": 2, "num_blocks": 8, "chunked_prefill": True},
    trace_of(
        '{"tick": 0, "scheduled": [[0, 4]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0, 1]]], "finished": []}',
        '{"tick": 1, "scheduled": [[0, 2], [1, 2]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [2]], [1, [3]]], "finished": []}',
        '{"tick": 2, "scheduled": [[0, 1], [1, 1]], "preempted": [], "aborted": [], "freed": [[0, [0, 1, 2, 4]]], "allocated": [[0, [4]], [1, [5]]], "finished": [0]}',
        '{"tick": 3, "scheduled": [[1, 1]], "preempted": [], "aborted": [], "freed": [[1, [3, 5]]], "allocated": [], "finished": [1]}',
    ),
    {"makespan_ticks": 4, "computed_tokens": 11, "useful_tokens": 11, "recomputed_tokens": 0, "aborted_tokens": 0,
     "token_utilization": 0.6875, "preemptions": 0},
    [{"id": 0, "start": 0, "first_token": 2, "finish": 3, "aborted": None, "generated": 2, "preemptions": 0, "computed": 7},
     {"id": 1, "start": 1, "first_token": 2, "finish": 4, "aborted": None, "generated": 3, "preemptions": 0, "computed": 4}],
)
S2 = (
    [{"id": 0, "arrival": 0, "prompt": 2, "output": 3}, {"id": 1, "arrival": 0, "prompt": 1, "output": 2}],
    {"max_seqs": 2, "token_budget": 8, "block_size": 1, "num_blocks": 4, "chunked_prefill": True},
    trace_of(
        '{"tick": 0, "scheduled": [[0, 2], [1, 1]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0, 1]], [1, [2]]], "finished": []}',
        '{"tick": 1, "scheduled": [[0, 1]], "preempted": [1], "aborted": [], "freed": [[1, [2]]], "allocated": [[0, [3]]], "finished": []}',
        '{"tick": 2, "scheduled": [[0, 1]], "preempted": [], "aborted": [], "freed": [[0, [0, 1, 3, 2]]], "allocated": [[0, [2]]], "finished": [0]}',
        '{"tick": 3, "scheduled": [[1, 2]], "preempted": [], "aborted": [], "freed": [[1, [0, 1]]], "allocated": [[1, [0, 1]]], "finished": [1]}',
    ),
    {"makespan_ticks": 4, "computed_tokens": 7, "useful_tokens": 6, "recomputed_tokens": 1, "aborted_tokens": 0,
     "token_utilization": 0.21875, "preemptions": 1},
    [{"id": 0, "start": 0, "first_token": 1, "finish": 3, "aborted": None, "generated": 3, "preemptions": 0, "computed": 4},
     {"id": 1, "start": 0, "first_token": 1, "finish": 4, "aborted": None, "generated": 2, "preemptions": 1, "computed": 3}],
)
S3 = (
    [{"id": 0, "arrival": 0, "prompt": 3, "output": 4, "abort": 2}, {"id": 1, "arrival": 1, "prompt": 2, "output": 1}],
    {"max_seqs": 1, "token_budget": 8, "block_size": 4, "num_blocks": 2, "chunked_prefill": False},
    trace_of(
        '{"tick": 0, "scheduled": [[0, 3]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0]]], "finished": []}',
        '{"tick": 1, "scheduled": [[0, 1]], "preempted": [], "aborted": [], "freed": [], "allocated": [], "finished": []}',
        '{"tick": 2, "scheduled": [[1, 2]], "preempted": [], "aborted": [0], "freed": [[0, [0]], [1, [0]]], "allocated": [[1, [0]]], "finished": [1]}',
    ),
    {"makespan_ticks": 3, "computed_tokens": 6, "useful_tokens": 2, "recomputed_tokens": 0, "aborted_tokens": 4,
     "token_utilization": 0.25, "preemptions": 0},
    [{"id": 0, "start": 0, "first_token": 1, "finish": None, "aborted": 2, "generated": 2, "preemptions": 0, "computed": 4},
     {"id": 1, "start": 2, "first_token": 3, "finish": 3, "aborted": None, "generated": 1, "preemptions": 0, "computed": 2}],
)
# Worked by hand from the contract (not in the issue): two victims in one tick, A preempting C and
# then B preempting itself, so the waiting queue is [B, C]; and an abort-only tick followed by an
# abort at arrival and a jump over a huge idle gap.
H1 = (
    [{"id": 0, "arrival": 0, "prompt": 2, "output": 3}, {"id": 1, "arrival": 0, "prompt": 1, "output": 3},
     {"id": 2, "arrival": 0, "prompt": 1, "output": 2}],
    {"max_seqs": 3, "token_budget": 10, "block_size": 1, "num_blocks": 4, "chunked_prefill": False},
    trace_of(
        '{"tick": 0, "scheduled": [[0, 2], [1, 1], [2, 1]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0, 1]], [1, [2]], [2, [3]]], "finished": []}',
        '{"tick": 1, "scheduled": [[0, 1]], "preempted": [2, 1], "aborted": [], "freed": [[2, [3]], [1, [2]]], "allocated": [[0, [3]]], "finished": []}',
        '{"tick": 2, "scheduled": [[0, 1]], "preempted": [], "aborted": [], "freed": [[0, [0, 1, 3, 2]]], "allocated": [[0, [2]]], "finished": [0]}',
        '{"tick": 3, "scheduled": [[1, 2], [2, 2]], "preempted": [], "aborted": [], "freed": [[2, [2, 3]]], "allocated": [[1, [0, 1]], [2, [2, 3]]], "finished": [2]}',
        '{"tick": 4, "scheduled": [[1, 1]], "preempted": [], "aborted": [], "freed": [[1, [0, 1, 2]]], "allocated": [[1, [2]]], "finished": [1]}',
    ),
    {"makespan_ticks": 5, "computed_tokens": 11, "useful_tokens": 9, "recomputed_tokens": 2, "aborted_tokens": 0,
     "token_utilization": 11 / 50, "preemptions": 2},
    [{"id": 0, "start": 0, "first_token": 1, "finish": 3, "aborted": None, "generated": 3, "preemptions": 0, "computed": 4},
     {"id": 1, "start": 0, "first_token": 1, "finish": 5, "aborted": None, "generated": 3, "preemptions": 1, "computed": 4},
     {"id": 2, "start": 0, "first_token": 1, "finish": 4, "aborted": None, "generated": 2, "preemptions": 1, "computed": 3}],
)
BIG = 10**12
H2 = (
    [{"id": 5, "arrival": 0, "prompt": 3, "output": 2, "abort": 1}, {"id": 6, "arrival": 10, "prompt": 1, "output": 1, "abort": 10},
     {"id": 7, "arrival": BIG, "prompt": 1, "output": 1}],
    {"max_seqs": 1, "token_budget": 4, "block_size": 2, "num_blocks": 2, "chunked_prefill": True},
    [
        {"tick": 0, "scheduled": [[5, 3]], "preempted": [], "aborted": [], "freed": [], "allocated": [[5, [0, 1]]], "finished": []},
        {"tick": 1, "scheduled": [], "preempted": [], "aborted": [5], "freed": [[5, [0, 1]]], "allocated": [], "finished": []},
        {"tick": 10, "scheduled": [], "preempted": [], "aborted": [6], "freed": [], "allocated": [], "finished": []},
        {"tick": BIG, "scheduled": [[7, 1]], "preempted": [], "aborted": [], "freed": [[7, [0]]], "allocated": [[7, [0]]], "finished": [7]},
    ],
    {"makespan_ticks": BIG + 1, "computed_tokens": 4, "useful_tokens": 1, "recomputed_tokens": 0, "aborted_tokens": 3,
     "token_utilization": 4 / (4 * (BIG + 1)), "preemptions": 0},
    [{"id": 5, "start": 0, "first_token": 1, "finish": None, "aborted": 1, "generated": 1, "preemptions": 0, "computed": 3},
     {"id": 6, "start": None, "first_token": None, "finish": None, "aborted": 10, "generated": 0, "preemptions": 0, "computed": 0},
     {"id": 7, "start": BIG, "first_token": BIG + 1, "finish": BIG + 1, "aborted": None, "generated": 1, "preemptions": 0, "computed": 1}],
)
EXAMPLES = {"S1": S1, "S2": S2, "S3": S3, "H1": H1, "H2": H2}


def plain(value):
    """The value with tuples as lists and dict subclasses as dicts, as JSON would carry it."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def standard_part(result, requests):
    """Only the keys the contract names, normalised: the unusual scheduler's extras are dropped."""
    result = plain(result)
    caller_keys = {r["id"]: list(r) for r in requests}
    out = {k: result[k] for k in ["trace", "requests"] + TOTAL_KEYS}
    out["trace"] = [{k: e[k] for k in ENTRY_KEYS} for e in result["trace"]]
    out["requests"] = [{k: r[k] for k in caller_keys[r["id"]] + REQUEST_FIELDS} for r in result["requests"]]
    return out


def assert_exact_format(result, requests):
    """The result of a plain scheduler is exactly the issue's format: plain dicts and lists, no extra key."""
    assert type(result) is dict and sorted(result) == sorted(["trace", "requests"] + TOTAL_KEYS), sorted(result)
    assert json.loads(json.dumps(result)) == result and plain(result) == result
    assert type(result["trace"]) is list and type(result["requests"]) is list
    for entry in result["trace"]:
        assert type(entry) is dict and sorted(entry) == sorted(ENTRY_KEYS), entry
        assert all(type(entry[k]) is list for k in ENTRY_KEYS[1:]), entry
    by_id = {r["id"]: r for r in requests}
    for row in result["requests"]:
        assert type(row) is dict and sorted(row) == sorted(list(by_id[row["id"]]) + REQUEST_FIELDS), row
    assert type(result["token_utilization"]) is float


@pytest.mark.parametrize("example", sorted(EXAMPLES))
@pytest.mark.parametrize("name", NAMES)
def test_each_scheduler_reproduces_the_worked_examples_exactly(name, example):
    requests, config, trace, totals, rows = EXAMPLES[example]
    result = SERVE[name](copy.deepcopy(requests), dict(config))
    if name != "unusual_result_shapes":
        assert_exact_format(result, requests)
    got = standard_part(result, requests)
    assert got["trace"] == trace
    assert {k: got[k] for k in TOTAL_KEYS} == totals
    expected_rows = [{**{k: v for k, v in r.items()}, **row} for r, row in zip(requests, rows)]
    assert got["requests"] == expected_rows


def test_the_unusual_scheduler_really_is_unusual():
    requests, config = S1[0], S1[1]
    result = SERVE["unusual_result_shapes"](requests, config)
    assert type(result) is not dict and isinstance(result, dict)
    assert isinstance(result["trace"], tuple) and isinstance(result["trace"][0]["scheduled"][0], tuple)
    assert isinstance(result["requests"], tuple) and type(result["requests"][0]) is not dict
    assert result["policy"] == "fcfs" and list(result["batch_sizes"]) == [1, 2, 2, 1]
    assert [r["queue_delay"] for r in result["requests"]] == [0, 1]
    assert list(result["trace"][0])[0] == "finished" and list(result)[0] == "policy"


# ---------------------------------------------------------------- random valid inputs

@st.composite
def serving_calls(draw):
    """A valid (requests, config): ties, tight budgets, pools barely big enough, aborts everywhere.

    One draw in three is under memory pressure (small blocks, a pool just big enough for the
    largest request, long outputs, several seats), where preemptions and several victims in one
    tick are common.
    """
    pressure = draw(st.integers(0, 2)) == 0
    block_size = draw(st.sampled_from([1, 1, 2]) if pressure else st.sampled_from([1, 1, 2, 3, 4, 7]))
    chunked = draw(st.booleans())
    n = draw(st.integers(2 if pressure else 0, 12))
    some_id = st.one_of(st.integers(-3, 20), st.integers(-2**63, 2**63))
    ids = draw(st.lists(some_id, min_size=n, max_size=n, unique=True))
    base = draw(st.sampled_from([0, 0, 0, 3, 10**12]))
    spread = draw(st.sampled_from([0, 1, 3] if pressure else [0, 2, 6, 20]))
    requests = []
    for rid in ids:
        arrival = base + draw(st.integers(0, spread))
        if not pressure and draw(st.integers(0, 9)) == 0:
            arrival += draw(st.sampled_from([10**15, 2**63])) + draw(st.integers(0, 3))  # a huge idle gap
        prompt = draw(st.integers(1, 10))
        output = draw(st.integers(2, 9) if pressure else st.integers(1, 6))
        request = {"id": rid, "arrival": arrival, "prompt": prompt, "output": output}
        kind = draw(st.sampled_from(["none", "none", "none" if pressure else "at_arrival", "soon", "late"]))
        if kind == "at_arrival":
            request["abort"] = arrival
        elif kind == "soon":
            request["abort"] = arrival + draw(st.integers(0, 6))
        elif kind == "late":
            request["abort"] = arrival + draw(st.integers(0, 60))
        requests.append(request)
    peak = max([r["prompt"] + r["output"] - 1 for r in requests], default=1)
    need = -(-peak // block_size)
    if pressure:
        num_blocks = need + draw(st.sampled_from([0, 0, 1]))
    elif draw(st.integers(0, 9)) == 0:
        num_blocks = draw(st.sampled_from([10**12, 2**63]))
    else:
        num_blocks = need + draw(st.sampled_from([0, 0, 0, 1, 2, 5]))
    if chunked:
        token_budget = draw(st.one_of(st.integers(1, 4), st.integers(1, 2 * peak), st.just(10**9)))
    else:
        token_budget = peak + draw(st.sampled_from([0, 0, 1, 3, 10]))
    max_seqs = draw(st.integers(2, 4) if pressure else st.integers(1, 4))
    config = {"max_seqs": max_seqs, "token_budget": token_budget, "block_size": block_size,
              "num_blocks": num_blocks, "chunked_prefill": chunked}
    if draw(st.booleans()):
        requests = tuple(requests)
    return requests, config


def check_contract_consequences(result, requests, config):
    """What the contract implies whatever the reading: ledger, blocks, budget, seats, one ending each."""
    trace = result["trace"]
    assert [e["tick"] for e in trace] == sorted({e["tick"] for e in trace})
    assert result["computed_tokens"] == sum(n for e in trace for _, n in e["scheduled"])
    assert result["computed_tokens"] == result["useful_tokens"] + result["recomputed_tokens"] + result["aborted_tokens"]
    held = {}
    running = set()
    for e in trace:
        assert all(n >= 1 for _, n in e["scheduled"]), e
        assert sum(n for _, n in e["scheduled"]) <= config["token_budget"], e
        assert len({rid for rid, _ in e["scheduled"]}) == len(e["scheduled"]), e
        early = [[rid, ids] for rid, ids in e["freed"] if rid not in e["finished"]]  # steps 2 and 4
        assert e["freed"] == early + [[rid, ids] for rid, ids in e["freed"] if rid in e["finished"]], e
        for rid, ids in early:
            assert held.pop(rid) == ids, ("freed what was not held", e)
        for rid, ids in e["allocated"]:
            assert ids and all(0 <= b < config["num_blocks"] for b in ids), e
            assert not any(b in other for other in held.values() for b in ids), ("allocated while held", e)
            held.setdefault(rid, []).extend(ids)
        now = (running - set(e["aborted"]) - set(e["preempted"])) | {rid for rid, _ in e["scheduled"]}
        assert len(now) <= config["max_seqs"], e
        running = now - set(e["finished"])
        for rid, ids in e["freed"][len(early):]:
            assert held.pop(rid) == ids, ("freed what was not held", e)
    assert held == {}, ("leaked", held)
    by_id = {r["id"]: r for r in requests}
    assert [r["id"] for r in result["requests"]] == sorted(by_id)
    for row in result["requests"]:
        req = by_id[row["id"]]
        assert (row["finish"] is None) != (row["aborted"] is None), row
        if row["aborted"] is not None:
            assert row["aborted"] == req["abort"], row
        else:
            assert row["generated"] == req["output"], row
            assert req.get("abort") is None or req["abort"] >= row["finish"], row
    expected_makespan = max([e["tick"] + 1 for e in trace if e["scheduled"]], default=0)
    assert result["makespan_ticks"] == expected_makespan


@FAST
@given(serving_calls())
def test_all_four_agree_exactly_on_random_valid_inputs(call):
    requests, config = call
    before = copy.deepcopy((requests, config))
    reference = SERVE["tick_by_tick"](requests, config)
    assert (requests, config) == before and type(requests) is type(before[0])
    assert_exact_format(reference, requests)
    check_contract_consequences(reference, requests, config)
    for name in NAMES[1:]:
        result = SERVE[name](requests, config)
        assert (requests, config) == before, name
        if name in PLAIN:
            assert_exact_format(result, requests)
            assert result == reference, name
        else:
            assert standard_part(result, requests) == reference, name


@pytest.mark.parametrize("seed", range(4))
def test_all_four_agree_on_large_loads(seed):
    """Hundreds of requests and ticks, many preemptions and aborts: still one answer."""
    rng = random.Random(seed)
    block_size, chunked = rng.choice([1, 2, 16]), seed % 2 == 0
    requests = []
    for i in range(150):
        arrival = rng.randint(0, 300)
        request = {"id": rng.randint(-10**6, 10**6) * 1000 + i, "arrival": arrival, "prompt": rng.randint(1, 60),
                   "output": rng.randint(1, 40)}
        if rng.random() < 0.3:
            request["abort"] = arrival + rng.randint(0, 80)
        requests.append(request)
    peak = max(r["prompt"] + r["output"] - 1 for r in requests)
    budget = rng.randint(8, 128) if chunked else peak + rng.randint(0, 64)
    pool = -(-peak // block_size) * rng.randint(1, 4)
    config = {"max_seqs": rng.randint(4, 32), "token_budget": budget, "block_size": block_size, "num_blocks": pool,
              "chunked_prefill": chunked}
    reference = SERVE["tick_by_tick"](requests, config)
    check_contract_consequences(reference, requests, config)
    assert reference["preemptions"] > 0 and any(r["aborted"] is not None for r in reference["requests"])
    for name in NAMES[1:]:
        result = SERVE[name](requests, config)
        assert (result if name in PLAIN else standard_part(result, requests)) == reference, name


@FAST
@given(serving_calls(), st.data())
def test_the_online_engine_driven_step_by_step_agrees(call, data):
    """Requests added just in time and aborts issued through abort() give what serve gives."""
    requests, config = call
    base = [{k: v for k, v in r.items() if k != "abort"} for r in requests]
    plan = {}
    for r in base:
        if data.draw(st.booleans()):
            plan[r["id"]] = r["arrival"] + data.draw(st.integers(-2, 12))  # issue abort() once clock >= this
    arrival = {r["id"]: r["arrival"] for r in base}
    todo = sorted(base, key=lambda r: r["arrival"])
    engine = MAKE(config)
    effective = {}
    entries = []
    held = {}  # running id -> blocks, replayed from the entries
    while True:
        while todo:
            view = engine.view()
            waiting_arrivals = [arrival[i] for i in view["waiting"]]
            if view["running"] or any(a <= view["clock"] for a in waiting_arrivals):
                next_tick = view["clock"]
            else:
                next_tick = min(waiting_arrivals, default=None)
            if next_tick is not None and todo[0]["arrival"] > next_tick:
                break
            engine.add_request(todo.pop(0))
        clock = engine.view()["clock"]
        for rid, when in sorted(plan.items()):
            if rid not in effective and when <= clock and any(r["id"] == rid for r in base if r not in todo):
                view = engine.view()
                if rid in view["waiting"] or rid in view["running"]:
                    engine.abort(rid)
                    effective[rid] = max(clock, arrival[rid])
                else:
                    with pytest.raises(ValueError):
                        engine.abort(rid)
                    effective[rid] = None
        entry = engine.step()
        if entry is None:
            if not todo:
                break
            continue
        entries.append(entry)
        for rid, ids in entry["freed"]:  # aborted and preempted ones
            if rid not in entry["finished"]:
                assert held.pop(rid) == ids, entry
        for rid, ids in entry["allocated"]:
            held.setdefault(rid, []).extend(ids)
        for rid, ids in entry["freed"]:
            if rid in entry["finished"]:
                assert held.pop(rid) == ids, entry
        # what the entries say the running requests hold is what the view says
        view = engine.view()
        assert view["clock"] == entry["tick"] + 1
        assert view["blocks"] == held and sorted(view["running"]) == sorted(held), (view, held)
        view["blocks"].clear()
        view["running"].clear()
        assert engine.view()["blocks"] == held  # the view is a copy
    assert engine.idle
    expected_requests = [dict(r, abort=effective[r["id"]]) if effective.get(r["id"]) is not None else r for r in base]
    expected = SERVE["tick_by_tick"](expected_requests, config)
    got = engine.result()
    assert got["trace"] == entries == expected["trace"]
    assert {k: got[k] for k in TOTAL_KEYS} == {k: expected[k] for k in TOTAL_KEYS}
    strip = [{k: v for k, v in r.items() if k != "abort"} for r in expected["requests"]]
    assert got["requests"] == strip


def test_the_online_engine_checks_its_calls():
    engine = MAKE({"max_seqs": 1, "token_budget": 4, "block_size": 2, "num_blocks": 4, "chunked_prefill": True})
    engine.add_request({"id": 7, "arrival": 0, "prompt": 3, "output": 2})
    with pytest.raises(ValueError, match=r"requests\[1\]\.id=7: ids must be unique \(also requests\[0\]\.id\)"):
        engine.add_request({"id": 7, "arrival": 0, "prompt": 1, "output": 1})
    with pytest.raises(ValueError, match="request_id=8"):
        engine.abort(8)
    assert engine.step()["scheduled"] == [[7, 3]]
    with pytest.raises(ValueError, match="arrival=0: expected an int >= clock=1"):
        engine.add_request({"id": 8, "arrival": 0, "prompt": 1, "output": 1})
    engine.abort(7)
    entry = engine.step()
    assert entry["aborted"] == [7] and entry["freed"] == [[7, [0, 1]]] and entry["scheduled"] == []
    assert engine.step() is None and engine.idle
    with pytest.raises(ValueError, match="request_id=7"):
        engine.abort(7)
    with pytest.raises(ValueError, match="config.max_seqs=0"):
        MAKE({"max_seqs": 0, "token_budget": 4, "block_size": 2, "num_blocks": 4, "chunked_prefill": True})


# ---------------------------------------------------------------- validation

class Int(int):
    pass


class Dict(dict):
    pass


class List(list):
    pass


GOOD_CONFIG = {"max_seqs": 2, "token_budget": 8, "block_size": 2, "num_blocks": 4, "chunked_prefill": False}
GOOD = {"id": 3, "arrival": 1, "prompt": 2, "output": 2}


def cfg(**changes):
    out = dict(GOOD_CONFIG, **changes)
    return {k: v for k, v in out.items() if v is not DROP}


def req(**changes):
    out = dict(GOOD, **changes)
    return {k: v for k, v in out.items() if v is not DROP}


DROP = object()

BAD = [
    ([GOOD], cfg(token_budget=DROP), "config: missing key 'token_budget'"),
    ([GOOD], cfg(x=1), "config: unexpected key 'x'; a config has exactly max_seqs, token_budget, block_size, "
                       "num_blocks, chunked_prefill"),
    ([GOOD], cfg(max_seqs=0), "config.max_seqs=0: expected an int >= 1"),
    ([GOOD], cfg(token_budget=True), "config.token_budget=True: expected an int >= 1"),
    ([GOOD], cfg(block_size=2.0), "config.block_size=2.0: expected an int >= 1"),
    ([GOOD], cfg(num_blocks=Int(4)), "config.num_blocks=4: expected an int >= 1"),
    ([GOOD], cfg(chunked_prefill=1), "config.chunked_prefill=1: expected a bool (True or False)"),
    ({"a": GOOD}, cfg(), "requests={'a': {'id': 3, 'arrival': 1, 'prompt': 2, 'output': 2}}: expected a list or "
                         "tuple of request dicts"),
    ([GOOD, 5], cfg(), "requests[1]=5: expected a dict with keys id, arrival, prompt, output[, abort]"),
    ([req(prompt=DROP)], cfg(), "requests[0]: missing key 'prompt'"),
    ([req(x=1)], cfg(), "requests[0]: unexpected key 'x'; a request has exactly id, arrival, prompt, output and "
                        "optionally abort"),
    ([req(id="a")], cfg(), "requests[0].id='a': expected an int"),
    ([req(id=False)], cfg(), "requests[0].id=False: expected an int"),
    ([req(arrival=-1)], cfg(), "requests[0].arrival=-1: expected an int >= 0"),
    ([req(prompt=0)], cfg(), "requests[0].prompt=0: expected an int >= 1"),
    ([req(output=Int(2))], cfg(), "requests[0].output=2: expected an int >= 1"),
    ([req(abort=None)], cfg(), "requests[0].abort=None: expected an int >= arrival=1"),
    ([req(abort=0)], cfg(), "requests[0].abort=0: expected an int >= arrival=1"),
    ([req(abort=True)], cfg(), "requests[0].abort=True: expected an int >= arrival=1"),
    ([req(id=Int(3))], cfg(), "requests[0].id=3: expected an int"),
    ([GOOD, req(id=4, arrival=2.5)], cfg(), "requests[1].arrival=2.5: expected an int >= 0"),
    ([req(id=5), req(id=6), req(id=5)], cfg(), "requests[2].id=5: ids must be unique (also requests[0].id)"),
    ([req(prompt=6, output=4)], cfg(token_budget=20), "requests[0]: prompt=6 + output=4 - 1 = 9 tokens need 5 blocks "
                                                      "of block_size=2, more than num_blocks=4"),
    ([req(prompt=6, output=4)], cfg(), "requests[0]: prompt=6 + output=4 - 1 = 9 tokens need 5 blocks of "
                                       "block_size=2, more than num_blocks=4"),
    ([req(prompt=7, output=3)], cfg(token_budget=8, num_blocks=5), "requests[0]: prompt=7 + output=3 - 1 = 9 tokens "
     "exceed token_budget=8, and without chunked_prefill a request must be (re)computed in one tick"),
    ([req(id=-1)], cfg(max_seqs=0), "config.max_seqs=0: expected an int >= 1"),  # config first
]


@pytest.mark.parametrize("requests, config, message", BAD, ids=[m[:40] for _, _, m in BAD])
@pytest.mark.parametrize("name", NAMES)
def test_each_scheduler_rejects_what_the_rules_reject_before_any_work(name, requests, config, message):
    before = copy.deepcopy((requests, config))
    with pytest.raises(ValueError) as error:
        SERVE[name](requests, config)
    assert str(error.value) == message
    assert (requests, config) == before


@pytest.mark.parametrize("name", NAMES)
def test_each_scheduler_rejects_a_config_that_is_not_a_dict(name):
    with pytest.raises(ValueError, match=r"^config=\[\]: expected a dict"):
        SERVE[name]([GOOD], [])


@pytest.mark.parametrize("name", NAMES)
def test_each_scheduler_accepts_the_subclasses_and_the_edge_of_the_rules(name):
    requests = (Dict(req(id=-9, prompt=4, output=5, abort=1)), Dict(req(id=2, prompt=1, output=1)))
    config = Dict(cfg(token_budget=8, num_blocks=4))  # 4 + 5 - 1 = 8 tokens: exactly the budget and the pool
    before = copy.deepcopy((requests, config))
    result = plain(SERVE[name](requests, config))
    assert (requests, config) == before and type(requests[0]) is Dict
    assert [r["id"] for r in result["requests"]] == [-9, 2]
    assert result["requests"][0]["aborted"] == 1 and result["requests"][1]["finish"] == 2
    assert plain(SERVE[name](List(requests), config)) == result
    assert plain(SERVE[name]([], GOOD_CONFIG)) == {
        "trace": [], "requests": [], "makespan_ticks": 0, "computed_tokens": 0, "useful_tokens": 0,
        "recomputed_tokens": 0, "aborted_tokens": 0, "token_utilization": 0.0, "preemptions": 0,
        **({"policy": "fcfs", "batch_sizes": [], "admission_order": []} if name == "unusual_result_shapes" else {})}
