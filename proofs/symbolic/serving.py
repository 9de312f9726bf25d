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
requests (at least 2 for ``slot_bound``, see ``FEWEST``) with ids 0, 1, 2 in FCFS
order (arrivals nondecreasing by id), arrival 0..2, prompt 1..4, output 1..3, abort
none or arrival..arrival+3; ``1 <= max_seqs <= 3``, ``1 <= token_budget <= 4``,
``1 <= block_size <= 2``, ``1 <= num_blocks <= 4``, chunked prefill on or off; the
call is valid (``spec.serving.is_valid``: every request fits the pool and, unchunked,
the budget); the contract's tick follows ``ticks`` (0..MAX_TICKS) earlier ones.

Bounds.  The pre-states are the reachable ones of that domain, not every state the
invariants admit (a pre-state is built by running the subject, so its allocator,
queues and ledger are the subject's own; an arbitrary invariant-satisfying state is
not reached).  The domain is finite, so ``confirmed`` would cover all of it, but
CrossHair's budget never exhausts it: expect ``bounded`` (no counterexample within the
planned time), evidence, never a proof.  In practice CrossHair realizes the symbolic
request count at its lower bound on most paths, so most of a contract's paths have one
request (two for ``slot_bound``); the injected bugs of tests/crosshair_serving_mutants.py
are found that way (docs/crosshair.md).  Nothing runs at import time.
"""

from __future__ import annotations

from typing import Callable, Optional

import spec.serving as serving
from spec.serving.domain import fcfs_key
from proofs.symbolic.contracts import Contract

MAX_REQUESTS = 3
MAX_TICKS = 5  # ticks before the contract's one
# The smallest request count a contract explores, where one request cannot break the invariant: CrossHair fixes
# the symbolic count at its lower bound on nearly every path, so a contract that starts from one request spends
# its time where slot_bound (max_seqs >= 1) cannot fail.
FEWEST = {"slot_bound": 2}
SUBJECTS = ("impl.ServingScheduler.step", "spec.serving.step")
Row = tuple[int, int, int, int]  # (arrival, prompt, output, abort); abort < arrival means none

BOUNDS = (f"one tick after <= {MAX_TICKS} ticks from the start of <= {MAX_REQUESTS} requests (>= 2 for slot_bound; "
          "ids 0..2 in FCFS order, arrival 0..2, "
          "prompt 1..4, output 1..3, abort none or arrival..arrival+3), max_seqs 1..3, token_budget 1..4, "
          "block_size 1..2, num_blocks 1..4, chunked on/off, valid calls only; pre-states are those the subject "
          "reaches, on which every state invariant holds")


def call_from_args(max_seqs: int, token_budget: int, block_size: int, num_blocks: int, chunked: bool,
                   rows, count: int) -> tuple[list[dict], dict]:
    """The serve(requests, config) call a scenario stands for: request k has id k; an abort below arrival is none."""
    requests = []
    for request_id, (arrival, prompt, output, abort) in enumerate(rows[:count]):
        request = {"id": request_id, "arrival": arrival, "prompt": prompt, "output": output}
        if abort >= arrival:
            request["abort"] = abort
        requests.append(request)
    config = {"max_seqs": max_seqs, "token_budget": token_budget, "block_size": block_size,
              "num_blocks": num_blocks, "chunked_prefill": chunked}
    return requests, config


def scenario_in_bounds(max_seqs: int, token_budget: int, block_size: int, num_blocks: int, rows,
                       count: int, ticks: int, fewest: int = 1) -> bool:
    """The explored domain (see the module docstring), ranges first so the solver settles them early;
    ``fewest`` is the smallest request count explored (``FEWEST``)."""
    if not (1 <= max_seqs <= 3 and 1 <= token_budget <= 4 and 1 <= block_size <= 2 and 1 <= num_blocks <= 4):
        return False
    if not (fewest <= count <= MAX_REQUESTS and 0 <= ticks <= MAX_TICKS):
        return False
    previous = 0
    for arrival, prompt, output, abort in rows[:count]:
        if not (previous <= arrival <= 2 and 1 <= prompt <= 4 and 1 <= output <= 3 and -1 <= abort <= arrival + 3):
            return False
        previous = arrival  # ids follow FCFS order: the queue's order needs no symbolic sort
    return True


def all_invariants_hold(state: serving.State) -> bool:
    """Every serving state invariant holds (well_typed first, so the rest may assume it)."""
    return all(inv.holds(state) for inv in serving.STATE_INVARIANTS)


def spec_scenario(config: dict, requests: list[dict], ticks: int):
    """The spec's pre-state after ``ticks`` ticks and its post-state after one more, or (None, None, ()) outside the domain."""
    if not serving.is_valid(requests, config):
        return None, None, ()
    state = serving.initial(requests, config)
    for _ in range(ticks):
        if serving.is_terminal(state):
            return None, None, ()
        state = serving.step(state)
    if serving.is_terminal(state) or not all_invariants_hold(state):
        return None, None, ()
    return state, serving.step(state), ()


