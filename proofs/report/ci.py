"""JUnit XML and SARIF 2.1.0 from the ``--json`` reports of ``verify``, ``diff`` and ``prove``.

What it establishes: nothing new.  It only re-renders a report dict that a command
has already written, for the two formats CI systems read: JUnit XML (test
dashboards: one testcase per invariant, claim or difference, a failure carrying the
counterexample) and SARIF 2.1.0 (code scanning: one result per counterexample,
refuted claim or regression, ruleId the invariant's name, located at the target
function's ``def`` line).

Assumptions: the report dicts have the shapes the commands write (docs/ci.md lists
them).  Locating a target never imports it: the file is parsed with ``ast`` and a
module name is resolved with the import system's finders only, so a target whose
import crashes or hangs cannot take the report down.  Output is stable: the same
report gives byte-identical files (no timestamps, no absolute paths for files
under the working directory).
"""

from __future__ import annotations

import argparse
import ast
import importlib.machinery
import importlib.util
import json
import os
import pathlib
import re
import shlex
import sys
import xml.etree.ElementTree as ET

SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SARIF_VERSION = "2.1.0"
KINDS = ("verify", "diff", "prove")
SIGNATURE = "signature"
SIGNATURE_CLAIM = "The target can be called as schedule(jobs, slots, continuous)."
DEFAULT_SAVE_DIR = os.path.join(".schedcheck", "counterexamples")  # verify's --save-dir default


# --- the command-line side ----------------------------------------------------------


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--junit PATH`` and ``--sarif PATH`` to a subcommand's parser."""
    parser.add_argument("--junit", metavar="PATH", help="also write the report as JUnit XML (one testcase per invariant or claim)")
    parser.add_argument("--sarif", metavar="PATH", help="also write the report as SARIF 2.1.0 (one result per counterexample)")


def write_outputs(args: argparse.Namespace, kind: str, report: dict, target_text: str | None,
                  category: str | None = None) -> list[str]:
    """Write ``args.junit`` and ``args.sarif`` (when given) for ``report``; return the paths written.

    Called by a command after it has written ``--json``; ``report`` is the dict it wrote."""
    save_dir = getattr(args, "save_dir", None) or DEFAULT_SAVE_DIR
    written = []
    if getattr(args, "junit", None):
        _write_text(args.junit, junit_xml(kind, report, target_text, save_dir=save_dir))
        written.append(args.junit)
    if getattr(args, "sarif", None):
        _write_text(args.sarif, sarif_text(sarif_log(kind, report, target_text, save_dir=save_dir, category=category)))
        written.append(args.sarif)
    return written


def write_reports(kind: str, report: dict, target_text: str | None, junit_path: str | None, sarif_path: str | None,
                  save_dir: str = DEFAULT_SAVE_DIR, category: str | None = None) -> None:
    """``write_outputs`` without an argparse namespace (for ``schedcheck gate``)."""
    args = argparse.Namespace(junit=junit_path, sarif=sarif_path, save_dir=save_dir)
    write_outputs(args, kind, report, target_text, category)


def _write_text(path: str, text: str) -> None:
    # the folder exists: every command checks its output paths first (proofs.cli.paths)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


# --- what each report says ----------------------------------------------------------


