"""The serving model's CrossHair contracts: one per serving state invariant on spec's step and on our online
ServingScheduler, the mutant each one must find, and their wiring into `schedcheck verify --model serving`.

The slow tests search for each injected bug with CrossHair's per-condition limit of 30 s
(the figures are in docs/crosshair.md).  Tests never assert wall-clock times.
"""

import json
import os
import random
import sys

import pytest

import spec.serving as serving
from proofs.cli.main import main
from proofs.symbolic import bridge, engine
from proofs.symbolic import serving as S
from tests.patience import contracts_searched

sys.path.insert(0, os.path.dirname(__file__))
import crosshair_serving_mutants as mutants  # noqa: E402

NAMED = ("no_duplicate_active", "no_start_before_arrival", "slot_bound", "nonnegative_remaining", "work_conservation",
         "every_job_completes_once", "token_budget", "kv_capacity", "kv_exclusive", "kv_exact")

# For each mutant, one scenario (requests, config, ticks before the contract's tick) on which it breaks its invariant
# (found by a seeded random search of the contracts' domain; the smallest kept).
BREAKS = {
    "no_duplicate_active": ([{"id": 0, "arrival": 1, "prompt": 2, "output": 1}],
        {"max_seqs": 1, "token_budget": 3, "block_size": 1, "num_blocks": 2, "chunked_prefill": True}, 0),
    "no_start_before_arrival": ([{"id": 0, "arrival": 1, "prompt": 1, "output": 1, "abort": 1}],
        {"max_seqs": 2, "token_budget": 1, "block_size": 1, "num_blocks": 2, "chunked_prefill": True}, 0),
    "slot_bound": ([{"id": 0, "arrival": 0, "prompt": 1, "output": 1, "abort": 3}, {"id": 1, "arrival": 0, "prompt": 2, "output": 2}],
        {"max_seqs": 1, "token_budget": 4, "block_size": 2, "num_blocks": 3, "chunked_prefill": False}, 0),
    "nonnegative_remaining": ([{"id": 0, "arrival": 0, "prompt": 1, "output": 2}],
        {"max_seqs": 3, "token_budget": 2, "block_size": 2, "num_blocks": 3, "chunked_prefill": False}, 1),
    "work_conservation": ([{"id": 0, "arrival": 1, "prompt": 1, "output": 2}],
        {"max_seqs": 1, "token_budget": 1, "block_size": 2, "num_blocks": 2, "chunked_prefill": True}, 0),
    "every_job_completes_once": ([{"id": 0, "arrival": 0, "prompt": 1, "output": 1, "abort": 3}],
        {"max_seqs": 3, "token_budget": 2, "block_size": 1, "num_blocks": 3, "chunked_prefill": False}, 0),
    "token_budget": ([{"id": 0, "arrival": 0, "prompt": 2, "output": 1}],
        {"max_seqs": 1, "token_budget": 1, "block_size": 1, "num_blocks": 4, "chunked_prefill": True}, 0),
    "kv_capacity": ([{"id": 0, "arrival": 1, "prompt": 1, "output": 1}],
        {"max_seqs": 2, "token_budget": 4, "block_size": 1, "num_blocks": 1, "chunked_prefill": False}, 0),
    "kv_exclusive": ([{"id": 0, "arrival": 0, "prompt": 1, "output": 2, "abort": 2}],
        {"max_seqs": 2, "token_budget": 2, "block_size": 1, "num_blocks": 3, "chunked_prefill": True}, 1),
    "kv_exact": ([{"id": 0, "arrival": 1, "prompt": 2, "output": 1}],
        {"max_seqs": 1, "token_budget": 3, "block_size": 1, "num_blocks": 2, "chunked_prefill": True}, 0),
}


def _cached(requests, max_seqs, token_budget, block_size, num_blocks):
    return requests, {"max_seqs": max_seqs, "token_budget": token_budget, "block_size": block_size,
                      "num_blocks": num_blocks, "chunked_prefill": True, "prefix_caching": True}


