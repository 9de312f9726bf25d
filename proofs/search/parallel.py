"""``verify --workers N``: the independent checks of one verify run, spread over N processes.

What it establishes: the same as one Search (proofs.search.engine), for the same
checks; each check runs in a worker process of its own with its own TargetProcess,
Search and example database, and the results are merged in the fixed order of
``proofs.search.engine.CHECKS``, whatever order the workers finish in.

What it assumes: the checks are independent (each needs only the target, the seed
and the database), and ``time.monotonic()`` is one clock for every process of the
machine (true on Linux and macOS), so one absolute deadline bounds them all.

Bounds: the whole run still ends at the deadline (each worker's Search stops there,
and a worker that does not is ended at the deadline plus the minimiser's 10 s).
Without ``--all`` a run reports one counterexample, the first in check order, once
minimised: when a check finds one, the checks after it are told to stop; the checks
before it run on, since one of them may find an earlier one.  Saved counterexamples
are replayed first, in this process, before any worker starts.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from queue import Empty
from typing import NamedTuple

MINIMISE_SECONDS = 10.0  # a worker may overrun the deadline by its minimiser's time, no more

_shared: dict = {}  # per worker: the first index found so far, and the warn-once flag


class Merged(NamedTuple):
    found: list  # (Counterexample, actual), in check order
    calls: int
    unfinished: list
    bounds: object = None  # strategies.Bounds merged over every worker's calls
    statistics: dict = {}  # per check: how often each interesting case was drawn


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
                             call_seconds, seed, examples, *named), database=database)
    if replay[1] and not find_all:
        return Merged(replay[1], replay[2], [])

    checks = plan(stateful)
    context = multiprocessing.get_context("spawn")  # no inherited locks, threads or open pipes
    first_found = context.Value("i", len(checks))
    warned = context.Value("b", 0)
    tasks = [
        _Task(i, check, target, deadline, stateful, find_all, db, saved_dir, call_seconds, seed, examples, *named)
        for i, check in enumerate(checks)
    ]
    queue, answers = context.Queue(), context.Queue()
    for task in tasks:
        queue.put(task)
    count = min(workers, len(tasks))
    for _ in range(count):
        queue.put(None)
    # not a Pool: its workers are daemons, and a daemon may not start the target's process
    processes = [
        context.Process(target=_worker, args=(queue, answers, first_found, warned), name=f"schedcheck-worker-{n}")
        for n in range(count)
    ]
    for process in processes:
        process.start()
    by_index = {}
    try:
        while len(by_index) < len(tasks):
            left = deadline + MINIMISE_SECONDS - time.monotonic()
            try:
                result = answers.get(timeout=max(0.1, left))
            except Empty:
                break  # a worker overran the bound of the run: what it found is lost
            by_index[result[0]] = result
    finally:
        for process in processes:
            process.join(timeout=max(0.0, deadline + MINIMISE_SECONDS - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
    results = [by_index[index] for index in sorted(by_index)]
    found, calls, unfinished = list(replay[1]), replay[2], []
    bounds, statistics = replay[5], dict(replay[6])
    for result in results:
        index, found_here, calls_here, unfinished_here, cancelled = result[:5]
        calls += calls_here
        if result[5] is not None:
            bounds.merge(result[5])
        for check, counter in result[6].items():
            statistics[check] = statistics.get(check, type(counter)()) + counter
        if cancelled:
            continue
        found += found_here
        unfinished += unfinished_here
    if not find_all:
        found = found[:1]
    return Merged(found, calls, unfinished, bounds, statistics)


def _worker(queue, answers, first_found, warned) -> None:
    """A worker process: run checks from ``queue`` until told to stop (None)."""
    _shared["first_found"] = first_found
    _shared["warned"] = warned
    while (task := queue.get()) is not None:
        answers.put(_run_task(task))


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
    """One check in this process: (index, found, calls, unfinished, cancelled)."""
    from proofs import models
    from proofs.search.engine import Search
    from proofs.sandbox import TargetProcess
    from proofs.search.database import open_database

    first_found = _shared.get("first_found")
    if first_found is not None and not task.find_all and first_found.value < task.index:
        return task.index, [], 0, [], True, None, {}  # an earlier check has already found one
    if database is None:
        database = open_database(task.db, warn=_warn_once)
    cancelled = {"now": False}

    def progress(check: str, calls: int) -> None:
        if first_found is not None and not task.find_all and first_found.value < task.index:
            cancelled["now"] = True
            search.deadline = float("-inf")  # stop at the next deadline check

    model = models.get(task.model, task.policy)
    with TargetProcess(task.target, call_seconds=task.call_seconds, shape=model.shape) as process:
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
    return (task.index, pairs, search.calls_tried, list(search.unfinished), cancelled["now"], search.bounds,
            search.statistics)
