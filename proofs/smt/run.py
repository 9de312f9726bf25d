"""Run claims under a wall-clock limit that really stops them: one sandbox child per claim.

What it establishes: a claim's status is what its child (proofs.sandbox: forked,
its own process group, memory capped) returned before its deadline; a child that
is still running at the deadline is killed with its group (SIGKILL) and the claim
is ``unknown``, as is a child that raises, dies without an answer, or whose sandbox
fails (the table of proofs.sandbox).  Z3's own
``timeout`` parameter is set as well, but only as a hint: it is not always honoured.

Assumptions: a POSIX system with the 'fork' start method (the claims are closures
over Python objects; nothing is pickled but the result).  Bounds: at most
``workers`` children at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from proofs import outcomes
from proofs.sandbox import ENGINE_MEMORY_BYTES, Child, wait_any

# A claim's status; only ``proved`` is a pass.  ``vacuous``: its hypotheses are unsatisfiable.
STATUSES = ("proved", "refuted", "unknown", "vacuous")


@dataclass(frozen=True)
class Claim:
    """One row of the ledger: a name, how it is proved, its bound, and the function that proves it.

    ``run()`` returns {"status": ..., "counterexample": ..., "detail": ..., "hypotheses": "yes"/"no"/"unknown"}.
    ``depends`` names the rows this proof assumes (the strengthening invariants):
    a row counts as proved only when every row it depends on is proved too.
    ``refuted_by`` names the mutant under which Z3 refutes the claim."""

    claim: str
    method: str
    bound: str
    run: Callable[[], dict]
    depends: tuple = field(default=())
    refuted_by: str | None = None


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


def _prove(claim: Claim, budget: float) -> dict:
    """In the sandbox's child: run one claim's proof with Z3's own timeout as a hint."""
    import z3

    z3.set_param("timeout", max(1, int(budget * 1000)))
    return claim.run()


def _result(outcome, budget: float) -> dict:
    """A claim's result from its child's outcome (the table of proofs.sandbox): anything but a return is unknown."""
    if outcome.kind == "returned":
        return outcome.result
    if outcome.kind == "timed_out":
        detail = f"killed at the {budget:g} s limit"
    elif outcome.kind == "raised":
        detail = "error:\n" + (outcome.traceback or outcome.error)
    elif outcome.kind == "died":
        detail = f"the proof process died ({outcome.error})"
    else:
        detail = f"harness error: {outcome.error}"
    return {"status": "unknown", "counterexample": None, "detail": detail}


def run_claims(claims: list[Claim], budget: float, workers: int = 2) -> list[dict]:
    """Each claim's row, in the order given; each child is killed at ``budget`` seconds."""
    assert budget > 0, f"budget={budget!r}: expected seconds > 0"
    assert workers >= 1, f"workers={workers!r}: expected an int >= 1"
    rows: list[dict | None] = [None] * len(claims)
    # The slowest kinds (product induction, then the refinement) start first, so the others fill the other workers.
    pending = sorted(range(len(claims)), key=lambda i: (claims[i].method != "product induction",
                                                        claims[i].method != "abstraction"))
    running: dict[int, Child] = {}
    while pending or running:
        while pending and len(running) < workers:
            index = pending.pop(0)
            running[index] = Child(_prove, (claims[index], budget), seconds=budget,
                                   memory_bytes=ENGINE_MEMORY_BYTES).start()
        wait_any(list(running.values()), timeout=budget)
        for index, child in list(running.items()):
            outcome = child.poll()
            if outcome is None:
                continue
            del running[index]
            rows[index] = _row(claims[index], _result(outcome, budget), outcome.seconds)
    return _apply_dependencies(claims, rows)


def _row(claim: Claim, result: dict, seconds: float) -> dict:
    status = result.get("status")
    assert status in STATUSES, f"status={status!r}: expected one of {STATUSES}"
    return {
        "claim": claim.claim,
        "status": status,
        "method": claim.method,
        "bound": claim.bound,
        "hypotheses_satisfiable": result.get("hypotheses", "unknown"),
        "refuted_by": claim.refuted_by,
        "seconds": round(seconds, 2),
        "counterexample": result.get("counterexample"),
        "detail": result.get("detail"),
    }


def _apply_dependencies(claims: list[Claim], rows: list[dict]) -> list[dict]:
    """A proof that assumes an unproved row is not a proof: it becomes ``unknown``."""
    changed = True
    while changed:
        changed = False
        status = {row["claim"]: row["status"] for row in rows}
        for claim, row in zip(claims, rows):
            if row["status"] != "proved":
                continue
            missing = [name for name in claim.depends if status.get(name) != "proved"]
            if missing:
                row["status"] = "unknown"
                row["detail"] = f"assumes {', '.join(missing)}: not proved"
                changed = True
    return rows


def verdict(rows: list[dict]) -> str:
    """The ledger's verdict (``proofs.outcomes``): pass exactly when every row is proved, fail when one is refuted, else unknown."""
    if not rows:
        return outcomes.UNKNOWN
    return outcomes.combine(
        outcomes.PASS if row["status"] == "proved" else outcomes.FAIL if row["status"] == "refuted" else outcomes.UNKNOWN
        for row in rows
    )


def exit_code(rows: list[dict]) -> int:
    """0 all proved, 1 something refuted, 2 something unknown or vacuous (and nothing refuted)."""
    return outcomes.exit_code(verdict(rows))
