"""Prefix caching in Z3: ``refcount_exact`` and ``no_false_sharing`` inductive over a per-block encoding of the pool.

What it establishes (rows of ``schedcheck prove --model serving``; ``claims(max_requests)``
lists them): for ONE symbolic block id and n requests (n from 1 to the bound), over the
per-block caching system below, Init => Inv and Inv and one pool event => Inv' for each of

- ``refcount_exact (prefix caching)``: the block is in the free queue at most once; it is
  there or held only if taken once (``0 <= b < fresh``); held and queued never both; taken
  and not held means queued (no leak); if the latest tick freed it and someone holds it,
  that tick retook it (the registry's ``refcount_exact`` read per block);
- ``no_false_sharing (prefix caching)``: a holder whose position j is below its full
  blocks (``computed // block_size``) finds in the block the KV of its own chain at j; a
  holder still writing the block (j at or past its full blocks) is its only holder;
- ``lemma:cache_content (prefix caching)``: a registered block holds the KV of the chain
  it is registered under, a block with content was taken, a block being written is not
  registered (the strengthening the two rows need).

Each row's consecution assumes all three at the pre-state (one inductive invariant).

The per-block caching system: the state of block ``b`` is ``tk`` (b was taken once: b <
fresh), ``qn`` (how often b is in the free queue's returned part), ``hc``/``cv`` (b holds
the KV of a chain, and which: an Int code), ``rg``/``rc`` (b is registered in the cache,
under which chain), ``fr``/``rt`` (the latest tick freed b / took b, new or as a hit), and
per request i: ``h`` (i's table holds b), ``ps`` (at which position), ``fl`` (i's full
blocks, ``computed // block_size``, read while i holds b).  Chains are an uninterpreted
function ``ch(i, j)`` (request, position): any token ids at all, any prefix shared or not.
A tick is a sequence of events, each on one request ``a``: ``tick`` (a new tick: fr, rt
reset), ``release`` (a abort, preemption or finish: a lets go of b; the last holder puts b
at the queue's tail), ``hit`` (an admission takes b at position j < its hits, only if b is
registered under ``ch(a, j)``; b leaves the queue if no one held it), ``take`` (a takes b
new at position j >= its full blocks, only if b is free: never taken, or in the queue;
the take evicts it: unregistered, no content), ``register`` (a's full blocks grow to F >=
its full blocks; if it holds b at j < F, b holds ``ch(a, j)`` and joins the cache if not
in it), and ``stutter``.  The events are the rules of ``spec.serving.cache`` read for one
block; which request, position and count each takes is left free (an over-approximation:
the fit rules, the budget, the order of the free queue and reserve_full_sequence are not
read, so the rows hold for every policy that keeps these rules).

The link to the spec that runs (rows ``caching encoding matches spec.step`` and ``caching
predicates match the registry``, checked at every run, on which the rows depend): for
states reached by ``spec.serving`` with ``prefix_caching`` on (drawn calls whose prompts
share token prefixes, under pools tight enough to evict and preempt, with aborts,
``reserve_full_sequence`` drawn both ways), at every block id the states name: the
system's events lead from the pre-state's abstraction to exactly the abstraction of the
state ``spec.serving.step`` computes (a simulation: satisfiable with every field pinned;
exactness is not claimed, the system being nondeterministic), and the per-block
predicates, taken over every id, equal the registry's ``refcount_exact`` and
``no_false_sharing`` (and the lemma holds of every reachable state).  A state the
abstraction cannot represent (a block twice in one table or twice in the cache) is a
disagreement.

Assumptions: the abstraction map ``abstract`` (checked by the rows above).  Bounds: n
<= the ledger's bound (proofs), ``STATES_PER_N`` states per n (validation), values and
ids unbounded.  Nothing runs at import time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial

import z3

from proofs.smt.run import Claim, up_to

PROVED, REFUTED, UNKNOWN, VACUOUS, CHECKED = "proved", "refuted", "unknown", "vacuous", "checked"
NFS, RC, LEMMA = "no_false_sharing (prefix caching)", "refcount_exact (prefix caching)", \
    "lemma:cache_content (prefix caching)"
ROWS_PROVED = (RC, NFS, LEMMA)
STEP_ROW, PREDICATE_ROW = "caching encoding matches spec.step", "caching predicates match the registry"
STATES_PER_N = 12
SEED = 20
TICK, RELEASE, HIT, TAKE, REGISTER, STUTTER = range(6)
EVENTS = ("tick", "release", "hit", "take", "register", "stutter")
GLOBAL = ("tk", "qn", "hc", "cv", "rg", "rc", "fr", "rt")
BOOLS = {"tk", "hc", "rg", "fr", "rt", "h"}
PER = ("h", "ps", "fl")

# The mutants of this system (described in serving_model.MUTANTS, so that --mutant accepts them).
MUTANTS = ("release_shared_block", "hit_other_chain", "take_keeps_registration", "register_skips_content",
           "refcount_allows_leak")
REFUTED_BY = {RC: "release_shared_block", NFS: "hit_other_chain", LEMMA: "take_keeps_registration",
              STEP_ROW: "register_skips_content", PREDICATE_ROW: "refcount_allows_leak"}


@dataclass(frozen=True)
class Frame:
    """One per-block state: the block's fields and, per request, h, ps, fl."""

    g: dict
    per: dict


