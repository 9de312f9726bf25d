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

``classify`` maps the engine's outcome of each contract to what the reports say
(``OUTCOMES``), from the contract's planned time (its share of the budget):

- ``confirmed``: CrossHair confirmed it over every path of the bounded domain, which
  ``bounds_of`` states (jobs, slots, how the pre-state was built);
- ``bounded``: it searched its whole planned time, CrossHair stopped on its own, and it
  explored at least ``min_scenarios`` distinct scenarios with nothing found.  Evidence
  within that exploration, never shown as confirmed; it does not stop a run from passing;
- ``incomplete``: it never started, was stopped before its planned time (the overall
  budget ran out), or explored fewer scenarios than a bounded search needs.  The run is
  then ``incomplete``, never a pass;
- ``counterexample`` and ``unknown`` as the engine reports them (unknown is never a pass).
"""

from __future__ import annotations

import time
from dataclasses import asdict

import spec
from proofs.counterexample import Counterexample
from proofs.sandbox import ENGINE_MEMORY_BYTES, HarnessError, run_once
from proofs.search.minimize import minimize_invalid_call

from proofs.targets import Target, TargetError, load_callable

ENGINE = "crosshair"
WORKERS = 2  # run_crosshair's default on this 2-core machine
GRACE_SECONDS = 3.0  # past the budget: the last contract's kill and the child's exit

CONFIRMED, BOUNDED, INCOMPLETE, COUNTEREXAMPLE, UNKNOWN = "confirmed", "bounded", "incomplete", "counterexample", "unknown"
OUTCOMES = (CONFIRMED, BOUNDED, INCOMPLETE, COUNTEREXAMPLE, UNKNOWN)

# The least exploration a search must reach before its "nothing found" is called ``bounded``: distinct scenarios its
# body ran to their end (proofs.symbolic.contracts.note_scenario).  Each is read off the measured distribution of the
# scenarios a seeded search needed to reach the counterexample of an injected bug of its kind (docs/crosshair.md,
# "How much search is bounded"), and set where CI's gate rows still reach it at their budgets on a quiet machine:
# a search that stopped short of it could have missed such a bug more often than the stated rate.
MIN_SCENARIOS_SERVING = 50  # the serving mutants: 198 of 200 seeded searches found their bug within 50 (worst 98)
MIN_SCENARIOS_STEP = 10  # the chapter's step bugs: 26 of 60 within 10 paths (median 17, worst 186): weak, stated so
MIN_SCENARIOS_CALL = 10  # schedule()'s call contracts: the step contracts' figure (not measured on their own)
# the caching subjects: the serving figure, weaker on their domain and stated so: of 15 seeded searches of the caching
# mutants 13 found their bug, 10 within 50 (the stale-chain no_false_sharing mutant: 1 of 5 within 50, 3 within 300)
MIN_SCENARIOS_CACHING = 50


def min_scenarios(subject: str) -> int:
    """How many distinct scenarios a contract about ``subject`` must explore before nothing found is ``bounded``."""
    from proofs.symbolic.serving import CACHING_SUBJECTS, SUBJECTS

    if subject in CACHING_SUBJECTS:
        return MIN_SCENARIOS_CACHING
    if subject in SUBJECTS:
        return MIN_SCENARIOS_SERVING
    return MIN_SCENARIOS_CALL if subject == "schedule" else MIN_SCENARIOS_STEP


def per_condition_seconds(seconds: float, ours: bool, names=None, model: str = "chapter") -> float:
    """An estimate of each contract's planned time, for messages: its share of ``seconds`` on ``WORKERS`` workers
    (the engine plans each share from the time actually left when the contract starts)."""
    return max(1.0, min(20.0, seconds * WORKERS / _contract_count(ours, names, model)))


def bounds_of(name: str, subject: str) -> str:
    """The bounded domain a contract about ``subject`` covers, in one line."""
    from proofs.symbolic.contracts import MAX_JOBS
    from proofs.symbolic.serving import BOUNDS, CACHING_BOUNDS, CACHING_SUBJECTS, SUBJECTS

    if subject in CACHING_SUBJECTS:
        return CACHING_BOUNDS
    if subject in SUBJECTS:
        return BOUNDS
    if subject != "schedule":
        return (f"one step from any pre-state of <= {MAX_JOBS} jobs (job k has id k, ids in FIFO order), "
                f"1 <= slots <= {MAX_JOBS + 1}, symbolic arrivals/tokens/clock; pre-state built by "
                "state_from_rows from a reachable shape on which every state invariant and lemma holds")
    if name == "check":
        return f"whole runs of <= {MAX_JOBS} valid jobs, every value in 0..4, 1 <= slots <= 3, compared by spec.check"
    return (f"calls of <= {MAX_JOBS} jobs, each field missing or in -1..2, and two jobs sharing an id 0..2 "
            "with slots 1..2")


def classify(results: list[dict], planned: float) -> list[dict]:
    """Each contract's result with ``outcome`` one of OUTCOMES, ``planned_seconds``, ``bounds`` and the
    engine's own words in ``engine_outcome``; a new list, ``results`` is not modified.  ``planned`` is the
    planned time of a contract whose result does not carry its own (``planned``, set by the engine)."""
    classified = []
    for result in results:
        raw = str(result["outcome"])
        own = float(result.get("planned") or 0.0)
        row = {key: value for key, value in result.items() if key != "planned"}
        row.update(engine_outcome=raw, planned_seconds=round(own or planned, 2),
                   bounds=bounds_of(result["name"], result["subject"]))
        scenarios, least = int(result.get("scenarios") or 0), min_scenarios(result["subject"])
        row.update(scenarios=scenarios, min_scenarios=least)
        explored = _scenarios(scenarios)
        if raw in (CONFIRMED, COUNTEREXAMPLE, UNKNOWN):
            row["outcome"] = raw  # the ledger line states the count (the message is the finding's)
        elif raw == INCOMPLETE:
            row["outcome"] = raw
            row["message"] = f"{result.get('message')} ({explored})"
        elif raw.startswith("no counterexample within"):
            seconds = float(result.get("seconds") or 0.0)
            if str(result.get("message", "")).startswith("not started") or seconds <= 0:
                row["outcome"] = INCOMPLETE
                row["message"] = f"not started: the budget ran out before its turn (planned {planned:.1f} s; {explored})"
            elif not own and seconds < planned:  # an engine result without its own plan: judged by the wall time
                row["outcome"] = INCOMPLETE
                row["message"] = f"cut short before its planned {planned:.1f} s ran out, nothing found in {explored}"
            elif scenarios < least:  # CrossHair stopped at its own limit, but had not searched enough
                row["outcome"] = INCOMPLETE
                row["message"] = (f"nothing found in {explored}, fewer than the {least} a bounded search needs, in its "
                                  f"whole planned {own or planned:.1f} s ({seconds:.1f} s of wall time; not searched enough)")
            else:  # CrossHair stopped at its own limit, after at least the minimum exploration
                row["outcome"] = BOUNDED
                row["message"] = (f"no counterexample in {explored} (at least {least}), its whole planned "
                                  f"{own or planned:.1f} s ({seconds:.1f} s of wall time; not confirmed)")
        else:
            row["outcome"] = UNKNOWN
            row["message"] = f"the engine reported {raw!r}: {result.get('message')} ({explored})"
        classified.append(row)
    return classified


def budget_to_bound(contracts: list[dict], budget: float) -> int | None:
    """A ``--budget`` that would let every incomplete contract run and reach its minimum exploration, estimated
    from this run's: the budget scaled by the largest shortfall (scenarios needed over explored, or contracts
    planned over those that ran), with a quarter more for the start-up; None when none is incomplete."""
    import math

    waiting = [c for c in contracts if c["outcome"] == INCOMPLETE]
    if not waiting:
        return None
    ran = max(1, sum(1 for c in contracts if float(c.get("seconds") or 0) > 0))
    scale = len(contracts) / ran
    for c in waiting:
        if float(c.get("seconds") or 0) > 0:
            scale = max(scale, int(c.get("min_scenarios") or 1) / max(1, int(c.get("scenarios") or 0)))
    return math.ceil(1.25 * budget * scale)


def _scenarios(count: int) -> str:
    return f"{count} distinct scenario{'' if count == 1 else 's'} explored"


def _contract_count(ours: bool, names, model: str = "chapter") -> int:
    """How many contracts run_crosshair checks: for our impl, one per state invariant
    and the shape (or per name asked for), on each of the two step subjects, plus three
    on validation; for an external target, three on validation and one against spec.check.
    For the serving model: one per serving state invariant (or name) on each of two subjects, and one per caching
    claim (or name among them) on each of the two caching subjects."""
    if model == "serving":
        import spec.serving as serving
        from proofs.symbolic.serving import CACHING_CLAIMS

        wanted = [i.name for i in serving.STATE_INVARIANTS if not names or i.name in names]
        return 2 * len(wanted) + 2 * sum(1 for name in wanted if name in CACHING_CLAIMS)
    if not ours:
        return 4
    if names:
        return 2 * len(names) + (3 if "validation" in names else 0)
    return 2 * (len(spec.STATE_INVARIANTS) + 1) + 3


def _engine(target: Target, seconds: float, deadline: float, names, report, model: str = "chapter") -> tuple:
    """In the sandbox's child: load the target and run every contract, reporting each as it ends."""
    from proofs.symbolic.engine import run_crosshair, run_serving_crosshair

    if model == "serving":  # our impl only: its online ServingScheduler, then spec's serving step
        results = run_serving_crosshair(budget_seconds=seconds, deadline=deadline, names=names, report=report)
        return ("ok", [asdict(result) for result in results])
    try:
        function = None if target.is_default else load_callable(target)
    except TargetError as error:
        return ("error", str(error))
    # our impl's step first: it is the thing under check (spec.step is Z3's too)
    subjects = ("impl.Scheduler.step", "spec.step", "schedule") if target.is_default else None
    results = run_crosshair(
        function, budget_seconds=seconds, deadline=deadline, subjects=subjects, names=names, report=report,
    )
    return ("ok", [asdict(result) for result in results])


