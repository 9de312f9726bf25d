"""The SMT encoding of the serving model's one tick (``spec.serving.step``) for n symbolic requests, as (init, trans).

What it establishes: nothing by itself; it is the model that
``proofs.smt.serving_claims`` proves things about.  ``tests/test_z3_serving_model.py``
checks with Hypothesis, on reachable states of valid inputs (aborts, preemption,
chunked and unchunked prefill), that ``trans`` with the state's values plugged in
has exactly one successor and that it decodes to ``spec.serving.step``'s next state
(block ids aside, see below), and that each encoded predicate agrees with the
registry's Python predicate.

The representation (one per n; every value an unbounded z3 Int):

- constants of the input: per request, in FCFS order by (arrival, id) as
  ``spec.serving.initial`` sorts them, ``rid``, ``arr``, ``prompt``, ``output``,
  ``has_abort``/``abort``; the config ``max_seqs``, ``budget``, ``block_size``,
  ``num_blocks`` and ``chunked`` (a Bool): all symbolic, any size;
- state variables per request: ``st`` (0 waiting, 1 running, 2 finished, 3 aborted:
  one place per request), ``c`` (computed), ``g`` (generated), ``b`` (blocks held,
  a count), the counters of ``Progress`` (start, first token, preemptions, total,
  recomputed, admitted, each with a has-flag where it may be None), ``et`` (the tick
  it ended), a running rank ``rr`` (running order is increasing ``rr``; an admission
  takes the next rank, ``nr``) and a waiting rank ``wr`` (queue order is increasing
  ``wr``: a never-admitted request has ``wr = i``, a preempted one takes the next
  front rank ``wf - 1``, ``wf - 2``...); and the latest tick's entry per request
  (``sn`` tokens scheduled, 0 when not scheduled; preempted, aborted, finished flags;
  blocks freed and allocated, as counts) with its tick;
- the running pass is written without a loop: request r keeps its place exactly
  when the blocks held by the running requests up to r plus what they take this
  tick fit in the pool (that sum grows along the running order, so the kept ones
  are a prefix and the rest, the preempted, the suffix the pass pops);
  each one's tokens are min(known - computed, budget left by those before it).
  The waiting pass admits the queue's prefix whose every member passes the
  admission test given those before it;
- the tick's reused terms (prefix sums, each request's tokens and blocks, kept,
  admission tests and admissions, amounts) are fresh named constants, each pinned
  by one definition over the pre-state and the names before it (``StepTerms.names``),
  so that every state has exactly one valuation of them.

Block ids are abstracted to counts: a request holds ``b`` blocks and the pool has
``num_blocks - sum(b)`` free.  What needs the ids (``kv_exclusive``; the id ranges
of ``kv_capacity``; which ids ``kv_exact``'s allocations reuse) is not in this
encoding: ``proofs.smt.serving_blocks`` adds per-request state about one symbolic block id on top of it.  ``blocks_for`` (ceil(tokens / block_size)) is an uninterpreted function
``blk`` with the properties the proofs need (``blocks_axioms``: 0 at 0, >= 1 above,
at most the tokens, monotone), each proved of ceil for symbolic ``block_size`` by
the row ``lemma:blocks_for_axioms``; the model test adds its exact definition
(``blocks_exact``) with ``block_size`` concrete.

The latest entry keeps per request the tokens scheduled, not the order of the
entry's list: ``running_first`` and ``work_conserving`` are encoded in the set form
their registry predicates take on entries written running pass first, then waiting
pass (``enc_running_first``, ``enc_work_conserving`` say what is left out).

Assumptions: requests sorted by (arrival, id) with distinct ids.  Bounds: n fixed
per encoding (a Python int); values unbounded.

Mutants (``MUTANTS``): broken variants of the step that the claims must refute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import z3

WAITING, RUNNING, FINISHED, ABORTED = 0, 1, 2, 3

MUTANTS = {
    "contradictory_step": "the step definitions carry a contradiction: no state has a successor",
    "admit_while_le_seqs": "admission runs while running <= max_seqs (one request too many)",
    "budget_plus_one": "the running pass spends token_budget + 1",
    "pool_plus_one": "the running pass believes the pool has one block more",
    "abort_not_in_ledger": "an aborted request's cached tokens are not counted as aborted work",
    "admit_before_arrival": "admission takes requests that arrive one tick later",
    "preempt_keeps_computed": "a preempted request keeps its computed count in the waiting queue",
    "abort_one_late": "a request leaves one tick after its abort tick",
    "admit_after_preemption": "the waiting pass runs even in a tick that preempted",
    "resume_in_fcfs_place": "a preempted request goes back to its FCFS place, not the front",
    "clock_minus_one": "the clock after a tick is tick - 1 instead of tick + 1",
    "clock_skips": "the clock after a tick is tick + 2",
    "jump_one_late": "an idle engine jumps to one tick after the next arrival",
    "queue_reversed": "the initial waiting queue is in reverse FCFS order",
    "admitted_not_recorded": "an admission does not record its tick as the latest admission",
    "allocate_one_less": "a running request that grows takes one block fewer than it needs",
    "floor_blocks": "blocks_for rounds down (floor) instead of up",
    "drop_feasible_pool": "the encoding drops the domain rule that a request's peak need fits the pool",
    "drop_feasible_budget": "the encoding drops the rule that without chunking prompt + output - 1 <= token_budget",
    "running_no_partial": "the running pass skips a running request whose need exceeds the budget left (no partial chunk)",
    "admit_only_the_head": "the waiting pass admits at most the head of the queue per tick",
    # the per-block step's mutants (proofs.smt.serving_blocks.MUTANTS; the count step ignores them)
    "allocate_held_id": "the allocator may take an id that a running request still holds",
    "allocate_outside_pool": "the allocator may take the id num_blocks (one past the pool)",
    "take_not_recorded": "a running request that takes an id does not add it to its blocks",
    "free_without_giving_back": "a preempted request's freed list does not give back the ids it held",
    "preempted_keeps_ids": "a preempted request keeps its block ids in the waiting queue",
    # the any-n folds' lemma (proofs.smt.serving_fold)
    "negative_block_counts": "a request's block count may be negative (the filter lemma loses its hypothesis)",
    # the per-block prefix-caching system's mutants (proofs.smt.serving_cache; the count step ignores them)
    "release_shared_block": "with prefix caching, a release puts a block in the free queue though another request holds it",
    "hit_other_chain": "with prefix caching, an admission hits a registered block whatever chain it is registered under",
    "take_keeps_registration": "with prefix caching, taking a block from the free queue leaves it in the cache (stale)",
    "register_skips_content": "with prefix caching, registering a full block does not record the KV it holds",
    "refcount_allows_leak": "the caching encoding of refcount_exact forgets the leak (a taken block neither held nor queued)",
    # a mistranslated predicate (the validation against the registry refutes it: proofs.smt.conformance)
    "token_budget_strict": "the encoding of token_budget says the latest tick scheduled < token_budget tokens, not <=",
}
ENCODING_MUTANTS = ("drop_feasible_pool", "drop_feasible_budget")
PREDICATE_MUTANTS = ("token_budget_strict",)  # mutants of a predicate's encoding, not of the step
INIT_MUTANTS = ("queue_reversed",)  # change Init, not the step


@dataclass(frozen=True)
class Inputs:
    """The constants of one symbolic call: n requests in FCFS order and the config."""

    n: int
    rid: tuple
    arr: tuple
    prompt: tuple
    output: tuple
    has_abort: tuple
    abort: tuple
    max_seqs: z3.ArithRef
    budget: z3.ArithRef
    block_size: z3.ArithRef
    num_blocks: z3.ArithRef
    chunked: z3.BoolRef
    blk: z3.FuncDeclRef

    def work(self, i: int) -> z3.ArithRef:
        return self.prompt[i] + self.output[i] - 1


FIELDS = ("st", "c", "g", "b", "start", "hs", "ft", "hft", "pre", "tot", "rec", "adm", "hadm", "rr", "wr", "et",
          "sn", "pe", "ab", "fi", "fr", "al")
BOOL_FIELDS = ("hs", "hft", "hadm", "pe", "ab", "fi")
GLOBALS = ("clock", "nr", "wf", "led_c", "led_u", "led_r", "led_a", "lt")


@dataclass(frozen=True)
class Vars:
    """The state variables of one frame: per-request tuples by field name, and the globals."""

    per: dict
    glob: dict
    hl: z3.BoolRef  # a latest entry exists

    def __getattr__(self, name):
        if name in ("per", "glob", "hl"):
            raise AttributeError(name)
        if name in self.per:
            return self.per[name]
        if name in self.glob:
            return self.glob[name]
        raise AttributeError(name)


def make_inputs(n: int, prefix: str = "", block_size: int | None = None) -> Inputs:
    """Fresh constants for n requests (``block_size`` concrete when given, for the model test)."""
    assert n >= 0, f"n={n!r}: expected an int >= 0"

    def ints(name):
        return tuple(z3.Int(f"{prefix}{name}{i}") for i in range(n))

    return Inputs(
        n, ints("rid"), ints("arr"), ints("prompt"), ints("output"),
        tuple(z3.Bool(f"{prefix}hab{i}") for i in range(n)), ints("abort"),
        z3.Int(f"{prefix}max_seqs"), z3.Int(f"{prefix}budget"),
        z3.IntVal(block_size) if block_size is not None else z3.Int(f"{prefix}block_size"),
        z3.Int(f"{prefix}num_blocks"), z3.Bool(f"{prefix}chunked"),
        z3.Function(f"{prefix}blk", z3.IntSort(), z3.IntSort()),
    )


def make_vars(inp: Inputs, tag: str) -> Vars:
    """Fresh state variables for one frame, named with ``tag``."""
    per = {}
    for name in FIELDS:
        maker = z3.Bool if name in BOOL_FIELDS else z3.Int
        per[name] = tuple(maker(f"{name}{i}_{tag}") for i in range(inp.n))
    glob = {name: z3.Int(f"{name}_{tag}") for name in GLOBALS}
    return Vars(per, glob, z3.Bool(f"hl_{tag}"))


# --- helpers -------------------------------------------------------------------------


def _all(terms) -> z3.BoolRef:
    terms = list(terms)
    return z3.And(terms) if terms else z3.BoolVal(True)


def _any(terms) -> z3.BoolRef:
    terms = list(terms)
    return z3.Or(terms) if terms else z3.BoolVal(False)


def call_text(val: dict) -> str:
    """A model's values as the call ``serve(requests, config)`` they stand for."""
    requests = []
    for i in range(len(val["rid"])):
        r = {"id": val["rid"][i], "arrival": val["arr"][i], "prompt": val["prompt"][i], "output": val["output"][i]}
        if val["has_abort"][i]:
            r["abort"] = val["abort"][i]
        requests.append(r)
    config = {"max_seqs": val["max_seqs"], "token_budget": val["budget"], "block_size": val["block_size"],
              "num_blocks": val["num_blocks"], "chunked_prefill": val["chunked"]}
    return f"serve({requests!r}, {config!r})"


