"""Keeps arrived jobs in a ``deque(maxlen=32)``, which silently drops the oldest waiting job beyond 32.

Correct on every input that never has more than 32 arrived jobs waiting at once, so a
search that never tries more than about 30 jobs passes it.
"""

from collections import deque

EXPECTED = "work_conservation"
CORNER = "queue_over_32"

FIELDS = ("id", "arrival", "tokens")


def _check(jobs, slots, continuous):
    if type(slots) is not int or slots < 1:
        raise ValueError(f"slots={slots!r}: expected an int >= 1")
    if type(continuous) is not bool:
        raise ValueError(f"continuous={continuous!r}: expected a bool")
    if not isinstance(jobs, (list, tuple)):
        raise ValueError(f"jobs: {type(jobs).__name__}: expected a list or tuple")
    seen = set()
    for i, job in enumerate(jobs):
        if not isinstance(job, dict) or set(job) != set(FIELDS):
            raise ValueError(f"jobs[{i}]={job!r}: expected a dict with exactly the keys {FIELDS}")
        for field in FIELDS:
            if type(job[field]) is not int:
                raise ValueError(f"jobs[{i}].{field}={job[field]!r}: expected an int")
        if job["arrival"] < 0:
            raise ValueError(f"jobs[{i}].arrival={job['arrival']!r}: expected an int >= 0")
        if job["tokens"] < 1:
            raise ValueError(f"jobs[{i}].tokens={job['tokens']!r}: expected an int >= 1")
        if job["id"] in seen:
            raise ValueError(f"jobs[{i}].id={job['id']!r}: expected a unique id")
        seen.add(job["id"])


def schedule(jobs, slots, continuous):
    _check(jobs, slots, continuous)
    pending = sorted(((job["arrival"], job["id"], job["tokens"]) for job in jobs), reverse=True)
    waiting = deque(maxlen=32)  # BUG: beyond 32 waiting jobs, the oldest is dropped without a word
    active, trace, done = [], [], []
    tick = 0
    while pending or waiting or active:
        if not active and not waiting and pending[-1][0] > tick:
            tick = pending[-1][0]  # idle: jump to the next arrival
        while pending and pending[-1][0] <= tick:
            waiting.append(pending.pop())
        if continuous or not active:
            while waiting and len(active) < slots:
                arrival, job_id, tokens = waiting.popleft()
                active.append([arrival, job_id, tokens, tokens, tick])
        active.sort()
        trace.append({"tick": tick, "served": [job[1] for job in active]})
        for job in active:
            job[3] -= 1
            if job[3] == 0:
                arrival, job_id, tokens, _, start = job
                done.append({"id": job_id, "arrival": arrival, "tokens": tokens, "start": start,
                             "finish": tick + 1, "wait": start - arrival, "turnaround": tick + 1 - arrival})
        active = [job for job in active if job[3] > 0]
        tick += 1
    done.sort(key=lambda job: job["id"])
    makespan = max((job["finish"] for job in done), default=0)
    busy = sum(job["tokens"] for job in done)
    return {
        "makespan_ticks": makespan,
        "busy_slots": busy,
        "utilization": busy / (slots * makespan) if makespan else 0.0,
        "completed": done,
        "trace": trace,
    }