def saved_path(save_dir: str, target: str, invariant: str) -> str:
    """Where ``verify`` saved the counterexample to ``invariant`` on ``target`` (as proofs.counterexample.save names it)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", target).strip("_")[-80:]
    return os.path.join(save_dir, f"{slug}-{invariant}.json")


def replay_command(save_dir: str, target: str, invariant: str) -> str:
    return f"schedcheck replay {shlex.quote(saved_path(save_dir, target, invariant))} {shlex.quote(target)}"


def _registry(model: str | None = None, policy: str | None = None) -> list[tuple[str, str, str, str]]:
    """(name, family, claim, full description) for every invariant the model judges by, then ``signature``."""
    from proofs import models

    judged_by = models.get(model, policy)
    rows = [(inv.name, inv.family, inv.claim, " ".join(inv.doc.split())) for inv in judged_by.invariants]
    return rows + [(SIGNATURE, "call", SIGNATURE_CLAIM, SIGNATURE_CLAIM)]


def counterexample_text(cex: dict, target: str, save_dir: str) -> str:
    """The counterexample report (as ``verify`` prints it, less the timeline) and its replay command."""
    lines = None
    try:
        from proofs.counterexample import Counterexample
        from proofs.report.text import format_counterexample

        lines = format_counterexample(Counterexample.from_json(cex), None)
    except Exception:  # an input_repr this build cannot parse: fall back to the raw fields
        lines = [f"FAIL {cex.get('property')}  engine={cex.get('engine')}", str(cex.get("input_repr"))]
        lines += [f"# {line}" for line in str(cex.get("message", "")).splitlines()]
    lines.append(f"replay: {replay_command(save_dir, target, cex.get('property', ''))}")
    return "\n".join(lines)


def _verify_cases(report: dict, target: str, save_dir: str) -> list[dict]:
    by_name: dict[str, list[dict]] = {}
    for cex in report.get("counterexamples", []):
        by_name.setdefault(cex.get("property", ""), []).append(cex)
    contracts: dict[str, list[dict]] = {}
    for contract in report.get("contracts", []):  # CrossHair's ledger
        contracts.setdefault(contract.get("name", ""), []).append(contract)
    names = [row[0] for row in _registry(report.get("model"), report.get("policy"))]
    names += sorted(n for n in set(by_name) | set(contracts) if n not in names)  # never lose a finding
    blocked = SIGNATURE in by_name  # nothing else was checked
    cases = []
    for name in names:
        found = by_name.get(name, [])
        mine = contracts.get(name, [])
        unknown = [c for c in mine if c.get("outcome") == "unknown"]
        waiting = [c for c in mine if c.get("outcome") == "incomplete"]
        if found:
            first = found[0]
            cases.append({
                "name": name, "outcome": "failure", "type": "counterexample",
                "message": f"{name} broken by {first.get('input_repr')}"[:500],
                "text": "\n\n".join(counterexample_text(c, target, save_dir) for c in found),
            })
        elif unknown:
            cases.append({"name": name, "outcome": "error", "type": "unknown",
                          "message": f"{name}: CrossHair could not check {len(unknown)} contract(s); unknown is never a pass",
                          "text": _contract_text(mine)})
        elif waiting:
            cases.append({"name": name, "outcome": "error", "type": "incomplete",
                          "message": f"{name}: {len(waiting)} CrossHair contract(s) did not run their planned time; "
                                     "incomplete is never a pass",
                          "text": _contract_text(mine)})
        elif blocked:
            cases.append({"name": name, "outcome": "skipped",
                          "message": "not checked: the target cannot be called as schedule(jobs, slots, continuous)"})
        else:
            case = {"name": name, "outcome": "passed"}
            if mine:  # confirmed within its bounds, or bounded (searched its planned time): say which
                case["text"] = _contract_text(mine)
            cases.append(case)
    for account in report.get("checks", []):  # the Hypothesis engine's checks: how far each got
        name = f"hypothesis:{account.get('check')}"
        tried = f"tried {account.get('tried')} of {account.get('planned')} planned {account.get('unit', 'calls')}"
        if account.get("finished"):
            cases.append({"name": name, "outcome": "passed", "text": f"{tried}; finished"})
        elif account.get("stopped") == "counterexample":
            cases.append({"name": name, "outcome": "skipped",
                          "message": f"{tried}; stopped at the first counterexample (run with --all to go on)"})
        else:
            budget = report.get("budget_to_finish")
            hint = f"; --budget {budget} would finish it (estimated)" if budget else ""
            cases.append({"name": name, "outcome": "error", "type": "incomplete",
                          "message": f"{account.get('check')}: {tried}; not finished ({account.get('stopped')}){hint}; "
                                     "incomplete is never a pass",
                          "text": f"{tried}; not finished ({account.get('stopped')}){hint}"})
    return cases


def _contract_text(contracts: list[dict]) -> str:
    lines = []
    for c in contracts:
        outcome = c.get("outcome")
        detail = f"within bounds: {c.get('bounds')}" if outcome == "confirmed" else str(c.get("message", ""))
        lines.append(f"crosshair  {c.get('name')}  {c.get('subject')}: {outcome}: {detail}")
    return "\n".join(lines)


PROVE_FIELDS = ("status", "kind", "method", "bound", "hypotheses_satisfiable", "refuted_by")


def _prove_cases(report: dict) -> list[dict]:
    cases = []
    for row in report.get("results", []):
        claim, status = row.get("claim", ""), row.get("status")
        header = (f"{claim}: {status} ({row.get('method')}, {row.get('bound')}, hypotheses satisfiable: "
                  f"{row.get('hypotheses_satisfiable')}, refuted by mutant {row.get('refuted_by')})")
        fields = {"properties": {k: str(row.get(k)) for k in PROVE_FIELDS}, "seconds": row.get("seconds")}
        if _prove_passes(row):
            cases.append({"name": claim, "outcome": "passed", **fields})
        elif status == "refuted":
            cases.append({"name": claim, "outcome": "failure", "type": "refuted",
                          "message": header, "text": _prove_text(row), **fields})
        else:
            cases.append({"name": claim, "outcome": "error", "type": str(status),
                          "message": header + f": {status} is never a pass", "text": _prove_text(row), **fields})
    return cases


def _prove_passes(row: dict) -> bool:
    """A ledger row that passes (``proofs.smt.run.passes``): proved, by construction, lemma, checked, or a finding's
    conjecture refuted (its expected result)."""
    from proofs.smt.run import passes

    return passes(row)


def _prove_text(row: dict) -> str:
    claim = row.get("claim", "")
    lines = [f"{claim}: {row.get('status')}  engine=z3  method={row.get('method')}  bound={row.get('bound')}  "
             f"hypotheses_satisfiable={row.get('hypotheses_satisfiable')}  refuted_by={row.get('refuted_by')}"]
    cex = row.get("counterexample")
    if isinstance(cex, dict) and "field" in cex and "state" in cex:  # the encoding disagrees with the spec that runs
        lines.append(f"state (n={cex.get('n')}): {cex['state']}")
        lines.append(f"field: {cex['field']}: the spec gives {cex.get('spec')!r}, the encoding {cex.get('encoding')!r}")
    elif isinstance(cex, dict) and "call" in cex:
        lines.append(f"breaks {cex.get('breaks', claim)}: {cex['call']}")
        if "after_steps" in cex:
            lines.append(f"# after {cex['after_steps']} step(s): {json.dumps(cex.get('state'), sort_keys=True, default=str)}")
        if cex.get("served_per_step"):
            lines.append(f"# served per step: {cex['served_per_step']}")
    elif cex:
        lines.append(f"counterexample: {json.dumps(cex, sort_keys=True, default=str)}")
    lines.append(f"replay: schedcheck prove --claims {shlex.quote(claim)}")
    return "\n".join(lines)


def _diff_command(report: dict) -> str:
    old, new = str(report.get("old", "")), str(report.get("new", ""))
    base = old.rpartition("@")[2] if "@" in old else None
    if base:
        return f"schedcheck diff --base {shlex.quote(base)}"
    return f"schedcheck diff {shlex.quote(old)} {shlex.quote(new)}"


def _diff_text(report: dict, difference: dict) -> str:
    old, new = difference.get("old", {}), difference.get("new", {})
    lines = [
        f"DIFF {difference.get('classification')}  engine={difference.get('engine')}",
        str(difference.get("input_repr")),
        f"old ({report.get('old')}): {old.get('behaviour')}; breaks {', '.join(old.get('broken', [])) or 'nothing'}",
        f"new ({report.get('new')}): {new.get('behaviour')}; breaks {', '.join(new.get('broken', [])) or 'nothing'}",
        f"replay: {_diff_command(report)}",
    ]
    return "\n".join(lines)


def _newly_broken(difference: dict) -> list[str]:
    old = difference.get("old", {}).get("broken", [])
    return [name for name in difference.get("new", {}).get("broken", []) if name not in old]


def _diff_cases(report: dict) -> list[dict]:
    cases = []
    for number, difference in enumerate(report.get("differences", []), 1):
        classification = difference.get("classification", "")
        name = f"difference_{number}_{classification.replace(' ', '_')}"
        if classification == "fix":
            cases.append({"name": name, "outcome": "passed"})
        else:
            broken = _newly_broken(difference)
            message = f"{classification}: {difference.get('input_repr')}"
            if broken:
                message = f"{classification}: new breaks {', '.join(broken)} on {difference.get('input_repr')}"
            cases.append({"name": name, "outcome": "failure", "type": classification,
                          "message": message[:500], "text": _diff_text(report, difference)})
    if not cases and report.get("unfinished"):  # nothing differed in what ran, but not all of it ran
        cases.append({"name": "no_difference", "outcome": "error", "type": "incomplete",
                      "message": f"the budget ran out during {', '.join(report['unfinished'])}; incomplete is never a pass",
                      "text": f"unfinished: {', '.join(report['unfinished'])}"})
    if not cases:
        cases.append({"name": "no_difference", "outcome": "passed"})
    return cases


# --- JUnit XML ------------------------------------------------------------------------


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_safe(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot carry written as \\xNN."""
    return _XML_BAD.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def junit_xml(kind: str, report: dict, target_text: str | None = None, save_dir: str = DEFAULT_SAVE_DIR) -> str:
    """The report as a JUnit XML document (testsuites > testsuite > testcase)."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: expected one of {KINDS}")
    if kind == "verify":
        target = report.get("target") or target_text or ""
        cases = _verify_cases(report, target, save_dir)
        title = f"schedcheck verify {target}"
    elif kind == "diff":
        target = f"{report.get('old')} -> {report.get('new')}"
        cases = _diff_cases(report)
        title = f"schedcheck diff {target}"
    else:
        target = target_text or "spec"
        cases = _prove_cases(report)
        title = "schedcheck prove"
    return _junit_document(kind, title, cases, report.get("seconds"),
                           {"target": target, "verdict": str(report.get("verdict"))})


def error_junit(kind: str, target_text: str | None, message: str) -> str:
    """A JUnit document for a command that could not run (exit 2 without a report)."""
    case = {"name": kind, "outcome": "error", "type": "error", "message": message.splitlines()[0][:500] if message else "error",
            "text": message}
    return _junit_document(kind, f"schedcheck {kind} {target_text or ''}".rstrip(), [case], None,
                           {"target": target_text or "", "verdict": "error"})


def _junit_document(kind: str, title: str, cases: list[dict], seconds, properties: dict) -> str:
    counts = {outcome: sum(c["outcome"] == outcome for c in cases) for outcome in ("failure", "error", "skipped")}
    totals = {
        "tests": str(len(cases)),
        "failures": str(counts["failure"]),
        "errors": str(counts["error"]),
        "skipped": str(counts["skipped"]),
    }
    if isinstance(seconds, (int, float)):
        totals["time"] = f"{seconds:.3f}"
    root = ET.Element("testsuites", {"name": _xml_safe(title), **totals})
    suite = ET.SubElement(root, "testsuite", {"name": _xml_safe(title), **totals})
    props = ET.SubElement(suite, "properties")
    for key, value in properties.items():
        ET.SubElement(props, "property", {"name": key, "value": _xml_safe(value)})
    for case in cases:
        element = ET.SubElement(suite, "testcase", {"classname": f"schedcheck.{kind}", "name": _xml_safe(case["name"])})
        if isinstance(case.get("seconds"), (int, float)):
            element.set("time", f"{case['seconds']:.3f}")
        if case.get("properties"):
            case_props = ET.SubElement(element, "properties")
            for key, value in case["properties"].items():
                ET.SubElement(case_props, "property", {"name": key, "value": _xml_safe(value)})
        if case["outcome"] in ("failure", "error"):
            child = ET.SubElement(element, case["outcome"], {"type": _xml_safe(case["type"]), "message": _xml_safe(case["message"])})
            child.text = _xml_safe(case.get("text", ""))
        elif case["outcome"] == "skipped":
            ET.SubElement(element, "skipped", {"message": _xml_safe(case["message"])})
        if case["outcome"] != "failure" and case["outcome"] != "error" and case.get("text"):
            ET.SubElement(element, "system-out").text = _xml_safe(case["text"])
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# --- locating a target without importing it -------------------------------------------


def locate(target_text: str | None, root: str | None = None) -> tuple[str, int] | None:
    """(file, line of the ``def``) for ``file.py:function`` or ``package.module:function``, without importing it.

    The line is 1 when the file is found but the function is not defined in it (it is
    made at run time, say); None when the file itself cannot be found."""
    if not target_text:
        return None
    where, sep, function = target_text.partition("@")[0].rpartition(":")
    if not sep or not where:
        return None
    if where.endswith(".py") or "/" in where or os.sep in where:
        path = os.path.abspath(os.path.join(root or os.getcwd(), where))
        if not os.path.isfile(path):
            return None
    else:
        path = module_file(where, root)
        if path is None:
            return None
    found = _definition(path, function, depth=0)
    return found if found is not None else (path, 1)


def module_file(name: str, root: str | None = None) -> str | None:
    """The source file of module ``name``, found with the import system's finders only (nothing is imported)."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    search = [root or os.getcwd()] + [p for p in sys.path if p]
    try:
        spec = importlib.machinery.PathFinder.find_spec(parts[0], search)
        if spec is None:
            spec = importlib.util.find_spec(parts[0])  # top level only: finds without importing
        for depth in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), list(spec.submodule_search_locations))
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py") or not os.path.isfile(spec.origin):
        return None
    return spec.origin


