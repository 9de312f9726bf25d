"""``schedcheck gate``: the one command a CI job runs.

What it establishes: what its steps establish, no more.  It runs, in this order,
``verify`` once per engine this build has (``verify-hypothesis``, ``verify-crosshair``:
each with the whole budget and ``--all``, so every broken invariant is reported, not
only the first), ``diff --base GITREV`` when ``--base`` is given, and
``prove`` when that subcommand is registered, each in-process through
``proofs.cli.main.main`` with an argument list, each writing its ``--json`` report into
``--out``.  From each report it writes the step's JUnit XML and SARIF 2.1.0
(``proofs.report.ci``), then prints one summary table and exits with one code.

Bounds: ``--budget`` is handed to each step (verify's and diff's whole-run bound,
prove's per-claim bound), so the gate takes about one budget per step plus the
overrun each step documents.  A step that cannot run (exit 2, an exception) is an
error, never a pass; a step this build does not have is skipped, says so, and does
not run.  Each row says what its verdict is about: ``target`` (verify, diff: the
target's code) or ``spec`` (prove: the Z3 claims are about the spec, whatever the
target, so its row reads ``spec proved``, never ``pass``).  A verify row carries the
step's own verdict word, so a run whose checks or contracts did not all finish is
``incomplete``, never ``pass``.  A gate in which no step checked the target (every
verify and diff step skipped, whatever prove says about the spec) is ``incomplete``
(exit 2): a gate that checked nothing is not a pass.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shlex
import time
from typing import NamedTuple

from proofs.cli.paths import output_problem
from proofs.cli.usage import usage_error
from proofs.outcomes import INCOMPLETE, UNKNOWN, combine, exit_code
from proofs.report import ci as ci_reports
from proofs.cli.verify import ENGINES
from proofs import models
from proofs.targets import TargetError, parse_target

DEFAULT_OUT = "schedcheck-reports"
STEPS = ("verify", "diff", "prove")  # verify is one step per engine: verify-hypothesis, verify-crosshair, ...
REPORT_FILE = re.compile(r"^((verify(-[A-Za-z0-9_]+)?|diff|prove|gate)\.(json|junit\.xml|sarif|log|html)|index\.html)$")
ENGINE_PACKAGES = {"hypothesis": "hypothesis", "crosshair": "crosshair"}  # engine -> package it needs

EPILOG = """steps, in order:
  verify-ENGINE  one step per engine this build has (verify-hypothesis,
          verify-crosshair), each with --all (every broken invariant is reported)
  diff    only with --base: our impl in the working tree against impl at GITREV
          (--base needs the default target; for your own scheduler run
          `schedcheck diff OLD.py:schedule NEW.py:schedule` instead)
  prove   the Z3 claims about the spec, when `schedcheck prove` is in this build
          (skipped otherwise, with a line in the summary)

reports, in --out: STEP.json, STEP.junit.xml, STEP.sarif, STEP.html and STEP.log for
each step that ran, gate.json with the summary, and index.html: the summary as one
self-contained page linking each step's page (docs/report.md).

