"""Run claims under a CPU-time limit that really stops them: one sandbox child per claim.

What it establishes: a claim's row is what its child (proofs.sandbox: forked, its
own process group, memory capped) returned within its CPU budget (``RLIMIT_CPU``, so
the limit does not depend on the machine's load); a child that uses its budget up,
or is still running at the wall-clock safety net (``wall_limit``), is stopped and the
claim is ``unknown``, as is a child that raises, dies without an answer, or whose
sandbox fails (the table of proofs.sandbox).  Z3's own ``timeout`` parameter is set
as well, but only as a hint.  A successful check becomes the status its ``kind``
calls for (``by construction``, ``lemma``, ``checked``); a row counts only when
every row it depends on passes (the validation rows included).

Assumptions: a POSIX system with the 'fork' start method (the claims are closures
over Python objects; nothing is pickled but the result).  Bounds: at most
``workers`` children at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from proofs import outcomes
from proofs.sandbox import ENGINE_MEMORY_BYTES, Child, wait_any

# A row's status.  ``proved``: a theorem about the step (its negation unsat over the validated encoding, its
# hypotheses sat); ``by construction``: true of every state of the representation, no step needed; ``lemma``: a
# helper fact the proofs use (arithmetic, or a strengthening invariant), not a claim of the registry; ``checked``:
# the encoding agreed with the spec that runs on every state tried (a test, not a proof); ``refuted``: a
# counterexample (for a ``finding`` row: the conjecture it names is refuted, which is its result).  Each of these
# is a pass but ``refuted`` (outside findings); ``unknown`` and ``vacuous`` never are.
STATUSES = ("proved", "by construction", "lemma", "checked", "refuted", "unknown", "vacuous")
PASSING = ("proved", "by construction", "lemma", "checked")
# What a row is: it decides which status a successful check gets (``Claim.kind``).
KINDS = ("invariant", "theorem", "construction", "lemma", "validation", "finding")
_SUCCESS = {"construction": "by construction", "lemma": "lemma"}


@dataclass(frozen=True)
class Claim:
    """One row of the ledger: a name, how it is proved, its bound, and the function that proves it.

    ``run()`` returns {"status": ..., "counterexample": ..., "detail": ..., "hypotheses": "yes"/"no"/"unknown"}.
    ``depends`` names the rows this proof assumes (the strengthening invariants, the validation of the encoding):
    a row counts only when every row it depends on passes too.  ``refuted_by`` names the mutant under which Z3
    refutes the claim (for a finding: under which its refutation is no longer found).  ``kind`` is what the row
    is (``KINDS``): a ``construction`` row's proof reads ``by construction``, a ``lemma`` row's ``lemma``, a
    ``validation`` row's ``checked``; a ``finding`` row is a conjecture whose expected result is ``refuted``."""

    claim: str
    method: str
    bound: str
    run: Callable[[], dict]
    depends: tuple = field(default=())
    refuted_by: str | None = None
    kind: str = "theorem"


def passes(row: dict) -> bool:
    """A row that counts as a pass: a passing status, or a finding's expected refutation."""
    return row["status"] in PASSING or (row.get("kind") == "finding" and row["status"] == "refuted")


def up_to(prover: Callable[[int], dict], n_max: int, before_each: Callable[[], None] | None = None) -> dict:
    """``prover(n)`` for every n from 1 to ``n_max``: proved when every one is; else the first n that is not."""
    assert n_max >= 1, f"n_max={n_max!r}: expected an int >= 1"
    last = None
    for n in range(1, n_max + 1):
        if before_each is not None:
            before_each()
        result = prover(n)
        if result["status"] != "proved":
            return {**result, "detail": f"at n={n}: {result.get('detail')}", "n": n}
        last = result
    return {**last, "detail": f"n = 1..{n_max}: {last.get('detail')}"}


# The wall-clock safety net of a claim whose budget is ``budget`` CPU seconds: on a machine loaded k times over its
# cores a claim gets about 1/k of a core, so the net lets a claim finish its CPU budget under a load of up to 4x.
WALL_FACTOR, WALL_EXTRA = 4, 30


def wall_limit(budget: float) -> float:
    """The wall seconds after which a claim with a CPU budget of ``budget`` seconds is killed whatever it has used."""
    return WALL_FACTOR * budget + WALL_EXTRA


def _prove(claim: Claim, budget: float) -> dict:
    """In the sandbox's child: run one claim's proof under a CPU-time limit (RLIMIT_CPU: SIGXCPU at ``budget``
    CPU seconds, so the limit does not depend on the machine's load); return its result and the CPU it used."""
    import math
    import resource

    import z3

    cpu = max(1, math.ceil(budget))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    z3.set_param("timeout", max(1, int(wall_limit(budget) * 1000)))  # a hint only: Z3's timer is wall-clock
    result = claim.run()
    usage = resource.getrusage(resource.RUSAGE_SELF)  # a forked child starts at zero
    return {**result, "cpu": round(usage.ru_utime + usage.ru_stime, 2)}