def run_contracts(target: Target, seconds: float, names: tuple[str, ...] | None = None,
                  model: str = "chapter") -> list[dict]:
    """Every contract's result as a dict (name, subject, outcome, seconds, counterexample, message);
    ``names`` keeps only the contracts of those invariants (our impl's step contracts);
    ``model="serving"`` runs the serving model's contracts (our impl only).

    The deadline is fixed here, before the engine's child starts, so the child's start-up
    (importing CrossHair, building the contracts) is spent once from the same budget and
    each contract is planned its share of what is left (``proofs.symbolic.engine._run_all``).
    Ends within ``seconds`` plus ``GRACE_SECONDS``: the engine's child is killed with its
    whole process group then, and the contracts it had not finished are ``incomplete``."""
    estimate = per_condition_seconds(seconds, target.is_default, names, model)
    deadline = time.monotonic() + seconds
    outcome = run_once(_engine, target, seconds, deadline, names, model=model, seconds=seconds + GRACE_SECONDS,
                       memory_bytes=ENGINE_MEMORY_BYTES, partial=True)
    if outcome.kind == "returned":
        kind, payload = outcome.result
        if kind == "error":
            raise TargetError(payload)
        return classify(payload, estimate)
    if outcome.kind == "timed_out":
        return classify(_cut_short(outcome.partial, outcome.seconds), estimate)
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
    """One line per contract, stable: engine, claim, subject, outcome, and what the outcome covers."""
    lines = []
    for r in results:
        outcome = r["outcome"]
        if outcome == CONFIRMED:
            outcome += (f" within bounds ({_scenarios(int(r.get('scenarios') or 0))}, every path): "
                        f"{r.get('bounds') or bounds_of(r['name'], r['subject'])}")
        elif outcome in (BOUNDED, INCOMPLETE):
            outcome += f": {r.get('message', '')}"
        else:  # a counterexample (its report follows) or unknown: how far the search got
            outcome += f" after {_scenarios(int(r.get('scenarios') or 0))}"
        lines.append(f"crosshair  {r['name']:26} {r['subject']:21} {outcome}")
    return lines


