"""The HTML report: one self-contained page per command, drawn from the same report a command writes as JSON.

What it establishes: nothing new.  It re-renders the report dict a command has built
for ``--json`` (and, for a timeline, the result the target returned, which the text
report draws from too) as one HTML file with inline CSS and inline SVG: no script, no
font, no network.  It shows the verdict, every check with its calls and whether it
finished, every counterexample with its replay command and a timeline per
counterexample (the chapter's model: slots by ticks, expected above actual, the first
differing tick marked; the serving model: a lane per request coloured by phase, the KV
blocks held against ``num_blocks`` and the tokens per tick against ``token_budget``, with
prefix caching a row per block showing its reference count in each tick, the ticks
that took it as a hit outlined and marked ``h``, the violated invariant's tick marked),
and the prove ledger as a table.

Bounds: a timeline draws at most ``MAX_TICKS`` ticks, windowed around the marked tick
(the picture says so), and at most ``MAX_LANES`` request lanes.  Output is stable:
the same report gives the same bytes (no timestamps, no seconds unless asked for, no
paths but those in the report).  Everything that comes from the target (messages,
reprs, ids) is escaped, and characters XML cannot carry are written as ``\\xNN``.
Elements carry stable ids, classes and ``data-`` attributes (``id="verdict"``,
``class="counterexample"``, ``class="lane"``, ``data-tick``, ``class="violation"``) so
tests and tools can find them.
"""

from __future__ import annotations

import html as _html
import json
import re

from proofs.report.serving_timeline import block_counts

MAX_TICKS = 40  # tick columns drawn per timeline
MAX_LANES = 24  # request lanes drawn per serving timeline
CELL = 26  # px: one tick column
ROW = 20  # px: one slot row or request lane
LABEL = 116  # px: the row labels on the left
STRIP = 44  # px: the height of the blocks and tokens strips
PHASES = ("waiting", "prefill", "decode", "preempted", "aborted", "finished")

