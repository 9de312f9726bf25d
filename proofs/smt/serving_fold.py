"""The serving tick as folds over positions, for ANY number of requests: token_budget and kv_capacity for every n.

What it establishes (rows of ``schedcheck prove --model serving``, bound ``any n``):

- ``token_budget (any n)``: every tick schedules at most ``token_budget`` tokens,
  whatever the number of requests;
- ``kv_capacity (any n)``: if the running requests held at most ``num_blocks``
  blocks before a tick, they hold at most ``num_blocks`` after it, whatever the
  number of requests (with Init, which holds none, an inductive invariant);
- ``lemma:filter_sums``: dropping members of a list of non-negative weights
  (aborts before the passes, finishes after them) never raises its sum.

How: ``spec.serving.step`` is written as loops over positions (its running pass is
``while index < len(running)``, popping victims from the end; its waiting pass walks
the queue from its head), and here each loop is encoded as a transition over its loop
state (index, length, budget left, blocks held, tokens scheduled, ...) with the
requests' data as uninterpreted functions of the position (``need(p)``, ``hb(p)``
blocks held, ``comp(p)`` computed, ``wk(q)`` known length of queue position q, ...)
and the lengths R and W symbolic: no n appears anywhere.  Z3 proves for each loop
that its invariant holds at the start, is kept by one iteration from ANY loop state
that satisfies it (a symbolic position), and gives the claim at the exit; by
induction over the iterations (the standard rule for while loops) the claim holds
for every run of the loop, so for every n.  Sums over positions are ghost functions
defined by their recurrence (``pb(p + 1) = pb(p) + hb(p)``), instantiated only at the
positions an iteration touches, so every query is quantifier-free; the loop writes
each ghost value once, at the position it visits (``ext(i)``: the blocks the pass
gives position i; ``sch(i)``: its tokens).  The invariant ties the loop's counters to
those sums (``S = ss(i)``: what was scheduled is the sum of the tokens given; ``H =
pb(L) + xs(i)``: the blocks held are those of the positions still running plus what
the pass gave them), so the claim at the exit is about the entry's scheduled list and
the post-state's held blocks, not about a counter.

Assumptions: ``blocks_for`` is the uninterpreted ``blk`` with the axioms
``lemma:blocks_for_axioms`` proves of ceil (here only blk >= 0); held blocks are
counted as the sum of the running requests' block counts, which is the spec's
``len(held)`` when no block is held twice (``kv_exclusive``, proved per block id for
n up to the ledger's bound; the row ``kv_capacity (any n)`` depends on it, and says
so).  The link to the spec that runs is the same as every encoding's: at every run the
loops are unrolled on the validation's states (``proofs.smt.conformance``) and must
give exactly the post-state ``spec.serving.step`` gives (each running position's
tokens, blocks taken, who is popped, who is admitted, the totals).  Bounds: none on n
or on any value.  Nothing runs at import time.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

PROVED, REFUTED, UNKNOWN, VACUOUS = "proved", "refuted", "unknown", "vacuous"
SERVE, POP = 0, 1  # the running pass's two modes: serve the request at i, or pop victims until its blocks fit
MUTANTS = ("budget_plus_one", "pool_plus_one", "allocate_held_id", "admit_while_le_seqs")  # serving_model.MUTANTS that change these loops


@dataclass(frozen=True)
class Data:
    """The tick's inputs, as functions of the position: nothing in them depends on n."""

    need: z3.FuncDeclRef  # running position p: known - computed
    comp: z3.FuncDeclRef  # running position p: computed
    hb: z3.FuncDeclRef  # running position p: blocks held before the tick
    wk: z3.FuncDeclRef  # queue position q: known length (prompt + generated)
    warr: z3.FuncDeclRef  # queue position q: arrival
    blk: z3.FuncDeclRef  # blocks_for
    pb: z3.FuncDeclRef  # prefix sums of hb
    ext: z3.FuncDeclRef  # ghost: blocks the running pass gives position p
    sch: z3.FuncDeclRef  # ghost: tokens the running pass gives position p
    xs: z3.FuncDeclRef  # prefix sums of ext
    ss: z3.FuncDeclRef  # prefix sums of sch
    adb: z3.FuncDeclRef  # ghost: blocks the waiting pass gives queue position q
    adt: z3.FuncDeclRef  # ghost: tokens the waiting pass gives queue position q
    bs_: z3.FuncDeclRef  # prefix sums of adb
    ts_: z3.FuncDeclRef  # prefix sums of adt
    hk: z3.FuncDeclRef  # running position p: how often it holds the block id bk (the per-block part)
    pk: z3.FuncDeclRef  # prefix sums of hk
    tk: z3.FuncDeclRef  # ghost: running position p takes bk in the pass (0 or 1)
    tks: z3.FuncDeclRef  # prefix sums of tk
    tw: z3.FuncDeclRef  # ghost: queue position q takes bk when admitted (0 or 1)
    tws: z3.FuncDeclRef  # prefix sums of tw
    sk: z3.FuncDeclRef  # prefix counts of the running positions the pass schedules (sch >= 1)
    R: z3.ArithRef  # running requests after the aborts
    W: z3.ArithRef  # waiting requests after the aborts
    B: z3.ArithRef  # token_budget
    NB: z3.ArithRef  # num_blocks
    M: z3.ArithRef  # max_seqs
    T: z3.ArithRef  # the tick
    chunked: z3.BoolRef


