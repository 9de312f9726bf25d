"""``schedcheck verify`` and ``schedcheck replay``: find, minimise, save and report counterexamples."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import spec
from proofs import models
from proofs.cli.usage import usage_error
from proofs.models import declared
from proofs.report import ci as ci_reports
from proofs.counterexample import Counterexample, load, save
from proofs.sandbox import DEFAULT_LOAD_SECONDS, HarnessError, InProcessTarget, TargetProcess
from proofs.outcomes import FAIL, INCOMPLETE, PASS, UNKNOWN, exit_code
from proofs.symbolic.bridge import OUTCOMES, ledger
from proofs.report.text import flaky_note, format_counterexample, summary_line
from proofs.targets import TargetError, parse_target
from proofs.cli.paths import HTML_HELP, OUTPUT_PATHS_HELP, output_problem

ENGINES = ("hypothesis", "crosshair")  # the engines of `verify --engine`, in the order `all` runs them
SAVED_DIR = os.path.join(".schedcheck", "counterexamples")
OVERRUN_SECONDS = 10.0  # the run ends within budget + this, whatever the target does
REPLAY_BUDGET = 60.0  # seconds a replay may take (a failure that did not reproduce is tried until then)


class Progress:
    """One self-overwriting status line on a terminal; silent when not a TTY or under CI."""

    def __init__(self, deadline: float, stream=sys.stderr) -> None:
        self.deadline = deadline
        self.stream = stream
        self.enabled = stream.isatty() and not os.environ.get("CI")
        self.last = 0.0

    def __call__(self, check: str, calls: int) -> None:
        now = time.monotonic()
        if self.enabled and now - self.last > 0.2:
            left = max(0.0, self.deadline - now)
            self.stream.write(f"\r  engine=hypothesis  {check:13} {calls:6} calls  {left:4.0f} s left ")
            self.stream.flush()
            self.last = now

    def clear(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 70 + "\r")
            self.stream.flush()


def add_parsers(commands) -> None:
    verify = commands.add_parser(
        "verify",
        help="search a scheduler for a counterexample to the spec",
        description="Check TARGET (default: our impl) against every invariant of the spec.",
        epilog=OUTPUT_PATHS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify.add_argument(
        "target", nargs="?", default=None,
        help="path/to/file.py:function or package.module:function (default: our impl, "
        "impl:schedule, or impl:serve with --model serving)",
    )
    verify.add_argument(
        "--online", default=None, metavar="FILE.py:make",
        help="check an online engine through the clock-free protocol: make(config) (serving) or "
        "make(slots, continuous) (chapter) returns an engine with add_request/abort/step (submit/step); "
        "each call is drive(make(...), ...) in the sandbox, then the stateful test drives it call by call",
    )
    verify.add_argument(
        "--model", choices=models.NAMES, default=models.DEFAULT,
        help="which model of the spec judges the target: chapter, schedule(jobs, slots, continuous); "
        "serving, serve(requests, config) (default %(default)s)",
    )
    verify.add_argument(
        "--policy", default=None, metavar="fcfs|none",
        help="serving model: fcfs (vLLM's FCFS, the default) or none (the policy-free safety invariants "
        "and the metrics only, for an engine with another policy)",
    )
    verify.add_argument("--engine", choices=(*ENGINES, "all"), default="hypothesis")
    verify.add_argument(
        "--budget", type=float, default=None, metavar="SECONDS",
        help="bound on the whole run (default: the profile's, 60 for dev, 120 for ci, 3600 for nightly)",
    )
    verify.add_argument(
        "--profile", choices=("dev", "ci", "nightly"), default="dev",
        help="dev: random, 500 valid calls; ci: seed 0, 200; nightly: 20000 (default %(default)s)",
    )
    verify.add_argument(
        "--workers", type=int, default=1, metavar="N",
        help="spread the checks over N processes (default %(default)s)",
    )
    verify.add_argument("--seed", type=int, default=None, help="make the search repeatable")
    verify.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    ci_reports.add_output_arguments(verify)
    verify.add_argument("--html", metavar="PATH", help=HTML_HELP)
    verify.add_argument("--all", action="store_true", help="go on after the first counterexample")
    verify.add_argument(
        "--invariant", action="append", metavar="NAME",
        help="--engine crosshair only: check only the contracts of these invariants of the registry (repeatable), "
        "so each gets more of the budget; on our impl: " + ", ".join(crosshair_focus(True)) + "; on another target: "
        + ", ".join(crosshair_focus(False)) + ". Rejected elsewhere: the hypothesis engine judges every invariant",
    )
    verify.add_argument(
        "--backend", choices=("hypothesis", "crosshair"), default="hypothesis",
        help="Hypothesis backend; 'crosshair' (hypothesis-crosshair) explores paths symbolically and "
        "calls the target in this process, so a hang or crash of it is not contained",
    )
    verify.add_argument("--call-timeout", type=float, default=1.0, metavar="SECONDS", help="wall-clock limit per call")
    add_load_timeout(verify)
    verify.add_argument("--save-dir", default=SAVED_DIR, help="where counterexamples are saved (default %(default)s)")
    verify.add_argument(
        "--db", default=None, metavar="DIR|none|redis://HOST:PORT[/DB]",
        help="Hypothesis example database: a directory (default .hypothesis/examples), 'none', or a Redis "
        "server shared between machines, used together with .hypothesis/examples",
    )
    verify.add_argument(
        "--examples", type=int, default=None, metavar="N",
        help="valid calls to try (default: the profile's); the other checks scale with it",
    )
    verify.set_defaults(handler=run_verify)

    replay = commands.add_parser(
        "replay", help="run one saved counterexample again and report it",
        epilog=OUTPUT_PATHS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument("counterexample", metavar="CEX.json")
    replay.add_argument("target", nargs="?", default=None, help="default: the target it was found on")
    replay.add_argument("--pytest", metavar="PATH", help="write a pytest regression test for it")
    replay.add_argument("--policy", default=None, metavar="fcfs|none",
                        help="judge with this policy (default: the one it was found under, as saved)")
    replay.add_argument("--budget", type=float, default=REPLAY_BUDGET, metavar="SECONDS",
                        help="how long a failure that depended on earlier calls or chance may be tried again "
                        "(default %(default)g)")
    add_load_timeout(replay)
    replay.set_defaults(handler=run_replay)


def add_load_timeout(parser) -> None:
    """``--load-timeout``: the limit on the target's import, apart from the per-call limit (proofs.sandbox)."""
    parser.add_argument(
        "--load-timeout", type=float, default=DEFAULT_LOAD_SECONDS, metavar="SECONDS",
        help="wall-clock limit on importing the target, done once per run in a child that then forks a fresh "
        "process per call (default %(default)g; vLLM's import takes 10 to 36 s)",
    )


