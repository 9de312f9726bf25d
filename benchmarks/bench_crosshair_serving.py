"""Time each serving CrossHair contract to the counterexample of its injected bug (tests/crosshair_serving_mutants.py).

    PYTHONPATH=. python benchmarks/bench_crosshair_serving.py [--runs 3] [--limit 30] [--names slot_bound,kv_exact]

For each mutant (one per named serving invariant), ``--runs`` times, interleaved (run 1
of every mutant, then run 2, ...) so that a change in the machine's load spreads over
all of them: ``run_serving_crosshair`` on the mutant's own invariant, subject
``impl.ServingScheduler.step``, one child at a time, CrossHair's per-condition limit
``--limit`` s (CPU).  Per run: the outcome, the child's wall seconds (fork, CrossHair and
the concrete replay) and its CPU seconds (user + system, from ``RUSAGE_CHILDREN``).
Then one line per mutant: how many runs found it, the median and the worst wall and CPU
seconds, and the load average when the campaign ended (the machine may be shared).
CrossHair seeds its path search with a fixed number, so these runs repeat one search
and differ only by the machine's load.

    PYTHONPATH=. python benchmarks/bench_crosshair_serving.py --seeds 20 [--limit 30]

measures the search itself instead: per mutant, ``--seeds`` searches in this process,
each with CrossHair's random generator seeded 0, 1, ... (``crosshair.statespace.newrandom``
replaced for the run: a benchmark-only patch), and reports how many of them found the
bug, and the median and worst number of distinct scenarios the contract explored until
it (the engine's own count, which every CrossHair line reports) and CPU seconds until the
counterexample and its replay.

    PYTHONPATH=. python benchmarks/bench_crosshair_serving.py --caching --seeds 10 [--limit 30]

does either for the caching mutants (``CACHE_MUTANTS``) on the subject
``impl.ServingScheduler.step with prefix caching`` instead.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def cpu_of_children() -> float:
    """User + system seconds of every child reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def subject_and_make(name: str, caching: bool):
    """The subject a mutant's contract is about and its engine factory."""
    import crosshair_serving_mutants as mutants
    from proofs.symbolic.serving import CACHING

    if caching:
        return "impl.ServingScheduler.step" + CACHING, mutants.make_cached(name)
    return "impl.ServingScheduler.step", mutants.make(name)


def one_run(name: str, limit: float, caching: bool = False) -> tuple[str, float, float]:
    """The outcome, wall seconds and CPU seconds of one search for the mutant ``name``."""
    from proofs.symbolic.engine import run_serving_crosshair

    subject, make = subject_and_make(name, caching)
    before = cpu_of_children()
    (result,) = run_serving_crosshair(make, budget_seconds=limit + 30, per_condition_seconds=limit,
                                      names=(name,), subjects=(subject,), workers=1)
    return result.outcome, result.seconds, cpu_of_children() - before


def seeded_search(name: str, limit: float, seed: int, caching: bool = False) -> tuple[str, int, float]:
    """The outcome, distinct scenarios explored and CPU seconds of one in-process search with CrossHair's generator
    seeded ``seed`` (the scenarios as the engine counts them: proofs.symbolic.contracts.note_scenario)."""
    import random

    import crosshair.statespace as statespace
    from proofs.symbolic import engine, serving

    subject, make = subject_and_make(name, caching)
    (contract,) = serving.serving_contracts(make, names=(name,), subjects=(subject,))
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
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit", type=float, default=30.0, help="CrossHair's per-condition limit, CPU seconds")
    parser.add_argument("--names", default="", help="comma-separated mutant names (default: all)")
    parser.add_argument("--seeds", type=int, default=0, help="measure the search over this many CrossHair seeds instead")
    parser.add_argument("--caching", action="store_true", help="the caching mutants, on the prefix-caching subject")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs={args.runs}: expected an int >= 1")
    if not args.limit > 0:
        parser.error(f"--limit={args.limit}: expected seconds > 0")
    sys.path.insert(0, str(ROOT / "tests"))
    import crosshair_serving_mutants as mutants

    table = mutants.CACHE_MUTANTS if args.caching else mutants.MUTANTS
    names = [n for n in args.names.split(",") if n] or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        parser.error(f"--names={','.join(unknown)}: expected mutant names of tests/crosshair_serving_mutants.py")
    if args.seeds < 0:
        parser.error(f"--seeds={args.seeds}: expected an int >= 0")
    if args.seeds:
        import crosshair.core_and_libs  # noqa: F401

        print(f"{'invariant':26} found  scenarios median/max  cpu median/max   "
              f"(limit {args.limit:g} s CPU, seeds 0..{args.seeds - 1})")
        every = []
        for name in names:
            searches = [seeded_search(name, args.limit, seed, args.caching) for seed in range(args.seeds)]
            found = [s for s in searches if s[0] == "counterexample"]
            scenarios, cpus = [s[1] for s in searches], [s[2] for s in searches]
            every += searches
            print(f"{name:26} {len(found)}/{len(searches)}  {statistics.median(scenarios):7.1f} / {max(scenarios):4d}"
                  f"        {statistics.median(cpus):5.2f} / {max(cpus):5.2f}   {[s[1] for s in searches]}", flush=True)
        print("pooled: " + pooled([s[1] for s in every if s[0] == "counterexample"], len(every)))
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        return 0
    runs: dict[str, list[tuple[str, float, float]]] = {name: [] for name in names}
    for run in range(args.runs):
        for name in names:
            outcome, wall, cpu = one_run(name, args.limit, args.caching)
            runs[name].append((outcome, wall, cpu))
            print(f"run {run + 1}  {name:26} {outcome:30} wall {wall:6.1f} s  cpu {cpu:6.1f} s", flush=True)
    print(f"\n{'invariant':26} found  wall median/max  cpu median/max   (limit {args.limit:g} s CPU, {args.runs} runs)")
    for name in names:
        found = [r for r in runs[name] if r[0] == "counterexample"]
        walls, cpus = [r[1] for r in runs[name]], [r[2] for r in runs[name]]
        print(f"{name:26} {len(found)}/{len(runs[name])}   {statistics.median(walls):5.1f} / {max(walls):5.1f}"
              f"   {statistics.median(cpus):5.1f} / {max(cpus):5.1f}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
