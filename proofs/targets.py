"""Naming a scheduler to check: ``path/to/file.py:function`` or ``package.module:function``.

``parse_target`` checks what can be checked without running the target's code (the
file exists, the name has a function part).  ``load_callable`` imports it, and is
only ever called inside the isolated child process (proofs.sandbox), so a target
whose import crashes, hangs or prints cannot take the harness down with it.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
import sys
from typing import Callable, NamedTuple

DEFAULT_TARGET = "impl:schedule"


class TargetError(Exception):
    """The target cannot be named or loaded (the CLI exits 2 with this message)."""


class Target(NamedTuple):
    """Where a scheduler lives: a file path or a module name, and a function name."""

    text: str  # as the user wrote it
    path: str | None  # absolute path of a .py file, or None for a module
    module: str | None
    function: str
    root: str | None = None  # a directory to import the module from, ahead of sys.path

    @property
    def is_default(self) -> bool:
        return self.text == DEFAULT_TARGET


def parse_target(text: str | None) -> Target:
    """Parse a TARGET argument; raise TargetError with a one-line reason if it is malformed."""
    text = text or DEFAULT_TARGET
    where, sep, function = text.rpartition(":")
    if not sep or not where or not function:
        raise TargetError(f"target {text!r}: expected path/to/file.py:function or package.module:function")
    if not function.isidentifier():
        raise TargetError(f"target {text!r}: {function!r} is not a function name")
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise TargetError(f"target {text!r}: no such file {where!r}")
        return Target(text, path, None, function)
    return Target(text, None, where, function)


def load_callable(target: Target) -> Callable:
    """Import the target and return its function; raise TargetError if that fails."""
    try:
        if target.path is not None:
            name = "schedcheck_target_" + os.path.splitext(os.path.basename(target.path))[0]
            spec = importlib.util.spec_from_file_location(name, target.path)
            if spec is None or spec.loader is None:
                raise TargetError(f"target {target.text!r}: cannot import {target.path!r}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            sys.path.insert(0, os.path.dirname(target.path))
            spec.loader.exec_module(module)
        else:
            _forget_appended_dot()
            if target.root is not None:
                sys.path.insert(0, target.root)
                package = target.module.partition(".")[0]
                for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
                    del sys.modules[name]  # the child inherited the harness's copy; import this one
            module = importlib.import_module(target.module)
    except TargetError:
        raise
    except BaseException as error:  # the import runs foreign code: anything may come out
        raise TargetError(
            f"target {target.text!r}: import failed: {type(error).__name__}: {error}{_file_hint(target, error)}"
        ) from None
    if not hasattr(module, target.function):
        where = os.path.relpath(target.path) if target.path is not None else target.module
        raise TargetError(f"target {target.text!r}: no function {target.function!r} in {where}{_did_you_mean(target, module)}")
    return getattr(module, target.function)


def _forget_appended_dot() -> None:
    """Drop the relative ``"."`` that ``hypothesis.extra.cli`` appends to sys.path on import.

    HypoFuzz's Hypothesis entry point imports that module, so with HypoFuzz installed a module
    name would otherwise resolve against the working directory, which the installed
    ``schedcheck`` script never searches. Every entry Python itself puts on sys.path is
    absolute, so a literal ``"."`` can only have been appended at run time.
    """
    if "hypothesis.extra.cli" in sys.modules:
        sys.path[:] = [entry for entry in sys.path if entry != "."]


def _did_you_mean(target: Target, module) -> str:
    """"; did you mean 'x'?" for the callables of ``module`` whose names are close to the one asked for."""
    names = [name for name, value in vars(module).items() if callable(value) and not name.startswith("__")]
    close = difflib.get_close_matches(target.function, names, n=3, cutoff=0.6)
    if not close:
        return ""
    where = target.text.rpartition(":")[0]
    return "; did you mean " + " or ".join(repr(f"{where}:{name}") for name in close) + "?"


def _file_hint(target: Target, error: BaseException) -> str:
    """A hint to name a file as ``file.py:function`` when a module name was given that is a file here."""
    if target.module is None or not isinstance(error, ModuleNotFoundError):
        return ""
    candidate = target.module.replace(".", os.sep) + ".py"
    if not os.path.isfile(candidate):
        return ""
    return f" (there is a file {candidate!r} here: to check it, write {candidate + ':' + target.function!r})"


def signature_problem(function, example_args: tuple = ([], 1, True),
                      written: str = "schedule(jobs, slots, continuous)") -> str | None:
    """Why ``function`` cannot be called with ``example_args`` (as ``written``), or None."""
    shape = f"schedcheck calls a function {written} that returns the result dict"
    if inspect.isclass(function):
        return (
            f"{function.__name__} is a class, not a function: {shape}; "
            f"wrap the class in one, e.g. def {written}: ..."
        )
    if not callable(function):
        return f"{function!r} is a {type(function).__name__}, not a function: {shape}"
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None  # a builtin without a signature: find out by calling it
    try:
        signature.bind(*example_args)
    except TypeError as error:
        name = getattr(function, "__name__", "the function")
        return f"{name}{signature} cannot be called as {written} ({error}): {shape}"
    return None
