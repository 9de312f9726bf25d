"""``spec.serving.check`` is silent on correct results and names the right invariant first on broken ones."""

import copy

import pytest

import spec.serving as S
from tests.serving_examples import EXAMPLES


def entry(tick, scheduled, preempted=(), aborted=(), freed=(), allocated=(), finished=()):
    return {
        "tick": tick,
        "scheduled": [list(p) for p in scheduled],
        "preempted": list(preempted),
        "aborted": list(aborted),
        "freed": [[i, list(b)] for i, b in freed],
        "allocated": [[i, list(b)] for i, b in allocated],
        "finished": list(finished),
    }


def recount(requests, config, trace, **override):
    """A whole result whose records and totals agree with ``trace`` (the test's own arithmetic), then ``override``."""
    state = {r["id"]: dict(c=0, g=0, total=0, start=None, first=None, finish=None, aborted=None, pre=0) for r in requests}
    by_id = {r["id"]: r for r in requests}
    useful = recomputed = aborted = 0
    for e in trace:
        t = e["tick"]
        for i in e["aborted"]:
            aborted += state[i]["c"]
            state[i]["aborted"] = t
        for i in e["preempted"]:
            recomputed += state[i]["c"]
            state[i].update(c=0, pre=state[i]["pre"] + 1)
        for i, n in e["scheduled"]:
            s = state[i]
            s["start"] = t if s["start"] is None else s["start"]
            s["c"] += n
            s["total"] += n
            if s["c"] == by_id[i]["prompt"] + s["g"]:
                s["g"] += 1
                s["first"] = t + 1 if s["first"] is None else s["first"]
        for i in e["finished"]:
            state[i]["finish"] = t + 1
            useful += by_id[i]["prompt"] + by_id[i]["output"] - 1
    records = []
    for r in sorted(requests, key=lambda r: r["id"]):
        s = state[r["id"]]
        records.append(
            {**r, "start": s["start"], "first_token": s["first"], "finish": s["finish"], "aborted": s["aborted"],
             "generated": s["g"], "preemptions": s["pre"], "computed": s["total"]}
        )
    computed = sum(n for e in trace for _, n in e["scheduled"])
    makespan = max((e["tick"] + 1 for e in trace if e["scheduled"]), default=0)
    result = {
        "trace": trace,
        "requests": records,
        "makespan_ticks": makespan,
        "computed_tokens": computed,
        "useful_tokens": useful,
        "recomputed_tokens": recomputed,
        "aborted_tokens": aborted,
        "token_utilization": computed / (config["token_budget"] * makespan) if makespan else 0.0,
        "preemptions": sum(rec["preemptions"] for rec in records),
    }
    result.update(override)
    return result


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_recount_agrees_with_the_reference_on_the_worked_examples(name):
    requests, config, trace, *_ = EXAMPLES[name]
    assert recount(requests, config, trace) == S.run(requests, config)


def example(name):
    requests, config, *_ = EXAMPLES[name]
    return requests, config, copy.deepcopy(S.run(requests, config))


def names(violations):
    return [v.invariant for v in violations]


# --- each kind of broken result, caught by the right invariant first ------------------


def leak_on_abort():
    requests, config, _ = example("S3")
    trace = copy.deepcopy(EXAMPLES["S3"][2])
    trace[2]["freed"] = [[1, [1]]]  # request 0's block 0 is never given back; request 1 takes block 1
    trace[2]["allocated"] = [[1, [1]]]
    return requests, config, recount(requests, config, trace)


def leak_on_finish():
    requests, config, result = example("S1")
    result["trace"][3]["freed"] = []
    return requests, config, result


def freed_twice():
    requests, config, result = example("S2")
    result["trace"][3]["freed"] = [[1, [0, 1, 2]]]  # block 2 was given back at the preemption in tick 1
    return requests, config, result


