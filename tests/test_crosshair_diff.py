"""proofs.symbolic.diff: CrossHair's behaviour diff finds real differences, and none between correct schedulers."""

import pathlib

import pytest

from proofs.symbolic.diff import behaviour, crosshair_differences
from proofs.targets import load_callable, parse_target
from tests.patience import differences_found

pytestmark = pytest.mark.slow  # a campaign: `python -m pytest -n 2 -m slow` (README)

CORPUS = pathlib.Path(__file__).parent / "corpus"
EVENT_DRIVEN = parse_target(f"{CORPUS / 'correct' / 'event_driven.py'}:schedule")
HEAP_QUEUE = parse_target(f"{CORPUS / 'correct' / 'heap_queue.py'}:schedule")
LATE = parse_target(f"{CORPUS / 'buggy' / 'same_tick_arrival_admitted_late.py'}:schedule")
DUPLICATES = parse_target(f"{CORPUS / 'buggy' / 'accepts_duplicate_ids.py'}:schedule")


def concrete(target, call):
    return behaviour(load_callable(target), call)


def test_two_correct_schedulers_do_not_differ_within_a_short_budget():
    assert crosshair_differences(EVENT_DRIVEN, HEAP_QUEUE, seconds=6.0) == []


def test_a_same_tick_arrival_admitted_late_is_found_and_differs_concretely():
    calls = differences_found(EVENT_DRIVEN, LATE, seconds=15.0)
    assert calls, "expected at least one differing call"
    for jobs, slots, continuous in calls:
        call = (jobs, slots, continuous)
        assert len(jobs) <= 3 and all(set(job) == {"id", "arrival", "tokens"} for job in jobs), call
        old, new = concrete(EVENT_DRIVEN, call), concrete(LATE, call)
        assert old != new, f"{call!r}: both sides {old!r}"
    valid = [c for c in calls if concrete(EVENT_DRIVEN, c)[0] == "returned"]
    assert valid and all(c[2] is True for c in valid), "the late admission only shows under the continuous policy"


def test_accepting_repeated_ids_is_a_validation_difference():
    calls = differences_found(HEAP_QUEUE, DUPLICATES, seconds=12.0)
    assert calls, "expected at least one differing call"
    for call in calls:
        old, new = concrete(HEAP_QUEUE, call), concrete(DUPLICATES, call)
        assert old == ("raised", "ValueError") and new[0] == "returned", (call, old, new)
        ids = [job["id"] for job in call[0]]
        assert len(set(ids)) < len(ids), f"{call!r}: expected a repeated id"


def test_a_target_that_hangs_in_c_code_is_killed_not_waited_for(tmp_path):
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\n\n\ndef schedule(jobs, slots, continuous):\n    time.sleep(10**6)\n")
    assert crosshair_differences(EVENT_DRIVEN, parse_target(f"{sleeper}:schedule"), seconds=3.0) == []


def test_a_target_that_cannot_be_imported_finds_nothing_and_does_not_raise(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise ImportError('no')\n")
    assert crosshair_differences(EVENT_DRIVEN, parse_target(f"{broken}:schedule"), seconds=2.0) == []
