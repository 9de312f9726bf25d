"""pytest plugin: ``pytest --schedcheck TARGET`` makes every invariant a test item.

What it establishes: what ``schedcheck verify TARGET --all`` establishes (a search,
not a proof; docs/verify.md).  Each invariant of the model's registry
(``spec.INVARIANTS``, or ``spec.serving.INVARIANTS`` with ``--schedcheck-model serving``), and
``signature``, becomes one item under a synthetic collector ``schedcheck[TARGET]``,
collected even when the run has no test files.  The first item to run calls
``schedcheck verify`` once, in a child process (so the suite's own Hypothesis
profiles, plugins and imports cannot change the search), and caches the JSON report
for the session (per worker under pytest-xdist); each item then fails when the report
has a counterexample to its invariant, showing the counterexample report and the
replay command, and passes otherwise.  When the target cannot be called as
``schedule(jobs, slots, continuous)``, ``signature`` fails and the rest are skipped;
when verify cannot run at all (exit 2: no such file, an import error), every item
fails with its message.

With ``--schedcheck-fuzz`` the items are instead verify's three searches
(``conformance``, ``deterministic``, ``corrupted_validation``), each a Hypothesis test
``pytest.Function`` that judges every invariant on every call (proofs.fuzz.properties),
under a Hypothesis profile whose database is ``--schedcheck-db``: the items HypoFuzz
collects and fuzzes in ``schedcheck fuzz``, and that plain pytest runs once each.

Registered through the ``pytest11`` entry point as ``schedcheck``; without it, load
it with ``-p proofs.pytest_plugin``.  Nothing runs unless ``--schedcheck`` is given.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import NamedTuple

import pytest

from proofs.report import ci as ci_reports

HARNESS_OVERRUN = 60.0  # verify ends within budget + 10 s; the child is killed well after that


class VerifyOutcome(NamedTuple):
    """One verify run: its exit code, its JSON report (None when it wrote none) and what it printed."""

    code: int
    report: dict | None
    printed: str
    save_dir: str


_OUTCOME = pytest.StashKey[VerifyOutcome]()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("schedcheck", "schedcheck: check a batch scheduler against the spec")
    group.addoption("--schedcheck", metavar="TARGET", default=None,
                    help="check TARGET (path/to/file.py:function or package.module:function): one test item per invariant")
    group.addoption("--schedcheck-budget", type=float, default=30.0, metavar="S",
                    help="seconds for the one verify run of the session (default 30)")
    group.addoption("--schedcheck-seed", type=int, default=None, metavar="N", help="make the search repeatable")
    group.addoption("--schedcheck-examples", type=int, default=None, metavar="N",
                    help="valid calls to try (verify's --examples; default verify's)")
    group.addoption("--schedcheck-model", default="chapter", choices=("chapter", "serving"),
                    help="which model of the spec judges TARGET: chapter (schedule) or serving (serve); default chapter")
    group.addoption("--schedcheck-policy", default=None, metavar="fcfs|none",
                    help="serving model: fcfs (default) or none (safety and metrics only)")
    group.addoption("--schedcheck-save-dir", default=None, metavar="DIR",
                    help="where counterexamples are saved and replayed from (default verify's)")
    group.addoption("--schedcheck-fuzz", action="store_true", default=False,
                    help="make each invariant's item a Hypothesis test (proofs.fuzz.properties), as "
                    "`schedcheck fuzz` has HypoFuzz fuzz them, instead of one verify run")
    group.addoption("--schedcheck-fuzz-check", action="append", default=None, metavar="NAME",
                    choices=("conformance", "deterministic", "corrupted_validation"),
                    help="with --schedcheck-fuzz: only this search (repeatable; default all three)")
    group.addoption("--schedcheck-db", default=None, metavar="DIR|none|redis://HOST:PORT[/DB]",
                    help="with --schedcheck-fuzz: the example database of the session's Hypothesis profile (verify's --db)")
    group.addoption("--schedcheck-call-timeout", type=float, default=1.0, metavar="S",
                    help="with --schedcheck-fuzz: wall-clock limit per call of the target (default 1)")
    group.addoption("--schedcheck-load-timeout", type=float, default=None, metavar="S",
                    help="with --schedcheck-fuzz: the limit on importing the target, apart from the per-call limit "
                    "(default verify's --load-timeout)")


FUZZ_PROFILE = "schedcheck-fuzz"


def pytest_configure(config) -> None:
    """With ``--schedcheck-fuzz``, load a Hypothesis profile whose database is ``--schedcheck-db``
    (HypoFuzz fuzzes only tests that use the default profile's database) and which is never derandomized
    (Hypothesis loads its derandomized ``ci`` profile when ``CI`` is set, and HypoFuzz skips such tests)."""
    if not (config.getoption("schedcheck", None) and config.getoption("schedcheck_fuzz", False)):
        return
    from hypothesis import settings

    from proofs.search.database import open_database

    if not config.getoption("schedcheck_call_timeout") > 0:
        raise pytest.UsageError(
            f"--schedcheck-call-timeout={config.getoption('schedcheck_call_timeout')!r}: expected seconds > 0")
    load = config.getoption("schedcheck_load_timeout")
    if load is not None and not load > 0:
        raise pytest.UsageError(f"--schedcheck-load-timeout={load!r}: expected seconds > 0")
    try:
        database = open_database(config.getoption("schedcheck_db"))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    settings.register_profile(FUZZ_PROFILE, parent=settings(), database=database, derandomize=False)
    settings.load_profile(FUZZ_PROFILE)


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect
def pytest_collection_modifyitems(session, config, items) -> None:
    target = config.getoption("schedcheck")
    if not target:
        return
    if config.getoption("schedcheck_budget") <= 0:
        raise pytest.UsageError(f"--schedcheck-budget={config.getoption('schedcheck_budget')!r}: expected seconds > 0")
    collector = SchedcheckTarget.from_parent(session, name=f"schedcheck[{target}]", nodeid=f"schedcheck[{target}]")
    collector.target = target
    items.extend(collector.collect())


class SchedcheckFailure(Exception):
    """An invariant of the target has a counterexample (or could not be checked)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class SchedcheckTarget(pytest.Collector):
    """The synthetic collector: one item per invariant, in registry order, then ``signature``."""

    target: str = ""

    def collect(self):
        location = ci_reports.locate(self.target)
        model, policy = self.config.getoption("schedcheck_model"), self.config.getoption("schedcheck_policy")
        if self.config.getoption("schedcheck_fuzz"):
            yield from self._fuzz_items(model, policy)
            return
        for name, family, claim, _ in ci_reports._registry(model, policy):
            item = SchedcheckItem.from_parent(self, name=name)
            item.invariant, item.claim, item.family, item.where = name, claim, family, location
            yield item


    def _fuzz_items(self, model: str, policy: str | None):
        """One ``pytest.Function`` per search of verify (conformance, deterministic, corrupted_validation),
        each a Hypothesis test that judges every invariant of the registry, which HypoFuzz can collect and fuzz."""
        from proofs.fuzz.properties import CHECKS, Context, make_test
        from proofs.targets import TargetError

        try:
            context = Context(self.target, model, policy, self.config.getoption("schedcheck_call_timeout"),
                              self.config.getoption("schedcheck_load_timeout"))
        except (TargetError, ValueError) as error:
            raise pytest.UsageError(f"--schedcheck {self.target}: {error}") from None
        chosen = self.config.getoption("schedcheck_fuzz_check") or CHECKS
        for check in (c for c in CHECKS if c in chosen):
            item = pytest.Function.from_parent(self, name=check, callobj=make_test(context, check))
            item.add_marker("hypothesis")
            yield item


class SchedcheckItem(pytest.Item):
    invariant: str = ""
    claim: str = ""
    family: str = ""
    where: tuple[str, int] | None = None  # the target's def (not pytest's own ``location``)

    def runtest(self) -> None:
        outcome = _verify(self.config, self.parent.target)
        report = outcome.report
        if report is None:
            raise SchedcheckFailure(
                f"schedcheck verify {self.parent.target} could not run (exit {outcome.code}):\n{outcome.printed.strip()}"
            )
        found = [c for c in report.get("counterexamples", []) if c.get("property") == self.invariant]
        if found:
            texts = [_report_text(outcome, c, self.parent.target) for c in found]
            raise SchedcheckFailure(f"{self.invariant}: {self.claim}\n\n" + "\n\n".join(texts))
        unknown = [c for c in report.get("contracts", []) if c.get("name") == self.invariant and c.get("outcome") == "unknown"]
        if unknown:
            raise SchedcheckFailure(
                f"{self.invariant}: unknown (never a pass):\n" + "\n".join(f"{c.get('subject')}: {c.get('message')}" for c in unknown)
            )
        if report.get("verdict") == "incomplete":  # nothing broken, but not everything planned ran: never a pass
            short = [f"{c.get('check')}: tried {c.get('tried')} of {c.get('planned')} {c.get('unit', 'calls')}"
                     for c in report.get("checks", []) if not c.get("finished") and c.get("stopped") != "counterexample"]
            short += [f"crosshair {c.get('name')} on {c.get('subject')}: {c.get('message')}"
                      for c in report.get("contracts", []) if c.get("outcome") == "incomplete"]
            hint = f"; --schedcheck-budget {report['budget_to_finish']} would finish it" if report.get("budget_to_finish") else ""
            raise SchedcheckFailure(f"{self.invariant}: incomplete (never a pass){hint}:\n" + "\n".join(short))
        if any(c.get("property") == ci_reports.SIGNATURE for c in report.get("counterexamples", [])):
            pytest.skip("not checked: the target cannot be called as the model's entry function (see `signature`)")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, SchedcheckFailure):
            return excinfo.value.text
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        if self.where is not None:
            path, line = self.where
            return path, line - 1, f"schedcheck {self.parent.target}: {self.invariant}"
        return self.path, None, f"schedcheck {self.parent.target}: {self.invariant}"


