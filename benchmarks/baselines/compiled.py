"""This tree's ``spec`` compiled with mypyc, imported beside the pure-Python one, for side-by-side timing.

``compiled_spec(scratch, modules)`` copies ``spec/`` under ``scratch``, compiles the
named modules with mypyc (the C extension of each sits beside its source, which it
shadows on import; the others stay Python), and imports the package under its own
names as ``spec_at`` does, so that one process can time the compiled ``check`` and the
pure-Python one in turn.  The source compiled is the source of this tree: nothing is
rewritten for the compiler.  mypyc is not a dependency of schedcheck: it comes with
``mypy`` (measured with mypy 2.4.1, ``pip install mypy==2.4.1``), and a C compiler and
Python's headers must be present.  A build takes a few minutes; ``scratch`` is reused
when it already holds one of the same source.
"""

from __future__ import annotations

import hashlib
import pathlib
import shutil
import subprocess
import sys

from benchmarks.baselines.spec_at import ROOT, import_from

CHAPTER = ("spec/domain.py", "spec/state.py", "spec/metrics.py", "spec/observation.py", "spec/result_checks.py",
           "spec/oracle.py", "spec/registry.py")


def _digest(modules: tuple) -> str:
    hashed = hashlib.sha256()
    for path in sorted((ROOT / "spec").rglob("*.py")):
        hashed.update(str(path.relative_to(ROOT)).encode() + path.read_bytes())
    hashed.update(repr(modules).encode())
    return hashed.hexdigest()


def compiled_spec(scratch: str | pathlib.Path, modules: tuple = CHAPTER) -> dict:
    """The modules ``spec`` and ``spec.serving`` (and what they import) with ``modules`` compiled, by module name."""
    scratch = pathlib.Path(scratch)
    stamp = scratch / "built-from"
    digest = _digest(modules)
    if not (stamp.exists() and stamp.read_text() == digest):
        if scratch.exists():
            shutil.rmtree(scratch)
        scratch.mkdir(parents=True)
        shutil.copytree(ROOT / "spec", scratch / "spec", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        build = subprocess.run([sys.executable, "-m", "mypyc", *modules], cwd=scratch, capture_output=True, text=True)
        if build.returncode != 0:
            raise SystemExit(f"mypyc failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}")
        stamp.write_text(digest)
    old = import_from(scratch)
    compiled = [name for name, module in old.items() if str(getattr(module, "__file__", "")).endswith(".so")]
    assert compiled, "no module of the compiled build was loaded"
    return old
