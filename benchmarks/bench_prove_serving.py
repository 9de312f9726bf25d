"""How the serving model's Z3 ledger grows with the bound: CPU per row, summed, for every n <= N (or at one n).

Runs each row of ``proofs.smt.serving_claims.claims(N)`` on its own in a sandbox
child (``proofs.smt.run.run_claims``, one worker, so one child at a time) with the
ledger's CPU budget (``--budget`` CPU seconds, the wall-clock net 4x that plus 30 s),
and reads the child's own CPU seconds (the row's ``cpu_seconds``: on a shared machine
the wall clock measures the other jobs too).  A row stopped at its budget is written
as such, and the N's total is then a lower bound.  Each N is run ``--runs`` times and
the median is printed; the estimate column is the wall time of the default ledger
on 2 quiet cores: max(CPU / 2, the slowest row's CPU) + the measured per-child
overhead times the rows per worker.

    python benchmarks/bench_prove_serving.py --sizes 5 6 7 8 --runs 1

With ``--rows SUBSTRING`` (repeatable) only the rows whose name contains one of them
are run, and the table is per row (median, min and max CPU over the runs):

    python benchmarks/bench_prove_serving.py --sizes 5 --runs 3 --rows "(ids)" --rows kv_exclusive --rows block

With ``--at`` each size is one n, not every n <= it: each per-request row's proof at
exactly that n (how a row grows with n; the ledger at N pays the sum over n <= N):

    python benchmarks/bench_prove_serving.py --at --sizes 6 7 8 9 10 --budget 600
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from functools import partial


def run_row(claim, budget: float) -> dict:
    """One row in a sandbox child: its status, CPU seconds and wall seconds."""
    from proofs.smt import run as R

    wall = time.perf_counter()
    row = R.run_claims([dataclasses.replace(claim, depends=())], budget, workers=1)[0]  # its own proof, alone
    detail = row.get("detail") or ""
    return {"status": row["status"], "cpu": row.get("cpu_seconds") or 0.0, "wall": time.perf_counter() - wall,
            "killed": "killed at" in detail or "CPU budget" in detail}


def overhead(runs: int = 3) -> float:
    """The wall seconds a child costs beyond its CPU (fork, collection), median over a trivial row."""
    from proofs.smt import serving_claims as C

    trivial = next(c for c in C.claims(1) if c.claim == C.BLOCKS)
    return statistics.median(max(0.0, r["wall"] - r["cpu"]) for r in (run_row(trivial, 60) for _ in range(runs)))


def measure(n: int, budget: float, only=None, at: bool = False) -> dict:
    from proofs.smt import serving_claims as C
    from proofs.smt import serving_model as M

    rows = {}
    claims = exactly(n) if at else C.claims(n)
    for claim in claims:
        if claim.claim in M.NOT_ENCODED or (only and not any(part in claim.claim for part in only)):
            continue
        rows[claim.claim] = run_row(claim, budget)
    return rows


def exactly(n: int) -> list:
    """The per-request rows with each proof at exactly n (``serving_claims.prove_inductive(name, n)`` and the like)."""
    from proofs.smt import serving_blocks as B
    from proofs.smt import serving_claims as C
    from proofs.smt.run import Claim

    out = [Claim(C.TOTAL, "x", f"n = {n}", partial(C.prove_total, n))]
    for name in C.invariant_names():
        if name not in C.BY_CONSTRUCTION:
            out.append(Claim(C.row_name(name), "x", f"n = {n}", partial(C.prove_inductive, name, n)))
    out.append(Claim("termination_ranking", "x", f"n = {n}", partial(C.prove_termination, n)))
    out += [Claim(name, "x", f"n = {n}", partial(B.prove_row, name, n)) for name in B.ROWS]
    return out


def per_row_table(args) -> int:
    """The selected rows at each N, one line each: median, min and max CPU over the runs."""
    from proofs.smt.run import PASSING

    print(f"| {'n' if args.at else 'N (every n <= N)'} | row | CPU median (s) | min (s) | max (s) | all proved |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        runs = [measure(n, args.budget, args.rows, args.at) for _ in range(args.runs)]
        proved = "yes" if all(x["status"] in PASSING or x["status"] == "refuted" and name.startswith("finding:")
                              for r in runs for name, x in r.items()) else "no"
        for name in runs[0]:
            times = [r[name]["cpu"] for r in runs]
            stopped = ">= " if any(r[name]["killed"] for r in runs) else ""
            print(f"| {n} | `{name}` | {stopped}{statistics.median(times):.2f} | {min(times):.2f} | {max(times):.2f} "
                  f"| {proved if not stopped else 'no: stopped at the budget'} |", flush=True)
        totals = [sum(x["cpu"] for x in r.values()) for r in runs]
        print(f"| {n} | all selected | {statistics.median(totals):.2f} | {min(totals):.2f} | {max(totals):.2f} | {proved} |",
              flush=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 6, 7, 8])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--budget", type=float, default=120.0, help="CPU seconds per row, as the ledger's default")
    parser.add_argument("--at", action="store_true", help="each size is one n (each row's proof at exactly n)")
    parser.add_argument("--json", metavar="PATH", help="also write every run's per-row CPU, wall and status to PATH")
    parser.add_argument("--rows", action="append", metavar="SUBSTRING",
                        help="only the rows whose name contains SUBSTRING (repeatable); prints a per-row table")
    args = parser.parse_args(argv)
    if args.rows or args.at:
        return per_row_table(args)
    from proofs.smt.run import PASSING

    every = {}
    per_child = overhead()
    print(f"per-child overhead (wall - CPU of a trivial row, median of 3): {per_child:.2f} s")
    print("| N (every n <= N) | CPU, all rows (s) | est. wall, 2 quiet cores (s) | slowest row, CPU (s) "
          "| work_conservation (s) | termination_ranking (s) | running_first + work_conserving (s) | all proved |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        runs = [measure(n, args.budget, None, False) for _ in range(args.runs)]
        every[n] = runs
        if args.json:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump(every, handle, indent=1, sort_keys=True)
        med = lambda f: statistics.median(f(r) for r in runs)  # noqa: E731
        total = med(lambda r: sum(x["cpu"] for x in r.values()))
        slowest = med(lambda r: max(x["cpu"] for x in r.values()))
        slowest_name = max(runs[0], key=lambda k: runs[0][k]["cpu"])
        estimate = max(total / 2, slowest) + per_child * len(runs[0]) / 2
        killed = sorted({k for r in runs for k, x in r.items() if x["killed"]})
        others = sorted({k for r in runs for k, x in r.items() if x["status"] not in PASSING and not x["killed"]
                         and not (k.startswith("finding:") and x["status"] == "refuted")})
        verdict = "yes" if not killed and not others else "no: " + "; ".join(
            ([f"{', '.join(killed)} killed at {args.budget:g} s"] if killed else [])
            + ([f"{', '.join(others)} not proved"] if others else []))
        lower = ">= " if killed else ""

        def cell(name):
            return f"{lower if runs[0][name]['killed'] else ''}{med(lambda r: r[name]['cpu']):.1f}"

        pair = med(lambda r: r["running_first"]["cpu"] + r["work_conserving"]["cpu"])
        print(f"| {n} | {lower}{total:.1f} | {lower}{estimate:.0f} | {slowest:.1f} ({slowest_name}) | "
              f"{cell('work_conservation')} | {cell('termination_ranking')} | {pair:.1f} | {verdict} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
