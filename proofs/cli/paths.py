"""The one rule for every output path of every command, checked before any work is done.

A file option (``--json``, ``--junit``, ``--sarif``, ``--html``, ``replay --pytest``) names a file
whose folder exists and is writable, and which is not a folder itself; a folder option
(``--save-dir``, ``--db``, ``gate --out``) names a folder that exists or whose parent
folder exists and is writable (the folder itself is created).  schedcheck never creates
a missing parent folder of a path you name, so a typo cannot plant a tree of folders;
only its own default locations (``.schedcheck/...``, ``.hypothesis/examples``) are
created as needed.  A path that breaks the rule is a usage error (exit 2) naming the
option and the path.
"""

from __future__ import annotations

import os

OUTPUT_PATHS_HELP = """output paths (every command):
  --json, --junit, --sarif, --html and replay --pytest name a file in a folder that exists;
  --save-dir, --db and gate --out name a folder that exists or whose parent exists
  (the folder is created). A missing parent folder is a usage error (exit 2) naming
  the option and the path, reported before any work; only schedcheck's own default
  folders (.schedcheck/, .hypothesis/examples) are created as needed."""

HTML_HELP = "also write the report as one self-contained HTML page (inline CSS and SVG timelines; docs/report.md)"


def _parent(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))


def file_problem(option: str, path: str) -> str | None:
    """Why ``path`` cannot be written as the file of ``option``, or None."""
    if os.path.isdir(path):
        return f"{option} {path!r}: is a folder, expected a file name"
    folder = _parent(path)
    if not os.path.isdir(folder):
        return f"{option} {path!r}: the folder {os.path.dirname(path) or folder!r} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        return f"{option} {path!r}: not writable"
    return None


def folder_problem(option: str, path: str) -> str | None:
    """Why ``path`` cannot be used (or created) as the folder of ``option``, or None."""
    if os.path.isdir(path):
        return None if os.access(path, os.W_OK | os.X_OK) else f"{option} {path!r}: the folder is not writable"
    if os.path.exists(path):
        return f"{option} {path!r}: is a file, expected a folder"
    parent = _parent(path)
    if not os.path.isdir(parent):
        return f"{option} {path!r}: its parent folder {os.path.dirname(os.path.normpath(path)) or parent!r} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{option} {path!r}: cannot create it, its parent folder is not writable"
    return None


def output_problem(files: dict, folders: dict) -> str | None:
    """The first problem among the output paths ({option: path or None}), or None; the
    caller leaves out (or passes None for) a folder that is schedcheck's own default."""
    for option, path in files.items():
        if path:
            problem = file_problem(option, path)
            if problem:
                return problem
    for option, path in folders.items():
        if path:
            problem = folder_problem(option, path)
            if problem:
                return problem
    return None
