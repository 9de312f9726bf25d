"""A pass says what it covered: the strategies reach the corners that hide bugs, and every PASS states measured bounds."""

import collections
import json
import pathlib
import re

from hypothesis import HealthCheck, given, settings

import spec
from proofs.cli.main import main
from proofs.search import strategies

CORRECT = pathlib.Path(__file__).parent / "corpus" / "correct"
CORNERS = (
    "idle gap >= 2**32", "arrivals 0 and >= 2**32 together", "arrival >= 2**64", "same-tick arrivals",
    "negative id", "ids spread >= 2**64", "id beyond 64 bits", "33-299 jobs", "300+ jobs", "one slot",
)


def drawn_features(strategy, examples: int) -> collections.Counter:
    seen = collections.Counter()

    @settings(max_examples=examples, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def draw(call):
        assert spec.is_valid(*call), call
        seen.update(strategies.features(call))

    draw()
    return seen


def test_valid_calls_reach_every_corner_the_docs_name():
    seen = drawn_features(strategies.valid_calls(), 400)
    missing = [corner for corner in CORNERS if not seen[corner]]
    assert not missing, f"never drawn: {missing}; drawn: {dict(seen)}"


def test_large_inputs_are_cheap_and_only_where_asked():
    seen = drawn_features(strategies.valid_calls(max_jobs=8), 150)
    assert not seen["33-299 jobs"] and not seen["300+ jobs"], dict(seen)

    @settings(max_examples=40, database=None, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(strategies.large_calls())
    def cheap(call):
        jobs, slots, _ = call
        assert 33 <= len(jobs) <= 2000 and max(job["tokens"] for job in jobs) <= 3
        assert sum(job["tokens"] for job in jobs) <= strategies.busy_ticks(len(jobs)) * slots, (len(jobs), slots)
        assert len(jobs) * strategies.busy_ticks(len(jobs)) <= strategies.LARGE_JOB_TICKS

    cheap()


def test_the_docs_do_not_promise_ties_in_the_fifo_key():
    doc = strategies.__doc__
    assert "ties in the FIFO key" not in doc and "never ties" in doc


def test_features_and_bounds_are_measured_from_the_calls():
    calls = [
        ([{"id": -(2**70), "arrival": 0, "tokens": 5}, {"id": 2**70, "arrival": 2**40, "tokens": 1}], 1, True),
        ([{"id": 0, "arrival": 3, "tokens": 2}, {"id": 1, "arrival": 3, "tokens": 9}], 4, False),
    ]
    assert {"idle gap >= 2**32", "arrivals 0 and >= 2**32 together", "negative id", "ids spread >= 2**64",
            "one slot", "continuous"} <= set(strategies.features(calls[0]))
    assert "same-tick arrivals" in strategies.features(calls[1]) and "idle gap >= 2**32" not in strategies.features(calls[1])
    bounds = strategies.Bounds()
    for call in calls:
        bounds.add(call)
    assert bounds.to_json() == {"valid_calls": 2, "jobs": [2, 2], "slots": [1, 4], "arrivals": [0, 2**40],
                                "tokens": [1, 9], "ids": [-(2**70), 2**70]}
    assert bounds.describe() == "jobs 2..2, slots 1..4, arrivals 0..2**40, tokens 1..9"
    assert [strategies.number(v) for v in (7, 2**64, 2**64 + 5, -(2**63), 3 * 2**70)] == [
        "7", "2**64", "2**64+5", "-2**63", "~2**71"]


def test_a_pass_states_the_bounds_it_measured_and_the_json_carries_them(tmp_path, capsys):
    report = tmp_path / "report.json"
    target = f"{CORRECT / 'heap_queue.py'}:schedule"
    code = main(["verify", target, "--seed", "0", "--examples", "120", "--budget", "60", "--db", "none",
                 "--save-dir", str(tmp_path / "saved"), "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(report.read_text())
    line = out.strip().splitlines()[-1]
    bounds = data["bounds"]
    number = strategies.number
    assert line == (
        f"PASS {target}  engine=hypothesis  {data['calls']} calls; "
        f"jobs {bounds['jobs'][0]}..{bounds['jobs'][1]}, slots {bounds['slots'][0]}..{bounds['slots'][1]}, "
        f"arrivals {number(bounds['arrivals'][0])}..{number(bounds['arrivals'][1])}, "
        f"tokens {bounds['tokens'][0]}..{bounds['tokens'][1]}"
    )
    assert bounds["jobs"][0] == 0 and bounds["jobs"][1] > 32 and bounds["arrivals"][1] >= 2**32
    assert 0 < bounds["valid_calls"] <= data["calls"]
    conformance = data["statistics"]["conformance"]
    assert conformance["drawn"] == 120
    assert all(conformance.get(corner, 0) <= conformance["drawn"] for corner in CORNERS)
    assert conformance["idle gap >= 2**32"] > 0 and conformance["same-tick arrivals"] > 0
    assert set(data["statistics"]) >= {"conformance", "deterministic", "validation"}
    assert re.fullmatch(r"\d+", str(data["calls"]))


def test_a_large_failing_input_shrinks_to_a_small_one_within_the_minimiser_deadline():
    import importlib.util
    import time

    from proofs.search.minimize import minimize_valid_call

    path = pathlib.Path(__file__).parent / "corpus" / "buggy" / "admits_one_too_many.py"
    loader = importlib.util.spec_from_file_location("admits_one_too_many", path)
    buggy = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(buggy)

    def fails(call):
        return any(v.invariant == "slot_bound" for v in spec.check(*call, buggy.schedule(*call)))

    jobs = [{"id": 2**63 + 7 * i, "arrival": (i // 50) * 2**40, "tokens": 1 + i % 2} for i in range(2000)]
    call = (jobs, 44, True)
    assert fails(call)
    started = time.monotonic()
    small = minimize_valid_call(call, fails, seconds=20.0)
    assert time.monotonic() - started < 20.0
    assert small == ([{"id": 0, "arrival": 0, "tokens": 1}, {"id": 1, "arrival": 0, "tokens": 1}], 1, False)
