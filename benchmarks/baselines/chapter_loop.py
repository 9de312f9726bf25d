"""The chapter's closing ``schedule`` with its bugs repaired: a straightforward per-tick loop, the speed baseline.

The chapter's code (shared/seeds, the last listing) calls an undefined
``job_remaining``, has no ``continuous`` argument, counts a job's tokens down in the
caller's dicts' copies but reports no start, wait or turnaround, and pops the queue's
head with ``list.pop(0)``.  Repaired here, and nothing more: the same loop, one
iteration per served tick, serving every active job one token by a Python loop;
``continuous`` admits into free slots, static only into an empty batch; the queue is
a sorted list read through a cursor; the result has the contract's shape.
"""

from __future__ import annotations


def schedule(jobs, slots, continuous):
    """Run every job to completion, one served tick per loop iteration (the chapter's loop, repaired)."""
    if type(slots) is not int or slots < 1:
        raise ValueError(f"slots={slots!r}: expected an int >= 1")
    if type(continuous) is not bool:
        raise ValueError(f"continuous={continuous!r}: expected a bool")
    rows, seen = [], set()
    for job in jobs:
        if set(job) != {"id", "arrival", "tokens"} or any(type(job[k]) is not int for k in job):
            raise ValueError(f"job={job!r}: expected exactly integer id, arrival, tokens")
        if job["arrival"] < 0 or job["tokens"] < 1 or job["id"] in seen:
            raise ValueError(f"job={job!r}: invalid or duplicate")
        seen.add(job["id"])
        rows.append({"id": job["id"], "arrival": job["arrival"], "tokens": job["tokens"], "left": job["tokens"]})
    waiting = sorted(rows, key=lambda j: (j["arrival"], j["id"]))
    head = 0  # waiting[head:] are not admitted yet (the chapter's pop(0), without its O(n) cost)
    active, trace, busy, time = [], [], 0, 0
    while head < len(waiting) or active:
        if not active and waiting[head]["arrival"] > time:
            time = waiting[head]["arrival"]
        if continuous or not active:
            while head < len(waiting) and waiting[head]["arrival"] <= time and len(active) < slots:
                job = waiting[head]
                head += 1
                job["start"] = time
                active.append(job)
        trace.append({"tick": time, "served": [j["id"] for j in active]})
        busy += len(active)
        for job in active:
            job["left"] -= 1
            if job["left"] == 0:
                job["finish"] = time + 1
        active = [j for j in active if j["left"] > 0]
        time += 1
    completed = [
        {"id": j["id"], "arrival": j["arrival"], "tokens": j["tokens"], "start": j["start"], "finish": j["finish"],
         "wait": j["start"] - j["arrival"], "turnaround": j["finish"] - j["arrival"]}
        for j in sorted(rows, key=lambda j: j["id"])
    ]
    makespan = max((j["finish"] for j in rows), default=0)
    return {
        "makespan_ticks": makespan,
        "busy_slots": busy,
        "utilization": busy / (slots * makespan) if makespan else 0.0,
        "completed": completed,
        "trace": trace,
    }
