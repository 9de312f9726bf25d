"""The Z3 claims: every registry state invariant, totality of the step, termination, the abstraction, the policy theorem, the domain rules.

What it establishes (each a row of ``schedcheck prove``; ``claims(max_jobs)`` lists them):

- ``step_total``: every non-terminal state of the encoding (0 <= adm <= n) has a
  successor: the admission count written out (``model.admission_witness``)
  satisfies the step's definitions.  Every row about the step assumes it, so a step
  with contradictory definitions proves nothing;
- for every state invariant of ``spec.invariants.STATE_INVARIANTS``, by name:
  initiation (Init => Inv) and consecution (Inv and Step => Inv') for every n from
  1 to the bound, with unbounded integer values, both policies (the policy is a
  symbolic Bool).  Consecution assumes the strengthening invariants listed in
  ``SUPPORT``; the ``LEMMAS`` of ``proofs.smt.model`` are rows of their own, proved
  the same way, and a row counts as proved only when everything it assumes is proved.
  ``fifo_order`` and ``no_duplicate_active`` hold in every state of the prefix
  encoding with no step at all: their method is ``by construction`` (Z3 checks the
  negation is unsat over the representation alone), not an inductive proof;
  ``every_job_completes_once`` is by construction of the prefix encoding too (job i
  waits iff i >= adm, else is active or done), and Z3 proves only that 0 <= adm <= n
  is inductive;
- ``lemma:counting_identities``: the per-job counting identities the other proofs
  use are valid consequences of the step relation;
- ``termination_ranking``: ``remaining_work`` is bounded below by 0 (and is 0 only
  at the end), drops by the number of jobs served (>= 1) on every step, the clock
  only jumps to an arrival, and at the end busy = sum(tokens) and every finish
  <= max(arrival) + sum(tokens);
- ``slot_bound (abstraction)`` and ``work_conservation (abstraction)``: inductive
  on an abstraction over counts and sums that has no n in it; the link to the
  per-job model (``abstraction_refinement``) is proved for n up to the bound only,
  so these rows are stated for n <= the bound;
- ``policy_continuous_starts_no_later``: by induction over the product of a
  continuous and a static run on the same input, taken one clock tick at a time
  (``jump_is_idle_ticks`` shows that taking a jump tick by tick changes nothing),
  every job starts and finishes no later under continuous, so the makespan is no larger;
- ``rule_needed:<rule>`` for each domain rule: without the rule, bounded model
  checking finds a concrete run that breaks a named claim; with all rules that
  claim is proved.  Proved means both halves hold; ``RULE_SHOWS`` says what each run shows;
- ``worked_example_*``: the chapter's examples on the encoding (bounded: the run
  is unrolled to its end);
- first of all, the validation rows of ``proofs.smt.conformance`` (the encoding
  against the spec that runs), on which every other row depends.  Statuses: rows
  true by construction read ``by construction`` and lemmas ``lemma`` (``_kind``).

Every check first checks that its hypotheses are satisfiable (Init with the
domain; the assumed invariants with the step): when they are not, the row is
``vacuous``, never proved.  Every row names a mutant of the step or of the encoding
(``REFUTED_BY``) under which Z3 refutes it; the tests run each.

Assumptions: the encoding of ``proofs.smt.model`` (tested against ``spec.step``);
Z3's verdicts, with its simplex arithmetic solver (``ARITH_SOLVER``) on every check.
Bounds: per-job claims for every n from 1 to ``max_jobs`` (the ``bound`` column
says ``n <= max_jobs``); values unbounded.  Nothing runs at import time.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from functools import partial

import z3

from proofs.smt import conformance
from proofs.smt import model as M
from proofs.smt import run
from proofs.smt.run import Claim

PROVED, REFUTED, UNKNOWN, VACUOUS = "proved", "refuted", "unknown", "vacuous"

# What each consecution assumes of the pre-state, besides the claim itself and
# every_job_completes_once (the representation's 0 <= adm <= n).  Found as unsat
# cores, written down here, and re-proved on every run: a wrong entry makes its
# row unknown or refuted, never silently proved.
SUPPORT = {
    "well_typed": (),
    "no_duplicate_active": (),
    "no_start_before_arrival": (),
    "slot_bound": (),
    "nonnegative_remaining": ("active_remaining_positive",),
    "work_conservation": (),
    "every_job_completes_once": (),
    "termination": ("well_typed",),
    "fifo_order": (),
    "no_preemption": (),
    "continuous_backfills": ("slot_bound",),
    "static_batch_boundary": ("started_before_clock",),
    "active_remaining_positive": (),
    "started_before_clock": (),
    "finished_by_clock": (),
    "served_only_admitted": ("finished_by_clock",),
    "ranking_plus_busy_is_total": (),
}

# Registry invariants that hold in every state of the prefix encoding, with no step.
BY_CONSTRUCTION = ("no_duplicate_active", "fifo_order")

# Rule dropped -> the claim Z3 breaks without it.
RULE_TARGETS = {
    "tokens_integral": "termination_ranking",
    "tokens_positive": "nonnegative_remaining",
    "arrival_nonnegative": "termination",
    "ids_unique": "no_duplicate_active",
    "slots_positive": "termination",
}

# Rule dropped -> what the run Z3 finds without it shows (no more).
RULE_SHOWS = {
    "tokens_integral": "a fractional token count steps past 0 without reaching it: remaining_work < 0, "
                       "so the ranking argument of termination_ranking fails",
    "tokens_positive": "a job with 0 tokens is served and left with remaining -1 (nonnegative_remaining)",
    "arrival_nonnegative": "the clock bound of `termination` (clock <= max(arrival) + busy) is false in the "
                           "initial state, before any step (clock 0, busy 0, arrival < 0): the rule is needed "
                           "for that formula, not for runs to end",
    "ids_unique": "two jobs with one id are active and served in the same tick (no_duplicate_active)",
    "slots_positive": "with 0 slots nothing is admitted and empty ticks run on: the clock passes "
                      "max(arrival) + busy (`termination`'s clock bound), and no job ever ends",
}

WORKED_EXAMPLES = {
    # name: (tokens, arrival, slots, continuous, makespan, busy, utilization)
    "worked_example_1_static": ((1, 4, 2, 3), 0, 2, False, 7, 10, (10, 14)),
    "worked_example_1_continuous": ((1, 4, 2, 3), 0, 2, True, 6, 10, (10, 12)),
    "worked_example_2_static": ((4, 4), 3, 2, False, 7, 8, (8, 14)),
    "worked_example_2_continuous": ((4, 4), 3, 2, True, 7, 8, (8, 14)),
}

HINTS = "lemma:counting_identities"
TOTAL = "step_total"

# Row -> the mutant (of the step, or of the encoding) under which Z3 refutes it.
REFUTED_BY = {
    TOTAL: "contradictory_step",
    HINTS: "served_keeps_previous",
    "well_typed": "clock_minus_one",
    "no_duplicate_active": "duplicate_ids",
    "no_start_before_arrival": "admit_before_arrival",
    "slot_bound": "admit_while_le_slots",
    "nonnegative_remaining": "serve_two_tokens",
    "work_conservation": "finish_one_early",
    "every_job_completes_once": "admit_past_end",
    "termination": "jump_one_late",
    "fifo_order": "unsorted_jobs",
    "no_preemption": "serve_two_tokens",
    "continuous_backfills": "admit_one_per_tick",
    "static_batch_boundary": "static_admits_into_running_batch",
    "lemma:active_remaining_positive": "serve_two_tokens",
    "lemma:started_before_clock": "clock_minus_one",
    "lemma:finished_by_clock": "clock_minus_one",
    "lemma:served_only_admitted": "clock_minus_one",
    "lemma:ranking_plus_busy_is_total": "finish_one_early",
    "termination_ranking": "no_jump",
    "slot_bound (abstraction)": "admit_while_le_slots",
    "work_conservation (abstraction)": "finish_one_early",
    "abstraction_refinement": "admit_while_le_slots",
    "jump_is_idle_ticks": "no_jump",
    "policy_continuous_starts_no_later": "continuous_admits_a_tick_late",
    "rule_needed:tokens_integral": "no_jump",
    "rule_needed:tokens_positive": "serve_two_tokens",
    "rule_needed:arrival_nonnegative": "jump_one_late",
    "rule_needed:ids_unique": "duplicate_ids",
    "rule_needed:slots_positive": "jump_one_late",
    "worked_example_1_static": "finish_one_early",
    "worked_example_1_continuous": "finish_one_early",
    "worked_example_2_static": "finish_one_early",
    "worked_example_2_continuous": "finish_one_early",
}


def row_name(name: str) -> str:
    return name if name in M.PREDICATES else f"lemma:{name}"


def state_invariant_names() -> list[str]:
    """The registry's state invariants, in order; fails loudly when one has no encoding."""
    from spec.invariants import STATE_INVARIANTS

    names = [inv.name for inv in STATE_INVARIANTS]
    for name in names:
        if name not in M.PREDICATES:
            raise KeyError(f"state invariant {name!r} has no Z3 encoding in proofs.smt.model.PREDICATES")
        if name not in SUPPORT:
            raise KeyError(f"state invariant {name!r} has no SUPPORT entry in proofs.smt.claims")
    return names


