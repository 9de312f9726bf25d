"""Counterexample size against the brute-force minimum, on the serving buggy corpus (tests/corpus/serving/buggy).

    PYTHONPATH=. python benchmarks/bench_shrink.py [--names budget_overshoot_by_one_chunk,...] [--seconds 10]

For each buggy scheduler (default: a sample of fourteen whose bug shows on valid calls,
run in this process: none of them hangs or crashes):

- ``minimum``: the smallest failing call by brute force, in the minimiser's own order
  (``proofs.search.minimize_serving.size_key``: requests, then tokens, aborts, config,
  arrivals, ids), over 1 and 2 requests with prompt + output up to 5, arrivals 0..2,
  aborts at arrival..arrival+3, and every config with max_seqs 1..2, token_budget 1..4,
  block_size 1..2, num_blocks 1..4, both chunking modes (a bounded domain: a bug whose
  smallest input lies outside it has no minimum here): it enumerates the calls in increasing (requests, tokens, aborts) and keeps the
  least size_key of the first group that has a failing call;
- ``from inflated``: the minimiser (``minimize_valid_call``, ``--seconds`` of budget)
  started from that minimum made large (``inflations``: every number x3 + 2 with
  block_size 11 and token_budget 47, else prompts, budget and block size x11, else
  everything x16, the first that still fails), the kind of input a search hands it;
- ``verify``: the counterexample ``schedcheck verify --model serving BUG:serve --seed 0``
  saves (Hypothesis's shrinking, then the minimiser).

"Failing" is the minimiser's own test: the bug's expected invariant is among the
oracle's findings.  Each row prints the calls as (requests: [(arrival, prompt, output
[, abort])], config: max_seqs/token_budget/block_size/num_blocks/chunked) and whether
each result's size_key equals the minimum's.
"""

from __future__ import annotations

import argparse
import copy
import glob
import itertools
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUGGY = ROOT / "tests" / "corpus" / "serving" / "buggy"
SAMPLE = ("finish_leaks_last_block", "budget_overshoot_by_one_chunk", "speculative_double_schedule",
          "makespan_off_by_one", "first_prefill_not_chunked", "waiting_abort_ignored", "abort_leaks_blocks",
          "abort_applied_one_tick_late", "decode_charged_as_prefill", "first_token_on_partial_chunk",
          "finishes_one_token_early", "growth_block_not_removed_from_pool", "skips_head_that_does_not_fit",
          "preempts_oldest")
CONFIGS = [dict(max_seqs=m, token_budget=t, block_size=b, num_blocks=n, chunked_prefill=c)
           for m in range(1, 3) for t in range(1, 5) for b in range(1, 3) for n in range(1, 5) for c in (True, False)]


def expected_of(name: str) -> str:
    for line in (BUGGY / f"{name}.py").read_text().splitlines():
        if line.startswith("EXPECTED"):
            return line.split('"')[1]
    raise ValueError(f"{name}: no EXPECTED line")


def fails_for(serve, invariant: str):
    """The minimiser's test: ``invariant`` among the oracle's findings on the target's result."""
    import spec.serving as serving

    def fails(call) -> bool:
        requests, config = call
        try:
            result = serve(copy.deepcopy(requests), copy.deepcopy(config))
        except Exception:  # a valid call that raises: not this bug's finding
            return False
        reference = serving.run(requests, config)
        if result == reference:  # the reference run's own result breaks nothing: a quick pass
            return False
        return any(v.invariant == invariant for v in serving.check(requests, config, result, reference))

    return fails


def shapes(n: int, tokens: int, aborts: int):
    """Every list of ``n`` requests (ids 0..n-1 in FCFS order, the first arriving at 0) with prompt + output summing
    to ``tokens`` and exactly ``aborts`` of them with an abort tick."""
    for totals in itertools.product(range(2, tokens + 1), repeat=n):
        if sum(totals) != tokens:
            continue
        splits = [[(p, t - p) for p in range(1, t)] for t in totals]
        for parts in itertools.product(*splits):
            for arrivals in itertools.product(range(3), repeat=n):
                if arrivals[0] != 0 or list(arrivals) != sorted(arrivals):
                    continue
                for which in itertools.combinations(range(n), aborts):
                    for offsets in itertools.product(range(4), repeat=aborts):
                        requests = []
                        for i, ((p, o), a) in enumerate(zip(parts, arrivals)):
                            request = {"id": i, "arrival": a, "prompt": p, "output": o}
                            if i in which:
                                request["abort"] = a + offsets[which.index(i)]
                            requests.append(request)
                        yield requests


def brute_force_minimum(fails, max_requests: int = 2, max_tokens: int = 5):
    """The least failing call by size_key in the bounded domain above, or None."""
    import spec.serving as serving
    from proofs.search.minimize_serving import size_key

    for n in range(1, max_requests + 1):
        for tokens in range(2 * n, max_tokens + 1):
            for aborts in range(n + 1):
                found = [(requests, config) for requests in shapes(n, tokens, aborts) for config in CONFIGS
                         if serving.is_valid(requests, config) and fails((requests, config))]
                if found:
                    return min(found, key=size_key)
    return None


