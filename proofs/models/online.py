"""A model's online protocol as the engines see it: the target is a factory, driven by ``proofs.online.driver``.

``OnlineModel(base)`` is ``base`` (the chapter's or the serving model: same calls,
strategies, oracle, reports) except that the sandbox child loads the factory and
answers each call with ``drive(make(config), requests, config)`` (serving) or
``drive_chapter(make(slots, continuous), jobs, slots, continuous)`` (chapter), and
that problems the driver saw through the engine's ``view()`` are reported as
violations beside the oracle's.  The inputs' validation is the driver's (the engine
never sees an invalid call), so the validation checks are not run on an online target.
"""

from __future__ import annotations

from spec.registry import Violation

# the checks of proofs.search.engine that an online target gets: validation is the driver's
CHECKS = ("replay", "conformance", "deterministic", "stateful")


class OnlineModel:
    """``base`` with a factory for a target: each call is one drive of a fresh engine, in the sandbox child."""

    online = True

    def __init__(self, base) -> None:
        from proofs.online import driver

        self.base = base
        if base.name == "serving":
            self.adapter = driver.serving_call
            self.shape = ((base.example_call[1],), "make(config)")
            self.written = "drive(make(config), requests, config)"
        else:
            self.adapter = driver.chapter_call
            self.shape = ((1, True), "make(slots, continuous)")
            self.written = "drive_chapter(make(slots, continuous), jobs, slots, continuous)"

    def __getattr__(self, name):
        return getattr(self.base, name)

    def check(self, call, result, reference=None) -> list:
        """The oracle's violations of the drive's result, then those the driver saw through ``view()``."""
        found = self.base.check(call, result, reference)
        stopped = result.get("stopped") if isinstance(result, dict) else None
        if stopped is not None:  # a run cut short there: what the oracle saw later is the cut, not the engine
            found = [v for v in found if v.tick is not None and (v.tick < stopped["tick"] or (
                v.tick == stopped["tick"] and v.invariant == stopped["invariant"]))]
            if not any(v.invariant == stopped["invariant"] for v in found):
                found.append(Violation(stopped["invariant"], stopped["message"], tick=stopped["tick"]))
        shown = result.get("view_violations") if isinstance(result, dict) else None
        for problem in shown or ():
            if not any(v.invariant == problem["invariant"] for v in found):
                found.append(Violation(problem["invariant"], "through view(): " + problem["message"], tick=problem["tick"]))
        return found
