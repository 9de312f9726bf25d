"""How the Z3 proof time grows with n: median wall seconds of several runs, as a Markdown table.

    /tmp/z3venv/bin/python benchmarks/bench_prove.py --sizes 4 8 12 16 20 --runs 3

Columns: the per-job inductive rows (every registry invariant, the lemmas and the
counting identities) summed and their slowest row; termination_ranking;
abstraction_refinement; the policy theorem (product induction).  Each claim runs
in its own child process under the budget (``proofs.smt.run``), one at a time so
that the figures do not depend on the other worker.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from proofs.smt import claims as z3_claims
from proofs.smt import run as z3_run


def measure(n: int, budget: float, policy_max: int) -> dict:
    claims = [c for c in z3_claims.claims(n, policy_jobs=n) if c.method != "bounded"]
    if n > policy_max:
        claims = [c for c in claims if c.method != "product induction"]
    rows = {r["claim"]: r for r in z3_run.run_claims(claims, budget, workers=1)}
    per_job = [r for r in rows.values() if r["method"] == "inductive" and r["claim"] not in (
        "termination_ranking", "jump_is_idle_ticks")]
    policy = rows.get("policy_continuous_starts_no_later")
    return {
        "per_job_sum": sum(r["seconds"] for r in per_job),
        "per_job_max": max(r["seconds"] for r in per_job),
        "termination": rows["termination_ranking"]["seconds"],
        "refinement": rows["abstraction_refinement"]["seconds"],
        "policy": None if policy is None else policy["seconds"],
        "all_proved": all(r["status"] == "proved" for r in rows.values()),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 12, 16, 20])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--policy-max", type=int, default=16, help="skip the policy theorem above this n")
    args = parser.parse_args(argv)
    print("| n | per-job inductive rows, sum (s) | slowest row (s) | termination (s) | refinement (s) | policy theorem (s) | all proved |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        runs = [measure(n, args.budget, args.policy_max) for _ in range(args.runs)]

        def med(key):
            values = [r[key] for r in runs if r[key] is not None]
            return f"{statistics.median(values):.2f}" if values else "-"

        proved = all(r["all_proved"] for r in runs)
        print(f"| {n} | {med('per_job_sum')} | {med('per_job_max')} | {med('termination')} | {med('refinement')} "
              f"| {med('policy')} | {'yes' if proved else 'NO'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
