"""A clock-free continuous-batching engine of the chapter's model that admits one job more than it has slots."""

EXPECTED = "slot_bound"


class Engine:
    """submit(job) and step() -> the ids served this tick; view() shows waiting and running ids."""

    def __init__(self, slots, continuous):
        self.slots, self.continuous = slots, continuous
        self.waiting, self.running = [], []  # [job, tokens left], FIFO order

    def submit(self, job):
        self.waiting.append([job, job["tokens"]])
        self.waiting.sort(key=lambda item: (item[0]["arrival"], item[0]["id"]))

    def view(self):
        return {"waiting": [j["id"] for j, _ in self.waiting], "running": [j["id"] for j, _ in self.running]}

    def step(self):
        if self.continuous or not self.running:
            while self.waiting and len(self.running) <= self.slots:  # the bug: <= instead of <
                self.running.append(self.waiting.pop(0))
        served = [job["id"] for job, _ in self.running]
        for item in self.running:
            item[1] -= 1
        self.running = [item for item in self.running if item[1] > 0]
        return served


def make(slots, continuous):
    """A fresh engine."""
    return Engine(slots, continuous)
