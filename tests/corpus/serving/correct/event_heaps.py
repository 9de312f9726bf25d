"""Serving scheduler built for speed: heaps, deques, cursors and parallel arrays.

Request number p (its position in the input) lives in parallel arrays (RID[p],
ARR[p], PROMPT[p], CACHED[p], GEN[p], HELD[p], ...).  The waiting queue is two
pieces: a deque of preempted positions (appendleft, so the last one put back is the
head) and a cursor into the positions sorted once by (arrival, id); everything at
or after the cursor has never been admitted.  An aborted waiting request is not
searched for: its status changes and it is skipped when it reaches a head (lazy
deletion).  Aborts come off a min-heap keyed by (abort, arrival, id), so a tick
looks only at the aborts due; the running list is an OrderedDict in admission order
(popitem(last=True) is the newest-first victim, del removes a finished or aborted
one).  The KV pool is a min-heap of ids handed back plus a high-water mark (ids at
or above it were never used), so taking k blocks is k pops, lowest first, and a huge
num_blocks costs nothing.  Between ticks with nothing runnable the clock jumps
straight to the next waiting arrival, so huge arrivals and long idle gaps cost one
step.  Totals are accumulated as the ticks run.
"""

import heapq
from collections import OrderedDict, deque

_CONFIG = ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill")
_REQUIRED = ("id", "arrival", "prompt", "output")
_ALLOWED = frozenset(_REQUIRED + ("abort",))

WAITING, RUNNING, FINISHED, ABORTED = 0, 1, 2, 3


def _bad(text):
    raise ValueError(text)


def _positive(where, value):
    if type(value) is not int or value < 1:
        _bad("%s=%r: expected an int >= 1" % (where, value))


