"""Shared fixtures: the chapter's worked examples."""

import pytest


def jobs_of(tokens, arrival=0):
    """Jobs with ids 0.. that all arrive at ``arrival``, with the given token counts."""
    return [{"id": i, "arrival": arrival, "tokens": n} for i, n in enumerate(tokens)]


@pytest.fixture
def example1():
    """Worked example 1: four jobs at tick 0 with 1, 4, 2 and 3 tokens, two slots."""
    return jobs_of([1, 4, 2, 3])


def pytest_configure(config):
    """With ``-n`` and no ``--dist`` of the caller's, xdist distributes by group (``loadgroup``), so that the group of
    ``pytest_collection_modifyitems`` holds.  Set here, not in pyproject's addopts: a venv without pytest-xdist (the
    vLLM venv of examples/engines/install-vllm.sh) would refuse ``--dist`` as an unknown option."""
    args = config.invocation_params.args
    given = any(str(arg) == "--dist" or str(arg).startswith("--dist=") for arg in args)
    if not given and not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"


def pytest_collection_modifyitems(config, items):
    """The CrossHair tests run one at a time (one xdist group, distributed by ``pytest_configure`` as ``loadgroup``):
    each plans its children's CPU from the cores it finds, and two such tests side by side on 2 cores left every child
    killed at its wall share before CrossHair's own limit stopped it (`incomplete`, a verdict that depends on load)."""
    for item in items:
        if item.path.name.startswith("test_crosshair"):
            item.add_marker(pytest.mark.xdist_group("crosshair"))
