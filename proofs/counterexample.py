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

from proofs.search.strategies import IntSubclass, JobDict, JobList

CHECKS = ("conformance", "validation", "deterministic", "stateful", "step")


class Counterexample(NamedTuple):
    """One minimal failing input and what it breaks."""

    property: str  # an invariant name from spec.NAMES, or "signature"
    engine: str
    check: str  # one of CHECKS
    jobs: Any
    slots: Any
    continuous: Any
    message: str
    rule: str = ""  # for a validation counterexample: which rule the input breaks
    pre_state: dict | None = None  # for a one-step counterexample (check "step"): the state before the step

    @property
    def call(self) -> tuple:
        return (self.jobs, self.slots, self.continuous)

    @property
    def size(self) -> int:
        if self.check == "step":
            return len((self.pre_state or {}).get("jobs", ()))
        return len(self.jobs) if isinstance(self.jobs, (list, tuple)) else 0

    def input_repr(self) -> str:
        if self.check == "step":
            return f"impl_step(Scheduler, state_from_dict({python_literal(self.pre_state)}))"
        return (
            f"schedule({python_literal(self.jobs)}, slots={python_literal(self.slots)}, "
            f"continuous={python_literal(self.continuous)})"
        )

    def to_json(self) -> dict:
        value = {"jobs": self.jobs, "slots": self.slots, "continuous": self.continuous}
        extra = {"pre_state": self.pre_state} if self.check == "step" else {}
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
        if data.get("check") == "step":
            jobs, slots, continuous = [], 1, True
        elif data.get("input") is not None:
            call = data["input"]
            jobs, slots, continuous = call["jobs"], call["slots"], call["continuous"]
        else:
            jobs, slots, continuous = parse_input_repr(data["input_repr"])
        return cls(
            data["property"], data["engine"], data.get("check", "conformance"),
            jobs, slots, continuous, data.get("message", ""), data.get("rule", ""), data.get("pre_state"),
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


_CALL = re.compile(r"^schedule\((?P<args>.*)\)$", re.S)


def parse_input_repr(text: str) -> tuple:
    """Rebuild (jobs, slots, continuous) from ``input_repr``, evaluating only literals,
    ``float("nan")``-style calls and ``IntSubclass(n)``."""
    match = _CALL.match(text.strip())
    if not match:
        raise ValueError(f"input_repr={text[:60]!r}: expected schedule(JOBS, slots=..., continuous=...)")
    tree = ast.parse(f"f({match['args']})", mode="eval").body
    if len(tree.args) != 1 or [k.arg for k in tree.keywords] != ["slots", "continuous"]:
        raise ValueError(f"input_repr={text[:60]!r}: expected schedule(JOBS, slots=..., continuous=...)")
    return _literal(tree.args[0]), _literal(tree.keywords[0].value), _literal(tree.keywords[1].value)


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


def save(counterexample: Counterexample, target: str, directory: str) -> str:
    """Write the counterexample to ``directory`` and return the path (done before it is reported)."""
    os.makedirs(directory, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", target).strip("_")[-80:]
    path = os.path.join(directory, f"{slug}-{counterexample.property}.json")
    data = dict(counterexample.to_json(), target=target)
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
