"""The sandbox's zygote: a target is imported once, in a child (never in the harness), within its own limit;
every fresh process (after a crash, a hang, or on purpose) is forked from it; a second zygote,
exec'd with another PYTHONHASHSEED, gives the same target in a fresh interpreter.

The slow import is tests/corpus/hostile/slow_import.py, whose import sleeps
SCHEDCHECK_IMPORT_SECONDS and writes a line per import to SCHEDCHECK_IMPORT_LOG.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from proofs import sandbox
from proofs.cli.main import main  # imported here, not under capsys: verify's Progress binds sys.stderr at import
from proofs.sandbox import TargetProcess
from proofs.targets import TargetError, parse_target

HOSTILE = pathlib.Path(__file__).parent / "corpus" / "hostile"
SLOW = f"{HOSTILE / 'slow_import.py'}:schedule"
JOB = [{"id": 0, "arrival": 0, "tokens": 1}]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead; it only waits to be reaped
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone(pid: int, seconds: float = 10.0) -> bool:
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


@pytest.fixture
def slow(tmp_path, monkeypatch):
    """The slow import's settings: 3 s, counted in a file."""
    log = tmp_path / "imports"
    monkeypatch.setenv("SCHEDCHECK_IMPORT_LOG", str(log))
    monkeypatch.setenv("SCHEDCHECK_IMPORT_SECONDS", "3")
    return log


def test_a_slow_import_happens_once_in_the_zygote_not_per_respawn(slow):
    with TargetProcess(parse_target(SLOW), call_seconds=0.5) as process:
        outcomes = [process.call(*call) for call in (
            (JOB, 1, True), ([{"mode": "crash"}], 1, True), ([{"mode": "hang"}], 1, True), (JOB, 2, False))]
        process.close()  # a fresh process on purpose, as the determinism check asks for
        workers = {process.call([{"mode": "pid"}], 1, True).result}
        process.close()
        workers.add(process.call([{"mode": "pid"}], 1, True).result)
        zygote = process._zygote.pid
        assert [o.kind for o in outcomes] == ["returned", "died", "timed_out", "returned"]
        assert len(workers) == 2 and zygote not in workers and os.getpid() not in workers
        assert process.imports == 1
    lines = slow.read_text().split()
    assert lines == [str(zygote)], lines  # one import, in the zygote: not in the harness, not in a worker
    assert _gone(zygote)  # and the zygote ends with the with block


def test_a_fresh_interpreter_imports_once_too(slow):
    with TargetProcess(parse_target(SLOW), call_seconds=0.5) as process:
        fresh = process.fresh(5)
        outcomes = [fresh.call(*call) for call in ((JOB, 1, True), ([{"mode": "crash"}], 1, True), (JOB, 1, True))]
        assert [o.kind for o in outcomes] == ["returned", "died", "returned"]
        assert fresh.imports == 1 and process.imports == 0  # the harness's own zygote never started
        zygote = fresh._zygote.pid
    assert slow.read_text().split() == [str(zygote)]
    assert _gone(zygote)


def test_an_import_past_the_load_limit_is_a_target_error_and_the_zygote_is_killed(slow, monkeypatch):
    monkeypatch.setenv("SCHEDCHECK_IMPORT_SECONDS", "60")  # far past the limit, so that no load makes the bound below tight
    process = TargetProcess(parse_target(SLOW), load_seconds=1.0)
    started = time.monotonic()
    with pytest.raises(TargetError, match=r"import did not finish within 1 s \(--load-timeout\)"):
        process.start()
    assert time.monotonic() - started < 50  # it did not wait for the import (60 s)
    zygote_pid = int(slow.read_text().split()[0])
    assert _gone(zygote_pid)
    # a later start (the stateful test, a fresh process) says so again, without importing it again
    with pytest.raises(TargetError, match=r"import did not finish within 1 s \(--load-timeout\)"):
        process.call(JOB, 1, True)
    assert slow.read_text().split() == [str(zygote_pid)] and process.imports == 1
    process.shutdown()


