"""``schedcheck fuzz``: verify's searches as a HypoFuzz campaign, sharing the example database.

A buggy target's counterexample is found, minimised as verify minimises it, saved,
and replayed first by the next verify; a correct target runs to ``--max-seconds`` and
exits 0 saying how many calls found nothing (never a pass); with a real redis-server,
what one campaign found is replayed first by a second one in another folder (before
it fuzzes anything, and while it fuzzes), and by verify there.  The items HypoFuzz
fuzzes are those of ``pytest --schedcheck TARGET --schedcheck-fuzz``.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("hypofuzz", reason="HypoFuzz is not installed (pip install -e '.[fuzz]')")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUGGY = os.path.join(ROOT, "tests", "corpus", "buggy", "admits_one_too_many.py") + ":schedule"  # slot_bound
CAMPAIGN_SECONDS = "150"  # a bound, not an expectation
FOCUS = ("--check", "conformance")  # the search that finds slot_bound (HypoFuzz spends 100 inputs on one before it switches)

# Correct, except on one input a random search is most unlikely to draw: three jobs of
# 3, 1 and 4 tokens arriving at ticks 0, 1 and 5 on 3 slots, whose makespan is one tick too long.
NEEDLE = '''
import impl

def needle(jobs, slots):
    return slots == 3 and [(j["arrival"], j["tokens"]) for j in jobs] == [(0, 3), (1, 1), (5, 4)]

def schedule(jobs, slots, continuous):
    result = impl.schedule(jobs, slots, continuous)
    if needle(jobs, slots):
        result = dict(result, makespan_ticks=result["makespan_ticks"] + 1)
    return result
'''
NEEDLE_CALL = ([{"id": 0, "arrival": 0, "tokens": 3}, {"id": 1, "arrival": 1, "tokens": 1},
                {"id": 2, "arrival": 5, "tokens": 4}], 3, True)


def schedcheck(cwd, *args, timeout=400, background=False):
    """``python -m proofs.cli.main ARGS`` in ``cwd`` with this tree first on the path."""
    os.makedirs(cwd, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-m", "proofs.cli.main", *args]
    if background:
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def saved(folder):
    files = sorted((folder / ".schedcheck" / "counterexamples").glob("*.json"))
    return [json.loads(path.read_text()) for path in files]


# -- usage errors: one line, exit 2, before any work ------------------------------------------


@pytest.mark.parametrize("args, words", [
    (["--workers", "0"], "--workers=0: expected an int >= 1"),
    (["--max-seconds", "-1"], "--max-seconds=-1: expected seconds > 0"),
    (["--call-timeout", "0"], "--call-timeout=0: expected seconds > 0"),
    (["--port", "70000"], "--port=70000: expected a port from 1 to 65535"),
    (["--db", "none"], "--db none: a campaign shares its findings"),
    (["--db", "ftp://host:1"], "db='ftp://host:1': expected a directory"),
    (["--json", "no/such/folder/r.json"], "--json 'no/such/folder/r.json': the folder"),
    (["--policy", "lifo"], "--policy 'lifo'"),
])
def test_bad_options_are_one_line_and_exit_2_before_any_work(tmp_path, monkeypatch, capsys, args, words):
    from proofs.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["fuzz", "impl:schedule", *args]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and words in err, err
    assert "HypoFuzz" not in err and out == ""


def test_a_target_that_cannot_be_loaded_or_called_is_a_usage_error(tmp_path, monkeypatch, capsys):
    from proofs.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["fuzz", "no_such_file.py:schedule"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def schedule(jobs):\n    return {}\n")
    assert main(["fuzz", f"{wrong}:schedule", "--no-dashboard"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "wrong.py:schedule" in err, err
    assert "HypoFuzz" not in err  # refused before the campaign starts


# -- the items HypoFuzz fuzzes ---------------------------------------------------------------


COLLECT = '''
import json, sys
from hypofuzz.collection import collect_tests
result = collect_tests(sys.argv[1:])
print(json.dumps({"targets": [t.nodeid for t in result.fuzz_targets], "skipped": result.not_collected}, default=str))
'''


@pytest.mark.slow
def test_hypofuzz_collects_every_fuzz_item_of_the_plugin(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # CI set, as on a CI machine: Hypothesis then loads its derandomized ``ci`` profile, which HypoFuzz skips
    env = dict(os.environ, CI="true", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = ["-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path),
            "--schedcheck", BUGGY, "--schedcheck-fuzz"]
    run = subprocess.run([sys.executable, "-c", COLLECT, *args], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    collected = json.loads(run.stdout.strip().splitlines()[-1])
    assert collected["targets"] == [f"schedcheck[{BUGGY}]::{check}"
                                    for check in ("conformance", "deterministic", "corrupted_validation")]
    assert collected["skipped"] == {}

    focused = subprocess.run([sys.executable, "-c", COLLECT, *args, "--schedcheck-fuzz-check", "deterministic"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert json.loads(focused.stdout.strip().splitlines()[-1])["targets"] == [f"schedcheck[{BUGGY}]::deterministic"]


@pytest.mark.slow
def test_plain_pytest_runs_the_same_items_and_fails_on_the_buggy_target(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(tmp_path),
               "--schedcheck", BUGGY, "--schedcheck-fuzz", "-k", "conformance", "-q"]
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"FAILED schedcheck[{BUGGY}]::conformance" in run.stdout
    assert "PropertyFailed: slot_bound:" in run.stdout


# -- campaigns ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_buggy_target_is_found_minimised_saved_and_replayed_first_by_verify(tmp_path):
    here = tmp_path / "campaign"
    run = schedcheck(here, "fuzz", BUGGY, *FOCUS, "--max-seconds", CAMPAIGN_SECONDS, "--no-dashboard",
                     "--json", str(tmp_path / "fuzz.json"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.startswith("FAIL slot_bound  engine=hypothesis"), run.stdout
    assert "campaign: found by HypoFuzz after" in run.stdout
    [cex] = saved(here)
    assert cex["property"] == "slot_bound" and cex["target"] == BUGGY
    assert json.loads((tmp_path / "fuzz.json").read_text())["verdict"] == "fail"

    # minimised as verify minimises: the same size as verify's own counterexample, found afresh elsewhere
    fresh = schedcheck(tmp_path / "fresh", "verify", BUGGY, "--seed", "0", "--budget", "60",
                       "--json", str(tmp_path / "fresh.json"))
    assert fresh.returncode == 1, fresh.stdout + fresh.stderr
    [theirs] = [c for c in json.loads((tmp_path / "fresh.json").read_text())["counterexamples"]]
    assert theirs["property"] == cex["property"]
    assert len(theirs["input"]["jobs"]) == len(cex["input"]["jobs"]) == 2

    # the next verify in the campaign's folder replays it first, and stops there
    again = schedcheck(here, "verify", BUGGY, "--budget", "60", "--json", str(tmp_path / "verify.json"))
    assert again.returncode == 1, again.stdout + again.stderr
    report = json.loads((tmp_path / "verify.json").read_text())
    assert report["checks"][0] == dict(report["checks"][0], check="replay", tried=1, stopped="counterexample")
    assert all(check["tried"] == 0 for check in report["checks"][1:])
    assert report["counterexamples"][0]["input_repr"] == cex["input_repr"]


@pytest.mark.slow
def test_a_correct_target_runs_to_max_seconds_and_exits_0_without_saying_pass(tmp_path):
    run = schedcheck(tmp_path, "fuzz", "impl:schedule", "--max-seconds", "10", "--no-dashboard",
                     "--json", str(tmp_path / "fuzz.json"))
    assert run.returncode == 0, run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("NO FAILURE impl:schedule  engine=hypofuzz  "), run.stdout
    assert "not a proof, and not a pass" in last and "PASS" not in run.stdout
    report = json.loads((tmp_path / "fuzz.json").read_text())
    assert report["campaign"] == "no failure" and "verdict" not in report
    assert report["calls"] > 0 and f"{report['calls']} calls" in last
    assert saved(tmp_path) == []
    assert [line.split()[1] for line in run.stdout.splitlines() if line.startswith("hypofuzz  ")] == [
        "conformance", "deterministic", "corrupted_validation"]  # every search planned is listed, run or not
    assert gone(tmp_path)  # HypoFuzz's hub, workers and the sandbox children


@pytest.mark.slow
def test_ctrl_c_stops_a_campaign_cleanly_with_what_it_covered(tmp_path):
    import signal

    running = schedcheck(tmp_path, "fuzz", "impl:schedule", "--check", "conformance", "--no-dashboard", background=True)
    try:
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any("proofs.fuzz.hub" in args for args in commands_in(tmp_path)):
                time.sleep(0.2)  # until HypoFuzz runs beside the command
            time.sleep(5)
            running.send_signal(signal.SIGINT)
            out, err = running.communicate(timeout=180)  # a safety net: it ends in seconds on a quiet machine
        finally:
            if running.poll() is None:
                running.kill()
                running.wait()
        assert running.returncode == 0, out + err
        assert out.strip().splitlines()[-1].startswith("NO FAILURE impl:schedule  engine=hypofuzz  "), out
        assert "Traceback" not in out + err
        assert gone(tmp_path)
    finally:  # judged above; a failed test leaves no hub or worker running behind it
        for pid in processes_in(tmp_path):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def gone(folder, seconds: float = 10.0) -> bool:
    """No process is left in ``folder`` (a sandbox child killed with its worker may take a moment to be reaped)."""
    deadline = time.monotonic() + seconds
    while processes_in(folder):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def processes_in(folder) -> list[int]:
    """The processes whose working directory is ``folder`` (a campaign's hub and workers inherit it)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.readlink(f"/proc/{entry}/cwd") == str(folder):
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def commands_in(folder) -> list[str]:
    """The command lines of ``processes_in(folder)``."""
    lines = []
    for pid in processes_in(folder):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                lines.append(handle.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return lines


# -- the shared database: a real redis-server on loopback ---------------------------------------


REDIS_SERVER = shutil.which("redis-server")
needs_redis = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed (.ci/run installs it)")


@pytest.fixture
def redis_url(tmp_path):
    redis = pytest.importorskip("redis", reason="the redis package is not installed (pip install -e '.[test]')")
    from tests.test_redis_database import free_port

    port = free_port()
    server = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    else:
        server.kill()
        pytest.fail(f"redis-server did not answer on 127.0.0.1:{port}")
    yield f"redis://127.0.0.1:{port}", client
    server.kill()
    server.wait()


def published(client, target):
    from proofs import models
    from proofs.cli.fuzz import shared_key

    return [json.loads(value) for value in client.smembers(b"hypothesis-example:" + shared_key(target, models.get()))]


@pytest.mark.slow
@needs_redis
def test_what_worker_a_found_is_replayed_first_by_worker_b_and_by_verify_there(tmp_path, redis_url):
    url, client = redis_url
    first = schedcheck(tmp_path / "machine-a", "fuzz", BUGGY, *FOCUS, "--db", url, "--max-seconds", CAMPAIGN_SECONDS,
                       "--no-dashboard")
    assert first.returncode == 1, first.stdout + first.stderr
    [cex] = saved(tmp_path / "machine-a")
    assert [c["input_repr"] for c in published(client, BUGGY)] == [cex["input_repr"]]

    # another folder: another local database, no saved counterexamples
    second = schedcheck(tmp_path / "machine-b", "fuzz", BUGGY, "--db", url, "--no-dashboard")
    assert second.returncode == 1, second.stdout + second.stderr
    assert second.stdout.splitlines()[1] == cex["input_repr"]
    assert "replayed first: a counterexample published in the example database still fails; nothing fuzzed" in second.stdout
    assert "HypoFuzz" not in second.stderr  # no campaign was started
    assert saved(tmp_path / "machine-b") == [dict(cex, message=saved(tmp_path / "machine-b")[0]["message"])]

    report = tmp_path / "verify-b.json"
    verify = schedcheck(tmp_path / "machine-b", "verify", BUGGY, "--budget", "60", "--json", str(report))
    assert verify.returncode == 1, verify.stdout + verify.stderr
    checks = json.loads(report.read_text())["checks"]
    assert checks[0]["check"] == "replay" and checks[0]["stopped"] == "counterexample"


@pytest.mark.slow
@needs_redis
def test_a_running_campaign_replays_what_another_machine_publishes(tmp_path, redis_url):
    from proofs import models
    from proofs.cli.fuzz import publish
    from proofs.counterexample import Counterexample
    from proofs.search.database import open_database

    url, client = redis_url
    target = tmp_path / "needle.py"
    target.write_text(NEEDLE)
    text = f"{target}:schedule"
    running = schedcheck(tmp_path / "machine-b", "fuzz", text, "--db", url, "--max-seconds", "120",
                         "--no-dashboard", background=True)
    try:
        time.sleep(8)  # the campaign is under way (and has not drawn the needle)
        assert running.poll() is None, running.communicate()
        cex = Counterexample("metrics_consistent", "hypothesis", "conformance", NEEDLE_CALL,
                             "published by another machine", model=models.DEFAULT)
        other = open_database(url, local=str(tmp_path / "machine-a-db"))
        publish(other, cex, text)
        out, err = running.communicate(timeout=120)
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    assert running.returncode == 1, out + err
    assert "published in the example database by another campaign while this one ran" in out
    assert out.splitlines()[1] == cex.input_repr()
    assert [c["input_repr"] for c in saved(tmp_path / "machine-b")] == [cex.input_repr()]


def test_a_module_target_never_resolves_through_the_dot_hypothesis_cli_appends(monkeypatch):
    import hypothesis.extra.cli  # noqa: F401  (HypoFuzz's Hypothesis plugin imports it; it appends ".")
    from proofs.targets import _forget_appended_dot

    monkeypatch.setattr(sys, "path", [*sys.path, "."])
    _forget_appended_dot()
    assert "." not in sys.path
