"""The HTML report (``--html``): one self-contained page, well-formed, drawn from the report the JSON holds.

Without a browser: the page is parsed with ``html.parser`` (every element closed in
order) and every inline SVG with ``xml.etree``; its structure is checked against the
JSON report of the same run and against the spec (the marked tick is where the
oracle says the invariant breaks; one lane per request; the strips' values are the
trace's).  In a real browser: headless Chromium (Debian's ``chromium``) renders the
reports of failing verify runs on a buggy scheduler of each model; a measuring script
added to a copy of the page writes what the browser laid out into the DOM, read back
with ``--dump-dom``, and a screenshot goes to the test's tmp_path.
"""

import copy
import html.parser
import json
import pathlib
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import spec
import spec.serving as serving
from proofs.report import html as html_report
from proofs.targets import load_callable, parse_target

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHAPTER_BUG = f"{ROOT / 'tests' / 'corpus' / 'buggy' / 'sjf_hidden_priority.py'}:schedule"
SERVING_BUG = f"{ROOT / 'tests' / 'corpus' / 'serving' / 'buggy' / 'preempts_oldest.py'}:serve"
VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "wbr", "source"}
SVG_NS = "{http://www.w3.org/2000/svg}"


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "proofs.cli.main", *args], capture_output=True, text=True, cwd=cwd)


class Page(html.parser.HTMLParser):
    """Parses a page, failing on an element closed out of order or left open; keeps every element's attributes."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack, self.elements, self.text = [], [], []
        self.feed(text)
        self.close()
        assert not self.stack, f"left open: {self.stack}"

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag=None, **attrs):
        """Every element of ``tag`` (any when None) whose attributes include ``attrs`` (class matched as a word)."""
        found = []
        for name, have in self.elements:
            if tag is not None and name != tag:
                continue
            ok = True
            for key, want in attrs.items():
                key = key.rstrip("_").replace("_", "-")
                if key == "class":
                    ok = ok and want in (have.get("class") or "").split()
                else:
                    ok = ok and have.get(key) == str(want)
            if ok:
                found.append(have)
        return found


def svgs(text: str) -> list:
    """Every inline SVG of the page, parsed as XML (so each is well-formed on its own)."""
    found = [ET.fromstring(svg) for svg in re.findall(r"<svg\b.*?</svg>", text, re.S)]
    for root in found:
        assert root.tag == f"{SVG_NS}svg"
    return found


def self_contained(text: str) -> None:
    assert "<script" not in text.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), "a link to the network"
    assert "@import" not in text and "url(" not in text


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A failing verify of each model's buggy scheduler, with --json and --html (seed 0, no database)."""
    out = {}
    for name, target, model in (("chapter", CHAPTER_BUG, "chapter"), ("serving", SERVING_BUG, "serving")):
        where = tmp_path_factory.mktemp(name)
        run = cli("verify", target, "--model", model, "--seed", "0", "--budget", "60", "--db", "none",
                  "--save-dir", "saved", "--json", "r.json", "--html", "r.html", cwd=where)
        assert run.returncode == 1, run.stdout + run.stderr
        out[name] = (where, json.loads((where / "r.json").read_text()), (where / "r.html").read_text(), run.stdout)
    return out


def _actual(target: str, call):
    return load_callable(parse_target(target))(*copy.deepcopy(call))


# ------------------------------------------------------------------------------------------ without a browser