def crosshair_focus(ours: bool, model: str = "chapter") -> list[str]:
    """The registry's invariants that CrossHair has contracts of: on our impl its step's state invariants and validation, else validation;
    for the serving model, its state invariants on our impl and nothing elsewhere."""
    if model == "serving":
        import spec.serving as serving

        return [inv.name for inv in serving.STATE_INVARIANTS] if ours else []
    state = {inv.name for inv in spec.STATE_INVARIANTS} if ours else set()
    return [name for name in spec.NAMES if name in state or name == "validation"]


def _focus_problem(names: list[str], engine: str, model, ours: bool) -> str | None:
    """Why ``--invariant names`` cannot focus this run (one line), or None when every name has contracts to check."""
    unknown = [name for name in names if name not in model.names]
    if unknown:
        return f"--invariant {unknown[0]!r}: not an invariant of the {model.name} model (one of: {', '.join(model.names)})"
    if engine != "crosshair":
        return (f"--invariant {names[0]}: only --engine crosshair can focus on named invariants; --engine {engine} "
                "runs the hypothesis engine, which judges every invariant on every call (drop --invariant, or use "
                "--engine crosshair)")
    focus = crosshair_focus(ours, model.name)
    missing = [name for name in names if name not in focus]
    if missing:
        where = "our impl" if ours else "a target other than our impl"
        return f"--invariant {missing[0]}: CrossHair has no contract of it on {where} (it has: {', '.join(focus)})"
    return None