def make_data(prefix: str = "") -> Data:
    def f(name):
        return z3.Function(f"{prefix}{name}", z3.IntSort(), z3.IntSort())

    return Data(f("need"), f("comp"), f("hb"), f("wk"), f("warr"), f("blk"), f("pb"), f("ext"), f("sch"), f("xs"),
                f("ss"), f("adb"), f("adt"), f("bsum"), f("tsum"), f("hk"), f("pk"), f("tk"), f("tks"), f("tw"), f("tws"), f("sk"),
                *z3.Ints(f"{prefix}R {prefix}W {prefix}B "
                                                                           f"{prefix}NB {prefix}M {prefix}T"),
                z3.Bool(f"{prefix}chunked"))


def domain(d: Data) -> list:
    """The config's domain rules and the lengths: no rule on n."""
    return [d.B >= 1, d.NB >= 1, d.M >= 1, d.R >= 0, d.W >= 0]


@dataclass(frozen=True)
class RunState:
    """The running pass's loop state."""

    i: z3.ArithRef  # the index the pass is at
    L: z3.ArithRef  # the running list's length (victims are popped from its end)
    bud: z3.ArithRef  # budget left
    H: z3.ArithRef  # blocks held by the running list
    S: z3.ArithRef  # tokens scheduled so far
    pre: z3.BoolRef  # someone was preempted
    mode: z3.ArithRef  # SERVE or POP
    n: z3.ArithRef  # in POP mode: the tokens the request at i is to get
    extra: z3.ArithRef  # in POP mode: the blocks it needs beyond those it holds
    K: z3.ArithRef  # how often the running list holds the block id bk


def run_state(tag: str) -> RunState:
    return RunState(*z3.Ints(f"i_{tag} L_{tag} bud_{tag} H_{tag} S_{tag}"), z3.Bool(f"pre_{tag}"),
                    *z3.Ints(f"mode_{tag} n_{tag} extra_{tag} K_{tag}"))


def run_init(d: Data, a: RunState, H0, mutant: str | None = None) -> z3.BoolRef:
    """The running pass starts at index 0 with the whole list, the whole budget and what the list holds."""
    start = d.B + (1 if mutant == "budget_plus_one" else 0)
    return z3.And(a.i == 0, a.L == d.R, a.bud == start, a.H == H0, a.S == 0, z3.Not(a.pre), a.mode == SERVE,
                  a.K == d.pk(d.R))


def run_guard(a: RunState) -> z3.BoolRef:
    return a.i < a.L


def run_body(d: Data, a: RunState, b: RunState, mutant: str | None = None) -> z3.BoolRef:
    """One iteration of the running pass (spec.serving.step, step 4), in the flat form of its nested loop."""
    pool = d.NB + (1 if mutant == "pool_plus_one" else 0)
    n = z3.If(d.need(a.i) <= a.bud, d.need(a.i), a.bud)  # min(known - computed, budget)
    extra = d.blk(d.comp(a.i) + n) - d.hb(a.i)
    same = [b.bud == a.bud, b.S == a.S]
    skip = z3.And(b.i == a.i + 1, b.L == a.L, b.H == a.H, b.pre == a.pre, b.mode == SERVE, *same,
                  d.ext(a.i) == 0, d.sch(a.i) == 0, d.tk(a.i) == 0, b.K == a.K)
    to_pop = z3.And(b.i == a.i, b.L == a.L, b.H == a.H, b.pre == a.pre, b.mode == POP, b.n == n, b.extra == extra,
                    *same, b.K == a.K)
    short = pool - a.H < a.extra
    pop = z3.And(b.i == a.i, b.L == a.L - 1, b.H == a.H - d.hb(a.L - 1), b.pre, b.mode == POP, b.n == a.n,
                 b.extra == a.extra, *same, b.K == a.K - d.hk(a.L - 1))
    taken = z3.If(a.extra > 0, a.extra, 0)
    # the allocator's contract at bk: the request takes bk at most once, and only when no running request holds it
    free = z3.BoolVal(True) if mutant == "allocate_held_id" else a.K == 0
    take = z3.And(d.tk(a.i) >= 0, d.tk(a.i) <= 1, z3.Implies(d.tk(a.i) == 1, z3.And(a.extra > 0, free)))
    serve = z3.And(b.i == a.i + 1, b.L == a.L, b.H == a.H + taken, b.pre == a.pre, b.mode == SERVE,
                   b.bud == a.bud - a.n, b.S == a.S + a.n, d.ext(a.i) == taken, d.sch(a.i) == a.n, take,
                   b.K == a.K + d.tk(a.i))
    return z3.If(a.mode == SERVE, z3.If(n == 0, skip, to_pop), z3.If(short, pop, serve))


