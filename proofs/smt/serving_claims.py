"""The Z3 claims about the serving model: its state invariants inductive, the step total, termination, why each domain rule is needed.

What it establishes (each a row of ``schedcheck prove --model serving``; ``claims(max_requests)`` lists them):

- ``step_total``: every non-terminal state has a successor; the tick's terms are
  explicit (no fresh variable to pin), so this is by construction, and Z3 checks
  only that the step carries no contradiction (the ``contradictory_step`` mutant);
- ``lemma:blocks_for_axioms``: ceil(t / block_size), for every block_size >= 1 and
  t >= 0 (nonlinear integer arithmetic, no bound), has the properties the encoding
  assumes of its uninterpreted ``blk``: so every proof about ``blk`` holds of ceil;
- for every state invariant of ``spec.serving.STATE_INVARIANTS`` that the encoding
  expresses (``serving_model.PREDICATES``) and each strengthening lemma
  (``serving_model.LEMMAS``): initiation (Init => Inv) and consecution (the
  conjunction of every row at the pre-state and the step => Inv at the
  post-state), for every n from 1 to the bound, every config value symbolic (pools,
  budgets, block sizes, max_seqs of any size), both prefill modes, aborts symbolic.
  A row counts as proved only when every row it assumes is proved: together they
  are one inductive invariant.  ``no_duplicate_active`` holds in every state of the
  per-request encoding (one record per request, distinct ids): ``by construction``;
- ``termination_ranking``: under that invariant ``remaining_work`` is >= 0 and
  falls by at least one on every step (lexicographic argument folded in: the head
  of the running list is never preempted and computes at least one token, leaves,
  or an abort removes a request);
- ``rule_needed:<rule>``: without the domain rule, bounded model checking finds a
  concrete run from Init into a state that the step maps to itself (clock and the
  latest entry aside) with every unfinished request arrived and none due to abort,
  so that run never ends; with the rule, ``termination_ranking`` proves every run ends.

- ``kv_exclusive`` and the id rows (``kv_capacity (ids)``, ``kv_exact (ids)``,
  ``kv_freed_gives_back``, ``lemma:block_holders``): ``proofs.smt.serving_blocks``,
  the per-block encoding for one symbolic block id, registered here;
- ``token_budget (any n)``, ``slot_bound (any n)``, ``kv_exclusive (any n)``,
  ``kv_capacity (any n)`` and ``lemma:filter_sums``: ``proofs.smt.serving_fold``, the
  passes as loops over positions, for every number of requests;
- ``one_request_is_never_preempted`` (under the invariant, no step preempts a lone
  request) and ``finding:one_request_ahead_preempts_twice`` (the conjecture "at most one
  preemption per request ahead" refuted by a 2-request run Z3 finds, replayed on
  ``spec.serving.run``: status ``refuted``, which is the finding);
- ``no_false_sharing`` and ``refcount_exact`` hold by construction in this encoding
  (prefix caching off: no pool); with caching on, ``refcount_exact (prefix caching)``,
  ``no_false_sharing (prefix caching)``, ``lemma:cache_content (prefix caching)`` and
  their two validation rows are ``proofs.smt.serving_cache``'s (a per-block system of
  pool events), registered here;
- first of all, the validation rows of ``proofs.smt.conformance`` (the encodings
  against the spec that runs), on which every other row depends.

Each consecution's negation is checked under the cone of its goal (``_cone``: the
step equations, share definitions and blocks_for axioms its goal, support and the
domain reach, a subset of the hypotheses), with every hypothesis added back for the
satisfiability check and for a check that fails there.
Every check first checks that its hypotheses are satisfiable (else ``vacuous``);
each row names a mutant (``REFUTED_BY``) under which Z3 refutes it.  Registry
invariants the encoding does not express (``serving_model.NOT_ENCODED``) are rows
with status ``unknown``, never proved.

Assumptions: the encoding of ``proofs.smt.serving_model`` (tested against
``spec.serving.step``).  Bounds: n from 1 to ``max_requests`` (the rows in
``CAPPED`` at most their cap, for cost: none now); values unbounded.  ``running_first`` and ``work_conserving`` are
proved by cases (``CASES``, ``_by_cases``): each part of the consecution under the same hypotheses, a part's cases
proved to cover every state (else the split is rejected: ``unknown``), each case unsat.
Nothing runs at import time.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import z3

from proofs.smt import conformance
from proofs.smt import serving_blocks as B
from proofs.smt import serving_cache as SC
from proofs.smt import serving_fold as F
from proofs.smt import serving_model as M
from proofs.smt.run import Claim, up_to

PROVED, REFUTED, UNKNOWN, VACUOUS = "proved", "refuted", "unknown", "vacuous"
TOTAL = "step_total"
BLOCKS = "lemma:blocks_for_axioms"
BY_CONSTRUCTION = ("no_duplicate_active", "no_false_sharing", "refcount_exact")
WITHOUT_PREFIX_CACHING = ("no_false_sharing", "refcount_exact")  # true by definition in this caching-off encoding

REFUTED_BY = {
    TOTAL: "contradictory_step",
    BLOCKS: "floor_blocks",
    "well_typed": "clock_minus_one",
    "no_duplicate_active": "contradictory_step",
    "no_false_sharing": "contradictory_step",
    "refcount_exact": "contradictory_step",
    "no_start_before_arrival": "admit_before_arrival",
    "slot_bound": "admit_while_le_seqs",
    "nonnegative_remaining": "preempt_keeps_computed",
    "work_conservation": "abort_not_in_ledger",
    "every_job_completes_once": "abort_one_late",
    "termination": "jump_one_late",
    "token_budget": "budget_plus_one",
    "kv_capacity": "pool_plus_one",
    "kv_exact": "allocate_one_less",
    "fcfs_admission": "queue_reversed",
    "no_admission_after_preemption": "admit_after_preemption",
    "running_first": "running_no_partial",
    "work_conserving": "admit_only_the_head",
    "lemma:ranks": "resume_in_fcfs_place",
    "lemma:status_history": "admitted_not_recorded",
    "lemma:latest_tick": "clock_skips",
    "termination_ranking": "drop_feasible_pool",
    "rule_needed:feasible_pool": "contradictory_step",
    "rule_needed:feasible_budget": "contradictory_step",
    "finding:one_request_ahead_preempts_twice": "contradictory_step",
    "one_request_is_never_preempted": "drop_feasible_pool",
    "token_budget (any n)": "budget_plus_one",
    "kv_capacity (any n)": "pool_plus_one",
    "kv_exclusive (any n)": "allocate_held_id",
    "slot_bound (any n)": "admit_while_le_seqs",
    "lemma:filter_sums": "negative_block_counts",
}

# Each domain rule -> the encoding mutant that drops it and what the run Z3 finds without it shows.
RULES = {
    "feasible_pool": ("drop_feasible_pool",
                      "a request whose peak need ceil((prompt + output - 1) / block_size) exceeds num_blocks "
                      "is preempted (or never admitted again) and waits forever: the state repeats"),
    "feasible_budget": ("drop_feasible_budget",
                        "without chunked prefill a preempted request whose prompt + generated exceeds "
                        "token_budget can never be re-admitted, and FCFS blocks everyone behind it: the state repeats"),
}
RULE_N, RULE_DEPTH = 2, 6
# Rows bounded lower than the rest, for cost (none now: running_first and work_conserving are proved by cases,
# ``CASES``, and the rows that assume slot_bound, token_budget and kv_capacity fit at n <= 8; docs/prove.md).
CAPPED: dict = {}
# Registry rows with an any-n row (proofs.smt.serving_fold) about the spec's reachable states: a consecution at an n
# above the bounded row's cap may assume the claim there, the any-n row being what justifies it (with Init, a claim
# true of every reachable state strengthens any induction over them).
ANY_N = {"token_budget": "token_budget (any n)", "slot_bound": "slot_bound (any n)",
         "kv_capacity": "kv_capacity (any n)"}


def caps(n: int) -> dict:
    """Each invariant's and lemma's bound under a ledger bound of n: its own cap (``CAPPED``), lowered to the cap of any
    row its consecution assumes that has no any-n row (an induction at n needs what it assumes at n)."""
    out = {name: min(n, CAPPED.get(name, n)) for name in list(SUPPORT)}
    changed = True
    while changed:
        changed = False
        for name, support in SUPPORT.items():
            low = min([out[name]] + [out[a] for a in support if a not in ANY_N and a in out])
            if low < out[name]:
                out[name], changed = low, True
    return out


def support_rows(name: str, n: int, bounds: dict) -> list:
    """The rows that justify what ``name``'s consecution assumes, up to n: the bounded row, or its any-n row where
    the bounded row stops below n."""
    return [ANY_N[a] if a in ANY_N and bounds.get(a, n) < n else row_name(a) for a in SUPPORT[name]]


# Claims about the latest entry's policy that no consecution assumes (not in any other row's SUPPORT): step_total
# does not assume them either, so that no row waits on them (work_conserving is the ledger's costliest row).
POLICY_ROWS = ("running_first", "work_conserving")


def assumed_at(n: int, bounds: dict) -> list:
    """The invariants and lemmas a check at n may assume: those proved at n, or true for any n (not ``POLICY_ROWS``)."""
    return [x for x in invariant_names() if (bounds.get(x, n) >= n or x in ANY_N) and x not in POLICY_ROWS]
SPLIT = ("work_conservation", "work_conserving", "running_first", "ranks")  # rows proved one conjunct at a time, each a hypothesis of the next
HINTED = ("work_conservation",)  # rows whose goal starts with serving_model.step_hints (the ledger shares' moves)

# What each consecution assumes of the pre-state besides the claim itself: the union
# of Z3's unsat cores at n = 3 and n = 4, written down here and re-proved on every run
# (a missing entry makes its row unknown or refuted, never silently proved).
SUPPORT = {
    "well_typed": ('nonnegative_remaining', 'work_conservation', 'kv_exact', 'status_history'),
    "no_start_before_arrival": ('well_typed', 'nonnegative_remaining', 'fcfs_admission', 'status_history'),
    "slot_bound": ('well_typed', 'nonnegative_remaining', 'every_job_completes_once', 'ranks'),
    "nonnegative_remaining": ('well_typed', 'every_job_completes_once', 'status_history'),
    "work_conservation": ('well_typed', 'nonnegative_remaining', 'every_job_completes_once', 'kv_capacity', 'kv_exact', 'ranks', 'status_history'),
    "every_job_completes_once": ('nonnegative_remaining', 'work_conservation'),
    "termination": ('well_typed', 'no_start_before_arrival', 'nonnegative_remaining', 'work_conservation', 'every_job_completes_once', 'kv_capacity', 'kv_exact', 'fcfs_admission', 'ranks', 'status_history'),
    "token_budget": ('well_typed', 'nonnegative_remaining', 'ranks', 'status_history'),
    "kv_capacity": ('well_typed', 'nonnegative_remaining', 'kv_exact', 'ranks', 'status_history'),
    "kv_exact": ('well_typed', 'nonnegative_remaining', 'every_job_completes_once', 'status_history'),
    "fcfs_admission": ('nonnegative_remaining', 'every_job_completes_once', 'ranks', 'status_history'),
    "no_admission_after_preemption": ('status_history',),
    "running_first": ('status_history',),
    "work_conserving": ('nonnegative_remaining', 'ranks', 'status_history'),
    "ranks": ('well_typed', 'no_start_before_arrival', 'nonnegative_remaining', 'every_job_completes_once', 'fcfs_admission', 'status_history'),
    "status_history": ('well_typed', 'nonnegative_remaining', 'every_job_completes_once', 'fcfs_admission'),
    "latest_tick": ('fcfs_admission', 'status_history'),
    "termination_ranking": ('well_typed', 'no_start_before_arrival', 'nonnegative_remaining', 'every_job_completes_once', 'token_budget', 'kv_capacity', 'kv_exact', 'fcfs_admission', 'ranks', 'status_history'),
}


def row_name(name: str) -> str:
    return f"lemma:{name}" if name in M.LEMMAS else name


def invariant_names() -> list[str]:
    """The registry's encoded state invariants, in registry order, then the lemmas."""
    from spec.serving import STATE_INVARIANTS

    names = [inv.name for inv in STATE_INVARIANTS]
    for name in names:
        if name not in M.PREDICATES and name not in M.NOT_ENCODED and name not in B.PREDICATES:
            raise KeyError(f"serving state invariant {name!r} has no Z3 encoding in proofs.smt.serving_model")
    return [name for name in names if name in M.PREDICATES] + list(M.LEMMAS)


