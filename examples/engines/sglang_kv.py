"""Drives SGLang 0.5.23's own admission (``PrefillAdder``), KV allocation (``ScheduleBatch.prepare_for_extend``), radix cache and KV allocator on CPU, and checks the contract's block rules.

What it establishes: for the seeded workloads it runs, SGLang's own objects (the files
of the installed wheel; nothing copied) keep the serving contract's block claims at
token granularity (SGLang's pages here are 1 token): every KV slot a batch allocates is
in range, never slot 0 (SGLang's padding slot, as vLLM's null block), never one a live
request or the radix tree holds (``kv_exclusive``); a request's matched prefix is
exactly the slots the tree holds for that token path (no false sharing); and after
every admission, release and eviction the slots are conserved: free + held by the tree
+ held by live requests beyond their cached prefix = the pool (``kv_capacity``, no
leak, nothing freed twice).  It does not check SGLang's batches against the serving
model's trace: see "The blocker" below.

How it is driven, in SGLang's own order for one prefill round (``Scheduler.
get_new_batch_prefill``): each waiting ``Req`` gets ``init_next_round_input(tree)``
(its prefix match), ``PrefillAdder.add_one_req`` in FCFS order until it answers other
than CONTINUE, then ``ScheduleBatch.init_new`` and ``prepare_for_extend`` (which
allocates the slots and locks the matched prefix); then each admitted request is
finished after its prefill (``finished_reason = FINISH_LENGTH``) and released through
``mem_cache.common.release_kv_cache(req, tree, checkpoint=True)``, SGLang's own path
that inserts its tokens into the tree and frees its row; every few rounds
``RadixCache.evict`` frees unlocked leaves.  Workloads are drawn from prompt families
(identical prompts, one a prefix of another, equal up to the last token) so that the
tree hits, splits and evicts.

What it assumes (the environment, not the mapping): SGLang's runtime context is
published from a ``ServerArgs(model_path=examples/engines/vllm-model, device="cpu")``
(``PrefillAdder`` reads its ``exec`` namespace), and ``torchvision``, which
``sglang.srt.configs`` imports for InternVL and DeepSeek-VL image preprocessing and
whose C operators do not load beside torch 2.13.0's CPU build ("operator
torchvision::nms does not exist"), is a stub module whose every function raises; no
path driven here calls it.

The blocker: SGLang's batch loop (``get_next_batch_to_run``, ``update_running_batch``
with ``check_decode_mem`` / ``retract_decode``, ``process_batch_result``) is a set of
methods of ``sglang.srt.managers.scheduler.Scheduler``, whose ``__init__`` builds the
tensor-parallel model worker (``TpModelWorker``: the model runner, its weights and
device memory) before any scheduling state exists; there is no scheduler object
without a model.  Driving its policy's batches through the online protocol would
mean rewriting that loop in the adapter, which would check our rewrite, not SGLang.

Run: ``VENV/bin/python examples/engines/sglang_kv.py [SEEDS] [ROUNDS]`` after
``examples/engines/install-vllm.sh VENV --sglang``; it prints one line per seed and
exits 1 on the first broken claim, naming it.
"""

from __future__ import annotations

import enum
import os
import random
import sys
from array import array

import engine_loading

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = 48  # KV slots in the pool (tokens: page size 1)


class _InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def _absent(name: str):
    if name.startswith("__"):
        raise AttributeError(name)

    def absent(*args, **kwargs):
        raise RuntimeError(f"torchvision.{name} is a stub: torchvision does not load beside torch 2.13.0's CPU build")

    return absent


def _stub_torchvision() -> None:
    for name in ("torchvision", "torchvision.transforms", "torchvision.transforms.functional", "torchvision.io",
                 "torchvision.ops", "torchvision.transforms.v2", "torchvision.transforms.v2.functional"):
        engine_loading.stub_module(name, InterpolationMode=_InterpolationMode, __getattr__=_absent, __path__=[],
                                   __version__="0.28.0")


_stub_torchvision()
try:
    import torch
    from sglang.srt import runtime_context
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req, ScheduleBatch
    from sglang.srt.managers.schedule_policy import AddReqResult, PrefillAdder
    from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
    from sglang.srt.mem_cache.base_prefix_cache import EvictParams
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.common import release_kv_cache
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
    from sglang.srt.mem_cache.radix_cache import RadixCache
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
except ImportError as error:  # pragma: no cover - depends on the venv
    raise engine_loading.EngineMissing(
        f"SGLang 0.5.23 is not importable ({error}): examples/engines/install-vllm.sh VENV --sglang") from None

