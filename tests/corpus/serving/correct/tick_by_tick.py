"""Tick-by-tick serving scheduler, a literal transcription of the contract's six steps.

Built for obviousness, not speed.  Every request is copied into a small plain dict
(its `cached` tokens, `generated`, `blocks` in the order taken, and the result
fields).  The waiting queue is one plain list: preempted requests are inserted at
index 0, and the initial contents are every request sorted by (arrival, id), so the
not-yet-arrived ones simply sit behind the arrived ones.  The running list is a
plain list in admission order.  The KV pool is a plain sorted list of the ids that
were handed back plus a high-water mark (every id at or above it has never been
used), so a huge `num_blocks` costs nothing; "lowest free id first" is the smaller
of the list's head and the mark.  Each loop iteration is one tick t and performs,
in this order: (1) release the blocks of the requests that finished in t-1,
(2) abort every unfinished request with abort <= t, (3) if nothing can run, record
the tick's aborts and jump the clock to the earliest waiting arrival (or stop),
(4) the running pass with newest-first preemption, (5) the FCFS waiting pass
unless someone was preempted, (6) compute, generate and finish.  Aborts are found
by scanning every waiting and running request each tick; the recomputed and aborted
tokens are added up as they happen, and the other totals are summed over the trace
and the request copies at the end.
"""

CONFIG_KEYS = ["max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill"]
REQUEST_KEYS = ["id", "arrival", "prompt", "output"]