def _encoding(name: str):
    return M.PREDICATES[name] if name in M.PREDICATES else M.LEMMAS[name]


# --- solving helpers ---------------------------------------------------------------------


def _solver() -> z3.Solver:
    return z3.Solver()


def _check(solver: z3.Solver, extra=()) -> tuple:
    solver.push()
    solver.add(*extra) if extra else None
    result = solver.check()
    model = solver.model() if result == z3.sat else None
    solver.pop()
    return result, model


def _hyp(solver: z3.Solver) -> str:
    result, _ = _check(solver)
    return "yes" if result == z3.sat else "no" if result == z3.unsat else "unknown"


def _not_sat(hyp: str, what: str) -> dict:
    if hyp == "no":
        return {"status": VACUOUS, "counterexample": None, "hypotheses": "no",
                "detail": f"{what}: the hypotheses are unsatisfiable, so the check proves nothing"}
    return {"status": UNKNOWN, "counterexample": None, "hypotheses": "unknown",
            "detail": f"{what}: the solver gave up on the hypotheses"}


def _result(status: str, detail, counterexample=None, hypotheses: str = "yes") -> dict:
    return {"status": status, "counterexample": counterexample, "detail": detail, "hypotheses": hypotheses}


def _unsat(solver: z3.Solver, negated) -> tuple:
    result, model = _check(solver, [negated])
    if result == z3.unsat:
        return PROVED, None
    if result == z3.sat:
        return REFUTED, model
    return UNKNOWN, None