SERVER_ARGS = ServerArgs(model_path=os.path.join(HERE, "vllm-model"), device="cpu", skip_tokenizer_init=True,
                         page_size=1, max_running_requests=8)
runtime_context.get_context().set_server_args(SERVER_ARGS)
MODEL_CONFIG = ModelConfig.from_server_args(SERVER_ARGS)


class Broken(AssertionError):
    """A claim of the contract that SGLang's objects broke (its name first)."""


class Engine:
    """SGLang's pools, radix tree and allocator on CPU, as its scheduler builds them (one layer, page size 1)."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        kv = MHATokenToKVPool(size=size, page_size=1, dtype=torch.float32, head_num=1, head_dim=1, layer_num=1,
                              device="cpu", enable_memory_saver=False, enable_alt_stream=False)
        self.allocator = TokenToKVPoolAllocator(size, torch.float32, "cpu", kv, need_sort=False)
        self.rows = ReqToTokenPool(size=16, max_context_len=64, device="cpu", enable_memory_saver=False)
        self.tree = RadixCache(CacheInitParams(disable=False, req_to_token_pool=self.rows,
                                               token_to_kv_pool_allocator=self.allocator, page_size=1))
        self.live: list = []  # admitted, not yet released
        self.next_rid = 0

    # -- what SGLang holds ------------------------------------------------------------------

    def tree_slots(self) -> list[int]:
        """Every slot a node of the radix tree holds (SGLang's own nodes, walked from the root)."""
        slots, stack = [], list(self.tree.root_node.children.values())
        while stack:
            node = stack.pop()
            slots += [int(s) for s in node.value.tolist()]
            stack += list(node.children.values())
        return slots

    def own_slots(self, req) -> list[int]:
        """The slots ``req``'s row holds beyond the prefix the tree owns (``[cache_protected_len, kv_allocated_len)``)."""
        row = self.rows.req_to_token[req.kv.req_pool_idx]
        return [int(s) for s in row[req.kv.cache_protected_len: req.kv.kv_allocated_len].tolist()]

    def check(self, when: str) -> None:
        """kv_exclusive and kv_capacity at token granularity: no slot held twice, none lost, none out of range."""
        held = self.tree_slots() + [s for req in self.live for s in self.own_slots(req)]
        free = [int(s) for s in self.allocator.free_pages.tolist()] + [int(s) for s in self.allocator.release_pages.tolist()]
        if len(set(held)) != len(held):
            raise Broken(f"kv_exclusive: {when}: a slot is held twice: {sorted(held)}")
        if set(held) & set(free):
            raise Broken(f"kv_exclusive: {when}: slots {sorted(set(held) & set(free))} are held and free")
        if len(set(free)) != len(free):
            raise Broken(f"kv_capacity: {when}: a slot is free twice: {sorted(free)}")
        everything = set(held) | set(free)
        if everything != set(range(1, self.size + 1)):
            lost = sorted(set(range(1, self.size + 1)) - everything)
            extra = sorted(everything - set(range(1, self.size + 1)))
            raise Broken(f"kv_capacity: {when}: slots lost {lost}, out of range {extra} (the pool is 1..{self.size})")

    # -- one prefill round, SGLang's way -----------------------------------------------------

    def request(self, tokens: list[int]):
        params = SamplingParams(max_new_tokens=1, ignore_eos=True)
        params.normalize(None)
        req = Req(str(self.next_rid), "", array("q", tokens), params, vocab_size=1024)
        self.next_rid += 1
        return req

    def admit(self, waiting: list) -> list:
        """Prefix match, PrefillAdder in FCFS order, init_new and prepare_for_extend; the admitted requests."""
        running = ScheduleBatch(reqs=[], batch_is_full=False)
        adder = PrefillAdder(1, self.tree, self.allocator, running, new_token_ratio=0.5, rem_input_tokens=16,
                             rem_chunk_tokens=None, max_running_requests=8)
        for req in waiting:
            req.init_next_round_input(self.tree)
            if adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None) != AddReqResult.CONTINUE:
                break
        admitted = list(adder.can_run_list)
        if not admitted:
            return []
        batch = ScheduleBatch.init_new(admitted, self.rows, self.allocator, self.tree, MODEL_CONFIG, False,
                                       SpeculativeAlgorithm.NONE)
        matched = {req.rid: self._path_slots(list(req.origin_input_ids)) for req in admitted}
        batch.prepare_for_extend()
        allocated = [int(s) for s in batch.out_cache_loc.tolist()]
        if 0 in allocated:
            raise Broken(f"kv_capacity: a batch was given slot 0, SGLang's padding slot: {allocated}")
        if len(set(allocated)) != len(allocated):
            raise Broken(f"kv_exclusive: one batch was given a slot twice: {allocated}")
        self.live += admitted
        for req in admitted:  # a hit is exactly the tree's slots for that token path: no false sharing
            hit = req.kv.cache_protected_len
            row = [int(s) for s in self.rows.req_to_token[req.kv.req_pool_idx][:hit].tolist()]
            if row != matched[req.rid][:hit]:
                raise Broken(f"no_false_sharing: request {req.rid} reuses slots {row} for its first {hit} tokens; "
                             f"the tree holds {matched[req.rid][:hit]} for them")
        self.check("after prepare_for_extend")
        return admitted

    def _path_slots(self, tokens: list[int]) -> list[int]:
        """The slots the tree holds along ``tokens``, read node by node (not through match_prefix)."""
        node, slots, at = self.tree.root_node, [], 0
        while at < len(tokens):
            child = next((c for c in node.children.values() if list(c.key.token_ids[:1]) == [tokens[at]]), None)
            if child is None:
                break
            key = list(child.key.token_ids)
            common = 0
            while common < len(key) and at + common < len(tokens) and key[common] == tokens[at + common]:
                common += 1
            slots += [int(s) for s in child.value[:common].tolist()]
            at += common
            if common < len(key):
                break
            node = child
        return slots

    def finish(self, req) -> None:
        """The request finished after its prefill: SGLang's release, which inserts its tokens into the tree."""
        req.output_ids.append(7)
        req.finished_reason = FINISH_LENGTH(length=1)
        req.finished_len = 1
        release_kv_cache(req, self.tree, checkpoint=True)
        self.live.remove(req)
        self.check(f"after request {req.rid} was released")

    def evict(self, tokens: int) -> None:
        before = self.allocator.available_size()
        result = self.tree.evict(EvictParams(num_tokens=tokens))
        if self.allocator.available_size() - before != result.num_tokens_evicted:
            raise Broken(f"kv_capacity: eviction reported {result.num_tokens_evicted} tokens, freed "
                         f"{self.allocator.available_size() - before}")
        self.check(f"after evicting {tokens} tokens")


