"""The trace file: a header line, one JSON line per tick, and optionally a totals line, plain or gzip.

The header is ``{"model": "serving", "config": {...}, "requests": [...]}`` or
``{"model": "chapter", "slots": S, "continuous": B, "jobs": [...]}``; then one entry
per line in the model's trace-entry format; then, optionally, ``{"totals": {...}}``
(the result's totals, checked at the end).  Blank lines are skipped.  A file whose
first two bytes are gzip's magic number is read as gzip, whatever its name.  Every
problem with the file itself (not JSON, a bad header, a header outside the domain, an
entry after the totals) is a ``TraceFileError`` naming the line.

Each line is parsed by ``parse``: msgspec's C decoder, which reads a trace's lines in
about a third of ``json.loads``'s time, and ``json.loads`` itself for any line msgspec
refuses, so that every value and every error is ``json.loads``'s own.
"""

from __future__ import annotations

import gzip
import json
from typing import Callable, Iterator

import msgspec

_decode = msgspec.json.Decoder().decode

GZIP_MAGIC = b"\x1f\x8b"
HEADER_KEYS = {
    "serving": ("model", "config", "requests"),
    "chapter": ("model", "slots", "continuous", "jobs"),
}


class TraceFileError(ValueError):
    """The trace file cannot be read: ``line`` is where (0 when the file itself cannot be opened)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


def open_binary(path: str):
    """The file opened for reading bytes, through gzip when its first bytes are gzip's magic number."""
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise TraceFileError(0, f"cannot open {path!r}: {error.strerror or error}") from None
    magic = handle.read(2)
    handle.seek(0)
    if magic == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=handle, mode="rb")
    return handle


def parse(raw: bytes) -> object:
    """What ``json.loads(raw)`` returns or raises, in about a third of its time on a trace's lines.

    msgspec gives the same value wherever it accepts a line (ints of any size, the last of
    repeated keys); what it refuses and ``json.loads`` takes (NaN, Infinity, lone surrogates,
    a byte-order mark, UTF-16 or UTF-32) or rejects in words of its own goes to ``json.loads``."""
    try:
        return _decode(raw)
    except msgspec.DecodeError:  # ValidationError too (an int of over 4300 digits, 1e400): its subclass
        return json.loads(raw)


def lines(path: str, loads: Callable = parse) -> Iterator[tuple[int, object]]:
    """(line number, parsed JSON value) for every non-blank line, one at a time."""
    handle = open_binary(path)
    number = 0
    try:
        while True:
            try:
                raw = handle.readline()
            except (OSError, EOFError) as error:  # a corrupt or truncated gzip stream
                raise TraceFileError(number + 1, f"cannot read the file: {error}") from None
            if not raw:
                return
            number += 1
            if raw.isspace():
                continue
            try:
                value = loads(raw)
            except ValueError as error:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
                raise TraceFileError(number, f"not JSON: {str(error).splitlines()[0]}") from None
            except RecursionError:  # the decoder gives up on arrays or objects nested thousands deep
                raise TraceFileError(number, "not JSON: nested too deeply to read") from None
            yield number, value
    finally:
        handle.close()


def read_header(number: int, value: object, model: str | None) -> tuple[str, dict]:
    """The model named by the header and the header itself; a TraceFileError when it is not a header."""
    if not isinstance(value, dict):
        raise TraceFileError(number, f"the header must be a JSON object with key 'model', got {type(value).__name__}")
    name = value.get("model")
    if name not in HEADER_KEYS:
        raise TraceFileError(number, f"header model={name!r}: expected one of {', '.join(HEADER_KEYS)}")
    if model is not None and model != name:
        raise TraceFileError(number, f"header model={name!r}, but --model {model}")
    keys = HEADER_KEYS[name]
    for key in keys:
        if key not in value:
            raise TraceFileError(number, f"header: missing key {key!r}; a {name} header has exactly {', '.join(keys)}")
    for key in value:
        if key not in keys:
            raise TraceFileError(number, f"header: unexpected key {key!r}; a {name} header has exactly {', '.join(keys)}")
    return name, value


def header_of(model: str, call: tuple) -> dict:
    """The header line of a trace of ``call``: (requests, config) or (jobs, slots, continuous)."""
    if model == "serving":
        requests, config = call
        return {"model": "serving", "config": dict(config), "requests": [dict(r) for r in requests]}
    jobs, slots, continuous = call
    return {"model": "chapter", "slots": slots, "continuous": continuous, "jobs": [dict(j) for j in jobs]}


def write(path: str, header: dict, entries, totals: dict | None = None) -> int:
    """Write a trace file (gzip when ``path`` ends in .gz); returns the number of entries written."""
    opener = gzip.open if path.endswith(".gz") else open
    count = 0
    with opener(path, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps(header, separators=(",", ":")) + "\n")
        for entry in entries:
            handle.write(json.dumps(entry, separators=(",", ":")) + "\n")
            count += 1
        if totals is not None:
            handle.write(json.dumps({"totals": totals}, separators=(",", ":")) + "\n")
    return count