def test_verify_says_so_in_one_line_with_exit_2(slow, capsys, tmp_path):
    code = main(["verify", SLOW, "--load-timeout", "1", "--db", "none", "--save-dir", str(tmp_path / "saved")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "import did not finish within 1 s (--load-timeout)" in err


@pytest.mark.parametrize("argv", [["verify", "--load-timeout", "0"], ["replay", "x.json", "--load-timeout", "-1"],
                                  ["diff", "a.py:f", "b.py:f", "--load-timeout", "0"],
                                  ["gate", "--load-timeout", "0"], ["fuzz", "--load-timeout", "0"]])
def test_a_load_timeout_that_is_not_positive_is_a_usage_error(argv, capsys):
    assert main(argv) == 2
    assert "--load-timeout" in capsys.readouterr().err


def test_the_default_load_limit_is_generous_and_apart_from_the_call_limit(capsys):
    assert sandbox.DEFAULT_LOAD_SECONDS >= 120 > 36  # vLLM's cold import, measured: 10 to 36 s (issue 19)
    assert TargetProcess(parse_target(SLOW)).load_seconds == sandbox.DEFAULT_LOAD_SECONDS
    for command in ("verify", "diff", "replay", "gate", "fuzz"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--load-timeout" in capsys.readouterr().out, command


@pytest.mark.slow  # about 10 s of sleeping imports: a whole-run test (the default run stays under 5 minutes)
def test_an_import_longer_than_the_call_limit_is_never_charged_to_a_call(slow, tmp_path, capsys):
    # 3 s of import against a 0.5 s call limit: every check runs to its end, no termination, no flaky time-out
    report = tmp_path / "report.json"
    code = main(["verify", SLOW, "--call-timeout", "0.5", "--load-timeout", "60", "--seed", "0", "--examples", "5",
                 "--budget", "300", "--db", "none", "--save-dir", str(tmp_path / "saved"), "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(report.read_text())["verdict"] == "pass", out
    assert "\nPASS " in out and "flaky" not in out and "termination" not in out, out


def test_the_stateful_test_s_engine_gets_the_load_limit_too(slow):
    from proofs.online.stateful import run_stateful

    factory = parse_target(f"{HOSTILE / 'slow_import.py'}:make_scheduler")
    with pytest.raises(TargetError, match=r"import did not finish within 1 s \(--load-timeout\)"):
        run_stateful(factory, "chapter", 2, seed=0, call_seconds=0.5, load_seconds=1.0)
    account: dict = {}
    assert run_stateful(factory, "chapter", 3, seed=0, call_seconds=0.5, load_seconds=60.0, account=account) is None
    assert account.get("finished", True) and not account.get("flaky") and account["programs"] == 3


def test_a_fuzz_property_gets_the_load_limit(slow):
    from proofs.fuzz.properties import Context

    context = Context(SLOW, "chapter", call_seconds=0.5, load_seconds=1.0)
    with pytest.raises(TargetError, match=r"import did not finish within 1 s \(--load-timeout\)"):
        context.process()
    context.close()


HASHES = '''
import os

def schedule(jobs, slots, continuous):
    return [hash("tie-break"), os.environ.get("PYTHONHASHSEED")]
'''


def test_a_fresh_interpreter_hashes_strings_with_its_own_seed(tmp_path):
    path = tmp_path / "hashes.py"
    path.write_text(HASHES)
    expected = {
        seed: int(subprocess.run([sys.executable, "-c", "print(hash('tie-break'))"], capture_output=True, text=True,
                                 env=dict(os.environ, PYTHONHASHSEED=str(seed)), check=True).stdout)
        for seed in (1, 2)
    }
    with TargetProcess(parse_target(f"{path}:schedule")) as process:
        for seed in (1, 2):
            assert process.fresh(seed).call([], 1, True).result == [expected[seed], str(seed)]
        assert process.fresh(1) is process.fresh(1)  # one interpreter per seed, kept until shutdown
        zygotes = [process.fresh(seed)._zygote.pid for seed in (1, 2)]
    assert all(_gone(pid) for pid in zygotes)


def test_a_fresh_interpreter_takes_the_harness_own_argument_classes_without_importing_them_per_call():
    from proofs.search.strategies import IntSubclass, JobDict, JobList

    with TargetProcess(parse_target("impl:schedule"), call_seconds=0.5) as process:
        fresh = process.fresh(3)
        fresh.start()  # the import: outside the calls' limit
        valid = fresh.call(JobList([JobDict(id=0, arrival=0, tokens=1)]), 1, True)
        invalid = fresh.call([{"id": IntSubclass(0), "arrival": 0, "tokens": 1}], 1, True)
    assert valid.kind == "returned" and valid.result["makespan_ticks"] == 1
    assert (invalid.kind, invalid.error_type) == ("raised", "ValueError")


def test_an_online_target_runs_in_a_fresh_interpreter_too():
    from proofs import models

    model = models.get("serving", online=True)
    with TargetProcess(parse_target("impl:make_serving"), shape=model.shape, adapter=model.adapter) as process:
        call = ([{"id": 0, "arrival": 0, "prompt": 2, "output": 1}],
                {"max_seqs": 1, "token_budget": 2, "block_size": 1, "num_blocks": 2, "chunked_prefill": False})
        here, there = process.call(*call), process.fresh(4).call(*call)
    assert here.kind == there.kind == "returned" and here.result == there.result


MEMORY = '''
def schedule(jobs, slots, continuous):
    blocks = []
    while True:
        blocks.append(bytearray(64 * 2**20))
'''


@pytest.mark.parametrize("fresh", [False, True], ids=["forked zygote", "exec'd zygote"])
def test_every_worker_keeps_its_memory_cap(tmp_path, fresh):
    path = tmp_path / "memory.py"
    path.write_text(MEMORY)
    with TargetProcess(parse_target(f"{path}:schedule"), call_seconds=30, memory_bytes=256 * 2**20) as process:
        target = process.fresh(6) if fresh else process
        outcome = target.call([], 1, True)
        with open(f"/proc/{target._zygote.pid}/limits") as limits:
            zygote_cap = next(line for line in limits if line.startswith("Max address space")).split()[3]
    assert (outcome.kind, outcome.error_type) == ("raised", "MemoryError")
    assert zygote_cap != "unlimited"  # the zygote's own import is capped too (soft limit)


GRANDCHILD = '''
import os, subprocess, sys

process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
with open(os.environ["SCHEDCHECK_GRANDCHILD"], "w") as handle:
    handle.write(str(process.pid))

def schedule(jobs, slots, continuous):
    return {}
'''


def test_the_zygote_is_killed_with_its_group(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDCHECK_GRANDCHILD", str(tmp_path / "pid"))
    path = tmp_path / "spawns.py"
    path.write_text(GRANDCHILD)
    with TargetProcess(parse_target(f"{path}:schedule")) as process:
        assert process.call([], 1, True).kind == "returned"
        zygote = process._zygote.pid
        grandchild = int((tmp_path / "pid").read_text())
        assert os.getpgid(grandchild) == zygote != os.getpgid(0)  # the zygote leads a group of its own
    assert _gone(zygote) and _gone(grandchild), "a process started by the import outlived its zygote's group"


def test_every_process_of_the_sandbox_dies_with_a_harness_killed_from_outside(tmp_path):
    harness = textwrap.dedent(f"""
        from proofs.sandbox import TargetProcess
        from proofs.targets import parse_target

        process = TargetProcess(parse_target("impl:schedule"))
        process.start()
        fresh = process.fresh(7)
        fresh.start()
        print(process._zygote.pid, process._process.pid, fresh._zygote.pid, fresh._process.pid, flush=True)
        import time
        time.sleep(120)
    """)
    run = subprocess.Popen([sys.executable, "-c", harness], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in run.stdout.readline().split()]
        assert len(pids) == 4 and all(_alive(pid) for pid in pids)
        run.kill()  # SIGKILL: the harness cannot clean up
        run.wait(10)
        assert all(_gone(pid) for pid in pids), [pid for pid in pids if _alive(pid)]
    finally:
        run.kill()
        run.wait(10)


LIAR = '''
import os
import proofs.sandbox as sandbox

_reply = sandbox._reply


def lie(control, message):  # the zygote claims the harness itself is the worker it forked
    _reply(control, ["forked", os.getppid()] if message[0] == "forked" else message)


sandbox._reply = lie


def schedule(jobs, slots, continuous):
    return {}
'''


def test_a_zygote_that_lies_about_its_worker_never_makes_the_harness_signal_another_process(tmp_path):
    path = tmp_path / "liar.py"
    path.write_text(LIAR)
    process = TargetProcess(parse_target(f"{path}:schedule"))
    try:
        with pytest.raises(TargetError, match="stopped answering"):
            process.start()
        process.close()
    finally:
        process.shutdown()
    assert _alive(os.getpid())  # (the test is still here to say so)


def test_a_fresh_worker_never_holds_the_zygote_s_socket(tmp_path):
    path = tmp_path / "fds.py"
    path.write_text(textwrap.dedent("""
        import os, stat

        def schedule(jobs, slots, continuous):
            sockets = []
            for fd in map(int, os.listdir("/proc/self/fd")):
                try:
                    if fd > 2 and stat.S_ISSOCK(os.fstat(fd).st_mode):
                        sockets.append(fd)
                except OSError:  # the listing's own descriptor, closed by now
                    pass
            return sockets
    """))
    with TargetProcess(parse_target(f"{path}:schedule")) as process:
        sockets = process.call([], 1, True).result
    assert len(sockets) == 1, sockets  # its own, to the harness


def test_a_worker_killed_by_a_signal_is_reported_with_it(tmp_path):
    path = tmp_path / "signals.py"
    path.write_text("import os, signal\n\ndef schedule(jobs, slots, continuous):\n    os.kill(os.getpid(), signal.SIGTERM)\n")
    with TargetProcess(parse_target(f"{path}:schedule")) as process:
        outcome = process.call([], 1, True)
    assert outcome.kind == "died" and f"killed by {signal.SIGTERM.name}" in outcome.error
