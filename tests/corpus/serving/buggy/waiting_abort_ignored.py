"""Aborts are applied only to running requests, so a request aborted while it waits is admitted and served after its abort tick."""

EXPECTED = "no_start_before_arrival"
ALSO = ("every_job_completes_once",)  # the aborted request runs on to finish: the ledger family names it first

CONFIG_KEYS = ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill")
REQUEST_KEYS = ("id", "arrival", "prompt", "output")


def _ceil(a, b):
    return -(-a // b)


class _Pool:
    """The free KV blocks: the ids given back (kept sorted), all below the lowest id never handed out."""

    def __init__(self, size):
        self.size, self.fresh, self.returned = size, 0, []

    def count(self):
        return len(self.returned) + self.size - self.fresh

    def take(self, k):
        got = self.returned[:k]
        del self.returned[:k]
        more = k - len(got)
        got += range(self.fresh, self.fresh + more)
        self.fresh += more
        return got

    def give(self, blocks):
        self.returned.extend(blocks)
        self.returned.sort()


def _validate(requests, config):
    """Checks the whole call before any work and returns the config values and one record per request."""
    if not isinstance(config, dict):
        raise ValueError(f"config={config!r}: expected a dict with keys {', '.join(CONFIG_KEYS)}")
    for key in CONFIG_KEYS:
        if key not in config:
            raise ValueError(f"config: missing key {key!r}")
    for key in config:
        if key not in CONFIG_KEYS:
            raise ValueError(f"config: unexpected key {key!r}; a config has exactly {', '.join(CONFIG_KEYS)}")
    for key in CONFIG_KEYS[:4]:
        value = config[key]
        if type(value) is not int or value < 1:
            raise ValueError(f"config.{key}={value!r}: expected an int >= 1")
    if type(config["chunked_prefill"]) is not bool:
        raise ValueError(f"config.chunked_prefill={config['chunked_prefill']!r}: expected a bool (True or False)")
    cfg = {key: config[key] for key in CONFIG_KEYS}
    if not isinstance(requests, (list, tuple)):
        raise ValueError(f"requests={requests!r}: expected a list or tuple of request dicts")
    records, seen = [], {}
    for i, req in enumerate(requests):
        if not isinstance(req, dict):
            raise ValueError(f"requests[{i}]={req!r}: expected a dict with keys id, arrival, prompt, output[, abort]")
        for key in REQUEST_KEYS:
            if key not in req:
                raise ValueError(f"requests[{i}]: missing key {key!r}")
        for key in req:
            if key not in REQUEST_KEYS and key != "abort":
                raise ValueError(
                    f"requests[{i}]: unexpected key {key!r}; a request has exactly id, arrival, prompt, output and optionally abort"
                )
        rid, arrival, prompt, output = (req[key] for key in REQUEST_KEYS)
        if type(rid) is not int:
            raise ValueError(f"requests[{i}].id={rid!r}: expected an int")
        for key, low in (("arrival", 0), ("prompt", 1), ("output", 1)):
            if type(req[key]) is not int or req[key] < low:
                raise ValueError(f"requests[{i}].{key}={req[key]!r}: expected an int >= {low}")
        abort = req.get("abort")
        if "abort" in req and (type(abort) is not int or abort < arrival):
            raise ValueError(f"requests[{i}].abort={abort!r}: expected an int >= arrival={arrival}")
        if rid in seen:
            raise ValueError(f"requests[{i}].id={rid}: ids must be unique (also requests[{seen[rid]}].id)")
        seen[rid] = i
        need = prompt + output - 1
        bs, nb, tb = cfg["block_size"], cfg["num_blocks"], cfg["token_budget"]
        if _ceil(need, bs) > nb:
            raise ValueError(
                f"requests[{i}]: prompt={prompt} + output={output} - 1 = {need} tokens need {_ceil(need, bs)} blocks "
                f"of block_size={bs}, more than num_blocks={nb}"
            )
        if not cfg["chunked_prefill"] and need > tb:
            raise ValueError(
                f"requests[{i}]: prompt={prompt} + output={output} - 1 = {need} tokens exceed token_budget={tb}, "
                f"and without chunked_prefill a request must be (re)computed in one tick"
            )
        fields = {key: req[key] for key in REQUEST_KEYS}
        if "abort" in req:
            fields["abort"] = abort
        records.append({
            "fields": fields, "id": rid, "arrival": arrival, "prompt": prompt, "output": output, "abort": abort,
            "computed": 0, "generated": 0, "blocks": [], "start": None, "first_token": None, "finish": None,
            "aborted": None, "preemptions": 0, "total": 0,
        })
    return cfg, records


def serve(requests, config):
    """Runs the contract's FCFS serving policy over the requests and returns the trace, the per-request records and the totals."""
    cfg, records = _validate(requests, config)
    max_seqs, token_budget, bs = cfg["max_seqs"], cfg["token_budget"], cfg["block_size"]
    free = _Pool(cfg["num_blocks"])  # the lowest free ids are taken first
    waiting = sorted(records, key=lambda r: (r["arrival"], r["id"]))  # preempted ones go to the front
    running, trace = [], []
    totals = {"computed": 0, "recomputed": 0, "aborted": 0, "last": -1}

    def take(r, k):
        got = free.take(k)
        r["blocks"] += got
        return got

    def give_back(r, freed):
        if r["blocks"]:
            freed.append([r["id"], list(r["blocks"])])
            free.give(r["blocks"])
        r["blocks"] = []

    t = 0
    while waiting or running:
        freed, aborted = [], []
        for r in sorted(running, key=lambda r: (r["arrival"], r["id"])):  # BUG (step 2): the waiting queue is skipped
            if r["abort"] is not None and r["abort"] <= t:
                (waiting if r in waiting else running).remove(r)
                give_back(r, freed)
                totals["aborted"] += r["computed"]
                r["computed"], r["aborted"] = 0, t
                aborted.append(r["id"])
        if not running and not any(r["arrival"] <= t for r in waiting):  # step 3
            if aborted:
                trace.append({"tick": t, "scheduled": [], "preempted": [], "aborted": aborted,
                              "freed": freed, "allocated": [], "finished": []})
            if waiting:
                t = min(r["arrival"] for r in waiting)
            continue
        budget, scheduled, preempted, allocated = token_budget, [], [], []
        i = 0
        while i < len(running):  # step 4: the running pass
            r = running[i]
            n = min(r["prompt"] + r["generated"] - r["computed"], budget)
            if n == 0:
                i += 1
                continue
            extra = _ceil(r["computed"] + n, bs) - len(r["blocks"])
            while free.count() < extra and r in running:
                victim = running.pop()
                give_back(victim, freed)
                totals["recomputed"] += victim["computed"]
                victim["computed"] = 0
                victim["preemptions"] += 1
                waiting.insert(0, victim)
                preempted.append(victim["id"])
            if r not in running:
                break
            if extra > 0:
                allocated.append([r["id"], take(r, extra)])
            scheduled.append([r, n])
            budget -= n
            i += 1
        while not preempted and waiting and budget > 0 and len(running) < max_seqs:  # step 5: the waiting pass
            h = waiting[0]
            if h["arrival"] > t:
                break
            n = h["prompt"] + h["generated"]
            if cfg["chunked_prefill"]:
                n = min(n, budget)
            elif n > budget:
                break
            if free.count() < _ceil(n, bs):
                break
            running.append(waiting.pop(0))
            allocated.append([h["id"], take(h, _ceil(n, bs))])
            scheduled.append([h, n])
            budget -= n
            if h["start"] is None:
                h["start"] = t
        finished = []
        for r, n in scheduled:  # step 6: compute
            r["computed"] += n
            r["total"] += n
            totals["computed"] += n
            if r["computed"] == r["prompt"] + r["generated"]:
                r["generated"] += 1
                if r["first_token"] is None:
                    r["first_token"] = t + 1
                if r["generated"] == r["output"]:
                    r["finish"] = t + 1
                    finished.append(r["id"])
        for r in [r for r in running if r["finish"] is not None]:
            running.remove(r)
            give_back(r, freed)
        if scheduled:
            totals["last"] = t
        trace.append({"tick": t, "scheduled": [[r["id"], n] for r, n in scheduled], "preempted": preempted,
                      "aborted": aborted, "freed": freed, "allocated": allocated, "finished": finished})
        t += 1
    return _result(records, trace, totals, token_budget)


def _result(records, trace, totals, token_budget):
    """Assembles the result dict from the final records and the trace."""
    makespan = totals["last"] + 1
    useful = sum(r["prompt"] + r["output"] - 1 for r in records if r["finish"] is not None)
    out = []
    for r in sorted(records, key=lambda r: r["id"]):
        row = dict(r["fields"])
        row.update(start=r["start"], first_token=r["first_token"], finish=r["finish"], aborted=r["aborted"],
                   generated=r["generated"], preemptions=r["preemptions"], computed=r["total"])
        out.append(row)
    return {
        "trace": trace,
        "requests": out,
        "makespan_ticks": makespan,
        "computed_tokens": totals["computed"],
        "useful_tokens": useful,
        "recomputed_tokens": totals["recomputed"],
        "aborted_tokens": totals["aborted"],
        "token_utilization": totals["computed"] / (token_budget * makespan) if makespan else 0.0,
        "preemptions": sum(r["preemptions"] for r in records),
    }
