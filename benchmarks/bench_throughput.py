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

    python benchmarks/bench_throughput.py [--model chapter|serving] [--calls 1000] [--runs 3] [--old]
"""

from __future__ import annotations

import argparse
import copy
import pickle
import statistics
import sys
import time

from hypothesis import HealthCheck, Phase, given, settings

from proofs import models
from proofs.sandbox import TargetProcess
from proofs.search.judge import judge_valid_call
from proofs.targets import load_callable, parse_target

MAX_JOBS = 30


def drawn_calls(model, count: int) -> list:
    """``count`` valid calls of at most MAX_JOBS jobs (requests), drawn by the search's strategies, derandomised."""
    if model.name == "chapter":
        from proofs.search import strategies

        strategy = strategies.valid_calls(max_jobs=MAX_JOBS, large=False)
    else:
        strategy = model.valid_calls(max_jobs=MAX_JOBS)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=models.NAMES, default="chapter")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--old", action="store_true", help="only the old path (runs on a tree without submit/stream)")
    args = parser.parse_args()
    model = models.get(args.model)
    calls = drawn_calls(model, args.calls)
    target = parse_target(model.default_target)
    function = load_callable(target)
    sizes = [model.size(call) for call in calls]
    print(f"model {model.name}: {len(calls)} calls, {min(sizes)}..{max(sizes)} {model.noun[1]} "
          f"(mean {statistics.mean(sizes):.1f}), {args.runs} runs each, median", flush=True)

    modes = {"isolated (old path)": isolated_old}
    if not args.old:
        modes = {"in-process": None, **modes, "isolated (overlap)": isolated_overlap,
                 "isolated (stream)": isolated_stream}
    seconds: dict[str, list[float]] = {name: [] for name in modes}
    with TargetProcess(target, shape=model.shape) as process:
        process.start()
        process.call(*calls[0])  # warm: the child's first call imports what the target imports lazily
        for _ in range(args.runs):
            for name, mode in modes.items():
                if mode is None:
                    seconds[name].append(in_process(model, function, calls))
                else:
                    seconds[name].append(mode(model, process, calls))
    rates = {name: len(calls) / statistics.median(values) for name, values in seconds.items()}
    base = rates.get("in-process")
    for name, rate in rates.items():
        per_call = 1e3 / rate
        ratio = f"  isolated/in-process time per call {base / rate:4.2f}x" if base and name != "in-process" else ""
        print(f"{name:22} {rate:7.0f} calls/s  {per_call:6.3f} ms/call{ratio}", flush=True)
    if "isolated (overlap)" in rates:
        print(f"overlap vs old path: {rates['isolated (overlap)'] / rates['isolated (old path)']:.2f}x; "
              f"stream vs old path: {rates['isolated (stream)'] / rates['isolated (old path)']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
