"""Shared fixtures: the chapter's worked examples."""

import pytest


def jobs_of(tokens, arrival=0):
    """Jobs with ids 0.. that all arrive at ``arrival``, with the given token counts."""
    return [{"id": i, "arrival": arrival, "tokens": n} for i, n in enumerate(tokens)]


@pytest.fixture
def example1():
    """Worked example 1: four jobs at tick 0 with 1, 4, 2 and 3 tokens, two slots."""
    return jobs_of([1, 4, 2, 3])
