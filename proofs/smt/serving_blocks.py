"""The per-block SMT encoding of the serving tick, and the rows that prove the KV block-id claims with it.

What it establishes (rows of ``schedcheck prove --model serving``; ``claims(max_requests)`` lists them):
for ONE symbolic block id ``bk`` (an unbounded Int; ``num_blocks`` symbolic), each row
below is inductive over the count encoding of ``proofs.smt.serving_model`` extended with
per-request state about ``bk``: Init => Inv(bk), and Inv(bk), its ``SUPPORT`` (rows
here at the same ``bk`` and count rows) at the pre-state and the step => Inv'(bk), for
every n from 1 to the bound; a row counts as proved only when its support is.  Since
``bk`` is arbitrary, each row holds for every block id at once:

- ``kv_exclusive`` (the registry's claim): no id is held by two running requests or
  twice by one, none is in two allocated lists (or twice in one) of the latest tick,
  no freed list repeats an id and no request has two freed entries;
- ``kv_capacity (ids)``: every id held, allocated or freed is in 0..num_blocks-1
  (the id part of the registry's ``kv_capacity``; its count part is the count row);
- ``kv_exact (ids)``: every id allocated in the latest tick is held by a running
  request now or was freed by one that finished in it (the id part of ``kv_exact``);
- ``kv_freed_gives_back``: the latest tick's freed lists give back exactly what the
  aborted and preempted held before it, and what the finished held before it plus
  took in it; a running request holds what it held before plus what it was
  allocated; a request that stopped running has a freed entry.  Not a registry
  predicate: it reads a ghost, ``bp``, the holdings at the start of the latest tick;
- ``lemma:block_holders``: only running requests hold an id, counts are >= 0, and a
  request preempted in the latest tick was allocated nothing in it (the running
  pass pops only requests it has not served yet), which is why no id goes to two
  requests in one tick.

The per-block abstraction: what a tick does to one id depends only on who holds it
and whether it is free at the moment of each allocation.  Per request the frame has
``bh`` (occurrences of ``bk`` in its blocks), ``ba`` and ``bf`` (in its allocated and
freed lists of the latest tick), ``fe`` (its freed entries in the latest tick) and the
ghost ``bp``.  The step reads the count encoding's decisions (``StepTerms``: who
leaves, is kept, is preempted, is admitted, allocates how many, finishes) and adds
one fresh Bool per request, ``take``: the request takes ``bk`` this tick.  A take is
allowed only to an allocating request and only when ``bk`` is free at that point of
the tick: in 0..num_blocks-1, every holder has left (an abort) or has been popped by
then (a preempted victim is popped while the pass serves the first request whose
blocks do not fit with it: victim v is gone when r allocates exactly when the blocks
of the running requests up to v plus the blocks the kept ones up to r take exceed
the pool), and no allocation earlier in the tick took it.  This is the allocator's
contract, not its choice: the spec's ``_lowest_free`` (the lowest free ids) is one
allocator that keeps it, and the proofs cover every allocator that does.

Assumptions: the count encoding (tested against ``spec.serving.step``); the
allocator's contract above, for ``_lowest_free``: ``tests/test_z3_serving_blocks.py``
checks on reachable states, with Hypothesis, that the spec's allocations keep it
(each take is exactly "not in the held set at that call, below num_blocks") and that
the per-block step with the spec's takes plugged in has exactly the successor
``spec.serving.step`` gives, for every id the state or its successor names, both
ends of the pool and one id past each end; it is not proved of ``_lowest_free`` for
every pool (a property test checks it of ``_lowest_free`` on any held set inside
pools up to 40 ids).  Bounds: n from 1 to ``max_requests``;
values and ids unbounded.  Nothing runs at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import z3

from proofs.smt import serving_model as M
from proofs.smt.run import Claim, up_to

PROVED, REFUTED, UNKNOWN, VACUOUS = "proved", "refuted", "unknown", "vacuous"
FIELDS = ("bh", "ba", "bf", "fe", "bp")

# The step mutants of this encoding (described in serving_model.MUTANTS, so that --mutant accepts them).
MUTANTS = ("allocate_held_id", "allocate_outside_pool", "take_not_recorded", "free_without_giving_back",
           "preempted_keeps_ids")


@dataclass(frozen=True)
class BVars:
    """The per-block state of one frame: per-request tuples by field name."""

    per: dict

    def __getattr__(self, name):
        if name == "per":
            raise AttributeError(name)
        if name in self.per:
            return self.per[name]
        raise AttributeError(name)


def make_block() -> z3.ArithRef:
    """The symbolic block id every frame of a check is about."""
    return z3.Int("bk")


def make_bvars(inp: M.Inputs, tag: str) -> BVars:
    """Fresh per-block variables for one frame, named with ``tag``."""
    return BVars({name: tuple(z3.Int(f"{name}{i}_{tag}") for i in range(inp.n)) for name in FIELDS})


_all, _any = M._all, M._any


def _sum(terms) -> z3.ArithRef:
    return M.total(terms)


def init(inp: M.Inputs, b: BVars) -> z3.BoolRef:
    """Before tick 0 nobody holds, was allocated or freed anything."""
    return _all(b.per[name][i] == 0 for name in FIELDS for i in range(inp.n))


def in_pool(inp: M.Inputs, bk, mutant: str | None = None) -> z3.BoolRef:
    top = inp.num_blocks + (1 if mutant == "allocate_outside_pool" else 0)
    return z3.And(bk >= 0, bk < top)


@dataclass(frozen=True)
class BlockTerms:
    """One tick's effect on ``bk``: the take choices, whether ``bk`` is free at each allocation, and the next frame."""

    take: tuple  # fresh Bools: request i takes bk this tick
    allocates: tuple  # request i allocates at all this tick
    free: tuple  # bk is free at request i's allocation (given the takes before it)
    next: dict  # field -> tuple