# For each caching mutant, one scenario of the caching domain on which it breaks its claim (found by a seeded random
# search of that domain, the smallest kept, irrelevant arrivals moved to 0), and the ticks before the one that breaks.
CACHE_BREAKS = {
    # request 1 hits request 0's block of [1] in tick 0 and is given 2 new blocks, not 1: 3 blocks for 2 tokens
    "kv_exact": (*_cached([{"id": 0, "arrival": 0, "prompt": 2, "output": 1, "tokens": [1, 2]},
                           {"id": 1, "arrival": 0, "prompt": 2, "output": 1, "tokens": [1, 2]}], 2, 3, 1, 4), 0),
    # both finish in tick 0 holding block 0 ([5]); its count drops to 1, never 0: it is not given back
    "refcount_exact": (*_cached([{"id": 0, "arrival": 0, "prompt": 1, "output": 1, "tokens": [5], "abort": 1},
                                 {"id": 1, "arrival": 0, "prompt": 2, "output": 1, "tokens": [5, 2], "abort": 2}],
                                2, 2, 1, 2), 0),
    # a block taken again keeps its old chain in the cache: request 1 hits it though another request's KV is in it
    "no_false_sharing": (*_cached([{"id": 0, "arrival": 0, "prompt": 3, "output": 2, "tokens": [5, 2, 3]},
                                   {"id": 1, "arrival": 0, "prompt": 1, "output": 3, "tokens": [6]}], 3, 4, 1, 4), 2),
}


def _cached_args_of(requests, config):
    args = _args_of(requests, config)
    families = [next(f for f in range(S.FAMILIES) if S.family_tokens(f, r["prompt"]) == r["tokens"]) for r in requests]
    return args | dict(zip(("f0", "f1", "f2"), families + [0] * (3 - len(families))))


def test_one_contract_per_serving_state_invariant_and_subject():
    contracts = S.serving_contracts()
    names = [inv.name for inv in serving.STATE_INVARIANTS]
    assert [(c.subject, c.name) for c in contracts] == [(s, n) for s in S.PLAIN_SUBJECTS for n in names] + [
        (s, n) for s in S.CACHING_SUBJECTS for n in names if n in S.CACHING_CLAIMS]
    assert set(S.CACHING_CLAIMS) <= set(names) and set(S.CACHING_CLAIMS) == set(mutants.CACHE_MUTANTS)
    assert bridge._contract_count(True, None, "serving") == len(contracts)
    assert bridge._contract_count(True, ("kv_exact", "slot_bound"), "serving") == 6
    assert set(NAMED) <= set(names)
    assert S.serving_contracts(names=("kv_exact",), subjects=("spec.serving.step",))[0].name == "kv_exact"
    with pytest.raises(ValueError, match="subject='impl.Scheduler.step'"):
        S.serving_contracts(subjects=("impl.Scheduler.step",))


def test_every_named_invariant_has_a_mutant_that_loads():
    assert set(mutants.MUTANTS) == set(NAMED) == set(BREAKS)
    for name in mutants.MUTANTS:
        assert hasattr(mutants.load(name), "ServingScheduler"), name


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_mutant_breaks_its_invariant_on_its_scenario_and_impl_does_not(name):
    requests, config, ticks = BREAKS[name]
    assert serving.is_valid(requests, config)
    rows = [(r["arrival"], r["prompt"], r["output"], r.get("abort", -1)) for r in requests]
    rows += [(2, 1, 1, -1)] * (3 - len(rows))
    assert S.scenario_in_bounds(*(config[k] for k in ("max_seqs", "token_budget", "block_size", "num_blocks")), rows,
                                len(requests), ticks)  # inside the contract's domain
    broken = S.impl_scenario(mutants.make(name), config, requests, ticks)
    assert S.why_not(name, broken) is not None, broken
    ours = S.impl_scenario(_make_serving(), config, requests, ticks)
    assert ours[0] is not None and S.why_not(name, ours) is None
    spec_outcome = S.spec_scenario(config, requests, ticks)
    assert spec_outcome[0] is not None and S.why_not(name, spec_outcome) is None


