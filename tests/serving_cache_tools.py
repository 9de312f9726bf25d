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


# The registry rows of the serving model in their order, with issue 20's rows where the issue puts them.
REGISTRY_ORDER = (
    "well_typed", "no_duplicate_active", "no_start_before_arrival", "slot_bound", "nonnegative_remaining",
    "work_conservation", "every_job_completes_once", "termination", "token_budget", "kv_capacity",
    "no_false_sharing", "refcount_exact", "kv_exclusive", "kv_exact", "longest_prefix_hit", "lru_eviction",
    "fcfs_admission", "running_first", "preempt_newest", "no_admission_after_preemption", "work_conserving",
    "metrics_consistent", "matches_reference",
)


# The registry's families, in the order they are layered (issue 21: a later one may read an artefact of an earlier one).
FAMILY_FIRST_ROWS = ("well_typed", "no_duplicate_active", "longest_prefix_hit", "metrics_consistent")


def first_broken(events):
    """The registry row that names a result breaking ``events``, root cause first (issue 21): of the first family
    that breaks (type, safety, policy, metrics), the row broken at the earliest tick (those seen only after the
    trace, tick None, last), registry order breaking ties; or None."""
    if not events:
        return None
    starts = [REGISTRY_ORDER.index(row) for row in FAMILY_FIRST_ROWS]

    def when(event):
        invariant, tick, _ = event
        index = REGISTRY_ORDER.index(invariant)
        family = sum(index >= start for start in starts)
        return (family, tick is None, tick or 0, index)

    return min(events, key=when)[0]


