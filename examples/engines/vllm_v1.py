"""Drives vLLM 0.33.0's own v1 ``Scheduler`` and ``KVCacheManager`` through the serving model's online protocol, with fake sampled tokens.

What it establishes: ``schedcheck verify --model serving --online
examples/engines/vllm_v1.py:make --policy none`` checks vLLM's own ``Scheduler.schedule()``,
``update_from_output()`` and ``finish_requests()`` and the KV cache manager and block
pool under them (the files of the installed wheel, unchanged, nothing stubbed) against
every policy-free invariant of the serving model after every step; ``--policy fcfs``
also against the model's FCFS policy tick by tick.  No model runs, no weights are
read: each scheduled request whose known tokens are all computed gets one fake sampled
token per step, as a model runner would return.

Install (its own venv: torch 2.13.0 CPU, vllm 0.33.0 and the pinned packages its
scheduler imports): ``examples/engines/install-vllm.sh VENV`` (docs/engines.md).
``VLLM_TARGET_DEVICE=cpu`` and ``HF_HUB_OFFLINE=1`` are set here unless already set,
and vLLM's log level is ERROR unless ``VLLM_LOGGING_LEVEL`` says otherwise.

How it is built (as vLLM's own tests/v1/core/utils.py ``create_scheduler`` does, and
as ``EngineCore`` calls it): ``ModelConfig(model=examples/engines/vllm-model,
skip_tokenizer_init=True)``, a hand-written OPT-shaped config.json and nothing else (no
weights, no hub; its ``max_position_embeddings`` is 2**31 - 1 so that the model never
limits ``max_model_len``), a ``SchedulerConfig``, a ``CacheConfig``, a ``VllmConfig``,
a ``KVCacheConfig`` with one full-attention group, and ``Scheduler(vllm_config,
kv_cache_config, structured_output_manager, block_size)``.  The first build in a
process costs about 10 s of vLLM's lazy imports, so the module builds one at import
(the sandbox imports an adapter once per child); later builds take milliseconds.

The mapping (each an assumption):
- ``max_num_seqs = max_seqs``, ``max_num_batched_tokens = token_budget`` (so
  ``max_num_scheduled_tokens`` too), ``block_size = block_size``,
  ``enable_chunked_prefill = chunked_prefill``, ``scheduler_reserve_full_isl =
  reserve_full_sequence`` (false when the config has no such key, as the model reads
  it; vLLM's own default is true), ``enable_prefix_caching = prefix_caching`` (false
  when absent), ``async_scheduling = False`` (the synchronous ``Scheduler``; the
  engine may pick ``AsyncScheduler``, a subclass that schedules a step ahead with
  output placeholders, which is not checked here), ``long_prefill_token_threshold =
  0`` and ``watermark = 0.0`` (vLLM's defaults: no cap per prefill, no reserve of free
  blocks), no LoRA, no speculative decoding, no KV connector, no multimodal input;
- the pool: vLLM takes block 0 of its pool as its null block, never handed to a
  request, so the KV cache has ``num_blocks + 1`` blocks (``KVCacheConfig`` and
  ``cache_config.num_gpu_blocks``) and requests can use exactly ``num_blocks``; vLLM's
  block b is reported as block b - 1 (the null block would show as -1, out of range);
- ``max_model_len``: ``num_blocks * block_size + 1`` with chunked prefill (the
  model's peak-need rule keeps every request's ``prompt + output`` within it), and
  ``min(num_blocks * block_size + 1, token_budget)`` without, since vLLM requires
  ``max_num_batched_tokens >= max_model_len`` when it does not chunk; a request
  stops at ``prompt + output`` known tokens (``max_tokens = output``) before
  ``max_model_len`` could stop it;
- a request is ``Request(str(id), prompt_token_ids, SamplingParams(max_tokens=output,
  ignore_eos=True))``: its ``tokens`` when the config caches prefixes and the request
  has them, else ``prompt`` token ids used by no other request; every sampled token id
  is distinct from every other token id the adapter makes (never a stop token);
  requests are added in the driver's (arrival, id) order, which is the order of
  vLLM's FCFS queue;
- ``abort(id)`` is ``finish_requests([str(id)], RequestStatus.FINISHED_ABORTED)`` at
  once (the driver aborts before the step of the abort's tick); the next entry's
  ``aborted`` lists the ids vLLM says it aborted (not those already finished);
- a step is ``schedule()``, the block tables read, then ``update_from_output(output,
  ModelRunnerOutput)`` with one fake token for each scheduled request whose
  ``num_computed_tokens`` (already advanced by ``schedule()``) has reached its
  ``num_tokens``, none for a prefill chunk; ``scheduled`` is vLLM's
  ``num_scheduled_tokens`` in vLLM's order; ``preempted`` the requests of
  ``preempted_req_ids`` that were running before the step, in the order vLLM took
  them (from the tail of ``running``); ``finished`` the requests whose output in
  ``update_from_output`` has a ``finish_reason``; ``blocks`` every table of vLLM's KV
  cache manager (``req_to_blocks`` of its one group, iterated without indexing: it is
  a defaultdict) after ``schedule()`` and before ``update_from_output()``, which frees
  the finished requests' blocks;
- ``view()`` is vLLM's own ``waiting`` queue (and ``kv_holding_waiting``), ``running``
  list and tables.

The adapter computes nothing vLLM reports: every number above is read from vLLM's
objects.  Its declared domain (``DOMAIN``, read by schedcheck from this file's source
and applied where calls are drawn) is what vLLM's ``SchedulerConfig`` accepts:
``max_num_batched_tokens >= max_num_seqs``, and without chunked prefill every
request's ``prompt + output`` within ``max_model_len <= max_num_batched_tokens``.
Block sizes: the CPU platform vLLM runs on here accepts any (it warns that multiples of
32 are faster); GPU attention backends want multiples of 16, which the scheduler code
does not depend on.

Bounds: one engine per ``make``; every engine in a process shares vLLM's module state
(none of it is read by the scheduler paths driven here).  With
``$SCHEDCHECK_ENGINE_TALLY`` naming a file, each process appends its counts of
engines made, requests added and steps run (``engine_loading.Tally``).
"""

