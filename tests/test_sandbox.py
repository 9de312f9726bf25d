"""The sandbox: every outcome kind, from both faces (the persistent worker and the one-shot runner)."""

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from proofs import sandbox
from proofs.sandbox import Child, Outcome, TargetProcess, run_once
from proofs.targets import parse_target


# --- one-shot functions (module level, so the forked child runs them as they are) --------------


def _returns(value):
    return value


def _raises(kind):
    raise kind("from the child")


def _exits_hard():
    os._exit(7)


def _segfaults():
    ctypes.string_at(0)


def _hangs_in_c():
    ctypes.CDLL(None).sleep(60)  # libc's sleep: no Python bytecode runs, no signal handler either


def _sleeps_in_c():
    time.sleep(60)


def _eats_memory():
    blocks = []
    while True:
        blocks.append(bytearray(64 * 2**20))


def _prints():
    print("to stdout", flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    os.write(1, b"from C\n")
    return 1


def _reports_then_hangs(report):
    report("first")
    report({"second": 2})
    ctypes.CDLL(None).sleep(60)


def _returns_a_lambda():
    return lambda: 0


def _starts_grandchild(path):
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(path, "w") as handle:
        handle.write(str(process.pid))
    ctypes.CDLL(None).sleep(60)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead; it only waits to be reaped by init
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --- the one-shot runner ----------------------------------------------------------------------


def test_returned_carries_the_value():
    outcome = run_once(_returns, {"a": [1, 2]}, seconds=10)
    assert outcome.kind == "returned" and outcome.result == {"a": [1, 2]}


@pytest.mark.parametrize("kind", [ValueError, SystemExit, KeyboardInterrupt, GeneratorExit])
def test_every_base_exception_is_raised(kind):
    outcome = run_once(_raises, kind, seconds=10)
    assert (outcome.kind, outcome.error_type) == ("raised", kind.__name__)
    assert "from the child" in outcome.error and kind.__name__ in outcome.traceback


def test_os_exit_is_a_death():
    outcome = run_once(_exits_hard, seconds=10)
    assert outcome.kind == "died" and "exit code 7" in outcome.error


def test_a_segfault_is_a_death():
    outcome = run_once(_segfaults, seconds=10)
    assert outcome.kind == "died" and "SIGSEGV" in outcome.error


@pytest.mark.parametrize("hang", [_hangs_in_c, _sleeps_in_c])
def test_a_hang_in_c_is_cut_off_at_the_deadline(hang):
    started = time.monotonic()
    outcome = run_once(hang, seconds=1.0)
    assert outcome.kind == "timed_out" and "1 s" in outcome.error
    assert time.monotonic() - started < 30  # killed, not waited for (60 s)


def test_memory_exhaustion_is_contained():
    outcome = run_once(_eats_memory, seconds=60, memory_bytes=256 * 2**20)
    assert outcome.kind == "raised" and outcome.error_type == "MemoryError"


def test_output_is_captured_or_discarded():
    captured = run_once(_prints, seconds=10, output="capture")
    assert captured.kind == "returned"
    assert all(text in captured.output for text in ("to stdout", "to stderr", "from C"))
    assert run_once(_prints, seconds=10).output == ""


def test_partial_results_survive_a_kill():
    outcome = run_once(_reports_then_hangs, seconds=1.0, partial=True)
    assert outcome.kind == "timed_out"
    assert outcome.partial == ("first", {"second": 2})


def test_a_grandchild_dies_with_the_group(tmp_path):
    path = tmp_path / "pid"
    outcome = run_once(_starts_grandchild, str(path), seconds=3.0)
    assert outcome.kind == "timed_out"
    grandchild = int(path.read_text())
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    assert not _alive(grandchild), "the grandchild outlived its group"


def test_an_unsendable_result_is_a_harness_error():
    outcome = run_once(_returns_a_lambda, seconds=10)
    assert outcome.kind == "harness_error" and "could not be sent back" in outcome.error


def test_a_harness_bug_in_the_child_is_a_harness_error(monkeypatch):
    def broken(*args):
        raise RuntimeError("a bug of the sandbox")

    monkeypatch.setattr(sandbox, "_enter_child", broken)  # the fork inherits the bug
    outcome = run_once(_returns, 1, seconds=10)
    assert outcome.kind == "harness_error" and "a bug of the sandbox" in outcome.error


def test_children_run_side_by_side_and_each_meets_its_own_deadline():
    fast = Child(_returns, (1,), seconds=10).start()
    slow = Child(_hangs_in_c, seconds=1.0).start()
    pending = [fast, slow]
    while pending:
        sandbox.wait_any(pending, timeout=1.0)
        pending = [child for child in pending if child.poll() is None]
    assert fast.outcome.kind == "returned" and slow.outcome.kind == "timed_out"


def test_a_killed_child_is_timed_out_and_keeps_its_reports():
    child = Child(_reports_then_hangs, seconds=60, partial=True).start()
    time.sleep(0.5)
    outcome = child.kill("the budget was spent")
    assert outcome.kind == "timed_out" and outcome.error == "the budget was spent"


@pytest.mark.parametrize("field, value", [("seconds", 0), ("seconds", -1.0), ("seconds", True),
                                          ("memory_bytes", 0), ("output", "tty")])
def test_bad_arguments_name_the_field(field, value):
    arguments = {"seconds": 1.0, field: value}
    with pytest.raises(ValueError, match=f"{field}="):
        Child(_returns, (1,), **arguments)


def test_only_the_five_kinds_exist():
    assert sandbox.KINDS == ("returned", "raised", "timed_out", "died", "harness_error")
    assert Outcome("returned").sendable and not Outcome("returned", error="cannot pickle").sendable


# --- the persistent worker ------------------------------------------------------------------------

TARGET = '''
import ctypes, os, subprocess, sys, time

def schedule(jobs, slots, continuous):
    mode = jobs[0]["mode"] if jobs else "return"
    if mode == "return":
        return {"slots": slots, "pid": os.getpid()}
    if mode == "value_error":
        raise ValueError("bad input")
    if mode == "system_exit":
        raise SystemExit(3)
    if mode == "keyboard_interrupt":
        raise KeyboardInterrupt
    if mode == "exit":
        os._exit(9)
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "hang_in_c":
        ctypes.CDLL(None).sleep(60)
    if mode == "memory":
        blocks = []
        while True:
            blocks.append(bytearray(64 * 2**20))
    if mode == "lambda":
        return lambda: 0
    if mode == "mutate":
        jobs.append({})
        return {}
    if mode == "grandchild":
        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(jobs[0]["path"], "w") as handle:
            handle.write(str(process.pid))
        ctypes.CDLL(None).sleep(60)
'''


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "target.py"
    path.write_text(textwrap.dedent(TARGET))
    with TargetProcess(parse_target(f"{path}:schedule"), call_seconds=2.0, memory_bytes=256 * 2**20) as process:
        process.start()
        yield process


def _call(process, mode, **extra):
    return process.call([{"mode": mode, **extra}], 2, True)


def test_one_worker_serves_many_calls(worker):
    pids = {_call(worker, "return").result["pid"] for _ in range(5)}
    assert len(pids) == 1


@pytest.mark.parametrize("mode, kind, detail", [
    ("return", "returned", ""),
    ("value_error", "raised", "ValueError: bad input"),
    ("system_exit", "raised", "SystemExit: 3"),
    ("keyboard_interrupt", "raised", "KeyboardInterrupt"),
    ("exit", "died", "exit code 9"),
    ("segfault", "died", "SIGSEGV"),
    ("hang_in_c", "timed_out", "did not return within 2 s"),
    ("memory", "raised", "MemoryError"),
])
def test_each_kind_from_the_worker(worker, mode, kind, detail):
    outcome = _call(worker, mode)
    assert outcome.kind == kind and detail in outcome.error
    assert _call(worker, "return").kind == "returned"  # and the next call is served


def test_a_result_that_is_not_plain_data_arrives_as_an_inert_placeholder(worker):
    # the transport changed on purpose: a lambda used to be "not sendable"; it now arrives as an Opaque
    # (its type and repr, computed in the child), which the judge reads as not well typed
    outcome = _call(worker, "lambda")
    assert outcome.kind == "returned" and outcome.sendable and type(outcome.result) is sandbox.Opaque
    assert outcome.result.type_name == "function" and "<lambda>" in outcome.result.text


def test_the_worker_sees_its_input_modified(worker):
    assert _call(worker, "mutate").mutated and not _call(worker, "return").mutated


def test_the_worker_kills_a_grandchild_with_its_group(worker, tmp_path):
    path = tmp_path / "pid"
    assert _call(worker, "grandchild", path=str(path)).kind == "timed_out"
    grandchild = int(path.read_text())
    for _ in range(50):
        if not _alive(grandchild):
            break
        time.sleep(0.1)
    assert not _alive(grandchild), "the grandchild outlived the worker's group"


def test_a_harness_bug_in_the_worker_is_a_harness_error(tmp_path, monkeypatch):
    path = tmp_path / "target.py"
    path.write_text(textwrap.dedent(TARGET))

    def broken(function, request, *rest):
        raise RuntimeError("a bug of the worker loop")

    monkeypatch.setattr(sandbox, "_answer", broken)  # forked after this: the child has the bug
    with TargetProcess(parse_target(f"{path}:schedule")) as process:
        outcome = _call(process, "return")
    assert outcome.kind == "harness_error" and "a bug of the worker loop" in outcome.error


def test_a_call_the_harness_cannot_send_is_a_harness_error(worker):
    outcome = worker.call([{"mode": "return", "bad": lambda: 0}], 2, True)
    assert outcome.kind == "harness_error" and "could not be sent" in outcome.error


def test_the_judge_never_charges_a_harness_error_to_the_target():
    from proofs.search.judge import judge_invalid_call, judge_valid_call

    broken = Outcome("harness_error", error="the worker failed")
    with pytest.raises(sandbox.HarnessError, match="the worker failed"):
        judge_valid_call(broken, [], 1, True)
    with pytest.raises(sandbox.HarnessError, match="the worker failed"):
        judge_invalid_call(broken, "a rule")


def test_a_harness_error_ends_the_command_with_exit_2_and_one_line(monkeypatch, capsys, tmp_path):
    from proofs.cli.main import main

    def broken(function, request):
        raise RuntimeError("a bug of the worker loop")

    monkeypatch.setattr(sandbox, "_answer", broken)
    monkeypatch.chdir(tmp_path)  # the traceback is saved under the working folder's .schedcheck/
    code = main(["verify", "--budget", "5", "--db", "none", "--save-dir", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 2 and "FAIL" not in captured.out, captured.out
    assert captured.err.strip().splitlines()[-1].startswith("schedcheck: internal error:"), captured.err
    saved = list((tmp_path / ".schedcheck").glob("internal-error-*.txt"))
    assert len(saved) == 1 and "a bug of the worker loop" in saved[0].read_text(), saved


def test_a_hung_worker_dies_with_a_harness_killed_from_outside(tmp_path):
    path = tmp_path / "target.py"
    path.write_text(textwrap.dedent(TARGET))
    harness = textwrap.dedent(f"""
        import sys
        from proofs.sandbox import TargetProcess
        from proofs.targets import parse_target

        process = TargetProcess(parse_target({str(path) + ':schedule'!r}), call_seconds=3600)
        process.start()
        print(process._process.pid, flush=True)
        process.call([{{"mode": "hang_in_c"}}], 1, True)
    """)
    run = subprocess.Popen([sys.executable, "-c", harness], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(run.stdout.readline())
        time.sleep(0.5)  # the call is under way
        run.kill()  # SIGKILL: the harness cannot clean up
        run.wait(10)
        for _ in range(50):
            if not _alive(worker):
                break
            time.sleep(0.1)
        assert not _alive(worker), "the hung worker outlived its harness"
    finally:
        run.kill()
        run.wait(10)


def _one():
    return 1


def test_a_ctrl_c_while_a_childs_message_is_read_reaches_the_caller(monkeypatch):
    """A KeyboardInterrupt (the user's Ctrl-C) raised while the harness reads a child's message is the caller's to
    handle: it propagates, where any other failure of the read becomes a harness error (seen: a `schedcheck fuzz`
    that went on for minutes after Ctrl-C under load)."""
    import proofs.sandbox as sandbox

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sandbox, "decode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_once(_one, seconds=30)

    def broken(*args, **kwargs):
        raise RuntimeError("unreadable")

    monkeypatch.setattr(sandbox, "decode", broken)
    outcome = run_once(_one, seconds=30)
    assert outcome.kind == "harness_error" and "could not be read" in outcome.error, outcome
