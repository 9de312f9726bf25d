"""Serving scheduler with prefix caching built for speed: heaps, cursors, an ordered free queue and parallel arrays.

Written from the contract of issue 20 alone.  Request number p (its position in the
input) lives in parallel arrays (RID[p], ARR[p], PROMPT[p], CACHED[p], GEN[p],
TABLE[p], ...).  The waiting queue is a deque of preempted positions (appendleft) in
front of a cursor into the positions sorted once by (arrival, id); aborts come off a
min-heap keyed by (abort, arrival, id) and an aborted waiting request is skipped when
it reaches a head (lazy deletion); the running list is an OrderedDict in admission
order.  The free queue with caching on is the never-used ids (those at or above the
mark `fresh`, in id order) followed by an OrderedDict of freed ids in queue order, so
taking the head, appending a release and pulling a hit out of the middle are O(1);
with caching off it is a min-heap of freed ids plus the mark (lowest ids first).
REF[b] is the reference count of block b, OWNER_CHAIN[b] the chain it is registered
under, CACHE[chain] a deque of the blocks registered under it (oldest first).  A
chain is named without hashing a whole prefix: a block that holds only prompt tokens
given by `tokens` is named by the interned pair (name of the block before, its
tokens); any other block holds a token private to its request (a prompt token of a
request without `tokens`, or a generated token), and so does every later block, so
it is named ("own", id, j).  Registration walks a per-request cursor of blocks
already registered, and the lookup walks the chains from block 0 while they are
cached and end at or before known - 1.  Between ticks with nothing runnable the
clock jumps to the next waiting arrival; totals are accumulated as the ticks run.
"""

DOMAIN = {"prefix_caching": [False, True]}  # prefix caching supported: the search draws it (proofs/models/declared.py)

import heapq
from collections import OrderedDict, deque

_CONFIG = ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill")
_REQUIRED = ("id", "arrival", "prompt", "output")
_ALLOWED = frozenset(_REQUIRED + ("abort", "tokens"))

WAITING, RUNNING, FINISHED, ABORTED = 0, 1, 2, 3


def _bad(text):
    raise ValueError(text)


def _positive(where, value):
    if type(value) is not int or value < 1:
        _bad("%s=%r: expected an int >= 1" % (where, value))