rows: about=target for verify and diff (the target's code), about=spec for prove
(verdict proved or refuted: claims about the spec, the same whatever the target).

exit codes:
  0  some step checked the target, and every step that ran passed or the spec proved
     (skipped steps do not count)
  1  a step found a counterexample, a regression, or a refuted claim
  2  usage error, or a step could not run or ended incomplete or unknown (and none found a failure),
     or no step checked the target (every verify and diff step skipped): incomplete, never a pass"""


class Step(NamedTuple):
    """One row of the summary."""

    name: str
    verdict: str  # pass, fail, incomplete, unknown, error or skipped; proved or refuted for the spec
    exit_code: int | None
    detail: str
    reports: tuple[str, ...]
    seconds: float
    about: str = "target"  # what the verdict is about: "target" (its code) or "spec" (prove)


def add_parsers(commands, *, run_cli, command_names) -> None:
    """Add ``gate``; it runs the other subcommands (``command_names``) through ``run_cli(argv)``.

    Both are passed in by ``proofs.cli.main`` so that this module never imports it."""
    gate = commands.add_parser(
        "gate",
        help="the one command a CI job runs: verify, diff against a base revision, prove",
        description="Run verify (every engine), diff --base GITREV (when given) and prove (when available) "
        "on TARGET; write every report (JSON, JUnit XML, SARIF) to one folder; print one summary; exit with one code.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gate.add_argument(
        "target", nargs="?", default=None,
        help="path/to/file.py:function or package.module:function (default: our impl, impl:schedule, "
        "or impl:serve with --model serving)",
    )
    gate.add_argument("--base", metavar="GITREV",
                      help="also diff our impl against impl at GITREV (default target only), e.g. origin/main")
    gate.add_argument("--budget", type=float, default=60.0, metavar="S",
                      help="seconds for each step: verify's and diff's whole run, prove's per claim (default 60)")
    gate.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help="where every report goes (default %(default)s/)")
    gate.add_argument("--seed", type=int, default=None, help="make verify and diff repeatable")
    gate.add_argument("--examples", type=int, default=None, metavar="N", help="verify's and diff's --examples (default theirs)")
    gate.add_argument("--load-timeout", type=float, default=None, metavar="SECONDS",
                      help="verify's and diff's --load-timeout: the limit on importing the target (default theirs)")
    gate.add_argument("--db", default=None, metavar="DIR", help="verify's Hypothesis database (default verify's; 'none' for none)")
    gate.add_argument("--save-dir", default=None, metavar="DIR",
                      help="where verify saves counterexamples (default DIR/counterexamples under --out)")
    gate.add_argument("--model", choices=models.NAMES, default=models.DEFAULT,
                      help="which model of the spec judges TARGET: chapter (schedule) or serving (serve)")
    gate.add_argument("--policy", default=None, metavar="fcfs|none", help="serving model: fcfs (default) or none")
    gate.add_argument("--skip", action="append", default=[], metavar="STEP",
                      help="leave a step out (repeatable): verify (every engine), verify-ENGINE, diff or prove")
    gate.add_argument("--no-seconds", action="store_true", help="leave the seconds column out of the summary")
    gate.set_defaults(handler=run_gate, run_cli=run_cli, command_names=command_names)


def available_engines() -> tuple[list[str], list[str]]:
    """(engines this build can run, engines verify lists but this build cannot run: their package is missing)."""
    import importlib.util

    have, missing = [], []
    for engine in ENGINES:
        package = ENGINE_PACKAGES.get(engine, engine)
        try:
            found = importlib.util.find_spec(package) is not None
        except (ImportError, ValueError):
            found = False
        (have if found else missing).append(engine)
    return have, missing


def run_gate(args: argparse.Namespace) -> int:
    if args.budget <= 0:
        return usage_error(f"--budget={args.budget!r}: expected seconds > 0")
    if args.examples is not None and args.examples < 1:
        return usage_error(f"--examples={args.examples!r}: expected an int >= 1")
    if args.load_timeout is not None and not args.load_timeout > 0:
        return usage_error(f"--load-timeout={args.load_timeout:g}: expected seconds > 0")
    try:
        model = models.get(args.model, args.policy)
    except ValueError as error:
        return usage_error(str(error))
    args.target = args.target or model.default_target
    try:
        target = parse_target(args.target)
    except TargetError as error:
        return usage_error(str(error))
    if args.base is not None and target.text != model.default_target:
        return usage_error(
            f"--base {args.base!r} compares our impl (the default target {model.default_target}) with impl at GITREV; "
            f"it cannot diff {args.target!r}: run `schedcheck diff OLD NEW` for that"
        )
    out = args.out
    problem = output_problem({}, {"--out": None if out == DEFAULT_OUT else out, "--save-dir": args.save_dir,
                                  "--db": None if args.db in (None, "none") or "://" in args.db else args.db})
    if problem:
        return usage_error(problem)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as error:
        return usage_error(f"--out {out!r}: {error.strerror or error}")
    commands = args.command_names
    engines, missing = available_engines()
    known = {"verify", "diff", "prove", *(f"verify-{e}" for e in engines + missing)}
    strange = [name for name in args.skip if name not in known]
    if strange:
        return usage_error(f"--skip {strange[0]!r}: expected one of {', '.join(sorted(known))}")
    save_dir = args.save_dir or os.path.join(out, "counterexamples")
    _clear_reports(out)

    steps: list[Step] = []
    for engine in ENGINES:
        name = f"verify-{engine}"
        if engine in missing:
            steps.append(Step(name, "skipped", None, f"{ENGINE_PACKAGES.get(engine, engine)} is not installed", (), 0.0))
            continue
        if "verify" in args.skip or name in args.skip:
            steps.append(Step(name, "skipped", None, f"--skip {name if name in args.skip else 'verify'}", (), 0.0))
            continue
        argv = ["verify", args.target, "--engine", engine, "--all", "--budget", f"{args.budget:g}", "--save-dir", save_dir]
        argv += _common(args) + (["--db", args.db] if args.db else [])
        steps.append(_run_step(args.run_cli, name, "verify", argv, out, args.target, save_dir, f"engine={engine}"))
    if "diff" in args.skip:
        steps.append(Step("diff", "skipped", None, "--skip diff", (), 0.0))
    elif args.base is None:
        steps.append(Step("diff", "skipped", None, "no --base given", (), 0.0))
    else:
        argv = ["diff", "--base", args.base, "--budget", f"{args.budget:g}", *_common(args)]
        steps.append(_run_step(args.run_cli, "diff", "diff", argv, out, args.target, save_dir, f"impl at {args.base} -> working tree"))
    if "prove" in args.skip:
        steps.append(Step("prove", "skipped", None, "--skip prove", (), 0.0, "spec"))
    elif model.name not in ("chapter", "serving"):
        steps.append(Step("prove", "skipped", None, f"`schedcheck prove` has no encoding of the {model.name} model",
                          (), 0.0, "spec"))
    elif "prove" not in commands:
        steps.append(Step("prove", "skipped", None, "`schedcheck prove` is not in this build", (), 0.0, "spec"))
    else:
        argv = ["prove", "--budget", f"{args.budget:g}"] + (["--model", "serving"] if model.name == "serving" else [])
        step = _run_step(args.run_cli, "prove", "prove", argv, out, "spec", save_dir, "Z3 claims about the spec",
                         seconds_shown=not args.no_seconds)
        spec_verdict = {"pass": "proved", "fail": "refuted"}.get(step.verdict, step.verdict)
        steps.append(step._replace(verdict=spec_verdict, about="spec"))

    code = combined_exit_code([s.exit_code for s in steps])
    table = summary(steps, seconds=not args.no_seconds)
    print("\n".join(table))
    verdict = {0: "pass", 1: "fail"}.get(code) or combine(
        {"proved": "pass", "refuted": "fail"}.get(s.verdict, s.verdict) for s in steps if s.exit_code not in (None, 0))
    why = ""
    if code != 1 and not any(s.about == "target" and s.exit_code is not None for s in steps):
        # every verify and diff step was skipped: a proved spec says nothing about the target's code
        verdict = INCOMPLETE if verdict == "pass" else verdict
        code, why = exit_code(verdict), ": no step checked the target"
    print(f"gate: {verdict} (exit {code}){why}; reports in {out}")
    data = _write_summary(out, args.target, args.base, verdict, code, steps)
    from proofs.report import html

    pages = {s.name: os.path.basename(p) for s in steps for p in s.reports if p.endswith(".html")}
    html.write(os.path.join(out, "index.html"), html.gate_page(data, pages, seconds=not args.no_seconds))
    return code


def _common(args) -> list[str]:
    extra = ["--model", args.model] if args.model != models.DEFAULT else []
    extra += ["--policy", args.policy] if args.policy else []
    if args.seed is not None:
        extra += ["--seed", str(args.seed)]
    if args.examples is not None:
        extra += ["--examples", str(args.examples)]
    if args.load_timeout is not None:
        extra += ["--load-timeout", f"{args.load_timeout:g}"]
    return extra


def _clear_reports(out: str) -> None:
    """Remove the reports an earlier gate wrote here, so that none is mistaken for this run's."""
    for name in os.listdir(out):
        if REPORT_FILE.match(name):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.remove(os.path.join(out, name))


def call_cli(main, argv: list[str]) -> tuple[int, str]:
    """Run ``main(argv)`` (the ``schedcheck`` command) in this process; return its exit code and everything it printed."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse rejected the arguments
            code = stop.code if isinstance(stop.code, int) else 2
        except Exception as error:  # a step's failure must not take the other steps down
            print(f"schedcheck gate: {argv[0]} raised {type(error).__name__}: {error}")
            code = 2
    return (code if code is not None else 0), buffer.getvalue()


def _run_step(run_cli, name: str, kind: str, argv: list[str], out: str, target: str, save_dir: str, detail: str,
              seconds_shown: bool = True) -> Step:
    json_path = os.path.join(out, f"{name}.json")
    junit_path = os.path.join(out, f"{name}.junit.xml")
    sarif_path = os.path.join(out, f"{name}.sarif")
    log_path = os.path.join(out, f"{name}.log")
    html_path = os.path.join(out, f"{name}.html")
    # verify and diff draw their timelines from the results they hold; prove's page is its JSON report, drawn below
    argv = [*argv, "--json", json_path] + (["--html", html_path] if kind in ("verify", "diff") else [])
    started = time.monotonic()
    code, printed = call_cli(run_cli, argv)
    seconds = time.monotonic() - started
    command = "schedcheck " + " ".join(shlex.quote(a) for a in argv)
    with open(log_path, "w", encoding="utf-8") as handle:
        handle.write(f"$ {command}\n{printed}")
    print(f"== {name}: {command}")
    print(printed.rstrip("\n") if printed.strip() else "(no output)")
    print()

    report = None
    if os.path.isfile(json_path):
        try:
            with open(json_path, encoding="utf-8") as handle:
                report = json.load(handle)
        except (OSError, ValueError):
            report = None
    if report is not None:
        ci_reports.write_reports(kind, report, target, junit_path, sarif_path, save_dir=save_dir, category=name)
        if kind == "prove":
            from proofs.report import html

            with contextlib.suppress(ValueError):  # a report without a verdict: no page, the step's row says why
                html.write(html_path, html.prove_page(report, seconds=seconds_shown))
    else:
        message = printed.strip() or f"schedcheck {name} exited {code} without a report"
        if code in (0, 1):  # it claimed a verdict but left no report: that is an error too
            message = f"schedcheck {name} exited {code} but wrote no --json report\n{message}"
            code = 2
        with open(junit_path, "w", encoding="utf-8") as handle:
            handle.write(ci_reports.error_junit(kind, target, message))
        with open(sarif_path, "w", encoding="utf-8") as handle:
            handle.write(ci_reports.sarif_text(ci_reports.error_sarif(kind, target, message, category=name)))
    verdict = {0: "pass", 1: "fail"}.get(code, "error")
    if code == 2 and report is not None:  # it ran, and something ended incomplete or unknown
        verdict = report.get("verdict") if report.get("verdict") in (INCOMPLETE, UNKNOWN) else UNKNOWN
    if kind == "verify" and code == 0 and report is not None and report.get("verdict") != "pass":
        verdict, code = UNKNOWN, 2  # exit 0 with a report that is not a pass: not a pass either
    reports = tuple(p for p in (json_path, junit_path, sarif_path, html_path, log_path) if os.path.isfile(p))
    return Step(name, verdict, code, detail, reports, seconds)


def combined_exit_code(codes: list[int | None]) -> int:
    """1 if any step failed; else 2 if any could not run or ended unknown, or none ran; else 0 (skipped steps are None)."""
    ran = [c for c in codes if c is not None]
    if any(c == 1 for c in ran):
        return 1
    if not ran or any(c != 0 for c in ran):
        return 2
    return 0


def summary(steps: list[Step], seconds: bool = True) -> list[str]:
    """The summary table: one row per step in the fixed order verify (each engine), diff, prove; seconds last."""
    header = ["step", "about", "verdict", "exit", "detail"] + (["seconds"] if seconds else [])
    rows = [
        [s.name, s.about, s.verdict, "-" if s.exit_code is None else str(s.exit_code), s.detail]
        + ([f"{s.seconds:.1f}"] if seconds else [])
        for s in steps
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]


def _write_summary(out: str, target: str, base: str | None, verdict: str, code: int, steps: list[Step]) -> dict:
    data = {
        "verdict": verdict,
        "exit_code": code,
        "target": target,
        "base": base,
        "steps": [
            {"step": s.name, "about": s.about, "verdict": s.verdict, "exit_code": s.exit_code, "detail": s.detail,
             "reports": [os.path.basename(p) for p in s.reports], "seconds": round(s.seconds, 3)}
            for s in steps
        ],
    }
    with open(os.path.join(out, "gate.json"), "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    return data
