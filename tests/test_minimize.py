"""The minimisers of both models: numbers and configs shrink to the smallest values that still fail.

Each test starts from a failing call whose numbers are large (block_size 11, token_budget
47, as a search hands them over) and checks what the minimiser returns against the
predicate itself: it still fails, and no number of it can be made smaller, one at a time
(with the pool's tokens kept for a block size), while it still fails.  No wall-clock
assertion: the minimisers get a generous deadline and stop when nothing changes.
"""

import copy
import pathlib

import pytest

import spec
import spec.serving as serving
from proofs.search.minimize import minimize_valid_call as minimize_chapter
from proofs.search.minimize import smallest_failing, smallest_failing_scan
from proofs.search.minimize_serving import minimize_valid_call as minimize_serving
from proofs.search.minimize_serving import size_key
from proofs.targets import load_callable, parse_target

BUGGY = pathlib.Path(__file__).parent / "corpus" / "serving" / "buggy"


def test_the_scan_finds_the_smallest_failing_value_where_bisection_stops_early():
    fails = lambda v: v == 2 or v >= 5  # noqa: E731  not monotone: 3 and 4 pass
    assert smallest_failing(47, 1, fails) == 5  # bisection assumes monotone failure
    assert smallest_failing_scan(47, 1, fails) == 2
    assert smallest_failing_scan(47, 1, lambda v: v >= 30) == 30  # monotone: bisected beyond the scan
    assert smallest_failing_scan(47, 1, lambda v: v == 46) == 46  # a lone failure just below: the local step
    asked = []
    smallest_failing_scan(9, 1, lambda v: asked.append(v) or False)
    assert 9 not in asked  # the value itself is known to fail: never asked


def serving_fails(name):
    serve = load_callable(parse_target(f"{BUGGY / name}.py:serve"))
    expected = next(line.split('"')[1] for line in (BUGGY / f"{name}.py").read_text().splitlines()
                    if line.startswith("EXPECTED"))

    def fails(call):
        requests, config = call
        result = serve(copy.deepcopy(requests), copy.deepcopy(config))
        return any(v.invariant == expected for v in serving.check(requests, config, result))

    return fails


