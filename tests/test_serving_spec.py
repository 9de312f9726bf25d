"""The serving model (spec.serving): worked examples, the domain's messages, purity, and the reference's invariants."""

import copy
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spec
import spec.serving as S
from spec.registry import FAMILIES
from spec.serving.metrics import trace_entry
from spec.serving.state import Progress
from tests.serving_examples import CACHE_EXAMPLES, EXAMPLES, expected_result

FAST = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))


# --- the worked examples ------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_worked_example_exactly(name):
    requests, config, trace, totals, records, (num, den) = EXAMPLES[name]
    result = S.run(requests, config)
    assert result["trace"] == trace
    assert {key: result[key] for key in totals} == totals
    assert result["token_utilization"] == num / den
    assert result["requests"] == expected_result(name)["requests"]
    assert [set(r) for r in result["requests"]] == [set(r) | set(rec) for r, rec in zip(requests, records)]
    assert result == expected_result(name)
    assert S.check(requests, config, result) == []


def _impl_serve(requests, config):
    import impl

    return impl.serve(requests, config)


SERVES = {"spec.serving.run": S.run, "impl.serve": _impl_serve}


@pytest.mark.parametrize("serve", sorted(SERVES))
@pytest.mark.parametrize("name", sorted(CACHE_EXAMPLES))
def test_prefix_caching_worked_example_exactly(name, serve):
    """P1 and P2 of issue 20, and C1-C4 checked by hand (docs/serving.md draws their timelines)."""
    requests, config, trace, totals, records = CACHE_EXAMPLES[name]
    before = copy.deepcopy((requests, config))
    result = SERVES[serve](requests, config)
    assert result["trace"] == trace
    assert {key: result[key] for key in totals} == totals
    by_id = {record["id"]: record for record in result["requests"]}
    for request_id, fields in records.items():
        assert {key: by_id[request_id][key] for key in fields} == fields, request_id
    assert sum(record["cached"] for record in result["requests"]) == result["cache_hit_tokens"]
    callers = {r["id"]: r for r in requests}
    assert all(record.get("tokens") == callers[record["id"]].get("tokens") for record in result["requests"])
    assert result["computed_tokens"] + result["cache_hit_tokens"] == (
        result["useful_tokens"] + result["recomputed_tokens"] + result["aborted_tokens"])
    assert S.check(requests, config, result) == [] and S.check(requests, config, result, policy="none") == []
    assert (requests, config) == before


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_with_caching_off_the_worked_examples_are_unchanged_and_tokens_are_ignored(name):
    requests, config, trace, *_ = EXAMPLES[name]
    with_tokens = [dict(r, tokens=[7] * r["prompt"]) for r in requests]  # every prompt the same: no cache to hit
    for off in ({**config, "prefix_caching": False}, config):
        result = S.run(with_tokens, off)
        assert [{k: v for k, v in e.items() if k != "hits"} for e in result["trace"]] == trace
        assert all(e.get("hits", []) == [] for e in result["trace"])
        assert ("cache_hit_tokens" in result) == ("prefix_caching" in off)
        assert S.check(with_tokens, off, result) == []
    assert S.run(requests, config) == expected_result(name)  # no prefix_caching key: the result of issue 10


def test_s3_record_has_abort_key_only_where_the_caller_gave_one():
    requests, config, *_ = EXAMPLES["S3"]
    records = S.run(requests, config)["requests"]
    assert records[0]["abort"] == 2 and "abort" not in records[1]


# --- the domain: every rule and its message -------------------------------------------

CONFIG = {"max_seqs": 2, "token_budget": 8, "block_size": 2, "num_blocks": 8, "chunked_prefill": True}
REQUEST = {"id": 0, "arrival": 3, "prompt": 2, "output": 2}


class Int(int):
    """An int subclass, which the domain rejects."""


class Dict(dict):
    """A dict subclass, which the domain accepts."""


class List(list):
    """A list subclass, which the domain accepts."""


def config_with(**changes):
    return {**CONFIG, **changes}


def request_with(**changes):
    return {**REQUEST, **changes}


def without(mapping, key):
    return {k: v for k, v in mapping.items() if k != key}