def _definition(path: str, name: str, depth: int) -> tuple[str, int] | None:
    """Where ``name`` is bound at the top level of ``path``, following ``from ... import name``."""
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    imported = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return path, node.lineno
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return path, node.lineno
        if isinstance(node, ast.ImportFrom) and imported is None:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    imported = (node, alias.name)
    if imported is None or depth >= 5:
        return None
    node, original = imported
    source = _import_source(path, node)
    if source is None:
        return None
    return _definition(source, original, depth + 1) or (source, 1)


def _import_source(path: str, node: ast.ImportFrom) -> str | None:
    parts = (node.module or "").split(".") if node.module else []
    if node.level == 0:
        return module_file(node.module or "", os.path.dirname(path))
    directory = os.path.dirname(path)
    for _ in range(node.level - 1):
        directory = os.path.dirname(directory)
    candidate = os.path.join(directory, *parts)
    for option in (candidate + ".py", os.path.join(candidate, "__init__.py")):
        if parts and os.path.isfile(option):
            return option
    return None


def _artifact_location(path: str, root: str | None) -> dict:
    base = os.path.abspath(root or os.getcwd())
    absolute = os.path.abspath(path)
    if absolute == base or absolute.startswith(base.rstrip(os.sep) + os.sep):
        return {"uri": pathlib.PurePath(os.path.relpath(absolute, base)).as_posix(), "uriBaseId": "%SRCROOT%"}
    return {"uri": pathlib.Path(absolute).as_uri()}


