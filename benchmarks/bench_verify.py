"""Time to first counterexample of `schedcheck verify` on the buggy corpus, and its size.

Each run is a whole process, start to exit, minimisation included, with a fresh
example database and no saved counterexamples, so it measures a first find.  Runs
use different seeds.  The baseline is `schedcheck --help` in the same session (the
cost of starting Python and importing the harness), so ratios survive a slower box.

    python benchmarks/bench_verify.py [--runs 3] [--write docs/verify.md]
    python benchmarks/bench_verify.py --model serving [--runs 3] [--write docs/serving.md]
    python benchmarks/bench_verify.py --baseline 70a90c8 [--runs 3] [--write docs/verify.md]

With ``--baseline COMMIT`` every run is made twice, side by side: on COMMIT's tree
(``git archive``, code first on PYTHONPATH) and then on this tree, so the table has
both medians and their ratio, measured under the same load.  It also gives the CPU
time of each run (the verify process and its children: user + system), which a loaded
machine inflates far less than wall time, and sums over the schedulers both trees have
apart from those only this tree has (a scheduler added since COMMIT, which COMMIT's
search may never catch: its runs end at the budget).  ``--only NAME ...`` measures only
those schedulers (file stems).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = {"chapter": ROOT / "tests" / "corpus" / "buggy", "serving": ROOT / "tests" / "corpus" / "serving" / "buggy"}
FUNCTION = {"chapter": "schedule", "serving": "serve"}
FIRST_ARGUMENT = {"chapter": "jobs", "serving": "requests"}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], tree: str | None = None, cpu: list | None = None) -> float:
    """The wall seconds of ``command``; its CPU seconds (with its children's) appended to ``cpu``, if given."""
    env = dict(os.environ, PYTHONPATH=tree or str(ROOT))
    before = _children_cpu()
    started = time.perf_counter()
    subprocess.run(command, capture_output=True, cwd=ROOT, check=False, env=env)
    wall = time.perf_counter() - started
    if cpu is not None:
        cpu.append(_children_cpu() - before)
    return wall


def old_tree(commit: str, scratch: str) -> str:
    """The tree of ``commit`` unpacked under ``scratch`` (git archive: no worktree, no checkout)."""
    path = pathlib.Path(scratch) / commit
    path.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)
    return str(path)


