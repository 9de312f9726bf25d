"""The CrossHair engine: every state invariant as a one-step contract, plus the call contracts.

What it establishes.  For our impl (``target=None``) it runs, for every state invariant
of the registry and for the ``reachable_shape`` assumption, the one-step contract of
``proofs.symbolic.contracts`` on ``spec.step`` and on ``impl.Scheduler.step`` (or on
``scheduler_class``), then the validation contracts of ``impl.schedule``.  For an
external target, which only has ``schedule(jobs, slots, continuous)``, it runs the
validation contracts and compares whole runs with ``spec.check`` on small inputs.

Each contract gets one outcome, and only CrossHair's own verdict decides it:

- ``confirmed``: CrossHair reported the condition confirmed over all paths (it
  exhausted every path of the bounded domain of ``proofs.symbolic.contracts``);
- ``no counterexample within N s``: CrossHair's own per-condition timeout stopped
  the search with nothing found.  Never a proof;
- ``incomplete``: the contract's child was killed before CrossHair stopped on its own:
  cut off by the overall deadline, or at its own planned wall time (a target that
  never returns, or a machine so loaded that CrossHair's CPU-time limit came later:
  from outside the child the two look the same, so neither counts as searched).
  Never a pass;
- ``counterexample``: CrossHair found an input that breaks the contract, and a
  concrete re-run reproduced it; ``counterexample`` holds the plain input;
- ``unknown``: nothing was checked or the finding did not reproduce (CrossHair could
  not meet the precondition in time, a contract could not be parsed, the child
  crashed or died, the sandbox failed).  Never a pass.

Every result also says how far the search got: ``scenarios``, the distinct scenarios
the contract's body ran to their end (``proofs.symbolic.contracts.note_scenario``),
reported by the child as they grow, so a child killed at its deadline has its count
too.  ``proofs.symbolic.bridge.classify`` calls a search with nothing found ``bounded``
only from a stated minimum of them.

Assumptions and bounds: those of ``proofs.symbolic.contracts`` (at most 3 jobs, job k has id
k in the step contracts, small slots; one step, not a whole run) and, for the serving
model (``run_serving_crosshair``), those of ``proofs.symbolic.serving``.  Every contract
runs in a child of proofs.sandbox (forked, its own process group, memory capped)
that is killed at its wall-clock deadline, so a stuck solver cannot hang the caller; by
default each contract's planned time is its share of the wall time left when it starts
(``_run_all``), and ``budget_seconds`` (or ``deadline``) bounds the whole call.  Contracts not started before the budget runs out are reported as
``no counterexample within 0 s``.  Nothing runs at import time; CrossHair is
imported when ``run_crosshair`` is called.
"""

from __future__ import annotations

import ast
import inspect
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Optional

CONFIRMED = "confirmed"
COUNTEREXAMPLE = "counterexample"
UNKNOWN = "unknown"
INCOMPLETE = "incomplete"  # the contract's child was killed at its wall-clock deadline: cut short, never a pass


def no_counterexample_within(seconds: float) -> str:
    """The outcome of a search that stopped with nothing found: never called a proof."""
    return f"no counterexample within {seconds:g} s"


@dataclass(frozen=True)
class ContractResult:
    """The outcome of one contract: which claim, about what, and what CrossHair found."""

    name: str  # an invariant name, "reachable_shape", "validation" or "check"
    subject: str  # "spec.step" | "impl.Scheduler.step" | "schedule"
    outcome: str  # "confirmed" | "no counterexample within N s" | "counterexample" | "incomplete" | "unknown"
    seconds: float  # wall-clock time spent on this contract
    counterexample: Any  # plain data, or None
    message: str
    planned: float = 0.0  # the wall seconds it was planned (0: never started)
    scenarios: int = 0  # distinct scenarios its body ran to their end (proofs.symbolic.contracts.note_scenario)

    @property
    def found(self) -> bool:
        return self.outcome == COUNTEREXAMPLE


