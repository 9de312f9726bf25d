"""The SMT encoding of ``spec.step`` for n symbolic jobs, as (init, trans) over current and next variables.

What it establishes: nothing by itself; it is the model that ``proofs.smt.claims``
proves things about.  ``tests/test_z3_model.py`` checks, on many reachable and
arbitrary concrete states, that ``trans`` with the state's values plugged in has
exactly one successor and that it is ``spec.step``'s next state, and that every
predicate encoding here agrees with the registry's Python predicate.

The representation (one per n; every value an unbounded z3 Int, tokens optionally
Real to show why the integer rule is needed):

- constants of the input: ``ids[i]``, ``arr[i]``, ``tok[i]`` for the jobs in FIFO
  order by (arrival, id) (``State.jobs``), ``slots`` and the policy ``cont``.
  Sorting is the symmetry reduction: every permutation of an input is represented
  once, by its sorted order, exactly as ``spec.initial`` does;
- state variables: ``clock``, ``busy``, ``adm`` (how many jobs have been admitted:
  admission is FIFO, so ``waiting`` is always the suffix ``jobs[adm:]``), and per job
  ``rem`` (remaining), ``start``, ``fin`` (finish), ``dn`` (done: admitted jobs are
  active or done) and ``srv`` (served in the latest tick).  Fields of a job that do
  not apply to its status (the start of a waiting job, say) are ignored.

Assumptions: the jobs are sorted by (arrival, id) (``sorted_jobs``), as
``spec.initial`` makes them; admission is a prefix of the FIFO order, which the
model test checks on every reachable state it generates (a reachable ``State``
maps to a valuation and back unchanged).  Under the domain rule "ids unique" a
served id names one job; the ``static_batch_boundary`` encoding reads it so
(``no_duplicate_active`` is encoded exactly also without that rule).

Bounds: n is fixed per encoding (a Python int); values are unbounded.

Mutants (``MUTANTS``): deliberately broken variants of ``step`` that the claims must
refute, so that a proof that cannot fail is noticed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import z3

# The domain rules of spec.domain that the encoding can drop one at a time.
RULES = ("tokens_integral", "tokens_positive", "arrival_nonnegative", "ids_unique", "slots_positive")

# Broken variants of step: name -> what it does wrong.  Each ledger row names the one
# under which Z3 refutes it (``proofs.smt.claims``); tests/test_z3_claims.py runs them all.
MUTANTS = {
    "admit_while_le_slots": "admission runs while active <= slots (one job too many)",
    "finish_one_early": "a job leaves when one token is still to be served",
    "static_admits_into_running_batch": "the static policy admits into a running batch, like continuous",
    "no_jump": "an idle engine does not jump to the next arrival but serves an empty tick",
    "contradictory_step": "the step definitions carry a contradiction (k == -1): no state has a successor",
    "admit_past_end": "admission may run past the end of the job list (the bound adm + k <= n is dropped)",
    "clock_minus_one": "the clock after a tick is tick - 1 instead of tick + 1",
    "admit_before_arrival": "admission takes jobs that arrive one tick later",
    "serve_two_tokens": "a tick serves two tokens of every job in the batch",
    "jump_one_late": "an idle engine jumps to one tick after the next arrival",
    "admit_one_per_tick": "at most one job is admitted per tick",
    "served_keeps_previous": "the served set keeps the jobs of the previous tick",
    "continuous_admits_a_tick_late": "under continuous batching a job is admitted one tick after it arrives",
    # mutants of the encoding rather than of the step:
    "unsorted_jobs": "the encoding does not keep the jobs in FIFO order by (arrival, id)",
    "duplicate_ids": "the encoding does not require distinct ids",
    # a mistranslated predicate (the validation against the registry refutes it: proofs.smt.conformance)
    "slot_bound_strict": "the encoding of slot_bound says active < slots instead of <=",
}

# The mutants that change the encoding's domain (the representation), not the step.
ENCODING_MUTANTS = ("unsorted_jobs", "duplicate_ids")
# The mutants of a predicate's encoding, not of the step (only the validation reads them).
PREDICATE_MUTANTS = ("slot_bound_strict",)


@dataclass(frozen=True)
class Inputs:
    """The constants of one symbolic call: n jobs in FIFO order, slots and the policy."""

    n: int
    ids: tuple
    arr: tuple
    tok: tuple
    slots: z3.ArithRef
    cont: z3.BoolRef
    real_tokens: bool = False


@dataclass(frozen=True)
class Vars:
    """The state variables of one time frame."""

    clock: z3.ArithRef
    busy: z3.ArithRef
    adm: z3.ArithRef
    rem: tuple
    start: tuple
    fin: tuple
    dn: tuple
    srv: tuple


def make_inputs(n: int, prefix: str = "", real_tokens: bool = False) -> Inputs:
    """Fresh constants for n jobs (tokens Real when ``real_tokens``)."""
    assert n >= 0, f"n={n!r}: expected an int >= 0"
    tok_sort = z3.Real if real_tokens else z3.Int
    return Inputs(
        n,
        tuple(z3.Int(f"{prefix}id{i}") for i in range(n)),
        tuple(z3.Int(f"{prefix}arr{i}") for i in range(n)),
        tuple(tok_sort(f"{prefix}tok{i}") for i in range(n)),
        z3.Int(f"{prefix}slots"),
        z3.Bool(f"{prefix}continuous"),
        real_tokens,
    )


def with_policy(inp: Inputs, continuous: bool) -> Inputs:
    """The same jobs and slots under a fixed policy (for the product of two runs)."""
    return replace(inp, cont=z3.BoolVal(continuous))


def make_vars(inp: Inputs, tag: str) -> Vars:
    """Fresh state variables for one frame, named with ``tag``."""
    n = inp.n
    rem_sort = z3.Real if inp.real_tokens else z3.Int
    return Vars(
        z3.Int(f"clock_{tag}"),
        z3.Int(f"busy_{tag}"),
        z3.Int(f"adm_{tag}"),
        tuple(rem_sort(f"rem{i}_{tag}") for i in range(n)),
        tuple(z3.Int(f"start{i}_{tag}") for i in range(n)),
        tuple(z3.Int(f"fin{i}_{tag}") for i in range(n)),
        tuple(z3.Bool(f"dn{i}_{tag}") for i in range(n)),
        tuple(z3.Bool(f"srv{i}_{tag}") for i in range(n)),
    )


# --- status of a job -----------------------------------------------------------------


def admitted(s: Vars, i: int) -> z3.BoolRef:
    return s.adm > i


def active(s: Vars, i: int) -> z3.BoolRef:
    return z3.And(s.adm > i, z3.Not(s.dn[i]))


def done(s: Vars, i: int) -> z3.BoolRef:
    return z3.And(s.adm > i, s.dn[i])


def waiting(s: Vars, i: int) -> z3.BoolRef:
    return s.adm <= i


# Indicators: [b] is a fresh Int constant tied to b by ``indicator_defs``, not the term
# If(b, 1, 0).  The solver's rewriter lifts If-terms out of sums and equalities, which
# turns each count into a case split over every job (2^n); an opaque 0/1 constant
# keeps the counting identities below linear.  Filled lazily as encodings are built.
_INDICATORS: dict[int, tuple] = {}


def one(b: z3.BoolRef) -> z3.ArithRef:
    """The indicator [b]: 1 when b holds, else 0 (constrained by ``indicator_defs``)."""
    key = b.get_id()
    hit = _INDICATORS.get(key)
    if hit is None:
        hit = (z3.Int(f"one!{key}"), b)
        _INDICATORS[key] = hit
    return hit[0]


def reset_indicators() -> None:
    """Forget every indicator: only before building a fresh set of formulas (tests use it per example)."""
    _INDICATORS.clear()


def indicator_defs(added: set | None = None) -> list:
    """The definitions of the indicators built so far: add them to any solver that uses counts.

    With ``added``, only those whose keys are not in it (and the keys are added), so
    an incremental solver can take the new ones after building more formulas."""
    defs = []
    for key, (v, b) in list(_INDICATORS.items()):
        if added is not None:
            if key in added:
                continue
            added.add(key)
        defs += [z3.Implies(b, v == 1), z3.Implies(z3.Not(b), v == 0), v >= 0, v <= 1]
    return defs


def count(conditions) -> z3.ArithRef:
    conditions = list(conditions)
    return z3.Sum([one(c) for c in conditions]) if conditions else z3.IntVal(0)


def total(terms) -> z3.ArithRef:
    terms = list(terms)
    return z3.Sum(terms) if terms else z3.IntVal(0)


def n_active(inp: Inputs, s: Vars) -> z3.ArithRef:
    return count(active(s, i) for i in range(inp.n))


def n_served(inp: Inputs, s: Vars) -> z3.ArithRef:
    return count(s.srv)


def key_le(inp: Inputs, i: int, j: int) -> z3.BoolRef:
    """fifo_key(job i) <= fifo_key(job j), lexicographically."""
    return z3.Or(inp.arr[i] < inp.arr[j], z3.And(inp.arr[i] == inp.arr[j], inp.ids[i] <= inp.ids[j]))


def key_lt(inp: Inputs, i: int, j: int) -> z3.BoolRef:
    return z3.Or(inp.arr[i] < inp.arr[j], z3.And(inp.arr[i] == inp.arr[j], inp.ids[i] < inp.ids[j]))


def head_arrival(inp: Inputs, s: Vars) -> z3.ArithRef:
    """The arrival of waiting[0] (= job adm); 0 when nothing waits."""
    value = z3.IntVal(0)
    for i in reversed(range(inp.n)):
        value = z3.If(s.adm == i, inp.arr[i], value)
    return value


def max_arrival_bound(inp: Inputs, term) -> z3.BoolRef:
    """``term <= max(arrival)`` (max of no jobs is 0), without a max."""
    if inp.n == 0:
        return term <= 0
    return z3.Or([term <= a for a in inp.arr])


def sum_tokens(inp: Inputs) -> z3.ArithRef:
    return total(inp.tok)


# --- the input domain -----------------------------------------------------------------


def sorted_jobs(inp: Inputs) -> list:
    """The representation axiom: jobs are in FIFO order by (arrival, id).

    The second list (arrivals non-decreasing) is implied by the first; it is stated
    so that the solver need not split the lexicographic order case by case."""
    return [key_le(inp, i, i + 1) for i in range(inp.n - 1)] + [
        inp.arr[i] <= inp.arr[i + 1] for i in range(inp.n - 1)
    ]


def domain(inp: Inputs, drop: str | None = None, mutant: str | None = None) -> list:
    """The rules of spec.domain as constraints on the constants, minus ``drop`` (and as an encoding mutant has them).

    ``tokens_integral`` is carried by the sort: dropping it means Real tokens
    (``make_inputs(real_tokens=True)``); with Int tokens it is a no-op here."""
    assert drop is None or drop in RULES, f"drop={drop!r}: expected one of {RULES}"
    assert mutant is None or mutant in MUTANTS, f"mutant={mutant!r}: expected one of {sorted(MUTANTS)}"
    if mutant == "duplicate_ids":
        drop = drop or "ids_unique"
    assert (drop == "tokens_integral") == inp.real_tokens, (
        f"drop={drop!r} with real_tokens={inp.real_tokens!r}: Real tokens exactly when the integer rule is dropped"
    )
    rules = []
    if drop != "slots_positive":
        rules.append(inp.slots >= 1)
    for i in range(inp.n):
        if drop != "arrival_nonnegative":
            rules.append(inp.arr[i] >= 0)
        if drop != "tokens_positive":
            rules.append(inp.tok[i] >= 1)
    if drop != "ids_unique" and inp.n > 1:
        rules.append(z3.Distinct(*inp.ids))
    return rules + ([] if mutant == "unsorted_jobs" else sorted_jobs(inp))


# --- init and trans --------------------------------------------------------------------


def init(inp: Inputs, s: Vars) -> z3.BoolRef:
    """``spec.initial``: clock 0, nothing admitted, served and busy empty."""
    return z3.And([s.clock == 0, s.busy == 0, s.adm == 0] + [z3.Not(v) for v in s.srv])


def is_terminal(inp: Inputs, s: Vars) -> z3.BoolRef:
    return z3.And(s.adm >= inp.n, n_active(inp, s) == 0)


@dataclass(frozen=True)
class StepTerms:
    """The next-state values of one step as terms over the current frame and ``k``.

    ``k`` (how many jobs this tick admits) is a fresh variable that ``defs`` pins to
    its one value: the largest prefix of the waiting suffix that fits the free
    slots and has arrived.  Admission then is the interval [adm, adm + k), so no
    count over jobs is needed to say which jobs enter.  ``witness`` is that value
    written out by ``admission_witness`` (``proofs.smt.claims`` proves it satisfies
    ``defs``: the step is total)."""

    k: z3.ArithRef
    defs: tuple
    tick: z3.ArithRef
    admit: tuple  # per job: admitted in this tick
    batch: tuple  # per job: served in this tick
    n_batch: z3.ArithRef
    finish: tuple  # per job: finishes in this tick
    clock: z3.ArithRef
    busy: z3.ArithRef
    adm: z3.ArithRef
    rem: tuple
    start: tuple
    fin: tuple
    dn: tuple
    served: tuple  # per job: in the next frame's served set (the batch, unless a mutant says otherwise)
    gain: tuple  # per job: tokens delivered to it in this tick, as counted by delivered/remaining_work
    ready: tuple  # per job: counts as arrived at this tick
    may_admit: z3.BoolRef
    room: z3.ArithRef


# Step mutants under which a tick serves a job more (or less) than one token.
_TOKEN_MUTANTS = ("finish_one_early", "serve_two_tokens")


def step_terms(inp: Inputs, s: Vars, mutant: str | None = None, tag: str = "") -> StepTerms:
    """``spec.step`` as terms: leave (implicit), jump, admit a FIFO prefix, serve."""
    assert mutant is None or mutant in MUTANTS, f"mutant={mutant!r}: expected one of {sorted(MUTANTS)}"
    n = inp.n
    nact = n_active(inp, s)
    head = head_arrival(inp, s)
    jump = z3.And(nact == 0, s.adm < n, head > s.clock)
    if mutant == "no_jump":
        tick = s.clock
    elif mutant == "jump_one_late":
        tick = z3.If(jump, head + 1, s.clock)
    else:
        tick = z3.If(jump, head, s.clock)
    may_admit = z3.BoolVal(True) if mutant == "static_admits_into_running_batch" else z3.Or(inp.cont, nact == 0)
    room = inp.slots - nact + (1 if mutant == "admit_while_le_slots" else 0)
    if mutant == "admit_one_per_tick":
        room = z3.If(room > 1, 1, room)
    if mutant == "admit_before_arrival":
        ready = tuple(inp.arr[j] <= tick + 1 for j in range(n))
    elif mutant == "continuous_admits_a_tick_late":
        ready = tuple(z3.If(inp.cont, inp.arr[j] <= tick - 1, inp.arr[j] <= tick) for j in range(n))
    else:
        ready = tuple(inp.arr[j] <= tick for j in range(n))
    k = z3.Int(f"k_{tag or s.clock}")
    # k is the admission loop's count: it stops at the first waiting job that does not
    # fit (k >= room), has not arrived (arr > tick), or at the end of the queue.
    defs = [k >= 0, z3.Implies(z3.Not(may_admit), k == 0), z3.Implies(may_admit, z3.Or(k == 0, k <= room))]
    if mutant != "admit_past_end":
        defs.append(s.adm + k <= n)
    if mutant == "contradictory_step":
        defs.append(k == -1)
    for j in range(n):
        defs.append(z3.Implies(z3.And(s.adm <= j, j < s.adm + k), ready[j]))
        defs.append(z3.Implies(j == s.adm + k, z3.Or(z3.Not(may_admit), k >= room, z3.Not(ready[j]))))
    admit = tuple(z3.And(s.adm <= j, j < s.adm + k) for j in range(n))
    batch = tuple(z3.Or(active(s, i), admit[i]) for i in range(n))
    before = tuple(z3.If(admit[i], inp.tok[i], s.rem[i]) for i in range(n))
    left = tuple(before[i] - (2 if mutant == "serve_two_tokens" else 1) for i in range(n))
    ends = tuple((left[i] <= 1) if mutant == "finish_one_early" else (left[i] == 0) for i in range(n))
    finish = tuple(z3.And(batch[i], ends[i]) for i in range(n))
    n_batch = count(batch)
    if mutant in _TOKEN_MUTANTS:
        # what delivered/remaining_work count for the job: all of it when it leaves, else what was served
        gain = tuple(z3.If(batch[i], z3.If(ends[i], before[i], before[i] - left[i]), 0) for i in range(n))
    else:
        gain = tuple(one(b) for b in batch)
    served = tuple(z3.Or(batch[i], s.srv[i]) for i in range(n)) if mutant == "served_keeps_previous" else batch
    return StepTerms(
        k=k,
        defs=tuple(defs),
        tick=tick,
        admit=admit,
        batch=batch,
        n_batch=n_batch,
        finish=finish,
        clock=tick - 1 if mutant == "clock_minus_one" else tick + 1,
        busy=s.busy + n_batch,
        adm=s.adm + k,
        rem=tuple(z3.If(batch[i], left[i], s.rem[i]) for i in range(n)),
        start=tuple(z3.If(admit[i], tick, s.start[i]) for i in range(n)),
        fin=tuple(z3.If(finish[i], tick + 1, s.fin[i]) for i in range(n)),
        dn=tuple(z3.If(batch[i], ends[i], s.dn[i]) for i in range(n)),
        served=served,
        gain=gain,
        ready=ready,
        may_admit=may_admit,
        room=room,
    )


def admission_witness(inp: Inputs, s: Vars, terms: StepTerms) -> z3.ArithRef:
    """The admission count without ``k``: min(free room, waiting jobs that have arrived) when admission is allowed, else 0."""
    arrived = count(z3.And(s.adm <= j, terms.ready[j]) for j in range(inp.n))
    room = terms.room
    return z3.If(z3.And(terms.may_admit, room > 0), z3.If(room < arrived, room, arrived), 0)


def equal_to_terms(inp: Inputs, t: Vars, terms: StepTerms) -> list:
    eqs = list(terms.defs) + [t.clock == terms.clock, t.busy == terms.busy, t.adm == terms.adm]
    for i in range(inp.n):
        eqs += [
            t.rem[i] == terms.rem[i],
            t.start[i] == terms.start[i],
            t.fin[i] == terms.fin[i],
            t.dn[i] == terms.dn[i],
            t.srv[i] == terms.served[i],
        ]
    return eqs


def trans(inp: Inputs, s: Vars, t: Vars, mutant: str | None = None) -> z3.BoolRef:
    """``t == spec.step(s)`` for a non-terminal s (step of a terminal state is undefined)."""
    return z3.And([z3.Not(is_terminal(inp, s))] + equal_to_terms(inp, t, step_terms(inp, s, mutant, str(t.clock))))


def trans_or_stutter(inp: Inputs, s: Vars, t: Vars, mutant: str | None = None) -> z3.BoolRef:
    """A total relation for unrolling runs: ``step`` when not terminal, else t == s."""
    same = z3.And(
        [t.clock == s.clock, t.busy == s.busy, t.adm == s.adm]
        + [t.rem[i] == s.rem[i] for i in range(inp.n)]
        + [t.start[i] == s.start[i] for i in range(inp.n)]
        + [t.fin[i] == s.fin[i] for i in range(inp.n)]
        + [t.dn[i] == s.dn[i] for i in range(inp.n)]
        + [t.srv[i] == s.srv[i] for i in range(inp.n)]
    )
    moved = z3.And(equal_to_terms(inp, t, step_terms(inp, s, mutant, str(t.clock))))
    return z3.If(is_terminal(inp, s), same, moved)


def timed_trans(inp: Inputs, s: Vars, t: Vars, mutant: str | None = None) -> z3.BoolRef:
    """The same run one clock tick at a time: an idle or terminal state only advances the clock.

    ``spec.step`` jumps an idle clock straight to the next arrival; this relation
    takes the jump one empty tick at a time, so two runs stay aligned on the clock.
    ``proofs.smt.claims`` proves that an idle tick does not change what the next
    serving step does (so the starts and finishes are those of ``spec.step``)."""
    idle = z3.Or(is_terminal(inp, s), z3.And(n_active(inp, s) == 0, head_arrival(inp, s) > s.clock))
    same_but_clock = z3.And(
        [t.clock == s.clock + 1, t.busy == s.busy, t.adm == s.adm]
        + [t.rem[i] == s.rem[i] for i in range(inp.n)]
        + [t.start[i] == s.start[i] for i in range(inp.n)]
        + [t.fin[i] == s.fin[i] for i in range(inp.n)]
        + [t.dn[i] == s.dn[i] for i in range(inp.n)]
        + [z3.Not(t.srv[i]) for i in range(inp.n)]
    )
    moved = z3.And(equal_to_terms(inp, t, step_terms(inp, s, mutant, str(t.clock))))
    return z3.If(idle, same_but_clock, moved)


# --- counting identities ---------------------------------------------------------------
#
# The predicates count jobs (active, served) and add per-job terms (work delivered,
# remaining work).  An SMT solver relates two such sums only by splitting cases on
# every job, which grows as 2^n.  The identities below are per-job (or about one
# integer) and each is valid: implied by ``trans`` and the definitions alone, which
# ``proofs.smt.claims`` proves before using them.  Given them, every sum relation is
# linear arithmetic over the per-job terms, and the proofs scale with n.


def frame_hints(inp: Inputs, s: Vars) -> list:
    """Identities of one frame: each admitted job is active or done; [0, adm) has adm members."""
    n = inp.n
    hints = [one(active(s, i)) + one(done(s, i)) == one(admitted(s, i)) for i in range(n)]
    hints.append(z3.Implies(z3.And(s.adm >= 0, s.adm <= n), total(one(admitted(s, i)) for i in range(n)) == s.adm))
    return hints


def step_hints(inp: Inputs, s: Vars, t: Vars, terms: StepTerms) -> list:
    """Per-job identities of one step (valid under ``trans``): who is active, done, served, and what each job adds."""
    n = inp.n
    hints = []
    for i in range(n):
        rank_i = z3.If(waiting(s, i), inp.tok[i], z3.If(active(s, i), s.rem[i], 0))
        rank_t = z3.If(waiting(t, i), inp.tok[i], z3.If(active(t, i), t.rem[i], 0))
        del_s = z3.If(active(s, i), inp.tok[i] - s.rem[i], z3.If(done(s, i), inp.tok[i], 0))
        del_t = z3.If(active(t, i), inp.tok[i] - t.rem[i], z3.If(done(t, i), inp.tok[i], 0))
        hints += [
            one(terms.admit[i]) == one(admitted(t, i)) - one(admitted(s, i)),
            one(terms.batch[i]) == one(active(s, i)) + one(terms.admit[i]),
            one(active(t, i)) == one(terms.batch[i]) - one(terms.finish[i]),
            one(done(t, i)) == one(done(s, i)) + one(terms.finish[i]),
            one(t.srv[i]) == one(terms.batch[i]),
            del_t == del_s + terms.gain[i],
            rank_t == rank_i - terms.gain[i],
        ]
    hints.append(terms.n_batch == total(one(b) for b in terms.batch))
    return hints


def timed_hints(inp: Inputs, s: Vars, t: Vars, mutant: str | None = None) -> list:
    """The counting identities of one ``timed_trans`` step where the state moves: ``step_hints`` guarded by "not
    idle" (there ``timed_trans`` is ``trans``, so each is an instance of ``lemma:counting_identities``)."""
    idle = z3.Or(is_terminal(inp, s), z3.And(n_active(inp, s) == 0, head_arrival(inp, s) > s.clock))
    terms = step_terms(inp, s, mutant, str(t.clock))
    return [z3.Implies(z3.Not(idle), hint) for hint in step_hints(inp, s, t, terms)]