def test_the_chapter_page_shows_the_verdict_checks_counterexample_and_first_difference(runs):
    where, report, text, stdout = runs["chapter"]
    self_contained(text)
    page = Page(text)
    (verdict,) = page.find(id="verdict")
    assert verdict["data-verdict"] == "fail" == report["verdict"]
    assert stdout.rstrip().splitlines()[-1] in "".join(page.text)  # the summary line, as printed
    rows = page.find("tr", class_="check")
    assert [(r["data-check"], int(r["data-tried"]), int(r["data-planned"]), r["data-finished"]) for r in rows] == [
        (c["check"], c["tried"], c["planned"], str(c["finished"]).lower()) for c in report["checks"]]
    (cex,) = report["counterexamples"]
    (article,) = page.find("article", class_="counterexample")
    assert article["data-invariant"] == cex["property"] and article["data-engine"] == cex["engine"]
    saved = pathlib.Path("saved") / pathlib.Path(next((where / "saved").iterdir())).name
    assert f"schedcheck replay {saved} {CHAPTER_BUG}" in "".join(page.text)
    (svg,) = svgs(text)
    jobs, slots, continuous = cex["input"]["jobs"], cex["input"]["slots"], cex["input"]["continuous"]
    actual = _actual(CHAPTER_BUG, (jobs, slots, continuous))
    from spec.oracle import first_difference

    tick = first_difference(spec.run(jobs, slots, continuous), actual).tick
    (marker,) = [e for e in svg.iter(f"{SVG_NS}rect") if e.get("id") == "violation"]
    assert int(marker.get("data-tick")) == tick
    differing = sorted(int(e.get("data-tick")) for e in svg.iter(f"{SVG_NS}rect") if "differs" in e.get("class", ""))
    assert differing and differing[0] == tick  # the first outlined cell is at the marked tick
    panels = [g.get("data-panel") for g in svg.iter(f"{SVG_NS}g") if g.get("class") == "panel"]
    assert panels == ["expected", "actual"]
    served = {(int(e.get("data-tick")), int(e.get("data-job"))) for e in svg.iter(f"{SVG_NS}rect")
              if e.get("data-job") is not None}
    want = {(entry["tick"], job) for trace in (spec.run(jobs, slots, continuous)["trace"], actual["trace"])
            for entry in trace for job in entry["served"]}
    assert served == want


def test_the_serving_page_has_a_lane_per_request_strips_and_the_violated_tick(runs):
    where, report, text, _ = runs["serving"]
    self_contained(text)
    page = Page(text)
    assert page.find(id="verdict")[0]["data-verdict"] == "fail"
    (cex,) = report["counterexamples"]
    requests, config = cex["input"]["requests"], cex["input"]["config"]
    (svg,) = svgs(text)
    lanes = [g for g in svg.iter(f"{SVG_NS}g") if g.get("class") == "lane"]
    for panel in ("expected", "actual"):
        assert sorted(int(g.get("data-request")) for g in lanes if g.get("data-panel") == panel) == \
            sorted(r["id"] for r in requests)
    actual = _actual(SERVING_BUG, (requests, config))
    broken = [v for v in serving.check(requests, config, actual) if v.invariant == cex["property"]]
    (marker,) = [e for e in svg.iter(f"{SVG_NS}rect") if e.get("id") == "violation"]
    assert int(marker.get("data-tick")) == broken[0].tick
    phases = {e.get("data-phase") for g in lanes for e in g.iter(f"{SVG_NS}rect")}
    assert phases <= set(html_report.PHASES) and {"prefill", "decode", "preempted", "finished"} <= phases
    actual_lanes = {int(g.get("data-request")): g for g in lanes if g.get("data-panel") == "actual"}
    preempted = {(r, e["tick"]) for e in actual["trace"] for r in e["preempted"]}
    drawn = {(r, int(c.get("data-tick"))) for r, g in actual_lanes.items() for c in g.iter(f"{SVG_NS}rect")
             if c.get("data-phase") == "preempted"}
    assert drawn == preempted
    strips = {(g.get("data-panel"), g.get("class")): g for g in svg.iter(f"{SVG_NS}g") if "strip" in g.get("class", "")}
    tokens = {int(b.get("data-tick")): int(b.get("data-value")) for b in strips["actual", "strip strip-tokens"].iter(f"{SVG_NS}rect")}
    assert tokens == {e["tick"]: sum(n for _, n in e["scheduled"]) for e in actual["trace"]}
    assert strips["actual", "strip strip-tokens"].get("data-limit") == str(config["token_budget"])
    assert strips["actual", "strip strip-blocks"].get("data-limit") == str(config["num_blocks"])
    held, blocks = 0, {}
    for e in actual["trace"]:
        held += sum(len(b) for _, b in e["allocated"]) - sum(len(b) for _, b in e["freed"])
        blocks[e["tick"]] = held
    assert {int(b.get("data-tick")): int(b.get("data-value"))
            for b in strips["actual", "strip strip-blocks"].iter(f"{SVG_NS}rect")} == blocks