def make_frame(n: int, tag: str) -> Frame:
    def var(name):
        return z3.Bool(f"c_{name}_{tag}") if name in BOOLS else z3.Int(f"c_{name}_{tag}")

    return Frame({f: var(f) for f in GLOBAL},
                 {f: tuple((z3.Bool if f in BOOLS else z3.Int)(f"c_{f}{i}_{tag}") for i in range(n)) for f in PER})


def chain_function() -> z3.FuncDeclRef:
    """ch(request index, position): the chain of that request's block at that position, as an Int code."""
    return z3.Function("ch", z3.IntSort(), z3.IntSort(), z3.IntSort())


def _held(n: int, s: Frame) -> z3.BoolRef:
    return z3.Or([s.per["h"][i] for i in range(n)]) if n else z3.BoolVal(False)


def init(n: int, s: Frame) -> z3.BoolRef:
    """Before tick 0: nothing taken, queued, held, cached or written."""
    g = s.g
    return z3.And(z3.Not(g["tk"]), g["qn"] == 0, z3.Not(g["hc"]), z3.Not(g["rg"]), z3.Not(g["fr"]), z3.Not(g["rt"]),
                  *[z3.Not(s.per["h"][i]) for i in range(n)], *[s.per["fl"][i] == 0 for i in range(n)],
                  *[s.per["ps"][i] == 0 for i in range(n)])


