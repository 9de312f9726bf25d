"""The Z3 encodings are checked against the spec that runs, at every ``prove`` run: a changed step is caught.

Each test copies the project's packages (spec, proofs, impl) into a temporary
folder, changes one rule of the copy's ``spec/state.py``, ``spec/serving/state.py`` or
``spec/serving/cache.py`` (or of a registry predicate), and runs ``schedcheck prove`` from the copy in a
subprocess with a small bound: the validation rows must be refuted, naming the
state, the field and both values, and no proof is reported (exit 1).  The copy
unchanged passes.  The reviewer's change (the running pass gives token_budget + 1
whenever 4 or more requests run) is in the default run; the rest are ``slow``.
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from proofs.smt import conformance as C
from proofs.smt import serving_cache as SC

VALIDATION_ROWS = C.ROWS + (SC.STEP_ROW, SC.PREDICATE_ROW)

ROOT = pathlib.Path(__file__).resolve().parent.parent
SERVING = "spec/serving/state.py"
CHAPTER = "spec/state.py"

# name -> (file, [(old, new)], prove arguments); each change is a real scheduler bug of one rule
MUTATIONS = {
    "serving: budget + 1 with 4 or more running (the reviewer's)": (SERVING, [(
        "    budget = config.token_budget\n    index = 0\n",
        "    budget = config.token_budget + (1 if len(running) >= 4 else 0)\n    index = 0\n")],
        ["--model", "serving", "--max-requests", "4"]),
    "serving: max_seqs (admits while running <= max_seqs)": (SERVING, [(
        "            and len(running) < config.max_seqs\n", "            and len(running) <= config.max_seqs\n")],
        ["--model", "serving", "--max-requests", "4"]),
    "serving: block allocation (the allocator skips id 0)": (SERVING, [(
        "filterfalse(held.__contains__, naturals())", "filterfalse(held.__contains__, naturals(1))")],
        ["--model", "serving", "--max-requests", "3"]),
    "serving: block allocation (an admission takes one block too few)": (SERVING, [(
        "            need = blocks_for(computed + n, size) - len(hit)\n",
        "            need = blocks_for(computed + n, size) - len(hit) - (1 if n > 1 else 0)\n")],
        ["--model", "serving", "--max-requests", "3"]),
    "serving: preemption victim (the one behind the request served, not the newest)": (SERVING, [(
        "            victim = running.pop()\n",
        "            victim = running.pop(index + 1 if len(running) > index + 2 else -1)\n")],
        ["--model", "serving", "--max-requests", "4"]),
    "serving: admission order (the shortest waiting request, not the head)": (SERVING, [
        ("            head = waiting[0]\n", "            head = min(waiting, key=lambda p: (p.known, p.id))\n"),
        ("            waiting.pop(0)\n", "            waiting.remove(head)\n")],
        ["--model", "serving", "--max-requests", "4"]),
    "serving: clock jump (one tick past the next arrival)": (SERVING, [(
        "        tick = min(p.request.arrival for p in waiting)\n",
        "        tick = min(p.request.arrival for p in waiting) + 1\n")],
        ["--model", "serving", "--max-requests", "2"]),
    "chapter: slots (admits while admitted <= room)": (CHAPTER, [(
        "        while admitted < room and", "        while admitted <= room and")], ["--max-jobs", "4"]),
    "chapter: admission order (shortest job first)": (CHAPTER, [(
        "    ordered = tuple(sorted(validate(jobs, slots, continuous), key=fifo_key))",
        "    ordered = tuple(sorted(validate(jobs, slots, continuous), key=lambda j: (j.tokens, j.arrival, j.id)))")],
        ["--max-jobs", "4"]),
    "chapter: clock jump (one tick past the next arrival)": (CHAPTER, [(
        "        tick = waiting[0].arrival  # idle", "        tick = waiting[0].arrival + 1  # idle")],
        ["--max-jobs", "3"]),
    "chapter: static batches admit into a running batch": (CHAPTER, [(
        "    if state.continuous or not state.active:", "    if True:")], ["--max-jobs", "3"]),
    "chapter: a job leaves one token early": (CHAPTER, [("        if left == 0:", "        if left <= 1:")],
                                              ["--max-jobs", "3"]),
    "serving caching: a taken block stays in the cache (a stale chain after eviction)": ("spec/serving/cache.py", [(
        "            tuple(entry for entry in pool.cache if entry[1] not in evicted),\n",
        "            pool.cache,\n")],
        ["--model", "serving", "--max-requests", "3"]),
    "serving caching: a hit matches any prompt chain (false sharing across prefixes)": ("spec/serving/cache.py", [(
        "        if registered == wanted:\n", "        if registered[0] == wanted[0]:\n")],
        ["--model", "serving", "--max-requests", "3"]),
    "serving registry: token_budget reads < instead of <=": ("spec/serving/invariants.py", [(
        "sum(n for _, n in state.latest.scheduled) <= state.config.token_budget",
        "sum(n for _, n in state.latest.scheduled) < state.config.token_budget")],
        ["--model", "serving", "--max-requests", "3"]),
}
DEFAULT_RUN = ("serving: budget + 1 with 4 or more running (the reviewer's)", "chapter: slots (admits while admitted <= room)")


def copy_project(folder: pathlib.Path, changes) -> pathlib.Path:
    """The project's packages copied into ``folder``, each ``(file, [(old, new)])`` change applied (old found once)."""
    for package in ("spec", "proofs", "impl"):
        shutil.copytree(ROOT / package, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
    for name, edits in changes:
        path = folder / name
        text = path.read_text()
        for old, new in edits:
            assert text.count(old) == 1, f"{name}: {old!r} occurs {text.count(old)} times"
            text = text.replace(old, new)
        path.write_text(text)
    return folder


def run_prove(folder: pathlib.Path, args) -> subprocess.CompletedProcess:
    """``schedcheck prove ARGS`` run from the copy: its spec is the one imported (the copy is first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run([sys.executable, "-m", "proofs.cli", "prove", "--no-seconds", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=900)


def test_the_copy_imports_its_own_spec(tmp_path):
    folder = copy_project(tmp_path, [])
    env = {**os.environ, "PYTHONPATH": str(folder)}
    out = subprocess.run([sys.executable, "-c", "import spec.serving.state, proofs; print(spec.serving.state.__file__)"],
                         cwd=folder, env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(folder / "spec" / "serving" / "state.py")


@pytest.mark.slow  # the whole validation of both models on a copy (about 17 s on 2 quiet cores): the slow run
def test_the_unchanged_copy_passes_the_validation(tmp_path):
    folder = copy_project(tmp_path, [])
    for args in (["--model", "serving", "--max-requests", "4"], ["--max-jobs", "4"]):
        done = run_prove(folder, args + ["--claims", "encoding matches"])
        assert done.returncode == 0, done.stdout + done.stderr
        assert "encoding matches spec.step     checked" in done.stdout


def check_caught(tmp_path, name):
    file, edits, args = MUTATIONS[name]
    folder = copy_project(tmp_path, [(file, edits)])
    done = run_prove(folder, args)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    refuted = [line.split()[0:4] for line in out.splitlines()
               if line.startswith(VALIDATION_ROWS) and " refuted " in line]
    assert refuted, out
    assert "    state (n=" in out and "    field: " in out and "the spec gives" in out and "the encoding" in out, out
    assert "no proof is reported" in out, out
    rows = [line for line in out.splitlines() if line and not line.startswith((" ", "schedcheck", "claim", "verdict",
                                                                                 "the encoding"))]
    assert all(line.startswith(VALIDATION_ROWS) for line in rows), out  # no proof row at all
    return out


@pytest.mark.parametrize("name", DEFAULT_RUN)
def test_a_changed_step_makes_prove_fail_with_the_disagreeing_state(tmp_path, name):
    out = check_caught(tmp_path, name)
    if "reviewer" in name:  # 4 requests running while the budget binds: a running request computes one token more
        assert "(n=4)" in out and "'token_budget': " in out, out


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in MUTATIONS if name not in DEFAULT_RUN])
def test_every_changed_rule_makes_prove_fail_with_the_disagreeing_state(tmp_path, name):
    check_caught(tmp_path, name)


@pytest.mark.parametrize("model,n", [("chapter", 4), ("serving", 4), ("serving", 8)])
def test_the_states_reach_the_corners_the_mutations_need(model, n):
    """Every corner the step's rules turn on is in the set: 4 or more running while the budget binds, and so on."""
    import spec
    import spec.serving as S

    if model == "chapter":
        corners = {c for case in C.chapter_states(n) if not spec.is_terminal(case.state)
                   for c in C._chapter_corners(case.state, spec.step(case.state))}
        assert {"jump", "admits several", "fills the slots", "slots stop an arrived job", "static batch running",
                "finishes"} <= corners, corners
        return
    corners = {c for case in C.serving_states(n) if not S.is_terminal(case.state)
               for c in C._serving_corners(case.state, S.step(case.state))}
    assert {"jump", "4 or more running, the budget cuts one", "preempts", "preempts with 3 or more running",
            "admits several", "resumes a preempted request", "partial chunk", "only max_seqs stops an arrived request",
            "blocks stop an arrived request", "allocates while ids are held", "aborts a running request",
            "finishes"} <= corners, sorted(corners)


def test_the_validation_rows_are_refuted_by_their_mutants():
    chapter = {C.STEP_ROW: C.check_chapter_step, C.PREDICATE_ROW: C.check_chapter_predicates}
    serving = {C.STEP_ROW: C.check_serving_step, C.FOLD_ROW: C.check_serving_folds,
               C.PREDICATE_ROW: C.check_serving_predicates}
    for model, states, checks in (("chapter", C.chapter_states, chapter), ("serving", C.serving_states, serving)):
        cases = states(3)
        for row, check in checks.items():
            assert check(3, cases)["status"] == "checked", (model, row)
            result = check(3, cases, C.REFUTED_BY[model][row])
            assert result["status"] == "refuted", (model, row, result)
            cex = result["counterexample"]
            assert {"n", "state", "field", "spec", "encoding"} <= set(cex) and cex["spec"] != cex["encoding"], cex


def test_the_states_are_the_same_on_every_run():
    first = [case.origin for case in C.serving_states(3)]
    assert first == [case.origin for case in C.serving_states(3)]
    assert len(first) == C.STATES_PER_N
