"""How fast ``schedcheck trace`` checks a long serving trace, against merely parsing it, and whether its memory stays flat.

    PYTHONPATH=. python benchmarks/bench_trace.py --ticks 1000000 --runs 3 [--json-lib json|schedcheck|orjson|msgspec ...]

It records a trace of ``--ticks`` ticks from our online ``impl.ServingScheduler``
(through the protocol loop ``drive`` here, written line by line), with about 16 requests
scheduled per tick: max_seqs 16, a steady stream of requests (prompt 24-40, output
150-250) arriving a little faster than they finish, 5% of them aborted, in a pool big
enough that nothing is preempted (a healthy engine's common case).  Then, each in a fresh child process, median of
``--runs``: the time to read and parse every line with the JSON library alone, and
the time of ``proofs.trace.check.check_file`` with the same library, FCFS policy and
``--policy none`` (``--json-lib schedcheck`` is the parser ``check_file`` uses by default:
msgspec, with ``json.loads`` for what msgspec refuses; when ``json`` is measured too, each
library's figures are also given against the stdlib's parse), wall and CPU time (the machine is shared: CPU time is the steadier); the checker's resident memory is sampled every 0.2 s, and the
figures at 10%, 50% and 100% of its run show whether it grows with the trace.  ``--modes read``
also times the parse plus the typed reading of every entry (``read_entry``, as ``check_file``
does before any rule is applied): the part of the check that no rule can make cheaper;
``--modes reference`` times the spec's own run of the header's call (``spec.serving.run``,
the FCFS policy as stated, every tick), which a check of the policy replaces by its replay.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

CONFIG = {"max_seqs": 16, "token_budget": 96, "block_size": 16, "num_blocks": 200, "chunked_prefill": True}


def requests_for(ticks: int, seed: int = 0) -> list:
    """A request stream that keeps about 16 requests running for ``ticks`` ticks."""
    rng = random.Random(seed)
    out, arrival, i = [], 0.0, 0
    while arrival < ticks - 300:  # the last ones finish by about ``ticks``
        request = {"id": i, "arrival": int(arrival), "prompt": rng.randint(24, 40), "output": rng.randint(150, 250)}
        if rng.random() < 0.05:
            request["abort"] = request["arrival"] + rng.randint(0, 300)
        out.append(request)
        arrival += rng.uniform(8.0, 16.0)  # about 200 ticks each, 16 at once: one every ~12.5 ticks
        i += 1
    return out


def drive(engine, requests: list):
    """The engine's serving trace entries, one per step, through the clock-free protocol of issue 11, streamed.

    (``proofs.online.driver.drive`` keeps the whole trace and a shadow in memory; a 10^6-tick
    recording needs a loop that yields each entry as it comes.)"""
    pending = sorted(requests, key=lambda r: (r["arrival"], r["id"]))
    aborts = sorted((r["abort"], r["arrival"], r["id"]) for r in requests if r.get("abort") is not None)
    live: set = set()
    clock, next_add, next_abort = 0, 0, 0
    while next_add < len(pending) or live:
        if not live:
            clock = max(clock, pending[next_add]["arrival"])  # idle: jump over the gap without stepping
        while next_add < len(pending) and pending[next_add]["arrival"] <= clock:
            request = {key: value for key, value in pending[next_add].items() if key != "abort"}
            engine.add_request(request)
            live.add(request["id"])
            next_add += 1
        while next_abort < len(aborts) and aborts[next_abort][0] <= clock:
            if aborts[next_abort][2] in live:
                engine.abort(aborts[next_abort][2])
            next_abort += 1
        out = engine.step()
        if out is not None:
            entry = {"tick": clock, **{key: value for key, value in dict(out).items() if key != "tick"}}
            live.difference_update(entry["finished"], entry["aborted"])
            yield entry
        clock += 1


def generate(path: str, ticks: int) -> dict:
    import impl
    from proofs.trace.files import header_of, write

    requests = requests_for(ticks)
    started = time.perf_counter()
    engine = impl.ServingScheduler(dict(CONFIG))
    count = write(path, header_of("serving", (requests, CONFIG)), drive(engine, requests))
    return {"entries": count, "requests": len(requests), "seconds": time.perf_counter() - started,
            "bytes": os.path.getsize(path)}


CHILD = r"""
import json, sys, threading, time, os
mode, path, lib = sys.argv[1], sys.argv[2], sys.argv[3]
if lib == "json":
    loads = json.loads
elif lib == "schedcheck":  # what check_file parses with by default: msgspec, json.loads for what it refuses
    from proofs.trace.files import parse as loads
elif lib == "orjson":
    loads = __import__("orjson").loads
else:
    loads = __import__("msgspec").json.Decoder().decode
samples = []
def rss():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
done = False
def sample():
    while not done:
        samples.append((time.perf_counter(), rss()))
        time.sleep(0.2)
