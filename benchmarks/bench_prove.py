"""How the Z3 proof time grows with the bound N: median wall and CPU seconds of several runs, as a Markdown table.

    python benchmarks/bench_prove.py --sizes 4 8 12 16 --runs 3
    python benchmarks/bench_prove.py --sizes 20 24 28 32 --runs 1 --budget 1200

Every per-job row proves its claim for every n from 1 to N, so a row at bound N
costs the sum of the single-n checks.  Two groups of rows, each timed on its own:
the per-job rows (``step_total``, the counting identities, every registry
invariant and lemma, ``termination_ranking``, ``abstraction_refinement``) and the
policy theorem (``jump_is_idle_ticks`` and the product induction, n = 1..N; left
out above --policy-max).  Per group: wall seconds, CPU seconds of the children
(``RUSAGE_CHILDREN``: less sensitive than wall seconds to other work on the
machine), the slowest row, and whether every row passed; a group with a row
killed at its wall-clock net says so (``killed``) instead of a figure.  A third
group: the validation rows (the encoding against the spec that runs).  Each claim runs
in its own child process under the budget (``proofs.smt.run``), one at a time so
that the figures do not depend on the other worker.  ``--default`` also times the
default ``schedcheck prove`` (two workers) end to end, wall and CPU.
"""

from __future__ import annotations

import argparse
import resource
from dataclasses import replace
import statistics
import subprocess
import sys
import time

from proofs.smt import claims as z3_claims
from proofs.smt import run as z3_run

POLICY = ("jump_is_idle_ticks", "policy_continuous_starts_no_later")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _assumes_only(row: dict, proved: set) -> bool:
    """The row was downgraded only for assuming rows that were not run with it but are in ``proved``."""
    detail = str(row["detail"])
    if row["status"] != "unknown" or not detail.startswith("assumes ") or not detail.endswith(": not passed"):
        return False
    return set(detail[len("assumes "):-len(": not passed")].split(", ")) <= proved


def _timed(claims: list, budget: float, only: str | None, proved: set = frozenset()) -> dict | None:
    """Wall and CPU seconds of running ``claims`` one at a time, the slowest row, and how they came out.

    A row downgraded for assuming a row of ``proved`` (proved in the other group's run) counts by its own proof."""
    if not claims:
        return None
    cpu, started = _children_cpu(), time.monotonic()
    rows = z3_run.run_claims(claims, budget, workers=1)
    wall, cpu = time.monotonic() - started, _children_cpu() - cpu
    killed = [r["claim"] for r in rows if r["status"] == "unknown"
              and ("killed at" in str(r["detail"]) or "CPU budget" in str(r["detail"]))]
    slowest = max(rows, key=lambda r: r["seconds"])
    return {
        "wall": wall,
        "cpu": cpu,
        "slowest": (slowest["claim"], slowest["seconds"]),
        "killed": killed,
        # with --claims, a row's dependencies are not run, so "proved, but assumes an unrun row" counts as its own proof
        "all_proved": all(z3_run.passes(r) or _assumes_only(r, proved)
                          or (only is not None and str(r["detail"]).startswith("assumes ")) for r in rows),
        "proved": {r["claim"] for r in rows if z3_run.passes(r)},
    }


def measure(n: int, budget: float, policy_max: int, only: str | None = None) -> dict:
    """One run of the rows at bound ``n`` (every row, or those whose name contains ``only``), one at a time."""
    claims = [c for c in z3_claims.claims(n, policy_jobs=n) if c.method not in ("bounded",)
              and not c.claim.endswith("(abstraction)") and (only is None or only in c.claim)]
    validation = [c for c in claims if c.kind == "validation"]
    checked = _timed(validation, budget, only)
    done = checked["proved"] if checked else frozenset()
    if checked and checked["all_proved"]:  # the groups are timed apart: the others need not wait for the validation
        names = {c.claim for c in validation}
        claims = [replace(c, depends=tuple(d for d in c.depends if d not in names)) for c in claims]
    per_job = [c for c in claims if c.claim not in POLICY and c.kind != "validation"]
    policy = [c for c in claims if c.claim in POLICY] if n <= policy_max else []
    first = _timed(per_job, budget, only, done)
    return {"validation": checked, "per_job": first,
            "policy": _timed(policy, budget, only, (first["proved"] if first else frozenset()) | done)}


