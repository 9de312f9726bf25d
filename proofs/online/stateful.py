"""The stateful test through the online protocol: a target engine and the spec's step, side by side.

A Hypothesis RuleBasedStateMachine plays a client: it makes the engine, adds requests
(arriving no earlier than the clock), aborts ones it sent, and steps, interleaved at
random.  The engine lives in the sandbox child (``proofs.online.driver.session``):
each call is one message, bounded by the call's time limit.  The harness numbers the
ticks as ``drive`` does (a request reaches the engine just before the first step at or
after its arrival; an idle gap is jumped over without a step; an entry's own ``tick``
is ignored).  After every step it follows the entry (``proofs.online.shadow``) and
checks every state invariant of the model's registry on the state the entries imply,
then (policy fcfs) the entry against the spec's step (``spec.serving.step`` or
``spec.step``, block ids excepted), then ``view()`` against the entries when the
engine has one.  A failure is shrunk by Hypothesis (for a bounded time), then by a
deterministic pass (``shrink_program``): runs of calls are dropped (halves, quarters, ...
down to single calls) while the same invariant still breaks, then every number is made
as small as it can be (each config value, each request's prompt, output and arrival,
the ids renumbered 1, 2, 3 ...), and both again until nothing changes or its time is
up; every candidate is replayed on a fresh engine and kept only if it stays inside the
model's domain and breaks the same invariant.  It is reported as a replayable program,
with its timeline, and returned as data too (``StatefulFailure.program``: the client's
calls, which ``run_program`` runs again on a fresh engine).  A failure that does not
happen again when its program is replayed is still reported (the engine did break the
invariant), as ``reproduced="no"``.

What it establishes: for the programs it tried, every state the engine reached keeps
the registry's state invariants and (fcfs) refines the spec tick by tick.  Bounds: at
most ``max_examples`` programs of at most 40 calls; configs from
``proofs.search.serving.configs``, at most 4 slots for the chapter's model; with
``prefix_caching`` in the config (a target's ``DOMAIN`` may require it), each request's
``tokens`` are the first tokens of one of three prompt families, its first or last token
its own or neither, so that prompts are equal, prefixes of one another, equal up to
their last token, or equal after their first block (issue 20).  The
account counts the programs run before the first failure; the runs Hypothesis makes
while it shrinks that failure are counted apart (``shrinking``).
"""

from __future__ import annotations

import sys
import time
from typing import NamedTuple

from hypothesis import HealthCheck, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import StopTest
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, precondition, rule

import spec
import spec.serving as serving
from proofs.online.driver import NO_VIEW, from_block_tables, session
from proofs.online.shadow import ChapterShadow, ServingShadow, entry_problem, is_idle
from proofs.sandbox import DEFAULT_LOAD_SECONDS, TargetProcess
from proofs.search.serving import configs, peak_tokens
from spec.serving.metrics import trace_entry
from spec.serving.oracle import _plain

STEPS = 40
SHRINK_SECONDS = 10.0  # shrinking a failure: Hypothesis for at most this share of it (never past the deadline),
RETRY_FACTOR = 4  # a time-out or death that its program does not show again is retried with this larger limit
HANG_PROBE_SECONDS = 0.25  # a hang is shrunk with this limit per call, then confirmed at the full limit
HYPOTHESIS_SHRINK_SHARE = 0.3  # then shrink_program for at most all of it (the same sizes as a share of 1.0 on the
# online corpora, seeds 0 and 2, in half the time: benchmarks/bench_stateful_shrink.py)
SHAPES = {  # how each model's factory is called, for the sandbox's signature check
    "serving": (({"max_seqs": 1, "token_budget": 1, "block_size": 1, "num_blocks": 1, "chunked_prefill": True},),
                "make(config)"),
    "chapter": ((1, True), "make(slots, continuous)"),
}


