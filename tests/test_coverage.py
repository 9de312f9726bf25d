"""A pass says what it covered: the corners of the coverage model, how the search aims at them, and the bulk phase.

- the registry: every corner a snake_case name, one sentence, a predicate; the corners of issue 21 all there;
- the serving replay behind the predicates agrees with the spec's own states, step by step;
- every recipe builds valid calls and reaches its corner, and a bulk call's choices replay in Hypothesis;
- every corner (the prefix-caching ones too) has a one-bug scheduler in tests/corpus/ (its CORNER line) whose
  bug shows, through the sandbox, on calls that reach the corner and on no other call tried;
- the bulk phase judges our impl without a finding, finds a corner bug and hands it to the ordinary path, and
  judges a hostile target's batch call by call (no false alarm on an unusual but correct result);
- a verify run reports, per corner, how many calls reached it, and a PASS names the corners never reached.
"""

import collections
import json
import pathlib
import random
import re
import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.database import InMemoryExampleDatabase

import spec
import spec.serving as serving_spec
from proofs import models
from proofs.cli.main import main
from proofs.models import declared
from proofs.sandbox import TargetProcess, harness_collector
from proofs.search import aim, coverage, serving, strategies
from proofs.search.bulk import BulkPhase, caching_recipe
from proofs.search.engine import Search, examples_for
from proofs.targets import parse_target
from spec.serving.state import initial, is_terminal, step

CORPUS = pathlib.Path(__file__).parent / "corpus"
CORRECT = CORPUS / "correct"
FOLDERS = {"chapter": CORPUS / "buggy", "serving": CORPUS / "serving" / "buggy"}
FUNCTION = {"chapter": "schedule", "serving": "serve"}
RUN = {"chapter": spec.run, "serving": serving_spec.run}
VALID = {"chapter": spec.is_valid, "serving": serving_spec.is_valid}
STRATEGY = {"chapter": strategies.valid_calls, "serving": serving.valid_calls}
CORNERS = (  # the interesting cases the chapter's statistics name (strategies.features)
    "idle gap >= 2**32", "arrivals 0 and >= 2**32 together", "arrival >= 2**64", "same-tick arrivals",
    "negative id", "ids spread >= 2**64", "id beyond 64 bits", "33-299 jobs", "300+ jobs", "one slot",
)
ISSUE_21 = {  # the corners issue 21 names, and those the old statistics named, per model
    "chapter": {"one_slot", "same_tick_arrivals", "idle_gap", "idle_jump_2_32", "arrival_span_2_32", "arrival_2_64",
                "idle_jump_to_int32_max", "steps_past_int32_max", "negative_id", "ids_spread_2_64",
                "id_beyond_64_bits", "queue_over_32", "queue_over_200", "busy_slots_256", "over_300_jobs"},
    "serving": {"max_seqs_full_with_queue", *(f"budget_exact_{k}" for k in range(1, 9)), "budget_left_below_chunk",
                "pool_emptied_by_admission", "preemption_with_3_running", "preempted_twice", "abort_waiting",
                "abort_running", "abort_preempted", "abort_just_finished", "request_needs_whole_pool", "idle_gap",
                "idle_jump_to_int32_max", "steps_past_int32_max"},
}


