"""The Z3 encodings checked against the executable spec at every ``prove`` run, before any proof counts.

What it establishes: for each model and each n from 1 to the ledger's bound, on a
fixed set of states (below), that

- each state is one the encoding represents exactly (its valuation maps back to the
  same state, it satisfies the encoding's domain, an initial state satisfies Init);
- the encoding's transition with the pre-state pinned admits exactly the post-state
  that the spec's own ``step`` computes: satisfiable with that post-state pinned, and
  unsatisfiable, in ONE solver query, with "the post-state differs from it in some
  field" (every field of the abstraction the proofs read: for the serving model its
  block-id-free normal form, and for the per-block encoding the state of every block
  id the states name, the spec's allocations being the takes); a terminal state has no
  successor (row ``encoding matches spec.step``);
- every Z3 predicate of the ledger equals the registry's executable predicate on the
  same state, true where it is true and false where it is false, and every lemma the
  proofs assume holds of every reachable state (row ``predicates match the registry``).

A disagreement is a ``refuted`` row whose counterexample names the state (the call
that reaches it and the steps taken, or how it was drawn), the field and both values;
``schedcheck prove`` then reports no proof and exits 1 (``proofs.smt.run``).

The states, per n, from a seeded generator (the same states on every run, so the
report is stable): reachable states of the spec's run (``initial`` then ``step`` to
the end, which is what ``run`` computes) on drawn inputs of exactly n jobs or
requests, in families that reach the corners the step's rules turn on, chosen round
robin over the corners each state's step hits (``_by_corners``: for the serving model, configs
with ``prefix_caching`` and ``reserve_full_sequence`` absent or false, the step this encoding is of;
4 or more requests running while the budget binds, max_seqs binding, preemption of one
or several, resumption, partial chunks, aborts, idle jumps, ...); then states drawn
from the proofs' hypotheses that the step accepts (chapter: any representable state,
every per-job field arbitrary; serving: reachable states with the running order
permuted, an abort tick added or the config changed, kept when every registry state
invariant still holds of them).

It reads the spec that runs: ``spec`` and ``spec.serving`` as imported, so a changed
copy of the spec is what is checked.  A step that raises, or a post-state the encoding
cannot represent, is a disagreement.  Assumptions: the valuation maps of the models
(``model.valuation_of_state``, ``serving_model.valuation_of_state``), checked by the
round trip above.  Bounds: ``STATES_PER_N`` (serving) and ``CHAPTER_STATES_PER_N`` states
per n (fewer when the inputs of that n reach fewer distinct states); values small.  Nothing runs at import time.
"""

from __future__ import annotations

import random
from typing import NamedTuple

import z3

PASS, REFUTED, UNKNOWN = "checked", "refuted", "unknown"
STEP_ROW = "encoding matches spec.step"
FOLD_ROW = "folds match spec.step"
PREDICATE_ROW = "predicates match the registry"
ROWS = (STEP_ROW, FOLD_ROW, PREDICATE_ROW)
REFUTED_BY = {
    "chapter": {STEP_ROW: "admit_while_le_slots", PREDICATE_ROW: "slot_bound_strict"},
    "serving": {STEP_ROW: "budget_plus_one", FOLD_ROW: "pool_plus_one", PREDICATE_ROW: "token_budget_strict"},
}
STATES_PER_N = 32  # serving: 21 corners and their combinations to cover
CHAPTER_STATES_PER_N = 16  # the chapter's step has 7 corners
SEED = 22


class Case(NamedTuple):
    """One state to check: how it was reached, the state, the state before its latest step (or None), reachable or
    drawn, and whether it is an initial state."""

    origin: str
    state: object
    prev: object = None
    reachable: bool = True
    initial: bool = False


def _result(status: str, detail: str, counterexample=None) -> dict:
    return {"status": status, "detail": detail, "counterexample": counterexample, "hypotheses": "-"}


def _refuted(n: int, origin: str, field: str, spec_value, encoding_value, what: str = "the spec gives") -> dict:
    return _result(REFUTED, f"at n={n}: {field}: {what} {spec_value!r}, the encoding {encoding_value!r}",
                   {"n": n, "state": origin, "field": field, "spec": spec_value, "encoding": encoding_value})