def total(terms) -> z3.ArithRef:
    terms = list(terms)
    return z3.Sum(terms) if terms else z3.IntVal(0)


def count(conds) -> z3.ArithRef:
    return total(z3.If(c, 1, 0) for c in conds)


def zmin(a, b):
    return z3.If(a <= b, a, b)


def zmax(a, b):
    return z3.If(a >= b, a, b)


def waiting(s: Vars, i: int) -> z3.BoolRef:
    return s.st[i] == WAITING


def running(s: Vars, i: int) -> z3.BoolRef:
    return s.st[i] == RUNNING


def finished(s: Vars, i: int) -> z3.BoolRef:
    return s.st[i] == FINISHED


def aborted(s: Vars, i: int) -> z3.BoolRef:
    return s.st[i] == ABORTED


def unfinished(s: Vars, i: int) -> z3.BoolRef:
    return z3.Or(waiting(s, i), running(s, i))


def known(inp: Inputs, s: Vars, i: int) -> z3.ArithRef:
    return inp.prompt[i] + s.g[i]


def scheduled(s: Vars, i: int) -> z3.BoolRef:
    return z3.And(s.hl, s.sn[i] >= 1)


# --- the domain and blocks_for ---------------------------------------------------------


def domain(inp: Inputs, mutant: str | None = None) -> list:
    """The rules of ``spec.serving.domain`` on the constants, and the FCFS order of the representation."""
    assert mutant is None or mutant in MUTANTS, f"mutant={mutant!r}: expected one of {sorted(MUTANTS)}"
    n = inp.n
    rules = [inp.max_seqs >= 1, inp.budget >= 1, inp.block_size >= 1, inp.num_blocks >= 1]
    for i in range(n):
        rules += [inp.arr[i] >= 0, inp.prompt[i] >= 1, inp.output[i] >= 1,
                  z3.Implies(inp.has_abort[i], inp.abort[i] >= inp.arr[i])]
        if mutant != "drop_feasible_pool":
            rules.append(inp.blk(inp.work(i)) <= inp.num_blocks)
        if mutant != "drop_feasible_budget":
            rules.append(z3.Implies(z3.Not(inp.chunked), inp.work(i) <= inp.budget))
    if n > 1:
        rules.append(z3.Distinct(*inp.rid))
    for i in range(n - 1):
        rules += [inp.arr[i] <= inp.arr[i + 1], z3.Implies(inp.arr[i] == inp.arr[i + 1], inp.rid[i] < inp.rid[i + 1])]
    return rules