@pytest.mark.parametrize("name", sorted(CACHE_BREAKS))
def test_each_caching_mutant_breaks_its_claim_on_its_scenario_and_impl_and_spec_do_not(name):
    requests, config, ticks = CACHE_BREAKS[name]
    assert serving.is_valid(requests, config)
    args = _cached_args_of(requests, config)  # inside the caching domain: every request's tokens are a family's
    rows = [args[k] for k in ("r0", "r1", "r2")]
    assert S.scenario_in_bounds(*(config[k] for k in ("max_seqs", "token_budget", "block_size", "num_blocks")), rows,
                                len(requests), ticks)
    broken = S.impl_scenario(mutants.make_cached(name), config, requests, ticks)
    assert S.why_not(name, broken) is not None, broken
    (contract,) = S.serving_contracts(mutants.make_cached(name), names=(name,),
                                      subjects=("impl.ServingScheduler.step" + S.CACHING,))
    assert contract.to_plain(args) == {"requests": requests, "config": config, "ticks": ticks}
    assert contract.replay(args).startswith(f"{name} fails after one step")
    for subject in S.CACHING_SUBJECTS:  # ours and the spec keep the claim on every prefix and tick of it
        (ours,) = S.serving_contracts(names=(name,), subjects=(subject,))
        assert ours.replay(args) is None, subject


def test_spec_and_impl_keep_every_invariant_on_sampled_scenarios_of_the_caching_domain():
    rng = random.Random(0)
    inside = shared = 0
    for _ in range(150):
        rows = tuple((rng.randint(0, 2), rng.randint(1, 4), rng.randint(1, 3), rng.randint(-1, 5)) for _ in range(3))
        values = (rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 2), rng.randint(1, 4), rng.random() < 0.5)
        settled = S.settle_scenario(*values, rows, tuple(rng.randint(0, 2) for _ in range(3)))
        requests, config = S.call_from_args(*settled[:6], 3, settled[6])
        assert config["prefix_caching"] is True and all("tokens" in r for r in requests)
        shared += serving.run(requests, config)["cache_hit_tokens"] > 0
        ticks = rng.randint(0, S.MAX_TICKS)
        for outcome in (S.spec_scenario(config, requests, ticks),
                        S.impl_scenario(_make_serving(), config, requests, ticks)):
            inside += outcome[0] is not None
            for inv in serving.STATE_INVARIANTS:
                assert S.why_not(inv.name, outcome) is None, (requests, config, ticks)
    assert inside >= 50 and shared >= 10  # the sample reaches the domain and its cache hits: this test can fail


def test_settling_decides_the_token_families_last():
    rows = ((0, 2, 3, 3), (1, 1, 1, 0), (2, 2, 1, 5))
    assert S.settle_scenario(3, 4, 2, 4, 0, rows, (0, 1, 2))[6] == (0, 1, 2)
    assert S.settle_scenario(3, 4, 2, 4, 0, rows, (7, -1, 2))[6] == (2, 2, 2)  # outside the range: its top
    assert [S.family_tokens(f, 3) for f in range(S.FAMILIES)] == [[1, 2, 3], [5, 2, 3], [1, 2, 6]]


def _make_serving():
    from impl.online import make_serving

    return make_serving


def test_spec_and_impl_keep_every_invariant_on_sampled_scenarios_of_the_domain():
    rng = random.Random(0)
    inside = 0
    for _ in range(400):
        rows = sorted((rng.randint(0, 2), rng.randint(1, 4), rng.randint(1, 3), rng.randint(-1, 5)) for _ in range(3))
        rows = [(a, p, o, ab if ab <= a + 3 else -1) for a, p, o, ab in rows]
        config = (rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 2), rng.randint(1, 4), rng.random() < 0.5)
        count, ticks = rng.randint(1, 3), rng.randint(0, S.MAX_TICKS)
        if not S.scenario_in_bounds(*config[:4], rows, count, ticks):
            continue
        requests, call_config = S.call_from_args(*config, rows, count)
        for outcome in (S.spec_scenario(call_config, requests, ticks),
                        S.impl_scenario(_make_serving(), call_config, requests, ticks)):
            inside += outcome[0] is not None
            for inv in serving.STATE_INVARIANTS:
                assert S.why_not(inv.name, outcome) is None, (requests, call_config, ticks)
    assert inside >= 100  # the sample reaches the domain: this test can fail


