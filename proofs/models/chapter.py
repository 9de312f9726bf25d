"""The chapter's model as the engines see it: ``schedule(jobs, slots, continuous)`` judged by ``spec``."""

from __future__ import annotations

from hypothesis import target as hypothesis_target

import spec
from proofs.search import minimize, strategies


class ChapterModel:
    """Slots, one token per tick, static vs continuous FIFO (``spec``)."""

    name = "chapter"
    function = "schedule"
    default_target = "impl:schedule"
    parameters = ("jobs", "slots", "continuous")
    example_call = ([], 1, True)
    written = "schedule(jobs, slots, continuous)"
    noun = ("job", "jobs")
    policies = ("fifo",)

    def __init__(self, policy: str | None = None) -> None:
        if policy not in (None, "fifo"):
            raise ValueError(f"--policy {policy!r}: the chapter's model has one policy, fifo")
        self.policy = "fifo"
        self.spec = spec
        self.names = spec.NAMES
        self.invariants = spec.INVARIANTS

    @property
    def shape(self) -> tuple:
        """(example arguments, how a call is written): what the sandbox checks a target's signature with."""
        return (self.example_call, self.written)

    # -- the domain and the oracle ------------------------------------------------------

    def is_valid(self, *call) -> bool:
        return spec.is_valid(*call)

    def reference(self, call) -> dict:
        return spec.run(*call)

    def check(self, call, result, reference=None) -> list:
        return spec.check(*call, result, reference)

    def size(self, call) -> int:
        jobs = call[0]
        return len(jobs) if isinstance(jobs, (list, tuple)) else 0

    # -- search --------------------------------------------------------------------------

    def valid_calls(self, max_jobs: int | None = None):
        return strategies.valid_calls() if max_jobs is None else strategies.valid_calls(max_jobs=max_jobs)

    def bad_calls(self) -> list:
        return strategies.bad_calls()

    def features(self, call) -> list[str]:
        """The interesting cases a valid call falls in (long idle gaps, huge arrivals, ids spread wide, ...)."""
        return strategies.features(call)

    def new_bounds(self):
        """An empty record of the ranges of the calls made (jobs, slots, arrivals, tokens, ids)."""
        return strategies.Bounds()

    def corrupted_calls(self):
        return strategies.corrupted_calls()

    def steer(self, call) -> dict:
        """Point Hypothesis at many jobs, arrival ties, long queues and large gaps between the policies; return the reference."""
        jobs, slots, continuous = call
        runs = {policy: spec.run(jobs, slots, policy) for policy in (False, True)}
        arrivals = [job["arrival"] for job in jobs]
        hypothesis_target(float(min(len(jobs), strategies.MAX_JOBS)), label="jobs")  # large inputs come at their own rate
        hypothesis_target(float(len(arrivals) - len(set(arrivals))), label="arrival ties")
        hypothesis_target(sum(job["wait"] for job in runs[False]["completed"]) / max(1, len(jobs)), label="queueing")
        hypothesis_target(runs[True]["utilization"] - runs[False]["utilization"], label="policy gap")
        return runs[continuous]

    def minimize_valid(self, call, fails, seconds: float, coarse: bool = False):
        return minimize.minimize_valid_call(call, fails, seconds, coarse=coarse)

    def minimize_invalid(self, call, fails, seconds: float):
        return minimize.minimize_invalid_call(call, fails, seconds)

    def one_step_larger(self, call):
        """The call with every arrival and token count 16 times larger."""
        jobs, slots, continuous = call
        return ([dict(job, arrival=16 * job["arrival"], tokens=16 * job["tokens"]) for job in jobs], slots, continuous)

    def calls_between(self, call) -> list:
        """The calls made between two runs of ``call`` (other policy, one more slot, rejected inputs)."""
        jobs, slots, continuous = call
        fresh = max((job["id"] for job in jobs), default=0) + 1
        late_zero = list(jobs) + [{"id": fresh, "arrival": 0, "tokens": 0}]
        repeated = list(jobs) + [dict(jobs[0])] if jobs else [{"id": 0, "arrival": 0, "tokens": 0}]
        return [(jobs, slots, not continuous), (jobs, slots + 1, continuous), (late_zero, slots, continuous),
                (repeated, slots, continuous)]

    # -- reports ---------------------------------------------------------------------------

    def call_repr(self, call, literal) -> str:
        jobs, slots, continuous = call
        return f"schedule({literal(jobs)}, slots={literal(slots)}, continuous={literal(continuous)})"

    def call_from_keywords(self, args: list, keywords: dict):
        if len(args) != 1 or list(keywords) != ["slots", "continuous"]:
            raise ValueError("expected schedule(JOBS, slots=..., continuous=...)")
        return args[0], keywords["slots"], keywords["continuous"]

    def call_to_json(self, call) -> dict:
        return dict(zip(self.parameters, call))

    def call_from_json(self, value: dict):
        return tuple(value[name] for name in self.parameters)

    def contract_part(self, result):
        """The part of a result the contract fixes: its keys, each ``completed`` entry's and each
        trace entry's (extra keys are allowed and may hold anything, so no check compares them)."""
        from spec.observation import COMPLETED_KEYS, RESULT_KEYS

        if not isinstance(result, dict) or any(key not in result for key in RESULT_KEYS):
            return result  # not the contract's shape: well_typed says so, compare it whole
        part = {key: result[key] for key in RESULT_KEYS}
        completed, trace = part["completed"], part["trace"]
        if isinstance(completed, (list, tuple)):
            part["completed"] = [
                {key: entry[key] for key in COMPLETED_KEYS if key in entry} if isinstance(entry, dict) else entry
                for entry in completed
            ]
        if isinstance(trace, (list, tuple)):
            part["trace"] = [
                {key: entry[key] for key in ("tick", "served") if key in entry} if isinstance(entry, dict) else entry
                for entry in trace
            ]
        return part

    def drawable(self, call, result) -> bool:
        """True when ``call`` is valid and ``result`` has the contract's shape, so a timeline can be drawn."""
        from spec.observation import Observation, observe

        if not spec.is_valid(*call):
            return False
        try:
            return isinstance(observe(spec.validate(*call), call[1], call[2], result), Observation)
        except Exception:  # a hostile result: draw no picture
            return False

    def timeline(self, call, actual) -> list[str]:
        """The first difference from the reference run and the slot-by-tick picture, expected above actual."""
        from proofs.report.timeline import render
        from spec.oracle import first_difference

        expected = spec.run(*call)
        difference = first_difference(expected, actual)
        lines = []
        focus = None
        if difference is not None:
            focus = difference.tick
            lines.append(f"first difference: {difference.message}")
        return lines + render(expected["trace"], actual["trace"], focus)