def _encoding(name: str):
    if name in M.PREDICATES:
        return M.PREDICATES[name]
    if name in M.LEMMAS:
        return M.LEMMAS[name]
    if name == "termination_ranking":
        return lambda inp, s: M.remaining_work(inp, s) >= 0
    raise KeyError(f"{name!r}: no encoding")


# --- solving helpers ---------------------------------------------------------------------


# Z3's arithmetic solver for every check: 2 is the older simplex-based one, which on these
# encodings takes 1.2 to 1.5x less CPU than the default over n = 1..N (up to 3x on one check at
# n = 16; docs/prove.md, "Solver parameters");
# None leaves Z3's default (benchmarks/bench_prove.py --compare-arith measures both).
ARITH_SOLVER: int | None = 2


def _solver() -> z3.Solver:
    """A solver for one claim's checks: no preprocessing, the arithmetic solver of ``ARITH_SOLVER``."""
    # SimpleSolver: no preprocessing, which would lift the indicators' structure back into case splits.
    solver = z3.SimpleSolver()
    if ARITH_SOLVER is not None:
        solver.set("arith.solver", ARITH_SOLVER)
    return solver


def _add(solver: z3.Solver, *parts) -> None:
    """Add formulas and lists of formulas."""
    for part in parts:
        solver.add(*(part if isinstance(part, (list, tuple)) else [part]))


def _check(solver: z3.Solver, extra=()) -> tuple:
    """``(result, model)`` of the solver's formulas and ``extra``, with every indicator defined; the solver is left as it was."""
    if solver.num_scopes() == 0:
        added = getattr(solver, "_indicators_added", None)
        if added is None:
            added = set()
            solver._indicators_added = added
        _add(solver, M.indicator_defs(added))  # at the base level: they hold for every later check
        solver.push()
    else:
        solver.push()
        _add(solver, M.indicator_defs())
    _add(solver, extra)
    result = solver.check()
    model = solver.model() if result == z3.sat else None
    solver.pop()
    return result, model


def _check_unsat(solver: z3.Solver, negated_goal) -> tuple[str, z3.ModelRef | None]:
    """'proved' when the negated goal is unsat, 'refuted' with a model when sat, else 'unknown'.

    Only a meaningful proof when the solver's formulas (the hypotheses) are
    satisfiable: callers check that first with ``_hypotheses``."""
    result, model = _check(solver, negated_goal)
    if result == z3.unsat:
        return PROVED, None
    if result == z3.sat:
        return REFUTED, model
    return UNKNOWN, None


