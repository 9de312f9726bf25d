"""The engine's state as its entries say: what the online harness knows between two steps.

An online engine reports only what each step did (a trace entry, or the ids it served);
the harness keeps, per request, what those reports imply under the model's own
bookkeeping rules (cached and generated tokens, blocks held, status, counters, queue
order), and can build from it the spec's ``State`` of either model, on which the
registry's state predicates run unchanged.  What a state cannot express (a request
scheduled before it was added, or after it ended) is kept as ``problems``, each named
by the invariant it breaks.  It follows any well-shaped report; ``entry_problem`` says
why a report is not well shaped.

With prefix caching on (``config.prefix_caching``), an entry's ``hits`` start an
admitted request's table and its cached tokens; a block may then be in several tables
(its count), a release gives back only the blocks that reach count 0, and the State it
builds carries the pool as the entries imply it (``spec.serving.cache.Pool``): block ids
renamed in the order the engine first takes them, the free queue as the freed lists fill
it, what each block holds by the tokens written into it, and the cache as the FCFS rules
register it.
"""

from __future__ import annotations

import spec
import spec.serving as serving
from spec.serving.cache import Pool, chain
from spec.serving.domain import Request, blocks_for, fcfs_key
from spec.serving.metrics import CACHE_ENTRY_KEY, ENTRY_KEYS, token_utilization

WAITING, RUNNING, FINISHED, ABORTED = "waiting", "running", "finished", "aborted"


def _is_int(value) -> bool:
    return type(value) is int


def _ids_ok(value) -> bool:
    return isinstance(value, (list, tuple)) and all(_is_int(i) for i in value)


def _pairs_ok(value, second) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and _is_int(p[0]) and second(p[1]) for p in value
    )


def entry_problem(entry) -> str | None:
    """Why ``entry`` is not a well-shaped trace entry of the serving model (its tick aside), or None."""
    if not isinstance(entry, dict):
        return f"step() returned {entry!r}: expected a dict (a trace entry) or None"
    missing = [key for key in ENTRY_KEYS[1:] if key not in entry]
    if missing:
        return f"step() returned an entry without {missing[0]!r}: every list of a trace entry is present"
    if not _pairs_ok(entry["scheduled"], _is_int):
        return f"entry.scheduled={entry['scheduled']!r}: expected a list of [id, n] pairs of ints"
    for key in ("preempted", "aborted", "finished"):
        if not _ids_ok(entry[key]):
            return f"entry.{key}={entry[key]!r}: expected a list of int ids"
    for key in ("freed", "allocated"):
        if not _pairs_ok(entry[key], _ids_ok):
            return f"entry.{key}={entry[key]!r}: expected a list of [id, [block ids]] pairs"
    if CACHE_ENTRY_KEY in entry and not _pairs_ok(entry[CACHE_ENTRY_KEY], _ids_ok):
        return f"entry.hits={entry[CACHE_ENTRY_KEY]!r}: expected a list of [id, [block ids]] pairs"
    return None


def plain_entry(tick: int, entry: dict) -> dict:
    """The entry at the harness's ``tick``, its lists copied as plain lists (other keys dropped; ``hits`` kept)."""
    plain = {
        "tick": tick,
        "scheduled": [[i, n] for i, n in entry["scheduled"]],
        "preempted": list(entry["preempted"]),
        "aborted": list(entry["aborted"]),
        "freed": [[i, list(blocks)] for i, blocks in entry["freed"]],
        "allocated": [[i, list(blocks)] for i, blocks in entry["allocated"]],
        "finished": list(entry["finished"]),
    }
    if CACHE_ENTRY_KEY in entry:
        plain[CACHE_ENTRY_KEY] = [[i, list(blocks)] for i, blocks in entry[CACHE_ENTRY_KEY]]
    return plain


def is_idle(entry: dict) -> bool:
    """True when a well-shaped entry reports nothing at all (no list, no hit, no block table): the tick did nothing."""
    tables = entry.get("blocks")
    return (not any(entry[key] for key in ENTRY_KEYS[1:]) and not entry.get(CACHE_ENTRY_KEY)
            and not (isinstance(tables, dict) and any(tables.values())))


