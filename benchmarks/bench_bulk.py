"""The bulk phase against the Hypothesis search, side by side: calls per CPU second, corners, time to a counterexample.

Throughput and coverage (``--model chapter|serving``): each mode judges our impl
(``impl:schedule`` / ``impl:serve``) in a fresh sandbox child, seed 0, and reports
the calls it judged per CPU second of this process (the harness: generation,
reference runs, judging, transport; the figure of issue 21's goal), the child's CPU
per call, the corner hits per harness CPU minute (a call reaching three corners is
three hits), how many corners of the model it reached, and the harness CPU seconds it
took until every corner it reached had been reached (the last first reach).  Modes:

- ``hypothesis``: the conformance search (Hypothesis draws, steers and shrinks; the
  full oracle judges every call), ``--hypothesis-calls`` examples;
- ``bulk <= 30``: the bulk phase on recipes of at most 30 jobs or requests (the goal's
  inputs), ``--calls`` calls;
- ``bulk``: the bulk phase with every recipe, large ones too (what ``verify`` runs).

Each mode runs ``--runs`` times, interleaved; medians.  Time to a counterexample
(``--cex``): for every one-bug scheduler of the corner corpus (files with a CORNER
line) of the model, the bulk phase alone and the conformance search alone, each from
a fresh process state, over the model verify takes for the file (prefix caching drawn
for a ``cache_`` file, whose DOMAIN supports it), until the first counterexample is
minimised and confirmed (harness CPU and wall seconds, seeds 0..runs-1, medians; "-"
when none was found within ``--calls`` bulk calls or ``--hypothesis-calls`` examples).

    python benchmarks/bench_bulk.py --model chapter [--calls 5000] [--hypothesis-calls 500] [--runs 3]
    python benchmarks/bench_bulk.py --model serving --cex [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proofs import models  # noqa: E402
from proofs.models import declared  # noqa: E402
from proofs.sandbox import TargetProcess, harness_collector  # noqa: E402
from proofs.search import coverage  # noqa: E402
from proofs.search.bulk import BulkPhase  # noqa: E402
from proofs.search.engine import Search, examples_for  # noqa: E402
from proofs.targets import parse_target  # noqa: E402

CORPUS = {"chapter": ROOT / "tests" / "corpus" / "buggy", "serving": ROOT / "tests" / "corpus" / "serving" / "buggy"}
FUNCTION = {"chapter": "schedule", "serving": "serve"}


def child_cpu(process) -> float:
    """The CPU seconds the sandbox's current child has used (Linux: /proc), 0 when it cannot be read."""
    child = getattr(process, "_process", None)
    pid = getattr(child, "pid", None)
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class FirstReach:
    """Records the harness CPU time at which each corner was first reached."""

    def __init__(self, covered: coverage.Coverage, started: float) -> None:
        self.first: dict = {}
        self.started = started
        add = covered.add_names

        def add_names(names, phase="hypothesis", calls=1):
            now = time.process_time() - self.started
            for name in names:
                self.first.setdefault(name, now)
            add(names, phase, calls)

        covered.add_names = add_names


def search_for(model_name: str, target: str, deadline: float, seed: int, examples: dict,
               as_verify: bool = False) -> tuple:
    """A search of ``target``; ``as_verify``: over the model verify takes for it (its DOMAIN, prefix caching drawn
    where it supports it: proofs.models.declared), else over the plain model."""
    model = models.get(model_name)
    if as_verify:
        model = declared.for_target(model, parse_target(target))
    process = TargetProcess(parse_target(target), shape=model.shape)
    process.start()
    return Search(process, deadline, seed=seed, model=model, examples=examples), process


def throughput(mode: str, model_name: str, calls: int, hypothesis_calls: int, seed: int) -> dict:
    model = models.get(model_name)
    examples = examples_for(hypothesis_calls) | {"conformance": hypothesis_calls, "bulk": calls}
    search, process = search_for(model_name, model.default_target, time.monotonic() + 3600, seed, examples)
    with process, harness_collector():
        process.call(*model.example_call)  # the child is up before the clock starts
        child_before = child_cpu(process)
        started_cpu, started_wall = time.process_time(), time.monotonic()
        reach = FirstReach(search.coverage, started_cpu)
        if mode == "hypothesis":
            found = search.run(only={"conformance"})
            judged = search.checks[0].tried
            child = child_cpu(process) - child_before
        else:
            phase = BulkPhase(search, calls, seed, max_size=30 if mode == "bulk <= 30" else None)
            search.bulk = phase
            phase.run()
            found = [phase.found] if phase.found else []
            judged = phase.calls
            child = phase.child_seconds + child_cpu(process) - child_before
        cpu, wall = time.process_time() - started_cpu, time.monotonic() - started_wall
    assert not found, f"{mode}: our impl failed: {found[0]}"
    hits = sum(search.coverage.counts.values())
    return {"calls": judged, "cpu": cpu, "wall": wall, "child": child, "hits": hits,
            "reached": len(search.coverage.counts), "last_first": max(reach.first.values(), default=0.0)}


