"""The serving model as the engines see it: ``serve(requests, config)`` judged by ``spec.serving``."""

from __future__ import annotations

from hypothesis import target as hypothesis_target

import spec.serving as serving
from proofs.search import minimize_serving
from proofs.search import serving as search


class ServingModel:
    """Prefill and decode, chunked prefill, KV blocks, recompute preemption, aborts (``spec.serving``)."""

    name = "serving"
    function = "serve"
    default_target = "impl:serve"
    parameters = ("requests", "config")
    example_call = ([], {"max_seqs": 1, "token_budget": 1, "block_size": 1, "num_blocks": 1, "chunked_prefill": True})
    # prefix caching (issue 20): a config may hold prefix_caching, a request tokens; the result hits, cached and
    # cache_hit_tokens (spec.serving.metrics), which contract_part keeps
    written = "serve(requests, config)"
    noun = ("request", "requests")
    policies = serving.POLICIES

    def __init__(self, policy: str | None = None) -> None:
        if policy not in (None, *serving.POLICIES):
            raise ValueError(f"--policy {policy!r}: expected one of {', '.join(serving.POLICIES)} for the serving model")
        self.policy = policy or "fcfs"
        self.spec = serving
        skipped = {"matches_reference"} if self.policy == "none" else set()
        self.invariants = tuple(
            inv for inv in serving.INVARIANTS
            if inv.name not in skipped and not (self.policy == "none" and inv.family == "policy")
        )
        self.names = tuple(inv.name for inv in self.invariants)

    @property
    def shape(self) -> tuple:
        """(example arguments, how a call is written): what the sandbox checks a target's signature with."""
        return (self.example_call, self.written)

    # -- the domain and the oracle ------------------------------------------------------

    def is_valid(self, *call) -> bool:
        return serving.is_valid(*call)

    def reference(self, call) -> dict:
        return serving.run(*call)

    def check(self, call, result, reference=None) -> list:
        return serving.check(*call, result, reference, policy=self.policy)

    def size(self, call) -> int:
        requests = call[0]
        return len(requests) if isinstance(requests, (list, tuple)) else 0

    # -- search --------------------------------------------------------------------------

    def features(self, call) -> list[str]:
        """The interesting cases a valid call falls in (long idle gaps, aborts, tight budgets, ...)."""
        return search.features(call)

    def new_bounds(self):
        """An empty record of the ranges of the calls made (requests, config numbers, arrivals, prompt, output)."""
        from proofs.search.strategies import Bounds

        return Bounds(search.measure, search.SHOWN)

    draws_caching = False  # prefix caching drawn too (proofs.models.declared.for_target: our impl, or a DOMAIN saying so)

    def valid_calls(self, max_jobs: int | None = None, caching: bool | None = None):
        caching = self.draws_caching if caching is None else caching
        if max_jobs is None:
            return search.valid_calls(caching=caching)
        return search.valid_calls(max_requests=max_jobs, many=False, caching=caching)

    def bad_calls(self) -> list:
        return search.bad_calls()

    def corrupted_calls(self):
        return search.corrupted_calls()

    def steer(self, call) -> dict:
        """Point Hypothesis at preemptions, recompute, chunk and block boundaries and aborts; return the reference."""
        requests, config = call
        reference = serving.run(requests, config)
        trace = reference["trace"]
        hypothesis_target(float(reference["preemptions"]), label="preemptions")
        hypothesis_target(float(reference["recomputed_tokens"]), label="recomputed tokens")
        hypothesis_target(float(sum(1 for r in reference["requests"] if r["aborted"] is not None
                                    and r["start"] is not None)), label="aborts while running")
        hypothesis_target(float(sum(1 for entry in trace
                                    if sum(n for _, n in entry["scheduled"]) == config["token_budget"])),
                          label="ticks at the budget")
        chunks = sum(1 for entry in trace for _, n in entry["scheduled"] if n > 1 and n % config["block_size"] == 0)
        hypothesis_target(float(chunks), label="chunks ending on a block boundary")
        return reference

    def minimize_valid(self, call, fails, seconds: float, coarse: bool = False):
        return minimize_serving.minimize_valid_call(call, fails, serving.is_valid, seconds, coarse=coarse)

    def minimize_invalid(self, call, fails, seconds: float):
        return minimize_serving.minimize_invalid_call(call, fails, serving.is_valid, seconds)

    def one_step_larger(self, call):
        return minimize_serving.one_step_larger(call)

    def calls_between(self, call) -> list:
        """The calls made between two runs of ``call``: other configs, then rejected inputs."""
        return search.other_calls(call) + search.rejected_variants(call)

    # -- reports ---------------------------------------------------------------------------

    def call_repr(self, call, literal) -> str:
        requests, config = call
        return f"serve({literal(requests)}, config={literal(config)})"

    def call_from_keywords(self, args: list, keywords: dict):
        if len(args) != 1 or list(keywords) != ["config"]:
            raise ValueError("expected serve(REQUESTS, config=...)")
        return args[0], keywords["config"]

    def call_to_json(self, call) -> dict:
        return dict(zip(self.parameters, call))

    def call_from_json(self, value: dict):
        return tuple(value[name] for name in self.parameters)

    def contract_part(self, result):
        """The part of a result the contract fixes: its keys, each request record's and each trace
        entry's (extra keys are allowed and may hold anything, so no check compares them)."""
        from spec.serving.metrics import (
            CACHE_ENTRY_KEY, CACHE_RECORD_KEY, CACHE_TOTAL_KEY, ENTRY_KEYS, RECORD_KEYS,
        )
        from spec.serving.observation import RESULT_KEYS

        if not isinstance(result, dict) or any(key not in result for key in RESULT_KEYS):
            return result  # not the contract's shape: well_typed says so, compare it whole
        part = {key: result[key] for key in RESULT_KEYS + (CACHE_TOTAL_KEY,) if key in result}
        records, trace = part["requests"], part["trace"]
        if isinstance(records, (list, tuple)):
            fixed = ("id", "arrival", "prompt", "output", "abort", "tokens") + RECORD_KEYS + (CACHE_RECORD_KEY,)
            part["requests"] = [{k: r[k] for k in fixed if k in r} if isinstance(r, dict) else r for r in records]
        if isinstance(trace, (list, tuple)):
            keys = ENTRY_KEYS + (CACHE_ENTRY_KEY,)
            part["trace"] = [{k: e[k] for k in keys if k in e} if isinstance(e, dict) else e for e in trace]
        return part

    def drawable(self, call, result) -> bool:
        """True when ``call`` is valid and ``result`` has the contract's shape, so a timeline can be drawn."""
        from spec.registry import Violation
        from spec.serving.observation import observe

        if not serving.is_valid(*call):
            return False
        try:
            parsed, config = serving.validate(*call)
            return not isinstance(observe(parsed, config, result, self.policy), Violation)
        except Exception:  # a hostile result: draw no picture
            return False

    def timeline(self, call, actual) -> list[str]:
        """The first difference from the reference run and the per-request picture, expected above actual."""
        from proofs.report.serving_timeline import render
        from spec.serving.oracle import first_difference

        requests, config = call
        expected = serving.run(requests, config)
        lines = []
        focus = None
        violations = [v for v in serving.check(requests, config, actual, expected, policy=self.policy)
                      if getattr(v, "tick", None) is not None]
        if violations:
            focus = violations[0].tick
        caching = isinstance(config, dict) and config.get("prefix_caching") is True
        difference = first_difference(expected, actual, caching=caching) if self.policy != "none" else None
        if difference is not None:
            focus = difference.tick if focus is None else focus
            lines.append(f"first difference: {difference.message}")
        return lines + render(requests, config, expected["trace"], actual["trace"], focus)
