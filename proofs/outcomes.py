"""One verdict vocabulary for every command, and the one table from verdict to exit code.

Every command (verify, diff, prove, replay, trace, gate) ends in one of these words;
every report (text, JSON, JUnit, SARIF) uses them, and ``schedcheck --help`` prints
the table.  Only ``pass`` is a pass: ``incomplete`` and ``unknown`` are never
counted as one.
"""

from __future__ import annotations

PASS = "pass"  # every planned check ran to its end and found nothing (or every claim is proved)
FAIL = "fail"  # a result that breaks the spec was observed: a counterexample, saying how it reproduced (or a refuted claim)
INCOMPLETE = "incomplete"  # a planned check did not finish within the budget
UNKNOWN = "unknown"  # an engine could not decide (a solver timeout, a vacuous or unconfirmed claim; a replay
# that did not reproduce a failure which needed its history or chance)
ERROR = "error"  # the command could not run: usage error, target not loadable, internal error

VERDICTS = (PASS, FAIL, INCOMPLETE, UNKNOWN, ERROR)

EXIT_CODE = {PASS: 0, FAIL: 1, INCOMPLETE: 2, UNKNOWN: 2, ERROR: 2}

EXIT_CODES_HELP = """verdicts and exit codes (every command):
  0  pass        every planned check ran to its end and found nothing; every claim proved
  1  fail        a result that breaks the spec was observed (a counterexample); a claim refuted
  2  incomplete  a planned check did not finish within the budget (never a pass)
  2  unknown     an engine could not decide: a solver timeout, a vacuous claim; replay: did not
                reproduce a failure that needed its history or chance (never a pass)
  2  error       usage error, target could not be loaded, or an internal error of schedcheck"""


def exit_code(verdict: str) -> int:
    """The exit code of a verdict; anything that is not a known verdict is an error."""
    return EXIT_CODE.get(verdict, 2)


def combine(verdicts) -> str:
    """The verdict of several steps: a failure outranks everything, then error, unknown, incomplete; else pass."""
    verdicts = list(verdicts)
    for verdict in (FAIL, ERROR, UNKNOWN, INCOMPLETE):
        if verdict in verdicts:
            return verdict
    return PASS
