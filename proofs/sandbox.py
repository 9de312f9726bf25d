"""The one place where anything that may hang or crash runs: a killable child process.

What it establishes: whatever the code in the child does (raise anything, SystemExit
and KeyboardInterrupt included, call ``os._exit``, segfault, exhaust memory, hang in
C code where no signal handler ever runs, start grandchildren, return objects built to
run code when they are unpickled), the caller gets one ``Outcome`` by its deadline, and
nothing the child chose runs in the harness.  Every child leads a process group of its
own, and the whole group is killed with SIGKILL at the wall-clock deadline, so
grandchildren die with it; a child also dies with its parent (Linux's
PR_SET_PDEATHSIG), so a harness killed from outside leaves no hung child behind.  Its
address space is capped (RLIMIT_AS, the memory mapped when it starts plus
``memory_bytes``), and its stdout and stderr go to /dev/null (the target's output is
noise) or to a file that is read back into ``Outcome.output``.

What it assumes: Linux (``/proc``, PR_SET_PDEATHSIG, SCM_RIGHTS) and a target that does
not attack the harness through the operating system (signals to the harness's pid,
ptrace, its files): the sandbox contains accidents and the data a target returns, it is
not a security boundary against code that means harm.

The transport (``encode`` in the child, ``decode`` in the harness): everything a child
sends is plain data, encoded in the child as JSON text with a few tags and decoded in
the harness by ``json.loads``, so decoding executes nothing (no unpickling, no eval).
An exact dict, list, tuple, str, int (any size), float (nan and the infinities
included), bool or None arrives exactly (a tuple stays a tuple, an int key stays an
int); a dict, list or tuple subclass arrives as its base type (the contract accepts
those); anything else (an object, an int or float subclass such as numpy's ints or an
IntEnum, a set, bytes, a cycle, a container nested deeper than ``MAX_DEPTH``) arrives as
an ``Opaque``: an inert stand-in that carries the value's type name and a short repr,
both computed in the child (each repr within ``REPR_SECONDS``, at most ``MAX_REPRS`` per
message), and that the judges read as not well typed.  A message larger than
``MAX_VALUES`` values or ``MAX_BYTES`` bytes is not sent (the result "is not plain
data": ``well_typed``).  Aliasing is not kept (a list referred to twice arrives as two
equal lists).  A batch of results is one list, encoded the same way.  Writing a result
never counts against the call's limit: unless the result is small exact JSON (at most
``QUICK_VALUES`` values), the worker first tells the harness when the call ended, and the
harness then gives the answer ``ANSWER_SECONDS`` to arrive.  Measured by
benchmarks/bench_throughput.py --transport (docs/performance.md).

``drop_opaque_extras``: a result's extra keys (those the model's ``contract_part``
leaves out, in the result, a record or a trace entry) that hold an Opaque are dropped
before any judge sees the result, and counted in ``TargetProcess.dropped`` for the
report: the README allows extra keys and never compares them, so they are never a
failure; the contract's own keys keep their Opaque values, which ``well_typed`` reports.

Faces of the sandbox:

- ``TargetProcess``: the persistent worker of the search.  A zygote imports the target
  once (within ``load_seconds``, ``--load-timeout``, default ``DEFAULT_LOAD_SECONDS``),
  never in the harness's process, then forks one worker per fresh process on request;
  the worker serves many calls over a socket, each with its own limit (the same limit as
  ever: the fork happens before the call's limit starts), and a call that kills the
  worker or overruns is charged to it, the next call running in a fresh worker forked
  from the same zygote: a crash or a hang never costs a second import.  The zygote is
  forked from the harness; ``fresh(hash_seed)`` gives the same target in a second zygote,
  a freshly exec'd interpreter with ``PYTHONHASHSEED=hash_seed`` (one design for both:
  only how the zygote starts differs), for the determinism check
  (proofs.search.judge.judge_repeated_call).  A call also reports whether it modified its
  input (its plain-data encoding before and after the call).  ``submit`` / ``collect``
  split a call in two, so that the harness works (computes the reference, judges the
  previous outcome) while the worker runs it; the call's limit runs from the submit, and
  an answer that ended after it (collected late) is ``timed_out``, exactly as if the
  worker had been cut off there.  ``stream`` runs a list of calls so, one in flight at a
  time: each call still has its own limit and its own outcome, and the calls after one
  that killed or hung the worker run in a fresh worker.
- ``Child`` / ``run_once``: the one-shot runner.  It runs one function in a child
  with a deadline and returns its outcome, with every value the function handed to
  its ``report`` callback before the end (partial results survive a kill).  Its
  messages are plain data too (``transport="plain"``, strict: the function is the
  harness's own, and a result that is not exactly plain data is a ``harness_error``),
  since CrossHair's children load the target; only a ``--workers`` worker, which runs
  the harness's code alone (its target runs in a zygote of its own, whose answers
  reach it as plain data and which holds none of its descriptors), sends pickles
  (``transport="pickle"``).

The processes and what each holds: the harness; a zygote (its own group; the
harness's descriptors, inherited by the fork, pointed at /dev/null before the
target's import, so the target reaches no pipe, file or socket of the harness); a
worker (its own group, forked from the zygote, holding only its socket to the
harness and what the target's import opened).  The zygote's requests are pickled by
the harness and its answers are plain data; the harness makes each worker's socket
pair itself and hands the worker's end to the zygote (SCM_RIGHTS), so it never
receives a descriptor from a process that ran the target's code, and it checks that
a worker's pid is the zygote's child before it ever signals it.  The zygote dies with
the harness and each worker with its zygote (PR_SET_PDEATHSIG); ``shutdown`` (or the
``with`` block's end) kills the zygote's group.

The outcome kinds, and the verdict each engine gives them (the one table; also in
docs/verify.md):

============  =====================================  ======================  ====================  ========
kind          search call (TargetProcess)            stateful test           CrossHair contract    Z3 claim
============  =====================================  ======================  ====================  ===============
returned      judged by spec.check (an Opaque where  its finding, if any     the contract's own    the claim's own
              the contract needs plain data, or a                            outcome               status
              result too large to send:
              ``well_typed``; an extra key holding
              an Opaque: dropped, noted, never a
              failure)
raised        ``validation`` (ValueError on a valid  harness error (exit 2)  ``unknown``           ``unknown``
              call; on an invalid one anything but                           (engine failed)       (with traceback)
              ValueError), else ``termination``
timed_out     ``termination``, but only once it is   ``incomplete`` (the     ``incomplete``        ``unknown``
              confirmed at the full per-call limit   check did not finish)   (cut short)
              in a fresh process (a short probe's
              timeout is not a finding)
died          ``termination``                        ``incomplete``          ``unknown``           ``unknown``
harness_error exit 2, never a FAIL charged to the    exit 2                  exit 2                exit 2
              target (``HarnessError`` is raised)
============  =====================================  ======================  ====================  ===============

``diff``'s CrossHair search keeps the differing calls it reported before any end, and
``verify --workers`` treats a worker like the search itself (its checks are
``incomplete`` if it does not answer by the deadline plus the minimiser's time).

``harness_error`` means the sandbox itself, not the code in the child, failed: the
worker's side of the protocol raised, a one-shot function's result or report was not
plain data (that function is the harness's own code), or a child could not be
started.  A target that cannot be imported (it raises, dies, or does not finish within
the load limit) is a ``TargetError``: exit 2 before anything is checked.  A message a
worker could not have written (bytes put on its socket by the target itself) is read as
a result that is not plain data (``well_typed``), never run.

``InProcessTarget`` is the exception: the target called in the harness's own
process, for the hypothesis-crosshair backend, with none of these guarantees.

The time of a call is the target's own: right after importing the target the zygote
freezes its heap (``gc.freeze``, inherited by every worker), so the collector never
walks the harness's objects or the target's module during a call.  Before that, a full
collection inside a call scanned (and copied on write) the whole inherited heap, which
on a loaded machine took long enough to meet the per-call limit on a correct target.
Each TargetProcess keeps the calls its current worker has answered (``history``), so
a failure can be replayed on a fresh worker after the same calls.

``harness_collector`` is the parent's side of the same concern: the search judges
inside it (the harness's heap frozen, young objects collected every 50 000
allocations instead of 700), and every child forked meanwhile is given back the
collector's usual thresholds before anything else runs in it.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import json
import marshal
import math
import multiprocessing
import operator
import os
import pickle
import random
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import weakref
from functools import partial
from itertools import chain, compress
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as _wait_connections
from typing import Any, Callable, NamedTuple

from proofs.targets import Target, TargetError, load_callable, signature_problem

DEFAULT_CALL_SECONDS = 1.0
DEFAULT_MEMORY_BYTES = 2 * 2**30
ENGINE_MEMORY_BYTES = 6 * 2**30  # CrossHair and Z3 children: a solver needs room, but not the machine
DEFAULT_LOAD_SECONDS = 120.0  # the target's import in its zygote (--load-timeout); vLLM's takes 10 to 36 s
FRESH_INTERPRETERS = 2  # the fresh interpreters (other hash seeds) the determinism check compares with
DEFAULT_SHAPE = (([], 1, True), "schedule(jobs, slots, continuous)")  # the chapter's model: example arguments, how a call is written
OUTPUT_CHARS = 20_000  # of captured output, the last ones kept

RETURNED, RAISED, TIMED_OUT, DIED, HARNESS_ERROR = "returned", "raised", "timed_out", "died", "harness_error"
KINDS = (RETURNED, RAISED, TIMED_OUT, DIED, HARNESS_ERROR)
OUTPUTS = ("devnull", "capture")
TRANSPORTS = ("plain", "pickle")

# True in a sandbox child: the children it starts stay in its process group, so that
# killing that group (which its own parent does, at its deadline or its end) kills them too
_state = {"nested": False, "collector": None}  # collector: the thresholds harness_collector replaced


class HarnessError(RuntimeError):
    """The sandbox (not the code it ran) failed: schedcheck's own error, exit 2, never a finding."""


