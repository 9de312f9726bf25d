"""Online serving engine in the shape of Orca's and vLLM's schedulers, wrapped by `serve`.

An `Engine` owns a `BlockAllocator` and the queues, and is driven from outside:
`add_request(request)` queues a request whose arrival is not before the engine's
clock, `abort(request_id)` cancels a waiting or running one at the next tick that
runs, and `step()` runs one iteration and returns its trace entry (None when nothing
is left).  `step()` takes no clock: the engine numbers its ticks itself and, when
nothing can run, jumps to the next arrival, as the contract's step 3 says.  Each
request is a `Sequence` object with a `Phase` enum (WAITING, PREEMPTED, RUNNING,
FINISHED, ABORTED), a block table (a list of block ids in the order taken) and its
counters; the waiting queue is two lists, `swapped` (preempted sequences, head
first) in front of `pending` (never admitted, kept sorted by (arrival, id) with
bisect, so requests may be added in any order).  The allocator keeps the handed-back
ids in a sorted list (bisect.insort) and a high-water mark for the never-used ones.
`serve(requests, config)` validates everything, adds every request at clock 0 and
steps until the engine is idle; `make(config)` returns a fresh engine.
"""

import bisect
import enum

__all__ = ["serve", "make", "Engine", "Sequence", "Phase", "BlockAllocator"]

CONFIG_FIELDS = ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill")
REQUEST_FIELDS = ("id", "arrival", "prompt", "output")


class Phase(enum.Enum):
    """Where a sequence is in its life."""

    WAITING = "waiting"  # never admitted
    PREEMPTED = "preempted"  # admitted once, put back, waits for recompute
    RUNNING = "running"
    FINISHED = "finished"
    ABORTED = "aborted"


class BlockAllocator:
    """A pool of KV blocks that always hands out the lowest free ids first."""

    def __init__(self, num_blocks):
        self.num_blocks = num_blocks
        self._returned = []  # sorted ids that were handed back
        self._fresh = 0  # ids >= _fresh were never handed out

    @property
    def num_free(self):
        return len(self._returned) + self.num_blocks - self._fresh

    def allocate(self, k):
        assert k <= self.num_free, "allocate(%d) with %d free" % (k, self.num_free)
        reuse = min(k, len(self._returned))
        ids = self._returned[:reuse]
        del self._returned[:reuse]
        ids.extend(range(self._fresh, self._fresh + (k - reuse)))
        self._fresh += k - reuse
        return ids

    def free(self, ids):
        for b in ids:
            bisect.insort(self._returned, b)


class Sequence:
    """One request's progress: its phase, block table and counters."""

    __slots__ = ("caller_items", "req_id", "arrival", "prompt", "output", "abort_at", "phase",
                 "num_computed", "num_generated", "block_table", "start", "first_token",
                 "finish", "aborted_at", "num_preemptions", "total_computed")

    def __init__(self, caller_items, req_id, arrival, prompt, output, abort_at):
        self.caller_items = caller_items
        self.req_id = req_id
        self.arrival = arrival
        self.prompt = prompt
        self.output = output
        self.abort_at = abort_at
        self.phase = Phase.WAITING
        self.num_computed = 0  # tokens whose KV is cached now
        self.num_generated = 0
        self.block_table = []
        self.start = None
        self.first_token = None
        self.finish = None
        self.aborted_at = None
        self.num_preemptions = 0
        self.total_computed = 0  # every token computed for it, recompute included

    @property
    def fifo_key(self):
        return (self.arrival, self.req_id)

    @property
    def known(self):
        return self.prompt + self.num_generated

    @property
    def done(self):
        return self.phase in (Phase.FINISHED, Phase.ABORTED)


def _need_blocks(tokens, block_size):
    q, r = divmod(tokens, block_size)
    return q + (1 if r else 0)