def blocks_axioms(inp: Inputs, args) -> list:
    """The properties of blocks_for that the proofs use, instantiated at the given ``(request, term)`` arguments.

    For every argument t >= 0: blk(t) >= 0, blk(0) = 0, 1 <= blk(t) <= t when t >= 1;
    for every pair of arguments of one request: 0 <= t1 <= t2 implies blk(t1) <= blk(t2)."""
    groups: dict = {}
    for i, a in args:
        a = z3.simplify(a)
        groups.setdefault(i, {})[a.get_id()] = a
    ax = []
    for terms in groups.values():
        uniq = list(terms.values())
        for t in uniq:
            q = inp.blk(t)
            ax += [z3.Implies(t >= 0, q >= 0), z3.Implies(t == 0, q == 0), z3.Implies(t >= 1, z3.And(q >= 1, q <= t))]
        for x in uniq:
            for y in uniq:
                if x.get_id() != y.get_id():
                    ax.append(z3.Implies(z3.And(0 <= x, x <= y), inp.blk(x) <= inp.blk(y)))
    return ax


def blocks_exact(inp: Inputs, args) -> list:
    """blk(t) = ceil(t / block_size) at each argument (linear when block_size is concrete)."""
    out = []
    for _, t in args:
        q = inp.blk(t)
        out.append(z3.Implies(t >= 0, z3.And(inp.block_size * q >= t, inp.block_size * (q - 1) < t)))
    return out


def frame_block_args(inp: Inputs, s: Vars) -> list:
    """The blocks_for arguments a frame's predicates use: each computed, each work, what each would ask as the queue's head."""
    return ([(i, s.c[i]) for i in range(inp.n)] + [(i, inp.work(i)) for i in range(inp.n)]
            + [(i, head_ask(inp, s, i)) for i in range(inp.n)])


# --- init and the step ---------------------------------------------------------------


def init(inp: Inputs, s: Vars, mutant: str | None = None) -> z3.BoolRef:
    """``spec.serving.initial``: every request waiting in FCFS order with zero counters; no latest entry."""
    terms = [s.clock == 0, s.nr == 0, s.wf == 0, s.led_c == 0, s.led_u == 0, s.led_r == 0, s.led_a == 0,
             z3.Not(s.hl), s.lt == 0]
    for i in range(inp.n):
        terms += [s.st[i] == WAITING, s.c[i] == 0, s.g[i] == 0, s.b[i] == 0, z3.Not(s.hs[i]), z3.Not(s.hft[i]),
                  s.pre[i] == 0, s.tot[i] == 0, s.rec[i] == 0, z3.Not(s.hadm[i]),
                  s.wr[i] == (inp.n - 1 - i if mutant == "queue_reversed" else i),
                  s.start[i] == 0, s.ft[i] == 0, s.adm[i] == 0, s.rr[i] == 0, s.et[i] == 0,
                  s.sn[i] == 0, z3.Not(s.pe[i]), z3.Not(s.ab[i]), z3.Not(s.fi[i]), s.fr[i] == 0, s.al[i] == 0]
    return _all(terms)


def is_terminal(inp: Inputs, s: Vars) -> z3.BoolRef:
    return z3.Not(_any(unfinished(s, i) for i in range(inp.n)))


@dataclass(frozen=True)
class StepTerms:
    """One tick's values as terms over the current frame and fresh named constants.

    ``names``: one definition ``constant == term`` per named constant, each term over the pre-state and the
    names before it, so every state has exactly one valuation of them (the step stays total by construction);
    ``defs``: any other constraint of the tick (none, but in the ``contradictory_step`` mutant)."""

    defs: tuple
    names: tuple
    tick: z3.ArithRef
    leave: tuple
    kept: tuple
    pre: tuple
    n_run: tuple
    extra: tuple
    admit: tuple
    n_adm: tuple
    q_adm: tuple
    amount: tuple
    gen: tuple
    finish: tuple
    any_pre: z3.BoolRef
    block_args: tuple
    next: dict  # field -> tuple (per request) or term (globals), and "hl"
    before: tuple = ()  # the running pass: each request's ``before`` (the needs of the running ones ahead of it)
    run_budget: object = None  # the budget the running pass gives out (``token_budget``, but in a mutant)
    budget_kept: object = None  # the budget the running pass leaves to the waiting pass
    waiting_pass: dict = None  # its terms: "left", "ok", "pos", "free_adm" (tuples), "free_kept", "running_kept"
    run1: tuple = ()  # per request: running before the tick and not leaving in it (the running pass's requests)
    wait1: tuple = ()  # per request: waiting before the tick and not leaving in it (the waiting pass's queue)


