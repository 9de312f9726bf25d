"""``schedcheck trace``: recorded traces of correct engines pass, hand-broken ones fail at the right invariant and tick.

Traces are written the way an engine would log them (a header line, one entry per
line, optionally the totals) from our impl, the correct corpus and the online
protocol; each hand-broken trace changes one entry of a correct one so that exactly
one kind of bug shows, and the checker must name its invariant and tick.  The buggy
corpus's inputs that show each bug give the same invariant as the whole-result oracle.
"""

import copy
import gzip
import importlib
import json
import pathlib
import random
import subprocess
import tempfile
import sys

import pytest
from hypothesis import HealthCheck, given, settings

import impl
import spec
import spec.serving as serving
from proofs.search.serving import valid_calls
from proofs.targets import load_callable, parse_target
from proofs.trace.check import check_file
from proofs.trace.files import TraceFileError, header_of, write
from tests import serving_examples as ex

ROOT = pathlib.Path(__file__).parent
CORRECT = ROOT / "corpus" / "serving" / "correct"
TOTALS = ("makespan_ticks", "computed_tokens", "useful_tokens", "recomputed_tokens", "aborted_tokens",
          "token_utilization", "preemptions")
S1 = (ex.S1_REQUESTS, ex.S1_CONFIG)
S3 = (ex.S3_REQUESTS, ex.S3_CONFIG)


def serving_file(tmp_path, call, trace, totals=None, name="t.jsonl"):
    path = tmp_path / name
    write(str(path), header_of("serving", call), trace, totals)
    return str(path)


def result_file(tmp_path, call, result, name="t.jsonl"):
    return serving_file(tmp_path, call, result["trace"], {k: result[k] for k in TOTALS}, name)


def cli(*args, cwd=None):
    """``schedcheck trace ARGS``, by default in a fresh folder: what it saves (.schedcheck/) stays out of the repository."""
    return subprocess.run([sys.executable, "-m", "proofs.cli.main", "trace", *args], capture_output=True, text=True,
                          cwd=cwd or tempfile.mkdtemp(prefix="schedcheck-test-trace-"))


# ---------------------------------------------------------------- correct traces pass

@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(valid_calls(max_requests=6, many=False))
def test_traces_of_our_impl_pass(tmp_path_factory, call):
    path = result_file(tmp_path_factory.mktemp("t"), call, impl.serve(*call))
    report = check_file(path)
    assert report.verdict == "pass", report
    assert report.entries == len(impl.serve(*call)["trace"])


@pytest.mark.parametrize("name", ["tick_by_tick", "event_heaps", "online_engine", "unusual_result_shapes"])
def test_traces_of_the_correct_corpus_pass(tmp_path, name):
    serve = load_callable(parse_target(f"{CORRECT / name}.py:serve"))
    rng = random.Random(name)
    for round_ in range(25):
        config = {"max_seqs": rng.randint(1, 3), "token_budget": rng.randint(4, 9), "block_size": rng.randint(1, 3),
                  "num_blocks": rng.randint(4, 8), "chunked_prefill": rng.random() < 0.7}
        requests = []
        for i in range(rng.randint(0, 5)):
            request = {"id": i, "arrival": rng.randint(0, 4), "prompt": rng.randint(1, 3), "output": rng.randint(1, 3)}
            if rng.random() < 0.3:
                request["abort"] = request["arrival"] + rng.randint(0, 3)
            requests.append(request)
        if not serving.is_valid(requests, config):
            continue
        result = json.loads(json.dumps(serve(copy.deepcopy(requests), copy.deepcopy(config))))
        report = check_file(result_file(tmp_path, (requests, config), result, f"{round_}.jsonl"))
        assert report.verdict == "pass", (requests, config, report)


