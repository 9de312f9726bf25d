"""The correct prefix-caching schedulers (issue 20) agree with each other, the worked examples and the rules.

Three schedulers written from issue 20's contract alone, each a different design:
correct/cache_tick_by_tick.py (a literal per-tick transcription), correct/cache_event_heaps.py
(heaps, cursors, an ordered free queue, parallel arrays) and online_correct/cache_clock_free.py
(a clock-free engine in the shape of vLLM v1's KV cache manager, driven as the harness drives
one).  They reproduce the worked examples P1, P2 and C1-C5 (tests/serving_cache_examples.py)
exactly, agree exactly on inputs drawn from prompt families that make caching happen, and
break none of the rules a replay of their trace checks (tests/serving_cache_tools.py), which
does not depend on a reading they might share.  With caching off they equal the issue-10
scheduler correct/tick_by_tick.py.

Readings of the issue's text these schedulers share, each a decision where the text is
silent or could be read two ways (the cache branch's spec, written apart, reads them the
same: test_the_spec_agrees_with_the_caching_schedulers):
- `hits` lists the admitted requests in admission order (the issue orders each list only);
- the known - 1 cap holds at every admission, so two identical prompts of a whole number
  of blocks never share their last block and both copies are registered (C4);
- blocks filled by the running pass (later chunks, decode) are registered when scheduled,
  so a block holding generated tokens can be hit after a preemption (C1);
- with caching on, a request without `tokens` still hits its own blocks after a
  preemption, and the free queue is LRU: the same requests give another result than
  with caching off whenever a freed block is reused;
- the results carry `hits`, `cached` and `cache_hit_tokens` always, as the issue says of
  ours (the cache branch's spec leaves them out when the config does not name
  `prefix_caching`; extra keys are allowed, so both pass);
- a request's `tokens` comes back in its record as the caller gave it (a copy, a tuple
  stays a tuple), and is validated with caching off too.
"""

import copy
import json
import pathlib
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proofs.targets import load_callable, parse_target
from tests.serving_cache_examples import EXAMPLES
from tests.serving_cache_tools import CORNERS, drive_online, trace_corners, trace_events

CORPUS = pathlib.Path(__file__).parent / "corpus" / "serving"
SERVE = {name: load_callable(parse_target(f"{CORPUS / 'correct' / name}.py:serve"))
         for name in ("cache_tick_by_tick", "cache_event_heaps")}
MAKE = load_callable(parse_target(f"{CORPUS / 'online_correct' / 'cache_clock_free'}.py:make"))
ISSUE_10 = load_callable(parse_target(f"{CORPUS / 'correct' / 'tick_by_tick'}.py:serve"))

ENTRY_KEYS = ["tick", "scheduled", "preempted", "aborted", "freed", "allocated", "finished", "hits"]
RECORD_KEYS = ["start", "first_token", "finish", "aborted", "generated", "preemptions", "computed", "cached"]
TOTAL_KEYS = ["makespan_ticks", "computed_tokens", "useful_tokens", "recomputed_tokens", "aborted_tokens",
              "cache_hit_tokens", "token_utilization", "preemptions"]

FAST = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def plain(value):
    """The value with tuples as lists, as JSON would carry it."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def assert_exact_format(result, requests):
    """The result is plain data in the contract's shape: every list of every entry, every record field, every total."""
    assert type(result) is dict and sorted(result) == sorted(["trace", "requests"] + TOTAL_KEYS), sorted(result)
    assert json.loads(json.dumps(result)) == plain(result)  # plain data (a caller's tuple of tokens comes back as one)
    for entry in result["trace"]:
        assert sorted(entry) == sorted(ENTRY_KEYS) and all(type(entry[k]) is list for k in ENTRY_KEYS[1:]), entry
    by_id = {r["id"]: r for r in requests}
    for row in result["requests"]:
        assert sorted(row) == sorted(list(by_id[row["id"]]) + RECORD_KEYS), row
        assert {k: row[k] for k in by_id[row["id"]]} == by_id[row["id"]]
    assert type(result["token_utilization"]) is float


