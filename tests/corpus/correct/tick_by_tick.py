"""Tick-by-tick reference scheduler, written for obviousness.

The clock advances one tick at a time and each tick literally performs the
four steps of the contract in order: (1) drop active jobs with no tokens
left, (2) if nothing is active and nothing waiting has arrived, set the clock
to the earliest waiting arrival (this is the only place time skips, so idle
gaps of any size cost one step), (3) admit arrived waiting jobs in
(arrival, id) order while fewer than `slots` are active -- always under the
continuous policy, only when nothing is active under the static policy --
and (4) serve one token to every active job, record the tick in the trace,
and stamp finish = t + 1 on any job that just ran out.  Jobs are copied into
small per-job dicts; the waiting and active collections are plain lists kept
sorted by (arrival, id).
"""


def _check(jobs, slots, continuous):
    if type(slots) is not int or slots < 1:
        raise ValueError("slots=%r: expected an int >= 1" % (slots,))
    if type(continuous) is not bool:
        raise ValueError("continuous=%r: expected a bool" % (continuous,))
    if not isinstance(jobs, (list, tuple)):
        raise ValueError("jobs=%r: expected a list or tuple of dicts" % (type(jobs).__name__,))
    used = {}
    for i in range(len(jobs)):
        job = jobs[i]
        if not isinstance(job, dict):
            raise ValueError("jobs[%d]=%r: expected a dict" % (i, job))
        missing = []
        for name in ("id", "arrival", "tokens"):
            if name not in job:
                missing.append(repr(name))
        if missing:
            raise ValueError("jobs[%d]: missing key(s) %s" % (i, ", ".join(missing)))
        extra = []
        for name in job:
            if name not in ("id", "arrival", "tokens"):
                extra.append(repr(name))
        if extra:
            raise ValueError("jobs[%d]: unexpected key(s) %s" % (i, ", ".join(sorted(extra))))
        if type(job["id"]) is not int:
            raise ValueError("jobs[%d].id=%r: expected an int" % (i, job["id"]))
        if job["id"] in used:
            raise ValueError("jobs[%d].id=%r: expected a unique id (already used by jobs[%d])"
                             % (i, job["id"], used[job["id"]]))
        if type(job["arrival"]) is not int or job["arrival"] < 0:
            raise ValueError("jobs[%d].arrival=%r: expected an int >= 0" % (i, job["arrival"]))
        if type(job["tokens"]) is not int or job["tokens"] < 1:
            raise ValueError("jobs[%d].tokens=%r: expected an int >= 1" % (i, job["tokens"]))
        used[job["id"]] = i


def fifo_key(job):
    return (job["arrival"], job["id"])


def schedule(jobs, slots, continuous):
    _check(jobs, slots, continuous)

    # Private copies; the caller's dicts are never touched.
    mine = []
    for job in jobs:
        mine.append({
            "id": job["id"],
            "arrival": job["arrival"],
            "tokens": job["tokens"],
            "left": job["tokens"],
            "start": None,
            "finish": None,
        })

    waiting = sorted(mine, key=fifo_key)
    active = []
    trace = []
    t = 0

    while waiting or active:
        # 1. Jobs whose last token was served at t-1 have left.
        still_running = []
        for job in active:
            if job["left"] > 0:
                still_running.append(job)
        active = still_running

        # 2. Nothing active and nothing arrived: jump to the earliest arrival.
        if not active:
            anything_arrived = False
            for job in waiting:
                if job["arrival"] <= t:
                    anything_arrived = True
            if not anything_arrived:
                if not waiting:
                    break
                t = min(job["arrival"] for job in waiting)

        # 3. Admission.
        if continuous or len(active) == 0:
            for job in list(waiting):
                if len(active) >= slots:
                    break
                if job["arrival"] <= t:
                    waiting.remove(job)
                    job["start"] = t
                    active.append(job)
            active.sort(key=fifo_key)

        # 4. Serve one token to every active job.
        served = []
        for job in active:
            job["left"] -= 1
            served.append(job["id"])
            if job["left"] == 0:
                job["finish"] = t + 1
        trace.append({"tick": t, "served": served})

        t += 1

    completed = []
    for job in sorted(mine, key=lambda j: j["id"]):
        completed.append({
            "id": job["id"],
            "arrival": job["arrival"],
            "tokens": job["tokens"],
            "start": job["start"],
            "finish": job["finish"],
            "wait": job["start"] - job["arrival"],
            "turnaround": job["finish"] - job["arrival"],
        })

    makespan = 0
    busy = 0
    for c in completed:
        makespan = max(makespan, c["finish"])
        busy += c["tokens"]

    if makespan == 0:
        utilization = 0.0
    else:
        utilization = busy / (slots * makespan)

    return {
        "makespan_ticks": makespan,
        "busy_slots": busy,
        "utilization": utilization,
        "completed": completed,
        "trace": trace,
    }