def event(n: int, s: Frame, t: Frame, ch, kind, actor, pos, full, mutant: str | None = None) -> z3.BoolRef:
    """One pool event (``kind`` in 0..5, on request ``actor``, with position ``pos`` and count ``full``): s -> t."""
    g, h, ps, fl = s.g, s.per["h"], s.per["ps"], s.per["fl"]
    other_holder = {i: z3.Or([h[k] for k in range(n) if k != i]) if n > 1 else z3.BoolVal(False) for i in range(n)}
    held = _held(n, s)

    def frame(gnew: dict, who, hnew, psnew, flnew):
        out = [t.g[f] == gnew.get(f, g[f]) for f in GLOBAL]
        for i in range(n):
            me = actor == i
            out += [t.per["h"][i] == z3.If(me, hnew, h[i]), t.per["ps"][i] == z3.If(me, psnew, ps[i]),
                    t.per["fl"][i] == z3.If(me, flnew, fl[i])]
        return z3.And(*out)

    def by_actor(f):
        return z3.Or([z3.And(actor == i, f(i)) for i in range(n)])

    # the tick event changes no request: written with every request kept
    alts = [z3.And(kind == TICK, *[t.g[f] == (z3.BoolVal(False) if f in ("fr", "rt") else g[f]) for f in GLOBAL],
                   *[t.per[f][i] == s.per[f][i] for f in PER for i in range(n)])]
    alts.append(z3.And(kind == STUTTER, *[t.g[f] == g[f] for f in GLOBAL],
                       *[t.per[f][i] == s.per[f][i] for f in PER for i in range(n)]))

    def release(i):
        last = z3.And(h[i], z3.Not(other_holder[i]))
        back = h[i] if mutant == "release_shared_block" else last
        return frame({"qn": z3.If(back, g["qn"] + 1, g["qn"]), "fr": z3.Or(g["fr"], back)}, i, False, 0, 0)

    def hit(i):
        allowed = g["rg"] if mutant == "hit_other_chain" else z3.And(g["rg"], g["rc"] == ch(i, pos))
        claimed = z3.If(held, g["qn"], g["qn"] - 1)
        return z3.And(z3.Not(h[i]), allowed, pos >= 0, pos < full,
                      frame({"qn": claimed, "rt": z3.BoolVal(True)}, i, True, pos, full))

    def take(i):
        free = z3.Or(z3.Not(g["tk"]), g["qn"] >= 1)
        evicted = {} if mutant == "take_keeps_registration" else {"rg": z3.BoolVal(False)}
        return z3.And(free, z3.Not(h[i]), full >= 0, pos >= full,
                      frame({"tk": z3.BoolVal(True), "qn": z3.If(g["tk"], g["qn"] - 1, g["qn"]),
                             "hc": z3.BoolVal(False), "rt": z3.BoolVal(True), **evicted}, i, True, pos, full))

    def register(i):
        writes = z3.And(h[i], ps[i] < full)
        chain = ch(i, ps[i])
        content = {} if mutant == "register_skips_content" else {
            "hc": z3.Or(g["hc"], writes), "cv": z3.If(writes, chain, g["cv"])}
        return z3.And(full >= fl[i], frame({**content, "rg": z3.Or(g["rg"], writes),
                                            "rc": z3.If(z3.And(writes, z3.Not(g["rg"])), chain, g["rc"])},
                                           i, h[i], ps[i], full))

    if n:
        alts += [z3.And(kind == RELEASE, by_actor(release)), z3.And(kind == HIT, by_actor(hit)),
                 z3.And(kind == TAKE, by_actor(take)), z3.And(kind == REGISTER, by_actor(register))]
    return z3.Or(alts)


# --- the rows' predicates (per block) ------------------------------------------------------------


def enc_refcount(n: int, s: Frame, mutant: str | None = None) -> z3.BoolRef:
    g, held = s.g, _held(n, s)
    no_leak = z3.BoolVal(True) if mutant == "refcount_allows_leak" else z3.Implies(g["tk"], z3.Or(held, g["qn"] >= 1))
    return z3.And(g["qn"] >= 0, g["qn"] <= 1, z3.Implies(g["qn"] >= 1, g["tk"]), z3.Implies(held, g["tk"]),
                  z3.Not(z3.And(held, g["qn"] >= 1)), no_leak, z3.Implies(z3.And(g["fr"], held), g["rt"]))


def enc_no_false_sharing(n: int, s: Frame, ch) -> z3.BoolRef:
    g, h, ps, fl = s.g, s.per["h"], s.per["ps"], s.per["fl"]
    out = []
    for i in range(n):
        out.append(z3.Implies(z3.And(h[i], ps[i] < fl[i]), z3.And(g["hc"], g["cv"] == ch(i, ps[i]))))
        out.append(z3.Implies(z3.And(h[i], ps[i] >= fl[i]), z3.And([z3.Not(h[k]) for k in range(n) if k != i])))
    return z3.And(out) if out else z3.BoolVal(True)