def _conjuncts(goal) -> list:
    """A goal's conjuncts, with ``a => (b and c)`` taken as ``a => b``, ``a => c``."""
    if z3.is_and(goal):
        return [part for child in goal.children() for part in _conjuncts(child)]
    if z3.is_app_of(goal, z3.Z3_OP_IMPLIES) and z3.is_and(goal.arg(1)):
        return [z3.Implies(goal.arg(0), part) for part in _conjuncts(goal.arg(1))]
    return [goal]


def _unsat_parts(solver: z3.Solver, goal, first=()) -> tuple:
    """Prove ``first`` then a conjunction, one conjunct at a time, each proved one a hypothesis of the next; the solver is left as it was."""
    parts = list(first) + _conjuncts(goal)
    solver.push()
    try:
        for part in parts:
            status, model = _unsat(solver, z3.Not(part))
            if status != PROVED:
                return status, model
            solver.add(part)
        return PROVED, None
    finally:
        solver.pop()


def _by_cases(solver: z3.Solver, parts: list, goal) -> tuple:
    """Prove ``goal`` by cases: ``(status, model, detail)``; the solver is left as it was.

    ``parts`` is a list of ``(part, cases)``, each case a ``(what, guard)``.  For each part: the guards cover every
    state of the hypotheses (the negation of their disjunction is unsat: else the split is rejected, ``unknown``),
    and under each guard the part holds (the part's negation with the guard unsat; a model there is a
    counterexample to the part, so to the goal); each part proved is a hypothesis of the next.  Last, the goal
    itself, its negation unsat under the hypotheses and every part (the parts are facts the hypotheses imply, so
    they only help the solver: a split can prove nothing the hypotheses do not)."""
    solver.push()
    try:
        for number, (part, cases) in enumerate(parts):
            status, _ = _unsat(solver, z3.Not(M._any(guard for _, guard in cases)))
            if status != PROVED:
                why = ("a state of the hypotheses is in none of the cases" if status == REFUTED else
                       "the solver gave up on whether the cases cover every state")
                return UNKNOWN, None, f"part {number}: the proof by cases is rejected: {why}"
            for what, guard in cases:
                status, model = _unsat(solver, z3.And(guard, z3.Not(part)))
                if status != PROVED:
                    return status, model, f"part {number}, case {what!r}"
            solver.add(part)
        status, model = _unsat(solver, z3.Not(goal))
        return status, model, "the goal from its parts"
    finally:
        solver.pop()


def running_first_cases(inp: M.Inputs, s: M.Vars, t: M.Vars, terms: M.StepTerms) -> list:
    """``running_first`` in parts, each proved by cases, then the goal from them.

    First, two facts of the step: an admission happens only in a tick without preemption whose running pass left
    budget (``admitted``); and, per running request i, if the tick preempted nobody and the running pass gave i
    nothing, it left no budget (``spent``).  ``spent`` is split by where the running pass first gives out: no
    running request ahead of i asks past the budget (then the ones ahead got all they asked, at least the budget,
    since i got nothing), or request j, ahead of i, is the first to (everyone ahead of j got all it asked, j the
    rest).  The cases cover every state: if some request ahead of i asks past the budget, the one of lowest running
    rank among those that do is such a j.  Last, the goal's parts (``serving_model.running_first_parts``, one per
    request) from these facts, each in one case."""
    n = inp.n
    every = [("every state", z3.BoolVal(True))]

    def need(k):
        return M.known(inp, s, k) - s.c[k]

    def ahead(k, j):  # k runs ahead of j in the running pass
        return z3.And(terms.run1[k], s.rr[k] < s.rr[j])

    def over(k):  # k asks past the budget: its need and everyone's ahead of it exceed what the pass gives out
        return terms.before[k] + need(k) > terms.run_budget

    def none_over(j):
        return M._all(z3.Implies(ahead(k, j), z3.Not(over(k))) for k in range(n) if k != j)

    admitted = z3.Implies(M._any(terms.admit), z3.And(z3.Not(terms.any_pre), terms.budget_kept >= 1))
    out = [(admitted, every)]
    for i in range(n):
        spent = z3.Implies(z3.And(z3.Not(terms.any_pre), terms.run1[i], terms.n_run[i] == 0), terms.budget_kept <= 0)
        cases = [(f"no request ahead of {i} asks past the budget", none_over(i))]
        cases += [(f"request {j} is the first ahead of {i} to ask past the budget",
                   z3.And(ahead(j, i), over(j), none_over(j))) for j in range(n) if j != i]
        out.append((spent, cases))
    out += [(part, every) for part in M.running_first_parts(inp, t)]
    return out