@pytest.mark.slow  # records and checks traces of every online target (about 12 s on 2 quiet cores): the slow run
def test_recorded_traces_of_online_targets_pass(tmp_path):
    requests = tmp_path / "r.json"
    config = tmp_path / "c.json"
    calls = [
        ([{"id": 0, "arrival": 0, "prompt": 2, "output": 3}, {"id": 1, "arrival": 0, "prompt": 1, "output": 2},
          {"id": 2, "arrival": 9, "prompt": 3, "output": 1, "abort": 10}], ex.S2_CONFIG),
        S3,
    ]
    for index, (reqs, conf) in enumerate(calls):
        requests.write_text(json.dumps(reqs))
        config.write_text(json.dumps(conf))
        for target in ("impl:ServingScheduler", f"{CORRECT / 'online_engine'}.py:make"):
            out = tmp_path / f"{index}.jsonl.gz"
            run = cli("--record", target, "--requests", str(requests), "--config", str(config), "-o", str(out))
            assert run.returncode == 0, run.stderr
            assert open(out, "rb").read(2) == b"\x1f\x8b"
            reference = serving.run(reqs, conf)
            expected = reference["trace"]
            with gzip.open(out, "rt") as handle:
                entries = [json.loads(line) for line in handle][1:]
            assert entries[-1] == {"totals": {key: reference[key] for key in TOTALS}}  # the totals line, last
            entries = entries[:-1]
            assert [e["scheduled"] for e in entries] == [e["scheduled"] for e in expected]
            assert [e["tick"] for e in entries] == [e["tick"] for e in expected]
            check = cli(str(out))
            assert check.returncode == 0, check.stdout + check.stderr
            assert check.stdout.startswith("PASS")


def test_the_chapter_s_traces_pass_and_a_recorded_one_too(tmp_path):
    rng = random.Random(3)
    for round_ in range(40):
        jobs = [{"id": i, "arrival": rng.randint(0, 5), "tokens": rng.randint(1, 4)} for i in range(rng.randint(0, 6))]
        slots, continuous = rng.randint(1, 3), rng.random() < 0.5
        result = impl.schedule(jobs, slots, continuous)
        path = tmp_path / f"{round_}.jsonl"
        write(str(path), header_of("chapter", (jobs, slots, continuous)), result["trace"],
              {k: result[k] for k in ("makespan_ticks", "busy_slots", "utilization")})
        report = check_file(str(path))
        assert report.verdict == "pass", (jobs, slots, continuous, report)
    (tmp_path / "j.json").write_text(json.dumps([{"id": 0, "arrival": 0, "tokens": 3}, {"id": 1, "arrival": 7, "tokens": 2}]))
    (tmp_path / "c.json").write_text(json.dumps({"slots": 1, "continuous": True}))
    out = tmp_path / "rec.jsonl"
    run = cli("--model", "chapter", "--record", "impl:Scheduler",
              "--requests", str(tmp_path / "j.json"), "--config", str(tmp_path / "c.json"), "-o", str(out))
    assert run.returncode == 0, run.stderr
    recorded = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    assert [entry["tick"] for entry in recorded[:-1]] == [0, 1, 2, 7, 8]
    assert recorded[-1] == {"totals": {"makespan_ticks": 9, "busy_slots": 5, "utilization": 5 / 9}}
    assert check_file(str(out)).verdict == "pass"


# ---------------------------------------------------------------- hand-broken traces

def broken(trace, index, **changes):
    out = copy.deepcopy(trace)
    out[index].update(changes)
    return out


HAND_BROKEN = {
    # request 1 finishes in tick 3 and does not give its blocks back
    "block leaked": (S1, broken(ex.S1_TRACE, 3, freed=[]), "kv_exact", 3, (1,)),
    # tick 0 computes 5 tokens of request 0's prompt under a budget of 4 (its 3 blocks are right)
    "budget overshot": (S1, broken(ex.S1_TRACE, 0, scheduled=[[0, 5]], allocated=[[0, [0, 1, 2]]]),
                        "token_budget", 0, (0,)),
    # request 0 is aborted at tick 2 and served again at tick 3
    "served after its abort": (S3, ex.S3_TRACE + [{"tick": 3, "scheduled": [[0, 1]], "preempted": [], "aborted": [],
                                                   "freed": [], "allocated": [], "finished": []}],
                               "no_start_before_arrival", 3, (0,)),
    # tick 1 gives block 2 to request 1 while request 0 is given it too
    "double allocation": (S1, broken(ex.S1_TRACE, 1, allocated=[[0, [2]], [1, [2]]]), "kv_exclusive", 1, (1, 0)),
    # tick 0 admits request 1 while request 0 heads the queue
    "skipped FCFS head": (S1, broken(ex.S1_TRACE, 0, scheduled=[[1, 2]], allocated=[[1, [0]]]),
                          "fcfs_admission", 0, (1, 0)),
}


