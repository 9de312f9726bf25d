"""Counterexamples as data: the record, its Python and JSON forms, saving and loading.

A counterexample names the invariant it breaks, the engine that found it, the check
that runs it again (``conformance`` for a valid call, ``validation`` for an invalid
one, ``deterministic`` for a repeated one) and the input.  ``input_repr`` is always a
Python expression that rebuilds the input; ``input`` is the same as JSON, or None
when the input is not JSON (nan, a tuple, an int subclass).
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

CHECKS = ("conformance", "validation", "deterministic", "stateful", "step")


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

    @property
    def size(self) -> int:
        if self.check == "step":
            return len((self.pre_state or {}).get("jobs", ()))
        first = self.call[0] if self.call else ()
        return len(first) if isinstance(first, (list, tuple)) else 0

    def input_repr(self) -> str:
        if self.check == "step":
            return f"impl_step(Scheduler, state_from_dict({python_literal(self.pre_state)}))"
        return models.get(self.model).call_repr(self.call, python_literal)

    def to_json(self) -> dict:
        value = models.get(self.model).call_to_json(self.call)
        extra = {"pre_state": self.pre_state} if self.check == "step" else {}
        extra |= {"model": self.model} if self.model != models.DEFAULT else {}
        return extra | {
            "property": self.property,
            "engine": self.engine,
            "check": self.check,
            "input": value if self.check != "step" and is_json(value) else None,
            "input_repr": self.input_repr(),
            "message": self.message,
            "rule": self.rule,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Counterexample":
        model = models.get(data.get("model"))
        if data.get("check") == "step":
            call = model.example_call
        elif data.get("input") is not None:
            call = model.call_from_json(data["input"])
        else:
            call = parse_input_repr(data["input_repr"])
        return cls(
            data["property"], data["engine"], data.get("check", "conformance"),
            tuple(call), data.get("message", ""), data.get("rule", ""), data.get("pre_state"), model.name,
        )


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
        data = json.load(handle)
    if isinstance(data, dict) and "counterexamples" in data:  # a --json report: take its first
        if not data["counterexamples"]:
            raise ValueError(f"{path}: the report has no counterexamples")
        target = data.get("target")
        data = data["counterexamples"][0]
        return Counterexample.from_json(data), target
    return Counterexample.from_json(data), data.get("target")
