"""`schedcheck verify` and `replay` as a user meets them: exit codes, reports, JSON, replay."""

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from proofs.cli.main import main
from proofs.counterexample import Counterexample, parse_input_repr
from proofs.report.text import format_counterexample

BUGGY = pathlib.Path(__file__).parent / "corpus" / "buggy"
SLOT_BUG = f"{BUGGY / 'admits_one_too_many.py'}:schedule"


def run_cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.fixture
def isolated(tmp_path):
    """Arguments that keep a run's databases in tmp_path."""
    return ["--db", str(tmp_path / "db"), "--save-dir", str(tmp_path / "saved"), "--seed", "0"]


@pytest.mark.parametrize(
    "target, message",
    [
        ("no/such/file.py:schedule", "no such file"),
        (f"{BUGGY / 'admits_one_too_many.py'}:nothing_here", "no function 'nothing_here'"),
        ("no_such_module_xyz:schedule", "import failed: ModuleNotFoundError"),
        ("just_a_name", "expected path/to/file.py:function"),
    ],
)
def test_a_target_that_cannot_be_loaded_exits_2_with_one_line(target, message):
    run = run_cli("verify", target, "--budget", "5")
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.count("\n") == 1 and message in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("option", [["--budget", "0"], ["--budget", "x"], ["--engine", "nope"], ["--examples", "0"]])
def test_bad_arguments_exit_2(option):
    run = run_cli("verify", *option)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("option, value, rule", [
    ("--budget", "-5", "seconds > 0"), ("--call-timeout", "0", "seconds > 0"),
    ("--examples", "0", "an int >= 1"), ("--workers", "-2", "an int >= 1"),
])
def test_a_bad_number_is_named_with_its_value(capsys, option, value, rule):
    assert main(["verify", option, value]) == 2
    err = capsys.readouterr().err
    assert err == f"schedcheck: error: {option}={value}: expected {rule}\n"


@pytest.mark.parametrize("option", [["--seed", "x"], ["--profile", "fast"], ["--budget", "x"], ["--engine", "nope"]])
def test_a_bad_option_value_is_one_line_not_the_whole_usage(option):
    run = run_cli("verify", *option)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and f"argument {option[0]}" in run.stderr, run.stderr
    assert "usage:" not in run.stderr