def enc_cache_content(n: int, s: Frame) -> z3.BoolRef:
    g, h, ps, fl = s.g, s.per["h"], s.per["ps"], s.per["fl"]
    out = [z3.Implies(g["rg"], z3.And(g["hc"], g["cv"] == g["rc"])), z3.Implies(g["hc"], g["tk"])]
    out += [z3.Implies(z3.And(h[i], ps[i] >= fl[i]), z3.Not(g["rg"])) for i in range(n)]
    return z3.And(out)


def predicate(name: str, n: int, s: Frame, ch, mutant: str | None = None) -> z3.BoolRef:
    if name == RC:
        return enc_refcount(n, s, mutant)
    if name == NFS:
        return enc_no_false_sharing(n, s, ch)
    return enc_cache_content(n, s)


# --- proofs ----------------------------------------------------------------------------------


def _result(status: str, detail, counterexample=None, hypotheses: str = "yes") -> dict:
    return {"status": status, "counterexample": counterexample, "detail": detail, "hypotheses": hypotheses}


def _read(model, n: int, s: Frame) -> dict:
    def v(x):
        x = model.eval(x, model_completion=True)
        return z3.is_true(x) if z3.is_bool(x) else x.as_long()

    return {"block": {f: v(s.g[f]) for f in GLOBAL},
            "requests": [{f: v(s.per[f][i]) for f in PER} for i in range(n)]}


def _step_vars(tag: str) -> tuple:
    return z3.Int(f"c_kind_{tag}"), z3.Int(f"c_actor_{tag}"), z3.Int(f"c_pos_{tag}"), z3.Int(f"c_full_{tag}")


def prove_row(name: str, n: int, mutant: str | None = None) -> dict:
    """Initiation and consecution of one caching row at n requests, for one symbolic block id and any chains."""
    ch = chain_function()
    s, t = make_frame(n, "0"), make_frame(n, "1")
    solver = z3.Solver()
    solver.add(init(n, s))
    if solver.check() != z3.sat:
        return _result(VACUOUS, "initiation: Init is unsatisfiable", hypotheses="no")
    solver.add(z3.Not(predicate(name, n, s, ch)))
    if solver.check() == z3.sat:
        return _result(REFUTED, "initiation fails", {"breaks": name, "state": _read(solver.model(), n, s)})
    kind, actor, pos, full = _step_vars("x")
    solver = z3.Solver()
    solver.add(*[predicate(x, n, s, ch) for x in ROWS_PROVED], event(n, s, t, ch, kind, actor, pos, full, mutant))
    hyp = solver.check()
    if hyp != z3.sat:
        return _result(VACUOUS if hyp == z3.unsat else UNKNOWN, "consecution: the hypotheses are not satisfiable",
                       hypotheses="no" if hyp == z3.unsat else "unknown")
    solver.add(z3.Not(predicate(name, n, t, ch)))
    result = solver.check()
    if result == z3.unsat:
        return _result(PROVED, "for one symbolic block id (so every id) and any chains; assumes "
                               + ", ".join(x for x in ROWS_PROVED if x != name))
    if result != z3.sat:
        return _result(UNKNOWN, "consecution: the solver gave up")
    found = bmc(name, min(n, 3), 7, mutant)
    if found is not None:
        return _result(REFUTED, f"a run of {found['events']} event(s) from Init breaks it", found)
    model = solver.model()
    return _result(UNKNOWN, f"not inductive (counterexample to induction: event "
                            f"{EVENTS[model.eval(kind, model_completion=True).as_long() % 6]}, "
                            f"{_read(model, n, s)} -> {_read(model, n, t)}); no run from Init within 7 events")