@pytest.mark.parametrize("kind", sorted(HAND_BROKEN))
def test_a_hand_broken_trace_names_its_invariant_and_tick(tmp_path, kind):
    call, trace, invariant, tick, ids = HAND_BROKEN[kind]
    assert check_file(serving_file(tmp_path, call, ex.S1_TRACE if call is S1 else ex.S3_TRACE)).verdict == "pass"
    report = check_file(serving_file(tmp_path, call, trace))
    assert report.verdict == "fail"
    assert (report.violation.invariant, report.violation.tick) == (invariant, tick), report.violation
    assert tuple(report.violation.ids) == ids
    assert report.line == tick + 2  # the header is line 1
    assert any(line.startswith("trace    req ") for line in report.timeline), report.timeline


def test_the_cli_reports_the_first_violation_with_its_picture_and_json(tmp_path):
    call, trace, invariant, tick, _ = HAND_BROKEN["block leaked"]
    path = serving_file(tmp_path, call, trace)
    run = cli(path, "--json", str(tmp_path / "r.json"))
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines[0] == f"FAIL kv_exact  engine=trace  (tick 3, line 5)"
    assert "# requests involved: 1" in lines
    assert any(line.startswith("tick ") for line in lines)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["verdict"] == "fail"
    assert {k: report["violation"][k] for k in ("invariant", "tick", "line", "ids")} == \
        {"invariant": "kv_exact", "tick": 3, "line": 5, "ids": [1]}


def test_a_long_trace_shows_a_window_around_the_violation(tmp_path):
    requests = [{"id": 0, "arrival": 0, "prompt": 1, "output": 200}]
    config = {"max_seqs": 1, "token_budget": 4, "block_size": 4, "num_blocks": 64, "chunked_prefill": True}
    trace = copy.deepcopy(serving.run(requests, config)["trace"])
    trace[150]["scheduled"] = [[0, 1], [0, 1]]
    report = check_file(serving_file(tmp_path, (requests, config), trace))
    assert (report.violation.invariant, report.violation.tick) == ("no_duplicate_active", 150)
    header = report.timeline[0]
    assert "150" in header and " 130 " not in header and " 170 " not in header


@pytest.mark.parametrize("policy", [None, "none"])
def test_a_dropped_line_is_named_before_its_downstream_symptom(tmp_path, policy):
    # six requests run together for many ticks; the log loses the line of tick 6 (two finish in it, so tick 7
    # reuses their blocks: without the gap check the first finding was kv_exclusive at tick 7)
    requests = [{"id": 120 + i, "arrival": 0, "prompt": 1, "output": 7 + 3 * (i % 2)} for i in range(6)]
    config = {"max_seqs": 6, "token_budget": 6, "block_size": 1, "num_blocks": 64, "chunked_prefill": True}
    trace = serving.run(requests, config)["trace"]
    assert [e["tick"] for e in trace[:8]] == list(range(8)) and trace[6]["finished"]
    dropped = trace[:6] + trace[7:]
    report = check_file(serving_file(tmp_path, (requests, config), dropped), policy=policy)
    assert (report.violation.invariant, report.violation.tick) == ("metrics_consistent", 6), report.violation
    assert report.violation.message.startswith("tick 6 is missing: requests 120-125 were running"), report.violation
    assert report.line == 8  # the entry after the gap: the header, ticks 0-5, then tick 7
    run = cli(serving_file(tmp_path, (requests, config), dropped, name="d.jsonl"))
    assert run.returncode == 1 and run.stdout.splitlines()[0] == "FAIL metrics_consistent  engine=trace  (tick 6, line 8)"
    # several lines lost: the range is named; a gap while nothing runs is an idle stretch, not a loss
    report = check_file(serving_file(tmp_path, (requests, config), trace[:3] + trace[6:], name="e.jsonl"))
    assert report.violation.message.startswith("ticks 3-5 are missing: requests 120-125 were running")