def run_facts(d: Data, a: RunState) -> list:
    """The ghost sums' recurrences and the data's ranges, at the positions one iteration from ``a`` touches."""
    i, L = a.i, a.L
    return [d.pb(L) == d.pb(L - 1) + d.hb(L - 1), d.xs(i + 1) == d.xs(i) + d.ext(i),
            d.ss(i + 1) == d.ss(i) + d.sch(i), d.hb(L - 1) >= 0, d.hb(i) >= 0, d.ext(i) >= 0,
            d.blk(d.comp(i) + z3.If(d.need(i) <= a.bud, d.need(i), a.bud)) >= 0,
            d.pk(L) == d.pk(L - 1) + d.hk(L - 1), d.tks(i + 1) == d.tks(i) + d.tk(i), d.hk(L - 1) >= 0,
            d.pk(L - 1) >= 0, d.sk(i + 1) == d.sk(i) + z3.If(d.sch(i) >= 1, 1, 0)]


def run_invariant(d: Data, a: RunState, parts=("budget", "capacity")) -> z3.BoolRef:
    """The running pass's invariant: for the budget, the budget left is >= 0 and what was scheduled is the sum of the
    tokens given to the positions before i (in POP mode the request at i is to get n tokens, at most the budget left);
    for the capacity, the blocks held are those of the positions still in the list plus what the pass gave them, at
    most num_blocks."""
    terms = [0 <= a.i, a.i <= a.L, a.L <= d.R, z3.Or(a.mode == SERVE, a.mode == POP)]
    if "budget" in parts:
        terms += [a.bud >= 0, a.S + a.bud == d.B, a.S == d.ss(a.i), d.ss(0) == 0,
                  z3.Implies(a.mode == POP, a.n <= a.bud)]
    if "capacity" in parts:
        terms += [d.pb(0) == 0, d.xs(0) == 0, a.H == d.pb(a.L) + d.xs(a.i), a.H <= d.NB]
    if "exclusive" in parts:
        terms += [d.pk(0) == 0, d.tks(0) == 0, a.K == d.pk(a.L) + d.tks(a.i), a.K <= 1, d.tks(a.i) <= a.K,
                  d.tks(a.i) >= 0]
    if "seats" in parts:
        terms += [d.sk(0) == 0, d.sk(a.i) <= a.i, d.sk(a.i) >= 0, d.R <= d.M]
    return z3.And(terms)


@dataclass(frozen=True)
class WaitState:
    """The waiting pass's loop state."""

    q: z3.ArithRef  # the queue position it is at (the head is q: FCFS, no skipping)
    bud: z3.ArithRef
    H: z3.ArithRef
    S: z3.ArithRef
    nr: z3.ArithRef  # running requests
    stop: z3.BoolRef  # the head did not fit: the pass has ended
    K: z3.ArithRef  # how often the running list holds the block id bk


def wait_state(tag: str) -> WaitState:
    return WaitState(*z3.Ints(f"q_{tag} wbud_{tag} wH_{tag} wS_{tag} nr_{tag}"), z3.Bool(f"stop_{tag}"),
                     z3.Int(f"wK_{tag}"))


def wait_init(a: RunState, w: WaitState) -> z3.BoolRef:
    """The waiting pass starts where the running pass ended (the kept requests run)."""
    return z3.And(w.q == 0, w.bud == a.bud, w.H == a.H, w.S == a.S, w.nr == a.L, z3.Not(w.stop), w.K == a.K)


def wait_guard(d: Data, w: WaitState, pre, mutant: str | None = None) -> z3.BoolRef:
    seats = w.nr <= d.M if mutant == "admit_while_le_seqs" else w.nr < d.M
    return z3.And(z3.Not(pre), z3.Not(w.stop), w.q < d.W, d.warr(w.q) <= d.T, seats, w.bud > 0)