def _short(value, limit: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _by_corners(items: list, count: int) -> list:
    """``count`` of the ``(case, corners)`` items: round robin over each corner (the rarest first), then each
    combination of corners (every one in turn takes its next unpicked state), so that every corner the inputs reach
    is in the set when ``count`` is at least the number of corners."""
    queues: dict = {}
    for index, (_, corners) in enumerate(items):
        for key in list(corners or ("nothing",)) + [tuple(corners)]:
            queues.setdefault(key, []).append(index)
    # single corners first, the rarest first (so that a corner few states reach is not crowded out), then combinations
    order = [queues[key] for key in sorted(queues, key=lambda key: (isinstance(key, tuple), len(queues[key]), repr(key)))]
    chosen: set = set()
    while len(chosen) < min(count, len(items)):
        progressed = False
        for queue in order:
            while queue and queue[0] in chosen:
                queue.pop(0)
            if queue and len(chosen) < count:
                chosen.add(queue.pop(0))
                progressed = True
        if not progressed:
            break
    return [items[i][0] for i in sorted(chosen)]


def _check_exactly(solver: z3.Solver, conds: list):
    """With the pre-state and the step asserted: None when the solver is sat with every condition and unsat with
    their negation (ONE query); else ``(kind, model)``: ``none`` no successor at all, ``other`` a successor that
    breaks a condition (the model), ``unknown`` the solver gave up."""
    result = solver.check(*[c for _, _, c in conds])
    if result == z3.sat:
        solver.push()
        solver.add(z3.Or([z3.Not(c) for _, _, c in conds]))
        other = solver.check()
        model = solver.model() if other == z3.sat else None
        solver.pop()
        if other == z3.unsat:
            return None
        return ("other" if other == z3.sat else "unknown", model)
    if result == z3.unsat:  # the encoding's own successor, if it has one
        mine = solver.check()
        if mine == z3.sat:
            return "other", solver.model()
        return ("none" if mine == z3.unsat else "unknown"), None
    return "unknown", None


def _first_difference(conds: list, model) -> tuple:
    for label, want, cond in conds:
        if not z3.is_true(model.eval(cond, model_completion=True)):
            return label, want
    return None, None


def _step_outcome(n: int, case: Case, step, represent) -> tuple:
    """``(post-state, its representation, None)`` or ``(None, None, a refuted result)`` when the spec's step raises
    or its post-state is one the encoding cannot represent."""
    try:
        nxt = step(case.state)
    except Exception as error:  # noqa: BLE001 - the spec that runs may be broken: that is a finding
        return None, None, _refuted(n, case.origin, "post-state", f"{type(error).__name__}: {error}",
                                    "a successor", "the step raises")
    try:
        return nxt, represent(nxt), None
    except (ValueError, KeyError, IndexError, AttributeError, TypeError) as error:
        return None, None, _refuted(n, case.origin, "post-state", _short(nxt), f"not representable: {error}",
                                    "the step gives")


def every_n(check, states, n_max: int, mutant: str | None) -> dict:
    """``check(n, states(n), mutant)`` for n = 1..n_max: checked when each is, else the first that is not."""
    total = 0
    for n in range(1, n_max + 1):
        cases = states(n)
        result = check(n, cases, mutant)
        if result["status"] != PASS:
            return result
        total += len(cases)
    return _result(PASS, f"n = 1..{n_max}: {total} states, every one agrees with the spec that runs")


# --- the chapter's model ------------------------------------------------------------------------


def _chapter_call(jobs, slots, continuous) -> str:
    return f"schedule({jobs!r}, slots={slots!r}, continuous={continuous!r})"


def _chapter_corners(state, nxt) -> tuple:
    """What one step of the chapter's spec does: the corners its rules turn on."""
    admitted = len(state.waiting) - len(nxt.waiting)
    return tuple(name for name, hit in (
        ("jump", nxt.clock - 1 > state.clock),
        ("admits", admitted > 0),
        ("admits several", admitted > 1),
        ("fills the slots", admitted > 0 and len(state.active) + admitted == state.slots),
        ("slots stop an arrived job", any(j.arrival <= nxt.clock - 1 for j in nxt.waiting[:1])
         and len(nxt.active) + len(nxt.done) - len(state.done) == state.slots),
        ("static batch running", not state.continuous and bool(state.active)),
        ("finishes", len(nxt.done) > len(state.done)),
    ) if hit)


def chapter_states(n: int, count: int = CHAPTER_STATES_PER_N, seed: int = SEED) -> list:
    """About ``count`` cases of exactly n jobs: reachable ones (round robin over their corners), then drawn ones."""
    import spec
    from proofs.smt import model as M

    rng = random.Random(f"chapter-{seed}-{n}")
    reachable = []
    for k in range(8 * count):
        spread = (0, 1, n, 3 * n)[k % 4]
        ids = rng.sample(range(-3, 4 * n + 4), n)
        jobs = [{"id": i, "arrival": rng.randint(0, spread), "tokens": rng.randint(1, 4)} for i in ids]
        slots = (1, max(1, n // 2), n, n + 1)[(k // 4) % 4]
        continuous = k % 2 == 0
        state = spec.initial(jobs, slots, continuous)
        steps = 0
        while steps <= 60:
            case = Case(f"{_chapter_call(jobs, slots, continuous)} after {steps} step(s)", state, None, True, steps == 0)
            if spec.is_terminal(state):
                reachable.append((case, ("terminal",)))
                break
            nxt = spec.step(state)
            reachable.append((case, _chapter_corners(state, nxt)))
            state, steps = nxt, steps + 1
    drawn = []
    while len(drawn) < count // 4:
        keys = sorted({(rng.randint(0, 4), i) for i in rng.sample(range(-2, 3 * n + 3), n)})
        small = lambda: rng.randint(-2, 7)  # noqa: E731
        val = M.normalized({
            "ids": [k[1] for k in keys], "arr": [k[0] for k in keys], "tok": [rng.randint(1, 4) for _ in keys],
            "slots": rng.randint(1, n + 1), "continuous": rng.random() < 0.5, "clock": rng.randint(0, 8),
            "busy": rng.randint(0, 8), "adm": rng.randint(0, n), "rem": [small() for _ in keys],
            "start": [small() for _ in keys], "fin": [small() for _ in keys],
            "dn": [rng.random() < 0.5 for _ in keys], "srv": [rng.random() < 0.5 for _ in keys]})
        drawn.append(Case(f"drawn state {val!r}", M.state_of_valuation(val), None, False))
    return _by_corners(reachable, count - count // 4) + drawn


class _ChapterFrames:
    """One n's encoding of the chapter's step: inputs, two frames, trans and the encoded predicates, built once."""

    def __init__(self, n: int, mutant: str | None):
        from proofs.smt import model as M

        M.reset_indicators()
        self.M = M
        self.inp = inp = M.make_inputs(n)
        self.s, self.t = s, _ = M.make_vars(inp, "v0"), M.make_vars(inp, "v1")
        step_mutant = mutant if mutant in M.MUTANTS and mutant not in M.PREDICATE_MUTANTS else None
        self.trans = M.trans(inp, s, self.t, step_mutant)
        self.domain = z3.And(M.domain(inp, mutant=step_mutant))
        self.init = M.init(inp, s)
        self.preds = {name: f(inp, s) for name, f in M.PREDICATES.items()}
        if mutant == "slot_bound_strict":  # model.PREDICATE_MUTANTS
            self.preds["slot_bound"] = z3.And(M.n_active(inp, s) < inp.slots, M.n_served(inp, s) <= inp.slots)
        self.lemmas = {f"lemma:{name}": f(inp, s) for name, f in M.LEMMAS.items()}
        self.solver = z3.SimpleSolver()
        self.solver.add(M.indicator_defs())

    def post_conditions(self, expected: dict) -> list:
        """``(field, value the spec gives, condition on t)``: t stands for the expected valuation's state (the
        fields that apply to each job's place: what ``model.state_of_valuation`` reads)."""
        t, out = self.t, []
        out += [("clock", expected["clock"], t.clock == expected["clock"]),
                ("admitted count", expected["adm"], t.adm == expected["adm"])]
        for i in range(self.inp.n):
            who = f"job {expected['ids'][i]}"
            out.append((f"{who} served in the latest tick", expected["srv"][i], t.srv[i] == expected["srv"][i]))
            if i >= expected["adm"]:
                continue
            out += [(f"{who} done", expected["dn"][i], t.dn[i] == expected["dn"][i]),
                    (f"{who} start", expected["start"][i], t.start[i] == expected["start"][i])]
            if expected["dn"][i]:
                out.append((f"{who} finish", expected["fin"][i], t.fin[i] == expected["fin"][i]))
            else:
                out.append((f"{who} remaining", expected["rem"][i], t.rem[i] == expected["rem"][i]))
        out.append(("busy", expected["busy"], t.busy == expected["busy"]))
        return out

    def value(self, label: str, model):
        """The encoding successor's value of the field named ``label``."""
        M, t = self.M, self.t
        simple = {"clock": t.clock, "busy": t.busy, "admitted count": t.adm}
        if label in simple:
            return M._value(model, simple[label])
        for i, job_id in enumerate(M._value(model, x) for x in self.inp.ids):
            who = f"job {job_id} "
            if label.startswith(who):
                terms = {"served in the latest tick": t.srv[i], "done": t.dn[i], "start": t.start[i],
                         "finish": t.fin[i], "remaining": t.rem[i]}
                return M._value(model, terms[label[len(who):]])
        return None


def _chapter_represent(state):
    """The valuation of a chapter state, after checking that it maps back to the same state (else ValueError)."""
    from proofs.smt import model as M

    val = M.valuation_of_state(state)
    back = M.state_of_valuation(val)
    if back._replace(done=tuple(sorted(back.done))) != state._replace(done=tuple(sorted(state.done))):
        raise ValueError(f"the valuation stands for another state: {_short(back)}")
    return val


def check_chapter_step(n: int, cases: list, mutant: str | None = None) -> dict:
    """The chapter's ``trans`` against ``spec.step`` on ``cases`` of n jobs: the first disagreement, else checked."""
    import spec

    frames = _ChapterFrames(n, mutant)
    solver, M = frames.solver, frames.M
    for case in cases:
        try:
            val = _chapter_represent(case.state)
        except ValueError as error:
            return _refuted(n, case.origin, "state", _short(case.state), f"not representable: {error}", "the spec has")
        solver.push()
        try:
            solver.add(M.pin(frames.inp, frames.s, val))
            solver.add(frames.trans)
            if spec.is_terminal(case.state):
                if solver.check() != z3.unsat:
                    return _refuted(n, case.origin, "successor", "none (terminal)",
                                    _short(M.read_frame(solver.model(), frames.inp, frames.t)))
                continue
            nxt, expected, bad = _step_outcome(n, case, spec.step, _chapter_represent)
            if bad is not None:
                return bad
            conds = frames.post_conditions(expected)
            found = _check_exactly(solver, conds)
            if found is not None:
                return _disagreement(n, case, conds, found, frames.value, "spec.step")
        finally:
            solver.pop()
    return _result(PASS, f"n={n}: {len(cases)} states, each with exactly spec.step's successor")


def _disagreement(n: int, case: Case, conds: list, found: tuple, value, step_name: str) -> dict:
    kind, model = found
    if kind == "unknown":
        return _result(UNKNOWN, f"at n={n}: the solver gave up on {case.origin}")
    if kind == "none":
        return _refuted(n, case.origin, "successor", "a successor", "none")
    label, want = _first_difference(conds, model)
    return _refuted(n, case.origin, label, want, value(label, model), f"{step_name} gives")


def check_chapter_predicates(n: int, cases: list, mutant: str | None = None) -> dict:
    """Each of the chapter's encoded predicates equals the registry's on ``cases``, each state is in the encoding's
    domain (Init for an initial one), and every lemma holds of every reachable state."""
    from spec.invariants import BY_NAME

    frames = _ChapterFrames(n, mutant)
    solver, M = frames.solver, frames.M
    for case in cases:
        try:
            val = _chapter_represent(case.state)
        except ValueError as error:
            return _refuted(n, case.origin, "state", _short(case.state), f"not representable: {error}", "the spec has")
        solver.push()
        solver.add(M.pin(frames.inp, frames.s, val))
        result = solver.check()
        model = solver.model() if result == z3.sat else None
        solver.pop()
        if model is None:
            return _result(UNKNOWN, f"at n={n}: the state does not satisfy the indicator definitions: {case.origin}")
        bad = _predicates_agree(n, case, model, frames, BY_NAME)
        if bad is not None:
            return bad
    return _result(PASS, f"n={n}: {len(cases)} states, {len(frames.preds)} predicates each")


def _predicates_agree(n: int, case: Case, model, frames, registry: dict, extra: dict | None = None) -> dict | None:
    """None when every encoded predicate (and ``extra``, already evaluated) equals the registry's at ``case``, the
    state is in the domain (and Init, if initial), and every lemma holds of it if reachable; else a refuted result."""

    def true(term) -> bool:
        return z3.is_true(model.eval(term, model_completion=True))

    if not true(frames.domain):
        return _refuted(n, case.origin, "the encoding's domain", True, False, "the spec's state is in it:")
    if case.initial and not true(frames.init):
        return _refuted(n, case.origin, "Init", True, False, "the spec's initial state satisfies it:")
    encoded = {name: true(p) for name, p in frames.preds.items()}
    encoded.update(extra or {})
    for name, value in encoded.items():
        expected = bool(registry[name].holds(case.state))
        if value != expected:
            return _refuted(n, case.origin, name, expected, value, "the registry says")
    if case.reachable:  # every lemma the proofs assume holds of a reachable state, or they would leave it out
        for name, term in frames.lemmas.items():
            if not true(term):
                return _refuted(n, case.origin, name, True, False, "a reachable state satisfies it:")
    return None


# --- the serving model ----------------------------------------------------------------------------


def _serve_call(requests, config) -> str:
    return f"serve({requests!r}, {config!r})"


FAMILIES = ("roomy", "busy", "crowded pool", "seats", "tight pool", "small chunks", "aborts", "idle gaps")


def _serving_input(n: int, k: int, rng: random.Random) -> tuple:
    """One valid call of exactly n requests from family ``FAMILIES[k % 8]``: roomy (max_seqs = n, every request runs
    at once), busy (max_seqs = n, chunked, a budget of n - 2 to n tokens: many run while the budget binds), a crowded
    pool (short prompts, long outputs, a pool of about n blocks: growth preempts while several run), seats (max_seqs
    below n, everything else roomy: only max_seqs stops the waiting pass), a tight pool, chunked prefill under a
    small budget, aborts, idle gaps."""
    family = FAMILIES[k % len(FAMILIES)]
    block_size = 1 if family == "crowded pool" else rng.randint(1, 3)
    ids = rng.sample(range(-3, 4 * n + 4), n)
    spread = {"roomy": 1, "busy": 1, "crowded pool": 0, "seats": 1, "tight pool": 2, "small chunks": 2, "aborts": 3,
              "idle gaps": 3 * n}[family]
    prompt, output = {"busy": ((2, 5), (2, 6)), "crowded pool": ((1, 2), (3, 6))}.get(family, ((1, 6), (1, 4)))
    requests = []
    for request_id in ids:
        arrival = rng.randint(0, spread)
        request = {"id": request_id, "arrival": arrival, "prompt": rng.randint(*prompt), "output": rng.randint(*output)}
        if family == "aborts" and rng.random() < 0.5:
            request["abort"] = arrival + rng.randint(0, 5)
        requests.append(request)
    works = [r["prompt"] + r["output"] - 1 for r in requests]
    peaks = [-(-w // block_size) for w in works]
    chunked = family in ("busy", "small chunks") or (family not in ("tight pool", "crowded pool") and rng.random() < 0.5)
    max_seqs = rng.randint(1, n + 1)
    if family == "roomy":
        budget, pool, max_seqs = sum(works) + rng.randint(0, 3), sum(peaks) + rng.randint(0, 3), n
    elif family == "busy":
        budget, pool, max_seqs = rng.randint(max(1, n - 2), n), sum(peaks) + rng.randint(0, 2), n
    elif family == "crowded pool":
        budget, pool, max_seqs = sum(works), max(max(peaks), n + rng.randint(0, 2)), n
    elif family == "seats":
        budget, pool, max_seqs = sum(works), sum(peaks), rng.randint(1, max(1, n - 1))
    elif family == "tight pool":
        budget, pool = max(works) + rng.randint(0, 4), max(peaks) + rng.randint(0, 2)
        max_seqs = rng.randint(max(1, n - 1), n + 1)
    else:
        budget = rng.randint(1, 4) if chunked else max(works) + rng.randint(0, 2)
        pool = max(peaks) + rng.randint(0, 4)
    if not chunked:
        budget = max(budget, max(works))
    config = {"max_seqs": max_seqs, "token_budget": budget, "block_size": block_size, "num_blocks": pool,
              "chunked_prefill": chunked}
    # the encoding is of the step with prefix caching off and reserve_full_sequence false: both keys absent, or false
    if k % 3 == 1:
        config["prefix_caching"] = False
    elif k % 3 == 2:
        config["reserve_full_sequence"] = False
    return requests, config


def _serving_corners(state, nxt) -> tuple:
    """What one tick of the serving spec does: the corners its rules turn on."""
    entry = nxt.latest
    running_ids = [p.id for p in state.running]
    admitted = [rid for rid, _ in entry.scheduled if rid not in running_ids]
    before = {p.id: p for p in state.waiting + state.running}
    spent = sum(amount for _, amount in entry.scheduled)
    head = nxt.waiting[:1]
    return tuple(name for name, hit in (
        ("jump", entry.tick > state.clock),
        ("4 or more running", len(state.running) >= 4),
        ("4 or more running, the budget binds", len(state.running) >= 4 and spent >= state.config.token_budget),
        ("the budget cuts a running request", any(
            0 < dict(entry.scheduled).get(p.id, 0) < p.known - p.computed for p in state.running)),
        ("4 or more running, the budget cuts one", len(state.running) >= 4 and any(
            dict(entry.scheduled).get(p.id, 0) < p.known - p.computed for p in state.running
            if p.id not in entry.preempted and p.id not in entry.aborted)),
        ("preempts", bool(entry.preempted)),
        ("preempts several", len(entry.preempted) > 1),
        ("preempts with 3 or more running", bool(entry.preempted) and len(state.running) >= 3),
        ("preempts the one it serves", any(rid not in dict(entry.scheduled) for rid in entry.preempted[-1:])
         and bool(entry.preempted) and entry.preempted[-1] in running_ids[:1]),
        ("admits", bool(admitted)),
        ("admits several", len(admitted) > 1),
        ("resumes a preempted request", any(before[rid].start is not None for rid in admitted)),
        ("partial chunk", any(amount < before[rid].known - before[rid].computed for rid, amount in entry.scheduled)),
        ("the budget binds", spent >= state.config.token_budget),
        ("max_seqs stops an arrived request", bool(head) and head[0].request.arrival <= entry.tick
         and not entry.preempted and len(nxt.running) + len(entry.finished) >= state.config.max_seqs),
        ("only max_seqs stops an arrived request", bool(head) and head[0].request.arrival <= entry.tick
         and not entry.preempted and len(nxt.running) + len(entry.finished) >= state.config.max_seqs
         and _fits(state, nxt, head[0], spent)),
        ("blocks stop an arrived request", bool(head) and head[0].request.arrival <= entry.tick
         and not entry.preempted and spent < state.config.token_budget
         and len(nxt.running) + len(entry.finished) < state.config.max_seqs),
        ("running pass allocates", any(rid in running_ids for rid, _ in entry.allocated)),
        ("allocates while ids are held", bool(entry.allocated) and any(p.blocks for p in state.running)),
        ("aborts", bool(entry.aborted)),
        ("aborts a running request", any(rid in running_ids for rid in entry.aborted)),
        ("finishes", bool(entry.finished)),
        ("a running request gets nothing", any(rid not in dict(entry.scheduled) for rid in running_ids
                                                 if rid not in entry.preempted and rid not in entry.aborted)),
    ) if hit)


def _fits(state, nxt, head, spent: int) -> bool:
    """The waiting queue's head would have fit the budget and the free blocks after the tick's passes."""
    from spec.serving.domain import blocks_for

    cfg, entry = state.config, nxt.latest
    left = cfg.token_budget - spent
    ask = min(head.known, left) if cfg.chunked_prefill else head.known
    held = sum(len(p.blocks) for p in nxt.running) + sum(len(b) for rid, b in entry.freed if rid in entry.finished)
    return left > 0 and ask <= left and blocks_for(ask, cfg.block_size) <= cfg.num_blocks - held


def serving_states(n: int, count: int = STATES_PER_N, seed: int = SEED) -> list:
    """About ``count`` cases of exactly n requests: reachable ones (round robin over the corners their tick hits),
    then drawn ones (see the module docstring)."""
    import spec.serving as S

    rng = random.Random(f"serving-{seed}-{n}")
    reachable, pool = [], []
    for k in range(12 * count):
        requests, config = _serving_input(n, k, rng)
        state, prev, steps = S.initial(requests, config), None, 0
        while steps <= 80:
            case = Case(f"{_serve_call(requests, config)} after {steps} step(s)", state, prev, True, steps == 0)
            if S.is_terminal(state):
                reachable.append((case, ("terminal",)))
                break
            nxt = S.step(state)
            reachable.append((case, _serving_corners(state, nxt)))
            pool.append(case)
            prev, state, steps = state, nxt, steps + 1
    return _by_corners(reachable, count - count // 4) + _drawn_serving(pool, count // 4, rng)


def _drawn_serving(pool: list, count: int, rng: random.Random) -> list:
    """States drawn from the hypotheses: reachable states with the running order permuted, an abort tick added or
    the config changed, kept when every registry state invariant holds of them and the step takes them."""
    import spec.serving as S

    out: list = []
    tries = 0
    while len(out) < count and pool and tries < 50 * max(count, 1):
        tries += 1
        case = pool[rng.randrange(len(pool))]
        state = case.state
        how = rng.randrange(3)
        if how == 0 and len(state.running) >= 2:
            order = list(state.running)
            rng.shuffle(order)
            drawn, what = state._replace(running=tuple(order)), f"running order {[p.id for p in order]}"
        elif how == 1:
            live = [p for p in state.waiting + state.running if p.request.abort is None]
            if not live:
                continue
            target = live[rng.randrange(len(live))]
            tick = max(state.clock, target.request.arrival) + rng.randint(0, 2)
            drawn, what = _with_abort(state, target.id, tick), f"request {target.id} aborting at tick {tick}"
        else:
            cfg = state.config
            change = {"token_budget": max(1, cfg.token_budget + rng.choice((-2, -1, 1, 3))),
                      "max_seqs": max(1, cfg.max_seqs + rng.choice((-1, 1, 2))),
                      "num_blocks": max(1, cfg.num_blocks + rng.choice((-1, 1, 2)))}
            key = rng.choice(sorted(change))
            drawn, what = state._replace(config=cfg._replace(**{key: change[key]})), f"{key} = {change[key]}"
        if not _feasible(drawn) or S.is_terminal(drawn) or S.broken_state_invariants(drawn):
            continue
        try:
            S.step(drawn)
        except Exception:  # noqa: BLE001 - a state the step does not take is not in the set
            continue
        out.append(Case(f"{case.origin}, then {what}", drawn, case.prev, False))
    return out


def _with_abort(state, request_id: int, tick: int):
    def fix(p):
        return p._replace(request=p.request._replace(abort=tick)) if p.id == request_id else p

    return state._replace(requests=tuple(r._replace(abort=tick) if r.id == request_id else r for r in state.requests),
                          waiting=tuple(fix(p) for p in state.waiting), running=tuple(fix(p) for p in state.running))


def _feasible(state) -> bool:
    """The domain's rules on the config and every request of the state."""
    from spec.serving.domain import blocks_for

    cfg = state.config
    return all(blocks_for(r.work, cfg.block_size) <= cfg.num_blocks and (cfg.chunked_prefill or r.work <= cfg.token_budget)
               for r in state.requests)


class _ServingFrames:
    """One n's count encoding of the serving tick, and the per-block step on top, built once."""

    def __init__(self, n: int, block_size: int | None, mutant: str | None):
        from proofs.smt import serving_blocks as B
        from proofs.smt import serving_model as M

        self.M, self.B = M, B
        self.inp = inp = M.make_inputs(n, block_size=block_size)
        self.s, self.t = s, t = M.make_vars(inp, "v0"), M.make_vars(inp, "v1")
        step_mutant = mutant if mutant in M.MUTANTS and mutant not in M.PREDICATE_MUTANTS else None
        self.trans, self.terms = M.transition(inp, s, t, step_mutant, "v")
        self.domain = z3.And(M.domain(inp, step_mutant))
        self.init = M.init(inp, s, step_mutant)
        self.bk = B.make_block()
        self.bs, self.bt = B.make_bvars(inp, "v0"), B.make_bvars(inp, "v1")
        self.btrans, self.bterms = B.block_transition(inp, s, self.bs, self.bt, self.terms, self.bk, step_mutant, "v")
        self.preds = {name: f(inp, s) for name, f in M.PREDICATES.items()}
        if mutant == "token_budget_strict":  # serving_model.PREDICATE_MUTANTS
            self.preds["token_budget"] = z3.Implies(s.hl, M.total(s.sn) < inp.budget)
        self.lemmas = {f"lemma:{name}": f(inp, s) for name, f in M.LEMMAS.items()}
        self.block_preds = {name: f(inp, s, self.bs, self.bk) for name, f in B.ROWS.items()}
        args = list(self.terms.block_args) + M.frame_block_args(inp, s) + M.frame_block_args(inp, t)
        self._exact = M.blocks_exact(inp, args) + M.frame_defs(inp, s)
        self._solvers: dict = {}

    def solver_for(self, block_size: int) -> z3.Solver:
        """A solver for states of that block size: blocks_for's exact definition with it substituted (linear)."""
        if block_size not in self._solvers:
            bs = self.inp.block_size
            solver = z3.Solver()
            solver.add(bs == block_size, *[z3.substitute(c, (bs, z3.IntVal(block_size))) for c in self._exact])
            self._solvers[block_size] = solver
        return self._solvers[block_size]

    def post_conditions(self, nxt, val: dict) -> list:
        """``(field, value the spec gives, condition on t)``: t decodes to ``normal_form(nxt)`` (block ids as counts)."""
        M, t = self.M, self.t
        ids = val["rid"]
        out = [("clock", val["clock"], t.clock == val["clock"])]
        for i, rid in enumerate(ids):
            who = f"request {rid}"
            out.append((f"{who} place", PLACES[val["st"][i]], t.st[i] == val["st"][i]))
            for label, f in RECORD:
                out.append((f"{who} {label}", val[f][i], t.per[f][i] == val[f][i]))
            for label, flag, f in OPTIONAL:
                if val[flag][i]:
                    out.append((f"{who} {label}", val[f][i], z3.And(t.per[flag][i], t.per[f][i] == val[f][i])))
                else:
                    out.append((f"{who} {label}", None, z3.Not(t.per[flag][i])))
            if val["st"][i] in (M.FINISHED, M.ABORTED):
                out.append((f"{who} end tick", val["et"][i], t.et[i] == val["et"][i]))
        index = {rid: i for i, rid in enumerate(ids)}
        for queue, rank in (("waiting", "wr"), ("running", "rr")):
            order = [index[p.id] for p in getattr(nxt, queue)]
            for a, b in zip(order, order[1:]):
                out.append((f"{queue} order", [ids[i] for i in order], t.per[rank][a] < t.per[rank][b]))
        for label, f in LEDGER:
            out.append((label, val[f], t.glob[f] == val[f]))
        out += [("latest entry exists", True, t.hl), ("latest tick", val["lt"], t.lt == val["lt"])]
        for i, rid in enumerate(ids):
            for label, f, kind in LATEST:
                term = t.per[f][i]
                cond = term == val[f][i] if kind == "flag" else z3.If(term >= 1, term, 0) == val[f][i]
                out.append((f"{label} request {rid}", val[f][i], cond))
        return out

    def value(self, label: str, model):
        """What the encoding's successor says of the field named ``label``."""
        M = self.M
        val = M.read_frame(model, self.inp, self.t)
        if label in ("waiting order", "running order"):
            return [r[0] for r in M.decode(val)[label.split()[0]]]
        for f in ("clock",):
            if label == f:
                return val[f]
        for label_, f in LEDGER:
            if label == label_:
                return val[f]
        if label == "latest entry exists":
            return val["hl"]
        if label == "latest tick":
            return val["lt"]
        for i, rid in enumerate(val["rid"]):
            who = f"request {rid}"
            for label_, f, kind in LATEST:
                if label == f"{label_} {who}":
                    return val[f][i] if kind == "flag" else max(val[f][i], 0) if val[f][i] >= 1 else 0
            if not label.startswith(who + " "):
                continue
            field = label[len(who) + 1:]
            if field == "place":
                return PLACES.get(val["st"][i], val["st"][i])
            if field == "end tick":
                return val["et"][i]
            for label_, f in RECORD:
                if field == label_:
                    return val[f][i]
            for label_, flag, f in OPTIONAL:
                if field == label_:
                    return val[f][i] if val[flag][i] else None
        return None


PLACES = {0: "waiting", 1: "running", 2: "finished", 3: "aborted"}  # serving_model.WAITING ... ABORTED
RECORD = (("computed", "c"), ("generated", "g"), ("blocks (count)", "b"), ("preemptions", "pre"), ("total", "tot"),
          ("recomputed", "rec"))
OPTIONAL = (("start", "hs", "start"), ("first_token", "hft", "ft"), ("admitted", "hadm", "adm"))
LEDGER = (("ledger computed", "led_c"), ("ledger useful", "led_u"), ("ledger recomputed", "led_r"),
          ("ledger aborted", "led_a"))
LATEST = (("latest.scheduled: tokens of", "sn", "count"), ("latest.preempted has", "pe", "flag"),
          ("latest.aborted has", "ab", "flag"), ("latest.finished has", "fi", "flag"),
          ("latest.freed: blocks of", "fr", "count"), ("latest.allocated: blocks to", "al", "count"))


def _serving_represent(state) -> dict:
    """The valuation of a serving state, after checking that it decodes to the same state (else ValueError)."""
    from proofs.smt import serving_model as M

    val = M.valuation_of_state(state)
    if M.decode(val) != M.normal_form(state):
        raise ValueError(f"the valuation stands for another state: {_short(M.decode(val))}")
    return val


def _block_ids(*states) -> list:
    """Every block id the states name (held, allocated, freed), the pool's ends and one id past each."""
    named: set = set()
    for state in states:
        progress = list(state.waiting) + list(state.running) + [e.progress for e in state.finished + state.aborted]
        named |= {b for p in progress for b in p.blocks}
        if state.latest is not None:
            named |= {b for _, blocks in state.latest.allocated + state.latest.freed for b in blocks}
    top = states[0].config.num_blocks
    return sorted(named | {-1, 0, top - 1, top})


class _ServingCache:
    """The encoding of one n, built on first use (block_size symbolic: pinned by each state, which keeps
    ``blocks_exact`` as cheap as a concrete block size); the any-n folds unrolled, per (running, waiting) lengths."""

    def __init__(self, n: int, mutant: str | None):
        self.n, self.mutant, self.frames, self.folds = n, mutant, None, {}

    def fold(self, running: int, waiting: int) -> tuple:
        """``(data, unrolled loops, their blk terms)`` for a tick whose passes start with these list lengths."""
        from proofs.smt import serving_fold as F

        key = (running, waiting)
        if key not in self.folds:
            mutant = self.mutant if self.mutant in F.MUTANTS else None
            d = F.make_data()
            u = F.unroll(d, 3 * running + 1, waiting + 1, mutant)
            self.folds[key] = (d, u, F.blk_terms(d, u))
        return self.folds[key]

    def get(self, block_size: int) -> tuple:
        """The frames and the solver for states of ``block_size``."""
        if self.frames is None:
            self.frames = _ServingFrames(self.n, None, self.mutant)
        return self.frames, self.frames.solver_for(block_size)


def check_serving_step(n: int, cases: list, mutant: str | None = None) -> dict:
    """The serving encodings against ``spec.serving.step`` on ``cases`` of n requests: the count step, and the
    per-block step at every block id the states name, the spec's allocations being the takes."""
    import spec.serving as S

    cache = _ServingCache(n, mutant)
    pairs = 0
    for case in cases:
        frames, solver = cache.get(case.state.config.block_size)
        M = frames.M
        try:
            val = _serving_represent(case.state)
        except ValueError as error:
            return _refuted(n, case.origin, "state", _short(case.state), f"not representable: {error}", "the spec has")
        solver.push()
        try:
            solver.add(*M.pin(frames.inp, frames.s, val), frames.trans)
            if S.is_terminal(case.state):
                if solver.check() != z3.unsat:
                    return _refuted(n, case.origin, "successor", "none (terminal)",
                                    _short(M.decode(M.read_frame(solver.model(), frames.inp, frames.t))))
                continue
            nxt, expected, bad = _step_outcome(n, case, S.step, _serving_represent)
            if bad is not None:
                return bad
            conds = frames.post_conditions(nxt, expected)
            found = _check_exactly(solver, conds)
            if found is not None:
                return _disagreement(n, case, conds, found, frames.value, "spec.serving.step")
            solver.add(*[c for _, _, c in conds])
            bad = _check_blocks(n, frames, solver, case, nxt)
            if bad is not None:
                return bad
            pairs += len(_block_ids(case.state, nxt))
        finally:
            solver.pop()
    return _result(PASS, f"n={n}: {len(cases)} states, each with exactly spec.serving.step's successor, and the "
                         f"per-block step at {pairs} (state, block id) pairs")


def check_serving_folds(n: int, cases: list, mutant: str | None = None) -> dict:
    """The any-n folds of ``serving_fold`` unrolled on ``cases`` of n requests: exactly spec.serving.step's passes."""
    import spec.serving as S

    cache = _ServingCache(n, mutant)
    checked = 0
    for case in cases:
        if S.is_terminal(case.state):
            continue
        nxt, _, bad = _step_outcome(n, case, S.step, lambda state: state.latest.scheduled)
        if bad is not None:
            return bad
        bad = _check_fold(n, cache, case, nxt)
        if bad is not None:
            return bad
        checked += 1
    return _result(PASS, f"n={n}: {checked} ticks, each pass run exactly as spec.serving.step runs it")


def _check_fold(n: int, cache: _ServingCache, case: Case, nxt) -> dict | None:
    """The any-n folds (``serving_fold``) unrolled on the state: exactly the step's passes; None when they agree."""
    from proofs.smt import serving_fold as F

    entry, state = nxt.latest, case.state
    gone = set(entry.aborted)
    running = sum(p.id not in gone for p in state.running)
    waiting = sum(p.id not in gone for p in state.waiting)
    d, u, blk = cache.fold(running, waiting)
    # a fresh solver per state: with every input pinned, Z3's preprocessing (propagate the values, solve the
    # equations) settles the unrolled loops at once, which push/pop on one solver would not do
    solver = z3.Then("simplify", "propagate-values", "solve-eqs", "smt").solver()
    solver.add(*u.constraints, *F.pin_state(d, state, entry), *F.pin_takes(d, state, entry),
               *F.blocks_exact_at(d, state.config.block_size, blk))
    conds = F.expected(d, u, state, entry)
    found = _check_exactly(solver, conds)
    if found is None:
        return None
    kind, model = found
    if kind == "unknown":
        return _result(UNKNOWN, f"at n={n}: the solver gave up on the folds at {case.origin}")
    if kind == "none":
        return _refuted(n, case.origin, "the any-n folds", "a run of the passes", "none")
    label, want = _first_difference(conds, model)
    return _refuted(n, case.origin, f"the any-n folds: {label}", want, "another value", "spec.serving.step gives")


def _check_blocks(n: int, frames: _ServingFrames, solver: z3.Solver, case: Case, nxt) -> dict | None:
    """The per-block step at every id the states name, the takes being the spec's allocations; None when it agrees."""
    B, inp, state = frames.B, frames.inp, case.state
    index = {r.id: i for i, r in enumerate(state.requests)}
    taken: dict = {}
    for rid, blocks in nxt.latest.allocated:
        taken.setdefault(index[rid], set()).update(blocks)
    solver.add(frames.btrans)
    for block in _block_ids(state, nxt):
        expected = B.block_valuation(nxt, state, block)
        conds = [(f"block {block}: {name} of request {state.requests[i].id}", expected[name][i],
                  frames.bt.per[name][i] == expected[name][i]) for name in B.FIELDS for i in range(inp.n)]
        solver.push()
        solver.add(frames.bk == block, *B.pin_block(inp, frames.bs, B.block_valuation(state, case.prev, block)))
        solver.add(*[frames.bterms.take[i] == (block in taken.get(i, ())) for i in range(inp.n)])
        found = _check_exactly(solver, conds)
        solver.pop()
        if found is None:
            continue
        kind, model = found
        if kind == "unknown":
            return _result(UNKNOWN, f"at n={n}: the solver gave up on block {block} of {case.origin}")
        if kind == "none":
            holders = {state.requests[i].id: sorted(b) for i, b in taken.items()}
            return _refuted(n, case.origin, f"block {block}: the allocations", holders,
                            "not allowed: an id that is not free at that point of the tick, or outside the pool",
                            "spec.serving.step makes")
        label, want = _first_difference(conds, model)
        got = None
        for name in B.FIELDS:
            for i, r in enumerate(state.requests):
                if label == f"block {block}: {name} of request {r.id}":
                    got = model.eval(frames.bt.per[name][i], model_completion=True).as_long()
        return _refuted(n, case.origin, label, want, got, "spec.serving.step gives")
    return None


def check_serving_predicates(n: int, cases: list, mutant: str | None = None) -> dict:
    """Each serving predicate equals the registry's on ``cases`` (kv_exclusive, kv_capacity and kv_exact with their
    per-block parts at every id the state names), each state is in the encoding's domain (Init for an initial one),
    and every lemma (per-block ones included) holds of every reachable state."""
    from spec.serving.invariants import BY_NAME

    cache = _ServingCache(n, mutant)
    count = 0
    for case in cases:
        frames, solver = cache.get(case.state.config.block_size)
        M, B, inp = frames.M, frames.B, frames.inp
        try:
            val = _serving_represent(case.state)
        except ValueError as error:
            return _refuted(n, case.origin, "state", _short(case.state), f"not representable: {error}", "the spec has")
        solver.push()
        solver.add(M.pin(inp, frames.s, val))
        result = solver.check()
        model = solver.model() if result == z3.sat else None
        solver.pop()
        if model is None:
            return _result(UNKNOWN, f"at n={n}: the state's valuation is not consistent ({result}): {case.origin}")
        per_block = []
        for block in _block_ids(case.state):  # each per-block predicate with bk and the per-block frame substituted
            bval = B.block_valuation(case.state, case.prev, block)
            pairs = [(frames.bk, z3.IntVal(block))] + [(frames.bs.per[f][i], z3.IntVal(bval[f][i]))
                                                       for f in B.FIELDS for i in range(inp.n)]
            per_block.append({name: z3.is_true(model.eval(z3.substitute(p, *pairs), model_completion=True))
                              for name, p in frames.block_preds.items()})
        extra = {"kv_exclusive": all(b["kv_exclusive"] for b in per_block)}
        parts = {"kv_capacity": "kv_capacity (ids)", "kv_exact": "kv_exact (ids)"}
        for name, part in parts.items():
            count_part = z3.is_true(model.eval(frames.preds[name], model_completion=True))
            extra[name] = count_part and all(b[part] for b in per_block)
        bad = _predicates_agree(n, case, model, frames, BY_NAME, extra)
        if bad is not None:
            return bad
        if case.reachable:
            for name in ("kv_freed_gives_back", "lemma:block_holders"):
                if not all(b[name] for b in per_block):
                    return _refuted(n, case.origin, name, True, False, "a reachable state satisfies it:")
        count += 1
    return _result(PASS, f"n={n}: {count} states, {len(frames.preds) if cases else 0} predicates each")


# --- the ledger's rows ---------------------------------------------------------------------------


def claims(model: str, n_max: int, mutant: str | None = None, per_n: int | None = None) -> list:
    """The validation rows of ``model``'s ledger ("chapter" or "serving"), for every n from 1 to ``n_max``."""
    from functools import partial

    from proofs.smt.run import Claim

    per_n = per_n or (CHAPTER_STATES_PER_N if model == "chapter" else STATES_PER_N)
    if model == "chapter":
        states = partial(chapter_states, count=per_n)
        checks = {STEP_ROW: check_chapter_step, PREDICATE_ROW: check_chapter_predicates}
    else:
        states = partial(serving_states, count=per_n)
        checks = {STEP_ROW: check_serving_step, FOLD_ROW: check_serving_folds, PREDICATE_ROW: check_serving_predicates}
    bound = f"{per_n} states per n, n <= {n_max}"
    return [Claim(row, "validation", bound, partial(every_n, checks[row], states, n_max, mutant), (),
                  REFUTED_BY[model][row], "validation") for row in ROWS if row in checks]
