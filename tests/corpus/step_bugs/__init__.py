"""Our online Scheduler with ONE bug injected into ``step`` per state invariant.

Each module defines ``Scheduler`` (a subclass of ``impl.scheduler.Scheduler`` whose
``step`` is a copy of impl's with one change, marked ``# BUG``) and ``EXPECTED``, the
name of the state invariant the bug breaks.  The CrossHair engine must find each with
a one-step counterexample for that invariant.
"""
