"""Drives vidur 0.0.9's replica schedulers (vLLM-, Sarathi- and Orca-style) through the serving model's online protocol, with no execution model.

What it establishes: ``schedcheck verify --model serving --online FILE.py:make --policy
none`` on ``vidur_vllm.py``, ``vidur_sarathi.py`` or ``vidur_orca.py`` checks the
scheduler's own ``on_schedule`` / ``on_stage_end`` / ``on_batch_end`` and vidur's own
``Request``, ``Batch`` and ``BatchStage`` entities (the files of the installed wheel,
unchanged) against every policy-free invariant of the serving model after every step.

How the modules are loaded: ``vidur.execution_time_predictor`` (whose ``__init__``
imports scikit-learn through the predictor registry) and ``vidur.scheduler`` (whose
``__init__`` imports the global schedulers) are registered with
``engine_loading.bare_package``; their base predictor module and the replica scheduler
modules then run from the installed files and need nothing outside the standard
library.  Two stubs stand in for the simulator's environment: the execution-time
predictor (every batch stage takes exactly 1 time unit, so a step is one iteration)
and the ``MemoryPlanner`` the base scheduler builds (it sizes a batch from a GPU's
memory and a model's parameters; here it answers ``max_seqs``, so ``batch_size_cap``
governs).  vidur's global id counters (``Request._id``, ``Batch._id``,
``BatchStage._id``) are reset in every ``make``.

The mapping (each an assumption, stated in docs/engines.md too):
- a request is a vidur ``Request(arrived_at=arrival, num_prefill_tokens=prompt,
  num_decode_tokens=output)``: vidur counts the first output token as made by the
  prefill and finishes at ``prompt + output`` processed tokens, which is the model's
  ``prompt + output - 1`` computed tokens and ``output`` generated;
- ``batch_size_cap = max_seqs`` (one pipeline stage), ``num_blocks = num_blocks``,
  ``block_size = block_size``, ``max_tokens_in_batch = token_budget`` (vLLM-style),
  ``chunk_size = token_budget`` (Sarathi-style; Orca-style has no token limit),
  ``watermark_blocks_fraction`` vidur's default 0.01, and the request generator's
  ``max_tokens = num_blocks * block_size`` (the longest request the pool can hold:
  Orca-style reserves ``max_tokens // block_size`` blocks per request);
- ``chunked_prefill`` has no counterpart: Sarathi-style always chunks, the other two
  never do; the config is run as it is (no ValueError: the harness would count it as
  a rejected valid call);
- vidur counts blocks (``_allocation_map``: request id -> number of blocks) but has no
  block ids: the adapter names them, lowest free id first, so a count that exceeds
  ``num_blocks`` shows as an id out of range; the block-id claims (no block held
  twice) are therefore the adapter's, while the counts (``kv_exact``, ``kv_capacity``)
  are vidur's;
- a step is one iteration at time t: ``on_schedule(t)``, the batch and its stage
  scheduled, the stage ended at t + 1, ``on_stage_end``, ``batch.on_batch_end(t + 1)``,
  ``on_batch_end``, in the order of vidur's own events (ReplicaSchedule,
  BatchStageArrival, ReplicaStageSchedule, BatchStageEnd, BatchEnd); ``scheduled`` is
  the batch's ``num_q_tokens``; ``preempted`` are the requests ``on_schedule``
  restarted (vidur's ``restart()``: blocks freed, back at the head of the queue; one
  may be re-admitted by the same ``on_schedule``, and is then preempted and scheduled
  in one tick); ``finished`` those the batch completed; ``freed`` and ``allocated``
  follow vidur's counts (a restarted, aborted or finished request gives back its ids,
  a grown count takes new ones);
- vidur has no abort: ``abort(id)`` is the adapter's, applied at the start of the next
  step (the request leaves the request queue and the running list, and ``free`` gives
  its blocks back);
- with ``$SCHEDCHECK_ENGINE_TALLY`` naming a file, each process appends its counts of
  engines made, requests added and steps run at exit (``engine_loading.Tally``);
- ``view()``: ``waiting`` is vidur's request queue, ``running`` the requests holding
  blocks, ``blocks`` their tables.
"""

from __future__ import annotations

