"""Helpers for the prefix-caching corpus (issue 20): drive a clock-free engine as the harness does, and read a trace.

`drive_online` numbers the ticks the way proofs/online/driver.py does (add what has
arrived, in (arrival, id) order and without `abort`; call abort(id) at the abort tick;
jump idle gaps without stepping) and returns the entries with their ticks, so that an
online engine's trace can be compared with a `serve` function's.  `trace_events` replays
a trace against the contract of issue 20 and names what it breaks, one word per kind of
problem, each tied to the registry row that judges it (`REGISTRY_ORDER`): it is how the
self-check of the buggy corpus states, for each file, the input on which its bug shows
and the first rule the bug breaks there, and how the differential test checks that the
correct schedulers break none (an agreement of three schedulers could hide a reading
they share; these consequences of the contract do not depend on it).
"""

IDLE_LIMIT = 64
ENTRY_LISTS = ("scheduled", "preempted", "aborted", "freed", "allocated", "finished")


def fcfs(request):
    return (request["arrival"], request["id"])


def drive_online(make, requests, config):
    """The trace an online engine gives when the harness drives it over ``requests`` (entries with ticks)."""
    engine = make(dict(config))
    order = sorted(requests, key=fcfs)
    by_id = {r["id"]: r for r in requests}
    live, abort_called, trace = set(), set(), []
    added, tick, idle = 0, 0, 0
    while True:
        if not live:
            if added == len(order):
                break
            tick = max(tick, order[added]["arrival"])
        while added < len(order) and order[added]["arrival"] <= tick:
            request = order[added]
            engine.add_request({k: (list(v) if k == "tokens" else v) for k, v in request.items() if k != "abort"})
            live.add(request["id"])
            added += 1
        for rid in sorted(live, key=lambda i: fcfs(by_id[i])):
            abort = by_id[rid].get("abort")
            if abort is not None and abort <= tick and rid not in abort_called:
                engine.abort(rid)
                abort_called.add(rid)
        entry = engine.step()
        if entry is None or not any(entry.get(key) for key in ENTRY_LISTS):
            idle += 1
            if idle >= IDLE_LIMIT:
                break
        else:
            idle = 0
            trace.append(dict(entry, tick=tick))
            live -= set(entry["finished"]) | set(entry["aborted"])
        tick += 1
    return trace