class StatefulFailure(NamedTuple):
    """The shortest failing program found: the broken invariant, what broke, the report's text, the calls as data."""

    invariant: str
    message: str
    text: str  # the program as runnable Python, then its timeline as comments (``replayable``)
    program: tuple  # the client's calls: (("make", args), ("add", (request,)), ("abort", (id,)), ("step", ())), ...
    reproduced: str = "alone"  # "alone": its program fails again on a fresh engine; "no": it did not


class StateMismatch(AssertionError):
    """The engine broke ``invariant`` at some call of the program."""

    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(message)
        self.invariant = invariant


class _Stop(BaseException):
    """Raised inside a run to end the whole test: the deadline passed, or shrinking has had its time."""


class _Client(RuleBasedStateMachine):
    """What both models' machines share: the child session, the program, the failure."""

    process: TargetProcess = None  # set by ``run_stateful`` on a subclass
    policy = "fcfs"
    record: dict = None  # the shortest failure so far and the clocks, shared by the runs of one test

    def __init__(self) -> None:
        super().__init__()
        self.shadow = None
        self.spec_state = None
        self.program: list[str] = []
        self.pending: list = []  # added by the client, not yet delivered: (arrival, id, dict)
        self.next_id = 0
        self.actions: list = []  # the client's calls so far, (kind, args), for the final minimisation
        # a program run before the first failure, or one of the shrinking's runs (counted at its teardown)
        self.counted = "programs" if self.record is None or self.record.get("since") is None else "shrinking"

    def teardown(self) -> None:
        if self.record is not None:
            self.record.setdefault("texts", []).append("\n".join(self.program))
            # a program Hypothesis itself discarded (its data ran out or was rejected: StopTest) is not one tried
            counted = "discarded" if isinstance(sys.exc_info()[1], StopTest) else self.counted
            self.record[counted] = self.record.get(counted, 0) + 1

    def allowed(self, kind: str, args: tuple) -> bool:
        """Whether the client may make this call now (the rules' preconditions, for a replayed program)."""
        if kind == "make":
            return self.shadow is None and self.valid_make(*args)
        if self.shadow is None:
            return False
        if kind == "add":
            item = args[0]
            known = set(self.shadow.rows if hasattr(self.shadow, "rows") else self.shadow.jobs)
            return (self.in_domain(item) and item["arrival"] >= self.next_tick() and item["id"] not in known
                    and all(item["id"] != i for _, i, _ in self.pending))
        if kind == "abort":
            request_id = args[0]
            return request_id in self.shadow.live and self.shadow.rows[request_id].request.abort is None
        return bool(self.shadow.live or self.pending)

    def send(self, line: str, *message):
        """One message to the engine in the child; a raise, hang or crash is a failure of the program."""
        record = self.record
        now = time.monotonic()
        if now > record["deadline"]:
            record["stopped"] = "deadline"  # the test did not run every program it planned
            raise _Stop
        if record["since"] is not None and now - record["since"] > record["shrink"]:
            raise _Stop  # a failure has had its shrinking time
        self.program.append(line)
        outcome = self.process.call(*message)
        if outcome.kind == "returned":
            return outcome.result
        if outcome.kind == "raised" and outcome.error_type == "ValueError":
            self.fail("validation", f"{line.strip()} raised {outcome.error} on a valid call")
        if outcome.kind == "unpicklable":
            self.fail("well_typed", f"{line.strip()} answered something that is not plain data: {outcome.error}")
        self.fail("termination", f"{line.strip()}: {outcome.kind}: {outcome.error}")

    def fail(self, invariant: str, message: str) -> None:
        """Record the failure if it is the shortest so far (by its invariant's first one), then raise it."""
        record = self.record
        best = record.get("best")
        if best is None or (invariant == best[0] and len(self.program) < len(best[2])):
            record["best"] = (invariant, message, list(self.program), self.timeline(), list(self.actions))
        if record["since"] is None:
            record["since"] = time.monotonic()
        raise StateMismatch(invariant, message)

    def next_tick(self) -> int:
        tick = self.shadow.clock
        if not self.shadow.live and self.pending:
            tick = max(tick, min(arrival for arrival, _, _ in self.pending))
        return tick

    def deliver(self, tick: int, method: str) -> list:
        due = sorted(p for p in self.pending if p[0] <= tick)
        self.pending = [p for p in self.pending if p[0] > tick]
        for _, _, item in due:
            self.send(f"engine.{method}({item!r})", "add", dict(item))
        return [item for _, _, item in due]

    def check_state(self, broken: list[str], tick: int) -> None:
        for invariant, message, _ in self.shadow.problems:
            self.fail(invariant, message)
        if broken:
            self.fail(broken[0], f"after tick {tick} the state the entries imply breaks {broken[0]}")