def work_conserving_cases(inp: M.Inputs, s: M.Vars, t: M.Vars, terms: M.StepTerms) -> list:
    """``work_conserving`` in parts, each proved by cases, then the goal from them.

    The goal's guard (the latest tick preempted nobody and scheduled someone) is ``quiet``.  The facts of the step,
    in order: in a quiet tick, the budget the post-state has left is what the running pass left less what the
    waiting pass gave (``spent``); an admission in the latest entry is an admission of the step; per request, what
    runs (or finished) after a quiet tick and what it holds, and so their counts and free blocks.  Per request h,
    ``stop(h)``: h waited, was not admitted, nobody was preempted, and every request ahead of h in the queue was
    admitted.  The queue's head after a quiet tick is such an h; its admission test failed; the admitted are
    exactly the requests ahead of it; and the waiting pass gave either all that those asked or at least the budget
    the running pass left, split by where it first gave a partial chunk: nowhere ahead of h, or at request p, ahead
    of h, the first to get one (the cases cover every state: of the requests ahead of h with a partial chunk, the
    one lowest in the queue is such a p).  Per request i, a partial chunk spends the budget.  Per request h, the
    head's ask after a quiet tick that left budget is what its admission test asked.  Last, the goal's conjuncts
    from these facts, each in one case."""
    n = inp.n
    every = [("every state", z3.BoolVal(True))]
    wp = terms.waiting_pass

    def kn(m):
        return M.known(inp, s, m)

    def ahead(m, h):  # m is ahead of h in the queue of the waiting pass
        return z3.And(terms.wait1[m], s.wr[m] < s.wr[h])

    def partial_chunk(m):
        return z3.And(terms.admit[m], terms.n_adm[m] < kn(m))

    def stop(h):
        return z3.And(terms.wait1[h], z3.Not(terms.admit[h]), z3.Not(terms.any_pre),
                      M._all(z3.Implies(ahead(m, h), terms.admit[m]) for m in range(n) if m != h))

    def no_partial_ahead(h):
        return M._all(z3.Implies(ahead(m, h), z3.Not(partial_chunk(m))) for m in range(n) if m != h)

    spent = M.total(z3.If(terms.admit[m], terms.n_adm[m], 0) for m in range(n))
    quiet = z3.And(t.hl, z3.Not(M._any(t.pe[i] for i in range(n))), M._any(M.scheduled(t, i) for i in range(n)))
    out = [(z3.Implies(quiet, z3.And(z3.Not(terms.any_pre), M.budget_left_latest(inp, t) == terms.budget_kept - spent)),
            every)]
    out += [(z3.Implies(M.admitted_latest(t, i), terms.admit[i]), every) for i in range(n)]
    running_then = M.count(z3.Or(M.running(t, i), z3.And(t.hl, t.fi[i])) for i in range(n))
    free_then = (inp.num_blocks - M.total(z3.If(M.running(t, i), t.b[i], 0) for i in range(n))
                 - M.total(z3.If(z3.And(t.hl, t.fi[i]), t.fr[i], 0) for i in range(n)))
    taken = M.total(z3.If(terms.admit[m], terms.q_adm[m], 0) for m in range(n))
    for i in range(n):  # per request, then summed: what runs (or finished) after a quiet tick, and what it holds
        then = z3.Or(M.running(t, i), z3.And(t.hl, t.fi[i]))
        holds = z3.If(M.running(t, i), t.b[i], 0) + z3.If(z3.And(t.hl, t.fi[i]), t.fr[i], 0)
        took = z3.If(terms.kept[i], s.b[i] + terms.extra[i], z3.If(terms.admit[i], terms.q_adm[i], 0))
        out.append((z3.Implies(quiet, z3.And(then == z3.Or(terms.kept[i], terms.admit[i]), holds == took,
                                             z3.Not(z3.And(terms.kept[i], terms.admit[i])))), every))
    out += [(z3.Implies(quiet, running_then == wp["running_kept"] + M.count(terms.admit)), every),
            (z3.Implies(quiet, free_then == wp["free_kept"] - taken), every)]
    def is_head(h):  # h is the queue's head after the tick
        return z3.And(M.waiting(t, h), M._all(z3.Implies(M.waiting(t, j), t.wr[h] < t.wr[j]) for j in range(n) if j != h))

    for h in range(n):
        asked = M.total(z3.If(ahead(m, h), kn(m), 0) for m in range(n) if m != h)
        out += [(z3.Implies(z3.And(quiet, is_head(h)), stop(h)), every),
                (z3.Implies(stop(h), z3.Not(wp["ok"][h])), every),
                (z3.Implies(stop(h), M._all(z3.Implies(terms.admit[m], ahead(m, h)) for m in range(n) if m != h)),
                 every),
                (z3.Implies(stop(h), z3.And(wp["pos"][h] == M.count(terms.admit),
                                            wp["free_adm"][h] == wp["free_kept"] - taken)), every)]
        cases = [(f"no request ahead of {h} got a partial chunk", no_partial_ahead(h))]
        cases += [(f"request {p} is the first ahead of {h} to get a partial chunk",
                   z3.And(ahead(p, h), partial_chunk(p), no_partial_ahead(p))) for p in range(n) if p != h]
        out.append((z3.Implies(stop(h), z3.Or(spent == asked, spent >= terms.budget_kept)), cases))
    out += [(z3.Implies(partial_chunk(i), spent == terms.budget_kept), every) for i in range(n)]
    left_then = M.budget_left_latest(inp, t)
    out += [(z3.Implies(z3.And(quiet, is_head(h), left_then >= 1),
                        z3.And(M.head_ask(inp, t, h) == terms.n_adm[h], wp["left"][h] == left_then)), every)
            for h in range(n)]
    out += [(part, every) for part in _conjuncts(M.enc_work_conserving(inp, t))]
    return out


# Rows proved by cases (``_by_cases``): name -> the function giving each part of its goal and the part's cases.
CASES = {"running_first": running_first_cases, "work_conserving": work_conserving_cases}


def describe(val: dict) -> dict:
    """A frame as plain values: clock, and per request (id, place, computed, generated, blocks)."""
    names = {M.WAITING: "waiting", M.RUNNING: "running", M.FINISHED: "finished", M.ABORTED: "aborted"}
    return {"clock": val["clock"],
            "requests": [[val["rid"][i], names.get(val["st"][i], val["st"][i]), val["c"][i], val["g"][i], val["b"][i]]
                         for i in range(len(val["rid"]))]}


def _frames_setup(n: int, mutant: str | None, tags=("0", "1")):
    inp = M.make_inputs(n)
    frames = [M.make_vars(inp, tag) for tag in tags]
    return inp, frames


def _strengthened(inp: M.Inputs, s: M.Vars, names=None) -> list:
    return [_encoding(name)(inp, s) for name in (invariant_names() if names is None else names)]


def assumptions(name: str) -> tuple:
    return tuple(dict.fromkeys((name,) + SUPPORT[name])) if name in SUPPORT else tuple(SUPPORT["termination_ranking"])


def _step(inp, s, t, mutant, tag="x"):
    trans, terms = M.transition(inp, s, t, mutant, tag)
    args = list(terms.block_args) + M.frame_block_args(inp, s) + M.frame_block_args(inp, t)
    return trans, terms, args


def _uses(exprs, blk: z3.FuncDeclRef | None) -> tuple:
    """The ids of the constants in ``exprs``, and the blocks_for arguments (simplified, by id) that they apply ``blk`` to."""
    consts, blk_args, seen, stack = set(), {}, set(), list(exprs)
    while stack:
        x = stack.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            consts.add(x.get_id())
        elif blk is not None and z3.is_app(x) and x.decl().eq(blk):
            a = z3.simplify(x.arg(0))
            blk_args[a.get_id()] = a  # the term is kept: an id is only an id while its term is alive
        stack.extend(x.children())
    return consts, blk_args