def bmc(name: str, n_max: int, depth: int, mutant: str | None = None) -> dict | None:
    """A run of pool events from Init that breaks ``name`` within ``depth`` events and n <= n_max requests, or None."""
    ch = chain_function()
    for n in range(1, n_max + 1):
        frames = [make_frame(n, "b0")]
        steps = []
        solver = z3.Solver()
        solver.add(init(n, frames[0]))
        for d in range(depth + 1):
            solver.push()
            solver.add(z3.Not(predicate(name, n, frames[-1], ch)))
            if solver.check() == z3.sat:
                model = solver.model()
                run = [f"{EVENTS[model.eval(k, model_completion=True).as_long()]}(request {model.eval(a, model_completion=True).as_long()}, position "
                       f"{model.eval(p, model_completion=True).as_long()}, full {model.eval(f, model_completion=True).as_long()})" for k, a, p, f in steps]
                return {"breaks": name, "n": n, "events": len(steps), "run": run, "state": _read(model, n, frames[-1])}
            solver.pop()
            if d == depth:
                break
            nxt = make_frame(n, f"b{d + 1}")
            step = _step_vars(f"b{d}")
            small = [step[2] >= 0, step[2] <= 3, step[3] >= 0, step[3] <= 3]  # a run a reader can follow
            solver.add(step[0] != STUTTER, *small, event(n, frames[-1], nxt, ch, *step, mutant))
            frames.append(nxt)
            steps.append(step)
    return None


# --- the abstraction of a spec.serving state, and the validation ----------------------------------


class Codes(dict):
    """Chain values to Int codes (the same code for equal chains)."""

    def of(self, chain) -> int:
        return self.setdefault(chain, len(self))