class ServingClient(_Client):
    """A serving engine (add_request, abort, step[, view]) and spec.serving, driven by the same calls."""

    domain = None  # the target's declared domain (proofs.models.declared), if any: configs and requests inside it

    def in_domain(self, request) -> bool:
        """Inside the model's domain for this config, and inside the target's declared domain (a shrunk program too)."""
        return serving.is_valid([request], self.config) and (
            self.domain is None or self.domain.admits(([request], self.config)))

    def valid_make(self, config) -> bool:
        return serving.is_valid([], config) and (self.domain is None or self.domain.admits(([], config)))

    @precondition(lambda self: self.shadow is None)
    @rule(config=configs(), data=st.data())
    def make(self, config, data):
        if self.domain is not None:
            config = dict(self.domain.fit_config(config))
            for key, values in self.domain.switch_choices():  # a switch the target declares (prefix_caching...)
                value = data.draw(st.sampled_from(values), label=key)
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = value
        self.do_make(config)

    def do_make(self, config):
        self.actions.append(("make", (dict(config),)))
        self.config = dict(config)
        self.send(f"engine = make({self.config!r})", "make", dict(config))
        self.shadow = ServingShadow(serving.Config(**config))
        self.spec_trace: list[dict] = []
        self.spec_state = serving.initial([], dict(config))

    @precondition(lambda self: self.shadow is not None)
    @rule(delay=st.integers(0, 4), data=st.data(), id_gap=st.integers(1, 3))
    def add_request(self, delay, data, id_gap):
        limit = peak_tokens(self.config)
        if self.domain is not None:
            limit = self.domain.request_limit(self.config, limit)
        if limit < 1:
            return  # no request fits the declared domain under this config
        total = data.draw(st.integers(1, max(1, min(limit, 12))), label="prompt + output")
        output = data.draw(st.integers(1, total), label="output")
        self.next_id += id_gap
        arrival = self.next_tick() + delay
        request = {"id": self.next_id, "arrival": arrival, "prompt": total - output + 1, "output": output}
        if self.config.get("prefix_caching") is True:  # shared prompts, so that the engine's cache hits
            family = data.draw(st.integers(0, len(FAMILIES) - 1), label="prompt family")
            own = data.draw(st.sampled_from(OWN_TOKEN), label="own token")
            request["tokens"] = family_tokens(request["prompt"], family, own, self.next_id)
        self.do_add(request)

    def do_add(self, request):
        self.actions.append(("add", (dict(request),)))
        self.pending.append((request["arrival"], request["id"], request))
        self.spec_state = serving.submit(self.spec_state, serving.Request(**request))

    @precondition(lambda self: self.shadow is not None
                  and any(self.shadow.rows[i].request.abort is None for i in self.shadow.live))
    @rule(data=st.data())
    def abort(self, data):
        live = [i for i in self.shadow.live if self.shadow.rows[i].request.abort is None]
        self.do_abort(data.draw(st.sampled_from(live), label="request id"))

    def do_abort(self, request_id):
        self.actions.append(("abort", (request_id,)))
        self.send(f"engine.abort({request_id!r})", "abort", request_id)
        self.shadow.set_abort(request_id, self.shadow.clock)
        if self.policy == "fcfs":
            self.spec_state = serving.cancel(self.spec_state, request_id)

    @precondition(lambda self: self.shadow is not None and (self.shadow.live or self.pending))
    @rule()
    def step(self):
        self.do_step()

    def do_step(self):
        self.actions.append(("step", ()))
        tick = self.next_tick()
        for request in self.deliver(tick, "add_request"):
            self.shadow.add(serving.Request(**request), dict(request))
        entry, view = self.send(f"entry = engine.step()  # tick {tick}", "step")
        if isinstance(entry, dict) and "blocks" in entry and "allocated" not in entry and "freed" not in entry:
            rows = self.shadow.rows
            entry = from_block_tables(entry, self.shadow.held(), self.shadow.config,
                                      lambda i: serving.fcfs_key(rows[i].request) if i in rows else (0, i))
        problem = entry_problem(entry) if entry is not None else None
        if problem is not None:
            self.fail("well_typed", f"tick {tick}: {problem}")
        if entry is None or is_idle(entry):
            self.shadow.clock = tick + 1
            actual = None
        else:
            actual = self.shadow.apply(tick, entry)
        expected = None
        if self.policy == "fcfs":
            if serving.is_terminal(self.spec_state):
                self.fail("matches_reference", f"tick {tick}: the engine is stepped, but the spec has nothing left")
            self.spec_state = serving.step(self.spec_state)
            expected = trace_entry(self.spec_state.latest)
            self.spec_trace.append(expected)
        state = self.shadow.state()
        skip_policy = self.policy == "none"
        broken = [inv.name for inv in serving.STATE_INVARIANTS
                  if not (skip_policy and inv.family == "policy") and not inv.holds(state)]
        self.check_state(broken, tick)
        if expected is not None:
            if actual is None or _plain(actual) != _plain(expected):
                self.fail("matches_reference",
                          f"tick {tick}: the engine's entry {actual!r} differs from the spec's {expected!r} "
                          "(block ids excepted)")
        if view is not NO_VIEW and view != NO_VIEW:
            for invariant, message, _ in self.shadow.view_problems(view, tick):
                self.fail(invariant, message)

    def timeline(self) -> list[str]:
        from proofs.report.serving_timeline import render

        if self.shadow is None or not self.shadow.trace:
            return []
        requests = [dict(row.caller, **({"abort": row.request.abort} if row.request.abort is not None else {}))
                    for row in self.shadow.rows.values()]
        return render(requests, self.config, self.spec_trace, self.shadow.trace, self.shadow.trace[-1]["tick"],
                      titles=("spec", "engine"))