def one_smaller(call):
    """Every valid call with one number of ``call`` one smaller (a block size with the pool's tokens kept too)."""
    requests, config = call
    out = []
    for key, low in (("max_seqs", 1), ("token_budget", 1), ("num_blocks", 1), ("block_size", 1)):
        if config[key] > low:
            out.append((requests, dict(config, **{key: config[key] - 1})))
    if config["block_size"] > 1:
        pool = config["num_blocks"] * config["block_size"]
        out.append((requests, dict(config, block_size=config["block_size"] - 1,
                                   num_blocks=-(-pool // (config["block_size"] - 1)))))
    for index, request in enumerate(requests):
        for key, low in (("prompt", 1), ("output", 1), ("arrival", 0)):
            if request[key] > low:
                smaller = [dict(r) for r in requests]
                smaller[index][key] -= 1
                if "abort" in smaller[index] and key == "arrival":
                    smaller[index]["abort"] -= 1
                out.append((smaller, config))
    return [c for c in out if serving.is_valid(*c)]


INFLATED = {
    # the chunk of an admission is capped by the whole budget, not what is left of it: two requests
    "budget_overshoot_by_one_chunk": (
        [{"id": 0, "arrival": 2, "prompt": 30, "output": 5}, {"id": 1, "arrival": 2, "prompt": 40, "output": 5}],
        {"max_seqs": 4, "token_budget": 47, "block_size": 11, "num_blocks": 9, "chunked_prefill": True}),
    # a finished request keeps its last block
    "finish_leaks_last_block": (
        [{"id": 0, "arrival": 5, "prompt": 29, "output": 14}],
        {"max_seqs": 3, "token_budget": 47, "block_size": 11, "num_blocks": 9, "chunked_prefill": False}),
}


@pytest.mark.parametrize("name", sorted(INFLATED))
def test_serving_numbers_and_config_shrink_to_the_smallest_values_that_fail(name):
    fails = serving_fails(name)
    big = INFLATED[name]
    assert serving.is_valid(*big) and fails(big)
    small = minimize_serving(big, fails, serving.is_valid, seconds=120)
    assert fails(small) and size_key(small) < size_key(big)
    assert small[1]["block_size"] == 1 and small[1]["token_budget"] <= 2, small
    stuck = [c for c in one_smaller(small) if fails(c)]
    assert stuck == [], (small, stuck)  # no number can go one lower and still fail


def test_chapter_numbers_shrink_to_the_smallest_values_that_fail():
    # a bug that shows with one slot, or with 5 or more; and with a job of exactly 2 tokens or of 9 or more
    def fails(call):
        jobs, slots, continuous = call
        return (slots == 1 or slots >= 5) and any(j["tokens"] == 2 or j["tokens"] >= 9 for j in jobs)

    big = ([{"id": 0, "arrival": 7, "tokens": 40}, {"id": 1, "arrival": 9, "tokens": 47}], 11, True)
    assert spec.is_valid(*big) and fails(big)
    small = minimize_chapter(big, fails, seconds=120)
    assert small == ([{"id": 0, "arrival": 0, "tokens": 2}], 1, False), small


def test_a_block_size_shrinks_with_the_pool_kept_when_the_smaller_pool_still_valid_no_longer_fails():
    # verify's counterexample for this bug kept block_size 2: block_size 1 with 2 blocks is valid but too small a pool
    # for both requests to run (no overshoot); with the pool's 4 tokens kept it fails, and then 3 blocks are enough
    fails = serving_fails("budget_overshoot_by_one_chunk")
    found = ([{"id": 0, "arrival": 0, "prompt": 1, "output": 1}, {"id": 1, "arrival": 0, "prompt": 2, "output": 1}],
             {"max_seqs": 2, "token_budget": 2, "block_size": 2, "num_blocks": 2, "chunked_prefill": True})
    assert fails(found) and not fails((found[0], dict(found[1], block_size=1)))
    small = minimize_serving(found, fails, serving.is_valid, seconds=120)
    assert small[1] == {"max_seqs": 2, "token_budget": 2, "block_size": 1, "num_blocks": 3, "chunked_prefill": True}
    assert [c for c in one_smaller(small) if fails(c)] == []


def test_a_caching_counterexample_shrinks_its_prompts_with_their_tokens_and_its_token_values():
    # blocks keyed by their own tokens only: the inflated call's equal blocks [17, 18] at different positions share
    fails = serving_fails("cache_chain_without_prefix")
    big = ([{"id": 3, "arrival": 4, "prompt": 6, "output": 3, "tokens": [17, 18, 17, 18, 50, 60]},
            {"id": 7, "arrival": 9, "prompt": 7, "output": 2, "tokens": [17, 18, 17, 18, 17, 18, 70]}],
           {"max_seqs": 3, "token_budget": 20, "block_size": 2, "num_blocks": 12, "chunked_prefill": True,
            "prefix_caching": True})
    assert serving.is_valid(*big) and fails(big)
    small = minimize_serving(big, fails, serving.is_valid, seconds=120)
    assert fails(small) and size_key(small) < size_key(big)
    assert small[1]["prefix_caching"] is True  # the bug needs it: kept
    assert all(len(r["tokens"]) == r["prompt"] for r in small[0])
    assert small == ([{"id": 0, "arrival": 0, "prompt": 1, "output": 1, "tokens": [0]},
                      {"id": 1, "arrival": 0, "prompt": 3, "output": 1, "tokens": [0, 0, 0]}],
                     {"max_seqs": 1, "token_budget": 1, "block_size": 1, "num_blocks": 3, "chunked_prefill": True,
                      "prefix_caching": True}), small
    assert [c for c in one_smaller(small) if fails(c)] == []


def test_one_step_larger_keeps_a_caching_call_valid():
    from proofs.search.minimize_serving import one_step_larger

    call = ([{"id": 0, "arrival": 1, "prompt": 2, "output": 1, "tokens": [4, 5]}],
            {"max_seqs": 1, "token_budget": 2, "block_size": 1, "num_blocks": 3, "chunked_prefill": True,
             "prefix_caching": True})
    larger = one_step_larger(call)
    assert serving.is_valid(*larger) and larger[0][0]["tokens"] == [4] * 16 + [5] * 16