def transition(inp: Inputs, s: Vars, t: Vars, mutant: str | None = None):
    """``(trans, hints)``: the step relation and its counting identities."""
    terms = step_terms(inp, s, mutant, str(t.clock))
    formula = z3.And([z3.Not(is_terminal(inp, s))] + equal_to_terms(inp, t, terms))
    return formula, step_hints(inp, s, t, terms) + frame_hints(inp, s) + frame_hints(inp, t)


# --- the registry's state predicates, encoded -----------------------------------------


def _all(terms) -> z3.BoolRef:
    terms = list(terms)
    return z3.And(terms) if terms else z3.BoolVal(True)


def _pairs(n: int):
    return ((i, j) for i in range(n) for j in range(i + 1, n))


def enc_well_typed(inp: Inputs, s: Vars) -> z3.BoolRef:
    terms = [inp.slots >= 1, s.clock >= 0, s.busy >= 0]
    for i in range(inp.n):
        terms += [inp.arr[i] >= 0, inp.tok[i] >= 1]
        if inp.real_tokens:
            terms += [z3.IsInt(inp.tok[i]), z3.Implies(active(s, i), z3.IsInt(s.rem[i]))]
    return _all(terms)


def enc_no_duplicate_active(inp: Inputs, s: Vars) -> z3.BoolRef:
    return _all(
        z3.And(
            z3.Implies(z3.And(active(s, i), active(s, j)), inp.ids[i] != inp.ids[j]),
            z3.Implies(z3.And(s.srv[i], s.srv[j]), inp.ids[i] != inp.ids[j]),
        )
        for i, j in _pairs(inp.n)
    )