class ChapterClient(_Client):
    """A chapter engine (submit, step[, view]) and spec.step, driven by the same calls."""

    def in_domain(self, job) -> bool:
        return spec.is_valid([job], self.slots, self.continuous)

    def valid_make(self, slots, continuous) -> bool:
        return spec.is_valid([], slots, continuous)

    @precondition(lambda self: self.shadow is None)
    @rule(slots=st.integers(1, 4), continuous=st.booleans())
    def make(self, slots, continuous):
        self.do_make(slots, continuous)

    def do_make(self, slots, continuous):
        self.actions.append(("make", (slots, continuous)))
        self.slots, self.continuous = slots, continuous
        self.send(f"engine = make(slots={slots}, continuous={continuous})", "make", slots, continuous)
        self.shadow = ChapterShadow(slots, continuous)
        self.spec_state = spec.initial([], slots, continuous)
        self.trace: list[dict] = []
        self.spec_trace: list[dict] = []

    @precondition(lambda self: self.shadow is not None)
    @rule(delay=st.integers(0, 4), tokens=st.integers(1, 5), id_gap=st.integers(1, 3))
    def submit(self, delay, tokens, id_gap):
        self.next_id += id_gap
        arrival = self.next_tick() + delay
        self.do_add({"id": self.next_id, "arrival": arrival, "tokens": tokens})

    def do_add(self, job):
        self.actions.append(("add", (dict(job),)))
        self.pending.append((job["arrival"], job["id"], job))
        self.spec_state = spec.submit(self.spec_state, spec.Job(**job))

    @precondition(lambda self: self.shadow is not None and (self.shadow.live or self.pending))
    @rule()
    def step(self):
        self.do_step()

    def do_step(self):
        self.actions.append(("step", ()))
        tick = self.next_tick()
        for job in self.deliver(tick, "submit"):
            self.shadow.add(spec.Job(**job))
        served, view = self.send(f"served = engine.step()  # tick {tick}", "step")
        if not isinstance(served, (list, tuple)) or not all(type(i) is int for i in served):
            self.fail("well_typed", f"tick {tick}: step() returned {served!r}: expected a list of int ids")
        if served:
            self.shadow.apply(tick, list(served))
            self.trace.append({"tick": tick, "served": list(served)})
        else:
            self.shadow.clock = tick + 1
        if spec.is_terminal(self.spec_state):
            self.fail("matches_reference", f"tick {tick}: the engine is stepped, but the spec has nothing left")
        self.spec_state = spec.step(self.spec_state)
        expected = list(self.spec_state.served)
        self.spec_trace.append({"tick": self.spec_state.clock - 1, "served": expected})
        self.check_state(spec.broken_state_invariants(self.shadow.state()), tick)
        if list(served) != expected or self.spec_state.clock - 1 != tick:
            self.fail("matches_reference", f"tick {tick}: the engine served {list(served)}, the spec serves "
                      f"{expected} in tick {self.spec_state.clock - 1}")
        if view is not NO_VIEW and view != NO_VIEW:
            for invariant, message, _ in self.shadow.view_problems(view, tick):
                self.fail(invariant, message)

    def timeline(self) -> list[str]:
        from proofs.report.timeline import render

        return render(self.spec_trace, self.trace, self.trace[-1]["tick"] if self.trace else None, titles=("spec", "engine")) \
            if getattr(self, "trace", None) else []


