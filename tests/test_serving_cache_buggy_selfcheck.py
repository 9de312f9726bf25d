"""Each `cache_` buggy serving scheduler has one live bug, breaks its EXPECTED rule first, and is otherwise the base.

tests/corpus/serving/buggy/cache_*.py (issue 20) are each the correct scheduler
correct/cache_tick_by_tick.py with one change, marked `# BUG`, and a one-sentence
docstring naming the bug and the real engine that had it.  For every file this checks, on
a small input where the bug shows (found by a seeded search over the prompt families of
tests/test_serving_cache_corpus.py, then shrunk while the first broken rule stayed the
same), that the result differs from the base's and that the replay of issue 20's rules
(tests/serving_cache_tools.py) names EXPECTED first in registry order, or, for a bug
whose symptom is a crash, that the call raises; and, on inputs where the bug cannot
show (caching off, and the worked example P1), that the file answers exactly as the
base, except that the one-bug scheduler of the corner P1 is the plainest case of (a
prefix shared up to a block boundary: its CORNER line) must differ there.  Until the
spec knows prefix caching, this is what stands for `verify` catching each file by its
EXPECTED rule (tests/test_serving_corpus.py runs that campaign).
"""

import copy
import difflib
import importlib
import pathlib
import re
import signal

import pytest

from tests.serving_cache_examples import EXAMPLES
from tests.serving_cache_tools import REGISTRY_ORDER, first_broken, trace_events

CORPUS = pathlib.Path(__file__).parent / "corpus" / "serving"
BASE_PATH = CORPUS / "correct" / "cache_tick_by_tick.py"
BUGGY = CORPUS / "buggy"
FILES = sorted(p.stem for p in BUGGY.glob("cache_*.py"))
base_serve = importlib.import_module("tests.corpus.serving.correct.cache_tick_by_tick").serve


def cfg(max_seqs, token_budget, block_size, num_blocks, chunked=True, caching=True):
    out = {"max_seqs": max_seqs, "token_budget": token_budget, "block_size": block_size,
           "num_blocks": num_blocks, "chunked_prefill": chunked}
    if caching is not None:
        out["prefix_caching"] = caching
    return out


def req(rid, arrival, output, tokens=None, prompt=None, abort=None):
    out = {"id": rid, "arrival": arrival, "prompt": len(tokens) if tokens is not None else prompt, "output": output}
    if tokens is not None:
        out["tokens"] = tokens
    if abort is not None:
        out["abort"] = abort
    return out