def _location(target_text: str | None, root: str | None) -> list[dict]:
    found = locate(target_text, root)
    if found is None:
        return []
    path, line = found
    return [{"physicalLocation": {"artifactLocation": _artifact_location(path, root), "region": {"startLine": line}}}]


def _invariant_location(name: str, root: str | None) -> list[dict]:
    """The claim's own definition in spec/invariants.py (for a Z3 claim, which is about the spec)."""
    path = module_file("spec.invariants", root)
    if path is None:
        return []
    found = _definition(path, name, depth=5)
    line = found[1] if found else _string_line(path, name)
    return [{"physicalLocation": {"artifactLocation": _artifact_location(path, root), "region": {"startLine": line}}}]


def _string_line(path: str, text: str) -> int:
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return 1
    lines = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value == text]
    return min(lines) if lines else 1


# --- SARIF 2.1.0 ------------------------------------------------------------------------


def _tool_version() -> str:
    try:
        from importlib.metadata import version

        return version("schedcheck")
    except Exception:  # not installed (run from a checkout): the version is unknown, not fatal
        return "0.0.0"


def _prove_rule(row: dict) -> str:
    """The invariant a refuted Z3 claim is about: its counterexample's ``breaks``, else the claim's own name."""
    import spec

    cex = row.get("counterexample")
    if isinstance(cex, dict) and cex.get("breaks") in spec.BY_NAME:
        return cex["breaks"]
    claim = str(row.get("claim", ""))
    head = re.split(r"[ :(]", claim, maxsplit=1)[0]
    return head if head in spec.BY_NAME else claim