def abstract(state, block: int, codes: Codes) -> dict:
    """The per-block frame of a ``spec.serving.State`` with a pool, at id ``block`` (ValueError: not representable)."""
    pool, size = state.pool, state.config.block_size
    if pool is None:
        raise ValueError("prefix caching is off: the state has no pool")
    registered = [chain for chain, b in pool.cache if b == block]
    if len(registered) > 1:
        raise ValueError(f"block {block} is in the cache {len(registered)} times")
    content = pool.content[block] if 0 <= block < len(pool.content) else None
    latest = state.latest
    val = {"tk": 0 <= block < pool.fresh, "qn": pool.returned.count(block), "hc": content is not None,
           "cv": codes.of(content) if content is not None else 0, "rg": bool(registered),
           "rc": codes.of(registered[0]) if registered else 0,
           "fr": latest is not None and any(block in blocks for _, blocks in latest.freed),
           "rt": latest is not None and any(block in blocks for _, blocks in latest.allocated + (latest.hits or ())),
           "h": [], "ps": [], "fl": []}
    running = {p.id: p for p in state.running}
    for r in state.requests:
        p = running.get(r.id)
        held = p is not None and block in p.blocks
        if held and p.blocks.count(block) > 1:
            raise ValueError(f"request {r.id} holds block {block} {p.blocks.count(block)} times")
        val["h"].append(held)
        val["ps"].append(p.blocks.index(block) if held else 0)
        val["fl"].append(p.computed // size if held else 0)
    return val


def pin(n: int, s: Frame, val: dict) -> list:
    """Equalities that fix a frame to ``val``; a content code only with content, a chain only when registered, a
    position and full count only for a holder (elsewhere the field means nothing and the events leave it free)."""
    meaningful = {"cv": val["hc"], "rc": val["rg"]}
    out = [s.g[f] == val[f] for f in GLOBAL if meaningful.get(f, True)]
    out += [s.per["h"][i] == val["h"][i] for i in range(n)]
    out += [s.per[f][i] == val[f][i] for f in ("ps", "fl") for i in range(n) if val["h"][i]]
    return out


def pin_chains(state, ch, codes: Codes) -> list:
    """ch(i, j) is the code of request i's chain at j, for every position a table of the state's pool can reach."""
    from spec.serving import cache

    size = state.config.block_size
    top = max(state.config.num_blocks, 1) + 1
    return [ch(i, j) == codes.of(cache.chain(r, j, size)) for i, r in enumerate(state.requests) for j in range(top)]


def block_ids(*states) -> list:
    """Every id the states name (held, queued, cached, written, allocated, freed, hit), 0..fresh and one past each end."""
    named = set()
    for state in states:
        pool = state.pool
        named |= set(range(-1, max(pool.fresh, state.config.num_blocks) + 1)) | set(pool.returned)
        named |= {b for _, b in pool.cache}
        named |= {b for p in state.running for b in p.blocks}
        if state.latest is not None:
            named |= {b for _, bs in state.latest.freed + state.latest.allocated + (state.latest.hits or ()) for b in bs}
    return sorted(named)


def _caching_input(n: int, k: int, rng: random.Random) -> tuple:
    """A valid call of n requests with prefix caching on: prompts over a 2-token alphabet (shared prefixes, identical
    prompts), some without tokens, a pool from tight (eviction, preemption) to roomy, aborts, both prefill modes,
    reserve_full_sequence absent, false or true."""
    block_size = rng.randint(1, 3)
    requests = []
    for request_id in rng.sample(range(-2, 4 * n + 4), n):
        prompt = rng.randint(1, 7)
        request = {"id": request_id, "arrival": rng.randint(0, (0, 1, 3)[k % 3]), "prompt": prompt,
                   "output": rng.randint(1, 4)}
        if rng.random() < 0.8:
            request["tokens"] = [rng.choice((1, 2)) if rng.random() < 0.85 else rng.randint(3, 9) for _ in range(prompt)]
        if k % 4 == 3 and rng.random() < 0.4:
            request["abort"] = request["arrival"] + rng.randint(0, 4)
        requests.append(request)
    peaks = [-(-(r["prompt"] + r["output"] - 1) // block_size) for r in requests]
    works = [r["prompt"] + r["output"] - 1 for r in requests]
    chunked = rng.random() < 0.6
    budget = rng.randint(2, 10) if chunked else max(works) + rng.randint(0, 4)
    pool = max(peaks) + (0, 1, 2, sum(peaks))[k % 4 if k % 4 != 3 else 1]
    config = {"max_seqs": rng.randint(1, n + 1), "token_budget": budget, "block_size": block_size,
              "num_blocks": pool, "chunked_prefill": chunked, "prefix_caching": True}
    if k % 3:
        config["reserve_full_sequence"] = k % 3 == 2
    return requests, config


def _corners(state, nxt) -> tuple:
    entry = nxt.latest
    return tuple(name for name, hit in (
        ("hit", bool(entry.hits)),
        ("hit on a block held by another", any(b in p.blocks for _, bs in entry.hits for b in bs for p in state.running)),
        ("eviction", any(b in {x for _, x in state.pool.cache} for _, bs in entry.allocated for b in bs)),
        ("preempts", bool(entry.preempted)),
        ("aborts", bool(entry.aborted)),
        ("a release keeps a shared block", _kept_shared(state, nxt)),
        ("finishes", bool(entry.finished)),
        ("resumes a preempted request", any(p.start is not None and p.id in dict(entry.scheduled)
                                            for p in state.waiting)),
    ) if hit)


def _kept_shared(state, nxt) -> bool:
    """A request that left in this tick held a block that another still holds."""
    left = [p for p in state.running if p.id not in {q.id for q in nxt.running}]
    return any(b in q.blocks for p in left for b in p.blocks for q in nxt.running)


def caching_states(n: int, count: int = STATES_PER_N, seed: int = SEED) -> list:
    """About ``count`` reachable states of exactly n requests with prefix caching on, round robin over the corners."""
    import spec.serving as S

    from proofs.smt.conformance import Case, _by_corners, _serve_call

    rng = random.Random(f"caching-{seed}-{n}")
    reachable, pool = [], []
    for k in range(10 * count):
        requests, config = _caching_input(n, k, rng)
        try:
            state = S.initial(requests, config)
        except ValueError:
            continue  # a draw outside the domain (a peak need over the pool): not a state
        prev, steps = None, 0
        while steps <= 60:
            case = Case(f"{_serve_call(requests, config)} after {steps} step(s)", state, prev, True, steps == 0)
            if S.is_terminal(state):
                reachable.append((case, ("terminal",)))
                break
            nxt = S.step(state)
            reachable.append((case, _corners(state, nxt)))
            pool.append(case)
            prev, state, steps = state, nxt, steps + 1
    return _by_corners(reachable, count - count // 4) + _drawn(pool, count // 4, rng)


def _drawn(pool: list, count: int, rng: random.Random) -> list:
    """Reachable states broken one way each (so that the predicates are seen false too): a queued block queued twice,
    a queued block dropped (a leak), a held full block's content overwritten, a running request's table given a
    block another is writing."""
    from proofs.smt.conformance import Case

    out, tries = [], 0
    while len(out) < count and pool and tries < 50 * max(count, 1):
        tries += 1
        case = pool[rng.randrange(len(pool))]
        state, p = case.state, case.state.pool
        how = len(out) % 4
        if how == 0 and p.returned:
            drawn, what = state._replace(pool=p._replace(returned=p.returned + p.returned[:1])), "a queued block twice"
        elif how == 1 and p.returned:
            drawn, what = state._replace(pool=p._replace(returned=p.returned[1:])), "the queue's first block dropped"
        elif how == 2 and any(r.computed >= state.config.block_size and r.blocks for r in state.running):
            r = next(r for r in state.running if r.computed >= state.config.block_size and r.blocks)
            content = list(p.content)
            content[r.blocks[0]] = ("own", "overwritten", 0)
            drawn, what = state._replace(pool=p._replace(content=tuple(content))), f"block {r.blocks[0]} overwritten"
        elif how == 3 and len(state.running) >= 2 and state.running[0].blocks:
            first, second = state.running[0], state.running[1]
            block = first.blocks[-1]
            if block in second.blocks:
                continue
            running = (first, second._replace(blocks=second.blocks + (block,))) + state.running[2:]
            drawn, what = state._replace(running=running), f"request {second.id} also holding block {block}"
        else:
            continue
        out.append(Case(f"{case.origin}, then {what}", drawn, case.prev, False))
    return out


def _unrolled(n: int, depth: int, mutant: str | None) -> tuple:
    ch = chain_function()
    frames = [make_frame(n, f"u{d}") for d in range(depth + 1)]
    solver = z3.Solver()
    for d in range(depth):
        solver.add(event(n, frames[d], frames[d + 1], ch, *_step_vars(f"u{d}"), mutant))
    return ch, frames, solver


def check_step(n: int, cases: list, mutant: str | None = None) -> dict:
    """For each case and each id it names: the events lead from its abstraction to that of spec.serving.step's."""
    import spec.serving as S

    from proofs.smt.conformance import _refuted, _short, _step_outcome

    systems: dict = {}
    pairs = 0
    for case in cases:
        if S.is_terminal(case.state) or not case.reachable:  # the broken states are for the predicates
            continue
        nxt, _, bad = _step_outcome(n, case, S.step, lambda x: x)
        if bad is not None:
            return bad
        codes = Codes()
        for block in block_ids(case.state, nxt):
            try:
                pre, post = abstract(case.state, block, codes), abstract(nxt, block, codes)
            except ValueError as error:
                return _refuted(n, case.origin, f"block {block}", _short(nxt.pool), f"not representable: {error}",
                                "spec.serving.step gives")
            took = {rid for rid, bs in nxt.latest.hits + nxt.latest.allocated if block in bs}
            touching = sum(a or b or r.id in took for a, b, r in zip(pre["h"], post["h"], case.state.requests))
            depth = 1 + 3 * max(touching, 1)  # a tick, then per request at most release, take or hit, register
            if depth not in systems:
                systems[depth] = _unrolled(n, depth, mutant)
            ch, frames, solver = systems[depth]
            solver.push()
            solver.add(*pin_chains(case.state, ch, codes), *pin(n, frames[0], pre), *pin(n, frames[-1], post))
            result = solver.check()
            solver.pop()
            pairs += 1
            if result == z3.sat:
                continue
            if result == z3.unknown:
                return _result(UNKNOWN, f"at n={n}: the solver gave up on block {block} of {case.origin}")
            moved = {f: (pre[f], post[f]) for f in pre if pre[f] != post[f]}
            return _refuted(n, case.origin, f"block {block}", _short(moved),
                            f"no run of {depth} pool events reaches it", "spec.serving.step moves it")
    return _result(CHECKED, f"n={n}: {len(cases)} states, {pairs} (state, block id) pairs, each tick a run of pool "
                            "events")


def check_predicates(n: int, cases: list, mutant: str | None = None) -> dict:
    """The per-block predicates over every id equal the registry's refcount_exact and no_false_sharing; the lemma holds."""
    from spec.serving.invariants import BY_NAME

    from proofs.smt.conformance import _refuted

    ch = chain_function()
    s = make_frame(n, "p")
    for case in cases:
        codes = Codes()
        values = {RC: True, NFS: True, LEMMA: True}
        for block in block_ids(case.state):
            try:
                val = abstract(case.state, block, codes)
            except ValueError as error:
                return _refuted(n, case.origin, f"block {block}", True, f"not representable: {error}",
                                "the spec has a state")
            solver = z3.Solver()
            solver.add(*pin_chains(case.state, ch, codes), *pin(n, s, val))
            if solver.check() != z3.sat:
                return _result(UNKNOWN, f"at n={n}: the abstraction of block {block} is not consistent: {case.origin}")
            model = solver.model()
            for name in values:
                term = predicate(name, n, s, ch, mutant)
                values[name] = values[name] and z3.is_true(model.eval(term, model_completion=True))
        for name, registry in ((RC, "refcount_exact"), (NFS, "no_false_sharing")):
            expected = bool(BY_NAME[registry].holds(case.state))
            if values[name] != expected:
                return _refuted(n, case.origin, registry, expected, values[name], "the registry says")
        if case.reachable and not values[LEMMA]:
            return _refuted(n, case.origin, LEMMA, True, False, "a reachable state satisfies it:")
    return _result(CHECKED, f"n={n}: {len(cases)} states, 2 predicates and the lemma at every id each")


def claims(max_requests: int, mutant: str | None = None, base: tuple = ()) -> list[Claim]:
    """The caching rows at bound ``max_requests``: the two validation rows, then the three proved rows (which depend
    on the validation and on each other)."""
    from proofs.smt.conformance import every_n

    n = max_requests
    validation_n = n
    states = partial(caching_states, count=STATES_PER_N)
    out = [Claim(STEP_ROW, "validation", f"{STATES_PER_N} caching states per n, n <= {validation_n}",
                 partial(every_n, check_step, states, validation_n, mutant), (), REFUTED_BY[STEP_ROW], "validation"),
           Claim(PREDICATE_ROW, "validation", f"{STATES_PER_N} caching states per n, n <= {validation_n}",
                 partial(every_n, check_predicates, states, validation_n, mutant), (), REFUTED_BY[PREDICATE_ROW],
                 "validation")]
    checked = (STEP_ROW, PREDICATE_ROW)
    for name in ROWS_PROVED:
        kind = "lemma" if name.startswith("lemma:") else "invariant"
        out.append(Claim(name, "inductive (per block, pool events)", f"n <= {n}, any block id, any chains",
                         partial(up_to, partial(prove_row, name, mutant=mutant), n),
                         tuple(base) + checked + tuple(x for x in ROWS_PROVED if x != name), REFUTED_BY[name], kind))
    return out
