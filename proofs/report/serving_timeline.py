"""The serving model's timeline: per request, what each tick did to it; then KV blocks and tokens per tick.

One column per tick that appears in either trace (a gap of idle ticks shows as
``~``), windowed around the tick in focus when the run is long.  A request's cell is
the number of tokens scheduled for it in that tick, followed by ``f`` when it
finished, ``p`` when it was preempted (its blocks given back) and ``a`` when it was
aborted; ``.`` is a tick in which nothing happened to it.  Under each schedule, the
blocks held after the tick (allocated minus freed, as the trace itself says; with prefix
caching a hit on a block no request of the drawn ticks holds counts as one more) and the
tokens scheduled in the tick, against ``num_blocks`` and ``token_budget``; with prefix
caching then a row per block (``blk B``, at most ``MAX_BLOCK_ROWS``): its reference count
in each tick (``block_counts``), ``h`` when the tick took it as a hit.
"""

from __future__ import annotations

from proofs.report.timeline import _columns

LEGEND = "cells: tokens scheduled; f finished, p preempted, a aborted in that tick; . nothing"
BLOCK_LEGEND = "blk rows (prefix caching): the block's reference count in the tick; h taken as a hit in it"
MAX_BLOCK_ROWS = 24


def block_counts(trace) -> tuple[dict, dict]:
    """Prefix caching: (reference count of each block in each tick, the blocks each tick took as hits), as the drawn
    ticks show them.  A block's holders are the requests whose table took it (``allocated``, ``hits``) and have not
    left since (aborted, preempted, finished) nor freed it; a tick's count is taken while it computes: after its
    aborts, victims and admissions, before its finishers give back.  A window of a longer trace starts from 0."""
    holders: dict = {}  # block -> the requests holding it
    counts: dict = {}  # tick -> {block: count}, every block seen so far
    hits: dict = {}  # tick -> {block: how many hits took it}
    for entry in trace:
        tick = entry["tick"]
        leaving = {i for key in ("aborted", "preempted") for i in entry.get(key, ())}
        for block in list(holders):
            holders[block] -= leaving
        for key in ("hits", "allocated"):
            for request_id, blocks in entry.get(key) or ():
                for block in blocks:
                    holders.setdefault(block, set()).add(request_id)
                    if key == "hits":
                        hits.setdefault(tick, {})[block] = hits.get(tick, {}).get(block, 0) + 1
        counts[tick] = {block: len(who) for block, who in holders.items()}  # while the tick computes
        finished = set(entry.get("finished", ()))
        for block in list(holders):
            holders[block] -= finished
        for request_id, blocks in entry.get("freed", ()):
            for block in blocks:
                holders.setdefault(block, set()).discard(request_id)
    return counts, hits


def _cells(trace, held: int = 0) -> tuple[dict, dict, dict]:
    """(cells by tick and id, blocks held after each tick, tokens scheduled in each tick), from ``held`` blocks held."""
    cells: dict[int, dict] = {}
    blocks: dict[int, int] = {}
    tokens: dict[int, int] = {}
    holding: dict[int, int] = {}  # prefix caching: block -> holders, as the drawn ticks show them
    for entry in trace:
        tick = entry["tick"]
        row = cells.setdefault(tick, {})
        for request_id, n in entry["scheduled"]:
            row[request_id] = row.get(request_id, "") + str(n)
        for mark, key in (("p", "preempted"), ("a", "aborted"), ("f", "finished")):
            for request_id in entry[key]:
                row[request_id] = row.get(request_id, "") + mark
        held += sum(len(ids) for _, ids in entry["allocated"]) - sum(len(ids) for _, ids in entry["freed"])
        if "hits" in entry:  # a shared block is held once: a hit adds one only when no one held it
            for _, ids in entry["hits"]:
                for block in ids:
                    held += not holding.get(block)
                    holding[block] = holding.get(block, 0) + 1
            for _, ids in entry["allocated"]:
                for block in ids:
                    holding[block] = holding.get(block, 0) + 1
            for _, ids in entry["freed"]:
                for block in ids:
                    holding.pop(block, None)
        blocks[tick] = held
        tokens[tick] = sum(n for _, n in entry["scheduled"])
    return cells, blocks, tokens


