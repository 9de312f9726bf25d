"""CrossHair contracts of the serving model: one tick keeps every serving state invariant.

What they establish.  For every state invariant of ``spec.serving.STATE_INVARIANTS``
(iterated, never listed here) there is one contract per subject:

- ``spec.serving.step``: if a pre-state reached from ``spec.serving.initial`` in at
  most ``MAX_TICKS`` ticks of the bounded scenario below satisfies every state
  invariant and is not terminal, then one more ``step`` of it satisfies the named one;
- ``impl.ServingScheduler.step``: the same for our online serving scheduler, driven
  only through its public protocol (``add_request``, ``abort``, ``step``, ``view``):
  the harness adds each request at its arrival tick and calls ``abort(id)`` at its
  abort tick, as ``proofs.online.driver.drive`` does, and reads the state the
  scheduler's entries imply (``proofs.online.shadow.ServingShadow``); a problem the
  shadow or ``view()`` shows in the contract's tick counts against the invariant it
  names.  No private field is read or set.

What it assumes (the bounded domain, ``scenario_in_bounds``): 1 to ``MAX_REQUESTS``
requests with ids 0, 1, 2 in FCFS order (arrivals nondecreasing by id), arrival 0..2,
prompt 1..4, output 1..3, abort none or arrival..arrival+3; ``1 <= max_seqs <= 3``,
``1 <= token_budget <= 4``, ``1 <= block_size <= 2``, ``1 <= num_blocks <= 4``, chunked
prefill on or off; the call is valid (``spec.serving.is_valid``: every request fits the
pool and, unchunked, the budget); the contract's tick follows 0..MAX_TICKS earlier ones.

How it searches.  CrossHair chooses three symbolic request rows and a symbolic config
within the preconditions; the body decides each field by branches
(``settle_scenario``), so every CrossHair path is one plain scenario and the paths
spread over the domain, then runs, untraced, every prefix of the three requests (1, 2
or 3 of them) and every tick 0..MAX_TICKS of each prefix's run (``first_break``): one
path checks the claim for up to 3 x 6 (call, tick) pairs of the domain.  The subject
runs on plain values, so the solver reasons about the preconditions only, never about
the scheduler's own branches: the search is a sample of the domain without repeats.

Bounds.  The pre-states are the reachable ones of that domain, not every state the
invariants admit (a pre-state is built by running the subject, so its allocator,
queues and ledger are the subject's own; an arbitrary invariant-satisfying state is
not reached).  The domain is finite, so ``confirmed`` would mean CrossHair ran every
scenario of it, but its budget never exhausts it: expect ``bounded`` (no counterexample
among the scenarios its paths ran within the planned time), evidence, never a proof.
Nothing runs at import time.
"""

from __future__ import annotations

from typing import Callable, Optional

import spec.serving as serving
from spec.serving.domain import fcfs_key
from proofs.symbolic.contracts import Contract, note_scenario, settle, untraced  # noqa: F401  (settle: tests)

MAX_REQUESTS = 3
MAX_TICKS = 5  # ticks before the contract's one
PLAIN_SUBJECTS = ("impl.ServingScheduler.step", "spec.serving.step")
CACHING = " with prefix caching"  # a subject's suffix: the same step, on the prefix-caching domain
CACHING_SUBJECTS = tuple(subject + CACHING for subject in PLAIN_SUBJECTS)
SUBJECTS = PLAIN_SUBJECTS + CACHING_SUBJECTS
# The claims prefix caching adds or changes (shared blocks, their counts, tables with hits), each refuted by a mutant of
# the caching code (tests/crosshair_serving_mutants.py); the other claims are the plain contracts' on both domains' code.
CACHING_CLAIMS = ("no_false_sharing", "refcount_exact", "kv_exact")
FAMILIES = 3  # a request's tokens: 0 the base prompt, 1 it with another first token, 2 with another last token
BASE_TOKENS = (1, 2, 3, 4)
Row = tuple[int, int, int, int]  # (arrival, prompt, output, abort); abort < arrival means none