def run_verify(args: argparse.Namespace) -> int:
    started = time.monotonic()
    from proofs.search.database import open_database
    from proofs.search.profiles import get_profile, search_options

    if args.budget is None:
        args.budget = get_profile(args.profile).budget
    for option, value, rule in (
        ("--budget", args.budget, "seconds > 0"),
        ("--call-timeout", args.call_timeout, "seconds > 0"),
        ("--load-timeout", args.load_timeout, "seconds > 0"),
        ("--examples", args.examples, "an int >= 1"),
        ("--workers", args.workers, "an int >= 1"),
    ):
        if value is not None and not value > 0:
            return usage_error(f"{option}={value:g}: expected {rule}")
    problem = output_problem(
        {"--json": args.json, "--junit": args.junit, "--sarif": args.sarif, "--html": args.html},
        {"--save-dir": None if args.save_dir == SAVED_DIR else args.save_dir,
         "--db": None if args.db in (None, "none") or "://" in args.db else args.db},
    )
    if problem:
        return usage_error(problem)
    try:
        database = open_database(args.db)
    except ValueError as error:
        return usage_error(str(error))
    online = args.online is not None
    if online and args.target is not None:
        return usage_error("give either TARGET or --online FACTORY, not both")
    if online and (args.engine != "hypothesis" or args.backend != "hypothesis" or args.workers > 1):
        return usage_error("--online runs on the hypothesis engine and backend, with one worker")
    try:
        model = models.get(args.model, args.policy, online=online)
    except ValueError as error:
        return usage_error(str(error))
    if model.name not in ("chapter", "serving") and args.engine != "hypothesis":
        return usage_error(f"--engine {args.engine}: the {model.name} model is checked by the hypothesis engine only")
    if model.name != "chapter" and args.backend != "hypothesis":
        return usage_error(f"--backend {args.backend}: the {model.name} model runs on the hypothesis backend only")
    try:
        target = parse_target(args.online or args.target or model.default_target)
        model = declared.for_target(model, target)  # the part of the domain the target declares (DOMAIN), if any
    except TargetError as error:
        return usage_error(str(error))
    ours = target.text == model.default_target  # our own impl: its online scheduler gets the stateful test too
    if model.name == "serving" and args.engine != "hypothesis" and not ours:
        return usage_error(f"--engine {args.engine}: the serving model's CrossHair contracts check our impl "
                           f"({model.default_target}, its online ServingScheduler) only, not {target.text!r}")
    if args.invariant:
        problem = _focus_problem(args.invariant, args.engine, model, ours)
        if problem:
            return usage_error(problem)
    only = None
    if online:
        from proofs.models.online import CHECKS as only
    deadline = started + args.budget
    # --engine all: Hypothesis has the first half of the budget, CrossHair the rest
    hypothesis_deadline = started + args.budget / 2 if args.engine == "all" else deadline
    progress = Progress(hypothesis_deadline)
    found, calls, unfinished, contracts, checks, flaky = [], 0, [], [], None, []
    bounds, statistics, dropped, corners = None, {}, {}, None  # measured over the calls the Hypothesis engine made
    try:
        isolated = args.backend == "hypothesis"
        with (TargetProcess(target, call_seconds=args.call_timeout, shape=model.shape,
                            adapter=getattr(model, "adapter", None), load_seconds=args.load_timeout,
                            contract=model.contract_part) if isolated
              else InProcessTarget(target, shape=model.shape)) as process:
            process.start()
            if process.signature_problem:  # nothing was called: not a counterexample, a target of the wrong shape
                raise TargetError(f"target {target.text!r}: {process.signature_problem}")
            if args.engine in ("hypothesis", "all"):
                from proofs.search.engine import Search

                options = search_options(args.profile, examples=args.examples, seed=args.seed)
                if args.workers > 1 and isolated:
                    from proofs.search.parallel import run_parallel

                    process.close()  # each worker starts its own
                    merged = run_parallel(
                        target, hypothesis_deadline, args.workers, stateful=ours, model=model,
                        find_all=args.all, db=args.db, saved_dir=args.save_dir,
                        call_seconds=args.call_timeout, load_seconds=args.load_timeout, **options,
                    )
                    found += merged.found
                    calls, unfinished, checks = merged.calls, merged.unfinished, list(merged.checks)
                    flaky = list(merged.flaky)
                    bounds, statistics, dropped = merged.bounds, merged.statistics, dict(merged.dropped)
                    corners = merged.coverage
                else:
                    search = Search(
                        process, hypothesis_deadline, find_all=args.all, database=database,
                        saved_dir=args.save_dir, progress=progress, backend=args.backend, model=model, **options,
                    )
                    found += [(f.counterexample, f.actual) for f in search.run(stateful=ours or online, only=only)]
                    calls, unfinished, checks = search.calls_tried, search.unfinished, list(search.checks)
                    flaky = list(search.flaky)
                    bounds, statistics, corners = search.bounds, search.statistics, search.coverage
            if args.engine in ("crosshair", "all") and (args.all or not found):
                from proofs.symbolic.bridge import run_contracts, to_counterexamples
                from proofs.search.engine import Search

                names = tuple(args.invariant) if args.invariant else None
                contracts = run_contracts(target, max(1.0, deadline - time.monotonic()), names, model.name)
                # its minimisation ends within the run's OVERRUN_SECONDS too, whatever the target does
                judge = Search(process, max(time.monotonic(), deadline) - 2.0, model=model)
                found += to_counterexamples(contracts, judge)
                flaky += judge.flaky
            for note, count in process.dropped.items():  # a serial search's (a worker's are merged above)
                dropped[note] = dropped.get(note, 0) + count
    except TargetError as error:
        progress.clear()
        return usage_error(str(error))
    except HarnessError:  # schedcheck's own failure: main prints one line and saves the traceback
        progress.clear()
        raise
    progress.clear()

    from proofs.search.engine import OUR_FACTORIES, budget_to_finish, cut_short

    verdict = run_verdict(found, checks or [], contracts)
    for cex, actual in found:
        # saved before it is reported, with what replay needs to judge it the same way
        extra = {"policy": model.policy} | ({"online": True} if online else {})
        if cex.check == "stateful":  # the factory its program drives
            extra["factory"] = target.text if online else OUR_FACTORIES[model.name]
        save(cex, target.text, args.save_dir, extra)
    if contracts:
        print("\n".join(ledger(contracts)))
        print()
    for cex, actual in found:
        lines = format_counterexample(cex, actual)
        if online and cex.check != "stateful":  # the call shown is what the driver ran the engine on
            lines.insert(1, f"# online: {model.written}, make = {target.text}; the input:")
        print("\n".join(lines))
        print()
    if checks:  # after the counterexamples: a report's first line is the invariant and the engine
        print("\n".join(check_lines(checks)))
    if corners is not None and corners.calls:  # per corner of the coverage model: the calls that reached it
        print("\n".join(corners.lines()))
    if dropped:
        print("\n".join(dropped_lines(dropped)))
    for entry in flaky:  # a time-out or death that passed on a retry: logged, not a counterexample
        print(f"flaky {entry.get('kind', 'failure')} {entry['invariant']} (size {entry['size']}): {entry['message']}; "
              "not counted")
        print(f"  {entry['input_repr']}")
        print()
    engine = "hypothesis+crosshair" if args.engine == "all" else args.engine
    line = summary_line(verdict, target.text, len(found), calls, engine, bounds, corners)
    if contracts:
        counts = {o: sum(c["outcome"] == o for c in contracts) for o in OUTCOMES}
        explored = sum(int(c.get("scenarios") or 0) for c in contracts)
        line += f"; crosshair: {len(contracts)} contracts (" + ", ".join(
            f"{n} {o}" for o, n in counts.items() if n) + f"; {explored} distinct scenarios explored)"
    unknown = [c for c in contracts if c["outcome"] == "unknown"]
    if unknown and not found:
        line += f": CrossHair could not check {len(unknown)} contracts (unknown is not a pass)"
    short = cut_short(checks or [])
    waiting = [c for c in contracts if c["outcome"] == "incomplete"]
    needed = None
    if verdict == "incomplete":
        late = [a for a in short if a.stopped.endswith("deadline")]
        stalled = [a for a in short if a.stopped == "flaky"]
        if late:
            line += "; the budget ran out before " + ", ".join(
                f"{a.check} ({a.tried} of {a.planned} {a.unit})" for a in late) + " finished"
        if stalled:
            line += "; " + ", ".join(f"{a.check} ({a.tried} of {a.planned} {a.unit})" for a in stalled) + (
                " stopped after flaky time-outs or deaths (a larger --call-timeout, not a larger --budget, would let "
                "it finish)")
        needed = budget_to_finish(checks or [], args.budget, share=0.5 if args.engine == "all" else 1.0)
        if waiting:
            from proofs.symbolic.bridge import budget_to_bound

            line += f"; {len(waiting)} CrossHair contracts did not finish their planned search"
            if not stalled:
                needed = max(needed or 0, budget_to_bound(contracts, args.budget))
        if needed:
            line += f"; --budget {needed} would finish it (estimated from the measured rate)"
        line += " (incomplete is not a pass)"
    line += flaky_note(flaky)
    if getattr(model, "declared", None) is not None:  # what was not checked, said with every verdict
        line += f"; {model.declared.describe()}"
    print(line)
    if args.json or args.junit or args.sarif or args.html:
        report = _write_json(args.json, verdict, target.text, time.monotonic() - started, [cex for cex, _ in found],
                             contracts, checks, needed, model, flaky, coverage(calls, bounds, statistics, corners),
                             dropped)
        ci_reports.write_outputs(args, "verify", report, target.text)
        if args.html:
            from proofs.report import html

            html.write(args.html, html.verify_page(report, [actual for _, actual in found], args.save_dir, line, online))
    return exit_code(verdict)


