"""The shared example database: ``verify --db redis://HOST:PORT`` against a real redis-server.

A counterexample found through Redis on one run is replayed first by a second run in
another folder (another cwd, so another local database, and no saved counterexamples);
a server that goes away mid-run costs the run the sharing only, and it says so once.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

redis = pytest.importorskip("redis", reason="the redis package is not installed (pip install -e '.[test]')")

REDIS_SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server is not installed (.ci/run: apt-get install -y redis-server)"
)
UNREACHABLE = "unreachable; continuing with the local database only"

# A scheduler with a bug behind a condition the simplest inputs miss: with at least two
# jobs of at least two tokens, its makespan is one tick long.  It logs every valid call
# it gets (one JSON line each) and, when told to, kills the Redis server on its first.
BUGGY = '''
import json, os, signal
import impl

def bug(jobs):
    return len(jobs) >= 2 and sum(1 for job in jobs if job["tokens"] >= 2) >= 2

def schedule(jobs, slots, continuous):
    result = impl.schedule(jobs, slots, continuous)
    log = os.environ.get("SCHEDCHECK_CALL_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(json.dumps([[job["tokens"] for job in jobs], bug(jobs)]) + "\\n")
    kill = os.environ.get("SCHEDCHECK_KILL_PID")
    if kill and not os.path.exists(kill + ".done"):
        open(kill + ".done", "w").close()
        os.kill(int(open(kill).read()), signal.SIGKILL)  # the kernel closes its sockets at once
    if bug(jobs):
        result = dict(result, makespan_ticks=result["makespan_ticks"] + 1)
    return result
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server on 127.0.0.1 on a free port, with no persistence; yields (port, process)."""
    port = free_port()
    server = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            if server.poll() is not None:
                pytest.fail(f"redis-server exited with {server.returncode} on port {port}")
            time.sleep(0.05)
    else:
        server.kill()
        pytest.fail(f"redis-server did not answer on 127.0.0.1:{port}")
    yield port, server
    if server.poll() is None:
        server.kill()
    server.wait()


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "buggy_makespan.py"
    path.write_text(BUGGY)
    return f"{path}:schedule"  # an absolute path: the same target text from every folder


def verify(cwd, target, *args, env=None):
    """``schedcheck verify`` in ``cwd``; returns the finished process."""
    cwd.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "proofs.cli.main", "verify", target, "--budget", "40", *args]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    full_env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=full_env, timeout=300)


def valid_calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_counterexample_found_through_redis_is_replayed_first_in_another_folder(tmp_path, redis_server, target):
    port, _ = redis_server
    db = f"redis://127.0.0.1:{port}"
    first = verify(tmp_path / "runner-a", target, "--db", db, "--seed", "1")
    assert first.returncode == 1, first.stdout + first.stderr
    broken = first.stdout.split()[1]  # the makespan is past the bound: termination
    assert redis.Redis(host="127.0.0.1", port=port).keys(b"hypothesis-example:*"), "nothing reached Redis"

    # another folder: another local database and no saved counterexamples
    assert not (tmp_path / "runner-b").exists()
    log = tmp_path / "runner-b.log"
    second = verify(tmp_path / "runner-b", target, "--db", db, "--seed", "2",
                    env={"SCHEDCHECK_CALL_LOG": str(log)})
    assert second.returncode == 1, second.stdout + second.stderr
    # the target's makespan bug breaks termination (past the bound) or only metrics_consistent, as the input
    # has it; the example replayed from Redis may be one Hypothesis saved while shrinking towards either
    assert second.stdout.split()[:2] in (["FAIL", broken], ["FAIL", "termination"], ["FAIL", "metrics_consistent"]), second.stdout
    assert UNREACHABLE not in second.stderr
    calls = valid_calls(log)
    assert calls and calls[0][1], f"the first valid call of the second run did not fail: {calls[:3]}"

    # the control: the same run without the shared database does not start with it
    control_log = tmp_path / "runner-c.log"
    control = verify(tmp_path / "runner-c", target, "--db", "local-only", "--seed", "2",
                     env={"SCHEDCHECK_CALL_LOG": str(control_log)})
    assert control.returncode == 1, control.stdout + control.stderr
    control_calls = valid_calls(control_log)
    assert control_calls and not control_calls[0][1], (
        f"the control run's first valid call fails too, so the test proves nothing: {control_calls[:3]}"
    )


def test_the_run_goes_on_with_the_local_database_when_redis_goes_away(tmp_path, redis_server, target):
    port, server = redis_server
    db = f"redis://127.0.0.1:{port}"
    pid_file = tmp_path / "redis.pid"
    pid_file.write_text(str(server.pid))
    runner = tmp_path / "runner"
    # the target kills the server on its first valid call, in the middle of the run
    run = verify(runner, target, "--db", db, "--seed", "1", env={"SCHEDCHECK_KILL_PID": str(pid_file)})
    assert server.wait(timeout=30) == -signal.SIGKILL
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.startswith("FAIL "), run.stdout
    lines = [line for line in run.stderr.splitlines() if UNREACHABLE in line]
    assert lines == [f"schedcheck: redis database at 127.0.0.1:{port} {UNREACHABLE}"], run.stderr
    assert any((runner / ".hypothesis" / "examples").rglob("*")), "nothing was written to the local database"

    # the server is gone for good: the next run says so at once, and the local database
    # (not the saved counterexample, moved away here) gives it the failing call first
    shutil.rmtree(runner / ".schedcheck")
    log = tmp_path / "again.log"
    again = verify(runner, target, "--db", db, "--seed", "2", env={"SCHEDCHECK_CALL_LOG": str(log)})
    assert again.returncode == 1, again.stdout + again.stderr
    assert [line for line in again.stderr.splitlines() if UNREACHABLE in line] == lines
    calls = valid_calls(log)
    assert calls and calls[0][1], f"the first valid call did not replay the local database: {calls[:3]}"


def test_open_database_reads_and_writes_both_and_survives_the_server(tmp_path, redis_server):
    from proofs.search.database import SharedDatabase, open_database

    port, server = redis_server
    warnings = []
    database = open_database(f"redis://127.0.0.1:{port}/3", local=str(tmp_path / "local"), warn=warnings.append)
    assert isinstance(database, SharedDatabase) and database.connected
    database.save(b"key", b"one")
    assert set(database.local.fetch(b"key")) == {b"one"}
    assert redis.Redis(host="127.0.0.1", port=port, db=3).smembers(b"hypothesis-example:key") == {b"one"}
    other = open_database(f"redis://127.0.0.1:{port}/3", local=str(tmp_path / "elsewhere"), warn=warnings.append)
    assert list(other.fetch(b"key")) == [b"one"]  # from Redis: the other local database is empty
    server.kill()
    server.wait()
    database.save(b"key", b"two")
    database.save(b"key", b"three")
    assert sorted(database.fetch(b"key")) == [b"one", b"three", b"two"]
    assert not database.connected
    assert warnings == [f"schedcheck: redis database at 127.0.0.1:{port} {UNREACHABLE}"]