def _cone(inp: M.Inputs, s: M.Vars, t: M.Vars, terms: M.StepTerms, args: list, goals: list, pre: list) -> tuple:
    """``(near, rest)``: the step's equations, the frames' share definitions and the blocks_for axioms that ``goals`` and ``pre`` can reach, and the others.

    Every next-state variable and named share is defined by one equation (a
    variable = a term over the pre-state); ``near`` holds the definitions reachable
    from the goals and the pre-state facts (a fixpoint), and the axioms at every
    blocks_for argument they apply ``blk`` to.  ``near`` is a subset of the full
    hypotheses, so a negation unsat under it is unsat under all of them; ``rest``
    is the remainder, added back for the check that the hypotheses are satisfiable."""
    defs = {}
    for name in M.FIELDS:
        for i in range(inp.n):
            defs[t.per[name][i].get_id()] = t.per[name][i] == terms.next[name][i]
    for name in M.GLOBALS:
        defs[t.glob[name].get_id()] = t.glob[name] == terms.next[name]
    defs[t.hl.get_id()] = t.hl == terms.next["hl"]
    for d in M.frame_defs(inp, s) + M.frame_defs(inp, t):
        defs[d.arg(0).get_id()] = d
    chosen: dict = {}
    for d in terms.names:
        defs[d.arg(0).get_id()] = d
    frontier = list(goals) + list(pre) + list(terms.defs)
    blk_used: dict = {}
    while frontier:
        consts, used = _uses(frontier, inp.blk)
        blk_used.update(used)
        frontier = [defs[k] for k in consts if k in defs and k not in chosen]
        chosen.update((k, defs[k]) for k in consts if k in defs)
    simple = [(i, a, z3.simplify(a)) for i, a in args]
    near_args = [(i, a) for i, a, b in simple if b.get_id() in blk_used]
    near = list(terms.defs) + [z3.Not(M.is_terminal(inp, s))] + list(chosen.values()) + M.blocks_axioms(inp, near_args)
    rest = [d for k, d in defs.items() if k not in chosen] + M.blocks_axioms(inp, args)
    return near, rest


# --- the rows ------------------------------------------------------------------------------


def prove_blocks_axioms(mutant: str | None = None) -> dict:
    """ceil(t / bs) satisfies ``blocks_axioms`` for every bs >= 1 and t, t2 >= 0 (no bound)."""
    bs, t, t2, q, q2 = z3.Ints("bs t t2 q q2")

    def is_ceil(x, y):
        if mutant == "floor_blocks":
            return z3.And(bs * y <= x, bs * (y + 1) > x)
        return z3.And(bs * y >= x, bs * (y - 1) < x)

    solver = _solver()
    solver.add(bs >= 1, t >= 0, t2 >= 0, is_ceil(t, q), is_ceil(t2, q2))
    hyp = _hyp(solver)
    if hyp != "yes":
        return _not_sat(hyp, "ceil's definition")
    goals = [q >= 0, z3.Implies(t == 0, q == 0), z3.Implies(t >= 1, z3.And(q >= 1, q <= t)),
             z3.Implies(t <= t2, q <= q2)]
    for goal in goals:
        status, model = _unsat(solver, z3.Not(goal))
        if status != PROVED:
            cex = None if model is None else {k: model.eval(v, True).as_long() for k, v in
                                              (("block_size", bs), ("t", t), ("t2", t2), ("q", q), ("q2", q2))}
            return _result(status, f"ceil does not satisfy {goal}", cex)
    return _result(PROVED, "blk(0) = 0; 1 <= blk(t) <= t for t >= 1; monotone; for every block_size >= 1 (any n)")


def _triangular(names) -> bool:
    """Each definition is ``c == term`` for a constant c defined nowhere else and a term over the pre-state and earlier names: exactly one valuation."""
    defined: set = set()
    later = {d.arg(0).get_id() for d in names}
    for d in names:
        if not (z3.is_eq(d) and z3.is_const(d.arg(0)) and d.arg(0).decl().kind() == z3.Z3_OP_UNINTERPRETED) \
                or d.arg(0).get_id() in defined:
            return False
        used, _ = _uses([d.arg(1)], None)
        if used & (later - defined):
            return False
        defined.add(d.arg(0).get_id())
    return True


def prove_total(n: int, mutant: str | None = None, bounds: dict | None = None) -> dict:
    """Every non-terminal state that satisfies the invariant (the rows proved at n, ``bounds``) has a successor."""
    inp, (s, t) = _frames_setup(n, mutant)
    trans, terms, args = _step(inp, s, t, mutant, "total")
    solver = _solver()
    names = None if bounds is None else assumed_at(n, bounds)
    solver.add(*M.domain(inp, mutant), *_strengthened(inp, s, names), z3.Not(M.is_terminal(inp, s)),
               *M.frame_defs(inp, s))
    solver.add(M.blocks_axioms(inp, args))
    hyp = _hyp(solver)
    if hyp != "yes":
        return _not_sat(hyp, "non-terminal states")
    if not _triangular(terms.names):
        return _result(UNKNOWN, "the step's named constants are not defined one at a time over those before them")
    status, model = _unsat(solver, z3.Not(z3.And(list(terms.defs) or [z3.BoolVal(True)])))
    if status == REFUTED:
        val = M.read_frame(model, inp, s)
        return _result(REFUTED, "this non-terminal state has no successor",
                       {"breaks": TOTAL, "call": M.call_text(val), "state": describe(val)})
    return _result(status, "the tick's terms are explicit; its definitions hold in every non-terminal state")


