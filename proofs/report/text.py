"""The counterexample report: stable text a person reads at a glance.

First line: the invariant and the engine.  Then the shortest input as runnable
Python, then what breaks the claim, then expected versus actual at the first tick
where they part and the timeline picture.  No timestamps, no random text: the same
counterexample always prints the same report.
"""

from __future__ import annotations

from proofs import models
from proofs.counterexample import Counterexample


def format_counterexample(cex: Counterexample, actual=None) -> list[str]:
    """The report's lines; ``actual`` is the target's result on the input, when it returned one."""
    model = models.get(cex.model)
    if cex.check == "stateful":  # the message is the failing program of calls (proofs.online.stateful)
        calls = sum(1 for line in cex.message.splitlines() if line and not line.startswith("#"))
        return [f"FAIL {cex.property}  engine={cex.engine}  (stateful: {calls} calls)", *cex.message.splitlines()]
    noun = model.noun[0] if cex.size == 1 else model.noun[1]
    lines = [f"FAIL {cex.property}  engine={cex.engine}  (shrunk: {cex.size} {noun})", cex.input_repr()]
    lines += [f"# {line}" for line in cex.message.splitlines() or [""]]
    if cex.check == "validation":
        lines.append(f"expected  ValueError ({cex.rule})" if cex.rule else "expected  ValueError")
        return lines
    if not model.drawable(cex.call, actual):
        return lines
    return lines + model.timeline(cex.call, actual)


def coverage_names(coverage) -> tuple:
    """The corners of the coverage model that ``coverage`` counts, in registry order."""
    from proofs.search.coverage import names

    return names(coverage.model)


def drawable(call, result, model=None) -> bool:
    """True when ``call`` is valid and ``result`` has the contract's shape, so a timeline can be drawn."""
    return (model or models.get()).drawable(call, result)


def summary_line(verdict: str, target: str, found: int, examples: int, engine: str = "hypothesis", bounds=None,
                 coverage=None) -> str:
    """The last line of a verify run; a PASS states the calls made, the ranges they covered (``bounds``, measured)
    and, when corners were measured (``coverage``, proofs.search.coverage), how many were reached and which never."""
    if verdict == "pass":
        line = f"PASS {target}  engine={engine}"
        if examples:
            line += f"  {examples} calls"
            covered = bounds.describe() if bounds is not None else ""
            line += f"; {covered}" if covered else ""
        if coverage is not None and coverage.calls:
            total = len(coverage_names(coverage))
            never = coverage.unreached()
            line += f"; corners: {total - len(never)} of {total} reached"
            line += f", never: {', '.join(never)}" if never else ""
        return line
    if verdict == "fail":
        noun = "counterexample" if found == 1 else "counterexamples"
        return f"FAIL {target}: {found} {noun}"
    if verdict == "incomplete":
        return f"INCOMPLETE {target}: nothing broken, but not every planned check finished"
    if verdict == "unknown":
        return f"UNKNOWN {target}: nothing broken, but not everything could be checked"
    return f"ERROR {target}: nothing broken, but not everything could be checked"
