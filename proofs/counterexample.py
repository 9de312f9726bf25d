"""Counterexamples as data: the record, its Python and JSON forms, saving and loading.

A counterexample names the invariant it breaks, the engine that found it, the check
that runs it again (``conformance`` for a valid call, ``validation`` for an invalid
one, ``deterministic`` for a repeated one, ``stateful`` for a program of calls to an
online engine, ``trace`` for a recorded trace) and the input.  ``input_repr`` is always a
Python expression that rebuilds the input; ``input`` is the same as JSON, or None
when the input is not JSON (nan, a tuple, an int subclass).

It also carries what reproduces it (format 2, ``FORMAT``; every field is additive, so a
file of format 1 still loads, and says what it lacks):

- ``history``: the calls a fresh process answered before the failing call, in order
  (``[]``: the call fails alone, as the first call of a fresh process);
- ``reproduced``: how it was confirmed (``REPRODUCED``): ``alone``, ``history`` (in a fresh
  process after exactly ``history``), or ``no`` (seen once, as a result or an exception
  the target gave, and not again alone nor after its history: it depends on earlier
  calls or on chance; ``observed_at`` then says how many calls and seconds into its
  process it was seen, which ``replay`` uses to try long enough);
- ``program``: for ``stateful``, the client's calls as data (``make``, ``add``, ``abort``,
  ``step``, each with its arguments), which ``replay`` runs on a fresh engine;
- ``seed``: the run's ``--seed`` (None: a random one), and ``hash_seeds``: the string-hash
  seeds of the interpreters that disagree, when that matters (a determinism failure);
- ``trace``: for ``trace``, the header and the entries up to the violation.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
from typing import Any, NamedTuple

from proofs import models
from proofs.search.strategies import IntSubclass, JobDict, JobList

CHECKS = ("conformance", "validation", "deterministic", "stateful", "step", "trace")
FORMAT = 2  # 1: no history, program, seed or reproduced (files written before issue 18)
REPRODUCED = {
    "alone": "it fails alone, as the first call of a fresh process",
    "history": "it fails in a fresh process after the calls saved with it",
    "no": "it did not reproduce alone: the bug depends on earlier calls or on chance",
}
HISTORY_LIMIT = 2000  # calls of history kept (the latest); a longer one is cut, and ``history_cut`` says how many went


class Counterexample(NamedTuple):
    """One minimal failing input and what it breaks."""

    property: str  # an invariant name from the model's registry, or "signature"
    engine: str
    check: str  # one of CHECKS
    call: tuple  # the arguments: (jobs, slots, continuous), or (requests, config) for the serving model
    message: str
    rule: str = ""  # for a validation counterexample: which rule the input breaks
    pre_state: dict | None = None  # for a one-step counterexample (check "step"): the state before the step
    model: str = "chapter"  # which model of the spec judged it (proofs.models)
    hash_seeds: tuple = ()  # deterministic: PYTHONHASHSEED values whose fresh interpreters disagree (replay runs them)
    history: tuple | None = None  # the calls a fresh process answered before it (None: not recorded, format 1)
    reproduced: str = ""  # one of REPRODUCED ("": not recorded, format 1)
    seed: int | None = None  # the --seed of the run that found it
    program: tuple | None = None  # check "stateful": ((kind, args), ...), the client's calls
    observed_at: dict | None = None  # reproduced "no": {"calls": N, "seconds": S} into its process when seen
    history_cut: int = 0  # calls of history left out (the oldest), beyond HISTORY_LIMIT
    trace: dict | None = None  # check "trace": {"header": ..., "entries": [...], "totals": ...}
    format: int = FORMAT  # the format it was read from (1: an older file)

    @property
    def size(self) -> int:
        if self.check == "step":
            return len((self.pre_state or {}).get("jobs", ()))
        if self.check == "stateful" and self.program is not None:
            return len(self.program)
        first = self.call[0] if self.call else ()
        return len(first) if isinstance(first, (list, tuple)) else 0

    @property
    def depends(self) -> bool:
        """True when the failure needs more than the call alone: its history, or chance."""
        return self.reproduced in ("history", "no") or bool(self.history)

    def input_repr(self) -> str:
        if self.check == "step":
            return f"impl_step(Scheduler, state_from_dict({python_literal(self.pre_state)}))"
        return models.get(self.model).call_repr(self.call, python_literal)

    def to_json(self) -> dict:
        model = models.get(self.model)
        value = model.call_to_json(self.call)
        extra = {"pre_state": self.pre_state} if self.check == "step" else {}
        extra |= {"model": self.model} if self.model != models.DEFAULT else {}
        data = extra | {
            "property": self.property,
            "engine": self.engine,
            "check": self.check,
            "input": value if self.check != "step" and is_json(value) else None,
            "input_repr": self.input_repr(),
            "message": self.message,
            "rule": self.rule,
        }
        if self.format < FORMAT:  # read from an older file: written back as it was
            return data
        data |= {"format": FORMAT, "reproduced": self.reproduced, "seed": self.seed,
                 "history": None if self.history is None else [call_to_data(model, c) for c in self.history]}
        if self.history_cut:
            data["history_cut"] = self.history_cut
        if self.program is not None:
            data["program"] = [[kind, list(args)] for kind, args in self.program]
        if self.hash_seeds:
            data["hash_seeds"] = list(self.hash_seeds)
        if self.observed_at is not None:
            data["observed_at"] = dict(self.observed_at)
        if self.trace is not None:
            data["trace"] = self.trace
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Counterexample":
        model = models.get(data.get("model"))
        if data.get("check") == "step":
            call = model.example_call
        elif data.get("input") is not None:
            call = model.call_from_json(data["input"])
        else:
            call = parse_input_repr(data["input_repr"])
        history = data.get("history")
        program = data.get("program")
        if program is None and data.get("check") == "stateful":
            program = parse_program(data.get("message", ""), model.name)  # format 1: the program only as text
        return cls(
            data["property"], data["engine"], data.get("check", "conformance"),
            tuple(call), data.get("message", ""), data.get("rule", ""), data.get("pre_state"), model.name,
            history=None if history is None else tuple(call_from_data(model, entry) for entry in history),
            reproduced=data.get("reproduced", ""), seed=data.get("seed"),
            program=None if program is None else tuple((kind, tuple(args)) for kind, args in program),
            hash_seeds=_hash_seeds(data.get("hash_seeds")), observed_at=data.get("observed_at"),
            history_cut=data.get("history_cut", 0), trace=data.get("trace"), format=data.get("format", 1),
        )


def call_to_data(model, call) -> dict:
    """One call of a history as JSON: ``{"input": ...}``, or ``{"input_repr": ...}`` when it is not JSON."""
    value = model.call_to_json(call)
    return {"input": value} if is_json(value) else {"input_repr": model.call_repr(call, python_literal)}


def call_from_data(model, entry: dict) -> tuple:
    """The call ``call_to_data`` wrote."""
    if entry.get("input") is not None:
        return tuple(model.call_from_json(entry["input"]))
    return tuple(parse_input_repr(entry["input_repr"]))


_PROGRAM_LINE = re.compile(
    r"^(?:engine = make\((?P<make>.*)\)|engine\.(?P<add>add_request|submit)\((?P<item>.*)\)"
    r"|engine\.abort\((?P<abort>.*)\)|(?:entry|served) = engine\.step\(\)(?P<step>.*))$"
)


def parse_program(text: str, model_name: str) -> tuple | None:
    """The client's calls of a stateful counterexample written as text (format 1), or None if it cannot be read.

    Each add line stands where the request reached the engine, just before the step of its
    tick; replayed there, it reaches the engine at the same tick."""
    program = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _PROGRAM_LINE.match(line.strip())
        if match is None:
            return None
        try:
            if match["make"] is not None:
                if model_name == "serving":
                    program.append(("make", (ast.literal_eval(match["make"]),)))
                else:
                    call = ast.parse(f"f({match['make']})", mode="eval").body
                    keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
                    program.append(("make", (keywords["slots"], keywords["continuous"])))
            elif match["add"] is not None:
                program.append(("add", (ast.literal_eval(match["item"]),)))
            elif match["abort"] is not None:
                program.append(("abort", (ast.literal_eval(match["abort"]),)))
            else:
                program.append(("step", ()))
        except (ValueError, SyntaxError, KeyError):
            return None
    return tuple(program) or None


def _hash_seeds(value) -> tuple:
    """A saved ``hash_seeds`` list as a tuple of PYTHONHASHSEED values (ints 0 .. 2**32-1); ValueError otherwise."""
    if value is None:
        return ()
    if not (isinstance(value, list) and len(value) <= 2 and all(type(v) is int and 0 <= v < 2**32 for v in value)):
        raise ValueError(f"hash_seeds={value!r}: expected a list of at most two PYTHONHASHSEED values")
    return tuple(value)


def python_literal(value: Any) -> str:
    """A Python expression for ``value`` (dict keys in double quotes, as JSON would write them)."""
    if isinstance(value, IntSubclass):
        return repr(value)
    if isinstance(value, (JobList, JobDict)):
        return f"{type(value).__name__}({python_literal(type(value).__bases__[0](value))})"
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{python_literal(k)}: {python_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(python_literal(v) for v in value)
        return "(" + inner + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, set):
        return "{" + ", ".join(python_literal(v) for v in sorted(value, key=repr)) + "}" if value else "set()"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def is_json(value: Any) -> bool:
    """True when ``json`` round-trips ``value`` to an equal value of the same types."""
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(is_json(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and is_json(v) for k, v in value.items())
    return False


_CALL = re.compile(r"^(?P<function>schedule|serve)\((?P<args>.*)\)$", re.S)


def parse_input_repr(text: str) -> tuple:
    """Rebuild the call's arguments from ``input_repr`` (``schedule(...)`` or ``serve(...)``), evaluating
    only literals, ``float("nan")``-style calls and ``IntSubclass(n)``."""
    match = _CALL.match(text.strip())
    if not match:
        raise ValueError(f"input_repr={text[:60]!r}: expected schedule(JOBS, slots=..., continuous=...) or serve(REQUESTS, config=...)")
    model = models.get(models.of_function(match["function"]))
    tree = ast.parse(f"f({match['args']})", mode="eval").body
    try:
        return tuple(model.call_from_keywords([_literal(a) for a in tree.args],
                                              {k.arg: _literal(k.value) for k in tree.keywords}))
    except ValueError as error:
        raise ValueError(f"input_repr={text[:60]!r}: {error}") from None


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1 and not node.keywords:
        if node.func.id in ("JobList", "JobDict"):
            return {"JobList": JobList, "JobDict": JobDict}[node.func.id](_literal(node.args[0]))
        argument = ast.literal_eval(node.args[0])
        if node.func.id == "float" and isinstance(argument, str):
            return float(argument)
        if node.func.id == "IntSubclass" and type(argument) is int:
            return IntSubclass(argument)
    if isinstance(node, ast.List):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e) for e in node.elts)
    if isinstance(node, ast.Set):
        return {_literal(e) for e in node.elts}
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "set" and not node.args:
        return set()
    return ast.literal_eval(node)


TRACE_ENTRIES_KEPT = 10_000  # entries of a trace saved with its counterexample (of a longer one, only its path)


def from_trace(path: str, report) -> Counterexample:
    """The counterexample of a trace file that broke an invariant (``proofs.trace.check.TraceReport``): its
    header's call, and the header and entries up to the one that broke it (all of them, with the totals, when
    it broke at the end), so that ``replay`` can check them again, or drive a factory on the same call.  Of a
    trace longer than ``TRACE_ENTRIES_KEPT`` entries only the path is kept (replay checks that file again)."""
    from proofs.trace.files import lines

    header, entries, totals = None, [], None
    for number, value in lines(path):
        if header is None:
            header = value
            continue
        if report.line is not None and number > report.line:
            break
        if isinstance(value, dict) and set(value) == {"totals"}:
            totals = value["totals"]
            continue
        entries.append(value)
        if len(entries) > TRACE_ENTRIES_KEPT:
            entries = None
            break
    if header["model"] == "serving":
        call = (header["requests"], header["config"])
    else:
        call = (header["jobs"], header["slots"], header["continuous"])
    violation = report.violation
    where = f"tick {violation.tick}" if violation.tick is not None else "the end of the trace"
    kept = {"header": header, "entries": entries, "totals": totals, "policy": report.policy, "file": path}
    return Counterexample(violation.invariant, "trace", "trace", tuple(call), f"{where}: {violation.message}",
                          model=header["model"], history=(), reproduced="alone", trace=kept)


def save(counterexample: Counterexample, target: str, directory: str, extra: dict | None = None) -> str:
    """Write the counterexample to ``directory`` and return the path (done before it is reported)."""
    os.makedirs(directory, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", target).strip("_")[-80:]
    path = os.path.join(directory, f"{slug}-{counterexample.property}.json")
    data = dict(counterexample.to_json(), target=target, **(extra or {}))
    temporary = path + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    os.replace(temporary, path)
    return path


def load(path: str) -> tuple[Counterexample, str | None]:
    """Read a saved counterexample; returns it and the target it was found on."""
    with open(path) as handle:
        try:
            data = json.load(handle)
        except RecursionError:  # a ValueError, as for any other text that is not JSON
            raise ValueError(f"{path}: not JSON: nested too deeply to read") from None
    if isinstance(data, dict) and "counterexamples" in data:  # a --json report: take its first
        if not data["counterexamples"]:
            raise ValueError(f"{path}: the report has no counterexamples")
        target = data.get("target")
        data = data["counterexamples"][0]
        return Counterexample.from_json(data), target
    return Counterexample.from_json(data), data.get("target")