def to_counterexamples(results: list[dict], search) -> list[tuple[Counterexample, object]]:
    """CrossHair's counterexamples, judged and minimised like Hypothesis's."""
    found = []
    for result in results:
        if result["outcome"] != "counterexample" or not result["counterexample"]:
            continue
        data = result["counterexample"]
        if "config" in data:  # the serving model: the call whose run reaches the pre-state, then its tick
            message = (f"one tick of {result['subject']} breaks {result['name']} after {data['ticks']} earlier ticks "
                       f"of this call: {result['message']}")
            found.append((Counterexample(result["name"], ENGINE, "conformance", (data["requests"], data["config"]),
                                         message, model="serving"), None))
            continue
        if result["subject"] != "schedule":
            cex = Counterexample(
                result["name"], ENGINE, "step", ([], 1, True),
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
                if finding is not None:  # None: a time-out or death that did not happen again (flaky, in search.flaky)
                    found.append((search.counterexample("conformance", small, finding)._replace(engine=ENGINE),
                                  finding.result))
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
                found.append((Counterexample(wanted, ENGINE, "validation", small, message, "found by crosshair"), None))
                continue
        # CrossHair's concrete re-run failed, ours does not: say so rather than drop it
        cex = Counterexample(
            "validation" if result["name"] == "validation" else "matches_reference", ENGINE, "conformance",
            call, f"crosshair: {result['message']} (not reproduced by the isolated re-run)",
        )
        found.append((cex, None))
    return found