def replayable(invariant: str, message: str, program: list[str], timeline: list[str]) -> str:
    """The failure as Hypothesis prints a stateful one: the calls that reproduce it, then the picture."""
    lines = [f"# {invariant}: {message}", "# the calls, in order (make is the target's factory):"]
    lines += program
    if timeline:
        lines += ["", "# the timeline of the failing run:", *(f"# {line}" for line in timeline)]
    return "\n".join(lines)


def run_stateful(target, model_name: str, max_examples: int, seed: int | None = None, policy: str = "fcfs",
                 call_seconds: float = 1.0, deadline: float | None = None, shrink_seconds: float = SHRINK_SECONDS,
                 account: dict | None = None, domain=None,
                 load_seconds: float = DEFAULT_LOAD_SECONDS) -> StatefulFailure | None:
    """Drive ``target`` (a factory) through the protocol; the shortest failing program found, else None.

    Hypothesis shrinks a failure for at most ``shrink_seconds``, then ``shrink_program`` for at
    most as long again (neither past ``deadline`` + 5 s); at ``deadline`` (time.monotonic()) the
    test stops.  ``seed`` seeds Hypothesis (the same seed runs the same programs).  ``account``,
    when given, receives ``programs`` (how many were run before the first failure, not counting
    ``discarded``: those Hypothesis started and threw away, its data exhausted or rejected), ``shrinking``
    (how many runs shrinking it took), ``texts`` (each program, in order), ``finished`` (False
    when the deadline stopped it) and ``flaky`` (a time-out or death that its program did not show
    again on a fresh engine, even with a limit ``RETRY_FACTOR`` times larger: then None is returned).
    ``domain``, a declared domain (proofs.models.declared), keeps the configs and requests drawn, and
    those of every shrunk program, inside it.  ``load_seconds`` bounds the import of ``target`` (--load-timeout),
    apart from the per-call limit."""
    base = ServingClient if model_name == "serving" else ChapterClient
    record = {"deadline": deadline if deadline is not None else float("inf"), "since": None,
              "shrink": shrink_seconds * HYPOTHESIS_SHRINK_SHARE}
    shape = SHAPES[model_name]
    with TargetProcess(target, call_seconds=call_seconds, shape=shape, adapter=session, load_seconds=load_seconds) as process:
        process.start()  # the import, in a zygote: a TargetError if it fails, raised here, not inside a program

        class Machine(base):
            pass

        Machine.process, Machine.policy, Machine.record = process, policy, record
        if domain is not None:  # the serving client draws inside the target's declared domain
            Machine.domain = domain
        test = get_state_machine_test(
            Machine,
            settings=settings(
                max_examples=max_examples,
                stateful_step_count=STEPS,
                deadline=None,
                derandomize=False,
                database=None,
                suppress_health_check=list(HealthCheck),
                verbosity=Verbosity.quiet,
            ),
        )
        if seed is not None:
            test = hypothesis_seed(seed)(test)
        try:
            test()
        except (StateMismatch, _Stop):
            pass
        except Exception:  # Hypothesis's Flaky around a failure that did not repeat: still a finding, below
            if record.get("best") is None:
                raise
        if account is not None:
            account["programs"] = record.get("programs", 0)
            account["shrinking"] = record.get("shrinking", 0)
            account["discarded"] = record.get("discarded", 0)
            account["finished"] = record.get("stopped") is None
            account["texts"] = list(record.get("texts", []))  # every program run, in order
        if record.get("best") is None:
            return None
        stop = time.monotonic() + max(1.0, min(shrink_seconds, record["deadline"] + 5.0 - time.monotonic()))
        best, reproduced = shrink_program(Machine, record["best"], stop)
        stalled = best[0] == "termination" and (": timed_out:" in best[1] or ": died:" in best[1])
        if reproduced == "no" and stalled:  # a time-out or death: once more with a larger limit, else flaky
            process.call_seconds = call_seconds * RETRY_FACTOR
            again = _replay(Machine, list(best[4]))
            if again is None or again[0] != best[0]:
                if account is not None:
                    account["flaky"] = [{"invariant": best[0], "kind": "time-out" if ": timed_out:" in best[1] else "death",
                                         "size": len(best[2]), "input_repr": "\n".join(best[2]), "message": (
                                             f"{best[1]} once, but not again when its program ran on a fresh engine "
                                             f"with a {call_seconds * RETRY_FACTOR:g} s limit")}]
                return None
            best, reproduced = again, "alone"
    invariant, message, program, timeline, actions = best
    return StatefulFailure(invariant, message, replayable(invariant, message, program, timeline),
                           _as_data(actions), reproduced)