def step_terms(inp: Inputs, s: Vars, mutant: str | None = None, tag: str = "x") -> StepTerms:
    """``spec.serving.step`` as terms: leave, abort, jump, running pass, waiting pass, compute."""
    assert mutant is None or mutant in MUTANTS, f"mutant={mutant!r}: expected one of {sorted(MUTANTS)}"
    n = inp.n
    idx = range(n)
    defs, names = [], []
    if mutant == "contradictory_step":
        defs.append(z3.BoolVal(False))

    def name(kind, i, term):
        # a fresh constant for a term the rest of the tick reuses, pinned by one definition over the pre-state and
        # the names before it: the solver treats it as one atom instead of unfolding its sums and Ifs at every use
        v = (z3.Bool if z3.is_bool(term) else z3.Int)(f"{kind}{i}_{tag}")
        names.append(v.__eq__(term))  # not v == term: a numeral term (a subclass) would swap the sides
        return v

    def aborting(i, t):
        if mutant == "abort_one_late":
            return z3.And(unfinished(s, i), inp.has_abort[i], inp.abort[i] + 1 <= t)
        return z3.And(unfinished(s, i), inp.has_abort[i], inp.abort[i] <= t)

    # steps 2-3: aborts and the idle jump
    jump = z3.And(z3.Not(_any(aborting(i, s.clock) for i in idx)), z3.Not(_any(running(s, i) for i in idx)),
                  z3.Not(_any(z3.And(waiting(s, i), inp.arr[i] <= s.clock) for i in idx)))
    # in a jump nothing waiting has arrived, so nothing preempted waits: the earliest arrival is the lowest index's
    earliest = z3.IntVal(0)
    for i in reversed(idx):
        earliest = z3.If(waiting(s, i), inp.arr[i], earliest)
    tick = name("tick", "", z3.If(jump, earliest + (1 if mutant == "jump_one_late" else 0), s.clock))
    leave = tuple(name("leave", i, aborting(i, tick)) for i in idx)
    run1 = tuple(z3.And(running(s, i), z3.Not(leave[i])) for i in idx)
    wait1 = tuple(z3.And(waiting(s, i), z3.Not(leave[i])) for i in idx)

    # step 4: the running pass
    budget = inp.budget + (1 if mutant == "budget_plus_one" else 0)
    pool = inp.num_blocks + (1 if mutant == "pool_plus_one" else 0)
    # greedy min(known - computed, budget left): budget left before r is max(0, budget - the needs before r)
    n_run, extra, block_args, befores = [], [], [], []
    for i in idx:
        before = name("before", i, total(z3.If(z3.And(run1[j], s.rr[j] < s.rr[i]), known(inp, s, j) - s.c[j], 0) for j in idx if j != i))
        befores.append(before)
        need = known(inp, s, i) - s.c[i]
        give = zmin(need, zmax(0, budget - before))
        if mutant == "running_no_partial":
            give = z3.If(need <= zmax(0, budget - before), need, 0)
        n_run.append(name("nrun", i, z3.If(run1[i], give, 0)))
        grow = s.c[i] + n_run[i]
        block_args.append((i, grow))
        want = inp.blk(grow) - s.b[i] - (1 if mutant == "allocate_one_less" else 0)
        extra.append(name("extra", i, z3.If(z3.And(run1[i], n_run[i] != 0, want > 0), want, 0)))
    n_run, extra = tuple(n_run), tuple(extra)
    kept = []
    for i in idx:
        upto = name("upto", i, total(z3.If(z3.And(run1[j], s.rr[j] <= s.rr[i]), s.b[j] + extra[j], 0) for j in idx))
        kept.append(name("kept", i, z3.And(run1[i], upto <= pool)))
    kept = tuple(kept)
    pre = tuple(z3.And(run1[i], z3.Not(kept[i])) for i in idx)
    any_pre = _any(pre)
    budget1 = name("budget_kept", "", inp.budget - total(z3.If(kept[i], n_run[i], 0) for i in idx))
    free1 = name("free_kept", "", inp.num_blocks - total(z3.If(kept[i], s.b[i] + extra[i], 0) for i in idx))
    running1 = name("running_kept", "", count(kept))

    # step 5: the waiting pass (FCFS, no skipping), only when nobody was preempted
    # each waiting request's chunk given that every one before it in the queue was admitted
    firsts, n_adm, lefts = [], [], []
    for j in idx:
        first = [(m, z3.And(wait1[m], s.wr[m] < s.wr[j])) for m in idx if m != j]
        firsts.append(first)
        left = name("left", j, zmax(0, budget1 - total(z3.If(f, known(inp, s, m), 0) for m, f in first)))
        lefts.append(left)
        kn = known(inp, s, j)
        n_adm.append(name("nadm", j, z3.If(inp.chunked, zmin(kn, left), kn)))
    n_adm = tuple(n_adm)
    q_adm = tuple(inp.blk(n_adm[i]) for i in idx)
    block_args += list(enumerate(n_adm))
    ok = []
    pos, frees = [], []
    for j in idx:
        first = firsts[j]
        pos_j = name("pos", j, count(f for _, f in first))
        pos.append(pos_j)
        left = lefts[j]
        free = name("free_adm", j, free1 - total(z3.If(f, q_adm[m], 0) for m, f in first))
        frees.append(free)
        kn = known(inp, s, j)
        ready = inp.arr[j] <= tick + (1 if mutant == "admit_before_arrival" else 0)
        seats = (running1 + pos_j <= inp.max_seqs) if mutant == "admit_while_le_seqs" else (running1 + pos_j < inp.max_seqs)
        if mutant == "admit_only_the_head":
            seats = z3.And(seats, pos_j == 0)
        ok.append(name("ok", j, z3.And(ready, seats, left > 0, z3.Or(inp.chunked, kn <= left), q_adm[j] <= free)))
    gate = z3.BoolVal(True) if mutant == "admit_after_preemption" else z3.Not(any_pre)
    admit = tuple(name("admit", j,
        z3.And(wait1[j], gate, ok[j],
               _all(z3.Implies(z3.And(wait1[m], s.wr[m] < s.wr[j]), ok[m]) for m in idx if m != j)))
        for j in idx
    )

    # step 6: compute
    nxt: dict = {name: [None] * n for name in FIELDS}
    amount, gen, finish = [], [], []
    for i in idx:
        run_sched = z3.And(kept[i], n_run[i] >= 1)
        amt = name("amt", i, z3.If(run_sched, n_run[i], z3.If(admit[i], n_adm[i], 0)))
        amount.append(amt)
        comp = s.c[i] + amt
        kn = known(inp, s, i)
        generates = z3.And(amt >= 1, comp == kn)
        gen.append(generates)
        g1 = s.g[i] + z3.If(generates, 1, 0)
        fin = z3.And(generates, g1 == inp.output[i])
        finish.append(fin)
        held = z3.If(kept[i], s.b[i] + extra[i], z3.If(admit[i], q_adm[i], s.b[i]))
        nxt["st"][i] = z3.If(leave[i], ABORTED, z3.If(fin, FINISHED, z3.If(pre[i], WAITING,
                             z3.If(z3.Or(kept[i], admit[i]), RUNNING, s.st[i]))))
        nxt["c"][i] = comp if mutant == "preempt_keeps_computed" else z3.If(pre[i], 0, comp)
        nxt["g"][i] = g1
        nxt["b"][i] = z3.If(z3.Or(leave[i], pre[i], fin), 0, held)
        fresh_start = z3.And(admit[i], z3.Not(s.hs[i]))
        nxt["start"][i] = z3.If(fresh_start, tick, s.start[i])
        nxt["hs"][i] = z3.Or(s.hs[i], admit[i])
        first_tok = z3.And(generates, z3.Not(s.hft[i]))
        nxt["ft"][i] = z3.If(first_tok, tick + 1, s.ft[i])
        nxt["hft"][i] = z3.Or(s.hft[i], generates)
        nxt["pre"][i] = s.pre[i] + z3.If(pre[i], 1, 0)
        nxt["tot"][i] = s.tot[i] + amt
        nxt["rec"][i] = s.rec[i] + z3.If(pre[i], s.c[i], 0)
        nxt["adm"][i] = s.adm[i] if mutant == "admitted_not_recorded" else z3.If(admit[i], tick, s.adm[i])
        nxt["hadm"][i] = z3.Or(s.hadm[i], admit[i])
        nxt["rr"][i] = z3.If(admit[i], s.nr + pos[i], s.rr[i])
        behind = count(z3.And(pre[j], s.rr[j] >= s.rr[i]) for j in idx)
        nxt["wr"][i] = z3.If(pre[i], i if mutant == "resume_in_fcfs_place" else s.wf - behind, s.wr[i])
        nxt["et"][i] = z3.If(leave[i], tick, z3.If(fin, tick + 1, s.et[i]))
        nxt["sn"][i] = amt
        nxt["pe"][i] = pre[i]
        nxt["ab"][i] = leave[i]
        nxt["fi"][i] = fin
        nxt["fr"][i] = z3.If(z3.Or(leave[i], pre[i]), s.b[i], z3.If(fin, held, 0))
        nxt["al"][i] = z3.If(run_sched, extra[i], z3.If(admit[i], q_adm[i], 0))
    nxt = {k: tuple(v) for k, v in nxt.items()}
    nxt["clock"] = tick + {"clock_minus_one": -1, "clock_skips": 2}.get(mutant, 1)
    nxt["nr"] = s.nr + count(admit)
    nxt["wf"] = s.wf - count(pre)
    nxt["led_c"] = s.led_c + total(amount)
    nxt["led_u"] = s.led_u + total(z3.If(finish[i], inp.work(i), 0) for i in idx)
    recomputed = total(z3.If(pre[i], s.c[i], 0) for i in idx)
    nxt["led_r"] = s.led_r + recomputed
    aborted_work = 0 if mutant == "abort_not_in_ledger" else total(z3.If(leave[i], s.c[i], 0) for i in idx)
    nxt["led_a"] = s.led_a + aborted_work
    nxt["lt"] = tick
    nxt["hl"] = z3.BoolVal(True)
    return StepTerms(tuple(defs), tuple(names), tick, leave, kept, pre, n_run, extra, admit, n_adm, q_adm, tuple(amount),
                     tuple(gen), tuple(finish), any_pre, tuple(block_args), nxt, tuple(befores), budget, budget1,
                     {"left": tuple(lefts), "ok": tuple(ok), "pos": tuple(pos), "free_adm": tuple(frees),
                      "free_kept": free1, "running_kept": running1}, run1, wait1)