def run_crosshair(
    target: Callable | None = None,
    *,
    scheduler_class: type | None = None,
    budget_seconds: float,
    per_condition_seconds: float | None = None,
    deadline: float | None = None,
    names: tuple[str, ...] | None = None,
    subjects: tuple[str, ...] | None = None,
    workers: int | None = None,
    with_check: bool = True,
    report: Callable[[dict], None] | None = None,
) -> list[ContractResult]:
    """Run the CrossHair contracts and return one result per contract, in contract order.

    ``target=None`` checks our impl: the step contracts of spec.step and of
    ``scheduler_class`` (default ``impl.Scheduler``), then ``impl.schedule``'s validation.
    A callable ``target`` is an external ``schedule``: its validation and, if
    ``with_check``, its results against ``spec.check``.  ``names`` keeps only the
    contracts with those names; ``subjects`` only those subjects.  ``per_condition_seconds``
    is CrossHair's limit per contract, or None: each contract's share of the time left
    before ``deadline`` (a ``time.monotonic()`` instant; default ``budget_seconds`` from
    now), planned when it starts (``_run_all``).  ``workers`` children
    run at once (default: up to 2, never more than the CPUs).  ``report``, if given, is
    called with each result (as a dict) as soon as its contract ends.
    """
    _check_budget(budget_seconds, per_condition_seconds)
    from proofs.symbolic import contracts as C

    if target is None:
        import impl

        step_subjects = tuple(s for s in (subjects or ("spec.step", "impl.Scheduler.step")) if s != "schedule")
        todo = C.step_contracts(scheduler_class, subjects=step_subjects, names=names) if step_subjects else []
        if subjects is None or "schedule" in subjects:
            todo += [c for c in C.schedule_contracts(impl.schedule, with_check=False) if names is None or c.name in names]
    else:
        todo = [c for c in C.schedule_contracts(target, with_check=with_check) if names is None or c.name in names]
    workers = workers or max(1, min(2, os.cpu_count() or 1))
    if report is not None:
        report({"planned": [(c.name, c.subject) for c in todo]})
    import crosshair.core_and_libs  # noqa: F401  imported once here, so the forked children start warm

    return _run_all(todo, budget_seconds, per_condition_seconds, workers, report, deadline)


def run_serving_crosshair(
    make: Callable | None = None,
    *,
    budget_seconds: float,
    per_condition_seconds: float | None = None,
    deadline: float | None = None,
    names: tuple[str, ...] | None = None,
    subjects: tuple[str, ...] | None = None,
    workers: int | None = None,
    report: Callable[[dict], None] | None = None,
) -> list[ContractResult]:
    """Run the serving model's contracts (``proofs.symbolic.serving``) and return one result per contract.

    ``make(config)`` is the online engine checked on the ``impl.ServingScheduler.step``
    subject (default ``impl.online.make_serving``); ``names``, ``subjects``, ``workers``
    and ``report`` as for ``run_crosshair``."""
    _check_budget(budget_seconds, per_condition_seconds)
    from proofs.symbolic import serving as S

    todo = S.serving_contracts(make, subjects=subjects or S.SUBJECTS, names=names)
    workers = workers or max(1, min(2, os.cpu_count() or 1))
    if report is not None:
        report({"planned": [(c.name, c.subject) for c in todo]})
    import crosshair.core_and_libs  # noqa: F401  imported once here, so the forked children start warm

    return _run_all(todo, budget_seconds, per_condition_seconds, workers, report, deadline)


# --- running contracts in killable children (proofs.sandbox) -----------------------------------


def _check_budget(budget_seconds, per_condition_seconds) -> None:
    if not budget_seconds > 0:
        raise ValueError(f"budget_seconds={budget_seconds!r}: expected seconds > 0")
    if per_condition_seconds is not None and not per_condition_seconds > 0:
        raise ValueError(f"per_condition_seconds={per_condition_seconds!r}: expected seconds > 0, or None for a share")


SHARE_CAP_SECONDS = 20.0  # a contract's planned wall time never exceeds this, however large the budget
MIN_SHARE_SECONDS = 1.0  # below this a contract is not started: it could not search at all
OVERHEAD_SECONDS = 1.0  # of a contract's planned wall time: its fork, CrossHair's set-up, the concrete replay
# CrossHair's own limit counts CPU time, and a child killed at its wall share before CrossHair stops on its own is
# ``incomplete``: so the limit is the share times the CPU a child gets per wall second, with a margin.  A 0.2 s busy
# loop measures it before the first contract (``_measured_cpu_share``); then each finished child's own measure is used
# for the next (``_next_cpu_share``), within CPU_SHARE_BOUNDS: on a quiet machine a contract searches nearly its whole
# share, on a loaded one less (and may then explore fewer scenarios than a bounded search needs: incomplete).
CPU_SHARE_BOUNDS = (0.1, 0.5)  # at most half: two children on 2 cores beside the parent got about 0.7 (0.83 planned: killed)
CPU_SHARE_MARGIN = 0.85  # of the measured ratio: the load may rise while the next contract runs


def plan_share(left: float, workers: int, owed: float, contracts_left: int) -> float:
    """A contract's planned wall time: its equal share of the worker time left after what the running ones are
    owed, never more than the wall time left itself."""
    assert contracts_left >= 1 and workers >= 1, f"contracts_left={contracts_left}, workers={workers}"
    return min(SHARE_CAP_SECONDS, left, max(0.0, left * workers - owed) / contracts_left)


