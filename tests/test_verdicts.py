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
                CheckAccount("deterministic", 70, 0, False, 0.0, "not started: deadline")]  # 11 s / 150 calls a call
    assert [a.check for a in cut_short(accounts)] == ["conformance", "deterministic"]
    expected = 1.2 * (12 + 400 * 0.1 + 70 * 11 / 150)
    assert budget_to_finish(accounts, 12) == int(-(-expected // 1))
    assert budget_to_finish(accounts, 12, share=0.5) > budget_to_finish(accounts, 12)
    assert budget_to_finish([CheckAccount("conformance", 5, 5, True, 1.0)], 12) is None
    found = [CheckAccount("conformance", 5, 1, False, 1.0, "counterexample")]
    assert cut_short(found) == [] and budget_to_finish(found, 12) is None  # a stop at a finding is not a shortfall


def test_the_seed_diversifies_the_stateful_test_and_repeats_it():
    def programs(seed):
        account = {}
        assert run_stateful(parse_target("impl:make_scheduler"), "chapter", 8, seed, account=account) is None
        assert account["finished"] and account["programs"] == len(account["texts"])
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