def equal_to_terms(inp: Inputs, t: Vars, terms: StepTerms) -> list:
    """The next frame equals the step's terms."""
    eqs = list(terms.defs) + list(terms.names)
    for name in FIELDS:
        eqs += [t.per[name][i] == terms.next[name][i] for i in range(inp.n)]
    eqs += [t.glob[name] == terms.next[name] for name in GLOBALS]
    eqs.append(t.hl == terms.next["hl"])
    return eqs


def transition(inp: Inputs, s: Vars, t: Vars, mutant: str | None = None, tag: str = "x"):
    """``(trans, terms)``: the step relation from a non-terminal frame, and its terms."""
    terms = step_terms(inp, s, mutant, tag)
    return z3.And([z3.Not(is_terminal(inp, s))] + equal_to_terms(inp, t, terms)), terms


# --- the registry's state predicates, encoded --------------------------------------------


def enc_well_typed(inp: Inputs, s: Vars) -> z3.BoolRef:
    terms = [inp.max_seqs >= 1, inp.budget >= 1, inp.block_size >= 1, inp.num_blocks >= 1, s.clock >= 0,
             s.led_c >= 0, s.led_u >= 0, s.led_r >= 0, s.led_a >= 0, z3.Implies(s.hl, s.lt >= 0)]
    for i in range(inp.n):
        terms += [s.st[i] >= WAITING, s.st[i] <= ABORTED, s.c[i] >= 0, s.g[i] >= 0, s.pre[i] >= 0,
                  s.tot[i] >= 0, s.rec[i] >= 0, s.b[i] >= 0]
    return _all(terms)


def enc_no_duplicate_active(inp: Inputs, s: Vars) -> z3.BoolRef:
    # One record per request, distinct ids (the domain): a request runs once and has one sn.
    return _all(inp.rid[i] != inp.rid[j] for i in range(inp.n) for j in range(i + 1, inp.n))


def enc_no_start_before_arrival(inp: Inputs, s: Vars) -> z3.BoolRef:
    return _all(
        z3.And(z3.Implies(s.hs[i], s.start[i] >= inp.arr[i]),
               z3.Implies(scheduled(s, i), z3.And(s.lt >= inp.arr[i],
                                                  z3.Not(z3.And(inp.has_abort[i], s.lt >= inp.abort[i])))))
        for i in range(inp.n)
    )


def enc_slot_bound(inp: Inputs, s: Vars) -> z3.BoolRef:
    return z3.And(count(running(s, i) for i in range(inp.n)) <= inp.max_seqs,
                  z3.Implies(s.hl, count(s.sn[i] >= 1 for i in range(inp.n)) <= inp.max_seqs))


def enc_nonnegative_remaining(inp: Inputs, s: Vars) -> z3.BoolRef:
    terms = []
    for i in range(inp.n):
        terms += [s.c[i] >= 0, s.c[i] <= known(inp, s, i), s.g[i] >= 0, s.g[i] <= inp.output[i],
                  z3.Implies(waiting(s, i), s.c[i] == 0), z3.Implies(unfinished(s, i), s.g[i] < inp.output[i]),
                  z3.Implies(s.hl, s.sn[i] >= 0)]
    return _all(terms)


def _tag(s: Vars) -> str:
    return str(s.clock)[len("clock_"):]


def _shares(inp: Inputs, s: Vars) -> dict:
    """Named per-request shares of the ledger (opaque constants, so that sums of them stay linear)."""
    tag = _tag(s)
    return {k: tuple(z3.Int(f"{k}{i}_{tag}") for i in range(inp.n)) for k in ("uw", "ur", "uf", "ua")}


def frame_defs(inp: Inputs, s: Vars) -> list:
    """The definitions of a frame's named shares: add them for every frame a check uses."""
    sh = _shares(inp, s)
    out = []
    for i in range(inp.n):
        out += [sh["uw"][i] == z3.If(waiting(s, i), s.c[i], 0), sh["ur"][i] == z3.If(running(s, i), s.c[i], 0),
                sh["uf"][i] == z3.If(finished(s, i), inp.work(i), 0), sh["ua"][i] == z3.If(aborted(s, i), s.c[i], 0)]
    return out


def step_hints(inp: Inputs, s: Vars, t: Vars, terms: StepTerms) -> list:
    """Per-request identities of one step (valid under ``trans``): how each ledger share moves."""
    a, b = _shares(inp, s), _shares(inp, t)
    return [z3.And(b["ua"][i] == a["ua"][i] + z3.If(terms.leave[i], s.c[i], 0),
                   b["uf"][i] == a["uf"][i] + z3.If(terms.finish[i], inp.work(i), 0)) for i in range(inp.n)]


def enc_work_conservation(inp: Inputs, s: Vars) -> z3.BoolRef:
    """The registry's claim, with two per-request facts that it implies given the rest of the invariant
    (a waiting request caches nothing; total = recomputed + its share) stated first, so sums stay linear."""
    n = inp.n
    sh = _shares(inp, s)
    terms = []
    for i in range(n):
        terms += [z3.Implies(z3.Not(finished(s, i)), s.tot[i] == s.c[i] + s.rec[i]),
                  z3.Implies(finished(s, i), z3.And(s.c[i] == inp.work(i), s.tot[i] == inp.work(i) + s.rec[i])),
                  sh["uw"][i] == 0,
                  s.tot[i] == s.rec[i] + sh["ur"][i] + sh["uf"][i] + sh["ua"][i]]
    terms += [
        s.led_c == total(s.tot),
        s.led_r == total(s.rec),
        s.led_a == total(sh["ua"]),
        s.led_u == total(sh["uf"]),
        s.led_c == s.led_u + s.led_r + s.led_a + total(sh["ur"]),
    ]
    return _all(terms)