from __future__ import annotations

import itertools
import os

import engine_loading

DOMAIN = {
    "reserve_full_sequence": [False, True],  # scheduler_reserve_full_isl, both values (true is vLLM's default)
    "prefix_caching": [False, True],  # enable_prefix_caching, both values (true is vLLM v1's default)
    "token_budget": {"min": "max_seqs"},
    "unchunked": {"prompt_plus_output": {"max": "token_budget"}},
}

for _name, _value in (("VLLM_TARGET_DEVICE", "cpu"), ("HF_HUB_OFFLINE", "1"), ("VLLM_LOGGING_LEVEL", "ERROR"),
                      ("TRANSFORMERS_OFFLINE", "1")):
    os.environ.setdefault(_name, _value)

MODEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vllm-model")
INSTALL = "examples/engines/install-vllm.sh VENV, then run schedcheck from VENV (docs/engines.md)"
try:
    import torch
    import vllm
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request, RequestStatus
    from vllm.v1.structured_output import StructuredOutputManager
except ImportError as error:  # pragma: no cover - depends on the venv
    raise engine_loading.EngineMissing(f"vLLM 0.33.0 is not importable ({error}): install it with {INSTALL}") from None

VERSION = vllm.__version__
TALLY = engine_loading.Tally("vllm_v1")
init_none_hash(sha256)


def max_model_len(config: dict) -> int:
    """vLLM's ``max_model_len`` for ``config``: every request of the (declared) domain fits it, as vLLM requires."""
    length = config["num_blocks"] * config["block_size"] + 1
    if not config["chunked_prefill"]:
        length = min(length, config["token_budget"])
    return length


def build_scheduler(config: dict) -> Scheduler:
    """vLLM's own ``Scheduler`` for the serving ``config``, built as ``create_scheduler`` and ``EngineCore`` build it."""
    length = max_model_len(config)
    model_config = ModelConfig(model=MODEL_DIR, skip_tokenizer_init=True, max_model_len=length, dtype="float32",
                               seed=0)
    scheduler_config = SchedulerConfig(
        max_num_seqs=config["max_seqs"],
        max_num_batched_tokens=config["token_budget"],
        max_model_len=length,
        is_encoder_decoder=False,
        enable_chunked_prefill=config["chunked_prefill"],
        long_prefill_token_threshold=0,
        async_scheduling=False,
        scheduler_reserve_full_isl=bool(config.get("reserve_full_sequence", False)),
        watermark=0.0,
    )
    cache_config = CacheConfig(block_size=config["block_size"], gpu_memory_utilization=0.9, cache_dtype="auto",
                               enable_prefix_caching=bool(config.get("prefix_caching", False)))
    vllm_config = VllmConfig(scheduler_config=scheduler_config, model_config=model_config, cache_config=cache_config)
    blocks = config["num_blocks"] + 1  # block 0 is vLLM's null block, never a request's
    kv_cache_config = KVCacheConfig(num_blocks=blocks, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(
        ["layer"], FullAttentionSpec(block_size=config["block_size"], num_kv_heads=1, head_size=1,
                                     dtype=torch.float32))])
    cache_config.num_gpu_blocks = blocks
    return Scheduler(vllm_config=vllm_config, kv_cache_config=kv_cache_config,
                     structured_output_manager=StructuredOutputManager(vllm_config),
                     block_size=config["block_size"], log_stats=False)