class Outcome(NamedTuple):
    """What one run in a child did: one of ``KINDS`` and what came with it."""

    kind: str  # one of KINDS
    result: Any = None  # the returned value (plain data; Opaque where the child had anything else), for "returned"
    error: str = ""  # "ValueError: ...", the exit status, the limit met, why a result could not be sent
    error_type: str = ""  # the exception's class name, for "raised"
    mutated: bool = False  # the call modified its input (TargetProcess)
    partial: tuple = ()  # the values reported before the end (Child)
    output: str = ""  # the child's captured stdout and stderr (output="capture")
    seconds: float = 0.0  # wall-clock time from start to outcome (Child)
    traceback: str = ""  # for "raised" and "harness_error", where it is known

    @property
    def sendable(self) -> bool:
        """A returned value that reached the caller (False: it could not be sent back as plain data)."""
        return self.kind == RETURNED and not self.error
    args_after: Any = None  # when mutated: the arguments as the call left them (None if they cannot be sent)
    dropped: tuple = ()  # (where, type name) of each extra key dropped because it held no plain data (TargetProcess)


# --- the transport: plain data only ---------------------------------------------------------------
#
# Everything a child sends the harness is encoded in the child as JSON text and decoded in
# the harness by ``json.loads``: nothing in the harness ever unpickles, evaluates or calls
# anything the child chose.  JSON alone would lose types, so the encoding tags, in a
# one-key object whose key starts with NUL, what JSON has no word for: a tuple, a dict
# whose keys are not all strings (or one of whose keys starts with NUL), an int too long
# for JSON's decimal form (hex), and anything else (``Opaque``).  An exact dict, list,
# str, int, float (nan and the infinities included) or bool, and None, travel as JSON.

_TUPLE, _PAIRS, _OPAQUE, _BIG_INT = "\x00t", "\x00d", "\x00o", "\x00i"
_EXACT, _TAGGED = b"J", b"T"  # a message's first byte: JSON alone, or JSON with tags
_SCALARS = frozenset((str, float, bool, type(None)))
_SCALARS_AND_INT = _SCALARS | {int}
_STR_ONLY = frozenset((str,))
_INT_ONLY = frozenset((int,))
_INT_LIMIT = 1 << 12_000  # |n| below it is written in decimal (under the 4300 digits json.loads accepts), else in hex
MAX_DEPTH = 100  # containers nested deeper arrive as Opaque
MAX_VALUES = 10_000_000  # containers and their items, per message; more is "too large" (a result this big is not one)
MAX_BYTES = 256 * 2**20  # of encoded text, per message
REPR_CHARS = 80  # of an Opaque's repr, computed in the child
TYPE_NAME_CHARS = 200  # of an Opaque's type name
REPR_SECONDS = 0.2  # each repr (and type name) computed in the child; a repr that loops longer is cut off
MAX_REPRS = 1_000  # per message; later Opaque values carry "..." (their reprs are not computed)
REPR_TOTAL_SECONDS = 1.0  # of reprs per message; past it, later Opaque values carry "..." too
ANSWER_SECONDS = 30.0  # for a worker to write its answer, once the call has ended within its limit


class NotPlain(ValueError):
    """A value that cannot be sent as plain data (strict encoding), is too large, or a message that cannot be read."""


class Opaque:
    """An inert stand-in, in the harness, for a value the child held that is not plain data:
    its type's qualified name and the first ``REPR_CHARS`` characters of its repr, both
    computed in the child.  Two are equal when both strings are; it equals nothing else."""

    __slots__ = ("type_name", "text")

    def __init__(self, type_name: str, text: str) -> None:
        self.type_name = type_name
        self.text = text

    def __repr__(self) -> str:  # short: a report cuts a value's repr to a few dozen characters
        return f"<{self.type_name.rpartition('.')[2]}: {self.text}>"

    def __eq__(self, other) -> bool:
        return type(other) is Opaque and self.type_name == other.type_name and self.text == other.text

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((Opaque, self.type_name, self.text))

    def __reduce__(self):  # a harness class: pickled by the harness's own workers (Child transport "pickle")
        return Opaque, (self.type_name, self.text)


