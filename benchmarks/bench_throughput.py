"""Search throughput: valid calls per second judged by the full oracle, isolated in a child vs in-process.

Every mode makes the same calls, on the same generated inputs (drawn once by the
search's own strategies, derandomised: the chapter's small calls of 0 to 30 jobs,
the serving model's calls of up to 30 requests), and judges each one completely:
the target's result through the model's oracle (``spec.check`` or
``spec.serving.check``: every invariant, and the comparison with the reference run,
computed per call), plus the input-unchanged check.

- ``in-process``: the target called in this process (a pickle of the input before and
  after the call for input_unchanged, no deep copy: the cheapest honest loop);
- ``isolated (old path)``: what the search did per call at 70a90c8: a deep copy of the
  call, the reference, then ``TargetProcess.call`` and ``judge_valid_call``;
- ``isolated (overlap)``: what the search does now: the call submitted to the child,
  the reference computed while the child runs it, then the outcome collected and
  judged (``TargetProcess.submit`` / ``collect``);
- ``isolated (stream)``: a known list of calls (``TargetProcess.stream``): each outcome
  judged while the child already runs the next call.

Each mode runs ``--runs`` times, interleaved, and the median is reported; the ratio
isolated / in-process is the time per call.  ``--old`` measures only the old path, so that the
same script can be run on an older tree (``PYTHONPATH=<old tree>``) for the
before/after figure.

    python benchmarks/bench_throughput.py [--model chapter|serving] [--calls 1000] [--runs 3]
        [--baseline 70a90c8 [--search-examples 300 | --verify-examples 300]] [--old]
    python benchmarks/bench_throughput.py --bound 300 [--model chapter|serving] [--runs 3]
    python benchmarks/bench_throughput.py --check-baseline 46d92ce [--model chapter|serving] [--calls 1000] [--runs 3]
    python benchmarks/bench_throughput.py --transport [--large] [--model chapter|serving] [--calls 1000] [--runs 3]
    python benchmarks/bench_throughput.py --round-trip [--baseline COMMIT] [--calls 500] [--runs 3]

``--bound N`` measures what bounds the search's calls per second whatever the harness
does: Hypothesis running the search's own strategy (``model.valid_calls()``, the
search's settings, seed 0, N examples) over a test that does nothing, that only
``steer``s (the two reference runs and Hypothesis's targets), and that also calls the
target in this process and judges it with the full oracle; CPU ms per example and the
calls per CPU second each allows, the runs interleaved.  ``--check-baseline COMMIT``
times only the oracle per call on the drawn calls (the model's check of our impl's
result, given the reference as the search gives it, and without it), this tree's
against COMMIT's spec imported beside it (benchmarks/baselines/spec_at.py), interleaved.
``--transport`` times only how a result crosses the sandbox, per call, on our impl's
results for the drawn calls: the pickle the sandbox sent until issue 18 (dumped in the
child, loaded in the harness) against the plain-data encoding that replaced it
(``proofs.sandbox.encode`` in the child, ``decode`` in the harness), each side apart,
the runs interleaved.  ``--large`` draws large calls instead (the chapter's large
calls, 33 to 2000 jobs; serving calls of up to 300 requests).  ``--round-trip`` times
the sandbox alone: a one-job call of our impl, ``--calls`` times, and a fresh process
(``close``, then the call) 50 times; with ``--baseline COMMIT`` the same on COMMIT's
tree in a fresh process, the runs interleaved.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import pickle
import statistics
import subprocess
import sys
import tempfile
import time

from hypothesis import HealthCheck, Phase, given, settings

from proofs import models
from proofs.sandbox import TargetProcess
from proofs.search.judge import judge_valid_call
from proofs.targets import load_callable, parse_target

MAX_JOBS = 30
ROOT = pathlib.Path(__file__).resolve().parent.parent


def small_strategy(model, large: bool = False):
    """The search's strategy of valid calls of at most MAX_JOBS jobs (requests); ``large``: large calls only."""
    if large:
        if model.name == "chapter":
            from proofs.search import strategies

            return strategies.large_calls()
        return model.valid_calls(max_jobs=300)
    if model.name == "chapter":
        from proofs.search import strategies

        return strategies.valid_calls(max_jobs=MAX_JOBS, large=False)
    return model.valid_calls(max_jobs=MAX_JOBS)