def prove_inductive(name: str, n: int, mutant: str | None = None) -> dict:
    """Initiation and consecution of one row at n requests, assuming every row at the pre-state."""
    predicate = _encoding(name)
    inp, (s, t) = _frames_setup(n, mutant)
    base = _solver()
    base.add(*M.domain(inp, mutant))
    base.push()
    base.add(M.init(inp, s, mutant))
    base.add(M.blocks_axioms(inp, M.frame_block_args(inp, s)))
    base.add(M.frame_defs(inp, s))
    hyp = _hyp(base)
    if hyp != "yes":
        return _not_sat(hyp, "initiation (Init and the domain)")
    status, model = _unsat(base, z3.Not(predicate(inp, s)))
    base.pop()
    if status == REFUTED:
        val = M.read_frame(model, inp, s)
        return _result(REFUTED, "initiation fails", {"breaks": name, "call": M.call_text(val), "state": describe(val),
                                                     "after_steps": 0})
    if status == UNKNOWN:
        return _result(UNKNOWN, "initiation: the solver gave up")
    trans, terms, args = _step(inp, s, t, mutant)
    pre = _strengthened(inp, s, assumptions(name))
    goal = predicate(inp, t)
    hints = M.step_hints(inp, s, t, terms) if name in HINTED else []
    split = CASES[name](inp, s, t, terms) if name in CASES else None
    guards = [x for part, cases in split or [] for x in [part] + [guard for _, guard in cases]]  # in the cone too
    near, rest = _cone(inp, s, t, terms, args, [goal] + hints + guards, pre + M.domain(inp, mutant))
    base.add(*pre, *near)
    base.push()
    base.add(*rest)  # with rest, the hypotheses are the support, every frame definition, the whole step and every axiom
    hyp = _hyp(base)
    base.pop()
    if hyp != "yes":
        return _not_sat(hyp, f"consecution ({', '.join(assumptions(name))} and the step)")
    def attempt():
        if split is not None:
            return _by_cases(base, split, goal)
        if name in SPLIT:
            return (*_unsat_parts(base, goal, hints), "")
        return (*_unsat(base, z3.Not(goal)), "")

    status, model, where = attempt()
    if status != PROVED:  # the cone left something out, or the claim fails: again with every hypothesis
        base.add(*rest)
        status, model, where = attempt()
    by_cases = f"; by cases ({sum(len(c) for _, c in split)} cases in {len(split)} parts, each part's cases proved " \
               "to cover every state)" if split is not None else ""
    if status == PROVED:
        return _result(PROVED, f"assumes {', '.join(assumptions(name))}{by_cases}")
    if status == UNKNOWN:  # a rejected split says why; else the solver gave up, in the part and case ``where`` names
        why = where if "rejected" in where else "the solver gave up" + (f" ({where})" if where else "")
        return _result(UNKNOWN, f"consecution: {why}")
    # Not inductive: look for a reachable violation, with up to 3 requests (a CTI at n = 1 may need a second
    # request to be reached, as a preemption does); the claim is "for every n <= the bound", so any of them refutes it.
    found = bmc(name, 3, 5, mutant)
    if found is not None:
        return _result(REFUTED, f"a reachable state with {found['n']} request(s) breaks it", found)
    cti = {"before": describe(M.read_frame(model, inp, s)), "after": describe(M.read_frame(model, inp, t))}
    return _result(UNKNOWN, f"not inductive with the invariant (counterexample to induction {cti}); "
                            "no reachable violation found within 5 steps")


def bmc(target: str, n_max: int, depth: int, mutant: str | None = None) -> dict | None:
    """A concrete run from Init that breaks ``target`` within ``depth`` steps and n <= n_max requests, or None."""
    predicate = _encoding(target)
    for n in range(1, n_max + 1):
        inp = M.make_inputs(n, block_size=1)  # a search: one concrete block size keeps it linear
        frames = [M.make_vars(inp, "b0")]
        solver = _solver()
        solver.add(*M.domain(inp, mutant), M.init(inp, frames[0], mutant))
        for d in range(depth + 1):
            solver.add(M.blocks_axioms(inp, M.frame_block_args(inp, frames[-1])))
            solver.add(M.blocks_exact(inp, M.frame_block_args(inp, frames[-1])))
            solver.add(M.frame_defs(inp, frames[-1]))
            result, model = _check(solver, [z3.Not(predicate(inp, frames[-1]))])
            if model is not None:
                vals = [M.read_frame(model, inp, f) for f in frames]
                return {"breaks": target, "call": M.call_text(vals[0]), "after_steps": len(frames) - 1,
                        "state": describe(vals[-1]), "n": n}
            if d == depth:
                break
            nxt = M.make_vars(inp, f"b{d + 1}")
            trans, terms, args = _step(inp, frames[-1], nxt, mutant, f"b{d}")
            solver.add(trans, *M.blocks_exact(inp, list(terms.block_args)))
            frames.append(nxt)
    return None


def prove_by_construction(name: str, n: int, mutant: str | None = None) -> dict:
    """``name`` holds in every state of the per-request encoding over the domain, with no step at all."""
    inp, (s, t) = _frames_setup(n, mutant)
    solver = _solver()
    solver.add(*M.domain(inp, mutant))
    hyp = _hyp(solver)
    if hyp != "yes":
        return _not_sat(hyp, "the states of the encoding")
    # A step that has no successor would make "no step breaks it" empty: check the step exists here too.
    trans, terms, args = _step(inp, s, t, mutant)
    solver.push()
    solver.add(trans, *M.blocks_axioms(inp, args), *_strengthened(inp, s), *M.frame_defs(inp, s))
    hyp = _hyp(solver)
    solver.pop()
    if hyp != "yes":
        return _not_sat(hyp, "the states of the encoding and the step")
    status, model = _unsat(solver, z3.Not(_encoding(name)(inp, s)))
    why = ("prefix caching is not encoded (no pool): the claim holds by its definition with caching off"
           if name in WITHOUT_PREFIX_CACHING else
           "one record per request and distinct ids: the negation is unsat over the representation alone, "
           "no step can break it")
    return _result(status, why if status == PROVED else "the solver gave up")


def prove_termination(n: int, mutant: str | None = None) -> dict:
    """Under the invariant, remaining_work >= 0 and every step decreases it by at least one."""
    inp, (s, t) = _frames_setup(n, mutant)
    trans, terms, args = _step(inp, s, t, mutant)
    rank_s, rank_t = M.remaining_work(inp, s), M.remaining_work(inp, t)
    pre = M.domain(inp, mutant) + _strengthened(inp, s, SUPPORT["termination_ranking"])
    near, rest = _cone(inp, s, t, terms, args, [rank_s, rank_t], pre)  # pre holds the domain here
    solver = _solver()
    solver.add(*pre, *near)
    solver.push()
    solver.add(*rest)
    hyp = _hyp(solver)
    solver.pop()
    if hyp != "yes":
        return _not_sat(hyp, "the invariant and the step")
    for goal, what in ((rank_s >= 0, "remaining_work >= 0"), (rank_t <= rank_s - 1, "remaining_work falls by >= 1")):
        status, model = _unsat(solver, z3.Not(goal))
        if status != PROVED:  # again with every hypothesis (see _cone)
            solver.add(*rest)
            status, model = _unsat(solver, z3.Not(goal))
        if status != PROVED:
            cex = None
            if model is not None:
                cex = {"breaks": what, "call": M.call_text(M.read_frame(model, inp, s)),
                       "before": describe(M.read_frame(model, inp, s)), "after": describe(M.read_frame(model, inp, t))}
            return _result(status, f"{what} fails", cex)
    return _result(PROVED, "remaining_work >= 0 and falls by >= 1 on every step: the head of the running list is "
                           "never preempted (its peak need fits the pool) and computes >= 1 token, leaves, or an "
                           "abort removes a request; with nothing running the head of the queue is admitted")


