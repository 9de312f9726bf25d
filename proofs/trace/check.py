"""The streaming trace checker: every state invariant of a model's registry, one trace entry at a time.

What it establishes: that the recorded run keeps every claim of the model's registry
that a trace can show (the type, safety and, unless ``policy="none"``, policy
families, and the trace's own consistency), each replayed by the model's incremental
replay, the same code that judges a whole result (``spec.serving.result_checks.Replay``
for the serving model, ``spec.result_checks.Replay`` for the chapter's).  What it assumes:
the header is the run's whole input (every request, with its arrival and abort).
Bounds: it reads the file once; it keeps the replay's state (per request, and the
live requests' blocks and queues) and a window of the last ``WINDOW`` entries, never
the trace, so its memory does not grow with the trace's length.  It stops at the
first entry during which an invariant breaks, reads a few entries more for the
picture, and reports the root cause of what it found there (``spec.registry.root_cause_first``: the
first family that breaks, then the earliest tick, registry order breaking ties).
"""

from __future__ import annotations

import collections
import json
from typing import Callable, NamedTuple

from proofs.trace.files import TraceFileError, lines, parse, read_header
from spec.registry import Violation, root_cause_first, type_error

WINDOW = 12  # entries kept before the failing one, and read after it, for the timeline
MAX_LANES = 12  # request lanes drawn in the serving picture


class TraceReport(NamedTuple):
    """What checking one trace file found."""

    verdict: str  # pass or fail
    model: str
    policy: str
    entries: int  # entries replayed
    last_tick: int | None
    violation: Violation | None
    line: int | None  # the line of the entry during which it was found (None: at the end)
    also: tuple  # the other invariants broken in that entry, registry order
    timeline: list  # the picture's lines
    window: tuple = ()  # the entries the picture draws (the HTML report draws them as SVG)
    held_before: int = 0  # KV blocks held before the first of them
    lanes: tuple = ()  # serving: the header's records of the requests drawn ({"id", "arrival", "prompt", "output"})
    config: dict | None = None  # serving: the header's config

    def to_json(self) -> dict:
        """The ``--json`` report."""
        out = {
            "verdict": self.verdict, "model": self.model, "policy": self.policy,
            "entries": self.entries, "last_tick": self.last_tick, "violation": None,
        }
        if self.violation is not None:
            v = self.violation
            out["violation"] = {
                "invariant": v.invariant, "message": v.message, "tick": v.tick, "line": self.line,
                "ids": list(v.ids) or ([] if v.job is None else [v.job]),
                "expected": _plain(v.expected), "actual": _plain(v.actual), "also": list(self.also),
            }
            out["timeline"] = list(self.timeline)
        return out