BAD_CALLS = [
    ([REQUEST], "x", "config='x': expected a dict with keys max_seqs, token_budget, block_size, num_blocks, chunked_prefill"),
    ([REQUEST], None, "config=None: expected a dict with keys max_seqs, token_budget, block_size, num_blocks, chunked_prefill"),
    ([REQUEST], without(CONFIG, "token_budget"), "config: missing key 'token_budget'"),
    ([REQUEST], without(CONFIG, "chunked_prefill"), "config: missing key 'chunked_prefill'"),
    ([REQUEST], config_with(reserve_full_sequence=1), "config.reserve_full_sequence=1: expected a bool (True or False)"),
    ([REQUEST], config_with(x=1), "config: unexpected key 'x'; a config has exactly max_seqs, token_budget, block_size, num_blocks, chunked_prefill and optionally reserve_full_sequence and prefix_caching"),
    ([REQUEST], config_with(prefix_caching=1), "config.prefix_caching=1: expected a bool (True or False)"),
    ([REQUEST], config_with(prefix_caching=None), "config.prefix_caching=None: expected a bool (True or False)"),
    ([REQUEST], config_with(prefix_caching="yes"), "config.prefix_caching='yes': expected a bool (True or False)"),
    ([request_with(tokens=[1])], CONFIG, "requests[0].tokens=[1]: expected a list or tuple of exactly prompt=2 ints"),
    ([request_with(tokens=[1, 2, 3])], CONFIG, "requests[0].tokens=[1, 2, 3]: expected a list or tuple of exactly prompt=2 ints"),
    ([request_with(tokens="ab")], CONFIG, "requests[0].tokens='ab': expected a list or tuple of exactly prompt=2 ints"),
    ([request_with(tokens=None)], CONFIG, "requests[0].tokens=None: expected a list or tuple of exactly prompt=2 ints"),
    ([request_with(tokens={1: 1, 2: 2})], CONFIG, "requests[0].tokens={1: 1, 2: 2}: expected a list or tuple of exactly prompt=2 ints"),
    ([request_with(tokens=[1, True])], CONFIG, "requests[0].tokens[1]=True: expected an int"),
    ([request_with(tokens=(1.0, 2))], CONFIG, "requests[0].tokens[0]=1.0: expected an int"),
    ([request_with(tokens=[Int(1), 2])], CONFIG, "requests[0].tokens[0]=1: expected an int"),
    ([request_with(tokens=[1, "2"])], config_with(prefix_caching=False), "requests[0].tokens[1]='2': expected an int"),
    # tokens come after abort, before uniqueness
    ([request_with(abort=1, tokens=[1])], CONFIG, "requests[0].abort=1: expected an int >= arrival=3"),
    ([REQUEST, request_with(tokens=[1])], CONFIG, "requests[1].tokens=[1]: expected a list or tuple of exactly prompt=2 ints"),
    ([REQUEST], config_with(chunked_prefill=1), "config.chunked_prefill=1: expected a bool (True or False)"),
    ([REQUEST], config_with(chunked_prefill=None), "config.chunked_prefill=None: expected a bool (True or False)"),
    ("x", CONFIG, "requests='x': expected a list or tuple of request dicts"),
    ({"id": 0}, CONFIG, "requests={'id': 0}: expected a list or tuple of request dicts"),
    ([5], CONFIG, "requests[0]=5: expected a dict with keys id, arrival, prompt, output[, abort][, tokens]"),
    ([REQUEST, [1]], CONFIG, "requests[1]=[1]: expected a dict with keys id, arrival, prompt, output[, abort][, tokens]"),
    ([request_with(x=1)], CONFIG, "requests[0]: unexpected key 'x'; a request has exactly id, arrival, prompt, output and optionally abort and tokens"),
    ([request_with(id="a")], CONFIG, "requests[0].id='a': expected an int"),
    ([request_with(id=True)], CONFIG, "requests[0].id=True: expected an int"),
    ([request_with(id=Int(1))], CONFIG, "requests[0].id=1: expected an int"),
    ([request_with(id=1.0)], CONFIG, "requests[0].id=1.0: expected an int"),
    ([request_with(arrival=-1)], CONFIG, "requests[0].arrival=-1: expected an int >= 0"),
    ([request_with(arrival=False)], CONFIG, "requests[0].arrival=False: expected an int >= 0"),
    ([request_with(arrival=0.5)], CONFIG, "requests[0].arrival=0.5: expected an int >= 0"),
    ([request_with(prompt=0)], CONFIG, "requests[0].prompt=0: expected an int >= 1"),
    ([request_with(prompt=True)], CONFIG, "requests[0].prompt=True: expected an int >= 1"),
    ([request_with(prompt=Int(2))], CONFIG, "requests[0].prompt=2: expected an int >= 1"),
    ([request_with(output=0)], CONFIG, "requests[0].output=0: expected an int >= 1"),
    ([request_with(output="2")], CONFIG, "requests[0].output='2': expected an int >= 1"),
    ([request_with(abort=None)], CONFIG, "requests[0].abort=None: expected an int >= arrival=3"),
    ([request_with(abort=2)], CONFIG, "requests[0].abort=2: expected an int >= arrival=3"),
    ([request_with(abort=True)], CONFIG, "requests[0].abort=True: expected an int >= arrival=3"),
    ([request_with(abort=Int(5))], CONFIG, "requests[0].abort=5: expected an int >= arrival=3"),
    ([REQUEST, request_with(arrival=0)], CONFIG, "requests[1].id=0: ids must be unique (also requests[0].id)"),
    (
        [request_with(id=1), request_with(id=2), request_with(id=1)],
        CONFIG,
        "requests[2].id=1: ids must be unique (also requests[0].id)",
    ),
    (
        [request_with(prompt=4, output=2)],
        config_with(block_size=2, num_blocks=2),
        "requests[0]: prompt=4 + output=2 - 1 = 5 tokens need 3 blocks of block_size=2, more than num_blocks=2",
    ),
    (
        [request_with(prompt=6, output=4)],
        config_with(chunked_prefill=False, token_budget=8),
        "requests[0]: prompt=6 + output=4 - 1 = 9 tokens exceed token_budget=8, and without chunked_prefill a request must be (re)computed in one tick",
    ),
    # config is checked before the requests, and each request in order, field rules before uniqueness
    ("x", config_with(max_seqs=0), "config.max_seqs=0: expected an int >= 1"),
    ([request_with(prompt=0), 5], CONFIG, "requests[0].prompt=0: expected an int >= 1"),
    ([REQUEST, request_with(arrival=-2)], CONFIG, "requests[1].arrival=-2: expected an int >= 0"),
    # the KV rule comes before the budget rule
    (
        [request_with(prompt=20, output=1)],
        config_with(chunked_prefill=False, num_blocks=2, block_size=2, token_budget=4),
        "requests[0]: prompt=20 + output=1 - 1 = 20 tokens need 10 blocks of block_size=2, more than num_blocks=2",
    ),
]
for key in ("max_seqs", "token_budget", "block_size", "num_blocks"):
    for value in (0, -1, True, Int(3), 2.0, "2", None):
        BAD_CALLS.append(([REQUEST], config_with(**{key: value}), f"config.{key}={value!r}: expected an int >= 1"))