def impl_scenario(make: Callable, config: dict, requests: list[dict], ticks: int):
    """The same through the online protocol of the engine ``make(config)``: the state its entries imply, before and
    after the contract's tick, and the problems (invariant, message) that tick showed in its entry or ``view()``."""
    from proofs.online.shadow import ServingShadow, entry_problem, is_idle

    if not serving.is_valid(requests, config):
        return None, None, ()
    parsed, parsed_config = serving.validate(requests, config)
    order = sorted(parsed, key=fcfs_key)
    by_id = {request["id"]: request for request in requests}
    engine = make(dict(config))
    shadow = ServingShadow(parsed_config)
    added, tick, done = 0, 0, 0
    while True:
        if not shadow.live:
            if added == len(order):
                return None, None, ()  # the run ended before the contract's tick
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
        last = done == ticks
        if last:
            before = shadow.state()
            if not all_invariants_hold(before) or shadow.problems:
                return None, None, ()
        entry = engine.step()
        problems = []
        if entry is not None and entry_problem(entry) is not None:
            if not last:
                return None, None, ()
            return before, before, (("well_typed", entry_problem(entry)),)
        if entry is None or is_idle(entry):
            shadow.clock = tick + 1
            if last:
                problems.append(("termination", f"tick {tick} did nothing while requests were live"))
        else:
            seen = len(shadow.problems)
            shadow.apply(tick, entry)
            problems += [(name, message) for name, message, _ in shadow.problems[seen:]]
        view = engine.view() if callable(getattr(engine, "view", None)) else None
        if view is not None:
            problems += [(name, message) for name, message, _ in shadow.view_problems(view, tick)]
        if last:
            return before, shadow.state(), tuple(problems)
        if problems:
            return None, None, ()  # an earlier tick already broke something: outside this contract's domain
        done += 1
        tick += 1


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


def _scenario_of(subject: str, make: Callable | None) -> Callable:
    if subject == "spec.serving.step":
        return spec_scenario
    return lambda config, requests, ticks: impl_scenario(make, config, requests, ticks)


def step_contract(invariant: str, subject: str, make: Callable | None = None) -> Callable:
    """The contract "a reachable pre-state that keeps every invariant still keeps ``invariant`` after one tick"."""
    scenario = _scenario_of(subject, make)
    fewest = FEWEST.get(invariant, 1)

    def serving_step_keeps(max_seqs: int, token_budget: int, block_size: int, num_blocks: int, chunked: bool,
                           r0: Row, r1: Row, r2: Row, count: int, ticks: int) -> tuple:
        """
        pre: scenario_in_bounds(max_seqs, token_budget, block_size, num_blocks, (r0, r1, r2), count, ticks, fewest)
        post: post_holds(invariant, __return__)
        """
        assert invariant and fewest  # bound into this closure: the conditions read them
        requests, config = call_from_args(max_seqs, token_budget, block_size, num_blocks, chunked, (r0, r1, r2), count)
        return scenario(config, requests, ticks)

    tag = "impl" if subject.startswith("impl") else "spec"
    serving_step_keeps.__name__ = serving_step_keeps.__qualname__ = f"serving_{tag}_step_keeps_{invariant}"
    return serving_step_keeps


def plain_of(args: dict) -> dict:
    """A scenario's arguments as plain data: the call, and how many ticks precede the contract's."""
    rows = tuple(tuple(args[k]) for k in ("r0", "r1", "r2"))
    requests, config = call_from_args(args["max_seqs"], args["token_budget"], args["block_size"], args["num_blocks"],
                                      args["chunked"], rows, args["count"])
    return {"requests": requests, "config": config, "ticks": args["ticks"]}


def _replay(subject: str, make: Callable | None, invariant: str) -> Callable[[dict], Optional[str]]:
    scenario = _scenario_of(subject, make)

    def replay(args: dict) -> Optional[str]:
        plain = plain_of(args)
        try:
            outcome = scenario(plain["config"], plain["requests"], plain["ticks"])
        except Exception as error:  # a buggy step may raise anything; that is the finding
            return f"the scenario raised {error!r}"
        return why_not(invariant, outcome)

    return replay


def serving_contracts(make: Callable | None = None, *, subjects: tuple[str, ...] = SUBJECTS,
                      names: tuple[str, ...] | None = None) -> list[Contract]:
    """One contract per serving state invariant, per subject, in registry order; ``make(config)`` is the online
    engine (default ``impl.online.make_serving``)."""
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
            contracts.append(Contract(name, subject, step_contract(name, subject, make), _replay(subject, make, name),
                                      plain_of))
    return contracts