BOUNDS = (f"one tick after <= {MAX_TICKS} ticks from the start of <= {MAX_REQUESTS} requests (ids 0..2 in FCFS order, "
          "arrival 0..2, prompt 1..4, output 1..3, abort none or arrival..arrival+3), max_seqs 1..3, token_budget 1..4, "
          "block_size 1..2, num_blocks 1..4, chunked on/off, valid calls only; pre-states are those the subject "
          "reaches, on which every state invariant holds; CrossHair's paths sample this finite domain")
CACHING_BOUNDS = BOUNDS.replace("valid calls only", "prefix_caching on, each request's tokens one of 3 families of "
                                "[1, 2, 3, 4][:prompt] (as is, first token 5, last token 6), valid calls only")


def family_tokens(family: int, prompt: int) -> list[int]:
    """A request's prompt tokens on the caching domain: the base prompt, or it with another first or last token, so
    that two requests share every block, none, or all but the one holding the changed token."""
    tokens = list(BASE_TOKENS[:prompt])
    tokens[0 if family == 1 else -1] = tokens[0 if family == 1 else -1] if family == 0 else (5 if family == 1 else 6)
    return tokens


def call_from_args(max_seqs: int, token_budget: int, block_size: int, num_blocks: int, chunked: bool,
                   rows, count: int, families=None) -> tuple[list[dict], dict]:
    """The serve(requests, config) call a scenario stands for: request k has id k; an abort below arrival is none;
    with ``families`` (the caching domain) prefix caching is on and request k's tokens are its family's."""
    requests = []
    for request_id, (arrival, prompt, output, abort) in enumerate(rows[:count]):
        request = {"id": request_id, "arrival": arrival, "prompt": prompt, "output": output}
        if families is not None:
            request["tokens"] = family_tokens(families[request_id], prompt)
        if abort >= arrival:
            request["abort"] = abort
        requests.append(request)
    config = {"max_seqs": max_seqs, "token_budget": token_budget, "block_size": block_size,
              "num_blocks": num_blocks, "chunked_prefill": chunked}
    if families is not None:
        config["prefix_caching"] = True
    return requests, config


def scenario_in_bounds(max_seqs: int, token_budget: int, block_size: int, num_blocks: int, rows,
                       count: int, ticks: int) -> bool:
    """The explored domain's ranges (see the module docstring); with ``requests_fit``, what ``settle_scenario``
    decides."""
    if not (1 <= max_seqs <= 3 and 1 <= token_budget <= 4 and 1 <= block_size <= 2 and 1 <= num_blocks <= 4):
        return False
    if not (1 <= count <= MAX_REQUESTS and 0 <= ticks <= MAX_TICKS):
        return False
    previous = 0
    for index, (arrival, prompt, output, abort) in enumerate(rows):
        if index >= count:
            break
        if not (previous <= arrival <= 2 and 1 <= prompt <= 4 and 1 <= output <= 3 and -1 <= abort <= arrival + 3):
            return False
        previous = arrival  # ids follow FCFS order: the queue's order needs no symbolic sort
    return True


def requests_fit(token_budget: int, block_size: int, num_blocks: int, chunked: bool, rows, count: int) -> bool:
    """Each of the first ``count`` requests' peak need fits the pool and, unchunked, the budget:
    ``spec.serving.domain.check_feasible`` as arithmetic (``peak_limit``), which ``settle_scenario`` keeps."""
    for index, (_, prompt, output, _) in enumerate(rows):
        if index >= count:
            break
        if prompt + output - 1 > peak_limit(token_budget, block_size, num_blocks, chunked):
            return False
    return True


def peak_limit(token_budget: int, block_size: int, num_blocks: int, chunked: bool) -> int:
    """The most ``prompt + output - 1`` a valid request may have under this config (``spec.serving.domain``'s
    feasibility rule): the pool's tokens and, unchunked, the budget."""
    pool = num_blocks * block_size
    return pool if chunked else min(pool, token_budget)


