"""The oracle's shortcuts change no verdict: the replay's fast paths, the reference compared as it is made, the baselines.

``spec.result_checks.Replay`` judges an entry that continues the one before (and a
plain stretch of such entries) by a shortcut; ``spec.check`` compares the reference run
stretch by stretch without building it.  Here both are compared, finding by finding
and message by message, with the long way (every entry job by job; the built
reference) on correct and corrupted results.  The speed baselines of benchmarks/ must
agree with impl, or their ratios mean nothing.
"""

import copy
import random

import pytest

import impl
import spec
import spec.result_checks as result_checks
from benchmarks.baselines import chapter_loop, serving_loop


def corrupt(rng: random.Random, result: dict) -> dict:
    """``result`` with one or two random changes to its trace or records."""
    result = copy.deepcopy(result)
    for _ in range(rng.randint(1, 2)):
        trace = result["trace"]
        if not trace:
            break
        i = rng.randrange(len(trace))
        change = rng.randrange(9)
        if change == 0:
            trace[i]["served"] = trace[i]["served"][::-1]
        elif change == 1:
            trace[i]["served"] = trace[i]["served"][1:]
        elif change == 2:
            trace[i]["served"] = trace[i]["served"] + [rng.randint(0, 9)]
        elif change == 3:
            trace[i]["tick"] += rng.choice([-2, -1, 1, 2])
        elif change == 4:
            del trace[i]
        elif change == 5:
            trace.insert(i, copy.deepcopy(trace[i]))
        elif change == 6 and result["completed"]:
            result["completed"][rng.randrange(len(result["completed"]))]["start"] += 1
        elif change == 7:
            trace[i]["served"] = []
        elif change == 8:
            for entry in trace[i:]:
                entry["tick"] += 1
    return result


def calls(seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        jobs = [{"id": i, "arrival": rng.randint(0, 6), "tokens": rng.randint(1, 6)} for i in range(rng.randint(0, 12))]
        yield rng, jobs, rng.randint(1, 4), rng.random() < 0.5


def verdicts(call, result):
    return [(v.invariant, v.tick, v.job, v.message) for v in spec.check(*call, result)]


def test_the_replay_s_shortcuts_find_what_the_long_way_finds(monkeypatch):
    cases = []
    for rng, jobs, slots, continuous in calls(3, 250):
        good = impl.schedule(jobs, slots, continuous)
        cases += [((jobs, slots, continuous), good), ((jobs, slots, continuous), corrupt(rng, good))]
    fast = [verdicts(call, result) for call, result in cases]
    monkeypatch.setattr(result_checks.Replay, "_continues", lambda self, tick, served: False)
    monkeypatch.setattr(result_checks.Replay, "_plain_stretch", lambda self, ticks, served, index: 0)
    slow = [verdicts(call, result) for call, result in cases]
    assert fast == slow
    assert sum(bool(v) for v in fast) > 100  # the corrupted half is mostly caught: the comparison is not vacuous


def at_a_run_edge(rng: random.Random, result: dict) -> dict:
    """``result`` with one change where a run of repeated entries (the same list at the next tick) starts or ends, or
    in its middle: a job kept past its last token, a tick moved, a list changed, an entry dropped or doubled, or the
    entries of a run sharing one list object."""
    result = copy.deepcopy(result)
    trace = result["trace"]
    edges = [i for i in range(1, len(trace)) if trace[i]["served"] != trace[i - 1]["served"]] or [0]
    i = min(len(trace) - 1, max(0, rng.choice(edges) + rng.choice([-1, 0, 0, 1, 2])))
    change = rng.randrange(7)
    if change == 0 and i > 0:  # the jobs that finished at entry i - 1 are served once more
        trace[i]["served"] = trace[i - 1]["served"][:]
    elif change == 1:
        trace[i]["tick"] += rng.choice([-1, 1, 2])
    elif change == 2:
        trace[i]["served"] = trace[i]["served"][:-1] or [0]
    elif change == 3:
        del trace[i]
    elif change == 4:
        trace.insert(i, {"tick": trace[i]["tick"], "served": trace[i]["served"]})
    elif change == 5:  # a stretch broken in the middle: one repeated entry serves its list reversed
        trace[i]["served"] = trace[i]["served"][::-1]
    else:  # every entry of the run that holds i shares entry i's list object (no change to the values)
        for j in range(i + 1, len(trace)):
            if trace[j]["served"] != trace[i]["served"]:
                break
            trace[j]["served"] = trace[i]["served"]
    return result


def test_the_runs_of_repeated_entries_are_judged_as_entry_by_entry(monkeypatch):
    """Long runs (jobs of up to 30 tokens on few slots), changed at a run's edge or inside it: the shortcuts (an
    entry that continues the one before, a plain stretch) find what the long way finds, message by message and tick
    by tick."""
    rng = random.Random(11)
    cases = []
    for _ in range(300):
        jobs = [{"id": i, "arrival": rng.randint(0, 40), "tokens": rng.randint(1, 30)} for i in range(rng.randint(1, 10))]
        call = (jobs, rng.randint(1, 4), rng.random() < 0.5)
        good = impl.schedule(*call)
        cases += [(call, good), (call, at_a_run_edge(rng, good)), (call, at_a_run_edge(rng, at_a_run_edge(rng, good)))]
    fast = [verdicts(call, result) for call, result in cases]
    monkeypatch.setattr(result_checks.Replay, "_continues", lambda self, tick, served: False)
    monkeypatch.setattr(result_checks.Replay, "_plain_stretch", lambda self, ticks, served, index: 0)
    slow = [verdicts(call, result) for call, result in cases]
    assert fast == slow
    assert sum(bool(v) for v in fast) > 300  # most changed results are caught: the comparison is not vacuous


def test_the_reference_compared_as_it_is_made_is_first_difference_with_spec_run():
    for rng, jobs, slots, continuous in calls(4, 200):
        result = corrupt(rng, impl.schedule(jobs, slots, continuous))
        reference = spec.run(jobs, slots, continuous)
        assert spec.check(jobs, slots, continuous, result) == spec.check(jobs, slots, continuous, result, reference)


def test_the_chapter_loop_baseline_is_the_reference():
    for _, jobs, slots, continuous in calls(5, 200):
        assert chapter_loop.schedule(jobs, slots, continuous) == spec.run(jobs, slots, continuous)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_serving_loop_baseline_is_impl_serve(seed):
    rng = random.Random(seed)
    compared = 0
    while compared < 100:
        config = {"max_seqs": rng.randint(1, 4), "token_budget": rng.randint(1, 12), "block_size": rng.randint(1, 4),
                  "num_blocks": rng.randint(1, 12), "chunked_prefill": rng.random() < 0.6}
        requests = []
        for i in range(rng.randint(0, 7)):
            request = {"id": i, "arrival": rng.randint(0, 6), "prompt": rng.randint(1, 8), "output": rng.randint(1, 5)}
            if rng.random() < 0.3:
                request["abort"] = request["arrival"] + rng.randint(0, 8)
            requests.append(request)
        try:
            expected = impl.serve(requests, config)
        except ValueError:
            continue  # outside the serving domain (a request that cannot fit): the baseline does not validate
        assert serving_loop.serve(requests, config) == expected, (requests, config)
        compared += 1