class VLLMAdapter:
    """vLLM's v1 ``Scheduler`` behind add_request, abort, step() -> entry and view()."""

    def __init__(self, config: dict) -> None:
        TALLY.add("makes")
        self.config = dict(config)
        self.scheduler = build_scheduler(config)
        self.caching = bool(config.get("prefix_caching", False))
        self._hasher = get_request_block_hasher(config["block_size"], sha256) if self.caching else None
        self._tokens = itertools.count(10**9)  # token ids no request's own tokens use
        self._ids: dict[str, int] = {}  # vLLM's request id -> the request's id
        self._aborted: list = []  # aborted since the last step, as vLLM answered

    def add_request(self, request: dict) -> None:
        """Queue ``request`` as a vLLM ``Request`` that generates exactly ``output`` tokens."""
        TALLY.add("requests")
        tokens = request.get("tokens") if self.caching else None
        prompt = list(tokens) if tokens is not None else [next(self._tokens) for _ in range(request["prompt"])]
        name = str(request["id"])
        self._ids[name] = request["id"]
        self.scheduler.add_request(Request(
            request_id=name, prompt_token_ids=prompt, arrival_time=0.0, pooling_params=None,
            sampling_params=SamplingParams(max_tokens=request["output"], ignore_eos=True),
            block_hasher=self._hasher))

    def abort(self, request_id) -> None:
        """vLLM's own abort: ``finish_requests`` with ``FINISHED_ABORTED``."""
        done = self.scheduler.finish_requests([str(request_id)], RequestStatus.FINISHED_ABORTED)
        self._aborted += [self._ids[r.request_id] for r in done]

    def _tables(self) -> dict:
        """Every block table vLLM's KV cache manager holds, vLLM's block b reported as b - 1."""
        manager = self.scheduler.kv_cache_manager.coordinator.single_type_managers[0]
        return {self._ids[name]: [block.block_id - 1 for block in blocks]
                for name, blocks in list(manager.req_to_blocks.items()) if blocks}

    def step(self) -> dict:
        """``schedule()``, the tables read, ``update_from_output()`` with fake tokens: the tick's entry."""
        TALLY.add("steps")
        scheduler = self.scheduler
        running_before = [r.request_id for r in scheduler.running]
        output = scheduler.schedule()
        taken = set(output.preempted_req_ids or ())
        entry = {
            "scheduled": [[self._ids[name], n] for name, n in output.num_scheduled_tokens.items()],
            "preempted": [self._ids[name] for name in reversed(running_before) if name in taken],
            "aborted": self._aborted,
            "blocks": self._tables(),
        }
        self._aborted = []
        names = list(output.num_scheduled_tokens)
        sampled = []
        for name in names:
            request = scheduler.requests[name]
            sampled.append([next(self._tokens)] if request.num_computed_tokens >= request.num_tokens else [])
        runner = ModelRunnerOutput(req_ids=names, req_id_to_index={name: i for i, name in enumerate(names)},
                                   sampled_token_ids=sampled)
        outputs = scheduler.update_from_output(output, runner)
        entry["finished"] = [self._ids[o.request_id] for client in outputs.values() for o in client.outputs
                             if o.finish_reason is not None]
        return entry

    def view(self) -> dict:
        """vLLM's own queues and block tables."""
        scheduler = self.scheduler
        waiting = list(scheduler.kv_holding_waiting) + list(scheduler.waiting)
        return {"waiting": [self._ids[r.request_id] for r in waiting],
                "running": [self._ids[r.request_id] for r in scheduler.running],
                "blocks": self._tables()}


def make(config):
    """A fresh vLLM v1 scheduler for the serving ``config``, behind the online protocol."""
    return VLLMAdapter(config)


# vLLM's first VllmConfig in a process imports most of the rest (about 10 s): do it now, once, at import
build_scheduler({"max_seqs": 1, "token_budget": 1, "block_size": 1, "num_blocks": 1, "chunked_prefill": True})
