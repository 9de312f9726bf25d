"""Time impl.schedule and impl.serve against straightforward per-tick loops of their models, side by side.

    PYTHONPATH=. python benchmarks/bench_schedulers.py [--jobs 100000] [--requests 100000] [--runs 3] [--only chapter|serving]

Chapter model: 10^5 jobs, 64 slots, tokens 1..199 (about 10^7 services), arriving
about as fast as the slots serve them; impl.schedule (event-driven) against
benchmarks/baselines/chapter_loop.py (the chapter's closing code, repaired), both
modes.  Serving model: the peak workload of benchmarks/bench_serve.py (10^5 requests
arriving 50% faster than served, 5% aborted); impl.serve against
benchmarks/baselines/serving_loop.py.  Each pair runs alternately in this one
process, median of ``--runs``; the script asserts that each pair's results are equal
and prints the ratio loop / impl, of wall-clock time and of this process's CPU time
(``time.process_time``, which a shared machine disturbs less).
"""

from __future__ import annotations

import argparse
import gc
import pathlib
import random
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SLOTS = 64


def chapter_jobs(count: int, seed: int = 0) -> list[dict]:
    """``count`` jobs of 1..199 tokens, about 0.64 arriving per tick: the 64 slots' service rate."""
    rng = random.Random(seed)
    jobs, arrival = [], 0.0
    for job_id in range(count):
        jobs.append({"id": job_id, "arrival": int(arrival), "tokens": rng.randint(1, 199)})
        arrival += rng.uniform(0.0, 2 * 100 / SLOTS)
    return jobs


def side_by_side(pair: dict, args: tuple, runs: int) -> dict:
    """Each function of ``pair`` once for its result, then ``runs`` timed runs, alternating.

    Returns {name: (median wall seconds, median CPU seconds of this process, result)}.
    A timed run's result is dropped at once and the heap collected before the next, so
    that no run pays the garbage collector for another's result."""
    results = {name: function(*args) for name, function in pair.items()}
    wall = {name: [] for name in pair}
    cpu = {name: [] for name in pair}
    for _ in range(runs):
        for name, function in pair.items():
            gc.collect()
            started, used = time.perf_counter(), time.process_time()
            function(*args)
            wall[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - used)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name]), results[name]) for name in pair}


def report(title: str, timings: dict, baseline: str, ours: str, work: str) -> bool:
    print(title)
    print(f"  {work}")
    for name, (wall, cpu, _) in timings.items():
        print(f"  {name:<24} wall {wall:8.3f} s   cpu {cpu:8.3f} s")
    same = timings[baseline][2] == timings[ours][2]
    print(f"  ratio {baseline} / {ours}: wall {timings[baseline][0] / timings[ours][0]:.2f}x, "
          f"cpu {timings[baseline][1] / timings[ours][1]:.2f}x   results equal: {'yes' if same else 'NO'}")
    return same


def main() -> int:
    sys.path.insert(0, str(ROOT))
    import impl
    from benchmarks.baselines import chapter_loop, serving_loop
    from benchmarks.bench_serve import CONFIG, workload

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=("chapter", "serving"))
    args = parser.parse_args()
    print(f"median of {args.runs} runs each, alternating, one process (python {sys.version.split()[0]})")
    ok = True
    if args.only in (None, "chapter"):
        jobs = chapter_jobs(args.jobs)
        for continuous in (True, False):
            timings = side_by_side({"chapter_loop.schedule": chapter_loop.schedule, "impl.schedule": impl.schedule},
                                   (jobs, SLOTS, continuous), args.runs)
            result = timings["impl.schedule"][2]
            work = (f"{len(jobs)} jobs, {SLOTS} slots, continuous={continuous}: {result['busy_slots']} services, "
                    f"{len(result['trace'])} ticks")
            ok &= report(f"chapter model, continuous={continuous}", timings, "chapter_loop.schedule", "impl.schedule", work)
    if args.only in (None, "serving"):
        requests = workload(args.requests, 0)
        timings = side_by_side({"serving_loop.serve": serving_loop.serve, "impl.serve": impl.serve},
                               (requests, CONFIG), args.runs)
        result = timings["impl.serve"][2]
        services = sum(len(entry["scheduled"]) for entry in result["trace"])
        work = (f"{len(requests)} requests, config {CONFIG}: {services} services, {len(result['trace'])} ticks, "
                f"{result['preemptions']} preemptions")
        ok &= report("serving model", timings, "serving_loop.serve", "impl.serve", work)
    if not ok:
        print("MISMATCH: a baseline and impl disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