for key in ("id", "arrival", "prompt", "output"):
    BAD_CALLS.append(([without(REQUEST, key)], CONFIG, f"requests[0]: missing key {key!r}"))


@pytest.mark.parametrize("requests, config, message", BAD_CALLS, ids=[m for _, _, m in BAD_CALLS])
def test_every_bad_call_names_its_rule(requests, config, message):
    before = (copy.deepcopy(requests), copy.deepcopy(config))
    for entry in (S.validate, S.run, S.initial, lambda r, c: S.check(r, c, {})):
        with pytest.raises(ValueError) as raised:
            entry(requests, config)
        assert str(raised.value) == message
    assert not S.is_valid(requests, config)
    assert (requests, config) == before


@pytest.mark.parametrize(
    "requests, config",
    [
        ([], CONFIG),
        ((), CONFIG),
        (List([Dict(REQUEST)]), Dict(CONFIG)),
        ((REQUEST,), CONFIG),
        ([request_with(abort=3)], CONFIG),  # abort == arrival
        ([request_with(id=-(10**30))], CONFIG),
        ([request_with(prompt=7, output=2)], config_with(chunked_prefill=False, token_budget=8)),  # 8 == budget
        ([request_with(prompt=15, output=2)], config_with(block_size=2, num_blocks=8)),  # 16 tokens, 8 blocks
        ([request_with(arrival=10**18, prompt=1, output=1)], config_with(max_seqs=10**18, num_blocks=10**18)),
    ],
)
def test_edge_calls_are_valid(requests, config):
    assert S.is_valid(requests, config)
    result = S.run(requests, config)
    assert S.check(requests, config, result) == []


def test_peak_kv_need_exactly_at_the_pool_is_valid_and_one_more_token_is_not():
    config = config_with(block_size=3, num_blocks=2)
    assert S.is_valid([request_with(prompt=4, output=3)], config)  # 6 tokens, 2 blocks
    assert not S.is_valid([request_with(prompt=5, output=3)], config)  # 7 tokens, 3 blocks


def test_check_rejects_an_unknown_policy():
    requests, config, *_ = EXAMPLES["S1"]
    with pytest.raises(ValueError, match="policy='lifo': expected one of fcfs, none"):
        S.check(requests, config, S.run(requests, config), policy="lifo")


# --- random valid calls ------------------------------------------------------------------


