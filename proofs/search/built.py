"""Hypothesis strategies built once per distinct arguments, so that a draw builds none.

The search's strategies draw their parameters first (how many jobs, which spread) and
then build the strategies for the rest from them, inside each draw.  Building a
strategy object, and the checks Hypothesis makes the first time one is drawn from,
cost more than the draw itself: about two thirds of the time to draw a call went
there (measured in docs/performance.md#search-throughput).  ``st`` here is ``hypothesis.strategies``
with each constructor memoised on its arguments (compared by type and value, so
``1``, ``True`` and ``1.0`` stay apart; a strategy or function argument by identity,
the memo keeping it alive), and ``built_once`` does the same for the search's own
``@st.composite`` functions.  A strategy is an immutable description, so the one
built earlier draws exactly what a fresh one would: the same choice sequence gives
the same call (tests/test_built_strategies.py draws both ways and compares).  Arguments
that cannot be compared (a dict, say) build afresh.  (Hypothesis also seeds its draws
with the literals of the modules loaded, so any change to the source changes the
draws of a seed; the comparison is within one source.)
"""

from __future__ import annotations

import functools

from hypothesis import strategies as _strategies

MEMO_LIMIT = 20_000  # strategies kept per constructor; then the memo starts again
MEMOISED = [True]  # False: every constructor builds afresh (the tests compare the draws both ways)

_ATOMS = (int, bool, str, bytes, type(None))


def _key(value):
    """A hashable key telling apart values that ``==`` would not (1, True, 1.0; -0.0 and 0.0)."""
    kind = type(value)
    if kind in _ATOMS:
        return kind, value
    if kind is float:
        return kind, repr(value)
    if kind is tuple or kind is list:
        return kind, tuple(_key(item) for item in value)
    if kind is dict:
        raise TypeError("a dict argument is not memoised")
    return kind, id(value)  # a strategy, a function: the memo keeps the object alive, so the id stays its own


def built_once(factory):
    """``factory`` (anything that returns a strategy) returning the strategy built for the same arguments before."""
    memo: dict = {}

    @functools.wraps(factory)
    def build(*args, **kwargs):
        if not MEMOISED[0]:
            return factory(*args, **kwargs)
        try:
            key = (_key(args), _key(tuple(sorted(kwargs.items()))))
        except TypeError:
            return factory(*args, **kwargs)
        entry = memo.get(key)
        if entry is None:
            if len(memo) >= MEMO_LIMIT:
                memo.clear()
            entry = memo[key] = (args, kwargs, factory(*args, **kwargs))
        return entry[2]

    return build


class _Strategies:
    """``hypothesis.strategies`` with every constructor memoised (``composite`` and the rest left as they are)."""

    _PLAIN = frozenset({"composite", "SearchStrategy", "register_type_strategy", "DrawFn", "DataObject"})

    def __getattr__(self, name: str):
        value = getattr(_strategies, name)
        if callable(value) and name not in self._PLAIN and not isinstance(value, type):
            value = built_once(value)
        setattr(self, name, value)  # later lookups find it at once
        return value


st = _Strategies()