def wait_body(d: Data, w: WaitState, v: WaitState, mutant: str | None = None) -> z3.BoolRef:
    """One iteration of the waiting pass (spec.serving.step, step 5): admit the head or stop."""
    k = d.wk(w.q)
    n = z3.If(d.chunked, z3.If(k <= w.bud, k, w.bud), k)
    need = d.blk(n)
    fits = z3.And(z3.Or(d.chunked, n <= w.bud), d.NB - w.H >= need)
    free = z3.BoolVal(True) if mutant == "allocate_held_id" else w.K == 0
    take = z3.And(d.tw(w.q) >= 0, d.tw(w.q) <= 1, z3.Implies(d.tw(w.q) == 1, z3.And(need > 0, free)))
    admit = z3.And(v.q == w.q + 1, v.bud == w.bud - n, v.H == w.H + need, v.S == w.S + n, v.nr == w.nr + 1,
                   z3.Not(v.stop), d.adb(w.q) == need, d.adt(w.q) == n, take, v.K == w.K + d.tw(w.q))
    stop = z3.And(v.q == w.q, v.bud == w.bud, v.H == w.H, v.S == w.S, v.nr == w.nr, v.stop, v.K == w.K)
    return z3.If(fits, admit, stop)


def wait_facts(d: Data, w: WaitState) -> list:
    k = d.wk(w.q)
    n = z3.If(d.chunked, z3.If(k <= w.bud, k, w.bud), k)
    return [d.bs_(w.q + 1) == d.bs_(w.q) + d.adb(w.q), d.ts_(w.q + 1) == d.ts_(w.q) + d.adt(w.q), d.blk(n) >= 0,
            d.tws(w.q + 1) == d.tws(w.q) + d.tw(w.q), k >= 1]


def wait_invariant(d: Data, w: WaitState, L, parts=("budget", "capacity")) -> z3.BoolRef:
    """The waiting pass's invariant, over the kept positions 0..L-1 and the admitted queue positions 0..q-1."""
    terms = [w.q >= 0]
    if "budget" in parts:
        terms += [w.bud >= 0, w.S + w.bud == d.B, w.S == d.ss(L) + d.ts_(w.q), d.ts_(0) == 0]
    if "capacity" in parts:
        terms += [d.bs_(0) == 0, w.H == d.pb(L) + d.xs(L) + d.bs_(w.q), w.H <= d.NB]
    if "exclusive" in parts:
        terms += [d.tws(0) == 0, w.K == d.pk(L) + d.tks(L) + d.tws(w.q), w.K <= 1, d.tks(L) + d.tws(w.q) <= w.K,
                  d.tws(w.q) >= 0, d.tks(L) >= 0]
    if "seats" in parts:  # the running requests: the kept L and the q admitted, each admitted one scheduled
        terms += [w.nr == L + w.q, w.nr <= d.M, d.sk(L) <= L, L >= 0]
    return z3.And(terms)


# --- the filter lemma: aborts and finishes only drop members ---------------------------------------


def prove_filter_sums(mutant: str | None = None) -> dict:
    """For any list of weights >= 0 and any choice of members to keep, the kept sum is at most the whole sum:
    ks(0) = ts(0) = 0; ks(p+1) = ks(p) + [keep(p)] w(p), ts(p+1) = ts(p) + w(p); by induction over p."""
    w, ks, ts = (z3.Function(name, z3.IntSort(), z3.IntSort()) for name in ("w", "ks", "ts"))
    keep = z3.Function("keep", z3.IntSort(), z3.BoolSort())
    p = z3.Int("p")
    steps = [ks(p + 1) == ks(p) + z3.If(keep(p), w(p), 0), ts(p + 1) == ts(p) + w(p)]
    if mutant != "negative_block_counts":
        steps.append(w(p) >= 0)  # a block count: the length of a tuple
    checks = [("base", [ks(0) == 0, ts(0) == 0], ks(0) <= ts(0)),
              ("step", [p >= 0, ks(p) <= ts(p)] + steps, ks(p + 1) <= ts(p + 1))]
    return _obligations(checks, "the kept sum is at most the whole sum, for every length (induction over positions)")


# --- the proofs -----------------------------------------------------------------------------------


def _solver() -> z3.Solver:
    return z3.SimpleSolver()


