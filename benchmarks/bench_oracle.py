"""Time spec.check against impl.schedule per input size: is the oracle as fast as the simulation, and linear?

    PYTHONPATH=. python benchmarks/bench_oracle.py [--sizes 1000,10000,100000,1000000] [--runs 3] [--no-loop]
        [--baseline COMMIT] [--compiled] [--phases]

For each size n: n jobs of 1..19 tokens (about 10 services each) on 64 slots,
arriving about as fast as the slots serve them (continuous batching), so n = 10^3..10^6
gives about 10^4..10^7 services; then the 10^5-job input of bench_schedulers.py
(1..199 tokens, about 10^7 services).  Per row, alternating in this one process,
median of ``--runs``: impl.schedule, spec.check of impl's result (every invariant
and the reference comparison; it must return [], asserted), and the chapter's per-tick
loop (benchmarks/baselines/chapter_loop.py) unless ``--no-loop``.  Each time is given
as wall-clock and as CPU time of this process (``time.process_time``), which a shared
machine disturbs less; the ratio check / schedule is taken on CPU time, and the time
per service shows whether the check is linear.  ``--baseline COMMIT`` also times the
``spec.check`` of that commit (benchmarks/baselines/spec_at.py: imported beside this
tree's, in this process, interleaved) and prints the ratio old check / this check.
``--compiled`` also times this tree's ``spec`` compiled with mypyc (the same source,
benchmarks/baselines/compiled.py: built once under /tmp, a few minutes; needs
``pip install mypy==2.4.1`` and a C compiler), interleaved the same way, and prints the
ratio pure / compiled.  ``--phases`` prints, per row, where one check's CPU time goes
(the domain check, the well-typed reading, the replay of the trace, the records and
totals, the reference run compared as it is made), median and least of ``--runs``, for this
tree, the baseline and the compiled build, alternating run by run.  ``--floor`` prints, per
row, impl.schedule beside the parts of a check that no rule can make cheaper: the domain
check, the typed reading of the result, and the reference run alone (sorted and run to its
end, nothing compared).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import pathlib
import random
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SLOTS = 64


def jobs_for(count: int, most: int, seed: int = 0) -> list[dict]:
    """``count`` jobs of 1..``most`` tokens, arriving about as fast as ``SLOTS`` slots serve them."""
    rng = random.Random(seed)
    jobs, arrival, gap = [], 0.0, 2 * ((most + 1) / 2) / SLOTS
    for job_id in range(count):
        jobs.append({"id": job_id, "arrival": int(arrival), "tokens": rng.randint(1, most)})
        arrival += rng.uniform(0.0, gap)
    return jobs


def timed(function, *args) -> tuple[float, float, object]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    out = function(*args)
    return time.perf_counter() - wall, time.process_time() - cpu, out


def phases(spec_modules: dict, jobs: list, result: dict, runs: int) -> dict:
    """CPU seconds of each phase of ``spec.check`` (``spec_modules``: a tree's modules by name), one list per phase."""
    validate = spec_modules["spec.domain"].validate
    observe = spec_modules["spec.observation"].observe
    replay = spec_modules["spec.result_checks"].Replay
    compare = spec_modules["spec.oracle"]._differs_from_the_run
    fifo_key = spec_modules["spec.domain"].fifo_key
    shared = "ordered" in inspect.signature(compare).parameters  # a tree whose check sorts the jobs once
    times: dict = {}
    for _ in range(runs):
        gc.collect()
        gc.disable()
        marks = [time.process_time()]
        parsed = validate(jobs, SLOTS, True)
        marks.append(time.process_time())
        obs = observe(parsed, SLOTS, True, result)
        marks.append(time.process_time())
        if shared:  # the replay and the reference share one FIFO sort (counted in the replay's phase)
            ordered = tuple(sorted(parsed, key=fifo_key))
            state = replay(obs.jobs, SLOTS, True, ordered=ordered)
        else:
            state = replay(obs.jobs, SLOTS, True)
        state.replay_trace(obs.ticks, obs.served)
        marks.append(time.process_time())
        state.close(obs.completed, obs.result)
        marks.append(time.process_time())
        assert not state.found and compare(ordered if shared else parsed, SLOTS, True, obs) is None
        marks.append(time.process_time())
        gc.enable()
        for name, start, end in zip(("validate", "observe", "replay", "records", "reference"), marks, marks[1:]):
            times.setdefault(name, []).append(end - start)
    return times


def floor(spec, impl, jobs: list, result: dict, count: int, most: int, runs: int) -> str:
    """One row of ``--floor``: impl.schedule beside the parts of spec.check that no rule can make cheaper."""
    from spec.domain import fifo_key
    from spec.observation import observe
    from spec.state import stretches

    def reference(parsed):
        done: list = []
        for _ in stretches(tuple(sorted(parsed, key=fifo_key)), SLOTS, True, done):
            pass
        return done

    times: dict = {}
    for _ in range(runs):
        times.setdefault("schedule", []).append(timed(impl.schedule, jobs, SLOTS, True)[1])
        gc.collect()
        gc.disable()  # as spec.check runs
        marks = [time.process_time()]
        parsed = spec.validate(jobs, SLOTS, True)
        marks.append(time.process_time())
        observe(parsed, SLOTS, True, result)
        marks.append(time.process_time())
        reference(parsed)
        marks.append(time.process_time())
        gc.enable()
        for name, start, end in zip(("validate", "observe", "reference"), marks, marks[1:]):
            times.setdefault(name, []).append(end - start)
    cost = {name: statistics.median(values) for name, values in times.items()}
    least = cost["validate"] + cost["reference"]
    return (f"{count:>8} {'1..' + str(most):>7}  schedule {1e3 * cost['schedule']:7.1f}  validate "
            f"{1e3 * cost['validate']:7.1f}  observe {1e3 * cost['observe']:7.1f}  reference "
            f"{1e3 * cost['reference']:7.1f}  floor {1e3 * least:7.1f}  floor/schedule {least / cost['schedule']:5.2f}  "
            f"(with observe {(least + cost['observe']) / cost['schedule']:5.2f})")


def main() -> int:
    sys.path.insert(0, str(ROOT))
    import impl
    import spec
    from benchmarks.baselines import chapter_loop

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-loop", action="store_true")
    parser.add_argument("--baseline", metavar="COMMIT", help="also time COMMIT's spec.check, side by side")
    parser.add_argument("--compiled", action="store_true", help="also time this tree's spec compiled with mypyc")
    parser.add_argument("--phases", action="store_true", help="also where each check's time goes")
    parser.add_argument("--floor", action="store_true", help="also what any check with the same rules must spend")
    args = parser.parse_args()
    old_check = old_modules = compiled_check = compiled_modules = None
    if args.baseline:
        from benchmarks.baselines.spec_at import spec_at

        old_modules = spec_at(args.baseline, tempfile.mkdtemp())
        old_check = old_modules["spec"].check
    if args.compiled:
        from benchmarks.baselines.compiled import compiled_spec

        compiled_modules = compiled_spec("/tmp/schedcheck-compiled-spec")
        compiled_check = compiled_modules["spec"].check
    trees = {"this tree": {name: module for name, module in sys.modules.items() if name.startswith("spec")}}
    if old_modules:
        trees[args.baseline] = old_modules
    if compiled_modules:
        trees["compiled"] = compiled_modules
    phase_lines, floor_lines = [], []
    rows = [(int(n), 19) for n in args.sizes.split(",")] + [(100_000, 199)]
    print(f"median of {args.runs} runs, alternating, one process (python {sys.version.split()[0]}); "
          f"{SLOTS} slots, continuous; times in s, wall / cpu")
    header = f"{'jobs':>8} {'tokens':>7} {'services':>9} {'schedule':>15} {'check':>15}"
    header += "" if args.no_loop else f" {'chapter loop':>15}"
    header += f" {'check/schedule':>14} {'check ns/service':>16}"
    header += f" {'check at ' + args.baseline:>17} {'old/this':>8}" if old_check else ""
    header += f" {'compiled check':>17} {'pure/compiled':>13}" if compiled_check else ""
    print(header)
    for count, most in rows:
        jobs = jobs_for(count, most)
        result = impl.schedule(jobs, SLOTS, True)
        services = result["busy_slots"]
        times = {"schedule": [], "check": [], "loop": [], "old": [], "compiled": []}
        for _ in range(args.runs):
            times["schedule"].append(timed(impl.schedule, jobs, SLOTS, True)[:2])
            wall, cpu, verdict = timed(spec.check, jobs, SLOTS, True, result)
            assert verdict == [], verdict
            times["check"].append((wall, cpu))
            if not args.no_loop:
                times["loop"].append(timed(chapter_loop.schedule, jobs, SLOTS, True)[:2])
            if old_check:
                wall, cpu, verdict = timed(old_check, jobs, SLOTS, True, result)
                assert verdict == [], verdict
                times["old"].append((wall, cpu))
            if compiled_check:
                wall, cpu, verdict = timed(compiled_check, jobs, SLOTS, True, result)
                assert verdict == [], verdict
                times["compiled"].append((wall, cpu))
        med = {key: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for key, v in times.items() if v}
        line = f"{count:>8} {'1..' + str(most):>7} {services:>9}"
        for key in ("schedule", "check") + (() if args.no_loop else ("loop",)):
            line += f" {med[key][0]:>7.3f}/{med[key][1]:<7.3f}"
        line += f" {med['check'][1] / med['schedule'][1]:>14.2f} {1e9 * med['check'][1] / services:>16.0f}"
        if old_check:
            line += f" {med['old'][0]:>7.3f}/{med['old'][1]:<9.3f} {med['old'][1] / med['check'][1]:>8.2f}"
        if compiled_check:
            line += f" {med['compiled'][0]:>7.3f}/{med['compiled'][1]:<9.3f} {med['check'][1] / med['compiled'][1]:>13.2f}"
        print(line, flush=True)
        if args.floor:
            floor_lines.append(floor(spec, impl, jobs, result, count, most, args.runs))
        if args.phases:  # the trees alternate, one run each in turn, so that a change of load hits them alike
            measured: dict = {tree: {} for tree in trees}
            for _ in range(args.runs):
                for tree, modules in trees.items():
                    for name, values in phases(modules, jobs, result, 1).items():
                        measured[tree].setdefault(name, []).extend(values)
            for tree, times in measured.items():
                for label, pick in (("median", statistics.median), ("min", min)):
                    cost = {name: pick(values) for name, values in times.items()}
                    phase_lines.append(f"{count:>8} {'1..' + str(most):>7} {tree:>10} {label:>6}  " + "  ".join(
                        f"{name} {1e3 * seconds:7.1f}" for name, seconds in cost.items()) +
                        f"  sum {1e3 * sum(cost.values()):7.1f}")
    if floor_lines:
        print(f"the floor (CPU ms, median of {args.runs}, alternating with impl.schedule in this process): the domain "
              "check, the typed reading of the result, the reference run alone (FIFO sort and every stretch with its "
              "Completions, nothing compared); floor = validate + reference, what a check that validates the call "
              "and compares the result with an independent reference spends before it judges any invariant:")
        print("\n".join(floor_lines))
    if phase_lines:
        print(f"where a check's CPU time goes (ms, median and least of {args.runs}, the trees alternating):")
        print("\n".join(phase_lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