def _args_of(requests, config):
    rows = [(r["arrival"], r["prompt"], r["output"], r.get("abort", -1)) for r in requests]
    rows += [(2, 1, 1, -1)] * (3 - len(rows))
    return {"max_seqs": config["max_seqs"], "token_budget": config["token_budget"], "block_size": config["block_size"],
            "num_blocks": config["num_blocks"], "chunked": config["chunked_prefill"],
            "r0": rows[0], "r1": rows[1], "r2": rows[2]}


def test_the_replay_of_a_contract_reads_its_arguments_back():
    requests, config, ticks = BREAKS["kv_exact"]
    (contract,) = S.serving_contracts(mutants.make("kv_exact"), names=("kv_exact",), subjects=("impl.ServingScheduler.step",))
    args = _args_of(requests, config)
    assert contract.to_plain(args) == {"requests": requests, "config": config, "ticks": ticks}
    assert "kv_exact fails after one step" in contract.replay(args)
    (ours,) = S.serving_contracts(names=("kv_exact",), subjects=("impl.ServingScheduler.step",))
    assert ours.replay(args) is None
    assert ours.to_plain(args)["ticks"] is None and len(ours.to_plain(args)["requests"]) == 3


def test_a_step_that_raises_is_replayed_as_a_break_at_the_tick_it_reached():
    from impl.online import make_serving

    class RaisesOnItsSecondStep:
        def __init__(self, config):
            self.engine, self.steps = make_serving(config), 0

        def add_request(self, request):
            self.engine.add_request(request)

        def abort(self, request_id):
            self.engine.abort(request_id)

        def step(self):
            self.steps += 1
            if self.steps == 2:
                raise RuntimeError("boom")
            return self.engine.step()

    requests = [{"id": 0, "arrival": 0, "prompt": 2, "output": 3}]
    config = {"max_seqs": 1, "token_budget": 1, "block_size": 1, "num_blocks": 4, "chunked_prefill": True}
    (contract,) = S.serving_contracts(RaisesOnItsSecondStep, names=("kv_exact",), subjects=("impl.ServingScheduler.step",))
    args = _args_of(requests, config)
    assert contract.replay(args) == "the scenario raised RuntimeError('boom')"
    assert contract.to_plain(args) == {"requests": requests, "config": config, "ticks": 1}
    with pytest.raises(RuntimeError):  # inside the contract the error propagates: CrossHair reports it itself
        contract.fn(*(args[k] for k in ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked",
                                        "r0", "r1", "r2")))


def test_settling_keeps_a_plain_scenario_as_it_is():
    rows = ((0, 2, 3, 3), (1, 1, 1, 0), (2, 2, 1, 5))
    assert S.settle_scenario(3, 4, 2, 4, 0, rows) == (3, 4, 2, 4, False, ((0, 2, 3, 3), (1, 1, 1, -1), (2, 2, 1, 5)))
    assert [S.settle(value, 1, 4) for value in (1, 2, 3, 4)] == [1, 2, 3, 4]
    assert S.untraced(S.settle, 2, 1, 3) == 2  # outside CrossHair it is a plain call