def _results(kind: str, report: dict, target_text: str | None, save_dir: str, root: str | None) -> list[tuple[str, str, list, dict]]:
    """(ruleId, message text, locations, properties) for each result."""
    out = []
    if kind == "verify":
        target = report.get("target") or target_text or ""
        locations = _location(target, root)
        for cex in report.get("counterexamples", []):
            name = cex.get("property", "")
            text = (
                f"{name} broken (engine={cex.get('engine')}): {_claim_of(name, report.get('model'), report.get('policy'))}\n"
                f"minimal input: {cex.get('input_repr')}\n"
                + "".join(f"{line}\n" for line in str(cex.get("message", "")).splitlines())
                + f"replay: {replay_command(save_dir, target, name)}"
            )
            properties = {"engine": cex.get("engine"), "check": cex.get("check"), "input_repr": cex.get("input_repr"),
                          "replay": replay_command(save_dir, target, name)}
            if cex.get("reproduced"):  # how it reproduced: alone, after its history, or not (docs/verify.md)
                properties["reproduced"] = cex["reproduced"]
            out.append((name, text, locations, properties))
    elif kind == "diff":
        locations = _location(report.get("new") or target_text, root)
        for difference in report.get("differences", []):
            if difference.get("classification") != "regression":
                continue
            broken = _newly_broken(difference) or ["regression"]
            text = (
                f"regression: {report.get('new')} breaks {', '.join(broken)}, which {report.get('old')} kept\n"
                f"minimal input: {difference.get('input_repr')}\n"
                f"old: {difference.get('old', {}).get('behaviour')}\n"
                f"new: {difference.get('new', {}).get('behaviour')}\n"
                f"replay: {_diff_command(report)}"
            )
            properties = {"engine": difference.get("engine"), "input_repr": difference.get("input_repr"),
                          "replay": _diff_command(report)}
            out.append((broken[0], text, locations, properties))
    else:
        for row in report.get("results", []):
            if row.get("status") != "refuted" or _prove_passes(row):
                continue
            rule = _prove_rule(row)
            cex = row.get("counterexample")
            call = cex.get("call") if isinstance(cex, dict) else None
            what = ("the Z3 encoding disagrees with the spec that runs (no proof of this run is reported)"
                    if row.get("kind") == "validation" else _claim_of(rule))
            text = (
                f"{row.get('claim')} refuted by Z3 ({row.get('method')}, {row.get('bound')}): {what}\n"
                + (f"minimal input: {call}\n" if call else "")
                + (f"counterexample: {json.dumps(cex, sort_keys=True, default=str)}\n" if cex and not call else "")
                + f"replay: schedcheck prove --claims {shlex.quote(str(row.get('claim')))}"
            )
            properties = {"engine": "z3", "claim": row.get("claim"), "method": row.get("method"), "bound": row.get("bound"),
                          "hypotheses_satisfiable": row.get("hypotheses_satisfiable"), "refuted_by": row.get("refuted_by"),
                          "seconds": row.get("seconds"),
                          "replay": f"schedcheck prove --claims {shlex.quote(str(row.get('claim')))}"}
            if call:
                properties["input_repr"] = call
            out.append((rule, text, _invariant_location(rule, root), properties))
    return out


