"""The CrossHair engine: one-step contracts on spec and impl, injected step bugs, external validation.

Each injected step bug is searched for with a per-condition limit of 60 s (most fall
in a few seconds, see docs/crosshair.md).  Tests never assert wall-clock times.
"""

import glob
import importlib.util
import os

import pytest
from dataclasses import asdict

from proofs.symbolic import bridge
from proofs.symbolic import contracts as C
from proofs.symbolic.engine import COUNTEREXAMPLE, parse_invocation, run_crosshair
from proofs.targets import load_callable, parse_target
from proofs.views import impl_step, scheduler_from_state, state_from_view
from spec import STATE_INVARIANTS, initial, step
from tests.patience import contracts_searched

pytestmark = pytest.mark.slow  # a campaign: `python -m pytest -n 2 -m slow` (README)

HERE = os.path.dirname(__file__)


def _load(path):
    name = "step_bug_" + os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


STEP_BUGS = sorted(glob.glob(os.path.join(HERE, "corpus", "step_bugs", "[a-z]*.py")))


def test_one_contract_per_registry_invariant_and_subject():
    names = [inv.name for inv in STATE_INVARIANTS] + [C.SHAPE]
    contracts = C.step_contracts()
    assert [c.name for c in contracts] == names * 2
    assert {c.subject for c in contracts} == {"spec.step", "impl.Scheduler.step"}


def test_every_state_invariant_has_an_injected_step_bug():
    expected = {_load(path).EXPECTED for path in STEP_BUGS}
    assert expected == {inv.name for inv in STATE_INVARIANTS}


def test_impl_view_maps_back_to_the_spec_state_and_steps_alike():
    from impl import Scheduler

    jobs = [{"id": i, "arrival": a, "tokens": t} for i, (a, t) in enumerate([(0, 1), (0, 4), (2, 2), (5, 3)])]
    for continuous in (False, True):
        state = initial(jobs, 2, continuous)
        while state.waiting or state.active:
            assert state_from_view(scheduler_from_state(Scheduler, state).view(), state) == state
            assert impl_step(Scheduler, state) == step(state)
            assert C.reachable_shape(state) and C.all_invariants_hold(state)
            state = step(state)
            assert C.state_from_dict(C.plain_from_state(state)) == state


def test_parse_invocation_reads_positional_and_keyword_arguments():
    def f(a: int, b: tuple, c: bool):
        pass

    text = "false when calling f(1, (2, None), c=True) (which returns [0])"
    assert parse_invocation(f, text) == {"a": 1, "b": (2, None), "c": True}
    assert parse_invocation(f, "no call here") is None


def test_step_contracts_find_nothing_on_spec_and_impl():
    results = run_crosshair(budget_seconds=150, per_condition_seconds=1.0, subjects=("spec.step", "impl.Scheduler.step"))
    assert len(results) == 2 * (len(STATE_INVARIANTS) + 1)
    found = [(r.subject, r.name, r.counterexample, r.message) for r in results if r.outcome == COUNTEREXAMPLE]
    assert found == []
    # every contract searched (how far depends on the CPU it got: the test asserts on findings, not on bounded)
    rows = bridge.classify([asdict(r) for r in results], planned=1.0)
    assert [(r["subject"], r["name"]) for r in rows if r["outcome"] == "unknown" or r["scenarios"] < 1] == [], rows