def _parse_config(config):
    if not isinstance(config, dict):
        raise ValueError("config=%r: expected a dict with keys %s" % (config, ", ".join(CONFIG_FIELDS)))
    missing = [f for f in CONFIG_FIELDS if f not in config]
    if missing:
        raise ValueError("config: missing key %r" % (missing[0],))
    unexpected = [k for k in config if k not in CONFIG_FIELDS]
    if unexpected:
        raise ValueError("config: unexpected key %r; a config has exactly %s"
                         % (unexpected[0], ", ".join(CONFIG_FIELDS)))
    parsed = {f: config[f] for f in CONFIG_FIELDS}
    for f in CONFIG_FIELDS[:-1]:
        value = parsed[f]
        if not (type(value) is int and value >= 1):
            raise ValueError("config.%s=%r: expected an int >= 1" % (f, value))
    if type(parsed["chunked_prefill"]) is not bool:
        raise ValueError("config.chunked_prefill=%r: expected a bool (True or False)"
                         % (parsed["chunked_prefill"],))
    return parsed


def _parse_request(i, request, cfg, seen):
    """Check request number i against the rules and return its Sequence; seen maps id -> index."""
    where = "requests[%d]" % i
    if not isinstance(request, dict):
        raise ValueError("%s=%r: expected a dict with keys id, arrival, prompt, output[, abort]"
                         % (where, request))
    missing = [f for f in REQUEST_FIELDS if f not in request]
    if missing:
        raise ValueError("%s: missing key %r" % (where, missing[0]))
    items = tuple(request.items())
    unexpected = [k for k, _ in items if k not in REQUEST_FIELDS and k != "abort"]
    if unexpected:
        raise ValueError("%s: unexpected key %r; a request has exactly id, arrival, prompt, output "
                         "and optionally abort" % (where, unexpected[0]))
    value = dict(items)
    if type(value["id"]) is not int:
        raise ValueError("%s.id=%r: expected an int" % (where, value["id"]))
    if not (type(value["arrival"]) is int and value["arrival"] >= 0):
        raise ValueError("%s.arrival=%r: expected an int >= 0" % (where, value["arrival"]))
    for f in ("prompt", "output"):
        if not (type(value[f]) is int and value[f] >= 1):
            raise ValueError("%s.%s=%r: expected an int >= 1" % (where, f, value[f]))
    abort_at = None
    if "abort" in value:
        abort_at = value["abort"]
        if not (type(abort_at) is int and abort_at >= value["arrival"]):
            raise ValueError("%s.abort=%r: expected an int >= arrival=%d"
                             % (where, abort_at, value["arrival"]))
    if value["id"] in seen:
        raise ValueError("%s.id=%r: ids must be unique (also requests[%d].id)"
                         % (where, value["id"], seen[value["id"]]))
    prompt, output = value["prompt"], value["output"]
    tokens = prompt + output - 1
    blocks = _need_blocks(tokens, cfg["block_size"])
    if blocks > cfg["num_blocks"]:
        raise ValueError("%s: prompt=%d + output=%d - 1 = %d tokens need %d blocks of block_size=%d, "
                         "more than num_blocks=%d"
                         % (where, prompt, output, tokens, blocks, cfg["block_size"], cfg["num_blocks"]))
    if not cfg["chunked_prefill"] and tokens > cfg["token_budget"]:
        raise ValueError("%s: prompt=%d + output=%d - 1 = %d tokens exceed token_budget=%d, and "
                         "without chunked_prefill a request must be (re)computed in one tick"
                         % (where, prompt, output, tokens, cfg["token_budget"]))
    return Sequence(items, value["id"], value["arrival"], prompt, output, abort_at)