def test_a_typo_in_the_function_name_offers_the_close_names_and_no_internal_module(tmp_path):
    (tmp_path / "mysched.py").write_text("def schedule(jobs, slots, continuous):\n    return {}\n")
    run = run_cli("verify", "mysched.py:schedul", "--budget", "5", cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "no function 'schedul' in mysched.py; did you mean 'mysched.py:schedule'?" in run.stderr, run.stderr
    assert "schedcheck_target_" not in run.stderr


def test_a_module_name_that_is_a_file_here_gets_the_file_py_hint(tmp_path):
    (tmp_path / "mysched.py").write_text("def schedule(jobs, slots, continuous):\n    return {}\n")
    # -P: the working directory is not on sys.path, as with the installed `schedcheck` script
    run = subprocess.run([sys.executable, "-P", "-m", "proofs.cli.main", "verify", "mysched:schedule", "--budget", "5"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "write 'mysched.py:schedule'" in run.stderr, run.stderr


def test_a_target_whose_import_crashes_is_reported_not_raised(tmp_path):
    bad = tmp_path / "explodes.py"
    bad.write_text("import os\nos._exit(7)\n")
    run = run_cli("verify", f"{bad}:schedule", "--budget", "5")
    assert run.returncode == 2
    assert "died while importing" in run.stderr and "exit code 7" in run.stderr


def counterexample_part(out: str) -> str:
    """The counterexample reports of a verify run's output, without the per-check lines and the summary."""
    return out.split("\n\nhypothesis  ")[0].split("\n\nFAIL ")[0]


def test_failing_run_prints_the_report_and_writes_json(tmp_path, isolated, capsys):
    report = tmp_path / "report.json"
    code = main(["verify", SLOT_BUG, "--json", str(report), *isolated])
    out = capsys.readouterr().out
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "FAIL slot_bound  engine=hypothesis  (shrunk: 2 jobs)"
    assert lines[1].startswith("schedule([")
    assert any(line.startswith("expected slot0") for line in lines)
    assert any(line.startswith("         slot1") for line in lines)  # the actual schedule uses a second slot
    data = json.loads(report.read_text())
    assert set(data) == {"verdict", "target", "seconds", "counterexamples", "checks", "calls", "bounds", "statistics",
                         "corners"}
    assert data["verdict"] == "fail" and data["target"] == SLOT_BUG
    stopped = [c for c in data["checks"] if not c["finished"]]
    assert stopped and all(c["stopped"] == "counterexample" for c in stopped)  # the first find ended them
    (cex,) = data["counterexamples"]
    assert set(cex) >= {"property", "engine", "input", "input_repr", "message"}
    assert cex["property"] == "slot_bound" and cex["engine"] == "hypothesis"
    assert cex["input"]["slots"] == 1 and len(cex["input"]["jobs"]) == 2
    assert parse_input_repr(cex["input_repr"]) == (cex["input"]["jobs"], 1, cex["input"]["continuous"])


@pytest.mark.slow  # a campaign: over 15 s on 2 cores
def test_the_same_bug_gives_the_same_counterexample_on_every_run(tmp_path, capsys):
    reports = []
    for run in range(2):
        path = tmp_path / f"{run}.json"
        main(["verify", SLOT_BUG, "--json", str(path), "--db", "none", "--save-dir", str(tmp_path / f"s{run}")])
        reports.append(json.loads(path.read_text())["counterexamples"][0]["input_repr"])
    assert reports[0] == reports[1]


def test_counterexamples_are_saved_and_replayed_first(tmp_path, isolated, capsys):
    assert main(["verify", SLOT_BUG, *isolated]) == 1
    saved = list((tmp_path / "saved").glob("*.json"))
    assert len(saved) == 1
    first_report = capsys.readouterr().out
    assert main(["verify", SLOT_BUG, *isolated, "--examples", "1"]) == 1
    again = capsys.readouterr().out
    assert counterexample_part(again) == counterexample_part(first_report)
    assert "hypothesis  replay                      1 of 1      calls     not finished (counterexample)" in again
    for name, text in [("damaged", "{not json"), ("nested", "[" * 100_000 + "]" * 100_000)]:
        (tmp_path / "saved" / f"{name}.json").write_text(text)  # not one of ours: passed over, no harness error
    assert main(["verify", SLOT_BUG, *isolated, "--examples", "1"]) == 1
    assert counterexample_part(capsys.readouterr().out) == counterexample_part(first_report)


def test_replay_prints_the_same_report_and_writes_a_regression_test(tmp_path, isolated, capsys):
    main(["verify", SLOT_BUG, *isolated])
    verify_out = capsys.readouterr().out
    (saved,) = (tmp_path / "saved").glob("*.json")
    regression = tmp_path / "test_regression.py"
    assert main(["replay", str(saved), "--pytest", str(regression)]) == 1
    replay_out, wrote = capsys.readouterr().out.rstrip("\n").rsplit("\n", 1)
    assert replay_out.strip() == counterexample_part(verify_out).strip()
    assert wrote == f"wrote {regression}: a pytest regression test that passes once slot_bound holds on this input"
    # the fixed scheduler passes the replay, and so the generated test
    assert main(["replay", str(saved), "impl:schedule"]) == 0
    assert "no longer fails" in capsys.readouterr().out
    text = regression.read_text()
    compile(text, str(regression), "exec")
    assert "def test_slot_bound_regression" in text


def test_the_written_regression_test_runs_from_any_folder(tmp_path, isolated, capsys, monkeypatch):
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    target = project / "mysched.py"
    target.write_text((BUGGY / "admits_one_too_many.py").read_text())
    monkeypatch.chdir(project)
    assert main(["verify", "mysched.py:schedule", *isolated]) == 1
    (saved,) = (tmp_path / "saved").glob("*.json")
    assert main(["replay", str(saved), "--pytest", "tests/test_regression.py"]) == 1
    assert "wrote tests/test_regression.py" in capsys.readouterr().out
    # the bug is still there: the written test fails wherever pytest runs, for the bug and not a missing file
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "tests" / "test_regression.py")],
                         capture_output=True, text=True, cwd=elsewhere, timeout=300)
    assert run.returncode == 1 and "FAIL slot_bound" in run.stdout, run.stdout
    assert "no such file" not in run.stdout
    # once fixed, it passes, again from elsewhere
    target.write_text((pathlib.Path(__file__).parent / "corpus" / "correct" / "heap_queue.py").read_text())
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "tests" / "test_regression.py")],
                         capture_output=True, text=True, cwd=elsewhere, timeout=300)
    assert run.returncode == 0, run.stdout


