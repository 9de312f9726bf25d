"""``proofs.cli.usage.one_line``: a usage error's message as one line of at most LIMIT characters, its start and end kept."""

from hypothesis import given, strategies as st

from proofs.cli.usage import CUT, HEAD, LIMIT, one_line


def test_a_short_message_is_kept_as_it_is():
    assert one_line("--max-jobs=0: expected an int >= 1") == "--max-jobs=0: expected an int >= 1"


@given(st.text())
def test_every_message_becomes_one_line_of_at_most_limit_characters(message):
    line = one_line(message)
    assert len(line) <= LIMIT and "\n" not in line and "\r" not in line
    folded = " ".join(message.split())
    if len(folded) <= LIMIT:
        assert line == folded
    else:
        assert line.startswith(folded[:HEAD]) and CUT in line and folded.endswith(line[HEAD + len(CUT):])
