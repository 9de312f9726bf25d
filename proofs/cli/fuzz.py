"""``schedcheck fuzz``: verify's properties as a long campaign on HypoFuzz, sharing the example database.

What it establishes: what verify's search establishes, for the calls the campaign
tried: each invariant of the model's registry held on them (a search, not a proof).
A campaign has no planned end, so it never passes: stopped (``--max-seconds``, Ctrl-C)
with nothing found, it says ``no failure in N calls`` and exits 0; a failure is
minimised, confirmed in a fresh process, saved and reported exactly as verify would
(exit 1); a campaign that cannot run is an error (exit 2).

What it runs, in order:
1. the signature check and the replay of what is known already, as verify's first
   step: the counterexamples saved for this target (``--save-dir``), then those any
   campaign published in the example database (``--db``: a directory, or Redis shared
   by several machines); one that still fails is the run's failure, and nothing is fuzzed;
2. HypoFuzz (``hypothesis fuzz``, in a process group of its own, with its dashboard on
   ``--port``) over the items of ``pytest --schedcheck TARGET --schedcheck-fuzz``: one
   Hypothesis test per invariant (proofs.fuzz.properties), ``--workers`` processes, the
   session's default database set to ``--db``;
3. every ``POLL_SECONDS`` it looks for a worker's finding, and every
   ``SHARED_POLL_SECONDS`` for a counterexample another campaign published; on either it
   stops HypoFuzz and minimises the finding with verify's own minimiser in a fresh
   sandbox (a time-out or death that does not happen again is flaky, logged, and the campaign goes on;
   a wrong result is a counterexample whether or not it happens again),
   saves it, publishes it in the database for every other worker, and reports it.

Bounds: the target runs in the sandbox (a hang or a crash is a ``termination`` finding,
never a hung campaign); ``--max-seconds`` bounds the fuzzing, and the stop, the
minimising and the report take at most ``STOP_SECONDS + MINIMISE_SECONDS`` more.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from proofs import models
from proofs.cli.paths import OUTPUT_PATHS_HELP, output_problem
from proofs.cli.usage import usage_error
from proofs.fuzz.properties import CHECKS
from proofs.outcomes import EXIT_CODES_HELP, FAIL, exit_code

DEFAULT_PORT = 9999  # HypoFuzz's own default
POLL_SECONDS = 0.5
SHARED_POLL_SECONDS = 5.0
STOP_SECONDS = 5.0  # after SIGINT, HypoFuzz's group gets SIGKILL
MINIMISE_SECONDS = 30.0
SHARED_KEY = b"schedcheck-fuzz.counterexamples:"  # + model:policy:target, in the example database
NO_FAILURE = "no failure"  # the word of a campaign stopped with nothing found: never "pass"

CAMPAIGN_HELP = """campaign outcomes:
  1  fail        a counterexample, minimised and confirmed in a fresh process, saved and reported as verify does
  0  no failure  stopped (--max-seconds, Ctrl-C) with nothing found: a campaign has no planned end, so it is
                 never a pass; the last line says how many calls it made
  2  error       usage error, target not loadable, HypoFuzz not installed or stopped by itself"""


def add_parsers(commands) -> None:
    from proofs.cli.verify import add_load_timeout

    fuzz = commands.add_parser(
        "fuzz",
        help="run verify's properties as a long HypoFuzz campaign (many workers, a shared database)",
        description="Fuzz TARGET with HypoFuzz until a counterexample, Ctrl-C or --max-seconds. The properties "
        "are the items of `pytest --schedcheck TARGET --schedcheck-fuzz`: one per invariant of the registry.",
        epilog=CAMPAIGN_HELP + "\n\n" + EXIT_CODES_HELP + "\n\n" + OUTPUT_PATHS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fuzz.add_argument("target", nargs="?", default=None,
                      help="path/to/file.py:function or package.module:function (default: our impl)")
    fuzz.add_argument("--model", choices=models.NAMES, default=models.DEFAULT,
                      help="which model of the spec judges the target (default %(default)s)")
    fuzz.add_argument("--policy", default=None, metavar="fcfs|none", help="serving model: fcfs (default) or none")
    fuzz.add_argument("--workers", type=int, default=1, metavar="N", help="HypoFuzz worker processes (default 1)")
    fuzz.add_argument("--check", action="append", choices=CHECKS, default=None, metavar="NAME",
                      help="fuzz only this search of verify's: " + ", ".join(CHECKS) + " (repeatable; default all; "
                      "HypoFuzz spends a hundred inputs on one before it switches, and a deterministic input costs "
                      "seven calls in fresh processes)")
    fuzz.add_argument("--max-seconds", type=float, default=None, metavar="S",
                      help="stop fuzzing after S seconds (default: run until a failure or Ctrl-C)")
    fuzz.add_argument("--db", default=None, metavar="DIR|redis://HOST:PORT[/DB]",
                      help="the example database shared with verify: a directory (default .hypothesis/examples) "
                      "or a Redis server shared between machines, used together with .hypothesis/examples")
    fuzz.add_argument("--save-dir", default=None, help="where counterexamples are saved (default verify's)")
    fuzz.add_argument("--call-timeout", type=float, default=1.0, metavar="SECONDS", help="wall-clock limit per call")
    add_load_timeout(fuzz)
    fuzz.add_argument("--port", type=int, default=DEFAULT_PORT, help="the dashboard's port on localhost (default %(default)s)")
    fuzz.add_argument("--no-dashboard", action="store_true", help="run without HypoFuzz's dashboard")
    fuzz.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    fuzz.set_defaults(handler=run_fuzz)


def shared_key(target_text: str, model) -> bytes:
    """The key under which campaigns publish the counterexamples of ``target_text`` in the example database."""
    return SHARED_KEY + f"{model.name}:{model.policy}:{target_text}".encode()


def publish(database, cex, target_text: str) -> None:
    """Put a confirmed counterexample in the example database, for every campaign that shares it."""
    if database is not None:
        value = json.dumps(dict(cex.to_json(), target=target_text)).encode()  # as saved: key order kept
        database.save(shared_key(target_text, cex_model(cex)), value)


def cex_model(cex):
    return models.get(cex.model)


def shared_counterexamples(database, target_text: str, model) -> list:
    """The counterexamples published for this target and model, as (value, Counterexample), oldest format ignored."""
    from proofs.counterexample import Counterexample

    if database is None:
        return []
    found = []
    for value in database.fetch(shared_key(target_text, model)):
        try:
            data = json.loads(value)
            if data.get("target") != target_text:
                continue
            found.append((value, Counterexample.from_json(data)))
        except (ValueError, KeyError, TypeError, SyntaxError, AttributeError, RecursionError):
            continue  # damaged, or not one of ours
    return found


def _replay(process, model, cexes, save_dir: str | None):
    """The first of the saved counterexamples (``save_dir``), then of ``cexes``, that still fails, as a Found."""
    from proofs.search.engine import Found, Search

    search = Search(process, time.monotonic() + MINIMISE_SECONDS, model=model, saved_dir=save_dir)
    search.run(only=("replay",))
    if search.found:
        return search.found[0], "saved in " + save_dir
    for cex in cexes:
        same = [f for f in search.replay(cex, attempts=1).findings if f.invariant == cex.property]
        if same:
            return Found(cex._replace(message=same[0].message), same[0].result), "published in the example database"
    return None, ""


def _minimise(process, model, cex, kind: str = "returned"):
    """Verify's minimiser on a worker's finding, confirmed in a fresh sandbox: (Found or None, flaky entries).
    ``kind`` is the outcome the worker saw: a result or exception is a counterexample even if it does not
    happen again (proofs.search.engine), a time-out or death may be flaky."""
    from proofs.search.engine import Found, Search
    from proofs.search.judge import Finding

    search = Search(process, time.monotonic() + MINIMISE_SECONDS, model=model)
    call, wanted = tuple(cex.call), cex.property
    search._seen = Finding(wanted, cex.message, kind=kind)
    if cex.check == "deterministic":
        small, finding = search._minimize_repeated(call, wanted)
    elif cex.check == "validation":
        small, finding = search._confirm_invalid(call, wanted, cex.rule)
    else:
        small, finding = search._minimize_valid(call, wanted)
    if finding is None:
        return None, search.flaky
    check = "deterministic" if finding.invariant == "deterministic" else cex.check
    return Found(search.counterexample(check, small, finding, cex.rule), finding.result), search.flaky


# -- the campaign's process and files ----------------------------------------------------


def _pytest_args(args, folder: str, model, target_text: str) -> list[str]:
    ini = os.path.join(folder, "pytest.ini")
    with open(ini, "w", encoding="utf-8") as handle:
        handle.write("[pytest]\n")  # none of the project's own options, test paths or plugins' settings
    pytest_args = ["-p", "no:cacheprovider", "-c", ini, "--rootdir", folder, folder,
                   "--schedcheck", target_text, "--schedcheck-fuzz", "--schedcheck-model", model.name,
                   "--schedcheck-call-timeout", f"{args.call_timeout:g}",
                   "--schedcheck-load-timeout", f"{args.load_timeout:g}"]
    for check in args.check or ():
        pytest_args += ["--schedcheck-fuzz-check", check]
    if args.policy is not None:
        pytest_args += ["--schedcheck-policy", args.policy]
    if args.db is not None:
        pytest_args += ["--schedcheck-db", args.db]
    return pytest_args


def _start_hub(args, folder: str, model, target_text: str):
    command = [sys.executable, "-m", "proofs.fuzz.hub", "-n", str(args.workers)]
    command += ["--no-dashboard"] if args.no_dashboard else ["--host", "localhost", "--port", str(args.port)]
    command += ["--", *_pytest_args(args, folder, model, target_text)]
    from proofs.fuzz.properties import CAMPAIGN_DIR

    log = open(os.path.join(folder, "hypofuzz.log"), "wb")
    try:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=dict(os.environ, **{CAMPAIGN_DIR: folder}))
    finally:
        log.close()


def _stop_hub(hub) -> None:
    """SIGINT to HypoFuzz's process group, SIGKILL after STOP_SECONDS (workers' sandbox children die with them)."""
    if hub.poll() is None:
        try:
            os.killpg(hub.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            hub.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(hub.pid, signal.SIGKILL)  # the group: workers and the dashboard too
    except (ProcessLookupError, PermissionError):
        pass
    hub.wait()


def _counts(folder: str) -> tuple[int, dict]:
    calls, examples = 0, {}
    for path in glob.glob(os.path.join(folder, "worker-*.json")):
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            continue
        calls += int(data.get("calls", 0))
        for name, count in data.get("examples", {}).items():
            examples[name] = examples.get(name, 0) + int(count)
    return calls, dict(sorted(examples.items()))


def _findings(folder: str) -> list:
    """The workers' findings: (Counterexample, the kind of outcome seen), oldest first."""
    from proofs.counterexample import Counterexample

    found = []
    for path in sorted(glob.glob(os.path.join(folder, "found-*.json")), key=os.path.getmtime):
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
            found.append((Counterexample.from_json(data["counterexample"]), data.get("kind", "returned")))
        except (OSError, ValueError, KeyError, TypeError, SyntaxError):
            continue
        finally:
            os.remove(path)
    return found