class _Row:
    """One request as the entries tell it."""

    def __init__(self, request: Request, caller: dict) -> None:
        self.request = request
        self.caller = caller  # the caller's dict, for the result's record
        self.status = WAITING
        self.computed = self.generated = self.preemptions = self.total = self.recomputed = 0
        self.cached = 0  # tokens taken from cache hits, over its admissions
        self.blocks: list[int] = []
        self.start = self.first_token = self.admitted = self.finish = self.aborted = None

    @property
    def known(self) -> int:
        return self.request.prompt + self.generated

    def progress(self, rename=None) -> serving.Progress:
        blocks = tuple(self.blocks) if rename is None else tuple(rename[b] for b in self.blocks)
        return serving.Progress(
            self.request, self.computed, self.generated, blocks, self.start, self.first_token,
            self.preemptions, self.total, self.recomputed, self.admitted, self.cached,
        )


class ServingShadow:
    """The serving engine's state implied by its entries: rows, queues, blocks, the ledger."""

    def __init__(self, config: serving.Config) -> None:
        self.config = config
        self.rows: dict[int, _Row] = {}
        self.front: list[int] = []  # preempted, head first
        self.fresh: list[int] = []  # never admitted, FCFS order
        self.running: list[int] = []  # admission order
        self.ended: list[tuple[int, str]] = []  # (id, finished|aborted) in order of leaving
        self.computed = self.useful = self.recomputed = self.aborted_tokens = 0
        self.latest: serving.Entry | None = None
        self.clock = 0
        self.trace: list[dict] = []
        self.problems: list[tuple[str, str, int]] = []  # (invariant, message, tick)
        self.owner: dict[int, int] = {}  # block id -> the request whose entries say it holds it
        self.cache = _CacheShadow(config) if config.prefix_caching else None  # prefix caching: the pool they imply
        self.hit_tokens = 0

    # -- the client's side ---------------------------------------------------------

    def add(self, request: Request, caller: dict) -> None:
        if request.tokens is not None and not isinstance(request.tokens, tuple):
            request = request._replace(tokens=tuple(request.tokens))  # as spec.serving.validate gives them
        self.rows[request.id] = _Row(request, caller)
        self.fresh.append(request.id)
        self.fresh.sort(key=lambda i: fcfs_key(self.rows[i].request))

    def set_abort(self, request_id: int, tick: int) -> None:
        row = self.rows[request_id]
        row.request = row.request._replace(abort=tick)

    @property
    def live(self) -> list[int]:
        return self.front + self.fresh + self.running

    @property
    def waiting(self) -> list[int]:
        return self.front + self.fresh

    def held(self) -> dict[int, list[int]]:
        """The blocks each running request holds, as the entries say (copies)."""
        return {i: list(self.rows[i].blocks) for i in self.running}

    # -- one step ------------------------------------------------------------------

    def _problem(self, invariant: str, message: str, tick: int) -> None:
        self.problems.append((invariant, message, tick))

    def _leave_queues(self, request_id: int) -> None:
        for queue in (self.front, self.fresh, self.running):
            if request_id in queue:
                queue.remove(request_id)

    def _row(self, request_id: int, tick: int, what: str) -> _Row | None:
        row = self.rows.get(request_id)
        if row is None:
            self._problem("no_start_before_arrival", f"tick {tick} {what} request {request_id!r}, "
                          "which the harness has not added", tick)
        return row

    def _give_back(self, request_id, blocks) -> None:
        """Take ``blocks`` out of what ``request_id`` holds (the ones it holds; the oracle judges the rest)."""
        row = self.rows.get(request_id)
        if row is not None:
            for block in blocks:
                if block in row.blocks:
                    row.blocks.remove(block)
                    if self.owner.get(block) == request_id:
                        del self.owner[block]

    def apply(self, tick: int, entry: dict) -> dict:
        """Follow one well-shaped entry at the harness's ``tick``; return it as the trace records it."""
        plain = plain_entry(tick, entry)
        self.trace.append(plain)
        for request_id in plain["aborted"]:
            row = self._row(request_id, tick, "aborts")
            if row is None:
                continue
            if row.status in (FINISHED, ABORTED):
                self._problem("every_job_completes_once", f"tick {tick} aborts request {request_id}, "
                              f"which was already {row.status}", tick)
                continue
            self._leave_queues(request_id)
            row.status, row.aborted = ABORTED, tick
            self.aborted_tokens += row.computed
            self.ended.append((request_id, ABORTED))
        for request_id in plain["preempted"]:
            row = self._row(request_id, tick, "preempts")
            if row is None or row.status != RUNNING:
                if row is not None:
                    self._problem("every_job_completes_once", f"tick {tick} preempts request {request_id}, "
                                  f"which is {row.status}, not running", tick)
                continue
            self.running.remove(request_id)
            self.front.insert(0, request_id)
            row.status = WAITING
            self.recomputed += row.computed
            row.recomputed += row.computed
            row.computed = 0
            row.preemptions += 1
        done_now = set(plain["aborted"]) | set(plain["preempted"])
        freed_now = {i: set(b) for i, b in plain["freed"]}
        hits_of = {i: b for i, b in plain.get(CACHE_ENTRY_KEY, ())}
        writes = []  # (request id, cached before, cached after) of each scheduled request, in scheduled order
        for request_id, n in plain["scheduled"]:
            row = self._row(request_id, tick, "schedules")
            if row is None:
                continue
            if row.status in (FINISHED, ABORTED):
                self._problem("every_job_completes_once", f"tick {tick} schedules request {request_id}, "
                              f"which was already {row.status}", tick)
                continue
            admitted = row.status == WAITING
            if admitted:
                self._leave_queues(request_id)
                self.running.append(request_id)
                row.status = RUNNING
                row.admitted = tick
                if row.start is None:
                    row.start = tick
                hit = len(hits_of.get(request_id, ())) * self.config.block_size  # an admission's cached prefix
                row.computed += hit
                row.cached += hit
                self.hit_tokens += hit
            writes.append((request_id, row.computed, row.computed + n, admitted))
            row.computed += n
            row.total += n
            self.computed += n
            if row.computed == row.known:
                row.generated += 1
                if row.first_token is None:
                    row.first_token = tick + 1
        for request_id in plain["finished"]:
            row = self._row(request_id, tick, "finishes")
            if row is None or row.status != RUNNING:
                if row is not None:
                    self._problem("every_job_completes_once", f"tick {tick} finishes request {request_id}, "
                                  f"which is {row.status}, not running", tick)
                continue
            self.running.remove(request_id)
            row.status, row.finish = FINISHED, tick + 1
            self.useful += row.request.work
            self.ended.append((request_id, FINISHED))
        if self.cache is not None:
            self.cache.follow(self, tick, plain, writes, hits_of)
        else:
            self._follow_blocks(tick, plain, done_now, freed_now)
        size = self.config.block_size
        for request_id, _ in plain["scheduled"]:
            row = self.rows.get(request_id)
            if row is not None and row.status == RUNNING and len(row.blocks) != blocks_for(row.computed, size):
                self._problem("kv_exact", f"after tick {tick} request {request_id} holds {len(row.blocks)} blocks "
                              f"for {row.computed} cached tokens, not {blocks_for(row.computed, size)}", tick)
        if isinstance(entry.get("blocks"), dict):  # the blocks form: every table, not only the scheduled requests'
            self.check_tables(tick, entry["blocks"], plain)
        self.latest = serving.Entry(
            tick,
            tuple((i, n) for i, n in plain["scheduled"]),
            tuple(plain["preempted"]),
            tuple(plain["aborted"]),
            tuple((i, tuple(b)) for i, b in plain["freed"]),
            tuple((i, tuple(b)) for i, b in plain["allocated"]),
            tuple(plain["finished"]),
            None if self.config.prefix_caching is None else tuple((i, tuple(b)) for i, b in hits_of.items()),
        )
        self.clock = tick + 1
        return plain

    def _follow_blocks(self, tick: int, plain: dict, done_now: set, freed_now: dict) -> None:
        """Blocks without prefix caching: each held by one request; a leaver gives back all it held."""
        # what the aborted and preempted held before this tick is given back first, so that one re-admitted
        # in this tick may get the same ids again; every other freed id is given back after the allocations
        unfreed = [[request_id, list(blocks)] for request_id, blocks in plain["freed"]]
        for pair in unfreed:
            if pair[0] in done_now and pair[0] in self.rows:
                held = list(self.rows[pair[0]].blocks)
                pair[1], early = [b for b in pair[1] if b not in held], [b for b in pair[1] if b in held]
                self._give_back(pair[0], early)
        if plain.get(CACHE_ENTRY_KEY):
            self._problem("kv_exclusive", f"tick {tick} lists hits {plain[CACHE_ENTRY_KEY]} with prefix_caching off: "
                          "every block a request holds is its own, taken from the pool", tick)
        for request_id, blocks in plain["allocated"]:
            row = self.rows.get(request_id)
            if row is not None:
                for block in blocks:
                    holder = self.owner.get(block)
                    if holder is not None and not (holder in done_now and block in freed_now.get(holder, ())):
                        self._problem("kv_exclusive", f"tick {tick} allocates block {block} to request {request_id} "
                                      f"while request {holder} holds it", tick)
                    if not 0 <= block < self.config.num_blocks:
                        self._problem("kv_capacity", f"tick {tick} allocates block {block}: ids are "
                                      f"0..{self.config.num_blocks - 1}", tick)
                    self.owner[block] = request_id
                row.blocks.extend(blocks)
        for request_id, blocks in unfreed:
            self._give_back(request_id, blocks)
        for request_id in set(plain["aborted"]) | set(plain["preempted"]) | set(plain["finished"]):
            row = self.rows.get(request_id)
            if row is not None and row.blocks and row.status != RUNNING:  # not re-admitted in this tick
                self._problem("kv_exact", f"request {request_id} left the running list in tick {tick} but freed "
                              f"does not give back its blocks {row.blocks}: a leak", tick)

    def check_tables(self, tick: int, tables: dict, plain: dict) -> None:
        """Judge every block table the engine reported for ``tick`` (the ``blocks`` form), once the entry is applied.

        Allocations and frees are derived from the tables of the requests the entry names;
        this reads every table: no block twice in one table, a running request's table what
        the entries say it holds, a request that finished in the tick what it ran with, and
        any other (waiting, ended, unknown) none.  Without prefix caching also no block in
        two tables and every id in the pool; with it a block may be in several running
        tables (its count) and ids are judged up to renaming, as everywhere else."""
        unreadable = next((i for i in sorted(tables) if not _ids_ok(tables[i])), None)
        if unreadable is not None:
            self._problem("well_typed", f"tick {tick}: blocks[{unreadable}]={tables[unreadable]!r}: expected a list of "
                          "int block ids", tick)
            return
        shared = self.cache is not None
        owner: dict[int, int] = {}
        status = {i: (self.rows[i].status if i in self.rows else "not added") for i in tables}
        for key in ("preempted", "aborted", "finished"):
            status.update({i: f"{key} in this tick" for i in plain[key] if i in status})
        for request_id in sorted(tables):
            mine: set = set()
            for block in tables[request_id]:
                if block in mine:
                    self._problem("kv_exclusive", f"tick {tick}: block {block} is twice in the table of request "
                                  f"{request_id}", tick)
                elif block in owner and not shared:
                    self._problem("kv_exclusive", f"tick {tick}: block {block} is in the tables of request "
                                  f"{owner[block]} ({status[owner[block]]}) and request {request_id} "
                                  f"({status[request_id]})", tick)
                mine.add(block)
                owner.setdefault(block, request_id)
                if not shared and not 0 <= block < self.config.num_blocks:
                    self._problem("kv_capacity", f"tick {tick}: the table of request {request_id} shows block {block!r}: "
                                  f"ids are 0..{self.config.num_blocks - 1}", tick)
        gave_back = {i for i, _ in plain["freed"] if i in plain["finished"]}
        if shared:  # a finisher whose blocks others still hold gives none back, yet its table showed them
            gave_back |= {i for i in plain["finished"] if i in self.rows and self.rows[i].status == FINISHED}
        for request_id in sorted(tables):
            table, row = sorted(tables[request_id]), self.rows.get(request_id)
            if row is not None and row.status == RUNNING:
                if table != sorted(row.blocks):
                    self._problem("kv_exact", f"tick {tick}: the table of running request {request_id} shows {table}; "
                                  f"the entries say it holds {sorted(row.blocks)}", tick)
            elif request_id in gave_back:
                continue  # its table as the tick ran it is what it gave back (kv_exact judges the count)
            elif table:
                self._problem("kv_exact", f"tick {tick}: request {request_id} is {status[request_id]}, yet its table "
                              f"shows blocks {table}: only a running request holds blocks", tick)

    # -- what it implies -------------------------------------------------------------

    def state(self) -> serving.State:
        """The spec's State these entries imply (every added request, the harness's clock)."""
        rows = self.rows
        rename = None if self.cache is None else self.cache.rename
        ended = {FINISHED: [], ABORTED: []}
        for request_id, how in self.ended:
            row = rows[request_id]
            ended[how].append(serving.Ended(row.progress(rename), row.finish if how == FINISHED else row.aborted))
        latest = self.latest
        if self.cache is not None and latest is not None:
            latest = self.cache.renamed(latest)
        return serving.State(
            tuple(sorted((row.request for row in rows.values()), key=fcfs_key)),
            self.config,
            self.clock,
            tuple(rows[i].progress(rename) for i in self.waiting),
            tuple(rows[i].progress(rename) for i in self.running),
            tuple(ended[FINISHED]),
            tuple(ended[ABORTED]),
            serving.Ledger(self.computed, self.useful, self.recomputed, self.aborted_tokens, self.hit_tokens),
            latest,
            None if self.cache is None else self.cache.pool(),
        )

    def result(self, trace: list) -> dict:
        """The contract's result: ``trace`` as given, per-request records and totals derived from the entries."""
        records = []
        for request_id in sorted(self.rows):
            row = self.rows[request_id]
            record = dict(row.caller)
            record.update(start=row.start, first_token=row.first_token, finish=row.finish, aborted=row.aborted,
                          generated=row.generated, preemptions=row.preemptions, computed=row.total)
            if self.config.prefix_caching is not None:
                record["cached"] = row.cached
            records.append(record)
        makespan = max((e["tick"] + 1 for e in self.trace if e["scheduled"]), default=0)
        return {
            "trace": trace,
            "requests": records,
            "makespan_ticks": makespan,
            "computed_tokens": self.computed,
            "useful_tokens": self.useful,
            "recomputed_tokens": self.recomputed,
            "aborted_tokens": self.aborted_tokens,
            "token_utilization": token_utilization(self.computed, self.config.token_budget, makespan),
            "preemptions": sum(row.preemptions for row in self.rows.values()),
            **({"cache_hit_tokens": self.hit_tokens} if self.config.prefix_caching is not None else {}),
        }

    def view_problems(self, view, tick: int) -> list[tuple[str, str, int]]:
        """What ``view()`` after ``tick`` breaks: each (invariant, message, tick), compared with the entries."""
        where = f"after tick {tick}: view()"
        if not isinstance(view, dict) or not all(key in view for key in ("waiting", "running", "blocks")):
            return [("well_typed", f"{where} returned {view!r}: expected a dict with waiting, running, blocks", tick)]
        waiting, running, blocks = view["waiting"], view["running"], view["blocks"]
        if not (_ids_ok(waiting) and _ids_ok(running) and isinstance(blocks, dict)
                and all(_is_int(k) and _ids_ok(v) for k, v in blocks.items())):
            return [("well_typed", f"{where} = {view!r}: expected int ids and {{id: [block ids]}}", tick)]
        found = []
        both = list(waiting) + list(running)
        if len(set(both)) != len(both):
            twice = sorted({i for i in both if both.count(i) > 1})
            found.append(("no_duplicate_active", f"{where} lists request {twice[0]} twice in waiting and running", tick))
        if len(running) > self.config.max_seqs:
            found.append(("slot_bound", f"{where} shows {len(running)} running, more than max_seqs={self.config.max_seqs}", tick))
        if set(running) != set(self.running) or set(waiting) != set(self.waiting):
            found.append(("every_job_completes_once",
                          f"{where} shows waiting {sorted(waiting)} and running {sorted(running)}; the entries say "
                          f"waiting {sorted(self.waiting)} and running {sorted(self.running)}", tick))
        held = [b for ids in blocks.values() for b in ids]
        shared = self.cache is not None  # with prefix caching a block may be in several tables, never twice in one
        twice = sorted({b for ids in blocks.values() for b in ids if list(ids).count(b) > 1} if shared
                       else {b for b in held if held.count(b) > 1})
        if twice:
            found.append(("kv_exclusive", f"{where} shows block {twice[0]} held twice", tick))
        if not shared and any(not 0 <= b < self.config.num_blocks for b in held):
            found.append(("kv_capacity", f"{where} shows a block id outside 0..{self.config.num_blocks - 1}", tick))
        for request_id in sorted(set(blocks) | set(self.running)):
            shown = list(blocks.get(request_id, []))
            row = self.rows.get(request_id)
            if row is None or row.status != RUNNING:
                if shown:
                    found.append(("kv_exact", f"{where} shows request {request_id} holding {shown}, "
                                  "but it is not running: a leak", tick))
                continue
            need = blocks_for(row.computed, self.config.block_size)
            if len(shown) != need or sorted(shown) != sorted(row.blocks):
                found.append(("kv_exact", f"{where} shows request {request_id} holding {shown}; with "
                              f"{row.computed} tokens cached it holds {need}, and the entries say {row.blocks}", tick))
        return found