def _hypotheses(solver: z3.Solver) -> str:
    """'yes' when the solver's formulas are satisfiable, 'no' when not, 'unknown' when Z3 gave up."""
    result, _ = _check(solver)
    return "yes" if result == z3.sat else "no" if result == z3.unsat else "unknown"


def _not_sat(hyp: str, what: str) -> dict:
    """The row for hypotheses that are not (known to be) satisfiable: vacuous, or unknown when Z3 gave up."""
    if hyp == "no":
        return {"status": VACUOUS, "counterexample": None, "hypotheses": "no",
                "detail": f"{what}: the hypotheses are unsatisfiable, so the check proves nothing"}
    return {"status": UNKNOWN, "counterexample": None, "hypotheses": "unknown",
            "detail": f"{what}: the solver gave up on the hypotheses"}


def _result(status: str, detail, counterexample=None, hypotheses: str = "yes") -> dict:
    return {"status": status, "counterexample": counterexample, "detail": detail, "hypotheses": hypotheses}


def up_to(prover, n_max: int) -> dict:
    """``prover(n)`` for every n from 1 to ``n_max`` (``proofs.smt.run.up_to``), the model's indicators reset before each."""
    return run.up_to(prover, n_max, before_each=M.reset_indicators)


def _jsonable(value):
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _call_text(val: dict) -> str:
    jobs = [
        {"id": _jsonable(i), "arrival": _jsonable(a), "tokens": _jsonable(t)}
        for i, a, t in zip(val["ids"], val["arr"], val["tok"])
    ]
    return f"schedule({jobs!r}, slots={_jsonable(val['slots'])!r}, continuous={val['continuous']!r})"


def describe(val: dict) -> dict:
    """A frame as plain values: clock, busy, waiting ids, active (id, start, remaining), done (id, start, finish), served."""
    n = len(val["ids"])
    adm = val["adm"]
    return {
        "clock": val["clock"],
        "busy": val["busy"],
        "waiting": [_jsonable(val["ids"][i]) for i in range(n) if i >= adm],
        "active": [
            [_jsonable(val["ids"][i]), val["start"][i], _jsonable(val["rem"][i])]
            for i in range(n)
            if i < adm and not val["dn"][i]
        ],
        "done": [[_jsonable(val["ids"][i]), val["start"][i], val["fin"][i]] for i in range(n) if i < adm and val["dn"][i]],
        "served": [_jsonable(val["ids"][i]) for i in range(n) if val["srv"][i]],
    }


def _trace_counterexample(model, inp, frames, broken: str) -> dict:
    vals = [M.read_frame(model, inp, f) for f in frames]
    return {
        "breaks": broken,
        "call": _call_text(vals[0]),
        "after_steps": len(frames) - 1,
        "state": describe(vals[-1]),
        "served_per_step": [describe(v)["served"] for v in vals[1:]],
    }


def _state_counterexample(model, inp, s, broken: str) -> dict:
    val = M.read_frame(model, inp, s)
    return {"breaks": broken, "call": _call_text(val), "state": describe(val)}


def bmc(target: str, n_max: int, depth: int, mutant: str | None = None, drop: str | None = None) -> dict | None:
    """A concrete run from Init that breaks ``target`` within ``depth`` steps and n <= n_max jobs, or None."""
    predicate = _encoding(target)
    for n in range(1, n_max + 1):
        inp = M.make_inputs(n, real_tokens=(drop == "tokens_integral"))
        frames = [M.make_vars(inp, "b0")]
        solver = _solver()
        added: set = set()
        _add(solver, M.domain(inp, drop, mutant))
        _add(solver, M.init(inp, frames[0]))
        for d in range(depth + 1):
            goal = z3.Not(predicate(inp, frames[-1]))
            _add(solver, M.indicator_defs(added))  # outside push: later frames need them too
            solver.push()
            _add(solver, goal)
            result = solver.check()
            model = solver.model() if result == z3.sat else None
            solver.pop()
            if model is not None:
                return _trace_counterexample(model, inp, frames, target)
            nxt = M.make_vars(inp, f"b{d + 1}")
            _add(solver, M.trans(inp, frames[-1], nxt, mutant))
            frames.append(nxt)
    return None


# --- totality and the counting identities ---------------------------------------------


def prove_total(n: int, mutant: str | None = None) -> dict:
    """Every non-terminal state with 0 <= adm <= n has a successor: the written-out admission count satisfies the step's definitions."""
    inp = M.make_inputs(n)
    s = M.make_vars(inp, "0")
    solver = _solver()
    _add(solver, M.domain(inp, mutant=mutant), M.enc_every_job_completes_once(inp, s), z3.Not(M.is_terminal(inp, s)))
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "non-terminal states")
    terms = M.step_terms(inp, s, mutant, "total")
    witness = M.admission_witness(inp, s, terms)
    goal = z3.substitute(z3.And(terms.defs), (terms.k, witness))
    status, model = _check_unsat(solver, z3.Not(goal))
    if status == PROVED:
        return _result(PROVED, "k = min(free room, arrived waiting jobs) (0 when admission is closed) satisfies "
                               "the step's definitions in every non-terminal state")
    if status == UNKNOWN:
        return _result(UNKNOWN, "the solver gave up on the witness")
    # The witness fails in this state: does any admission count work there?
    val = M.read_frame(model, inp, s)
    concrete = _solver()
    _add(concrete, M.pin(inp, s, val), terms.defs, M.indicator_defs())
    if concrete.check() == z3.unsat:
        cex = {"breaks": TOTAL, "call": _call_text(val), "state": describe(val)}
        return _result(REFUTED, "this non-terminal state has no successor", cex)
    return _result(UNKNOWN, f"the witness fails in {describe(val)} but another admission count works there")


