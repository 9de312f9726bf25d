"""The CrossHair engine inside `schedcheck verify`: isolated, and through the common pipeline.

``run_contracts`` runs ``proofs.symbolic.engine.run_crosshair`` in a child of
proofs.sandbox that loads the target itself (so a target whose import crashes cannot
take the harness down) and is killed with its process group if it overruns its
deadline; the contracts that ended before a kill keep their results, the others are
``incomplete``.  ``to_counterexamples``
then sends every counterexample CrossHair found through the same judging and
minimisation as Hypothesis's, so the report, JSON and replay look the same whichever
engine found it.  One-step counterexamples (a pre-state from which one tick of the
online Scheduler breaks an invariant) are reported with that pre-state.
"""

from __future__ import annotations

from dataclasses import asdict

import spec
from proofs.counterexample import Counterexample
from proofs.sandbox import ENGINE_MEMORY_BYTES, HarnessError, run_once
from proofs.search.minimize import minimize_invalid_call
from proofs.symbolic.engine import INCOMPLETE
from proofs.targets import Target, TargetError, load_callable

ENGINE = "crosshair"
WORKERS = 2  # run_crosshair's default on this 2-core machine
GRACE_SECONDS = 3.0  # past the budget: CrossHair's import in the child, and the last contract's kill
STARTUP_SECONDS = 2.0  # the engine child's start: importing CrossHair, building the contracts


def _contract_count(ours: bool, names) -> int:
    """How many contracts run_crosshair checks: for our impl, one per state invariant
    and the shape (or per name asked for), on each of the two step subjects, plus three
    on validation; for an external target, three on validation and one against spec.check."""
    if not ours:
        return 4
    if names:
        return 2 * len(names) + (3 if "validation" in names else 0)
    return 2 * (len(spec.STATE_INVARIANTS) + 1) + 3


def _engine(target: Target, seconds: float, per_condition: float, names, report) -> tuple:
    """In the sandbox's child: load the target and run every contract, reporting each as it ends."""
    from proofs.symbolic.engine import run_crosshair

    try:
        function = None if target.is_default else load_callable(target)
    except TargetError as error:
        return ("error", str(error))
    # our impl's step first: it is the thing under check (spec.step is Z3's too)
    subjects = ("impl.Scheduler.step", "spec.step", "schedule") if target.is_default else None
    results = run_crosshair(
        function, budget_seconds=seconds, per_condition_seconds=per_condition, subjects=subjects, names=names,
        report=report,
    )
    return ("ok", [asdict(result) for result in results])


def run_contracts(target: Target, seconds: float, names: tuple[str, ...] | None = None) -> list[dict]:
    """Every contract's result as a dict (name, subject, outcome, seconds, counterexample, message);
    ``names`` keeps only the contracts of those invariants (our impl's step contracts).

    Ends within ``seconds`` plus ``GRACE_SECONDS``: the engine's child is killed with its
    whole process group then, and the contracts it had not finished are ``incomplete``."""
    # share the budget so that every contract gets its turn
    # (after the engine has started: CrossHair is imported in its child first)
    usable = max(1.0, 0.8 * seconds - STARTUP_SECONDS)
    per_condition = max(1.0, min(20.0, usable * WORKERS / _contract_count(target.is_default, names)))
    outcome = run_once(_engine, target, seconds, per_condition, names, seconds=seconds + GRACE_SECONDS,
                       memory_bytes=ENGINE_MEMORY_BYTES, partial=True)
    if outcome.kind == "returned":
        kind, payload = outcome.result
        if kind == "error":
            raise TargetError(payload)
        return payload
    if outcome.kind == "timed_out":
        return _cut_short(outcome.partial, outcome.seconds)
    if outcome.kind == "raised":
        raise TargetError(f"the crosshair engine failed: {outcome.error}")
    if outcome.kind == "died":
        raise TargetError(f"the crosshair engine's process died ({outcome.error})")
    raise HarnessError(f"the crosshair engine's sandbox failed: {outcome.error}")


def _cut_short(reports: tuple, seconds: float) -> list[dict]:
    """The contracts that ended before the kill, then every other planned one as ``incomplete``."""
    planned = next((r["planned"] for r in reports if "planned" in r), None)
    if planned is None:
        raise TargetError(f"the crosshair engine did not start its contracts within {seconds:g} s")
    done = {(r["name"], r["subject"]): r for r in reports if "planned" not in r}
    return [done.get((name, subject)) or {
        "name": name, "subject": subject, "outcome": INCOMPLETE, "seconds": 0.0, "counterexample": None,
        "message": f"the engine was killed at its wall-clock deadline ({seconds:g} s) before this contract "
                   "ended (not a proof)",
    } for name, subject in planned]


def ledger(results: list[dict]) -> list[str]:
    """One line per contract, stable: engine, claim, subject, outcome."""
    return [f"crosshair  {r['name']:26} {r['subject']:21} {r['outcome']}" for r in results]


def to_counterexamples(results: list[dict], search) -> list[tuple[Counterexample, object]]:
    """CrossHair's counterexamples, judged and minimised like Hypothesis's."""
    found = []
    for result in results:
        if result["outcome"] != "counterexample" or not result["counterexample"]:
            continue
        data = result["counterexample"]
        if result["subject"] != "schedule":
            cex = Counterexample(
                result["name"], ENGINE, "step", [], 1, True,
                f"one tick of {result['subject']} breaks {result['name']}: {result['message']}",
                pre_state=data.get("pre_state"),
            )
            found.append((cex, None))
            continue
        call = (data["jobs"], data["slots"], data["continuous"])
        if spec.is_valid(*call):
            findings = search._valid(call)
            if findings:
                small, finding = search._minimize_valid(call, findings[0].invariant)
                found.append((Counterexample(finding.invariant, ENGINE, "conformance", *small, finding.message), finding.result))
                continue
        else:
            findings = search._invalid(call, "found by crosshair")
            if findings:
                wanted = findings[0].invariant
                small = minimize_invalid_call(
                    call, lambda c: any(f.invariant == wanted for f in search._invalid(c, "found by crosshair")),
                    search._shrink_seconds(),
                )
                message = search._invalid(small, "found by crosshair")[0].message
                found.append((Counterexample(wanted, ENGINE, "validation", *small, message, "found by crosshair"), None))
                continue
        # CrossHair's concrete re-run failed, ours does not: say so rather than drop it
        cex = Counterexample(
            "validation" if result["name"] == "validation" else "matches_reference", ENGINE, "conformance",
            *call, f"crosshair: {result['message']} (not reproduced by the isolated re-run)",
        )
        found.append((cex, None))
    return found