# file -> an input on which its bug shows (the first rule it breaks there is its EXPECTED)
CASES = {
    "cache_abort_frees_shared_blocks": ([
        req(0, 1, 2, tokens=[3], abort=2), req(1, 1, 2, tokens=[3, 0]),
    ], cfg(2, 2, 1, 3)),
    "cache_abort_keeps_refcount": ([req(0, 0, 2, tokens=[0], abort=1)], cfg(1, 1, 2, 1)),
    "cache_batched_free_double_frees_shared": ([
        req(0, 3, 1, tokens=[0, 1, 0, 3]), req(1, 3, 1, tokens=[0, 1, 0, 3, 0]),
    ], cfg(2, 5, 4, 2)),
    "cache_boundary_prefix_backs_off_a_block": ([
        req(0, 0, 1, tokens=[0]), req(1, 0, 1, tokens=[0, 0]),
    ], cfg(1, 1, 1, 2)),
    "cache_cached_set_at_first_admission": ([
        req(0, 0, 3, tokens=[0, 0, 0]), req(1, 0, 1, tokens=[3, 0, 0]),
    ], cfg(2, 2, 1, 6)),
    "cache_cap_on_prompt": ([req(0, 0, 6, tokens=[0, 0, 0]), req(1, 0, 3, tokens=[3, 0, 0, 0])], cfg(2, 2, 1, 12)),
    "cache_chain_without_prefix": ([req(0, 0, 1, tokens=[3, 1]), req(1, 0, 1, tokens=[3, 1, 1, 0])], cfg(1, 1, 1, 4)),
    "cache_eviction_drops_whole_chain": ([
        req(0, 0, 2, tokens=[0]), req(1, 0, 2, tokens=[1, 0, 3, 0]), req(2, 0, 5, tokens=[1, 0, 0, 0]),
        req(3, 0, 3, tokens=[1, 0, 3, 0]),
    ], cfg(3, 7, 1, 11)),
    "cache_fit_counts_held_hits": ([req(0, 3, 1, tokens=[0]), req(1, 3, 1, tokens=[0, 0, 0])], cfg(2, 3, 1, 3)),
    "cache_fit_ignores_evictable_hits": ([
        req(0, 0, 4, tokens=[0, 0, 0]), req(1, 0, 1, tokens=[3, 0, 0]),
    ], cfg(2, 2, 1, 7)),
    "cache_free_queue_lifo": ([req(0, 0, 1, tokens=[0, 0, 0]), req(1, 0, 1, tokens=[0])], cfg(1, 1, 2, 2)),
    "cache_frees_in_table_order": ([req(0, 0, 1, tokens=[0, 0, 0]), req(1, 0, 1, tokens=[0])], cfg(1, 1, 2, 2)),
    "cache_hit_left_in_free_queue": ([req(0, 0, 3, tokens=[0, 0, 0]), req(1, 0, 1, tokens=[3, 0, 0])], cfg(2, 2, 1, 6)),
    "cache_hit_on_held_block_not_counted": ([
        req(0, 0, 2, tokens=[3, 0, 0]), req(1, 0, 1, tokens=[3, 1, 0]),
    ], cfg(2, 2, 1, 4)),
    "cache_hit_takes_latest_copy": ([req(0, 0, 3, tokens=[2]), req(1, 0, 3, tokens=[2])], cfg(2, 2, 1, 4)),
    "cache_hits_charged_to_budget": ([
        req(0, 0, 1, tokens=[1, 1, 3, 1]), req(1, 0, 1, tokens=[1, 1, 3, 1, 0]), req(2, 0, 1, tokens=[0]),
    ], cfg(2, 2, 4, 3)),
    "cache_new_blocks_before_hits": ([req(0, 0, 3, tokens=[0, 0, 0]), req(1, 0, 1, tokens=[3, 0, 0])], cfg(2, 2, 1, 6)),
    "cache_partial_block_counted_as_hit": ([
        req(0, 0, 1, tokens=[0, 1, 0]), req(1, 0, 2, tokens=[0, 1, 0, 0], abort=2),
    ], cfg(1, 6, 2, 3)),
    "cache_preempted_skips_lookup": ([req(0, 0, 3, tokens=[0, 0, 0]), req(1, 0, 1, tokens=[3, 0, 0])], cfg(2, 2, 1, 6)),
    "cache_preemption_frees_shared_blocks": ([
        req(0, 0, 2, tokens=[3, 0, 0]), req(1, 0, 1, tokens=[3, 1, 0]),
    ], cfg(2, 2, 1, 4)),
    "cache_preemption_unregisters_blocks": ([
        req(0, 0, 3, tokens=[0, 0, 0]), req(1, 0, 1, tokens=[3, 0, 0]),
    ], cfg(2, 2, 1, 6)),
    "cache_readmission_hits_not_counted": ([
        req(0, 0, 3, tokens=[0, 0, 0]), req(1, 0, 1, tokens=[3, 0, 0]),
    ], cfg(2, 2, 1, 6)),
    "cache_registers_after_the_tick": ([req(0, 0, 1, tokens=[0]), req(1, 0, 1, tokens=[0, 0])], cfg(2, 2, 1, 2)),
    "cache_registers_partial_block": ([
        req(0, 0, 3, tokens=[0, 0, 0]), req(1, 1, 1, tokens=[0, 0, 0, 0, 0]),
    ], cfg(2, 4, 4, 3)),
    "cache_running_blocks_not_registered": ([
        req(0, 0, 1, tokens=[3, 1]), req(1, 0, 1, tokens=[3, 1, 0]),
    ], cfg(1, 1, 1, 3)),
    "cache_stale_chain_after_eviction": ([
        req(0, 0, 3, tokens=[0, 0, 0]), req(1, 0, 1, tokens=[3, 0]),
    ], cfg(2, 2, 1, 5)),
    "cache_whole_prompt_hit": ([req(0, 0, 1, tokens=[3]), req(1, 0, 1, tokens=[3])], cfg(1, 1, 1, 1)),
}

# inputs on which no bug of the corpus can show: caching off (S1 and S2 of issue 10), and P1
QUIET = {
    "S1": ([req(0, 0, 2, prompt=6), req(1, 0, 3, prompt=2)], cfg(2, 4, 2, 8, caching=None)),
    "S2": ([req(0, 0, 3, prompt=2), req(1, 0, 2, prompt=1)], cfg(2, 8, 1, 4, caching=False)),
    "P1": tuple(EXAMPLES["P1"][:2]),
}


class Hung(Exception):
    pass


def call_with_limit(fn, call, seconds=2.0):
    """Calls ``fn`` on a private copy of ``call`` and raises Hung when it runs past ``seconds``."""

    def stop(signum, frame):
        raise Hung

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*copy.deepcopy(call))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def load(name):
    return importlib.import_module(f"tests.corpus.serving.buggy.{name}")