def run_verdict(found, checks, contracts) -> str:
    """The verdict of a verify run: fail on a counterexample; unknown when a contract is unknown;
    incomplete when a planned check or contract did not finish; else pass."""
    from proofs.search.engine import cut_short

    if found:
        return FAIL
    if any(c["outcome"] == "unknown" for c in contracts):
        return UNKNOWN
    if cut_short(checks) or any(c["outcome"] == "incomplete" for c in contracts):
        return INCOMPLETE
    return PASS


def check_lines(checks) -> list[str]:
    """One line per check of the Hypothesis engine: calls tried, calls planned, finished or why not."""
    lines = []
    for account in checks:
        state = "finished" if account.finished else f"not finished ({account.stopped or 'stopped'})"
        lines.append(f"hypothesis  {account.check:22} {account.tried:>6} of {account.planned:<6} {account.unit:9} {state}")
        if account.note:  # what else ran and is not counted, on a line of its own
            lines.append(f"{'':12}({account.note})")
    return lines


def dropped_lines(dropped: dict) -> list[str]:
    """One line per extra result key dropped because it held no plain data (proofs.sandbox.drop_opaque_extras)."""
    return [f"dropped {where} (a {kind}, not plain data) on {calls} call{'s' if calls != 1 else ''}: "
            f"an extra key, never compared" for (where, kind), calls in sorted(dropped.items())]


