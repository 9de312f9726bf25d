"""``schedcheck diff``: the smallest input on which two versions of a scheduler differ."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import time

from proofs.cli.paths import HTML_HELP, output_problem
from proofs.cli.usage import usage_error
from proofs.report import ci as ci_reports
from proofs.counterexample import Counterexample
from proofs.search.differential import Difference, DifferentialSearch
from proofs.sandbox import DEFAULT_LOAD_SECONDS, TargetProcess
from proofs.targets import Target, TargetError, parse_target
from proofs import models
from proofs.report.timeline import render
from spec.oracle import first_difference


def add_parsers(commands) -> None:
    diff = commands.add_parser(
        "diff",
        help="find the smallest input on which two schedulers differ, and classify it",
        description=(
            "Compare OLD and NEW (file.py:function or package.module:function), or with "
            "--base GITREV our impl in the working tree against the same impl at GITREV. "
            "Exit 0: no difference, or only fixes; 1: a regression or another difference; 2: could not run."
        ),
    )
    diff.add_argument("old", nargs="?", help="the scheduler before the change")
    diff.add_argument("new", nargs="?", help="the scheduler after the change")
    diff.add_argument("--base", metavar="GITREV", help="compare the working tree's impl with impl at GITREV")
    diff.add_argument("--budget", type=float, default=60.0, metavar="SECONDS")
    diff.add_argument("--seed", type=int, default=None)
    diff.add_argument("--examples", type=int, default=500, metavar="N")
    diff.add_argument("--load-timeout", type=float, default=DEFAULT_LOAD_SECONDS, metavar="SECONDS",
                      help="wall-clock limit on importing each target, done once per run (default %(default)g)")
    diff.add_argument("--model", choices=models.NAMES, default=models.DEFAULT,
                      help="which model of the spec judges both: chapter (schedule) or serving (serve)")
    diff.add_argument("--policy", default=None, metavar="fcfs|none", help="serving model: fcfs (default) or none")
    diff.add_argument("--json", metavar="PATH")
    ci_reports.add_output_arguments(diff)
    diff.add_argument("--html", metavar="PATH", help=HTML_HELP)
    diff.set_defaults(handler=run_diff)


@contextlib.contextmanager
def _worktree(revision: str):
    """A temporary checkout of ``revision``, removed afterwards."""
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0:
        raise TargetError("--base needs a git checkout: " + (top.stderr.strip() or "not a git repository"))
    root = top.stdout.strip()
    with tempfile.TemporaryDirectory(prefix="schedcheck-base-") as scratch:
        where = os.path.join(scratch, "tree")
        add = subprocess.run(
            ["git", "-C", root, "worktree", "add", "--detach", where, revision], capture_output=True, text=True
        )
        if add.returncode != 0:
            raise TargetError(f"--base {revision!r}: {add.stderr.strip().splitlines()[-1] if add.stderr.strip() else 'git worktree failed'}")
        try:
            yield root, where
        finally:
            subprocess.run(["git", "-C", root, "worktree", "remove", "--force", where], capture_output=True)


def run_diff(args: argparse.Namespace) -> int:
    started = time.monotonic()
    if args.budget <= 0 or args.examples < 1 or args.load_timeout <= 0:
        return usage_error("--budget, --examples and --load-timeout must be positive")
    problem = output_problem({"--json": args.json, "--junit": args.junit, "--sarif": args.sarif, "--html": args.html}, {})
    if problem:
        return usage_error(problem)
    if args.base is None and (args.old is None or args.new is None):
        return usage_error("give OLD and NEW targets, or --base GITREV")
    if args.base is not None and (args.old is not None or args.new is not None):
        return usage_error("give either OLD and NEW, or --base GITREV, not both")
    try:
        model = models.get(args.model, args.policy)
    except ValueError as error:
        return usage_error(str(error))
    try:
        if args.base is not None:
            with _worktree(args.base) as (root, base_tree):
                old = Target(f"impl:{model.function}@{args.base}", None, "impl", model.function, root=base_tree)
                new = Target(f"impl:{model.function}", None, "impl", model.function, root=root)
                return _compare(old, new, args, started, model)
        return _compare(parse_target(args.old), parse_target(args.new), args, started, model)
    except TargetError as error:
        return usage_error(str(error))


def _compare(old: Target, new: Target, args, started: float, model) -> int:
    deadline = started + args.budget
    isolated = {"shape": model.shape, "load_seconds": args.load_timeout, "contract": model.contract_part}
    with TargetProcess(old, **isolated) as old_process, TargetProcess(new, **isolated) as new_process:
        old_process.start()
        new_process.start()
        # Hypothesis first, with 60% of the budget; CrossHair's diffbehavior in most of the rest
        search = DifferentialSearch(
            old_process, new_process, started + 0.6 * args.budget, seed=args.seed, examples=args.examples, model=model,
        )
        found = search.run()
        left = deadline - time.monotonic()
        symbolic_seconds = 0.0  # measured, not budgeted
        undecided = found is None or found.classification == "fix"  # a fix stands only if NEW breaks nothing
        if undecided and left > 2.0 and model.name == "chapter":  # diffbehavior knows the chapter's call only
            from proofs.symbolic.diff import crosshair_differences

            search.deadline = deadline
            symbolic_started = time.monotonic()
            try:
                calls = crosshair_differences(old, new, seconds=0.8 * left)
            finally:
                symbolic_seconds = time.monotonic() - symbolic_started
            for call in calls:
                other = search.classify_call(call, "crosshair")
                if other is None:
                    continue
                if found is None or other.classification != "fix":
                    search.differences.insert(0, other)
                    found = other
                    break
    if found is None:
        line = f"SAME {old.text} and {new.text}: no difference in {search.calls_tried} calls"
        covered = search.bounds.describe()
        line += f" ({covered})" if covered else ""
        if symbolic_seconds:
            line += f", nor in {symbolic_seconds:.0f} s of CrossHair diffbehavior"
        if search.unfinished:  # nothing differed in what ran, but not everything planned ran: never a pass
            line = f"INCOMPLETE {line} (the budget ran out during {', '.join(search.unfinished)}; incomplete is not a pass)"
        print(line)
    else:
        shown = [found] + [d for d in search.differences if d is not found]
        print("\n\n".join("\n".join(format_difference(d, model)) for d in shown))
        if found.classification == "fix":
            print(f"\nNEW broke no invariant in the {search.calls_tried} calls searched")
    if args.json or args.junit or args.sarif or args.html:
        others = [d for d in search.differences if d is not found]
        report = _write_json(args.json, old.text, new.text, time.monotonic() - started, found, model,
                             others, search.calls_tried, symbolic_seconds,
                             search.bounds, unfinished=search.unfinished if found is None else ())
        ci_reports.write_outputs(args, "diff", report, new.text)
        if args.html:
            from proofs.report import html

            shown = [found] * (found is not None) + others  # the order of report["differences"]
            results = [(d.old.outcome.result, d.new.outcome.result)
                       if d.old.outcome.kind == "returned" and d.new.outcome.kind == "returned" else None for d in shown]
            html.write(args.html, html.diff_page(report, results))
    if found is None and search.unfinished:
        return 2
    return 0 if found is None or found.classification == "fix" else 1


def format_difference(found: Difference, model=None) -> list[str]:
    model = model or models.get()
    cex = Counterexample("", found.engine, "conformance", tuple(found.call), "", model=model.name)
    noun = model.noun[0] if cex.size == 1 else model.noun[1]
    lines = [f"DIFF {found.classification}  engine={found.engine}  (shrunk: {cex.size} {noun})", cex.input_repr()]
    for name, side in (("old", found.old), ("new", found.new)):
        verdict = "conforms" if not side.broken else "breaks " + ", ".join(side.broken)
        lines.append(f"{name}: {side.describe()}; {verdict}")
    if all(s.outcome.kind == "returned" and model.drawable(found.call, s.outcome.result) for s in (found.old, found.new)):
        old_result, new_result = found.old.outcome.result, found.new.outcome.result
        if model.name == "serving":
            from proofs.report.serving_timeline import render as render_serving

            return lines + render_serving(*found.call, old_result["trace"], new_result["trace"], titles=("old", "new"))
        parted = first_difference(old_result, new_result)
        if parted is not None:
            lines.append(f"first difference: {parted.message.replace('expected', 'old').replace('got', 'new')}")
        lines += render(old_result["trace"], new_result["trace"], parted and parted.tick, titles=("old", "new"))
    return lines



def _write_json(path: str | None, old: str, new: str, seconds: float, found: Difference | None, model=None,
                others=(), calls: int | None = None, symbolic_seconds: float = 0.0, bounds=None,
                unfinished=()) -> dict:
    model = model or models.get()
    differences = []
    for each in [found] * (found is not None) + list(others):
        cex = Counterexample("", each.engine, "conformance", tuple(each.call), "", model=model.name).to_json()
        differences.append({
            "classification": each.classification,
            "engine": each.engine,
            "input": cex["input"],
            "input_repr": cex["input_repr"],
            "old": {"behaviour": each.old.describe(), "broken": each.old.broken},
            "new": {"behaviour": each.new.describe(), "broken": each.new.broken},
        })
    report = {
        "verdict": ("incomplete" if unfinished else "no difference") if found is None else found.classification,
        "old": old,
        "new": new,
        "seconds": round(seconds, 3),
        "differences": differences,
    }
    if calls is not None:
        report |= {"calls": calls, "crosshair_seconds": round(symbolic_seconds, 3)}
    if bounds is not None:
        report["bounds"] = bounds.to_json()
    if model.name != models.DEFAULT:
        report |= {"model": model.name, "policy": model.policy}
    if unfinished:
        report["unfinished"] = list(unfinished)
    if path:
        with open(path, "w") as handle:
            json.dump(report, handle, indent=2)
            handle.write("\n")
    return report
