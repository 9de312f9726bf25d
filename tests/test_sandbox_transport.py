"""The sandbox's transport: what a child sends reaches the harness as plain data, decoded without running anything.

The child encodes (``proofs.sandbox.encode``), the harness decodes (``decode``): plain data
survives exactly (types included), subclasses of dict, list and tuple arrive as their base
type, anything else as an inert ``Opaque``; bounds hold in the child; no message, however
forged, makes the harness run code.  Every message goes this way: results, errors, the
input-modified check, the one-shot runner's reports.
"""

import enum
import math
import os
import pickle
import textwrap
from collections import OrderedDict, namedtuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs import sandbox
from proofs.sandbox import NotPlain, Opaque, TargetProcess, decode, encode, run_once
from proofs.targets import parse_target


def roundtrip(value):
    decoded, _ = decode(encode(value))
    return decoded


def same(a, b) -> bool:
    """Equal with the same types all the way down (nan equal to nan, -0.0 apart from 0.0)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return list(map(repr, a)) == list(map(repr, b)) and all(same(a[k], b[k]) for k in a)
    return a == b


scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10**6000), max_value=10**6000)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text())
keys = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.tuples(st.integers(), st.text())
plain = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(keys, inner, max_size=4)
    | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(plain)
def test_plain_data_survives_exactly(value):
    assert same(roundtrip(value), value)


def test_the_corners_of_plain_data_survive_exactly():
    value = {
        "nan": float("nan"), "inf": [float("inf"), float("-inf")], "zero": -0.0, "big": 10**5000 + 7,
        "small": -(2**20000), 7: "an int key", (1, "a"): "a tuple key", None: True, 1.5: None, "": 0,
        "\x00t": "a key that looks like a tag", "surrogate": "\ud800", "tuple": (), "nested": ((),),
    }
    assert same(roundtrip(value), value)
    assert same(roundtrip({"\x00o": ["a", "b"]}), {"\x00o": ["a", "b"]})  # a plain dict shaped like a tag stays one


def test_subclasses_of_dict_list_and_tuple_arrive_as_their_base_type():
    Pair = namedtuple("Pair", "a b")

    class Jobs(list):
        pass

    value = [OrderedDict(a=1), Jobs([1, 2]), Pair(1, 2)]
    assert same(roundtrip(value), [{"a": 1}, [1, 2], (1, 2)])


class Color(enum.IntEnum):
    RED = 1


class Thing:
    def __repr__(self):
        return "Thing()"


@pytest.mark.parametrize("value, type_name", [
    (Color.RED, "test_sandbox_transport.Color"), (int, "type"), ({1, 2}, "set"), (frozenset(), "frozenset"),
    (b"x", "bytes"), (3j, "complex"), (Thing(), "test_sandbox_transport.Thing"), (lambda: 0, "function"),
])
def test_anything_else_arrives_as_an_opaque_with_its_type_and_repr(value, type_name):
    decoded, count = decode(encode({"makespan_ticks": value}))
    assert count == 1 and type(decoded["makespan_ticks"]) is Opaque
    opaque = decoded["makespan_ticks"]
    assert opaque.type_name.endswith(type_name) and opaque.text == repr(value)


def test_an_int_or_float_subclass_is_opaque_so_the_judge_reports_well_typed():
    import spec

    class Tick(int):
        pass

    jobs = [{"id": 0, "arrival": 0, "tokens": 1}]
    result = spec.run(jobs, 1, True)
    result["makespan_ticks"] = Tick(result["makespan_ticks"])
    found = spec.check(jobs, 1, True, roundtrip(result))
    assert found[0].invariant == "well_typed" and "Tick" in found[0].message, found


def test_numpy_ints_are_opaque():
    numpy = pytest.importorskip("numpy")
    decoded = roundtrip([numpy.int64(3), numpy.float32(0.5)])
    assert [o.type_name for o in decoded] == ["numpy.int64", "numpy.float32"]


def test_the_encoding_is_bounded_in_the_child():
    deep = []
    for _ in range(sandbox.MAX_DEPTH + 20):
        deep = [deep]
    decoded, count = decode(encode(deep))
    assert count == 1  # the part below MAX_DEPTH levels is one Opaque
    cycle = [1]
    cycle.append(cycle)
    (one, loop), _ = decode(encode(cycle))
    assert one == 1 and type(loop) is Opaque and "cycle" in loop.text
    with pytest.raises(NotPlain, match="values"):
        encode([[0] * 1000] * (sandbox.MAX_VALUES // 1000 + 1))  # one list referred to many times: counted each time


class HangingRepr:
    def __repr__(self):
        while True:
            pass


class RaisingEverything:
    def __repr__(self):
        raise SystemExit("from repr")

    def __eq__(self, other):
        raise RuntimeError("from eq")

    def __hash__(self):
        raise RuntimeError("from hash")


def test_a_repr_that_hangs_or_raises_and_keys_whose_eq_or_hash_raise_are_contained():
    value = {"a": HangingRepr(), "b": RaisingEverything(), "keys": {HangingRepr(): 1, HangingRepr(): 2}}
    decoded, count = decode(encode(value))
    assert count == 4
    assert "did not return" in decoded["a"].text and "raised SystemExit" in decoded["b"].text
    assert len(decoded["keys"]) == 2  # two opaque keys alike stay two keys


def test_past_max_reprs_an_opaque_carries_no_repr():
    decoded = roundtrip([Thing()] * (sandbox.MAX_REPRS + 5))
    assert decoded[0].text == "Thing()" and decoded[-1].text == "..."


class Payload:
    """Its pickle runs code where it is loaded."""

    def __reduce__(self):
        return exec, ("import os; open(os.environ['SCHEDCHECK_HOSTILE_MARKER'], 'a').write('ran')",)


@pytest.mark.parametrize("forged", [
    pickle.dumps(Payload()), b'{"\\u0000x": 1}', b'{"\\u0000d": [[[1], 2]]}', b"[" * 100_000 + b"]" * 100_000,
    b"1" * 5000, "é".encode(), b'{"\\u0000o": [1, 2]}', b"",
])
def test_decoding_a_forged_message_runs_nothing_and_raises_notplain(forged, tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDCHECK_HOSTILE_MARKER", str(tmp_path / "ran"))
    with pytest.raises(NotPlain):
        decode(forged)
    assert not (tmp_path / "ran").exists()


def test_a_batch_of_results_is_one_value():
    batch = [{"trace": [{"tick": 0, "served": [0]}], "extra": Thing()}, {"trace": ()}]
    decoded, count = decode(encode(batch))
    assert count == 1 and decoded[1] == {"trace": ()} and type(decoded[0]["extra"]) is Opaque


def test_strict_encoding_refuses_anything_not_exactly_plain():
    for value in (Thing(), OrderedDict(), Color.RED, [{1: {2}}]):
        with pytest.raises(NotPlain, match="is not plain data"):
            encode(value, strict=True)
    assert same(decode(encode({1: (2, [3.5])}, strict=True))[0], {1: (2, [3.5])})


def test_extra_keys_holding_opaque_values_are_dropped_and_contract_keys_keep_them():
    from proofs import models

    model = models.get("chapter")
    result = {"makespan_ticks": Opaque("numpy.int64", "1"), "busy_slots": 1, "utilization": 1.0,
              "completed": [{"id": 0, "arrival": 0, "tokens": 1, "start": 0, "finish": 1, "wait": 0, "turnaround": 1,
                             "note": "plain", "handle": Opaque("Handle", "h")}],
              "trace": [{"tick": 0, "served": [0], "batch": [Opaque("Batch", "b")]}],
              "engine": {"deep": [Opaque("Engine", "e")]}, "debug": "plain extra", Opaque("Key", "k"): 1}
    kept, dropped = sandbox.drop_opaque_extras(result, model.contract_part)
    assert dropped == (("result['completed'][*]['handle']", "Handle"), ("result['trace'][*]['batch']", "Batch"),
                       ("result['engine']", "Engine"), ("result[<Key: k>]", "Key"))
    assert kept["makespan_ticks"] == Opaque("numpy.int64", "1")  # a contract key: the judge sees it, well_typed
    assert kept["debug"] == "plain extra" and kept["completed"][0]["note"] == "plain"
    assert sandbox.holds_opaque({k: v for k, v in kept.items() if k != "makespan_ticks"}) is None


# --- through a worker ---------------------------------------------------------------------------

TARGET = '''
import os, stat, struct, pickle

CODE = "import os; open(os.environ['SCHEDCHECK_HOSTILE_MARKER'], 'a').write('ran in ' + str(os.getpid()))"


class Payload:
    def __reduce__(self):
        return exec, (CODE,)


class Hostile(Exception):
    def __reduce__(self):
        return exec, (CODE,)


def schedule(jobs, slots, continuous):
    mode = jobs[0]["mode"] if jobs else "return"
    if mode == "payload":
        return {"result": Payload(), "tuple": (1, 2), 7: [float("nan")]}
    if mode == "raise":
        raise Hostile(Payload())
    if mode == "mutate":
        jobs.append(Payload())
        return {}
    if mode == "forge":  # a pickle written straight onto every socket the worker holds, before its answer
        message = pickle.dumps(("returned", Payload(), False, "", None, 0.0))
        for fd in range(3, 64):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.write(fd, struct.pack("!i", len(message)) + message)
            except OSError:
                pass
        return {}
    return {"pid": os.getpid()}
'''


@pytest.fixture
def worker(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDCHECK_HOSTILE_MARKER", str(tmp_path / "ran"))
    path = tmp_path / "target.py"
    path.write_text(textwrap.dedent(TARGET))
    with TargetProcess(parse_target(f"{path}:schedule"), call_seconds=5.0) as process:
        process.start()
        yield process
    assert not (tmp_path / "ran").exists(), "code chosen by the target ran in the harness"


def _call(process, mode):
    return process.call([{"mode": mode}], 1, True)


def test_a_result_holding_a_payload_arrives_inert(worker):
    outcome = _call(worker, "payload")
    assert outcome.kind == "returned" and outcome.sendable
    assert type(outcome.result["result"]) is Opaque and outcome.result["result"].type_name.endswith("Payload")
    assert outcome.result["tuple"] == (1, 2) and math.isnan(outcome.result[7][0])


def test_an_exception_built_to_run_code_arrives_as_its_name_and_text(worker):
    outcome = _call(worker, "raise")
    assert outcome.kind == "raised" and outcome.error_type == "Hostile"


def test_an_input_modified_with_a_payload_is_seen_and_arrives_inert(worker):
    outcome = _call(worker, "mutate")
    assert outcome.mutated and type(outcome.args_after[0][-1]) is Opaque


def test_a_message_forged_on_the_socket_is_not_run(worker):
    outcome = _call(worker, "forge")
    assert outcome.kind == "returned" and not outcome.sendable and "not plain data" in outcome.error
    assert _call(worker, "return").kind == "returned"  # a fresh worker serves the next call


def _reports_payload(report):
    report({"fine": (1, 2)})
    report(Payload())


def _returns_payload():
    return {"result": Payload()}


def test_a_one_shot_child_sends_plain_data_only(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDCHECK_HOSTILE_MARKER", str(tmp_path / "ran"))
    returned = run_once(_returns_payload, seconds=10)
    assert returned.kind == "harness_error" and "could not be sent back" in returned.error
    reported = run_once(_reports_payload, seconds=10, partial=True)
    assert reported.kind == "harness_error" and "report could not be sent back" in reported.error
    assert reported.partial == ({"fine": (1, 2)},)
    assert not (tmp_path / "ran").exists()


def test_a_one_shot_child_reaches_none_of_the_harness_descriptors(tmp_path):
    read_end, write_end = os.pipe()  # a pipe of the harness's, as another child's would be
    try:
        outcome = run_once(_writes_to, write_end, seconds=10)
        assert outcome.kind == "returned"
        os.set_blocking(read_end, False)
        with pytest.raises(BlockingIOError):
            os.read(read_end, 100)  # nothing came through: the child's copy pointed at /dev/null
    finally:
        os.close(read_end)
        os.close(write_end)


def _writes_to(fd):
    return os.write(fd, b"forged")


BIG = '''
import time

RESULT = {"trace": [{"tick": t, "served": list(range(10)), "pair": (t, t)} for t in range(50_000)]}  # built once


def schedule(jobs, slots, continuous):
    time.sleep(jobs[0]["sleep"])
    return RESULT
'''


def test_writing_a_large_result_never_counts_against_the_call_s_limit(tmp_path):
    path = tmp_path / "big.py"
    path.write_text(BIG)
    with TargetProcess(parse_target(f"{path}:schedule"), call_seconds=2.0) as process:
        # returns 0.2 s before its limit; writing 50 000 entries holding tuples (the tagged path) takes
        # longer than that, which the worker announces by telling when the call ended
        outcome = process.call([{"sleep": 1.8}], 1, True)
        assert outcome.kind == "returned" and len(outcome.result["trace"]) == 50_000
        assert outcome.result["trace"][-1]["pair"] == (49_999, 49_999)
        late = process.call([{"sleep": 2.5}], 1, True)  # the limit itself is what it was
        assert late.kind == "timed_out" and "did not return within 2 s" in late.error


def test_the_arguments_snapshot_tells_every_change_of_value_or_type_and_nothing_else():
    # the child compares two snapshots of the arguments (marshal's bytes for exact builtin values, the
    # plain-data encoding for anything else): equal values give equal bytes, any change of a value or of
    # its type (True for 1, 1.0 for 1, an object put in) gives other bytes
    def request():
        return ([{"id": 0, "done": True, "size": 1.0}], {"budget": 4})

    snapshot = sandbox._snapshot
    assert snapshot(request()) == snapshot(request())
    changes = [lambda r: r[0][0].update(done=1), lambda r: r[0][0].update(size=1),
               lambda r: r[1].update(budget=5), lambda r: r[0].append(Payload()),
               lambda r: r[0][0].update(extra=None)]
    for change in changes:
        changed = request()
        change(changed)
        assert snapshot(changed) != snapshot(request())
    assert snapshot(([Payload()],)) is not None  # a value marshal cannot write is still compared