FAMILIES = ([1, 2, 3, 4, 5, 6], [1, 2, 3, 9], [7, 7, 7, 7, 7], [1, 2])  # shared prefixes, splits, a prefix of another


def workload(rng: random.Random, n: int) -> list[list[int]]:
    """Prompts from a few families: identical, one a prefix of another, equal up to the last token."""
    prompts = []
    for _ in range(n):
        base = list(rng.choice(FAMILIES))
        cut = rng.randint(1, len(base))
        tail = [rng.choice((0, 8, 9))] if rng.random() < 0.5 else []
        prompts.append(base[:cut] + tail)
    return prompts


def run(seed: int, rounds: int) -> dict:
    """One seeded campaign on a fresh engine; raises Broken on the first broken claim."""
    rng = random.Random(seed)
    engine = Engine()
    engine.check("at start")
    counts = {"rounds": rounds, "requests": 0, "admitted": 0, "hit_tokens": 0}
    waiting = []
    for index in range(rounds):
        waiting += [engine.request(p) for p in workload(rng, rng.randint(1, 4))]
        counts["requests"] = engine.next_rid
        admitted = engine.admit(waiting)
        counts["admitted"] += len(admitted)
        counts["hit_tokens"] += sum(req.kv.cache_protected_len for req in admitted)
        waiting = [req for req in waiting if req not in admitted]
        for req in admitted:
            engine.finish(req)
        if index % 3 == 2:
            engine.evict(rng.randint(1, SIZE))
    return counts


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    seeds = int(argv[0]) if argv else 20
    rounds = int(argv[1]) if len(argv) > 1 else 30
    for seed in range(seeds):
        try:
            counts = run(seed, rounds)
        except Broken as broken:
            print(f"FAIL seed {seed}: {broken}")
            return 1
        print(f"ok seed {seed}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