def _ceil(a, b):
    return -(-a // b)


class _Replay:
    """The state a trace implies under issue 20's rules: tables, counts, the free queue, the cache, block contents."""

    def __init__(self, requests, config):
        self.bs, self.nb = config["block_size"], config["num_blocks"]
        self.caching = config.get("prefix_caching", False)
        self.req = {r["id"]: r for r in requests}
        self.computed = {i: 0 for i in self.req}  # tokens held (hits included)
        self.generated = {i: 0 for i in self.req}
        self.table = {i: [] for i in self.req}
        self.chains = {i: [] for i in self.req}
        self.running, self.front = [], []
        self.pending = sorted(self.req, key=lambda i: fcfs(self.req[i]))
        self.count, self.content = {}, {}  # block -> holders; block -> [parent chain, slots]
        self.cache, self.chain_of, self.interned = {}, {}, {}
        self.fresh, self.tail = 0, {}  # free queue: ids fresh.. (never used), then tail (dict in queue order)
        self.events = []
        self.recomputed = self.aborted = self.hits = 0
        self.corners = {}  # what happened, by kind: how often (see CORNERS)
        self.preempted_once = set()

    def flag(self, invariant, tick, message):
        self.events.append((invariant, tick, message))

    def saw(self, corner):
        self.corners[corner] = self.corners.get(corner, 0) + 1

    def known(self, i):
        return self.req[i]["prompt"] + self.generated[i]

    def token(self, i, p):
        r = self.req[i]
        if p < r["prompt"]:
            return r["tokens"][p] if "tokens" in r else ("p", i, p)
        return ("g", i, p - r["prompt"])

    def chain(self, i, j):
        if j < 0:
            return None
        chains = self.chains[i]
        while len(chains) <= j:
            k = len(chains)
            key = (chains[-1] if k else None, tuple(self.token(i, p) for p in range(k * self.bs, (k + 1) * self.bs)))
            chains.append(self.interned.setdefault(key, len(self.interned)))
        return chains[j]

    def queue_len(self):
        return self.nb - self.fresh + len(self.tail)

    def head(self):
        if self.fresh < self.nb:
            return self.fresh
        return next(iter(self.tail), None)

    def release(self, i, listed, tick, why):
        table = self.table[i]
        for b in table:
            self.count[b] = self.count.get(b, 0) - 1
        zero = [b for b in table if self.count[b] == 0]
        if len(zero) < len(table) and why != "finished":
            self.saw(f"{why} with shared blocks")
        if len(set(table)) != len(table):
            self.flag("kv_exclusive", tick, f"request {i} held a block twice")
        listed = listed or []
        if len(set(listed)) != len(listed):
            self.flag("refcount_exact", tick, f"request {i} ({why}) freed a block twice in one list: {listed}")
        held = [b for b in listed if self.count.get(b, 0) != 0 or b not in table]
        if held:
            self.flag("refcount_exact", tick, f"request {i} ({why}) freed blocks {held} whose count is not 0")
        leaked = [b for b in zero if b not in listed]
        if leaked:
            self.flag("refcount_exact", tick, f"request {i} ({why}) left blocks {leaked} at count 0 unreturned")
        if not held and not leaked and listed != zero:
            self.flag("metrics_consistent", tick, f"request {i} ({why}) freed {listed}, not in table order {zero}")
        for b in reversed(zero):
            if b in self.tail or b >= self.fresh:
                self.flag("refcount_exact", tick, f"block {b} freed while it is free")
            self.tail[b] = None
        self.table[i] = []
        held_tokens = self.computed[i]
        self.computed[i] = 0
        return held_tokens

    def allocate(self, i, blocks, tick):
        for b in blocks:
            if not (type(b) is int and 0 <= b < self.nb):
                self.flag("kv_capacity", tick, f"request {i} took block {b!r}, not in 0..{self.nb - 1}")
                continue
            if self.count.get(b, 0) > 0:
                self.flag("refcount_exact", tick, f"request {i} took block {b}, held (count {self.count[b]})")
            elif self.caching and b != self.head():
                self.flag("lru_eviction", tick, f"request {i} took block {b}, the free queue's head is {self.head()}")
            if b in self.tail:
                del self.tail[b]
            elif b >= self.fresh:
                for k in range(self.fresh, b):
                    self.tail = {k: None, **self.tail}  # skipped never-used ids stay free, ahead of the tail
                self.fresh = b + 1
            if b in self.chain_of:
                self.saw("registered block evicted")
                chain = self.chain_of.pop(b)
                self.cache[chain].remove(b)
                if not self.cache[chain]:
                    del self.cache[chain]
            self.count[b] = self.count.get(b, 0) + 1
            self.table[i].append(b)

    def register(self, i, upto):
        if self.caching:
            for j in range(min(upto // self.bs, len(self.table[i]))):
                b = self.table[i][j]
                if b not in self.chain_of:
                    self.chain_of[b] = self.chain(i, j)
                    self.cache.setdefault(self.chain_of[b], []).append(b)
                    if len(self.cache[self.chain_of[b]]) > 1:
                        self.saw("two blocks of one chain")

    def lookup(self, i):
        hits = []
        if self.caching:
            while (len(hits) + 1) * self.bs <= self.known(i) - 1 and self.cache.get(self.chain(i, len(hits))):
                hits.append(self.cache[self.chain(i, len(hits))][0])
        return hits

    def write(self, i, n, tick):
        for p in range(self.computed[i], self.computed[i] + n):
            j = p // self.bs
            if j >= len(self.table[i]):
                self.flag("kv_exact", tick, f"request {i} computed position {p} with no block for it")
                continue
            slot = self.content.setdefault(self.table[i][j], [None, [None] * self.bs])
            if p % self.bs == 0:
                slot[0] = self.chain(i, j - 1)
            slot[1][p % self.bs] = self.token(i, p)

    def check_contents(self, i, tick):
        c = self.computed[i]
        for j in range(min(_ceil(c, self.bs), len(self.table[i]))):
            b = self.table[i][j]
            upto = min((j + 1) * self.bs, c) - j * self.bs
            want = [self.chain(i, j - 1), [self.token(i, p) for p in range(j * self.bs, j * self.bs + upto)]]
            got = self.content.get(b, [None, []])
            if got[0] != want[0] or got[1][:upto] != want[1]:
                self.flag("no_false_sharing", tick, f"request {i} holds block {b} at position {j}, whose KV was "
                          f"not computed for its chain")
                return

    def fits(self, i, budget, chunked, evictable_counted=True):
        hits = self.lookup(i)
        start = len(hits) * self.bs
        n = self.known(i) - start
        if chunked:
            n = min(n, budget)
        elif n > budget:
            return False
        new = _ceil(start + n, self.bs) - len(hits)
        evictable = sum(1 for b in hits if self.count.get(b, 0) == 0) if evictable_counted else 0
        return new + evictable <= self.queue_len()


CORNERS = ("hit", "hit on a free block", "hit on a held block", "hit after a preemption", "hit of a generated token",
           "registered block evicted", "two blocks of one chain", "aborted with shared blocks",
           "preempted with shared blocks", "cap kept a cached block", "hit block kept the head out")


def trace_events(result, requests, config):
    """Every problem of ``result`` under issue 20's rules, as (registry row, tick, message), in trace order."""
    return replay(result, requests, config).events


def trace_corners(result, requests, config):
    """How often each corner of CORNERS happened in ``result`` (a dict; corners that never happened are absent)."""
    return replay(result, requests, config).corners


def replay(result, requests, config):
    """The replay of ``result``: its ``events`` (problems) and ``corners`` (what happened)."""
    s = _Replay(requests, config)
    chunked, max_seqs, token_budget = config["chunked_prefill"], config["max_seqs"], config["token_budget"]
    scheduled_total = {i: 0 for i in s.req}
    hit_total = {i: 0 for i in s.req}
    done = set()
    for entry in result["trace"]:
        t = entry["tick"]
        freed = {}
        for i, blocks in entry["freed"]:
            if i in freed:
                s.flag("refcount_exact", t, f"request {i} has two freed lists in one tick")
            freed.setdefault(i, []).extend(blocks)
        allocated = {i: list(b) for i, b in entry["allocated"]}
        hits = {i: list(b) for i, b in entry.get("hits", [])}
        for i in entry["aborted"]:
            if i in s.running:
                s.running.remove(i)
                s.aborted += s.release(i, freed.pop(i, None), t, "aborted")
            else:
                for queue in (s.front, s.pending):
                    if i in queue:
                        queue.remove(i)
            done.add(i)
        before = list(s.running)
        passing = [(i, n) for i, n in entry["scheduled"] if i in before]
        admitted = [(i, n) for i, n in entry["scheduled"] if i not in before]
        victims = list(entry["preempted"])

        def preempt(v):
            s.preempted_once.add(v)
            if v in s.running:
                s.running.remove(v)
                s.recomputed += s.release(v, freed.pop(v, None), t, "preempted")
                s.front.insert(0, v)

        for i, n in passing:
            need = len(allocated.get(i, []))
            while victims and s.queue_len() < need:
                preempt(victims.pop(0))
            s.allocate(i, allocated.pop(i, []), t)
            s.register(i, s.computed[i] + n)
        for v in victims:
            preempt(v)
        budget = token_budget - sum(n for _, n in passing)
        for i, n in admitted:
            for queue in (s.front, s.pending):
                if i in queue:
                    queue.remove(i)
            want = s.lookup(i)
            got = hits.pop(i, [])
            if s.caching and len(want) * s.bs + s.bs <= s.known(i) and s.cache.get(s.chain(i, len(want))):
                s.saw("cap kept a cached block")
            for b in got:
                s.saw("hit")
                s.saw("hit on a held block" if s.count.get(b, 0) else "hit on a free block")
                if s.req[i]["prompt"] < (got.index(b) + 1) * s.bs:
                    s.saw("hit of a generated token")
            if got and i in s.preempted_once:
                s.saw("hit after a preemption")
            if got != want:
                s.flag("longest_prefix_hit", t, f"request {i} hit {got}, the rules give {want}")
            for b in got:
                if b not in s.chain_of:
                    s.flag("longest_prefix_hit", t, f"request {i} hit block {b}, which is not registered")
                if s.count.get(b, 0) == 0:
                    s.tail.pop(b, None)
                s.count[b] = s.count.get(b, 0) + 1
            s.table[i] = list(got)
            s.computed[i] = len(got) * s.bs
            s.hits += len(got) * s.bs
            hit_total[i] += len(got) * s.bs
            rule = s.known(i) - s.computed[i]
            if chunked:
                rule = min(rule, budget)
            if n != rule and n >= 1:
                s.flag("work_conserving", t, f"request {i} was admitted with {n} tokens, its rule gives {rule}")
            s.allocate(i, allocated.pop(i, []), t)
            s.register(i, s.computed[i] + n)
            s.running.append(i)
            budget -= n
        for i in allocated:
            s.flag("kv_exact", t, f"request {i} took blocks {allocated[i]} without being scheduled")
        if not entry["preempted"] and budget > 0 and len(s.running) < max_seqs:
            head = (s.front or s.pending or [None])[0]
            if head is not None and s.req[head]["arrival"] <= t and s.req[head].get("abort", t + 1) > t:
                if s.fits(head, budget, chunked):
                    s.flag("work_conserving", t, f"the waiting pass stopped while request {head} fit")
                elif s.fits(head, budget, chunked, evictable_counted=False):
                    s.saw("hit block kept the head out")
        if sum(n for _, n in entry["scheduled"]) > token_budget:
            s.flag("token_budget", t, "more tokens scheduled than token_budget")
        finishing = []
        for i, n in entry["scheduled"]:
            if n < 1:
                s.flag("nonnegative_remaining", t, f"request {i} was scheduled {n} tokens")
            s.write(i, n, t)
            s.computed[i] += n
            scheduled_total[i] += n
            if s.computed[i] > s.known(i):
                s.flag("nonnegative_remaining", t, f"request {i} computed past its known tokens")
            if s.computed[i] == s.known(i):
                s.generated[i] += 1
                if s.generated[i] == s.req[i]["output"]:
                    finishing.append(i)
        for i in s.running:
            s.check_contents(i, t)
            if len(s.table[i]) != _ceil(s.computed[i], s.bs):
                s.flag("kv_exact", t, f"request {i} holds {len(s.table[i])} blocks for {s.computed[i]} tokens")
        if sorted(finishing) != sorted(entry["finished"]):
            s.flag("every_job_completes_once", t, f"finished {entry['finished']}, the ledger gives {finishing}")
        for i in [i for i in s.running if i in finishing]:
            s.running.remove(i)
            s.release(i, freed.pop(i, None), t, "finished")
            done.add(i)
        for i in freed:
            s.flag("refcount_exact", t, f"request {i} freed {freed[i]} without leaving")
        for i in hits:
            s.flag("longest_prefix_hit", t, f"request {i} hit {hits[i]} without being admitted")
    rows = {r["id"]: r for r in result["requests"]}
    for i in s.req:
        if rows[i].get("cached", 0) != hit_total[i]:
            s.flag("metrics_consistent", None, f"request {i} reports cached={rows[i].get('cached')}, its hits "
                   f"hold {hit_total[i]} tokens")
        if rows[i]["computed"] != scheduled_total[i]:
            s.flag("metrics_consistent", None, f"request {i} reports computed={rows[i]['computed']}, "
                   f"scheduled {scheduled_total[i]}")
    useful = sum(r["prompt"] + r["output"] - 1 for r in requests if rows[r["id"]]["finish"] is not None)
    ledger = (result["computed_tokens"], result.get("cache_hit_tokens", 0), result["useful_tokens"],
              result["recomputed_tokens"], result["aborted_tokens"])
    if ledger != (sum(scheduled_total.values()), s.hits, useful, s.recomputed, s.aborted) \
            or ledger[0] + ledger[1] != ledger[2] + ledger[3] + ledger[4]:
        s.flag("work_conservation", None, f"computed, hits, useful, recomputed, aborted = {ledger}; the trace gives "
               f"{(sum(scheduled_total.values()), s.hits, useful, s.recomputed, s.aborted)}")
    return s