def freed_twice_in_one_list():
    requests, config, result = example("S2")
    result["trace"][2]["freed"] = [[0, [0, 1, 3, 2, 2]]]
    return requests, config, result


OVERSHOOT = (
    [{"id": 0, "arrival": 0, "prompt": 3, "output": 1}, {"id": 1, "arrival": 0, "prompt": 3, "output": 1}],
    {"max_seqs": 2, "token_budget": 4, "block_size": 4, "num_blocks": 2, "chunked_prefill": True},
)


def budget_overshoot():
    requests, config = OVERSHOOT  # the reference gives request 1 the chunk 1 that is left of the budget
    trace = [entry(0, [(0, 3), (1, 3)], freed=[(0, [0]), (1, [1])], allocated=[(0, [0]), (1, [1])], finished=[0, 1])]
    return requests, config, recount(requests, config, trace)


def scheduled_after_abort():
    requests, config, _ = example("S3")  # request 0's abort at tick 2 is ignored
    trace = [
        entry(0, [(0, 3)], allocated=[(0, [0])]),
        entry(1, [(0, 1)]),
        entry(2, [(0, 1)], allocated=[(0, [1])]),
        entry(3, [(0, 1)], freed=[(0, [0, 1])], finished=[0]),
        entry(4, [(1, 2)], freed=[(1, [0])], allocated=[(1, [0])], finished=[1]),
    ]
    return requests, config, recount(requests, config, trace)


def aborted_late():
    requests, config, _ = example("S3")  # request 0 leaves one tick after its abort tick, unscheduled
    trace = [
        entry(0, [(0, 3)], allocated=[(0, [0])]),
        entry(1, [(0, 1)]),
        entry(3, [(1, 2)], aborted=[0], freed=[(0, [0]), (1, [0])], allocated=[(1, [0])], finished=[1]),
    ]
    result = recount(requests, config, trace)
    return requests, config, result


def double_allocation():
    requests, config, result = example("S1")
    result["trace"][1]["allocated"] = [[0, [2]], [1, [2]]]  # block 2 to both requests
    result["trace"][3]["freed"] = [[1, [2, 5]]]
    return requests, config, result


SKIP = (
    [
        {"id": 0, "arrival": 0, "prompt": 2, "output": 2},
        {"id": 1, "arrival": 1, "prompt": 3, "output": 1},
        {"id": 2, "arrival": 1, "prompt": 1, "output": 1},
    ],
    {"max_seqs": 3, "token_budget": 100, "block_size": 1, "num_blocks": 4, "chunked_prefill": False},
)


def skipped_fcfs_head():
    requests, config = SKIP  # at tick 1 the head (request 1) needs 3 blocks, 1 is free: the reference waits
    trace = [
        entry(0, [(0, 2)], allocated=[(0, [0, 1])]),
        entry(1, [(0, 1), (2, 1)], freed=[(0, [0, 1, 2]), (2, [3])], allocated=[(0, [2]), (2, [3])], finished=[0, 2]),
        entry(2, [(1, 3)], freed=[(1, [0, 1, 2])], allocated=[(1, [0, 1, 2])], finished=[1]),
    ]
    return requests, config, recount(requests, config, trace)


VICTIM = (
    [
        {"id": 0, "arrival": 0, "prompt": 2, "output": 2},
        {"id": 1, "arrival": 0, "prompt": 1, "output": 2},
        {"id": 2, "arrival": 0, "prompt": 1, "output": 2},
    ],
    {"max_seqs": 3, "token_budget": 7, "block_size": 2, "num_blocks": 3, "chunked_prefill": True},
)


def oldest_preempted():
    requests, config = VICTIM  # at tick 1 request 0 needs a block, none is free: the reference preempts 2
    trace = [
        entry(0, [(0, 2), (1, 1), (2, 1)], allocated=[(0, [0]), (1, [1]), (2, [2])]),
        entry(1, [(0, 1), (2, 1)], preempted=[1], freed=[(1, [1]), (0, [0, 1]), (2, [2])], allocated=[(0, [1])], finished=[0, 2]),
        entry(2, [(1, 2)], freed=[(1, [0])], allocated=[(1, [0])], finished=[1]),
    ]
    return requests, config, recount(requests, config, trace)