def _harness_errors(folder: str) -> list[str]:
    errors = []
    for path in glob.glob(os.path.join(folder, "harness-error-*.json")):
        try:
            with open(path, encoding="utf-8") as handle:
                errors.append(json.load(handle)["error"])
        except (OSError, ValueError, KeyError):
            errors.append(path)
    return errors


def _log_tail(folder: str, lines: int = 12) -> str:
    try:
        with open(os.path.join(folder, "hypofuzz.log"), encoding="utf-8", errors="replace") as handle:
            return "\n".join(handle.read().splitlines()[-lines:])
    except OSError:
        return ""


class _Stopped(Exception):
    """SIGTERM: stop the campaign as Ctrl-C does."""


def _on_sigterm(signum, frame):
    raise _Stopped


# -- the command ---------------------------------------------------------------------------


def run_fuzz(args: argparse.Namespace) -> int:
    started = time.monotonic()
    from proofs.report import ci as ci_reports
    from proofs.sandbox import TargetProcess
    from proofs.search.database import open_database
    from proofs.targets import TargetError, parse_target

    for option, value, rule in (
        ("--workers", args.workers, "an int >= 1"),
        ("--max-seconds", args.max_seconds, "seconds > 0"),
        ("--call-timeout", args.call_timeout, "seconds > 0"),
        ("--load-timeout", args.load_timeout, "seconds > 0"),
    ):
        if value is not None and not value > 0:
            return usage_error(f"{option}={value:g}: expected {rule}")
    if not 1 <= args.port <= 65535:
        return usage_error(f"--port={args.port}: expected a port from 1 to 65535")
    if args.db == "none":
        return usage_error("--db none: a campaign shares its findings through the example database; "
                            "give a directory or redis://HOST:PORT")
    save_dir = args.save_dir or ci_reports.DEFAULT_SAVE_DIR
    problem = output_problem({"--json": args.json},
                             {"--save-dir": args.save_dir, "--db": None if args.db is None or "://" in args.db else args.db})
    if problem:
        return usage_error(problem)
    try:
        import hypofuzz
    except ImportError as error:
        return usage_error(f"HypoFuzz is not installed ({error}): pip install 'schedcheck[fuzz]'")
    try:
        database = open_database(args.db)
        model = models.get(args.model, args.policy)
        target = parse_target(args.target or model.default_target)
    except (ValueError, TargetError) as error:
        return usage_error(str(error))

    def fresh_process():
        return TargetProcess(target, call_seconds=args.call_timeout, shape=model.shape, contract=model.contract_part,
                             load_seconds=args.load_timeout,
                             adapter=getattr(model, "adapter", None))

    try:
        with fresh_process() as process:
            process.start()
            if process.signature_problem:
                return usage_error(f"target {target.text!r}: {process.signature_problem}")
            published = shared_counterexamples(database, target.text, model)
            known = {value for value, _ in published}
            found, where = _replay(process, model, [cex for _, cex in published], save_dir)
    except TargetError as error:
        return usage_error(str(error))
    except (KeyboardInterrupt, _Stopped):
        return _report_no_failure(args, target.text, model, 0, {}, [], started)
    if found is not None:
        how = f"replayed first: a counterexample {where} still fails; nothing fuzzed"
        return _report_failure(args, target.text, model, database, found, how, 0, {}, started)

    deadline = started + args.max_seconds if args.max_seconds else math.inf
    flaky: list = []
    folder = tempfile.mkdtemp(prefix="schedcheck-fuzz-")
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        print(f"schedcheck fuzz: HypoFuzz {hypofuzz.__version__}, {args.workers} worker"
              f"{'s' if args.workers > 1 else ''} on {target.text}"
              + ("" if args.no_dashboard else f"; dashboard http://localhost:{args.port}/")
              + ("" if args.max_seconds else "; stop with Ctrl-C"), file=sys.stderr, flush=True)
        while True:
            hub = _start_hub(args, folder, model, target.text)
            reason, findings, new_shared = None, [], []
            last_shared = time.monotonic()
            try:
                while reason is None:
                    time.sleep(POLL_SECONDS)
                    findings = _findings(folder)
                    if findings:
                        reason = "found"
                    elif _harness_errors(folder):
                        reason = "harness error"
                    elif hub.poll() is not None:
                        reason = "hub exited"
                    elif time.monotonic() >= deadline:
                        reason = "time"
                    elif time.monotonic() - last_shared >= SHARED_POLL_SECONDS:
                        last_shared = time.monotonic()
                        new_shared = [(v, c) for v, c in shared_counterexamples(database, target.text, model)
                                      if v not in known]
                        if new_shared:
                            reason = "shared"
            except (KeyboardInterrupt, _Stopped):
                reason = "stopped"
            finally:
                _stop_hub(hub)
            findings += _findings(folder)  # what a worker wrote while it was being stopped
            calls, examples = _counts(folder)
            if reason == "harness error":
                print(f"schedcheck: error: the sandbox failed in a worker: {_harness_errors(folder)[0]}", file=sys.stderr)
                return 2
            if reason == "hub exited" and not findings:
                print(f"schedcheck: error: HypoFuzz stopped by itself (exit {hub.returncode}):\n{_log_tail(folder)}",
                      file=sys.stderr)
                return 2
            if reason in ("time", "stopped") and not findings:
                return _report_no_failure(args, target.text, model, calls, examples, flaky, started)
            if reason == "shared" and not findings:
                known |= {value for value, _ in new_shared}
                with fresh_process() as process:
                    process.start()
                    found, _ = _replay(process, model, [cex for _, cex in new_shared], None)
                if found is not None:
                    how = "published in the example database by another campaign while this one ran; replayed here"
                    return _report_failure(args, target.text, model, database, found, how, calls, examples, started)
                continue
            try:
                with fresh_process() as process:
                    process.start()
                    found, new_flaky = _minimise(process, model, *findings[0])
            except (KeyboardInterrupt, _Stopped):
                print(f"schedcheck: stopped while a {findings[0][0].property} finding was being minimised: not confirmed, "
                      f"not saved (run `schedcheck verify {target.text}`)", file=sys.stderr)
                return 2
            flaky += new_flaky
            if found is not None:
                how = (f"found by HypoFuzz after {calls} calls in {time.monotonic() - started:.0f} s; "
                       "minimised and confirmed in a fresh process by verify's minimiser")
                return _report_failure(args, target.text, model, database, found, how, calls, examples, started)
            for entry in new_flaky:
                print(f"flaky {entry.get('kind', 'failure')} {entry['invariant']} (size {entry['size']}): "
                      f"{entry['message']}; not counted", file=sys.stderr)
            if reason == "stopped" or time.monotonic() >= deadline:
                return _report_no_failure(args, target.text, model, calls, examples, flaky, started)
            # a flaky finding is not a counterexample: the campaign goes on
    finally:
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(folder, ignore_errors=True)