# CrossHair turns a symbolic int into a plain one (a ``range``, an index, a slice, a hash) by taking one model value
# of the solver, and every later path through the same point takes that same value: a request count, say, stays at its
# lower bound on nearly every path.  A branch (``value == candidate``) is explored both ways, so deciding every field by
# branches spreads CrossHair's paths over the whole domain.  The config is decided first, so each request's ranges are
# plain numbers that keep it valid: every path is a valid scenario (no precondition to miss), and each scenario is
# reached by exactly one sequence of decisions, so no two paths run the same one.
def settle_scenario(max_seqs: int, token_budget: int, block_size: int, num_blocks: int, chunked: bool,
                    rows, families=None) -> tuple:
    """The scenario of the contract's domain (``scenario_in_bounds`` with all ``MAX_REQUESTS`` rows, every request
    valid) that these values decide, as plain values, an abort below arrival (none) as -1, and on the caching domain
    each request's token family (``family_tokens``) last.  Plain values inside the domain are kept as they are; any
    other int is taken to the top of its range."""
    config = (settle(max_seqs, 1, 3), settle(token_budget, 1, 4), settle(block_size, 1, 2), settle(num_blocks, 1, 4),
              True if chunked else False)
    limit = peak_limit(*config[1:])
    settled, previous = [], 0
    for arrival, prompt, output, abort in rows:
        arrival = settle(arrival, previous, 2)
        prompt = settle(prompt, 1, min(4, limit))
        output = settle(output, 1, min(3, limit - prompt + 1))
        abort = -1 if abort < arrival else settle(abort, arrival, arrival + 3)
        settled.append((arrival, prompt, output, abort))
        previous = arrival
    if families is None:
        return (*config, tuple(settled))
    return (*config, tuple(settled), tuple(settle(family, 0, FAMILIES - 1) for family in families))


def all_invariants_hold(state: serving.State) -> bool:
    """Every serving state invariant holds (well_typed first, so the rest may assume it)."""
    return all(inv.holds(state) for inv in serving.STATE_INVARIANTS)


OUTSIDE = (None, None, ())  # a tick outside the contract's domain: the claim says nothing about it


def spec_ticks(config: dict, requests: list[dict], last: int):
    """For ticks 0..``last`` of the spec's run in turn: its pre-state, post-state and ``()``, or ``OUTSIDE`` when the
    pre-state breaks an invariant; it stops when the run ends (and yields nothing for an invalid call)."""
    if not serving.is_valid(requests, config):
        return
    state = serving.initial(requests, config)
    for _ in range(last + 1):
        if serving.is_terminal(state):
            return
        after = serving.step(state)
        yield (state, after, ()) if all_invariants_hold(state) else OUTSIDE
        state = after


def impl_ticks(make: Callable, config: dict, requests: list[dict], last: int):
    """The same through the online protocol of the engine ``make(config)``: for ticks 0..``last`` in turn, the state
    its entries imply before and after the tick and the problems (invariant, message) that tick showed in its entry or
    ``view()``, or ``OUTSIDE``; it stops after a tick that showed a problem (every later tick is outside)."""
    from proofs.online.shadow import ServingShadow, entry_problem, is_idle

    if not serving.is_valid(requests, config):
        return
    parsed, parsed_config = serving.validate(requests, config)
    order = sorted(parsed, key=fcfs_key)
    by_id = {request["id"]: request for request in requests}
    engine = make(dict(config))
    shadow = ServingShadow(parsed_config)
    added, tick = 0, 0
    for done in range(last + 1):
        if not shadow.live:
            if added == len(order):
                return  # the run ended
            tick = max(tick, order[added].arrival)
        while added < len(order) and order[added].arrival <= tick:
            request = order[added]
            engine.add_request({k: v for k, v in by_id[request.id].items() if k != "abort"})
            shadow.add(request._replace(abort=None), dict(by_id[request.id]))
            added += 1
        for request_id in sorted(shadow.live, key=lambda i: fcfs_key(shadow.rows[i].request)):
            abort = shadow.rows[request_id].caller.get("abort")
            if abort is not None and abort <= tick and shadow.rows[request_id].request.abort is None:
                engine.abort(request_id)
                shadow.set_abort(request_id, tick)
        before = shadow.state()
        inside = all_invariants_hold(before) and not shadow.problems
        if not inside and done == last:
            yield OUTSIDE  # the last tick asked for: no need to run it
            return
        entry = engine.step()
        if entry is not None and entry_problem(entry) is not None:
            if inside:
                yield before, before, (("well_typed", entry_problem(entry)),)
            return
        problems, stalled = [], []
        if entry is None or is_idle(entry):
            shadow.clock = tick + 1
            stalled.append(("termination", f"tick {tick} did nothing while requests were live"))
        else:
            seen = len(shadow.problems)
            shadow.apply(tick, entry)
            problems += [(name, message) for name, message, _ in shadow.problems[seen:]]
        view = engine.view() if callable(getattr(engine, "view", None)) else None
        if view is not None:
            problems += [(name, message) for name, message, _ in shadow.view_problems(view, tick)]
        yield (before, shadow.state(), tuple(stalled + problems)) if inside else OUTSIDE
        if problems:
            return  # this tick broke something: every later tick is outside the domain
        tick += 1