def enc_every_job_completes_once(inp: Inputs, s: Vars) -> z3.BoolRef:
    terms = []
    for i in range(inp.n):
        terms += [s.st[i] >= WAITING, s.st[i] <= ABORTED,
                  z3.Implies(finished(s, i), s.g[i] == inp.output[i]),
                  z3.Implies(aborted(s, i), z3.And(inp.has_abort[i], s.et[i] == inp.abort[i])),
                  z3.Implies(z3.And(unfinished(s, i), inp.has_abort[i]), inp.abort[i] >= s.clock)]
    return _all(terms)


def max_arrival_bound(inp: Inputs, term) -> z3.BoolRef:
    if inp.n == 0:
        return term <= 0
    return _any(term <= a for a in inp.arr)


def enc_termination(inp: Inputs, s: Vars) -> z3.BoolRef:
    return max_arrival_bound(inp, s.clock - s.led_c - count(aborted(s, i) for i in range(inp.n)))


def enc_token_budget(inp: Inputs, s: Vars) -> z3.BoolRef:
    return z3.Implies(s.hl, total(s.sn) <= inp.budget)


def held(inp: Inputs, s: Vars) -> z3.ArithRef:
    return total(z3.If(running(s, i), s.b[i], 0) for i in range(inp.n))


def enc_kv_capacity(inp: Inputs, s: Vars) -> z3.BoolRef:
    return held(inp, s) <= inp.num_blocks


def enc_kv_exact(inp: Inputs, s: Vars) -> z3.BoolRef:
    terms = []
    for i in range(inp.n):
        terms += [
            z3.Implies(running(s, i), s.b[i] == inp.blk(s.c[i])),
            z3.Implies(z3.Not(running(s, i)), s.b[i] == 0),
            z3.Implies(z3.And(s.hl, s.fr[i] > 0), z3.Or(s.fi[i], s.ab[i], s.pe[i])),
            z3.Implies(z3.And(s.hl, s.fi[i]), z3.And(finished(s, i), s.fr[i] == inp.blk(inp.work(i)))),
            z3.Implies(z3.And(s.hl, s.ab[i]), z3.And(aborted(s, i), s.fr[i] == inp.blk(s.c[i]))),
        ]
    return _all(terms)


def enc_fcfs_admission(inp: Inputs, s: Vars) -> z3.BoolRef:
    n = inp.n
    terms = []
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            fresh_i = z3.And(waiting(s, i), z3.Not(s.hs[i]))
            terms.append(z3.Implies(z3.And(fresh_i, waiting(s, j), s.hs[j]), s.wr[j] < s.wr[i]))
            if i < j:
                terms.append(z3.Implies(z3.And(fresh_i, waiting(s, j), z3.Not(s.hs[j])), s.wr[i] < s.wr[j]))
            terms.append(z3.Implies(z3.And(fresh_i, s.hs[j]), j < i))
    return _all(terms)


def enc_no_admission_after_preemption(inp: Inputs, s: Vars) -> z3.BoolRef:
    anyp = _any(s.pe[i] for i in range(inp.n))
    return z3.Implies(z3.And(s.hl, anyp), _all(
        z3.Implies(s.sn[i] >= 1, z3.Not(z3.And(s.hadm[i], s.adm[i] == s.lt))) for i in range(inp.n)))


def admitted_latest(s: Vars, i: int) -> z3.BoolRef:
    """Request i was admitted in the latest tick (and, so, not preempted in it): the registry's ``fresh``."""
    return z3.And(s.hl, s.hadm[i], s.adm[i] == s.lt, z3.Not(s.pe[i]))


def running_first_parts(inp: Inputs, s: Vars) -> list:
    """``enc_running_first`` one request at a time: request i's part says that if the latest tick admitted anyone, i
    was scheduled in it or is not running or was admitted in it."""
    n = inp.n
    any_fresh = _any(z3.And(scheduled(s, i), admitted_latest(s, i)) for i in range(n))
    return [z3.Implies(any_fresh, z3.Implies(z3.And(running(s, i), z3.Not(z3.And(s.hadm[i], s.adm[i] == s.lt))),
                                             s.sn[i] >= 1))
            for i in range(n)]


def enc_running_first(inp: Inputs, s: Vars) -> z3.BoolRef:
    """The registry's claim as a set: if the latest tick admitted anyone, every running request not admitted in it was scheduled.

    The registry also reads the order of ``latest.scheduled`` (running entries before admitted ones); this
    encoding keeps the scheduled amounts per request, not their order, so that part is not expressed here
    (the step writes the running pass's entries before the waiting pass's by construction)."""
    return _all(running_first_parts(inp, s))


def budget_left_latest(inp: Inputs, s: Vars) -> z3.ArithRef:
    """token_budget less every token the latest entry scheduled."""
    return inp.budget - total(z3.If(scheduled(s, i), s.sn[i], 0) for i in range(inp.n))


def head_ask(inp: Inputs, s: Vars, i: int) -> z3.ArithRef:
    """The tokens request i would ask of the waiting pass as the queue's head after the latest tick."""
    kn = known(inp, s, i)
    return z3.If(inp.chunked, zmin(kn, budget_left_latest(inp, s)), kn)


def enc_work_conserving(inp: Inputs, s: Vars) -> z3.BoolRef:
    """The registry's claim: in a tick without preemption that scheduled something, each admission got its rule's chunk, and the queue's head did not fit.

    The registry subtracts the budget along the entry's order; the encoding has no order, so a partial
    chunk is stated against the whole tick's spend (its budget left is the budget less every other
    request's tokens), which is the same number when the partial chunk is the entry's last, as the
    step writes it (a partial chunk leaves no budget to any later admission)."""
    n = inp.n
    left = budget_left_latest(inp, s)
    spent = inp.budget - left
    terms = []
    for i in range(n):
        mine = z3.If(scheduled(s, i), s.sn[i], 0)
        whole = s.sn[i] == inp.prompt[i] + s.g[i] - 1
        chunk = z3.And(inp.chunked, s.sn[i] == inp.budget - (spent - mine), s.sn[i] < inp.prompt[i] + s.g[i])
        terms.append(z3.Implies(z3.And(scheduled(s, i), admitted_latest(s, i)), z3.Or(whole, chunk)))
    running_then = count(z3.Or(running(s, i), z3.And(s.hl, s.fi[i])) for i in range(n))
    free_then = (inp.num_blocks - total(z3.If(running(s, i), s.b[i], 0) for i in range(n))
                 - total(z3.If(z3.And(s.hl, s.fi[i]), s.fr[i], 0) for i in range(n)))
    for h in range(n):
        is_head = z3.And(waiting(s, h), _all(z3.Implies(waiting(s, j), s.wr[h] < s.wr[j]) for j in range(n) if j != h))
        kn = known(inp, s, h)
        ask = head_ask(inp, s, h)
        stopped = z3.Or(inp.arr[h] > s.lt, running_then >= inp.max_seqs, left <= 0,
                        z3.And(z3.Not(inp.chunked), kn > left), inp.blk(ask) > free_then)
        terms.append(z3.Implies(is_head, stopped))
    guard = z3.And(s.hl, z3.Not(_any(s.pe[i] for i in range(n))), _any(scheduled(s, i) for i in range(n)))
    return _all(z3.Implies(guard, term) for term in terms)  # a conjunction, so that a proof can take it a part at a time


