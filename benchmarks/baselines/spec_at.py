"""The ``spec`` package of an older commit, imported beside the current one, for side-by-side timing and tests.

``spec_at(commit, scratch)`` unpacks ``spec/`` of ``commit`` from this repository's
history (``git archive``) under ``scratch`` and imports it under its own names with
the current ``spec`` modules set aside, then puts them back: the returned modules keep
their own globals, so the old ``check`` runs the old code, the current one the current.
"""

from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def _ours(name: str) -> bool:
    return name == "spec" or name.startswith("spec.")


def spec_at(commit: str, scratch: str | pathlib.Path) -> dict:
    """The modules ``spec`` and ``spec.serving`` (and what they import) of ``commit``, by module name."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "spec"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive.stdout, check=True)
    return import_from(scratch)


def import_from(scratch: str | pathlib.Path) -> dict:
    """The package ``spec`` found under ``scratch`` (and ``spec.serving``), imported under its own names beside ours."""
    current = {name: module for name, module in sys.modules.items() if _ours(name)}
    for name in current:
        del sys.modules[name]
    sys.path.insert(0, str(scratch))
    try:
        importlib.import_module("spec")
        importlib.import_module("spec.serving")
        old = {name: module for name, module in sys.modules.items() if _ours(name)}
    finally:
        sys.path.remove(str(scratch))
        for name in [name for name in sys.modules if _ours(name)]:
            del sys.modules[name]
        sys.modules.update(current)
    assert pathlib.Path(old["spec"].__file__).is_relative_to(pathlib.Path(scratch)), "the old spec is not the commit's"
    return old