threading.Thread(target=sample, daemon=True).start()
started, cpu = time.perf_counter(), time.process_time()
if mode == "parse":
    from proofs.trace.files import lines
    n = sum(1 for _ in lines(path, loads))
    out = {"lines": n}
elif mode == "read":  # the parse and the typed reading of every entry (what check_file does before any rule)
    from proofs.trace.check import _ServingStream
    from proofs.trace.files import lines, read_header
    from spec.registry import Violation
    stream_of_lines = lines(path, loads)
    number, value = next(stream_of_lines)
    stream = _ServingStream(read_header(number, value, "serving")[1], "fcfs")
    n = 0
    for number, value in stream_of_lines:
        if not (isinstance(value, dict) and "totals" in value):
            assert not isinstance(stream.read_entry(number, value, stream.known, where=f"line {number}"), Violation)
            n += 1
    out = {"lines": n}
elif mode == "reference":  # the spec's own FCFS run of the header's call: what the policy alone costs, nothing read
    import spec.serving
    header = loads(open(path, "rb").readline())
    out = {"lines": len(spec.serving.run(header["requests"], header["config"])["trace"])}
else:
    from proofs.trace.check import check_file
    report = check_file(path, policy=None if mode == "check" else "none", loads=loads)
    out = {"verdict": report.verdict, "entries": report.entries,
           "violation": None if report.violation is None else report.violation.message}
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
done = True
samples.append((time.perf_counter(), rss()))
def at(fraction):
    t = started + fraction * seconds
    return max(r for s, r in samples if s <= t + 0.2) if samples else None
out.update(seconds=seconds, cpu=cpu, rss_10=at(0.1), rss_50=at(0.5), rss_100=at(1.0))
print(json.dumps(out))
"""


def child(mode: str, path: str, lib: str) -> dict:
    run = subprocess.run([sys.executable, "-c", CHILD, mode, path, lib], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                             [os.getcwd()] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])))
    if run.returncode != 0:
        raise SystemExit(f"child {mode} failed: {run.stderr}")
    return json.loads(run.stdout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json-lib", action="append", choices=("json", "schedcheck", "orjson", "msgspec"), default=None)
    parser.add_argument("--file", default=None, help="the trace file (default /tmp/bench_trace_<ticks>.jsonl)")
    parser.add_argument("--modes", nargs="+", default=["parse", "check", "check-none"])
    args = parser.parse_args(argv)
    libs = args.json_lib or ["json"]
    path = args.file or f"/tmp/bench_trace_{args.ticks}.jsonl"
    if not os.path.exists(path):
        made = generate(path, args.ticks)
        print(f"generated {path}: {made['entries']} entries, {made['requests']} requests, "
              f"{made['bytes'] / 1e6:.0f} MB in {made['seconds']:.0f} s", flush=True)
    runs: dict = {(lib, mode): [] for lib in libs for mode in args.modes}
    for _ in range(args.runs):  # interleaved, so that a change in the machine's load hits every figure alike
        for lib in libs:
            for mode in args.modes:
                runs[lib, mode].append(child(mode, path, lib))
    stdlib: dict = {}  # the stdlib's parse (wall, cpu): the baseline the issue names
    for lib in libs:
        medians = {}
        cpus = {}
        for mode in args.modes:
            done = runs[lib, mode]
            seconds = statistics.median(r["seconds"] for r in done)
            medians[mode] = seconds
            cpus[mode] = statistics.median(r["cpu"] for r in done)
            last = done[-1]
            extra = f"  {last['lines']} lines" if mode in ("parse", "read", "reference") else (
                f"  verdict {last['verdict']} ({last['entries']} entries)  rss MB at 10/50/100%: "
                f"{last['rss_10'] / 1e6:.0f} / {last['rss_50'] / 1e6:.0f} / {last['rss_100'] / 1e6:.0f}")
            print(f"{lib:6} {mode:10} median {seconds:8.1f} s  runs {[round(r['seconds'], 1) for r in done]}  "
                  f"cpu median {cpus[mode]:.1f} s runs {[round(r['cpu'], 1) for r in done]}{extra}", flush=True)
        for mode in args.modes:
            if mode != "parse" and "parse" in medians:  # read / parse: the floor of any per-entry check
                print(f"{lib:6} {mode:10} / parse = {medians[mode] / medians['parse']:.2f}x wall, "
                      f"{cpus[mode] / cpus['parse']:.2f}x cpu", flush=True)
        if lib == "json" and "parse" in medians:
            stdlib = {"wall": medians["parse"], "cpu": cpus["parse"]}
        elif stdlib:
            for mode in args.modes:
                print(f"{lib:6} {mode:10} / json parse = {medians[mode] / stdlib['wall']:.2f}x wall, "
                      f"{cpus[mode] / stdlib['cpu']:.2f}x cpu", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
