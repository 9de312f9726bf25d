"""Block tables (the ``blocks`` form): the waiting head's table shows the blocks it is promised, peeked from the free list and not taken, which a running request may then be given.

The engine schedules correctly (its pool is right); what it reports is not: the head of
the waiting queue has a table at every step (the lowest free ids it would need, looked
up before the running pass), and the running pass then gives the same ids to a running
request.  A check that reads only the tables of the requests scheduled in a tick does
not see it.
"""

EXPECTED = "kv_exclusive"
ALSO = ("kv_exact",)
# the waiting head's table shares a block with a running request's (kv_exclusive); when no running
# request took its promised ids, a waiting request holding blocks at all is kv_exact


class Engine:
    """A clock-free FCFS serving engine: add_request, abort, step() -> the tick's entry with block tables."""

    def __init__(self, config):
        self.max_seqs, self.budget = config["max_seqs"], config["token_budget"]
        self.block_size, self.chunked = config["block_size"], config["chunked_prefill"]
        self.free = list(range(config["num_blocks"]))  # kept sorted: the lowest ids go first
        self.front, self.fresh, self.running = [], [], []  # preempted (head first), never admitted, running
        self.to_abort = []

    def add_request(self, request):
        seq = dict(request, computed=0, generated=0, blocks=[])
        key = (seq["arrival"], seq["id"])
        at = next((i for i, s in enumerate(self.fresh) if (s["arrival"], s["id"]) > key), len(self.fresh))
        self.fresh.insert(at, seq)

    def abort(self, request_id):
        self.to_abort.append(request_id)

    def _give_back(self, seq, freed):
        if seq["blocks"]:
            freed.append([seq["id"], list(seq["blocks"])])
            self.free = sorted(self.free + seq["blocks"])
        seq["blocks"] = []

    def _take(self, seq, k, allocated):
        got, self.free = self.free[:k], self.free[k:]
        seq["blocks"] += got
        if got:
            allocated.append([seq["id"], got])

    def step(self):
        freed, allocated, preempted, scheduled = [], [], [], []
        due = [s for s in self.front + self.fresh + self.running if s["id"] in self.to_abort]
        due.sort(key=lambda s: (s["arrival"], s["id"]))
        for seq in due:
            for queue in (self.front, self.fresh, self.running):
                if seq in queue:
                    queue.remove(seq)
            self._give_back(seq, freed)
        self.to_abort = []
        budget, need = self.budget, lambda tokens: -(-tokens // self.block_size)
        for seq in self.front + self.fresh:
            seq["promised"] = []
        if self.front or self.fresh:  # the bug: the head's table shows ids still in the free list
            head = (self.front or self.fresh)[0]
            head["promised"] = self.free[:need(head["prompt"] + head["generated"])]
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            n = min(seq["prompt"] + seq["generated"] - seq["computed"], budget)
            if n > 0:
                extra = need(seq["computed"] + n) - len(seq["blocks"])
                victim = None
                while len(self.free) < extra and victim is not seq:
                    victim = self.running.pop()
                    self._give_back(victim, freed)
                    victim["computed"] = 0
                    self.front.insert(0, victim)
                    preempted.append(victim["id"])
                if victim is seq:
                    break
                self._take(seq, extra, allocated)
                scheduled.append([seq, n])
                budget -= n
            i += 1
        while not preempted and budget > 0 and len(self.running) < self.max_seqs and (self.front or self.fresh):
            queue = self.front if self.front else self.fresh
            seq = queue[0]
            n = seq["prompt"] + seq["generated"]
            if self.chunked:
                n = min(n, budget)
            if n > budget or len(self.free) < need(n):
                break
            queue.pop(0)
            seq["promised"] = []
            self.running.append(seq)
            self._take(seq, need(n), allocated)
            scheduled.append([seq, n])
            budget -= n
        finished, tables = [], {}
        for seq in self.front + self.fresh + self.running:
            tables[seq["id"]] = list(seq["blocks"] or seq.get("promised", []))
        for seq, n in scheduled:
            seq["computed"] += n
            if seq["computed"] == seq["prompt"] + seq["generated"]:
                seq["generated"] += 1
                if seq["generated"] == seq["output"]:
                    finished.append(seq["id"])
                    tables[seq["id"]] = list(seq["blocks"])
                    self.running.remove(seq)
                    self._give_back(seq, freed)
        return {"scheduled": [[s["id"], n] for s, n in scheduled], "preempted": preempted,
                "aborted": [s["id"] for s in due], "finished": finished, "blocks": tables}


def make(config):
    """A fresh engine for ``config``."""
    return Engine(config)