def prove_counting_identities(n: int, mutant: str | None = None) -> dict:
    inp = M.make_inputs(n)
    s, t = M.make_vars(inp, "0"), M.make_vars(inp, "1")
    trans, hints = M.transition(inp, s, t, mutant)
    solver = _solver()
    _add(solver, trans)
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "the step relation")
    for hint in hints:
        status, model = _check_unsat(solver, z3.Not(hint))
        if status != PROVED:
            cex = None
            if model is not None:
                cex = {"hint": str(hint), "state": describe(M.read_frame(model, inp, s))}
            return _result(status, "an identity does not follow from the step", cex)
    return _result(PROVED, f"{len(hints)} identities")


# --- per-job inductive claims ----------------------------------------------------------


def assumptions(name: str) -> tuple:
    return tuple(dict.fromkeys(("every_job_completes_once", name) + SUPPORT[name]))


def prove_inductive(name: str, n: int, mutant: str | None = None) -> dict:
    """Initiation and consecution of one registry invariant or lemma at n jobs, each after checking its hypotheses are satisfiable."""
    predicate = _encoding(name)
    inp = M.make_inputs(n)
    s, t = M.make_vars(inp, "0"), M.make_vars(inp, "1")
    base = _solver()
    _add(base, M.domain(inp, mutant=mutant))
    base.push()
    _add(base, M.init(inp, s))
    hyp = _hypotheses(base)
    if hyp != "yes":
        return _not_sat(hyp, "initiation (Init and the domain)")
    status, model = _check_unsat(base, z3.Not(predicate(inp, s)))
    base.pop()
    if status == REFUTED:
        cex = {**_state_counterexample(model, inp, s, name), "after_steps": 0}
        return _result(REFUTED, "initiation fails", cex)
    if status == UNKNOWN:
        return _result(UNKNOWN, "initiation: solver gave up")
    trans, hints = M.transition(inp, s, t, mutant)
    _add(base, [_encoding(a)(inp, s) for a in assumptions(name)])
    _add(base, trans)
    _add(base, hints)
    hyp = _hypotheses(base)
    if hyp != "yes":
        return _not_sat(hyp, f"consecution ({', '.join(assumptions(name))} and the step)")
    status, model = _check_unsat(base, z3.Not(predicate(inp, t)))
    if status == PROVED:
        return _result(PROVED, f"assumes {', '.join(assumptions(name))}")
    if status == UNKNOWN:
        return _result(UNKNOWN, "consecution: solver gave up")
    # Not inductive: is it really broken?  Search for a reachable violation.
    found = bmc(name, n_max=min(n, 3), depth=6, mutant=mutant)
    if found is not None:
        return _result(REFUTED, "a reachable state breaks it", found)
    cti = {"before": describe(M.read_frame(model, inp, s)), "after": describe(M.read_frame(model, inp, t))}
    return _result(UNKNOWN, f"not inductive with its support (counterexample to induction {cti}); "
                            "no reachable violation found")


def prove_by_construction(name: str, n: int, mutant: str | None = None) -> dict:
    """``name`` holds in every state of the prefix encoding (0 <= adm <= n) over the domain, with no step at all."""
    inp = M.make_inputs(n)
    s = M.make_vars(inp, "0")
    solver = _solver()
    _add(solver, M.domain(inp, mutant=mutant), M.enc_every_job_completes_once(inp, s))
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "the states of the encoding")
    status, model = _check_unsat(solver, z3.Not(_encoding(name)(inp, s)))
    if status == REFUTED:
        found = bmc(name, n_max=min(n, 3), depth=2, mutant=mutant)
        return _result(REFUTED, "a state of the encoding breaks it",
                       found or _state_counterexample(model, inp, s, name))
    return _result(status, "the negation is unsat over the representation alone: no step can break it"
                   if status == PROVED else "the solver gave up")


def prove_placement(n: int, mutant: str | None = None) -> dict:
    """``every_job_completes_once``: placement is by construction; Z3 proves the range 0 <= adm <= n inductive."""
    result = prove_inductive("every_job_completes_once", n, mutant)
    if result["status"] == PROVED:
        result = {**result, "detail": "each job is in exactly one of waiting (index >= adm), active, done by "
                                      "construction; proved inductive: 0 <= adm <= n"}
    return result


def prove_termination(n: int, mutant: str | None = None) -> dict:
    """The ranking function and the clock bound; the conclusion at the end of a run."""
    inp = M.make_inputs(n)
    s, t = M.make_vars(inp, "0"), M.make_vars(inp, "1")
    trans, hints = M.transition(inp, s, t, mutant)
    rank_s, rank_t = M.remaining_work(inp, s), M.remaining_work(inp, t)
    total = M.sum_tokens(inp)
    solver = _solver()
    _add(solver, M.domain(inp, mutant=mutant))
    _add(solver, M.strengthened(inp, s))
    _add(solver, M.frame_hints(inp, s))
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "the strengthened invariant")
    # local facts: each job's share of the ranking function is >= 0, >= 1 while it is unfinished
    local = []
    for i in range(n):
        share = z3.If(M.waiting(s, i), inp.tok[i], z3.If(M.active(s, i), s.rem[i], 0))
        local += [share >= M.one(M.waiting(s, i)) + M.one(M.active(s, i)), share >= 0,
                  M.one(M.waiting(s, i)) + M.one(M.admitted(s, i)) == 1]
    for fact in local:
        status, _ = _check_unsat(solver, z3.Not(fact))
        if status != PROVED:
            return _result(UNKNOWN, f"local fact {fact} not proved")
    _add(solver, local)
    checks = {
        "bounded below": rank_s >= 0,
        "zero exactly at the end": (rank_s == 0) == M.is_terminal(inp, s),
        "at the end: busy = sum(tokens), finish <= max(arrival) + sum(tokens)": z3.Implies(
            M.is_terminal(inp, s),
            z3.And([s.busy == total] + [M.max_arrival_bound(inp, s.fin[i] - total) for i in range(n)]),
        ),
    }
    for label, goal in checks.items():
        status, _ = _check_unsat(solver, z3.Not(goal))
        if status != PROVED:
            return _result(status, f"{label}: {status}")
    _add(solver, trans)
    _add(solver, hints)
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "the strengthened invariant and the step")
    step_checks = {
        "decreases by the jobs served": z3.And(rank_t == rank_s - (t.busy - s.busy), t.busy - s.busy >= 1),
        "clock jumps only to an arrival": z3.Or(t.clock == s.clock + 1, M.max_arrival_bound(inp, t.clock - 1)),
    }
    for label, goal in step_checks.items():
        status, model = _check_unsat(solver, z3.Not(goal))
        if status != PROVED:
            cex = None if model is None else {"before": describe(M.read_frame(model, inp, s)),
                                              "after": describe(M.read_frame(model, inp, t))}
            return _result(status, f"{label}: {status}", cex)
    return _result(PROVED, "ranking >= 0, = 0 only at the end, -(served) >= 1 per step; so sum(tokens) services "
                           "and makespan <= max(arrival) + sum(tokens)")