def _plain(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


class _ServingStream:
    """The serving model's replay behind a stream of JSON entries."""

    def __init__(self, header: dict, policy: str) -> None:
        import spec.serving as serving
        from spec.serving.observation import read_entry
        from spec.serving.result_checks import Replay

        if policy not in serving.POLICIES:
            raise ValueError(f"--policy {policy!r}: expected one of {', '.join(serving.POLICIES)} for the serving model")
        self.requests, self.config = serving.validate(header["requests"], header["config"])
        self.raw_config = header["config"]
        self.by_id = {r.id: r for r in self.requests}
        self.known = set(self.by_id)
        self.replay = Replay(self.requests, self.config, policy, records=False)
        self.registry = serving.INVARIANTS
        self.read_entry = read_entry

    def entry(self, number: int, value) -> Violation | None:
        tick = self.read_entry(number, value, self.known, where=f"line {number}")
        if isinstance(tick, Violation):
            return tick
        missing = self.missing_before(tick.tick)
        if missing is not None:
            return missing
        self.replay.tick(tick)
        return None

    def missing_before(self, tick: int) -> Violation | None:
        """The ticks missing before ``tick`` while requests were running, said first: a running request is scheduled
        (or preempted, aborted) in every tick, so its tick has an entry, and a later symptom (a block handed out
        again, say) would otherwise be reported in its place."""
        previous = self.replay.previous_tick
        running = list(self.replay.running.after)
        if previous is None or tick <= previous + 1 or not running:
            return None
        gap = f"tick {previous + 1} is" if tick == previous + 2 else f"ticks {previous + 1}-{tick - 1} are"
        return Violation("metrics_consistent",
                         f"{gap} missing: requests {_id_ranges(running)} were running (after tick {previous}), so "
                         f"every tick has an entry until they end: a line dropped from the log, or ticks the engine "
                         f"skipped", tick=previous + 1, ids=tuple(running))

    def held(self) -> int:
        return len(self.replay.owner)

    def end(self, totals: dict | None) -> Violation | None:
        from spec.serving.metrics import TOTAL_KEYS

        self.replay.end()
        if totals is None:
            return None
        for key in TOTAL_KEYS:
            if key not in totals:
                return Violation("well_typed", f"totals: missing key {key!r}", expected=key)
            want = float if key == "token_utilization" else int
            if type(totals[key]) is not want:
                return type_error(f"totals[{key!r}]", totals[key], f"a {want.__name__}")
        self.replay.check_totals(totals)
        return None

    def lanes(self, window: list, ids: tuple) -> tuple:
        """The records of the requests the picture draws (the first ``MAX_LANES`` met in the window), by id."""
        seen = list(dict.fromkeys(ids))
        for entry in window:
            for key in ("scheduled", "freed", "allocated"):
                seen += [pair[0] for pair in entry[key]]
            for key in ("preempted", "aborted", "finished"):
                seen += list(entry[key])
        lanes = list(dict.fromkeys(i for i in seen if i in self.by_id))
        return tuple({"id": i, "arrival": self.by_id[i].arrival, "prompt": self.by_id[i].prompt,
                      "output": self.by_id[i].output} for i in sorted(lanes[:MAX_LANES]))

    def timeline(self, window: list, focus: int | None, ids: tuple, held_before: int) -> list[str]:
        from proofs.report.serving_timeline import render

        seen = list(dict.fromkeys(ids))
        for entry in window:
            for key in ("scheduled", "freed", "allocated"):
                seen += [pair[0] for pair in entry[key]]
            for key in ("preempted", "aborted", "finished"):
                seen += list(entry[key])
        lanes = list(dict.fromkeys(i for i in seen if i in self.by_id))
        drawn = sorted(lanes[:MAX_LANES])
        lines = render([{"id": i} for i in drawn], self.raw_config, None, window, focus,
                       titles=("", "trace"), held_before=held_before)
        if len(lanes) > MAX_LANES:
            lines.append(f"({len(lanes) - MAX_LANES} more requests in this window are not drawn)")
        return lines


class _ChapterStream:
    """The chapter's model's replay behind a stream of ``{"tick", "served"}`` entries."""

    def __init__(self, header: dict, policy: str) -> None:
        import spec
        from spec.result_checks import POLICIES, Replay

        if policy not in POLICIES:
            raise ValueError(f"--policy {policy!r}: expected one of {', '.join(POLICIES)} for the chapter's model")
        jobs = spec.validate(header["jobs"], header["slots"], header["continuous"])
        self.replay = Replay(jobs, header["slots"], header["continuous"], policy)
        self.registry = spec.INVARIANTS

    def entry(self, number: int, value) -> Violation | None:
        where = f"line {number}"
        if not isinstance(value, dict) or "tick" not in value or "served" not in value:
            return type_error(where, value, "a dict with keys 'tick' and 'served'")
        tick, served = value["tick"], value["served"]
        if type(tick) is not int:
            return type_error(f"{where}['tick']", tick, "an int")
        if not isinstance(served, list) or any(type(i) is not int for i in served):
            return type_error(f"{where}['served']", served, "a list of int ids")
        self.replay.tick(tick, served)
        return None

    def held(self) -> int:
        return 0

    def lanes(self, window: list, ids: tuple) -> tuple:
        return ()

    def end(self, totals: dict | None) -> Violation | None:
        self.replay.end()
        if totals is None:
            return None
        for key, want in (("makespan_ticks", int), ("busy_slots", int), ("utilization", float)):
            if key not in totals:
                return Violation("well_typed", f"totals: missing key {key!r}", expected=key)
            if type(totals[key]) is not want:
                return type_error(f"totals[{key!r}]", totals[key], f"a {want.__name__}")
        self.replay.check_totals(totals)
        return None

    def timeline(self, window: list, focus: int | None, ids: tuple, held_before: int) -> list[str]:
        from proofs.report.timeline import render

        return render(None, window, focus, titles=("", "trace"))


def _id_ranges(ids) -> str:
    """Ids as sorted runs: ``120-125, 130``."""
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _first(found: dict, registry, late=()) -> tuple[Violation, tuple]:
    """The root cause of ``found`` (``spec.registry.root_cause_first``, as the oracles choose it; ``late``: found
    at the end) and the names of the others, registry order."""
    names = [invariant.name for invariant in registry]
    rank = {name: index for index, name in enumerate(names)}
    ordered = root_cause_first(found.values(), registry, late)
    first = ordered[0]
    also = tuple(sorted((v.invariant for v in ordered[1:]), key=lambda n: rank.get(n, len(rank))))
    return first, also


def check_file(path: str, model: str | None = None, policy: str | None = None,
               loads: Callable = parse) -> TraceReport:
    """Check the trace file at ``path``; a TraceFileError when the file itself is malformed.

    ``model`` (default: the header's) and ``policy`` (default: the model's own; ``none`` for
    safety only) say what judges it; ``loads`` parses each line."""
    stream_of_lines = lines(path, loads)
    first = next(stream_of_lines, None)
    if first is None:
        raise TraceFileError(1, "the file is empty: expected a header line")
    number, value = first
    name, header = read_header(number, value, model)
    own = "fcfs" if name == "serving" else "fifo"
    policy = policy or own
    try:
        stream = (_ServingStream if name == "serving" else _ChapterStream)(header, policy)
    except ValueError as error:
        if str(error).startswith("--policy"):
            raise
        raise TraceFileError(number, f"header outside the domain: {error}") from None
    del first, header, value  # the stream keeps what it needs of the header in compact form
    window: collections.deque = collections.deque(maxlen=WINDOW)
    entries, last_tick, totals, totals_line = 0, None, None, None
    violation, line, also, held_before = None, None, (), 0
    for number, value in stream_of_lines:
        if totals_line is not None:
            raise TraceFileError(number, f"an entry after the totals line {totals_line}")
        if isinstance(value, dict) and len(value) == 1 and "totals" in value:
            if not isinstance(value["totals"], dict):
                raise TraceFileError(number, "the totals line must be {\"totals\": {...}}")
            totals, totals_line = value["totals"], number
            continue
        held = stream.held()
        try:
            broken = stream.entry(number, value)
        except Exception as error:  # a well-shaped entry whose values the replay cannot follow
            broken = Violation("well_typed", f"line {number}: the entry could not be replayed: {error!r}")
        if broken is not None:
            if broken.tick is None:  # a malformed entry: at the tick it names, if any
                broken = broken._replace(tick=value.get("tick") if isinstance(value, dict)
                                         and type(value.get("tick")) is int else None)
            violation, line = broken, number
            break
        entries += 1
        last_tick = value["tick"]
        window.append((value, held))
        if stream.replay.found:
            violation, also = _first(stream.replay.found, stream.registry)
            line = number
            break
    if violation is None:
        broken = stream.end(totals)
        if broken is not None:
            violation, line = broken, totals_line
        elif stream.replay.found:
            violation, also = _first(stream.replay.found, stream.registry, late=stream.replay.found)
            line = None
    timeline, shown, lanes = [], [], ()
    if violation is not None:
        ahead = []
        if line is not None:
            for _number, value in stream_of_lines:
                if len(ahead) >= WINDOW // 2 or not isinstance(value, dict) or "tick" not in value:
                    break
                ahead.append(value)
        shown = [entry for entry, _ in window] + ahead
        held_before = window[0][1] if window else 0
        try:
            timeline = stream.timeline(shown, violation.tick, violation.ids, held_before) if shown else []
        except Exception:  # entries after the failing one may be malformed: draw what came before
            shown = [entry for entry, _ in window]
            timeline = stream.timeline(shown, violation.tick, violation.ids, held_before) if shown else []
        try:
            lanes = stream.lanes(shown, violation.ids)
        except Exception:  # malformed entries after the failing one: the lanes of what came before
            shown = [entry for entry, _ in window]
            lanes = stream.lanes(shown, violation.ids)
    verdict = "fail" if violation is not None else "pass"
    return TraceReport(verdict, name, policy, entries, last_tick, violation, line, also, timeline,
                       tuple(shown), held_before, lanes, getattr(stream, "raw_config", None))


def format_report(path: str, report: TraceReport) -> list[str]:
    """The report's lines: on a failure, the invariant, where, the message, the requests involved, the picture."""
    if report.violation is None:
        return [f"PASS {path}: no invariant broken in {report.entries} entries "
                f"(model {report.model}, policy {report.policy})"]
    v = report.violation
    where = f"tick {v.tick}" if v.tick is not None else "the end of the trace"
    at_line = f", line {report.line}" if report.line is not None else ""
    lines = [f"FAIL {v.invariant}  engine=trace  ({where}{at_line})", f"# {v.message}"]
    ids = list(v.ids) or ([] if v.job is None else [v.job])
    if ids:
        noun = "requests" if report.model == "serving" else "jobs"
        lines.append(f"# {noun} involved: {', '.join(str(i) for i in ids)}")
    if report.also:
        lines.append(f"# also broken in this entry: {', '.join(report.also)}")
    lines += report.timeline
    lines.append(f"FAIL {path}: {v.invariant} at {where}, after {report.entries} entries "
                 f"(model {report.model}, policy {report.policy})")
    return lines