def enc_no_start_before_arrival(inp: Inputs, s: Vars) -> z3.BoolRef:
    return _all(z3.Implies(admitted(s, i), s.start[i] >= inp.arr[i]) for i in range(inp.n))


def enc_slot_bound(inp: Inputs, s: Vars) -> z3.BoolRef:
    return z3.And(n_active(inp, s) <= inp.slots, n_served(inp, s) <= inp.slots)


def enc_nonnegative_remaining(inp: Inputs, s: Vars) -> z3.BoolRef:
    return _all(z3.Implies(active(s, i), z3.And(0 <= s.rem[i], s.rem[i] <= inp.tok[i])) for i in range(inp.n))


def delivered(inp: Inputs, s: Vars) -> z3.ArithRef:
    return total(
        z3.If(active(s, i), inp.tok[i] - s.rem[i], z3.If(done(s, i), inp.tok[i], 0)) for i in range(inp.n)
    )


def enc_work_conservation(inp: Inputs, s: Vars) -> z3.BoolRef:
    return s.busy == delivered(inp, s)


def enc_every_job_completes_once(inp: Inputs, s: Vars) -> z3.BoolRef:
    # waiting = jobs[adm:], and each admitted job is active or done (dn): each job is
    # placed exactly once exactly when adm indexes the job list.
    return z3.And(s.adm >= 0, s.adm <= inp.n)


