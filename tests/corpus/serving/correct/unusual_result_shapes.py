"""A correct serving scheduler whose result has every shape the contract allows but nobody expects.

The schedule is the contract's, computed by a generator that yields one trace entry
per tick in which something happened.  Its state is different from the other
correct schedulers': the whole waiting queue is one heap of priority keys, where a
preempted request gets (0, -k) for the k-th preemption of the run (the latest one
put back is the head) and a never-admitted one gets (1, arrival, id), so "preempted
at the front, then FIFO" is the heap order; aborted requests stay in the heap and are
dropped when they surface.  The KV pool is one int used as a bitmap of the blocks in
use: the lowest free id is the lowest zero bit, found with (~used & (used + 1)), and
free blocks are num_blocks minus the popcount, so a huge pool costs nothing.  The
result is then dressed unusually, which the contract permits: the result, every
trace entry and every request row are dict subclasses; the trace, the requests and
every list inside them are tuples; and there are extra keys whose values depend on
the policy: "policy": "fcfs", "batch_sizes" (requests scheduled per trace entry),
"admission_order" (ids in order of first admission), and per request "queue_delay"
(start - arrival, None if never started), all placed first; and every mapping lists its
keys in an order of its own (a trace entry from "finished" back to "tick", a request row
with its fields before the caller's keys, reversed), which the contract leaves open.
"""

import heapq

_CONFIG_KEYS = ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill")


class Result(dict):
    """The result mapping (a dict subclass)."""


class TraceEntry(dict):
    """One tick of the trace (a dict subclass)."""


class RequestRow(dict):
    """One request of the result (a dict subclass)."""


def _is_int(v):
    return type(v) is int


