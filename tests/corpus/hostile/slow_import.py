"""A correct scheduler (and its online factory, ``make_scheduler``) whose import takes seconds, as vLLM's does (10 to 36 s), and that crashes or hangs on request, so that a test can count its imports."""

import ctypes
import os
import time

from impl import make_scheduler as _make_scheduler
from impl import schedule as _schedule

EXPECTED = "pass"  # with a --load-timeout above its import time; exit 2 (one line) below it

# SCHEDCHECK_IMPORT_LOG names a file that gets one line (the importing process's pid) per import
if os.environ.get("SCHEDCHECK_IMPORT_LOG"):
    with open(os.environ["SCHEDCHECK_IMPORT_LOG"], "a") as _log:
        _log.write(f"{os.getpid()}\n")
time.sleep(float(os.environ.get("SCHEDCHECK_IMPORT_SECONDS", "3")))


def schedule(jobs, slots, continuous):
    mode = jobs[0].get("mode") if isinstance(jobs, list) and jobs and isinstance(jobs[0], dict) else None
    if mode == "crash":  # never a valid job: the tests call it directly, verify never draws it
        os._exit(3)
    if mode == "hang":
        ctypes.CDLL(None).sleep(60)
    if mode == "pid":
        return os.getpid()
    return _schedule(jobs, slots, continuous)


def make_scheduler(slots, continuous):
    return _make_scheduler(slots, continuous)