def test_policy_none_passes_an_engine_with_another_policy(tmp_path):
    # preempts_oldest and skips_head_that_does_not_fit keep every safety claim but not FCFS
    calls = {
        "preempts_oldest": ([{"id": 0, "arrival": 0, "prompt": 1, "output": 3}, {"id": 1, "arrival": 1, "prompt": 1, "output": 2},
                             {"id": 2, "arrival": 0, "prompt": 1, "output": 3}],
                            {"max_seqs": 3, "token_budget": 3, "block_size": 2, "num_blocks": 3, "chunked_prefill": False}),
        "skips_head_that_does_not_fit": ([{"id": 0, "arrival": 1, "prompt": 2, "output": 1},
                                          {"id": 1, "arrival": 1, "prompt": 1, "output": 1},
                                          {"id": 2, "arrival": 0, "prompt": 1, "output": 2}],
                                         {"max_seqs": 2, "token_budget": 3, "block_size": 1, "num_blocks": 3,
                                          "chunked_prefill": False}),
    }
    for name, call in calls.items():
        serve = importlib.import_module(f"tests.corpus.serving.buggy.{name}").serve
        path = result_file(tmp_path, call, serve(*copy.deepcopy(call)), f"{name}.jsonl")
        assert check_file(path).violation.invariant in ("preempt_newest", "fcfs_admission")
        assert check_file(path, policy="none").verdict == "pass"
    # a safety bug is still caught under --policy none
    call, trace, invariant, tick, _ = HAND_BROKEN["double allocation"]
    assert check_file(serving_file(tmp_path, call, trace), policy="none").violation.invariant == "kv_exclusive"


def test_the_buggy_corpus_gives_the_oracle_s_invariant(tmp_path):
    from tests.test_serving_buggy_selfcheck import CASES

    record_only = {"first_token_on_partial_chunk", "generated_counted_twice_after_recompute"}  # the trace is right
    checked = 0
    for name, (call, symptom, _hidden) in sorted(CASES.items()):
        if isinstance(symptom, str) or name == "finishes_one_token_early":
            continue
        module = importlib.import_module(f"tests.corpus.serving.buggy.{name}")
        result = module.serve(*copy.deepcopy(call))
        oracle = [v.invariant for v in serving.check(*call, result) if v.invariant != "matches_reference"]
        report = check_file(result_file(tmp_path, call, result, f"{name}.jsonl"))
        if name in record_only:
            assert report.verdict == "pass", name
            continue
        assert report.verdict == "fail", name
        assert report.violation.invariant == oracle[0], (name, report.violation, oracle)
        checked += 1
    assert checked >= 20


# ---------------------------------------------------------------- the chapter's model

def chapter_file(tmp_path, jobs, slots, continuous, trace, name="c.jsonl"):
    path = tmp_path / name
    write(str(path), header_of("chapter", (jobs, slots, continuous)), trace)
    return str(path)