class _ReprTimeout(BaseException):
    """Raised by the timer that bounds a repr computed in the child."""


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise _ReprTimeout in the block after ``seconds`` (main thread only; elsewhere no limit:
    the child's own deadline still holds)."""
    try:
        previous = signal.signal(signal.SIGALRM, _alarm)
    except ValueError:  # not the main thread
        yield
        return
    old_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if old_timer[0]:  # the code's own timer, resumed
            signal.setitimer(signal.ITIMER_REAL, *old_timer)


def _alarm(signum, frame):
    raise _ReprTimeout


def _exact_str(text) -> str:
    """An exact str of at most REPR_CHARS characters (a str subclass's own methods never run)."""
    if not isinstance(text, str):
        return "?"
    cut = str.__getitem__(text, slice(0, REPR_CHARS + 1))
    return cut if len(cut) <= REPR_CHARS else cut[: REPR_CHARS - 3] + "..."


def _describe_opaque(value, budget: list) -> list:
    """[type name, short repr] of a value that is not plain data, computed here (in the child), bounded:
    ``budget`` is [reprs left, the monotonic time after which no repr is computed]."""
    kind = type(value)
    name = _type_name(kind)
    if budget[0] <= 0 or time.monotonic() >= budget[1]:
        return [name, "..."]
    budget[0] -= 1
    try:
        with _time_limit(max(0.001, min(REPR_SECONDS, budget[1] - time.monotonic()))):
            text = _exact_str(repr(value))
    except _ReprTimeout:
        return [name, f"<its repr did not return within {REPR_SECONDS:g} s>"]
    except BaseException as error:  # a repr may raise anything
        return [name, f"<its repr raised {type.__dict__['__name__'].__get__(type(error))}>"]
    return [name, text]


def _type_name(kind: type) -> str:
    """``module.QualifiedName`` of a type (``builtins.`` left out; at most TYPE_NAME_CHARS, its end
    kept), read through ``type``'s own descriptors: a metaclass's properties never run."""
    name = type.__dict__["__qualname__"].__get__(kind)
    module = type.__dict__["__module__"].__get__(kind)
    name = str.__getitem__(name, slice(None)) if isinstance(name, str) else "?"
    if isinstance(module, str) and module != "builtins":
        name = str.__add__(str.__getitem__(module, slice(None)), "." + name)
    return name if len(name) <= TYPE_NAME_CHARS else "..." + name[3 - TYPE_NAME_CHARS:]


_JSON_KINDS = frozenset((dict, list, str, float, bool, type(None), int))
_IS_INT, _IS_DICT, _IS_LIST = (partial(operator.is_, kind) for kind in (int, dict, list))


def _json_exact(root, limit: int = MAX_VALUES) -> int:
    """How many values ``root`` holds (itself included) when ``json.dumps(root)`` is read back exactly
    by ``json.loads`` alone, else 0 (0 too past ``limit`` values, where the walk stops): only exact dicts
    whose keys are exact str not starting with NUL, lists, str, float, bool, None and ints within
    ``_INT_LIMIT``, within MAX_DEPTH levels and MAX_VALUES values.  Checked a level at a time in C
    loops (``map``, ``chain``, ``compress``): the common result costs a few passes, no Python call
    per value.  No key is hashed and no method of the values runs."""
    level, seen = [root], 0
    for _ in range(MAX_DEPTH):
        if not level:
            return seen
        seen += len(level)
        kinds = set(map(type, level))
        if seen > limit or not kinds <= _JSON_KINDS:
            return 0
        following: list = []
        if int in kinds:
            ints = list(compress(level, map(_IS_INT, map(type, level))))
            if min(ints) <= -_INT_LIMIT or max(ints) >= _INT_LIMIT:
                return 0
        if dict in kinds:
            dicts = list(compress(level, map(_IS_DICT, map(type, level))))
            keys = list(chain.from_iterable(dicts))
            if keys and (not _STR_ONLY.issuperset(map(type, keys)) or min(keys)[:1] in ("\x00", "")):
                return 0  # "" too: a NUL key may follow it (the tagged path sorts that out)
            following.extend(chain.from_iterable(map(dict.values, dicts)))
        if list in kinds:
            following.extend(chain.from_iterable(compress(level, map(_IS_LIST, map(type, level)))))
        level = following
    return 0  # deeper than MAX_DEPTH, or a cycle: the tagged path says which


def _plain_tree(value, strict: bool):
    """``value`` as a tree that ``json.dumps`` writes and ``_untag`` reads back exactly (tagged where
    JSON has no word for it); containers left unchanged are reused.  Strict: raise NotPlain at the
    first value that is not exactly plain data (a subclass included) instead of an Opaque."""
    values = [MAX_VALUES]
    reprs = [MAX_REPRS, time.monotonic() + REPR_TOTAL_SECONDS]
    path: set = set()  # ids of the containers being encoded: a cycle becomes an Opaque

    def opaque(item, why: str = ""):
        if strict:
            raise NotPlain(f"a {_type_name(type(item))} is not plain data" + (f" ({why})" if why else ""))
        return {_OPAQUE: _describe_opaque(item, reprs) if not why else [_type_name(type(item)), why]}

    def encode(item, depth: int):
        kind = type(item)
        if kind is str or kind is float or kind is bool or item is None:
            return item
        if kind is int:
            return item if -_INT_LIMIT < item < _INT_LIMIT else {_BIG_INT: hex(item)}
        original = item
        if kind is not dict and kind is not list and kind is not tuple:
            try:
                if issubclass(kind, dict):
                    item, kind = dict.copy(item), dict
                elif issubclass(kind, list):
                    item, kind = list.copy(item), list
                elif issubclass(kind, tuple):
                    item, kind = tuple.__getitem__(item, slice(None)), tuple
                else:
                    return opaque(item)
            except Exception:  # a container the interpreter itself refuses to copy
                return opaque(original)
            if strict:
                raise NotPlain(f"a {_type_name(type(original))} is not plain data "
                               f"(a subclass of {kind.__name__})")
        values[0] -= len(item) + 1
        if values[0] < 0:
            raise NotPlain(f"more than {MAX_VALUES} values")
        if depth >= MAX_DEPTH:
            return opaque(original, f"nested deeper than {MAX_DEPTH} levels")
        key = id(original)
        if key in path:
            return opaque(original, "a cycle: it contains itself")
        path.add(key)
        try:
            if kind is dict:
                return encode_dict(item, depth + 1)
            inner = encode_items(item, depth + 1)
            return inner if kind is list else {_TUPLE: inner}
        finally:
            path.discard(key)

    def encode_items(items, depth: int):
        kinds = set(map(type, items))
        if kinds <= _SCALARS:
            return items
        if kinds <= _INT_ONLY:
            if -_INT_LIMIT < min(items) and max(items) < _INT_LIMIT:
                return items
        elif kinds <= _SCALARS_AND_INT:
            if all(-_INT_LIMIT < item < _INT_LIMIT for item in items if type(item) is int):
                return items
        out = [encode(item, depth) for item in items]
        return out if any(new is not old for new, old in zip(out, items)) else items

    def encode_dict(mapping: dict, depth: int):
        if _STR_ONLY.issuperset(map(type, mapping)) and not _nul_key(mapping):
            kinds = set(map(type, mapping.values()))
            if kinds <= _SCALARS or (kinds <= _SCALARS_AND_INT and all(
                    -_INT_LIMIT < item < _INT_LIMIT for item in mapping.values() if type(item) is int)):
                return mapping
            out = {key: encode(item, depth) for key, item in mapping.items()}
            return out if any(out[key] is not item for key, item in mapping.items()) else mapping
        pairs, seen = [], set()
        for key, item in mapping.items():
            encoded = encode(key, depth)
            if type(encoded) is dict and _OPAQUE in encoded:  # two opaque keys alike stay two keys
                described = encoded[_OPAQUE]
                while tuple(described) in seen:
                    described = [described[0], described[1] + " (another)"]
                seen.add(tuple(described))
                encoded = {_OPAQUE: described}
            pairs.append([encoded, encode(item, depth)])
        return {_PAIRS: pairs}

    return encode(value, 0)


def _nul_key(mapping: dict) -> bool:
    """True when one of the (str) keys starts with NUL, the tags' prefix."""
    if not mapping:
        return False
    first = min(mapping)
    if first[:1] == "\x00":
        return True
    return first == "" and any(key[:1] == "\x00" for key in mapping)


def _refuse(item):
    raise NotPlain(f"a {type(item).__name__} appeared while the value was being written (changed by a thread?)")


# built once: json.dumps builds an encoder per call when given options.  No cycle reaches it: the
# exact path bounds its levels, the tagged one replaces a cycle by an Opaque.
_JSON = json.JSONEncoder(ensure_ascii=True, allow_nan=True, separators=(",", ":"), default=_refuse,
                         check_circular=False)


def encode(value, strict: bool = False, exact: int | None = None) -> bytes:
    """``value`` as plain-data bytes for the harness (done in the child).  Exact dict, list, tuple,
    str, int, float, bool and None survive exactly (a tuple stays a tuple, a key stays an int);
    a dict, list or tuple subclass arrives as its base type; anything else (an object, an int or
    float subclass, a set, bytes, a cycle, a container nested deeper than ``MAX_DEPTH``) as an
    ``Opaque``.  ``strict``: raise NotPlain instead, for anything not exactly plain data.  Raises
    NotPlain for a value of more than ``MAX_VALUES`` values or ``MAX_BYTES`` bytes.  A list of
    results (a batch) is one value like any other.  ``exact``: ``_json_exact(value)``, if known."""
    exact = _json_exact(value) if exact is None else exact
    tree = value if exact else _plain_tree(value, strict)
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # every int written here is below the harness's limit (_INT_LIMIT)
    try:
        text = _JSON.encode(tree)
    except RecursionError:
        raise NotPlain("nested too deeply to be written") from None
    finally:
        sys.set_int_max_str_digits(limit)
    if len(text) > MAX_BYTES:
        raise NotPlain(f"more than {MAX_BYTES} bytes of plain data")
    return (_EXACT if exact else _TAGGED) + text.encode("ascii")


def decode(data: bytes) -> tuple[Any, int]:
    """The value ``encode`` wrote, and how many Opaque values it holds.  Executes nothing the bytes
    name (``json.loads`` and the tags below, nothing else); raises NotPlain for anything ``encode``
    could not have written."""
    opaque = [0]

    def untag(mapping: dict):
        if len(mapping) != 1:
            return mapping
        for key, inner in mapping.items():
            if key[:1] != "\x00":
                return mapping
            if key == _TUPLE and type(inner) is list:
                return tuple(inner)
            if key == _PAIRS and type(inner) is list:
                out = {}
                for pair in inner:
                    if type(pair) is not list or len(pair) != 2:
                        raise NotPlain("a malformed pair of keys and values")
                    out[pair[0]] = pair[1]  # TypeError for an unhashable key: caught below
                return out
            if key == _OPAQUE and type(inner) is list and len(inner) == 2 and _STR_ONLY.issuperset(map(type, inner)):
                opaque[0] += 1
                return Opaque(inner[0], inner[1])
            if key == _BIG_INT and type(inner) is str:
                return int(inner, 16)
            raise NotPlain(f"an unknown tag {key!r}")
        return mapping

    try:
        kind, text = data[:1], data[1:].decode("ascii")
        if kind == _EXACT:  # no tag: json.loads alone, in C
            return json.loads(text), 0
        if kind != _TAGGED:
            raise NotPlain(f"a message of an unknown kind {kind!r}")
        return json.loads(text, object_hook=untag), opaque[0]
    except NotPlain:
        raise
    except (ValueError, TypeError, RecursionError, MemoryError) as error:
        raise NotPlain(f"not plain data: {type(error).__name__}: {_describe(error)}") from None


def holds_opaque(value) -> Opaque | None:
    """The first Opaque in ``value`` (a decoded value: plain containers), keys included, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is Opaque:
            return item
        if kind is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
    return None


def drop_opaque_extras(result, contract_part: Callable) -> tuple[Any, tuple]:
    """``result`` (decoded, so fresh: changed in place) without the extra keys that hold an Opaque,
    and ``(where, type name)`` of each one dropped.  A key is extra where ``contract_part(result)``
    (the model's: the part of a result the contract fixes) leaves it out, in the result, a record
    or a trace entry; the contract's own keys are never dropped, so a judge still sees an Opaque
    where the contract needs plain data (``well_typed``), and never sees one anywhere else."""
    try:
        part = contract_part(result)
    except Exception:  # not the contract's shape: nothing is extra, well_typed says so
        return result, ()
    dropped: list = []
    _drop(result, part, "result", dropped)
    return result, tuple(dict.fromkeys(dropped))  # once per key, however many entries held it


def _drop(full, part, where: str, dropped: list) -> None:
    if full is part:
        return
    if type(full) is dict and type(part) is dict:
        for key in list(full):
            if key in part:
                _drop(full[key], part[key], f"{where}[{key!r}]", dropped)
                continue
            found = key if type(key) is Opaque else holds_opaque(full[key])
            if found is not None:
                del full[key]
                dropped.append((f"{where}[{key!r}]", found.type_name))
    elif type(full) in (list, tuple) and type(part) in (list, tuple) and len(full) == len(part):
        for inner, inner_part in zip(full, part):
            _drop(inner, inner_part, f"{where}[*]", dropped)


# --- the harness's own collector ----------------------------------------------------------------

HARNESS_GC_THRESHOLD = 50_000  # young objects between two collections while the harness judges (Python's default: 700)


@contextlib.contextmanager
def harness_collector():
    """Run the block with the harness's heap frozen (``gc.freeze``) and the young generation
    collected every ``HARNESS_GC_THRESHOLD`` allocations, then restore the collector as it was.

    The oracle allocates a state per tick; with Python's default threshold the collector ran
    every 700 of them and took 15 to 20% of the parent's time (measured: docs/performance.md).
    A child forked meanwhile gets the collector as it was before (``_child_collector``): the
    target's code runs under the interpreter's usual settings."""
    if _state["collector"] is not None:  # nested: the outer block has it already
        yield
        return
    saved = gc.get_threshold()
    _state["collector"] = saved
    gc.freeze()
    gc.set_threshold(HARNESS_GC_THRESHOLD, *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()
        _state["collector"] = None


def _child_collector() -> None:
    """In a fresh child: the collector's thresholds as they were outside ``harness_collector``."""
    if _state["collector"] is not None:
        gc.set_threshold(*_state["collector"])
        _state["collector"] = None


# --- the process group, the memory cap, the output, the inherited descriptors -------------------


def _mapped_bytes() -> int:
    """What this process maps now (Linux: /proc), 0 where that cannot be read."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def _memory_limit(memory_bytes: int | None) -> int | None:
    """The RLIMIT_AS for a child forked now: what this process maps plus ``memory_bytes``."""
    if memory_bytes is None:
        return None
    return _mapped_bytes() + memory_bytes


def _cap_memory(limit: int | None, hard: bool = True) -> None:
    """RLIMIT_AS at ``limit`` (soft and hard; only soft with ``hard=False``, so that the processes
    this one forks can each be given their own cap above it), or nothing if that is refused."""
    if limit is None:
        return
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit if hard else resource.getrlimit(resource.RLIMIT_AS)[1]))
    except (ValueError, OSError):
        pass  # a limit below what is mapped already, or not permitted: run without it


def _lead_group() -> None:
    """Lead a process group of its own, unless this process runs inside a sandbox child already."""
    if not _state["nested"]:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass  # the parent has already made it the leader
    _state["nested"] = True


def _quiet_output(output_fd: int | None) -> None:
    """stdin from /dev/null; stdout and stderr to ``output_fd`` (or /dev/null), Python's streams too."""
    fd = output_fd if output_fd is not None else os.open(os.devnull, os.O_RDWR)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for target_fd in (1, 2):
        os.dup2(fd, target_fd)
    # Python-level streams too: the harness's own may be replaced (pytest's capture) or buffered
    sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")
    if faulthandler.is_enabled():  # its file is the harness's stderr: a crash report goes to ours
        faulthandler.enable(file=sys.stderr)


def _enter_child(memory_limit: int | None, output_fd: int | None) -> None:
    """In a fresh child: lead a process group of its own (unless nested), die with its parent, cap memory, redirect output."""
    _child_collector()
    parent = multiprocessing.parent_process()
    _die_with_parent(parent.pid if parent is not None else None)
    _lead_group()
    _quiet_output(output_fd)
    _cap_memory(memory_limit)


def _die_with_parent(parent_pid: int | None) -> None:
    """Ask the kernel (Linux) to SIGKILL this child when its parent dies, so that a harness
    killed from outside leaves no hung child behind; elsewhere, do without."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the request: nobody waits for this child


def _cover_inherited_fds(keep) -> None:
    """Point every descriptor this process inherited, except 0, 1, 2 and ``keep``, at /dev/null.

    A child forked from the harness holds copies of the harness's descriptors: the pipes of
    its other children, its database files and sockets.  Code of the target must reach none
    of them (a message written on another child's pipe would be read by the harness as that
    child's).  The numbers stay taken (by /dev/null), so a harness object that closes its
    descriptor later never closes one the target opened meanwhile."""
    try:
        numbers = [int(name) for name in os.listdir("/proc/self/fd")]
    except (OSError, ValueError):
        return  # no /proc: keep them
    null = os.open(os.devnull, os.O_RDWR)
    keep = {0, 1, 2, null, *keep}
    for number in numbers:
        if number in keep:
            continue
        try:
            os.fstat(number)  # the listing's own descriptor is closed by now
            os.dup2(null, number)
        except OSError:
            continue
    os.close(null)


def _adopt(pid: int) -> None:
    """In the parent, right after the fork: make the child its group's leader (both sides do, so no race)."""
    if _state["nested"]:
        return  # a child of a sandbox child stays in that child's group
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # it has done so itself, or it has exited already


def _kill_pid_group(pid: int, nested: bool) -> None:
    """SIGKILL ``pid``'s process group (grandchildren too; ``pid`` alone when nested: the group is
    its parent's), then ``pid`` itself.  Never waits."""
    if not nested:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(process) -> None:
    """SIGKILL the child's whole process group (grandchildren too), then reap the child."""
    if process is None:
        return
    if not _state["nested"]:  # a nested child shares our group: it is killed alone (the group dies with ours)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        if process.exitcode is None:
            os.kill(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.join(5.0)


def _reap(pid: int, seconds: float) -> int | None:
    """Wait up to ``seconds`` for this process's child ``pid``; its exit code as multiprocessing gives it (-N: killed by signal N), or None."""
    stop = time.monotonic() + seconds
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= stop:
            return None
        time.sleep(0.005)


def _exit_status(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _describe(error: BaseException) -> str:
    try:
        text = str(error)
    except BaseException:  # an exception whose __str__ raises
        text = "<unprintable>"
    if not isinstance(text, str):
        return "<unprintable>"
    text = str.__getitem__(text, slice(None))
    return text if len(text) <= 300 else text[:297] + "..."


def _format_traceback(error: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(type(error), error, error.__traceback__))[-OUTPUT_CHARS:]
    except BaseException:  # a hostile exception: its class name will do
        return type(error).__name__


def _read_tail(handle) -> str:
    if handle is None:
        return ""
    try:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - 4 * OUTPUT_CHARS))
        return handle.read().decode("utf-8", "replace")[-OUTPUT_CHARS:]
    except (OSError, ValueError):
        return ""


# --- hash seeds ------------------------------------------------------------------------------------

_HARNESS_SEED_TEXT = os.environ.get("PYTHONHASHSEED")  # read at import, before any code may change os.environ
MAX_HASH_SEED = 2**32 - 1


def harness_hash_seed() -> int | None:
    """The harness's own PYTHONHASHSEED when it is fixed (0: hash randomization off), else None (a random seed)."""
    if not sys.flags.hash_randomization:
        return 0
    text = _HARNESS_SEED_TEXT
    if text and text.isdigit() and 0 < int(text) <= MAX_HASH_SEED:
        return int(text)
    return None


def fresh_hash_seeds(seed: int | None = None, count: int = FRESH_INTERPRETERS, skip=()) -> tuple:
    """``count`` hash seeds (1 .. 2**32-1) other than the harness's and ``skip``: with a run's
    ``seed`` (``--seed``), the next ones from ``count * seed + 1`` (seed 0: 1, 2, ...), else random."""
    start = count * seed if seed is not None else random.SystemRandom().randrange(MAX_HASH_SEED)
    avoid = {harness_hash_seed(), *skip}
    seeds: list = []
    candidate = start
    while len(seeds) < count:
        value = 1 + candidate % (MAX_HASH_SEED - 1)
        if value not in avoid and value not in seeds:
            seeds.append(value)
        candidate += 1
    return tuple(seeds)


# --- the zygote and its workers (in the children) -------------------------------------------------
#
# A zygote imports the target once, then forks one worker per request: a worker is the
# zygote as it was just after the import, so a fresh process (after a crash, a hang, or on
# purpose) never imports again.  The harness holds one socket to the zygote (requests
# pickled by the harness, answers in plain data) and one to each worker (calls pickled by
# the harness, answers in plain data); it makes each worker's socket pair itself and hands
# the worker's end to the zygote (SCM_RIGHTS), so it never receives a descriptor from a
# process that ran the target's code.

CONTROL_BYTES = 1 << 20  # of one control message (a request, an answer, the exec'd zygote's start-up data)
_BOOT = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
         "from proofs.sandbox import _exec_zygote; _exec_zygote(int(sys.argv[2]), int(sys.argv[3]))")
_PRELOAD = ("proofs.search.strategies",)  # harness modules whose classes a call may carry (JobList, IntSubclass)


_NOTICE = b"E"  # a worker's first message about a call: "it ended at" (then the answer, once written)
_worker = {"connection": None}  # in a worker: where ``_answer`` sends the notice


QUICK_VALUES = 20_000  # a result of this many values or fewer, exact JSON, is written at once (about 2 ms)


def _announce(result, ended: float) -> int:
    """Unless ``result`` is small exact JSON (found out within QUICK_VALUES values), tell the harness
    at once when the call ended (``_NOTICE``): writing a large or unusual result then never counts
    against the call's limit (the harness waits ``ANSWER_SECONDS`` more for the answer).  Returns
    ``_json_exact(result, QUICK_VALUES)``."""
    quick = _json_exact(result, QUICK_VALUES)
    connection = _worker["connection"]
    if connection is not None and not quick:
        connection.send_bytes(_NOTICE + repr(ended).encode("ascii"))
    return quick


def _answer(function, request) -> bytes:
    """One call of the target, as the plain-data message that answers it (ending with when the call
    ended, on the system-wide monotonic clock, so the parent can tell whether it met its limit)."""
    before = _snapshot(request)
    try:
        result = function(*request)
    except BaseException as error:  # the target may raise anything, SystemExit included
        ended = time.monotonic()
        mutated = _snapshot(request) != before
        return encode([RAISED, type.__dict__["__name__"].__get__(type(error)), _describe(error), mutated,
                       _after(mutated, request), ended])
    ended = time.monotonic()
    quick = _announce(result, ended)
    mutated = _snapshot(request) != before
    try:  # an exact result in an answer with no arguments to send back: the answer is exact too
        return encode([RETURNED, result, mutated, "", _after(mutated, request), ended],
                      exact=quick + 6 if quick and not mutated else None)
    except NotPlain as problem:  # too large to send, or written while a thread of the target changed it
        return encode([RETURNED, None, mutated, f"the result is not plain data: {problem}", None, ended])


def _snapshot(request) -> bytes | None:
    """The arguments as bytes, to tell whether a call modified them (never sent, never loaded): by
    ``marshal`` (version 0: no references, no interning, so the bytes depend on the values alone)
    when they are exact builtin values, as the harness sends them; else their plain-data encoding (a
    subclass, or an object the target put in them); None if too large to tell."""
    try:
        return b"m" + marshal.dumps(request, 0)
    except ValueError:
        pass
    try:
        return b"e" + encode(list(request))
    except NotPlain:
        return None


def _after(mutated: bool, request: tuple):
    """The arguments as a call left them, when it changed them (sent as plain data, Opaque where they are not); else None."""
    return request if mutated else None


def _worker_loop(connection, function) -> None:
    """A worker's loop: answer calls until the socket closes."""
    _worker["connection"] = connection
    while True:
        try:
            request = connection.recv()  # pickled by the harness
        except (EOFError, OSError):
            return
        try:
            connection.send_bytes(_answer(function, request))
        except BaseException as error:  # the sandbox's own side failed: say so, never guess
            try:
                connection.send_bytes(encode([HARNESS_ERROR, f"the worker failed: {type(error).__name__}: "
                                                             f"{_describe(error)}", _format_traceback(error)]))
            except BaseException:
                return  # the socket itself is gone: the parent sees a death


def _reply(control: socket.socket, message: list) -> None:
    try:
        control.send(encode(message))
    except (OSError, NotPlain):
        os._exit(0)  # the harness is gone (or the message cannot be written): nothing to tell


def _zygote_main(control: socket.socket, target: Target, shape, adapter, memory_bytes, groups: bool) -> None:
    """The zygote, once entered (its group, output, descriptors and memory set): import the target, say
    so, then fork a worker per request until the harness goes away.  Never returns."""
    try:
        function = load_callable(target)
    except TargetError as error:
        _reply(control, ["load_error", str(error)[:4000]])
        os._exit(0)
    problem = signature_problem(function, *(shape or DEFAULT_SHAPE))
    if adapter is not None and problem is None:
        function = adapter(function)  # e.g. an online factory, driven by proofs.online.driver in the worker
    gc.freeze()  # the harness's heap (and the target's module) is never collected during a call
    _reply(control, ["ready", problem])
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, CONTROL_BYTES, 1)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the harness closed its end: the workers die with this process
        request = pickle.loads(data)  # written by the harness
        for pid in request.get("reap", ()):
            _reap(pid, 0.0)
        if request["op"] == "fork" and fds:
            pid = _fork_worker(fds[0], function, memory_bytes, control, groups)
            os.close(fds[0])
            _reply(control, ["forked", pid])
        elif request["op"] == "status":
            _reply(control, ["status", _reap(request["pid"], request["seconds"])])
        else:
            for fd in fds:
                os.close(fd)
            _reply(control, ["unknown", request["op"]])


def _fork_worker(fd: int, function, memory_bytes, control: socket.socket, groups: bool) -> int:
    """Fork one worker that answers calls on ``fd``; its pid (the zygote's side)."""
    zygote = os.getpid()
    pid = os.fork()
    if pid:
        if groups:
            try:
                os.setpgid(pid, pid)  # before the harness learns the pid: it kills this group
            except OSError:
                pass
        return pid
    try:
        control.close()  # a worker never reaches the zygote's requests
        if groups:
            try:
                os.setpgid(0, 0)
            except OSError:
                pass
        _die_with_parent(zygote)
        _cap_memory(_memory_limit(memory_bytes))
        connection = Connection(fd)
        connection.send_bytes(encode(["ready"]))
        _worker_loop(connection, function)
    except BaseException:
        pass
    finally:
        os._exit(0)


def _forked_zygote(control: socket.socket, harness: int, target: Target, shape, adapter, memory_bytes,
                   groups: bool) -> None:
    """The forked zygote's start (in the child of the harness's fork).  Never returns."""
    try:
        _child_collector()
        _die_with_parent(harness)
        if groups:
            try:
                os.setpgid(0, 0)
            except OSError:
                pass
        _state["nested"] = True
        _quiet_output(None)
        _cover_inherited_fds({control.fileno()})
        _cap_memory(_memory_limit(memory_bytes), hard=False)
        _zygote_main(control, target, shape, adapter, memory_bytes, groups)
    except BaseException:
        pass
    finally:
        os._exit(0)


def _exec_zygote(fd: int, harness: int) -> None:
    """The exec'd zygote's start (a fresh interpreter, ``_BOOT``): its start-up data from the harness, then the zygote."""
    try:
        _die_with_parent(harness)
        control = socket.socket(fileno=fd)
        data = control.recv(CONTROL_BYTES)
        if not data:
            os._exit(0)
        init = pickle.loads(data)  # written by the harness
        for name in init["preload"]:
            try:
                __import__(name)
            except Exception:  # the call's own unpickling will say what is missing
                pass
        _state["nested"] = True
        _quiet_output(None)
        _cap_memory(_memory_limit(init["memory_bytes"]), hard=False)
        _zygote_main(control, Target(*init["target"]), init["shape"], init["adapter"], init["memory_bytes"],
                     init["groups"])
    except BaseException:
        pass
    finally:
        os._exit(0)


# --- the zygote (the harness's side) ---------------------------------------------------------------


class _Gone(Exception):
    """The zygote did not answer a request: it died, hung, or answered nonsense."""


def _parent_of(pid: int) -> int | None:
    """The parent of ``pid`` (Linux: /proc), None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _end_zygote(pid: int, groups: bool, popen, owner: int) -> int | None:
    """Kill a zygote's group and reap it (the finaliser of a _Zygote the harness forgot to end); its exit code."""
    if os.getpid() != owner:
        return None  # a forked copy of the harness: the zygote is not its to end
    _kill_pid_group(pid, not groups)
    if popen is not None:
        try:
            return popen.wait(5.0)
        except subprocess.TimeoutExpired:
            return None
    return _reap(pid, 5.0)


class _Zygote:
    """The harness's handle on one zygote: forked from the harness (``hash_seed`` None: it shares the
    harness's string hashes) or a freshly exec'd interpreter with ``PYTHONHASHSEED=hash_seed``."""

    def __init__(self, target: Target, shape, adapter, memory_bytes, load_seconds: float, hash_seed: int | None):
        self.target, self.shape, self.adapter = target, shape, adapter
        self.memory_bytes, self.load_seconds, self.hash_seed = memory_bytes, load_seconds, hash_seed
        self.pid = None
        self.control: socket.socket | None = None
        self.problem = None  # why the target cannot be called with the model's shape, once ready
        self.ready = False
        self.deadline = 0.0
        self.reap: list = []  # workers the harness killed, for the zygote to reap with its next request
        self.groups = not _state["nested"]
        self._popen = None
        self._finalizer = None

    def launch(self) -> None:
        """Start the zygote (it imports the target); ``wait_ready`` waits for the import."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        harness = os.getpid()
        if self.hash_seed is None:
            pid = os.fork()
            if pid == 0:
                ours.close()
                _forked_zygote(theirs, harness, self.target, self.shape, self.adapter, self.memory_bytes, self.groups)
            if self.groups:
                _adopt(pid)
        else:
            try:
                self._popen = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, json.dumps([str(entry) for entry in sys.path]), str(theirs.fileno()), str(harness)],
                    pass_fds=(theirs.fileno(),), env=dict(os.environ, PYTHONHASHSEED=str(self.hash_seed)),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    process_group=0 if self.groups else None,
                )
            except OSError as error:
                ours.close()
                theirs.close()
                raise HarnessError(f"the fresh interpreter could not be started: {error}") from None
            pid = self._popen.pid
            adapter = self.adapter
            ours.send(pickle.dumps({
                "target": tuple(self.target), "shape": self.shape, "adapter": adapter,
                "memory_bytes": self.memory_bytes, "groups": self.groups,
                "preload": [name for name in _PRELOAD if name in sys.modules],
            }))
        theirs.close()
        self.pid, self.control = pid, ours
        self.deadline = time.monotonic() + self.load_seconds
        self._finalizer = weakref.finalize(self, _end_zygote, pid, self.groups, self._popen, harness)

    def _readable(self, seconds: float) -> bool:
        return bool(_wait_connections([self.control], max(0.0, seconds)))  # poll(2): any descriptor number

    def _answer(self):
        """The zygote's answer (a list), None at its end, ["malformed"] for anything it could not have sent."""
        try:
            data = self.control.recv(CONTROL_BYTES)
        except OSError:
            return None
        if not data:
            return None
        try:
            answer, _ = decode(data)
        except NotPlain:
            return ["malformed"]
        return answer if type(answer) is list and answer and type(answer[0]) is str else ["malformed"]

    def wait_ready(self, until: float | None = None) -> bool:
        """Wait for the import, until the load limit, or ``until`` (a monotonic time) if that comes first:
        True once imported, False at ``until`` (the import goes on).  Raise TargetError if the import
        fails, dies or does not finish within the load limit."""
        if self.ready:
            return True
        text = self.target.text
        end = self.deadline if until is None else min(self.deadline, until)
        if not self._readable(end - time.monotonic()):
            if end < self.deadline:
                return False
            self.kill()
            raise TargetError(f"target {text!r}: import did not finish within {self.load_seconds:g} s "
                              f"(--load-timeout)")
        answer = self._answer()
        if answer is None:
            code = self.kill(died=True)
            raise TargetError(f"target {text!r}: the process died while importing it ({_exit_status(code)})")
        if answer[0] == "load_error" and len(answer) == 2 and type(answer[1]) is str:
            self.kill()
            raise TargetError(answer[1])
        if answer[0] != "ready" or len(answer) != 2 or not (answer[1] is None or type(answer[1]) is str):
            self.kill()
            raise TargetError(f"target {text!r}: its process answered the import with {_short(answer)}")
        self.problem, self.ready = answer[1], True
        return True

    def fork(self) -> tuple[int, Connection]:
        """A fresh worker: its pid and the harness's end of its socket.  Raises _Gone."""
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(self.control, [pickle.dumps({"op": "fork", "reap": self.reap})], [theirs.fileno()])
        except OSError as error:
            ours.close()
            raise _Gone(f"the request could not be sent: {error}") from None
        finally:
            theirs.close()
        self.reap = []
        if not self._readable(self.load_seconds):
            ours.close()
            raise _Gone(f"it did not answer within {self.load_seconds:g} s")
        answer = self._answer()
        pid = answer[1] if answer is not None and answer[0] == "forked" and len(answer) == 2 else None
        # the pid comes from a process that ran the target's code: the harness kills it later, so it
        # must be the zygote's own child, not any process the harness could reach
        if type(pid) is not int or pid <= 1 or _parent_of(pid) not in (self.pid, None):
            ours.close()
            raise _Gone(f"it answered {_short(answer)}")
        return pid, Connection(ours.detach())

    def status(self, pid: int, seconds: float = 1.0) -> int | None:
        """A worker's exit code, as the zygote (its parent) reaps it within ``seconds``; None if unknown."""
        try:
            self.control.send(pickle.dumps({"op": "status", "pid": pid, "seconds": seconds, "reap": self.reap}))
        except OSError:
            return None
        self.reap = []
        if not self._readable(seconds + 1.0):
            return None
        answer = self._answer()
        if answer is None or answer[0] != "status" or len(answer) != 2:
            return None
        code = answer[1]
        return code if type(code) is int and -256 < code < 256 else None

    def kill(self, died: bool = False) -> int | None:
        """Kill the zygote's group (its workers die with it: PR_SET_PDEATHSIG) and reap it; its exit code
        (``died``: it ended on its own, and that status is the one wanted)."""
        if self.control is not None:
            self.control.close()
            self.control = None
        self.ready = False
        if self._finalizer is None or not self._finalizer.alive:
            return None
        if died:
            if self._popen is not None:
                try:
                    code = self._popen.wait(1.0)
                except subprocess.TimeoutExpired:
                    code = None
            else:
                code = _reap(self.pid, 1.0)
            if code is not None:
                self._finalizer.detach()
                if self.groups:  # its grandchildren, if any (the pid itself is reaped: never signalled again)
                    try:
                        os.killpg(self.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                return code
        return self._finalizer()


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- the persistent worker of the search -------------------------------------------------------

_END = object()  # the end of a stream of calls
_DIED = object()  # a submitted call whose child had gone already: collect reports the death
_RESEND = object()  # a submitted call whose child the harness closed: collect sends it again


class _Worker(NamedTuple):
    pid: int


def _notice_time(data: bytes) -> float | None:
    """The time a worker's notice gives, or None if it is not one ``_ended`` writes."""
    try:
        ended = float(data[1:64].decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None
    return ended if math.isfinite(ended) and len(data) < 64 else None


def _checked_answer(message) -> list | None:
    """A worker's answer to a call if it has one of the shapes ``_answer`` writes, else None."""
    if type(message) is not list or not message:
        return None
    kind, number = message[0], (int, float)
    if kind == RETURNED and len(message) == 6:
        ok = type(message[2]) is bool and type(message[3]) is str and type(message[5]) in number
    elif kind == RAISED and len(message) == 6:
        ok = (type(message[1]) is str and type(message[2]) is str and type(message[3]) is bool
              and type(message[5]) in number)
    elif kind == HARNESS_ERROR and len(message) == 3:
        ok = type(message[1]) is str and type(message[2]) is str
    else:
        ok = False
    return message if ok else None


def _like(before, after):
    """``after`` (the arguments as a call left them, decoded) given back the harness's own types
    where ``before`` (the harness's copy of the same arguments) had them: a JobList stays a JobList,
    an IntSubclass whose Opaque still has its type and repr is the harness's own value.  Only the
    harness's classes are built, from what it sent; nothing the child chose is constructed."""
    kind = type(before)
    if type(after) is Opaque:
        try:
            same = after == Opaque(_type_name(kind), _exact_str(repr(before)))
        except Exception:
            return after
        return before if same else after
    if type(after) is list and isinstance(before, list) or type(after) is tuple and isinstance(before, tuple):
        items = [_like(old, new) for old, new in zip(before, after)] + list(after[len(before):])
        base = type(after)
    elif type(after) is dict and isinstance(before, dict):
        items = {key: _like(before[key], value) if key in before else value for key, value in after.items()}
        base = dict
    else:
        return after
    if kind is base:
        return base(items)
    try:
        return kind(items)  # the harness's own subclass (JobList, JobDict)
    except Exception:  # one that cannot be built this way (a NamedTuple): the base type will do
        return base(items)


class TargetProcess:
    """One target, imported once in a zygote, and a persistent worker forked from it serving many
    calls; a call that kills or hangs the worker is charged to it, and the next call runs in a fresh
    worker forked from the same zygote (no second import)."""

    def __init__(
        self,
        target: Target,
        call_seconds: float = DEFAULT_CALL_SECONDS,
        memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
        shape: tuple = None,
        adapter=None,
        load_seconds: float = DEFAULT_LOAD_SECONDS,
        contract: Callable | None = None,
        hash_seed: int | None = None,
    ) -> None:
        if not (isinstance(call_seconds, (int, float)) and call_seconds > 0):
            raise ValueError(f"call_seconds={call_seconds!r}: expected a number of seconds > 0")
        if memory_bytes is not None and not (type(memory_bytes) is int and memory_bytes > 0):
            raise ValueError(f"memory_bytes={memory_bytes!r}: expected an int > 0 or None")
        if not (isinstance(load_seconds, (int, float)) and not isinstance(load_seconds, bool) and load_seconds > 0):
            raise ValueError(f"load_seconds={load_seconds!r}: expected a number of seconds > 0")
        if hash_seed is not None and not (type(hash_seed) is int and 0 <= hash_seed <= MAX_HASH_SEED):
            raise ValueError(f"hash_seed={hash_seed!r}: expected an int from 0 to {MAX_HASH_SEED}, or None")
        self.target = target
        self.shape = shape or DEFAULT_SHAPE  # (example arguments, how a call is written) for the signature check
        self.adapter = adapter  # applied in the child to the loaded callable: what is called is adapter(target)
        self.call_seconds = call_seconds
        self.memory_bytes = memory_bytes
        self.load_seconds = load_seconds  # the import's limit (--load-timeout), and a fresh worker's start's
        self.contract = contract  # the model's contract_part: extra keys holding no plain data are dropped
        self.hash_seed = hash_seed  # None: the zygote is forked (the harness's hash seed); else exec'd with this one
        self.calls = 0
        self.imports = 0  # how many zygotes were started (each imports the target once)
        self.signature_problem: str | None = None
        self.history: list = []  # the calls sent to the current worker, oldest first
        self.dropped: dict = {}  # (where, type name) -> calls on which that extra key was dropped
        self._pending = None  # (args, seconds, limit, deadline, outcome known already) of the call submitted, not collected
        self._zygote: _Zygote | None = None
        self._load_error: str | None = None  # why the import failed: every later start says so again, no new import
        self._process: _Worker | None = None  # the current worker
        self._connection = None
        self._fresh: dict = {}  # hash seed -> the same target in a fresh interpreter (``fresh``)
        self.fresh_until: float | None = None  # fresh_ready waits no later than this (the run's deadline)
        self.fresh_late = 0  # how often fresh_ready gave up at fresh_until: the comparisons it stood for did not run

    # -- the zygote and the workers -----------------------------------------------------------

    def launch(self) -> None:
        """Start the zygote (the import) if it is not running, without waiting for it."""
        if self._zygote is None:
            self._zygote = _Zygote(self.target, self.shape, self.adapter, self.memory_bytes, self.load_seconds,
                                   self.hash_seed)
            self._zygote.launch()
            self.imports += 1

    def start(self) -> None:
        """Start a fresh worker, forked from the zygote (which imports the target first, once);
        raise TargetError if the target cannot be imported, or not within the load limit."""
        self.close()
        if self._load_error is not None:
            raise TargetError(self._load_error)
        for attempt in range(2):
            self.launch()
            zygote = self._zygote
            try:
                zygote.wait_ready()
            except TargetError as error:
                self._zygote, self._load_error = None, str(error)  # killed by wait_ready
                raise
            self.signature_problem = zygote.problem
            try:
                pid, connection = zygote.fork()
                break
            except _Gone as gone:
                zygote.kill()
                self._zygote = None
                if attempt:  # it died again, right after a fresh import
                    raise TargetError(f"target {self.target.text!r}: its process stopped answering ({gone})") from None
        self._process, self._connection = _Worker(pid), connection
        self.history = []  # a new list: one taken from the old worker stays as it was
        try:
            ready = connection.poll(self.load_seconds)
            answer = decode(connection.recv_bytes(CONTROL_BYTES))[0] if ready else None
        except (EOFError, OSError, NotPlain):
            code = zygote.status(pid)
            self.close()
            raise TargetError(f"target {self.target.text!r}: a fresh process forked after its import died at once "
                              f"({_exit_status(code)})") from None
        if answer != ["ready"]:
            self.close()
            raise TargetError(f"target {self.target.text!r}: a fresh process forked after its import did not start "
                              f"within {self.load_seconds:g} s")

    def fresh(self, hash_seed: int) -> "TargetProcess":
        """The same target in a freshly exec'd interpreter whose string hashes use ``hash_seed``
        (``PYTHONHASHSEED``): a second zygote (started by ``launch`` or the first call, kept until
        ``shutdown``), whose workers are fresh after each ``close`` exactly like this one's."""
        companion = self._fresh.get(hash_seed)
        if companion is None:
            companion = TargetProcess(self.target, self.call_seconds, self.memory_bytes, self.shape, self.adapter,
                                      self.load_seconds, self.contract, hash_seed)
            companion.dropped = self.dropped  # one account of the keys dropped, whichever interpreter answered
            self._fresh[hash_seed] = companion
        return companion

    def fresh_ready(self, hash_seeds) -> bool:
        """Start the fresh interpreter of each of ``hash_seeds`` (their imports run side by side) and wait
        for them, until ``fresh_until`` at the latest: True when all are ready, False (counted in
        ``fresh_late``) if that time came first.  Raises TargetError if an import fails."""
        companions = [self.fresh(seed) for seed in hash_seeds]
        for companion in companions:
            companion.launch()
        for companion in companions:
            if not companion._zygote.wait_ready(self.fresh_until):
                self.fresh_late += 1
                return False
        return True

    def end_fresh(self, hash_seed: int) -> None:
        """End the fresh interpreter of ``hash_seed`` (``fresh``), if it runs."""
        companion = self._fresh.pop(hash_seed, None)
        if companion is not None:
            companion.shutdown()

    # -- calls ----------------------------------------------------------------------------------

    def call(self, *args, seconds: float | None = None) -> Outcome:
        """Call the target once with ``args``, within ``seconds`` (default: the process's per-call limit)."""
        self.submit(*args, seconds=seconds)
        return self.collect()

    def submit(self, *args, seconds: float | None = None) -> None:
        """Send one call to the worker and return at once; ``collect`` gives its outcome.  The call's
        limit runs from now, so the harness may do other work (judge, compute the reference) meanwhile."""
        assert self._pending is None, "TargetProcess.submit: the previous call was not collected"
        if self._process is None:
            self.start()
        self.calls += 1
        limit = self.call_seconds if seconds is None else seconds
        self.history.append(args)
        try:
            self._connection.send(args)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self._pending = (args, seconds, limit, None, _DIED)
            return
        except KeyboardInterrupt:  # the user's Ctrl-C is the caller's to handle, never a harness error
            raise
        except BaseException as error:  # the harness handed over a call it cannot pickle
            self.close()
            self._pending = (args, seconds, limit, None, Outcome(
                HARNESS_ERROR, error=f"the call could not be sent: {type(error).__name__}: {_describe(error)}"))
            return
        self._pending = (args, seconds, limit, time.monotonic() + limit, None)

    def collect(self) -> Outcome:
        """The outcome of the call ``submit`` sent: its answer, or ``timed_out`` once its limit
        (counted from the submit) has passed, or ``died``."""
        assert self._pending is not None, "TargetProcess.collect: no call was submitted"
        args, seconds, limit, deadline, ready = self._pending
        self._pending = None
        if ready is _RESEND:  # the harness closed the worker while the call ran: it runs again, in a fresh one
            self.calls -= 1
            self.submit(*args, seconds=seconds)
            return self.collect()
        if ready is _DIED:
            return self._died()
        if ready is not None:
            return ready
        if not self._connection.poll(max(0.0, deadline - time.monotonic())):
            self.close()
            return Outcome(TIMED_OUT, error=f"did not return within {limit:g} s")
        try:
            data = self._connection.recv_bytes(MAX_BYTES + CONTROL_BYTES)
            if data[:1] == _NOTICE:  # the call ended (at the time given): the answer follows, once written
                ended = _notice_time(data)
                if ended is None or ended > deadline:
                    self.close()
                    if ended is None:
                        return Outcome(RETURNED, error="the target's process sent a message that is not plain data")
                    return Outcome(TIMED_OUT, error=f"did not return within {limit:g} s")
                if not self._connection.poll(ANSWER_SECONDS):
                    self.close()
                    return Outcome(RETURNED, error=f"the result is not plain data: it was not written within "
                                                   f"{ANSWER_SECONDS:g} s")
                data = self._connection.recv_bytes(MAX_BYTES + CONTROL_BYTES)
        except EOFError:
            return self._died()
        except OSError as error:  # a message longer than any the worker writes
            self.close()
            return Outcome(RETURNED, error=f"the target's process sent a message that is not plain data ({error})")
        try:
            message, opaque = decode(data)
        except NotPlain as problem:
            self.close()
            return Outcome(RETURNED, error=f"the target's process sent a message that is not plain data ({problem})")
        message = _checked_answer(message)
        if message is None:
            self.close()
            return Outcome(RETURNED, error="the target's process sent a message of a shape the sandbox never writes")
        kind = message[0]
        if kind in (RETURNED, RAISED) and message[5] > deadline:
            # it ended after its limit (the harness collected it late): as if it had been cut off there
            self.close()
            return Outcome(TIMED_OUT, error=f"did not return within {limit:g} s")
        if kind == HARNESS_ERROR:
            self.close()
            return Outcome(HARNESS_ERROR, error=message[1], traceback=message[2])
        after = _like(args, message[4]) if message[3 if kind == RAISED else 2] else None
        if kind == RETURNED:
            result, dropped = message[1], ()
            if opaque and self.contract is not None and not message[3]:
                result, dropped = drop_opaque_extras(result, self.contract)
                for note in dropped:
                    self.dropped[note] = self.dropped.get(note, 0) + 1
            return Outcome(RETURNED, result=result, mutated=message[2], error=message[3], args_after=after,
                           dropped=dropped)
        return Outcome(RAISED, error=f"{message[1]}: {message[2]}", error_type=message[1], mutated=message[3],
                       args_after=after)

    def stream(self, calls, seconds: float | None = None):
        """Yield ``(call, outcome)`` for each call of ``calls`` in order, the next call already
        running in the worker while the caller handles an outcome (each call is sent alone, with its
        own limit: one that hangs or kills the worker is the one charged, and the calls after it
        run in a fresh worker, exactly as with ``call``)."""
        calls = iter(calls)
        current = next(calls, _END)
        if current is _END:
            return
        self.submit(*current, seconds=seconds)
        try:
            while current is not _END:
                outcome = self.collect()
                following = next(calls, _END)
                if following is not _END:
                    self.submit(*following, seconds=seconds)
                yield current, outcome
                current = following
        finally:
            if self._pending is not None:  # the caller stopped early: the call sent ahead still ends here
                self.collect()

    def _died(self) -> Outcome:
        code = self._zygote.status(self._process.pid) if self._zygote is not None else None
        self.close()
        return Outcome(DIED, error=f"the target's process died ({_exit_status(code)})")

    # -- ending ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill the current worker's process group (if any); the next call runs in a fresh worker,
        forked from the same zygote.  The zygote lives on (``shutdown`` ends it)."""
        if self._pending is not None and self._pending[4] is None:  # a call in flight: collect runs it again
            self._pending = self._pending[:4] + (_RESEND,)
        if self._process is not None:
            groups = self._zygote.groups if self._zygote is not None else not _state["nested"]
            _kill_pid_group(self._process.pid, not groups)
            self._connection.close()
            if self._zygote is not None:
                self._zygote.reap.append(self._process.pid)
        self._process = self._connection = None

    def shutdown(self) -> None:
        """End everything: the worker, the zygote, and the fresh interpreters' (``fresh``)."""
        self.close()
        if self._zygote is not None:
            self._zygote.kill()
            self._zygote = None
        for companion in self._fresh.values():
            companion.shutdown()
        self._fresh = {}

    def __enter__(self) -> "TargetProcess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.shutdown()


# --- the one-shot runner --------------------------------------------------------------------------


class _ReportFailed(BaseException):
    """A value handed to ``report`` could not be sent (not plain data): the harness's own bug."""


def _pack(message, transport: str) -> bytes:
    return encode(message, strict=True) if transport == "plain" else pickle.dumps(message)


def _run_child(connection, function, args, kwargs, memory_limit, output_fd, partial, transport) -> None:
    """The one-shot child: run ``function`` once, send every report and then the end."""
    try:
        _enter_child(memory_limit, output_fd)
        if transport == "plain":  # it may load a target: the descriptors of the harness stay out of reach
            _cover_inherited_fds({connection.fileno(), *([output_fd] if output_fd is not None else [])})
        if partial:
            def report(value):
                try:
                    payload = _pack(["partial", value], transport)
                except BaseException as error:
                    raise _ReportFailed(f"a report could not be sent back: {type(error).__name__}: "
                                        f"{_describe(error)}") from None
                connection.send_bytes(payload)

            kwargs = dict(kwargs, report=report)
    except BaseException as error:
        _send_end(connection, [HARNESS_ERROR, f"the child could not be set up: {type(error).__name__}: "
                                              f"{_describe(error)}", _format_traceback(error)], transport)
    else:
        try:
            result = function(*args, **kwargs)
        except _ReportFailed as error:
            _send_end(connection, [HARNESS_ERROR, str(error), _format_traceback(error)], transport)
        except BaseException as error:  # the code may raise anything, SystemExit included
            _send_end(connection, [RAISED, type(error).__name__, _describe(error), _format_traceback(error)],
                      transport)
        else:
            try:
                payload = _pack([RETURNED, result], transport)
            except BaseException as error:
                _send_end(connection, [HARNESS_ERROR, f"the result could not be sent back: {type(error).__name__}: "
                                                      f"{_describe(error)}", ""], transport)
            else:
                _send_end(connection, payload, transport)
    os._exit(0)  # no atexit handlers or buffered output of the harness inherited by the fork


def _send_end(connection, message, transport: str) -> None:
    try:
        connection.send_bytes(message if isinstance(message, bytes) else _pack(message, transport))
        connection.close()
    except BaseException:  # the parent went away: nothing to tell
        pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass


class Child:
    """One run of ``function(*args, **kwargs)`` in a forked child, killed with its group at ``seconds``.

    With ``partial=True`` the function is also given ``report=callable``: every value
    it reports reaches ``Outcome.partial``, even if the child is killed afterwards.

    ``transport``: how the child's messages (its reports, its result, its error) reach the
    harness.  ``"plain"`` (the default): exactly plain data (``encode(..., strict=True)``),
    decoded without running anything; a function that returns anything else is the
    harness's own bug (``harness_error``).  Every child that loads a target (CrossHair's
    contracts and diff) uses it.  ``"pickle"``: for a function that runs the harness's code
    only and returns the harness's own objects (a ``--workers`` worker: its target runs in a
    zygote of its own, whose answers reach the worker as plain data and which holds none of the
    worker's descriptors), so nothing the target chose is ever unpickled here.
    """

    def __init__(
        self,
        function: Callable,
        args: tuple = (),
        kwargs: dict | None = None,
        *,
        seconds: float,
        memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
        output: str = "devnull",
        partial: bool = False,
        transport: str = "plain",
    ) -> None:
        if not callable(function):
            raise ValueError(f"function={function!r}: expected a callable")
        if not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0):
            raise ValueError(f"seconds={seconds!r}: expected a number of seconds > 0")
        if memory_bytes is not None and not (type(memory_bytes) is int and memory_bytes > 0):
            raise ValueError(f"memory_bytes={memory_bytes!r}: expected an int > 0 or None")
        if output not in OUTPUTS:
            raise ValueError(f"output={output!r}: expected one of {OUTPUTS}")
        if transport not in TRANSPORTS:
            raise ValueError(f"transport={transport!r}: expected one of {TRANSPORTS}")
        self.function, self.args, self.kwargs = function, tuple(args), dict(kwargs or {})
        self.seconds, self.memory_bytes, self.output, self.partial = seconds, memory_bytes, output, partial
        self.transport = transport
        self.started = self.deadline = None
        self.outcome: Outcome | None = None
        self._reports: list = []
        self._process = self._connection = self._file = None

    def start(self) -> "Child":
        """Fork the child; its deadline starts now."""
        assert self._process is None, "Child.start: already started"
        self._file = tempfile.TemporaryFile() if self.output == "capture" else None
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        output_fd = self._file.fileno() if self._file is not None else None
        self.started = time.monotonic()
        self.deadline = self.started + self.seconds
        try:
            process = context.Process(
                target=_run_child,
                args=(send, self.function, self.args, self.kwargs, _memory_limit(self.memory_bytes),
                      output_fd, self.partial, self.transport),
            )
            process.start()
        except OSError as error:  # no fork (out of processes or memory): the sandbox failed
            receive.close()
            send.close()
            self._end(Outcome(HARNESS_ERROR, error=f"the child could not be started: {error}"))
            return self
        _adopt(process.pid)
        send.close()
        self._process, self._connection = process, receive
        return self

    @property
    def waitables(self) -> list:
        """What ``multiprocessing.connection.wait`` can wait on for this child."""
        if self.outcome is not None or self._process is None:
            return []
        return [self._connection, self._process.sentinel]

    def poll(self) -> Outcome | None:
        """The outcome if the child has ended (or its deadline has passed, and it is killed), else None."""
        if self.outcome is not None:
            return self.outcome
        if self._process is None:
            self.start()
            if self.outcome is not None:
                return self.outcome
        end = self._drain()
        if end is not None:
            return self._finish(end)
        if self._process.exitcode is not None:
            end = self._drain()  # a last message may have arrived with the exit
            return self._finish(end if end is not None else ["__died__"])
        if time.monotonic() >= self.deadline:
            end = self._drain()
            return self._finish(end if end is not None else ["__timed_out__"])
        return None

    def wait(self) -> Outcome:
        """Block until the child ends or its deadline passes; return the outcome."""
        while True:
            outcome = self.poll()
            if outcome is not None:
                return outcome
            _wait_connections(self.waitables, timeout=max(0.0, min(1.0, self.deadline - time.monotonic())))

    def kill(self, why: str = "stopped by the caller") -> Outcome:
        """End the child now (if it has not ended); a run stopped early is ``timed_out``."""
        if self.outcome is None:
            if self._process is None:
                return self._end(Outcome(TIMED_OUT, error=f"never started: {why}"))
            end = self._drain()
            self._finish(end if end is not None else ["__timed_out__", why])
        return self.outcome

    def _drain(self):
        """Read every message waiting on the pipe; return the final one, if it came."""
        try:
            while self._connection.poll():
                data = self._connection.recv_bytes()
                message = decode(data)[0] if self.transport == "plain" else pickle.loads(data)
                if type(message) is not list or not message or type(message[0]) is not str:
                    raise NotPlain(f"a message of a shape the sandbox never writes: {_short(message)}")
                if message[0] == "partial" and len(message) == 2:
                    self._reports.append(message[1])
                else:
                    return message
        except (EOFError, OSError):
            return None
        except KeyboardInterrupt:  # the user's Ctrl-C while a message was read: the caller's to handle
            raise
        except BaseException as error:  # a message that cannot be read here
            return [HARNESS_ERROR, f"a message from the child could not be read: {type(error).__name__}: "
                                   f"{_describe(error)}", ""]
        return None

    def _finish(self, end) -> Outcome:
        process = self._process
        if end[0] == "__died__":
            process.join(1.0)
        _kill_group(process)  # grandchildren die with it, whatever the child did
        self._connection.close()
        seconds = round(time.monotonic() - self.started, 3)
        kind = end[0]
        if kind == RETURNED and len(end) == 2:
            outcome = Outcome(RETURNED, result=end[1])
        elif kind == RAISED and len(end) == 4:
            outcome = Outcome(RAISED, error=f"{end[1]}: {end[2]}", error_type=end[1], traceback=end[3])
        elif kind == HARNESS_ERROR and len(end) == 3:
            outcome = Outcome(HARNESS_ERROR, error=end[1], traceback=end[2])
        elif kind == "__timed_out__":
            why = end[1] if len(end) > 1 else f"did not end within {self.seconds:g} s"
            outcome = Outcome(TIMED_OUT, error=why)
        elif kind == "__died__":
            outcome = Outcome(DIED, error=f"the child died ({_exit_status(process.exitcode)})")
        else:
            outcome = Outcome(HARNESS_ERROR, error=f"the child ended with a message of a shape the sandbox never "
                                                   f"writes: {_short(end)}")
        output = _read_tail(self._file)
        if self._file is not None:
            self._file.close()
        return self._end(outcome._replace(output=output, seconds=seconds))

    def _end(self, outcome: Outcome) -> Outcome:
        self.outcome = outcome._replace(partial=tuple(self._reports))
        return self.outcome

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, *exc_info) -> None:
        self.kill()


def run_once(function: Callable, *args, seconds: float, memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
             output: str = "devnull", partial: bool = False, transport: str = "plain", **kwargs) -> Outcome:
    """Run ``function(*args, **kwargs)`` once in a killable child and return its outcome by ``seconds``."""
    with Child(function, args, kwargs, seconds=seconds, memory_bytes=memory_bytes, output=output,
               partial=partial, transport=transport) as child:
        child.start()
        return child.wait()


def wait_any(children: list[Child], timeout: float) -> None:
    """Block until one of ``children`` may have ended, its deadline has come, or ``timeout`` has passed."""
    waitables = [w for child in children for w in child.waitables]
    if not waitables:
        return
    soonest = min(child.deadline for child in children if child.outcome is None)
    _wait_connections(waitables, timeout=max(0.0, min(timeout, soonest - time.monotonic())))


# --- the target in the harness's own process ---------------------------------------------------------


class InProcessTarget:
    """The target called in the harness's own process, for the hypothesis-crosshair
    backend, whose symbolic values must reach the target's code unrealised (a pipe
    would turn them into concrete values).  Nothing is contained here: a hang or a
    crash of the target is one of the harness; use it only on trusted code."""

    def __init__(self, target: Target, shape: tuple = None) -> None:
        self.target = target
        self.shape = shape or DEFAULT_SHAPE
        self.calls = 0
        self.call_seconds = None
        self.signature_problem: str | None = None
        self.dropped: dict = {}  # never filled: the result is the target's own object, not sent
        self._function = None
        self._pending = None

    def start(self) -> None:
        self._function = load_callable(self.target)
        self.signature_problem = signature_problem(self._function, *self.shape)

    def call(self, *args, seconds: float | None = None) -> Outcome:
        if self._function is None:
            self.start()
        self.calls += 1
        request = args
        before = repr(request)
        try:
            result = self._function(*args)
        except (KeyboardInterrupt, SystemExit) as error:
            return Outcome(RAISED, error=f"{type(error).__name__}: {error}", error_type=type(error).__name__)
        except Exception as error:  # the target's failure is a finding, not ours
            mutated = repr(request) != before
            return Outcome(RAISED, error=f"{type(error).__name__}: {_describe(error)}",
                           error_type=type(error).__name__, mutated=mutated, args_after=request if mutated else None)
        mutated = repr(request) != before
        return Outcome(RETURNED, result=result, mutated=mutated, args_after=request if mutated else None)

    def submit(self, *args, seconds: float | None = None) -> None:
        """Keep the call for ``collect``, which makes it (nothing runs beside the harness here)."""
        assert self._pending is None, "InProcessTarget.submit: the previous call was not collected"
        self._pending = args

    def collect(self) -> Outcome:
        """Make the call ``submit`` kept and return its outcome."""
        args, self._pending = self._pending, None
        return self.call(*args)

    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def __enter__(self) -> "InProcessTarget":
        return self

    def __exit__(self, *exc_info) -> None:
        pass