def block_step(inp: M.Inputs, s: M.Vars, b: BVars, terms: M.StepTerms, bk, mutant: str | None = None,
               tag: str = "x") -> BlockTerms:
    """The tick's effect on ``bk``, from the count encoding's decisions and the take choices."""
    assert mutant is None or mutant in M.MUTANTS, f"mutant={mutant!r}: expected one of {sorted(M.MUTANTS)}"
    n = inp.n
    idx = range(n)
    take = tuple(z3.Bool(f"take{i}_{tag}") for i in idx)
    run1 = tuple(z3.And(M.running(s, i), z3.Not(terms.leave[i])) for i in idx)
    run_alloc = tuple(z3.And(terms.kept[i], terms.n_run[i] >= 1, terms.extra[i] > 0) for i in idx)
    allocates = tuple(z3.Or(run_alloc[i], terms.admit[i]) for i in idx)
    pool = inp.num_blocks
    room = in_pool(inp, bk, mutant)

    def prefix_blocks(v):  # blocks of the running requests up to v (in running order), before the pass
        return _sum(z3.If(z3.And(run1[j], s.rr[j] <= s.rr[v]), s.b[j], 0) for j in idx)

    def taken_upto(r):  # blocks the kept requests up to r take in the running pass
        return _sum(z3.If(z3.And(terms.kept[j], s.rr[j] <= s.rr[r]), terms.extra[j], 0) for j in idx)

    free = []
    for r in idx:
        upto = taken_upto(r)
        gone_run = _all(z3.Implies(b.bh[j] >= 1, z3.Or(terms.leave[j], z3.And(terms.pre[j],
                                                                                 prefix_blocks(j) + upto > pool)))
                        for j in idx)
        gone_adm = _all(z3.Implies(b.bh[j] >= 1, z3.Or(terms.leave[j], terms.pre[j])) for j in idx)
        if mutant == "allocate_held_id":
            gone_run = gone_adm = z3.BoolVal(True)
        earlier_run = _any(z3.And(take[j], run_alloc[j], s.rr[j] < s.rr[r]) for j in idx if j != r)
        earlier_adm = _any(z3.And(take[j], z3.Or(run_alloc[j], z3.And(terms.admit[j], s.wr[j] < s.wr[r])))
                           for j in idx if j != r)
        free.append(z3.If(run_alloc[r], z3.And(room, gone_run, z3.Not(earlier_run)),
                          z3.If(terms.admit[r], z3.And(room, gone_adm, z3.Not(earlier_adm)), False)))
    free = tuple(free)

    nxt: dict = {name: [None] * n for name in FIELDS}
    for i in idx:
        got = z3.If(take[i], 1, 0)
        kept_holds = b.bh[i] if mutant == "take_not_recorded" else b.bh[i] + got
        holds = z3.If(terms.kept[i], kept_holds, z3.If(terms.admit[i], got, b.bh[i]))
        if mutant == "preempted_keeps_ids":
            nxt["bh"][i] = z3.If(z3.Or(terms.leave[i], terms.finish[i]), 0, z3.If(terms.pre[i], b.bh[i], holds))
        else:
            nxt["bh"][i] = z3.If(z3.Or(terms.leave[i], terms.pre[i], terms.finish[i]), 0, holds)
        nxt["ba"][i] = got
        victim_gives = 0 if mutant == "free_without_giving_back" else b.bh[i]
        nxt["bf"][i] = z3.If(terms.leave[i], b.bh[i], z3.If(terms.pre[i], victim_gives,
                                                             z3.If(terms.finish[i], holds, 0)))
        nxt["fe"][i] = (z3.If(z3.And(z3.Or(terms.leave[i], terms.pre[i]), s.b[i] > 0), 1, 0)
                        + z3.If(terms.finish[i], 1, 0))
        nxt["bp"][i] = b.bh[i]
    return BlockTerms(take, allocates, free, {k: tuple(v) for k, v in nxt.items()})