def _obligations(checks, proved: str) -> dict:
    """Each ``(name, hypotheses, goal)``: hypotheses satisfiable, and the goal's negation unsat under them."""
    for name, hyps, goal in checks:
        solver = _solver()
        solver.add(*hyps)
        hyp = solver.check()
        if hyp != z3.sat:
            status = VACUOUS if hyp == z3.unsat else UNKNOWN
            return {"status": status, "counterexample": None, "hypotheses": "no" if hyp == z3.unsat else "unknown",
                    "detail": f"{name}: the hypotheses are {'unsatisfiable' if hyp == z3.unsat else 'undecided'}"}
        solver.add(z3.Not(goal))
        result = solver.check()
        if result == z3.sat:
            model = solver.model()
            shown = {str(v): str(model[v]) for v in model.decls() if v.arity() == 0}
            return {"status": REFUTED, "counterexample": {"obligation": name, "model": dict(sorted(shown.items()))},
                    "hypotheses": "yes", "detail": f"{name} fails"}
        if result != z3.unsat:
            return {"status": UNKNOWN, "counterexample": None, "hypotheses": "yes", "detail": f"{name}: undecided"}
    return {"status": PROVED, "counterexample": None, "hypotheses": "yes", "detail": proved}


def _loop_checks(d: Data, mutant: str | None, parts: tuple) -> list:
    """The obligations of both passes: each invariant (its ``parts``) holds at its loop's start, is kept by one
    iteration, and gives the next phase's start (the waiting pass's, then the tick's end)."""
    a, b = run_state("a"), run_state("b")
    w, v = wait_state("w"), wait_state("v")
    H0, Lend = z3.Int("H0"), z3.Int("Lend")
    base = domain(d)
    start = [H0 == d.pb(d.R), H0 <= d.NB, d.pb(0) == 0, d.xs(0) == 0, d.ss(0) == 0, d.pk(0) == 0, d.tks(0) == 0,
             d.pk(d.R) <= 1, d.pk(d.R) >= 0, d.sk(0) == 0, d.R <= d.M]
    return [
        ("running pass: the invariant holds at its start", base + start + [run_init(d, a, H0, mutant)],
         run_invariant(d, a, parts)),
        ("running pass: one iteration keeps the invariant",
         base + [run_invariant(d, a, parts), run_guard(a), run_body(d, a, b, mutant)] + run_facts(d, a),
         run_invariant(d, b, parts)),
        ("running pass -> waiting pass: the invariant at the waiting pass's start",
         base + [run_invariant(d, a, parts), z3.Not(run_guard(a)), wait_init(a, w), d.bs_(0) == 0, d.ts_(0) == 0,
                 d.tws(0) == 0],
         wait_invariant(d, w, a.L, parts)),
        ("waiting pass: one iteration keeps the invariant",
         base + [wait_invariant(d, w, Lend, parts), wait_guard(d, w, z3.Bool("pre_end"), mutant),
                 wait_body(d, w, v, mutant)]
         + wait_facts(d, w), wait_invariant(d, v, Lend, parts)),
    ]


def prove_budget(mutant: str | None = None) -> dict:
    """token_budget for any n: both passes keep budget left >= 0 and scheduled + left = token_budget, and the entry's
    scheduled tokens are the sums ss and ts the loops build, so at the end they total <= token_budget."""
    d = make_data()
    checks = _loop_checks(d, mutant, ("budget",))
    w = wait_state("w")
    Lend = z3.Int("Lend")
    checks.append(("the tick's end: the entry schedules at most token_budget tokens",
                   domain(d) + [wait_invariant(d, w, Lend, ("budget",))], d.ss(Lend) + d.ts_(w.q) <= d.B))
    return confirmed(_obligations(checks, "each pass is a loop whose invariant keeps the budget left >= 0 and "
                                          "scheduled + left = token_budget; the entry's tokens are the loops' sums: at "
                                          "most token_budget, for every number of requests (induction over the "
                                          "iterations)"), "budget", mutant)


def prove_capacity(mutant: str | None = None) -> dict:
    """kv_capacity for any n: if the running list held <= num_blocks before the tick, the passes keep held <= num_blocks
    (pops free, an allocation happens only when it fits), and aborts and finishes only drop members."""
    d = make_data()
    checks = _loop_checks(d, mutant, ("capacity",))
    w = wait_state("w")
    Lend = z3.Int("Lend")
    checks.append(("the tick's end: the running requests (kept and admitted) hold at most num_blocks",
                   domain(d) + [wait_invariant(d, w, Lend, ("capacity",))], d.pb(Lend) + d.xs(Lend) + d.bs_(w.q) <= d.NB))
    return confirmed(_obligations(checks, "the running pass pops until the blocks fit and the waiting pass admits "
                                          "only what fits: held <= num_blocks at every iteration; with aborts and "
                                          "finishes only dropping members (lemma:filter_sums), for every number of "
                                          "requests"), "capacity", mutant)