def _run_all(todo: list, budget: float, per_condition: float | None, workers: int, report=None,
             deadline: float | None = None) -> list[ContractResult]:
    """Run the contracts in killable children, ``workers`` at a time.

    ``per_condition=None`` plans each contract when it starts: its share of the wall time
    left before the overall deadline (``plan_share``), so the time already spent (the
    engine's start-up, the contracts before it) is accounted once; CrossHair's own
    (CPU-time) limit is that share less ``OVERHEAD_SECONDS``, times the CPU a child gets per
    wall second (measured: ``_measured_cpu_share``, then ``_next_cpu_share``), and the child
    is killed at the share.  A fixed ``per_condition`` is CrossHair's limit for every contract, and
    the child is killed a little after it.  A child killed, at its own planned time or
    earlier by the overall deadline, is ``incomplete``: only CrossHair's own stop is a search."""
    from proofs.sandbox import ENGINE_MEMORY_BYTES, Child, wait_any

    overall_deadline = time.monotonic() + budget
    if deadline is not None:
        overall_deadline = min(overall_deadline, deadline)
    results: list[Optional[ContractResult]] = [None] * len(todo)
    pending = list(range(len(todo)))
    cpu_share = _measured_cpu_share() if per_condition is None else 1.0  # a fixed limit is not planned from it
    running: dict[int, tuple[Child, float, float, bool]] = {}  # index -> (child, planned wall, CrossHair limit, cut)
    while pending or running:
        now = time.monotonic()
        while pending and len(running) < workers and now < overall_deadline:
            left = overall_deadline - now
            if per_condition is None:
                owed = sum(max(0.0, child.deadline - now) for child, _, _, _ in running.values())
                planned = plan_share(left, workers, owed, len(pending))
                if planned < MIN_SHARE_SECONDS:
                    break  # too little left to search at all: the rest are reported as not started
                limit = max(0.5, (planned - OVERHEAD_SECONDS) * cpu_share)
                wall = planned
            else:
                planned = limit = per_condition
                wall = per_condition + 3.0 + _per_path(per_condition)  # CrossHair checks its limit between paths
            cut = wall > left  # the overall deadline kills it before its own
            index = pending.pop(0)
            child = Child(_analyse, (todo[index], limit), seconds=max(0.1, min(wall, left)),
                          memory_bytes=ENGINE_MEMORY_BYTES, partial=True).start()
            running[index] = (child, planned, limit, cut)
        if not running:
            break  # the budget is spent: the rest are reported below
        wait_any([child for child, _, _, _ in running.values()], timeout=1.0)
        for index, (child, planned, limit, cut) in list(running.items()):
            outcome = child.poll()
            if outcome is None:
                continue
            del running[index]
            payload = _payload(outcome, planned, limit, cut)
            cpu_share = _next_cpu_share(payload, cpu_share)
            contract = todo[index]
            counted = [n for n in outcome.partial if type(n) is int]  # what a killed child had reported
            scenarios = payload.get("scenarios", counted[-1] if counted else 0)
            results[index] = ContractResult(
                contract.name, contract.subject, payload["outcome"], round(outcome.seconds, 2),
                payload.get("counterexample"), payload["message"], round(planned, 2), scenarios,
            )
            if report is not None:
                report(asdict(results[index]))
    for index in pending:
        contract = todo[index]
        results[index] = ContractResult(
            contract.name, contract.subject, no_counterexample_within(0), 0.0, None,
            "not started: the overall budget was spent before this contract's turn (not a proof)",
        )
    return [result for result in results if result is not None]


def _measured_cpu_share(seconds: float = 0.2) -> float:
    """The CPU a process gets per wall second here and now, less the margin (within CPU_SHARE_BOUNDS): a busy loop
    of ``seconds`` of wall time, timed both ways, plans the first contracts before any child has measured it."""
    wall, cpu = time.monotonic(), time.process_time()
    while time.monotonic() - wall < seconds:
        pass
    low, high = CPU_SHARE_BOUNDS
    return min(high, max(low, CPU_SHARE_MARGIN * (time.process_time() - cpu) / (time.monotonic() - wall)))


def _next_cpu_share(payload: dict, current: float) -> float:
    """The CPU per wall second to plan the next contract with: this child's measured ratio less a margin, or
    ``current`` when it measured too little to tell (a short search, or a child that did not return)."""
    cpu, wall = payload.get("cpu_seconds"), payload.get("wall_seconds")
    if not isinstance(cpu, float) or not isinstance(wall, float) or wall < 0.5:
        return current
    low, high = CPU_SHARE_BOUNDS
    return min(high, max(low, CPU_SHARE_MARGIN * cpu / wall))


