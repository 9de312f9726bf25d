"""A trace recorded from an online target, driven through the clock-free protocol (``proofs.online.driver``).

Serving: ``make(config)`` with ``add_request``, ``abort`` and ``step() -> entry``; the
chapter's: ``make(slots, continuous)`` with ``submit(job)`` and ``step() -> served ids``.
The driver numbers the ticks, adds each request before the first step at or after its
arrival, calls ``abort`` before the step of its abort tick, jumps idle gaps, and stops
at the first entry a correct engine could not have given.  The totals are those the
driver derives from the entries by the model's rules (an online engine reports none).
The target runs in this process (it is the user's own engine, not contained).
"""

from __future__ import annotations

SERVING_TOTALS = ("makespan_ticks", "computed_tokens", "useful_tokens", "recomputed_tokens", "aborted_tokens",
                  "token_utilization", "preemptions")
CHAPTER_TOTALS = ("makespan_ticks", "busy_slots", "utilization")


def record(engine, model: str, requests: list, config: dict) -> tuple[list, dict]:
    """The trace entries of ``engine`` on ``requests``, driven by the online protocol (``proofs.online.driver``),
    and the run's totals as derived from them."""
    from proofs.online import driver

    if model == "serving":
        result, keys = driver.drive(engine, requests, config), SERVING_TOTALS
    else:
        result, keys = driver.drive_chapter(engine, requests, config["slots"], config["continuous"]), CHAPTER_TOTALS
    return result["trace"], {key: result[key] for key in keys}


def make_engine(factory, model: str, config: dict):
    """The engine a factory makes: ``make(config)`` (serving) or ``make(slots, continuous)`` (the chapter's)."""
    if model == "serving":
        return factory(dict(config))
    return factory(config["slots"], config["continuous"])
