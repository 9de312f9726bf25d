"""Values of the input domain that are not plain lists, dicts and ints: what the strategies and the aimed recipes both build."""

from __future__ import annotations


class JobList(list):
    """A list subclass: inside the domain, as every subclass of list is."""

    def __repr__(self) -> str:
        return f"JobList({list(self)!r})"


class JobDict(dict):
    """A dict subclass: inside the domain, as every subclass of dict is."""

    def __repr__(self) -> str:
        return f"JobDict({dict(self)!r})"


class IntSubclass(int):
    """An int subclass: not ``type(x) is int``, so outside the domain."""

    def __repr__(self) -> str:
        return f"IntSubclass({int(self)})"