# --- worked examples -------------------------------------------------------------------


def prove_worked_example(name: str, mutant: str | None = None) -> dict:
    tokens, arrival, slots, continuous, makespan, busy, utilization = WORKED_EXAMPLES[name]
    n = len(tokens)
    inp = M.make_inputs(n)
    frames = [M.make_vars(inp, f"w{k}") for k in range(sum(tokens) + 1)]
    solver = _solver()
    _add(solver, M.domain(inp, mutant=mutant))
    _add(solver, [inp.slots == slots, inp.cont == z3.BoolVal(continuous)])
    _add(solver, [z3.And(inp.ids[i] == i, inp.arr[i] == arrival, inp.tok[i] == tokens[i]) for i in range(n)])
    _add(solver, M.init(inp, frames[0]))
    for a, b in zip(frames, frames[1:]):  # every step serves >= 1 token, so sum(tokens) steps reach the end
        _add(solver, M.trans_or_stutter(inp, a, b, mutant))
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "the example's run")
    end = frames[-1]
    goal = z3.And(
        [M.is_terminal(inp, end), end.busy == busy]
        + [end.fin[i] <= makespan for i in range(n)]
        + [z3.Or([end.fin[i] == makespan for i in range(n)])]
        + [end.busy * utilization[1] == utilization[0] * slots * makespan]
    )
    status, model = _check_unsat(solver, z3.Not(goal))
    if status == REFUTED:
        return _result(REFUTED, None, {"end": describe(M.read_frame(model, inp, end))})
    return _result(status, f"makespan {makespan}, busy {busy}, utilization {utilization[0]}/{utilization[1]}")


# --- domain rules --------------------------------------------------------------------------

RULE_N = 2  # jobs for both halves of a rule row
RULE_DEPTH = 4  # steps of the run without the rule


def _target_prover(target: str, mutant: str | None):
    if target == "termination_ranking":
        return partial(prove_termination, mutant=mutant)
    if target in BY_CONSTRUCTION:
        return partial(prove_by_construction, target, mutant=mutant)
    return partial(prove_inductive, target, mutant=mutant)


def prove_rule_needed(rule: str, mutant: str | None = None) -> dict:
    """With every rule the target is proved (n <= RULE_N; its own row covers the bound); without ``rule`` a concrete run breaks it."""
    target = RULE_TARGETS[rule]
    with_rule = up_to(_target_prover(target, mutant), RULE_N)
    if with_rule["status"] != PROVED:
        return {**with_rule, "detail": f"with every rule, {target} is {with_rule['status']}: {with_rule.get('detail')}"}
    found = bmc(target, n_max=RULE_N, depth=RULE_DEPTH, drop=rule)
    if found is None:
        return _result(UNKNOWN, f"without {rule}: no run breaking {target} found within {RULE_N} jobs and "
                                f"{RULE_DEPTH} steps")
    found = {"without_rule": rule, "shows": RULE_SHOWS[rule], **found}
    return _result(PROVED, f"without {rule} Z3 breaks {target} (run shown): {RULE_SHOWS[rule]}; "
                           f"with every rule {target} is proved", found)


# --- the abstraction over counts and sums (no n in it) -------------------------------------------------


class Abstract:
    """Counts and sums of one frame: active count, waiting count, waiting tokens, active remaining, busy, served count."""

    def __init__(self, tag: str):
        self.active = z3.Int(f"A_{tag}")
        self.waiting = z3.Int(f"W_{tag}")
        self.wtok = z3.Int(f"Rw_{tag}")
        self.arem = z3.Int(f"Ra_{tag}")
        self.busy = z3.Int(f"B_{tag}")
        self.served = z3.Int(f"S_{tag}")

    def fields(self):
        return (self.active, self.waiting, self.wtok, self.arem, self.busy, self.served)


def abs_init(a: Abstract, slots, cont, total) -> z3.BoolRef:
    return z3.And(slots >= 1, a.active == 0, a.served == 0, a.busy == 0, a.arem == 0, a.waiting >= 0,
                  a.wtok == total, a.wtok >= a.waiting)


# The mutants that have an abstract counterpart (the others leave the abstract step as it is).
ABSTRACT_MUTANTS = ("admit_while_le_slots", "finish_one_early")


def abs_step(a: Abstract, b: Abstract, slots, cont, k, tk, f, mutant: str | None = None) -> z3.BoolRef:
    """One tick on counts: admit k jobs carrying tk tokens, serve the batch, f of them finish."""
    batch = a.active + k
    room = slots - a.active + (1 if mutant == "admit_while_le_slots" else 0)
    lost = f if mutant == "finish_one_early" else 0  # a finisher leaves one token unserved
    return z3.And(
        z3.Or(a.waiting > 0, a.active > 0),
        k >= 0, k <= a.waiting,
        z3.If(z3.Or(cont, a.active == 0), z3.Or(k == 0, k <= room), k == 0),
        tk >= k, a.wtok - tk >= a.waiting - k, z3.Implies(k == 0, tk == 0),
        f >= 0, f <= batch,
        a.arem + tk >= f + 2 * (batch - f),  # finishers had 1 token left, the others >= 2
        b.active == batch - f, b.waiting == a.waiting - k, b.wtok == a.wtok - tk,
        b.arem == a.arem + tk - batch - lost, b.busy == a.busy + batch, b.served == batch,
    )


