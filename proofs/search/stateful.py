"""The stateful test: our online Scheduler and the spec's transitions, side by side.

A Hypothesis RuleBasedStateMachine submits jobs (arriving no earlier than the clock)
and steps both impl.Scheduler and the spec (``spec.submit``, ``spec.step``).  After
every step the Scheduler's state, read through its pure ``view()``, must equal the
spec's next state, and every state invariant of the registry must hold on it.
What it establishes: for the programs it tried, the online API refines the spec
tick by tick.  Bounds: at most ``max_examples`` programs of at most 40 steps.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, invariant, precondition, rule

import impl
import spec
from proofs.views import state_from_view
from spec.domain import Job


class StateMismatch(AssertionError):
    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(message)
        self.invariant = invariant


class SchedulerAgainstSpec(RuleBasedStateMachine):
    """impl.Scheduler and spec.step, driven by the same submissions and ticks."""

    def __init__(self) -> None:
        super().__init__()
        self.engine = None
        self.model = None
        self.program: list[str] = []
        self.next_id = 0

    @precondition(lambda self: self.engine is None)
    @rule(slots=st.integers(1, 4), continuous=st.booleans())
    def start(self, slots, continuous):
        self.engine = impl.Scheduler(slots, continuous)
        self.model = spec.initial([], slots, continuous)
        self.program.append(f"engine = Scheduler(slots={slots}, continuous={continuous})")

    @precondition(lambda self: self.engine is not None)
    @rule(delay=st.integers(0, 4), tokens=st.integers(1, 5), id_gap=st.integers(1, 3))
    def submit(self, delay, tokens, id_gap):
        self.next_id += id_gap
        job = {"id": self.next_id, "arrival": self.engine.clock + delay, "tokens": tokens}
        self.engine.submit(job)
        self.model = spec.submit(self.model, Job(**job))
        self.program.append(f"engine.submit({job})")

    @precondition(lambda self: self.engine is not None and not spec.is_terminal(self.model))
    @rule()
    def step(self):
        served = self.engine.step()
        self.model = spec.step(self.model)
        self.program.append("engine.step()")
        actual = state_from_view(self.engine.view(), self.model)
        broken = spec.broken_state_invariants(actual)
        if broken:
            raise StateMismatch(broken[0], f"after tick {actual.clock - 1} the Scheduler's state breaks {broken[0]}")
        if served != list(self.model.served) or actual != self.model:
            raise StateMismatch(
                "matches_reference",
                f"after tick {self.model.clock - 1} the Scheduler served {served}, "
                f"the spec served {list(self.model.served)}",
            )

    @invariant()
    def idle_agrees(self):
        if self.engine is not None and self.engine.idle != spec.is_terminal(self.model):
            raise StateMismatch("every_job_completes_once", "the Scheduler and the spec disagree on being idle")


def run_stateful(max_examples: int, seed: int | None = None, programs: list | None = None):
    """Run the machine; return (invariant, message, program) for a failure, else None.

    ``seed`` seeds Hypothesis (the same seed runs the same programs, another seed others;
    None draws a fresh one); ``programs``, when given, receives every program run, in order."""
    last = {}

    class Recorded(SchedulerAgainstSpec):
        def teardown(self):
            last["program"] = list(self.program)
            if programs is not None:
                programs.append("\n".join(self.program))

    test = get_state_machine_test(
        Recorded,
        settings=settings(
            max_examples=max_examples,
            stateful_step_count=40,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
        ),
    )
    if seed is not None:
        test = hypothesis_seed(seed)(test)
    try:
        test()
    except StateMismatch as error:
        return error.invariant, str(error), "\n".join(last.get("program", []))
    return None