def coverage(calls: int, bounds, statistics: dict, corners=None) -> dict:
    """What the search covered, measured: calls made, the ranges of the valid ones, per check the cases drawn,
    and per corner of the coverage model the judged calls that reached it (``corners``, proofs.search.coverage)."""
    if not calls and bounds is None:
        return {}
    covered = {"calls": calls, "bounds": bounds.to_json() if bounds is not None else {}}
    covered["statistics"] = {check: dict(sorted(counter.items())) for check, counter in sorted(statistics.items())}
    if corners is not None:
        covered["corners"] = corners.to_json()
    return covered


def _write_json(path: str | None, verdict: str, target: str, seconds: float, counterexamples, contracts=(),
                checks=None, budget_to_finish=None, model=None, flaky=(), covered: dict | None = None,
                dropped: dict | None = None) -> dict:
    report = {
        "verdict": verdict,
        "target": target,
        "seconds": round(seconds, 3),
        "counterexamples": [cex.to_json() for cex in counterexamples],
    }
    report |= covered or {}
    if model is not None and model.name != models.DEFAULT:
        report |= {"model": model.name, "policy": model.policy}
    if getattr(model, "declared", None) is not None:
        report["declared_domain"] = {"rules": model.declared.raw, "text": model.declared.describe()}
    if checks is not None:
        report["checks"] = [account.to_json() for account in checks]
    if budget_to_finish is not None:
        report["budget_to_finish"] = budget_to_finish
    if flaky:
        report["flaky"] = list(flaky)
    if dropped:
        report["dropped"] = [{"key": where, "type": kind, "calls": calls}
                             for (where, kind), calls in sorted(dropped.items())]
    if contracts:
        keys = ("name", "subject", "outcome", "seconds", "planned_seconds", "scenarios", "min_scenarios", "bounds",
                "engine_outcome", "message")
        report["contracts"] = [{key: c[key] for key in keys if key in c} for c in contracts]
    if path:
        with open(path, "w") as handle:
            json.dump(report, handle, indent=2)
            handle.write("\n")
    return report


