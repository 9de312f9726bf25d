"""The properties of a campaign: verify's three searches as Hypothesis tests, for HypoFuzz to fuzz.

What it establishes: for the calls a test tried, every invariant of the model's
registry held, judged exactly as ``schedcheck verify``'s search judges a call
(proofs.search.judge, the model's oracle), on the same strategies: ``conformance``
draws ``valid_calls()``, ``deterministic`` draws ``valid_calls(max_jobs=8)`` and
repeats each in fresh processes, ``corrupted_validation`` draws ``corrupted_calls()``.
A search, not a proof.  These tests are the items of ``pytest --schedcheck TARGET
--schedcheck-fuzz`` (proofs.pytest_plugin), which HypoFuzz collects and fuzzes; plain
pytest runs them as ordinary Hypothesis tests.  One test per search, not per
invariant: HypoFuzz runs a hundred inputs of a test before it switches, and every
call is judged against the whole registry anyway.

What it assumes: the test's database is the default profile's (HypoFuzz fuzzes only
tests whose database is ``settings().database``), so the plugin loads a profile with
the campaign's database before it builds them.

Bounds: the target runs in the sandbox (proofs.sandbox), one persistent child per
worker process, with the per-call limit; a hang is a ``termination`` finding at that
limit, a crash one of the child's death.  HypoFuzz's coverage guidance therefore sees
the harness and the oracle in the worker, never the target's own branches.  In a
campaign (``SCHEDCHECK_FUZZ_DIR`` set) each worker writes what it found and how many
calls it made into that folder, where ``schedcheck fuzz`` reads them; the minimising,
confirming and saving are the command's (as verify's).  No work at import time.
"""

from __future__ import annotations

import atexit
import copy
import json
import os

CAMPAIGN_DIR = "SCHEDCHECK_FUZZ_DIR"  # the environment variable naming a campaign's folder
FOUND_PER_PROCESS = 5  # a worker writes at most this many findings (HypoFuzz shrinks after the first)
CORRUPTED_RULE = "a corrupted input"  # the rule verify gives a corrupted call's validation counterexample


CHECKS = ("conformance", "deterministic", "corrupted_validation")  # verify's searches, in its order


class Context:
    """What the tests of one target share in one process: the sandboxed target and the campaign's files."""

    def __init__(self, target_text: str, model_name: str = "chapter", policy: str | None = None,
                 call_seconds: float = 1.0, load_seconds: float | None = None) -> None:
        from proofs import models
        from proofs.sandbox import DEFAULT_LOAD_SECONDS
        from proofs.targets import parse_target

        if not (isinstance(call_seconds, (int, float)) and call_seconds > 0):
            raise ValueError(f"call_seconds={call_seconds!r}: expected seconds > 0")
        self.model = models.get(model_name, policy)
        self.target = parse_target(target_text)
        self.call_seconds = float(call_seconds)
        self.load_seconds = float(load_seconds) if load_seconds is not None else DEFAULT_LOAD_SECONDS  # the import's limit
        self.folder = os.environ.get(CAMPAIGN_DIR) or None
        self._process = None
        self._pid = None
        self.calls = 0
        self.examples: dict[str, int] = {}
        self.found = 0
        self._closing = False

    def close(self) -> None:
        """Stop this process's sandbox child (a fresh one starts on the next call)."""
        if self._process is not None and self._pid == os.getpid():
            self._process.shutdown()  # its worker and its zygote
        self._process = None

    def process(self):
        """The target's sandbox child of this process (a fresh one after a fork)."""
        from proofs.sandbox import TargetProcess

        if self._process is None or self._pid != os.getpid():
            self._process = TargetProcess(self.target, call_seconds=self.call_seconds, shape=self.model.shape,
                                          contract=self.model.contract_part, load_seconds=self.load_seconds,
                                          adapter=getattr(self.model, "adapter", None))
            self._pid = os.getpid()
            self._process.start()
            if not self._closing:  # registered after multiprocessing's exit handler, so it runs before that
                atexit.register(self.close)  # joins the child, which would wait for its next call for ever
                self._closing = True
        return self._process

    # -- the campaign's files ---------------------------------------------------------

    def count(self, invariant: str, calls: int) -> None:
        self.calls += calls
        self.examples[invariant] = self.examples.get(invariant, 0) + 1
        self.flush()  # after every example: a worker is killed, never asked, at the end

    def flush(self) -> None:
        """Write this process's counts to ``worker-PID.json`` of the campaign's folder."""
        if not self.folder:
            return
        _write_json(os.path.join(self.folder, f"worker-{os.getpid()}.json"),
                    {"calls": self.calls, "examples": dict(sorted(self.examples.items()))})

    def record(self, check: str, call, finding, rule: str = "") -> None:
        """Write a finding (not minimised, not confirmed) to ``found-PID-N.json`` of the campaign's folder."""
        from proofs.counterexample import Counterexample

        if not self.folder or self.found >= FOUND_PER_PROCESS:
            return
        self.found += 1
        cex = Counterexample(finding.invariant, "hypothesis", check, tuple(call), finding.message, rule,
                             model=self.model.name)
        self.flush()
        _write_json(os.path.join(self.folder, f"found-{os.getpid()}-{self.found}.json"),
                    {"target": self.target.text, "counterexample": cex.to_json(), "calls": self.calls,
                     "kind": getattr(finding, "kind", "returned")})

    def record_harness_error(self, error: BaseException) -> None:
        if self.folder:
            _write_json(os.path.join(self.folder, f"harness-error-{os.getpid()}.json"), {"error": str(error)})