def enc_termination(inp: Inputs, s: Vars) -> z3.BoolRef:
    return max_arrival_bound(inp, s.clock - s.busy)


def enc_fifo_order(inp: Inputs, s: Vars) -> z3.BoolRef:
    n = inp.n
    waiting_sorted = [z3.Implies(waiting(s, i), key_le(inp, i, i + 1)) for i in range(n - 1)]
    active_sorted = [z3.Implies(z3.And(active(s, i), active(s, j)), key_le(inp, i, j)) for i, j in _pairs(n)]
    before_head = [z3.Implies(s.adm == j, key_lt(inp, i, j)) for i, j in _pairs(n)]
    return _all(waiting_sorted + active_sorted + before_head)


def enc_no_preemption(inp: Inputs, s: Vars) -> z3.BoolRef:
    return _all(
        z3.And(
            z3.Implies(active(s, i), inp.tok[i] - s.rem[i] == s.clock - s.start[i]),
            z3.Implies(done(s, i), s.fin[i] - s.start[i] == inp.tok[i]),
        )
        for i in range(inp.n)
    )


def _nothing_waiting_has_arrived(inp: Inputs, s: Vars) -> z3.BoolRef:
    return _all(z3.Implies(waiting(s, i), inp.arr[i] > s.clock - 1) for i in range(inp.n))