def run_replay(args: argparse.Namespace) -> int:
    """Run a saved counterexample again, exactly as saved (its history, its program), and say what it showed:
    FAIL (exit 1) when it fails again; PASS (exit 0) when a failure that reproduced alone no longer does;
    DID NOT REPRODUCE (unknown, exit 2) when a failure that needed earlier calls or chance did not happen again."""
    if not args.load_timeout > 0:
        return usage_error(f"--load-timeout={args.load_timeout:g}: expected seconds > 0")
    problem = output_problem({"--pytest": args.pytest}, {})
    if problem:
        return usage_error(problem)
    if not args.budget > 0:
        return usage_error(f"--budget={args.budget:g}: expected seconds > 0")
    try:
        cex, found_on = load(args.counterexample)
    except (OSError, ValueError, KeyError, TypeError, SyntaxError) as error:
        return usage_error(f"cannot read {args.counterexample!r}: {error}")
    try:
        with open(args.counterexample) as handle:
            saved = json.load(handle)
        if isinstance(saved, dict) and "counterexamples" in saved:  # a --json report: its first counterexample
            saved = dict(saved["counterexamples"][0], target=saved.get("target"))
        online = bool(saved.get("online"))
        policy = args.policy or saved.get("policy")
        model = models.get(cex.model, policy, online=online or (cex.check == "trace" and args.target is not None))
        if cex.check == "stateful":  # what is driven is a factory: the one given, or the one it was found with
            from proofs.search.engine import OUR_FACTORIES

            subject = parse_target(args.target or saved.get("factory")
                                   or (found_on if online else OUR_FACTORIES[model.name]))
        elif cex.check == "trace" and args.target is None:  # no factory: the saved trace is checked again
            subject = _TraceFile(found_on or "the saved trace")
        else:
            subject = parse_target(args.target or found_on or model.default_target)
        if not isinstance(subject, _TraceFile):
            model = declared.for_target(model, subject)  # the part of the domain the target declares, if any
    except (TargetError, ValueError) as error:
        return usage_error(str(error))
    outside = getattr(model, "declared", None) is not None and cex.check in ("conformance", "deterministic") \
        and model.base.is_valid(*cex.call) and not model.declared.admits(cex.call)
    if outside:  # never charged to the target: it said it does not support such a call
        return usage_error(f"{args.counterexample}: its call is outside the domain {subject.text} declares "
                           f"({model.declared.describe()}): not judged")
    extra = {"policy": model.policy} | ({"online": True} if online else {})
    if cex.check == "stateful":
        extra["factory"] = subject.text
    try:
        replayed = _replay(cex, subject, model, args.budget, given=args.target is not None,
                           load_seconds=args.load_timeout)
    except TargetError as error:
        return usage_error(str(error))
    wrote = []
    if args.pytest:
        _write_regression_test(args.pytest, cex, subject, extra)
        what = "program" if cex.check == "stateful" else "trace" if cex.check == "trace" else "input"
        if isinstance(subject, _TraceFile):
            wrote = [f"wrote {args.pytest}: a pytest regression test that checks the saved trace again (it fails as "
                     "long as it is this trace; give the factory that recorded it, FILE.py:make, for a test of the "
                     "engine itself)"]
        elif cex.depends or _older_history_claim(cex):
            wrote = [f"wrote {args.pytest}: a pytest regression test that fails while {cex.property} still breaks on "
                     f"this {what} when replayed, and passes when it does not reproduce"]
        else:
            wrote = [f"wrote {args.pytest}: a pytest regression test that passes once {cex.property} holds on this {what}"]
    return _replay_report(cex, subject, replayed, wrote)


def _replay(cex: Counterexample, subject, model, budget: float, given: bool, load_seconds: float = DEFAULT_LOAD_SECONDS):
    """Replay ``cex`` on ``subject`` in the sandbox: (findings, attempts, history, unreadable, program)."""
    from proofs.search.engine import Replayed, Search

    deadline = time.monotonic() + budget
    if cex.check == "step":
        return Replayed(_replay_step(cex), 1, 0.0, 0)
    if cex.check == "trace" and not given:
        return Replayed(_recheck_trace(cex), 1, 0.0, 0)
    if cex.check == "trace":  # a trace recorded from this factory: drive it again on the header's call
        cex = cex._replace(check="conformance")
    if cex.check == "stateful":
        search = Search(None, deadline, model=model)
        search.process = _NoProcess(subject, load_seconds)
        return search.replay(cex, factory=subject.text)
    with TargetProcess(subject, shape=model.shape, adapter=getattr(model, "adapter", None),
                       load_seconds=load_seconds, contract=model.contract_part) as process:
        process.start()
        if process.signature_problem:
            raise TargetError(f"target {subject.text!r}: {process.signature_problem}")
        return Search(process, deadline, model=model).replay(cex)


class _TraceFile:
    """What a trace counterexample is replayed on when no factory is given: the trace it saved."""

    path = None

    def __init__(self, text: str) -> None:
        self.text = text


class _NoProcess:
    """Stands for the search's target process when a stateful replay drives a factory of its own."""

    call_seconds = 1.0

    def __init__(self, target, load_seconds: float = DEFAULT_LOAD_SECONDS) -> None:
        self.target, self.load_seconds = target, load_seconds

    def close(self) -> None:
        pass