def block_transition(inp: M.Inputs, s: M.Vars, b: BVars, bt: BVars, terms: M.StepTerms, bk,
                     mutant: str | None = None, tag: str = "x"):
    """``(trans, bterms)``: the per-block step relation (a take only where the allocator's contract allows it)."""
    bterms = block_step(inp, s, b, terms, bk, mutant, tag)
    eqs = [z3.Implies(bterms.take[i], z3.And(bterms.allocates[i], bterms.free[i])) for i in range(inp.n)]
    eqs += [bt.per[name][i] == bterms.next[name][i] for name in FIELDS for i in range(inp.n)]
    return z3.And(eqs), bterms


# --- the claims, per block -------------------------------------------------------------------


def _held_by_running(inp, s, b):
    return _sum(z3.If(M.running(s, i), b.bh[i], 0) for i in range(inp.n))


def enc_kv_exclusive(inp: M.Inputs, s: M.Vars, b: BVars, bk) -> z3.BoolRef:
    """The registry's kv_exclusive at ``bk``: held at most once, allocated at most once, freed at most once per list, one freed entry per request."""
    n = inp.n
    latest = _all([_sum(b.ba) <= 1] + [b.fe[i] <= 1 for i in range(n)] + [b.bf[i] <= 1 for i in range(n)])
    return z3.And(_held_by_running(inp, s, b) <= 1, z3.Implies(s.hl, latest))


def enc_kv_capacity_ids(inp: M.Inputs, s: M.Vars, b: BVars, bk) -> z3.BoolRef:
    """The id part of the registry's kv_capacity at ``bk``: if it is held, allocated or freed, it is in 0..num_blocks-1."""
    named = _held_by_running(inp, s, b) + z3.If(s.hl, _sum(b.ba) + _sum(b.bf), 0)
    return z3.Implies(named >= 1, z3.And(bk >= 0, bk < inp.num_blocks))


def enc_kv_exact_ids(inp: M.Inputs, s: M.Vars, b: BVars, bk) -> z3.BoolRef:
    """The id part of the registry's kv_exact at ``bk``: if the latest tick allocated it, a running request holds it or a finished one freed it."""
    by_finish = _sum(z3.If(s.fi[i], b.bf[i], 0) for i in range(inp.n))
    return z3.Implies(z3.And(s.hl, _sum(b.ba) >= 1), z3.Or(_held_by_running(inp, s, b) >= 1, by_finish >= 1))