def time_to_counterexample(mode: str, model_name: str, path: pathlib.Path, seed: int, calls: int,
                           hypothesis_calls: int) -> tuple:
    examples = examples_for(hypothesis_calls) | {"conformance": hypothesis_calls, "bulk": calls}
    started_cpu, started_wall = time.process_time(), time.monotonic()
    search, process = search_for(model_name, f"{path}:{FUNCTION[model_name]}", time.monotonic() + 120, seed, examples,
                                 as_verify=True)
    with process:
        found = search.run(only={"bulk" if mode == "bulk" else "conformance"})
    cpu, wall = time.process_time() - started_cpu, time.monotonic() - started_wall
    if not found:
        return None, None, "-"
    return cpu, wall, found[0].counterexample.property


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("chapter", "serving"), default="chapter")
    parser.add_argument("--calls", type=int, default=5000, help="bulk calls per run (default %(default)s)")
    parser.add_argument("--hypothesis-calls", type=int, default=500, help="conformance examples per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cex", action="store_true", help="time to a counterexample on the corner corpus instead")
    parser.add_argument("--only", nargs="*", help="with --cex: only these corpus files (stems)")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores)")
    if args.cex:
        return cex_table(args)
    modes = ("hypothesis", "bulk <= 30", "bulk")
    runs = {mode: [] for mode in modes}
    for seed in range(args.runs):
        for mode in modes:
            runs[mode].append(throughput(mode, args.model, args.calls, args.hypothesis_calls, seed))
    total = len(coverage.names(args.model))
    print(f"model {args.model}: our impl, {args.runs} runs each (seeds 0..{args.runs - 1}), medians; CPU is this process's "
          f"(the harness), child CPU the sandbox child's; {total} corners")
    print()
    print("| mode | calls | harness CPU s | calls per harness CPU s | child CPU ms per call | wall s | corner hits per "
          "harness CPU minute | corners reached | harness CPU s to the last first reach |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode in modes:
        rows = runs[mode]
        med = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        rate = statistics.median(row["calls"] / row["cpu"] for row in rows)
        hits = statistics.median(60 * row["hits"] / row["cpu"] for row in rows)
        child = statistics.median(1000 * row["child"] / row["calls"] for row in rows)
        print(f"| {mode} | {med['calls']:.0f} | {med['cpu']:.2f} | {rate:.0f} | {child:.3f} | {med['wall']:.2f} | "
              f"{hits:.0f} | {min(row['reached'] for row in rows)} of {total} | {med['last_first']:.2f} |")
    return 0


def cex_table(args) -> int:
    files = []
    for path in sorted(CORPUS[args.model].glob("*.py")):
        text = path.read_text()
        corner = re.search(r'^CORNER = "(\w+)"', text, re.M)
        if corner and (not args.only or path.stem in args.only):
            files.append((path, corner.group(1), re.search(r'^EXPECTED = "(\w+)"', text, re.M).group(1)))
    print(f"model {args.model}: time to a counterexample (minimised and confirmed), {len(files)} corner schedulers, "
          f"seeds 0..{args.runs - 1}, medians; bulk at most {args.calls} calls, hypothesis at most "
          f"{args.hypothesis_calls} examples")
    print()
    print("| scheduler | corner | expected | bulk: harness CPU s | bulk: wall s | bulk found | hypothesis: harness CPU s | "
          "hypothesis: wall s | hypothesis found |")
    print("| --- | --- | --- | ---: | ---: | --- | ---: | ---: | --- |")
    sums = {"bulk": [], "hypothesis": []}
    for path, corner, expected in files:
        cells = []
        for mode in ("bulk", "hypothesis"):
            got = [time_to_counterexample(mode, args.model, path, seed, args.calls, args.hypothesis_calls)
                   for seed in range(args.runs)]
            hits = [g for g in got if g[0] is not None]
            found = ", ".join(sorted({g[2] for g in got}))
            if len(hits) == len(got):
                cpu, wall = statistics.median(g[0] for g in hits), statistics.median(g[1] for g in hits)
                sums[mode].append(cpu)
                cells += [f"{cpu:.2f}", f"{wall:.2f}", found]
            else:
                cells += ["-", "-", f"{found} ({len(hits)} of {len(got)})"]
        print(f"| {path.stem} | {corner} | {expected} | " + " | ".join(cells) + " |")
    print()
    for mode, values in sums.items():
        print(f"{mode}: found in every run on {len(values)} of {len(files)}; median harness CPU "
              f"{statistics.median(values) if values else float('nan'):.2f} s, sum {sum(values):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
