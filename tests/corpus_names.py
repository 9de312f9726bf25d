"""What a buggy corpus file names as its first finding: EXPECTED, and ALSO where another rule is as right."""

import pathlib
import re


def expected_of(path: pathlib.Path) -> str:
    """The invariant a buggy file's docstring and EXPECTED name."""
    return re.search(r'^EXPECTED = "([^"]+)"', path.read_text(), re.M).group(1)


def also_of(path: pathlib.Path) -> tuple:
    """The other invariants a file names as an equally right first finding (the rule its bug breaks at an earlier
    tick or in an earlier family, or a leak that also starves the run), if any."""
    found = re.search(r'^ALSO = \(([^)]*)\)', path.read_text(), re.M)
    return tuple(re.findall(r'"(\w+)"', found.group(1))) if found else ()