# ---------------------------------------------------------------- the worked examples

@pytest.mark.parametrize("example", sorted(EXAMPLES))
@pytest.mark.parametrize("name", sorted(SERVE))
def test_each_scheduler_reproduces_the_worked_examples_exactly(name, example):
    requests, config, trace, totals, records = EXAMPLES[example]
    result = SERVE[name](copy.deepcopy(requests), dict(config))
    assert_exact_format(result, requests)
    assert result["trace"] == trace
    assert {k: result[k] for k in TOTAL_KEYS} == totals
    assert [{k: row[k] for k in records[0]} for row in result["requests"]] == records
    assert trace_events(result, requests, config) == []


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_the_online_engine_reproduces_the_worked_examples(example):
    requests, config, trace = EXAMPLES[example][:3]
    assert drive_online(MAKE, copy.deepcopy(requests), config) == trace


def test_the_examples_show_what_they_are_named_for():
    """C1-C5 each make their corner happen (the replay sees it), so none of them tests less than it says."""
    wanted = {"C1": ["hit after a preemption", "hit of a generated token", "hit on a free block"],
              "C2": ["hit block kept the head out", "registered block evicted"],
              "C3": ["aborted with shared blocks", "hit on a held block"],
              "C4": ["two blocks of one chain", "registered block evicted", "cap kept a cached block",
                     "hit on a free block"],
              "C5": ["hit on a held block"]}
    for name, corners in wanted.items():
        requests, config = EXAMPLES[name][:2]
        seen = trace_corners(SERVE["cache_tick_by_tick"](requests, config), requests, config)
        assert [c for c in corners if c not in seen] == [], (name, seen)


# ---------------------------------------------------------------- drawn inputs that make caching happen

class Draws:
    """One builder for two sources of choices: Hypothesis's ``data.draw`` (shrinkable) or a seeded Random."""

    def __init__(self, data=None, rng=None):
        self.data, self.rng = data, rng

    def int(self, low, high):
        return self.data.draw(st.integers(low, high)) if self.data else self.rng.randint(low, high)

    def pick(self, options):
        return self.data.draw(st.sampled_from(options)) if self.data else self.rng.choice(options)