def serve(requests, config):
    # ---------------- validation: nothing else happens before it passes ----------------
    if not isinstance(config, dict):
        _bad("config=%r: expected a dict with keys %s" % (config, ", ".join(_CONFIG)))
    for key in _CONFIG:
        if key not in config:
            _bad("config: missing key %r" % (key,))
    for key in config:
        if key not in _CONFIG:
            _bad("config: unexpected key %r; a config has exactly %s" % (key, ", ".join(_CONFIG)))
    max_seqs, token_budget, block_size, num_blocks, chunked = (config[k] for k in _CONFIG)
    _positive("config.max_seqs", max_seqs)
    _positive("config.token_budget", token_budget)
    _positive("config.block_size", block_size)
    _positive("config.num_blocks", num_blocks)
    if type(chunked) is not bool:
        _bad("config.chunked_prefill=%r: expected a bool (True or False)" % (chunked,))
    if not isinstance(requests, (list, tuple)):
        _bad("requests=%r: expected a list or tuple of request dicts" % (requests,))

    RID, ARR, PROMPT, OUT, ABORT, KEYS = [], [], [], [], [], []
    first_use = {}
    for p, req in enumerate(requests):
        if not isinstance(req, dict):
            _bad("requests[%d]=%r: expected a dict with keys id, arrival, prompt, output[, abort]"
                 % (p, req))
        for key in _REQUIRED:
            if key not in req:
                _bad("requests[%d]: missing key %r" % (p, key))
        items = list(req.items())
        for key, _ in items:
            if key not in _ALLOWED:
                _bad("requests[%d]: unexpected key %r; a request has exactly id, arrival, prompt, "
                     "output and optionally abort" % (p, key))
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
        if rid in first_use:
            _bad("requests[%d].id=%r: ids must be unique (also requests[%d].id)"
                 % (p, rid, first_use[rid]))
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
        KEYS.append(items)

    # ---------------- state ----------------
    count = len(RID)
    STATUS = [WAITING] * count
    CACHED = [0] * count
    GEN = [0] * count
    HELD = [[] for _ in range(count)]
    START = [None] * count
    FIRST = [None] * count
    FIN = [None] * count
    ABT = [None] * count
    PRE = [0] * count
    COMP = [0] * count

    order = sorted(range(count), key=lambda q: (ARR[q], RID[q]))
    cursor = 0  # order[cursor:] were never admitted
    front = deque()  # preempted, head first
    n_waiting = count
    abort_heap = [(ABORT[q], ARR[q], RID[q], q) for q in range(count) if ABORT[q] is not None]
    heapq.heapify(abort_heap)
    running = OrderedDict()
    free_heap = []
    mark = 0  # ids >= mark were never handed out

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

    def take(k):
        nonlocal mark
        ids = []
        for _ in range(k):
            if free_heap:
                ids.append(heapq.heappop(free_heap))
            else:
                ids.append(mark)
                mark += 1
        return ids

    def give(ids):
        for b in ids:
            heapq.heappush(free_heap, b)

    trace = []
    computed_tokens = useful_tokens = recomputed_tokens = aborted_tokens = preemptions = 0
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
                if HELD[q]:
                    freed.append([RID[q], HELD[q]])
                    give(HELD[q])
                    HELD[q] = []
            h = head()
            if running or (h is not None and ARR[h] <= t):
                break
            if due:
                trace.append({"tick": t, "scheduled": [], "preempted": [],
                              "aborted": [RID[q] for q in due], "freed": freed,
                              "allocated": [], "finished": []})
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
        for q in list(running):
            if q not in running:  # taken as a victim for an earlier request
                break
            n = min(PROMPT[q] + GEN[q] - CACHED[q], budget)
            if n == 0:
                continue
            extra = (CACHED[q] + n + block_size - 1) // block_size - len(HELD[q])
            self_preempted = False
            while len(free_heap) + num_blocks - mark < extra:
                v, _ = running.popitem(last=True)
                STATUS[v] = WAITING
                n_waiting += 1
                front.appendleft(v)
                preempted.append(RID[v])
                PRE[v] += 1
                preemptions += 1
                recomputed_tokens += CACHED[v]
                CACHED[v] = 0
                if HELD[v]:
                    freed.append([RID[v], HELD[v]])
                    give(HELD[v])
                    HELD[v] = []
                if v == q:
                    self_preempted = True
                    break
            if self_preempted:
                break
            if extra:
                ids = take(extra)
                HELD[q] = HELD[q] + ids
                allocated.append([RID[q], ids])
            scheduled.append((q, n))
            budget -= n

        # step 5: waiting pass
        if not preempted:
            while budget > 0 and len(running) < max_seqs:
                h = head()
                if h is None or ARR[h] > t:
                    break
                n = PROMPT[h] + GEN[h]
                if chunked:
                    n = min(n, budget)
                elif n > budget:
                    break
                need = (n + block_size - 1) // block_size
                if len(free_heap) + num_blocks - mark < need:
                    break
                pop_head(h)
                n_waiting -= 1
                STATUS[h] = RUNNING
                running[h] = None
                ids = take(need)
                HELD[h] = ids
                allocated.append([RID[h], ids])
                if START[h] is None:
                    START[h] = t
                scheduled.append((h, n))
                budget -= n

        # step 6: compute
        finished = []
        release = []
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
                    del running[q]
                    finished.append(RID[q])
                    useful_tokens += PROMPT[q] + OUT[q] - 1
                    freed.append([RID[q], HELD[q]])
                    release.append(HELD[q])
                    HELD[q] = []
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
            })
        # step 1 of tick t + 1: the blocks of the requests finished in t are free
        for ids in release:
            give(ids)
        t += 1

    rows = []
    for q in sorted(range(count), key=lambda q: RID[q]):
        row = dict(KEYS[q])
        row.update(start=START[q], first_token=FIRST[q], finish=FIN[q], aborted=ABT[q],
                   generated=GEN[q], preemptions=PRE[q], computed=COMP[q])
        rows.append(row)
    return {
        "trace": trace,
        "requests": rows,
        "makespan_ticks": makespan,
        "computed_tokens": computed_tokens,
        "useful_tokens": useful_tokens,
        "recomputed_tokens": recomputed_tokens,
        "aborted_tokens": aborted_tokens,
        "token_utilization": computed_tokens / (token_budget * makespan) if makespan else 0.0,
        "preemptions": preemptions,
    }