def _verify(config, target: str) -> VerifyOutcome:
    """Run ``schedcheck verify TARGET --all`` once per session and cache what it found."""
    if _OUTCOME in config.stash:
        return config.stash[_OUTCOME]
    budget = config.getoption("schedcheck_budget")
    save_dir = config.getoption("schedcheck_save_dir") or ci_reports.DEFAULT_SAVE_DIR
    scratch = tempfile.mkdtemp(prefix="schedcheck-pytest-")
    json_path = os.path.join(scratch, "verify.json")
    command = [sys.executable, "-m", "proofs.cli.main", "verify", target, "--all", "--budget", f"{budget:g}",
               "--save-dir", save_dir, "--json", json_path, "--model", config.getoption("schedcheck_model")]
    if config.getoption("schedcheck_policy") is not None:
        command += ["--policy", config.getoption("schedcheck_policy")]
    if config.getoption("schedcheck_seed") is not None:
        command += ["--seed", str(config.getoption("schedcheck_seed"))]
    if config.getoption("schedcheck_examples") is not None:
        command += ["--examples", str(config.getoption("schedcheck_examples"))]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=budget + HARNESS_OVERRUN,
                             stdin=subprocess.DEVNULL)
        code, printed = run.returncode, run.stdout + run.stderr
    except subprocess.TimeoutExpired:
        code, printed = 2, f"schedcheck verify did not end within {budget + HARNESS_OVERRUN:g} s"
    report = None
    try:
        with open(json_path, encoding="utf-8") as handle:
            report = json.load(handle)
    except (OSError, ValueError):
        report = None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if report is not None and code not in (0, 1, 2):
        report = None  # it died after writing: do not trust the report
    config.stash[_OUTCOME] = VerifyOutcome(code, report, printed, save_dir)
    return config.stash[_OUTCOME]


def _report_text(outcome: VerifyOutcome, cex: dict, target: str) -> str:
    """verify's own printed report for this counterexample (with its timeline) and the replay command."""
    name = cex.get("property", "")
    for block in outcome.printed.split("\n\n"):
        block = block.strip("\n")
        if block.startswith(f"FAIL {name}  ") and cex.get("input_repr", "") in block:
            return block + f"\nreplay: {ci_reports.replay_command(outcome.save_dir, target, name)}"
    return ci_reports.counterexample_text(cex, target, outcome.save_dir)
