"""Time impl.serve on 10^5 requests against a straightforward per-tick loop written here from the contract.

The baseline follows issue 10's "The contract, exactly" literally with plain lists:
each tick it rescans the arrived waiting queue and the running list for aborts,
inserts and pops at the front of a Python list, sorts the free block list before
taking blocks and removes finished requests with list.remove.  It is also an
independent second implementation: the script checks that both results are equal.

    python benchmarks/bench_serve.py [--requests 100000] [--runs 3] [--baseline-runs 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time


def baseline_serve(requests, config):
    """Run the serving model tick by tick with plain lists and rescans, as the contract reads."""
    max_seqs, budget_cap = config["max_seqs"], config["token_budget"]
    block_size, chunked = config["block_size"], config["chunked_prefill"]
    state = {}
    for request in requests:
        state[request["id"]] = {
            "req": dict(request), "generated": 0, "computed": 0, "total": 0, "blocks": [],
            "start": None, "first_token": None, "finish": None, "aborted": None, "preemptions": 0,
        }
    future = sorted(state.values(), key=lambda s: (s["req"]["arrival"], s["req"]["id"]))
    cursor = 0  # future[cursor:] have not arrived yet
    waiting, running = [], []  # waiting: arrived only; preempted ones inserted at the front
    free = list(range(config["num_blocks"]))
    trace = []
    totals = {"computed": 0, "useful": 0, "recomputed": 0, "aborted": 0, "preemptions": 0}
    last_work = -1
    t = 0

    def ceil(a, b):
        return -(-a // b)

    def known(s):
        return s["req"]["prompt"] + s["generated"]

    def give_back(s, freed):
        if s["blocks"]:
            freed.append([s["req"]["id"], s["blocks"]])
            free.extend(s["blocks"])
            s["blocks"] = []

    def take(count):
        free.sort()
        taken = free[:count]
        del free[:count]
        return taken

    while True:
        freed = []
        while True:
            while cursor < len(future) and future[cursor]["req"]["arrival"] <= t:
                arrived = future[cursor]
                cursor += 1
                # FIFO part: after the preempted ones, in (arrival, id) order; arrivals come in that order
                waiting.append(arrived)
            gone = [s for s in waiting + running if s["req"].get("abort") is not None and s["req"]["abort"] <= t]
            gone.sort(key=lambda s: (s["req"]["arrival"], s["req"]["id"]))
            for s in gone:
                s["aborted"] = t
                if s in running:
                    running.remove(s)
                    give_back(s, freed)
                    totals["aborted"] += s["computed"]
                    s["computed"] = 0
                else:
                    waiting.remove(s)
            aborted = [s["req"]["id"] for s in gone]
            if running or waiting:
                break
            if aborted:
                trace.append({"tick": t, "scheduled": [], "preempted": [], "aborted": aborted, "freed": freed, "allocated": [], "finished": []})
                t += 1
                freed, aborted = [], []
                continue
            if cursor == len(future):
                break
            t = future[cursor]["req"]["arrival"]
        if not running and not waiting:
            break
        budget = budget_cap
        scheduled, preempted, allocated = [], [], []
        i = 0
        while i < len(running):
            r = running[i]
            n = min(known(r) - r["computed"], budget)
            if n == 0:
                i += 1
                continue
            extra = ceil(r["computed"] + n, block_size) - len(r["blocks"])
            r_gone = False
            while len(free) < extra:
                victim = running.pop()
                give_back(victim, freed)
                totals["recomputed"] += victim["computed"]
                victim["computed"] = 0
                victim["preemptions"] += 1
                totals["preemptions"] += 1
                waiting.insert(0, victim)
                preempted.append(victim["req"]["id"])
                if victim is r:
                    r_gone = True
                    break
            if r_gone:
                break
            if extra > 0:
                taken = take(extra)
                r["blocks"] = r["blocks"] + taken
                allocated.append([r["req"]["id"], taken])
            scheduled.append((r, n))
            budget -= n
            i += 1
        if not preempted:
            while waiting and waiting[0]["req"]["arrival"] <= t and len(running) < max_seqs and budget > 0:
                h = waiting[0]
                n = known(h)
                if chunked:
                    n = min(n, budget)
                elif n > budget:
                    break
                if len(free) < ceil(n, block_size):
                    break
                waiting.pop(0)
                running.append(h)
                taken = take(ceil(n, block_size))
                h["blocks"] = list(taken)
                allocated.append([h["req"]["id"], taken])
                if h["start"] is None:
                    h["start"] = t
                scheduled.append((h, n))
                budget -= n
        finished = []
        for s, n in scheduled:
            s["computed"] += n
            s["total"] += n
            totals["computed"] += n
            if s["computed"] == known(s):
                s["generated"] += 1
                if s["first_token"] is None:
                    s["first_token"] = t + 1
                if s["generated"] == s["req"]["output"]:
                    s["finish"] = t + 1
                    totals["useful"] += s["req"]["prompt"] + s["req"]["output"] - 1
                    finished.append(s["req"]["id"])
        for s, _ in scheduled:
            if s["finish"] == t + 1:
                running.remove(s)
                give_back(s, freed)
        if scheduled:
            last_work = t
        trace.append({
            "tick": t, "scheduled": [[s["req"]["id"], n] for s, n in scheduled], "preempted": preempted,
            "aborted": aborted, "freed": freed, "allocated": allocated, "finished": finished,
        })
        t += 1
    makespan = last_work + 1
    records = []
    for request_id in sorted(state):
        s = state[request_id]
        row = {key: s["req"][key] for key in ("id", "arrival", "prompt", "output", "abort") if key in s["req"]}
        row.update(
            start=s["start"], first_token=s["first_token"], finish=s["finish"], aborted=s["aborted"],
            generated=s["generated"], preemptions=s["preemptions"], computed=s["total"],
        )
        records.append(row)
    return {
        "trace": trace, "requests": records, "makespan_ticks": makespan,
        "computed_tokens": totals["computed"], "useful_tokens": totals["useful"],
        "recomputed_tokens": totals["recomputed"], "aborted_tokens": totals["aborted"],
        "token_utilization": totals["computed"] / (budget_cap * makespan) if makespan else 0.0,
        "preemptions": totals["preemptions"],
    }


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
