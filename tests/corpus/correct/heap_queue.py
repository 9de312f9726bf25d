"""Heap-based reference scheduler using parallel per-job arrays.

Each job is identified by its position p in the input and its data lives in
parallel arrays (ARR[p], ID[p], TOK[p], REM[p], START[p], FIN[p]) rather than
in dicts or tuples.  The waiting queue is a binary heap (heapq) of
(arrival, id, p) triples, so its top is always the next job in FIFO order;
because ids are unique the third element never takes part in comparisons.
The clock advances one served tick at a time: at each tick positions whose
REM hit zero are dropped from the active list, an empty system with nothing
arrived jumps the clock to the heap top's arrival, jobs are popped from the
heap while their arrival is <= t and a slot is free (every tick under the
continuous policy, only on an empty system under the static policy), and then
every active position is served one token; the trace lists the ids of the
active positions ordered by (ARR[p], ID[p]).
"""

import heapq


def _reject(where, value, rule):
    raise ValueError("%s=%r: %s" % (where, value, rule))


def schedule(jobs, slots, continuous):
    # ---- validation (nothing is computed before this passes) ----
    if type(slots) is not int or slots < 1:
        _reject("slots", slots, "expected an int >= 1")
    if type(continuous) is not bool:
        _reject("continuous", continuous, "expected a bool")
    if not isinstance(jobs, (list, tuple)):
        _reject("jobs", type(jobs).__name__, "expected a list or tuple of dicts")
    required = ("id", "arrival", "tokens")
    n = len(jobs)
    ARR = [0] * n
    ID = [0] * n
    TOK = [0] * n
    owner = {}
    for p, job in enumerate(jobs):
        if not isinstance(job, dict):
            _reject("jobs[%d]" % p, job, "expected a dict")
        absent = [repr(k) for k in required if k not in job]
        if absent:
            raise ValueError("jobs[%d]: missing key(s) %s" % (p, ", ".join(absent)))
        surplus = sorted(repr(k) for k in job if k not in required)
        if surplus:
            raise ValueError("jobs[%d]: unexpected key(s) %s" % (p, ", ".join(surplus)))
        i, a, k = job["id"], job["arrival"], job["tokens"]
        if type(i) is not int:
            _reject("jobs[%d].id" % p, i, "expected an int")
        if i in owner:
            _reject("jobs[%d].id" % p, i,
                    "expected a unique id (already used by jobs[%d])" % owner[i])
        if type(a) is not int or a < 0:
            _reject("jobs[%d].arrival" % p, a, "expected an int >= 0")
        if type(k) is not int or k < 1:
            _reject("jobs[%d].tokens" % p, k, "expected an int >= 1")
        owner[i] = p
        ID[p], ARR[p], TOK[p] = i, a, k

    # ---- simulation ----
    REM = list(TOK)
    START = [None] * n
    FIN = [None] * n
    heap = [(ARR[p], ID[p], p) for p in range(n)]
    heapq.heapify(heap)
    active = []  # positions, kept ordered by (ARR[p], ID[p])
    trace = []
    t = 0

    while heap or active:
        active = [p for p in active if REM[p] > 0]
        if not active and heap and heap[0][0] > t:
            t = heap[0][0]
        if not active and not heap:
            break
        if continuous or not active:
            admitted = False
            while heap and len(active) < slots and heap[0][0] <= t:
                p = heapq.heappop(heap)[2]
                START[p] = t
                active.append(p)
                admitted = True
            if admitted:
                active.sort(key=lambda q: (ARR[q], ID[q]))
        for p in active:
            REM[p] -= 1
            if REM[p] == 0:
                FIN[p] = t + 1
        trace.append({"tick": t, "served": [ID[p] for p in active]})
        t += 1

    # ---- report ----
    order = sorted(range(n), key=lambda q: ID[q])
    completed = [
        {
            "id": ID[p],
            "arrival": ARR[p],
            "tokens": TOK[p],
            "start": START[p],
            "finish": FIN[p],
            "wait": START[p] - ARR[p],
            "turnaround": FIN[p] - ARR[p],
        }
        for p in order
    ]
    makespan = max(FIN) if n else 0
    busy = sum(TOK)
    return {
        "makespan_ticks": makespan,
        "busy_slots": busy,
        "utilization": busy / (slots * makespan) if n else 0.0,
        "completed": completed,
        "trace": trace,
    }
