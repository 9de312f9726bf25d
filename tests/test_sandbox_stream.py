"""The persistent worker's overlapped face: submit/collect and a stream of calls, with every guarantee of ``call``."""

import textwrap
import time

import pytest

from proofs.sandbox import TargetProcess
from proofs.targets import parse_target

TARGET = '''
import ctypes, os

def schedule(jobs, slots, continuous):
    mode = jobs[0]["mode"] if jobs else "return"
    if mode == "return":
        return {"slots": slots, "pid": os.getpid()}
    if mode == "value_error":
        raise ValueError("bad input")
    if mode == "exit":
        os._exit(9)
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "hang_in_c":
        ctypes.CDLL(None).sleep(60)
    if mode == "mutate":
        jobs.append({})
        return {}
    if mode == "sleep":
        ctypes.CDLL(None).usleep(int(jobs[0]["seconds"] * 1e6))
        return {"slept": True}
    if mode == "mark":
        open(jobs[0]["path"], "w").close()
        return {}
'''


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "target.py"
    path.write_text(textwrap.dedent(TARGET))
    with TargetProcess(parse_target(f"{path}:schedule"), call_seconds=1.0, memory_bytes=256 * 2**20) as process:
        process.start()
        yield process


def _args(mode, slots=2, **extra):
    return ([{"mode": mode, **extra}], slots, True)


def test_submit_then_collect_is_one_call(worker):
    worker.submit(*_args("return", slots=5))
    outcome = worker.collect()
    assert outcome.kind == "returned" and outcome.result["slots"] == 5
    assert worker.calls == 1 and worker.history == [_args("return", slots=5)]


def test_the_limit_runs_from_the_submit(worker):
    worker.submit(*_args("sleep", seconds=1.0), seconds=0.5)
    time.sleep(1.5)  # the harness busy elsewhere: the answer is waiting when it collects
    outcome = worker.collect()  # but the call ended after its limit, counted from the submit
    assert outcome.kind == "timed_out" and "0.5 s" in outcome.error
    assert worker.call(*_args("return")).kind == "returned"  # a fresh child serves the next call


def test_an_answer_that_came_in_time_is_kept_when_collected_late(worker):
    worker.submit(*_args("sleep", seconds=0.1), seconds=2.0)
    time.sleep(2.5)
    outcome = worker.collect()
    assert outcome.kind == "returned" and outcome.result == {"slept": True}


def test_a_submit_to_a_dead_child_is_a_death(worker):
    assert worker.call(*_args("exit")).kind == "died"
    worker.submit(*_args("return"))  # a fresh child: the death was charged to the call that died
    assert worker.collect().kind == "returned"


def test_the_stream_charges_each_failure_to_its_own_call(worker):
    calls = [_args("return", slots=1), _args("exit"), _args("return", slots=3), _args("segfault"),
             _args("hang_in_c"), _args("value_error"), _args("mutate"), _args("return", slots=8)]
    seen = list(worker.stream(calls, seconds=0.5))
    assert [call for call, _ in seen] == calls
    kinds = [outcome.kind for _, outcome in seen]
    assert kinds == ["returned", "died", "returned", "died", "timed_out", "raised", "returned", "returned"]
    assert [seen[i][1].result["slots"] for i in (0, 2, 7)] == [1, 3, 8]
    assert "exit code 9" in seen[1][1].error and "SIGSEGV" in seen[3][1].error
    assert seen[6][1].mutated and not seen[7][1].mutated
    assert calls[6] == _args("mutate"), "the caller's call was modified"


def test_the_stream_gives_what_single_calls_give(worker, tmp_path):
    calls = [_args("return", slots=s) for s in range(1, 6)] + [_args("value_error"), _args("mutate")]
    streamed = [outcome._replace(result=_without_pid(outcome.result)) for _, outcome in worker.stream(calls)]
    single = [worker.call(*call) for call in calls]
    assert streamed == [outcome._replace(result=_without_pid(outcome.result)) for outcome in single]


def test_the_next_call_runs_while_the_caller_handles_an_outcome(worker, tmp_path):
    calls = [_args("mark", path=str(tmp_path / f"started-{index}")) for index in range(4)]
    for index, (_, outcome) in enumerate(worker.stream(calls)):
        assert outcome.kind == "returned"
        if index + 1 < len(calls):  # the next call has started before this outcome is handled
            marker = tmp_path / f"started-{index + 1}"
            for _ in range(200):
                if marker.exists():
                    break
                time.sleep(0.05)
            assert marker.exists(), f"call {index + 1} did not start while outcome {index} was handled"


def test_a_stream_stopped_early_leaves_no_call_in_flight(worker):
    stream = worker.stream([_args("return", slots=s) for s in range(1, 5)])
    call, outcome = next(stream)
    assert outcome.result["slots"] == 1
    stream.close()  # the second call was already sent: it is collected, not left in the pipe
    assert worker.call(*_args("return", slots=9)).result["slots"] == 9


def test_a_child_closed_by_the_harness_mid_call_runs_the_call_again(worker):
    worker.submit(*_args("return", slots=4))
    worker.close()  # not the call's doing: it is not charged a death, it runs again in a fresh child
    outcome = worker.collect()
    assert outcome.kind == "returned" and outcome.result["slots"] == 4 and worker.calls == 1


def _without_pid(result):
    return {k: v for k, v in result.items() if k != "pid"} if isinstance(result, dict) else result


def _thresholds():
    import gc

    return gc.get_threshold()


def test_the_harness_collector_is_the_parents_alone(tmp_path):
    import gc

    from proofs import sandbox

    path = tmp_path / "gc_target.py"
    path.write_text("import gc\n\ndef schedule(jobs, slots, continuous):\n    return list(gc.get_threshold())\n")
    usual = gc.get_threshold()
    with sandbox.harness_collector():
        assert gc.get_threshold()[0] == sandbox.HARNESS_GC_THRESHOLD
        with sandbox.harness_collector():  # nested: nothing more, nothing undone
            pass
        assert gc.get_threshold()[0] == sandbox.HARNESS_GC_THRESHOLD
        with TargetProcess(parse_target(f"{path}:schedule")) as process:
            assert tuple(process.call([], 1, True).result) == usual  # the target runs under the usual collector
        assert sandbox.run_once(_thresholds, seconds=10).result == usual
    assert gc.get_threshold() == usual
