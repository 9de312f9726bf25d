"""CrossHair's ``diffbehavior`` on two schedulers: calls on which OLD and NEW part.

What it establishes.  ``crosshair_differences`` runs CrossHair's behaviour diff
(``crosshair.diff_behavior.diff_behavior``, the engine of ``crosshair diffbehavior``)
on typed wrappers of OLD and NEW and returns concrete calls
``(jobs, slots, continuous)`` on which the two behave differently, each one re-run
concretely (outside CrossHair) and seen to differ.  Behaviour is compared as a
caller sees it: ``("returned", result)`` or ``("raised", exception class name)``, so
two ValueErrors with different messages behave alike (as in proofs.search.differential).
An empty list means only that no difference turned up on the paths CrossHair
explored within the time: a search, never a proof of equivalence (CrossHair reports
exhaustion, but we do not turn that into a claim).

The explored domain (every value is built from symbolic bits, so every path CrossHair
explores is inside the domain; range checks written as branches would spend almost
every path on "out of range" leaves):

- a validation phase: 2 jobs (fewer if ``max_jobs`` < 2) with ids 0..3 (so repeated
  ids), arrivals -3..3, tokens -2..4, slots -2..4, either policy: bad and good inputs
  (all bits False is a valid value, so CrossHair's first models are not all rejected);
- valid phases, one per job count n = 0..``max_jobs`` (fixed arity, which CrossHair
  explores far better than a list of symbolic length): job k has id k, arrivals 0..3,
  tokens 1..4, slots 1..4, either policy.

Assumptions: both targets are deterministic functions of their arguments (a path
that is not is skipped, as CrossHair's ``on_nondeterminism`` allows); types are
fixed (ints, a bool; the Hypothesis search covers wrong types).

Bounds and isolation: everything runs in one child of proofs.sandbox that loads
both targets itself (proofs.targets.load_callable), leads a process group of its
own, and is killed with that whole group at ``seconds`` of wall time, so a target
that hangs inside CrossHair's exploration (even in C code) costs at most the budget.  Each phase gets a share of the budget as CrossHair's own per-condition
timeout (CrossHair checks it between paths and overshoots it, hence the halving).
Calls found before a kill are kept: the child reports them after each phase.
Nothing runs at import time; CrossHair is imported in the child.
"""

from __future__ import annotations

import ast
import copy
import time
from typing import Callable

from proofs.sandbox import ENGINE_MEMORY_BYTES, HarnessError, run_once
from proofs.targets import Target

LIMIT = 3  # differing calls returned at most
VALIDATION_JOBS = 2
_Bits = tuple[bool, bool]  # a small int: low + b0 + 2 * b1
_SignedBits = tuple[bool, bool, bool]  # low + b0 + 2 * b1 - 3 * b2: all False is the low (valid) value
_ANY = {"id": 0, "arrival": 0, "tokens": 1, "slots": 1}  # the low values
_VALID = {"arrival": 0, "tokens": 1, "slots": 1}


def crosshair_differences(old: Target, new: Target, seconds: float, max_jobs: int = 3) -> list[tuple]:
    """Up to ``LIMIT`` calls ``(jobs, slots, continuous)`` on which OLD and NEW behave differently.

    Never raises for anything the targets or CrossHair do (an import failure, a crash,
    a hang all end in fewer calls), only HarnessError if the sandbox itself fails;
    returns within about ``seconds`` of wall time.
    """
    if not seconds > 0:
        raise ValueError(f"seconds={seconds!r}: expected a number > 0")
    if type(max_jobs) is not int or max_jobs < 0:
        raise ValueError(f"max_jobs={max_jobs!r}: expected an int >= 0")
    deadline = time.monotonic() + seconds
    # whatever the end (done, killed at the deadline, died, raised: the table of
    # proofs.sandbox), the calls reported before it are kept; only the sandbox's own failure is an error
    outcome = run_once(_explore, old, new, deadline, max_jobs, seconds=seconds,
                       memory_bytes=ENGINE_MEMORY_BYTES, partial=True)
    if outcome.kind == "harness_error":
        raise HarnessError(f"the crosshair diff's sandbox failed: {outcome.error}")
    found: list[tuple] = []
    for calls in outcome.partial:
        for call in calls:
            if call not in found and len(found) < LIMIT:
                found.append(call)
    return found


# --- in the child --------------------------------------------------------------------------------


