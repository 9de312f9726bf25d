"""Every verdict is as strong as its word: a check cut short is incomplete, seeds diversify the stateful test,
and no check runs that can never find anything."""

import json
import pathlib
import re

import pytest

from proofs.cli.main import main
from proofs.search import engine
from proofs.search.engine import CheckAccount, budget_to_finish, cut_short
from proofs.online.stateful import run_stateful
from proofs.targets import parse_target

ROOT = pathlib.Path(__file__).resolve().parent.parent
SLOW = '''
import time
import impl


def schedule(jobs, slots, continuous):
    time.sleep(0.05)
    return impl.schedule(jobs, slots, continuous)
'''


@pytest.fixture
def slow(tmp_path):
    path = tmp_path / "slow.py"
    path.write_text(SLOW)
    return f"{path}:schedule"


def run(tmp_path, target, *extra):
    report = tmp_path / "report.json"
    code = main(["verify", target, "--seed", "0", "--json", str(report), "--db", "none",
                 "--save-dir", str(tmp_path / "saved"), *extra])
    return code, json.loads(report.read_text())


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_check_cut_short_at_the_deadline_makes_the_run_incomplete(tmp_path, slow, capsys, workers):
    # 500 conformance calls of 50 ms each cannot fit in 3 s
    code, report = run(tmp_path, slow, "--budget", "3", "--workers", workers, "--junit", str(tmp_path / "r.xml"))
    out = capsys.readouterr().out
    assert code == 2, out
    assert report["verdict"] == "incomplete" and report["counterexamples"] == []
    by_check = {c["check"]: c for c in report["checks"]}
    conformance = by_check["conformance"]
    assert conformance["planned"] == 500 and conformance["tried"] < 500 and not conformance["finished"]
    assert conformance["stopped"] in ("deadline", "not started: deadline")
    assert report["budget_to_finish"] > 3
    summary = out.strip().splitlines()[-1]
    assert summary.startswith(f"INCOMPLETE {slow}:")
    assert f"--budget {report['budget_to_finish']} would finish it" in summary and "conformance (" in summary
    assert re.search(r"hypothesis  conformance +\d+ of 500 +calls +not finished", out)
    assert "PASS" not in out
    junit = (tmp_path / "r.xml").read_text()
    assert 'name="hypothesis:conformance"' in junit and 'type="incomplete"' in junit


