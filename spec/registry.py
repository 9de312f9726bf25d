"""What every model of the spec shares: the invariant type, its families, the Violation type and helpers.

Each model (the chapter's in ``spec``, the serving model in ``spec.serving``) builds
its own registry ``INVARIANTS`` from these pieces, so that an engine iterates every
model's claims the same way: by family, name, docstring claim, state predicate and
result check.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple

FAMILIES = ("type", "safety", "policy", "metrics", "call")


class Invariant(NamedTuple):
    """A named claim: its family, its one-sentence claim, and how it is checked."""

    name: str
    family: str
    doc: str
    holds: Callable[[Any], bool] | None  # the state predicate, when the claim is one
    check_result: Callable | None  # Observation -> Violation | None, when a result can show it

    @property
    def claim(self) -> str:
        """The first sentence of the docstring: what holds."""
        return self.doc.strip().splitlines()[0]


class Violation(NamedTuple):
    """One broken invariant, where it first breaks, and expected versus actual."""

    invariant: str
    message: str
    tick: int | None = None
    job: int | None = None  # the (first) job or request involved
    expected: Any = None
    actual: Any = None
    ids: tuple = ()  # every request id involved, when there are several (the serving model)


def build_registry(
    claims: Iterable[Callable | tuple[str, str, str]],
    family_of: dict[str, str],
    result_checks: dict[str, Callable],
) -> tuple[Invariant, ...]:
    """The registry, in the order listed: a state predicate (its family from ``family_of``) or a (name, family, doc) claim."""
    registry = []
    for claim in claims:
        if callable(claim):
            name = claim.__name__
            registry.append(Invariant(name, family_of[name], claim.__doc__ or "", claim, result_checks.get(name)))
        else:
            name, family, doc = claim
            registry.append(Invariant(name, family, doc, None, result_checks.get(name)))
    names = [inv.name for inv in registry]
    assert len(set(names)) == len(names), f"a registry lists a name twice: {names}"
    assert all(inv.family in FAMILIES for inv in registry), f"unknown family in {names}"
    assert names[0] == "well_typed", "well_typed comes first, as TLA+'s TypeOK"
    return tuple(registry)


def broken_in(state_invariants: Iterable[Invariant], state: Any) -> list[str]:
    """The names of the state invariants that ``state`` breaks, in registry order (only well_typed if that breaks)."""
    predicates = [(inv.name, inv.holds) for inv in state_invariants if inv.holds is not None]
    name, holds = predicates[0]
    if not holds(state):
        return [name]
    return [name for name, holds in predicates if not holds(state)]


def short(value: Any, limit: int = 60) -> str:
    """A repr of any value cut to ``limit`` characters, even of an object whose repr raises."""
    try:
        text = repr(value)
    except Exception as error:  # a result may hold anything, even an object whose repr raises
        text = f"<unprintable {type(value).__name__}: {error!r}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def type_error(what: str, value: Any, rule: str) -> Violation:
    """The ``well_typed`` Violation of one malformed part of a result."""
    return Violation("well_typed", f"{what}={short(value)}: expected {rule}", actual=short(value))


def earliest(violations: Iterable[Violation | None]) -> Violation | None:
    """The violation with the smallest tick (one without a tick last), or None."""
    found = [v for v in violations if v is not None]
    return min(found, key=lambda v: (v.tick is None, v.tick if v.tick is not None else 0)) if found else None


class Findings(dict):
    """A replay's findings, invariant -> its earliest Violation, and ``late``: the invariants it found only once
    the trace had ended (a request never finished, the records, the totals), not during one of its entries."""

    def __init__(self, found: dict, late: Iterable[str] = ()) -> None:
        super().__init__(found)
        self.late = frozenset(late)


def root_cause_first(violations: Iterable[Violation], registry: Iterable[Invariant], late: Iterable[str] = ()) -> list[Violation]:
    """A replay's violations root cause first: by the registry's family (the type, then safety, then the policy,
    then the metrics), then in the order they break in the replay of the trace (those found during its entries
    by tick, then those only its end shows: ``late``, or without a tick), registry order breaking ties.

    The families are layers: a later one may assume the earlier ones (TLA+'s TypeOK first), so
    a policy rule read over a broken ledger reads an artefact (a job cut short looks paused),
    and within a family the first break is the cause of the later ones (a leak at an abort's
    tick starves a request that then never finishes).  Every engine and the trace checker
    report the first; a finding outside the replay (``matches_reference``) comes after them all."""
    rank, layer = {}, {}
    for index, invariant in enumerate(registry):
        rank[invariant.name] = index
        layer[invariant.name] = FAMILIES.index(invariant.family)
    late = frozenset(late)

    def when(v: Violation) -> tuple:
        first = layer.get(v.invariant, len(FAMILIES)), rank.get(v.invariant, len(rank))
        return (first[0], 1, 0, first[1]) if v.invariant in late or v.tick is None else (first[0], 0, v.tick, first[1])

    return sorted(violations, key=when)


def replay_finding(name: str) -> Callable[[Any], Violation | None]:
    """The result check of ``name``: the earliest violation the model's replay found, read from ``obs.findings``."""
    def check(obs: Any) -> Violation | None:
        return obs.findings.get(name)

    check.__name__ = f"check_{name}"
    check.__doc__ = f"The earliest ``{name}`` violation the replay of the result's trace found, or None."
    return check