def enc_freed_gives_back(inp: M.Inputs, s: M.Vars, b: BVars, bk) -> z3.BoolRef:
    """At ``bk``: the freed lists give back what the aborted and preempted held before the tick and what the finished held plus took; a running one holds what it held plus took; one that stopped running was freed."""
    terms = []
    for i in range(inp.n):
        terms += [
            b.bf[i] == z3.If(z3.Or(s.pe[i], s.ab[i]), b.bp[i], 0) + z3.If(s.fi[i], b.bp[i] + b.ba[i], 0),
            z3.Implies(M.running(s, i), b.bh[i] == b.bp[i] + b.ba[i]),
            z3.Implies(z3.And(z3.Not(M.running(s, i)), b.bp[i] >= 1), z3.Or(s.pe[i], s.ab[i], s.fi[i])),
        ]
    return z3.Implies(s.hl, _all(terms))


def lem_block_holders(inp: M.Inputs, s: M.Vars, b: BVars, bk) -> z3.BoolRef:
    """At ``bk``: counts are >= 0, only running requests hold it, nothing is in the latest lists before the first tick, and a request preempted in the latest tick was allocated nothing in it."""
    terms = []
    for i in range(inp.n):
        terms += [b.per[name][i] >= 0 for name in FIELDS]
        terms += [z3.Implies(z3.Not(M.running(s, i)), b.bh[i] == 0),
                  z3.Implies(z3.Not(s.hl), z3.And(b.ba[i] == 0, b.bf[i] == 0, b.fe[i] == 0, b.bp[i] == 0)),
                  z3.Implies(z3.And(s.hl, s.pe[i]), z3.And(b.ba[i] == 0, s.al[i] == 0))]
    return _all(terms)


PREDICATES: dict[str, Callable] = {  # registry names this module encodes (their rows live here)
    "kv_exclusive": enc_kv_exclusive,
}
ROWS: dict[str, Callable] = {
    "kv_exclusive": enc_kv_exclusive,
    "kv_capacity (ids)": enc_kv_capacity_ids,
    "kv_exact (ids)": enc_kv_exact_ids,
    "kv_freed_gives_back": enc_freed_gives_back,
    "lemma:block_holders": lem_block_holders,
}
REFUTED_BY = {
    "kv_exclusive": "allocate_held_id",
    "kv_capacity (ids)": "allocate_outside_pool",
    "kv_exact (ids)": "take_not_recorded",
    "kv_freed_gives_back": "free_without_giving_back",
    "lemma:block_holders": "preempted_keeps_ids",
}

# What each consecution assumes of the pre-state besides the row itself: per-block rows (at the same bk) and rows
# of the count encoding (serving_model.PREDICATES, and LEMMAS shown as "lemma:<name>").  The union of Z3's unsat
# cores at n = 3 and n = 4 (with every count and per-block row offered), written down here and re-proved on every
# run: a missing entry makes its row unknown or refuted, never silently proved.
SUPPORT = {
    "kv_exclusive": ("lemma:block_holders", "kv_exact", "no_start_before_arrival", "ranks", "status_history"),
    "kv_capacity (ids)": ("lemma:block_holders", "kv_exclusive"),
    "kv_exact (ids)": ("lemma:block_holders", "kv_exclusive", "every_job_completes_once", "no_start_before_arrival",
                       "nonnegative_remaining", "ranks", "status_history"),
    "kv_freed_gives_back": ("lemma:block_holders", "every_job_completes_once", "nonnegative_remaining"),
    "lemma:block_holders": (),
}


def _count_encoding(name: str):
    return M.PREDICATES[name] if name in M.PREDICATES else M.LEMMAS[name]


def _row(name: str) -> str:
    """The ledger row of a support entry."""
    return f"lemma:{name}" if name in M.LEMMAS else name


# --- solving ------------------------------------------------------------------------------------


def _check(solver: z3.Solver, extra=()) -> tuple:
    solver.push()
    if extra:
        solver.add(*extra)
    result = solver.check()
    model = solver.model() if result == z3.sat else None
    solver.pop()
    return result, model


def _result(status: str, detail, counterexample=None, hypotheses: str = "yes") -> dict:
    return {"status": status, "counterexample": counterexample, "detail": detail, "hypotheses": hypotheses}


