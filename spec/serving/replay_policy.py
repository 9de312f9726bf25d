"""The serving replay's FCFS policy checks: the running pass, its victims, and the waiting pass (vLLM's rules).

Each simulates, from the replayed state, only as many steps of the tick's passes as
the entry lists, so that the whole replay stays linear in the trace.  With prefix
caching the waiting pass reads the rules' pool (``spec.serving.replay_cache.RulesPool``)
for an admission's hits and the free queue's length.
"""

from __future__ import annotations

from spec.serving.domain import blocks_for
from spec.serving.replay_state import ReplayRequest


class FcfsChecks:
    """The policy half of ``spec.serving.result_checks.Replay`` (a mixin: it reads the replay's state)."""

    def victim_gain(self, victim: int, dropped: dict) -> int:
        """The blocks a victim's preemption puts back in the pool: all it holds, or with caching those it held last."""
        held = self.of[victim].held
        if self.book is None:
            return len(held)
        gain = 0
        holders = self.book.holders
        for block in held:
            dropped[block] = dropped.get(block, 0) + 1
            if dropped[block] == len(holders.get(block, ())):
                gain += 1
        return gain

    def simulate_victims(self, steps: int) -> tuple[list, list]:
        """The victims the running pass preempts from the replayed state (at most ``steps`` requests looked at).

        Also the [id, n] pairs it grants on the way: with no victims, that is the running pass itself."""
        config, of = self.config, self.of
        after, before = self.running.after, self.running.before
        budget, size = config.token_budget, config.block_size
        free = config.num_blocks - len(self.owner)
        victims, granted = [], []
        dropped: dict = {}  # with prefix caching: block -> holders the victims so far take away
        current, end = self.running.first, self.running.last
        while current is not None and steps > 0:
            steps -= 1
            r = of[current]
            cached = r.cached
            n = r.known - cached
            if n > budget:
                n = budget
            if n <= 0:
                break
            extra = -(-(cached + n) // size) - len(r.held)  # blocks_for(cached + n) - held
            if free < extra:
                self_preempted = False
                while free < extra:
                    victims.append(end)
                    free += self.victim_gain(end, dropped)
                    if end == current:
                        self_preempted = True
                        break
                    end = before[end]
                if self_preempted:
                    break
            if extra > 0:
                free -= extra
            granted.append([current, n])
            budget -= n
            if current == end:
                break
            current = after[current]
        return victims, granted

    def simulate_running(self, victims: set, steps: int) -> list:
        """The running pass's [[id, n]], greedy in running order, with the tick's victims as given."""
        budget = self.config.token_budget
        of, after = self.of, self.running.after
        expected = []
        current = self.running.first
        while current is not None and steps > 0:
            if current not in victims:
                steps -= 1
                r = of[current]
                n = r.known - r.cached
                if n > budget:
                    n = budget
                if n <= 0:
                    break
                expected.append([current, n])
                budget -= n
            current = after[current]
        return expected

    def report_victims(self, t: int, expected: list, actual: list) -> None:
        if not expected:
            message = f"tick {t} preempts {actual} although every running request gets its blocks without preemption"
        elif not actual:
            message = f"tick {t} preempts nobody although blocks are short: the newest running {expected} must go"
        else:
            message = f"tick {t} preempts {actual}; the newest running requests, while blocks are short, are {expected}"
        self.report("preempt_newest", message, tick=t, ids=actual or expected, expected=expected, actual=actual)

    def report_running_first(self, t: int, expected: list, actual: list) -> None:
        self.report(
            "running_first",
            f"tick {t} schedules {[list(p) for p in actual]}; the running requests first, greedily in running "
            f"order, are {[list(p) for p in expected]}",
            tick=t, ids=[i for i, _ in expected] or [i for i, _ in actual],
            expected=[list(p) for p in expected], actual=[list(p) for p in actual],
        )

    def _stop_reason(self, t: int, r: ReplayRequest, budget: int, free: int) -> tuple[str | None, int]:
        """Why the waiting pass stops at head ``r`` (None if it admits it), and the chunk it would give.

        With prefix caching the chunk starts after the rules' hits, and the hit blocks of count 0 count
        against the free blocks as the new ones do."""
        config = self.config
        if r.request.arrival > t:
            return f"request {r.request.id} arrives at {r.request.arrival}", 0
        if len(self.running) >= config.max_seqs:
            return f"{len(self.running)} of max_seqs={config.max_seqs} run", 0
        if budget <= 0:
            return "the token budget is spent", 0
        hits = () if self.rules is None else self.rules.longest_hit(r.request.id, r.known)
        start = len(hits) * config.block_size
        n = r.known - start
        if config.chunked_prefill:
            n = min(n, budget)
        elif n > budget:
            return f"its {n} tokens exceed the {budget} left of the budget, unchunked", 0
        need = blocks_for(start + n, config.block_size) - len(hits)
        evictable = self.rules.evictable(hits) if hits else 0
        if need + evictable > free:
            cached = f" after {len(hits)} cached blocks" if hits else ""
            return f"its {n} tokens{cached} need {need + evictable} blocks, {free} free", n
        if config.reserve_full_sequence:
            whole = blocks_for(r.known, config.block_size) - len(hits) + evictable
            if whole > free:
                return (f"its whole known length, {r.known} tokens, needs {whole} blocks (reserve_full_sequence), "
                        f"{free} free"), n
        return None, n

    def judge_admission(self, t: int, r: ReplayRequest, n: int, budget: int, free: int) -> None:
        reason, chunk = self._stop_reason(t, r, budget, free)
        request_id = r.request.id
        if reason is not None:
            self.report(
                "work_conserving",
                f"tick {t} admits request {request_id} although the waiting pass stops there: {reason}",
                tick=t, ids=[request_id],
            )
        elif n != chunk:
            self.report(
                "work_conserving",
                f"tick {t} admits request {request_id} with {n} tokens; its chunk is {chunk} "
                f"({r.known} known, {budget} left of the budget, chunked_prefill={self.config.chunked_prefill})",
                tick=t, ids=[request_id], expected=chunk, actual=n,
            )

    def judge_stop(self, t: int, budget: int, free: int) -> None:
        head = self.waiting.first
        if head is None:
            return
        r = self.of[head]
        reason, chunk = self._stop_reason(t, r, budget, free)
        if reason is None:
            self.report(
                "work_conserving",
                f"tick {t} stops admitting at request {head} although it fits: {chunk} tokens in {budget} left "
                f"of the budget, {blocks_for(chunk, self.config.block_size)} blocks of {free} free, "
                f"{len(self.running)} of max_seqs={self.config.max_seqs} running",
                tick=t, ids=[head],
            )

    # --- after the last tick -----------------------------------------------------