def enc_continuous_backfills(inp: Inputs, s: Vars) -> z3.BoolRef:
    nsrv = n_served(inp, s)
    return z3.Implies(
        z3.And(inp.cont, nsrv > 0), z3.Or(nsrv == inp.slots, _nothing_waiting_has_arrived(inp, s))
    )


def enc_static_batch_boundary(inp: Inputs, s: Vars) -> z3.BoolRef:
    n = inp.n
    nsrv = n_served(inp, s)
    one_start = [
        z3.Implies(z3.And(active(s, i), active(s, j)), s.start[i] == s.start[j]) for i, j in _pairs(n)
    ]
    fresh = z3.And(
        nsrv > 0, _all(z3.Implies(s.srv[i], z3.And(admitted(s, i), s.start[i] == s.clock - 1)) for i in range(n))
    )
    return z3.Implies(
        z3.Not(inp.cont),
        z3.And(_all(one_start), z3.Implies(z3.And(fresh, nsrv < inp.slots), _nothing_waiting_has_arrived(inp, s))),
    )


PREDICATES: dict[str, Callable[[Inputs, Vars], z3.BoolRef]] = {
    "well_typed": enc_well_typed,
    "no_duplicate_active": enc_no_duplicate_active,
    "no_start_before_arrival": enc_no_start_before_arrival,
    "slot_bound": enc_slot_bound,
    "nonnegative_remaining": enc_nonnegative_remaining,
    "work_conservation": enc_work_conservation,
    "every_job_completes_once": enc_every_job_completes_once,
    "termination": enc_termination,
    "fifo_order": enc_fifo_order,
    "no_preemption": enc_no_preemption,
    "continuous_backfills": enc_continuous_backfills,
    "static_batch_boundary": enc_static_batch_boundary,
}


