"""The harness tells the serving corpus apart: every buggy scheduler caught by the right invariant, no false alarm.

Each file in tests/corpus/serving/buggy/ has one bug and names, in EXPECTED, the
invariant it breaks; `schedcheck verify --model serving` must fail it with that
invariant first, on a counterexample that is minimal and reproduces.  The schedulers
in tests/corpus/serving/correct/ were written independently of spec/ and impl/ and
must pass, as must our impl (with the stateful test of its online scheduler).
"""

import json
import pathlib

import pytest

import spec.serving
from proofs.cli.main import main
from proofs.counterexample import parse_input_repr
from tests.corpus_names import also_of, expected_of

pytestmark = pytest.mark.slow  # a campaign: `python -m pytest -n 2 -m slow` (README)

CORPUS = pathlib.Path(__file__).parent / "corpus" / "serving"
BUGGY = sorted(p for p in (CORPUS / "buggy").glob("*.py") if p.name != "__init__.py")
CORRECT = sorted(p for p in (CORPUS / "correct").glob("*.py") if p.name != "__init__.py")
# issue 20's rows: until the spec knows prefix caching, the cache_ files cannot be judged by their EXPECTED
# rule (tests/test_serving_cache_buggy_selfcheck.py checks them against the rules meanwhile)
CACHING = {"no_false_sharing", "refcount_exact", "longest_prefix_hit", "lru_eviction"} <= set(spec.serving.NAMES)


# As tests/test_corpus.py: fixed seed and examples, a budget far above the time the planned checks take (a safety
# net), and 10 s per call before a call counts as a hang, except for the hang and death bugs themselves.
SAFETY_BUDGET = "600"
LOADED_CALL_SECONDS = "10"


def verify(tmp_path, target, *extra, hang_bug=False):
    report = tmp_path / "report.json"
    code = main([
        "verify", *([target] if target else []), "--model", "serving", "--seed", "0", "--budget", SAFETY_BUDGET,
        "--json", str(report), "--db", str(tmp_path / "db"), "--save-dir", str(tmp_path / "saved"), *extra,
        *([] if hang_bug else ["--call-timeout", LOADED_CALL_SECONDS]),
    ])
    return code, json.loads(report.read_text())


def test_the_serving_corpus_is_big_enough():
    assert len(BUGGY) >= 25 and len(CORRECT) >= 3


def test_every_expected_name_is_in_the_serving_registry():
    names = set(spec.serving.NAMES)
    for path in BUGGY:
        if path.name.startswith("cache_") and not CACHING:
            continue
        assert expected_of(path) in names and set(also_of(path)) <= names, path.name


def draw_caching_too(monkeypatch):
    """Widen the serving search with the corpus's caching prompt families (tests/test_serving_cache_corpus.py), for
    a search that does not draw prefix caching itself; ours does (``proofs.search.serving.DRAWS_PREFIX_CACHING``,
    for a target that declares ``prefix_caching`` in its DOMAIN, as every cache_ file does), so this does nothing."""
    from hypothesis import strategies as st

    import proofs.search.serving as search
    from tests.test_serving_cache_corpus import cache_calls

    if getattr(search, "DRAWS_PREFIX_CACHING", False):
        return
    plain = search.valid_calls
    monkeypatch.setattr(search, "valid_calls", lambda max_requests=search.MAX_REQUESTS, many=True: st.one_of(
        plain(max_requests, many), cache_calls(), cache_calls()))


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.stem)
def test_every_buggy_serving_scheduler_is_caught_with_the_right_invariant(tmp_path, path, capsys, monkeypatch):
    if path.name.startswith("cache_") and not CACHING:
        pytest.skip("the spec has no prefix caching yet (issue 20)")
    if path.name.startswith("cache_"):
        draw_caching_too(monkeypatch)
    code, report = verify(tmp_path, f"{path}:serve", hang_bug=expected_of(path) == "termination")
    out = capsys.readouterr().out
    assert code == 1, out
    assert report["verdict"] == "fail"
    first = report["counterexamples"][0]
    assert first["property"] in (expected_of(path), *also_of(path)), out
    assert first["model"] == "serving" and first["input_repr"].startswith("serve(")
    if first["check"] in ("validation", "conformance", "deterministic"):
        call = parse_input_repr(first["input_repr"])
        assert spec.serving.is_valid(*call) == (first["check"] != "validation"), first


@pytest.mark.parametrize("path", CORRECT, ids=lambda p: p.stem)
def test_independent_correct_serving_schedulers_pass(tmp_path, path, capsys):
    code, report = verify(tmp_path, f"{path}:serve", "--examples", "200")
    assert code == 0, capsys.readouterr().out
    assert report["verdict"] == "pass" and report["counterexamples"] == []


def test_our_serving_impl_passes_including_the_stateful_test(tmp_path, capsys):
    code, report = verify(tmp_path, None, "--examples", "200")
    assert code == 0, capsys.readouterr().out
    assert report["verdict"] == "pass" and report["target"] == "impl:serve"


def test_policy_none_passes_a_correct_engine_with_another_victim_rule(tmp_path, capsys):
    """A scheduler that preempts the oldest request breaks only the FCFS policy: --policy none passes it."""
    path = CORPUS / "buggy" / "preempts_oldest.py"
    assert expected_of(path) == "preempt_newest"
    code, report = verify(tmp_path, f"{path}:serve", "--policy", "none", "--examples", "200")
    assert code == 0, capsys.readouterr().out


def test_a_serving_counterexample_replays_and_prints_its_timeline(tmp_path, capsys):
    path = CORPUS / "buggy" / "preempts_oldest.py"
    code, report = verify(tmp_path, f"{path}:serve")
    assert code == 1
    out = capsys.readouterr().out
    assert "FAIL preempt_newest  engine=hypothesis" in out and "expected req" in out and "blocks" in out
    saved = sorted((tmp_path / "saved").glob("*.json"))
    assert saved
    assert main(["replay", str(saved[0])]) == 1
    assert "FAIL preempt_newest" in capsys.readouterr().out