def test_hand_broken_chapter_traces(tmp_path):
    jobs = [{"id": 0, "arrival": 0, "tokens": 2}, {"id": 1, "arrival": 0, "tokens": 1}, {"id": 2, "arrival": 1, "tokens": 1}]
    good = spec.run(jobs, 1, True)["trace"]
    assert check_file(chapter_file(tmp_path, jobs, 1, True, good)).verdict == "pass"
    assert good == [{"tick": 0, "served": [0]}, {"tick": 1, "served": [0]}, {"tick": 2, "served": [1]},
                    {"tick": 3, "served": [2]}]
    def served_as(*lists):
        return [{"tick": tick, "served": served} for tick, served in enumerate(lists)]

    lifo = served_as([1], [0], [0], [2])
    cases = [
        (broken(good, 0, served=[0, 1]), "slot_bound", 0),
        (lifo, "fifo_order", 0),
        (good[:-1], "work_conservation", 2),  # at the end: the last tick
        (good + [{"tick": 9, "served": [2]}], "nonnegative_remaining", 9),
        ([dict(e, tick=e["tick"] + 1) for e in good], "continuous_backfills", 0),
        (broken(good, 0, served=[0, 0]), "no_duplicate_active", 0),
        (served_as([2], [0], [0], [1]), "no_start_before_arrival", 0),
        (served_as([0], [1], [0], [2]), "no_preemption", 1),
        (good[:3] + [{"tick": 5, "served": [2]}], "termination", 5),  # job 2 waits while idle: the policy's
        # continuous_backfills at tick 3 is found in the same entry; safety first (spec.registry.root_cause_first)
    ]
    for trace, invariant, tick in cases:
        report = check_file(chapter_file(tmp_path, jobs, 1, True, trace))
        assert (report.violation.invariant, report.violation.tick) == (invariant, tick), (trace, report.violation)
    assert check_file(chapter_file(tmp_path, jobs, 1, True, lifo), policy="none").verdict == "pass"
    late = check_file(chapter_file(tmp_path, jobs, 1, True, good[:3] + [{"tick": 5, "served": [2]}]), policy="none")
    assert (late.violation.invariant, late.violation.tick) == ("termination", 5)  # max(arrival) 1 + 4 tokens
    static = spec.run(jobs, 2, False)["trace"]
    assert static == served_as([0, 1], [0], [2])
    assert check_file(chapter_file(tmp_path, jobs, 2, False, static)).verdict == "pass"
    joined = check_file(chapter_file(tmp_path, jobs, 2, False, served_as([0, 1], [0, 2])))
    assert (joined.violation.invariant, joined.violation.tick) == ("static_batch_boundary", 1)


def test_the_chapter_s_buggy_corpus_agrees_with_its_oracle(tmp_path):
    names = ["lifo_admission", "admits_one_too_many", "sjf_hidden_priority", "bulk_admit_leaves_slot_idle",
             "freed_slots_refilled_late", "serves_one_extra_token", "admits_one_tick_early", "id_only_order"]
    rng = random.Random(7)
    for name in names:
        schedule = importlib.import_module(f"tests.corpus.buggy.{name}").schedule
        for _ in range(300):
            jobs = [{"id": i, "arrival": rng.randint(0, 4), "tokens": rng.randint(1, 3)} for i in range(rng.randint(1, 8))]
            slots, continuous = rng.randint(1, 4), rng.random() < 0.5
            result = schedule(copy.deepcopy(jobs), slots, continuous)
            oracle = {v.invariant for v in spec.check(jobs, slots, continuous, result)} - {"matches_reference"}
            trace_level = oracle - {"metrics_consistent", "every_job_completes_once"}
            if not trace_level:
                continue
            path = tmp_path / f"{name}.jsonl"
            write(str(path), header_of("chapter", (jobs, slots, continuous)), result["trace"],
                  {k: result[k] for k in ("makespan_ticks", "busy_slots", "utilization")})
            report = check_file(str(path))
            assert report.verdict == "fail", (name, jobs, slots, continuous)
            assert report.violation.invariant in oracle, (name, jobs, slots, continuous, report.violation, oracle)
            break
        else:
            pytest.fail(f"{name}: no input showed its bug in the trace")


# ---------------------------------------------------------------- files