ADMIT = (
    [{"id": 0, "arrival": 2, "prompt": 1, "output": 2}, {"id": 1, "arrival": 2, "prompt": 2, "output": 1}],
    {"max_seqs": 3, "token_budget": 2, "block_size": 1, "num_blocks": 3, "chunked_prefill": True},
)


def admission_while_preempting():
    requests, config = ADMIT  # tick 3 preempts request 1, then admits it again with the budget left
    trace = [
        entry(2, [(0, 1), (1, 1)], allocated=[(0, [0]), (1, [1])]),
        entry(3, [(0, 1), (1, 1)], preempted=[1], freed=[(1, [1]), (0, [0, 2])], allocated=[(0, [2]), (1, [1])], finished=[0]),
        entry(4, [(1, 1)], freed=[(1, [1, 0])], allocated=[(1, [0])], finished=[1]),
    ]
    return requests, config, recount(requests, config, trace)


def max_seqs_exceeded():
    requests, config, result = example("S1")  # tick 1 runs two requests
    return requests, {**config, "max_seqs": 1}, result


TWICE = (
    [{"id": 0, "arrival": 0, "prompt": 2, "output": 3}, {"id": 1, "arrival": 0, "prompt": 1, "output": 3}],
    {"max_seqs": 2, "token_budget": 8, "block_size": 1, "num_blocks": 4, "chunked_prefill": True},
)


def generated_twice_after_recompute():
    requests, config = TWICE  # request 1, preempted with 1 token generated, counts it again when recomputed
    reference = S.run(requests, config)["trace"]
    trace = copy.deepcopy(reference[:3]) + [
        entry(3, [(1, 2)], freed=[(1, [0, 1])], allocated=[(1, [0, 1])], finished=[1]),
    ]
    result = recount(requests, config, trace)
    result["requests"][1]["generated"] = 3
    return requests, config, result


def wrong_makespan():
    requests, config, result = example("S1")
    result["makespan_ticks"] = 5
    return requests, config, result


