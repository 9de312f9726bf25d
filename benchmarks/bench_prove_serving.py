"""How the serving model's Z3 ledger grows with the bound: CPU per row, summed, for every n <= N.

Runs each row of ``proofs.smt.serving_claims.claims(N)`` in this process, one after
the other, and prints a Markdown table (CPU seconds, ``time.process_time``: on a
shared machine the wall clock measures the other jobs too).  Each N is run
``--runs`` times and the median is printed.

    python benchmarks/bench_prove_serving.py --sizes 2 3 4 5 --runs 1

With ``--rows SUBSTRING`` (repeatable) only the rows whose name contains one of them
are run, and the table is per row (median, min and max CPU over the runs):

    python benchmarks/bench_prove_serving.py --sizes 5 --runs 3 --rows "(ids)" --rows kv_exclusive --rows block
"""

from __future__ import annotations

import argparse
import statistics
import time


def measure(n: int, only=None) -> dict:
    from proofs.smt import serving_claims as C
    from proofs.smt import serving_model as M

    per_row = {}
    statuses = set()
    for claim in C.claims(n):
        if claim.claim in M.NOT_ENCODED:
            continue
        if only and not any(part in claim.claim for part in only):
            continue
        start = time.process_time()
        result = claim.run()
        per_row[claim.claim] = time.process_time() - start
        statuses.add(result["status"])
    return {"rows": per_row, "all_proved": statuses == {"proved"}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 3, 4, 5])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--rows", action="append", metavar="SUBSTRING",
                        help="only the rows whose name contains SUBSTRING (repeatable); prints a per-row table")
    args = parser.parse_args(argv)
    if args.rows:
        return per_row_table(args)
    print("| N (every n <= N) | CPU, all rows (s) | slowest row (s) | work_conservation (s) | termination_ranking (s) "
          "| running_first + work_conserving (s) | all proved |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        runs = [measure(n) for _ in range(args.runs)]
        med = lambda f: statistics.median(f(r) for r in runs)  # noqa: E731
        total = med(lambda r: sum(r["rows"].values()))
        slowest_name = max(runs[0]["rows"], key=runs[0]["rows"].get)
        print(f"| {n} | {total:.1f} | {med(lambda r: max(r['rows'].values())):.1f} ({slowest_name}) | "
              f"{med(lambda r: r['rows']['work_conservation']):.1f} | {med(lambda r: r['rows']['termination_ranking']):.1f} | "
              f"{med(lambda r: r['rows']['running_first'] + r['rows']['work_conserving']):.1f} | "
              f"{'yes' if all(r['all_proved'] for r in runs) else 'no'} |", flush=True)
    return 0


def per_row_table(args) -> int:
    print("| N (every n <= N) | row | CPU median (s) | min (s) | max (s) | all proved |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        runs = [measure(n, args.rows) for _ in range(args.runs)]
        proved = "yes" if all(r["all_proved"] for r in runs) else "no"
        for name in runs[0]["rows"]:
            times = [r["rows"][name] for r in runs]
            print(f"| {n} | `{name}` | {statistics.median(times):.2f} | {min(times):.2f} | {max(times):.2f} | {proved} |")
        totals = [sum(r["rows"].values()) for r in runs]
        print(f"| {n} | all selected | {statistics.median(totals):.2f} | {min(totals):.2f} | {max(totals):.2f} | {proved} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
