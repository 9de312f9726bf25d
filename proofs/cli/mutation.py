"""``schedcheck mutation-score``: how many mutants of impl/ the harness and our tests kill.

What it measures: mutmut (3.x) mutates every function of impl/ one change at a time;
a mutant is killed when the killer fails on it: ``schedcheck verify impl:schedule``
(in a child process that inherits the mutant, seed 0, no example database, so every mutant meets the same search)
plus the fast tests of impl (tests/test_validation.py, tests/test_online_scheduler.py).
It prints killed, survived and timed-out mutants, the diff of every survivor, and
writes the figures as JSON (``--results``) for tests/test_mutation_score.py.

What it assumes: mutmut runs in a scratch copy of spec/, impl/, proofs/ and tests/ (its
config goes in that copy's setup.cfg, the repository is not touched), and the target
process of verify is forked, so it inherits the mutant mutmut switched on.

Bounds: each mutant costs one verify run of ``--budget`` seconds at most, plus the
tests; mutmut's own timeout classifies a mutant that hangs the killer as timed out.

Only a verify ``fail`` (exit 1) kills a mutant.  A verify run that ends with exit 2
(an error of the harness, an incomplete or unknown run) is not a kill: the killer
writes the mutant's name to ``harness-errors.txt`` in the scratch folder, and the
mutant is reported as ``harness error``, outside the score.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

RESULTS = os.path.join(".schedcheck", "mutation.json")
HARNESS_ERRORS = "harness-errors.txt"  # in the scratch folder: mutants on which verify could not decide
HARNESS_ERROR = "harness error"
FAST_TESTS = ("tests/test_validation.py", "tests/test_online_scheduler.py")
KILLER = '''"""Written by schedcheck mutation-score: the harness as the killer of a mutant of impl/."""

import os
import subprocess
import sys

import impl


def test_verify_kills_the_mutant(tmp_path):
    # in-process calls first, so that mutmut sees this test reach every function of impl
    impl.schedule([{{"id": 0, "arrival": 0, "tokens": 2}}, {{"id": 1, "arrival": 1, "tokens": 1}}], 1, True)
    for bad in ([{{"id": 0, "arrival": -1, "tokens": 1}}], "jobs"):
        try:
            impl.schedule(bad, 1, False)
        except ValueError:
            pass
    scheduler = impl.Scheduler(1, True)
    scheduler.submit({{"id": 0, "arrival": 0, "tokens": 1}})
    scheduler.step()
    scheduler.view()
    # verify in a child process: it inherits MUTANT_UNDER_TEST and imports this copy of impl
    command = [sys.executable, "-m", "proofs.cli.main", "verify", "impl:schedule", "--budget", "{budget}",
               "--seed", "{seed}", "--db", "none", "--examples", "{examples}", "--save-dir", str(tmp_path)]
    run = subprocess.run(command, cwd=os.getcwd(), capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.getcwd()))
    if run.returncode not in (0, 1):  # verify could not decide: not a kill, whatever mutmut records
        with open({errors!r}, "a") as handle:
            handle.write(os.environ.get("MUTANT_UNDER_TEST", "") + "\\n")
    assert run.returncode != 1, run.stdout + run.stderr
'''


def add_parsers(commands) -> None:
    parser = commands.add_parser(
        "mutation-score",
        help="run mutmut over impl/ with the harness and our tests as the killer",
        description="Mutate impl/ with mutmut; report killed, survived and timed-out mutants, "
        "and the diff of every survivor.",
    )
    parser.add_argument("--budget", type=float, default=20.0, metavar="SECONDS", help="per verify run (default 20)")
    parser.add_argument("--examples", type=int, default=100, metavar="N", help="valid calls per verify run (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-children", type=int, default=None, metavar="N", help="mutants run at once")
    parser.add_argument("--results", default=RESULTS, metavar="PATH", help="write the figures here (default %(default)s)")
    parser.add_argument("--keep", metavar="DIR", help="run in DIR and keep it (default: a temporary folder)")
    parser.set_defaults(handler=run_mutation_score)


def _prepare(root: str, work: str, args: argparse.Namespace) -> None:
    for folder in ("spec", "impl", "proofs"):
        shutil.copytree(os.path.join(root, folder), os.path.join(work, folder),
                        ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    os.makedirs(os.path.join(work, "tests"), exist_ok=True)
    for name in ("conftest.py",) + tuple(os.path.basename(t) for t in FAST_TESTS):
        shutil.copy(os.path.join(root, "tests", name), os.path.join(work, "tests", name))
    with open(os.path.join(work, "tests", "test_mutation_killer.py"), "w") as handle:
        handle.write(killer_source(args.budget, args.seed, args.examples, os.path.join(work, HARNESS_ERRORS)))
    tests = ["tests/test_mutation_killer.py", *FAST_TESTS]
    with open(os.path.join(work, "setup.cfg"), "w") as handle:
        handle.write("[mutmut]\nsource_paths=impl/\n")
        handle.write("pytest_add_cli_args_test_selection=\n" + "".join(f"    {t}\n" for t in tests))
        handle.write("pytest_add_cli_args=\n    -p\n    no:cacheprovider\n    -p\n    no:xdist\n")
        handle.write("also_copy=\n    spec/\n    proofs/\n    tests/\n")


def killer_source(budget, seed, examples, errors: str) -> str:
    """The killer test's source: verify kills a mutant only with exit 1; exit 2 is recorded in ``errors``."""
    return KILLER.format(budget=budget, seed=seed, examples=examples, errors=errors)


