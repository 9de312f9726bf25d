"""The chapter's model checked one trace entry at a time: ``Replay``, which lives in ``spec.result_checks``.

There is one set of chapter rules, ``spec.result_checks.Replay``, driven both by the
whole-result oracle (``spec.check``) and by ``schedcheck trace``; this module keeps
the name the trace checker imports.
"""

from spec.result_checks import POLICIES, Replay

__all__ = ["POLICIES", "Replay"]