@pytest.mark.parametrize("name", ["chapter", "serving"])
def test_the_page_is_the_json_report_rendered_byte_for_byte_with_no_path_it_was_not_given(runs, name):
    where, report, text, stdout = runs[name]
    target = CHAPTER_BUG if name == "chapter" else SERVING_BUG
    actuals = [_actual(target, tuple(cex["input"].values())) for cex in report["counterexamples"]]
    again = html_report.verify_page(report, actuals, "saved", stdout.rstrip().splitlines()[-1])
    assert again == text  # the CLI's page is the JSON report (and the target's result) rendered, nothing else
    assert html_report.verify_page(copy.deepcopy(report), actuals, "saved", stdout.rstrip().splitlines()[-1]) == again
    assert str(where) not in text and "seconds" not in text


def test_the_checkers_reject_what_they_are_meant_to():
    with pytest.raises(AssertionError):
        Page("<div><span></div></span>")
    with pytest.raises(AssertionError):
        Page("<section><p>open")
    with pytest.raises(ET.ParseError):
        svgs('<svg xmlns="http://www.w3.org/2000/svg"><text>a & b</text></svg>')
    for bad in ("<script>x()</script>", '<img src="https://example.com/x.png">', "<style>@import 'x.css'</style>"):
        with pytest.raises(AssertionError):
            self_contained(bad)


HOSTILE = "<script>alert(1)</script></svg></pre>&amp; \x00\x1b[31m \"quoted\" 'single' \ud800"


def test_everything_from_the_target_is_escaped():
    report = {
        "verdict": "fail", "target": "x.py:schedule<b>", "seconds": 1.0,
        "counterexamples": [{
            "property": "signature" + HOSTILE, "engine": "hypothesis", "check": "conformance", "input": None,
            "input_repr": "schedule(" + HOSTILE + ")", "message": HOSTILE + "\nline two", "rule": "",
        }],
        "checks": [{"check": "conformance<i>", "unit": "calls", "tried": 1, "planned": 2, "finished": False,
                    "stopped": HOSTILE}],
        "flaky": [{"invariant": HOSTILE, "size": 1, "message": HOSTILE, "input_repr": HOSTILE}],
    }
    text = html_report.verify_page(report, [{"trace": HOSTILE}])
    self_contained(text)
    page = Page(text)
    assert "<b>" not in text and "<i>" not in text and "\x00" not in text and "\x1b" not in text
    joined = "".join(page.text)
    assert "<script>alert(1)</script>" in joined and "\\x00" in joined and "\\x1b" in joined
    assert page.find("article", class_="counterexample")[0]["data-invariant"].startswith("signature<script>")
    # a parseable input whose result is garbage: the message escaped, and a note instead of a picture
    cex = {"property": "well_typed", "engine": "hypothesis", "check": "conformance",
           "input": {"jobs": [{"id": 0, "arrival": 0, "tokens": 1}], "slots": 1, "continuous": True},
           "input_repr": 'schedule([{"id": 0, "arrival": 0, "tokens": 1}], slots=1, continuous=True)',
           "message": HOSTILE, "rule": ""}
    text = html_report.verify_page({"verdict": "fail", "target": "t.py:schedule", "counterexamples": [cex]},
                                   [{"completed": HOSTILE, "trace": [{"tick": "<i>", "served": None}]}])
    page = Page(text)
    assert "<i>" not in text and not svgs(text) and "(no timeline:" in "".join(page.text)