def abs_slot_bound(a: Abstract, slots) -> z3.BoolRef:
    return z3.And(a.active <= slots, a.served <= slots)


def abs_work_conservation(a: Abstract, total) -> z3.BoolRef:
    return a.busy + a.wtok + a.arem == total


def abs_support(a: Abstract, slots) -> z3.BoolRef:
    """The abstraction's strengthening: counts >= 0, each unfinished job holds >= 1 token, slots >= 1."""
    return z3.And(slots >= 1, a.active >= 0, a.waiting >= 0, a.arem >= a.active, a.wtok >= a.waiting, a.busy >= 0)


def prove_abstract(which: str, mutant: str | None = None) -> dict:
    """``which`` (slot_bound or work_conservation) is inductive on the abstraction: every n at once."""
    slots, cont, total = z3.Int("slots"), z3.Bool("continuous"), z3.Int("total")
    a, b = Abstract("0"), Abstract("1")
    k, tk, f = z3.Int("k"), z3.Int("tk"), z3.Int("f")
    inv = {"slot_bound": lambda x: abs_slot_bound(x, slots), "work_conservation": lambda x: abs_work_conservation(x, total)}
    goal = lambda x: z3.And(inv[which](x), abs_support(x, slots))  # noqa: E731
    solver = _solver()
    solver.push()
    _add(solver, abs_init(a, slots, cont, total))
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "abstract initiation")
    status, _ = _check_unsat(solver, z3.Not(goal(a)))
    solver.pop()
    if status != PROVED:
        return _result(status, "abstract initiation")
    _add(solver, goal(a), abs_step(a, b, slots, cont, k, tk, f, mutant))
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "abstract consecution")
    status, model = _check_unsat(solver, z3.Not(goal(b)))
    if status == REFUTED:
        return _result(REFUTED, "abstract consecution",
                       {str(v): model.eval(v, True).as_long() for v in a.fields() + b.fields()})
    return _result(status, "inductive on counts and sums with no n in them (counts >= 0, active remaining >= "
                           "active, waiting tokens >= waiting); linked to the per-job model by abstraction_refinement")


def alpha(inp: M.Inputs, s: M.Vars, a: Abstract) -> list:
    """The abstraction function: counts and sums of a per-job frame."""
    n = inp.n
    return [
        a.active == M.n_active(inp, s),
        a.waiting == n - s.adm,
        a.wtok == M.total(z3.If(M.waiting(s, i), inp.tok[i], 0) for i in range(n)),
        a.arem == M.total(z3.If(M.active(s, i), s.rem[i], 0) for i in range(n)),
        a.busy == s.busy,
        a.served == M.n_served(inp, s),
    ]


def prove_refinement(n: int, mutant: str | None = None) -> dict:
    """The per-job step maps to an abstract step, Init to abstract Init, and the abstract claims mean the registry's."""
    inp = M.make_inputs(n)
    s, t = M.make_vars(inp, "0"), M.make_vars(inp, "1")
    a, b = Abstract("0"), Abstract("1")
    total = M.sum_tokens(inp)
    trans, hints = M.transition(inp, s, t, mutant)
    terms = M.step_terms(inp, s, mutant, str(t.clock))
    solver = _solver()
    _add(solver, M.domain(inp, mutant=mutant))
    _add(solver, alpha(inp, s, a))
    solver.push()
    _add(solver, M.init(inp, s))
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "Init")
    status, _ = _check_unsat(solver, z3.Not(abs_init(a, inp.slots, inp.cont, total)))
    solver.pop()
    if status != PROVED:
        return _result(status, "Init does not map to abstract Init")
    _add(solver, M.strengthened(inp, s) + M.frame_hints(inp, s))
    local = []
    for i in range(n):
        share_w = z3.If(M.waiting(s, i), inp.tok[i], 0)
        share_a = z3.If(M.active(s, i), s.rem[i], 0)
        delivered_i = z3.If(M.active(s, i), inp.tok[i] - s.rem[i], z3.If(M.done(s, i), inp.tok[i], 0))
        local += [share_w >= M.one(M.waiting(s, i)), share_a >= M.one(M.active(s, i)),
                  delivered_i + share_w + share_a == inp.tok[i]]
    for fact in local:
        status, _ = _check_unsat(solver, z3.Not(fact))
        if status != PROVED:
            return _result(UNKNOWN, f"local fact {fact}")
    _add(solver, local)
    meaning = z3.And(
        M.enc_slot_bound(inp, s) == abs_slot_bound(a, inp.slots),
        M.enc_work_conservation(inp, s) == abs_work_conservation(a, total),
        abs_support(a, inp.slots),
    )
    status, _ = _check_unsat(solver, z3.Not(meaning))
    if status != PROVED:
        return _result(status, "abstract claims differ from the registry's")
    _add(solver, [trans] + hints + alpha(inp, t, b))
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "the strengthened invariant and the step")
    k = t.adm - s.adm
    tk = M.total(z3.If(terms.admit[i], inp.tok[i], 0) for i in range(n))
    f = M.count(terms.finish)
    step_local = []
    for i in range(n):
        share_bw = z3.If(M.waiting(t, i), inp.tok[i], 0)
        share_ba = z3.If(M.active(t, i), t.rem[i], 0)
        share_w = z3.If(M.waiting(s, i), inp.tok[i], 0)
        share_a = z3.If(M.active(s, i), s.rem[i], 0)
        admit_tok = z3.If(terms.admit[i], inp.tok[i], 0)
        step_local += [
            share_bw == share_w - admit_tok,
            share_ba == share_a + admit_tok - M.one(terms.batch[i]),
            admit_tok >= M.one(terms.admit[i]),
            share_a + admit_tok >= M.one(terms.finish[i]) + 2 * (M.one(terms.batch[i]) - M.one(terms.finish[i])),
        ]
    for fact in step_local:
        status, _ = _check_unsat(solver, z3.Not(fact))
        if status != PROVED:
            return _result(UNKNOWN, f"local step fact {fact}")
    _add(solver, step_local)
    status, model = _check_unsat(solver, z3.Not(abs_step(a, b, inp.slots, inp.cont, k, tk, f)))
    if status != PROVED:
        cex = None if model is None else {"before": describe(M.read_frame(model, inp, s)),
                                          "after": describe(M.read_frame(model, inp, t))}
        return _result(status, "a step does not map to an abstract step", cex)
    return _result(PROVED, "Init and Step refine; the claims coincide")


