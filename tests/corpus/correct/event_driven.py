"""Event-driven reference scheduler.

Instead of advancing the clock one tick at a time, this simulator jumps from
event to event.  Between two consecutive events (a job arrival or a job
finishing) the set of active jobs cannot change, so the whole stretch is
handled at once: every active job's remaining count drops by the length of the
stretch and one trace entry per served tick is emitted in bulk with the same
served list.  At each event tick the contract's steps are applied in order:
jobs that finished leave, an idle clock jumps straight to the next arrival
(so huge arrivals cost nothing), arrived jobs are admitted in (arrival, id)
order under the continuous or static policy, and then the next event time is
computed as the earlier of "the first active job to run out of tokens" and
"the next arrival still in the future".  The waiting queue is a list kept
sorted by (arrival, id); the active set is a list kept in the same order.
"""

_KEYS = ("id", "arrival", "tokens")


def _fail(msg):
    raise ValueError(msg)


def _validate(jobs, slots, continuous):
    if type(slots) is not int or slots < 1:
        _fail("slots=%r: expected an int >= 1" % (slots,))
    if type(continuous) is not bool:
        _fail("continuous=%r: expected a bool" % (continuous,))
    if not isinstance(jobs, (list, tuple)):
        _fail("jobs=%r: expected a list or tuple of dicts" % (type(jobs).__name__,))
    seen = {}
    records = []
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            _fail("jobs[%d]=%r: expected a dict" % (i, job))
        keys = list(job.keys())
        missing = [k for k in _KEYS if k not in job]
        if missing:
            _fail("jobs[%d]: missing key(s) %s" % (i, ", ".join(repr(k) for k in missing)))
        extra = [k for k in keys if k not in _KEYS]
        if extra:
            _fail("jobs[%d]: unexpected key(s) %s" % (i, ", ".join(sorted(repr(k) for k in extra))))
        jid = job["id"]
        arrival = job["arrival"]
        tokens = job["tokens"]
        if type(jid) is not int:
            _fail("jobs[%d].id=%r: expected an int" % (i, jid))
        if jid in seen:
            _fail("jobs[%d].id=%r: expected a unique id (already used by jobs[%d])" % (i, jid, seen[jid]))
        if type(arrival) is not int or arrival < 0:
            _fail("jobs[%d].arrival=%r: expected an int >= 0" % (i, arrival))
        if type(tokens) is not int or tokens < 1:
            _fail("jobs[%d].tokens=%r: expected an int >= 1" % (i, tokens))
        seen[jid] = i
        records.append((arrival, jid, tokens))
    return records


def schedule(jobs, slots, continuous):
    records = _validate(jobs, slots, continuous)

    # Waiting queue: sorted by (arrival, id); consumed from the front.
    waiting = sorted(records)
    head = 0  # index of the first job still waiting

    # Active jobs: list of [arrival, id, remaining], kept in (arrival, id) order.
    active = []
    start = {}
    finish = {}
    trace = []
    t = 0

    while True:
        # Step 1: jobs whose last token was served at t-1 have left.
        if active:
            active = [a for a in active if a[2] > 0]

        # Step 2: idle with nothing arrived -> jump to the next arrival.
        if not active:
            if head == len(waiting):
                break
            if waiting[head][0] > t:
                t = waiting[head][0]

        # Step 3: admission in (arrival, id) order.
        if continuous or not active:
            while len(active) < slots and head < len(waiting) and waiting[head][0] <= t:
                arrival, jid, tokens = waiting[head]
                head += 1
                start[jid] = t
                active.append([arrival, jid, tokens])
            # Admitted jobs always come after the already active ones in
            # (arrival, id) order, but sort anyway to be safe and obvious.
            active.sort(key=lambda a: (a[0], a[1]))

        # Step 4 (in bulk): serve until the next event.
        next_event = t + min(a[2] for a in active)
        if continuous and head < len(waiting):
            # Only a future arrival can change the active set before the
            # next finish (arrivals at <= t are already queued and blocked).
            k = head
            while k < len(waiting) and waiting[k][0] <= t:
                k += 1
            if k < len(waiting) and waiting[k][0] < next_event and len(active) < slots:
                next_event = waiting[k][0]
        span = next_event - t
        served = [a[1] for a in active]
        for tick in range(t, next_event):
            trace.append({"tick": tick, "served": list(served)})
        for a in active:
            a[2] -= span
            if a[2] == 0:
                finish[a[1]] = next_event
        t = next_event

    completed = []
    busy = 0
    makespan = 0
    for arrival, jid, tokens in sorted(records, key=lambda r: r[1]):
        s = start[jid]
        f = finish[jid]
        busy += tokens
        if f > makespan:
            makespan = f
        completed.append({
            "id": jid,
            "arrival": arrival,
            "tokens": tokens,
            "start": s,
            "finish": f,
            "wait": s - arrival,
            "turnaround": f - arrival,
        })
    utilization = busy / (slots * makespan) if makespan else 0.0
    return {
        "makespan_ticks": makespan,
        "busy_slots": busy,
        "utilization": utilization,
        "completed": completed,
        "trace": trace,
    }