def prove_exclusive(mutant: str | None = None) -> dict:
    """kv_exclusive for any n, at every block id bk: if at most one running request held bk (once) before the tick,
    at most one holds it after, and the tick allocated it at most once: a pop gives bk back only from its one
    holder, and the allocator takes bk only when nobody holds it (its contract)."""
    d = make_data()
    checks = _loop_checks(d, mutant, ("exclusive",))
    w = wait_state("w")
    Lend = z3.Int("Lend")
    checks.append(("the tick's end: bk is held at most once and was allocated at most once",
                   domain(d) + [wait_invariant(d, w, Lend, ("exclusive",))],
                   z3.And(w.K <= 1, d.tks(Lend) + d.tws(w.q) <= 1)))
    return confirmed(_obligations(checks, "the running list holds bk at most once at every iteration: a pop gives it "
                                          "back only from its one holder and an allocation takes it only when nobody "
                                          "holds it; so it is allocated at most once, for every number of requests and "
                                          "every block id"), "exclusive", mutant)


def prove_seats(mutant: str | None = None) -> dict:
    """slot_bound for any n: if at most max_seqs requests ran before the tick, at most max_seqs run after it and at
    most max_seqs were scheduled in it: the running pass only drops requests, the waiting pass admits only while
    fewer than max_seqs run, and everyone scheduled is running during the tick."""
    d = make_data()
    checks = _loop_checks(d, mutant, ("seats",))
    w = wait_state("w")
    Lend = z3.Int("Lend")
    checks.append(("the tick's end: at most max_seqs run, at most max_seqs were scheduled",
                   domain(d) + [wait_invariant(d, w, Lend, ("seats",))],
                   z3.And(w.nr <= d.M, d.sk(Lend) + w.q <= d.M)))
    return confirmed(_obligations(checks, "the running list only shrinks, the waiting pass admits only while fewer "
                                          "than max_seqs run, and each admitted request is scheduled: at most max_seqs "
                                          "run and are scheduled, for every number of requests"), "seats", mutant)


# --- the loops unrolled: on concrete states (the validation) and on small symbolic ones (a refutation's run) -------


def _stutter_run(a: RunState, b: RunState) -> z3.BoolRef:
    return z3.And(b.i == a.i, b.L == a.L, b.bud == a.bud, b.H == a.H, b.S == a.S, b.pre == a.pre, b.mode == a.mode,
                  b.n == a.n, b.extra == a.extra, b.K == a.K)


def _stutter_wait(w: WaitState, v: WaitState) -> z3.BoolRef:
    return z3.And(v.q == w.q, v.bud == w.bud, v.H == w.H, v.S == w.S, v.nr == w.nr, v.stop == w.stop, v.K == w.K)


@dataclass(frozen=True)
class Unrolled:
    """Both passes unrolled ``len(runs) - 1`` and ``len(waits) - 1`` iterations (a finished loop stutters)."""

    constraints: list
    runs: list
    waits: list
    H0: z3.ArithRef


def unroll(d: Data, k_run: int, k_wait: int, mutant: str | None = None, tag: str = "u") -> Unrolled:
    """The running pass from its start for ``k_run`` iterations, then the waiting pass for ``k_wait``, each iteration
    with the ghost recurrences and ranges it touches; enough iterations to end both loops: k_run >= 3 R + 1,
    k_wait >= W + 1 (each position is served in two iterations or popped in one)."""
    runs = [run_state(f"{tag}r0")]
    H0 = z3.Int(f"{tag}H0")
    cs = domain(d) + [H0 == d.pb(d.R), d.pb(0) == 0, d.xs(0) == 0, d.ss(0) == 0, d.bs_(0) == 0, d.ts_(0) == 0,
                      d.pk(0) == 0, d.tks(0) == 0, d.tws(0) == 0, run_init(d, runs[0], H0, mutant)]
    for k in range(k_run):
        a, b = runs[-1], run_state(f"{tag}r{k + 1}")
        cs += [z3.If(run_guard(a), z3.And(run_body(d, a, b, mutant), *run_facts(d, a)), _stutter_run(a, b))]
        runs.append(b)
    waits = [wait_state(f"{tag}w0")]
    cs.append(wait_init(runs[-1], waits[0]))
    for k in range(k_wait):
        w, v = waits[-1], wait_state(f"{tag}w{k + 1}")
        cs += [z3.If(wait_guard(d, w, runs[-1].pre, mutant), z3.And(wait_body(d, w, v, mutant), *wait_facts(d, w)),
                     _stutter_wait(w, v))]
        waits.append(v)
    return Unrolled(cs, runs, waits, H0)