# --- strengthening lemmas: not in the registry, proved inductive alongside it ----------


def lem_active_remaining_positive(inp: Inputs, s: Vars) -> z3.BoolRef:
    """An active job has at least one token left (a job leaves as its count reaches 0)."""
    return _all(z3.Implies(active(s, i), s.rem[i] >= 1) for i in range(inp.n))


def lem_started_before_clock(inp: Inputs, s: Vars) -> z3.BoolRef:
    """Every admitted job started in a tick already run: start <= clock - 1."""
    return _all(z3.Implies(admitted(s, i), s.start[i] <= s.clock - 1) for i in range(inp.n))


def lem_finished_by_clock(inp: Inputs, s: Vars) -> z3.BoolRef:
    """Every done job finished by the clock: finish <= clock."""
    return _all(z3.Implies(done(s, i), s.fin[i] <= s.clock) for i in range(inp.n))


def lem_served_only_admitted(inp: Inputs, s: Vars) -> z3.BoolRef:
    """Only admitted jobs were served, and after the first tick the latest batch is the active jobs plus those that finished at the clock."""
    return _all(
        z3.And(
            z3.Implies(s.srv[i], admitted(s, i)),
            z3.Implies(s.clock >= 1, s.srv[i] == z3.And(admitted(s, i), z3.Or(z3.Not(s.dn[i]), s.fin[i] == s.clock))),
        )
        for i in range(inp.n)
    )


