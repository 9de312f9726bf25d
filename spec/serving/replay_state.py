"""What the serving replay keeps: per request, and the ordered sets of its queues (``spec.serving.result_checks``)."""

from __future__ import annotations

import math

WAITING, RUNNING, FINISHED, ABORTED = "waiting", "running", "finished", "aborted"


class Order:
    """An ordered set of ids: O(1) push at either end (moving an id already in), removal, and stepping either way."""

    __slots__ = ("after", "before", "first", "last")

    def __init__(self, ids=()):
        self.after: dict = {}
        self.before: dict = {}
        self.first = None
        self.last = None
        for item in ids:
            self.push_back(item)

    def __len__(self) -> int:
        return len(self.after)

    def __contains__(self, item) -> bool:
        return item in self.after

    def push_back(self, item) -> None:
        self.remove(item)
        self.after[item] = None
        self.before[item] = self.last
        if self.last is None:
            self.first = item
        else:
            self.after[self.last] = item
        self.last = item

    def push_front(self, item) -> None:
        self.remove(item)
        self.before[item] = None
        self.after[item] = self.first
        if self.first is None:
            self.last = item
        else:
            self.before[self.first] = item
        self.first = item

    def remove(self, item) -> None:
        """Take ``item`` out (nothing happens when it is not in)."""
        if item not in self.after:
            return
        before, after = self.before.pop(item), self.after.pop(item)
        if before is None:
            self.first = after
        else:
            self.after[before] = after
        if after is None:
            self.last = before
        else:
            self.before[after] = before


class ReplayRequest:
    """What the trace implies about one request so far."""

    __slots__ = (
        "request", "status", "cached", "generated", "known", "held", "total", "start", "first_token",
        "preemptions", "finish", "aborted_at", "overdue", "arrival", "until", "output", "hit_tokens",
    )

    def __init__(self, request):
        self.request = request
        self.arrival = request.arrival  # the request's own fields the replay reads every tick, at hand
        self.until = math.inf if request.abort is None else request.abort  # it may be scheduled in [arrival, until)
        self.output = request.output
        self.status = WAITING
        self.cached = 0
        self.generated = 0
        self.known = request.prompt  # prompt + generated, kept up to date with generated
        self.held: dict = {}  # block id -> None, in the order taken
        self.total = 0
        self.start = None
        self.first_token = None
        self.preemptions = 0
        self.finish = None
        self.aborted_at = None
        self.overdue = False
        self.hit_tokens = 0  # tokens it took from cache hits, over all its admissions


def is_subsequence(part: list, whole: list) -> bool:
    position = {item: index for index, item in enumerate(whole)}
    indices = [position.get(item, -1) for item in part]
    return all(i >= 0 for i in indices) and indices == sorted(indices)

