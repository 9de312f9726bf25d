"""The block rows of the HTML report and the text timeline with prefix caching (issue 20): a row per KV block, its
count per tick, hits marked."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET

import spec.serving as serving
from proofs.report import html as html_report

CONFIG = {"max_seqs": 2, "token_budget": 8, "block_size": 2, "num_blocks": 8, "chunked_prefill": True,
          "prefix_caching": True}
# issue 20's P1: request 1 hits blocks 0 and 1, which request 0 freed (count 0) in tick 0
P1 = [{"id": 0, "arrival": 0, "prompt": 4, "tokens": [1, 2, 3, 4], "output": 1},
      {"id": 1, "arrival": 1, "prompt": 5, "tokens": [1, 2, 3, 4, 5], "output": 1}]
# two holders of blocks 0 and 1 at once, both finishing in tick 1
SHARED = [{"id": 0, "arrival": 0, "prompt": 5, "tokens": [1, 2, 3, 4, 5], "output": 2},
          {"id": 1, "arrival": 0, "prompt": 5, "tokens": [1, 2, 3, 4, 6], "output": 2}]


def cells(svg: str) -> list[tuple]:
    """(panel, block, tick, count, hits) of every drawn refcount cell."""
    ns = "{http://www.w3.org/2000/svg}"
    root = ET.fromstring(svg)
    out = []
    for row in root.iter(f"{ns}g"):
        if row.get("class") == "block-row":
            for rect in row.iter(f"{ns}rect"):
                out.append((row.get("data-panel"), int(row.get("data-block")), int(rect.get("data-tick")),
                            int(rect.get("data-count")), int(rect.get("data-hits") or 0)))
    return out


def test_the_counts_follow_the_holders_and_mark_the_hits():
    result = serving.run(copy.deepcopy(SHARED), dict(CONFIG))
    counts, hits = html_report.block_counts(result["trace"])
    assert counts == {0: {0: 2, 1: 2, 2: 1, 3: 1}, 1: {0: 2, 1: 2, 2: 1, 3: 1}}  # both finish at the end of tick 1
    assert hits == {0: {0: 1, 1: 1}}
    drawn = cells(html_report.serving_svg(SHARED, CONFIG, None, result["trace"]))
    assert drawn == [("actual", b, t, 2 if b < 2 else 1, 1 if (b < 2 and t == 0) else 0)
                     for b in range(4) for t in range(2)]


def test_a_hit_on_a_block_of_count_0_is_drawn_in_both_panels_and_the_svg_is_stable():
    result = serving.run(copy.deepcopy(P1), dict(CONFIG))
    svg = html_report.serving_svg(P1, CONFIG, result["trace"], result["trace"], focus=1)
    assert svg == html_report.serving_svg(P1, CONFIG, result["trace"], result["trace"], focus=1)
    drawn = cells(svg)
    for panel in ("expected", "actual"):
        assert [c for c in drawn if c[0] == panel] == [
            (panel, 0, 0, 1, 0), (panel, 0, 1, 1, 1), (panel, 1, 0, 1, 0), (panel, 1, 1, 1, 1), (panel, 2, 1, 1, 0)]
    assert svg.count(">1h<") == 4  # blocks 0 and 1 hit in tick 1, in both panels


def test_without_prefix_caching_there_are_no_block_rows():
    config = dict(CONFIG, prefix_caching=False)
    requests = [{k: v for k, v in r.items() if k != "tokens"} for r in P1]
    result = serving.run(copy.deepcopy(requests), config)
    assert 'class="block-row"' not in html_report.serving_svg(requests, config, None, result["trace"])


def test_a_garbled_entry_draws_no_block_rows_and_no_error():
    result = serving.run(copy.deepcopy(P1), dict(CONFIG))
    garbled = copy.deepcopy(result["trace"])
    garbled[1]["hits"] = [[1, 5]]
    svg = html_report.serving_svg(P1, CONFIG, None, garbled)
    ET.fromstring(svg)
    assert 'class="block-row"' not in svg


def test_the_text_timeline_draws_a_row_per_block_with_its_count_and_hits():
    from proofs.report.serving_timeline import render

    result = serving.run(copy.deepcopy(P1), dict(CONFIG))
    assert render(P1, CONFIG, None, result["trace"]) == [
        "tick            |  0  1",
        "actual   req 0  | 4f  .",
        "         req 1  |  . 1f",
        "         blocks |  0  0  (of 8)",
        "         tokens |  4  1  (budget 8)",
        "         blk 0  |  1 1h",
        "         blk 1  |  1 1h",
        "         blk 2  |  .  1",
        "cells: tokens scheduled; f finished, p preempted, a aborted in that tick; . nothing",
        "blk rows (prefix caching): the block's reference count in the tick; h taken as a hit in it",
    ]
    plain = dict(CONFIG, prefix_caching=False)
    requests = [{k: v for k, v in r.items() if k != "tokens"} for r in P1]
    assert not any("blk" in line for line in render(requests, plain, None, serving.run(requests, plain)["trace"]))