# --- the policy theorem --------------------------------------------------------------------


PRODUCT_RUN_LEMMAS = (
    "well_typed", "every_job_completes_once", "slot_bound", "no_start_before_arrival", "active_remaining_positive",
    "started_before_clock", "finished_by_clock", "no_preemption",
)


def prove_jump_is_idle_ticks(n: int, mutant: str | None = None) -> dict:
    """An idle clock (nothing active, next arrival later) advanced by one tick gives the same next step."""
    inp = M.make_inputs(n)
    s, s2, t, t2 = (M.make_vars(inp, tag) for tag in ("j0", "j0b", "j1", "j1b"))
    solver = _solver()
    _add(solver, M.domain(inp, mutant=mutant), M.enc_every_job_completes_once(inp, s))
    _add(solver, M.n_active(inp, s) == 0, s.adm < inp.n, M.head_arrival(inp, s) > s.clock)
    same = [s2.busy == s.busy, s2.adm == s.adm, s2.clock == s.clock + 1]
    for i in range(n):
        same += [s2.rem[i] == s.rem[i], s2.start[i] == s.start[i], s2.fin[i] == s.fin[i], s2.dn[i] == s.dn[i],
                 s2.srv[i] == s.srv[i]]
    _add(solver, same + [M.trans(inp, s, t, mutant), M.trans(inp, s2, t2, mutant)])
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "an idle state and its two steps")
    equal = [t2.busy == t.busy, t2.adm == t.adm, t2.clock == t.clock]
    for i in range(n):
        equal += [z3.Implies(M.admitted(t, i), z3.And(t2.start[i] == t.start[i], t2.dn[i] == t.dn[i])),
                  z3.Implies(M.active(t, i), t2.rem[i] == t.rem[i]), z3.Implies(M.done(t, i), t2.fin[i] == t.fin[i]),
                  t2.srv[i] == t.srv[i]]
    status, model = _check_unsat(solver, z3.Not(z3.And(equal)))
    cex = None if model is None else {"idle": describe(M.read_frame(model, inp, s)),
                                      "jumped": describe(M.read_frame(model, inp, t)),
                                      "one_tick_later": describe(M.read_frame(model, inp, t2))}
    return _result(status, "spec.step's jump = idle ticks then a step", cex)


def prove_policy(n: int, mutant: str | None = None) -> dict:
    """Continuous never starts (so never finishes) a job later than static, on the same input."""
    inp = M.make_inputs(n)
    ic, ist = M.with_policy(inp, True), M.with_policy(inp, False)
    c0, c1, s0, s1 = (M.make_vars(inp, tag) for tag in ("c0", "c1", "s0", "s1"))

    def run_lemmas(i, x):
        return [_encoding(name)(i, x) for name in PRODUCT_RUN_LEMMAS]

    def relation(c, s):
        rel = [c.clock == s.clock]
        for i in range(n):
            rel.append(z3.Implies(M.admitted(s, i), z3.And(M.admitted(c, i), c.start[i] <= s.start[i])))
        return rel

    def product(c, s):
        return run_lemmas(ic, c) + run_lemmas(ist, s) + relation(c, s)

    solver = _solver()
    _add(solver, M.domain(inp, mutant=mutant))
    solver.push()
    _add(solver, M.init(ic, c0), M.init(ist, s0))
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "initiation of the product (both Inits)")
    status, _ = _check_unsat(solver, z3.Not(z3.And(product(c0, s0))))
    solver.pop()
    if status != PROVED:
        return _result(status, "initiation of the product invariant")
    _add(solver, product(c0, s0))
    _add(solver, M.frame_hints(ic, c0) + M.frame_hints(ist, s0))
    # local fact: a job done under static is done under continuous (same clock, earlier start, no preemption)
    local = [M.one(M.done(s0, i)) <= M.one(M.done(c0, i)) for i in range(n)]
    for fact in local:
        status, _ = _check_unsat(solver, z3.Not(fact))
        if status != PROVED:
            return _result(UNKNOWN, f"local fact {fact}")
    _add(solver, local)
    _add(solver, M.timed_trans(ic, c0, c1, mutant), M.timed_trans(ist, s0, s1, mutant))
    for frame_hint in M.frame_hints(ic, c1) + M.frame_hints(ist, s1):
        _add(solver, frame_hint)
    # The counting identities of both timed steps where a run moves (there timed_trans is trans, so they are
    # instances of lemma:counting_identities, which this row depends on): with them the counting goals
    # (slot_bound, work_conservation after the step) are linear arithmetic instead of a 2^n case split; about
    # 10x less CPU at n = 16 (docs/prove.md).  Under a mutant, which the identities' row does not cover here,
    # they are proved valid first and left out when they are not.
    hints = M.timed_hints(ic, c0, c1, mutant) + M.timed_hints(ist, s0, s1, mutant)
    if mutant is None or _check_unsat(solver, z3.Not(z3.And(hints)))[0] == PROVED:
        _add(solver, hints)
    hyp = _hypotheses(solver)
    if hyp != "yes":
        return _not_sat(hyp, "consecution of the product (the product invariant and both timed steps)")
    for goal in product(c1, s1):
        status, model = _check_unsat(solver, z3.Not(goal))
        if status != PROVED:
            cex = None
            if model is not None:
                cex = {"continuous": describe(M.read_frame(model, ic, c0)), "static": describe(M.read_frame(model, ist, s0)),
                       "call": _call_text(M.read_frame(model, ist, s0)), "goal": str(goal)}
            return _result(status, "consecution of the product invariant", cex)
    conclusion = z3.And([
        z3.Implies(M.done(s0, i), z3.And(M.done(c0, i), c0.fin[i] <= s0.fin[i])) for i in range(n)
    ])
    status, _ = _check_unsat(solver, z3.Not(conclusion))
    if status != PROVED:
        return _result(status, "finishes")
    return _result(PROVED, "start_c <= start_s for every job static admitted; so finish_c <= finish_s and "
                           "makespan_c <= makespan_s")