def inflations(call):
    """Large versions of ``call``, as a search may hand them to the minimiser, in the order tried (the first that still
    fails is used): every number x3 + 2 with block_size 11 and token_budget 47; prompts, the budget and the block size
    x11 (the same blocks and decode steps); everything x16 (``one_step_larger``)."""
    from proofs.search.minimize_serving import one_step_larger

    requests, config = call
    yield inflated(call)
    yield ([dict(r, arrival=r["arrival"] + 2, prompt=11 * r["prompt"], **({"abort": r["abort"] + 2} if "abort" in r else {}))
            for r in requests],
           dict(config, token_budget=11 * config["token_budget"], block_size=11 * config["block_size"]))
    yield one_step_larger(call)


def inflated(call):
    """The call made large, as a search may hand it to the minimiser: block_size 11, token_budget 47."""
    requests, config = call
    big = []
    for r in requests:
        grown = dict(r, arrival=3 * r["arrival"] + 2, prompt=3 * r["prompt"] + 2, output=3 * r["output"] + 2)
        if "abort" in r:
            grown["abort"] = grown["arrival"] + 3 * (r["abort"] - r["arrival"])
        big.append(grown)
    need = max(r["prompt"] + r["output"] - 1 for r in big)
    budget = max(47, need)
    config = dict(config, block_size=11, token_budget=budget, num_blocks=max(2 * config["num_blocks"], -(-need // 11)),
                  max_seqs=config["max_seqs"] + 2)
    return big, config


def shown(call) -> str:
    if call is None:
        return "-"
    requests, c = call
    rows = [(r["arrival"], r["prompt"], r["output"]) + ((r["abort"],) if "abort" in r else ()) for r in requests]
    return (f"{rows} {c['max_seqs']}/{c['token_budget']}/{c['block_size']}/{c['num_blocks']}/"
            f"{'c' if c['chunked_prefill'] else 'u'}")


def verify_counterexample(name: str):
    """The call ``schedcheck verify --model serving BUG:serve --seed 0`` saves and its invariant, or (None, None)."""
    with tempfile.TemporaryDirectory() as saved:
        subprocess.run([sys.executable, "-m", "proofs.cli", "verify", "--model", "serving", f"{BUGGY / name}.py:serve",
                        "--seed", "0", "--db", "none", "--save-dir", saved, "--budget", "60"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
        for path in sorted(glob.glob(os.path.join(saved, "*.json"))):
            with open(path) as handle:
                data = json.load(handle)
            call = data.get("input") or {}
            if "requests" in call and "config" in call:
                return (call["requests"], call["config"]), data.get("property")
    return None, None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", default=",".join(SAMPLE))
    parser.add_argument("--seconds", type=float, default=10.0, help="the minimiser's budget from the inflated call")
    parser.add_argument("--no-verify", action="store_true", help="leave the verify column out (it runs verify once per bug)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import spec.serving as serving
    from proofs.search.minimize_serving import minimize_valid_call, size_key
    from proofs.targets import load_callable, parse_target

    print("calls: [(arrival, prompt, output[, abort])] max_seqs/token_budget/block_size/num_blocks/chunked")
    same = {"inflated": 0, "verify": 0}
    compared = {"verify": 0}
    rows = 0
    for name in [n for n in args.names.split(",") if n]:
        invariant = expected_of(name)
        fails = fails_for(load_callable(parse_target(f"{BUGGY / name}.py:serve")), invariant)
        started = time.monotonic()
        minimum = brute_force_minimum(fails)
        brute = time.monotonic() - started
        if minimum is None:
            print(f"{name:38} {invariant:24} no failing call within the brute-force bounds")
            continue
        big = next((c for c in inflations(minimum) if serving.is_valid(*c) and fails(c)), None)
        if big is None:
            print(f"{name:38} {invariant:24} minimum {shown(minimum)}; no inflation of it fails")
            continue
        rows += 1
        small = minimize_valid_call(big, fails, serving.is_valid, seconds=args.seconds)
        found, found_invariant = (None, None) if args.no_verify else verify_counterexample(name)
        other = found is not None and found_invariant != invariant  # verify's first finding is another invariant
        same["inflated"] += size_key(small) == size_key(minimum)
        same["verify"] += found is not None and not other and size_key(found) == size_key(minimum)
        compared["verify"] += found is not None and not other
        mark = lambda call: "=" if call is not None and size_key(call) == size_key(minimum) else ">"  # noqa: E731
        print(f"{name} ({invariant}; brute force {brute:.0f} s)\n"
              f"    minimum        {shown(minimum)}\n"
              f"  {mark(small)} from inflated  {shown(small)}   (started at {shown(big)})\n"
              + ("" if args.no_verify else
                 f"  {'~' if other else mark(found)} verify         {shown(found)}"
                 + (f"   (its first finding is {found_invariant}, not {invariant})" if other else "") + "\n"),
              flush=True)
    print(f"at the minimum: from inflated {same['inflated']}/{rows}"
          + ("" if args.no_verify else f", verify {same['verify']}/{compared['verify']} (of the runs whose first "
                                       f"finding is the expected invariant)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