def _hypotheses(solver: z3.Solver, what: str) -> dict | None:
    """None when the solver's assertions are satisfiable, else the vacuous or unknown result."""
    result, _ = _check(solver)
    if result == z3.sat:
        return None
    if result == z3.unsat:
        return _result(VACUOUS, f"{what}: the hypotheses are unsatisfiable, so the check proves nothing", hypotheses="no")
    return _result(UNKNOWN, f"{what}: the solver gave up on the hypotheses", hypotheses="unknown")


def _count_step(inp, s, t, mutant, tag="x"):
    trans, terms = M.transition(inp, s, t, mutant, tag)
    args = list(terms.block_args) + M.frame_block_args(inp, s) + M.frame_block_args(inp, t)
    return trans, terms, args


def describe_block(model, inp, s, b, bk) -> dict:
    """The block id and, per request, [id, place, held, allocated, freed, held before the latest tick] of it."""
    val = M.read_frame(model, inp, s)
    names = {M.WAITING: "waiting", M.RUNNING: "running", M.FINISHED: "finished", M.ABORTED: "aborted"}
    ev = [[model.eval(b.per[f][i], model_completion=True).as_long() for f in ("bh", "ba", "bf", "bp")]
          for i in range(inp.n)]
    return {"block": model.eval(bk, model_completion=True).as_long(), "clock": val["clock"],
            "columns": "id, place, held, allocated, freed, held before the latest tick (of this block)",
            "requests": [[val["rid"][i], names.get(val["st"][i], val["st"][i])] + ev[i] for i in range(inp.n)]}


def prove_row(name: str, n: int, mutant: str | None = None) -> dict:
    """Initiation and consecution of one per-block row at n requests, for one symbolic block id."""
    predicate = ROWS[name]
    inp = M.make_inputs(n)
    s, t = M.make_vars(inp, "0"), M.make_vars(inp, "1")
    bs, bt = make_bvars(inp, "0"), make_bvars(inp, "1")
    bk = make_block()
    solver = z3.Solver()
    solver.add(*M.domain(inp, mutant))
    solver.push()
    solver.add(M.init(inp, s, mutant), init(inp, bs), *M.blocks_axioms(inp, M.frame_block_args(inp, s)),
               *M.frame_defs(inp, s))
    bad = _hypotheses(solver, "initiation (Init and the domain)")
    if bad:
        return bad
    result, model = _check(solver, [z3.Not(predicate(inp, s, bs, bk))])
    solver.pop()
    if result == z3.sat:
        return _result(REFUTED, "initiation fails", {"breaks": name, "after_steps": 0,
                                                     "state": describe_block(model, inp, s, bs, bk)})
    if result != z3.unsat:
        return _result(UNKNOWN, "initiation: the solver gave up")
    trans, terms, args = _count_step(inp, s, t, mutant)
    btrans, _ = block_transition(inp, s, bs, bt, terms, bk, mutant)
    for x in (name,) + SUPPORT[name]:
        solver.add(ROWS[x](inp, s, bs, bk) if x in ROWS else _count_encoding(x)(inp, s))
    solver.add(*M.frame_defs(inp, s), *M.frame_defs(inp, t), trans, btrans, *M.blocks_axioms(inp, args))
    bad = _hypotheses(solver, "consecution (the invariant and the step)")
    if bad:
        return bad
    result, model = _check(solver, [z3.Not(predicate(inp, t, bt, bk))])
    if result == z3.unsat:
        assumed = ", ".join(_row(x) for x in SUPPORT[name]) or "nothing else"
        return _result(PROVED, f"for one symbolic block id (so for every id); assumes {assumed}")
    if result != z3.sat:
        return _result(UNKNOWN, "consecution: the solver gave up")
    found = bmc(name, 3, 5, mutant)
    if found is not None:
        return _result(REFUTED, f"a reachable state with {found['n']} request(s) breaks it", found)
    cti = {"before": describe_block(model, inp, s, bs, bk), "after": describe_block(model, inp, t, bt, bk)}
    return _result(UNKNOWN, f"not inductive with the invariant (counterexample to induction {cti}); "
                            "no reachable violation found within 5 steps")



