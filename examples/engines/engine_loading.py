"""Loads a third-party scheduler's own modules from its installed files without running its package's ``__init__``.

The engines checked here (nano-vllm, vidur) import torch, transformers or scikit-learn
in their package ``__init__`` files, though their schedulers are plain Python.  A
package registered with ``bare_package`` has its installed ``__path__`` but its
``__init__`` never runs, so ``importlib.import_module("pkg.sub.module")`` then runs
exactly that module's file (and what it imports) from the installed wheel.  Nothing of
the engine is copied here; a module that is already imported is used as it is.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types


class EngineMissing(ImportError):
    """The engine's package is not installed (``pip install --no-deps`` it: see docs/engines.md)."""


def bare_package(name: str) -> types.ModuleType:
    """The package ``name`` registered with its installed ``__path__``, its ``__init__`` not run."""
    if name in sys.modules:
        return sys.modules[name]
    parent, _, leaf = name.rpartition(".")
    if parent and parent not in sys.modules:
        bare_package(parent)
    found = importlib.util.find_spec(name)
    if found is None or not found.submodule_search_locations:
        raise EngineMissing(f"package {name!r} is not installed: see docs/engines.md for the pinned install command")
    module = types.ModuleType(name)
    module.__path__ = list(found.submodule_search_locations)
    module.__package__ = name
    module.__file__ = None
    module.__spec__ = found  # its own spec (find_spec on it answers), though its loader never ran
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], leaf, module)
    return module


def stub_module(name: str, **attributes) -> types.ModuleType:
    """A module ``name`` with only ``attributes``, registered unless the real one is already imported."""
    if name in sys.modules:
        return sys.modules[name]
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(attributes)
    sys.modules[name] = module
    parent, _, leaf = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], leaf, module)
    return module


def load(name: str) -> types.ModuleType:
    """Import the module ``name`` from its installed file (its packages already registered)."""
    return importlib.import_module(name)


TALLY_VARIABLE = "SCHEDCHECK_ENGINE_TALLY"


class Tally:
    """Counts of engines made, requests added and steps run in this process, appended to ``$SCHEDCHECK_ENGINE_TALLY``.

    Unset, it counts in memory only.  Set, the counts since the last line are appended
    as one JSON line at every ``make`` (and at a clean exit).  The harness kills its
    children with SIGKILL, so the last engine of each child is not written: the sum
    over a run's lines is a lower bound."""

    def __init__(self, engine: str) -> None:
        import os

        self.engine = engine
        self.counts = {"makes": 0, "requests": 0, "steps": 0}
        self.pending = dict(self.counts)
        self.path = os.environ.get(TALLY_VARIABLE)
        if self.path:
            import atexit

            atexit.register(self.flush)

    def add(self, what: str) -> None:
        """Count one ``what`` (makes, requests, steps); a make first writes what the engine before it ran."""
        if what == "makes":
            self.flush()
        self.counts[what] += 1
        self.pending[what] += 1

    def flush(self) -> None:
        """Append the counts since the last line, if any and if the variable names a file."""
        if not self.path or not any(self.pending.values()):
            return
        import json

        with open(self.path, "a") as handle:
            handle.write(json.dumps(dict(self.pending, engine=self.engine)) + "\n")
        self.pending = dict.fromkeys(self.pending, 0)
