"""``verify --workers N``: the independent checks of one verify run, spread over N processes.

What it establishes: the same as one Search (proofs.search.engine), for the same
checks; each check runs in a worker of its own (a child of proofs.sandbox, whose
process group holds the worker's TargetProcess children too) with its own
TargetProcess, Search and example database, at most N at once, and the results are merged in the fixed order of
``proofs.search.engine.CHECKS``, whatever order the workers finish in.

What it assumes: the checks are independent (each needs only the target, the seed
and the database), and ``time.monotonic()`` is one clock for every process of the
machine (true on Linux and macOS), so one absolute deadline bounds them all.

Bounds: the whole run still ends at the deadline (each worker's Search stops there,
and a worker that does not is killed with its whole group at the deadline plus the
minimiser's 10 s; its check is then unfinished).
Without ``--all`` a run reports one counterexample, the first in check order, once
minimised: when a check finds one, the checks after it are told to stop; the checks
before it run on, since one of them may find an earlier one.  Saved counterexamples
are replayed first, in this process, before any worker starts.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from typing import NamedTuple

from proofs.sandbox import DEFAULT_LOAD_SECONDS, Child, HarnessError, wait_any

MINIMISE_SECONDS = 10.0  # a worker may overrun the deadline by its minimiser's time, no more

_shared: dict = {}  # per worker: the first index found so far, and the warn-once flag


class Merged(NamedTuple):
    found: list  # (Counterexample, actual), in check order
    calls: int
    unfinished: list
    checks: list = []  # one proofs.search.engine.CheckAccount per check, in check order
    flaky: list = []  # failures seen once that did not reproduce (proofs.search.engine.Search.flaky)
    bounds: object = None  # strategies.Bounds merged over every worker's calls
    statistics: dict = {}  # per check: how often each interesting case was drawn
    dropped: dict = {}  # (where, type name) -> calls: extra result keys that held no plain data (TargetProcess.dropped)
    coverage: object = None  # proofs.search.coverage.Coverage merged over every worker's calls


class _Task(NamedTuple):
    index: int
    check: str
    target: object  # proofs.targets.Target
    deadline: float
    stateful: bool
    find_all: bool
    db: str | None
    saved_dir: str | None
    call_seconds: float
    seed: int | None
    examples: dict | None
    model: str = "chapter"  # the model's name (proofs.models), and its policy
    policy: str | None = None
    load_seconds: float = DEFAULT_LOAD_SECONDS  # the target's import (--load-timeout)


def plan(stateful: bool) -> list[str]:
    """The checks a worker pool shares out, in the order their results are merged."""
    from proofs.search.engine import CHECKS

    return [check for check in CHECKS if check != "replay" and (stateful or check != "stateful")]


def run_parallel(
    target,
    deadline: float,
    workers: int,
    *,
    stateful: bool = False,
    find_all: bool = False,
    db: str | None = None,
    saved_dir: str | None = None,
    call_seconds: float = 1.0,
    seed: int | None = None,
    examples: dict | None = None,
    model=None,
    load_seconds: float = DEFAULT_LOAD_SECONDS,
) -> Merged:
    """Run one verify search of ``target`` with its checks spread over ``workers`` processes."""
    if workers < 1:
        raise ValueError(f"workers={workers!r}: expected an int >= 1")
    from proofs.search.database import open_database

    # the saved counterexamples first, here; and the database is opened once here, so an
    # unreachable Redis server is reported once and the workers use the local one only
    database = open_database(db)
    if db and db.startswith("redis://") and not database.connected:
        db = None
    named = (model.name, model.policy) if model is not None else ("chapter", None)
    replay = _run_task(_Task(-1, "replay", target, deadline, stateful, find_all, db, saved_dir,
                             call_seconds, seed, examples, *named, load_seconds), database=database)
    if replay[1] and not find_all:
        return Merged(replay[1], replay[2], [], list(replay[5]), list(replay[6]), replay[7], dict(replay[8]),
                      dict(replay[9]), replay[10])

    checks = plan(stateful)
    context = multiprocessing.get_context("fork")  # shared with the sandbox's forked children
    first_found = context.Value("i", len(checks))
    warned = context.Value("b", 0)
    tasks = [
        _Task(i, check, target, deadline, stateful, find_all, db, saved_dir, call_seconds, seed, examples, *named,
              load_seconds)
        for i, check in enumerate(checks)
    ]
    pending, running, by_index = list(tasks), {}, {}
    try:
        while pending or running:
            while pending and len(running) < workers:
                task = pending.pop(0)
                seconds = max(0.1, deadline + MINIMISE_SECONDS - time.monotonic())
                # no cap here (the worker is the harness): each TargetProcess it starts caps its own child;
                # pickled answers: the worker runs the harness's code only (its target runs in a zygote of
                # its own, whose answers reach it as plain data), see proofs.sandbox.Child
                child = Child(_worker, (task, first_found, warned), seconds=seconds, memory_bytes=None, output="capture",
                              transport="pickle")
                running[task.index] = (task, child.start())
            wait_any([child for _, child in running.values()], timeout=1.0)
            for index, (task, child) in list(running.items()):
                outcome = child.poll()
                if outcome is None:
                    continue
                del running[index]
                if outcome.output:  # the worker's own warnings (the target's output goes to /dev/null)
                    sys.stderr.write(outcome.output)
                    sys.stderr.flush()
                if outcome.kind == "returned":
                    by_index[index] = outcome.result
                elif outcome.kind not in ("timed_out", "died"):  # those did not finish: their accounts say so, below  # schedcheck's own failure: exit 2, never a finding
                    raise HarnessError(f"the worker of check {task.check!r} failed: {outcome.error}")
    finally:
        for _, child in running.values():
            child.kill()
    results = [by_index[index] for index in sorted(by_index)]
    found, calls, unfinished, accounts = list(replay[1]), replay[2], [], list(replay[5])
    flaky = list(replay[6])
    bounds, statistics, dropped = replay[7], dict(replay[8]), dict(replay[9])
    corners = replay[10]
    from proofs.search.engine import CheckAccount

    for result in results:
        index, found_here, calls_here, unfinished_here, cancelled, accounts_here, flaky_here = result[:7]
        calls += calls_here
        flaky += flaky_here
        if result[7] is not None:
            bounds.merge(result[7])
        for check, counter in result[8].items():
            statistics[check] = statistics.get(check, type(counter)()) + counter
        for note, count in result[9].items():
            dropped[note] = dropped.get(note, 0) + count
        corners.merge(result[10])
        if cancelled:
            accounts += [CheckAccount(a.check, a.planned, a.tried, False, a.seconds, "counterexample") for a in accounts_here]
            continue
        found += found_here
        unfinished += unfinished_here
        accounts += accounts_here
    for index, check in enumerate(checks):  # a worker that overran the bound of the run: its check did not finish
        if index not in by_index:
            accounts.append(CheckAccount(check, 0, 0, False, 0.0, "deadline"))
            unfinished.append(check)
    if not find_all:
        found = found[:1]
    return Merged(found, calls, unfinished, accounts, flaky, bounds, statistics, dropped, corners)


def _worker(task: _Task, first_found, warned):
    """A worker (a sandbox child): run one check with the shared first-found index."""
    _shared["first_found"] = first_found
    _shared["warned"] = warned
    return _run_task(task)


def _warn_once(message: str) -> None:
    warned = _shared.get("warned")
    if warned is None:
        print(message, file=sys.stderr, flush=True)
        return
    with warned.get_lock():
        if not warned.value:
            warned.value = 1
            print(message, file=sys.stderr, flush=True)


def _run_task(task: _Task, database=None):
    """One check in this process: (index, found, calls, unfinished, cancelled, accounts, flaky)."""
    from proofs import models
    from proofs.search.engine import Search
    from proofs.sandbox import TargetProcess
    from proofs.search.database import open_database

    first_found = _shared.get("first_found")
    if first_found is not None and not task.find_all and first_found.value < task.index:
        from proofs.search.coverage import Coverage

        # an earlier check has already found one
        return task.index, [], 0, [], True, [], [], None, {}, {}, Coverage(task.model)
    if database is None:
        database = open_database(task.db, warn=_warn_once)
    cancelled = {"now": False}

    def progress(check: str, calls: int) -> None:
        if first_found is not None and not task.find_all and first_found.value < task.index:
            cancelled["now"] = True
            search.deadline = float("-inf")  # stop at the next deadline check

    from proofs.models import declared

    model = declared.for_target(models.get(task.model, task.policy), task.target)  # its DOMAIN, if it declares one
    with TargetProcess(task.target, call_seconds=task.call_seconds, shape=model.shape, load_seconds=task.load_seconds,
                       contract=model.contract_part) as process:
        process.start()
        search = Search(
            process, task.deadline, seed=task.seed, find_all=task.find_all, database=database,
            saved_dir=task.saved_dir, progress=progress, examples=task.examples, model=model,
        )
        found = search.run(stateful=task.stateful, only={task.check})
    if found and first_found is not None:
        with first_found.get_lock():
            first_found.value = min(first_found.value, task.index)
    pairs = [(f.counterexample, f.actual) for f in found]
    return (task.index, pairs, search.calls_tried, list(search.unfinished), cancelled["now"], list(search.checks),
            list(search.flaky), search.bounds, search.statistics, dict(process.dropped), search.coverage)