def drawn_calls(model, count: int, large: bool = False) -> list:
    """``count`` valid calls of at most MAX_JOBS jobs (requests), drawn by the search's strategies, derandomised."""
    strategy = small_strategy(model, large)
    calls: list = []

    @settings(max_examples=count, database=None, derandomize=True, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(call):
        calls.append(call)

    collect()
    assert calls, "the strategy drew no calls"
    return [calls[i % len(calls)] for i in range(count)]


def in_process(model, function, calls) -> float:
    started = time.perf_counter()
    for call in calls:
        before = pickle.dumps(call)
        result = function(*call)
        assert pickle.dumps(call) == before, f"the target modified its input: {call!r}"
        found = model.check(call, result, model.reference(call))
        assert not found, f"in-process: {found[0]}"
    return time.perf_counter() - started


def isolated_old(model, process, calls) -> float:
    started = time.perf_counter()
    for call in calls:
        reference = model.reference(call)
        outcome = process.call(*copy.deepcopy(call))
        found = judge_valid_call(outcome, *call, reference=reference, model=model)
        assert not found, f"isolated: {found[0]}"
    return time.perf_counter() - started


def isolated_overlap(model, process, calls) -> float:
    started = time.perf_counter()
    for call in calls:
        process.submit(*call)
        reference = model.reference(call)
        found = judge_valid_call(process.collect(), *call, reference=reference, model=model)
        assert not found, f"isolated: {found[0]}"
    return time.perf_counter() - started


def isolated_stream(model, process, calls) -> float:
    started = time.perf_counter()
    for call, outcome in process.stream(calls):
        found = judge_valid_call(outcome, *call, reference=model.reference(call), model=model)
        assert not found, f"isolated: {found[0]}"
    return time.perf_counter() - started


def child_cpu(process) -> float:
    """The CPU seconds the worker's current child has used (Linux: /proc), 0 when there is none."""
    child = getattr(process, "_process", None)
    if child is None:
        return 0.0
    try:
        with open(f"/proc/{child.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(run) -> tuple[float, float, float]:
    """(wall, this process's CPU, the child's CPU) seconds of ``run(process)``, with the process made ready first."""

    def go(process=None):
        cpu, child = time.process_time(), child_cpu(process)
        wall = run(process) if process is not None else run()
        return wall, time.process_time() - cpu, child_cpu(process) - child

    return go


def old_tree(commit: str, scratch: str) -> str:
    """The tree of ``commit`` unpacked under ``scratch`` (git archive: no worktree, no checkout)."""
    path = pathlib.Path(scratch) / commit
    path.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)
    return str(path)


def baseline_seconds(tree: str, model: str, count: int) -> tuple[float, float, float]:
    """One run of the old path, in a fresh process on ``tree``'s code (this script, ``--old``)."""
    command = [sys.executable, __file__, "--old", "--model", model, "--calls", str(count), "--runs", "1"]
    done = subprocess.run(command, env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True, check=True)
    return tuple(float(x) for x in done.stdout.split("OLD-SECONDS ")[1].split()[:3])


SEARCH = """
import os, sys, time
from proofs import models
from proofs.sandbox import TargetProcess
from proofs.search.engine import Search
from proofs.targets import parse_target
model, examples = models.get(sys.argv[1]), int(sys.argv[2])
def child_cpu(process):
    fields = open(f"/proc/{process._process.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
with TargetProcess(parse_target(model.default_target), shape=model.shape) as process:
    process.start()
    search = Search(process, time.monotonic() + 3600, model=model, seed=0, examples={"conformance": examples})
    cpu, wall, child = time.process_time(), time.perf_counter(), child_cpu(process)
    search.run(only=("conformance",))
    calls = search.calls_tried
    print("SEARCH", calls, time.perf_counter() - wall, time.process_time() - cpu, child_cpu(process) - child)
"""


def search_rates(tree: str, model: str, examples: int) -> tuple[float, float, float]:
    """The conformance check alone (seed 0, our impl) on ``tree``'s code: (wall, harness CPU, child CPU) ms per call."""
    done = subprocess.run([sys.executable, "-c", SEARCH, model, str(examples)], env=dict(os.environ, PYTHONPATH=tree),
                          capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    calls, wall, cpu, child = (float(x) for x in done.stdout.split("SEARCH ")[1].split()[:4])
    return 1e3 * wall / calls, 1e3 * cpu / calls, 1e3 * child / calls


def search_table(model: str, examples: int, runs: int, commit: str, tree: str) -> None:
    """The conformance search, old tree and this one interleaved, ``runs`` times each."""
    rows = {commit: [], "this tree": []}
    for _ in range(runs):
        rows[commit].append(search_rates(tree, model, examples))
        rows["this tree"].append(search_rates(str(ROOT), model, examples))
    print(f"conformance search, --model {model}, {examples} examples, seed 0, median of {runs} "
          f"(ms per call: wall, harness CPU, child CPU):")
    medians = {name: [statistics.median(v[i] for v in values) for i in range(3)] for name, values in rows.items()}
    for name, (wall, cpu, child) in medians.items():
        print(f"  {name:12} wall {wall:7.2f}  harness CPU {cpu:6.2f}  child CPU {child:5.2f}  "
              f"-> {1e3 / cpu:5.0f} calls per harness CPU second")
    print(f"  harness CPU per call: {medians[commit][1] / medians['this tree'][1]:.2f}x less on this tree")


def verify_rates(tree: str, model: str, examples: int, seed: int) -> tuple[float, float]:
    """One ``schedcheck verify --examples N --db none`` of our impl on ``tree``'s code: (calls/s of the
    whole run, calls/s of its conformance check), from its --json report."""
    with tempfile.TemporaryDirectory() as scratch:
        report = pathlib.Path(scratch) / "report.json"
        command = [sys.executable, "-m", "proofs.cli.main", "verify", "--model", model, "--examples", str(examples),
                   "--db", "none", "--seed", str(seed), "--budget", "3600", "--save-dir", scratch, "--json", str(report)]
        subprocess.run(command, env=dict(os.environ, PYTHONPATH=tree), capture_output=True, check=False, cwd=scratch)
        data = json.loads(report.read_text())
    calls = [c for c in data["checks"] if c["unit"] == "calls"]
    conformance = next(c for c in data["checks"] if c["check"] == "conformance")
    return (sum(c["tried"] for c in calls) / sum(c["seconds"] for c in calls),
            conformance["tried"] / conformance["seconds"])


def verify_table(model: str, examples: int, runs: int, commit: str, tree: str) -> None:
    """The whole search, old tree and this one side by side, ``runs`` seeds each."""
    rows = {commit: [], "this tree": []}
    for seed in range(runs):
        rows[commit].append(verify_rates(tree, model, examples, seed))
        rows["this tree"].append(verify_rates(str(ROOT), model, examples, seed))
    print(f"schedcheck verify --model {model} --examples {examples} --db none (seeds 0..{runs - 1}, median; "
          f"calls/s over the checks that count calls, and of conformance alone):")
    for name, values in rows.items():
        print(f"  {name:12} {statistics.median(v[0] for v in values):7.1f} calls/s, "
              f"conformance {statistics.median(v[1] for v in values):7.1f} calls/s")


def hypothesis_cost(model, strategy, examples: int, body) -> tuple[float, float]:
    """(CPU ms per example of a Hypothesis run of the search's strategy and settings over ``body``, of which in ``body``)."""
    from hypothesis import Verbosity
    from hypothesis import seed as seeded

    from proofs.sandbox import harness_collector

    count, inside = [0], [0.0]

    def test(call):
        count[0] += 1
        started = time.process_time()
        try:
            body(call)
        finally:
            inside[0] += time.process_time() - started

    runner = settings(max_examples=examples, deadline=None, derandomize=False, database=None,
                      suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                      verbosity=Verbosity.quiet, print_blob=False)(given(strategy)(test))
    runner = seeded(0)(runner)
    with harness_collector():  # what the search runs under
        started = time.process_time()
        runner()
        total = time.process_time() - started
    return 1e3 * total / count[0], 1e3 * inside[0] / count[0]


def bound_table(model, examples: int, runs: int) -> None:
    """What Hypothesis itself costs per example (all but the test's body), with the test doing nothing, only
    steering, or also calling the target and judging it: the ceiling on calls per second."""
    function = load_callable(parse_target(model.default_target))
    bodies = {
        "test does nothing": lambda call: None,
        "steer (reference runs, targets)": model.steer,
        "steer + target + full oracle": lambda call: model.check(call, function(*call), model.steer(call)),
    }
    for label, strategy in (("the search's own strategy", model.valid_calls()),
                            (f"calls of at most {MAX_JOBS} {model.noun[1]}", small_strategy(model))):
        costs: dict = {name: [] for name in bodies}
        hypothesis_cost(model, strategy, examples, model.steer)  # warm: the strategies' memo (proofs/search/built.py)
        for _ in range(runs):
            for name, body in bodies.items():
                costs[name].append(hypothesis_cost(model, strategy, examples, body))
        print(f"--model {model.name}, {label}: the search's settings, seed 0, {examples} examples, median of {runs} "
              f"(CPU ms per example: the whole example, the test's body, Hypothesis's own = the rest):")
        for name, values in costs.items():
            total = statistics.median(v[0] for v in values)
            inside = statistics.median(v[1] for v in values)
            own = statistics.median(v[0] - v[1] for v in values)
            print(f"  {name:32} whole {total:6.2f}  body {inside:5.2f}  Hypothesis {own:5.2f} ms "
                  f"-> at most {1e3 / own:5.0f} calls per CPU second  "
                  f"(Hypothesis's own, runs: {', '.join(f'{v[0] - v[1]:.2f}' for v in values)})", flush=True)


def check_table(model, calls: list, runs: int, commit: str) -> None:
    """The oracle alone per call, this tree's against ``commit``'s, with and without the reference."""
    from benchmarks.baselines.spec_at import spec_at
    from proofs.sandbox import harness_collector

    sys.path.insert(0, str(ROOT))
    old = spec_at(commit, tempfile.mkdtemp())["spec" if model.name == "chapter" else "spec.serving"]
    new = sys.modules["spec" if model.name == "chapter" else "spec.serving"]
    function = load_callable(parse_target(model.default_target))
    results = [function(*call) for call in calls]
    references = [model.reference(call) for call in calls]
    times: dict = {}
    with harness_collector():
        for _ in range(runs):
            for tree, module in ((commit, old), ("this tree", new)):
                for given_reference in (True, False):
                    started = time.process_time()
                    for call, result, reference in zip(calls, results, references):
                        found = module.check(*call, result, reference if given_reference else None)
                        assert not found, found[0]
                    times.setdefault((tree, given_reference), []).append(
                        1e3 * (time.process_time() - started) / len(calls))
    print(f"--model {model.name}: the oracle alone on {len(calls)} drawn calls, median of {runs} (CPU ms per call):")
    for given_reference in (True, False):
        what = "given the reference" if given_reference else "reference run inside"
        was, now = (statistics.median(times[(tree, given_reference)]) for tree in (commit, "this tree"))
        print(f"  check {what:22} {commit} {was:6.3f}  this tree {now:6.3f}  -> {was / now:.2f}x")


def transport_table(model, function, calls: list, runs: int) -> None:
    """CPU microseconds per result: the old pickle against the plain-data encoding, child side and harness side."""
    from proofs.sandbox import decode, encode, harness_collector

    results = [function(*call) for call in calls]
    times: dict = {}
    with harness_collector():  # as the search runs (the child's side too, to compare like with like)
        _transport_runs(results, runs, times)
    _transport_print(model, calls, runs, times)


def _transport_runs(results, runs, times) -> None:
    from proofs.sandbox import decode, encode

    for _ in range(runs):
        for name, dump, load in (("pickle (until issue 18)", lambda r: pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL),
                                  pickle.loads),
                                 ("plain data (encode/decode)", encode, decode)):
            started = time.process_time()
            payloads = [dump(result) for result in results]
            dumped = time.process_time()
            for payload in payloads:
                load(payload)
            loaded = time.process_time()
            times.setdefault(name, []).append((1e6 * (dumped - started) / len(results),
                                               1e6 * (loaded - dumped) / len(results),
                                               sum(map(len, payloads)) / len(results)))


def _transport_print(model, calls, runs, times) -> None:
    sizes = [model.size(call) for call in calls]
    print(f"--model {model.name}: how a result crosses the sandbox, {len(calls)} results of our impl on calls of "
          f"{min(sizes)}..{max(sizes)} {model.noun[1]} (mean {statistics.mean(sizes):.1f}), median of {runs} "
          f"(CPU microseconds per result):")
    for name, values in times.items():
        child, harness, size = (statistics.median(v[i] for v in values) for i in range(3))
        print(f"  {name:28} child {child:8.1f}  harness {harness:8.1f}  bytes {size:9.0f}")


ROUND_TRIP = """
import statistics, sys, time
from proofs.sandbox import TargetProcess
from proofs.targets import parse_target
calls, runs = int(sys.argv[1]), int(sys.argv[2])
call = ([{"id": 0, "arrival": 0, "tokens": 1}], 1, True)
rows = []
with TargetProcess(parse_target("impl:schedule")) as process:
    process.call(*call)
    for _ in range(runs):
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(calls):
            process.call(*call)
        call_wall, call_cpu = time.perf_counter() - wall, time.process_time() - cpu
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(50):
            process.close()
            process.call(*call)
        rows.append((1e6 * call_wall / calls, 1e6 * call_cpu / calls, 1e3 * (time.perf_counter() - wall) / 50,
                     1e3 * (time.process_time() - cpu) / 50))
print("ROUND-TRIP", *(statistics.median(row[i] for row in rows) for i in range(4)))
"""


def round_trip_table(calls: int, runs: int, commit: str | None) -> None:
    """The sandbox alone, per call and per fresh process, this tree against COMMIT's, interleaved."""
    trees = {"this tree": str(ROOT)}
    with tempfile.TemporaryDirectory() as scratch:
        if commit:
            trees = {commit: old_tree(commit, scratch), **trees}
        rows: dict = {name: [] for name in trees}
        for _ in range(runs):
            for name, tree in trees.items():
                done = subprocess.run([sys.executable, "-c", ROUND_TRIP, str(calls), "1"], capture_output=True,
                                      text=True, check=True, env=dict(os.environ, PYTHONPATH=tree),
                                      cwd=tempfile.gettempdir())
                rows[name].append([float(x) for x in done.stdout.split("ROUND-TRIP ")[1].split()[:4]])
    print(f"the sandbox alone: a one-job call of impl:schedule ({calls} calls), and a fresh process then the call "
          f"(50 times), median of {runs}:")
    for name, values in rows.items():
        call_wall, call_cpu, fresh_wall, fresh_cpu = (statistics.median(v[i] for v in values) for i in range(4))
        print(f"  {name:12} call: wall {call_wall:7.0f} us, harness CPU {call_cpu:5.0f} us;  "
              f"fresh process + call: wall {fresh_wall:6.1f} ms, harness CPU {fresh_cpu:5.2f} ms")


def breakdown(model, function, calls) -> str:
    """Where one call's time goes in this process: the target, the reference run, the oracle given it, the result's pickle."""
    from proofs.sandbox import harness_collector

    parts = {"target": [], "reference run": [], "check given the reference": [], "result pickle round trip": []}
    with harness_collector():
        for call in calls:
            started = time.process_time()
            result = function(*call)
            ran = time.process_time()
            reference = model.reference(call)
            referred = time.process_time()
            model.check(call, result, reference)
            checked = time.process_time()
            pickle.loads(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
            pickled = time.process_time()
            for name, (a, b) in zip(parts, ((started, ran), (ran, referred), (referred, checked), (checked, pickled))):
                parts[name].append(b - a)
    return ", ".join(f"{name} {1e3 * sum(values) / len(values):.3f} ms" for name, values in parts.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=models.NAMES, default="chapter")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--old", action="store_true", help="only the old path (runs on a tree without submit/stream)")
    parser.add_argument("--verify-examples", type=int, metavar="N",
                        help="with --baseline: time whole `schedcheck verify --examples N` runs on both trees instead")
    parser.add_argument("--search-examples", type=int, metavar="N",
                        help="with --baseline: time the conformance search alone (N examples) on both trees instead")
    parser.add_argument("--bound", type=int, metavar="N",
                        help="only the ceiling: Hypothesis's own cost per example with the search's strategy (N examples)")
    parser.add_argument("--check-baseline", metavar="COMMIT",
                        help="only the oracle per call on the drawn calls, this tree's against COMMIT's spec")
    parser.add_argument("--transport", action="store_true",
                        help="only how a result crosses the sandbox: the old pickle against the plain-data encoding")
    parser.add_argument("--large", action="store_true", help="with --transport: large calls instead of small ones")
    parser.add_argument("--round-trip", action="store_true",
                        help="only the sandbox: a tiny call and a fresh process, this tree (and --baseline COMMIT's)")
    parser.add_argument("--baseline", metavar="COMMIT",
                        help="also run the old path on COMMIT's tree (git archive), one run interleaved with each of ours")
    args = parser.parse_args()
    model = models.get(args.model)
    if args.round_trip:
        round_trip_table(args.calls, args.runs, args.baseline)
        return 0
    if args.bound:
        bound_table(model, args.bound, args.runs)
        return 0
    if args.search_examples:  # only the conformance search, both trees
        if not args.baseline:
            parser.error("--search-examples needs --baseline COMMIT")
        with tempfile.TemporaryDirectory() as scratch:
            search_table(model.name, args.search_examples, args.runs, args.baseline, old_tree(args.baseline, scratch))
        return 0
    if args.verify_examples:  # only the whole search, both trees
        if not args.baseline:
            parser.error("--verify-examples needs --baseline COMMIT")
        with tempfile.TemporaryDirectory() as scratch:
            verify_table(model.name, args.verify_examples, args.runs, args.baseline, old_tree(args.baseline, scratch))
        return 0
    calls = drawn_calls(model, args.calls, large=args.large and args.transport)
    if args.transport:
        transport_table(model, load_callable(parse_target(model.default_target)), calls, args.runs)
        return 0
    if args.check_baseline:
        check_table(model, calls, args.runs, args.check_baseline)
        return 0
    target = parse_target(model.default_target)
    function = load_callable(target)
    if args.old:
        with TargetProcess(target, shape=model.shape) as process:
            process.start()
            process.call(*calls[0])
            values = [measured(lambda p: isolated_old(model, p, calls))(process) for _ in range(args.runs)]
        print("OLD-SECONDS " + " ".join(str(statistics.median(v[i] for v in values)) for i in range(3)))
        return 0
    from proofs.sandbox import harness_collector

    sizes = [model.size(call) for call in calls]
    print(f"model {model.name}: {len(calls)} calls, {min(sizes)}..{max(sizes)} {model.noun[1]} "
          f"(mean {statistics.mean(sizes):.1f}), {args.runs} runs each, median of wall-clock times", flush=True)
    modes = {"in-process": None, "isolated (old path)": isolated_old, "isolated (overlap)": isolated_overlap,
             "isolated (stream)": isolated_stream}
    seconds: dict[str, list[float]] = {name: [] for name in modes}
    baseline = f"isolated at {args.baseline}" if args.baseline else None
    if baseline:
        seconds[baseline] = []
    with tempfile.TemporaryDirectory() as scratch:
        tree = old_tree(args.baseline, scratch) if args.baseline else None
        with TargetProcess(target, shape=model.shape) as process:
            process.start()
            process.call(*calls[0])  # warm: the child's first call imports what the target imports lazily
            for _ in range(args.runs):
                if tree:
                    seconds[baseline].append(baseline_seconds(tree, model.name, args.calls))
                # the old path under the old collector settings too
                seconds["isolated (old path)"].append(measured(lambda p: isolated_old(model, p, calls))(process))
                with harness_collector():  # what the search runs under now; the in-process loop gets it as well
                    for name, mode in modes.items():
                        if name == "isolated (old path)":
                            continue
                        if mode is None:
                            seconds[name].append(measured(lambda: in_process(model, function, calls))())
                        else:
                            seconds[name].append(measured(lambda p, mode=mode: mode(model, p, calls))(process))
    rates = {name: len(calls) / statistics.median(v[0] for v in values) for name, values in seconds.items()}
    cpu = {name: [1e3 * statistics.median(v[i] for v in values) / len(calls) for i in (1, 2)]
           for name, values in seconds.items()}
    base = rates["in-process"]
    print(f"{'mode':28} {'calls/s':>8} {'ms/call':>8} {'x in-process':>12} {'CPU ms/call: harness':>21} {'child':>6}")
    for name, rate in rates.items():
        ratio = f"{base / rate:.2f}x" if name != "in-process" else "1.00x"
        print(f"{name:28} {rate:8.0f} {1e3 / rate:8.3f} {ratio:>12} {cpu[name][0]:21.3f} {cpu[name][1]:6.3f}", flush=True)
    old = rates[baseline] if baseline else rates["isolated (old path)"]
    print(f"speed-up over {'the tree at ' + args.baseline if baseline else 'the old path'}: "
          f"overlap {rates['isolated (overlap)'] / old:.2f}x, stream {rates['isolated (stream)'] / old:.2f}x")
    print(f"CPU time per call in this process: {breakdown(model, function, calls)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