def enc_without_prefix_caching(inp: Inputs, s: Vars) -> z3.BoolRef:
    # Prefix caching (issue 20) is not in this encoding: its configs have prefix_caching absent or false, so
    # spec.serving's State has no pool, and no_false_sharing and refcount_exact hold by their definition.  With
    # caching on, their rows are proofs.smt.serving_cache's (a per-block encoding of the pool).
    return z3.BoolVal(True)


PREDICATES: dict[str, Callable[[Inputs, Vars], z3.BoolRef]] = {
    "well_typed": enc_well_typed,
    "no_duplicate_active": enc_no_duplicate_active,
    "no_start_before_arrival": enc_no_start_before_arrival,
    "slot_bound": enc_slot_bound,
    "nonnegative_remaining": enc_nonnegative_remaining,
    "work_conservation": enc_work_conservation,
    "every_job_completes_once": enc_every_job_completes_once,
    "termination": enc_termination,
    "token_budget": enc_token_budget,
    "kv_capacity": enc_kv_capacity,
    "no_false_sharing": enc_without_prefix_caching,
    "refcount_exact": enc_without_prefix_caching,
    "kv_exact": enc_kv_exact,
    "fcfs_admission": enc_fcfs_admission,
    "no_admission_after_preemption": enc_no_admission_after_preemption,
    "running_first": enc_running_first,
    "work_conserving": enc_work_conserving,
}

# Registry state invariants this encoding does not express, and why.
# kv_exclusive and the id parts of kv_capacity and kv_exact are proved by the per-block encoding,
# proofs.smt.serving_blocks (block ids are counts here).
NOT_ENCODED: dict = {}


# --- strengthening lemmas --------------------------------------------------------------


def lem_ranks(inp: Inputs, s: Vars) -> z3.BoolRef:
    """Running ranks are distinct and below nr; waiting ranks are distinct, a never-admitted one's is its index, a resumed one's is in [wf, 0)."""
    n = inp.n
    terms = [s.wf <= 0, s.nr >= 0]
    for i in range(n):
        terms += [z3.Implies(running(s, i), z3.And(s.rr[i] >= 0, s.rr[i] < s.nr)),
                  z3.Implies(z3.And(waiting(s, i), z3.Not(s.hs[i])), s.wr[i] == i),
                  z3.Implies(z3.And(waiting(s, i), s.hs[i]), z3.And(s.wr[i] >= s.wf, s.wr[i] < 0))]
        for j in range(i + 1, n):
            terms += [z3.Implies(z3.And(running(s, i), running(s, j)), s.rr[i] != s.rr[j]),
                      z3.Implies(z3.And(waiting(s, i), waiting(s, j)), s.wr[i] != s.wr[j])]
    return _all(terms)


def lem_status_history(inp: Inputs, s: Vars) -> z3.BoolRef:
    """A request that is running, finished or preempted was admitted (start set, at or before its latest admission, before the clock); a running one has known - computed >= 1."""
    terms = []
    for i in range(inp.n):
        terms += [
            z3.Implies(z3.Not(waiting(s, i)), z3.Or(aborted(s, i), s.hs[i])),
            s.hs[i] == s.hadm[i],
            z3.Implies(s.hs[i], z3.And(s.start[i] <= s.adm[i], s.adm[i] <= s.clock - 1, s.start[i] >= inp.arr[i])),
            z3.Implies(running(s, i), s.c[i] <= known(inp, s, i) - 1),
            z3.Implies(s.hl, s.lt <= s.clock - 1),
            z3.Implies(z3.Not(s.hl), z3.And(s.clock == 0, s.sn[i] == 0)),
            z3.Implies(s.hl, z3.And(z3.Implies(s.pe[i], waiting(s, i)), z3.Implies(s.fi[i], finished(s, i)),
                                    z3.Implies(s.ab[i], aborted(s, i)))),
        ]
    return _all(terms)


def lem_latest_tick(inp: Inputs, s: Vars) -> z3.BoolRef:
    """The latest tick is the one just before the clock, and what it scheduled was admitted by then."""
    terms = [z3.Implies(s.hl, s.lt == s.clock - 1)]
    for i in range(inp.n):
        terms.append(z3.Implies(scheduled(s, i), z3.And(s.hs[i], s.adm[i] <= s.lt)))
    return _all(terms)


LEMMAS: dict[str, Callable[[Inputs, Vars], z3.BoolRef]] = {
    "ranks": lem_ranks,
    "status_history": lem_status_history,
    "latest_tick": lem_latest_tick,
}


def remaining_work(inp: Inputs, s: Vars) -> z3.ArithRef:
    """``spec.serving.state.remaining_work``: per unfinished request 1 + its work, less the running head's cached tokens."""
    n = inp.n
    head = total(z3.If(z3.And(running(s, i), _all(z3.Implies(running(s, j), s.rr[i] <= s.rr[j])
                                                   for j in range(n) if j != i)), s.c[i], 0) for i in range(n))
    return total(z3.If(unfinished(s, i), 1 + inp.work(i), 0) for i in range(n)) - head


# --- concrete valuations -----------------------------------------------------------------


def valuation_of_state(state) -> dict:
    """The encoding's values for a concrete ``spec.serving.State`` (raises ValueError if not representable)."""
    requests = list(state.requests)
    n = len(requests)
    index = {r.id: i for i, r in enumerate(requests)}
    if len(index) != n:
        raise ValueError("duplicate ids")
    cfg = state.config
    val = {
        "rid": [r.id for r in requests], "arr": [r.arrival for r in requests],
        "prompt": [r.prompt for r in requests], "output": [r.output for r in requests],
        "has_abort": [r.abort is not None for r in requests],
        "abort": [r.abort if r.abort is not None else 0 for r in requests],
        "max_seqs": cfg.max_seqs, "budget": cfg.token_budget, "block_size": cfg.block_size,
        "num_blocks": cfg.num_blocks, "chunked": cfg.chunked_prefill,
        "clock": state.clock, "led_c": state.ledger.computed, "led_u": state.ledger.useful,
        "led_r": state.ledger.recomputed, "led_a": state.ledger.aborted,
    }
    per = {name: [False if name in BOOL_FIELDS else 0 for _ in range(n)] for name in FIELDS}

    def put(i, p, status):
        per["st"][i] = status
        per["c"][i], per["g"][i], per["b"][i] = p.computed, p.generated, len(p.blocks)
        per["hs"][i], per["start"][i] = p.start is not None, p.start or 0
        per["hft"][i], per["ft"][i] = p.first_token is not None, p.first_token or 0
        per["hadm"][i], per["adm"][i] = p.admitted is not None, p.admitted or 0
        per["pre"][i], per["tot"][i], per["rec"][i] = p.preemptions, p.total, p.recomputed

    started = [p for p in state.waiting if p.start is not None]
    for pos, p in enumerate(state.waiting):
        i = index[p.id]
        put(i, p, WAITING)
        per["wr"][i] = pos - len(started) if p.start is not None else i
    for pos, p in enumerate(state.running):
        i = index[p.id]
        put(i, p, RUNNING)
        per["rr"][i] = pos
    for e in state.finished:
        put(index[e.progress.id], e.progress, FINISHED)
        per["et"][index[e.progress.id]] = e.tick
    for e in state.aborted:
        put(index[e.progress.id], e.progress, ABORTED)
        per["et"][index[e.progress.id]] = e.tick
    latest = state.latest
    val["hl"] = latest is not None
    val["lt"] = latest.tick if latest else 0
    if latest is not None:
        for rid, amount in latest.scheduled:
            per["sn"][index[rid]] = amount
        for rid in latest.preempted:
            per["pe"][index[rid]] = True
        for rid in latest.aborted:
            per["ab"][index[rid]] = True
        for rid in latest.finished:
            per["fi"][index[rid]] = True
        for rid, blocks in latest.freed:
            per["fr"][index[rid]] += len(blocks)
        for rid, blocks in latest.allocated:
            per["al"][index[rid]] += len(blocks)
    val["nr"] = len(state.running)
    val["wf"] = -len(started)
    val.update(per)
    return val