def drawn_features(strategy, examples: int) -> collections.Counter:
    seen = collections.Counter()

    @settings(max_examples=examples, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def draw(call):
        assert spec.is_valid(*call), call
        seen.update(strategies.features(call))

    draw()
    return seen


def recipe_calls(model: str, count: int, seed: int = 0, large: bool = True):
    """``count`` calls from the model's recipes in turn (seeded), each with its recipe's corner."""
    rng = random.Random(seed)
    book = [r for r in aim.recipes(model) if large or not r.large]
    for index in range(count):
        recipe = book[index % len(book)]
        yield recipe.corner, recipe.build(aim.RandomChooser(rng))


# -- the registry ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["chapter", "serving"])
def test_every_corner_is_a_named_claim_with_one_sentence(model):
    corners = coverage.corners(model)
    names = [c.name for c in corners]
    assert len(set(names)) == len(names)
    for corner in corners:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", corner.name), corner.name
        assert corner.doc.endswith(".") and "\n" not in corner.doc and callable(corner.reached), corner
    assert ISSUE_21[model] <= set(names), ISSUE_21[model] - set(names)
    assert [r.corner for r in aim.recipes(model)] == ["generic", *names]  # one recipe per corner, in registry order


CACHING_NAMES = tuple(corner.name for corner in coverage.SERVING_CACHE)


def test_the_prefix_caching_corners_are_counted_only_where_caching_is_drawn():
    assert "SERVING_CACHE" in coverage.__doc__ and len(CACHING_NAMES) >= 7
    assert set(coverage.names("serving")).isdisjoint(CACHING_NAMES)
    assert coverage.names("serving", caching=True) == coverage.names("serving") + CACHING_NAMES
    assert coverage.Coverage("serving").unreached() == list(coverage.names("serving"))
    assert coverage.Coverage("serving", caching=True).unreached()[-len(CACHING_NAMES):] == list(CACHING_NAMES)


def _caching_corners(requests, config):
    return set(coverage.reached("serving", (requests, config), serving_spec.run(requests, config), caching=True)) & set(CACHING_NAMES)


def test_the_caching_predicates_read_the_reference_right():
    config = {"max_seqs": 2, "token_budget": 8, "block_size": 2, "num_blocks": 8, "chunked_prefill": True,
              "prefix_caching": True}
    first = {"id": 0, "arrival": 0, "prompt": 5, "output": 3, "tokens": [1, 2, 3, 4, 5]}
    # arrives while the first runs: it hits the first's two full blocks, held (a prefix of 4 tokens shared: on a boundary)
    held = _caching_corners([first, {"id": 1, "arrival": 2, "prompt": 5, "output": 2, "tokens": [1, 2, 3, 4, 6]}], config)
    assert held == {"shared_prefix_on_block_boundary", "hit_on_held_block"}, held
    # arrives after the first finished: it hits blocks in the free queue; 5 tokens shared, off a boundary
    late = _caching_corners([first, {"id": 1, "arrival": 9, "prompt": 6, "output": 1, "tokens": [1, 2, 3, 4, 5, 0]}],
                            config)
    assert late == {"shared_prefix_off_block_boundary", "hit_on_free_block"}, late
    # a twin admitted in the first's tick hits the blocks the first took earlier in that tick: the replay goes in
    # scheduling order, so it sees them held and the first's prompt started
    twins = _caching_corners([first, dict(first, id=1, output=2)], dict(config, token_budget=64))
    assert twins == {"shared_prefix_off_block_boundary", "hit_on_held_block"}, twins
    # the same calls with caching off reach none of them
    assert not _caching_corners([first, dict(first, id=1, arrival=2)], dict(config, prefix_caching=False))


def test_the_caching_calls_reach_every_caching_corner_and_every_family():
    """400 seeded calls of the caching recipe (what the bulk phase and Hypothesis both draw from): every caching corner
    reached at least 5 times, every prompt family drawn, every call valid."""
    rng = random.Random(7)
    corners, families = collections.Counter(), collections.Counter()
    for _ in range(400):
        call = serving.build_caching_call(aim.RandomChooser(rng))
        assert serving_spec.is_valid(*call), call
        corners.update(_caching_corners(*call))
        families.update(serving.caching_features(call))
    assert min(corners[name] for name in CACHING_NAMES) >= 5, corners
    assert set(families) == set(serving.FAMILY_FEATURES) | {"prefix caching on", "prefix caching off"}, families


def test_a_caching_bulk_calls_choices_replay_as_the_same_call_in_hypothesis():
    """With caching drawn, the bulk phase's choices (its caching recipe's, and an aimed recipe's) replay in
    valid_calls(caching=True) as the very call it made."""
    original = STRATEGY["serving"]
    STRATEGY["serving"] = lambda: serving.valid_calls(caching=True)
    try:
        for seed in range(6):
            for index, recipe in ((aim.CACHING_RECIPE, caching_recipe()), (seed + 1, aim.recipes("serving")[seed + 1])):
                chooser = aim.RandomChooser(random.Random(seed))
                call = recipe.build(chooser)
                replayed = replayed_by_hypothesis("serving", aim.choices_for("serving", index, chooser.choices, True))
                assert replayed == call and type(replayed[0]) is type(call[0]), (seed, recipe.corner)
    finally:
        STRATEGY["serving"] = original


def test_caching_is_drawn_only_for_a_target_that_supports_it():
    corpus = pathlib.Path(__file__).parent / "corpus" / "serving"
    plain = declared.for_target(models.get("serving"), parse_target(f"{corpus / 'correct' / 'tick_by_tick.py'}:serve"))
    assert not plain.draws_caching  # a scheduler written before issue 20 rejects prefix_caching and tokens
    for text in ("impl:serve", f"{corpus / 'buggy' / 'cache_whole_prompt_hit.py'}:serve"):
        assert declared.for_target(models.get("serving"), parse_target(text)).draws_caching, text
    assert not declared.for_target(models.get("chapter"), parse_target("impl:schedule")).__dict__.get("draws_caching")


# -- the predicates read the reference run right -------------------------------------------------------------


def serving_facts_by_states(call) -> dict:
    """The serving corners' facts from the spec's own states, tick by tick (independent of the trace replay)."""
    requests, config = call
    state = initial(requests, config)
    facts = {"preempt_running": 0, "preempted_twice": False, "resumed": False, "aborts": set(),
             "pool_emptied": False, "seqs_full_with_queue": False, "budget_exact": set()}
    finished = []
    while not is_terminal(state):
        after = step(state)
        entry = after.latest
        gone = set(entry.aborted)
        for p in state.waiting + state.running:
            if p.id in gone:
                in_running = any(q.id == p.id for q in state.running)
                facts["aborts"].add("running" if in_running else "preempted" if p.start is not None else "waiting")
        at_start = [p for p in state.running if p.id not in gone]
        if entry.preempted:
            facts["preempt_running"] = max(facts["preempt_running"], len(at_start))
        was_running = {p.id for p in at_start}
        admitted = [rid for rid, _ in entry.scheduled if rid not in was_running]
        before = {p.id: p for p in state.waiting}
        if any(before[rid].preemptions > 0 for rid in admitted):
            facts["resumed"] = True
        finished_blocks = sum(len(blocks) for rid, blocks in entry.freed if rid in entry.finished)
        held = sum(len(p.blocks) for p in after.running) + finished_blocks
        if admitted and held == config["num_blocks"]:
            facts["pool_emptied"] = True
        if (not entry.preempted and len(after.running) + len(entry.finished) >= config["max_seqs"]
                and after.waiting and after.waiting[0].request.arrival <= entry.tick):
            facts["seqs_full_with_queue"] = True
        if sum(n for _, n in entry.scheduled) == config["token_budget"]:
            facts["budget_exact"].add(len(entry.scheduled))
        if any(p.preemptions >= 2 for p in after.waiting + after.running):
            facts["preempted_twice"] = True
        finished += after.finished[len(state.finished):]
        state = after
    finish = {done.progress.id: done.tick for done in finished}
    if any(r.get("abort") is not None and finish.get(r["id"]) == r["abort"] for r in requests):
        facts["aborts"].add("just finished")
    return facts


def test_the_serving_replay_agrees_with_the_spec_states():
    checked = 0
    for _, call in recipe_calls("serving", 300, seed=1):
        facts = coverage.serving_facts(call, serving_spec.run(*call))
        expected = serving_facts_by_states(call)
        got = {key: getattr(facts, "resumed" if key == "resumed" else key) for key in expected}
        assert got == expected, call
        checked += 1
    assert checked == 300


def test_the_chapter_facts_agree_with_a_count_per_tick():
    for _, call in recipe_calls("chapter", 200, seed=2, large=False):
        jobs, slots, _ = call
        reference = spec.run(*call)
        facts = coverage.chapter_facts(call, reference)
        start = {done["id"]: done["start"] for done in reference["completed"]}
        before_admissions = max((sum(1 for j in jobs if j["arrival"] <= t and start[j["id"]] >= t)
                                 for t in {j["arrival"] for j in jobs}), default=0)
        assert facts.max_waiting == before_admissions
        full = any(len(e["served"]) == slots and any(j["arrival"] <= e["tick"] < start[j["id"]] for j in jobs)
                   for e in reference["trace"])
        assert facts.full_with_queue == full
        assert facts.max_busy == max((len(e["served"]) for e in reference["trace"]), default=0)


# -- the recipes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["chapter", "serving"])
def test_every_recipe_builds_valid_calls_and_reaches_its_corner(model):
    reached = collections.Counter()
    tried = collections.Counter()
    for corner, call in recipe_calls(model, 40 * len(aim.recipes(model)), seed=3):
        assert VALID[model](*call), (corner, call)
        tried[corner] += 1
        if corner in coverage.reached(model, call, RUN[model](*call)):
            reached[corner] += 1
    missed = [corner for corner in tried if corner != "generic" and reached[corner] < tried[corner] // 10]
    assert not missed, {corner: (reached[corner], tried[corner]) for corner in missed}


def replayed_by_hypothesis(model: str, choices: tuple):
    """What ``valid_calls()`` of ``model`` draws when Hypothesis replays ``choices`` from its example database."""
    from hypothesis.database import choices_to_bytes

    database = InMemoryExampleDatabase()
    replayed = []

    @settings(database=database, max_examples=1, phases=[Phase.reuse], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(STRATEGY[model]())
    def test(value):
        replayed.append(value)

    test._hypothesis_internal_database_key = b"key"
    database.save(b"key", choices_to_bytes(choices))
    test()
    return replayed[0] if replayed else None


@pytest.mark.parametrize("model", ["chapter", "serving"])
def test_a_bulk_calls_choices_replay_as_the_same_call_in_hypothesis(model):
    """The choices a RandomChooser recorded (for a call and for its variant), stored as an example of
    valid_calls(), make Hypothesis draw that very call."""
    for index, recipe in enumerate(aim.recipes(model)):
        for seed in range(2):
            chooser = aim.RandomChooser(random.Random(100 * seed + index))
            call = recipe.build(chooser)
            other, choices = aim.variant(chooser, (chooser.choices[-2] + 1) % aim.KINDS, (chooser.choices[-1] + 1) % aim.ORDERS)
            for made, made_choices in ((call, chooser.choices), (other, choices)):
                replayed = replayed_by_hypothesis(model, aim.choices_for(model, index, made_choices))
                assert replayed == made and type(replayed[0]) is type(made[0]), recipe.corner


@pytest.mark.parametrize("model", ["chapter", "serving"])
def test_a_call_and_its_variant_have_the_same_reference_run(model):
    """The bulk phase judges a call and its variant (another container and caller's order) by one reference run."""
    rng = random.Random(5)
    for index in range(300):
        recipe = aim.recipes(model)[index % len(aim.recipes(model))]
        chooser = aim.RandomChooser(rng)
        call = recipe.build(chooser)
        for kind in range(aim.KINDS):
            for order in range(aim.ORDERS):
                other, _ = aim.variant(chooser, kind, order)
                assert RUN[model](*other) == RUN[model](*call), (recipe.corner, kind, order)


def test_valid_calls_reach_every_case_the_docs_name():
    seen = drawn_features(strategies.valid_calls(), 400)
    missing = [corner for corner in CORNERS if not seen[corner]]
    assert not missing, f"never drawn: {missing}; drawn: {dict(seen)}"


def test_large_inputs_are_cheap_and_only_where_asked():
    seen = drawn_features(strategies.valid_calls(max_jobs=8), 150)
    assert not seen["33-299 jobs"] and not seen["300+ jobs"], dict(seen)

    @settings(max_examples=40, database=None, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(strategies.large_calls())
    def cheap(call):
        jobs, slots, _ = call
        assert 33 <= len(jobs) <= 2000 and max(job["tokens"] for job in jobs) <= 3
        assert sum(job["tokens"] for job in jobs) <= strategies.busy_ticks(len(jobs)) * slots, (len(jobs), slots)
        assert len(jobs) * strategies.busy_ticks(len(jobs)) <= strategies.LARGE_JOB_TICKS

    cheap()


def test_the_docs_do_not_promise_ties_in_the_fifo_key():
    doc = strategies.__doc__
    assert "ties in the FIFO key" not in doc and "never ties" in doc


# -- one bug per corner ----------------------------------------------------------------------------------------


def corner_files(model: str) -> dict:
    """{corner: [corpus files whose CORNER names it]} for ``model``."""
    found = collections.defaultdict(list)
    for path in sorted(FOLDERS[model].glob("*.py")):
        match = re.search(r'^CORNER = "(\w+)"', path.read_text(), re.M)
        if match:
            found[match.group(1)].append(path)
    return found


@pytest.mark.parametrize("model", ["chapter", "serving"])
def test_every_corner_has_a_one_bug_scheduler_in_the_corpus(model):
    """Every corner of the model, the prefix-caching ones included (serving), is named by some corpus file's CORNER."""
    found = corner_files(model)
    names = set(coverage.names(model, caching=True))
    assert set(found) <= names, set(found) - names
    assert names <= set(found), names - set(found)


CORNER_FILES = [(model, corner, path) for model in ("chapter", "serving")
                for corner, paths in corner_files(model).items() if corner not in CACHING_NAMES for path in paths]
CACHING_CORNER_FILES = [(corner, path) for corner, paths in corner_files("serving").items() if corner in CACHING_NAMES
                        for path in paths]


@pytest.mark.parametrize("model, corner, path", CORNER_FILES, ids=[f"{m}-{p.stem}" for m, _, p in CORNER_FILES])
def test_the_bug_of_a_corner_file_shows_only_where_its_corner_is_reached(model, corner, path):
    """Through the sandbox (a bug may hang, crash or exit): the bug shows on some call reaching its corner,
    and every call on which the result is not the reference's reaches the corner."""
    target = parse_target(f"{path}:{FUNCTION[model]}")
    own = next(r for r in aim.recipes(model) if r.corner == corner)
    others = [r for r in aim.recipes(model) if r.corner != corner and not r.large]
    rng = random.Random(11)
    shown, outside = 0, []
    with TargetProcess(target, call_seconds=0.5, shape=models.get(model).shape) as process, harness_collector():
        for index in range(90):
            recipe = own if index % 3 == 0 else others[index % len(others)]
            call = recipe.build(aim.RandomChooser(rng))
            reference = RUN[model](*call)
            outcome = process.call(*call)
            if outcome.kind == "returned" and outcome.result == reference:
                continue
            if corner in coverage.reached(model, call, reference):
                shown += 1
            else:
                outside.append(call)
    assert shown, f"{path.name}: the bug never showed on 30 calls aimed at {corner}"
    assert not outside, f"{path.name}: the bug shows on a call that does not reach {corner}: {outside[0]!r}"


@pytest.mark.parametrize("corner, path", CACHING_CORNER_FILES, ids=[p.stem for _, p in CACHING_CORNER_FILES])
def test_the_bug_of_a_caching_corner_file_shows_only_where_its_corner_is_reached(corner, path):
    """The same two halves for a prefix-caching corner, whose calls come from the one caching recipe (the bulk
    phase's, which Hypothesis's valid_calls(caching=True) replays; the rarest caching corner, abort_of_shared_block,
    is reached by 7 to 9% of its calls): 60 calls from it, 30 from the serving recipes (no prefix caching: the bug
    must not show there either).  A result is judged by the oracle, not by equality with the reference: a caching scheduler may echo the
    caller's tuples and report hits with caching unnamed, as the contract allows."""
    target = parse_target(f"{path}:serve")
    caching = caching_recipe()
    others = [r for r in aim.recipes("serving") if r.corner != "generic" and not r.large]
    rng = random.Random(11)
    reaching, shown, outside = 0, 0, []
    with TargetProcess(target, call_seconds=0.5, shape=models.get("serving").shape) as process, harness_collector():
        for index in range(90):
            recipe = others[index % len(others)] if index % 3 == 2 else caching
            call = recipe.build(aim.RandomChooser(rng))
            reference = serving_spec.run(*call)
            reached = corner in coverage.reached("serving", call, reference, caching=True)
            reaching += reached
            outcome = process.call(*call)
            if outcome.kind == "returned" and not serving_spec.check(*call, outcome.result):
                continue
            if reached:
                shown += 1
            else:
                outside.append(call)
    assert shown, f"{path.name}: the bug never showed on the {reaching} calls of 90 that reach {corner}"
    assert not outside, f"{path.name}: the bug shows on a call that does not reach {corner}: {outside[0]!r}"


# -- the bulk phase ---------------------------------------------------------------------------------------------


def bulk_search(target_text: str, model_name: str, planned: int, database=None, seed: int = 0, as_verify: bool = False,
                **search):
    """A search of the target; ``as_verify``: over the model verify takes for it (prefix caching drawn for a target
    that supports it, our impl included: proofs.models.declared), else over the plain model."""
    model = models.get(model_name)
    if as_verify:
        model = declared.for_target(model, parse_target(target_text))
    process = TargetProcess(parse_target(target_text), shape=model.shape)
    process.start()
    run = Search(process, time.monotonic() + 120, seed=seed, database=database, model=model,
                 examples=examples_for(50) | {"bulk": planned}, **search)
    return run, process


@pytest.mark.parametrize("model", ["chapter", "serving"])
def test_the_bulk_phase_judges_our_impl_by_its_bytes_alone(model):
    run, process = bulk_search(models.get(model).default_target, model, 1200)
    with process:
        assert run.run(only={"bulk"}) == []
    account = run.checks[0]
    assert account.check == "bulk" and account.finished and account.tried == 1200 == run.bulk.calls
    assert run.bulk.rerun == 0  # every answer was the reference's bytes: no call ran twice
    assert run.bulk.references == 600  # a call and its variant share one reference run
    assert run.coverage.phases["bulk"]["calls"] == 1200 and run.bounds.calls == 1200
    assert run.bulk.child_seconds > 0


def test_a_bulk_finding_goes_through_the_ordinary_minimiser_and_into_the_database(tmp_path):
    path = FOLDERS["serving"] / "overshoots_budget_with_2_running.py"
    database = InMemoryExampleDatabase()
    run, process = bulk_search(f"{path}:serve", "serving", 3000, database=database)
    with process:
        key = run.database_key("conformance")  # before the finding: the key the bulk phase saved under
        found = run.run(only={"bulk"})
    assert len(found) == 1
    cex = found[0].counterexample
    assert cex.property == "token_budget" and cex.check == "conformance" and cex.engine == "hypothesis"
    assert len(cex.call[0]) == 2  # minimised: two requests are the fewest that run two at once
    assert run.checks[0].stopped == "counterexample"
    stored = list(database.fetch(key))
    assert stored  # the failing call's choices, under the conformance search's key
    # ... which the conformance search replays first: it fails on its first example
    run2, process2 = bulk_search(f"{path}:serve", "serving", 0, database=database)
    with process2:
        assert run2.database_key("conformance") == key
        again = run2.run(only={"conformance"})
    assert again and again[0].counterexample.property == "token_budget"
    assert run2.checks[0].tried <= 2


HOSTILE = '''
import os, time
from impl import serve as correct


def serve(requests, config):
    result = correct(requests, config)
    prompts = [r["prompt"] for r in requests]
    if 11 in prompts:
        time.sleep(30)  # a hang, inside a batch
    if 12 in prompts:
        os._exit(7)  # the whole batch dies
    if 13 in prompts:
        raise RuntimeError("boom")
    if 14 in prompts:
        requests[0]["prompt"] = 1  # mutates its input
    if 9 in prompts:
        return dict(result, extra={"note": object.__name__})  # unusual but correct: an extra key
    if 8 in prompts:
        return {key: result[key] for key in reversed(list(result))}  # unusual but correct: another key order
    return result
'''


def test_a_hostile_batch_is_judged_call_by_call_by_the_ordinary_path(tmp_path):
    target = tmp_path / "hostile.py"
    target.write_text(HOSTILE)
    model = models.get("serving")
    seen = collections.Counter()
    for prompt, wanted in ((8, None), (9, None), (13, "termination"), (12, "termination"), (14, "input_unchanged"),
                           (11, "termination")):
        call = ([{"id": 0, "arrival": 0, "prompt": prompt, "output": 1}],
                {"max_seqs": 1, "token_budget": 64, "block_size": 16, "num_blocks": 4, "chunked_prefill": True})
        process = TargetProcess(parse_target(f"{target}:serve"), call_seconds=1.0, shape=model.shape)
        with process:
            process.start()
            run = Search(process, time.monotonic() + 60, model=model, examples=examples_for(50) | {"bulk": 1})
            phase = BulkPhase(run, 1, 0)
            phase._build = lambda call=call: [(call, 0, [])]
            finished = phase.run()
        if wanted is None:
            assert finished and phase.found is None and phase.rerun == 1, prompt  # judged again alone, and passed
        else:
            assert not finished and phase.found[1].invariant == wanted, (prompt, phase.found)
        seen[wanted] += 1
    assert seen[None] == 2


# -- the report ----------------------------------------------------------------------------------------------


def test_features_and_bounds_are_measured_from_the_calls():
    calls = [
        ([{"id": -(2**70), "arrival": 0, "tokens": 5}, {"id": 2**70, "arrival": 2**40, "tokens": 1}], 1, True),
        ([{"id": 0, "arrival": 3, "tokens": 2}, {"id": 1, "arrival": 3, "tokens": 9}], 4, False),
    ]
    assert {"idle gap >= 2**32", "arrivals 0 and >= 2**32 together", "negative id", "ids spread >= 2**64",
            "one slot", "continuous"} <= set(strategies.features(calls[0]))
    assert "same-tick arrivals" in strategies.features(calls[1]) and "idle gap >= 2**32" not in strategies.features(calls[1])
    bounds = strategies.Bounds()
    for call in calls:
        bounds.add(call)
    assert bounds.to_json() == {"valid_calls": 2, "jobs": [2, 2], "slots": [1, 4], "arrivals": [0, 2**40],
                                "tokens": [1, 9], "ids": [-(2**70), 2**70]}
    assert bounds.describe() == "jobs 2..2, slots 1..4, arrivals 0..2**40, tokens 1..9"
    assert [strategies.number(v) for v in (7, 2**64, 2**64 + 5, -(2**63), 3 * 2**70)] == [
        "7", "2**64", "2**64+5", "-2**63", "~2**71"]
    assert coverage.reached("chapter", calls[0], spec.run(*calls[0])) == [
        "one_slot", "idle_gap", "idle_jump_2_32", "arrival_span_2_32", "negative_id", "ids_spread_2_64",
        "id_beyond_64_bits"]


def test_a_pass_states_its_bounds_and_corners_and_the_json_carries_them(tmp_path, capsys):
    report = tmp_path / "report.json"
    target = f"{CORRECT / 'heap_queue.py'}:schedule"
    code = main(["verify", target, "--seed", "0", "--examples", "120", "--budget", "600", "--db", "none",
                 "--save-dir", str(tmp_path / "saved"), "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(report.read_text())
    line = out.strip().splitlines()[-1]
    bounds, corners = data["bounds"], data["corners"]
    number = strategies.number
    never = corners["unreached"]
    reached = len(coverage.names("chapter")) - len(never)
    assert line == (
        f"PASS {target}  engine=hypothesis  {data['calls']} calls; "
        f"jobs {bounds['jobs'][0]}..{bounds['jobs'][1]}, slots {bounds['slots'][0]}..{bounds['slots'][1]}, "
        f"arrivals {number(bounds['arrivals'][0])}..{number(bounds['arrivals'][1])}, "
        f"tokens {bounds['tokens'][0]}..{bounds['tokens'][1]}; corners: {reached} of {len(coverage.names('chapter'))} "
        f"reached" + (f", never: {', '.join(never)}" if never else "")
    )
    assert list(corners["corners"]) == list(coverage.names("chapter"))
    assert corners["calls"] == corners["by_phase"]["bulk"]["calls"] + corners["by_phase"]["hypothesis"]["calls"]
    assert corners["by_phase"]["bulk"]["calls"] == 480 and corners["by_phase"]["hypothesis"]["calls"] == 120
    assert all(corners["corners"][name] == sum(phase[name] for phase in corners["by_phase"].values())
               for name in corners["corners"])
    for name, count in corners["corners"].items():  # one text line per corner
        assert re.search(rf"^corner  {name} +{count} calls  \(bulk \d+, hypothesis \d+\)$", out, re.M), name
    assert bounds["jobs"][0] == 0 and bounds["jobs"][1] > 32 and bounds["arrivals"][1] >= 2**32
    assert 0 < bounds["valid_calls"] <= data["calls"]
    conformance = data["statistics"]["conformance"]
    assert conformance["drawn"] == 120
    assert all(conformance.get(corner, 0) <= conformance["drawn"] for corner in CORNERS)
    assert conformance["idle gap >= 2**32"] > 0 and conformance["same-tick arrivals"] > 0
    assert set(data["statistics"]) >= {"conformance", "deterministic", "validation"}
    assert re.fullmatch(r"\d+", str(data["calls"]))


def test_a_pass_names_the_corners_it_never_reached():
    from proofs.report.text import summary_line

    covered = coverage.Coverage("serving")
    covered.add_names(["idle_gap", "budget_exact_1"], "bulk")
    line = summary_line("pass", "t", 0, 1, coverage=covered)
    total = len(coverage.names("serving"))
    assert line.startswith(f"PASS t  engine=hypothesis  1 calls; corners: 2 of {total} reached, never: max_seqs_full_with_queue, ")
    assert "idle_gap" not in line.split("never: ")[1] and "budget_exact_2" in line


@pytest.mark.parametrize("model", ["chapter", "serving"])
def test_the_bulk_phase_alone_reaches_every_corner(model):
    """2000 bulk calls (the bulk phase of a default run), seed 0, reach every corner; for the serving model, over the
    model verify takes for our impl, which draws prefix caching, the caching corners too."""
    run, process = bulk_search(models.get(model).default_target, model, examples_for(500)["bulk"], seed=0,
                               as_verify=True)
    with process:
        assert run.run(only={"bulk"}) == []
    assert run.coverage.names() == coverage.names(model, caching=model == "serving")
    assert run.coverage.unreached() == [], run.coverage.to_json()


@pytest.mark.slow  # a default run's two searches: about a minute on the loaded 2-core machine
@pytest.mark.parametrize("model", ["chapter", "serving"])
def test_the_default_search_of_our_impl_reaches_every_corner(model):
    """The bulk phase and the conformance search with the default examples (seed 0), over the model verify takes for
    our impl (prefix caching drawn for the serving model), reach every corner, the caching ones included."""
    target = models.get(model).default_target
    run, process = bulk_search(target, model, examples_for(500)["bulk"], seed=0, as_verify=True)
    run.examples["conformance"] = 500
    with process:
        assert run.run(only={"bulk", "conformance"}) == []
    assert run.coverage.names() == coverage.names(model, caching=model == "serving")
    assert run.coverage.unreached() == [], run.coverage.to_json()


def test_a_large_failing_input_shrinks_to_a_small_one_in_a_few_hundred_oracle_calls():
    import importlib.util

    from proofs.search.minimize import minimize_valid_call

    path = CORPUS / "buggy" / "admits_one_too_many.py"
    loader = importlib.util.spec_from_file_location("admits_one_too_many", path)
    buggy = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(buggy)

    tried = []

    def fails(call):
        tried.append(call)
        return any(v.invariant == "slot_bound" for v in spec.check(*call, buggy.schedule(*call)))

    jobs = [{"id": 2**63 + 7 * i, "arrival": (i // 50) * 2**40, "tokens": 1 + i % 2} for i in range(2000)]
    call = (jobs, 44, True)
    assert fails(call)
    small = minimize_valid_call(call, fails, seconds=600.0)  # a deadline no load reaches: the work is bounded below
    assert len(tried) <= 400, len(tried)  # 167 calls of the oracle (0.1 s of CPU), far inside the default 10 s deadline
    assert small == ([{"id": 0, "arrival": 0, "tokens": 1}, {"id": 1, "arrival": 0, "tokens": 1}], 1, False)