def render(requests, config, expected_trace, actual_trace, focus: int | None = None,
           titles=("expected", "actual"), held_before: int = 0) -> list[str]:
    """The picture's lines: a tick header, then expected and actual, each with its request lanes and strips.

    ``expected_trace=None`` draws the actual schedule alone (a window of a recorded trace, whose
    blocks strip starts from ``held_before`` blocks held)."""
    schedules = [(titles[1], _cells(actual_trace, held_before))]
    traces = [actual_trace]
    if expected_trace is not None:
        schedules.insert(0, (titles[0], _cells(expected_trace)))
        traces.insert(0, expected_trace)
    ticks = sorted({tick for _, (cells, _, _) in schedules for tick in cells})
    if not ticks:
        return ["(nothing was scheduled)"]
    columns = _columns(ticks, focus)
    drawn = [tick for tick in columns if tick is not None]
    base = drawn[0] if drawn[-1] > 9999 else 0
    labels = ["~" if tick is None else str(tick - base) for tick in columns]
    ids = sorted({request["id"] for request in requests})
    texts = [text for _, (cells, blocks, tokens) in schedules for row in cells.values() for text in row.values()]
    texts += [str(v) for _, (_, blocks, tokens) in schedules for v in list(blocks.values()) + list(tokens.values())]
    rows = {}  # prefix caching: title -> [(block, cells by tick)]
    if isinstance(config, dict) and config.get("prefix_caching") is True:
        for title, trace in zip([s[0] for s in schedules], traces):
            rows[title] = _block_cells(trace)
            texts += [text for _, row in rows[title] for text in row.values()]
    width = max(len(text) for text in labels + texts + ["."])
    names = [f"req {request_id}" for request_id in ids] + ["blocks", "tokens"]
    names += [f"blk {block}" for title in rows for block, _ in rows[title]]
    header = "tick" if not base else f"tick-{base}"
    name_width = max(len(header), *(len(f"expected {name}") for name in names))

    def line(name: str, values: list[str], note: str = "") -> str:
        return name.ljust(name_width) + " | " + " ".join(v.rjust(width) for v in values) + note

    lines = [line(header, labels)]
    for title, (cells, blocks, tokens) in schedules:
        for index, request_id in enumerate(ids):
            values = ["~" if t is None else cells.get(t, {}).get(request_id, ".") for t in columns]
            lines.append(line(f"{title if index == 0 else '':8} req {request_id}", values))
        lines.append(line(f"{'' if ids else title:8} blocks", ["~" if t is None else str(blocks.get(t, ".")) for t in columns],
                          f"  (of {config['num_blocks']})"))
        lines.append(line(f"{'':8} tokens", ["~" if t is None else str(tokens.get(t, ".")) for t in columns],
                          f"  (budget {config['token_budget']})"))
        for block, row in rows.get(title, ()):
            lines.append(line(f"{'':8} blk {block}", ["~" if t is None else row.get(t, ".") for t in columns]))
    lines.append(LEGEND)
    if rows:
        lines.append(BLOCK_LEGEND)
    return lines


def _block_cells(trace) -> list:
    """[(block, {tick: its count, with ``h`` when the tick took it as a hit})], at most ``MAX_BLOCK_ROWS`` blocks;
    a tick in which it has count 0 and no hit is left out (drawn ``.``)."""
    try:
        counts, hits = block_counts(trace)
    except (TypeError, ValueError, AttributeError, KeyError):  # an entry the target garbled: no rows
        return []
    blocks = sorted({b for row in counts.values() for b in row}, key=lambda b: (type(b) is not int, str(b)))
    out = []
    for block in blocks[:MAX_BLOCK_ROWS]:
        row = {}
        for tick, by_block in counts.items():
            count, hit = by_block.get(block, 0), hits.get(tick, {}).get(block, 0)
            if count or hit:
                row[tick] = f"{count}h" if hit else str(count)
        out.append((block, row))
    return out