def _nth(outcomes, ticks: int):
    for done, outcome in enumerate(outcomes):
        if done == ticks:
            return outcome
    return OUTSIDE


def spec_scenario(config: dict, requests: list[dict], ticks: int):
    """The spec's pre-state after ``ticks`` ticks and its post-state after one more, or ``OUTSIDE`` (None, None, ())."""
    return _nth(spec_ticks(config, requests, ticks), ticks)


def impl_scenario(make: Callable, config: dict, requests: list[dict], ticks: int):
    """The same through the online protocol of the engine ``make(config)`` (``impl_ticks``), or ``OUTSIDE``."""
    return _nth(impl_ticks(make, config, requests, ticks), ticks)


def post_holds(invariant: str, outcome) -> bool:
    """True when the scenario is outside the domain, or the named invariant holds after its tick."""
    before, after, problems = outcome
    if before is None:
        return True
    if any(name == invariant for name, _ in problems):
        return False
    return serving.BY_NAME[invariant].holds(after)


def why_not(invariant: str, outcome) -> Optional[str]:
    """Why the claim fails after the tick (None when it holds or the scenario is outside the domain)."""
    if post_holds(invariant, outcome):
        return None
    _, after, problems = outcome
    said = [message for name, message in problems if name == invariant]
    if said:
        return f"{invariant} fails after one step: {said[0]}"
    return (f"{invariant} fails after one step; post-state clock={after.clock}, latest={after.latest}, "
            f"running={[(p.id, p.computed, p.generated, p.blocks) for p in after.running]}")


def _ticks_of(subject: str, make: Callable | None) -> Callable:
    if subject.startswith("spec.serving.step"):
        return spec_ticks
    return lambda config, requests, last: impl_ticks(make, config, requests, last)


def first_break(invariant: str, ticks_of: Callable, settled: tuple, catch: bool = False) -> Optional[tuple]:
    """The first (count, ticks, why) of a decided scenario whose tick breaks ``invariant``: for its first ``count``
    requests (1..MAX_REQUESTS) in turn, each tick 0..MAX_TICKS of their run; None when none does (with ``catch``, a
    run that raises is a break at the tick it reached, as the concrete replay reports it)."""
    max_seqs, token_budget, block_size, num_blocks, chunked, rows, *families = settled
    for count in range(1, MAX_REQUESTS + 1):
        requests, config = call_from_args(max_seqs, token_budget, block_size, num_blocks, chunked, rows, count,
                                          families[0] if families else None)
        ticks, outcomes = 0, ticks_of(config, requests, MAX_TICKS)
        while True:
            try:
                outcome = next(outcomes, None)
            except Exception as error:  # a buggy step may raise anything; outside CrossHair that is the finding
                if not catch:
                    raise
                return count, ticks, f"the scenario raised {error!r}"
            if outcome is None:
                break
            why = why_not(invariant, outcome)
            if why is not None:
                return count, ticks, why
            ticks += 1
    return None