def remaining_work(inp: Inputs, s: Vars) -> z3.ArithRef:
    """``spec.state.remaining_work``: tokens of waiting jobs plus remaining of active ones."""
    return total(
        z3.If(waiting(s, i), inp.tok[i], z3.If(active(s, i), s.rem[i], 0)) for i in range(inp.n)
    )


def lem_ranking_plus_busy_is_total(inp: Inputs, s: Vars) -> z3.BoolRef:
    """remaining_work + busy = sum(tokens): each service moves one token from one side to the other."""
    return remaining_work(inp, s) + s.busy == sum_tokens(inp)


LEMMAS: dict[str, Callable[[Inputs, Vars], z3.BoolRef]] = {
    "active_remaining_positive": lem_active_remaining_positive,
    "started_before_clock": lem_started_before_clock,
    "finished_by_clock": lem_finished_by_clock,
    "served_only_admitted": lem_served_only_admitted,
    "ranking_plus_busy_is_total": lem_ranking_plus_busy_is_total,
}


def strengthened(inp: Inputs, s: Vars) -> list:
    """Every registry predicate and every lemma: the inductive invariant proved as a whole."""
    return [f(inp, s) for f in PREDICATES.values()] + [f(inp, s) for f in LEMMAS.values()]


# --- concrete valuations: from a spec State and back ------------------------------------


