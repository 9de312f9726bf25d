"""The one way every command says its input is wrong: exit 2 and one readable line on stderr, before any work.

A message names the field, its value and the rule.  A value can be as long as the input
that holds it (a header's whole request list, a job nested a thousand lists deep), so the
line is cut in the middle past ``LIMIT`` characters, keeping its start (where and which
field) and its end (the rule).
"""

from __future__ import annotations

import sys

LIMIT = 400
HEAD = 250  # characters kept from the start; the end keeps LIMIT - HEAD - len(CUT)
CUT = " ... "


def one_line(message: str) -> str:
    """``message`` as one line of at most ``LIMIT`` characters: whitespace runs folded, a long middle cut."""
    line = " ".join(message.split())
    if len(line) <= LIMIT:
        return line
    return line[:HEAD] + CUT + line[-(LIMIT - HEAD - len(CUT)):]


def usage_error(message: str) -> int:
    """Print ``schedcheck: error: MESSAGE`` as one line (``one_line``) and return the exit code 2."""
    print(f"schedcheck: error: {one_line(message)}", file=sys.stderr)
    return 2