def _result(outcome, budget: float, wall: float) -> dict:
    """A claim's result from its child's outcome (the table of proofs.sandbox): anything but a return is unknown."""
    if outcome.kind == "returned":
        return outcome.result
    cpu = None
    if outcome.kind == "timed_out":
        detail = (f"killed at the wall-clock safety net of {wall:g} s ({outcome.error or 'deadline'}), before its "
                  f"CPU budget of {budget:g} s was used: the machine is loaded more than the net allows for")
    elif outcome.kind == "died" and "SIGXCPU" in (outcome.error or ""):
        detail, cpu = f"used its whole CPU budget of {budget:g} s (--budget)", float(budget)
    elif outcome.kind == "raised":
        detail = "error:\n" + (outcome.traceback or outcome.error)
    elif outcome.kind == "died":
        detail = f"the proof process died ({outcome.error})"
    else:
        detail = f"harness error: {outcome.error}"
    return {"status": "unknown", "counterexample": None, "detail": detail, "cpu": cpu}


def run_claims(claims: list[Claim], budget: float, workers: int = 2, stop_on_disagreement: bool = False,
               wall: float | None = None) -> list[dict]:
    """Each claim's row, in the order given; each child has ``budget`` CPU seconds and ``wall`` seconds of wall
    (default ``wall_limit(budget)``).

    The validation rows (``kind == "validation"``) start first.  With ``stop_on_disagreement``, once one of them
    is refuted (the encoding is not the spec's step) every other child is killed, nothing more is started, and
    only the validation rows are returned: no proof about that encoding is reported."""
    assert budget > 0, f"budget={budget!r}: expected seconds > 0"
    assert workers >= 1, f"workers={workers!r}: expected an int >= 1"
    wall = wall_limit(budget) if wall is None else wall
    rows: list[dict | None] = [None] * len(claims)
    # Validation first; then the slowest kinds (product induction, the refinement), so the others fill the workers.
    pending = sorted(range(len(claims)), key=lambda i: (claims[i].kind != "validation",
                                                        claims[i].method != "product induction",
                                                        claims[i].method != "abstraction"))
    running: dict[int, Child] = {}
    while pending or running:
        while pending and len(running) < workers:
            index = pending.pop(0)
            running[index] = Child(_prove, (claims[index], budget), seconds=wall,
                                   memory_bytes=ENGINE_MEMORY_BYTES).start()
        wait_any(list(running.values()), timeout=wall)
        for index, child in list(running.items()):
            outcome = child.poll()
            if outcome is None:
                continue
            del running[index]
            rows[index] = _row(claims[index], _result(outcome, budget, wall), outcome.seconds)
            if stop_on_disagreement and claims[index].kind == "validation" and rows[index]["status"] == "refuted":
                for other, still in running.items():
                    stopped = still.kill("the encoding disagrees with the spec's step")
                    if claims[other].kind == "validation":
                        rows[other] = _row(claims[other], {"status": "unknown", "counterexample": None,
                                                           "detail": "stopped: another validation row is refuted"},
                                           stopped.seconds)
                return [row for claim, row in zip(claims, rows) if claim.kind == "validation" and row is not None]
    return _apply_dependencies(claims, rows)


def _row(claim: Claim, result: dict, seconds: float) -> dict:
    status = result.get("status")
    assert status in STATUSES, f"status={status!r}: expected one of {STATUSES}"
    if status == "proved":
        status = _SUCCESS.get(claim.kind, status)
    return {
        "claim": claim.claim,
        "status": status,
        "kind": claim.kind,
        "method": claim.method,
        "bound": claim.bound,
        "hypotheses_satisfiable": "-" if claim.kind == "validation" else result.get("hypotheses", "unknown"),
        "refuted_by": claim.refuted_by,
        "seconds": round(seconds, 2),
        "cpu_seconds": result.get("cpu"),
        "counterexample": result.get("counterexample"),
        "detail": result.get("detail"),
    }


def _apply_dependencies(claims: list[Claim], rows: list[dict]) -> list[dict]:
    """A proof that assumes a row that does not pass is not a proof: it becomes ``unknown``."""
    changed = True
    while changed:
        changed = False
        passing = {row["claim"]: passes(row) for row in rows}  # this pass's snapshot
        for claim, row in zip(claims, rows):
            if not passes(row):
                continue
            missing = [name for name in claim.depends if not passing.get(name, False)]
            if missing:
                row["status"] = "unknown"
                row["detail"] = f"assumes {', '.join(missing)}: not passed"
                changed = True
    return rows


def counts(rows: list[dict]) -> dict:
    """How many rows of each kind of result: the statuses, a finding's expected refutation apart."""
    out = {status: 0 for status in STATUSES}
    out["finding"] = 0
    for row in rows:
        key = "finding" if row.get("kind") == "finding" and row["status"] == "refuted" else row["status"]
        out[key] += 1
    return out


def summary(rows: list[dict]) -> str:
    """The verdict line's tally: every kind of row, in one stable order."""
    c = counts(rows)
    return (f"{c['proved']} proved, {c['by construction']} by construction, {c['lemma']} lemmas, "
            f"{c['checked']} checked against the spec, {c['finding']} findings (conjecture refuted); "
            f"{c['refuted']} refuted, {c['unknown']} unknown, {c['vacuous']} vacuous")


def verdict(rows: list[dict]) -> str:
    """The ledger's verdict (``proofs.outcomes``): pass exactly when every row passes, fail when one is refuted
    (a finding's refutation is its result, not a failure), else unknown."""
    if not rows:
        return outcomes.UNKNOWN
    return outcomes.combine(
        outcomes.PASS if passes(row) else outcomes.FAIL if row["status"] == "refuted" else outcomes.UNKNOWN
        for row in rows
    )


def exit_code(rows: list[dict]) -> int:
    """0 every row passes, 1 something refuted, 2 something unknown or vacuous (and nothing refuted)."""
    return outcomes.exit_code(verdict(rows))