def run_program(target, model_name: str, actions, policy: str = "fcfs", call_seconds: float = 1.0,
                load_seconds: float = DEFAULT_LOAD_SECONDS) -> StatefulFailure | None:
    """Run the client's calls ``actions`` (as ``StatefulFailure.program`` holds them) on a fresh engine
    made by ``target``; the failure they show, or None when every step kept every invariant."""
    base = ServingClient if model_name == "serving" else ChapterClient
    with TargetProcess(target, call_seconds=call_seconds, shape=SHAPES[model_name], adapter=session,
                       load_seconds=load_seconds) as process:

        class Machine(base):
            pass

        Machine.process, Machine.policy = process, policy
        Machine.record = {"deadline": float("inf"), "since": None, "shrink": float("inf")}
        again = _replay(Machine, [(kind, tuple(args)) for kind, args in actions])
    if again is None:
        return None
    invariant, message, program, timeline, done = again
    return StatefulFailure(invariant, message, replayable(invariant, message, program, timeline), _as_data(done))


def _as_data(actions) -> tuple:
    """The client's calls as plain data, without the adds that never reached the engine (no step after them)."""
    last_step = max((i for i, (kind, _) in enumerate(actions) if kind == "step"), default=-1)
    kept = [(kind, tuple(args)) for i, (kind, args) in enumerate(actions) if kind != "add" or i < last_step]
    return tuple(kept)


