"""Settings profiles of a verify run (the example database is ``proofs.search.database``).

What it provides: three profiles, ``dev`` (the default: random, 500 valid calls),
``ci`` (seeded, bounded, no wall-clock health checks) and ``nightly`` (long: many
more examples), which ``register_profiles()`` registers with Hypothesis as
``schedcheck-dev``, ``schedcheck-ci`` and ``schedcheck-nightly`` for the test suite; and ``open_database(spec)``, the
example database a run reads and writes: a directory (default
``.hypothesis/examples``), ``none``, or ``redis://HOST:PORT[/DB]``, a Redis database
shared between machines that is always paired with the local directory.

What it assumes: the shared database is Hypothesis's RedisExampleDatabase (the
``redis`` package), reached over a trusted network.  A Redis server that is
unreachable at the start, or goes away during the run, costs the run nothing but
the sharing: one line on stderr, then the local database alone.

Bounds: the ``ci`` profile is derandomised by a fixed seed, not by Hypothesis's
``derandomize=True``, because that setting switches the example database off, and
a CI runner must replay what another runner found.  No work at import time.
"""

from __future__ import annotations

from typing import NamedTuple

from hypothesis import HealthCheck, settings

from proofs.search.engine import examples_for


class Profile(NamedTuple):
    """What a profile sets for a verify run."""

    name: str
    examples: int  # valid calls of the conformance search; the other checks scale with it
    seed: int | None  # None: a fresh random seed every run
    budget: float  # suggested --budget in seconds
    hypothesis: dict  # settings for Hypothesis's own @given tests (the test suite)


PROFILES = {
    "dev": Profile(
        "dev", examples=500, seed=None, budget=60.0,
        hypothesis={"max_examples": 100, "deadline": None},
    ),
    "ci": Profile(
        "ci", examples=200, seed=0, budget=120.0,
        hypothesis={
            "max_examples": 100, "deadline": None, "derandomize": True, "database": None,
            "print_blob": True, "suppress_health_check": [HealthCheck.too_slow],
        },
    ),
    "nightly": Profile(
        "nightly", examples=20_000, seed=None, budget=3600.0,
        hypothesis={"max_examples": 5_000, "deadline": None, "suppress_health_check": [HealthCheck.too_slow]},
    ),
}
DEFAULT_PROFILE = "dev"


def register_profiles() -> None:
    """Register ``schedcheck-dev``, ``schedcheck-ci`` and ``schedcheck-nightly`` with Hypothesis
    (``pytest --hypothesis-profile=schedcheck-ci``)."""
    for profile in PROFILES.values():
        settings.register_profile(f"schedcheck-{profile.name}", **profile.hypothesis)


def get_profile(name: str | None) -> Profile:
    """The profile called ``name`` (None: the default, ``dev``)."""
    name = DEFAULT_PROFILE if name is None else name
    if name not in PROFILES:
        raise ValueError(f"profile={name!r}: expected one of {', '.join(PROFILES)}")
    return PROFILES[name]


def search_options(name: str | None, *, examples: int | None = None, seed: int | None = None) -> dict:
    """Keyword arguments for ``Search`` under a profile: ``seed`` and ``examples`` (per check).

    An explicit ``examples`` or ``seed`` (from the command line) wins over the profile's."""
    profile = get_profile(name)
    return {
        "seed": profile.seed if seed is None else seed,
        "examples": examples_for(profile.examples if examples is None else examples),
    }