def harness_errors(path: str) -> set[str]:
    """The mutants the killer recorded in ``path`` as harness errors (none when the file is absent)."""
    try:
        with open(path) as handle:
            return {line.strip() for line in handle if line.strip()}
    except FileNotFoundError:
        return set()


def reclassify(statuses: dict[str, list[str]], errors: set[str]) -> dict[str, list[str]]:
    """``statuses`` with every mutant in ``errors`` moved to ``harness error`` (a new dict; never a kill)."""
    moved: dict[str, list[str]] = {}
    for status, names in statuses.items():
        kept = [name for name in names if name not in errors]
        if kept:
            moved[status] = kept
        moved.setdefault(HARNESS_ERROR, []).extend(name for name in names if name in errors)
    if not moved.get(HARNESS_ERROR):
        moved.pop(HARNESS_ERROR, None)
    return moved


def _mutmut(work: str, *arguments: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "mutmut", *arguments]
    env = dict(os.environ, PYTHONPATH=work)
    return subprocess.run(command, cwd=work, capture_output=True, text=True, env=env)


def parse_results(text: str) -> dict[str, list[str]]:
    """``mutmut results --all true`` as {status: [mutant names]}."""
    statuses: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = re.match(r"\s*(\S+): (.+)$", line)
        if match:
            statuses.setdefault(match.group(2).strip(), []).append(match.group(1))
    return statuses


def score(killed: int, survived: int, timeout: int) -> float:
    """Killed or timed out, over every mutant the killer ran against, in percent."""
    tested = killed + survived + timeout
    return round(100.0 * (killed + timeout) / tested, 1) if tested else 0.0


def run_mutation_score(args: argparse.Namespace) -> int:
    try:
        import mutmut  # noqa: F401
    except ImportError:
        print("schedcheck: error: mutmut is not installed (pip install -e '.[test]')", file=sys.stderr)
        return 2
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
    work = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="schedcheck-mutation-")
    os.makedirs(work, exist_ok=True)
    try:
        _prepare(root, work, args)
        run = ["run"] + ([f"--max-children={args.max_children}"] if args.max_children else [])
        ran = _mutmut(work, *run)
        listed = _mutmut(work, "results", "--all", "true")
        statuses = reclassify(parse_results(listed.stdout), harness_errors(os.path.join(work, HARNESS_ERRORS)))
        if not statuses:
            print(ran.stdout[-3000:] + ran.stderr[-3000:], file=sys.stderr)
            print("schedcheck: error: mutmut produced no results", file=sys.stderr)
            return 2
        killed = statuses.get("killed", [])
        survived = statuses.get("survived", [])
        timeout = statuses.get("timeout", [])
        others = {k: v for k, v in statuses.items() if k not in ("killed", "survived", "timeout")}
        figures = {
            "killed": len(killed), "survived": len(survived), "timeout": len(timeout),
            "other": {k: len(v) for k, v in sorted(others.items())},
            "score": score(len(killed), len(survived), len(timeout)),
            "survivors": sorted(survived),
            "command": f"schedcheck mutation-score --budget {args.budget:g} --examples {args.examples} --seed {args.seed}",
        }
        print(f"mutants: {len(killed)} killed, {len(survived)} survived, {len(timeout)} timed out"
              + "".join(f", {len(v)} {k}" for k, v in sorted(others.items())))
        print(f"mutation score: {figures['score']}% (killed + timed out, over those three)")
        for name in sorted(survived):
            print(f"\nsurvived: {name}")
            print(_mutmut(work, "show", name).stdout.rstrip())
        if args.results:
            os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
            with open(args.results, "w") as handle:
                json.dump(figures, handle, indent=2)
                handle.write("\n")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