def _write_json(path: str, data: dict) -> None:
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(temporary, path)


class PropertyFailed(AssertionError):
    """A call broke the test's invariant (the message is the harness's)."""


def make_test(context: Context, check: str):
    """The Hypothesis test of verify's search ``check`` on ``context``'s target: it fails on a call that breaks
    any invariant of the registry, as that search does (the first broken one: the root cause, as the judge orders them)."""
    from hypothesis import HealthCheck, given, settings

    from proofs.sandbox import FRESH_INTERPRETERS, HarnessError, fresh_hash_seeds
    from proofs.search.judge import judge_invalid_call, judge_repeated_call, judge_valid_call

    model = context.model
    if check not in CHECKS:
        raise ValueError(f"check={check!r}: expected one of {', '.join(CHECKS)}")
    if check == "deterministic":
        strategy, calls, replay_as, rule = model.valid_calls(max_jobs=8), 7 + FRESH_INTERPRETERS, "deterministic", ""
        hash_seeds = fresh_hash_seeds()  # this worker's fresh interpreters: random seeds, others in other workers
    elif check == "corrupted_validation":
        strategy, calls, replay_as, rule = model.corrupted_calls(), 1, "validation", CORRUPTED_RULE
    else:
        strategy, calls, replay_as, rule = model.valid_calls(), 1, "conformance", ""

    def judge(call):
        process = context.process()
        if check == "deterministic":
            return judge_repeated_call(process, copy.deepcopy(call), model, hash_seeds)
        if check == "corrupted_validation":
            return judge_invalid_call(process.call(*copy.deepcopy(call)), CORRUPTED_RULE)
        outcome = process.call(*copy.deepcopy(call))
        return judge_valid_call(outcome, *call, reference=model.steer(call), model=model)

    def schedcheck_property(call):
        try:
            findings = judge(call)
        except HarnessError as error:
            context.record_harness_error(error)
            raise
        context.count(check, calls)
        if findings:
            context.record(replay_as, call, findings[0], rule)
            raise PropertyFailed(f"{findings[0].invariant}: {findings[0].message}")

    schedcheck_property.__qualname__ = schedcheck_property.__name__ = f"schedcheck_{check}"
    # every health check but nested_given off, as verify's search has them (HypoFuzz skips a test that
    # suppresses nested_given)
    quiet = [health for health in HealthCheck if health is not HealthCheck.nested_given]
    test = settings(deadline=None, suppress_health_check=quiet)(given(strategy)(schedcheck_property))
    # one database key per target, model and check (HypoFuzz replaces it by the item's node id)
    test.hypothesis.inner_test._hypothesis_internal_add_digest = (
        f"schedcheck-fuzz:{context.target.text}:{model.name}:{model.policy}:{check}".encode()
    )
    return test
