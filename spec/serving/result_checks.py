"""Each serving invariant checked over a result, by one replay of its trace, for any implementation.

``replay`` walks the trace once, tick by tick, keeping what the trace implies: per
request its cached tokens, output so far, blocks held (in the order taken), status and
counters; which request owns each block; the running list and the waiting queue, as
linked lists (O(1) push, pop and removal).  Every broken claim is recorded under its
invariant at the earliest tick it shows; the replay then follows the trace (what the
implementation did), except that blocks a request failed to give back are released,
so that one leak does not read as later double allocations.  The policy checks (vLLM
FCFS) simulate the tick's running pass and waiting pass from the replayed state, for
only as many steps as the entry lists, so the whole replay is linear in the trace.

Limitation: a request that is both scheduled and preempted in one tick is read as
preempted first, then admitted again (the contract never does either).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable

from spec.registry import Violation, replay_finding
from spec.serving.domain import blocks_for, fcfs_key
from spec.serving.metrics import token_utilization
from spec.serving.observation import Observation, Tick

WAITING, RUNNING, FINISHED, ABORTED = "waiting", "running", "finished", "aborted"

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
    "kv_exclusive",
    "kv_exact",
    "fcfs_admission",
    "running_first",
    "preempt_newest",
    "no_admission_after_preemption",
    "work_conserving",
    "metrics_consistent",
)


RESULT_CHECKS: dict[str, Callable[[Observation], Violation | None]] = {name: replay_finding(name) for name in CHECKED}

_NO_FREED = {"abort": (), "preempt": (), "finish": (), "other": ()}  # an entry that frees nothing (never written)


class _Order:
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


class _Request:
    """What the trace implies about one request so far."""

    __slots__ = (
        "request", "status", "cached", "generated", "known", "held", "total", "start", "first_token",
        "preemptions", "finish", "aborted_at", "overdue", "arrival", "until", "output",
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


def _is_subsequence(part: list, whole: list) -> bool:
    position = {item: index for index, item in enumerate(whole)}
    indices = [position.get(item, -1) for item in part]
    return all(i >= 0 for i in indices) and indices == sorted(indices)


class Replay:
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
        self.of = {request.id: _Request(request) for request in ordered}
        self.waiting = _Order(request.id for request in ordered)
        self.running = _Order()
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

    # --- recording ---------------------------------------------------------------

    def report(self, name: str, message: str, tick=None, ids=(), expected=None, actual=None) -> None:
        if name not in self.found:
            ids = tuple(dict.fromkeys(i for i in ids if i is not None))
            self.found[name] = Violation(
                name, message, tick=tick, job=ids[0] if ids else None, expected=expected, actual=actual, ids=ids
            )

    def forget(self, r: _Request) -> None:
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
        self.check_entry(entry)
        aborted_now = self.aborts(entry)
        freed = self.freed_by_role(entry) if entry.freed else _NO_FREED
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
        if entry.preempted or freed["preempt"]:
            self.preemptions_of(entry, freed["preempt"])
        if self.fcfs and expected_victims != entry.preempted:
            self.report_victims(entry.tick, expected_victims, list(entry.preempted))
        running_part, admissions = self.scheduled(entry)
        if self.fcfs:
            self.judge_running_pass(entry, expected_running, running_part, admissions)
        self.admit(entry, running_part, admissions)
        for request_id, blocks in entry.allocated:
            self.allocate(request_id, blocks, entry.tick)
        done_now = self.compute(entry)
        if entry.finished or done_now or freed["finish"]:
            self.finishes(entry, done_now, freed["finish"])
        for request_id, blocks in freed["other"]:
            self.free(request_id, blocks, entry.tick, "neither aborted, preempted nor finished")
        self.blocks_after(entry, freed["other"])
        if entry.scheduled:
            self.last_scheduled_tick = entry.tick

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
        """Step 2: the entry's aborts, each exactly at its abort tick; every abort due by now must be there."""
        t = entry.tick
        self.overdue_aborts(t)
        keys = [fcfs_key(self.of[i].request) for i in entry.aborted]
        if keys != sorted(keys):
            self.report(
                "metrics_consistent", f"tick {t} lists aborted {list(entry.aborted)}, not in (arrival, id) order",
                tick=t, ids=entry.aborted,
            )
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
        """The entry's freed lists by who gives the blocks back; they must come aborted, preempted, finished.

        A request can give blocks back twice in one tick (preempted, admitted again and finished, under
        another policy): its freed lists are matched to its roles in that order."""
        roles_of: dict[int, list] = {}
        for rank, (role, ids) in enumerate((("abort", entry.aborted), ("preempt", entry.preempted), ("finish", entry.finished))):
            for index, request_id in enumerate(ids):
                roles_of.setdefault(request_id, []).append((role, (rank, index)))
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
                "preempted, then the finished, each in its list's order",
                tick=entry.tick, ids=[i for i, _ in entry.freed],
            )
        return freed

    def preemptions_of(self, entry: Tick, freed: list) -> None:
        """Step 4's preemptions: each victim was running, goes to the front of the waiting queue, gives back all."""
        t = entry.tick
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
            if not _is_subsequence(allocated_ids, scheduled_ids):
                self.report(
                    "metrics_consistent",
                    f"tick {t} lists allocated {allocated_ids}, not in scheduled order {scheduled_ids}",
                    tick=t, ids=allocated_ids,
                )
        return running_part, admissions

    def scheduled_problems(self, t: int, r: _Request, n: int) -> None:
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

    def admit(self, entry: Tick, running_part: list, admissions: list) -> None:
        """Step 5: the admissions join the running list, judged against the waiting pass the policy would run."""
        t, config = entry.tick, self.config
        allocated: dict = {}
        for request_id, blocks in entry.allocated:
            allocated[request_id] = allocated.get(request_id, 0) + len(blocks)
        budget = config.token_budget - self.tick_total + sum([n for _, n in admissions])  # what the running part left
        free = config.num_blocks - len(self.owner)
        if allocated:
            running_ids = [i for i, _ in running_part]
            free -= sum([blocks * running_ids.count(i) for i, blocks in allocated.items()])
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
                self.judge_admission(t, r, n, budget, free)
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
            self.judge_stop(t, budget, free)

    def compute(self, entry: Tick) -> list:
        """Step 6: cached tokens grow, output tokens are generated; returns the requests that got their last one."""
        t = entry.tick
        done_now = []
        of = self.of
        self.computed += self.tick_total
        if self.records:  # every token computed for a request, for its record (a stream has none to check)
            for request_id, n in entry.scheduled:
                of[request_id].total += n
        for request_id, n in entry.scheduled:
            r = of[request_id]
            if r.status != RUNNING or n < 1:
                continue
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
        """The entry's finished list: exactly the requests that got their last token, each with all its work."""
        t = entry.tick
        scheduled_ids = self.tick_ids
        if not _is_subsequence(list(entry.finished), scheduled_ids):
            self.report(
                "metrics_consistent",
                f"tick {t} lists finished {list(entry.finished)}, not in scheduled order {scheduled_ids}",
                tick=t, ids=list(entry.finished),
            )
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
        finished = set(entry.finished)
        for request_id in done_now:
            if request_id not in finished:
                self.report(
                    "every_job_completes_once",
                    f"request {request_id} generates its last output token in tick {t}, "
                    "but the tick does not list it finished",
                    tick=t, ids=[request_id],
                )
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
                    self.report(
                        "kv_exact",
                        f"after tick {t} request {request_id} holds {len(r.held)} blocks {list(r.held)} for "
                        f"{r.cached} cached tokens; ceil({r.cached}/{size}) = {need}",
                        tick=t, ids=[request_id], expected=need, actual=len(r.held),
                    )
            elif r.held:
                self.release_leak(request_id, t, f"is {r.status} and still holds blocks")

    # --- the policy: vLLM FCFS ---------------------------------------------------

    def simulate_victims(self, steps: int) -> tuple[list, list]:
        """The victims the running pass preempts from the replayed state (at most ``steps`` requests looked at).

        Also the [id, n] pairs it grants on the way: with no victims, that is the running pass itself."""
        config, of = self.config, self.of
        after, before = self.running.after, self.running.before
        budget, size = config.token_budget, config.block_size
        free = config.num_blocks - len(self.owner)
        victims, granted = [], []
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
                    free += len(of[end].held)
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

    def _stop_reason(self, t: int, r: _Request, budget: int, free: int) -> tuple[str | None, int]:
        """Why the waiting pass stops at head ``r`` (None if it admits it), and the chunk it would give."""
        config = self.config
        if r.request.arrival > t:
            return f"request {r.request.id} arrives at {r.request.arrival}", 0
        if len(self.running) >= config.max_seqs:
            return f"{len(self.running)} of max_seqs={config.max_seqs} run", 0
        if budget <= 0:
            return "the token budget is spent", 0
        n = r.known
        if config.chunked_prefill:
            n = min(n, budget)
        elif n > budget:
            return f"its {n} tokens exceed the {budget} left of the budget, unchunked", 0
        need = blocks_for(n, config.block_size)
        if need > free:
            return f"its {n} tokens need {need} blocks, {free} free", n
        if config.reserve_full_sequence and blocks_for(r.known, config.block_size) > free:
            whole = blocks_for(r.known, config.block_size)
            return f"its whole known length, {r.known} tokens, needs {whole} blocks (reserve_full_sequence), {free} free", n
        return None, n

    def judge_admission(self, t: int, r: _Request, n: int, budget: int, free: int) -> None:
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

    def end(self) -> None:
        """The end-of-trace claims: every abort happened, every request finished or was aborted."""
        self.overdue_aborts(math.inf)
        live = list(self.waiting.after) + list(self.running.after)
        for request_id in sorted(live, key=lambda i: fcfs_key(self.of[i].request)):
            r = self.of[request_id]
            self.report(
                "every_job_completes_once",
                f"request {request_id} is still {r.status} after the last tick: it never finishes nor is aborted",
                tick=self.previous_tick, ids=[request_id],
            )

    def close(self, records: list, result: dict) -> None:
        """``end``, then the result's per-request records and totals against what the trace says."""
        assert self.records, "close() checks records: make the Replay with records=True"
        self.end()
        self.check_records(records)
        self.check_totals(result)

    def check_records(self, records: list) -> None:
        listed = Counter(record["id"] for record in records)
        for request_id in self.of:
            if listed[request_id] != 1:
                self.report(
                    "every_job_completes_once",
                    f"result requests lists request {request_id} {listed[request_id]} times",
                    ids=[request_id], expected=1, actual=listed[request_id],
                )
        for request_id in listed:
            if request_id not in self.of:
                self.report(
                    "every_job_completes_once", f"result requests lists request {request_id}, which is not in the input",
                    ids=[request_id],
                )
        ids = [record["id"] for record in records]
        if ids != sorted(ids):
            self.report("metrics_consistent", f"result requests are ordered {ids}, not by id", expected=sorted(ids), actual=ids)
        for record in records:
            r = self.of.get(record["id"])
            if r is None:
                continue
            request = r.request
            request_id = request.id
            if not 0 <= record["generated"] <= request.output:
                self.report(
                    "nonnegative_remaining",
                    f"request {request_id}: generated={record['generated']}, outside 0..output={request.output}",
                    ids=[request_id], expected=f"0..{request.output}", actual=record["generated"],
                )
            if (record["finish"] is None) == (record["aborted"] is None):
                self.report(
                    "every_job_completes_once",
                    f"request {request_id}: finish={record['finish']} and aborted={record['aborted']}; "
                    "a request ends exactly one way",
                    ids=[request_id],
                )
            if record["computed"] != r.total:
                self.report(
                    "work_conservation",
                    f"request {request_id}: computed={record['computed']}, but the trace schedules {r.total} tokens for it",
                    ids=[request_id], expected=r.total, actual=record["computed"],
                )
            expect = {
                "arrival": request.arrival,
                "prompt": request.prompt,
                "output": request.output,
                "start": r.start,
                "first_token": r.first_token,
                "finish": r.finish,
                "aborted": r.aborted_at,
                "generated": r.generated,
                "preemptions": r.preemptions,
            }
            if ("abort" in record) != (request.abort is not None) or record.get("abort") != request.abort:
                self.report(
                    "metrics_consistent",
                    f"request {request_id}: abort={record.get('abort', '<absent>')}, the caller gave "
                    f"{'no abort' if request.abort is None else request.abort}",
                    ids=[request_id], expected=request.abort, actual=record.get("abort"),
                )
            for field, value in expect.items():
                if record[field] != value or type(record[field]) is not type(value):
                    self.report(
                        "metrics_consistent",
                        f"request {request_id}: {field}={record[field]}, the trace says {value}",
                        ids=[request_id], expected=value, actual=record[field],
                    )

    def check_totals(self, result: dict) -> None:
        ledger = {
            "computed_tokens": self.computed,
            "useful_tokens": self.useful,
            "recomputed_tokens": self.recomputed,
            "aborted_tokens": self.aborted,
        }
        for field, value in ledger.items():
            if result[field] != value:
                self.report(
                    "work_conservation", f"{field}={result[field]}, the trace says {value}", expected=value, actual=result[field]
                )
        parts = result["useful_tokens"] + result["recomputed_tokens"] + result["aborted_tokens"]
        if result["computed_tokens"] != parts:
            self.report(
                "work_conservation",
                f"computed_tokens={result['computed_tokens']} but useful + recomputed + aborted = {parts}",
                expected=parts, actual=result["computed_tokens"],
            )
        makespan = 0 if self.last_scheduled_tick is None else self.last_scheduled_tick + 1
        if result["makespan_ticks"] != makespan:
            self.report(
                "metrics_consistent",
                f"makespan_ticks={result['makespan_ticks']}, expected the last tick with scheduled work + 1 = {makespan}",
                expected=makespan, actual=result["makespan_ticks"],
            )
        if result["preemptions"] != self.preemptions:
            self.report(
                "metrics_consistent", f"preemptions={result['preemptions']}, the trace preempts {self.preemptions} times",
                expected=self.preemptions, actual=result["preemptions"],
            )
        ratio = token_utilization(self.computed, self.config.token_budget, makespan)
        if not math.isclose(result["token_utilization"], ratio, rel_tol=1e-9, abs_tol=0.0):
            self.report(
                "metrics_consistent",
                f"token_utilization={result['token_utilization']!r}, expected {self.computed}/"
                f"({self.config.token_budget}*{makespan}) = {ratio!r}",
                expected=ratio, actual=result["token_utilization"],
            )


def replay(obs: Observation) -> dict[str, Violation]:
    """Replay the result's trace once and return each broken invariant's earliest Violation."""
    state = Replay(obs.requests, obs.config, obs.policy)
    for entry in obs.trace:
        state.tick(entry)
    state.close(obs.records, obs.result)
    return state.found