def test_a_pass_page_says_pass_with_every_check_finished_and_no_counterexample():
    checks = [{"check": name, "unit": "calls", "tried": 5, "planned": 5, "finished": True, "stopped": ""}
              for name in ("replay", "validation", "conformance")]
    text = html_report.verify_page({"verdict": "pass", "target": "impl:schedule", "counterexamples": [],
                                    "checks": checks, "calls": 15}, [], summary="PASS impl:schedule  engine=hypothesis")
    page = Page(text)
    assert page.find(id="verdict")[0]["data-verdict"] == "pass"
    assert [r["data-finished"] for r in page.find("tr", class_="check")] == ["true"] * 3
    assert page.find("section", id="counterexamples")[0]["data-count"] == "0"
    assert not page.find("article") and not svgs(text) and not page.find(id="violation")


def test_a_long_run_is_windowed_around_the_violation_and_says_so(tmp_path):
    requests = [{"id": 0, "arrival": 0, "prompt": 1, "output": 200}]
    config = {"max_seqs": 1, "token_budget": 4, "block_size": 4, "num_blocks": 64, "chunked_prefill": True}
    reference = serving.run(requests, config)
    broken = copy.deepcopy(reference)
    broken["trace"][150]["scheduled"] = [[0, 2]]
    svg_text = html_report.serving_svg(requests, config, reference["trace"], broken["trace"], focus=150)
    root = ET.fromstring(svg_text)
    ticks = {int(e.get("data-tick")) for e in root.iter(f"{SVG_NS}rect") if e.get("data-tick") is not None}
    assert 150 in ticks and len(ticks) <= html_report.MAX_TICKS and min(ticks) > 100 and max(ticks) < 199
    assert root.get("data-windowed") == "true"
    note = [e.text for e in root.iter(f"{SVG_NS}text") if e.get("class") == "window-note"]
    assert note and f"of 0-{reference['trace'][-1]['tick']} shown" in note[0] and "around tick 150" in note[0]
    jobs = [{"id": 0, "arrival": 0, "tokens": 120}, {"id": 1, "arrival": 0, "tokens": 1}]
    run = spec.run(jobs, 1, True)
    chapter = ET.fromstring(html_report.chapter_svg(run["trace"], run["trace"], focus=100))
    drawn = {int(e.get("data-tick")) for e in chapter.iter(f"{SVG_NS}rect") if e.get("data-tick") is not None}
    assert 100 in drawn and len(drawn) <= html_report.MAX_TICKS and min(drawn) > 50
    assert chapter.get("data-windowed") == "true"
    assert [e.text for e in chapter.iter(f"{SVG_NS}text") if e.get("class") == "window-note"][0].endswith("around tick 100)")
    short = ET.fromstring(html_report.serving_svg(requests, config, reference["trace"][:10], reference["trace"][:10], 3))
    assert short.get("data-windowed") == "false"
    assert not [e for e in short.iter(f"{SVG_NS}text") if e.get("class") == "window-note"]