BROKEN = {
    "a block leaked on abort": (leak_on_abort, "kv_exact"),
    "a block leaked on finish": (leak_on_finish, "kv_exact"),
    "a block freed twice": (freed_twice, "kv_exclusive"),
    "a block freed twice in one list": (freed_twice_in_one_list, "kv_exclusive"),
    "the token budget overshot": (budget_overshoot, "token_budget"),
    "a request scheduled after its abort": (scheduled_after_abort, "no_start_before_arrival"),
    "a request aborted after its abort tick": (aborted_late, "every_job_completes_once"),
    "a block held by two requests": (double_allocation, "kv_exclusive"),
    "a skipped FCFS head": (skipped_fcfs_head, "fcfs_admission"),
    "the oldest preempted instead of the newest": (oldest_preempted, "preempt_newest"),
    "an admission in a preempting tick": (admission_while_preempting, "no_admission_after_preemption"),
    "max_seqs exceeded": (max_seqs_exceeded, "slot_bound"),
    "generated counted twice after recompute": (generated_twice_after_recompute, "work_conservation"),
    "a wrong makespan": (wrong_makespan, "metrics_consistent"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_result_is_caught_by_the_right_invariant_first(kind):
    make, expected = BROKEN[kind]
    requests, config, result = make()
    assert S.is_valid(requests, config)
    violations = S.check(requests, config, result)
    assert violations, f"{kind}: no violation"
    first = violations[0]
    assert first.invariant == expected, f"{kind}: {names(violations)}: {first.message}"
    assert first.message and "\n" not in first.message
    assert names(violations) == sorted(set(names(violations)), key=list(S.BY_NAME).index), "one per invariant, in order"
    if expected not in ("metrics_consistent",):
        assert first.tick is not None and first.ids, first
    if S.BY_NAME[expected].family == "policy":
        # another policy may do this: safety and metrics hold
        assert S.check(requests, config, result, policy="none") == []


def test_violations_name_the_tick_and_the_requests():
    requests, config, result = double_allocation()
    (first,) = [v for v in S.check(requests, config, result) if v.invariant == "kv_exclusive"]
    assert first.tick == 1 and set(first.ids) == {0, 1} and "block 2" in first.message
    requests, config, result = oldest_preempted()
    first = S.check(requests, config, result)[0]
    assert first.tick == 1 and first.expected == [2] and first.actual == [1]


def test_matches_reference_ignores_block_ids():
    requests, config, result = example("S1")
    swap = {0: 7, 7: 0}  # another allocator: block 7 where the reference takes 0
    for e in result["trace"]:
        for key in ("freed", "allocated"):
            e[key] = [[i, [swap.get(b, b) for b in blocks]] for i, blocks in e[key]]
    assert S.check(requests, config, result) == []


def test_a_different_allocation_that_leaks_is_still_caught():
    requests, config, result = example("S1")
    result["trace"][2]["freed"] = [[0, [0, 1, 2]]]  # block 4 kept
    assert names(S.check(requests, config, result))[0] == "kv_exact"


def test_policy_none_still_checks_safety():
    requests, config, result = leak_on_finish()
    assert names(S.check(requests, config, result, policy="none")) == ["kv_exact"]


# --- malformed results: well_typed, never an exception --------------------------------


class Exploding(dict):
    """A dict whose lookups raise."""

    def __getitem__(self, key):
        raise RuntimeError("boom")


def malformed():
    requests, config, good = example("S1")
    cases = {"None": None, "a list": [], "a string": "result", "Exploding": Exploding(good)}
    for key in good:
        cases[f"missing {key}"] = {k: v for k, v in good.items() if k != key}
    bad = copy.deepcopy(good)
    bad["token_utilization"] = "0.6875"
    cases["str utilization"] = bad
    bad = copy.deepcopy(good)
    bad["makespan_ticks"] = 4.0
    cases["float makespan"] = bad
    bad = copy.deepcopy(good)
    bad["preemptions"] = False
    cases["bool preemptions"] = bad
    bad = copy.deepcopy(good)
    bad["trace"][1]["scheduled"][0] = [0]
    cases["a scheduled pair of one"] = bad
    bad = copy.deepcopy(good)
    bad["trace"][1]["scheduled"][0] = [0, 2.0]
    cases["a float n"] = bad
    bad = copy.deepcopy(good)
    bad["trace"][1]["scheduled"][0] = [9, 2]
    cases["an unknown id"] = bad
    bad = copy.deepcopy(good)
    bad["trace"][2]["freed"] = [[0, "0124"]]
    cases["a string of blocks"] = bad
    bad = copy.deepcopy(good)
    del bad["trace"][0]["preempted"]
    cases["an entry without preempted"] = bad
    bad = copy.deepcopy(good)
    bad["trace"][0]["tick"] = None
    cases["a None tick"] = bad
    bad = copy.deepcopy(good)
    bad["requests"][0]["start"] = "0"
    cases["a string start"] = bad
    bad = copy.deepcopy(good)
    del bad["requests"][1]["computed"]
    cases["a record without computed"] = bad
    bad = copy.deepcopy(good)
    bad["trace"] = {"tick": 0}
    cases["a dict trace"] = bad
    bad = copy.deepcopy(good)
    bad["trace"][1]["scheduled"][0] = [0, True]
    cases["a bool n"] = bad
    bad = copy.deepcopy(good)
    bad["trace"][1]["scheduled"][-1] = [True, bad["trace"][1]["scheduled"][-1][1]]
    cases["a bool id"] = bad
    bad = copy.deepcopy(good)
    bad["trace"][1]["scheduled"] = bad["trace"][1]["scheduled"] + [[0, 1, 2]]
    cases["a scheduled triple"] = bad
    bad = copy.deepcopy(good)
    bad["trace"][1]["finished"] = [0.0]
    cases["a float finished id"] = bad
    bad = copy.deepcopy(good)
    bad["trace"][1]["extra"] = bad["trace"][1].pop("finished")
    cases["seven keys, one not an entry's"] = bad
    return requests, config, cases


@pytest.mark.parametrize("case", sorted(malformed()[2]))
def test_a_malformed_result_is_a_well_typed_violation(case):
    requests, config, cases = malformed()
    violations = S.check(requests, config, cases[case])
    assert names(violations) == ["well_typed"], violations
    assert violations[0].message


class Pairs(list):
    """A list subclass: the contract accepts it wherever a list is expected."""


def as_tuples(result):
    """The same result with every trace list and pair a tuple, and the scheduled list a list subclass."""
    out = copy.deepcopy(result)
    for e in out["trace"]:
        e["scheduled"] = Pairs(tuple(p) for p in e["scheduled"])
        for key in ("preempted", "aborted", "finished"):
            e[key] = tuple(e[key])
        for key in ("freed", "allocated"):
            e[key] = tuple((i, tuple(b)) for i, b in e[key])
    return out


@pytest.mark.parametrize("make", [lambda: example("S1"), leak_on_finish, oldest_preempted])
def test_tuples_and_subclasses_are_judged_as_the_plain_lists(make):
    """The well-typed check's fast path (exact lists) and its general path give the same verdicts."""
    requests, config, result = make()
    assert S.check(requests, config, as_tuples(result)) == S.check(requests, config, result)


def test_check_never_modifies_the_result_or_the_call():
    requests, config, result = oldest_preempted()
    before = copy.deepcopy((requests, config, result))
    S.check(requests, config, result)
    assert (requests, config, result) == before


def test_another_policy_may_readmit_a_victim_that_finishes_in_the_same_tick():
    # shortest-first admission, admitting in a preempting tick, the oldest victim: safety holds all the same
    requests = [
        {"id": 0, "arrival": 1, "prompt": 1, "output": 2},
        {"id": 1, "arrival": 0, "prompt": 3, "output": 3},
        {"id": 2, "arrival": 0, "prompt": 4, "output": 2},
    ]
    config = {"max_seqs": 3, "token_budget": 3, "block_size": 2, "num_blocks": 4, "chunked_prefill": True}
    trace = [
        entry(0, [(1, 3)], allocated=[(1, [0, 1])]),
        entry(1, [(1, 1), (0, 1), (2, 1)], allocated=[(0, [2]), (2, [3])]),
        entry(
            2, [(1, 1), (0, 2)], preempted=[0, 2], freed=[(0, [2]), (2, [3]), (1, [0, 1, 2]), (0, [3])],
            allocated=[(1, [2]), (0, [3])], finished=[1, 0],
        ),
        entry(3, [(2, 3)], allocated=[(2, [0, 1])]),
        entry(4, [(2, 1)]),
        entry(5, [(2, 1)], freed=[(2, [0, 1, 2])], allocated=[(2, [2])], finished=[2]),
    ]
    result = recount(requests, config, trace)
    assert S.check(requests, config, result, policy="none") == []
    assert names(S.check(requests, config, result))[0] in {"fcfs_admission", "running_first", "preempt_newest"}


def test_an_engine_that_idles_while_work_waits_breaks_termination():
    requests, config, result = example("S1")
    for e in result["trace"][2:]:
        e["tick"] += 20  # twenty idle ticks while requests 0 and 1 still run: more than the 10 tokens done by then
    found = S.check(requests, config, result, policy="none")
    assert names(found)[0] == "termination" and found[0].tick == 22