def _report_failure(args, target_text, model, database, found, how, calls, examples, started) -> int:
    from proofs.cli.verify import _write_json
    from proofs.counterexample import save
    from proofs.report.text import format_counterexample, summary_line

    cex, actual = found
    save(cex, target_text, args.save_dir or _default_save_dir())  # saved before it is reported, as verify does
    publish(database, cex, target_text)
    print("\n".join(format_counterexample(cex, actual)))
    print()
    print(f"campaign: {how}")
    print(summary_line(FAIL, target_text, 1, calls))
    if args.json:
        _write_json(args.json, FAIL, target_text, time.monotonic() - started, [cex], model=model,
                    covered={"calls": calls, "campaign": {"engine": "hypofuzz", "workers": args.workers,
                                                          "examples": examples, "how": how}})
    return exit_code(FAIL)


def _report_no_failure(args, target_text, model, calls, examples, flaky, started) -> int:
    seconds = time.monotonic() - started
    for entry in flaky:
        print(f"flaky {entry.get('kind', 'failure')} {entry['invariant']} (size {entry['size']}): {entry['message']}; "
              "not counted")
        print(f"  {entry['input_repr']}")
        print()
    for name in (c for c in CHECKS if c in (args.check or CHECKS)):  # every search planned, those never run too
        count = examples.get(name, 0)
        note = "" if count else "  (HypoFuzz never picked it: --check " + name + " fuzzes it alone)"
        print(f"hypofuzz  {name:28} {count:>8} examples{note}")
    line = (f"NO FAILURE {target_text}  engine=hypofuzz  {calls} calls in {seconds:.0f} s, {args.workers} worker"
            f"{'s' if args.workers > 1 else ''}: a campaign that found nothing is not a proof, and not a pass")
    print(line)
    if args.json:
        report = {"campaign": NO_FAILURE, "target": target_text, "seconds": round(seconds, 3), "calls": calls,
                  "examples": examples, "workers": args.workers, "engine": "hypofuzz", "counterexamples": [],
                  "flaky": list(flaky)}
        if model.name != models.DEFAULT:
            report |= {"model": model.name, "policy": model.policy}
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
            handle.write("\n")
    return 0


def _default_save_dir() -> str:
    from proofs.report import ci as ci_reports

    return ci_reports.DEFAULT_SAVE_DIR
