"""How long the serving oracle takes to judge a result, against our own simulation of the same input.

    PYTHONPATH=. python benchmarks/bench_oracle_serving.py --requests 1000 10000 100000 --runs 3 [--baseline COMMIT]

For each size, the same request stream as ``benchmarks/bench_trace.py`` (max_seqs 16,
token_budget 96, block_size 16, num_blocks 200, chunked prefill; prompts 24-40,
outputs 150-250, one arrival every 8-16 ticks, 5% aborted; about 16 requests scheduled
per tick), cut to the first ``n`` requests.  Each round, interleaved, times
``impl.serve(requests, config)`` (the simulation), ``spec.serving.run`` (the reference
alone) and ``spec.serving.check(requests, config, result)`` (the whole oracle: the
well-typed check, the replay of every invariant and the reference run and comparison),
all in this process; it prints the medians, the ratio check / serve and the time per
service (a request scheduled in a tick), which is flat when the oracle is linear; wall and
CPU time (the machine is shared: CPU time is the steadier).  ``--baseline COMMIT`` also
times that commit's ``spec.serving.check`` (benchmarks/baselines/spec_at.py, in this
process, interleaved) and prints the ratio old check / this check (CPU).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_trace import CONFIG, requests_for  # noqa: E402  (the same workload as the trace benchmark)


def workload(n: int) -> list:
    """The first ``n`` requests of the trace benchmark's stream."""
    requests = requests_for(n * 13 + 400)[:n]
    assert len(requests) == n, f"the stream gave {len(requests)} requests, not {n}"
    return requests


def timed(function, *args):
    """(wall seconds, CPU seconds, value) of one call."""
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    value = function(*args)
    return time.perf_counter() - started, time.process_time() - cpu, value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", metavar="COMMIT", help="also time COMMIT's spec.serving.check, side by side")
    args = parser.parse_args(argv)
    import impl
    import spec.serving as serving

    old_check = None
    if args.baseline:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from benchmarks.baselines.spec_at import spec_at

        old_check = spec_at(args.baseline, tempfile.mkdtemp())["spec.serving"].check

    print("| requests | services | serve s (cpu) | run s (cpu) | check s (cpu) | check / serve wall (cpu) "
          "| serve us/service (cpu) | check us/service (cpu) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in args.requests:
        requests, config = workload(n), dict(CONFIG)
        times: dict = {"serve": [], "run": [], "check": []}
        cpus: dict = {"serve": [], "run": [], "check": []}
        if old_check:
            times["old check"], cpus["old check"] = [], []
        services = None
        for _ in range(args.runs):
            seconds, cpu, result = timed(impl.serve, requests, config)
            times["serve"].append(seconds)
            cpus["serve"].append(cpu)
            services = sum(len(entry["scheduled"]) for entry in result["trace"])
            seconds, cpu, reference = timed(serving.run, requests, config)
            times["run"].append(seconds)
            cpus["run"].append(cpu)
            del reference
            seconds, cpu, violations = timed(serving.check, requests, config, result)
            times["check"].append(seconds)
            cpus["check"].append(cpu)
            if violations:
                raise SystemExit(f"the oracle rejects impl.serve at n={n}: {violations[0]}")
            if old_check:
                seconds, cpu, violations = timed(old_check, requests, config, result)
                times["old check"].append(seconds)
                cpus["old check"].append(cpu)
                assert not violations, violations[0]
            del result
        wall = {key: statistics.median(value) for key, value in times.items()}
        cpu = {key: statistics.median(value) for key, value in cpus.items()}
        print(
            f"| {n:,} | {services:,} | {wall['serve']:.2f} ({cpu['serve']:.2f}) | {wall['run']:.2f} ({cpu['run']:.2f}) "
            f"| {wall['check']:.2f} ({cpu['check']:.2f}) | {wall['check'] / wall['serve']:.2f}x "
            f"({cpu['check'] / cpu['serve']:.2f}x) | {1e6 * wall['serve'] / services:.2f} ({1e6 * cpu['serve'] / services:.2f}) "
            f"| {1e6 * wall['check'] / services:.2f} ({1e6 * cpu['check'] / services:.2f}) |",
            flush=True,
        )
        if old_check:
            print(f"check at {args.baseline}: {wall['old check']:.2f} ({cpu['old check']:.2f}) s; "
                  f"old / this check: {wall['old check'] / wall['check']:.2f}x ({cpu['old check'] / cpu['check']:.2f}x)")
        print(f"<!-- n={n} runs, wall s: " + "; ".join(f"{k} {[round(x, 2) for x in v]}" for k, v in times.items())
              + "; cpu s: " + "; ".join(f"{k} {[round(x, 2) for x in v]}" for k, v in cpus.items()) + " -->", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
