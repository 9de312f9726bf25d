"""A correct online serving engine that lists ``aborted`` in the order the client called ``abort`` (issue 18).

Hostile to the verdicts, not to the contract: the natural order for an online engine,
which keeps its client's calls as they came, is the order of the ``abort()`` calls, not
(arrival, id).  The order of ids within an entry's ``aborted`` (and ``finished``)
carries no rule, so the stateful test and ``verify --online`` must pass it.  Without
prefix caching it also gives the aborted requests' blocks back in that order (their
order carries no rule either); with prefix caching on, the free queue's order is a rule,
so it gives them back in (arrival, id) order, as the contract says, and only lists the
ids its own way.  It wraps our ``impl.ServingScheduler`` and changes nothing else.
"""

from impl import ServingScheduler


class AbortOrderEngine:
    """impl.ServingScheduler with each entry's ``aborted`` listed in the order of the client's ``abort`` calls."""

    def __init__(self, config):
        self.engine = ServingScheduler(config)
        self.caching = bool(config.get("prefix_caching"))
        self.calls = []  # request ids, in the order abort() was called

    def add_request(self, request):
        self.engine.add_request(request)

    def abort(self, request_id):
        self.engine.abort(request_id)
        if request_id not in self.calls:
            self.calls.append(request_id)

    def view(self):
        return self.engine.view()

    def step(self):
        entry = self.engine.step()
        if entry is None or not entry["aborted"]:
            return entry
        called = {request_id: position for position, request_id in enumerate(self.calls)}
        entry["aborted"] = sorted(entry["aborted"], key=lambda i: called.get(i, len(called)))
        if not self.caching:
            aborted = entry["aborted"]
            gone = [pair for pair in entry["freed"] if pair[0] in aborted]
            rest = [pair for pair in entry["freed"] if pair[0] not in aborted]
            entry["freed"] = sorted(gone, key=lambda pair: aborted.index(pair[0])) + rest
        self.calls = [i for i in self.calls if i not in entry["aborted"]]
        return entry


def make(config):
    return AbortOrderEngine(config)
