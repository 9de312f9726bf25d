"""The counterexample report: stable text a person reads at a glance.

First line: the invariant and the engine.  Then the shortest input as runnable
Python, then what breaks the claim, then expected versus actual at the first tick
where they part and the timeline picture.  No timestamps, no random text: the same
counterexample always prints the same report.
"""

from __future__ import annotations

import spec
from proofs.counterexample import Counterexample
from spec.observation import Observation, observe
from spec.oracle import first_difference
from proofs.report.timeline import render


def format_counterexample(cex: Counterexample, actual=None) -> list[str]:
    """The report's lines; ``actual`` is the target's result on the input, when it returned one."""
    noun = "job" if cex.size == 1 else "jobs"
    lines = [f"FAIL {cex.property}  engine={cex.engine}  (shrunk: {cex.size} {noun})", cex.input_repr()]
    lines += [f"# {line}" for line in cex.message.splitlines() or [""]]
    if cex.check == "validation":
        lines.append(f"expected  ValueError ({cex.rule})" if cex.rule else "expected  ValueError")
        return lines
    if not drawable(cex.call, actual):
        return lines
    expected = spec.run(*cex.call)
    difference = first_difference(expected, actual)
    focus = None
    if difference is not None:
        focus = difference.tick
        lines.append(f"first difference: {difference.message}")
    lines += render(expected["trace"], actual["trace"], focus)
    return lines


def drawable(call, result) -> bool:
    """True when ``call`` is valid and ``result`` has the contract's shape, so a timeline can be drawn."""
    if not spec.is_valid(*call):
        return False
    try:
        return isinstance(observe(spec.validate(*call), call[1], call[2], result), Observation)
    except Exception:  # a hostile result: draw no picture
        return False


def summary_line(verdict: str, target: str, found: int, examples: int) -> str:
    """The last line of a verify run."""
    if verdict == "pass":
        tried = f" in {examples} calls" if examples else ""
        return f"PASS {target}: no invariant broken{tried}"
    if verdict == "fail":
        noun = "counterexample" if found == 1 else "counterexamples"
        return f"FAIL {target}: {found} {noun}"
    if verdict == "incomplete":
        return f"INCOMPLETE {target}: nothing broken, but not every planned check finished"
    if verdict == "unknown":
        return f"UNKNOWN {target}: nothing broken, but not everything could be checked"
    return f"ERROR {target}: nothing broken, but not everything could be checked"