def _replay_report(cex: Counterexample, subject, replayed, wrote: list[str]) -> int:
    """Print what the replay showed and return the exit code (``replay``'s verdicts, docs/verify.md)."""
    how = _replay_how(cex, replayed, subject)
    if replayed.unreadable:
        print("\n".join([f"UNKNOWN {subject.text}: the program of this stateful counterexample to {cex.property} "
                         "could not be read (an older file keeps it only as text); nothing was replayed", *wrote]))
        return exit_code(UNKNOWN)
    if not replayed.findings:
        if cex.depends or _older_history_claim(cex):
            print("\n".join([
                f"DID NOT REPRODUCE {subject.text}: the counterexample to {cex.property} did not fail again {how}; "
                f"when found it {_found_how(cex)}, so one replay that passes does not show it is fixed "
                "(unknown, not a pass)", *wrote]))
            return exit_code(UNKNOWN)
        note = ""
        if cex.format < 2:
            note = ("; saved by an older schedcheck without its call history, so a failure that needed earlier "
                    "calls could not show here")
        print("\n".join([f"PASS {subject.text}: the counterexample to {cex.property} no longer fails ({how}{note})",
                         *wrote]))
        return exit_code(PASS)
    same = [f for f in replayed.findings if f.invariant == cex.property]
    finding = (same or replayed.findings)[0]
    message = finding.message
    if cex.check == "stateful":
        message = finding.message  # the program's report, as run now
    again = cex._replace(property=finding.invariant, message=message,
                         program=replayed.program if replayed.program is not None else cex.program)
    lines = format_counterexample(again, finding.result)
    if not same:  # the input still fails, another way: never a pass
        lines.insert(0, f"# the counterexample to {cex.property} no longer breaks it, but breaks {finding.invariant}:")
    if cex.depends or replayed.attempts > 1 or cex.check in ("stateful", "trace"):
        lines.append(f"# replayed: it failed again {how}")
    print("\n".join(lines + wrote))
    return exit_code(FAIL)


def _replay_how(cex: Counterexample, replayed, subject) -> str:
    """How the replay ran: alone or after its history, how many attempts."""
    if cex.check == "stateful":
        where = "on a fresh engine"
    elif cex.check == "trace":
        where = "on the saved trace" if isinstance(subject, _TraceFile) else "driving the factory on its call"
    elif cex.check == "step":
        where = "from its pre-state"
    elif cex.check == "deterministic":
        where = "in the repeated-call check (fresh processes)"
    elif replayed.history:
        where = f"in a fresh process after the {replayed.history} calls of its history"
    else:
        where = "alone in a fresh process"
    if replayed.attempts > 1:
        return f"{where}, on attempt {replayed.attempts}" if replayed.findings else f"{where}, in {replayed.attempts} attempts"
    return where


def _found_how(cex: Counterexample) -> str:
    if cex.reproduced == "history":
        return f"failed only after the calls before it ({len(cex.history or ())} saved with it)"
    if cex.reproduced == "no":
        return "did not reproduce alone: the bug depends on earlier calls or on chance"
    return "needed the calls made before it (an older file, saved without them)"


def _older_history_claim(cex: Counterexample) -> bool:
    """An older file (format 1) whose failure was confirmed only after earlier calls, which it does not hold."""
    return cex.format < 2 and "but did in a fresh process after the" in cex.message


def _replay_step(cex: Counterexample) -> list:
    """A one-step counterexample of CrossHair: the step again from its pre-state, in a sandbox child."""
    from proofs.sandbox import run_once
    from proofs.search.judge import Finding

    subject = "spec.step" if cex.message.startswith("one tick of spec.step") else "impl.Scheduler.step"
    outcome = run_once(_step_again, subject, cex.property, cex.pre_state, seconds=30.0)
    if outcome.kind != "returned":
        return [Finding("termination", f"{subject} on the pre-state: {outcome.kind}: {outcome.error}", kind=outcome.kind)]
    return [Finding(cex.property, outcome.result)] if outcome.result else []


def _step_again(subject: str, invariant: str, pre_state: dict):
    """In a child: the one step again; what breaks (a message) or None."""
    from proofs.symbolic.contracts import _post_holds, plain_from_state, state_from_dict

    state = state_from_dict(pre_state)
    if subject == "spec.step":
        from spec import step

        after = step(state)
    else:
        from impl.scheduler import Scheduler
        from proofs.symbolic.contracts import impl_step

        after = impl_step(Scheduler, state)
    if _post_holds(invariant, after):
        return None
    return f"one tick of {subject} breaks {invariant}: post-state {plain_from_state(after)}"


