"""The ``schedcheck`` command: one parser, one handler per subcommand, each returning an exit code.

Exit codes: the one table of ``proofs.outcomes`` (0 pass; 1 fail; 2 incomplete,
unknown or error), printed by ``schedcheck --help``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback

from proofs.cli import diff as diff_command
from proofs.cli import fuzz as fuzz_command
from proofs.cli import gate as gate_command
from proofs.cli import mutation as mutation_command
from proofs.cli import prove as prove_command
from proofs.cli import trace as trace_command
from proofs.cli import verify as verify_command
from proofs.cli.paths import OUTPUT_PATHS_HELP
from proofs.outcomes import EXIT_CODES_HELP

EXIT_CODES = EXIT_CODES_HELP
INTERNAL_ERROR_DIR = ".schedcheck"  # where the traceback of an internal error goes (else a temp file)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (exit 2), not the whole usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _demo(args: argparse.Namespace) -> int:
    import impl

    jobs = [{"id": i, "arrival": 0, "tokens": n} for i, n in enumerate([1, 4, 2, 3])]
    for continuous in (False, True):
        result = impl.schedule(jobs, 2, continuous)
        policy = "continuous" if continuous else "static"
        finishes = [job["finish"] for job in result["completed"]]
        print(
            f"{policy:10}  makespan {result['makespan_ticks']}  busy {result['busy_slots']}  "
            f"utilization {result['busy_slots']}/{2 * result['makespan_ticks']}  finishes {finishes}"
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="schedcheck",
        description="Check an LLM-serving batch scheduler against its executable specification.",
        epilog=EXIT_CODES + "\n\n" + OUTPUT_PATHS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser("demo", help="run the chapter's worked example 1 on our impl")
    demo.set_defaults(handler=_demo)
    verify_command.add_parsers(commands)
    fuzz_command.add_parsers(commands)
    mutation_command.add_parsers(commands)
    diff_command.add_parsers(commands)
    prove_command.register(commands)
    trace_command.add_parsers(commands)
    gate_command.add_parsers(commands, run_cli=main, command_names=tuple(commands.choices))
    return parser


def save_traceback(error: BaseException) -> str:
    """Write the traceback of ``error`` to .schedcheck/internal-error-PID.txt (else a temp file); return its path."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        os.makedirs(INTERNAL_ERROR_DIR, exist_ok=True)
        path = os.path.join(INTERNAL_ERROR_DIR, f"internal-error-{os.getpid()}.txt")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError:
        handle, path = tempfile.mkstemp(prefix="schedcheck-internal-error-", suffix=".txt")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
    return path


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except BrokenPipeError:  # the reader went away (| head): nothing left to say
        sys.stderr.close()
        return 1
    except Exception as error:  # a bug of schedcheck itself (the target runs in a sandbox): exit 2, one line
        path = save_traceback(error)
        summary = " ".join(f"{type(error).__name__}: {error}".split())
        summary = summary if len(summary) <= 200 else summary[:197] + "..."
        print(f"schedcheck: internal error: {summary} (details in {path})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