@pytest.mark.parametrize("text", ["{not json", "[" * 100_000 + "]" * 100_000])
def test_replay_of_an_unreadable_file_exits_2(tmp_path, text):
    bad = tmp_path / "cex.json"
    bad.write_text(text)
    run = run_cli("replay", str(bad))
    assert run.returncode == 2 and "cannot read" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.splitlines()) == 1 and "internal error" not in run.stderr, run.stderr


NOT_A_TARGET = pathlib.Path(__file__).parent / "corpus" / "not_a_target"


@pytest.mark.parametrize("target, hint", [
    (f"{NOT_A_TARGET / 'engine_class.py'}:Engine", "Engine is a class, not a function"),
    (f"{NOT_A_TARGET / 'wrong_signature.py'}:schedule", "schedule(jobs, slots) cannot be called as schedule(jobs, slots, continuous)"),
])
def test_a_target_that_is_not_a_function_of_the_right_shape_is_a_usage_error(tmp_path, isolated, capsys, target, hint):
    code = main(["verify", target, *isolated])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and hint in err, err
    assert "schedcheck calls a function schedule(jobs, slots, continuous) that returns the result dict" in err
    assert not (tmp_path / "saved").exists()


@pytest.mark.slow  # a campaign: over 15 s on 2 cores
def test_all_reports_every_violated_invariant(tmp_path, isolated, capsys):
    path = tmp_path / "all.json"
    code = main(["verify", f"{BUGGY / 'serves_one_extra_token.py'}:schedule", "--all", "--json", str(path), *isolated, "--budget", "30"])
    assert code == 1
    found = [c["property"] for c in json.loads(path.read_text())["counterexamples"]]
    assert found[0] == "nonnegative_remaining"
    assert len(found) == len(set(found)) >= 2


@pytest.mark.slow  # moved from the default run, which must stay under 5 minutes on 2 cores (308 s, stop 25)
def test_a_hanging_target_is_reported_not_waited_for(tmp_path, isolated, capsys):
    code = main(["verify", f"{BUGGY / 'hang_in_c_code.py'}:schedule", "--budget", "20", *isolated])
    assert code == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL termination") and "did not return within" in out


def test_report_is_stable_text():
    cex = Counterexample(
        "slot_bound", "hypothesis", "conformance",
        ([{"id": 0, "arrival": 0, "tokens": 1}, {"id": 1, "arrival": 0, "tokens": 1}], 1, True),
        "tick 0 serves [0, 1]: 2 jobs in 1 slots",
    )
    actual = {
        "makespan_ticks": 1, "busy_slots": 2, "utilization": 2.0,
        "completed": [
            {"id": 0, "arrival": 0, "tokens": 1, "start": 0, "finish": 1, "wait": 0, "turnaround": 1},
            {"id": 1, "arrival": 0, "tokens": 1, "start": 0, "finish": 1, "wait": 0, "turnaround": 1},
        ],
        "trace": [{"tick": 0, "served": [0, 1]}],
    }
    assert format_counterexample(cex, actual) == [
        "FAIL slot_bound  engine=hypothesis  (shrunk: 2 jobs)",
        'schedule([{"id": 0, "arrival": 0, "tokens": 1}, {"id": 1, "arrival": 0, "tokens": 1}], slots=1, continuous=True)',
        "# tick 0 serves [0, 1]: 2 jobs in 1 slots",
        "first difference: trace entry 0: expected tick 0 serving [0], got tick 0 serving [0, 1]",
        "tick            | 0 1",
        "expected slot0  | 0 1",
        "actual   slot0  | 0 .",
        "         slot1  | 1 .",
    ]


def test_non_json_inputs_have_null_input_and_a_python_repr():
    cex = Counterexample("validation", "hypothesis", "validation", (({"id": 0, "arrival": float("nan"), "tokens": 1},), 1, True), "m")
    data = cex.to_json()
    assert data["input"] is None
    assert data["input_repr"] == 'schedule(({"id": 0, "arrival": float("nan"), "tokens": 1},), slots=1, continuous=True)'
    jobs, slots, continuous = parse_input_repr(data["input_repr"])
    assert isinstance(jobs, tuple) and jobs[0]["arrival"] != jobs[0]["arrival"]