def _replay(machine_class, actions: list):
    """Run the client's calls on a fresh engine, skipping those not allowed; the failure's record, or None."""
    saved = machine_class.record
    machine_class.record = {"deadline": float("inf"), "since": None, "shrink": float("inf")}
    try:
        machine = machine_class()
        for kind, args in actions:
            if machine.allowed(kind, args):
                getattr(machine, "do_" + kind)(*args)
        return None
    except StateMismatch:
        return machine_class.record["best"]
    except Exception:  # the shortened program reached a state the spec cannot follow: not a reproduction
        return None
    finally:
        machine_class.record = saved


def program_size(best: tuple) -> int:
    """The calls the engine got in a failing run (the report's count): make, the adds delivered, aborts, steps."""
    return len(best[2])


def shrink_program(machine_class, best: tuple, stop: float) -> tuple:
    """The smallest failing program found from ``best`` (a failure's record) before ``stop``, and how it
    reproduced: fewest calls first (runs of calls dropped, halves down to single ones), then the
    smallest numbers (``_smaller_values``), again until nothing changes.  (best, "alone" | "no")."""
    invariant = best[0]
    again = _replay(machine_class, list(best[4]))
    if again is None or again[0] != invariant:
        return best, "no"  # the engine broke the invariant, but its program does not break it again
    process = machine_class.process
    full = process.call_seconds
    if invariant == "termination" and ": timed_out:" in again[1]:
        process.call_seconds = min(full, HANG_PROBE_SECONDS)  # every probe that still hangs costs its limit
        try:
            small = _shrink(machine_class, again, stop)
        finally:
            process.call_seconds = full
        confirmed = _replay(machine_class, list(small[4]))  # it must hang at the full limit too
        return (confirmed, "alone") if confirmed is not None and confirmed[0] == invariant else (again, "alone")
    return _shrink(machine_class, again, stop), "alone"