def test_gzip_is_read_by_its_magic_bytes(tmp_path):
    plain = serving_file(tmp_path, S1, ex.S1_TRACE, ex.S1_TOTALS)
    disguised = tmp_path / "looks_plain.jsonl"
    disguised.write_bytes(gzip.compress(pathlib.Path(plain).read_bytes()))
    assert check_file(str(disguised)).verdict == "pass"
    leaked = serving_file(tmp_path, *HAND_BROKEN["block leaked"][:2], name="leak.jsonl")
    disguised.write_bytes(gzip.compress(pathlib.Path(leaked).read_bytes()))
    assert check_file(str(disguised)).violation.invariant == "kv_exact"


def test_the_totals_line_is_checked_at_the_end(tmp_path):
    assert check_file(serving_file(tmp_path, S1, ex.S1_TRACE, ex.S1_TOTALS)).verdict == "pass"
    report = check_file(serving_file(tmp_path, S1, ex.S1_TRACE, dict(ex.S1_TOTALS, computed_tokens=12)))
    assert (report.violation.invariant, report.violation.tick) == ("work_conservation", None)
    report = check_file(serving_file(tmp_path, S1, ex.S1_TRACE[:3]))
    assert report.violation.invariant == "every_job_completes_once"
    assert "request 1 is still running after the last tick" in report.violation.message


def test_a_malformed_entry_is_a_well_typed_failure(tmp_path):
    trace = copy.deepcopy(ex.S1_TRACE)
    del trace[2]["freed"]
    report = check_file(serving_file(tmp_path, S1, trace))
    assert (report.violation.invariant, report.line) == ("well_typed", 4)
    assert report.violation.message == "line 4: missing key 'freed'"


def _bad(tmp_path, name, text):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


HEADER = json.dumps({"model": "serving", "config": ex.S1_CONFIG, "requests": ex.S1_REQUESTS})
ENTRY = json.dumps(ex.S1_TRACE[0])


@pytest.mark.parametrize("content, line, words", [
    ("", 1, "the file is empty"),
    ("{not json\n", 1, "not JSON"),
    (HEADER + "\n" + ENTRY + "\n{\"tick\": \n", 3, "not JSON"),
    (HEADER + "\n" + "[" * 100_000 + "]" * 100_000 + "\n", 2, "not JSON: nested too deeply"),
    ("[1, 2]\n", 1, "the header must be a JSON object"),
    (json.dumps({"model": "vllm"}) + "\n", 1, "header model='vllm'"),
    (json.dumps({"model": "serving", "config": ex.S1_CONFIG}) + "\n", 1, "missing key 'requests'"),
    (json.dumps({"model": "serving", "config": ex.S1_CONFIG, "requests": [{"id": 0, "arrival": 0, "prompt": 0, "output": 1}]})
     + "\n", 1, "header outside the domain: requests[0].prompt=0: expected an int >= 1"),
    (HEADER + "\n" + json.dumps({"totals": ex.S1_TOTALS}) + "\n" + ENTRY + "\n", 3, "an entry after the totals line 2"),
    (gzip.compress((HEADER + "\n" + ENTRY + "\n").encode())[:-12], 2, "cannot read the file"),
])
def test_a_bad_file_is_an_error_naming_its_line(tmp_path, content, line, words):
    path = _bad(tmp_path, "bad.jsonl", content)
    with pytest.raises(TraceFileError) as raised:
        check_file(path)
    assert raised.value.line == line
    assert words in str(raised.value)


def test_bad_files_exit_2_with_one_line(tmp_path):
    for content in ("{not json\n", json.dumps({"model": "serving"}) + "\n", "[" * 100_000 + "]" * 100_000 + "\n"):
        run = cli(_bad(tmp_path, "bad.jsonl", content))
        assert run.returncode == 2
        assert run.stdout == ""
        assert len(run.stderr.splitlines()) == 1 and "line 1:" in run.stderr, run.stderr
    run = cli(str(tmp_path / "missing.jsonl"))
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1
    run = cli(serving_file(tmp_path, S1, ex.S1_TRACE), "--model", "chapter")
    assert run.returncode == 2 and "header model='serving', but --model chapter" in run.stderr
    run = cli(serving_file(tmp_path, S1, ex.S1_TRACE), "--policy", "sjf")
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1
