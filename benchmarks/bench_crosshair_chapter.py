"""Scenarios (CrossHair paths) each chapter step contract explores until the counterexample of its injected bug.

    PYTHONPATH=. python benchmarks/bench_crosshair_chapter.py [--seeds 10] [--limit 30] [--names slot_bound,...]

For each injected step bug of tests/corpus/step_bugs/ (one per state invariant), ``--seeds``
searches in this process of the bug's own invariant on the ``impl.Scheduler.step`` subject,
each with CrossHair's random generator seeded 0, 1, ... (``crosshair.statespace.newrandom``
replaced for the run: a benchmark-only patch), CrossHair's per-condition limit ``--limit`` s
of CPU.  Per bug: how many searches found it, and the median and worst number of distinct
scenarios the contract explored until then (for the chapter's symbolic contracts a
scenario is one path through the body, each a distinct set of CrossHair's decisions: the
engine's own count, which every CrossHair line reports) and CPU seconds.  The figures
justify the chapter's minimum exploration for ``bounded`` (proofs/symbolic/bridge.py,
docs/crosshair.md).
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import pathlib
import random
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_bug(path: str):
    """The module of one injected step bug: its ``Scheduler`` and ``EXPECTED`` invariant."""
    spec = importlib.util.spec_from_file_location(f"step_bug_{os.path.basename(path)[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seeded_search(bug, limit: float, seed: int) -> tuple[str, int, float]:
    """The outcome, distinct scenarios and CPU seconds of one in-process search with CrossHair seeded ``seed``."""
    import crosshair.statespace as statespace
    from proofs.symbolic import contracts, engine

    (contract,) = contracts.step_contracts(bug.Scheduler, subjects=("impl.Scheduler.step",), names=(bug.EXPECTED,))
    newrandom = statespace.newrandom
    statespace.newrandom = lambda: random.Random(seed)
    try:
        started = time.process_time()
        payload = engine._analyse(contract, limit)
        return payload["outcome"], payload["scenarios"], time.process_time() - started
    finally:
        statespace.newrandom = newrandom


def pooled(found: list[int], searches: int) -> str:
    """The distribution of scenarios-to-counterexample over every search that found its bug: the count each percentile
    needed, and how many searches a minimum of N scenarios would have let find their bug."""
    found = sorted(found)
    if not found:
        return "no search found its bug"
    at = lambda q: found[min(len(found) - 1, max(0, -(-q * len(found) // 100) - 1))]  # noqa: E731  nearest rank
    parts = [f"p{q} {at(q)}" for q in (50, 90, 95, 99)] + [f"max {found[-1]}"]
    within = ", ".join(f"{sum(n <= k for n in found)}/{searches} within {k}" for k in (10, 20, 30, 50, 100))
    return f"{len(found)}/{searches} found; scenarios to the counterexample: {', '.join(parts)}; {within}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--limit", type=float, default=30.0, help="CrossHair's per-condition limit, CPU seconds")
    parser.add_argument("--names", default="", help="comma-separated invariants (default: every step bug's)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds={args.seeds}: expected an int >= 1")
    if not args.limit > 0:
        parser.error(f"--limit={args.limit}: expected seconds > 0")
    bugs = [load_bug(p) for p in sorted(glob.glob(str(ROOT / "tests" / "corpus" / "step_bugs" / "[a-z]*.py")))]
    wanted = [n for n in args.names.split(",") if n]
    unknown = [n for n in wanted if n not in {b.EXPECTED for b in bugs}]
    if unknown:
        parser.error(f"--names={','.join(unknown)}: expected invariants of tests/corpus/step_bugs/")
    bugs = [b for b in bugs if not wanted or b.EXPECTED in wanted]
    import crosshair.core_and_libs  # noqa: F401

    print(f"{'step bug':30} {'invariant':26} found  scenarios median/max  cpu median/max   "
          f"(limit {args.limit:g} s CPU, seeds 0..{args.seeds - 1})")
    every = []
    for bug in bugs:
        searches = [seeded_search(bug, args.limit, seed) for seed in range(args.seeds)]
        every += searches
        found = [s for s in searches if s[0] == "counterexample"]
        scenarios = [s[1] for s in found] or [0]
        cpus = [s[2] for s in searches]
        name = bug.__name__.removeprefix("step_bug_")
        print(f"{name:30} {bug.EXPECTED:26} {len(found)}/{len(searches)}  {statistics.median(scenarios):7.1f} / "
              f"{max(scenarios):4d}        {statistics.median(cpus):5.2f} / {max(cpus):5.2f}   {[s[1] for s in searches]}",
              flush=True)
    print("pooled: " + pooled([s[1] for s in every if s[0] == "counterexample"], len(every)))
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