import sys
import types

import engine_loading

SCHEDULERS = {
    "vllm": ("vidur.scheduler.replica_scheduler.vllm_replica_scheduler", "VLLMReplicaScheduler"),
    "sarathi": ("vidur.scheduler.replica_scheduler.sarathi_replica_scheduler", "SarathiReplicaScheduler"),
    "orca": ("vidur.scheduler.replica_scheduler.orca_replica_scheduler", "OrcaReplicaScheduler"),
}
TALLIES: dict = {}  # kind -> engine_loading.Tally
WATERMARK_BLOCKS_FRACTION = 0.01  # vidur 0.0.9's default (BaseReplicaSchedulerConfig)


class _UnitTime:
    """An execution time of exactly one unit per batch stage."""

    total_time = 1
    model_time = 1


class _UnitTimePredictor:
    """The stubbed execution-time predictor: every batch stage takes one time unit."""

    def get_execution_time(self, batch, pipeline_stage):
        return _UnitTime()


class _MemoryPlanner:
    """The stubbed memory planner: the batch size is the configured cap."""

    def __init__(self, replica_config, replica) -> None:
        self._cap = replica.max_batch_size

    def get_max_batch_size(self) -> int:
        return self._cap

    def get_max_request_slots(self) -> int:
        return self._cap


def load(kind: str) -> types.SimpleNamespace:
    """vidur's scheduler class ``kind`` (vllm, sarathi, orca) and its entities, from the installed files."""
    engine_loading.bare_package("vidur")
    predictor = engine_loading.bare_package("vidur.execution_time_predictor")
    engine_loading.bare_package("vidur.scheduler")
    if not hasattr(predictor, "BaseExecutionTimePredictor"):
        base = engine_loading.load("vidur.execution_time_predictor.base_execution_time_predictor")
        predictor.BaseExecutionTimePredictor = base.BaseExecutionTimePredictor
    base_scheduler = engine_loading.load("vidur.scheduler.replica_scheduler.base_replica_scheduler")
    base_scheduler.MemoryPlanner = _MemoryPlanner
    module, name = SCHEDULERS[kind]
    return types.SimpleNamespace(
        scheduler=getattr(engine_loading.load(module), name),
        Request=engine_loading.load("vidur.entities.request").Request,
        Batch=engine_loading.load("vidur.entities.batch").Batch,
        BatchStage=engine_loading.load("vidur.entities.batch_stage").BatchStage,
    )