def blocks_exact_at(d: Data, block_size: int, terms) -> list:
    """blk(t) = ceil(t / block_size) at each term (block_size concrete: linear)."""
    return [z3.Implies(t >= 0, z3.And(block_size * d.blk(t) >= t, block_size * (d.blk(t) - 1) < t)) for t in terms]


def blk_terms(d: Data, u: Unrolled) -> list:
    """Every blk application of the unrolled loops (so that each can be pinned to ceil)."""
    out = []
    for a in u.runs[:-1]:
        n = z3.If(d.need(a.i) <= a.bud, d.need(a.i), a.bud)
        out.append(d.comp(a.i) + n)
    for w in u.waits[:-1]:
        k = d.wk(w.q)
        out.append(z3.If(d.chunked, z3.If(k <= w.bud, k, w.bud), k))
    return out


def block_of(state, entry) -> int:
    """The block id whose per-block part the validation follows for this tick: the first id it allocates, else the
    lowest id a running request holds, else 0."""
    allocated = [b for _, blocks in entry.allocated for b in blocks]
    held = sorted(b for p in state.running for b in p.blocks)
    return allocated[0] if allocated else held[0] if held else 0


def pin_state(d: Data, state, entry) -> list:
    """The loops' inputs for a concrete ``spec.serving.State`` and the entry of its step: the running list and the
    queue after the tick's aborts, the config, the tick, and who holds the block id ``block_of``."""
    gone = set(entry.aborted)
    running = [p for p in state.running if p.id not in gone]
    waiting = [p for p in state.waiting if p.id not in gone]
    cfg = state.config
    bk = block_of(state, entry)
    eqs = [d.R == len(running), d.W == len(waiting), d.B == cfg.token_budget, d.NB == cfg.num_blocks,
           d.M == cfg.max_seqs, d.T == entry.tick, d.chunked == z3.BoolVal(cfg.chunked_prefill)]
    for p, r in enumerate(running):
        eqs += [d.need(p) == r.known - r.computed, d.comp(p) == r.computed, d.hb(p) == len(r.blocks),
                d.hk(p) == r.blocks.count(bk)]
    for q, r in enumerate(waiting):
        eqs += [d.wk(q) == r.known, d.warr(q) == r.request.arrival]
    total = holders = 0
    for p, r in enumerate(running):
        eqs += [d.pb(p) == total, d.pk(p) == holders]
        total += len(r.blocks)
        holders += r.blocks.count(bk)
    eqs += [d.pb(len(running)) == total, d.pk(len(running)) == holders]
    return eqs


def expected(d: Data, u: Unrolled, state, entry) -> list:
    """``(field, value spec.serving.step gives, condition)`` on the loops' end, from the step's entry."""
    gone = set(entry.aborted)
    running = [p for p in state.running if p.id not in gone]
    waiting = [p for p in state.waiting if p.id not in gone]
    tokens = dict(entry.scheduled)
    blocks = {rid: len(b) for rid, b in entry.allocated}
    kept = len(running) - len(entry.preempted)
    end, wend = u.runs[-1], u.waits[-1]
    out = [("running pass: requests kept", kept, end.L == kept),
           ("running pass: preempted someone", bool(entry.preempted), end.pre == bool(entry.preempted)),
           ("running pass: the popped are the list's end, last first", [p.id for p in running[kept:]][::-1],
            z3.BoolVal([p.id for p in running[kept:]][::-1] == list(entry.preempted)))]
    for p, r in enumerate(running[:kept]):
        out += [(f"running pass: tokens of request {r.id}", tokens.get(r.id, 0), d.sch(p) == tokens.get(r.id, 0)),
                (f"running pass: blocks taken by request {r.id}", blocks.get(r.id, 0), d.ext(p) == blocks.get(r.id, 0))]
    admitted = [r for r in waiting if r.id in tokens]
    out.append(("waiting pass: requests admitted", len(admitted), wend.q == len(admitted)))
    for q, r in enumerate(admitted):
        out += [(f"waiting pass: admits request {r.id} as the head", r.id, z3.BoolVal(waiting[q].id == r.id)),
                (f"waiting pass: tokens of request {r.id}", tokens[r.id], d.adt(q) == tokens[r.id]),
                (f"waiting pass: blocks of request {r.id}", blocks.get(r.id, 0), d.adb(q) == blocks.get(r.id, 0))]
    spent = sum(tokens.values())
    held = sum(len(r.blocks) for r in running[:kept]) + sum(blocks.values())
    out += [("tokens scheduled", spent, wend.S == spent), ("blocks held after the passes", held, wend.H == held)]
    bk = block_of(state, entry)
    took = {rid: b.count(bk) for rid, b in entry.allocated}
    holders = sum(r.blocks.count(bk) for r in running[:kept]) + sum(took.values())
    out.append((f"block {bk}: held after the passes", holders, wend.K == holders))
    return out


