"""A target's declared domain (``DOMAIN``): read from its source, drawn inside, never charged outside, stated in the verdict."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings

import spec.serving as serving
from proofs import models
from proofs.models import declared
from proofs.targets import TargetError, parse_target

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VLLM_LIKE = {"token_budget": {"min": "max_seqs"}, "unchunked": {"prompt_plus_output": {"max": "token_budget"}}}
NO_CHUNKS = {"chunked_prefill": [False], "block_size": {"min": 2, "multiple_of": 2}}

# an engine that never chunks: it refuses chunked_prefill=True with ValueError, as a real engine's config would
NEVER_CHUNKS = '''
from impl import serve as _serve
{declaration}

def serve(requests, config):
    if isinstance(config, dict) and config.get("chunked_prefill") is True:
        raise ValueError("config.chunked_prefill=True: this engine never chunks a prefill")
    return _serve(requests, config)
'''


def _target(tmp_path, text: str, name: str = "engine.py", function: str = "serve"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return parse_target(f"{path}:{function}")


def _schedcheck(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "proofs.cli.main", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_the_declaration_is_read_from_the_source_without_running_it(tmp_path):
    target = _target(tmp_path, 'raise SystemExit("never run")\nDOMAIN = {"chunked_prefill": [False]}\n')
    assert declared.read(target) == {"chunked_prefill": [False]}
    model = declared.for_target(models.get("serving"), target)
    assert model.declared.describe() == "declared domain: chunked_prefill=False"


def test_a_module_target_is_read_without_importing_its_package(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text('raise SystemExit("the package is never imported")\n')
    (package / "engine.py").write_text("DOMAIN = {'block_size': {'min': 2}}\n")
    target = parse_target("pkg.engine:make")._replace(root=str(tmp_path))
    assert declared.read(target) == {"block_size": {"min": 2}}


def test_no_declaration_leaves_the_model_as_it_is(tmp_path):
    model = models.get("serving")
    assert declared.for_target(model, _target(tmp_path, "def serve(requests, config): pass\n")) is model


@pytest.mark.parametrize("text, expected", [
    ("DOMAIN = dict(chunked_prefill=[False])", "must be a literal dict"),
    ("DOMAIN = [1]", "expected a dict"),
    ("DOMAIN = {'chunked': {'chunked': {}}}", "sections do not nest"),
    ("DOMAIN = {'slots': {'min': 1}}", "'slots'"),
    ("DOMAIN = {'block_size': {'least': 2}}", "unknown bound 'least'"),
    ("DOMAIN = {'token_budget': {'min': 'budget'}}", "'budget'"),
    ("DOMAIN = {'chunked_prefill': [0]}", "list of bools"),
    ("DOMAIN = {'block_size': {'multiple_of': 0}}", "multiple_of=0"),
])
def test_a_malformed_declaration_is_a_usage_error_naming_it(tmp_path, text, expected):
    with pytest.raises(TargetError, match=expected.replace("(", r"\(").replace("[", r"\[")):
        declared.for_target(models.get("serving"), _target(tmp_path, text + "\n"))


def test_the_chapter_model_takes_no_declaration(tmp_path):
    with pytest.raises(TargetError, match="serving model only"):
        declared.for_target(models.get("chapter"), _target(tmp_path, "DOMAIN = {}\n", function="schedule"))


def test_admits_each_kind_of_rule():
    domain = declared.Domain(VLLM_LIKE)
    config = {"max_seqs": 2, "token_budget": 4, "block_size": 2, "num_blocks": 8, "chunked_prefill": False}
    request = {"id": 0, "arrival": 0, "prompt": 2, "output": 2}
    assert domain.admits(([request], config))
    assert not domain.admits(([dict(request, output=3)], config))  # prompt + output 5 > 4, unchunked
    assert domain.admits(([dict(request, output=3)], dict(config, chunked_prefill=True)))  # the section is off
    assert not domain.admits(([], dict(config, max_seqs=5)))  # token_budget 4 < max_seqs 5
    assert declared.Domain(NO_CHUNKS).admits(([], dict(config, block_size=4)))
    assert not declared.Domain(NO_CHUNKS).admits(([], dict(config, block_size=3)))


@pytest.mark.parametrize("raw", [VLLM_LIKE, NO_CHUNKS, {"chunked_prefill": [True], "max_seqs": {"max": 2}},
                                 {"prompt": {"max": 2}, "output": {"min": 2}}])
def test_every_drawn_call_lies_inside_the_declaration_and_the_model(raw):
    model = declared.DeclaredModel(models.get("serving"), declared.Domain(raw))

    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(model.valid_calls())
    def drawn(call):
        assert serving.is_valid(*call), call
        assert model.declared.admits(call), call

    drawn()


def test_the_minimiser_and_the_other_calls_stay_inside():
    model = declared.DeclaredModel(models.get("serving"), declared.Domain(VLLM_LIKE))
    config = {"max_seqs": 2, "token_budget": 6, "block_size": 2, "num_blocks": 8, "chunked_prefill": False}
    call = ([{"id": 0, "arrival": 0, "prompt": 3, "output": 3}, {"id": 1, "arrival": 0, "prompt": 2, "output": 2}], config)
    tried = []

    def fails(candidate):
        tried.append(candidate)
        return True

    small = model.minimize_valid(call, fails, 5.0)
    assert tried and all(model.declared.admits(c) for c in tried)
    assert small[1]["token_budget"] >= small[1]["max_seqs"]
    assert all(model.declared.admits(c) for c in model.calls_between(call) if serving.is_valid(*c))


def test_fit_cuts_a_request_to_the_declaration_and_drops_one_that_cannot_fit():
    model = declared.DeclaredModel(models.get("serving"), declared.Domain(VLLM_LIKE))
    config = {"max_seqs": 1, "token_budget": 1, "block_size": 1, "num_blocks": 4, "chunked_prefill": False}
    requests, fitted = model.fit(([{"id": 0, "arrival": 0, "prompt": 1, "output": 1}], config))
    assert requests == [] and fitted == config  # prompt + output >= 2 > token_budget 1: no request fits
    config = dict(config, token_budget=4)
    requests, _ = model.fit(([{"id": 0, "arrival": 0, "prompt": 2, "output": 3}], config))
    assert requests == [{"id": 0, "arrival": 0, "prompt": 2, "output": 2}]


@pytest.mark.parametrize("declare", [True, False])
def test_verify_never_draws_nor_charges_a_call_outside_the_declaration(tmp_path, declare):
    """The same engine, which refuses chunked prefill with ValueError: declared, it passes and the verdict
    says what was left out; undeclared, the refusal of a valid call is a `validation` failure."""
    declaration = "DOMAIN = {'chunked_prefill': [False]}" if declare else ""
    path = tmp_path / "engine.py"
    path.write_text(NEVER_CHUNKS.format(declaration=declaration))
    report = tmp_path / "report.json"
    run = _schedcheck("verify", "--model", "serving", f"{path}:serve", "--examples", "25", "--seed", "0",
                      "--db", "none", "--save-dir", str(tmp_path / "cex"), "--json", str(report), "--budget", "300")
    lines = run.stdout.strip().splitlines()
    if declare:
        assert run.returncode == 0, run.stdout + run.stderr
        assert lines[-1].startswith("PASS") and lines[-1].endswith("; declared domain: chunked_prefill=False")
        assert json.loads(report.read_text())["declared_domain"]["rules"] == {"chunked_prefill": [False]}
    else:
        assert run.returncode == 1, run.stdout + run.stderr
        assert lines[0].startswith("FAIL validation")


def test_replay_refuses_a_saved_call_outside_the_declaration(tmp_path):
    path = tmp_path / "engine.py"
    path.write_text(NEVER_CHUNKS.format(declaration="DOMAIN = {'chunked_prefill': [False]}"))
    call = {"requests": [{"id": 0, "arrival": 0, "prompt": 1, "output": 1}],
            "config": {"max_seqs": 1, "token_budget": 1, "block_size": 1, "num_blocks": 1, "chunked_prefill": True}}
    saved = tmp_path / "cex.json"
    saved.write_text(json.dumps({"model": "serving", "property": "validation", "engine": "hypothesis",
                                 "check": "conformance", "input": call, "message": "", "rule": "",
                                 "target": f"{path}:serve"}))
    run = _schedcheck("replay", str(saved))
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and "outside the domain" in run.stderr and "not judged" in run.stderr


def test_the_policy_switch_is_drawn_only_for_a_target_that_declares_it():
    seen = {"plain": set(), "declared": set()}
    plain = models.get("serving")
    switched = declared.DeclaredModel(plain, declared.Domain({"reserve_full_sequence": [False, True]}))
    for name, model in (("plain", plain), ("declared", switched)):
        @settings(max_examples=120, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                  derandomize=True)
        @given(model.valid_calls())
        def drawn(call):
            assert serving.is_valid(*call)
            seen[name].add(call[1].get("reserve_full_sequence"))

        drawn()
    assert seen["plain"] == {None}  # a scheduler written before the switch never sees the key
    assert seen["declared"] == {None, False, True}
