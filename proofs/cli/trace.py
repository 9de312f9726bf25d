"""``schedcheck trace``: check a recorded trace file as a stream, or record one from an online target."""

from __future__ import annotations

import argparse
import json
import sys

from proofs import models
from proofs.cli.paths import HTML_HELP, output_problem
from proofs.cli.usage import usage_error
from proofs.outcomes import exit_code

SAVED_DIR = ".schedcheck/counterexamples"  # verify's default too


def add_parsers(commands) -> None:
    trace = commands.add_parser(
        "trace",
        help="check a recorded trace (JSON lines, plain or gzip) against a model, or record one",
        description="Check FILE.jsonl (a header line, then one trace entry per line) against every state "
        "invariant of the model, streaming; or, with --record, record a trace from an online target.",
    )
    trace.add_argument("file", nargs="?", metavar="FILE.jsonl", help="the trace to check (gzip is detected)")
    trace.add_argument("--model", choices=models.NAMES, default=None,
                       help="the model that judges it (default: the header's)")
    trace.add_argument("--policy", default=None, metavar="fcfs|fifo|none",
                       help="the policy family: the model's own (fcfs for serving, fifo for the chapter's; the "
                       "default) or none (safety only, for an engine whose policy is not ours)")
    trace.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    trace.add_argument("--html", metavar="PATH", help=HTML_HELP)
    trace.add_argument("--record", metavar="FILE.py:make", help="record a trace from this online target's factory")
    trace.add_argument("--requests", metavar="R.json", help="--record: the requests (jobs for the chapter's model)")
    trace.add_argument("--config", metavar="C.json",
                       help="--record: the config (for the chapter's model {\"slots\": S, \"continuous\": B})")
    trace.add_argument("-o", "--output", metavar="FILE.jsonl", help="--record: where to write the trace (.gz: gzip)")
    trace.add_argument("--save-dir", default=SAVED_DIR,
                       help="where a violation is saved as a counterexample, for `schedcheck replay` (default %(default)s)")
    trace.set_defaults(handler=run_trace)


def _read_json(path: str, what: str):
    try:
        with open(path) as handle:
            return json.load(handle)
    except OSError as error:
        raise ValueError(f"{what} {path!r}: {error.strerror or error}") from None
    except ValueError as error:
        raise ValueError(f"{what} {path!r}: not JSON: {error}") from None
    except RecursionError:  # the decoder gives up on arrays or objects nested thousands deep
        raise ValueError(f"{what} {path!r}: not JSON: nested too deeply to read") from None


def run_record(args: argparse.Namespace) -> int:
    from proofs.targets import TargetError, load_callable, parse_target
    from proofs.trace.files import header_of, write
    from proofs.trace.record import make_engine, record

    if not (args.requests and args.config and args.output):
        return usage_error("--record needs --requests R.json, --config C.json and -o FILE.jsonl")
    if args.file:
        return usage_error("--record writes a trace; give it no FILE to check")
    if args.html or args.json:
        return usage_error("--record writes a trace, not a report: --json and --html go with checking one")
    model = args.model or "serving"
    try:
        requests = _read_json(args.requests, "--requests")
        config = _read_json(args.config, "--config")
        if model == "serving":
            import spec.serving

            spec.serving.validate(requests, config)
            call = (requests, config)
        else:
            import spec

            if not isinstance(config, dict) or set(config) != {"slots", "continuous"}:
                raise ValueError(f"--config {args.config!r}: the chapter's model takes {{\"slots\", \"continuous\"}}")
            spec.validate(requests, config["slots"], config["continuous"])
            call = (requests, config["slots"], config["continuous"])
        factory = load_callable(parse_target(args.record))
    except (ValueError, TargetError) as error:
        return usage_error(str(error))
    try:
        engine = make_engine(factory, model, config)
        trace, totals = record(engine, model, requests, config)
        count = write(args.output, header_of(model, call), trace, totals)
    except OSError as error:
        return usage_error(f"-o {args.output!r}: {error.strerror or error}")
    except Exception as error:  # the target raised: a failing target, reported in one line
        print(f"FAIL {args.record}: the target raised {error!r} while being recorded", file=sys.stderr)
        return 1
    print(f"recorded {count} entries and the totals line from {args.record} into {args.output}")
    return 0


def run_trace(args: argparse.Namespace) -> int:
    if args.record:
        return run_record(args)
    from proofs.trace.check import check_file, format_report
    from proofs.trace.files import TraceFileError

    if not args.file:
        return usage_error("trace: give FILE.jsonl to check, or --record FILE.py:make")
    if args.policy not in (None, "fcfs", "fifo", "none"):
        return usage_error(f"--policy {args.policy!r}: expected fcfs (serving), fifo (chapter) or none")
    problem = output_problem({"--json": args.json, "--html": args.html}, {})
    if problem:
        return usage_error(problem)
    try:
        report = check_file(args.file, args.model, args.policy)
    except TraceFileError as error:
        return usage_error(f"{args.file}: {error}")
    except ValueError as error:
        return usage_error(str(error))
    if report.violation is not None:  # saved before it is reported: `schedcheck replay` checks it again
        from proofs.counterexample import from_trace, save

        try:
            save(from_trace(args.file, report), args.file, args.save_dir)
        except OSError as error:
            return usage_error(f"--save-dir {args.save_dir!r}: {error.strerror or error}")
    text = format_report(args.file, report)
    print("\n".join(text))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"file": args.file, **report.to_json()}, handle, indent=2)
            handle.write("\n")
    if args.html:
        from proofs.report import html

        html.write(args.html, html.trace_page(args.file, {"file": args.file, **report.to_json()}, report.window,
                                              report.lanes, report.config, report.held_before, text))
    return exit_code(report.verdict)