def _repeats(inp: M.Inputs, s: M.Vars, t: M.Vars) -> z3.BoolRef:
    """t equals s in everything the step reads but the clock, every unfinished request has arrived and none will abort."""
    same = []
    for i in range(inp.n):
        same += [t.st[i] == s.st[i], t.c[i] == s.c[i], t.g[i] == s.g[i], t.b[i] == s.b[i],
                 t.rr[i] == s.rr[i], t.wr[i] == s.wr[i], t.hs[i] == s.hs[i],
                 z3.Implies(M.unfinished(s, i), z3.And(inp.arr[i] <= s.clock, z3.Not(inp.has_abort[i])))]
    return z3.And(same + [t.nr == s.nr, t.wf == s.wf, z3.Not(M.is_terminal(inp, s))])


def _small(inp: M.Inputs, top: int = 6) -> list:
    """Small constants, so that the run Z3 shows is one a reader can follow (a search restriction only)."""
    out = [inp.max_seqs <= 3, inp.budget <= top, inp.num_blocks <= top]
    for i in range(inp.n):
        out += [inp.arr[i] <= 3, inp.prompt[i] <= top, inp.output[i] <= top, inp.abort[i] <= top]
    return out


def _any_req(f, n):
    return z3.Or([f(i) for i in range(n)]) if n else z3.BoolVal(False)


# What the stuck request must have done, so that the run shows the rule's point, not a trivial start.
_WITNESS = {
    "feasible_pool": lambda s, i: s.hs[i],  # it was admitted and ran, then never finishes
    "feasible_budget": lambda s, i: s.pre[i] >= 1,  # it was preempted and can never be recomputed
}


def prove_rule_needed(rule: str, mutant: str | None = None) -> dict:
    """Without ``rule`` a concrete run from Init reaches a state the step repeats forever; with it see termination_ranking."""
    drop, shows = RULES[rule]
    for n in range(1, RULE_N + 1):
        inp = M.make_inputs(n, block_size=1)  # a search: one concrete block size keeps it linear
        frames = [M.make_vars(inp, "r0")]
        solver = _solver()
        solver.add(*M.domain(inp, drop), M.init(inp, frames[0], mutant), *_small(inp))
        for d in range(RULE_DEPTH):
            nxt = M.make_vars(inp, f"r{d + 1}")
            trans, terms, args = _step(inp, frames[-1], nxt, mutant, f"r{d}")
            solver.add(trans, *M.blocks_exact(inp, args))
            frames.append(nxt)
            witness = _any_req(lambda i: z3.And(M.unfinished(frames[-2], i), _WITNESS[rule](frames[-2], i)), inp.n)
            result, model = _check(solver, [_repeats(inp, frames[-2], frames[-1]), witness])
            if result == z3.sat:
                vals = [M.read_frame(model, inp, f) for f in frames]
                cex = {"without_rule": rule, "breaks": "termination (the run never ends)", "call": M.call_text(vals[0]),
                       "shows": shows, "after_steps": len(frames) - 2, "state": describe(vals[-2])}
                return _result(PROVED, "without the rule: a reachable state that the step repeats forever; "
                                       "with it: termination_ranking", cex)
    return _result(REFUTED if mutant else UNKNOWN,
                   f"no repeating state within {RULE_DEPTH} steps and n <= {RULE_N} without the rule")


# --- a theorem users care about: how often can FCFS with recompute preempt one request? ------------

FINDING = "finding:one_request_ahead_preempts_twice"
FINDING_DEPTH = 7
LONE = "one_request_is_never_preempted"
FILTER = "lemma:filter_sums"


def prove_finding(mutant: str | None = None) -> dict:
    """The conjecture "a request is preempted at most once per request ahead of it" is refuted: Z3 finds a run of
    2 requests (values <= 5) that preempts one of them twice, and the run is replayed on ``spec.serving.run``.

    Status ``refuted`` (the conjecture's counterexample) is this row's result; ``unknown`` when no such run is
    found within the depth or the spec that runs does not repeat it."""
    inp = M.make_inputs(2, block_size=1)
    frames = [M.make_vars(inp, "f0")]
    solver = _solver()
    solver.add(*M.domain(inp, mutant), M.init(inp, frames[0], mutant), *_small(inp, 5))
    for d in range(FINDING_DEPTH):
        nxt = M.make_vars(inp, f"f{d + 1}")
        trans, terms, args = _step(inp, frames[-1], nxt, mutant, f"f{d}")
        solver.add(trans, *M.blocks_exact(inp, args))
        frames.append(nxt)
        result, model = _check(solver, [z3.Or(nxt.pre[0] >= 2, nxt.pre[1] >= 2)])
        if result != z3.sat:
            continue
        vals = [M.read_frame(model, inp, f) for f in frames]
        preempted = [[vals[k]["rid"][i] for i in range(2) if vals[k]["pe"][i]] for k in range(1, len(vals))]
        found = {"breaks": "preempted at most once per request ahead", "call": M.call_text(vals[0]),
                 "after_steps": len(frames) - 1, "state": describe(vals[-1]), "preempted_per_step": preempted,
                 "shows": "one request ahead of it preempts it twice, so 'at most one preemption per request "
                          "ahead' is false: a bound k must depend on more than the number of requests"}
        replayed = _replay_preemptions(vals[0])
        if replayed < 2:
            return _result(UNKNOWN, f"Z3's run preempts a request twice, but spec.serving.run preempts at most "
                                    f"{replayed} times on it", found)
        return _result(REFUTED, "refuted with 2 requests: the run shown, replayed on spec.serving.run "
                                f"(a request preempted {replayed} times)", found)
    return _result(UNKNOWN, f"no run within {FINDING_DEPTH} steps preempts a request twice (2 requests, values <= 5)")


def _replay_preemptions(val: dict) -> int:
    """The most preemptions of one request when ``spec.serving.run`` runs the call a model stands for."""
    import spec.serving as S

    requests = []
    for i in range(len(val["rid"])):
        r = {"id": val["rid"][i], "arrival": val["arr"][i], "prompt": val["prompt"][i], "output": val["output"][i]}
        if val["has_abort"][i]:
            r["abort"] = val["abort"][i]
        requests.append(r)
    config = {"max_seqs": val["max_seqs"], "token_budget": val["budget"], "block_size": val["block_size"],
              "num_blocks": val["num_blocks"], "chunked_prefill": val["chunked"]}
    try:
        return max(r["preemptions"] for r in S.run(requests, config)["requests"])
    except Exception:  # noqa: BLE001 - the spec that runs rejects or breaks on it: not confirmed
        return 0


