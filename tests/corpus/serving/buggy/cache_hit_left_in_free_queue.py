"""A hit on a block of count 0 takes a reference but leaves the block in the free queue, so it is later taken as a new block while its holder still uses it (the touch that must remove a hit from vLLM's free_block_queue, vllm-project/vllm#9972)."""

EXPECTED = "no_false_sharing"  # taken while held and overwritten
ALSO = ("refcount_exact", "lru_eviction", "kv_exclusive")  # kv_exclusive: the hitting request itself given the block back (one table holds it twice)
CORNER = "hit_on_free_block"
DOMAIN = {"prefix_caching": [False, True]}  # prefix caching supported: the search draws it (proofs/models/declared.py)

CONFIG_KEYS = ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill")
REQUEST_KEYS = ("id", "arrival", "prompt", "output")


def _ceil(a, b):
    return -(-a // b)


def _validate(requests, config):
    """Checks the whole call before any work and returns the config values and one record per request."""
    if not isinstance(config, dict):
        raise ValueError(f"config={config!r}: expected a dict with keys {', '.join(CONFIG_KEYS)}[, prefix_caching]")
    for key in CONFIG_KEYS:
        if key not in config:
            raise ValueError(f"config: missing key {key!r}")
    for key in config:
        if key not in CONFIG_KEYS and key != "prefix_caching":
            raise ValueError(f"config: unexpected key {key!r}; a config has exactly {', '.join(CONFIG_KEYS)} "
                             f"and optionally prefix_caching")
    for key in CONFIG_KEYS[:4]:
        value = config[key]
        if type(value) is not int or value < 1:
            raise ValueError(f"config.{key}={value!r}: expected an int >= 1")
    for key in ("chunked_prefill", "prefix_caching"):
        if key in config and type(config[key]) is not bool:
            raise ValueError(f"config.{key}={config[key]!r}: expected a bool (True or False)")
    cfg = {key: config[key] for key in CONFIG_KEYS}
    cfg["prefix_caching"] = config.get("prefix_caching", False)
    if not isinstance(requests, (list, tuple)):
        raise ValueError(f"requests={requests!r}: expected a list or tuple of request dicts")
    records, seen = [], {}
    for i, req in enumerate(requests):
        if not isinstance(req, dict):
            raise ValueError(f"requests[{i}]={req!r}: expected a dict with keys id, arrival, prompt, output"
                             f"[, abort][, tokens]")
        for key in REQUEST_KEYS:
            if key not in req:
                raise ValueError(f"requests[{i}]: missing key {key!r}")
        for key in req:
            if key not in REQUEST_KEYS and key not in ("abort", "tokens"):
                raise ValueError(f"requests[{i}]: unexpected key {key!r}; a request has exactly id, arrival, "
                                 f"prompt, output and optionally abort and tokens")
        rid, arrival, prompt, output = (req[key] for key in REQUEST_KEYS)
        if type(rid) is not int:
            raise ValueError(f"requests[{i}].id={rid!r}: expected an int")
        for key, low in (("arrival", 0), ("prompt", 1), ("output", 1)):
            if type(req[key]) is not int or req[key] < low:
                raise ValueError(f"requests[{i}].{key}={req[key]!r}: expected an int >= {low}")
        abort = req.get("abort")
        if "abort" in req and (type(abort) is not int or abort < arrival):
            raise ValueError(f"requests[{i}].abort={abort!r}: expected an int >= arrival={arrival}")
        tokens = req.get("tokens")
        if "tokens" in req:
            if not isinstance(tokens, (list, tuple)) or len(tokens) != prompt:
                raise ValueError(f"requests[{i}].tokens={tokens!r}: expected a list or tuple of exactly "
                                 f"prompt={prompt} ints")
            for p, token in enumerate(tokens):
                if type(token) is not int:
                    raise ValueError(f"requests[{i}].tokens[{p}]={token!r}: expected an int (not a bool)")
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
        if "tokens" in req:
            fields["tokens"] = list(tokens) if isinstance(tokens, list) else tuple(tokens)
        records.append({
            "fields": fields, "id": rid, "arrival": arrival, "prompt": prompt, "output": output, "abort": abort,
            "tokens": None if tokens is None else tuple(tokens), "chains": [],
            "computed": 0, "generated": 0, "blocks": [], "start": None, "first_token": None, "finish": None,
            "aborted": None, "preemptions": 0, "total": 0, "cached": 0,
        })
    return cfg, records


def serve(requests, config):
    """Runs the contract's FCFS serving policy with prefix caching and returns the trace, the records and the totals."""
    cfg, records = _validate(requests, config)
    max_seqs, token_budget, bs, num_blocks = cfg["max_seqs"], cfg["token_budget"], cfg["block_size"], cfg["num_blocks"]
    caching = cfg["prefix_caching"]
    pool = {"fresh": 0, "tail": []}  # the free queue: ids fresh..num_blocks-1, then the tail (caching off: kept sorted)
    count = {}  # block id -> its holders among the running requests
    cache = {}  # chain -> the blocks registered under it, in registration order
    chain_of_block = {}  # block id -> the chain it is registered under
    interned = {}  # (chain of the previous block, tokens of this block) -> chain
    waiting = sorted(records, key=lambda r: (r["arrival"], r["id"]))  # preempted ones go to the front
    running, trace = [], []
    totals = {"computed": 0, "recomputed": 0, "aborted": 0, "hits": 0, "last": -1}

    def free_count():
        return num_blocks - pool["fresh"] + len(pool["tail"])

    def known(r):
        return r["prompt"] + r["generated"]

    def token(r, p):
        if p < r["prompt"]:
            return r["tokens"][p] if r["tokens"] is not None else ("prompt", r["id"], p)
        return ("gen", r["id"], p - r["prompt"])

    def chain(r, j):
        """The chain of block j of r: its known sequence up to (j + 1) * block_size, interned."""
        while len(r["chains"]) <= j:
            k = len(r["chains"])
            parent = r["chains"][-1] if k else None
            key = (parent, tuple(token(r, p) for p in range(k * bs, (k + 1) * bs)))
            r["chains"].append(interned.setdefault(key, len(interned)))
        return r["chains"][j]

    def take(r, k):
        """k new blocks for r from the head of the free queue (caching off: the lowest free ids)."""
        got = []
        for _ in range(k):
            if pool["tail"] and not caching or pool["fresh"] == num_blocks:
                b = pool["tail"].pop(0)  # caching off: every id given back is below fresh
            else:
                b = pool["fresh"]
                pool["fresh"] += 1
            if b in chain_of_block:  # evicted: it leaves the cache, other blocks of its chain stay
                c = chain_of_block.pop(b)
                cache[c].remove(b)
                if not cache[c]:
                    del cache[c]
            count[b] = 1
            got.append(b)
        r["blocks"] += got
        return got

    def release(r, freed):
        """r's table is dropped: counts fall by one, and the blocks at 0 go to the free queue, last block first."""
        zero = []
        for b in r["blocks"]:
            count[b] -= 1
            if count[b] == 0:
                zero.append(b)
        if zero:
            freed.append([r["id"], zero])
            pool["tail"].extend(reversed(zero))
            if not caching:
                pool["tail"].sort()
        r["blocks"] = []

    def register(r, upto):
        """Every block of r's table full once upto tokens are computed, and not registered, is registered now."""
        if not caching:
            return
        for j in range(upto // bs):
            b = r["blocks"][j]
            if b not in chain_of_block:
                c = chain(r, j)
                chain_of_block[b] = c
                cache.setdefault(c, []).append(b)

    def lookup(h):
        """The hits of an admission: the longest run of cached chains, capped at known - 1 tokens."""
        hits = []
        if caching:
            while (len(hits) + 1) * bs <= known(h) - 1 and chain(h, len(hits)) in cache:
                hits.append(cache[chain(h, len(hits))][0])
        return hits

    t = 0
    while waiting or running:
        freed, aborted = [], []
        for r in sorted(waiting + running, key=lambda r: (r["arrival"], r["id"])):  # step 2
            if r["abort"] is not None and r["abort"] <= t:
                (waiting if r in waiting else running).remove(r)
                release(r, freed)
                totals["aborted"] += r["computed"]
                r["computed"], r["aborted"] = 0, t
                aborted.append(r["id"])
        if not running and not any(r["arrival"] <= t for r in waiting):  # step 3
            if aborted:
                trace.append({"tick": t, "scheduled": [], "preempted": [], "aborted": aborted, "freed": freed,
                              "allocated": [], "finished": [], "hits": []})
            if waiting:
                t = min(r["arrival"] for r in waiting)
            continue
        budget, scheduled, preempted, allocated, hits_entry = token_budget, [], [], [], []
        i = 0
        while i < len(running):  # step 4: the running pass
            r = running[i]
            n = min(known(r) - r["computed"], budget)
            if n == 0:
                i += 1
                continue
            extra = _ceil(r["computed"] + n, bs) - len(r["blocks"])
            while free_count() < extra and r in running:
                victim = running.pop()
                release(victim, freed)
                totals["recomputed"] += victim["computed"]
                victim["computed"] = 0
                victim["preemptions"] += 1
                waiting.insert(0, victim)
                preempted.append(victim["id"])
            if r not in running:
                break
            if extra > 0:
                allocated.append([r["id"], take(r, extra)])
            register(r, r["computed"] + n)
            scheduled.append([r, n])
            budget -= n
            i += 1
        while not preempted and waiting and budget > 0 and len(running) < max_seqs:  # step 5: the waiting pass
            h = waiting[0]
            if h["arrival"] > t:
                break
            hits = lookup(h)
            start = len(hits) * bs
            n = known(h) - start
            if cfg["chunked_prefill"]:
                n = min(n, budget)
            elif n > budget:
                break
            new = _ceil(start + n, bs) - len(hits)
            if new + sum(1 for b in hits if count.get(b, 0) == 0) > free_count():
                break
            running.append(waiting.pop(0))
            for b in hits:  # BUG: a hit of count 0 stays in the free queue
                count[b] = count.get(b, 0) + 1
            h["blocks"] = list(hits)
            if hits:
                hits_entry.append([h["id"], list(hits)])
            allocated.append([h["id"], take(h, new)])
            h["computed"] = start
            h["cached"] += start
            totals["hits"] += start
            register(h, start + n)
            scheduled.append([h, n])
            budget -= n
            if h["start"] is None:
                h["start"] = t
        finished = []
        for r, n in scheduled:  # step 6: compute
            r["computed"] += n
            r["total"] += n
            totals["computed"] += n
            if r["computed"] == known(r):
                r["generated"] += 1
                if r["first_token"] is None:
                    r["first_token"] = t + 1
                if r["generated"] == r["output"]:
                    r["finish"] = t + 1
                    finished.append(r["id"])
        for r in [r for r in running if r["finish"] is not None]:  # finishers free at the end of the tick
            running.remove(r)
            release(r, freed)
        if scheduled:
            totals["last"] = t
        trace.append({"tick": t, "scheduled": [[r["id"], n] for r, n in scheduled], "preempted": preempted,
                      "aborted": aborted, "freed": freed, "allocated": allocated, "finished": finished,
                      "hits": hits_entry})
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
                   generated=r["generated"], preemptions=r["preemptions"], computed=r["total"], cached=r["cached"])
        out.append(row)
    return {
        "trace": trace,
        "requests": out,
        "makespan_ticks": makespan,
        "computed_tokens": totals["computed"],
        "useful_tokens": useful,
        "recomputed_tokens": totals["recomputed"],
        "aborted_tokens": totals["aborted"],
        "cache_hit_tokens": totals["hits"],
        "token_utilization": totals["computed"] / (token_budget * makespan) if makespan else 0.0,
        "preemptions": sum(r["preemptions"] for r in records),
    }