class _CacheShadow:
    """The pool with prefix caching as an engine's entries imply it (engine ids kept, renamed only for the State).

    Per block: its holders (its count), what it holds (the chain of the tokens written into
    it once full, reset when it is taken), and whether the FCFS rules registered it; the
    free queue as the freed lists fill it (each list last block first, lists in the order
    given).  A problem the harness cannot follow ends the drive: a block taken while another
    request holds it (its KV overwritten: no_false_sharing), a freed block still held or not
    held by its request, a block that reaches count 0 but is not given back (refcount_exact)."""

    def __init__(self, config: serving.Config) -> None:
        self.config = config
        self.rename: dict[int, int] = {}  # the engine's id -> the order it first appears (allocations first)
        self.holders: dict[int, set] = {}  # block -> the requests holding it (never empty)
        self.returned: dict[int, None] = {}  # blocks given back at count 0, oldest first
        self.content: dict[int, object] = {}  # block -> the chain written into it (full blocks)
        self.registered: dict[int, tuple] = {}  # block -> (registration number, chain), as the FCFS rules register
        self.registrations = 0

    def _name(self, blocks) -> None:
        for block in blocks:
            self.rename.setdefault(block, len(self.rename))

    def _release(self, shadow, tick: int, leaving: list, freed: list, why: str) -> None:
        """One role's releases: the tables of ``leaving`` (in the tick's release order) give their blocks back;
        ``freed`` must list those at 0, each under the request whose release brings it there (the last holder)."""
        gone: dict[int, int] = {}
        for request_id in leaving:
            row = shadow.rows[request_id]
            for block in row.blocks:
                holders = self.holders.get(block)
                if holders is None:
                    continue
                holders.discard(request_id)
                if not holders:
                    del self.holders[block]
                    gone[block] = request_id
            row.blocks = []
        listed = set()
        for request_id, blocks in freed:
            for block in blocks:
                if block in self.holders:
                    shadow._problem("refcount_exact", f"tick {tick} frees block {block} for request {request_id} "
                                    f"({why}) while request {sorted(self.holders[block])[0]} still holds it", tick)
                elif block not in gone:
                    shadow._problem("refcount_exact", f"tick {tick} frees block {block} for request {request_id} "
                                    f"({why}), which it does not hold", tick)
                elif gone[block] != request_id and request_id in leaving:
                    shadow._problem("refcount_exact", f"tick {tick} frees block {block} for request {request_id} "
                                    f"({why}), but request {gone[block]} also holds it and releases it later in the "
                                    "tick's order, so the count reaches 0 by its release", tick)
                listed.add(block)
            for block in reversed(blocks):
                self.returned[block] = None
        for block, request_id in gone.items():
            if block not in listed:
                shadow._problem("refcount_exact", f"block {block} of request {request_id} reaches count 0 in tick "
                                f"{tick} but freed does not give it back: a leak", tick)

    def _take(self, shadow, tick: int, request_id: int, blocks, hit: bool) -> None:
        row = shadow.rows.get(request_id)
        if row is None:
            return
        for block in blocks:
            holders = self.holders.setdefault(block, set())
            if block in row.blocks:
                shadow._problem("kv_exclusive", f"tick {tick}: request {request_id} holds block {block} twice", tick)
            elif holders and not hit:
                shadow._problem("no_false_sharing", f"tick {tick} takes block {block} from the pool for request "
                                f"{request_id} while request {sorted(holders)[0]} holds it: its KV is overwritten", tick)
            if not holders:
                self.returned.pop(block, None)
            holders.add(request_id)
            row.blocks.append(block)
            if not hit:
                self.content.pop(block, None)
                self.registered.pop(block, None)  # evicted

    def follow(self, shadow, tick: int, plain: dict, writes: list, hits_of: dict) -> None:
        """The tick's blocks: the aborted and preempted give back, each scheduled request takes its hits and new
        blocks in scheduled order and writes its tokens, then the finished give back."""
        for key in ("allocated", CACHE_ENTRY_KEY, "freed"):
            for _, blocks in plain.get(key, ()):
                self._name(blocks)
        roles = {key: [i for i in plain[key] if i in shadow.rows] for key in ("aborted", "preempted", "finished")}
        early = set(roles["aborted"]) | set(roles["preempted"])
        aborted = sorted(roles["aborted"], key=lambda i: fcfs_key(shadow.rows[i].request))
        self._release(shadow, tick, aborted + roles["preempted"],
                      [pair for pair in plain["freed"] if pair[0] in early], "aborted or preempted")
        allocated: dict[int, list] = {}
        for request_id, blocks in plain["allocated"]:
            allocated.setdefault(request_id, []).extend(blocks)
        size = self.config.block_size
        for request_id, before, after, admitted in writes:
            if admitted:
                self._take(shadow, tick, request_id, hits_of.get(request_id, ()), hit=True)
            self._take(shadow, tick, request_id, allocated.pop(request_id, ()), hit=False)
            row = shadow.rows[request_id]
            for j in range(before // size, min(after // size, len(row.blocks))):
                block = row.blocks[j]
                self.content[block] = chain(row.request, j, size)
                if block not in self.registered:
                    self.registered[block] = (self.registrations, self.content[block])
                    self.registrations += 1
        for request_id, blocks in allocated.items():  # to a request the tick does not schedule
            self._take(shadow, tick, request_id, blocks, hit=False)
        finished = set(roles["finished"])
        running = {write[0]: k for k, write in enumerate(writes)}  # the finishers release in running order
        leaving = sorted((i for i in roles["finished"] if shadow.rows[i].status == FINISHED),
                         key=lambda i: running.get(i, len(running)))
        self._release(shadow, tick, leaving,
                      [pair for pair in plain["freed"] if pair[0] in finished and pair[0] not in early], "finished")
        others = [pair for pair in plain["freed"] if pair[0] not in early and pair[0] not in finished]
        for request_id, blocks in others:
            row = shadow.rows.get(request_id)
            if row is not None:
                for block in blocks:
                    if block in row.blocks:
                        row.blocks.remove(block)
                        holders = self.holders.get(block, set())
                        holders.discard(request_id)
                        if not holders:
                            self.holders.pop(block, None)
                            self.returned[block] = None

    def pool(self) -> Pool:
        """The spec's Pool these entries imply, ids renamed in the order first taken."""
        original = sorted(self.rename, key=self.rename.get)
        cache = sorted(self.registered.items(), key=lambda item: item[1][0])
        return Pool(
            len(original),
            tuple(self.rename[b] for b in self.returned),
            tuple((chain_, self.rename[b]) for b, (_, chain_) in cache),
            tuple(self.content.get(b) for b in original),
        )

    def renamed(self, entry: serving.Entry) -> serving.Entry:
        def ids(pairs):
            return tuple((i, tuple(self.rename[b] for b in blocks)) for i, blocks in pairs)

        return entry._replace(freed=ids(entry.freed), allocated=ids(entry.allocated),
                              hits=None if entry.hits is None else ids(entry.hits))


class ChapterShadow:
    """The chapter engine's state implied by the ids it served: waiting, active, done."""

    def __init__(self, slots: int, continuous: bool) -> None:
        self.slots, self.continuous = slots, continuous
        self.jobs: dict[int, spec.Job] = {}
        self.start: dict[int, int] = {}
        self.remaining: dict[int, int] = {}
        self.active: list[int] = []  # admission order
        self.done: list[spec.Completion] = []
        self.busy = 0
        self.clock = 0
        self.served: tuple = ()
        self.problems: list[tuple[str, str, int]] = []

    def add(self, job: spec.Job) -> None:
        self.jobs[job.id] = job
        self.remaining[job.id] = job.tokens

    @property
    def waiting(self) -> list[int]:
        return sorted((i for i in self.jobs if i not in self.start), key=lambda i: spec.fifo_key(self.jobs[i]))

    @property
    def live(self) -> list[int]:
        return [i for i in self.jobs if self.remaining[i] > 0]

    def apply(self, tick: int, served: list) -> None:
        """Follow one step's served ids at the harness's ``tick``."""
        for job_id in served:
            if job_id not in self.jobs:
                self.problems.append(("no_start_before_arrival",
                                      f"tick {tick} serves job {job_id!r}, which the harness has not added", tick))
                continue
            if self.remaining[job_id] == 0:
                self.problems.append(("every_job_completes_once",
                                      f"tick {tick} serves job {job_id}, which has had all its tokens", tick))
                continue
            if job_id not in self.start:
                self.start[job_id] = tick
                self.active.append(job_id)
            self.remaining[job_id] -= 1
            self.busy += 1
            if self.remaining[job_id] == 0:
                self.active.remove(job_id)
                self.done.append(spec.Completion(self.jobs[job_id], self.start[job_id], tick + 1))
        self.served = tuple(served)
        self.clock = tick + 1

    def state(self) -> spec.State:
        """The spec's State the served ids imply (every added job, the harness's clock)."""
        jobs = tuple(sorted(self.jobs.values(), key=spec.fifo_key))
        active = tuple(spec.Running(self.jobs[i], self.start[i], self.remaining[i]) for i in self.active)
        return spec.State(jobs, self.slots, self.continuous, self.clock, tuple(self.jobs[i] for i in self.waiting),
                          active, tuple(self.done), self.busy, self.served)

    def view_problems(self, view, tick: int) -> list[tuple[str, str, int]]:
        """What ``view()`` (waiting and running ids) after ``tick`` breaks, compared with the served ids."""
        where = f"after tick {tick}: view()"
        if not isinstance(view, dict) or not all(k in view for k in ("waiting", "running")) \
                or not (_ids_ok(view["waiting"]) and _ids_ok(view["running"])):
            return [("well_typed", f"{where} returned {view!r}: expected a dict with waiting and running ids", tick)]
        found = []
        if len(view["running"]) > self.slots:
            found.append(("slot_bound", f"{where} shows {len(view['running'])} running in {self.slots} slots", tick))
        if set(view["running"]) != set(self.active) or set(view["waiting"]) != set(self.waiting):
            found.append(("every_job_completes_once",
                          f"{where} shows waiting {sorted(view['waiting'])} and running {sorted(view['running'])}; "
                          f"the served ids say waiting {sorted(self.waiting)} and running {sorted(self.active)}", tick))
        return found
