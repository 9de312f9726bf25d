"""The serving model's stateful test: our online ServingScheduler and the spec's transitions, side by side.

A Hypothesis RuleBasedStateMachine configures both ``impl.ServingScheduler`` and
``spec.serving`` with one config, then interleaves what a client does: adds requests
(arriving no earlier than the clock, some with an abort tick), aborts waiting or
running ones, and steps.  After every step the tick's trace entry must equal the
spec's (``spec.serving.step``), the scheduler's ``view()`` (clock, waiting and
running order, blocks held) must equal the spec state's, and every state invariant of
the serving registry must hold on the spec state reached; a failure is reported with
the program that produced it.

What it establishes: for the programs it tried, the online API refines the spec tick
by tick (equal entries and views imply every invariant the spec keeps).  Bounds: at
most ``max_examples`` programs of at most 40 calls, configs from
``proofs.search.serving.configs``.  It drives our own scheduler; a user's online
engine is driven through the clock-free protocol instead.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Verbosity, settings
from hypothesis import strategies as st
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, precondition, rule

import impl
import spec.serving as serving
from proofs.search.serving import configs, peak_tokens
from spec.serving.metrics import trace_entry


class StateMismatch(AssertionError):
    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(message)
        self.invariant = invariant


def spec_view(state: serving.State) -> dict:
    """What ``view()`` must show for a spec state."""
    return {
        "clock": state.clock,
        "waiting": [p.id for p in state.waiting],
        "running": [p.id for p in state.running],
        "blocks": {p.id: list(p.blocks) for p in state.running},
    }


class ServingSchedulerAgainstSpec(RuleBasedStateMachine):
    """impl.ServingScheduler and spec.serving.step, driven by the same adds, aborts and ticks."""

    def __init__(self) -> None:
        super().__init__()
        self.engine = None
        self.model = None
        self.program: list[str] = []
        self.next_id = 0

    @precondition(lambda self: self.engine is None)
    @rule(config=configs())
    def start(self, config):
        self.engine = impl.ServingScheduler(dict(config))
        self.model = serving.initial([], dict(config))
        self.config = dict(config)
        self.program.append(f"engine = ServingScheduler({dict(config)!r})")

    @precondition(lambda self: self.engine is not None)
    @rule(delay=st.integers(0, 4), data=st.data(), id_gap=st.integers(1, 3), abort=st.none() | st.integers(0, 6))
    def add_request(self, delay, data, id_gap, abort):
        total = data.draw(st.integers(1, max(1, min(peak_tokens(self.config), 12))))
        output = data.draw(st.integers(1, total))
        self.next_id += id_gap
        request = {"id": self.next_id, "arrival": self.model.clock + delay, "prompt": total - output + 1, "output": output}
        if abort is not None:
            request["abort"] = request["arrival"] + abort
        self.engine.add_request(dict(request))
        self.model = serving.submit(self.model, serving.Request(**{"abort": None, **request}))
        self.program.append(f"engine.add_request({request!r})")

    @precondition(lambda self: self.engine is not None and not serving.is_terminal(self.model))
    @rule(data=st.data())
    def abort(self, data):
        live = [p.id for p in self.model.waiting + self.model.running]
        request_id = data.draw(st.sampled_from(live))
        self.engine.abort(request_id)
        self.model = serving.cancel(self.model, request_id)
        self.program.append(f"engine.abort({request_id!r})")

    @precondition(lambda self: self.engine is not None and not serving.is_terminal(self.model))
    @rule()
    def step(self):
        entry = self.engine.step()
        self.model = serving.step(self.model)
        self.program.append("engine.step()")
        broken = serving.broken_state_invariants(self.model)
        if broken:  # the spec itself: never expected, but an engine must not trust what it checks against
            raise StateMismatch(broken[0], f"the spec's own state breaks {broken[0]} after tick {self.model.latest.tick}")
        expected = trace_entry(self.model.latest)
        if entry != expected:
            raise StateMismatch(
                "matches_reference",
                f"tick {expected['tick']}: the ServingScheduler's entry {entry!r} differs from the spec's {expected!r}",
            )
        view, want = self.engine.view(), spec_view(self.model)
        if view != want:
            raise StateMismatch(
                "matches_reference", f"after tick {expected['tick']}: view() is {view!r}, the spec's state is {want!r}"
            )

    def teardown(self):
        if self.engine is not None and self.engine.idle != serving.is_terminal(self.model):
            raise StateMismatch("every_job_completes_once", "the ServingScheduler and the spec disagree on being idle")


def run_stateful(max_examples: int, seed: int | None = None, programs: list | None = None):
    """Run the machine; return (invariant, message, program) for a failure, else None.

    ``seed`` seeds Hypothesis (the same seed runs the same programs, another seed others;
    None draws a fresh one); ``programs``, when given, receives every program run, in order."""
    last = {}

    class Recorded(ServingSchedulerAgainstSpec):
        def teardown(self):
            last["program"] = list(self.program)
            if programs is not None:
                programs.append("\n".join(self.program))
            super().teardown()

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
