"""How small the stateful test's counterexamples are, against the brute-force minimum.

For every engine of the online corpora (tests/corpus/serving/online_buggy, tests/corpus/online_buggy) and
every seed, ``run_stateful`` (100 programs, the default shrinking) gives a failing program; its size is the
report's count of calls (make, each add that reached the engine, each abort, each step).  Then a brute-force
search enumerates every program up to that size, smallest first, and stops at the first one that breaks the
same invariant: the minimum.  It enumerates, in one sandbox child (``proofs.sandbox.run_once``), the
programs a client of the protocol can make within a box of values: each config value (the chapter's model:
slots) and each request's prompt and output (tokens) from 1 to the largest the shrunk programs of that engine
and invariant use (at least 2), chunked prefill (continuous) both ways, every request arriving at the tick it
is added, aborts of any live request, steps; a request's id is its rank among the adds.  The box holds every
shrunk counterexample's numbers, so a minimum below a shrunk size is a program the shrinker missed.  Programs
are explored depth-first by size (iterative deepening), each one run from the start on a fresh engine in that
child (no copy of an engine is ever taken); an engine call is cut off after 0.5 s (``signal.setitimer``: a
hang is ``termination`` once the program hangs again with a 5 s limit) and ``os._exit`` is replaced, in that child only, by an exception (a death is
``termination``).

    python benchmarks/bench_stateful_shrink.py [--seeds 0 1 2] [--write docs/verify.md]
    python benchmarks/bench_stateful_shrink.py --baseline f8ddc36 [--seeds 0 1 2]

With ``--baseline COMMIT`` each seed's shrunk size is also measured on COMMIT's tree (``git archive``),
side by side.  Times are wall-clock seconds of each ``run_stateful`` (shrinking included), for scale only.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPORA = (("serving", ROOT / "tests" / "corpus" / "serving" / "online_buggy"),
           ("chapter", ROOT / "tests" / "corpus" / "online_buggy"))
SMALL = (1, 2)  # every field of the enumerated programs takes at least these values
CALL_SECONDS = 0.5
CONFIRM_FACTOR = 10  # a time-out is confirmed with this many times the limit
MARKER = "<!-- bench_stateful_shrink -->"

SHRUNK = r"""
import json, sys, time
from proofs.online.stateful import run_stateful
from proofs.targets import parse_target
path, model, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
started = time.monotonic()
found = run_stateful(parse_target(path + ":make"), model, 100, seed=seed, call_seconds=0.5)
seconds = time.monotonic() - started
if found is None:
    print(json.dumps(None))
else:
    text = found[2]
    calls = [line for line in text.splitlines() if line and not line.startswith("#")]
    largest = {}  # per field, the largest number of the program (configs, requests)
    for kind, args in (found[3] if len(found) > 3 else ()):
        items = [args[0]] if args and isinstance(args[0], dict) else []
        if kind == "make" and len(args) == 2:
            items = [{"slots": args[0]}]
        for item in items:
            for key, value in item.items():
                if type(value) is int and key not in ("id", "arrival"):
                    largest[key] = max(largest.get(key, 0), value)
    print(json.dumps({"invariant": found[0], "size": len(calls), "seconds": round(seconds, 1), "program": calls,
                      "largest": largest}))