def _claim_of(name: str, model: str | None = None, policy: str | None = None) -> str:
    for row in _registry(model, policy):
        if row[0] == name:
            return row[2]
    return f"the claim {name} holds."


def _rules(extra: list[str], model: str | None = None, policy: str | None = None) -> list[dict]:
    rules = []
    for name, family, claim, full in _registry(model, policy):
        rules.append({
            "id": name,
            "name": name,
            "shortDescription": {"text": claim},
            "fullDescription": {"text": full},
            "defaultConfiguration": {"level": "error"},
            "properties": {"family": family, "tags": ["schedcheck", family]},
        })
    for name in extra:
        if name not in {rule["id"] for rule in rules}:
            text = "NEW breaks an invariant that OLD kept." if name == "regression" else f"The claim {name} holds."
            rules.append({"id": name, "name": name, "shortDescription": {"text": text},
                          "defaultConfiguration": {"level": "error"}, "properties": {"tags": ["schedcheck"]}})
    return rules


def sarif_log(kind: str, report: dict, target_text: str | None = None, save_dir: str = DEFAULT_SAVE_DIR,
              root: str | None = None, category: str | None = None) -> dict:
    """The report as a SARIF 2.1.0 log (a dict): one run, one result per finding.

    ``root`` is the directory that file URIs are made relative to (default: the working
    directory, which is the repository's root in CI).  ``category`` names the run for code
    scanning (``runAutomationDetails.id``, default the kind): two logs uploaded together
    need two categories."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: expected one of {KINDS}")
    found = _results(kind, report, target_text, save_dir, root)
    rules = _rules([rule for rule, _, _, _ in found], report.get("model"), report.get("policy"))
    index = {rule["id"]: number for number, rule in enumerate(rules)}
    results = []
    for rule, text, locations, properties in found:
        result = {
            "ruleId": rule,
            "ruleIndex": index[rule],
            "kind": "fail",
            "level": "error",
            "message": {"text": text},
            "properties": {k: v for k, v in properties.items() if v is not None},
        }
        if locations:
            result["locations"] = locations
        results.append(result)
    log = _sarif_run(kind, rules, results, _invocation(kind, report), report, target_text, category)
    if kind == "prove":  # every row's ledger fields, proved ones included (results hold only the refuted)
        log["runs"][0]["properties"]["claims"] = [
            {k: row.get(k) for k in ("claim",) + PROVE_FIELDS + ("seconds",)} for row in report.get("results", [])
        ]
    return log


def error_sarif(kind: str, target_text: str | None, message: str, category: str | None = None) -> dict:
    """A SARIF log for a command that could not run: no results, an unsuccessful invocation."""
    invocation = {
        "executionSuccessful": False,
        "exitCode": 2,
        "toolExecutionNotifications": [{"level": "error", "message": {"text": message or f"schedcheck {kind} could not run"}}],
    }
    return _sarif_run(kind, _rules([]), [], invocation, {"verdict": "error"}, target_text, category)


def _invocation(kind: str, report: dict) -> dict:
    invocation: dict = {"executionSuccessful": True}
    if kind == "verify":
        notes = []
        for c in report.get("contracts", []):
            outcome = c.get("outcome")
            where = f"crosshair {c.get('name')} on {c.get('subject')}"
            if outcome in ("unknown", "incomplete"):
                notes.append({"level": "warning", "message": {"text": f"{where}: {outcome} (never a pass): {c.get('message')}"}})
            elif outcome == "bounded":
                notes.append({"level": "note", "message": {"text": f"{where}: bounded, not confirmed: {c.get('message')}"}})
            elif outcome == "confirmed":
                notes.append({"level": "note", "message": {"text": f"{where}: confirmed within bounds: {c.get('bounds')}"}})
        for a in report.get("checks", []):
            if not a.get("finished") and a.get("stopped") != "counterexample":
                notes.append({"level": "warning", "message": {"text": (
                    f"hypothesis {a.get('check')}: tried {a.get('tried')} of {a.get('planned')} planned "
                    f"{a.get('unit', 'calls')}, not finished ({a.get('stopped')}): incomplete (never a pass)")}})
        if notes:
            invocation["toolExecutionNotifications"] = notes
    if kind == "prove":
        unknown = [row for row in report.get("results", []) if row.get("status") in ("unknown", "vacuous")]
        if unknown:
            invocation["toolExecutionNotifications"] = [
                {"level": "warning",
                 "message": {"text": f"{row.get('claim')}: {row.get('status')} (never a pass); method {row.get('method')}, "
                                     f"bound {row.get('bound')}, hypotheses satisfiable: "
                                     f"{row.get('hypotheses_satisfiable')}, refuted by mutant {row.get('refuted_by')}"},
                 "properties": {k: row.get(k) for k in ("claim",) + PROVE_FIELDS + ("seconds",)}}
                for row in unknown
            ]
    return invocation


def _sarif_run(kind: str, rules: list, results: list, invocation: dict, report: dict, target_text: str | None,
               category: str | None = None) -> dict:
    version = _tool_version()
    properties = {"verdict": str(report.get("verdict"))}
    target = report.get("target") or (f"{report.get('old')} -> {report.get('new')}" if kind == "diff" else target_text)
    if target:
        properties["target"] = target
    if kind == "verify" and "checks" in report:
        properties["checks"] = report["checks"]  # calls tried, planned, finished: per check
    if kind == "verify" and report.get("contracts"):
        properties["contracts"] = [{k: c.get(k) for k in ("name", "subject", "outcome", "bounds") if c.get(k) is not None}
                                   for c in report["contracts"]]
    if report.get("budget_to_finish") is not None:
        properties["budget_to_finish"] = report["budget_to_finish"]
    return {
        "$schema": SARIF_SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {"name": "schedcheck", "version": version, "semanticVersion": version, "rules": rules}},
            "automationDetails": {"id": f"schedcheck/{category or kind}/"},
            "invocations": [invocation],
            "results": results,
            "columnKind": "unicodeCodePoints",
            "properties": properties,
        }],
    }


def sarif_text(log: dict) -> str:
    return json.dumps(log, indent=2) + "\n"