def verify_once(path: pathlib.Path, seed: int, model: str, tree: str | None = None) -> tuple[float, str, int, float]:
    with tempfile.TemporaryDirectory() as scratch:
        report = pathlib.Path(scratch) / "report.json"
        command = [
            sys.executable, "-m", "proofs.cli.main", "verify", f"{path}:{FUNCTION[model]}", "--model", model,
            "--seed", str(seed), "--db", "none", "--save-dir", scratch, "--json", str(report), "--budget", "60",
        ]
        cpu: list = []
        seconds = timed(command, tree, cpu)
        try:
            data = json.loads(report.read_text())
        except (OSError, ValueError):
            data = {"counterexamples": []}  # the run died or was refused (an older tree may not know a flag)
    first = data["counterexamples"][0] if data["counterexamples"] else None
    size = len(first["input"][FIRST_ARGUMENT[model]]) if first and first.get("input") else -1
    return seconds, first["property"] if first else "-", size, cpu[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", metavar="PATH")
    parser.add_argument("--model", choices=tuple(CORPUS), default="chapter")
    parser.add_argument("--baseline", metavar="COMMIT", help="also time every run on COMMIT's tree, side by side")
    parser.add_argument("--only", nargs="*", metavar="NAME", help="only these buggy schedulers (file stems)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tree = old_tree(args.baseline, scratch) if args.baseline else None
        return measure(args, tree)


def measure(args, tree: str | None) -> int:
    buggy = sorted(p for p in CORPUS[args.model].glob("*.py") if p.name != "__init__.py"
                   and (not args.only or p.stem in args.only))
    noun = "jobs" if args.model == "chapter" else "requests"
    folder = CORPUS[args.model].relative_to(ROOT)
    existed = {p.stem for p in (pathlib.Path(tree) / folder).glob("*.py")} if tree else set()
    cpus, old_cpus = {}, {}

    baseline = statistics.median(timed([sys.executable, "-m", "proofs.cli.main", "--help"]) for _ in range(5))
    rows = []
    for path in buggy:
        runs, old = [], []
        for seed in range(args.runs):
            if tree:
                old.append(verify_once(path, seed, args.model, tree))
            runs.append(verify_once(path, seed, args.model))
        seconds = statistics.median(r[0] for r in runs)
        before = statistics.median(r[0] for r in old) if old else None
        cpus[path.stem] = statistics.median(r[3] for r in runs)
        if old:
            old_cpus[path.stem] = statistics.median(r[3] for r in old)
        rows.append((path.stem, seconds, max(r[0] for r in runs), runs[0][1], max(r[2] for r in runs), before,
                     max(r[2] for r in old) if old else None))
        then = (f"  at {args.baseline}: median {before:6.2f} s  CPU {old_cpus[path.stem]:6.2f} s  {old[0][1]}  "
                f"size {rows[-1][6]}" if old else "")
        print(f"{path.stem:40} median {seconds:6.2f} s  CPU {cpus[path.stem]:6.2f} s  worst {rows[-1][2]:6.2f} s  "
              f"{runs[0][1]}  size {rows[-1][4]}{then}", flush=True)

    medians = [row[1] for row in rows]
    if tree:
        lines = [
            f"| buggy scheduler | invariant | median s | median CPU s | worst s | x baseline | {noun} in counterexample "
            f"| median s at {args.baseline} | median CPU s at {args.baseline} | {noun} at {args.baseline} |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {name} | {prop} | {med:.2f} | {cpus[name]:.2f} | {worst:.2f} | {med / baseline:.1f} | {size} | "
            f"{before:.2f} | {old_cpus[name]:.2f} | {old_size if name in existed else f'{old_size} (new)'} |"
            for name, med, worst, prop, size, before, old_size in rows
        ]
    else:
        lines = [
            f"| buggy scheduler | invariant | median s | worst s | x baseline | {noun} in counterexample |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {name} | {prop} | {med:.2f} | {worst:.2f} | {med / baseline:.1f} | {size} |"
            for name, med, worst, prop, size, _, _ in rows
        ]
    summary = (
        f"{len(rows)} buggy schedulers, {args.runs} runs each (seeds 0..{args.runs - 1}). "
        f"Baseline (`schedcheck --help`, start-up and imports): {baseline:.2f} s. "
        f"Median of the per-scheduler medians: {statistics.median(medians):.2f} s; "
        f"worst single run: {max(row[2] for row in rows):.2f} s; "
        f"largest counterexample: {max(row[4] for row in rows)} {noun}."
    )
    if tree:
        olds = [row[5] for row in rows]
        summary += (f" The same runs at {args.baseline}, side by side: median of the medians {statistics.median(olds):.2f} s, "
                    f"sum of the medians {sum(olds):.1f} s against {sum(medians):.1f} s now; counterexample sizes "
                    f"{'identical' if all(row[4] == row[6] for row in rows) else 'differ: see the table'}.")
        for label, names in (("the schedulers both trees have", [r[0] for r in rows if r[0] in existed]),
                             ("those added since", [r[0] for r in rows if r[0] not in existed])):
            if not names:
                continue
            wall = {r[0]: (r[1], r[5]) for r in rows}
            summary += (f" On {label} ({len(names)}): median of the medians {statistics.median(wall[n][0] for n in names):.2f} s "
                        f"against {statistics.median(wall[n][1] for n in names):.2f} s, sum {sum(wall[n][0] for n in names):.1f} s "
                        f"against {sum(wall[n][1] for n in names):.1f} s; CPU: median {statistics.median(cpus[n] for n in names):.2f} s "
                        f"against {statistics.median(old_cpus[n] for n in names):.2f} s, sum {sum(cpus[n] for n in names):.1f} s "
                        f"against {sum(old_cpus[n] for n in names):.1f} s.")
    print(summary)
    if args.write:
        text = pathlib.Path(args.write).read_text() if pathlib.Path(args.write).exists() else ""
        marker = "<!-- bench_verify -->" if args.model == "chapter" else f"<!-- bench_verify {args.model} -->"
        table = f"{marker}\n{summary}\n\n" + "\n".join(lines) + f"\n{marker}"
        if marker in text:
            head, _, rest = text.partition(marker)
            _, _, tail = rest.partition(marker)
            text = head + table + tail
        else:
            text += "\n" + table + "\n"
        pathlib.Path(args.write).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