def test_trace_html_marks_the_violation_in_the_recorded_window(tmp_path):
    from proofs.trace.files import header_of, write
    from tests import serving_examples as ex

    trace = copy.deepcopy(ex.S1_TRACE)
    trace[0].update(scheduled=[[0, 5]], allocated=[[0, [0, 1, 2]]])  # 5 tokens under a budget of 4
    path = tmp_path / "t.jsonl"
    write(str(path), header_of("serving", (ex.S1_REQUESTS, ex.S1_CONFIG)), trace)
    run = cli("trace", "t.jsonl", "--html", "t.html", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    text = (tmp_path / "t.html").read_text()
    self_contained(text)
    page = Page(text)
    (article,) = page.find("article", class_="counterexample")
    assert article["data-invariant"] == "token_budget" and article["data-tick"] == "0"
    (svg,) = svgs(text)
    (marker,) = [e for e in svg.iter(f"{SVG_NS}rect") if e.get("id") == "violation"]
    assert marker.get("data-tick") == "0"
    over = [e for e in svg.iter(f"{SVG_NS}rect") if "over" in (e.get("class") or "").split()]
    assert [(e.get("data-tick"), e.get("data-value")) for e in over] == [("0", "5")]
    lanes = {g.get("data-request") for g in svg.iter(f"{SVG_NS}g") if g.get("class") == "lane"}
    assert lanes == {str(r["id"]) for r in ex.S1_REQUESTS}


def test_a_chapter_trace_draws_its_timeline(tmp_path):
    from proofs.trace.files import header_of, write

    jobs = [{"id": 0, "arrival": 0, "tokens": 2}, {"id": 1, "arrival": 0, "tokens": 1}]
    trace = copy.deepcopy(spec.run(jobs, 1, True)["trace"])
    trace[1]["served"] = [0, 1]  # two jobs in one slot
    write(str(tmp_path / "c.jsonl"), header_of("chapter", (jobs, 1, True)), trace)
    run = cli("trace", "c.jsonl", "--html", "c.html", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    text = (tmp_path / "c.html").read_text()
    Page(text)
    (svg,) = svgs(text)
    assert svg.get("data-model") == "chapter" and svg.get("data-focus") == "1"


@pytest.mark.slow
def test_a_diff_draws_old_above_new(tmp_path):
    lifo = f"{ROOT / 'tests' / 'corpus' / 'buggy' / 'lifo_admission.py'}:schedule"
    run = cli("diff", f"{ROOT / 'impl' / '__init__.py'}:schedule", lifo, "--seed", "0", "--budget", "20",
              "--html", "d.html", "--json", "d.json", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    report = json.loads((tmp_path / "d.json").read_text())
    text = (tmp_path / "d.html").read_text()
    page = Page(text)
    articles = page.find("article", class_="difference")
    assert [a["data-classification"] for a in articles] == [d["classification"] for d in report["differences"]]
    assert svgs(text) and page.find(id="violation")


PROVE_REPORT = {"verdict": "fail", "results": [
    {"claim": "slot_bound", "status": "proved", "method": "inductive", "bound": "n <= 2",
     "hypotheses_satisfiable": "yes", "refuted_by": "admit_while_le_slots", "seconds": 0.5, "counterexample": None},
    {"claim": "fifo_order", "status": "refuted", "method": "inductive", "bound": "n <= 2",
     "hypotheses_satisfiable": "yes", "refuted_by": None, "seconds": 0.7,
     "counterexample": {"call": "schedule([<x>], slots=1, continuous=True)", "breaks": "fifo_order"}},
    {"claim": "termination", "status": "unknown", "method": "bounded", "bound": "n <= 2",
     "hypotheses_satisfiable": "yes", "refuted_by": None, "seconds": 120.0, "counterexample": None},
]}


def test_the_prove_ledger_is_a_table_with_bounds_and_methods():
    text = html_report.prove_page(PROVE_REPORT, seconds=False)
    page = Page(text)
    rows = page.find("tr", class_="claim")
    assert [(r["data-claim"], r["data-status"], r["data-method"], r["data-bound"]) for r in rows] == [
        (r["claim"], r["status"], r["method"], r["bound"]) for r in PROVE_REPORT["results"]]
    assert page.find(id="verdict")[0]["data-verdict"] == "fail"
    assert "0.70" not in text and "seconds" not in text  # seconds left out when asked
    assert "schedcheck prove --claims fifo_order" in "".join(page.text)
    assert "<x>" not in text and "&lt;x&gt;" in text
    assert "0.70" in html_report.prove_page(PROVE_REPORT, seconds=True)


def test_bad_report_objects_are_rejected_naming_the_field():
    with pytest.raises(ValueError, match="report="):
        html_report.verify_page([])
    with pytest.raises(ValueError, match="actuals"):
        html_report.verify_page({"verdict": "fail", "counterexamples": [{}]}, [])
    with pytest.raises(ValueError, match="title="):
        html_report.page(None, [])
    with pytest.raises(ValueError, match="'num_blocks' is an int >= 1"):
        html_report.serving_svg([], {"num_blocks": 0, "token_budget": 1}, None, [])
    with pytest.raises(ValueError, match="focus='3'"):
        html_report.chapter_svg(None, [], focus="3")


@pytest.mark.parametrize("argv", [
    ["verify", CHAPTER_BUG],
    ["diff", "impl:schedule", "impl:schedule"],
    ["trace", "t.jsonl"],
    ["prove", "--claims", "slot_bound"],
])
def test_an_html_path_in_a_missing_folder_is_a_usage_error_before_any_work(tmp_path, argv):
    run = cli(*argv, "--html", str(tmp_path / "missing" / "r.html"), cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "--html" in run.stderr and "does not exist" in run.stderr, run.stderr
    assert run.stdout == ""


@pytest.mark.slow
def test_gate_writes_an_index_linking_each_step_page(tmp_path):
    out = tmp_path / "reports"
    run = cli("gate", CHAPTER_BUG, "--seed", "0", "--examples", "40", "--budget", "10", "--db", "none",
              "--out", str(out), "--skip", "verify-crosshair", "--skip", "prove", "--no-seconds", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    summary = json.loads((out / "gate.json").read_text())
    page = Page((out / "index.html").read_text())
    rows = page.find("tr", class_="step")
    assert [(r["data-step"], r["data-verdict"]) for r in rows] == [(s["step"], s["verdict"]) for s in summary["steps"]]
    links = {a["href"] for a in page.find("a")}
    assert "verify-hypothesis.html" in links and (out / "verify-hypothesis.html").is_file()
    step = Page((out / "verify-hypothesis.html").read_text())
    assert step.find("article", class_="counterexample")


def test_gate_s_index_links_the_prove_page_drawn_from_its_json(monkeypatch, tmp_path, capsys):
    from proofs.cli import main as cli_main
    from tests.test_gate import fake_prove, gate, row

    rows = [row("well_typed", "proved"),
            row("slot_bound", "refuted", {"breaks": "slot_bound", "call": "schedule([], slots=1, continuous=True)"})]
    monkeypatch.setattr(cli_main, "build_parser", fake_prove(rows))
    out = tmp_path / "reports"
    assert gate(["--skip", "verify", "--out", str(out), "--no-seconds"]) == 1
    capsys.readouterr()
    index = Page((out / "index.html").read_text())
    assert [(r["data-step"], r["data-verdict"]) for r in index.find("tr", class_="step")] == [
        ("verify-hypothesis", "skipped"), ("verify-crosshair", "skipped"), ("diff", "skipped"), ("prove", "refuted")]
    assert "prove.html" in {a["href"] for a in index.find("a")}
    ledger = Page((out / "prove.html").read_text())
    assert [(r["data-claim"], r["data-status"]) for r in ledger.find("tr", class_="claim")] == [
        ("well_typed", "proved"), ("slot_bound", "refuted")]


@pytest.mark.slow
def test_prove_html_holds_the_ledger_it_prints(tmp_path):
    run = cli("prove", "--max-jobs", "2", "--policy-jobs", "1", "--claims", "slot_bound", "--budget", "60",
              "--json", "p.json", "--html", "p.html", "--no-seconds", cwd=tmp_path)
    report = json.loads((tmp_path / "p.json").read_text())
    page = Page((tmp_path / "p.html").read_text())
    assert run.returncode == {"pass": 0, "fail": 1}.get(report["verdict"], 2)
    assert [r["data-claim"] for r in page.find("tr", class_="claim")] == [r["claim"] for r in report["results"]]


# ------------------------------------------------------------------------------------------ in a real browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install -y chromium; .ci/run does)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-dev-shm-usage", "--mute-audio"]

MEASURE = """<script>
(function () {
  function box(e) { var r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; }
  var out = {};
  out.counterexamples = document.querySelectorAll("article.counterexample").length;
  var v = document.getElementById("violation");
  out.violation = v ? {tick: v.getAttribute("data-tick"), box: box(v)} : null;
  var svg = v ? v.ownerSVGElement : null;
  out.svg = svg ? box(svg) : null;
  out.lanes = {};
  document.querySelectorAll("g.lane").forEach(function (g) {
    var p = g.getAttribute("data-panel"); out.lanes[p] = (out.lanes[p] || 0) + 1; });
  out.cells_at_violation = v ? Array.prototype.filter.call(svg.querySelectorAll("rect.cell"), function (c) {
    var b = c.getBoundingClientRect(), m = v.getBoundingClientRect();
    return c.getAttribute("data-tick") === v.getAttribute("data-tick") && b.width > 0
      && b.left >= m.left - 1 && b.right <= m.right + 1; }).length : 0;
  out.verdict = document.getElementById("verdict").getAttribute("data-verdict");
  out.verdict_color = getComputedStyle(document.getElementById("verdict")).backgroundColor;
  var pre = document.createElement("pre"); pre.id = "measured"; pre.hidden = true; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def render_in_chromium(page_path: pathlib.Path, tmp_path: pathlib.Path) -> dict:
    """What Chromium laid out for the page, and its screenshot in tmp_path, from one headless run.

    The page is copied with a measuring script added before ``</body>``; the script writes its
    measurements into a hidden element, which ``--dump-dom`` prints (so the screenshot is the page's)."""
    probe = tmp_path / "measured.html"
    probe.write_text(page_path.read_text().replace("</body>", MEASURE + "\n</body>"))
    shot = tmp_path / "screenshot.png"
    run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          f"--screenshot={shot}", "--window-size=1100,1400", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    match = re.search(r'<pre id="measured"[^>]*>(.*?)</pre>', run.stdout, re.S)
    assert match, run.stdout[-2000:]
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return json.loads(html.unescape(match.group(1)))


def _inside(inner, outer) -> bool:
    return (inner[2] > 0 and inner[3] > 0 and inner[0] >= outer[0] - 1 and inner[1] >= outer[1] - 1
            and inner[0] + inner[2] <= outer[0] + outer[2] + 1 and inner[1] + inner[3] <= outer[1] + outer[3] + 1)


@needs_chromium
def test_chromium_renders_the_chapter_counterexample_with_its_marked_tick(runs, tmp_path):
    where, report, text, _ = runs["chapter"]
    measured = render_in_chromium(where / "r.html", tmp_path)
    assert measured["counterexamples"] == len(report["counterexamples"]) == 1
    assert measured["verdict"] == "fail" and measured["verdict_color"] != "rgba(0, 0, 0, 0)"
    svg = ET.fromstring(re.search(r"<svg\b.*?</svg>", text, re.S).group())
    want = next(e.get("data-tick") for e in svg.iter(f"{SVG_NS}rect") if e.get("id") == "violation")
    assert measured["violation"]["tick"] == want
    assert _inside(measured["violation"]["box"], measured["svg"])
    at_tick = [e for e in svg.iter(f"{SVG_NS}rect") if "cell" in e.get("class", "").split() and e.get("data-tick") == want]
    assert measured["cells_at_violation"] == len(at_tick) >= 2  # the expected and actual cells of that tick, under the band
    assert (tmp_path / "screenshot.png").stat().st_size > 10_000


@needs_chromium
def test_chromium_renders_one_lane_per_request_and_the_violated_tick(runs, tmp_path):
    where, report, text, _ = runs["serving"]
    measured = render_in_chromium(where / "r.html", tmp_path)
    requests = report["counterexamples"][0]["input"]["requests"]
    assert measured["lanes"] == {"expected": len(requests), "actual": len(requests)}
    assert measured["counterexamples"] == 1 and measured["verdict"] == "fail"
    assert _inside(measured["violation"]["box"], measured["svg"])
    svg = ET.fromstring(re.search(r"<svg\b.*?</svg>", text, re.S).group())
    at_tick = [e for e in svg.iter(f"{SVG_NS}rect")
               if "cell" in e.get("class", "").split() and e.get("data-tick") == measured["violation"]["tick"]]
    assert measured["cells_at_violation"] == len(at_tick) > 0  # every lane's cell of that tick lies under the band
    assert (tmp_path / "screenshot.png").stat().st_size > 10_000