def bmc(target: str, n_max: int, depth: int, mutant: str | None = None) -> dict | None:
    """A concrete run from Init that breaks ``target`` at some block id within ``depth`` steps and n <= n_max, or None."""
    predicate = ROWS[target]
    bk = make_block()
    for n in range(1, n_max + 1):
        inp = M.make_inputs(n, block_size=1)  # a search: one concrete block size keeps it linear
        frames = [M.make_vars(inp, "b0")]
        blocks = [make_bvars(inp, "b0")]
        solver = z3.Solver()
        solver.add(*M.domain(inp, mutant), M.init(inp, frames[0], mutant), init(inp, blocks[0]), *_small(inp))
        for d in range(depth + 1):
            solver.add(*M.blocks_exact(inp, M.frame_block_args(inp, frames[-1])), *M.frame_defs(inp, frames[-1]))
            result, model = _check(solver, [z3.Not(predicate(inp, frames[-1], blocks[-1], bk))])
            if model is not None:
                vals = [M.read_frame(model, inp, f) for f in frames]
                return {"breaks": target, "call": M.call_text(vals[0]), "after_steps": len(frames) - 1,
                        "state": describe_block(model, inp, frames[-1], blocks[-1], bk), "n": n}
            if d == depth:
                break
            nxt, bnxt = M.make_vars(inp, f"b{d + 1}"), make_bvars(inp, f"b{d + 1}")
            trans, terms = M.transition(inp, frames[-1], nxt, mutant, f"b{d}")
            btrans, _ = block_transition(inp, frames[-1], blocks[-1], bnxt, terms, bk, mutant, f"b{d}")
            solver.add(trans, btrans, *M.blocks_exact(inp, list(terms.block_args)))
            frames.append(nxt)
            blocks.append(bnxt)
    return None


def _small(inp: M.Inputs, top: int = 8) -> list:
    """Small constants, so that the run shown is one a reader can follow (a search restriction only)."""
    out = [inp.max_seqs <= 3, inp.budget <= top, inp.num_blocks <= top]
    for i in range(inp.n):
        out += [inp.arr[i] <= 3, inp.prompt[i] <= top, inp.output[i] <= top, inp.abort[i] <= top]
    return out


def claims(max_requests: int, mutant: str | None = None, base: tuple = ()) -> list[Claim]:
    """The per-block rows at bound ``max_requests``; each depends on ``base`` (the count ledger's step rows) and its ``SUPPORT``."""
    n = max_requests
    assert n >= 1, f"max_requests={n!r}: expected an int >= 1"
    out = []
    for name in ROWS:
        depends = tuple(base) + tuple(_row(x) for x in SUPPORT[name])
        kind = "lemma" if name.startswith("lemma:") else "invariant" if name.split(" (")[0] in M.PREDICATES or \
            name in PREDICATES else "theorem"
        out.append(Claim(name, "inductive (per block)", f"n <= {n}, any block id",
                         partial(up_to, partial(prove_row, name, mutant=mutant), n), depends, REFUTED_BY[name], kind))
    return out


# --- concrete valuations (for the model test) ------------------------------------------------


def block_valuation(state, previous, bk: int) -> dict:
    """The per-block values of a concrete ``spec.serving.State`` at id ``bk``; ``previous`` is the state before its latest tick (or None)."""
    index = {r.id: i for i, r in enumerate(state.requests)}
    n = len(index)
    val = {name: [0] * n for name in FIELDS}
    progress = list(state.waiting) + list(state.running) + [e.progress for e in state.finished + state.aborted]
    for p in progress:
        val["bh"][index[p.id]] = p.blocks.count(bk)
    latest = state.latest
    if latest is not None:
        for rid, blocks in latest.allocated:
            val["ba"][index[rid]] += blocks.count(bk)
        for rid, blocks in latest.freed:
            val["bf"][index[rid]] += blocks.count(bk)
            val["fe"][index[rid]] += 1
    if previous is not None and latest is not None:
        before = list(previous.waiting) + list(previous.running)
        for p in before:
            if p.id in index:
                val["bp"][index[p.id]] = p.blocks.count(bk)
    return val


def pin_block(inp: M.Inputs, b: BVars, val: dict) -> list:
    """Equalities that fix a per-block frame to a valuation."""
    return [b.per[name][i] == val[name][i] for name in FIELDS for i in range(inp.n)]
