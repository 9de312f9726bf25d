"""The counterexample report: stable text a person reads at a glance.

First line: the invariant and the engine.  Then the shortest input as runnable
Python, then what breaks the claim, then expected versus actual at the first tick
where they part and the timeline picture.  No timestamps, no random text: the same
counterexample always prints the same report.
"""

from __future__ import annotations

from proofs import models
from proofs.counterexample import Counterexample, python_literal

PICTURE_LIMIT = 30  # jobs (requests) beyond which an unminimised call's timeline is left out
HISTORY_SHOWN = 3
HISTORY_WIDTH = 160  # characters of each history call printed  # calls of a history printed (the latest); all of them are saved with the counterexample


def format_counterexample(cex: Counterexample, actual=None) -> list[str]:
    """The report's lines; ``actual`` is the target's result on the input, when it returned one."""
    model = models.get(cex.model)
    if cex.check == "stateful":  # the message is the failing program of calls (proofs.online.stateful)
        calls = sum(1 for line in cex.message.splitlines() if line and not line.startswith("#"))
        lines = [f"FAIL {cex.property}  engine={cex.engine}  (stateful: {calls} calls)", *cex.message.splitlines()]
        if cex.reproduced == "no":
            lines.insert(1, "# did not reproduce: this program did not break it again on a fresh engine "
                            "(the bug depends on earlier calls or on chance)")
        return lines
    noun = model.noun[0] if cex.size == 1 else model.noun[1]
    lines = [f"FAIL {cex.property}  engine={cex.engine}  (shrunk: {cex.size} {noun})", cex.input_repr()]
    lines += [f"# {line}" for line in cex.message.splitlines() or [""]]
    lines += history_lines(cex)
    if cex.check == "validation":
        lines.append(f"expected  ValueError ({cex.rule})" if cex.rule else "expected  ValueError")
        return lines
    if not model.drawable(cex.call, actual):
        return lines
    picture = model.timeline(cex.call, actual)
    if cex.reproduced == "no" and cex.size > PICTURE_LIMIT:  # an unminimised call, as it was seen: the first difference only
        return lines + [line for line in picture if line.startswith("first difference:")] + [
            f"(no timeline: {cex.size} {noun}, not minimised since the failure did not happen again)"]
    return lines + picture


def history_lines(cex: Counterexample) -> list[str]:
    """What came before the call, when the failure needs it: how many calls, and the latest of them."""
    if not cex.history or cex.reproduced not in ("history", "no"):
        return []
    model = models.get(cex.model)
    total = len(cex.history) + cex.history_cut
    first = ("# history: it fails in a fresh process after these calls" if cex.reproduced == "history"
             else "# history: it was seen after these calls of its process")
    lines = [f"{first} ({total}, saved with it; `schedcheck replay` makes them first):"]
    shown = cex.history[-HISTORY_SHOWN:]
    if len(cex.history) > len(shown):
        earlier = total - len(shown)
        lines.append(f"#   ... {earlier} earlier call{'s' if earlier > 1 else ''}")
    for call in shown:
        text = model.call_repr(call, python_literal)
        if len(text) > HISTORY_WIDTH:
            text = text[:HISTORY_WIDTH] + f"...  ({model.size(call)} {model.noun[1]})"
        lines.append(f"#   {text}")
    return lines


def coverage_names(coverage) -> tuple:
    """The corners of the coverage model that ``coverage`` counts, in registry order."""
    return coverage.names()


def drawable(call, result, model=None) -> bool:
    """True when ``call`` is valid and ``result`` has the contract's shape, so a timeline can be drawn."""
    return (model or models.get()).drawable(call, result)


def summary_line(verdict: str, target: str, found: int, examples: int, engine: str = "hypothesis", bounds=None,
                 coverage=None) -> str:
    """The last line of a verify run; a PASS states the calls made, the ranges they covered (``bounds``, measured)
    and, when corners were measured (``coverage``, proofs.search.coverage), how many were reached and which never.

    Only a run with no counterexample says "nothing broken": every result or exception that
    broke an invariant is a counterexample (a FAIL), so a run that is not a FAIL saw none."""
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
    assert not found, f"summary_line: verdict {verdict!r} with {found} counterexamples"
    if verdict == "incomplete":
        return f"INCOMPLETE {target}: nothing broken, but not every planned check finished"
    if verdict == "unknown":
        return f"UNKNOWN {target}: nothing broken, but not everything could be checked"
    return f"ERROR {target}: nothing broken, but not everything could be checked"


def flaky_note(flaky: list[dict]) -> str:
    """What the verdict line says of the flaky failures (time-outs and deaths that passed on a retry), or ""."""
    if not flaky:
        return ""
    kinds: dict[str, int] = {}
    for entry in flaky:
        kind = entry.get("kind", "failure")
        kinds[kind] = kinds.get(kind, 0) + 1
    counted = ", ".join(f"{n} flaky {kind}{'s' if n > 1 else ''}" for kind, n in kinds.items())
    first = flaky[0]
    return (f" ({counted}, not counted: it passed on a retry with a larger limit; first: {first.get('invariant')} "
            f"on a call of size {first.get('size')})")