def test_budget_estimate_uses_the_measured_rate():
    accounts = [CheckAccount("validation", 50, 50, True, 1.0),
                CheckAccount("conformance", 500, 100, False, 10.0, "deadline"),  # 0.1 s a call: 40 s to go
                CheckAccount("deterministic", 70, 0, False, 0.0, "not started: deadline")]  # 11 s / 150 calls, x4
    assert [a.check for a in cut_short(accounts)] == ["conformance", "deterministic"]
    expected = 1.5 * (12 + 400 * 0.1 + 70 * 4 * 11 / 150)  # a repeated call costs 4 measured calls (fresh processes)
    assert budget_to_finish(accounts, 12) == int(-(-expected // 1))
    assert budget_to_finish(accounts, 12, share=0.5) > budget_to_finish(accounts, 12)
    assert budget_to_finish([CheckAccount("conformance", 5, 5, True, 1.0)], 12) is None
    found = [CheckAccount("conformance", 5, 1, False, 1.0, "counterexample")]
    assert cut_short(found) == [] and budget_to_finish(found, 12) is None  # a stop at a finding is not a shortfall


def test_the_seed_diversifies_the_stateful_test_and_repeats_it():
    def programs(seed):
        account = {}
        assert run_stateful(parse_target("impl:make_scheduler"), "chapter", 8, seed, account=account) is None
        assert account["finished"] and account["programs"] + account["discarded"] == len(account["texts"])
        assert account["programs"] == 8  # what was planned: the programs Hypothesis discarded are not counted
        return account["texts"]

    first, again, other, unseeded = programs(1), programs(1), programs(2), programs(None)
    assert first and first == again
    assert other != first
    assert unseeded


def test_the_stateful_test_gets_the_seed_of_verify(monkeypatch, tmp_path, capsys):
    seen = []

    def fake(target, model_name, max_examples, seed=None, **options):
        seen.append(seed)
        return None

    import proofs.online.stateful as stateful

    monkeypatch.setattr(stateful, "run_stateful", fake)
    main(["verify", "impl:schedule", "--seed", "7", "--examples", "10", "--db", "none", "--budget", "30",
          "--save-dir", str(tmp_path / "saved")])
    capsys.readouterr()
    assert seen == [7]


def test_no_check_runs_that_can_never_find_anything():
    # the metamorphic relations compared calls each of which spec.check (matches_reference) had judged already
    assert "metamorphic" not in engine.CHECKS and "metamorphic" not in engine.EXAMPLES
    assert not (ROOT / "proofs" / "search" / "relations.py").exists()
    for doc in ("README.md", "docs/verify.md", "docs/ci.md"):
        text = (ROOT / doc).read_text()
        assert "proofs.search.relations" not in text and "metamorphic relations," not in text, doc


def test_a_diff_cut_short_by_its_budget_is_incomplete_not_same(tmp_path, slow, capsys):
    report = tmp_path / "diff.json"
    code = main(["diff", slow, slow, "--seed", "0", "--budget", "2", "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 2, out
    assert out.startswith("INCOMPLETE SAME ") and "incomplete is not a pass" in out
    data = json.loads(report.read_text())
    assert data["verdict"] == "incomplete" and data["unfinished"]
    from proofs.report import ci as ci_reports

    junit = ci_reports.junit_xml("diff", data)
    assert 'type="incomplete"' in junit and 'errors="1"' in junit


# -- issue 18: no wrong result forgiven, honest summaries and counts ---------------------------------------------

HOSTILE = ROOT / "tests" / "corpus" / "hostile"


@pytest.mark.parametrize("model, target", [  # the chapter's (14 s) in the slow run: the default run must stay under 5 min
    pytest.param("chapter", f"{HOSTILE / 'chance.py'}:schedule", marks=pytest.mark.slow),
    ("serving", f"{HOSTILE / 'chance_serving.py'}:serve")])
def test_a_wrong_result_by_chance_is_a_fail_never_a_flaky_pass(tmp_path, capsys, monkeypatch, model, target):
    # the corpus files break the spec on 1 call in 600 (`verify --seed 4` used to print PASS ... 1 flaky failure
    # not counted); made 1 in 20 here, so that the search surely sees it: what matters is what it does then
    monkeypatch.setenv("HOSTILE_CHANCE_ONE_IN", "20")
    code, report = run(tmp_path, target, "--model", model, "--examples", "200", "--budget", "120")
    out = capsys.readouterr().out
    assert code == 1 and report["verdict"] == "fail", out
    assert out.splitlines()[-1].startswith(f"FAIL {target}: 1 counterexample")
    # a returned result is an observation, never flaky (a loaded machine may still make a call time out once)
    assert all(entry["kind"] in ("time-out", "death") for entry in report.get("flaky", [])), report["flaky"]
    (cex,) = report["counterexamples"]
    assert cex["format"] == 2 and cex["reproduced"] in ("alone", "history", "no") and cex["history"] is not None


def _time_outs_at(monkeypatch, draws):
    """Make the conformance search see a time-out on the given draws (1 = its first call), each of which
    then passes on the retry (flaky): the time-outs a loaded machine may cause, at chosen places."""
    from proofs.search.judge import Finding

    drawn = {"n": 0}
    real = engine.Search._valid_steered

    def valid_steered(self, call):
        drawn["n"] += 1
        if drawn["n"] in draws:
            return [Finding("termination", "the call did not return within 1 s", kind="timed_out")]
        return real(self, call)

    def minimize_valid(self, call, wanted):
        self.flaky.append(self._flaky_entry(wanted, call, self._seen, "a time-out once, but not again"))
        return call, None

    monkeypatch.setattr(engine.Search, "_valid_steered", valid_steered)
    monkeypatch.setattr(engine.Search, "_minimize_valid", minimize_valid)
    return drawn


def test_a_search_resumed_after_flaky_time_outs_tries_what_it_planned_and_no_more(tmp_path, capsys, monkeypatch):
    # two time-outs that pass on the retry: flaky; the search goes on with the examples it has left, so the
    # count never passes the plan (it read "conformance (624 of 500 calls)" when each round started afresh)
    _time_outs_at(monkeypatch, {10, 40})
    code, report = run(tmp_path, "impl:schedule", "--examples", "100", "--budget", "120")
    out = capsys.readouterr().out
    assert code == 0 and report["verdict"] == "pass", out
    assert [entry["kind"] for entry in report["flaky"]] == ["time-out", "time-out"]
    conformance = next(c for c in report["checks"] if c["check"] == "conformance")
    assert conformance["tried"] == conformance["planned"] == 100 and conformance["finished"]
    assert all(c["tried"] <= c["planned"] for c in report["checks"] if c["unit"] == "calls")
    summary = out.splitlines()[-1]
    assert summary.startswith("PASS ") and "(2 flaky time-outs, not counted: it passed on a retry with a larger limit" in summary


def test_a_check_stopped_by_flaky_time_outs_gets_no_budget_advice(tmp_path, capsys, monkeypatch):
    _time_outs_at(monkeypatch, {5, 10, 15})
    code, report = run(tmp_path, "impl:schedule", "--examples", "100", "--budget", "120")
    out = capsys.readouterr().out
    assert code == 2 and report["verdict"] == "incomplete", out
    conformance = next(c for c in report["checks"] if c["check"] == "conformance")
    assert conformance["stopped"] == "flaky" and conformance["tried"] < conformance["planned"]
    summary = out.splitlines()[-1]
    assert "stopped after flaky time-outs or deaths (a larger --call-timeout, not a larger --budget" in summary
    assert "would finish it" not in summary and "budget_to_finish" not in report  # more budget would not help


def test_a_target_wrong_once_its_process_is_old_is_a_fail_and_never_nothing_broken(tmp_path, capsys, monkeypatch):
    # the corpus file is wrong once its process is 3 s old; 0.2 s here: every path the harness may take
    # (seen in an old process, not in a fresh one; or in a fresh one too, if the machine is slow) is a FAIL
    monkeypatch.setenv("HOSTILE_AGE_SECONDS", "0.2")
    code, report = run(tmp_path, f"{HOSTILE / 'age.py'}:schedule", "--examples", "100", "--budget", "120")
    out = capsys.readouterr().out
    assert code == 1 and report["verdict"] == "fail", out
    assert "nothing broken" not in out and "would finish it" not in out
    assert all(entry["kind"] in ("time-out", "death") for entry in report.get("flaky", [])), report["flaky"]
    assert all(c["tried"] <= c["planned"] for c in report["checks"]), report["checks"]


def test_the_summary_never_says_nothing_broken_beside_a_counterexample():
    from proofs.report.text import summary_line

    assert summary_line("fail", "t", 1, 10) == "FAIL t: 1 counterexample"
    assert "nothing broken" in summary_line("incomplete", "t", 0, 10)
    with pytest.raises(AssertionError):
        summary_line("incomplete", "t", 1, 10)


def test_the_stateful_row_counts_programs_apart_from_the_shrinking_runs(tmp_path):
    # "104 of 60 programs": the runs Hypothesis made while shrinking a failure were counted as programs tried
    import time

    from proofs import models
    from proofs.cli.verify import check_lines
    from proofs.sandbox import TargetProcess
    from proofs.search.engine import Search

    model = models.get("chapter", online=True)
    target = parse_target(f"{ROOT / 'tests' / 'corpus' / 'online_buggy' / 'backfills_one_too_many.py'}:make")
    with TargetProcess(target, shape=model.shape, adapter=model.adapter) as process:
        search = Search(process, time.monotonic() + 120, seed=0, model=model)
        found = search.run(stateful=True, only={"stateful"})
    (account,) = search.checks
    assert found and account.tried <= account.planned == 60
    assert "more times by Hypothesis's shrinking (not counted)" in account.note
    line, note = check_lines([account])
    assert line.endswith(f"{account.tried} of 60     programs  not finished (counterexample)")
    assert note.startswith("            (the failing program was then run ") and "shrinking (not counted)" in note


def test_budget_advice_is_given_only_for_checks_the_deadline_cut_short():
    flaky = [CheckAccount("conformance", 500, 120, False, 10.0, "flaky")]
    assert cut_short(flaky) == flaky and budget_to_finish(flaky, 60) is None
    late = [CheckAccount("conformance", 500, 100, False, 10.0, "deadline")]
    assert budget_to_finish(late, 12) >= 12 + 400 * 0.1