def valuation_of_state(state) -> dict:
    """The encoding's values for a concrete ``spec.State`` (raises ValueError if not representable)."""
    jobs = list(state.jobs)
    n = len(jobs)
    if any((a.arrival, a.id) > (b.arrival, b.id) for a, b in zip(jobs, jobs[1:])):
        raise ValueError(f"jobs={jobs!r}: expected FIFO order by (arrival, id)")
    adm = n - len(state.waiting)
    if tuple(jobs[adm:]) != tuple(state.waiting):
        raise ValueError(f"waiting={state.waiting!r}: expected the suffix jobs[{adm}:]")
    position = {job: i for i, job in enumerate(jobs)}
    if len(position) != n:
        raise ValueError("two identical jobs: a valuation needs distinct jobs")
    by_id = {job.id: i for i, job in enumerate(jobs)}
    val = {
        "ids": [j.id for j in jobs],
        "arr": [j.arrival for j in jobs],
        "tok": [j.tokens for j in jobs],
        "slots": state.slots,
        "continuous": state.continuous,
        "clock": state.clock,
        "busy": state.busy,
        "adm": adm,
        "rem": [0] * n,
        "start": [0] * n,
        "fin": [0] * n,
        "dn": [False] * n,
        "srv": [False] * n,
    }
    seen = set()
    for r in state.active:
        i = position[r.job]
        val["rem"][i], val["start"][i] = r.remaining, r.start
        seen.add(i)
    for d in state.done:
        i = position[d.job]
        val["start"][i], val["fin"][i], val["dn"][i] = d.start, d.finish, True
        seen.add(i)
    if seen != set(range(adm)) or len(state.active) + len(state.done) != adm:
        raise ValueError(f"active and done are not the admitted prefix jobs[:{adm}]")
    if [i for i in sorted(position[r.job] for r in state.active)] != [position[r.job] for r in state.active]:
        raise ValueError("active is not in admission (FIFO) order")
    served = [by_id[job_id] for job_id in state.served]
    if served != sorted(set(served)):
        raise ValueError(f"served={state.served!r}: expected distinct ids in FIFO order")
    for i in served:
        val["srv"][i] = True
    return val


def state_of_valuation(val: dict):
    """The ``spec.State`` that a valuation stands for (done in order of finish)."""
    from spec.domain import Job
    from spec.state import Completion, Running, State

    n = len(val["ids"])
    jobs = tuple(Job(val["ids"][i], val["arr"][i], val["tok"][i]) for i in range(n))
    adm = val["adm"]
    assert 0 <= adm <= n, f"adm={adm!r}: expected 0 <= adm <= {n}"
    active_jobs = tuple(Running(jobs[i], val["start"][i], val["rem"][i]) for i in range(adm) if not val["dn"][i])
    done_idx = sorted((i for i in range(adm) if val["dn"][i]), key=lambda i: (val["fin"][i], i))
    done_jobs = tuple(Completion(jobs[i], val["start"][i], val["fin"][i]) for i in done_idx)
    served = tuple(val["ids"][i] for i in range(n) if val["srv"][i])
    return State(jobs, val["slots"], val["continuous"], val["clock"], jobs[adm:], active_jobs, done_jobs, val["busy"], served)


def normalized(val: dict) -> dict:
    """The valuation with the fields that do not apply to a job's status zeroed."""
    out = {k: (list(v) if isinstance(v, list) else v) for k, v in val.items()}
    for i in range(len(val["ids"])):
        if i >= val["adm"]:
            out["rem"][i], out["start"][i], out["fin"][i], out["dn"][i] = 0, 0, 0, False
        elif val["dn"][i]:
            out["rem"][i] = 0
        else:
            out["fin"][i] = 0
    return out


def pin(inp: Inputs, s: Vars, val: dict, constants: bool = True) -> list:
    """Equalities that fix a frame (and, with ``constants``, the inputs) to a valuation."""
    eqs = [s.clock == val["clock"], s.busy == val["busy"], s.adm == val["adm"]]
    if constants:
        eqs += [inp.slots == val["slots"], inp.cont == z3.BoolVal(bool(val["continuous"]))]
    for i in range(inp.n):
        if constants:
            eqs += [inp.ids[i] == val["ids"][i], inp.arr[i] == val["arr"][i], inp.tok[i] == val["tok"][i]]
        eqs += [
            s.rem[i] == val["rem"][i],
            s.start[i] == val["start"][i],
            s.fin[i] == val["fin"][i],
            s.dn[i] == z3.BoolVal(bool(val["dn"][i])),
            s.srv[i] == z3.BoolVal(bool(val["srv"][i])),
        ]
    return eqs


def _value(model: z3.ModelRef, term):
    v = model.eval(term, model_completion=True)
    if z3.is_true(v) or z3.is_false(v):
        return z3.is_true(v)
    if z3.is_int_value(v):
        return v.as_long()
    if z3.is_rational_value(v):
        frac = v.as_fraction()
        return frac.numerator if frac.denominator == 1 else frac
    return str(v)


def read_inputs(model: z3.ModelRef, inp: Inputs) -> dict:
    return {
        "ids": [_value(model, x) for x in inp.ids],
        "arr": [_value(model, x) for x in inp.arr],
        "tok": [_value(model, x) for x in inp.tok],
        "slots": _value(model, inp.slots),
        "continuous": _value(model, inp.cont),
    }


def read_frame(model: z3.ModelRef, inp: Inputs, s: Vars) -> dict:
    """A frame's values from a model, with the inputs: a valuation."""
    val = read_inputs(model, inp)
    val.update(
        clock=_value(model, s.clock),
        busy=_value(model, s.busy),
        adm=_value(model, s.adm),
        rem=[_value(model, x) for x in s.rem],
        start=[_value(model, x) for x in s.start],
        fin=[_value(model, x) for x in s.fin],
        dn=[_value(model, x) for x in s.dn],
        srv=[_value(model, x) for x in s.srv],
    )
    return val
