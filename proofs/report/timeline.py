"""The timeline picture: one row per slot, one column per tick, the job id in each cell.

The expected schedule is drawn above the actual one, so a reader sees at a glance
where they part.  A trace says only which jobs each tick served, so slots are
assigned the way an engine would: a job keeps its slot while it runs, and a new job
takes the lowest free slot.  Long runs are cut to a window around the tick of
interest, ticks that nothing served show as gaps (``~``), and huge tick numbers are
shown as offsets from the first one drawn.
"""

from __future__ import annotations

MAX_COLUMNS = 24


def slot_rows(trace: list[tuple[int, list]]) -> dict[int, dict[int, object]]:
    """For each tick, which job each slot held: {tick: {slot: id}}."""
    rows: dict[int, dict[int, object]] = {}
    slot_of: dict[object, int] = {}
    previous = None
    for tick, served in trace:
        if previous is None or tick != previous + 1:
            slot_of = {}
        kept = {job: slot_of[job] for job in served if job in slot_of}
        taken = set(kept.values())
        free = (slot for slot in range(len(served) + len(taken) + 1) if slot not in taken)
        for job in served:
            if job not in kept:
                kept[job] = next(free)
        slot_of = kept
        rows[tick] = {slot: job for job, slot in kept.items()}
        previous = tick
    return rows


def _columns(ticks: list[int], focus: int | None) -> list[int | None]:
    """The ticks to draw, with None for a gap, cut to a window around ``focus``."""
    if len(ticks) > MAX_COLUMNS:
        at = 0 if focus is None else max(0, min(range(len(ticks)), key=lambda i: abs(ticks[i] - focus)) - 6)
        at = min(at, len(ticks) - MAX_COLUMNS)
        ticks = ticks[at : at + MAX_COLUMNS]
    columns: list[int | None] = []
    for tick in ticks:
        if columns and columns[-1] is not None and tick != columns[-1] + 1:
            columns.append(None)
        columns.append(tick)
    return columns


def _entries(trace) -> list[tuple[int, list]]:
    return [(entry["tick"], list(entry["served"])) for entry in trace]


def render(expected_trace, actual_trace, focus: int | None = None, titles=("expected", "actual")) -> list[str]:
    """The picture's lines: a tick header, the expected slot rows, then the actual ones (alone when expected is None)."""
    expected = [] if expected_trace is None else _entries(expected_trace)
    actual = _entries(actual_trace)
    ticks = sorted({tick for tick, _ in expected} | {tick for tick, _ in actual})
    if not ticks:
        return ["(nothing was served)"]
    columns = _columns(ticks, focus)
    drawn = [tick for tick in columns if tick is not None]
    base = drawn[0] if drawn[-1] > 9999 else 0
    labels = ["~" if tick is None else str(tick - base) for tick in columns]
    schedules = [(titles[1], slot_rows(actual))]
    if expected_trace is not None:
        schedules.insert(0, (titles[0], slot_rows(expected)))
    cells = [str(job) for _, rows in schedules for row in rows.values() for job in row.values()]
    width = max(len(text) for text in labels + cells + ["."])
    header_name = "tick" if not base else f"tick-{base}"
    name_width = max(len(header_name), len("expected slot00"))
    lines = [header_name.ljust(name_width) + " | " + " ".join(label.rjust(width) for label in labels)]
    for title, rows in schedules:
        used = max((slot for row in rows.values() for slot in row), default=-1) + 1
        for slot in range(max(used, 1)):
            name = f"{title if slot == 0 else '':8} slot{slot}"
            row = []
            for tick in columns:
                job = None if tick is None else rows.get(tick, {}).get(slot)
                row.append(("~" if tick is None else ".") if job is None else str(job))
            lines.append(name.ljust(name_width) + " | " + " ".join(cell.rjust(width) for cell in row))
    return lines