@pytest.mark.slow  # a campaign: over 15 s on 2 cores
def test_crosshair_can_focus_on_named_invariants(tmp_path, isolated, capsys):
    report = tmp_path / "r.json"
    code = main(["verify", "--engine", "crosshair", "--invariant", "slot_bound", "--budget", "20", "--json", str(report), *isolated])
    data = json.loads(report.read_text())
    # focused: only the named invariant's contracts ran; each either ran its time (bounded or confirmed: exit 0) or
    # was cut short on a loaded machine (incomplete: exit 2), never a counterexample on our impl
    assert code in (0, 2), capsys.readouterr().out
    assert (code == 2) == any(c["outcome"] == "incomplete" for c in data["contracts"])
    assert {(c["name"], c["subject"]) for c in data["contracts"]} == {
        ("slot_bound", "impl.Scheduler.step"), ("slot_bound", "spec.step"),
    }
    assert all(c["outcome"] != "counterexample" for c in data["contracts"])


OUTPUT_CASES = [
    (["verify", "--json", "{nowhere}/x.json"], "--json"),
    (["verify", "--junit", "{nowhere}/x.xml"], "--junit"),
    (["verify", "--sarif", "{nowhere}/x.sarif"], "--sarif"),
    (["verify", "--save-dir", "{nowhere}/saved"], "--save-dir"),
    (["verify", "--db", "{nowhere}/db"], "--db"),
    (["diff", "impl:schedule", "impl:schedule", "--json", "{nowhere}/x.json"], "--json"),
    (["diff", "impl:schedule", "impl:schedule", "--junit", "{nowhere}/x.xml"], "--junit"),
    (["prove", "--json", "{nowhere}/x.json"], "--json"),
    (["prove", "--sarif", "{nowhere}/x.sarif"], "--sarif"),
    (["gate", "--out", "{nowhere}/reports"], "--out"),
    (["gate", "--save-dir", "{nowhere}/saved"], "--save-dir"),
]


@pytest.mark.parametrize("argv, option", OUTPUT_CASES, ids=[f"{a[0]} {o}" for a, o in OUTPUT_CASES])
def test_every_output_path_is_checked_before_any_work(tmp_path, monkeypatch, argv, option, capsys):
    monkeypatch.chdir(tmp_path)
    nowhere = tmp_path / "missing" / "dir"
    started = time.monotonic()
    assert main([*(a.format(nowhere=nowhere) for a in argv), "--budget", "300"]) == 2
    assert time.monotonic() - started < 20  # refused at once, not after a 300 s run
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert f"{option} '{nowhere}/" in err and "does not exist" in err, err
    assert not (tmp_path / "missing").exists()  # and no folder was created


def test_replay_pytest_path_is_checked_before_the_replay(tmp_path, capsys):
    saved = tmp_path / "cex.json"
    saved.write_text("{}")
    assert main(["replay", str(saved), "--pytest", str(tmp_path / "no" / "test_x.py")]) == 2
    err = capsys.readouterr().err
    assert "--pytest" in err and "does not exist" in err and err.count("\n") == 1


def test_a_file_option_naming_a_folder_and_a_folder_option_naming_a_file_are_usage_errors(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["verify", "--json", str(tmp_path)]) == 2
    assert "--json" in capsys.readouterr().err
    assert main(["verify", "--save-dir", str(tmp_path / "file")]) == 2
    assert "is a file, expected a folder" in capsys.readouterr().err


def test_the_output_path_rule_is_in_help():
    run = run_cli("--help")
    assert "output paths (every command):" in run.stdout and "missing parent folder is a usage error" in run.stdout