# --- the ledger's claims --------------------------------------------------------------------


def _kind(name: str, method: str) -> str:
    """What a row is (``proofs.smt.run.KINDS``): lemmas, rows true by construction, registry invariants, theorems."""
    if name.startswith("lemma:"):
        return "lemma"
    if method == "by construction":
        return "construction"
    if name in M.PREDICATES:
        return "invariant"
    return "theorem"


def _claim(name: str, method: str, bound: str, run, depends=()) -> Claim:
    return Claim(name, method, bound, run, tuple(depends), REFUTED_BY[name], _kind(name, method))


def claims(max_jobs: int = 16, mutant: str | None = None, policy_jobs: int | None = None) -> list[Claim]:
    """Every row of ``schedcheck prove``, in ledger order; with ``mutant``, every check runs against that broken step or encoding."""
    n = max_jobs
    assert n >= 1, f"max_jobs={n!r}: expected an int >= 1"
    assert mutant is None or mutant in M.MUTANTS, f"mutant={mutant!r}: expected one of {sorted(M.MUTANTS)}"
    pn = min(n, policy_jobs) if policy_jobs else n
    bound = f"n <= {n}"
    range_row = "every_job_completes_once"
    rows = [
        _claim(TOTAL, "witness", bound, partial(up_to, partial(prove_total, mutant=mutant), n), (range_row,)),
        _claim(HINTS, "one step", bound, partial(up_to, partial(prove_counting_identities, mutant=mutant), n)),
    ]
    names = state_invariant_names() + list(M.LEMMAS)
    for name in names:
        depends = [TOTAL, HINTS] + [row_name(a) for a in assumptions(name) if a != name]
        if name == range_row:  # what the totality proof assumes: proved without it
            depends = [HINTS]
        if name in BY_CONSTRUCTION:
            run = partial(up_to, partial(prove_by_construction, name, mutant=mutant), n)
            rows.append(_claim(row_name(name), "by construction", "by construction", run, [TOTAL, range_row]))
            continue
        method = "by construction" if name == range_row else "inductive"
        prover = partial(prove_placement, mutant=mutant) if name == range_row else partial(prove_inductive, name, mutant=mutant)
        run = partial(up_to, prover, n)
        rows.append(_claim(row_name(name), method, bound, run, depends))
    everything = (TOTAL, HINTS) + tuple(row_name(x) for x in names)
    rows.append(_claim("termination_ranking", "inductive", bound,
                       partial(up_to, partial(prove_termination, mutant=mutant), n), everything))
    rows.append(_claim("slot_bound (abstraction)", "abstraction", bound, partial(prove_abstract, "slot_bound", mutant),
                       ("abstraction_refinement",)))
    rows.append(_claim("work_conservation (abstraction)", "abstraction", bound,
                       partial(prove_abstract, "work_conservation", mutant), ("abstraction_refinement",)))
    rows.append(_claim("abstraction_refinement", "abstraction", bound,
                       partial(up_to, partial(prove_refinement, mutant=mutant), n), everything))
    pbound = f"n <= {pn}"
    rows.append(_claim("jump_is_idle_ticks", "one step", pbound,
                       partial(up_to, partial(prove_jump_is_idle_ticks, mutant=mutant), pn), (TOTAL,)))
    rows.append(_claim("policy_continuous_starts_no_later", "product induction", pbound,
                       partial(up_to, partial(prove_policy, mutant=mutant), pn), (TOTAL, "jump_is_idle_ticks", HINTS)))
    for rule in M.RULES:
        target = RULE_TARGETS[rule]
        rows.append(_claim(f"rule_needed:{rule}", "bounded", f"n <= {RULE_N} without; with: row {target}",
                           partial(prove_rule_needed, rule, mutant), (TOTAL, target)))
    for name in WORKED_EXAMPLES:
        rows.append(_claim(name, "bounded", f"n = {len(WORKED_EXAMPLES[name][0])}",
                           partial(prove_worked_example, name, mutant), (TOTAL,)))
    # Every proof is about the encoding; it counts only when the encoding agreed with the spec that runs.
    validation = conformance.claims("chapter", n, mutant)
    checked = tuple(c.claim for c in validation)
    return validation + [replace(c, depends=c.depends + checked) for c in rows]


def mutant_rows(max_jobs: int = 3, policy_jobs: int | None = None) -> list[Claim]:
    """Every row once, each run against the mutant it names: every one of them should be refuted."""
    by_mutant: dict = {}
    for claim in claims(max_jobs, policy_jobs=policy_jobs):
        by_mutant.setdefault(claim.refuted_by, []).append(claim.claim)
    rows = []
    for mutant, names in by_mutant.items():
        rows += [c for c in claims(max_jobs, mutant, policy_jobs) if c.claim in names]
    order = [c.claim for c in claims(max_jobs, policy_jobs=policy_jobs)]
    return sorted(rows, key=lambda c: order.index(c.claim))