def test_outcomes_say_how_far_each_contract_got():
    raw = [
        {"name": "slot_bound", "subject": "spec.step", "outcome": "confirmed", "seconds": 0.5, "counterexample": None,
         "message": "CrossHair confirmed it over every path of the bounded domain", "scenarios": 3},
        {"name": "fifo_order", "subject": "spec.step", "outcome": "no counterexample within 5.1 s", "seconds": 5.1,
         "counterexample": None, "message": "stopped at the wall-clock deadline with no counterexample found (not a proof)",
         "scenarios": bridge.MIN_SCENARIOS_STEP},
        {"name": "no_preemption", "subject": "spec.step", "outcome": "no counterexample within 5.1 s", "seconds": 5.1,
         "counterexample": None, "message": "", "scenarios": bridge.MIN_SCENARIOS_STEP - 1},
        {"name": "termination", "subject": "spec.step", "outcome": "no counterexample within 1.2 s", "seconds": 1.2,
         "counterexample": None, "message": "stopped at the wall-clock deadline with no counterexample found (not a proof)"},
        {"name": "reachable_shape", "subject": "spec.step", "outcome": "no counterexample within 0 s", "seconds": 0.0,
         "counterexample": None, "message": "not started: the overall budget was spent before this contract's turn (not a proof)"},
        {"name": "validation", "subject": "schedule", "outcome": "unknown", "seconds": 1.0, "counterexample": None,
         "message": "CrossHair could not meet the precondition"},
    ]
    before = [dict(r) for r in raw]
    rows = bridge.classify(raw, planned=4.0)
    assert raw == before  # the caller's results are not modified
    assert [r["outcome"] for r in rows] == ["confirmed", "bounded", "incomplete", "incomplete", "incomplete", "unknown"]
    least = bridge.MIN_SCENARIOS_STEP
    assert rows[2]["message"].startswith(f"nothing found in {least - 1} distinct scenarios explored, fewer than the "
                                         f"{least} a bounded search needs")
    assert rows[3]["message"].startswith("cut short before its planned 4.0 s")
    assert rows[4]["message"].startswith("not started")
    lines = bridge.ledger(rows)
    assert "confirmed within bounds (3 distinct scenarios explored, every path): one step from any pre-state of <= 3 jobs" in lines[0]
    assert "1 <= slots <= 4" in lines[0] and "pre-state built by state_from_rows" in lines[0]
    assert (f"bounded: no counterexample in {least} distinct scenarios explored (at least {least}), its whole planned "
            "4.0 s (5.1 s of wall time; not confirmed)") in lines[1]
    assert "unknown after 0 distinct scenarios explored" in lines[5]
    assert not any("confirmed" in line.replace("not confirmed", "") for line in lines[1:])


@pytest.mark.parametrize("path", STEP_BUGS, ids=lambda p: os.path.basename(p)[:-3])
def test_injected_step_bug_is_found_with_its_invariant(path):
    bug = _load(path)
    (result,) = contracts_searched(
        run_crosshair, scheduler_class=bug.Scheduler, budget_seconds=90, per_condition_seconds=60,
        names=(bug.EXPECTED,), subjects=("impl.Scheduler.step",),
    )
    assert result.outcome == COUNTEREXAMPLE, result
    assert result.name == bug.EXPECTED
    assert result.counterexample["invariant"] == bug.EXPECTED
    pre = C.state_from_dict(result.counterexample["pre_state"])
    assert C.all_invariants_hold(pre)
    assert not C.claim_holds(bug.EXPECTED, impl_step(bug.Scheduler, pre))


@pytest.mark.parametrize(
    "name", ["accepts_bool_fields", "accepts_duplicate_ids", "keyerror_on_missing_key"]
)
def test_external_validation_bug_is_caught(name):
    target = load_callable(parse_target(os.path.join(HERE, "corpus", "buggy", f"{name}.py") + ":schedule"))
    results = contracts_searched(lambda **limits: run_crosshair(target, with_check=False, **limits),
                                 budget_seconds=60, per_condition_seconds=15)
    found = [r for r in results if r.outcome == COUNTEREXAMPLE]
    assert found, results
    call = found[0].counterexample
    assert set(call) == {"jobs", "slots", "continuous"}
    assert found[0].message  # the concrete re-run said what went wrong


def test_correct_external_target_gets_no_counterexample():
    target = load_callable(parse_target(os.path.join(HERE, "corpus", "correct", "tick_by_tick.py") + ":schedule"))
    # 5 s of CPU each: the repeated-id contract needs about 0.4 s to exhaust its domain, so a loaded machine does not
    # get its child killed at the wall-clock deadline (5 + 3 + 1.25 s) before it is confirmed
    results = run_crosshair(target, budget_seconds=180, per_condition_seconds=5, with_check=True)
    assert [r.name for r in results] == ["validation", "validation", "validation", "check"]
    assert [r for r in results if r.outcome == COUNTEREXAMPLE] == []
    rows = bridge.classify([asdict(r) for r in results], planned=5.0)
    assert [r["outcome"] for r in rows if r["outcome"] == "unknown" or r["scenarios"] < 1] == [], rows
    # the repeated-id contract exhausts its small domain: confirmed, and its ledger line says over what
    assert rows[2]["outcome"] == "confirmed", rows[2]
    assert "every path): calls of <= 3 jobs" in bridge.ledger(rows)[2]