def _payload(outcome, planned: float, limit: float, cut: bool) -> dict:
    """A contract's outcome from its child's (the table of proofs.sandbox): killed is incomplete, the rest unknown."""
    if outcome.kind == "returned":
        return outcome.result
    if outcome.kind == "timed_out":
        if cut:
            return {"outcome": INCOMPLETE,
                    "message": f"cut off by the overall deadline after {outcome.seconds:.1f} s of its planned "
                               f"{planned:.1f} s, with no counterexample found (not a proof)"}
        return {"outcome": INCOMPLETE,
                "message": f"killed at its planned {planned:.1f} s of wall time before CrossHair's own {limit:.1f} s "
                           f"CPU limit stopped it (the target did not return, or the machine was loaded): not searched"}
    if outcome.kind == "raised":
        return {"outcome": UNKNOWN, "message": f"the CrossHair run raised {outcome.error}"}
    if outcome.kind == "died":
        return {"outcome": UNKNOWN, "message": f"the CrossHair child died: {outcome.error}"}
    return {"outcome": UNKNOWN, "message": f"the sandbox failed (harness error): {outcome.error}"}


def _per_path(per_condition: float) -> float:
    return min(per_condition, max(1.0, per_condition / 4))


def _analyse(contract, per_condition: float, report: Callable[[int], None] | None = None) -> dict:
    """One contract's search: CrossHair's verdict as a payload, with the distinct scenarios it explored."""
    from proofs.symbolic.contracts import explored, start_exploration

    start_exploration(report)
    cpu, wall = time.process_time(), time.monotonic()
    payload = _search(contract, per_condition)
    payload.update(scenarios=explored(), cpu_seconds=time.process_time() - cpu, wall_seconds=time.monotonic() - wall)
    return payload


def _search(contract, per_condition: float) -> dict:
    from crosshair.core_and_libs import AnalysisKind, MessageType, analyze_function, run_checkables
    from crosshair.options import AnalysisOptionSet

    options = AnalysisOptionSet(
        analysis_kind=[AnalysisKind.PEP316],
        per_condition_timeout=per_condition,
        per_path_timeout=_per_path(per_condition),
        report_all=True,
        report_verbose=False,
    )
    checkables = analyze_function(contract.fn, options)
    if not checkables:
        return {"outcome": UNKNOWN, "message": "CrossHair found no contract to check"}
    messages = run_checkables(checkables)
    failures = [m for m in messages if m.state in (MessageType.POST_FAIL, MessageType.EXEC_ERR, MessageType.POST_ERR)]
    if failures:
        return _counterexample(contract, failures[0])
    states = {m.state for m in messages}
    if states == {MessageType.CONFIRMED}:
        return {"outcome": CONFIRMED, "message": "CrossHair confirmed it over every path of the bounded domain"}
    if MessageType.PRE_UNSAT in states:
        return {"outcome": UNKNOWN,
                "message": f"CrossHair could not meet the precondition within {per_condition:g} s: nothing was checked"}
    if MessageType.CANNOT_CONFIRM in states:
        return {"outcome": no_counterexample_within(per_condition),
                "message": "CrossHair stopped at the per-condition timeout with no counterexample (not a proof)"}
    detail = "; ".join(f"{m.state.name}: {m.message}" for m in messages) or "no messages"
    return {"outcome": UNKNOWN, "message": f"CrossHair gave no verdict: {detail}"}


def _counterexample(contract, message) -> dict:
    args = parse_invocation(contract.fn, message.message)
    if args is None:
        return {"outcome": UNKNOWN, "message": f"CrossHair reported a failure, but its input could not be read: {message.message}"}
    plain = contract.to_plain(args)
    why = contract.replay(args)
    if why is None:
        return {
            "outcome": UNKNOWN,
            "counterexample": plain,
            "message": f"CrossHair reported {message.message!r}, but a concrete re-run does not reproduce it",
        }
    return {"outcome": COUNTEREXAMPLE, "counterexample": plain, "message": why}


def parse_invocation(fn: Callable, text: str) -> Optional[dict]:
    """The arguments of the call in CrossHair's "... when calling f(a, b=c) ..." message, as plain values."""
    marker = "when calling "
    at = text.find(marker)
    if at < 0:
        return None
    rest = text[at + len(marker):]
    call = None
    for end in range(1, len(rest) + 1):  # the shortest prefix that parses as one call
        if rest[end - 1] != ")":
            continue
        try:
            node = ast.parse(rest[:end], mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Call):
            call = node
            break
    if call is None:
        return None
    try:
        positional = [ast.literal_eval(arg) for arg in call.args]
        keywords = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
    except ValueError:
        return None
    names = list(inspect.signature(fn).parameters)
    args = dict(zip(names, positional))
    args.update(keywords)
    return args if set(args) == set(names) else None
