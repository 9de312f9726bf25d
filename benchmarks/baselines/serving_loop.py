"""A straightforward per-tick loop of the serving model, written from the rules of docs/serving.md: the speed baseline.

One loop iteration per tick, in the order the rules list: leave, abort, jump, running
pass, waiting pass, compute.  Plain structures and nothing clever: a request is a
dict; the running list is a Python list walked in full every tick; the waiting queue a
deque (preempted requests pushed at the front; an aborted waiting request is marked
and skipped when it reaches the head); pending aborts a list sorted by (abort, arrival,
id) read through a cursor; the free blocks a min-heap (lowest ids first).  It does not
validate its input (impl.serve does): it is a baseline, called on valid input only.
bench_schedulers.py checks that its result equals impl.serve's.
"""

from __future__ import annotations

import heapq
from collections import deque


def serve(requests, config):
    """Run the serving model tick by tick, as docs/serving.md reads, and return the result in the contract's shape."""
    max_seqs, budget_cap = config["max_seqs"], config["token_budget"]
    block_size, chunked = config["block_size"], config["chunked_prefill"]
    state = {}
    for request in requests:
        state[request["id"]] = {
            "req": dict(request), "generated": 0, "computed": 0, "total": 0, "blocks": [],
            "start": None, "first_token": None, "finish": None, "aborted": None, "preemptions": 0,
        }
    future = sorted(state.values(), key=lambda s: (s["req"]["arrival"], s["req"]["id"]))
    cursor = 0  # future[cursor:] have not arrived yet
    aborts = sorted((s for s in future if s["req"].get("abort") is not None),
                    key=lambda s: (s["req"]["abort"], s["req"]["arrival"], s["req"]["id"]))
    next_abort = 0  # aborts[next_abort:] are not due yet
    waiting, running = deque(), []
    free = list(range(config["num_blocks"]))  # a sorted list is a min-heap
    trace = []
    totals = {"computed": 0, "useful": 0, "recomputed": 0, "aborted": 0, "preemptions": 0}
    last_work = -1
    t = 0

    def ceil(a, b):
        return -(-a // b)

    def known(s):
        return s["req"]["prompt"] + s["generated"]

    def give_back(s, freed):
        if s["blocks"]:
            freed.append([s["req"]["id"], s["blocks"]])
            for block in s["blocks"]:
                heapq.heappush(free, block)
            s["blocks"] = []

    def take(count):
        return [heapq.heappop(free) for _ in range(count)]

    def drop_aborted_heads():
        while waiting and waiting[0]["aborted"] is not None:
            waiting.popleft()

    while True:
        freed = []
        while True:
            # arrivals join the waiting queue, behind the preempted ones, in (arrival, id) order
            while cursor < len(future) and future[cursor]["req"]["arrival"] <= t:
                waiting.append(future[cursor])
                cursor += 1
            # aborts due by t leave, in (arrival, id) order
            gone = []
            while next_abort < len(aborts) and aborts[next_abort]["req"]["abort"] <= t:
                s = aborts[next_abort]
                next_abort += 1
                if s["finish"] is None:
                    gone.append(s)
            gone.sort(key=lambda s: (s["req"]["arrival"], s["req"]["id"]))
            for s in gone:
                s["aborted"] = t
                if s in running:
                    running.remove(s)
                    give_back(s, freed)
                    totals["aborted"] += s["computed"]
                    s["computed"] = 0
            drop_aborted_heads()
            aborted = [s["req"]["id"] for s in gone]
            if running or waiting:
                break
            if aborted:  # a tick in which aborts left nothing to do lists only the aborts
                trace.append({"tick": t, "scheduled": [], "preempted": [], "aborted": aborted, "freed": freed,
                              "allocated": [], "finished": []})
                t += 1
                freed = []
                continue
            if cursor == len(future):
                break
            t = future[cursor]["req"]["arrival"]  # idle: jump to the next arrival
        if not running and not waiting:
            break
        # running pass
        budget = budget_cap
        scheduled, preempted, allocated = [], [], []
        i = 0
        while i < len(running):
            r = running[i]
            n = min(known(r) - r["computed"], budget)
            if n == 0:
                i += 1
                continue
            extra = ceil(r["computed"] + n, block_size) - len(r["blocks"])
            r_gone = False
            while len(free) < extra:  # preempt the last running request
                victim = running.pop()
                give_back(victim, freed)
                totals["recomputed"] += victim["computed"]
                victim["computed"] = 0
                victim["preemptions"] += 1
                totals["preemptions"] += 1
                waiting.appendleft(victim)
                preempted.append(victim["req"]["id"])
                if victim is r:
                    r_gone = True
                    break
            if r_gone:
                break
            if extra > 0:
                taken = take(extra)
                r["blocks"] = r["blocks"] + taken
                allocated.append([r["req"]["id"], taken])
            scheduled.append((r, n))
            budget -= n
            i += 1
        # waiting pass, only if nobody was preempted
        if not preempted:
            while waiting and waiting[0]["req"]["arrival"] <= t and len(running) < max_seqs and budget > 0:
                h = waiting[0]
                n = known(h)
                if chunked:
                    n = min(n, budget)
                elif n > budget:
                    break
                if len(free) < ceil(n, block_size):
                    break
                waiting.popleft()
                running.append(h)
                taken = take(ceil(n, block_size))
                h["blocks"] = list(taken)
                allocated.append([h["req"]["id"], taken])
                if h["start"] is None:
                    h["start"] = t
                scheduled.append((h, n))
                budget -= n
                drop_aborted_heads()
        # compute
        finished = []
        for s, n in scheduled:
            s["computed"] += n
            s["total"] += n
            totals["computed"] += n
            if s["computed"] == known(s):
                s["generated"] += 1
                if s["first_token"] is None:
                    s["first_token"] = t + 1
                if s["generated"] == s["req"]["output"]:
                    s["finish"] = t + 1
                    totals["useful"] += s["req"]["prompt"] + s["req"]["output"] - 1
                    finished.append(s["req"]["id"])
        for s, _ in scheduled:
            if s["finish"] == t + 1:
                running.remove(s)
                give_back(s, freed)
        if scheduled:
            last_work = t
        trace.append({
            "tick": t, "scheduled": [[s["req"]["id"], n] for s, n in scheduled], "preempted": preempted,
            "aborted": aborted, "freed": freed, "allocated": allocated, "finished": finished,
        })
        t += 1
    makespan = last_work + 1
    records = []
    for request_id in sorted(state):
        s = state[request_id]
        row = {key: s["req"][key] for key in ("id", "arrival", "prompt", "output", "abort") if key in s["req"]}
        row.update(
            start=s["start"], first_token=s["first_token"], finish=s["finish"], aborted=s["aborted"],
            generated=s["generated"], preemptions=s["preemptions"], computed=s["total"],
        )
        records.append(row)
    return {
        "trace": trace, "requests": records, "makespan_ticks": makespan,
        "computed_tokens": totals["computed"], "useful_tokens": totals["useful"],
        "recomputed_tokens": totals["recomputed"], "aborted_tokens": totals["aborted"],
        "token_utilization": totals["computed"] / (budget_cap * makespan) if makespan else 0.0,
        "preemptions": totals["preemptions"],
    }
