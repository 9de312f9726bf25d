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
- ``incomplete``: the contract's child was killed at its wall-clock deadline (the
  sandbox's ``timed_out``).  Never a pass;
- ``counterexample``: CrossHair found an input that breaks the contract, and a
  concrete re-run reproduced it; ``counterexample`` holds the plain input;
- ``unknown``: nothing was checked or the finding did not reproduce (CrossHair could
  not meet the precondition in time, a contract could not be parsed, the child
  crashed or died, the sandbox failed).  Never a pass.

Assumptions and bounds: those of ``proofs.symbolic.contracts`` (at most 3 jobs, job k has id
k in the step contracts, small slots; one step, not a whole run).  Every contract
runs in a child of proofs.sandbox (forked, its own process group, memory capped)
that is killed at its wall-clock deadline, so a stuck solver cannot hang the caller; ``per_condition_seconds`` is
CrossHair's own (CPU-time) per-condition limit and ``budget_seconds`` bounds the
whole call.  Contracts not started before the budget runs out are reported as
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

    @property
    def found(self) -> bool:
        return self.outcome == COUNTEREXAMPLE


def run_crosshair(
    target: Callable | None = None,
    *,
    scheduler_class: type | None = None,
    budget_seconds: float,
    per_condition_seconds: float,
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
    contracts with those names; ``subjects`` only those subjects.  ``workers`` children
    run at once (default: up to 2, never more than the CPUs).  ``report``, if given, is
    called with each result (as a dict) as soon as its contract ends.
    """
    if budget_seconds <= 0 or per_condition_seconds <= 0:
        raise ValueError(
            f"budget_seconds={budget_seconds!r}, per_condition_seconds={per_condition_seconds!r}: expected both > 0"
        )
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

    return _run_all(todo, budget_seconds, per_condition_seconds, workers, report)


# --- running contracts in killable children (proofs.sandbox) -----------------------------------


def _run_all(todo: list, budget: float, per_condition: float, workers: int, report=None) -> list[ContractResult]:
    from proofs.sandbox import ENGINE_MEMORY_BYTES, Child, wait_any

    overall_deadline = time.monotonic() + budget
    results: list[Optional[ContractResult]] = [None] * len(todo)
    pending = list(range(len(todo)))
    running: dict[int, Child] = {}
    slack = 3.0 + _per_path(per_condition)  # CrossHair checks its (CPU-time) limit between paths; replay needs a little more
    while pending or running:
        now = time.monotonic()
        while pending and len(running) < workers and now < overall_deadline:
            index = pending.pop(0)
            seconds = max(0.1, min(per_condition + slack, overall_deadline - now))
            running[index] = Child(_analyse, (todo[index], per_condition), seconds=seconds,
                                   memory_bytes=ENGINE_MEMORY_BYTES).start()
        if not running:
            break  # the budget is spent: the rest are reported below
        wait_any(list(running.values()), timeout=1.0)
        for index, child in list(running.items()):
            outcome = child.poll()
            if outcome is None:
                continue
            del running[index]
            payload = _payload(outcome)
            contract = todo[index]
            results[index] = ContractResult(
                contract.name, contract.subject, payload["outcome"], round(outcome.seconds, 2),
                payload.get("counterexample"), payload["message"],
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


def _payload(outcome) -> dict:
    """A contract's outcome from its child's (the table of proofs.sandbox): killed is incomplete, the rest unknown."""
    if outcome.kind == "returned":
        return outcome.result
    if outcome.kind == "timed_out":
        return {"outcome": INCOMPLETE,
                "message": f"killed at the wall-clock deadline after {outcome.seconds:.1f} s "
                           "with no counterexample found (not a proof)"}
    if outcome.kind == "raised":
        return {"outcome": UNKNOWN, "message": f"the CrossHair run raised {outcome.error}"}
    if outcome.kind == "died":
        return {"outcome": UNKNOWN, "message": f"the CrossHair child died: {outcome.error}"}
    return {"outcome": UNKNOWN, "message": f"the sandbox failed (harness error): {outcome.error}"}


def _per_path(per_condition: float) -> float:
    return min(per_condition, max(1.0, per_condition / 4))


def _analyse(contract, per_condition: float) -> dict:
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
