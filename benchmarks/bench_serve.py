"""Time impl.serve on 10^5 requests against the per-tick serving loop of benchmarks/baselines/serving_loop.py.

The workload (CONFIG, workload) is the serving peak that bench_schedulers.py also
uses; the script checks that both results are equal.

    python benchmarks/bench_serve.py [--requests 100000] [--runs 3] [--baseline-runs 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time


CONFIG = {"max_seqs": 64, "token_budget": 512, "block_size": 16, "num_blocks": 320, "chunked_prefill": True}
RATE = 3.3  # arrivals per tick: about 50% above what the engine serves, so a queue builds up as at a peak


def workload(count: int, seed: int) -> list[dict]:
    """``count`` requests arriving faster than they are served, prompts of 1..256 and outputs of 1..32 tokens, 5% aborted."""
    rng = random.Random(seed)
    requests = []
    for request_id in range(count):
        arrival = int(request_id / RATE)
        request = {"id": request_id, "arrival": arrival, "prompt": rng.randint(1, 256), "output": rng.randint(1, 32)}
        if rng.random() < 0.05:
            request["abort"] = arrival + rng.randint(0, 2000)
        requests.append(request)
    return requests


def timed(function, requests, config, runs: int) -> tuple[float, dict]:
    seconds, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = function(requests, config)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), result


def main() -> int:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    import impl
    from benchmarks.baselines.serving_loop import serve as baseline_serve

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline-runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    requests = workload(args.requests, args.seed)
    ours, ours_result = timed(impl.serve, requests, CONFIG, args.runs)
    services = sum(len(entry["scheduled"]) for entry in ours_result["trace"])
    print(f"workload: {args.requests} requests, {len(ours_result['trace'])} ticks, {services} services, "
          f"{ours_result['preemptions']} preemptions, config {CONFIG}")
    print(f"impl.serve  median of {args.runs}: {ours:8.3f} s")
    base, base_result = timed(baseline_serve, requests, CONFIG, args.baseline_runs)
    print(f"baseline    median of {args.baseline_runs}: {base:8.3f} s")
    print(f"ratio baseline / impl: {base / ours:.1f}x")
    if base_result != ours_result:
        print("MISMATCH: impl.serve and the baseline disagree", file=sys.stderr)
        return 1
    print("results equal: yes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
