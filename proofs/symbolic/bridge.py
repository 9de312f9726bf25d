"""The CrossHair engine inside `schedcheck verify`: isolated, and through the common pipeline.

``run_contracts`` runs ``proofs.symbolic.engine.run_crosshair`` in a forked child
that loads the target itself (so a target whose import crashes cannot take the
harness down) and is killed if it overruns its deadline.  ``to_counterexamples``
then sends every counterexample CrossHair found through the same judging and
minimisation as Hypothesis's, so the report, JSON and replay look the same whichever
engine found it.  One-step counterexamples (a pre-state from which one tick of the
online Scheduler breaks an invariant) are reported with that pre-state.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from dataclasses import asdict

import spec
from proofs.counterexample import Counterexample
from proofs.search.minimize import minimize_invalid_call
from proofs.targets import Target, TargetError, load_callable

ENGINE = "crosshair"
WORKERS = 2  # run_crosshair's default on this 2-core machine


def _contract_count(ours: bool, names) -> int:
    """How many contracts run_crosshair checks: for our impl, one per state invariant
    and the shape (or per name asked for), on each of the two step subjects, plus three
    on validation; for an external target, three on validation and one against spec.check."""
    if not ours:
        return 4
    if names:
        return 2 * len(names) + (3 if "validation" in names else 0)
    return 2 * (len(spec.STATE_INVARIANTS) + 1) + 3


def _child(connection, target: Target, seconds: float, per_condition: float, names) -> None:
    os.setpgrp()  # one process group with the engine's workers, killed together
    from proofs.symbolic.engine import run_crosshair

    try:
        function = None if target.is_default else load_callable(target)
        # our impl's step first: it is the thing under check (spec.step is Z3's too)
        subjects = ("impl.Scheduler.step", "spec.step", "schedule") if target.is_default else None
        results = run_crosshair(
            function, budget_seconds=seconds, per_condition_seconds=per_condition, subjects=subjects, names=names
        )
        connection.send(("ok", [asdict(result) for result in results]))
    except TargetError as error:
        connection.send(("error", str(error)))
    except BaseException as error:  # report the engine's own failure as data, never as a crash
        connection.send(("error", f"the crosshair engine failed: {type(error).__name__}: {error}"))


def run_contracts(target: Target, seconds: float, names: tuple[str, ...] | None = None) -> list[dict]:
    """Every contract's result as a dict (name, subject, outcome, seconds, counterexample, message);
    ``names`` keeps only the contracts of those invariants (our impl's step contracts)."""
    # share the budget so that every contract gets its turn
    per_condition = max(1.0, min(20.0, 0.8 * seconds * WORKERS / _contract_count(target.is_default, names)))
    context = multiprocessing.get_context("fork")
    parent_end, child_end = context.Pipe()
    process = context.Process(target=_child, args=(child_end, target, seconds, per_condition, names), daemon=False)
    process.start()
    child_end.close()
    try:
        if not parent_end.poll(seconds + 10.0):
            raise TargetError(f"the crosshair engine did not finish within {seconds + 10.0:g} s")
        kind, payload = parent_end.recv()
    except (EOFError, OSError):
        raise TargetError("the crosshair engine's process died") from None
    finally:
        if process.is_alive() or process.exitcode is None:
            os.killpg(process.pid, signal.SIGKILL)  # the engine's own workers too
        process.join(5.0)
        parent_end.close()
    if kind == "error":
        raise TargetError(payload)
    return payload


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
                if finding is not None:  # None: it did not fail again (flaky, in search.flaky)
                    found.append((Counterexample(finding.invariant, ENGINE, "conformance", *small, finding.message), finding.result))
                continue
        else:
            findings = search._invalid(call, "found by crosshair")
            if findings:
                wanted = findings[0].invariant
                small = minimize_invalid_call(
                    call, lambda c: any(f.invariant == wanted for f in search._invalid(c, "found by crosshair")), 5.0
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
