"""Each serving invariant checked over a result, by one replay of its trace, for any implementation.

``replay`` walks the trace once, tick by tick, keeping what the trace implies: per
request its cached tokens, output so far, blocks held (in the order taken), status and
counters; which request owns each block; the running list and the waiting queue, as
linked lists (O(1) push, pop and removal).  Every broken claim is recorded under its
invariant at the earliest tick it shows; the replay then follows the trace (what the
implementation did), except that blocks a request failed to give back are released,
so that one leak does not read as later double allocations.  The policy checks (vLLM
FCFS, ``spec.serving.replay_policy``) simulate the tick's running pass and waiting
pass from the replayed state, for only as many steps as the entry lists, so the
whole replay is linear in the trace.  With prefix caching on, the blocks are judged by
content and count and the FCFS pool's free queue and cache are rebuilt by the rules
(``spec.serving.replay_cache``); the records and totals are checked at the end
(``spec.serving.replay_records``).

The order of ids within an entry's ``aborted`` or ``finished`` carries no rule: they
are read as sets.  The orders that are rules: ``scheduled`` (the running order, then
admissions), ``preempted`` (the victims, newest first), each ``freed`` list (table
order), the freed lists by role (aborted, then preempted in preemption order, then
finished), and with caching the free queue's order (``lru_eviction``).

Limitation: a request that is both scheduled and preempted in one tick is read as
preempted first, then admitted again (the contract never does either).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from spec.registry import Findings, Violation, replay_finding
from spec.serving.domain import fcfs_key
from spec.serving.observation import Observation, Tick
from spec.serving.replay_cache import CacheBook, RulesPool
from spec.serving.replay_policy import FcfsChecks
from spec.serving.replay_records import RecordChecks
from spec.serving.replay_state import ABORTED, FINISHED, RUNNING, WAITING, Order, ReplayRequest, is_subsequence

# the invariants a replay can find, in registry order; each check reads obs.findings
CHECKED = (
    "no_duplicate_active",
    "no_start_before_arrival",
    "slot_bound",
    "nonnegative_remaining",
    "work_conservation",
    "every_job_completes_once",
    "termination",
    "token_budget",
    "kv_capacity",
    "no_false_sharing",
    "refcount_exact",
    "kv_exclusive",
    "kv_exact",
    "longest_prefix_hit",
    "lru_eviction",
    "fcfs_admission",
    "running_first",
    "preempt_newest",
    "no_admission_after_preemption",
    "work_conserving",
    "metrics_consistent",
)


RESULT_CHECKS: dict[str, Callable[[Observation], Violation | None]] = {name: replay_finding(name) for name in CHECKED}

_NO_FREED = {"abort": (), "preempt": (), "finish": (), "other": ()}  # an entry that frees nothing (never written)


class Replay(FcfsChecks, RecordChecks):
    """The incremental replay: feed it one Tick at a time (``tick``), then ``end`` (or ``close``, for a whole result).

    ``found`` maps each invariant to its earliest Violation; ``first_tick_found`` is the
    tick of the entry during which the first one was found.  Its memory is bounded by
    the requests, never by the trace: it keeps no entry once replayed.  The whole-result
    oracle (``replay``) and ``schedcheck trace`` (a stream of entries) both drive it."""

    def __init__(self, requests, config, policy: str = "fcfs", records: bool = True):
        self.config = config
        self.records = records  # False: a stream with no records to check; an ended request keeps only its end
        self.fcfs = policy == "fcfs"
        self.found: dict[str, Violation] = {}
        ordered = sorted(requests, key=fcfs_key)
        self.of = {request.id: ReplayRequest(request) for request in ordered}
        self.waiting = Order(request.id for request in ordered)
        self.running = Order()
        self.owner: dict[int, int] = {}  # block id -> the request that holds it
        self.pending = sorted((r.abort, r.arrival, r.id) for r in ordered if r.abort is not None)
        self.next_abort = 0
        self.computed = self.useful = self.recomputed = self.aborted = 0
        self.preemptions = 0
        self.previous_tick = None
        self.last_scheduled_tick = None
        self.latest_arrival = max((r.arrival for r in ordered), default=0)
        self.work_so_far = 0  # tokens scheduled and requests aborted, up to the current entry
        self.tick_ids: list = []  # the current entry's scheduled ids, and its tokens (check_entry keeps them)
        self.tick_total = 0
        self.hit_tokens = 0  # tokens taken from cache hits, all requests together
        self.book = CacheBook(self) if config.prefix_caching else None  # prefix caching: blocks by content and count
        self.rules = RulesPool(self.book) if self.book is not None and self.fcfs else None  # and the FCFS pool

    # --- recording ---------------------------------------------------------------

    def report(self, name: str, message: str, tick=None, ids=(), expected=None, actual=None) -> None:
        if name not in self.found:
            ids = tuple(dict.fromkeys(i for i in ids if i is not None))
            self.found[name] = Violation(
                name, message, tick=tick, job=ids[0] if ids else None, expected=expected, actual=actual, ids=ids
            )

    def forget(self, r: ReplayRequest) -> None:
        """Without records to check, an ended request keeps only its status and end tick (a stream's memory)."""
        if not self.records:
            r.start = r.first_token = None
            r.total = 0

    # --- blocks ------------------------------------------------------------------

    def free(self, request_id: int, blocks: list, tick: int, why: str) -> None:
        r = self.of[request_id]
        if len(set(blocks)) != len(blocks):
            twice = [b for b, n in Counter(blocks).items() if n > 1]
            self.report(
                "kv_exclusive", f"tick {tick} frees block {twice[0]} of request {request_id} twice ({why})",
                tick=tick, ids=[request_id], actual=blocks,
            )
        given = set(blocks)
        held_order = [b for b in r.held if b in given]
        if len(held_order) == len(blocks) and held_order != list(blocks):
            self.report(
                "metrics_consistent",
                f"tick {tick} frees request {request_id}'s blocks as {list(blocks)}, not in the order taken {held_order}",
                tick=tick, ids=[request_id], expected=held_order, actual=list(blocks),
            )
        for block in blocks:
            if not 0 <= block < self.config.num_blocks:
                self.report(
                    "kv_capacity",
                    f"tick {tick} frees block {block} of request {request_id}: ids are 0..{self.config.num_blocks - 1}",
                    tick=tick, ids=[request_id], actual=block,
                )
            if block not in r.held:
                holder = self.owner.get(block)
                whose = "no request holds it" if holder is None else f"request {holder} holds it"
                self.report(
                    "kv_exclusive",
                    f"tick {tick} frees block {block} for request {request_id} ({why}), which does not hold it: {whose}",
                    tick=tick, ids=[request_id] + ([holder] if holder is not None and holder != request_id else []),
                    actual=block,
                )
                continue
            del r.held[block]
            if self.owner.get(block) == request_id:
                del self.owner[block]
        if not r.held:
            r.held = {}  # a dict emptied key by key keeps its table: drop it, so ended requests cost little

    def release_leak(self, request_id: int, tick: int, why: str) -> None:
        """A request that left (or was preempted) must hold nothing: report what it kept, and release it."""
        r = self.of[request_id]
        if r.held:
            kept = list(r.held)
            self.report(
                "kv_exact",
                f"request {request_id} {why} in tick {tick} but freed does not give back its blocks {kept}: a leak",
                tick=tick, ids=[request_id], expected=[], actual=kept,
            )
            for block in kept:
                if self.owner.get(block) == request_id:
                    del self.owner[block]
            r.held = {}

    def allocate(self, request_id: int, blocks: list, tick: int) -> None:
        r = self.of[request_id]
        for block in blocks:
            if not 0 <= block < self.config.num_blocks:
                self.report(
                    "kv_capacity",
                    f"tick {tick} allocates block {block} to request {request_id}: ids are 0..{self.config.num_blocks - 1}",
                    tick=tick, ids=[request_id], actual=block,
                )
            holder = self.owner.get(block)
            if holder is not None:
                self.report(
                    "kv_exclusive",
                    f"tick {tick} allocates block {block} to request {request_id} while request {holder} holds it",
                    tick=tick, ids=[request_id] if holder == request_id else [request_id, holder], actual=block,
                )
            self.owner[block] = request_id
            r.held[block] = None
        if len(self.owner) > self.config.num_blocks:
            self.report(
                "kv_capacity",
                f"tick {tick}: {len(self.owner)} blocks are held, more than num_blocks={self.config.num_blocks}",
                tick=tick, ids=[request_id], expected=f"<= {self.config.num_blocks}", actual=len(self.owner),
            )

    # --- aborts ------------------------------------------------------------------

    def overdue_aborts(self, before: int) -> None:
        """Report the requests whose abort tick is < ``before`` (or <=, at the end) and that are still active."""
        while self.next_abort < len(self.pending) and self.pending[self.next_abort][0] < before:
            abort, _arrival, request_id = self.pending[self.next_abort]
            r = self.of[request_id]
            if r.status in (WAITING, RUNNING) and not r.overdue:
                r.overdue = True
                self.report(
                    "every_job_completes_once",
                    f"request {request_id} is not aborted at its abort tick {abort}: it is still {r.status}",
                    tick=abort, ids=[request_id], expected=f"aborted at {abort}", actual=r.status,
                )
            self.next_abort += 1

    def leave(self, request_id: int) -> None:
        if request_id in self.running:
            self.running.remove(request_id)
        if request_id in self.waiting:
            self.waiting.remove(request_id)

    # --- one tick, in the contract's order -------------------------------------------

    def tick(self, entry: Tick) -> None:
        """Replay one trace entry: aborts, frees, preemptions, the scheduled list, admissions, compute, finishes."""
        book, rules = self.book, self.rules
        if book is not None:
            entry = book.rename(entry)
        elif entry.hits:
            self.hits_without_caching(entry)
        self.check_entry(entry)
        aborted_now = self.aborts(entry)
        freed = self.freed_by_role(entry) if entry.freed else _NO_FREED
        if rules is not None:
            for request_id in sorted(aborted_now, key=lambda i: fcfs_key(self.of[i].request)):
                rules.release(request_id)
        if book is not None:
            book.release(entry.tick, "is aborted", sorted(aborted_now, key=lambda i: fcfs_key(self.of[i].request)),
                         freed["abort"])
        else:
            for request_id, blocks in freed["abort"]:
                self.free(request_id, blocks, entry.tick, "aborted")
            for request_id in aborted_now:
                self.release_leak(request_id, entry.tick, "is aborted")
        expected_victims = expected_running = None
        if self.fcfs:  # the policy's view of the running pass, before this tick's preemptions
            expected_victims, granted = self.simulate_victims(len(entry.scheduled) + len(entry.preempted) + 1)
            if not expected_victims and not entry.preempted:
                expected_running = granted  # no victims, none given: the victims' walk is the running pass
            else:
                expected_running = self.simulate_running(set(entry.preempted), len(entry.scheduled) + 1)
        victims = [i for i in entry.preempted if self.of[i].status == RUNNING] if rules is not None else ()
        if entry.preempted or freed["preempt"]:
            self.preemptions_of(entry, freed["preempt"])
        if self.fcfs and expected_victims != entry.preempted:
            self.report_victims(entry.tick, expected_victims, list(entry.preempted))
        running_part, admissions = self.scheduled(entry)
        if self.fcfs:
            self.judge_running_pass(entry, expected_running, running_part, admissions)
        allocated_of: dict = {}
        if book is not None:
            for request_id, blocks in entry.allocated:
                allocated_of.setdefault(request_id, []).extend(blocks)
        if rules is not None:
            self.rules_running_pass(entry.tick, running_part, victims, allocated_of)
        if book is not None:  # in the order taken: the running pass, then each admission's hits and new blocks
            for request_id, _ in running_part:
                book.take(entry.tick, request_id, allocated_of.pop(request_id, ()))
        self.admit(entry, running_part, admissions, allocated_of)
        if book is None:
            for request_id, blocks in entry.allocated:
                self.allocate(request_id, blocks, entry.tick)
        else:
            for request_id, blocks in allocated_of.items():  # given to a request the tick does not schedule
                book.take(entry.tick, request_id, blocks)
        done_now = self.compute(entry)
        if book is not None:
            book.judge(entry.tick)
        if entry.finished or done_now or freed["finish"]:
            self.finishes(entry, done_now, freed["finish"])
        for request_id, blocks in freed["other"]:
            if book is not None:
                book.release_some(entry.tick, request_id, blocks)
            else:
                self.free(request_id, blocks, entry.tick, "neither aborted, preempted nor finished")
        self.blocks_after(entry, freed["other"])
        if entry.scheduled:
            self.last_scheduled_tick = entry.tick

    def hits_without_caching(self, entry: Tick) -> None:
        """With prefix caching off there is no cache: a hit shares a block no request was given by the pool."""
        request_id, blocks = entry.hits[0]
        self.report(
            "kv_exclusive",
            f"tick {entry.tick} lists hits {[[i, list(b)] for i, b in entry.hits]}, but prefix_caching is off: "
            "every block a request holds is its own, taken from the pool",
            tick=entry.tick, ids=[request_id], actual=list(blocks),
        )

    def rules_running_pass(self, t: int, running_part: list, victims: list, allocated_of: dict) -> None:
        """The FCFS pool through the running pass: victims give back as the blocks run short, each new block from the head."""
        rules, of = self.rules, self.of
        pending = list(victims)
        for request_id, n in running_part:
            new = allocated_of.get(request_id, ())
            while pending and rules.free_len() < len(new):
                rules.release(pending.pop(0))
            if new:
                rules.take(t, request_id, new)
            rules.register(request_id, of[request_id].cached + n)
        for request_id in pending:
            rules.release(request_id)

    def check_entry(self, entry: Tick) -> None:
        """The entry's own rules: ticks ascend, something happens, the bound holds, no list repeats an id.

        It also keeps the entry's scheduled ids and token total (``tick_ids``, ``tick_total``) for the rest of the tick."""
        t = entry.tick
        if self.previous_tick is not None and t <= self.previous_tick:
            self.report(
                "metrics_consistent", f"trace tick {t} follows tick {self.previous_tick}: ticks must ascend", tick=t
            )
        self.previous_tick = t
        if not entry.scheduled and not entry.aborted:
            self.report("metrics_consistent", f"trace tick {t} schedules and aborts nothing: list only ticks that do", tick=t)
        scheduled_ids = self.tick_ids = [pair[0] for pair in entry.scheduled]
        total = self.tick_total = sum([pair[1] for pair in entry.scheduled])
        self.work_so_far += total + len(entry.aborted)
        bound = self.latest_arrival + self.work_so_far
        if t + 1 > bound:
            self.report(
                "termination",
                f"tick {t} is in the trace, past the latest arrival {self.latest_arrival} plus the "
                f"{self.work_so_far} tokens scheduled and requests aborted by then: the engine idled while work waited",
                tick=t, expected=f"< {bound}", actual=t,
            )
        for name, ids in (
            ("scheduled", scheduled_ids),
            ("preempted", entry.preempted),
            ("aborted", entry.aborted),
            ("finished", entry.finished),
        ):
            if len(ids) > 1 and len(set(ids)) != len(ids):
                twice = [i for i, n in Counter(ids).items() if n > 1]
                self.report(
                    "no_duplicate_active",
                    f"tick {t} lists request {twice[0]} {ids.count(twice[0])} times in {name}: {list(ids)}",
                    tick=t, ids=twice, expected=1, actual=ids.count(twice[0]),
                )
    def aborts(self, entry: Tick) -> list:
        """Step 2: the entry's aborts (a set: their order carries no rule), each exactly at its abort tick; every
        abort due by now must be there."""
        t = entry.tick
        self.overdue_aborts(t)
        aborted_now = []
        for request_id in entry.aborted:
            r = self.of[request_id]
            if r.status in (FINISHED, ABORTED):
                when = f"finished at {r.finish}" if r.status == FINISHED else f"was aborted at {r.aborted_at}"
                self.report(
                    "every_job_completes_once", f"tick {t} aborts request {request_id}, which {when}",
                    tick=t, ids=[request_id],
                )
                continue
            abort = r.request.abort
            if abort != t:
                said = "has no abort tick" if abort is None else f"has abort tick {abort}"
                self.report(
                    "every_job_completes_once", f"tick {t} aborts request {request_id}, which {said}",
                    tick=t, ids=[request_id], expected=abort, actual=t,
                )
            self.leave(request_id)
            self.aborted += r.cached
            r.status, r.aborted_at = ABORTED, t
            self.forget(r)
            aborted_now.append(request_id)
        self.overdue_aborts(t + 1)
        return aborted_now

    def freed_by_role(self, entry: Tick) -> dict[str, list]:
        """The entry's freed lists by who gives the blocks back; they must come aborted, preempted (in preemption
        order), finished; within the aborted and the finished their order carries no rule.

        A request can give blocks back twice in one tick (preempted, admitted again and finished, under
        another policy): its freed lists are matched to its roles in that order."""
        roles_of: dict[int, list] = {}
        for rank, (role, ids) in enumerate((("abort", entry.aborted), ("preempt", entry.preempted), ("finish", entry.finished))):
            for index, request_id in enumerate(ids):
                roles_of.setdefault(request_id, []).append((role, (rank, index if role == "preempt" else 0)))
        for roles in roles_of.values():
            roles.reverse()  # pop() gives the earliest role first
        freed: dict[str, list] = {"abort": [], "preempt": [], "finish": [], "other": []}
        ranks = []
        for request_id, blocks in entry.freed:
            roles = roles_of.get(request_id)
            role, rank = roles.pop() if roles else ("other", (3, 0))
            freed[role].append((request_id, blocks))
            ranks.append(rank)
        if ranks != sorted(ranks):
            self.report(
                "metrics_consistent",
                f"tick {entry.tick} lists freed {[i for i, _ in entry.freed]} out of order: the aborted, then the "
                "preempted in preemption order, then the finished",
                tick=entry.tick, ids=[i for i, _ in entry.freed],
            )
        return freed

    def preemptions_of(self, entry: Tick, freed: list) -> None:
        """Step 4's preemptions: each victim was running, goes to the front of the waiting queue, gives back all."""
        t = entry.tick
        victims = []
        for request_id in entry.preempted:
            r = self.of[request_id]
            if r.status != RUNNING:
                self.report(
                    "every_job_completes_once",
                    f"tick {t} preempts request {request_id}, which is {r.status}, not running",
                    tick=t, ids=[request_id],
                )
                continue
            self.recomputed += r.cached
            r.cached = 0
            r.preemptions += 1
            self.preemptions += 1
            r.status = WAITING
            self.running.remove(request_id)
            self.waiting.push_front(request_id)
            victims.append(request_id)
        if self.book is not None:
            self.book.release(t, "is preempted", victims, freed)
            return
        for request_id, blocks in freed:
            self.free(request_id, blocks, t, "preempted")
        for request_id in entry.preempted:
            if self.of[request_id].status == WAITING:
                self.release_leak(request_id, t, "is preempted")

    def scheduled(self, entry: Tick) -> tuple[list, list]:
        """The scheduled list's safety rules; returns its pairs split into the running part and the admissions."""
        t, config, of = entry.tick, self.config, self.of
        running_part, admissions = [], []
        for pair in entry.scheduled:
            request_id, n = pair
            r = of[request_id]
            if n < 1 or t < r.arrival or t >= r.until or r.status == FINISHED:
                self.scheduled_problems(t, r, n)
            if r.status == WAITING:
                admissions.append(pair)
            else:
                running_part.append(pair)
        scheduled_ids = self.tick_ids
        if len(scheduled_ids) > config.max_seqs:
            self.report(
                "slot_bound",
                f"tick {t} schedules {len(entry.scheduled)} requests {scheduled_ids}, more than max_seqs={config.max_seqs}",
                tick=t, ids=scheduled_ids, expected=f"<= {config.max_seqs}", actual=len(entry.scheduled),
            )
        total = self.tick_total
        if total > config.token_budget:
            self.report(
                "token_budget",
                f"tick {t} schedules {total} tokens {[list(p) for p in entry.scheduled]}, "
                f"more than token_budget={config.token_budget}",
                tick=t, ids=scheduled_ids, expected=f"<= {config.token_budget}", actual=total,
            )
        if entry.allocated:
            allocated_ids = [i for i, _ in entry.allocated]
            if not is_subsequence(allocated_ids, scheduled_ids):
                self.report(
                    "metrics_consistent",
                    f"tick {t} lists allocated {allocated_ids}, not in scheduled order {scheduled_ids}",
                    tick=t, ids=allocated_ids,
                )
        return running_part, admissions

    def scheduled_problems(self, t: int, r: ReplayRequest, n: int) -> None:
        """The per-request rules of one scheduled pair: n >= 1, arrived, not aborted yet, not finished."""
        request = r.request
        request_id = request.id
        if n < 1:
            self.report(
                "nonnegative_remaining", f"tick {t} schedules n={n} tokens for request {request_id}: n >= 1",
                tick=t, ids=[request_id], expected=">= 1", actual=n,
            )
        if t < request.arrival:
            self.report(
                "no_start_before_arrival",
                f"tick {t} schedules request {request_id}, which arrives at {request.arrival}",
                tick=t, ids=[request_id], expected=f">= {request.arrival}", actual=t,
            )
        if request.abort is not None and t >= request.abort:
            self.report(
                "no_start_before_arrival",
                f"tick {t} schedules request {request_id}, at or after its abort tick {request.abort}",
                tick=t, ids=[request_id], expected=f"< {request.abort}", actual=t,
            )
        if r.status == FINISHED:
            self.report(
                "every_job_completes_once",
                f"tick {t} schedules request {request_id}, which finished at {r.finish}",
                tick=t, ids=[request_id],
            )

    def judge_running_pass(self, entry: Tick, expected: list, running_part: list, admissions: list) -> None:
        """running_first and no_admission_after_preemption for one tick."""
        t = entry.tick
        if running_part != expected or entry.scheduled[: len(running_part)] != running_part:
            self.report_running_first(t, expected, list(entry.scheduled))
        if entry.preempted and admissions:
            self.report(
                "no_admission_after_preemption",
                f"tick {t} preempts {list(entry.preempted)} and still admits "
                f"{[i for i, _ in admissions]}: a preempting tick admits nobody",
                tick=t, ids=[i for i, _ in admissions] + list(entry.preempted),
            )

    def admit(self, entry: Tick, running_part: list, admissions: list, allocated_of: dict) -> None:
        """Step 5: the admissions join the running list, judged against the waiting pass the policy would run.

        With prefix caching an admission's hits start its table and its cached tokens; the FCFS pool
        judges them and its new blocks (``spec.serving.replay_cache.RulesPool``)."""
        t, config = entry.tick, self.config
        allocated: dict = {}
        for request_id, blocks in entry.allocated:
            allocated[request_id] = allocated.get(request_id, 0) + len(blocks)
        budget = config.token_budget - self.tick_total + sum([n for _, n in admissions])  # what the running part left
        free = config.num_blocks - len(self.owner)
        if allocated:
            running_ids = [i for i, _ in running_part]
            free -= sum([blocks * running_ids.count(i) for i, blocks in allocated.items()])
        hits_of = self.hits_of(entry, admissions) if entry.hits else {}
        book, rules = self.book, self.rules
        in_step = self.fcfs and not entry.preempted
        for request_id, n in admissions:
            r = self.of[request_id]
            head = self.waiting.first
            if self.fcfs and head != request_id:
                self.report(
                    "fcfs_admission",
                    f"tick {t} admits request {request_id} while request {head} heads the waiting queue",
                    tick=t, ids=[request_id, head], expected=head, actual=request_id,
                )
                in_step = False
            if in_step:
                self.judge_admission(t, r, n, budget, free if rules is None else rules.free_len())
            hits = hits_of.get(request_id, ())
            if rules is not None:
                rules.admit(t, request_id, r.known, list(hits))
                rules.take(t, request_id, allocated_of.get(request_id, ()))
                rules.register(request_id, len(hits) * config.block_size + n)
            if hits:
                if book is not None:
                    book.hit(t, request_id, hits)
                else:
                    self.allocate(request_id, hits, t)
                r.cached = len(hits) * config.block_size
                r.hit_tokens += r.cached
                self.hit_tokens += r.cached
            if book is not None:
                book.take(t, request_id, allocated_of.pop(request_id, ()))
            self.waiting.remove(request_id)
            self.running.push_back(request_id)
            r.status = RUNNING
            if r.start is None:
                r.start = t
            budget -= n
            free -= allocated.get(request_id, 0)
            if len(self.running) > config.max_seqs:
                self.report(
                    "slot_bound",
                    f"tick {t} admits request {request_id}: {len(self.running)} requests run, "
                    f"more than max_seqs={config.max_seqs}",
                    tick=t, ids=[request_id], expected=f"<= {config.max_seqs}", actual=len(self.running),
                )
        if in_step:
            self.judge_stop(t, budget, free if rules is None else rules.free_len())

    def hits_of(self, entry: Tick, admissions: list) -> dict:
        """The entry's hits by request; a hit of a request the tick does not admit is reported (hits start a table)."""
        admitted = {request_id for request_id, _ in admissions}
        hits_of: dict = {}
        for request_id, blocks in entry.hits:
            if request_id not in admitted or request_id in hits_of:
                self.report(
                    "metrics_consistent",
                    f"tick {entry.tick} lists hits for request {request_id}, which it does not admit "
                    "(or lists twice): only an admission takes blocks from the cache",
                    tick=entry.tick, ids=[request_id],
                )
                continue
            hits_of[request_id] = blocks
        return hits_of

    def compute(self, entry: Tick) -> list:
        """Step 6: cached tokens grow, output tokens are generated; returns the requests that got their last one."""
        t = entry.tick
        done_now = []
        of = self.of
        self.computed += self.tick_total
        if self.records:  # every token computed for a request, for its record (a stream has none to check)
            for request_id, n in entry.scheduled:
                of[request_id].total += n
        book = self.book
        for request_id, n in entry.scheduled:
            r = of[request_id]
            if r.status != RUNNING or n < 1:
                continue
            if book is not None:
                book.write(t, request_id, r.cached, r.cached + n)
            cached = r.cached = r.cached + n
            known = r.known
            if cached < known:
                continue
            if cached > known:
                self.report(
                    "nonnegative_remaining",
                    f"tick {t} schedules {n} tokens for request {request_id}, which has only "
                    f"{known - (cached - n)} of its {known} known tokens left to compute",
                    tick=t, ids=[request_id], expected=f"<= {known - (cached - n)}", actual=n,
                )
            r.generated += 1
            r.known = known + 1
            if r.first_token is None:
                r.first_token = t + 1
            output = r.output
            if r.generated > output:
                self.report(
                    "nonnegative_remaining",
                    f"request {request_id} generates output token {r.generated} in tick {t}, "
                    f"more than its output={output}",
                    tick=t, ids=[request_id], expected=f"<= {output}", actual=r.generated,
                )
            if r.generated == output:
                done_now.append(request_id)
        return done_now

    def finishes(self, entry: Tick, done_now: list, freed: list) -> None:
        """The entry's finished list (a set: its order carries no rule): exactly the requests that got their last
        token, each with all its work; they give their blocks back (with caching, the FCFS pool's in running order)."""
        t = entry.tick
        scheduled_ids = self.tick_ids
        outside = [i for i in entry.finished if i not in scheduled_ids]
        if outside:
            self.report(
                "metrics_consistent",
                f"tick {t} lists finished {list(entry.finished)}, but does not schedule request {outside[0]}",
                tick=t, ids=outside,
            )
        leaving = []
        for request_id in entry.finished:
            r = self.of[request_id]
            if r.status in (FINISHED, ABORTED):
                when = f"finished at {r.finish}" if r.status == FINISHED else f"was aborted at {r.aborted_at}"
                self.report(
                    "every_job_completes_once", f"request {request_id} finishes at {t + 1} but {when}",
                    tick=t, ids=[request_id],
                )
                continue
            work = r.request.prompt + r.request.output - 1
            if r.cached != work or r.generated != r.request.output:
                self.report(
                    "work_conservation",
                    f"request {request_id} finishes in tick {t} with {r.cached} tokens cached and "
                    f"{r.generated} output tokens generated; it needs prompt + output - 1 = {work} and {r.request.output}",
                    tick=t, ids=[request_id], expected=work, actual=r.cached,
                )
            self.leave(request_id)
            r.status, r.finish = FINISHED, t + 1
            self.forget(r)
            self.useful += work
            leaving.append(request_id)
        finished = set(entry.finished)
        for request_id in done_now:
            if request_id not in finished:
                self.report(
                    "every_job_completes_once",
                    f"request {request_id} generates its last output token in tick {t}, "
                    "but the tick does not list it finished",
                    tick=t, ids=[request_id],
                )
        if self.rules is not None:
            gone = set(leaving)
            for request_id in scheduled_ids:
                if request_id in gone:
                    self.rules.release(request_id)
        if self.book is not None:
            size = self.config.block_size
            for request_id in leaving:  # its table as it computed its last token (the running ones: blocks_after)
                r = self.of[request_id]
                if len(r.held) != -(-r.cached // size):
                    self.report(
                        "kv_exact",
                        f"request {request_id} computes its last token in tick {t} holding {len(r.held)} blocks "
                        f"{self.book.names(r.held)} for {r.cached} cached tokens; ceil({r.cached}/{size}) = "
                        f"{-(-r.cached // size)}",
                        tick=t, ids=[request_id], expected=-(-r.cached // size), actual=len(r.held),
                    )
            gone = set(leaving)  # released in running order, whatever the order of the entry's finished list
            order = list(dict.fromkeys([i for i in scheduled_ids if i in gone] + leaving))
            self.book.release(t, "finishes", order, freed)
            return
        for request_id, blocks in freed:
            self.free(request_id, blocks, t, "finished")
        for request_id in entry.finished:
            if self.of[request_id].status == FINISHED:
                self.release_leak(request_id, t, "finishes")

    def blocks_after(self, entry: Tick, freed_other: list) -> None:
        """kv_exact after the tick, for every request it touched: running ones hold ceil(cached / block_size)."""
        t, size = entry.tick, self.config.block_size
        touched = self.tick_ids  # a request touched twice is checked twice, with the same outcome
        if entry.allocated or freed_other:
            touched = touched + [i for i, _ in entry.allocated] + [i for i, _ in freed_other]
        of = self.of
        for request_id in touched:
            r = of[request_id]
            if r.status == RUNNING:
                if len(r.held) != -(-r.cached // size):  # blocks_for(r.cached, size)
                    need = -(-r.cached // size)
                    shown = list(r.held) if self.book is None else self.book.names(r.held)
                    self.report(
                        "kv_exact",
                        f"after tick {t} request {request_id} holds {len(r.held)} blocks {shown} for "
                        f"{r.cached} cached tokens; ceil({r.cached}/{size}) = {need}",
                        tick=t, ids=[request_id], expected=need, actual=len(r.held),
                    )
            elif r.held:
                if self.book is not None:
                    self.book.release(t, f"is {r.status} and still holds blocks", [request_id], [])
                else:
                    self.release_leak(request_id, t, f"is {r.status} and still holds blocks")


def replay(obs: Observation) -> Findings:
    """Replay the result's trace once and return each broken invariant's earliest Violation (and which the end found)."""
    state = Replay(obs.requests, obs.config, obs.policy)
    for entry in obs.trace:
        state.tick(entry)
    during = len(state.found)
    state.close(obs.records, obs.result)
    return Findings(state.found, list(state.found)[during:])