def cache_call(d):
    """A valid (requests, config) drawn from prompt families that share prefixes.

    A few base prompts over a 4-token alphabet; each request copies one (identical), cuts it
    (on a block boundary, one before or one after), extends it, changes its last token, or
    has a private prompt (no `tokens`).  One call in four is under memory pressure (a pool
    just big enough for the largest request, several seats, long outputs), so that eviction
    and preemption meet hits; one in four is twins: copies and extensions of one prompt
    arriving within two ticks, chunked under a small budget (blocks still being filled when
    the next copy is admitted) or a huge one (copies that finish together), half of them
    aborted one to three ticks after they arrive (aborts of requests holding shared blocks).
    """
    mode = d.pick(["any", "any", "pressure", "twins"])
    pressure, twins = mode == "pressure", mode == "twins"
    bs = d.pick([1, 2, 2, 3, 4])
    chunked = True if twins else d.pick([True, False])
    families = [[d.int(0, 3) for _ in range(d.int(bs + 1 if twins else 1, 3 * bs + 2))]
                for _ in range(1 if twins else d.int(1, 3))]
    requests = []
    for rid in range(d.int(2 if pressure or twins else 1, 4 if twins else 8)):
        base = d.pick(families)
        kind = d.pick(["same", "extend"] if twins else ["same", "same", "cut", "extend", "last", "private"])
        if kind == "same":
            tokens = list(base)
        elif kind == "cut":
            edge = d.int(1, max(1, len(base) // bs)) * bs + d.pick([-1, 0, 0, 1])
            tokens = base[:max(1, min(len(base), edge))]
        elif kind == "extend":
            tokens = base + [d.int(0, 3) for _ in range(d.int(1, bs + 1))]
        elif kind == "last":
            tokens = base[:-1] + [9]
        else:
            tokens = None
        arrival = d.int(0, 1 if pressure else 2 if twins else 4)
        request = {"id": rid, "arrival": arrival,
                   "prompt": len(tokens) if tokens is not None else d.int(1, 2 * bs + 1),
                   "output": d.int(2, 8) if pressure else d.int(1, 4)}
        if tokens is not None:
            request["tokens"] = tokens if d.pick([True, False]) else tuple(tokens)
        if d.int(0, 1 if twins else 3) == 0:
            request["abort"] = arrival + (d.int(1, 3) if twins else d.int(0, 6))
        requests.append(request)
    peak = max(r["prompt"] + r["output"] - 1 for r in requests)
    need = -(-peak // bs)
    config = {"max_seqs": d.int(2, 4) if pressure or twins else d.int(1, 4),
              "token_budget": (d.pick([d.int(1, 2 * bs + 1), 10**6]) if twins else
                               d.pick([d.int(1, 4), d.int(1, 2 * peak), 10**6]) if chunked
                               else peak + d.pick([0, 0, 1, 3])),
              "block_size": bs, "num_blocks": need + (d.pick([0, 1]) if pressure else d.pick([0, 1, 2, 4, 8])),
              "chunked_prefill": chunked}
    caching = d.pick([True] * 8 + [False, None])
    if caching is not None:
        config["prefix_caching"] = caching
    if d.pick([True, False]):
        requests = tuple(requests)
    return requests, config


class _DrawData:
    """Adapts a composite strategy's ``draw`` to the ``data.draw`` that Draws uses."""

    def __init__(self, draw):
        self.draw = draw


@st.composite
def cache_calls(draw):
    return cache_call(Draws(data=_DrawData(draw)))


def issue_10_view(result, requests, config):
    """``result`` without what issue 20 added, and the call without it: what correct/tick_by_tick.py returns."""
    trace = [{k: v for k, v in e.items() if k != "hits"} for e in result["trace"]]
    rows = [{k: v for k, v in r.items() if k not in ("cached", "tokens")} for r in result["requests"]]
    out = dict(result, trace=trace, requests=rows)
    del out["cache_hit_tokens"]
    call = ([{k: v for k, v in r.items() if k != "tokens"} for r in requests],
            {k: v for k, v in config.items() if k != "prefix_caching"})
    return out, call


@FAST
@given(cache_calls())
def test_the_three_caching_schedulers_agree_exactly_and_break_no_rule(call):
    requests, config = call
    before = copy.deepcopy(call)
    reference = SERVE["cache_tick_by_tick"](requests, config)
    assert copy.deepcopy(call) == before and type(requests) is type(before[0])
    assert_exact_format(reference, requests)
    assert trace_events(reference, requests, config) == []
    assert SERVE["cache_event_heaps"](requests, config) == reference
    assert copy.deepcopy(call) == before
    assert drive_online(MAKE, requests, config) == reference["trace"]
    if not config.get("prefix_caching"):
        assert reference["cache_hit_tokens"] == 0 and all(not e["hits"] for e in reference["trace"])
        expected, old_call = issue_10_view(reference, requests, config)
        assert ISSUE_10(*old_call) == expected


def test_the_drawn_calls_make_every_caching_corner_happen():
    """The families are not vacuous: over 400 seeded calls, each corner of the cache happens at least 5 times."""
    rng = random.Random(20)
    seen = dict.fromkeys(CORNERS, 0)
    for _ in range(400):
        requests, config = cache_call(Draws(rng=rng))
        result = SERVE["cache_tick_by_tick"](requests, config)
        for corner in trace_corners(result, requests, config):
            seen[corner] += 1
    assert min(seen.values()) >= 5, seen


@pytest.mark.parametrize("seed", range(3))
def test_the_three_agree_on_large_loads_with_shared_prompts(seed):
    """Over a hundred requests from shared prompt families, with preemptions, aborts and evictions: one answer."""
    rng = random.Random(seed)
    bs = rng.choice([1, 2, 4])
    families = [[rng.randint(0, 5) for _ in range(rng.randint(4, 40))] for _ in range(6)]
    requests = []
    for rid in range(120):
        base = rng.choice(families)
        tokens = base[:rng.randint(1, len(base))] + [rng.randint(0, 5) for _ in range(rng.randint(0, 4))]
        request = {"id": rid * 7 - 300, "arrival": rng.randint(0, 200), "prompt": len(tokens), "tokens": tokens,
                   "output": rng.randint(1, 30)}
        if rng.random() < 0.2:
            request["abort"] = request["arrival"] + rng.randint(0, 40)
        requests.append(request)
    peak = max(r["prompt"] + r["output"] - 1 for r in requests)
    config = {"max_seqs": rng.randint(4, 16), "token_budget": rng.randint(16, 64), "block_size": bs,
              "num_blocks": -(-peak // bs) + rng.randint(0, 8), "chunked_prefill": True, "prefix_caching": True}
    reference = SERVE["cache_tick_by_tick"](requests, config)
    assert trace_events(reference, requests, config) == []
    corners = trace_corners(reference, requests, config)
    assert reference["preemptions"] > 0 and reference["cache_hit_tokens"] > 0
    assert corners.get("registered block evicted", 0) > 0 and corners.get("hit after a preemption", 0) > 0
    assert SERVE["cache_event_heaps"](requests, config) == reference
    assert drive_online(MAKE, requests, config) == reference["trace"]


def test_the_online_engine_view_agrees_with_its_entries():
    requests, config = EXAMPLES["C3"][:2]
    engine = MAKE(config)
    engine.add_request({k: v for k, v in requests[0].items() if k != "abort"})
    first = engine.step()
    assert engine.view() == {"waiting": [], "running": [0], "blocks": {0: [0, 1, 2]}} and first["hits"] == []
    engine.add_request(dict(requests[1]))
    engine.step()
    assert engine.view()["blocks"] == {0: [0, 1, 2], 1: [0, 1, 3]}
    engine.abort(0)
    entry = engine.step()
    assert entry["freed"] == [[0, [2]], [1, [0, 1, 3]]] and engine.view()["running"] == []


# ---------------------------------------------------------------- validation of the new fields

GOOD_CONFIG = {"max_seqs": 2, "token_budget": 8, "block_size": 2, "num_blocks": 4, "chunked_prefill": False,
               "prefix_caching": True}
GOOD = {"id": 3, "arrival": 1, "prompt": 2, "output": 2, "tokens": [5, 6]}


class Int(int):
    pass


BAD = [
    ([GOOD], dict(GOOD_CONFIG, prefix_caching=1), "config.prefix_caching=1: expected a bool (True or False)"),
    ([GOOD], dict(GOOD_CONFIG, prefix_caching=None), "config.prefix_caching=None: expected a bool (True or False)"),
    ([dict(GOOD, tokens=[5])], GOOD_CONFIG, "requests[0].tokens=[5]: expected a list or tuple of exactly prompt=2 ints"),
    ([dict(GOOD, tokens="ab")], GOOD_CONFIG,
     "requests[0].tokens='ab': expected a list or tuple of exactly prompt=2 ints"),
    ([dict(GOOD, tokens=None)], GOOD_CONFIG,
     "requests[0].tokens=None: expected a list or tuple of exactly prompt=2 ints"),
    ([dict(GOOD, tokens=[5, True])], GOOD_CONFIG, "requests[0].tokens[1]=True: expected an int (not a bool)"),
    ([dict(GOOD, tokens=[5.0, 6])], GOOD_CONFIG, "requests[0].tokens[0]=5.0: expected an int (not a bool)"),
    ([dict(GOOD, tokens=[Int(5), 6])], GOOD_CONFIG, "requests[0].tokens[0]=5: expected an int (not a bool)"),
    ([dict(GOOD, tokens=[5, True])], dict(GOOD_CONFIG, prefix_caching=False),
     "requests[0].tokens[1]=True: expected an int (not a bool)"),  # validated with caching off too
    ([dict(GOOD, extra=1)], GOOD_CONFIG, "requests[0]: unexpected key 'extra'; a request has exactly id, arrival, "
                                         "prompt, output and optionally abort and tokens"),
    ([GOOD], dict(GOOD_CONFIG, watermark=0.01), "config: unexpected key 'watermark'; a config has exactly max_seqs, "
                                                "token_budget, block_size, num_blocks, chunked_prefill and optionally "
                                                "prefix_caching"),
]


@pytest.mark.parametrize("requests, config, message", BAD, ids=[m[:44] for _, _, m in BAD])
@pytest.mark.parametrize("name", sorted(SERVE))
def test_each_scheduler_rejects_bad_caching_fields_before_any_work(name, requests, config, message):
    before = copy.deepcopy((requests, config))
    with pytest.raises(ValueError) as error:
        SERVE[name](requests, config)
    assert str(error.value) == message
    assert (requests, config) == before


@pytest.mark.parametrize("name", sorted(SERVE))
def test_tokens_are_accepted_as_lists_or_tuples_and_echoed_in_the_records(name):
    requests = [dict(GOOD, tokens=(5, 6)), {"id": 4, "arrival": 1, "prompt": 3, "output": 1, "tokens": [5, 6, -7]}]
    result = SERVE[name](requests, GOOD_CONFIG)
    assert [r["tokens"] for r in result["requests"]] == [(5, 6), [5, 6, -7]]
    result["requests"][1]["tokens"].append(0)
    assert requests[1]["tokens"] == [5, 6, -7]  # a copy, not the caller's list
    assert result["requests"][1]["cached"] == 2  # request 4 hits [5, 6], registered by request 3 in the same tick


@pytest.mark.slow
def test_verify_online_passes_the_clock_free_caching_engine(tmp_path):
    """The clock-free engine passes `verify --online` (with the caching the search draws, if it draws any)."""
    import subprocess
    import sys

    target = f"{CORPUS / 'online_correct' / 'cache_clock_free'}.py:make"
    run = subprocess.run([sys.executable, "-m", "proofs.cli", "verify", "--model", "serving", "--online", target,
                          "--examples", "100", "--budget", "60", "--seed", "0", "--db", "none",
                          "--save-dir", str(tmp_path)], capture_output=True, text=True, timeout=240,
                         cwd=pathlib.Path(__file__).parent.parent)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1].startswith("PASS")


def _spec_has_caching():
    import spec.serving

    return {"no_false_sharing", "refcount_exact", "longest_prefix_hit", "lru_eviction"} <= set(spec.serving.NAMES)


@pytest.mark.skipif(not _spec_has_caching(), reason="the spec has no prefix caching yet (issue 20)")
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_the_spec_reproduces_the_worked_examples(example):
    import spec.serving

    requests, config, trace, totals, records = EXAMPLES[example]
    result = spec.serving.run(copy.deepcopy(requests), dict(config))
    assert result["trace"] == trace
    assert {k: result[k] for k in TOTAL_KEYS} == totals
    assert [{k: row[k] for k in records[0]} for row in result["requests"]] == records


@pytest.mark.skipif(not _spec_has_caching(), reason="the spec has no prefix caching yet (issue 20)")
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(cache_calls())
def test_the_spec_agrees_with_the_caching_schedulers(call):
    """spec.serving.run gives the tick-by-tick scheduler's result (up to keys the spec leaves out with caching
    unnamed) and its oracle finds nothing wrong with it: two readings of issue 20 written apart."""
    import spec.serving

    requests, config = call
    mine = SERVE["cache_tick_by_tick"](requests, config)
    assert spec.serving.check(requests, config, mine) == []
    reference = spec.serving.run(copy.deepcopy(requests), dict(config))
    if "prefix_caching" not in config:  # the spec reports hits, cached and cache_hit_tokens only when named
        mine = dict(mine, trace=[{k: v for k, v in e.items() if k != "hits"} for e in mine["trace"]],
                    requests=[{k: v for k, v in r.items() if k != "cached"} for r in mine["requests"]])
        del mine["cache_hit_tokens"]
    assert plain(reference) == plain(mine)