def pin(inp: Inputs, s: Vars, val: dict, constants: bool = True) -> list:
    """Equalities that fix a frame (and, with ``constants``, the inputs) to a valuation."""
    eqs = [s.glob[name] == val[name] for name in GLOBALS] + [s.hl == z3.BoolVal(bool(val["hl"]))]
    if constants:
        eqs += [inp.max_seqs == val["max_seqs"], inp.budget == val["budget"], inp.block_size == val["block_size"],
                inp.num_blocks == val["num_blocks"], inp.chunked == z3.BoolVal(bool(val["chunked"]))]
        for i in range(inp.n):
            eqs += [inp.rid[i] == val["rid"][i], inp.arr[i] == val["arr"][i], inp.prompt[i] == val["prompt"][i],
                    inp.output[i] == val["output"][i], inp.has_abort[i] == z3.BoolVal(bool(val["has_abort"][i])),
                    inp.abort[i] == val["abort"][i]]
    for name in FIELDS:
        for i in range(inp.n):
            v = val[name][i]
            eqs.append(s.per[name][i] == (z3.BoolVal(bool(v)) if name in BOOL_FIELDS else v))
    return eqs


def _value(model: z3.ModelRef, term):
    v = model.eval(term, model_completion=True)
    if z3.is_true(v) or z3.is_false(v):
        return z3.is_true(v)
    if z3.is_int_value(v):
        return v.as_long()
    return str(v)


def read_inputs(model: z3.ModelRef, inp: Inputs) -> dict:
    val = {name: [_value(model, x) for x in getattr(inp, name)]
           for name in ("rid", "arr", "prompt", "output", "has_abort", "abort")}
    for name in ("max_seqs", "budget", "block_size", "num_blocks", "chunked"):
        val[name] = _value(model, getattr(inp, name))
    return val


def read_frame(model: z3.ModelRef, inp: Inputs, s: Vars) -> dict:
    """A frame's values from a model, with the inputs: a valuation."""
    val = read_inputs(model, inp)
    for name in GLOBALS:
        val[name] = _value(model, s.glob[name])
    val["hl"] = _value(model, s.hl)
    for name in FIELDS:
        val[name] = [_value(model, x) for x in s.per[name]]
    return val


def decode(val: dict) -> dict:
    """A valuation as the block-id-free normal form of a ``spec.serving.State`` (see ``normal_form``)."""
    n = len(val["rid"])
    st = val["st"]

    def rec(i):
        return (val["rid"][i], val["c"][i], val["g"][i], val["b"][i],
                val["start"][i] if val["hs"][i] else None, val["ft"][i] if val["hft"][i] else None,
                val["pre"][i], val["tot"][i], val["rec"][i], val["adm"][i] if val["hadm"][i] else None)

    waiting_ = sorted((i for i in range(n) if st[i] == WAITING), key=lambda i: val["wr"][i])
    running_ = sorted((i for i in range(n) if st[i] == RUNNING), key=lambda i: val["rr"][i])
    out = {
        "clock": val["clock"],
        "waiting": [rec(i) for i in waiting_],
        "running": [rec(i) for i in running_],
        "finished": sorted((rec(i), val["et"][i]) for i in range(n) if st[i] == FINISHED),
        "aborted": sorted((rec(i), val["et"][i]) for i in range(n) if st[i] == ABORTED),
        "ledger": (val["led_c"], val["led_u"], val["led_r"], val["led_a"]),
        "latest": None,
    }
    if val["hl"]:
        out["latest"] = {
            "tick": val["lt"],
            "scheduled": sorted((val["rid"][i], val["sn"][i]) for i in range(n) if val["sn"][i] >= 1),
            "preempted": sorted(val["rid"][i] for i in range(n) if val["pe"][i]),
            "aborted": sorted(val["rid"][i] for i in range(n) if val["ab"][i]),
            "finished": sorted(val["rid"][i] for i in range(n) if val["fi"][i]),
            "freed": sorted((val["rid"][i], val["fr"][i]) for i in range(n) if val["fr"][i] > 0),
            "allocated": sorted((val["rid"][i], val["al"][i]) for i in range(n) if val["al"][i] > 0),
        }
    return out


def normal_form(state) -> dict:
    """A ``spec.serving.State`` with block ids replaced by counts and within-tick orders of the entry sorted."""

    def rec(p):
        return (p.id, p.computed, p.generated, len(p.blocks), p.start, p.first_token, p.preemptions, p.total,
                p.recomputed, p.admitted)

    out = {
        "clock": state.clock,
        "waiting": [rec(p) for p in state.waiting],
        "running": [rec(p) for p in state.running],
        "finished": sorted((rec(e.progress), e.tick) for e in state.finished),
        "aborted": sorted((rec(e.progress), e.tick) for e in state.aborted),
        "ledger": tuple(state.ledger)[:4],  # computed, useful, recomputed, aborted: no cache hits without caching
        "latest": None,
    }
    latest = state.latest
    if latest is not None:
        freed: dict = {}
        for rid, blocks in latest.freed:
            freed[rid] = freed.get(rid, 0) + len(blocks)
        allocated: dict = {}
        for rid, blocks in latest.allocated:
            allocated[rid] = allocated.get(rid, 0) + len(blocks)
        out["latest"] = {
            "tick": latest.tick,
            "scheduled": sorted(latest.scheduled),
            "preempted": sorted(latest.preempted),
            "aborted": sorted(latest.aborted),
            "finished": sorted(latest.finished),
            "freed": sorted((k, v) for k, v in freed.items() if v > 0),
            "allocated": sorted((k, v) for k, v in allocated.items() if v > 0),
        }
    return out