def _recheck_trace(cex: Counterexample) -> list:
    """A trace counterexample with no factory to record again: its saved entries checked again."""
    import tempfile

    from proofs.search.judge import Finding
    from proofs.trace.check import check_file
    from proofs.trace.files import write

    if cex.trace is None or (cex.trace.get("entries") is None and not os.path.exists(cex.trace.get("file") or "")):
        raise TargetError(f"the trace counterexample to {cex.property} holds no entries (its trace was longer than "
                          "the prefix saved) and its file is gone: give the factory that recorded it, FILE.py:make, "
                          "to drive it again")
    with tempfile.TemporaryDirectory(prefix="schedcheck-replay-") as folder:
        path = cex.trace["file"]
        if cex.trace.get("entries") is not None:
            path = os.path.join(folder, "trace.jsonl")
            write(path, cex.trace["header"], cex.trace["entries"], cex.trace.get("totals"))
        report = check_file(path, cex.model, cex.trace.get("policy"))
    if report.violation is None:
        return []
    violation = report.violation
    where = f"tick {violation.tick}" if violation.tick is not None else "the end of the trace"
    return [Finding(violation.invariant, f"{where}: {violation.message}")]


def _write_regression_test(path: str, cex: Counterexample, target, extra: dict) -> None:
    """A pytest file that replays the counterexample: it fails while the failure still happens.

    For a failure that reproduced alone, the test passes once replay says PASS; for one that
    needed earlier calls or chance, replay can only say DID NOT REPRODUCE (it runs it as often as
    it was seen to need), and the test accepts that as its pass: evidence, not proof, of a fix.
    Every path in it is relative to the test file itself (``__file__``): the target's
    file, and the folder the replay ran in (where a module target is imported from),
    so the test passes wherever pytest is started."""
    here = os.path.dirname(os.path.abspath(path))
    root = os.path.relpath(os.getcwd(), here)
    if isinstance(target, _TraceFile):
        target_code = "None  # a trace with no factory: its saved entries are checked again"
    elif target.path is not None:
        target_code = f"os.path.join(HERE, {os.path.relpath(target.path, here)!r}) + {':' + target.function!r}"
    else:
        target_code = repr(target.text)
    data = json.dumps(dict(cex.to_json(), target=target.text, **extra), indent=4)
    depends = cex.depends or _older_history_claim(cex)
    kind = {"stateful": "a program of calls to an online engine", "deterministic": "the repeated-call check",
            "trace": "a recorded trace", "step": "one step from a pre-state", "validation": "an invalid call"}.get(
        cex.check, "one call")
    if depends:
        check = [
            "    assert run.returncode != 1, 'it fails again:\\n' + run.stdout + run.stderr",
            "    # it depended on earlier calls or on chance: not failing in the replay's attempts is the most a test",
            "    # can show (replay's verdict is DID NOT REPRODUCE, unknown), so that is this test's pass",
            "    assert run.returncode == 0 or run.stdout.startswith('DID NOT REPRODUCE'), run.stdout + run.stderr",
        ]
    else:
        check = ["    assert run.returncode == 0, run.stdout + run.stderr"]
    lines = [
        f'"""Regression test generated by `schedcheck replay`: {cex.property} on {target.text} ({kind}).',
        "",
        "It replays the saved counterexample exactly (the calls before it, the program, the call) and fails",
        "while the failure still happens." + (" The failure depended on earlier calls or on chance: the replay"
                                              if depends else ""),
        *(["runs it as often as it was seen to need, and the test passes when it did not happen again."]
          if depends else []),
        '"""',
        "",
        "import json",
        "import os",
        "import subprocess",
        "import sys",
        "",
        "HERE = os.path.dirname(os.path.abspath(__file__))",
        f"ROOT = os.path.normpath(os.path.join(HERE, {root!r}))  # where `schedcheck replay` ran",
        f"TARGET = {target_code}",
        f"COUNTEREXAMPLE = json.loads({data!r})",
        "",
        "",
        f"def test_{cex.property}_regression(tmp_path):",
        '    saved = tmp_path / "cex.json"',
        "    saved.write_text(json.dumps(COUNTEREXAMPLE))",
        "    command = [sys.executable, '-m', 'proofs.cli.main', 'replay', str(saved)] + ([TARGET] if TARGET else [])",
        "    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)",
        *check,
        "",
    ]
    with open(path, "w") as handle:
        handle.write("\n".join(lines))