class Engine:
    """An iteration-level scheduler with a token budget, a KV pool, preemption and aborts."""

    def __init__(self, config):
        self.config = _parse_config(config)
        self.allocator = BlockAllocator(self.config["num_blocks"])
        self.clock = 0  # the next tick that may run
        self.sequences = {}  # id -> Sequence, every request ever added
        self._index = {}  # id -> the order in which it was added
        self.swapped = []  # preempted, head first
        self.pending = []  # never admitted, sorted by (arrival, id)
        self.running = []  # admission order
        self.trace = []
        self.recomputed_tokens = 0
        self.aborted_tokens = 0

    # ---- the client side ----

    def add_request(self, request):
        """Queue one request; its arrival must not be before the clock."""
        seq = _parse_request(len(self._index), request, self.config, self._index)
        if seq.arrival < self.clock:
            raise ValueError("requests[%d].arrival=%r: expected an int >= clock=%d"
                             % (len(self._index), seq.arrival, self.clock))
        self._enqueue(seq)

    def _enqueue(self, seq):
        self._index[seq.req_id] = len(self._index)
        self.sequences[seq.req_id] = seq
        bisect.insort(self.pending, seq, key=lambda s: s.fifo_key)

    def abort(self, request_id):
        """Cancel a waiting or running request at the next tick that runs."""
        seq = self.sequences.get(request_id) if type(request_id) is int else None
        if seq is None or seq.done:
            raise ValueError("request_id=%r: expected the id of a waiting or running request"
                             % (request_id,))
        when = max(self.clock, seq.arrival)
        if seq.abort_at is None or when < seq.abort_at:
            seq.abort_at = when

    @property
    def idle(self):
        return not (self.swapped or self.pending or self.running)

    def view(self):
        return {
            "clock": self.clock,
            "waiting": [s.req_id for s in self.swapped + self.pending],
            "running": [s.req_id for s in self.running],
            "blocks": {s.req_id: list(s.block_table) for s in self.running},
        }

    # ---- one iteration ----

    def _head(self):
        if self.swapped:
            return self.swapped[0]
        return self.pending[0] if self.pending else None

    def _release(self, seq):
        ids = seq.block_table
        seq.block_table = []
        self.allocator.free(ids)
        return ids

    def _apply_aborts(self, t, freed):
        due = [s for s in self.swapped + self.pending + self.running
               if s.abort_at is not None and s.abort_at <= t]
        due.sort(key=lambda s: s.fifo_key)
        for seq in due:
            for queue in (self.swapped, self.pending, self.running):
                if seq in queue:
                    queue.remove(seq)
            if seq.block_table:
                freed.append([seq.req_id, self._release(seq)])
            self.aborted_tokens += seq.num_computed
            seq.num_computed = 0
            seq.aborted_at = t
            seq.phase = Phase.ABORTED
        return [s.req_id for s in due]

    def _preempt_newest(self, freed, preempted):
        victim = self.running.pop()
        if victim.block_table:
            freed.append([victim.req_id, self._release(victim)])
        self.recomputed_tokens += victim.num_computed
        victim.num_computed = 0
        victim.num_preemptions += 1
        victim.phase = Phase.PREEMPTED
        self.swapped.insert(0, victim)
        preempted.append(victim.req_id)
        return victim

    def step(self):
        """Run the next tick and return its trace entry, or None when nothing is left."""
        cfg = self.config
        t = self.clock
        while True:
            freed = []
            aborted = self._apply_aborts(t, freed)
            head = self._head()
            if self.running or (head is not None and head.arrival <= t):
                break
            if aborted:
                entry = {"tick": t, "scheduled": [], "preempted": [], "aborted": aborted,
                         "freed": freed, "allocated": [], "finished": []}
                self.trace.append(entry)
                self.clock = t + 1
                return _copy_entry(entry)
            if head is None:
                return None
            t = head.arrival

        budget = cfg["token_budget"]
        bs = cfg["block_size"]
        batch = []  # (seq, n)
        allocated = []
        preempted = []

        # running sequences first, in admission order
        idx = 0
        while idx < len(self.running):
            seq = self.running[idx]
            n = min(seq.known - seq.num_computed, budget)
            if n > 0:
                extra = _need_blocks(seq.num_computed + n, bs) - len(seq.block_table)
                victim = None
                while self.allocator.num_free < extra and victim is not seq:
                    victim = self._preempt_newest(freed, preempted)
                if victim is seq:
                    break
                if extra:
                    ids = self.allocator.allocate(extra)
                    seq.block_table.extend(ids)
                    allocated.append([seq.req_id, ids])
                batch.append((seq, n))
                budget -= n
            idx += 1

        # then admissions, first come first served, never in a preempting tick
        while not preempted and budget > 0 and len(self.running) < cfg["max_seqs"]:
            head = self._head()
            if head is None or head.arrival > t:
                break
            n = head.known if not cfg["chunked_prefill"] else min(head.known, budget)
            if n > budget:
                break
            blocks = _need_blocks(n, bs)
            if self.allocator.num_free < blocks:
                break
            (self.swapped if self.swapped else self.pending).pop(0)
            head.phase = Phase.RUNNING
            if head.start is None:
                head.start = t
            head.block_table = self.allocator.allocate(blocks)
            allocated.append([head.req_id, list(head.block_table)])
            self.running.append(head)
            batch.append((head, n))
            budget -= n

        # the model runs
        finished = []
        leaving = []
        for seq, n in batch:
            seq.num_computed += n
            seq.total_computed += n
            if seq.num_computed == seq.known:
                seq.num_generated += 1
                if seq.first_token is None:
                    seq.first_token = t + 1
                if seq.num_generated == seq.output:
                    seq.finish = t + 1
                    seq.phase = Phase.FINISHED
                    self.running.remove(seq)
                    finished.append(seq.req_id)
                    freed.append([seq.req_id, list(seq.block_table)])
                    leaving.append(seq)
        entry = {"tick": t, "scheduled": [[s.req_id, n] for s, n in batch], "preempted": preempted,
                 "aborted": aborted, "freed": freed, "allocated": allocated, "finished": finished}
        self.trace.append(entry)
        for seq in leaving:  # free from tick t + 1 on
            self._release(seq)
        self.clock = t + 1
        return _copy_entry(entry)

    # ---- the whole run ----

    def result(self):
        """The result of everything run so far, in the format serve returns."""
        trace = [_copy_entry(e) for e in self.trace]
        scheduled_ticks = [e["tick"] for e in trace if e["scheduled"]]
        makespan = scheduled_ticks[-1] + 1 if scheduled_ticks else 0
        computed = sum(n for e in trace for _, n in e["scheduled"])
        seqs = sorted(self.sequences.values(), key=lambda s: s.req_id)
        rows = []
        for s in seqs:
            row = {k: v for k, v in s.caller_items}
            row["start"] = s.start
            row["first_token"] = s.first_token
            row["finish"] = s.finish
            row["aborted"] = s.aborted_at
            row["generated"] = s.num_generated
            row["preemptions"] = s.num_preemptions
            row["computed"] = s.total_computed
            rows.append(row)
        budget = self.config["token_budget"]
        return {
            "trace": trace,
            "requests": rows,
            "makespan_ticks": makespan,
            "computed_tokens": computed,
            "useful_tokens": sum(s.prompt + s.output - 1 for s in seqs if s.phase is Phase.FINISHED),
            "recomputed_tokens": self.recomputed_tokens,
            "aborted_tokens": self.aborted_tokens,
            "token_utilization": (computed / (budget * makespan)) if makespan else 0.0,
            "preemptions": sum(s.num_preemptions for s in seqs),
        }


def _copy_entry(entry):
    return {
        "tick": entry["tick"],
        "scheduled": [list(x) for x in entry["scheduled"]],
        "preempted": list(entry["preempted"]),
        "aborted": list(entry["aborted"]),
        "freed": [[rid, list(ids)] for rid, ids in entry["freed"]],
        "allocated": [[rid, list(ids)] for rid, ids in entry["allocated"]],
        "finished": list(entry["finished"]),
    }


def make(config):
    """A fresh engine for config; drive it with add_request, abort and step."""
    return Engine(config)


def serve(requests, config):
    """Validate, then run every request through a fresh engine and return the result."""
    cfg = _parse_config(config)
    if not isinstance(requests, (list, tuple)):
        raise ValueError("requests=%r: expected a list or tuple of request dicts" % (requests,))
    seen = {}
    parsed = []
    for i, request in enumerate(requests):
        seq = _parse_request(i, request, cfg, seen)
        seen[seq.req_id] = i
        parsed.append(seq)
    engine = Engine(config)
    for seq in parsed:
        engine._enqueue(seq)
    while engine.step() is not None:
        pass
    return engine.result()