def test_an_internal_error_is_one_line_exit_2_and_a_saved_traceback(tmp_path, monkeypatch, capsys):
    from proofs.search import engine

    def broken(self, *args, **kwargs):
        raise RuntimeError("injected fault in the engine")

    monkeypatch.setattr(engine.Search, "run", broken)
    monkeypatch.chdir(tmp_path)
    code = main(["verify", "--budget", "20", "--db", "none", "--save-dir", str(tmp_path / "saved")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "FAIL" not in out and "Traceback" not in out + err
    assert err.count("\n") == 1 and err.startswith("schedcheck: internal error: RuntimeError: injected fault in the engine (details in ")
    path = pathlib.Path(err.rsplit("(details in ", 1)[1].rstrip(")\n"))
    assert path == pathlib.Path(".schedcheck") / f"internal-error-{os.getpid()}.txt"
    text = path.read_text()
    assert "Traceback" in text and "injected fault in the engine" in text
    assert "in broken" in text
    assert not (tmp_path / "saved").exists()  # nothing charged to the target


def test_an_internal_error_in_a_subprocess_run_has_no_traceback_on_the_terminal(tmp_path):
    script = (
        "import sys; from proofs.search import judge; "
        "judge.judge_invalid_call = lambda *a, **k: 1 / 0; "
        "from proofs.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    run = subprocess.run([sys.executable, "-c", script, "verify", "--budget", "20", "--db", "none"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and "schedcheck: internal error: ZeroDivisionError" in run.stderr
@pytest.mark.parametrize(
    "args, message",
    [
        (["--invariant", "slot_bound"], "only --engine crosshair can focus on named invariants"),
        (["--invariant", "slot_bound", "--engine", "all"], "only --engine crosshair can focus on named invariants"),
        (["--invariant", "input_unchanged", "--engine", "crosshair"], "CrossHair has no contract of it on our impl"),
        (["--invariant", "matches_reference", "--engine", "crosshair"], "CrossHair has no contract of it on our impl"),
        (["--invariant", "slot_bound", "--engine", "crosshair", f"{BUGGY / 'admits_one_too_many.py'}:schedule"],
         "no contract of it on a target other than our impl (it has: validation)"),
        (["--invariant", "no_such_rule", "--engine", "crosshair"], "not an invariant of the chapter model"),
    ],
)
def test_invariant_is_rejected_in_one_line_where_it_cannot_focus(args, message, tmp_path):
    run = run_cli("verify", *args, "--budget", "5", "--db", "none", "--save-dir", str(tmp_path / "saved"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout == "" and run.stderr.count("\n") == 1 and message in run.stderr, run.stderr


def test_the_invariant_names_come_from_the_registry():
    import spec
    from proofs.cli.verify import crosshair_focus

    assert set(crosshair_focus(True)) == {inv.name for inv in spec.STATE_INVARIANTS} | {"validation"}
    assert crosshair_focus(False) == ["validation"]
    help_text = run_cli("verify", "--help").stdout
    assert all(name in " ".join(help_text.split()) for name in crosshair_focus(True))


@pytest.mark.parametrize("model", ["chapter", "serving"])
def test_db_none_leaves_nothing_on_disk(tmp_path, model):
    # Hypothesis also caches the constants of the modules it sees in .hypothesis/constants/: with --db none nothing
    # of the run is kept, so its storage goes to a temporary folder that is removed when the run ends
    run = subprocess.run([sys.executable, "-m", "proofs.cli", "verify", "--model", model, "--db", "none", "--seed", "0",
                          "--examples", "20", "--budget", "60", "--save-dir", str(tmp_path / "saved")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], sorted(p.name for p in tmp_path.iterdir())


def test_a_usage_error_is_one_line_however_long_the_value_it_names(tmp_path):
    header = {"model": "serving", "config": {"max_seqs": 2, "token_budget": 8, "block_size": 4, "num_blocks": 8,
                                             "chunked_prefill": True}, "requests": [list(range(100_000))]}
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps(header) + "\n")
    run = run_cli("trace", str(path), cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == "" and run.stderr.count("\n") == 1, run.stderr[:300]
    line = run.stderr.rstrip("\n")
    assert len(line) <= len("schedcheck: error: ") + 400, len(line)
    assert "line 1: header outside the domain: requests[0]=[0, 1, 2," in line  # where and which field
    assert line.endswith(" 99999]: expected a dict with keys id, arrival, prompt, output[, abort][, tokens]")  # the rule


@pytest.mark.parametrize("argv, words", [
    (["prove", "--max-jobs", "0"], "--max-jobs=0: expected an int >= 1"),
    (["prove", "--budget", "0"], "--budget=0.0: expected seconds > 0"),
    (["prove", "--claims", "slot_bund"], "--claims='slot_bund': no claim's name contains it (did you mean 'slot_bound'"),
    (["prove", "--model", "serving", "--claims", "fifo_order"], "--claims='fifo_order': no claim's name contains it"),
    (["prove", "--mutant", "budget_plus_one"], "--mutant='budget_plus_one': not a mutant of the chapter model's encoding"),
])
def test_prove_says_a_usage_error_on_stderr_like_every_command(capsys, argv, words):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"schedcheck: error: {err.split('error: ', 1)[1]}" and err.count("\n") == 1, (out, err)
    assert words in err, err
