"""The trace reader's ``parse`` (msgspec first, ``json.loads`` for what msgspec refuses) is ``json.loads``, value for value and error for error.

A trace's verdict rests on what each line parses to: a value that differed (an int read as
a float, a bool as an int, the first of two repeated keys) would change a ``well_typed``
finding, and an error that differed would change an exit code.  So the outcome of
``parse`` is compared with ``json.loads``'s exactly: the value's ``repr`` (which tells
1 from 1.0 and True, keeps key order and shows NaN) or the error's type and message.
"""

import json

import pytest
from hypothesis import given, settings, strategies as st

from proofs.trace.files import parse

LEAVES = st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63 - 4, max_value=2**80) | st.floats() | st.text()
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
                      max_leaves=12)


def outcome(function, raw):
    try:
        return "value", repr(function(raw))
    except ValueError as error:  # json.JSONDecodeError, UnicodeDecodeError
        return type(error).__name__, str(error)


@settings(max_examples=150)
@given(VALUES, st.booleans(), st.sampled_from(["utf-8", "utf-16", "utf-32"]))
def test_parse_reads_every_json_text_as_json_loads_does(value, ascii, encoding):
    raw = json.dumps(value, ensure_ascii=ascii).encode(encoding, "surrogatepass")
    assert outcome(parse, raw) == outcome(json.loads, raw)


@settings(max_examples=150)
@given(VALUES, st.data())
def test_parse_fails_on_broken_json_text_as_json_loads_does(value, data):
    raw = bytearray(json.dumps(value, separators=(",", ":")).encode())
    at = data.draw(st.integers(0, len(raw)))
    cut = data.draw(st.integers(0, 2))
    raw[at:at + cut] = data.draw(st.binary(max_size=2))
    assert outcome(parse, bytes(raw)) == outcome(json.loads, bytes(raw))


@pytest.mark.parametrize("raw", [
    b'{"a":1,"a":2}', b"123456789012345678901234567890", b"-18446744073709551617", b"9" * 4300, b"9" * 4301,
    b"NaN", b"-Infinity", b"1e400", b'"\\ud800"', b'"\xed\xa0\x80"', b"\xef\xbb\xbf{}", b'"\xff"', b"{}{}", b"  ",
    b"[1,]", b"01", b"+1", b".5", b'"a\x01b"', b"-0", b"-0.0", b"1E2", b'{"tick": 3, "served": [1, true, 2.0]}',
])
def test_parse_gives_json_loads_outcome_at_the_edges(raw):
    assert outcome(parse, raw) == outcome(json.loads, raw)
