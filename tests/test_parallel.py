"""``verify --workers N``: the checks spread over processes, merged in a stable order."""

import os
import re
import subprocess
import sys

import pytest

from proofs.search.engine import CHECKS
from proofs.search.parallel import plan, run_parallel
from proofs.targets import parse_target

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUGGY = os.path.join(ROOT, "tests", "corpus", "buggy")


def verify(tmp_path, *args):
    command = [sys.executable, "-m", "proofs.cli.main", "verify", *args, "--db", "none", "--budget", "40"]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)


def test_the_plan_keeps_the_order_of_the_checks():
    assert plan(stateful=True) == [c for c in CHECKS if c != "replay"]
    assert "stateful" not in plan(stateful=False)


def test_workers_must_be_positive():
    with pytest.raises(ValueError, match="workers=0"):
        run_parallel(parse_target("impl:schedule"), 0.0, 0)


def without_checks(out: str) -> str:
    """The report without how far each check got, how many calls reached each corner (they depend on when each
    stopped) and any flaky time-out (a call a loaded machine slowed past its limit once, in one run and not the other)."""
    kept, in_flaky = [], False
    for line in out.splitlines():
        in_flaky = line.startswith("flaky ") or (in_flaky and line.startswith("  "))
        if line.strip() and not in_flaky and not line.startswith(("hypothesis  ", "corner  ")):
            kept.append(re.sub(r" \(\d+ flaky [^()]*\)$", "", line))
    return "\n".join(kept)


@pytest.mark.slow  # two whole verify runs (about 20 s on 2 quiet cores): the slow run
def test_two_workers_report_what_one_does(tmp_path):
    target = os.path.join(BUGGY, "sjf_hidden_priority.py") + ":schedule"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = verify(tmp_path / "one", target, "--seed", "0", "--examples", "100")
    two = verify(tmp_path / "two", target, "--seed", "0", "--examples", "100", "--workers", "2")
    assert one.returncode == two.returncode == 1, one.stdout + one.stderr + two.stdout + two.stderr
    # the same minimal counterexample, the same report (how far the other checks got may differ)
    assert without_checks(one.stdout) == without_checks(two.stdout)
    assert "hypothesis  conformance" in one.stdout and "hypothesis  conformance" in two.stdout


def test_two_workers_pass_our_impl_with_every_check(tmp_path):
    run = verify(tmp_path, "impl:schedule", "--seed", "0", "--examples", "60", "--workers", "2")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1].startswith("PASS impl:schedule  engine=hypothesis  ")
    assert "; jobs 0.." in run.stdout  # the bounds, merged over the workers
    assert "budget ran out" not in run.stdout
    lines = [line for line in run.stdout.splitlines() if line.startswith("hypothesis  ")]
    assert [line.split()[1] for line in lines] == list(CHECKS)  # every check, in check order, merged
    assert all(line.endswith(" finished") and "not finished" not in line for line in lines), lines


def test_the_first_counterexample_in_check_order_is_reported(tmp_path):
    # a scheduler that breaks validation (accepts bools) and more: with --all every
    # check reports, in check order; without it only the first, as in a serial run
    target = os.path.join(BUGGY, "accepts_bool_fields.py") + ":schedule"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    serial = verify(tmp_path / "a", target, "--seed", "0", "--examples", "50")
    parallel = verify(tmp_path / "b", target, "--seed", "0", "--examples", "50", "--workers", "3")
    assert serial.returncode == parallel.returncode == 1
    assert serial.stdout.splitlines()[0] == parallel.stdout.splitlines()[0]
