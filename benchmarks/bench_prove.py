"""How the Z3 proof time grows with the bound N: median wall seconds of several runs, as a Markdown table.

    python benchmarks/bench_prove.py --sizes 4 8 12 16 --runs 3 --policy-max 12

Every per-job row proves its claim for every n from 1 to N, so a row at bound N
costs the sum of the single-n checks.  Columns: the per-job rows (every registry
invariant, the lemmas, the counting identities and step_total) summed and their
slowest row; termination_ranking; abstraction_refinement; the policy theorem
(product induction, n = 1..N; left out above --policy-max); the CPU seconds of
all these rows together (less sensitive than wall seconds to other work on the
machine); whether every row was proved.  Each claim runs in its own child process under the budget
(``proofs.smt.run``), one at a time so that the figures do not depend on the
other worker.  ``--default`` also times the default ``schedcheck prove`` (two
workers) end to end.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

from proofs.smt import claims as z3_claims
from proofs.smt import run as z3_run

SINGLE = ("termination_ranking", "abstraction_refinement", "jump_is_idle_ticks", "policy_continuous_starts_no_later")


def measure(n: int, budget: float, policy_max: int, only: str | None = None) -> dict:
    """One run of the rows at bound ``n`` (every row, or those whose name contains ``only``), one at a time."""
    claims = [c for c in z3_claims.claims(n, policy_jobs=n) if c.method not in ("bounded",)
              and not c.claim.endswith("(abstraction)") and (only is None or only in c.claim)]
    if n > policy_max:
        claims = [c for c in claims if c.method != "product induction"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    rows = {r["claim"]: r for r in z3_run.run_claims(claims, budget, workers=1)}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    per_job = [r for r in rows.values() if r["claim"] not in SINGLE]
    policy = rows.get("policy_continuous_starts_no_later")

    def seconds(name):
        return rows[name]["seconds"] if name in rows else None

    return {
        "per_job_sum": sum(r["seconds"] for r in per_job) if per_job else None,
        "per_job_max": max(r["seconds"] for r in per_job) if per_job else None,
        "termination": seconds("termination_ranking"),
        "refinement": seconds("abstraction_refinement"),
        "policy": None if policy is None else policy["seconds"],
        "cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        # with --claims, a row's dependencies are not run, so "proved, but assumes an unrun row" counts as its own proof
        "all_proved": all(r["status"] == "proved" or (only is not None and str(r["detail"]).startswith("assumes "))
                          for r in rows.values()),
    }


def default_wall() -> tuple[float, int]:
    """Seconds and exit code of the default ``schedcheck prove``."""
    started = time.monotonic()
    code = subprocess.run([sys.executable, "-m", "proofs.cli", "prove", "--no-seconds"], capture_output=True).returncode
    return time.monotonic() - started, code


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 12, 16])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=300.0)
    parser.add_argument("--policy-max", type=int, default=12, help="leave the policy theorem out above this N")
    parser.add_argument("--default", action="store_true", help="also time the default `schedcheck prove`")
    parser.add_argument("--claims", metavar="SUBSTRING", help="time only the rows whose name contains this")
    args = parser.parse_args(argv)
    print("| N (every n <= N) | per-job rows, sum (s) | slowest row (s) | termination (s) | refinement (s) "
          "| policy theorem (s) | CPU, all rows (s) | all proved |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        runs = [measure(n, args.budget, args.policy_max, args.claims) for _ in range(args.runs)]

        def med(key):
            values = [r[key] for r in runs if r[key] is not None]
            return f"{statistics.median(values):.2f}" if values else "-"

        proved = all(r["all_proved"] for r in runs)
        print(f"| {n} | {med('per_job_sum')} | {med('per_job_max')} | {med('termination')} | {med('refinement')} "
              f"| {med('policy')} | {med('cpu')} | {'yes' if proved else 'NO'} |", flush=True)
    if args.default:
        walls = [default_wall() for _ in range(args.runs)]
        print(f"\ndefault `schedcheck prove`: median {statistics.median(w for w, _ in walls):.1f} s wall over "
              f"{args.runs} runs, exit codes {[c for _, c in walls]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