def corner_of(name):
    """The corner a file's CORNER line names (tests/test_coverage.py), or None."""
    found = re.search(r'^CORNER = "(\w+)"', (BUGGY / f"{name}.py").read_text(), re.M)
    return found.group(1) if found else None


def expected_of(name):
    text = (BUGGY / f"{name}.py").read_text()
    expected = re.search(r'^EXPECTED = "(\w+)"', text, re.M).group(1)
    also = re.search(r"^ALSO = \(([^)]*)\)", text, re.M)
    return expected, tuple(re.findall(r'"(\w+)"', also.group(1))) if also else ()


def test_every_cache_file_has_a_case_and_the_corpus_is_big_enough():
    assert sorted(CASES) == FILES
    assert len(FILES) >= 20


@pytest.mark.parametrize("name", FILES)
def test_the_file_has_a_one_sentence_docstring_citing_its_origin_and_a_registry_row(name):
    module = load(name)
    doc = module.__doc__
    assert doc and "\n" not in doc and doc.endswith(".") and doc.count(". ") == 0, doc
    assert re.search(r"[\w.-]+/[\w.-]+#\d+", doc), f"no owner/repo#N citation in {doc!r}"
    expected, also = expected_of(name)
    assert module.EXPECTED == expected and expected in REGISTRY_ORDER + ("validation",)
    assert set(also) <= set(REGISTRY_ORDER) and expected not in also


@pytest.mark.parametrize("name", FILES)
def test_the_file_is_the_base_with_one_marked_change(name):
    """Every hunk of the difference from the base (below the header, 3 lines of context) adds a line marked # BUG."""
    base = BASE_PATH.read_text()
    base = base[base.index("CONFIG_KEYS = "):].splitlines()
    text = (BUGGY / f"{name}.py").read_text()
    text = text[text.index("CONFIG_KEYS = "):].splitlines()
    hunks = [group for group in difflib.SequenceMatcher(a=base, b=text, autojunk=False).get_grouped_opcodes(3)]
    assert hunks, "no change"
    for group in hunks:
        added = [line for tag, _, _, j1, j2 in group if tag != "equal" for line in text[j1:j2]]
        assert any("# BUG" in line for line in added), (name, group)
    assert len(hunks) <= 3, f"{len(hunks)} separate changes"


@pytest.mark.parametrize("name", FILES)
def test_the_base_breaks_no_rule_on_the_case(name):
    requests, config = CASES[name]
    assert trace_events(base_serve(*copy.deepcopy(CASES[name])), requests, config) == []


@pytest.mark.parametrize("name", FILES)
def test_the_bug_is_live_and_breaks_its_expected_rule_first(name):
    expected, _ = expected_of(name)
    requests, config = CASES[name]
    reference = base_serve(*copy.deepcopy(CASES[name]))
    if expected == "termination":
        with pytest.raises(Exception) as caught:
            call_with_limit(load(name).serve, CASES[name])
        assert caught.type is not ValueError
        return
    result = call_with_limit(load(name).serve, CASES[name])
    assert result != reference
    events = trace_events(result, requests, config)
    assert first_broken(events) == expected, events


@pytest.mark.parametrize("quiet", sorted(QUIET))
@pytest.mark.parametrize("name", FILES)
def test_the_bug_is_invisible_where_it_cannot_show(name, quiet):
    result = call_with_limit(load(name).serve, QUIET[quiet])
    if quiet == "P1" and corner_of(name) == "shared_prefix_on_block_boundary":
        # P1 is that corner's plainest case (a prompt sharing two whole blocks with the one before it): its bug shows
        assert result != base_serve(*copy.deepcopy(QUIET[quiet]))
    else:
        assert result == base_serve(*copy.deepcopy(QUIET[quiet]))


# ---------------------------------------------------------------- against the spec, once it knows prefix caching

def _spec_has_caching():
    import spec.serving

    return {"no_false_sharing", "refcount_exact", "longest_prefix_hit", "lru_eviction"} <= set(spec.serving.NAMES)


@pytest.mark.skipif(not _spec_has_caching(), reason="the spec has no prefix caching yet (issue 20)")
@pytest.mark.parametrize("name", FILES)
def test_the_spec_oracle_names_the_expected_rule_first_on_the_case(name):
    """The oracle of spec.serving, on the case's result, reports EXPECTED first (a crash is the harness's termination)."""
    import spec.serving

    expected, _ = expected_of(name)
    if expected == "termination":
        pytest.skip("the bug's symptom is a crash: no result for the oracle (test_the_bug_is_live checks it raises)")
    result = call_with_limit(load(name).serve, CASES[name])
    violations = spec.serving.check(*copy.deepcopy(CASES[name]), result)
    assert violations and violations[0].invariant == expected, [(v.invariant, v.message) for v in violations]