def prove_lone_request(mutant: str | None = None) -> dict:
    """With one request, no step ever preempts it (inductive: under the invariant, the step's preempted flag is false)."""
    one = M.make_inputs(1)
    s, t = M.make_vars(one, "0"), M.make_vars(one, "1")
    trans, terms, args = _step(one, s, t, mutant)
    lone = _solver()
    lone.add(*M.domain(one, mutant), *_strengthened(one, s), trans, *M.blocks_axioms(one, args),
             *M.frame_defs(one, s), *M.frame_defs(one, t))
    hyp = _hyp(lone)
    if hyp != "yes":
        return _not_sat(hyp, "one request: the invariant and the step")
    status, model = _unsat(lone, terms.pre[0])
    if status == REFUTED:
        val = M.read_frame(model, one, s)
        return _result(REFUTED, "a lone request is preempted", {"breaks": LONE, "call": M.call_text(val),
                                                                "state": describe(val)})
    return _result(status, "with 1 request no step preempts it (its blocks fit: the pool rule)")


# --- the ledger -----------------------------------------------------------------------------


def _kind(name: str, method: str) -> str:
    """What a row is (``proofs.smt.run.KINDS``)."""
    if name.startswith("lemma:"):
        return "lemma"
    if name.startswith("finding:"):
        return "finding"
    if method == "by construction":
        return "construction"
    if name.split(" (")[0] in set(M.PREDICATES) | set(B.PREDICATES):  # a registry invariant, or a part of one
        return "invariant"
    return "theorem"


def _claim(name, method, bound, run, depends=()) -> Claim:
    return Claim(name, method, bound, run, tuple(depends), REFUTED_BY.get(name), _kind(name, method))


def _not_encoded(name: str) -> dict:
    return _result(UNKNOWN, f"not proved: {M.NOT_ENCODED[name]}", hypotheses="unknown")


def claims(max_requests: int = 8, mutant: str | None = None) -> list[Claim]:
    """Every row of ``schedcheck prove --model serving``, in ledger order; with ``mutant``, against that broken step."""
    n = max_requests
    assert n >= 1, f"max_requests={n!r}: expected an int >= 1"
    assert mutant is None or mutant in M.MUTANTS, f"mutant={mutant!r}: expected one of {sorted(M.MUTANTS)}"
    from spec.serving import STATE_INVARIANTS

    bound = f"n <= {n}"
    names = invariant_names()
    rows_names = [row_name(x) for x in names]
    bounds = caps(n)
    assumed = [ANY_N[x] if x in ANY_N and bounds.get(x, n) < n else row_name(x) for x in assumed_at(n, bounds)]
    rows = [_claim(TOTAL, "by construction", bound,
                   partial(up_to, partial(prove_total, mutant=mutant, bounds=bounds), n),
                   [r for r in assumed if r != "no_duplicate_active"] + [BLOCKS]),
            _claim(BLOCKS, "one step", "any block_size", partial(prove_blocks_axioms, mutant))]
    for name in names:
        if name in BY_CONSTRUCTION:
            rows.append(_claim(name, "by construction", "by construction",
                               partial(up_to, partial(prove_by_construction, name, mutant=mutant), n), [TOTAL]))
            continue
        cap = bounds.get(name, n)
        rows.append(_claim(row_name(name), "inductive", bound if cap == n else f"n <= {cap} (cost)",
                           partial(up_to, partial(prove_inductive, name, mutant=mutant), cap),
                           [TOTAL, BLOCKS] + support_rows(name, cap, bounds)))
    for inv in STATE_INVARIANTS:
        if inv.name in M.NOT_ENCODED:
            rows.append(_claim(inv.name, "not encoded", "-", partial(_not_encoded, inv.name)))
    cap = bounds["termination_ranking"]
    rows.append(_claim("termination_ranking", "inductive", bound if cap == n else f"n <= {cap} (cost)",
                       partial(up_to, partial(prove_termination, mutant=mutant), cap),
                       [TOTAL, BLOCKS] + support_rows("termination_ranking", cap, bounds)))
    for rule in RULES:
        rows.append(_claim(f"rule_needed:{rule}", "bounded", f"n <= {RULE_N} without; with: termination_ranking",
                           partial(prove_rule_needed, rule, mutant), ["termination_ranking"]))
    # any n: the passes as loops over positions, proved by induction over their iterations (proofs.smt.serving_fold)
    rows.append(_claim("token_budget (any n)", "loop induction", "any n", partial(F.prove_budget, mutant),
                       [conformance.FOLD_ROW]))
    rows.append(_claim(FILTER, "induction", "any length", partial(F.prove_filter_sums, mutant)))
    rows.append(_claim("slot_bound (any n)", "loop induction", "any n", partial(F.prove_seats, mutant),
                       [conformance.FOLD_ROW, FILTER]))
    rows.append(_claim("kv_exclusive (any n)", "loop induction", "any n, any block id",
                       partial(F.prove_exclusive, mutant), [conformance.FOLD_ROW, FILTER]))
    rows.append(_claim("kv_capacity (any n)", "loop induction", "any n", partial(F.prove_capacity, mutant),
                       [conformance.FOLD_ROW, FILTER, BLOCKS, "kv_exclusive (any n)"]))
    rows.append(_claim(LONE, "one step", "n = 1", partial(prove_lone_request, mutant), [TOTAL, BLOCKS] + rows_names))
    rows.append(_claim(FINDING, "bounded", "n = 2, replayed on spec.serving.run", partial(prove_finding, mutant)))
    blocks = B.claims(n, mutant, (TOTAL, BLOCKS))  # kv_exclusive and the id rows (per-block encoding)
    order = [inv.name for inv in STATE_INVARIANTS]
    head = rows[:2]
    def place(c):  # registry order; "kv_capacity (ids)" right after kv_capacity
        name = c.claim.split(" (")[0]
        return (order.index(name) if name in order else len(order), c.claim)

    caching = SC.claims(n, mutant)  # prefix caching on: refcount_exact, no_false_sharing, their validation
    body = sorted(rows[2:2 + len(names) + len(M.NOT_ENCODED)] + blocks + caching[2:], key=place)
    # Every proof is about the encoding; it counts only when the encoding agreed with the spec that runs.
    validation = conformance.claims("serving", n, mutant) + caching[:2]
    checked = tuple(c.claim for c in validation)
    return validation + [replace(c, depends=c.depends + checked)
                         for c in head + body + rows[2 + len(names) + len(M.NOT_ENCODED):]]