def _validated(requests, config):
    if not isinstance(config, dict):
        raise ValueError("config=%r: expected a dict with keys %s" % (config, ", ".join(_CONFIG_KEYS)))
    for k in _CONFIG_KEYS:
        if k not in config:
            raise ValueError("config: missing key %r" % k)
    for k in config:
        if k not in _CONFIG_KEYS:
            raise ValueError("config: unexpected key %r; a config has exactly %s" % (k, ", ".join(_CONFIG_KEYS)))
    cfg = tuple(config[k] for k in _CONFIG_KEYS)
    for k, v in zip(_CONFIG_KEYS[:4], cfg):
        if not _is_int(v) or v < 1:
            raise ValueError("config.%s=%r: expected an int >= 1" % (k, v))
    if type(cfg[4]) is not bool:
        raise ValueError("config.chunked_prefill=%r: expected a bool (True or False)" % (cfg[4],))
    max_seqs, token_budget, block_size, num_blocks, chunked = cfg
    if not isinstance(requests, (list, tuple)):
        raise ValueError("requests=%r: expected a list or tuple of request dicts" % (requests,))
    out = []
    where_id = {}
    for i, r in enumerate(requests):
        if not isinstance(r, dict):
            raise ValueError("requests[%d]=%r: expected a dict with keys id, arrival, prompt, output[, abort]" % (i, r))
        snapshot = tuple(r.items())
        keys = tuple(k for k, _ in snapshot)
        for k in ("id", "arrival", "prompt", "output"):
            if k not in keys:
                raise ValueError("requests[%d]: missing key %r" % (i, k))
        for k in keys:
            if k not in ("id", "arrival", "prompt", "output", "abort"):
                raise ValueError("requests[%d]: unexpected key %r; a request has exactly id, arrival, "
                                 "prompt, output and optionally abort" % (i, k))
        f = dict(snapshot)
        if not _is_int(f["id"]):
            raise ValueError("requests[%d].id=%r: expected an int" % (i, f["id"]))
        if not _is_int(f["arrival"]) or f["arrival"] < 0:
            raise ValueError("requests[%d].arrival=%r: expected an int >= 0" % (i, f["arrival"]))
        if not _is_int(f["prompt"]) or f["prompt"] < 1:
            raise ValueError("requests[%d].prompt=%r: expected an int >= 1" % (i, f["prompt"]))
        if not _is_int(f["output"]) or f["output"] < 1:
            raise ValueError("requests[%d].output=%r: expected an int >= 1" % (i, f["output"]))
        if "abort" in f and (not _is_int(f["abort"]) or f["abort"] < f["arrival"]):
            raise ValueError("requests[%d].abort=%r: expected an int >= arrival=%d" % (i, f["abort"], f["arrival"]))
        if f["id"] in where_id:
            raise ValueError("requests[%d].id=%r: ids must be unique (also requests[%d].id)"
                             % (i, f["id"], where_id[f["id"]]))
        where_id[f["id"]] = i
        total = f["prompt"] + f["output"] - 1
        k_blocks = -(-total // block_size)
        if k_blocks > num_blocks:
            raise ValueError("requests[%d]: prompt=%d + output=%d - 1 = %d tokens need %d blocks of block_size=%d, "
                             "more than num_blocks=%d"
                             % (i, f["prompt"], f["output"], total, k_blocks, block_size, num_blocks))
        if not chunked and total > token_budget:
            raise ValueError("requests[%d]: prompt=%d + output=%d - 1 = %d tokens exceed token_budget=%d, and without "
                             "chunked_prefill a request must be (re)computed in one tick"
                             % (i, f["prompt"], f["output"], total, token_budget))
        out.append((snapshot, f["id"], f["arrival"], f["prompt"], f["output"], f.get("abort")))
    return out, (max_seqs, token_budget, block_size, num_blocks, chunked)


class _Req:
    __slots__ = ("snapshot", "id", "arrival", "prompt", "output", "abort", "where", "cached", "gen",
                 "blocks", "start", "first", "finish", "aborted", "pre", "computed")

    def __init__(self, snapshot, rid, arrival, prompt, output, abort):
        self.snapshot, self.id, self.arrival = snapshot, rid, arrival
        self.prompt, self.output, self.abort = prompt, output, abort
        self.where = "queue"  # queue, run, done
        self.cached = self.gen = self.pre = self.computed = 0
        self.blocks = []
        self.start = self.first = self.finish = self.aborted = None


def _ticks(reqs, max_seqs, token_budget, block_size, num_blocks, chunked, ledger):
    """Yield (tick, scheduled, preempted, aborted, freed, allocated, finished) for every tick that has an entry."""
    queue = [((1, r.arrival, r.id), r) for r in reqs]  # ids are unique, so r is never compared
    heapq.heapify(queue)
    running = []
    used = 0  # bit b set: block b is held
    preempt_serial = 0

    def grab(k):
        nonlocal used
        ids = []
        for _ in range(k):
            low = (~used & (used + 1)).bit_length() - 1
            used |= 1 << low
            ids.append(low)
        return ids

    def drop(ids):
        nonlocal used
        for b in ids:
            used &= ~(1 << b)

    def n_free():
        return num_blocks - used.bit_count()

    def head():
        while queue and queue[0][1].where != "queue":
            heapq.heappop(queue)
        return queue[0][1] if queue else None

    t = 0
    while True:
        freed = []
        gone = sorted((r for r in reqs if r.where in ("queue", "run") and r.abort is not None and r.abort <= t),
                      key=lambda r: (r.arrival, r.id))
        for r in gone:
            if r.where == "run":
                running.remove(r)
            r.where = "done"
            r.aborted = t
            ledger["aborted"] += r.cached
            r.cached = 0
            if r.blocks:
                freed.append((r.id, tuple(r.blocks)))
                drop(r.blocks)
                r.blocks = []
        h = head()
        if not running and (h is None or h.arrival > t):
            if gone:
                yield t, (), (), tuple(r.id for r in gone), tuple(freed), (), ()
            if h is None:
                return
            t = h.arrival
            continue

        left = token_budget
        batch, allocated, preempted = [], [], []
        for r in list(running):
            if r.where != "run":
                break
            n = min(r.prompt + r.gen - r.cached, left)
            if not n:
                continue
            extra = -(-(r.cached + n) // block_size) - len(r.blocks)
            while n_free() < extra:
                v = running.pop()
                v.where = "queue"
                preempt_serial += 1
                heapq.heappush(queue, ((0, -preempt_serial), v))
                v.pre += 1
                ledger["recomputed"] += v.cached
                v.cached = 0
                preempted.append(v.id)
                if v.blocks:
                    freed.append((v.id, tuple(v.blocks)))
                    drop(v.blocks)
                    v.blocks = []
                if v is r:
                    break
            if r.where != "run":
                break
            got = grab(extra)
            r.blocks += got
            if got:
                allocated.append((r.id, tuple(got)))
            batch.append((r, n))
            left -= n

        while not preempted and left > 0 and len(running) < max_seqs:
            h = head()
            if h is None or h.arrival > t:
                break
            n = h.prompt + h.gen
            if n > left:
                if not chunked:
                    break
                n = left
            k = -(-n // block_size)
            if n_free() < k:
                break
            heapq.heappop(queue)
            h.where = "run"
            running.append(h)
            h.blocks = grab(k)
            allocated.append((h.id, tuple(h.blocks)))
            if h.start is None:
                h.start = t
                ledger["admission_order"].append(h.id)
            batch.append((h, n))
            left -= n

        finished = []
        late = []
        for r, n in batch:
            r.cached += n
            r.computed += n
            if r.cached == r.prompt + r.gen:
                r.gen += 1
                if r.first is None:
                    r.first = t + 1
                if r.gen == r.output:
                    r.finish = t + 1
                    r.where = "done"
                    running.remove(r)
                    finished.append(r.id)
                    freed.append((r.id, tuple(r.blocks)))
                    late.append(r.blocks)
                    r.blocks = []
        yield (t, tuple((r.id, n) for r, n in batch), tuple(preempted), tuple(r.id for r in gone),
               tuple(freed), tuple(allocated), tuple(finished))
        for ids in late:
            drop(ids)
        t += 1


def serve(requests, config):
    parsed, (max_seqs, token_budget, block_size, num_blocks, chunked) = _validated(requests, config)
    reqs = [_Req(*p) for p in parsed]
    ledger = {"aborted": 0, "recomputed": 0, "admission_order": []}
    trace = []
    for tick, scheduled, preempted, aborted, freed, allocated, finished in _ticks(
            reqs, max_seqs, token_budget, block_size, num_blocks, chunked, ledger):
        trace.append(TraceEntry(finished=finished, allocated=allocated, freed=freed, aborted=aborted,
                                preempted=preempted, scheduled=scheduled, tick=tick))
    work = [e for e in trace if e["scheduled"]]
    makespan = work[-1]["tick"] + 1 if work else 0
    computed = sum(n for e in work for _, n in e["scheduled"])
    rows = []
    for r in sorted(reqs, key=lambda r: r.id):
        row = RequestRow(queue_delay=None if r.start is None else r.start - r.arrival, computed=r.computed,
                         preemptions=r.pre, generated=r.gen, aborted=r.aborted, finish=r.finish,
                         first_token=r.first, start=r.start)
        row.update(reversed(r.snapshot))
        rows.append(row)
    return Result(
        policy="fcfs",
        batch_sizes=tuple(len(e["scheduled"]) for e in trace),
        admission_order=tuple(ledger["admission_order"]),
        trace=tuple(trace),
        requests=tuple(rows),
        makespan_ticks=makespan,
        computed_tokens=computed,
        useful_tokens=sum(r.prompt + r.output - 1 for r in reqs if r.finish is not None),
        recomputed_tokens=ledger["recomputed"],
        aborted_tokens=ledger["aborted"],
        token_utilization=computed / (token_budget * makespan) if makespan else 0.0,
        preemptions=sum(r.pre for r in reqs),
    )
