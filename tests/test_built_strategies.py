"""The memoised strategy constructors draw exactly what fresh ones draw, and build each strategy once."""

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from proofs.search import aim, built, serving, strategies


def _draws(strategy, count: int) -> list[str]:
    seen: list[str] = []

    @settings(max_examples=count, database=None, derandomize=True, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        seen.append(repr(value))

    collect()
    return seen


@pytest.mark.parametrize("make", [
    lambda: strategies.valid_calls(),
    lambda: strategies.valid_calls(max_jobs=8),
    lambda: strategies.corrupted_calls(),
    lambda: serving.valid_calls(),
    lambda: serving.corrupted_calls(),
    lambda: aim.aimed_calls("chapter"),
    lambda: aim.aimed_calls("serving"),
], ids=["chapter valid", "chapter valid, 8 jobs", "chapter corrupted", "serving valid", "serving corrupted",
        "chapter aimed", "serving aimed"])
def test_memoised_strategies_draw_what_fresh_ones_draw(make):
    _draws(make(), 5)  # every module the draws import is loaded (Hypothesis reads their literals) before both
    memoised = _draws(make(), 40)
    built.MEMOISED[0] = False
    try:
        fresh = _draws(make(), 40)
    finally:
        built.MEMOISED[0] = True
    assert memoised == fresh


def test_one_strategy_per_distinct_arguments():
    assert built.st.integers(0, 5) is built.st.integers(0, 5)
    assert built.st.sampled_from((0, 1)) is not built.st.sampled_from((False, True))  # 0 == False, kept apart
    assert built.st.sampled_from((0.0,)) is not built.st.sampled_from((-0.0,))
    assert built.st.sampled_from([1, 2]) is not built.st.sampled_from((1, 2))  # a list is not a tuple
    assert built.st.lists(built.st.integers(0, 3), min_size=2) is built.st.lists(built.st.integers(0, 3), min_size=2)
    assert strategies.small_calls(8) is strategies.small_calls(8) and strategies.small_calls(8) is not strategies.small_calls(9)
    assert built.st.fixed_dictionaries({"a": built.st.just(1)}) is not built.st.fixed_dictionaries({"a": built.st.just(1)})