def serve(requests, config):
    # ---------------- validation: nothing else happens before it passes ----------------
    if not isinstance(config, dict):
        _bad("config=%r: expected a dict with keys %s[, prefix_caching]" % (config, ", ".join(_CONFIG)))
    for key in _CONFIG:
        if key not in config:
            _bad("config: missing key %r" % (key,))
    for key in config:
        if key not in _CONFIG and key != "prefix_caching":
            _bad("config: unexpected key %r; a config has exactly %s and optionally prefix_caching"
                 % (key, ", ".join(_CONFIG)))
    max_seqs, token_budget, block_size, num_blocks, chunked = (config[k] for k in _CONFIG)
    caching = config.get("prefix_caching", False)
    _positive("config.max_seqs", max_seqs)
    _positive("config.token_budget", token_budget)
    _positive("config.block_size", block_size)
    _positive("config.num_blocks", num_blocks)
    if type(chunked) is not bool:
        _bad("config.chunked_prefill=%r: expected a bool (True or False)" % (chunked,))
    if type(caching) is not bool:
        _bad("config.prefix_caching=%r: expected a bool (True or False)" % (caching,))
    if not isinstance(requests, (list, tuple)):
        _bad("requests=%r: expected a list or tuple of request dicts" % (requests,))

    RID, ARR, PROMPT, OUT, ABORT, KEYS, TOKENS = [], [], [], [], [], [], []
    first_use = {}
    for p, req in enumerate(requests):
        if not isinstance(req, dict):
            _bad("requests[%d]=%r: expected a dict with keys id, arrival, prompt, output[, abort][, tokens]"
                 % (p, req))
        for key in _REQUIRED:
            if key not in req:
                _bad("requests[%d]: missing key %r" % (p, key))
        items = list(req.items())
        for key, _ in items:
            if key not in _ALLOWED:
                _bad("requests[%d]: unexpected key %r; a request has exactly id, arrival, prompt, output and "
                     "optionally abort and tokens" % (p, key))
        got = dict(items)
        rid, arrival, prompt, output = got["id"], got["arrival"], got["prompt"], got["output"]
        if type(rid) is not int:
            _bad("requests[%d].id=%r: expected an int" % (p, rid))
        if type(arrival) is not int or arrival < 0:
            _bad("requests[%d].arrival=%r: expected an int >= 0" % (p, arrival))
        _positive("requests[%d].prompt" % p, prompt)
        _positive("requests[%d].output" % p, output)
        abort = got.get("abort")
        if "abort" in got and (type(abort) is not int or abort < arrival):
            _bad("requests[%d].abort=%r: expected an int >= arrival=%d" % (p, abort, arrival))
        tokens = got.get("tokens")
        if "tokens" in got:
            if not isinstance(tokens, (list, tuple)) or len(tokens) != prompt:
                _bad("requests[%d].tokens=%r: expected a list or tuple of exactly prompt=%d ints"
                     % (p, tokens, prompt))
            for k, tok in enumerate(tokens):
                if type(tok) is not int:
                    _bad("requests[%d].tokens[%d]=%r: expected an int (not a bool)" % (p, k, tok))
        if rid in first_use:
            _bad("requests[%d].id=%r: ids must be unique (also requests[%d].id)" % (p, rid, first_use[rid]))
        first_use[rid] = p
        peak = prompt + output - 1
        blocks_needed = (peak + block_size - 1) // block_size
        if blocks_needed > num_blocks:
            _bad("requests[%d]: prompt=%d + output=%d - 1 = %d tokens need %d blocks of "
                 "block_size=%d, more than num_blocks=%d"
                 % (p, prompt, output, peak, blocks_needed, block_size, num_blocks))
        if not chunked and peak > token_budget:
            _bad("requests[%d]: prompt=%d + output=%d - 1 = %d tokens exceed token_budget=%d, "
                 "and without chunked_prefill a request must be (re)computed in one tick"
                 % (p, prompt, output, peak, token_budget))
        RID.append(rid)
        ARR.append(arrival)
        PROMPT.append(prompt)
        OUT.append(output)
        ABORT.append(abort)
        TOKENS.append(None if tokens is None else tuple(tokens))
        KEYS.append([(k, (list(v) if isinstance(v, list) else tuple(v)) if k == "tokens" else v)
                     for k, v in items])

    # ---------------- state ----------------
    count = len(RID)
    STATUS = [WAITING] * count
    CACHED = [0] * count  # tokens whose KV the request holds now (hits included)
    GEN = [0] * count
    TABLE = [[] for _ in range(count)]
    NAMES = [[] for _ in range(count)]  # chain names of blocks 0.., filled lazily
    START = [None] * count
    FIRST = [None] * count
    FIN = [None] * count
    ABT = [None] * count
    PRE = [0] * count
    COMP = [0] * count
    HIT = [0] * count  # tokens taken from hits, over all admissions

    order = sorted(range(count), key=lambda q: (ARR[q], RID[q]))
    cursor = 0
    front = deque()
    n_waiting = count
    abort_heap = [(ABORT[q], ARR[q], RID[q], q) for q in range(count) if ABORT[q] is not None]
    heapq.heapify(abort_heap)
    running = OrderedDict()
    free_heap = []  # caching off: freed ids, lowest first
    freed_queue = OrderedDict()  # caching on: freed ids in free-queue order, after the never-used ones
    fresh = 0  # ids >= fresh were never handed out
    REF = {}
    OWNER_CHAIN = {}
    CACHE = {}
    interned = {}

    def head():
        nonlocal cursor
        while front and STATUS[front[0]] != WAITING:
            front.popleft()
        if front:
            return front[0]
        while cursor < count and STATUS[order[cursor]] != WAITING:
            cursor += 1
        return order[cursor] if cursor < count else None

    def pop_head(q):
        nonlocal cursor
        if front and front[0] == q:
            front.popleft()
        else:
            cursor += 1

    def n_free():
        return num_blocks - fresh + (len(freed_queue) if caching else len(free_heap))

    def name(q, j):
        names = NAMES[q]
        while len(names) <= j:
            k = len(names)
            end = (k + 1) * block_size
            if TOKENS[q] is not None and end <= PROMPT[q] and (k == 0 or names[-1][0] != "own"):
                key = (names[-1] if k else None, TOKENS[q][k * block_size:end])
                names.append(interned.setdefault(key, ("chain", len(interned))))
            else:
                names.append(("own", RID[q], k))
        return names[j]

    def take(q, k):
        nonlocal fresh
        ids = []
        for _ in range(k):
            if caching:
                if fresh < num_blocks:
                    b = fresh
                    fresh += 1
                else:
                    b, _ = freed_queue.popitem(last=False)
                    c = OWNER_CHAIN.pop(b, None)
                    if c is not None:  # eviction: only this block leaves its chain
                        CACHE[c].remove(b)
                        if not CACHE[c]:
                            del CACHE[c]
            elif free_heap:
                b = heapq.heappop(free_heap)
            else:
                b = fresh
                fresh += 1
            REF[b] = 1
            ids.append(b)
        TABLE[q].extend(ids)
        return ids

    def drop(q, freed):
        table = TABLE[q]
        TABLE[q] = []
        zero = []
        for b in table:
            REF[b] -= 1
            if REF[b] == 0:
                zero.append(b)
        if zero:
            freed.append([RID[q], zero])
            for b in reversed(zero):
                if caching:
                    freed_queue[b] = None
                else:
                    heapq.heappush(free_heap, b)

    def register(q, upto):
        if caching:
            for j in range(upto // block_size):
                b = TABLE[q][j]
                if b not in OWNER_CHAIN:
                    c = name(q, j)
                    OWNER_CHAIN[b] = c
                    CACHE.setdefault(c, deque()).append(b)

    def hits_of(h):
        if not caching:
            return []
        limit = (PROMPT[h] + GEN[h] - 1) // block_size
        out = []
        for j in range(limit):
            blocks = CACHE.get(name(h, j))
            if not blocks:
                break
            out.append(blocks[0])
        return out

    trace = []
    computed_tokens = useful_tokens = recomputed_tokens = aborted_tokens = hit_tokens = preemptions = 0
    makespan = 0
    t = 0
    while True:
        # steps 2 and 3 (step 1 happened at the end of the previous tick)
        while True:
            due = []
            while abort_heap and abort_heap[0][0] <= t:
                q = heapq.heappop(abort_heap)[3]
                if STATUS[q] in (WAITING, RUNNING):
                    due.append(q)
            due.sort(key=lambda q: (ARR[q], RID[q]))
            freed = []
            for q in due:
                if STATUS[q] == RUNNING:
                    del running[q]
                else:
                    n_waiting -= 1
                STATUS[q] = ABORTED
                ABT[q] = t
                aborted_tokens += CACHED[q]
                CACHED[q] = 0
                drop(q, freed)
            h = head()
            if running or (h is not None and ARR[h] <= t):
                break
            if due:
                trace.append({"tick": t, "scheduled": [], "preempted": [], "aborted": [RID[q] for q in due],
                              "freed": freed, "allocated": [], "finished": [], "hits": []})
            if h is None:
                break
            t = ARR[h]
        if not running and n_waiting == 0:
            break

        # step 4: running pass
        budget = token_budget
        scheduled = []
        allocated = []
        preempted = []
        hit_lists = []
        for q in list(running):
            if q not in running:  # taken as a victim for an earlier request
                break
            n = min(PROMPT[q] + GEN[q] - CACHED[q], budget)
            if n == 0:
                continue
            extra = (CACHED[q] + n + block_size - 1) // block_size - len(TABLE[q])
            self_preempted = False
            while n_free() < extra:
                v, _ = running.popitem(last=True)
                STATUS[v] = WAITING
                n_waiting += 1
                front.appendleft(v)
                preempted.append(RID[v])
                PRE[v] += 1
                preemptions += 1
                recomputed_tokens += CACHED[v]
                CACHED[v] = 0
                drop(v, freed)
                if v == q:
                    self_preempted = True
                    break
            if self_preempted:
                break
            if extra:
                allocated.append([RID[q], take(q, extra)])
            register(q, CACHED[q] + n)
            scheduled.append((q, n))
            budget -= n

        # step 5: waiting pass
        if not preempted:
            while budget > 0 and len(running) < max_seqs:
                h = head()
                if h is None or ARR[h] > t:
                    break
                hits = hits_of(h)
                base = len(hits) * block_size
                n = PROMPT[h] + GEN[h] - base
                if chunked:
                    n = min(n, budget)
                elif n > budget:
                    break
                need = (base + n + block_size - 1) // block_size - len(hits)
                revived = [b for b in hits if REF.get(b, 0) == 0]
                if n_free() < need + len(revived):
                    break
                pop_head(h)
                n_waiting -= 1
                STATUS[h] = RUNNING
                running[h] = None
                for b in revived:
                    del freed_queue[b]
                for b in hits:
                    REF[b] = REF.get(b, 0) + 1
                TABLE[h] = list(hits)
                if hits:
                    hit_lists.append([RID[h], list(hits)])
                allocated.append([RID[h], take(h, need)])
                CACHED[h] = base
                HIT[h] += base
                hit_tokens += base
                register(h, base + n)
                if START[h] is None:
                    START[h] = t
                scheduled.append((h, n))
                budget -= n

        # step 6: compute
        finished = []
        for q, n in scheduled:
            CACHED[q] += n
            COMP[q] += n
            computed_tokens += n
            if CACHED[q] == PROMPT[q] + GEN[q]:
                GEN[q] += 1
                if FIRST[q] is None:
                    FIRST[q] = t + 1
                if GEN[q] == OUT[q]:
                    FIN[q] = t + 1
                    STATUS[q] = FINISHED
                    finished.append(RID[q])
                    useful_tokens += PROMPT[q] + OUT[q] - 1
        for q in [q for q in running if STATUS[q] == FINISHED]:  # in running order
            del running[q]
            drop(q, freed)
        if scheduled:
            makespan = t + 1
        if scheduled or due:
            trace.append({
                "tick": t,
                "scheduled": [[RID[q], n] for q, n in scheduled],
                "preempted": preempted,
                "aborted": [RID[q] for q in due],
                "freed": [[rid, list(ids)] for rid, ids in freed],
                "allocated": allocated,
                "finished": finished,
                "hits": hit_lists,
            })
        t += 1

    rows = []
    for q in sorted(range(count), key=lambda q: RID[q]):
        row = dict(KEYS[q])
        row.update(start=START[q], first_token=FIRST[q], finish=FIN[q], aborted=ABT[q], generated=GEN[q],
                   preemptions=PRE[q], computed=COMP[q], cached=HIT[q])
        rows.append(row)
    return {
        "trace": trace,
        "requests": rows,
        "makespan_ticks": makespan,
        "computed_tokens": computed_tokens,
        "useful_tokens": useful_tokens,
        "recomputed_tokens": recomputed_tokens,
        "aborted_tokens": aborted_tokens,
        "cache_hit_tokens": hit_tokens,
        "token_utilization": computed_tokens / (token_budget * makespan) if makespan else 0.0,
        "preemptions": preemptions,
    }