def _cells(runs: list, budget: float) -> list[str]:
    """Wall, CPU, slowest row and proved for one group over several runs (medians)."""
    runs = [r for r in runs if r is not None]
    if not runs:
        return ["-", "-", "-", "not run"]
    killed = sorted({name for r in runs for name in r["killed"]})
    if killed:
        return [f"killed at {budget:g} s ({', '.join(killed)})", "-", "-", "NO"]
    wall = statistics.median(r["wall"] for r in runs)
    cpu = statistics.median(r["cpu"] for r in runs)
    name, seconds = max((r["slowest"] for r in runs), key=lambda x: x[1])
    proved = "yes" if all(r["all_proved"] for r in runs) else "NO"
    return [f"{wall:.2f}", f"{cpu:.2f}", f"{name} {seconds:.2f}", proved]


def default_wall() -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (with its children) and exit code of the default ``schedcheck prove``."""
    cpu, started = _children_cpu(), time.monotonic()
    code = subprocess.run([sys.executable, "-m", "proofs.cli", "prove", "--no-seconds"], capture_output=True).returncode
    return time.monotonic() - started, _children_cpu() - cpu, code


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 12, 16])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=300.0, help="CPU seconds per row (the ledger's --budget)")
    parser.add_argument("--policy-max", type=int, default=10**6, help="leave the policy theorem out above this N")
    parser.add_argument("--default", action="store_true", help="also time the default `schedcheck prove`")
    parser.add_argument("--claims", metavar="SUBSTRING", help="time only the rows whose name contains this")
    parser.add_argument("--compare-arith", action="store_true",
                        help="each size twice in turn: with Z3's default arithmetic solver, then with ARITH_SOLVER")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.sizes) or args.runs < 1 or args.budget <= 0:
        parser.error(f"--sizes={args.sizes!r} --runs={args.runs!r} --budget={args.budget!r}: expected sizes >= 1, "
                     "runs >= 1, budget > 0")
    print(f"runs per size: {args.runs} (median); budget {args.budget:g} s per row")
    print("| N (every n <= N) | per-job rows: wall (s) | per-job rows: CPU (s) | slowest per-job row (s) "
          "| per-job all proved | policy theorem: wall (s) | policy theorem: CPU (s) | slowest policy row (s) "
          "| policy all proved | validation: wall (s) | validation: CPU (s) | slowest validation row (s) | checked |")
    print("|---|---:|---:|---|---|---:|---:|---|---|---:|---:|---|---|")
    settings = [None, z3_claims.ARITH_SOLVER] if args.compare_arith else [z3_claims.ARITH_SOLVER]
    for n in args.sizes:
        runs: dict = {setting: [] for setting in settings}
        for _ in range(args.runs):
            for setting in settings:  # in turn, so that both see the same load
                z3_claims.ARITH_SOLVER = setting  # read by the forked children
                runs[setting].append(measure(n, args.budget, args.policy_max, args.claims))
        for setting in settings:
            cells = (_cells([r["per_job"] for r in runs[setting]], args.budget)
                     + _cells([r["policy"] for r in runs[setting]], args.budget)
                     + _cells([r["validation"] for r in runs[setting]], args.budget))
            label = f" (arith.solver {'default' if setting is None else setting})" if args.compare_arith else ""
            print(f"| {n}{label} | " + " | ".join(cells) + " |", flush=True)
    if args.default:
        results = [default_wall() for _ in range(args.runs)]
        print(f"\ndefault `schedcheck prove`: median {statistics.median(w for w, _, _ in results):.1f} s wall, "
              f"{statistics.median(c for _, c, _ in results):.1f} s CPU over {args.runs} runs, "
              f"exit codes {[code for _, _, code in results]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
