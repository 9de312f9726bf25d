"""Trace checking: a recorded run of an engine, one JSON line per tick, checked against a model as a stream.

- ``proofs.trace.files``: the trace file format (header, entries, optional totals),
  read line by line from a plain or gzip file, and written;
- ``proofs.trace.check``: the streaming checker (``check_file``), one entry at a time
  through the model's incremental replay (``spec.serving.result_checks.Replay`` or
  ``spec.result_checks.Replay``), with the first violation and a timeline window around it;
- ``proofs.trace.record``: a trace recorded from an online target.
"""
