"""Names an online engine class, not a function schedule(jobs, slots, continuous)."""

EXPECTED = "is a class, not a function"  # a usage error (exit 2), not a counterexample


class Engine:
    """An online engine: submit jobs, then step it until it is idle."""

    def __init__(self, slots, continuous):
        self.slots, self.continuous, self.waiting = slots, continuous, []

    def submit(self, job):
        self.waiting.append(dict(job))
