"""With a single slot, jobs are taken in id order (a fast path for one slot), not in (arrival, id) order."""

EXPECTED = "fifo_order"
ALSO = ("continuous_backfills",)  # when the lowest id has not arrived yet the slot idles while an arrived job waits (tick 0), before the FIFO order breaks
CORNER = "one_slot"
CORNER = "full_with_queue"

FIELDS = ("id", "arrival", "tokens")


def _check(jobs, slots, continuous):
    """Validate everything before any work; return (arrival, id, tokens) tuples."""
    if type(slots) is not int or slots < 1:
        raise ValueError(f"slots={slots!r}: must be an int >= 1")
    if type(continuous) is not bool:
        raise ValueError(f"continuous={continuous!r}: must be a bool")
    if not isinstance(jobs, (list, tuple)):
        raise ValueError(f"jobs: {type(jobs).__name__} must be a list or tuple")
    specs, seen = [], set()
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise ValueError(f"job {i}: {type(job).__name__} must be a dict")
        for name in FIELDS:
            if name not in job:
                raise ValueError(f"job {i}: field {name!r} is missing")
        for name in job:
            if name not in FIELDS:
                raise ValueError(f"job {i}: field {name!r} is not allowed")
        values = []
        for field in FIELDS:
            value = job[field]
            if type(value) is not int:
                raise ValueError(f"job {i}: field {field}={value!r} must be an int")
            values.append(value)
        jid, arrival, tokens = values
        if arrival < 0:
            raise ValueError(f"job {i}: field arrival={arrival} must be >= 0")
        if tokens < 1:
            raise ValueError(f"job {i}: field tokens={tokens} must be >= 1")
        if jid in seen:
            raise ValueError(f"job {i}: field id={jid} is repeated")
        seen.add(jid)
        specs.append((arrival, jid, tokens))
    return specs


def schedule(jobs, slots, continuous):
    specs = _check(jobs, slots, continuous)
    queue = sorted(specs, key=lambda s: s[1]) if slots == 1 else sorted(specs)  # BUG: one slot: id order
    active, start, finish, trace = [], {}, {}, []
    t = nxt = 0  # clock; index of the next queued job
    while nxt < len(queue) or active:
        if not active and queue[nxt][0] > t:
            t = queue[nxt][0]  # idle: jump to the next arrival
        if continuous or not active:
            while nxt < len(queue) and queue[nxt][0] <= t and len(active) < slots:
                arrival, jid, tokens = queue[nxt]
                active.append([arrival, jid, tokens])  # [arrival, id, remaining]
                start[jid] = t
                nxt += 1
        served = sorted(active)  # (arrival, id) order
        trace.append({"tick": t, "served": [job[1] for job in served]})
        for job in served:
            job[2] -= 1
            if job[2] <= 0:
                finish[job[1]] = t + 1
        active = [job for job in active if job[2] > 0]
        t += 1
    makespan = max(finish.values(), default=0)
    busy = sum(tokens for _, _, tokens in specs)
    completed = [
        {"id": jid, "arrival": arrival, "tokens": tokens,
         "start": start[jid], "finish": finish[jid],
         "wait": start[jid] - arrival, "turnaround": finish[jid] - arrival}
        for arrival, jid, tokens in sorted(specs, key=lambda s: s[1])
    ]
    return {
        "makespan_ticks": makespan,
        "busy_slots": busy,
        "utilization": busy / (slots * makespan) if makespan else 0.0,
        "completed": completed,
        "trace": trace,
    }