def test_settling_decides_exactly_the_valid_scenarios_of_the_domain():
    # the contract has no precondition: settle_scenario keeps every valid scenario of the bounds as it is and takes
    # anything else (an infeasible request, a value outside its range) to a valid one, so no path is wasted or skipped
    import itertools

    kept, moved = 0, []
    for max_seqs, budget, block_size, blocks, chunked in itertools.product((1, 3), range(1, 5), (1, 2), range(1, 5),
                                                                         (False, True)):
        for row in itertools.product(range(3), range(1, 5), range(1, 4), (-1, 0, 1, 2, 3, 5)):
            if row[3] != -1 and not row[0] <= row[3] <= row[0] + 3:
                continue
            rows = (row, (2, 1, 1, -1), (2, 1, 1, -1))
            settled = S.settle_scenario(max_seqs, budget, block_size, blocks, chunked, rows)
            requests, config = S.call_from_args(max_seqs, budget, block_size, blocks, chunked, rows, 1)
            valid = serving.is_valid(requests, config)
            assert valid == S.requests_fit(budget, block_size, blocks, chunked, rows, 1), (requests, config)
            if valid:
                kept += settled[5][0] == row
            else:
                moved.append(settled[5][0])
                assert serving.is_valid(*S.call_from_args(*settled, 1))
    assert kept and moved and kept + len(moved) > 1000
    rng = random.Random(0)
    for _ in range(300):  # any ints at all: every prefix of the decided scenario is a valid call
        values = [rng.randint(-5, 9) for _ in range(17)]
        settled = S.settle_scenario(*values[:4], values[4] > 0, tuple(tuple(values[5 + 4 * k:9 + 4 * k]) for k in range(3)))
        for count in (1, 2, 3):
            assert serving.is_valid(*S.call_from_args(*settled, count)), settled


def _leaks_a_symbolic_value(x: int) -> int:
    """
    pre: 0 <= x <= 3
    post: __return__ >= 0
    """
    return S.untraced(lambda value: value + 1, x)  # x was never settled: a harness bug


def test_a_symbolic_value_reaching_the_untraced_run_is_unknown_never_a_pass():
    from proofs.symbolic.contracts import Contract

    contract = Contract("leak", "test", _leaks_a_symbolic_value, lambda args: None, lambda args: args)
    (result,) = engine._run_all([contract], 30.0, 1.0, 1)
    assert result.outcome == engine.UNKNOWN, result
    assert "Numeric operation on symbolic while not tracing" in result.message, result.message


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_one_path_finds_the_first_prefix_and_tick_that_break_the_claim(name):
    # first_break's one run per prefix agrees with a separate run per (count, ticks) pair, on the mutant and on ours
    rng = random.Random(name)
    requests, config, _ = BREAKS[name]
    scenarios = [_args_of(requests, config)]
    while len(scenarios) < 12:
        rows = sorted((rng.randint(0, 2), rng.randint(1, 4), rng.randint(1, 3), rng.randint(-1, 5)) for _ in range(3))
        rows = [(a, p, o, ab if ab <= a + 3 else -1) for a, p, o, ab in rows]
        args = dict(zip(("max_seqs", "token_budget", "block_size", "num_blocks", "chunked", "r0", "r1", "r2"),
                        (rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 2), rng.randint(1, 4), rng.random() < 0.5,
                         *rows)))
        if S.requests_fit(args["token_budget"], args["block_size"], args["num_blocks"], args["chunked"], rows, 3):
            scenarios.append(args)
    breaks = 0
    for make in (mutants.make(name), _make_serving()):
        ticks_of = lambda config, requests, last: S.impl_ticks(make, config, requests, last)  # noqa: E731
        for args in scenarios:
            settled = S._settled_of(args)
            expected = None
            for count in range(1, 4):
                call, call_config = S.call_from_args(*settled, count)
                for ticks in range(S.MAX_TICKS + 1):
                    why = S.why_not(name, S.impl_scenario(make, call_config, call, ticks))
                    if why is not None and expected is None:
                        expected = (count, ticks, why)
            assert S.first_break(name, ticks_of, settled) == expected, args
            breaks += expected is not None
    assert breaks >= 1  # the mutant's own scenario breaks it: this test can fail


def test_a_contract_is_planned_its_share_of_what_is_left():
    assert engine.plan_share(left=60, workers=2, owed=0, contracts_left=30) == 4.0
    assert engine.plan_share(left=10, workers=2, owed=8, contracts_left=3) == 4.0
    assert engine.plan_share(left=3, workers=2, owed=0, contracts_left=1) == 3  # never more than the time left
    assert engine.plan_share(left=1000, workers=2, owed=0, contracts_left=2) == engine.SHARE_CAP_SECONDS