def step_contract(invariant: str, subject: str, make: Callable | None = None) -> Callable:
    """The contract "every reachable pre-state of a scenario that keeps every invariant still keeps ``invariant`` after
    one tick", for each prefix of its requests and each tick of their run (``first_break``)."""
    ticks_of = _ticks_of(subject, make)
    tag = "impl" if subject.startswith("impl") else "spec"

    def serving_step_keeps(max_seqs: int, token_budget: int, block_size: int, num_blocks: int, chunked: bool,
                           r0: Row, r1: Row, r2: Row) -> Optional[tuple]:
        """
        post: __return__ is None
        """
        settled = settle_scenario(max_seqs, token_budget, block_size, num_blocks, chunked, (r0, r1, r2))
        found = untraced(first_break, invariant, ticks_of, settled)
        note_scenario(settled)  # one distinct scenario explored, however many paths reach it
        return found

    def caching_step_keeps(max_seqs: int, token_budget: int, block_size: int, num_blocks: int, chunked: bool,
                           r0: Row, r1: Row, r2: Row, f0: int, f1: int, f2: int) -> Optional[tuple]:
        """
        post: __return__ is None
        """
        settled = settle_scenario(max_seqs, token_budget, block_size, num_blocks, chunked, (r0, r1, r2),
                                  (f0, f1, f2))
        found = untraced(first_break, invariant, ticks_of, settled)
        note_scenario(settled)
        return found

    if subject.endswith(CACHING):
        caching_step_keeps.__name__ = caching_step_keeps.__qualname__ = f"serving_{tag}_caching_step_keeps_{invariant}"
        return caching_step_keeps
    serving_step_keeps.__name__ = serving_step_keeps.__qualname__ = f"serving_{tag}_step_keeps_{invariant}"
    return serving_step_keeps


def _settled_of(args: dict) -> tuple:
    """The scenario a contract's (plain) arguments decide, as its body decided it."""
    families = tuple(args[k] for k in ("f0", "f1", "f2")) if "f0" in args else None
    return settle_scenario(args["max_seqs"], args["token_budget"], args["block_size"], args["num_blocks"],
                           args["chunked"], tuple(tuple(args[k]) for k in ("r0", "r1", "r2")), families)


def _plain_of(subject: str, make: Callable | None, invariant: str) -> Callable[[dict], dict]:
    ticks_of = _ticks_of(subject, make)

    def plain_of(args: dict) -> dict:
        """A scenario's arguments as plain data: the call that breaks the claim (its first ``count`` requests) and how
        many ticks precede the tick that breaks it (all three requests and ``ticks`` None when none does)."""
        settled = _settled_of(args)
        found = first_break(invariant, ticks_of, settled, catch=True)
        count, ticks = (found[0], found[1]) if found else (MAX_REQUESTS, None)
        requests, config = call_from_args(*settled[:6], count, settled[6] if len(settled) > 6 else None)
        return {"requests": requests, "config": config, "ticks": ticks}

    return plain_of


def _replay(subject: str, make: Callable | None, invariant: str) -> Callable[[dict], Optional[str]]:
    ticks_of = _ticks_of(subject, make)

    def replay(args: dict) -> Optional[str]:
        found = first_break(invariant, ticks_of, _settled_of(args), catch=True)
        return None if found is None else found[2]

    return replay


def serving_contracts(make: Callable | None = None, *, subjects: tuple[str, ...] = SUBJECTS,
                      names: tuple[str, ...] | None = None) -> list[Contract]:
    """One contract per serving state invariant, per plain subject, and one per caching claim (``CACHING_CLAIMS``)
    per caching subject, in registry order; ``make(config)`` is the online engine (default
    ``impl.online.make_serving``)."""
    if make is None:
        from impl.online import make_serving as make
    wanted = [inv.name for inv in serving.STATE_INVARIANTS]
    if names is not None:
        wanted = [name for name in wanted if name in names]
    contracts = []
    for subject in subjects:
        if subject not in SUBJECTS:
            raise ValueError(f"subject={subject!r}: expected one of {', '.join(SUBJECTS)}")
        for name in wanted:
            if subject in CACHING_SUBJECTS and name not in CACHING_CLAIMS:
                continue
            contracts.append(Contract(name, subject, step_contract(name, subject, make), _replay(subject, make, name),
                                      _plain_of(subject, make, name)))
    return contracts