"""


def shrunk(path: pathlib.Path, model: str, seed: int, tree: str | None = None) -> dict | None:
    """One ``run_stateful`` in a process of its own (on ``tree``'s code when given)."""
    env = dict(os.environ, PYTHONPATH=tree or str(ROOT))
    # cwd is the tree: ``python -c`` puts it first on sys.path, before PYTHONPATH
    run = subprocess.run([sys.executable, "-c", SHRUNK, str(path), model, str(seed)], capture_output=True, text=True,
                         cwd=tree or ROOT, env=env, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"run_stateful on {path.name}, seed {seed}: {run.stderr.strip()[-500:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


# -- the brute force, in a sandbox child --------------------------------------------------------


class _Cut(BaseException):
    """An engine call cut off (a hang), in the enumerating child (a BaseException: the engine cannot catch it)."""


class _Died(BaseException):
    """A call of ``os._exit`` by the engine, in the enumerating child."""


class _Direct:
    """The engine in this process, answering the client's messages as ``proofs.online.driver.session`` does."""

    def __init__(self, make, seconds: float = CALL_SECONDS) -> None:
        self.make, self.engine = make, None
        self.call_seconds = seconds

    def __deepcopy__(self, memo):
        twin = _Direct(self.make)
        twin.engine = copy.deepcopy(self.engine, memo)
        return twin

    def call(self, op, *args):
        from proofs.online.driver import NO_VIEW
        from proofs.sandbox import Outcome

        def alarm(signum, frame):
            raise _Cut(f"did not return within {self.call_seconds:g} s")

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, self.call_seconds)
        try:
            if op == "make":
                self.engine, answer = self.make(*args), None
            elif op == "add":
                answer = (getattr(self.engine, "add_request", None) or self.engine.submit)(*args)
            elif op == "abort":
                answer = self.engine.abort(*args)
            else:
                entry = self.engine.step()
                answer = (entry, self.engine.view() if callable(getattr(self.engine, "view", None)) else NO_VIEW)
        except _Cut as error:
            return Outcome("timed_out", error=str(error))
        except _Died as error:
            return Outcome("died", error=str(error))
        except BaseException as error:  # the engine's failure, as the sandbox would report it
            return Outcome("raised", error=f"{type(error).__name__}: {error}", error_type=type(error).__name__)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return Outcome("returned", result=answer)


def _values(largest: dict, key: str) -> range:
    """The values a field takes in the enumeration: 1 up to the largest the shrunk programs use, at least 2."""
    return range(1, max(SMALL[-1], largest.get(key, 0)) + 1)


def _configs(model: str, largest: dict):
    if model == "chapter":
        yield from ((slots, continuous) for slots in _values(largest, "slots") for continuous in (False, True))
        return
    keys = ("max_seqs", "token_budget", "block_size", "num_blocks")
    for values in itertools.product(*(_values(largest, key) for key in keys), (False, True)):
        yield (dict(zip(keys + ("chunked_prefill",), values)),)


def _items(model: str, request_id: int, arrival: int, largest: dict):
    if model == "chapter":
        for tokens in _values(largest, "tokens"):
            yield {"id": request_id, "arrival": arrival, "tokens": tokens}
        return
    for prompt, output in itertools.product(_values(largest, "prompt"), _values(largest, "output")):
        yield {"id": request_id, "arrival": arrival, "prompt": prompt, "output": output}


def brute_force(path: str, model: str, invariant: str, largest_size: int, largest: dict) -> dict:
    """The fewest calls of a program breaking ``invariant`` (at most ``largest``), and how many programs were run."""
    import importlib.util

    import proofs.online.stateful as stateful

    def exit_raises(code=0):
        raise _Died(f"the target's process died (exit code {code})")

    os._exit = exit_raises  # this child only: a death is a failure to count, not the end of the search
    spec = importlib.util.spec_from_file_location("engine_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    base = stateful.ServingClient if model == "serving" else stateful.ChapterClient

    class Machine(base):
        policy = "fcfs"

    Machine.record = {"deadline": float("inf"), "since": None, "shrink": float("inf")}
    counted = {"programs": 0}

    def run(actions: list, seconds: float = CALL_SECONDS):
        """The program ``actions`` on a fresh engine: (client, None), or (None, (invariant broken, its calls)).
        A time-out counts only if the program times out again with a limit ``CONFIRM_FACTOR`` times larger (a
        loaded machine may stall a call)."""
        machine = Machine()
        machine.process = _Direct(module.make, seconds)
        counted["programs"] += 1
        try:
            for kind, args in actions:
                getattr(machine, "do_" + kind)(*args)
        except stateful.StateMismatch as error:
            if ": timed_out:" in str(error) and seconds == CALL_SECONDS:
                return run(actions, CALL_SECONDS * CONFIRM_FACTOR)
            return None, (error.invariant, list(machine.program))
        return machine, None

    def cost(machine) -> int:
        """The calls a program has cost once its pending adds reach the engine (they go with the next step)."""
        return len(machine.program) + len(machine.pending) + (1 if machine.pending else 0)

    def search(actions: list, machine, bound: int, aborted_after: int, adding: bool) -> list | None:
        """Depth-first: a program of at most ``bound`` calls, extending ``actions``, that breaks ``invariant``."""
        moves = []
        if not adding and model == "serving":  # this tick: aborts (by increasing id), then adds, then the step
            moves += [("abort", (i,)) for i in sorted(machine.shadow.live)
                      if i > aborted_after and machine.shadow.rows[i].request.abort is None]
        next_id = sum(1 for kind, _ in actions if kind == "add")  # ids in the order of the adds
        moves += [("add", (item,)) for item in _items(model, next_id, machine.next_tick(), largest)
                  if machine.in_domain(item)]
        if machine.shadow.live or machine.pending:
            moves.append(("step", ()))
        for kind, args in moves:
            grows = {"add": 0, "abort": 1, "step": len(machine.pending) + 1}[kind]
            if kind == "add":
                if cost(machine) + (1 if not machine.pending else 0) + 1 > bound:
                    continue
            elif len(machine.program) + grows > bound:
                continue
            longer = actions + [(kind, args)]
            twin, broken = run(longer)
            if broken is not None:
                if broken[0] == invariant:
                    return broken[1]
                continue  # another invariant broke first: not this bug's program
            found = search(longer, twin, bound, args[0] if kind == "abort" else -1, kind == "add")
            if found is not None:
                return found
        return None

    for bound in range(2, largest_size + 1):
        for config in _configs(model, largest):
            machine, broken = run([("make", config)])
            if broken is not None:
                if broken[0] == invariant:
                    return {"minimum": 1, "programs": counted["programs"], "program": broken[1]}
                continue
            found = search([("make", config)], machine, bound, -1, False)
            if found is not None:
                return {"minimum": len(found), "programs": counted["programs"], "program": found}
    return {"minimum": None, "programs": counted["programs"], "program": []}


def minimum(path: pathlib.Path, model: str, invariant: str, largest_size: int, largest: dict) -> dict:
    """``brute_force`` in a sandbox child (the engines under test never run in this process)."""
    from proofs.sandbox import run_once

    outcome = run_once(brute_force, str(path), model, invariant, largest_size, largest, seconds=3600.0)
    if outcome.kind != "returned":
        raise RuntimeError(f"brute force on {path.name}: {outcome.kind}: {outcome.error}")
    return outcome.result


def old_tree(commit: str, scratch: str) -> str:
    path = pathlib.Path(scratch) / commit
    path.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)
    return str(path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--baseline", metavar="COMMIT", help="also shrink on COMMIT's tree, side by side")
    parser.add_argument("--write", metavar="DOC", help="replace the table between the markers in DOC")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        tree = old_tree(args.baseline, scratch) if args.baseline else None
        for model, folder in CORPORA:
            for path in sorted(folder.glob("[a-z]*.py")):
                found = {seed: shrunk(path, model, seed) for seed in args.seeds}
                before = {seed: shrunk(path, model, seed, tree) for seed in args.seeds} if tree else {}
                invariants = sorted({f["invariant"] for f in found.values() if f is not None})
                if not invariants:
                    rows.append((path.stem, model, None, found, before, None))
                for invariant in invariants:
                    same = [f for f in found.values() if f and f["invariant"] == invariant]
                    largest = {}
                    for f in same:
                        for key, value in f["largest"].items():
                            largest[key] = max(largest.get(key, 0), value)
                    least = minimum(path, model, invariant, max(f["size"] for f in same), largest)
                    least["largest"] = largest
                    rows.append((path.stem, model, invariant, found, before, least))
                print(f"{path.stem}: shrunk {[f and (f['invariant'], f['size']) for f in found.values()]}, minimum "
                      f"{[row[5] and (row[5]['minimum'], row[5]['program']) for row in rows if row[0] == path.stem]}"
                      + (f", at {args.baseline}: {[b and (b['invariant'], b['size']) for b in before.values()]}"
                         if tree else ""), flush=True)
    seeds = ", ".join(map(str, args.seeds))
    header = [f"| online engine | model | invariant | calls after shrinking (seeds {seeds}) | brute-force minimum "
              "| programs enumerated | values up to | seconds (median) |"]
    header.append("| --- | --- | --- | --- | ---: | ---: | --- | ---: |")
    if args.baseline:
        header = [header[0] + f" calls at {args.baseline} |", header[1] + " --- |"]
    lines = []
    for name, model, invariant, found, before, least in rows:
        def sizes(runs):
            return ", ".join(("none" if f is None else str(f["size"]) if f["invariant"] == invariant
                              else f"({f['invariant']})") for f in runs.values())
        seconds = statistics.median([f["seconds"] for f in found.values() if f] or [0])
        box = ", ".join(f"{k} {max(2, v)}" for k, v in sorted(least["largest"].items())) if least else "-"
        line = (f"| {name} | {model} | {invariant or 'none found'} | {sizes(found)} "
                f"| {least['minimum'] if least else '-'} | {least['programs'] if least else '-'} | {box} | {seconds:.1f} |")
        if args.baseline:
            line += f" {sizes(before)} |"
        lines.append(line)
    table = "\n".join(header + lines)
    print(table)
    if args.write:
        doc = pathlib.Path(args.write)
        text = doc.read_text()
        start, end = text.index(MARKER), text.rindex(MARKER)
        doc.write_text(text[: start + len(MARKER)] + "\n" + table + "\n" + text[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