def _shrink(machine_class, best: tuple, stop: float) -> tuple:
    """``shrink_program``'s passes, from a failing run that reproduced."""
    invariant = best[0]

    def attempt(actions):
        if time.monotonic() >= stop:
            return None
        found = _replay(machine_class, actions)
        if found is not None and found[0] == invariant and _smaller(found, best):
            return found
        return None

    changed = True
    while changed and time.monotonic() < stop:
        changed = False
        actions = list(best[4])
        size = max(1, (len(actions) - 1) // 2)
        while size >= 1 and time.monotonic() < stop:
            removed = False
            for begin in range(len(actions) - size, 0, -1):  # from the end; never the make call
                found = attempt(actions[:begin] + actions[begin + size:])
                if found is not None:
                    best, actions, removed, changed = found, list(found[4]), True, True
                    break
            if not removed:
                size //= 2
        progress = True
        while progress and time.monotonic() < stop:
            progress = False
            for candidate in _smaller_values(list(best[4])):
                found = attempt(candidate)
                if found is not None:
                    best, progress, changed = found, True, True
                    break
        if not changed:  # stuck: two changes at once (a call dropped, and another dropped or made smaller)
            for candidate in _two_changes(list(best[4])):
                found = attempt(candidate)
                if found is not None:
                    best, changed = found, True
                    break
    return best


def _two_changes(actions: list):
    """Candidates with one call dropped and then another dropped or one number made smaller."""
    for index in range(len(actions) - 1, 0, -1):
        base = actions[:index] + actions[index + 1:]
        for other in range(len(base) - 1, 0, -1):
            yield base[:other] + base[other + 1:]
        yield from _smaller_values(base)


def _smaller(found: tuple, best: tuple) -> bool:
    """Whether a failing run is smaller than ``best``: fewer calls, else fewer client actions, else smaller numbers."""
    return _size_key(found) < _size_key(best)


def _size_key(record: tuple) -> tuple:
    actions = record[4]
    numbers = []
    for kind, args in actions:
        for arg in args:
            if isinstance(arg, dict):
                numbers += [abs(v) for v in arg.values() if type(v) is int]
            elif type(arg) is int:
                numbers.append(abs(arg))
    return (program_size(record), len(actions), sum(numbers), numbers)


FAMILIES = (1, 101, 201)  # prompt families: a request's prompt is the first tokens of one (a prefix of another, or equal)
OWN_TOKEN = (None, "last", "first")  # which token of the prompt, if any, is the request's own


def family_tokens(prompt: int, family: int, own: str | None, request_id: int) -> list[int]:
    """The first ``prompt`` tokens of prompt family ``family``, with its ``own`` token (``last``: prompts equal up
    to their last token; ``first``: equal blocks after a different first block, which only a chained hash tells
    apart) the request's own."""
    tokens = [FAMILIES[family] + k for k in range(prompt)]
    if own is not None:
        tokens[-1 if own == "last" else 0] = 10_000 + request_id
    return tokens


INT_FIELDS = ("max_seqs", "token_budget", "block_size", "num_blocks", "prompt", "output", "tokens", "arrival")


def _smaller_values(actions: list):
    """Candidates with one number made smaller (to its least, then halved, then one less), or the ids renumbered."""
    adds = [args[0]["id"] for kind, args in actions if kind == "add"]
    renumber = {old: new for new, old in enumerate(sorted(set(adds)))}
    if any(old != new for old, new in renumber.items()):
        yield [(kind, _renumbered(kind, args, renumber)) for kind, args in actions]
    for first, (kind, _) in enumerate(actions):  # every arrival from one add on, earlier by the same amount
        if kind != "add":
            continue
        later = [args[0]["arrival"] for kind, args in actions[first:] if kind == "add"]
        for shift in dict.fromkeys((min(later), min(later) // 2, 1)):
            if 0 < shift <= min(later):
                yield actions[:first] + [(k, (dict(a[0], arrival=a[0]["arrival"] - shift),) if k == "add" else a)
                                         for k, a in actions[first:]]
    for index, (kind, args) in enumerate(actions):
        if kind == "abort":  # abort an earlier request instead (one added before it, with a smaller id)
            for other in sorted({a[0]["id"] for k, a in actions[:index] if k == "add" and a[0]["id"] < args[0]}):
                yield actions[:index] + [(kind, (other,))] + actions[index + 1:]
        if kind == "add" and index > 1:  # the request added one step earlier, arriving with the request before it
            before = max((i for i in range(index) if actions[i][0] == "step"), default=None)
            if before is not None:
                earlier = [a[0]["arrival"] for k, a in actions[:before] if k == "add"]
                moved = (kind, (dict(args[0], arrival=earlier[-1] if earlier else 0),))
                yield actions[:before] + [moved] + actions[before:index] + actions[index + 1:]
    for index, (kind, args) in enumerate(actions):
        if kind == "make" and len(args) == 2:  # the chapter's make(slots, continuous)
            for smaller in _lower(args[0], 1):
                yield actions[:index] + [(kind, (smaller, args[1]))] + actions[index + 1:]
            continue
        if kind not in ("make", "add"):
            continue
        item = args[0]
        for key in INT_FIELDS:
            value = item.get(key)
            if type(value) is not int:
                continue
            least = 0 if key == "arrival" else 1
            for smaller in _lower(value, least):
                cut = {"tokens": list(item["tokens"])[:smaller]} if key == "prompt" and "tokens" in item else {}
                yield actions[:index] + [(kind, (dict(item, **{key: smaller}, **cut),))] + actions[index + 1:]


def _lower(value: int, least: int) -> list[int]:
    """Smaller values to try for ``value``, the smallest first: the least, half, one less."""
    return [v for v in dict.fromkeys((least, (value + least) // 2, value - 1)) if least <= v < value]


def _renumbered(kind: str, args: tuple, renumber: dict) -> tuple:
    if kind == "add":
        return (dict(args[0], id=renumber[args[0]["id"]]),)
    if kind == "abort":
        return (renumber.get(args[0], args[0]),)
    return args