_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#111827;background:#fff}
h1{font-size:20px;margin:0 0 6px} h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #e5e7eb}
h3{font-size:15px;margin:0 0 6px;font-family:ui-monospace,Menlo,Consolas,monospace}
pre,code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
pre{background:#f9fafb;border:1px solid #e5e7eb;padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
table{border-collapse:collapse;margin:6px 0} th,td{border:1px solid #e5e7eb;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f6} td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{display:inline-block;font-weight:700;padding:4px 10px;border-radius:4px;font-family:ui-monospace,Menlo,monospace}
.verdict-pass,.verdict-proved,.verdict-no-difference,.verdict-fix{background:#dcfce7;color:#166534}
.verdict-fail,.verdict-refuted,.verdict-regression,.verdict-difference{background:#fee2e2;color:#991b1b}
.verdict-incomplete,.verdict-unknown,.verdict-vacuous,.verdict-error,.verdict-skipped{background:#fef3c7;color:#92400e}
.status-finished,.status-proved,.status-passed,.status-pass,.status-by-construction,.status-lemma,.status-checked{color:#166534}
.status-unfinished,.status-refuted,.status-fail{color:#991b1b;font-weight:600}
.status-unknown,.status-vacuous,.status-incomplete,.status-error{color:#92400e;font-weight:600}
article.counterexample,article.difference{border:1px solid #fca5a5;border-left:5px solid #dc2626;padding:10px 14px;margin:14px 0}
p.message{margin:4px 0;font-family:ui-monospace,Menlo,monospace;font-size:12.5px}
figure.timeline{margin:10px 0;overflow-x:auto} figcaption{font-size:12px;color:#4b5563}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px;border:1px solid #9ca3af}
.note{color:#4b5563;font-size:12.5px}
"""

PHASE_FILL = {
    "waiting": "#e5e7eb", "prefill": "#60a5fa", "decode": "#34d399",
    "preempted": "#f59e0b", "aborted": "#6b7280", "finished": "#8b5cf6",
}


# --- text ---------------------------------------------------------------------------------


def esc(value) -> str:
    """``value`` as text safe inside HTML and SVG (markup escaped, characters XML cannot carry as \\xNN)."""
    text = value if isinstance(value, str) else str(value)
    return _html.escape(_BAD.sub(lambda m: f"\\x{ord(m.group()):02x}", text), quote=True)


def _attrs(**pairs) -> str:
    """HTML attributes from keyword pairs (``data_tick`` -> ``data-tick``; None left out)."""
    out = []
    for key, value in pairs.items():
        if value is None:
            continue
        name = key.rstrip("_").replace("_", "-")
        out.append(f' {name}="{esc(value if not isinstance(value, bool) else str(value).lower())}"')
    return "".join(out)


def _slug(word) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(word).lower()).strip("-") or "none"


def _verdict_badge(verdict, text=None) -> str:
    return f'<p><span id="verdict" class="verdict verdict-{_slug(verdict)}"{_attrs(data_verdict=verdict)}>{esc(text or str(verdict).upper())}</span></p>'


def page(title: str, body: list[str]) -> str:
    """A whole HTML document: ``title`` and the ``body`` fragments, with the inline style sheet."""
    if not isinstance(title, str):
        raise ValueError(f"title={title!r}: expected a str")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="generator" content="schedcheck">',
        f"<title>{esc(title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        *body,
        "</body>",
        "</html>",
        "",
    ])


def write(path: str, text: str) -> None:
    """Write the page ``text`` to ``path`` as UTF-8 (the command checked the path before any work)."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _require_report(report) -> None:
    if not isinstance(report, dict) or "verdict" not in report:
        raise ValueError(f"report={str(report)[:60]!r}: expected a report dict with a 'verdict' key")


# --- columns and windows --------------------------------------------------------------------


def window(ticks: list[int], focus: int | None, limit: int = MAX_TICKS) -> tuple[list, bool]:
    """(the tick columns to draw, None marking a gap of idle ticks; whether the run was cut to a window around ``focus``)."""
    ticks = sorted(set(ticks))
    cut = len(ticks) > limit
    if cut:
        near = 0 if focus is None else min(range(len(ticks)), key=lambda i: abs(ticks[i] - focus))
        start = max(0, min(near - limit // 4, len(ticks) - limit))
        ticks = ticks[start:start + limit]
    columns: list = []
    for tick in ticks:
        if columns and tick != columns[-1] + 1:
            columns.append(None)
        columns.append(tick)
    return columns, cut


def _check_focus(focus) -> None:
    if focus is not None and type(focus) is not int:
        raise ValueError(f"focus={focus!r}: expected an int tick or None")


def _x(index: int) -> int:
    return LABEL + index * CELL


def _header(columns: list, y: int) -> list[str]:
    drawn = [t for t in columns if t is not None]
    base = drawn[0] if drawn and drawn[-1] > 9999 else 0
    out = [f'<text x="4" y="{y + 14}" class="label">{"tick" if not base else esc(f"tick-{base}")}</text>']
    for index, tick in enumerate(columns):
        label = "~" if tick is None else str(tick - base)
        out.append(f'<text x="{_x(index) + CELL // 2}" y="{y + 14}" text-anchor="middle" class="tick-label"'
                   f'{_attrs(data_tick=tick)}>{esc(label)}</text>')
    return out


def _window_note(columns: list, cut: bool, all_ticks: list[int], focus) -> str:
    drawn = [t for t in columns if t is not None]
    if not cut or not drawn:
        return ""
    around = f", windowed around tick {focus}" if focus is not None else ""
    return (f"ticks {drawn[0]}-{drawn[-1]} of {min(all_ticks)}-{max(all_ticks)} shown "
            f"({len(drawn)} of {len(set(all_ticks))} ticks with work{around})")


def _marker(columns: list, focus, top: int, bottom: int, label: str, number: int) -> list[str]:
    """The band over the marked tick, from ``top`` to ``bottom``, with its label above."""
    if focus is None or focus not in columns:
        return []
    index = columns.index(focus)
    marker_id = "violation" if number == 1 else f"violation-{number}"
    return [
        f'<rect id="{marker_id}" class="violation" x="{_x(index) - 2}" y="{top}" width="{CELL + 4}" '
        f'height="{bottom - top}" fill="#dc2626" fill-opacity="0.10" stroke="#dc2626" stroke-width="2"'
        f'{_attrs(data_tick=focus)}/>',
        f'<text x="{_x(index) + CELL // 2}" y="{top - 8}" text-anchor="middle" class="violation-label" '
        f'fill="#dc2626" font-weight="bold">{esc(label)}</text>',
    ]


def _svg(width: int, height: int, parts: list[str], **data) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="ui-monospace,Menlo,Consolas,monospace" font-size="11"'
            f'{_attrs(**data)}>\n' + "\n".join(parts) + "\n</svg>")


def _hue(job) -> str:
    number = job if type(job) is int else sum(map(ord, str(job)))
    return f"hsl({(number * 67) % 360},65%,78%)"


# --- the chapter's model ------------------------------------------------------------------------


def chapter_svg(expected_trace, actual_trace, focus: int | None = None, titles=("expected", "actual"),
                label: str = "first difference", number: int = 1) -> str:
    """Slots by ticks with the job id in each cell, expected above actual (alone when expected is None), ``focus`` marked."""
    _check_focus(focus)
    from proofs.report.timeline import slot_rows

    panels = [] if expected_trace is None else [(titles[0], [(e["tick"], list(e["served"])) for e in expected_trace])]
    panels.append((titles[1], [(e["tick"], list(e["served"])) for e in actual_trace]))
    all_ticks = [tick for _, entries in panels for tick, _ in entries]
    if not all_ticks:
        return '<p class="note">(nothing was served)</p>'
    columns, cut = window(all_ticks, focus)
    rows = [(title, slot_rows(entries)) for title, entries in panels]
    top = 64
    parts = _header(columns, top - 20)
    y = top
    reference = rows[0][1] if len(rows) == 2 else None
    for panel, (title, by_tick) in enumerate(rows):
        used = max((slot for row in by_tick.values() for slot in row), default=-1) + 1
        kind = "actual" if panel == len(rows) - 1 else "expected"
        parts.append(f'<g class="panel"{_attrs(data_panel=kind, data_title=title)}>')
        for slot in range(max(used, 1)):
            name = f"{title} slot{slot}" if slot == 0 else f"slot{slot}"
            parts.append(f'<g class="slot"{_attrs(data_slot=slot, data_panel=kind)}>')
            parts.append(f'<text x="4" y="{y + 14}" class="label">{esc(name)}</text>')
            for index, tick in enumerate(columns):
                x = _x(index)
                if tick is None:
                    parts.append(f'<text x="{x + CELL // 2}" y="{y + 14}" text-anchor="middle" fill="#9ca3af">~</text>')
                    continue
                job = by_tick.get(tick, {}).get(slot)
                differs = reference is not None and kind == "actual" and reference.get(tick, {}).get(slot) != job
                fill = "#f9fafb" if job is None else _hue(job)
                stroke = ' stroke="#dc2626" stroke-width="2"' if differs else ' stroke="#d1d5db"'
                classes = "cell" + (" differs" if differs else "") + (" idle" if job is None else "")
                parts.append(f'<rect class="{classes}" x="{x + 1}" y="{y + 1}" width="{CELL - 2}" height="{ROW - 2}" '
                             f'fill="{fill}"{stroke}{_attrs(data_tick=tick, data_slot=slot, data_job=job)}/>')
                if job is not None:
                    parts.append(f'<text x="{x + CELL // 2}" y="{y + 14}" text-anchor="middle">{esc(job)}</text>')
            parts.append("</g>")
            y += ROW
        parts.append("</g>")
        y += 8
    parts += _marker(columns, focus, top - 26, y - 4, label if focus is None else f"{label} @ {focus}", number)
    note = _window_note(columns, cut, all_ticks, focus)
    if note:
        parts.append(f'<text x="4" y="{y + 14}" class="window-note" fill="#4b5563">{esc(note)}</text>')
        y += 20
    width = _x(len(columns)) + 12
    return _svg(max(width, 420), y + 8, parts, class_="timeline-chapter", data_model="chapter",
                data_windowed=cut, data_focus=focus)


# --- the serving model ---------------------------------------------------------------------------


def serving_phases(requests, trace, from_start: bool = True) -> dict:
    """{request id: {tick: (phase, tokens)}} for every tick a request was in the system, phase one of PHASES.

    A scheduled tick is ``prefill`` until the request's cached tokens cover its prompt (again after a
    preemption: recompute), then ``decode``; ``from_start=False`` (a window of a longer trace) judges
    a request first met mid-run by its chunk size alone (more than one token: prefill)."""
    info = {r["id"]: r for r in requests if isinstance(r, dict) and "id" in r}
    computed = {i: (0 if from_start else None) for i in info}
    generated = {i: 0 for i in info}
    done: set = set()
    out: dict = {i: {} for i in info}
    for entry in trace:
        tick = entry["tick"]
        scheduled = {}
        for request_id, n in entry["scheduled"]:
            scheduled[request_id] = scheduled.get(request_id, 0) + n
        for request_id, n in scheduled.items():
            if request_id not in info:
                continue
            prompt = info[request_id].get("prompt", 1)
            have = computed.get(request_id)
            phase = ("prefill" if n > 1 else "decode") if have is None else ("decode" if have >= prompt else "prefill")
            out[request_id][tick] = (phase, n)
            if have is not None:
                computed[request_id] = have + n
                if computed[request_id] >= prompt + generated[request_id]:
                    generated[request_id] += 1
        for key in ("preempted", "aborted", "finished"):
            for request_id in entry[key]:
                if request_id not in info:
                    continue
                out[request_id][tick] = (key, scheduled.get(request_id, 0))
                if key == "preempted":
                    computed[request_id] = 0
                else:
                    done.add(request_id)
        for request_id in info:
            if request_id in done or tick in out[request_id] or request_id in scheduled:
                continue
            arrival = info[request_id].get("arrival")
            if type(arrival) is int and arrival <= tick:
                out[request_id][tick] = ("waiting", 0)
    return out


def _serving_strips(trace, held_before: int = 0) -> tuple[dict, dict]:
    """(blocks held after each tick, tokens scheduled in each tick), as the trace itself says."""
    blocks, tokens, held = {}, {}, held_before
    for entry in trace:
        held += sum(len(ids) for _, ids in entry["allocated"]) - sum(len(ids) for _, ids in entry["freed"])
        blocks[entry["tick"]] = held
        tokens[entry["tick"]] = sum(n for _, n in entry["scheduled"])
    return blocks, tokens


def _block_rows(trace, columns: list, y: int, panel: str) -> tuple[list[str], int]:
    """Prefix caching: a row per KV block, each tick's cell showing its reference count in the tick (blank at 0),
    outlined and marked ``h`` in a tick that took it as a hit; at most ``MAX_LANES`` rows."""
    try:
        counts, hits = block_counts(trace)
    except (TypeError, ValueError, AttributeError, KeyError):  # an entry the target garbled: no rows, the lanes say it
        return [], y
    blocks = sorted({b for row in counts.values() for b in row}, key=lambda b: (type(b) is not int, str(b)))
    parts = [f'<g class="blocks-strip"{_attrs(data_panel=panel)}>']
    for block in blocks[:MAX_LANES]:
        parts.append(f'<g class="block-row"{_attrs(data_block=block, data_panel=panel)}>')
        parts.append(f'<text x="4" y="{y + 14}" class="label">{esc(f"block {block}")}</text>')
        for index, tick in enumerate(columns):
            if tick is None or tick not in counts:
                continue
            count, hit = counts[tick].get(block, 0), hits.get(tick, {}).get(block, 0)
            if not count and not hit:
                continue
            x = _x(index)
            fill = "#ffffff" if not count else ("#bfdbfe" if count == 1 else "#60a5fa" if count == 2 else "#1d4ed8")
            stroke = ' stroke="#ea580c" stroke-width="2"' if hit else ' stroke="#ffffff"'
            parts.append(f'<rect class="refcount{" hit" if hit else ""}" x="{x + 1}" y="{y + 1}" width="{CELL - 2}" '
                         f'height="{ROW - 2}" fill="{fill}"{stroke}'
                         f'{_attrs(data_tick=tick, data_count=count, data_hits=hit if hit else None)}/>')
            text = f"{count}h" if hit else str(count)
            parts.append(f'<text x="{x + CELL // 2}" y="{y + 14}" text-anchor="middle" font-size="10" '
                         f'fill="{"#ffffff" if count > 2 else "#111827"}">{esc(text)}</text>')
        parts.append("</g>")
        y += ROW
    if len(blocks) > MAX_LANES:
        parts.append(f'<text x="4" y="{y + 14}" class="note" fill="#4b5563">'
                     f'{esc(f"({len(blocks) - MAX_LANES} more blocks not drawn)")}</text>')
        y += ROW
    parts.append("</g>")
    return parts, y


def _strip(kind: str, title: str, values: dict, limit: int, columns: list, y: int, panel: str) -> list[str]:
    """A bar per tick of ``values`` against the line at ``limit`` (bars above it drawn red)."""
    scale = max([limit, *values.values(), 1])
    parts = [f'<g class="strip strip-{kind}"{_attrs(data_panel=panel, data_limit=limit)}>',
             f'<text x="4" y="{y + 16}" class="label">{esc(title)}</text>',
             f'<text x="4" y="{y + 30}" class="label" fill="#4b5563">{esc(f"of {limit}")}</text>']
    for index, tick in enumerate(columns):
        if tick is None or tick not in values:
            continue
        value = values[tick]
        height = round((STRIP - 6) * max(value, 0) / scale)
        over = value > limit
        parts.append(f'<rect class="bar{" over" if over else ""}" x="{_x(index) + 3}" y="{y + STRIP - height}" '
                     f'width="{CELL - 6}" height="{height}" fill="{"#dc2626" if over else "#93c5fd"}"'
                     f'{_attrs(data_tick=tick, data_value=value)}/>')
        parts.append(f'<text x="{_x(index) + CELL // 2}" y="{y + STRIP - 3}" text-anchor="middle" '
                     f'font-size="9" fill="{"#ffffff" if over else "#1e3a8a"}">{esc(value)}</text>')
    line_y = y + STRIP - round((STRIP - 6) * limit / scale)
    parts.append(f'<line class="limit" x1="{LABEL}" x2="{_x(len(columns))}" y1="{line_y}" y2="{line_y}" '
                 f'stroke="#111827" stroke-dasharray="4 3"{_attrs(data_value=limit)}/>')
    parts.append("</g>")
    return parts


def serving_svg(requests, config, expected_trace, actual_trace, focus: int | None = None,
                titles=("expected", "actual"), label: str = "violation", number: int = 1,
                held_before: int = 0, from_start: bool = True) -> str:
    """Per request a lane of tick cells coloured by phase, then the KV blocks and tokens strips (and with prefix
    caching a row per block: its count, hits marked), expected above actual."""
    for key in ("num_blocks", "token_budget"):
        if not isinstance(config, dict) or type(config.get(key)) is not int or config[key] < 1:
            raise ValueError(f"config={config!r}: expected a dict whose {key!r} is an int >= 1")
    _check_focus(focus)
    panels = [] if expected_trace is None else [("expected", titles[0], expected_trace, 0)]
    panels.append(("actual", titles[1], actual_trace, held_before))
    all_ticks = [entry["tick"] for _, _, trace, _ in panels for entry in trace]
    if not all_ticks:
        return '<p class="note">(nothing was scheduled)</p>'
    columns, cut = window(all_ticks, focus)
    ids = sorted({r["id"] for r in requests if isinstance(r, dict) and "id" in r},
                 key=lambda i: (type(i) is not int, i if type(i) is int else 0, str(i)))  # ints first, in order
    shown_ids, hidden = ids[:MAX_LANES], max(0, len(ids) - MAX_LANES)
    top = 64
    parts = _header(columns, top - 20)
    y = top
    for kind, title, trace, before in panels:
        phases = serving_phases(requests, trace, from_start)
        blocks, tokens = _serving_strips(trace, before)
        parts.append(f'<g class="panel"{_attrs(data_panel=kind, data_title=title)}>')
        if title:
            parts.append(f'<text x="4" y="{y + 12}" class="panel-title" font-weight="bold">{esc(title)}</text>')
            y += 18
        for request_id in shown_ids:
            parts.append(f'<g class="lane"{_attrs(data_request=request_id, data_panel=kind)}>')
            parts.append(f'<text x="4" y="{y + 14}" class="label">{esc(f"req {request_id}")}</text>')
            for index, tick in enumerate(columns):
                x = _x(index)
                if tick is None:
                    parts.append(f'<text x="{x + CELL // 2}" y="{y + 14}" text-anchor="middle" fill="#9ca3af">~</text>')
                    continue
                phase, n = phases.get(request_id, {}).get(tick, (None, 0))
                if phase is None:
                    continue
                parts.append(f'<rect class="cell phase-{phase}" x="{x + 1}" y="{y + 1}" width="{CELL - 2}" '
                             f'height="{ROW - 2}" fill="{PHASE_FILL[phase]}" stroke="#ffffff"'
                             f'{_attrs(data_tick=tick, data_phase=phase, data_tokens=n if n else None)}/>')
                if phase == "prefill" or (n and phase in ("preempted", "finished")):
                    color = "#111827" if phase != "finished" else "#ffffff"
                    parts.append(f'<text x="{x + CELL // 2}" y="{y + 14}" text-anchor="middle" fill="{color}">{esc(n)}</text>')
            parts.append("</g>")
            y += ROW
        if hidden:
            parts.append(f'<text x="4" y="{y + 14}" class="note" fill="#4b5563">{esc(f"({hidden} more requests not drawn)")}</text>')
            y += ROW
        y += 4
        parts += _strip("blocks", "KV blocks", blocks, config["num_blocks"], columns, y, kind)
        y += STRIP + 6
        parts += _strip("tokens", "tokens", tokens, config["token_budget"], columns, y, kind)
        y += STRIP + 12
        if config.get("prefix_caching") is True:  # a row per block: its reference count, hits marked
            rows, y = _block_rows(trace, columns, y, kind)
            parts += rows
            y += 8
        parts.append("</g>")
    parts += _marker(columns, focus, top - 26, y - 8, label if focus is None else f"{label} @ {focus}", number)
    note = _window_note(columns, cut, all_ticks, focus)
    if note:
        parts.append(f'<text x="4" y="{y + 10}" class="window-note" fill="#4b5563">{esc(note)}</text>')
        y += 18
    width = _x(len(columns)) + 12
    return _svg(max(width, 420), y + 6, parts, class_="timeline-serving", data_model="serving",
                data_windowed=cut, data_focus=focus, data_lanes=len(shown_ids))


def legend_html() -> str:
    swatches = "".join(f'<span><i style="background:{PHASE_FILL[p]}"></i>{p}</span>' for p in PHASES)
    return (f'<p class="legend">{swatches}<span>prefill cells show the chunk\'s token count; '
            "dashed line: num_blocks / token_budget; red bars exceed it</span></p>")


# --- one counterexample --------------------------------------------------------------------


def _focus(model, call, actual, invariant: str):
    """(tick to mark, its label, the reference result) for a counterexample on a drawable result."""
    expected = model.reference(call)
    if model.name == "serving":
        from spec.serving.oracle import first_difference

        violations = [v for v in model.check(call, actual, expected) if getattr(v, "tick", None) is not None]
        mine = [v for v in violations if v.invariant == invariant] or violations
        if mine:
            return mine[0].tick, mine[0].invariant, expected
        caching = isinstance(call[1], dict) and call[1].get("prefix_caching") is True
        difference = first_difference(expected, actual, caching=caching) if model.policy != "none" else None
    else:
        from spec.oracle import first_difference

        difference = first_difference(expected, actual)
    if difference is not None:
        return difference.tick, "first difference", expected
    return None, "", expected


def timeline_figure(model, call, actual, invariant: str, number: int = 1) -> str:
    """The figure of a counterexample's timeline, or a note saying why none is drawn."""
    if actual is None or not model.drawable(call, actual):
        return '<p class="note">(no timeline: the target did not return a result of the contract\'s shape)</p>'
    focus, label, expected = _focus(model, call, actual, invariant)
    if model.name == "serving":
        requests, config = call
        svg = serving_svg(requests, config, expected["trace"], actual["trace"], focus, label=label, number=number)
        caption = (f"expected (the reference) above actual; the marked tick is where {label} breaks" if focus is not None
                   else "expected (the reference) above actual")
        return f'<figure class="timeline" data-model="serving">{svg}{legend_html()}<figcaption>{esc(caption)}</figcaption></figure>'
    svg = chapter_svg(expected["trace"], actual["trace"], focus, label=label, number=number)
    caption = "expected (the reference) above actual; cells outlined red differ; the marked tick is the first difference"
    return f'<figure class="timeline" data-model="chapter">{svg}<figcaption>{esc(caption)}</figcaption></figure>'


def counterexample_article(cex_json: dict, actual, number: int, replay: str, policy=None, online: bool = False) -> str:
    """One counterexample: its heading, message, input, replay command, timeline and text report."""
    from proofs import models
    from proofs.counterexample import Counterexample
    from proofs.report.text import format_counterexample

    invariant = str(cex_json.get("property", ""))
    try:
        cex = Counterexample.from_json(cex_json)
        model = models.get(cex.model, policy if cex.model != "chapter" else None)
        lines = format_counterexample(cex, actual)
    except Exception:  # an input this build cannot parse: show the raw fields, draw nothing
        cex, model = None, None
        lines = [f"FAIL {invariant}  engine={cex_json.get('engine')}", str(cex_json.get("input_repr"))]
    parts = [f'<article class="counterexample" id="cex-{number}"'
             f'{_attrs(data_invariant=invariant, data_engine=cex_json.get("engine"), data_check=cex_json.get("check"))}>',
             f"<h3>{esc(lines[0])}</h3>"]
    for line in str(cex_json.get("message", "")).splitlines() or [""]:
        parts.append(f'<p class="message">{esc(line)}</p>')
    parts.append(f'<pre class="input">{esc(cex_json.get("input_repr", ""))}</pre>')
    if cex_json.get("check") == "validation" and cex_json.get("rule"):
        parts.append(f'<p>expected ValueError ({esc(cex_json["rule"])})</p>')
    parts.append(f'<p>replay: <code class="replay">{esc(replay)}</code></p>')
    if online and cex_json.get("check") != "stateful":
        parts.append('<p class="note">online: the input is what the driver ran the engine on</p>')
    if cex is not None and cex.check in ("conformance", "deterministic"):
        parts.append(timeline_figure(model, cex.call, actual, invariant, number))
    parts.append(f'<details><summary>the text report</summary><pre class="text-report">{esc(chr(10).join(lines))}</pre></details>')
    parts.append("</article>")
    return "\n".join(parts)


# --- verify --------------------------------------------------------------------------------


def _checks_table(checks: list) -> list[str]:
    if not checks:
        return []
    out = ['<section id="checks"><h2>Checks</h2>', '<table class="checks">',
           "<tr><th>engine</th><th>check</th><th>tried</th><th>planned</th><th>unit</th><th>finished</th></tr>"]
    for account in checks:
        finished = bool(account.get("finished"))
        state = "finished" if finished else f"not finished ({account.get('stopped') or 'stopped'})"
        out.append(f'<tr class="check"{_attrs(data_check=account.get("check"), data_finished=finished, data_tried=account.get("tried"), data_planned=account.get("planned"))}>'
                   f"<td>hypothesis</td><td>{esc(account.get('check'))}</td><td class=\"num\">{esc(account.get('tried'))}</td>"
                   f"<td class=\"num\">{esc(account.get('planned'))}</td><td>{esc(account.get('unit', 'calls'))}</td>"
                   f'<td class="status-{"finished" if finished else "unfinished"}">{esc(state)}</td></tr>')
    out += ["</table>", "</section>"]
    return out


def _contracts_table(contracts: list) -> list[str]:
    if not contracts:
        return []
    out = ['<section id="contracts"><h2>CrossHair contracts</h2>', '<table class="contracts">',
           "<tr><th>contract</th><th>subject</th><th>outcome</th><th>bounds or message</th></tr>"]
    for c in contracts:
        outcome = c.get("outcome")
        detail = c.get("bounds") if outcome == "confirmed" else c.get("message", "")
        out.append(f'<tr class="contract"{_attrs(data_name=c.get("name"), data_outcome=outcome)}>'
                   f"<td>{esc(c.get('name'))}</td><td>{esc(c.get('subject'))}</td>"
                   f'<td class="status-{_slug(outcome)}">{esc(outcome)}</td><td>{esc(detail)}</td></tr>')
    out += ["</table>", "</section>"]
    return out


def _coverage(report: dict) -> list[str]:
    bounds = report.get("bounds")
    if not report.get("calls") and not bounds:
        return []
    out = [f'<p class="coverage"{_attrs(data_calls=report.get("calls"))}>calls made: {esc(report.get("calls", 0))}']
    if isinstance(bounds, dict) and bounds:
        out.append("; ranges covered: " + esc(", ".join(f"{k} {v}" for k, v in sorted(bounds.items()))))
    out.append("</p>")
    return ["".join(out)]


def verify_page(report: dict, actuals=None, save_dir: str | None = None, summary: str | None = None,
                online: bool = False) -> str:
    """The page of a ``verify`` run: ``report`` is the dict it writes as JSON, ``actuals`` the target's result per counterexample."""
    from proofs.report import ci

    _require_report(report)
    counterexamples = report.get("counterexamples") or []
    actuals = list(actuals) if actuals is not None else [None] * len(counterexamples)
    if len(actuals) != len(counterexamples):
        raise ValueError(f"actuals: {len(actuals)} results for {len(counterexamples)} counterexamples: expected one each")
    target = str(report.get("target", ""))
    save_dir = save_dir or ci.DEFAULT_SAVE_DIR
    verdict = report.get("verdict")
    model = report.get("model", "chapter")
    body = [f"<h1>schedcheck verify <code>{esc(target)}</code></h1>",
            _verdict_badge(verdict, summary),
            f'<p class="note" id="model"{_attrs(data_model=model, data_policy=report.get("policy"))}>model: {esc(model)}'
            + (f", policy {esc(report['policy'])}" if report.get("policy") else "") + "</p>"]
    body += _coverage(report)
    if report.get("budget_to_finish"):
        body.append(f'<p class="note">--budget {esc(report["budget_to_finish"])} would finish every check (estimated)</p>')
    body += _checks_table(report.get("checks") or [])
    body += _contracts_table(report.get("contracts") or [])
    body.append(f'<section id="counterexamples"{_attrs(data_count=len(counterexamples))}><h2>Counterexamples ({len(counterexamples)})</h2>')
    if not counterexamples:
        body.append('<p class="note">none found</p>')
    for number, (cex, actual) in enumerate(zip(counterexamples, actuals), 1):
        replay = ci.replay_command(save_dir, target, str(cex.get("property", "")))
        body.append(counterexample_article(cex, actual, number, replay, report.get("policy"), online))
    body.append("</section>")
    flaky = report.get("flaky") or []
    if flaky:
        body.append('<section id="flaky"><h2>Flaky time-outs and deaths (not counted: they passed on a retry with a '
                    'larger limit)</h2><ul>')
        body += [f"<li>{esc(e.get('kind', 'failure'))} <code>{esc(e.get('invariant'))}</code> (size {esc(e.get('size'))}): "
                 f"{esc(e.get('message'))}"
                 f"<pre>{esc(e.get('input_repr'))}</pre></li>" for e in flaky]
        body.append("</ul></section>")
    return page(f"schedcheck verify {target}: {verdict}", body)


# --- diff ------------------------------------------------------------------------------------


def diff_page(report: dict, results=None) -> str:
    """The page of a ``diff`` run: ``report`` is its JSON dict, ``results`` (old result, new result) per difference or None."""
    from proofs import models
    from proofs.counterexample import Counterexample
    from proofs.report import ci

    _require_report(report)
    differences = report.get("differences") or []
    results = list(results) if results is not None else [None] * len(differences)
    if len(results) != len(differences):
        raise ValueError(f"results: {len(results)} pairs for {len(differences)} differences: expected one each")
    model = models.get(report.get("model"), report.get("policy"))
    replay = ci._diff_command(report)
    title = f"{report.get('old')} -> {report.get('new')}"
    body = [f"<h1>schedcheck diff <code>{esc(title)}</code></h1>", _verdict_badge(report.get("verdict")),
            f'<p class="note" id="model"{_attrs(data_model=model.name)}>model: {esc(model.name)}; calls compared: '
            f"{esc(report.get('calls', '-'))}</p>"]
    if report.get("unfinished"):
        body.append(f'<p class="status-incomplete">the budget ran out during {esc(", ".join(report["unfinished"]))}; '
                    "incomplete is not a pass</p>")
    body.append(f'<section id="differences"{_attrs(data_count=len(differences))}><h2>Differences ({len(differences)})</h2>')
    if not differences:
        body.append('<p class="note">none found</p>')
    for number, (difference, pair) in enumerate(zip(differences, results), 1):
        body.append(f'<article class="difference" id="difference-{number}"'
                    f'{_attrs(data_classification=difference.get("classification"), data_engine=difference.get("engine"))}>')
        body.append(f"<h3>{esc('DIFF ' + str(difference.get('classification')) + '  engine=' + str(difference.get('engine')))}</h3>")
        body.append(f'<pre class="input">{esc(difference.get("input_repr"))}</pre>')
        for side in ("old", "new"):
            got = difference.get(side, {})
            broken = got.get("broken") or []
            verdict = "conforms" if not broken else "breaks " + ", ".join(map(str, broken))
            body.append(f'<p class="side"{_attrs(data_side=side)}><b>{side}</b> ({esc(report.get(side))}): '
                        f"{esc(got.get('behaviour'))}; {esc(verdict)}</p>")
        body.append(f'<p>replay: <code class="replay">{esc(replay)}</code></p>')
        if pair is not None:
            try:
                call = Counterexample.from_json({"property": "", "engine": "", "input": difference.get("input"),
                                                 "input_repr": difference.get("input_repr"), "model": model.name}).call
            except Exception:  # an input this build cannot parse: no picture
                call = None
            old_result, new_result = pair
            if call is not None and all(model.drawable(call, r) for r in (old_result, new_result)):
                body.append(_diff_figure(model, call, old_result, new_result, number))
        body.append("</article>")
    body.append("</section>")
    return page(f"schedcheck diff {title}: {report.get('verdict')}", body)


def _diff_figure(model, call, old_result, new_result, number: int) -> str:
    if model.name == "serving":
        from spec.serving.oracle import first_difference

        caching = isinstance(call[1], dict) and call[1].get("prefix_caching") is True
        parted = first_difference(old_result, new_result, caching=caching)
        focus = parted.tick if parted is not None else None
        svg = serving_svg(*call, old_result["trace"], new_result["trace"], focus, titles=("old", "new"),
                          label="first difference", number=number)
        return f'<figure class="timeline" data-model="serving">{svg}{legend_html()}<figcaption>old above new</figcaption></figure>'
    from spec.oracle import first_difference

    parted = first_difference(old_result, new_result)
    svg = chapter_svg(old_result["trace"], new_result["trace"], parted.tick if parted else None,
                      titles=("old", "new"), number=number)
    return f'<figure class="timeline" data-model="chapter">{svg}<figcaption>old above new; the marked tick is the first difference</figcaption></figure>'


# --- prove -------------------------------------------------------------------------------------


def prove_page(report: dict, seconds: bool = True, mutant: str | None = None) -> str:
    """The page of a ``prove`` run: the ledger (claim, status, method, bound, hypotheses satisfiable, refuted by)."""
    _require_report(report)
    rows = report.get("results") or []
    from proofs.smt.run import summary as tally

    summary = f"{str(report.get('verdict')).upper()}  ({tally(rows)})"
    body = ["<h1>schedcheck prove" + (f" <code>mutant={esc(mutant)}</code>" if mutant else "") + "</h1>",
            _verdict_badge(report.get("verdict"), summary),
            '<section id="ledger"><h2>Ledger</h2>', '<table class="ledger">',
            "<tr><th>claim</th><th>status</th><th>method</th><th>bound</th><th>hyp sat</th><th>refuted by</th>"
            + ("<th>seconds</th>" if seconds else "") + "</tr>"]
    for row in rows:
        status = row.get("status")
        cells = [f"<td><code>{esc(row.get('claim'))}</code></td>", f'<td class="status-{_slug(status)}">{esc(status)}</td>',
                 f"<td>{esc(row.get('method'))}</td>", f"<td>{esc(row.get('bound'))}</td>",
                 f"<td>{esc(row.get('hypotheses_satisfiable'))}</td>", f"<td>{esc(row.get('refuted_by') or '-')}</td>"]
        if seconds:
            value = row.get("seconds")
            cells.append(f'<td class="num">{esc(f"{value:.2f}" if isinstance(value, (int, float)) else value)}</td>')
        body.append(f'<tr class="claim"{_attrs(data_claim=row.get("claim"), data_status=status, data_method=row.get("method"), data_bound=row.get("bound"))}>'
                    + "".join(cells) + "</tr>")
        cex = row.get("counterexample")
        if cex and (status in ("refuted", "unknown", "vacuous") or str(row.get("claim", "")).startswith("rule_needed:")):
            text = _prove_counterexample(cex)
            body.append(f'<tr class="claim-counterexample"><td colspan="{7 if seconds else 6}"><pre>{esc(text)}</pre>'
                        f'replay: <code class="replay">{esc("schedcheck prove --claims " + _quote(row.get("claim")))}</code></td></tr>')
    body += ["</table>", "</section>"]
    return page(f"schedcheck prove: {report.get('verdict')}", body)


def _quote(text) -> str:
    import shlex

    return shlex.quote(str(text))


def _prove_counterexample(cex) -> str:
    if isinstance(cex, dict) and "field" in cex and "state" in cex:  # the encoding disagrees with the spec that runs
        return (f"state (n={cex.get('n')}): {cex['state']}\n"
                f"field: {cex['field']}: the spec gives {cex.get('spec')!r}, the encoding {cex.get('encoding')!r}")
    if isinstance(cex, dict) and "call" in cex:
        lines = []
        if "without_rule" in cex:
            lines.append(f"without {cex['without_rule']}: Z3 breaks {cex.get('breaks')}:")
        else:
            lines.append(f"counterexample: breaks {cex.get('breaks', '')}")
        lines.append(str(cex["call"]))
        if cex.get("shows"):
            lines.append(f"# shows: {cex['shows']}")
        if "after_steps" in cex:
            lines.append(f"# after {cex['after_steps']} step(s): {json.dumps(cex.get('state'), sort_keys=True, default=str)}")
        if cex.get("served_per_step"):
            lines.append(f"# served per step: {cex['served_per_step']}")
        return "\n".join(lines)
    return f"counterexample: {json.dumps(cex, sort_keys=True, default=str)}"


# --- trace -------------------------------------------------------------------------------------


def trace_page(path: str, report: dict, window_entries=(), lanes=(), config: dict | None = None, held_before: int = 0,
               text: list[str] | None = None) -> str:
    """The page of a ``trace`` check: ``report`` is its JSON dict, ``window_entries`` the entries drawn around the
    violation, ``lanes`` (serving) the header's records of the requests drawn and ``config`` its config."""
    _require_report(report)
    violation = report.get("violation")
    model = report.get("model")
    headline = (text or [""])[-1] if text else str(report.get("verdict")).upper()
    body = [f"<h1>schedcheck trace <code>{esc(path)}</code></h1>", _verdict_badge(report.get("verdict"), headline),
            f'<p class="note" id="model"{_attrs(data_model=model, data_policy=report.get("policy"))}>model {esc(model)}, '
            f"policy {esc(report.get('policy'))}; {esc(report.get('entries'))} entries replayed, last tick "
            f"{esc(report.get('last_tick'))}</p>"]
    if violation:
        body.append(f'<section id="counterexamples" data-count="1"><h2>Violation</h2>')
        body.append(f'<article class="counterexample" id="cex-1"{_attrs(data_invariant=violation.get("invariant"), data_engine="trace", data_tick=violation.get("tick"))}>')
        where = f"tick {violation.get('tick')}" if violation.get("tick") is not None else "the end of the trace"
        line = f", line {violation.get('line')}" if violation.get("line") is not None else ""
        invariant = violation.get("invariant")
        body.append(f"<h3>{esc(f'FAIL {invariant}  engine=trace  ({where}{line})')}</h3>")
        body.append(f'<p class="message">{esc(violation.get("message"))}</p>')
        if violation.get("ids"):
            body.append(f'<p class="note">involved: {esc(", ".join(map(str, violation["ids"])))}</p>')
        if violation.get("also"):
            body.append(f'<p class="note">also broken in this entry: {esc(", ".join(violation["also"]))}</p>')
        body.append(f'<p>replay: <code class="replay">{esc("schedcheck trace " + _quote(path))}</code></p>')
        entries = list(window_entries)
        focus = violation.get("tick")
        label = str(violation.get("invariant"))
        caption = f"the {len(entries)} entries around the violation, as recorded (a window of the trace)"
        try:
            if entries and model == "serving" and config is not None:
                svg = serving_svg(list(lanes), config, None, entries, focus, titles=("", "trace"), label=label,
                                  held_before=held_before, from_start=False)
                body.append(f'<figure class="timeline" data-model="serving">{svg}{legend_html()}'
                            f"<figcaption>{esc(caption)}</figcaption></figure>")
            elif entries and model == "chapter":
                svg = chapter_svg(None, entries, focus, titles=("", "trace"), label=label)
                body.append(f'<figure class="timeline" data-model="chapter">{svg}<figcaption>{esc(caption)}</figcaption></figure>')
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):  # entries the picture cannot follow
            body.append('<p class="note">(no timeline: the recorded entries around the violation cannot be drawn)</p>')
        if text:
            body.append(f'<details><summary>the text report</summary><pre class="text-report">{esc(chr(10).join(text))}</pre></details>')
        body.append("</article></section>")
    return page(f"schedcheck trace {path}: {report.get('verdict')}", body)


# --- gate ---------------------------------------------------------------------------------------


def gate_page(summary: dict, pages: dict | None = None, seconds: bool = True) -> str:
    """The gate's index.html: its summary table (``summary`` is gate.json's dict), each step linked to its own page."""
    _require_report(summary)
    pages = pages or {}
    body = [f"<h1>schedcheck gate <code>{esc(summary.get('target'))}</code></h1>",
            _verdict_badge(summary.get("verdict"), f"{str(summary.get('verdict')).upper()} (exit {summary.get('exit_code')})")]
    if summary.get("base"):
        body.append(f'<p class="note">base: {esc(summary["base"])}</p>')
    body += ['<section id="steps"><h2>Steps</h2>', '<table class="steps">',
             "<tr><th>step</th><th>about</th><th>verdict</th><th>exit</th><th>detail</th><th>reports</th>"
             + ("<th>seconds</th>" if seconds else "") + "</tr>"]
    for step in summary.get("steps", []):
        name = step.get("step")
        page_name = pages.get(name)
        link = f'<a href="{esc(page_name)}">{esc(name)}</a>' if page_name else esc(name)
        reports = ", ".join(f'<a href="{esc(r)}">{esc(r)}</a>' for r in step.get("reports", []))
        exit_text = "-" if step.get("exit_code") is None else step.get("exit_code")
        cells = [f"<td>{link}</td>", f"<td>{esc(step.get('about'))}</td>",
                 f'<td><span class="verdict verdict-{_slug(step.get("verdict"))}">{esc(step.get("verdict"))}</span></td>',
                 f"<td>{esc(exit_text)}</td>", f"<td>{esc(step.get('detail'))}</td>", f"<td>{reports}</td>"]
        if seconds:
            cells.append(f'<td class="num">{esc(step.get("seconds"))}</td>')
        body.append(f'<tr class="step"{_attrs(data_step=name, data_verdict=step.get("verdict"))}>' + "".join(cells) + "</tr>")
    body += ["</table>", "</section>"]
    return page(f"schedcheck gate {summary.get('target')}: {summary.get('verdict')}", body)