class VidurAdapter:
    """A vidur replica scheduler behind add_request, abort, step() -> entry and view()."""

    def __init__(self, config: dict, modules: types.SimpleNamespace, kind: str) -> None:
        self._tally = TALLIES.setdefault(kind, engine_loading.Tally("vidur_" + kind))
        self._tally.add("makes")
        for entity in (modules.Request, modules.Batch, modules.BatchStage):
            entity._id = -1  # vidur's global id counters, as in a fresh process
        self._Request = modules.Request
        self.num_blocks = config["num_blocks"]
        replica_config = types.SimpleNamespace(block_size=config["block_size"], enable_sequence_pipeline_parallel=False)
        scheduler_config = types.SimpleNamespace(
            num_blocks=config["num_blocks"], batch_size_cap=config["max_seqs"],
            watermark_blocks_fraction=WATERMARK_BLOCKS_FRACTION,
            max_tokens_in_batch=config["token_budget"], chunk_size=config["token_budget"])
        generator_config = types.SimpleNamespace(max_tokens=config["num_blocks"] * config["block_size"])
        replica = types.SimpleNamespace(id=0, max_batch_size=config["max_seqs"])
        self.scheduler = modules.scheduler(replica_config, scheduler_config, generator_config, replica, 1,
                                           _UnitTimePredictor())
        self._time = 0
        self._requests = {}  # model id -> vidur Request
        self._ids = {}  # vidur id -> model id
        self._tables = {}  # vidur id -> block ids the adapter named
        self._free = list(range(config["num_blocks"]))
        self._beyond = config["num_blocks"]  # the next id past the pool, for a count over num_blocks
        self._to_abort = []

    def add_request(self, request: dict) -> None:
        """Queue ``request`` as a vidur Request."""
        self._tally.add("requests")
        vidur_request = self._Request(request["arrival"], request["prompt"], request["output"])
        self._requests[request["id"]] = vidur_request
        self._ids[vidur_request.id] = request["id"]
        self.scheduler.add_request(vidur_request)

    def abort(self, request_id: int) -> None:
        """Abort ``request_id`` at the start of the next step."""
        self._to_abort.append(request_id)

    def _take(self, vidur_id: int, allocated: list) -> None:
        """Name block ids for what vidur's count of ``vidur_id`` grew by (lowest free id first)."""
        table = self._tables.setdefault(vidur_id, [])
        count = self.scheduler._allocation_map.get(vidur_id, 0)
        got = []
        while len(table) + len(got) < count:
            if self._free:
                got.append(self._free.pop(0))
            else:
                got.append(self._beyond)
                self._beyond += 1
        if got:
            table.extend(got)
            allocated.append([self._ids[vidur_id], got])

    def _release(self, vidur_id: int, freed: list) -> None:
        """Give back every block id of ``vidur_id`` (it left the allocation map)."""
        table = self._tables.pop(vidur_id, [])
        if table:
            freed.append([self._ids[vidur_id], list(table)])
            self._free = sorted(self._free + [b for b in table if b < self.num_blocks])

    def _abort_due(self, freed: list) -> list:
        aborted = []
        for request_id in self._to_abort:
            request = self._requests.get(request_id)
            if request is None or request.completed:
                continue
            for queue in (self.scheduler._request_queue, self.scheduler._preempted_requests):
                while request in queue:
                    queue.remove(request)
            if request.id in self.scheduler._allocation_map:
                self.scheduler.free(request.id)
            self._release(request.id, freed)
            aborted.append(request_id)
        self._to_abort = []
        return aborted

    def step(self) -> dict:
        """Apply the due aborts, then one iteration of vidur's events at the adapter's time; the tick's entry."""
        self._tally.add("steps")
        freed, allocated = [], []
        entry = {"scheduled": [], "preempted": [], "aborted": self._abort_due(freed), "finished": [],
                 "freed": freed, "allocated": allocated}
        restarts = {i: r.num_restarts for i, r in ((r.id, r) for r in self._requests.values())}
        time = self._time
        batch = self.scheduler.on_schedule(time)
        for vidur_id in sorted(restarts):  # restarted by on_schedule: freed, back in the queue (maybe re-admitted)
            request = self._requests[self._ids[vidur_id]]
            if request.num_restarts > restarts[vidur_id]:
                entry["preempted"].append(self._ids[vidur_id])
                self._release(vidur_id, freed)
        for vidur_id in [i for i in self._tables if i not in self.scheduler._allocation_map]:
            self._release(vidur_id, freed)  # freed by vidur some other way: shown as given back
        for vidur_id in self.scheduler._allocation_map:
            self._take(vidur_id, allocated)
        if batch is None:
            return entry
        self._time += 1
        batch.on_schedule(time)
        stage_scheduler = self.scheduler.get_replica_stage_scheduler(0)
        stage_scheduler.add_batch(batch)
        _, batch_stage, _ = stage_scheduler.on_schedule()
        batch_stage.on_schedule(time)
        entry["scheduled"] = [[self._ids[r.id], n] for r, n in zip(batch.requests, batch.num_q_tokens)]
        batch_stage.on_stage_end(time + 1)
        stage_scheduler.on_stage_end()
        self.scheduler.on_stage_end(0, batch_stage)
        batch.on_batch_end(time + 1)
        self.scheduler.on_batch_end(batch)
        entry["finished"] = [self._ids[r.id] for r in batch.requests if r.completed]
        for vidur_id in [i for i in self._tables if i not in self.scheduler._allocation_map]:
            self._release(vidur_id, freed)
        return entry

    def _table_entry(self) -> dict:
        return {self._ids[i]: list(table) for i, table in self._tables.items() if table}

    def view(self) -> dict:
        """vidur's request queue, the requests holding blocks, and their (adapter-named) block tables."""
        return {"waiting": [self._ids[r.id] for r in self.scheduler._request_queue],
                "running": [self._ids[i] for i in self.scheduler._allocation_map],
                "blocks": self._table_entry()}