def test_verify_runs_the_serving_contracts_and_reports_them(monkeypatch, tmp_path, capsys):
    seen = {}

    def fake(target, seconds, names=None, model="chapter"):
        seen.update(target=target.text, names=names, model=model)
        raw = [{"name": "kv_exact", "subject": subject, "outcome": "no counterexample within 3 s", "seconds": 3.1,
                "counterexample": None, "message": "", "planned": 3.0, "scenarios": bridge.MIN_SCENARIOS_SERVING + 7}
               for subject in S.SUBJECTS]
        return bridge.classify(raw, 3.0)

    monkeypatch.setattr(bridge, "run_contracts", fake)
    report = tmp_path / "r.json"
    code = main(["verify", "--model", "serving", "--engine", "crosshair", "--invariant", "kv_exact", "--budget", "5",
                 "--json", str(report), "--db", "none", "--save-dir", str(tmp_path / "saved")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert seen == {"target": "impl:serve", "names": ("kv_exact",), "model": "serving"}
    explored = bridge.MIN_SCENARIOS_SERVING + 7
    assert (f"crosshair  kv_exact                   impl.ServingScheduler.step bounded: no counterexample in {explored} "
            f"distinct scenarios explored (at least {bridge.MIN_SCENARIOS_SERVING})") in out
    assert f"PASS impl:serve  engine=crosshair; crosshair: 4 contracts (4 bounded; {4 * explored} distinct scenarios explored)" in out
    assert (f"crosshair  kv_exact                   impl.ServingScheduler.step with prefix caching bounded: no "
            f"counterexample in {explored} distinct scenarios explored") in out
    contracts = json.loads(report.read_text())["contracts"]
    assert [c["bounds"] for c in contracts] == [S.BOUNDS, S.BOUNDS, S.CACHING_BOUNDS, S.CACHING_BOUNDS]
    assert [(c["scenarios"], c["min_scenarios"]) for c in contracts] == [(explored, bridge.MIN_SCENARIOS_SERVING)] * 4


def test_a_search_that_explored_too_few_scenarios_is_incomplete_not_bounded(monkeypatch, tmp_path, capsys):
    # the run: --budget 3, CrossHair stopped at its own limit after 4 scenarios of about 10^6: not bounded
    def fake(target, seconds, names=None, model="chapter"):
        raw = [{"name": "token_budget", "subject": subject, "outcome": "no counterexample within 0.9 s",
                "seconds": 1.9, "counterexample": None, "message": "", "planned": 2.8, "scenarios": 4}
               for subject in S.PLAIN_SUBJECTS]  # token_budget is not a caching claim
        return bridge.classify(raw, 2.8)

    monkeypatch.setattr(bridge, "run_contracts", fake)
    code = main(["verify", "--model", "serving", "--engine", "crosshair", "--invariant", "token_budget", "--budget", "3",
                 "--db", "none", "--save-dir", str(tmp_path / "saved")])
    out = capsys.readouterr().out
    assert code == 2, out
    assert (f"crosshair  token_budget               impl.ServingScheduler.step incomplete: nothing found in 4 distinct "
            f"scenarios explored, fewer than the {bridge.MIN_SCENARIOS_SERVING} a bounded search needs") in out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("INCOMPLETE impl:serve") and "2 contracts (2 incomplete; 8 distinct scenarios explored)" in summary
    assert "PASS" not in out


def test_a_serving_counterexample_is_reported_as_its_call(monkeypatch, tmp_path, capsys):
    requests, config, ticks = BREAKS["slot_bound"]

    def fake(target, seconds, names=None, model="chapter"):
        raw = [{"name": "slot_bound", "subject": "impl.ServingScheduler.step", "outcome": "counterexample",
                "seconds": 2.0, "counterexample": {"requests": requests, "config": config, "ticks": ticks},
                "message": "slot_bound fails after one step: 2 running", "planned": 3.0}]
        return bridge.classify(raw, 3.0)

    monkeypatch.setattr(bridge, "run_contracts", fake)
    code = main(["verify", "--model", "serving", "--engine", "crosshair", "--budget", "5", "--db", "none",
                 "--save-dir", str(tmp_path / "saved")])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "FAIL slot_bound  engine=crosshair" in out
    assert "one tick of impl.ServingScheduler.step breaks slot_bound after 0 earlier ticks" in out


def test_serving_contracts_check_our_impl_only(tmp_path, capsys):
    code = main(["verify", "tests/corpus/serving/correct/tick_by_tick.py:serve", "--model", "serving",
                 "--engine", "crosshair", "--budget", "5", "--db", "none"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "the serving model's CrossHair contracts check our impl" in err[0]
    code = main(["verify", "--model", "serving", "--engine", "crosshair", "--invariant", "fifo_order", "--budget", "5"])
    assert code == 2
    assert "not an invariant of the serving model" in capsys.readouterr().err


# --- the campaigns (slow) ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMED)
def test_each_contract_finds_its_injected_bug(name):
    # CrossHair's per-condition limit (CPU seconds) is the target, 30 s; the child is killed later (engine._run_all)
    (result,) = contracts_searched(
        engine.run_serving_crosshair, make=mutants.make(name), budget_seconds=60, per_condition_seconds=30, names=(name,),
        subjects=("impl.ServingScheduler.step",), workers=1,
    )
    assert result.outcome == engine.COUNTEREXAMPLE, result
    assert result.message.startswith(f"{name} fails after one step"), result.message
    plain = result.counterexample
    assert serving.is_valid(plain["requests"], plain["config"])
    assert S.why_not(name, S.impl_scenario(mutants.make(name), plain["config"], plain["requests"], plain["ticks"]))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CACHE_BREAKS))
def test_each_caching_contract_finds_its_injected_bug(name):
    (result,) = contracts_searched(
        engine.run_serving_crosshair, make=mutants.make_cached(name), budget_seconds=60, per_condition_seconds=30, names=(name,),
        subjects=("impl.ServingScheduler.step" + S.CACHING,), workers=1,
    )
    assert result.outcome == engine.COUNTEREXAMPLE, result
    assert result.message.startswith(f"{name} fails after one step"), result.message
    plain = result.counterexample
    assert serving.is_valid(plain["requests"], plain["config"]) and plain["config"]["prefix_caching"] is True
    assert S.why_not(name, S.impl_scenario(mutants.make_cached(name), plain["config"], plain["requests"], plain["ticks"]))


@pytest.mark.slow
def test_contracts_find_nothing_on_our_impl_and_spec():
    # 2 s of CPU each: about 60 s of wall on a quiet machine, the budget a safety net far above
    results = engine.run_serving_crosshair(budget_seconds=400, per_condition_seconds=2.0)
    assert len(results) == 2 * len(serving.STATE_INVARIANTS) + 2 * len(S.CACHING_CLAIMS)
    outcomes = {r.outcome for r in results}
    assert engine.COUNTEREXAMPLE not in outcomes and engine.UNKNOWN not in outcomes, results
    # every contract searched; how far depends on the CPU it got (a loaded machine's child is killed at its wall
    # limit before CrossHair's CPU limit: incomplete), so the test asserts on findings, not on bounded
    assert [(r.subject, r.name) for r in results if r.scenarios < 1] == [], results


@pytest.mark.slow
def test_verify_model_serving_engine_crosshair_end_to_end(tmp_path, capsys):
    report = tmp_path / "r.json"
    code = main(["verify", "--model", "serving", "--engine", "crosshair", "--invariant", "slot_bound",
                 "--invariant", "kv_exclusive", "--budget", "60", "--json", str(report), "--db", "none",
                 "--save-dir", str(tmp_path / "saved")])
    out = capsys.readouterr().out
    contracts = json.loads(report.read_text())["contracts"]
    assert sorted((c["subject"], c["name"]) for c in contracts) == sorted(
        (s, n) for s in S.PLAIN_SUBJECTS for n in ("slot_bound", "kv_exclusive"))  # neither is a caching claim
    # nothing found, nothing unknown; a child the machine slowed past its wall share is incomplete (exit 2, never a
    # pass): in a pytest worker that ran other CrossHair tests before, the forked children got a third of a core
    killed = [c for c in contracts if c["outcome"] == "incomplete" and "killed at its planned" in c["message"]]
    assert {c["outcome"] for c in contracts if c not in killed} <= {"bounded", "confirmed"}, out
    assert code == (2 if killed else 0), out