def ceil_div(a, b):
    return -(-a // b)


def check_config(config):
    if not isinstance(config, dict):
        raise ValueError(
            "config=%r: expected a dict with keys max_seqs, token_budget, block_size, "
            "num_blocks, chunked_prefill" % (config,))
    for key in CONFIG_KEYS:
        if key not in config:
            raise ValueError("config: missing key %r" % (key,))
    for key in config:
        if key not in CONFIG_KEYS:
            raise ValueError(
                "config: unexpected key %r; a config has exactly max_seqs, token_budget, "
                "block_size, num_blocks, chunked_prefill" % (key,))
    values = {}
    for key in CONFIG_KEYS:
        values[key] = config[key]
    for key in CONFIG_KEYS[:4]:
        v = values[key]
        if type(v) is not int or v < 1:
            raise ValueError("config.%s=%r: expected an int >= 1" % (key, v))
    if type(values["chunked_prefill"]) is not bool:
        raise ValueError("config.chunked_prefill=%r: expected a bool (True or False)"
                         % (values["chunked_prefill"],))
    return values


def check_requests(requests, cfg):
    if not isinstance(requests, (list, tuple)):
        raise ValueError("requests=%r: expected a list or tuple of request dicts" % (requests,))
    copies = []
    index_of_id = {}
    for i in range(len(requests)):
        req = requests[i]
        if not isinstance(req, dict):
            raise ValueError("requests[%d]=%r: expected a dict with keys id, arrival, prompt, "
                             "output[, abort]" % (i, req))
        for key in REQUEST_KEYS:
            if key not in req:
                raise ValueError("requests[%d]: missing key %r" % (i, key))
        for key in req:
            if key not in REQUEST_KEYS and key != "abort":
                raise ValueError(
                    "requests[%d]: unexpected key %r; a request has exactly id, arrival, "
                    "prompt, output and optionally abort" % (i, key))
        caller = []
        for key in req:
            caller.append([key, req[key]])
        fields = {}
        for key, value in caller:
            fields[key] = value
        rid = fields["id"]
        if type(rid) is not int:
            raise ValueError("requests[%d].id=%r: expected an int" % (i, rid))
        arrival = fields["arrival"]
        if type(arrival) is not int or arrival < 0:
            raise ValueError("requests[%d].arrival=%r: expected an int >= 0" % (i, arrival))
        prompt = fields["prompt"]
        if type(prompt) is not int or prompt < 1:
            raise ValueError("requests[%d].prompt=%r: expected an int >= 1" % (i, prompt))
        output = fields["output"]
        if type(output) is not int or output < 1:
            raise ValueError("requests[%d].output=%r: expected an int >= 1" % (i, output))
        abort = None
        if "abort" in fields:
            abort = fields["abort"]
            if type(abort) is not int or abort < arrival:
                raise ValueError("requests[%d].abort=%r: expected an int >= arrival=%d"
                                 % (i, abort, arrival))
        if rid in index_of_id:
            raise ValueError("requests[%d].id=%r: ids must be unique (also requests[%d].id)"
                             % (i, rid, index_of_id[rid]))
        index_of_id[rid] = i
        peak = prompt + output - 1
        need = ceil_div(peak, cfg["block_size"])
        if need > cfg["num_blocks"]:
            raise ValueError(
                "requests[%d]: prompt=%d + output=%d - 1 = %d tokens need %d blocks of "
                "block_size=%d, more than num_blocks=%d"
                % (i, prompt, output, peak, need, cfg["block_size"], cfg["num_blocks"]))
        if not cfg["chunked_prefill"] and peak > cfg["token_budget"]:
            raise ValueError(
                "requests[%d]: prompt=%d + output=%d - 1 = %d tokens exceed token_budget=%d, "
                "and without chunked_prefill a request must be (re)computed in one tick"
                % (i, prompt, output, peak, cfg["token_budget"]))
        copies.append({
            "caller": caller, "id": rid, "arrival": arrival, "prompt": prompt,
            "output": output, "abort": abort,
            "cached": 0, "generated": 0, "blocks": [],
            "start": None, "first_token": None, "finish": None, "aborted": None,
            "preemptions": 0, "computed": 0, "state": "waiting",
        })
    return copies


def serve(requests, config):
    cfg = check_config(config)
    reqs = check_requests(requests, cfg)
    max_seqs = cfg["max_seqs"]
    token_budget = cfg["token_budget"]
    block_size = cfg["block_size"]
    num_blocks = cfg["num_blocks"]
    chunked = cfg["chunked_prefill"]

    # the KV pool: ids handed back (sorted) plus every id >= mark
    pool = {"returned": [], "mark": 0}

    def free_count():
        return len(pool["returned"]) + (num_blocks - pool["mark"])

    def take(k):
        got = []
        for _ in range(k):
            returned = pool["returned"]
            if returned and returned[0] < pool["mark"]:
                got.append(returned.pop(0))
            else:
                got.append(pool["mark"])
                pool["mark"] += 1
        return got

    def give_back(ids):
        pool["returned"].extend(ids)
        pool["returned"].sort()

    def known(r):
        return r["prompt"] + r["generated"]

    waiting = sorted(reqs, key=lambda r: (r["arrival"], r["id"]))
    running = []
    trace = []
    finished_last_tick = []
    recomputed_tokens = 0
    aborted_tokens = 0
    t = 0
    while True:
        # step 1: requests that finished in t-1 have left; their blocks are free
        for ids in finished_last_tick:
            give_back(ids)
        finished_last_tick = []

        # steps 2 and 3, repeated after a jump
        stop = False
        while True:
            aborted = []
            freed = []
            for r in sorted(waiting + running, key=lambda r: (r["arrival"], r["id"])):
                if r["abort"] is not None and r["abort"] <= t:
                    aborted.append(r)
            for r in aborted:
                if r in waiting:
                    waiting.remove(r)
                else:
                    running.remove(r)
                if r["blocks"]:
                    freed.append([r["id"], list(r["blocks"])])
                    give_back(r["blocks"])
                aborted_tokens += r["cached"]
                r["blocks"] = []
                r["cached"] = 0
                r["aborted"] = t
                r["state"] = "aborted"
            arrived = [r for r in waiting if r["arrival"] <= t]
            if running or arrived:
                break
            if aborted:
                trace.append({"tick": t, "scheduled": [], "preempted": [],
                              "aborted": [r["id"] for r in aborted], "freed": freed,
                              "allocated": [], "finished": []})
            if not waiting:
                stop = True
                break
            t = min(r["arrival"] for r in waiting)
        if stop:
            break

        # step 4: running pass
        budget = token_budget
        scheduled = []
        allocated = []
        preempted = []
        i = 0
        while i < len(running):
            r = running[i]
            n = min(known(r) - r["cached"], budget)
            if n == 0:
                i += 1
                continue
            extra = ceil_div(r["cached"] + n, block_size) - len(r["blocks"])
            r_preempted = False
            while free_count() < extra:
                victim = running.pop()
                if victim["blocks"]:
                    freed.append([victim["id"], list(victim["blocks"])])
                    give_back(victim["blocks"])
                victim["blocks"] = []
                recomputed_tokens += victim["cached"]
                victim["cached"] = 0
                victim["preemptions"] += 1
                victim["state"] = "waiting"
                waiting.insert(0, victim)
                preempted.append(victim["id"])
                if victim is r:
                    r_preempted = True
                    break
            if r_preempted:
                break
            got = take(extra)
            r["blocks"] = r["blocks"] + got
            if got:
                allocated.append([r["id"], got])
            scheduled.append([r, n])
            budget -= n
            i += 1

        # step 5: waiting pass, only if nobody was preempted in this tick
        if not preempted:
            while (waiting and waiting[0]["arrival"] <= t and len(running) < max_seqs
                   and budget > 0):
                h = waiting[0]
                n = known(h)
                if chunked:
                    n = min(n, budget)
                elif n > budget:
                    break
                need = ceil_div(n, block_size)
                if free_count() < need:
                    break
                waiting.pop(0)
                running.append(h)
                h["state"] = "running"
                got = take(need)
                h["blocks"] = got
                if got:
                    allocated.append([h["id"], got])
                if h["start"] is None:
                    h["start"] = t
                scheduled.append([h, n])
                budget -= n

        # step 6: compute
        finished = []
        for r, n in scheduled:
            r["cached"] += n
            r["computed"] += n
            if r["cached"] == known(r):
                r["generated"] += 1
                if r["first_token"] is None:
                    r["first_token"] = t + 1
                if r["generated"] == r["output"]:
                    r["finish"] = t + 1
                    r["state"] = "finished"
                    finished.append(r["id"])
                    running.remove(r)
                    if r["blocks"]:
                        freed.append([r["id"], list(r["blocks"])])
                    finished_last_tick.append(r["blocks"])
                    r["blocks"] = []
        if scheduled or aborted:
            trace.append({
                "tick": t,
                "scheduled": [[r["id"], n] for r, n in scheduled],
                "preempted": preempted,
                "aborted": [r["id"] for r in aborted],
                "freed": freed,
                "allocated": allocated,
                "finished": finished,
            })
        t += 1

    makespan = 0
    computed_tokens = 0
    for entry in trace:
        if entry["scheduled"]:
            makespan = entry["tick"] + 1
        for _, n in entry["scheduled"]:
            computed_tokens += n
    useful_tokens = 0
    preemptions = 0
    out = []
    for r in sorted(reqs, key=lambda r: r["id"]):
        if r["finish"] is not None:
            useful_tokens += r["prompt"] + r["output"] - 1
        preemptions += r["preemptions"]
        d = {}
        for key, value in r["caller"]:
            d[key] = value
        d["start"] = r["start"]
        d["first_token"] = r["first_token"]
        d["finish"] = r["finish"]
        d["aborted"] = r["aborted"]
        d["generated"] = r["generated"]
        d["preemptions"] = r["preemptions"]
        d["computed"] = r["computed"]
        out.append(d)
    if makespan:
        utilization = computed_tokens / (token_budget * makespan)
    else:
        utilization = 0.0
    return {
        "trace": trace,
        "requests": out,
        "makespan_ticks": makespan,
        "computed_tokens": computed_tokens,
        "useful_tokens": useful_tokens,
        "recomputed_tokens": recomputed_tokens,
        "aborted_tokens": aborted_tokens,
        "token_utilization": utilization,
        "preemptions": preemptions,
    }