def _explore(old: Target, new: Target, deadline: float, max_jobs: int, report) -> None:
    """In the sandbox's child: one diff phase after another, reporting the differing calls of each."""
    from proofs.targets import load_callable

    functions = (load_callable(old), load_callable(new))
    phases = [("any", min(VALIDATION_JOBS, max_jobs))] + [("valid", n) for n in range(max_jobs + 1)]
    weights = [3.0] + [1.0 + n for n in range(max_jobs + 1)]
    found: list[tuple] = []
    for index, (domain, n) in enumerate(phases):
        remaining = deadline - time.monotonic()
        share = remaining * weights[index] / sum(weights[index:])
        if share < 0.2:
            break
        calls = [c for c in _diff_phase(functions, domain, n, share / 2) if c not in found]
        calls = [c for c in calls if _differs_concretely(functions, c)][: LIMIT - len(found)]
        found += calls
        report(calls)
        if len(found) >= LIMIT:
            break


def _number(bits, low: int):
    value = low + int(bits[0]) + 2 * int(bits[1])
    return value - 3 * int(bits[2]) if len(bits) > 2 else value


def _decode(domain: str, rows, slots, continuous) -> tuple:
    """The call that the wrapper's (symbolic or concrete) bits stand for."""
    if domain == "any":
        jobs = [{"id": _number(i, _ANY["id"]), "arrival": _number(a, _ANY["arrival"]), "tokens": _number(t, _ANY["tokens"])}
                for (i, a, t) in rows]
        return jobs, _number(slots, _ANY["slots"]), continuous
    jobs = [{"id": k, "arrival": _number(a, _VALID["arrival"]), "tokens": _number(t, _VALID["tokens"])}
            for k, (a, t) in enumerate(rows)]
    return jobs, _number(slots, _VALID["slots"]), continuous


def behaviour(function: Callable, call: tuple, control=()) -> tuple:
    """What a caller sees of one call: ("returned", result) or ("raised", exception class name)."""
    jobs, slots, continuous = copy.deepcopy(call)
    try:
        return ("returned", function(jobs, slots, continuous))
    except tuple(control):
        raise  # CrossHair's own control flow (path timeouts, ignored attempts) is not the target's
    except BaseException as error:  # noqa: BLE001  whatever the target raises is its behaviour
        return ("raised", type(error).__name__)


def _wrapper(function: Callable, domain: str, n: int, control) -> Callable:
    row = tuple[_Bits, _SignedBits, _SignedBits] if domain == "any" else tuple[_Bits, _Bits]

    def schedule_call(rows, slots, continuous: bool) -> tuple:
        return behaviour(function, _decode(domain, rows, slots, continuous), control)

    schedule_call.__annotations__["rows"] = tuple[(row,) * n] if n else tuple[()]
    schedule_call.__annotations__["slots"] = _SignedBits if domain == "any" else _Bits
    schedule_call.__name__ = schedule_call.__qualname__ = f"schedule_{domain}_{n}"
    return schedule_call


def _diff_phase(functions, domain: str, n: int, seconds: float) -> list[tuple]:
    import crosshair.core_and_libs  # noqa: F401  registers CrossHair's symbolic builtins
    from crosshair.diff_behavior import ExceptionEquivalenceType, diff_behavior
    from crosshair.fnutil import FunctionInfo
    from crosshair.options import DEFAULT_OPTIONS, AnalysisOptionSet
    from crosshair.util import ControlFlowException

    control = (ControlFlowException,)
    wrapped = [FunctionInfo.from_fn(_wrapper(f, domain, n, control)) for f in functions]
    options = DEFAULT_OPTIONS.overlay(AnalysisOptionSet(
        per_condition_timeout=seconds, per_path_timeout=max(0.5, min(2.0, seconds / 4)),
    ))
    diffs = diff_behavior(*wrapped, options, ExceptionEquivalenceType.SAME_TYPE, on_nondeterminism=lambda: None)
    if isinstance(diffs, str):  # CrossHair could not analyse the wrappers
        return []
    calls = []
    for diff in diffs:
        try:
            args = {name: ast.literal_eval(text) for name, text in diff.args.items()}
            calls.append(_decode(domain, args["rows"], args["slots"], args["continuous"]))
        except (ValueError, SyntaxError, KeyError, TypeError):
            continue  # a repr we cannot read back: not a concrete call
    return calls


def _differs_concretely(functions, call: tuple) -> bool:
    old, new = (behaviour(f, call) for f in functions)
    try:
        return bool(old != new)
    except Exception:  # noqa: BLE001  a hostile result that cannot be compared
        return True