@st.composite
def calls(draw, max_requests=6):
    """Valid serve calls: tight and loose budgets, pools barely big enough, aborts before, during and after running."""
    chunked = draw(st.booleans())
    block_size = draw(st.integers(1, 4))
    count = draw(st.integers(0, max_requests))
    ids = draw(st.lists(st.one_of(st.integers(0, 9), st.integers(-(10**12), 10**12)), min_size=count, max_size=count, unique=True))
    requests = []
    for request_id in ids:
        arrival = draw(st.integers(0, 6))
        request = {"id": request_id, "arrival": arrival, "prompt": draw(st.integers(1, 9)), "output": draw(st.integers(1, 5))}
        if draw(st.integers(0, 2)) == 0:
            request["abort"] = arrival + draw(st.integers(0, 10))
        requests.append(request)
    works = [r["prompt"] + r["output"] - 1 for r in requests]
    peak = max((-(-w // block_size) for w in works), default=1)
    num_blocks = peak + draw(st.sampled_from([0, 0, 1, 2, 5]))
    if chunked:
        token_budget = draw(st.integers(1, 12))
    else:
        token_budget = max(works, default=1) + draw(st.sampled_from([0, 0, 1, 3, 10]))
    config = {
        "max_seqs": draw(st.integers(1, 4)),
        "token_budget": token_budget,
        "block_size": block_size,
        "num_blocks": num_blocks,
        "chunked_prefill": chunked,
    }
    assert S.is_valid(requests, config), (requests, config)
    return requests, config


def states(requests, config):
    state = S.initial(requests, config)
    yield state
    while not S.is_terminal(state):
        state = S.step(state)
        yield state


@FAST
@given(calls())
def test_every_state_of_the_reference_run_satisfies_every_state_invariant(call):
    requests, config = call
    for state in states(requests, config):
        assert S.broken_state_invariants(state) == [], (state.latest, S.broken_state_invariants(state))


@FAST
@given(calls())
def test_runs_terminate_within_the_ranking_function(call):
    requests, config = call
    state = S.initial(requests, config)
    budget = S.remaining_work(state)
    steps = 0
    while not S.is_terminal(state):
        before = S.remaining_work(state)
        state = S.step(state)
        assert S.remaining_work(state) < before, "a step that does not decrease the ranking function"
        steps += 1
    assert steps <= budget
    assert S.remaining_work(state) == 0
    bound = max((r["arrival"] for r in requests), default=0) + sum(r["prompt"] + r["output"] for r in requests)
    assert state.clock <= bound


@FAST
@given(calls())
def test_step_is_pure(call):
    requests, config = call
    state = S.initial(requests, config)
    while not S.is_terminal(state):
        snapshot = copy.deepcopy(state)
        after = S.step(state)
        assert state == snapshot, "step changed its argument"
        assert S.step(state) == after, "step gave two answers"
        state = after


@FAST
@given(calls())
def test_work_conservation_totals_hold(call):
    requests, config = call
    result = S.run(requests, config)
    assert result["computed_tokens"] == result["useful_tokens"] + result["recomputed_tokens"] + result["aborted_tokens"]
    assert result["computed_tokens"] == sum(n for e in result["trace"] for _, n in e["scheduled"])
    finished = [r for r in result["requests"] if r["finish"] is not None]
    assert result["useful_tokens"] == sum(r["prompt"] + r["output"] - 1 for r in finished)
    assert all(r["generated"] == r["output"] for r in finished)
    assert all((r["finish"] is None) != (r["aborted"] is None) for r in result["requests"])
    assert all(r["aborted"] == r["abort"] for r in result["requests"] if r["aborted"] is not None)
    if result["makespan_ticks"]:
        assert math.isclose(result["token_utilization"], result["computed_tokens"] / (config["token_budget"] * result["makespan_ticks"]))


def unusual(value, depth=0):
    """The same value with tuples for lists, subclasses for dicts and lists, and extra keys in every dict."""
    if isinstance(value, dict):
        out = Dict({key: unusual(item, depth + 1) for key, item in value.items()})
        out["extra_key_" + str(depth)] = ["ignored"]
        return out
    if isinstance(value, list):
        items = [unusual(item, depth + 1) for item in value]
        return tuple(items) if depth % 2 else List(items)
    return value


@FAST
@given(calls())
def test_the_oracle_finds_nothing_in_the_reference_result(call):
    requests, config = call
    result = S.run(requests, config)
    assert S.check(requests, config, result) == []
    assert S.check(requests, config, result, reference=result) == []
    assert S.check(requests, config, result, policy="none") == []
    assert S.check(requests, config, unusual(result)) == []
    assert S.check(requests, config, unusual(result), policy="none") == []


@FAST
@given(calls())
def test_the_caller_objects_never_change(call):
    requests, config = call
    before = copy.deepcopy((requests, config))
    inner = [id(r) for r in requests]
    result = S.run(requests, config)
    S.check(requests, config, result)
    S.initial(requests, config)
    assert (requests, config) == before
    assert [id(r) for r in requests] == inner


# --- prefix caching drawn: prompts from a few families, so that hits, evictions and preemptions meet -------------


@st.composite
def cached_calls(draw, max_requests=7):
    """Valid calls with prefix caching on (one in four off, tokens given all the same): identical prompts, one a
    prefix of another, equal up to the last token, other prompts and unnamed ones, in pools that run short."""
    chunked = draw(st.booleans())
    block_size = draw(st.integers(1, 3))
    base = draw(st.lists(st.integers(0, 3), min_size=1, max_size=10))
    requests = []
    for request_id in range(draw(st.integers(0, max_requests))):
        arrival = draw(st.integers(0, 5))
        family = draw(st.sampled_from(["same", "prefix", "longer", "last token", "other", "unnamed"]))
        tokens = {
            "same": lambda: list(base),
            "prefix": lambda: base[: draw(st.integers(1, len(base)))],
            "longer": lambda: base + draw(st.lists(st.integers(0, 3), min_size=1, max_size=4)),
            "last token": lambda: base[:-1] + [base[-1] + 1],
            "other": lambda: draw(st.lists(st.integers(0, 3), min_size=1, max_size=8)),
            "unnamed": lambda: None,
        }[family]()
        request = {"id": request_id, "arrival": arrival,
                   "prompt": len(tokens) if tokens is not None else draw(st.integers(1, 8)),
                   "output": draw(st.integers(1, 4))}
        if tokens is not None:
            request["tokens"] = tokens
        if draw(st.integers(0, 3)) == 0:
            request["abort"] = arrival + draw(st.integers(0, 8))
        requests.append(request)
    works = [r["prompt"] + r["output"] - 1 for r in requests]
    peak = max((-(-w // block_size) for w in works), default=1)
    config = {
        "max_seqs": draw(st.integers(1, 4)),
        "token_budget": draw(st.integers(1, 12)) if chunked else max(works, default=1) + draw(st.sampled_from([0, 1, 10])),
        "block_size": block_size,
        "num_blocks": peak + draw(st.sampled_from([0, 0, 1, 2, 4, 8])),
        "chunked_prefill": chunked,
        "prefix_caching": draw(st.sampled_from([True, True, True, False])),
    }
    reserve = draw(st.sampled_from([None, None, False, True]))  # vLLM's reserve_full_sequence, with hits counted
    if reserve is not None:
        config["reserve_full_sequence"] = reserve
    assert S.is_valid(requests, config), (requests, config)
    return requests, config


CACHED = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@CACHED
@given(cached_calls())
def test_with_caching_every_state_of_the_reference_run_satisfies_every_state_invariant(call):
    requests, config = call
    for state in states(requests, config):
        assert S.broken_state_invariants(state) == [], (state.latest, state.pool, S.broken_state_invariants(state))


@CACHED
@given(cached_calls())
def test_with_caching_runs_terminate_within_the_ranking_function(call):
    requests, config = call
    state = S.initial(requests, config)
    budget = S.remaining_work(state)
    steps = 0
    while not S.is_terminal(state):
        before = S.remaining_work(state)
        state = S.step(state)
        assert S.remaining_work(state) < before, "a step that does not decrease the ranking function"
        steps += 1
    assert steps <= budget


@CACHED
@given(cached_calls())
def test_with_caching_the_oracle_finds_nothing_in_the_reference_result(call):
    requests, config = call
    result = S.run(requests, config)
    for policy in S.POLICIES:
        assert S.check(requests, config, result, policy=policy) == []
        assert S.check(requests, config, unusual(result), policy=policy) == []
    assert result["computed_tokens"] + result["cache_hit_tokens"] == (
        result["useful_tokens"] + result["recomputed_tokens"] + result["aborted_tokens"])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(cached_calls(max_requests=8))
def test_impl_serve_equals_the_reference_with_caching_drawn(call):
    """The differential test of issue 20: impl.serve (its own pool, impl/serving_cache.py) against spec.serving.run."""
    import impl

    requests, config = call
    before = copy.deepcopy(call)
    assert impl.serve(requests, config) == S.run(requests, config)
    assert (requests, config) == before


@CACHED
@given(cached_calls(), st.integers(0, 12), st.data())
def test_with_caching_cancel_and_submit_keep_every_state_invariant(call, when, data):
    requests, config = call
    state = S.initial(requests, config)
    for _ in range(when):
        if S.is_terminal(state):
            break
        state = S.step(state)
    active = list(state.waiting + state.running)
    if active:
        state = S.cancel(state, data.draw(st.sampled_from(active)).id)
    state = S.submit(state, S.Request(10**6, state.clock, 1, 1, None, [requests[0]["tokens"][0]] if requests and "tokens" in requests[0] else [0]))
    while not S.is_terminal(state):
        state = S.step(state)
        assert S.broken_state_invariants(state) == []


@CACHED
@given(cached_calls(), st.data())
def test_every_mutant_of_a_caching_reference_result_is_caught_even_without_the_policy(call, data):
    requests, config = call
    result = S.run(requests, config)
    if not result["trace"]:
        return
    mutant = copy.deepcopy(result)
    e = data.draw(st.sampled_from(mutant["trace"]))
    kind = data.draw(st.sampled_from(["n", "drop", "repeat", "record", "total", "block"]))
    if kind == "n" and e["scheduled"]:
        data.draw(st.sampled_from(e["scheduled"]))[1] += data.draw(st.sampled_from([-1, 1]))
    elif kind in ("drop", "repeat"):
        key = data.draw(st.sampled_from(["scheduled", "preempted", "aborted", "freed", "allocated", "finished", "hits"]))
        if e.get(key):
            index = data.draw(st.integers(0, len(e[key]) - 1))
            if kind == "drop":
                del e[key][index]
            else:
                e[key].insert(index, copy.deepcopy(e[key][index]))
    elif kind == "record":
        record = data.draw(st.sampled_from(mutant["requests"]))
        field = data.draw(st.sampled_from(MUTABLE_FIELDS + ("cached",)))
        if field in record:
            record[field] = 0 if record[field] is None else record[field] + data.draw(st.sampled_from([-1, 1]))
    elif kind == "total":
        key = data.draw(st.sampled_from(MUTABLE_TOTALS + ("cache_hit_tokens",)))
        if key in mutant:
            mutant[key] += data.draw(st.sampled_from([-1, 1]))
    elif kind == "block":  # one block id of a list changed to another id of the pool
        pairs = [pair for key in ("freed", "allocated", "hits") for pair in e.get(key, []) if pair[1]]
        if pairs:
            pair = data.draw(st.sampled_from(pairs))
            pair[1][data.draw(st.integers(0, len(pair[1]) - 1))] = data.draw(st.integers(0, config["num_blocks"]))
    if mutant == result:
        return
    found = S.check(requests, config, mutant)
    assert found, f"{kind} mutant not caught: {mutant}"
    assert names_in_order(found)
    if kind != "block":  # another block of the pool may be a correct choice for another policy: fcfs judges it
        assert S.check(requests, config, mutant, policy="none"), f"{kind} mutant not caught without the policy"


def test_a_state_breaking_each_caching_claim_is_caught_by_its_predicate():
    requests, config, *_ = CACHE_EXAMPLES["C3"]
    state = S.step(S.step(S.initial(requests, config)))  # after tick 1: blocks 0 and 1 shared by requests 0 and 1
    assert S.broken_state_invariants(state) == [] and state.running[1].blocks[:2] == (0, 1)
    pool = state.pool
    foreign = state._replace(pool=pool._replace(content=(pool.content[1],) + pool.content[1:]))  # block 0 holds [1..4]
    assert S.broken_state_invariants(foreign) == ["no_false_sharing"]
    leaked = state._replace(running=(state.running[0]._replace(blocks=state.running[0].blocks[:2]), state.running[1]))
    assert "refcount_exact" in S.broken_state_invariants(leaked)  # block 2: taken, held by no one, not in the queue
    queued = state._replace(pool=pool._replace(returned=(0,)))  # a held block in the free queue
    assert S.broken_state_invariants(queued)[0] == "refcount_exact"
    twice = state._replace(running=(state.running[0], state.running[1]._replace(blocks=(0, 0, 3))))
    assert "kv_exclusive" in S.broken_state_invariants(twice)
    assert S.broken_state_invariants(state._replace(pool=None)) == ["well_typed"]


# --- the online model: submit and cancel ----------------------------------------------------


def next_tick(state):
    """The tick the next step runs (after its idle jump), or infinity when nothing is waiting or running."""
    if state.running or any(p.request.arrival <= state.clock for p in state.waiting):
        return state.clock
    return min((p.request.arrival for p in state.waiting), default=math.inf)


@FAST
@given(calls())
def test_submitting_each_request_by_its_arrival_gives_the_offline_run(call):
    requests, config = call
    offline = S.run(requests, config)
    pending = sorted(S.validate(requests, config)[0], key=S.fcfs_key)
    state = S.initial([], config)
    trace = []
    while pending or not S.is_terminal(state):
        while pending and pending[0].arrival <= next_tick(state):
            state = S.submit(state, pending.pop(0))
            assert S.broken_state_invariants(state) == []
        state = S.step(state)
        assert S.broken_state_invariants(state) == []
        trace.append(trace_entry(state.latest))
    assert trace == offline["trace"]


@FAST
@given(calls())
def test_run_equals_stepping_the_whole_input_from_initial(call):
    """run (live requests only, each submitted at its arrival, retired when it ends) is the plain step loop."""
    from spec.serving.metrics import result_from_run

    requests, config = call
    state = S.initial(requests, config)
    trace = []
    while not S.is_terminal(state):
        state = S.step(state)
        trace.append(trace_entry(state.latest))
    assert S.run(requests, config) == result_from_run(state, trace)


@FAST
@given(calls(), st.integers(0, 12), st.data())
def test_cancel_is_an_abort_at_max_clock_arrival(call, when, data):
    requests, config = call
    state = S.initial(requests, config)
    for _ in range(when):
        if S.is_terminal(state):
            break
        state = S.step(state)
    active = [p for p in state.waiting + state.running]
    if not active:
        return
    victim = data.draw(st.sampled_from(active)).request
    cancelled = S.cancel(state, victim.id)
    tick = max(state.clock, victim.arrival)
    if victim.abort is not None:
        tick = min(tick, victim.abort)
    assert [p.request.abort for p in cancelled.waiting + cancelled.running if p.id == victim.id] == [tick]
    assert S.broken_state_invariants(cancelled) == []
    while not S.is_terminal(cancelled):
        cancelled = S.step(cancelled)
        assert S.broken_state_invariants(cancelled) == []
    assert [e.tick for e in cancelled.aborted if e.progress.id == victim.id] == [tick]
    changed = [dict(r, abort=tick) if r["id"] == victim.id else r for r in requests]
    offline = S.initial(changed, config)
    while not S.is_terminal(offline):
        offline = S.step(offline)
    assert offline.ledger == cancelled.ledger
    assert sorted(offline.aborted) == sorted(cancelled.aborted)


def test_submit_and_cancel_reject_what_the_domain_rejects():
    state = S.initial([], CONFIG)
    state = S.step(S.submit(state, S.Request(0, 0, 2, 2)))
    with pytest.raises(ValueError, match="arrival=0: expected an int >= clock=1"):
        S.submit(state, S.Request(1, 0, 2, 2))
    with pytest.raises(ValueError, match="ids must be unique"):
        S.submit(state, S.Request(0, 5, 2, 2))
    with pytest.raises(ValueError, match="need 9 blocks"):
        S.submit(state, S.Request(2, 5, 17, 2))
    with pytest.raises(ValueError, match="request.prompt=True"):
        S.submit(state, S.Request(2, 5, True, 2))
    with pytest.raises(ValueError, match="request_id=7: no waiting or running request"):
        S.cancel(state, 7)


# --- the registry ----------------------------------------------------------------------------

ISSUE_ORDER = [
    "well_typed",
    "no_duplicate_active", "no_start_before_arrival", "slot_bound", "nonnegative_remaining", "work_conservation",
    "every_job_completes_once", "termination", "token_budget", "kv_capacity",
    "no_false_sharing", "refcount_exact",  # issue 20: right after kv_capacity, before kv_exact
    "kv_exclusive", "kv_exact",
    "longest_prefix_hit", "lru_eviction",  # issue 20: first among the policy rows
    "fcfs_admission", "running_first", "preempt_newest", "no_admission_after_preemption", "work_conserving",
    "metrics_consistent", "matches_reference",
    "validation", "input_unchanged", "deterministic",
]


def test_the_registry_lists_the_issue_claims_in_order_with_one_sentence_each():
    assert [inv.name for inv in S.INVARIANTS] == ISSUE_ORDER
    families = [inv.family for inv in S.INVARIANTS]
    assert families == sorted(families, key=spec.registry.FAMILIES.index)
    for inv in S.INVARIANTS:
        lines = [line.strip() for line in inv.doc.strip().splitlines() if line.strip()]
        assert len(lines) == 2 and lines[0].endswith(".") and lines[1].endswith("."), inv.name
    assert type(S.INVARIANTS[0]) is type(spec.INVARIANTS[0]) and S.Violation is spec.Violation
    # the names the chapter's model shares carry over
    shared = [inv.name for inv in spec.INVARIANTS if inv.family in ("type", "safety", "metrics", "call")]
    assert all(name in S.BY_NAME for name in shared)


def test_the_safety_family_does_not_depend_on_the_policy():
    # a reading of the claims' code: no safety predicate looks at the FCFS key or the queue order
    import inspect

    for inv in S.INVARIANTS:
        if inv.family == "safety" and inv.holds is not None:
            source = inspect.getsource(inv.holds)
            assert "fcfs_key" not in source and "admitted" not in source, inv.name


def test_a_state_breaking_each_kv_claim_is_caught_by_its_predicate():
    requests, config, *_ = EXAMPLES["S1"]
    state = S.step(S.initial(requests, config))  # tick 0: request 0 holds blocks 0 and 1
    running = state.running[0]
    assert S.broken_state_invariants(state) == []
    leak = state._replace(running=(running._replace(blocks=(0, 1, 2)),))
    assert S.broken_state_invariants(leak) == ["kv_exact"]
    shared = S.step(state)
    two = shared._replace(running=(shared.running[0], shared.running[1]._replace(blocks=shared.running[0].blocks[:1])))
    assert "kv_exclusive" in S.broken_state_invariants(two)
    outside = state._replace(running=(running._replace(blocks=(0, 99)),))
    assert S.broken_state_invariants(outside)[0] == "kv_capacity"
    waiting_holds = state._replace(waiting=(state.waiting[0]._replace(blocks=(5,)),))
    assert S.broken_state_invariants(waiting_holds) == ["kv_exact"]
    assert S.broken_state_invariants(state._replace(clock=1.0)) == ["well_typed"]
    assert isinstance(running, Progress)


# --- the oracle against mutants of the reference result ------------------------------------

MUTABLE_TOTALS = ("makespan_ticks", "computed_tokens", "useful_tokens", "recomputed_tokens", "aborted_tokens", "preemptions")
MUTABLE_FIELDS = ("start", "first_token", "finish", "aborted", "generated", "preemptions", "computed")


@FAST
@given(calls(), st.data())
def test_every_mutant_of_the_reference_result_is_caught_even_without_the_policy(call, data):
    requests, config = call
    result = S.run(requests, config)
    if not result["trace"]:
        return
    mutant = copy.deepcopy(result)
    kind = data.draw(st.sampled_from(["n", "drop", "repeat", "record", "total", "tick"]))
    e = data.draw(st.sampled_from(mutant["trace"]))
    if kind == "n":
        pair = data.draw(st.sampled_from(e["scheduled"])) if e["scheduled"] else None
        if pair is None:
            return
        pair[1] += data.draw(st.sampled_from([-1, 1]))
    elif kind in ("drop", "repeat"):
        key = data.draw(st.sampled_from(["scheduled", "preempted", "aborted", "freed", "allocated", "finished"]))
        if not e[key]:
            return
        index = data.draw(st.integers(0, len(e[key]) - 1))
        if kind == "drop":
            del e[key][index]
        else:
            e[key].insert(index, copy.deepcopy(e[key][index]))
    elif kind == "record":
        record = data.draw(st.sampled_from(mutant["requests"]))
        field = data.draw(st.sampled_from(MUTABLE_FIELDS))
        record[field] = 0 if record[field] is None else record[field] + data.draw(st.sampled_from([-1, 1]))
    elif kind == "total":
        key = data.draw(st.sampled_from(MUTABLE_TOTALS))
        mutant[key] += data.draw(st.sampled_from([-1, 1]))
    else:
        e["tick"] += data.draw(st.sampled_from([-1, 1]))
    if mutant == result:
        return
    found = S.check(requests, config, mutant, policy="none")
    assert found, f"{kind} mutant not caught: {mutant}"
    assert not any("could not be read" in v.message for v in found), found
    assert names_in_order(found)
    assert "matches_reference" in {v.invariant for v in S.check(requests, config, mutant)}


def names_in_order(violations):
    """Each invariant once, root cause first (issue 21, ``spec.registry.root_cause_first``): family by family, the
    reference's difference last."""
    layer = {invariant.name: FAMILIES.index(invariant.family) for invariant in S.INVARIANTS}
    names = [v.invariant for v in violations]
    replayed = [name for name in names if name != "matches_reference"]
    layers = [layer[name] for name in replayed]
    return len(set(names)) == len(names) and names[:len(replayed)] == replayed and layers == sorted(layers)


def test_docs_registry_table_is_the_registry():
    import pathlib

    text = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "serving.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows == [f"| `{inv.name}` | {inv.family} | {inv.claim} |" for inv in S.INVARIANTS]


def after(requests, config, ticks):
    state = S.initial(requests, config)
    for _ in range(ticks):
        state = S.step(state)
    return state


def test_a_state_breaking_each_policy_claim_is_caught_by_its_predicate():
    s1 = EXAMPLES["S1"]
    start = S.initial(s1[0], s1[1])
    assert "fcfs_admission" in S.broken_state_invariants(start._replace(waiting=start.waiting[::-1]))

    tick1 = after(s1[0], s1[1], 2)  # tick 1 scheduled [[0, 2], [1, 2]], admitting 1
    assert S.broken_state_invariants(tick1) == []
    swapped = tick1._replace(latest=tick1.latest._replace(scheduled=tick1.latest.scheduled[::-1]))
    assert "running_first" in S.broken_state_invariants(swapped)

    s2 = EXAMPLES["S2"]
    tick0 = after(s2[0], s2[1], 1)  # both admitted in tick 0
    preempting = tick0._replace(latest=tick0.latest._replace(preempted=(1,)))
    assert "no_admission_after_preemption" in S.broken_state_invariants(preempting)

    from tests.test_serving_oracle import SKIP

    waited = after(SKIP[0], SKIP[1], 2)  # tick 1: the head needs 3 blocks, 1 is free, so the pass stops
    assert S.broken_state_invariants(waited) == []
    roomier = waited._replace(config=waited.config._replace(num_blocks=8))  # now it would have fitted
    assert S.broken_state_invariants(roomier) == ["work_conserving"]