def pin_takes(d: Data, state, entry) -> list:
    """The spec's allocations at the block id ``block_of`` as the loops' takes (the allocator's choice: the loops
    allow any that keeps its contract, so the spec's must be one of them)."""
    gone = set(entry.aborted)
    running = [p for p in state.running if p.id not in gone]
    waiting = [p for p in state.waiting if p.id not in gone]
    bk = block_of(state, entry)
    took = {rid: b.count(bk) for rid, b in entry.allocated}
    tokens = dict(entry.scheduled)
    admitted = [r for r in waiting if r.id in tokens]
    return ([d.tk(p) == took.get(r.id, 0) for p, r in enumerate(running) if tokens.get(r.id, 0) > 0]
            + [d.tw(q) == took.get(r.id, 0) for q, r in enumerate(admitted)])


def find_run(claim: str, mutant: str | None, max_running: int = 3, max_waiting: int = 2) -> dict | None:
    """A concrete run of the loops (block_size 1, values <= 6, at most ``max_running`` running and ``max_waiting``
    waiting requests) whose end breaks ``claim`` ("budget" or "capacity"), or None: a failed obligation is called
    refuted only when such a run exists."""
    for R in range(1, max_running + 1):
        for W in range(0, max_waiting + 1):
            d = make_data("c")
            u = unroll(d, 3 * R + 1, W + 1, mutant, "c")
            small = [d.R == R, d.W == W, d.B <= 6, d.NB <= 6, d.M <= 4, d.T >= 0, d.T <= 3]
            for p in range(R):
                small += [d.comp(p) >= 0, d.need(p) >= 1, d.need(p) <= 6, d.comp(p) <= 6, d.hb(p) == d.comp(p),
                          d.pb(p + 1) == d.pb(p) + d.hb(p)]
            for q in range(W):
                small += [d.wk(q) >= 1, d.wk(q) <= 6, d.warr(q) >= 0, d.warr(q) <= 3]
            small += [u.H0 <= d.NB, d.pk(R) <= 1, d.R <= d.M]
            for p in range(R):
                small += [d.hk(p) >= 0, d.hk(p) <= d.hb(p), d.pk(p + 1) == d.pk(p) + d.hk(p)]
            end = u.waits[-1]
            broken = {"budget": end.S > d.B, "capacity": end.H > d.NB,
                      "exclusive": z3.Or(end.K > 1, d.tks(u.runs[-1].L) + d.tws(end.q) > 1),
                      "seats": end.nr > d.M}[claim]
            solver = _solver()
            solver.add(*u.constraints, *small, *blocks_exact_at(d, 1, blk_terms(d, u)), broken)
            if solver.check() == z3.sat:
                m = solver.model()

                def val(term):
                    return m.eval(term, model_completion=True).as_long()

                breaks = {"budget": "token_budget", "capacity": "kv_capacity", "exclusive": "kv_exclusive",
                          "seats": "slot_bound"}[claim]
                return {"breaks": f"{breaks} (any n)",
                        "running": [{"known - computed": val(d.need(p)), "computed": val(d.comp(p)),
                                     "blocks": val(d.hb(p)), "holds bk": val(d.hk(p))} for p in range(R)],
                        "waiting": [{"known": val(d.wk(q)), "arrival": val(d.warr(q))} for q in range(W)],
                        "config": {"token_budget": val(d.B), "num_blocks": val(d.NB), "max_seqs": val(d.M),
                                   "block_size": 1, "chunked_prefill": z3.is_true(m.eval(d.chunked, True))},
                        "tick": val(d.T), "scheduled": val(end.S), "held": val(end.H)}
    return None


def confirmed(result: dict, claim: str, mutant: str | None) -> dict:
    """A failed obligation becomes ``refuted`` with a concrete run of the loops that breaks the claim, else
    ``unknown`` (the invariant is too weak, or the claim fails only outside the small runs searched)."""
    if result["status"] != REFUTED:
        return result
    run = find_run(claim, mutant)
    if run is not None:
        return {**result, "counterexample": run, "detail": f"{result['detail']}; a run of the loops breaks the claim"}
    return {**result, "status": UNKNOWN, "detail": f"{result['detail']} (no run of at most 3 running and 2 waiting "
                                                   "requests breaks the claim: the invariant may be too weak)"}
