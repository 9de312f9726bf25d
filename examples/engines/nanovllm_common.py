"""Drives nano-vllm's own ``Scheduler`` and ``BlockManager`` through the serving model's online protocol, with fake sampled tokens.

What it establishes: ``schedcheck verify --model serving --online FILE.py:make --policy
none`` on ``nanovllm_npu.py`` or ``nanovllm_fork.py`` checks the engine's own
``schedule()`` and ``postprocess()`` (the files of the installed wheel, unchanged)
against every policy-free invariant of the serving model after every step.  No model
runs: each scheduled sequence gets one fake sampled token per step.

How the modules are loaded: the package's ``__init__`` (which imports torch through
``llm.py``) is bypassed with ``engine_loading.bare_package``; ``<pkg>.config`` (which
imports transformers) is replaced by a stub module whose ``Config`` is never built, since
``scheduler.py`` names it only as an annotation; then ``<pkg>.engine.sequence``,
``<pkg>.engine.block_manager`` (needs numpy and xxhash) and ``<pkg>.engine.scheduler``
run from the installed files.  ``Scheduler(config)`` is given a namespace with the five
fields it reads.

The mapping (each an assumption, stated in docs/engines.md too):
- nano-vllm always caches (its ``BlockManager`` hashes every full block; there is no
  switch), so the adapters declare ``prefix_caching: [True]`` and every config drawn
  for them has it.  A request is one ``Sequence`` whose prompt is the request's
  ``tokens`` (shared prompts, so nano-vllm's own hash cache hits), or ``prompt``
  distinct token ids when it has none, with ``SamplingParams(max_tokens=output,
  ignore_eos=True)``; every token id the adapter makes (a prompt without ``tokens``,
  every sampled token) is distinct, negative (never a given token) and never the eos
  (-1).  Where nano-vllm's caching differs from the model's vLLM-like rules (it
  registers a block at admission, its ``hash_to_block_id`` keeps the last writer of a
  chain, ``can_allocate`` counts every block of the sequence, hit or not, and nothing
  caps a hit below the whole sequence), the stateful test under ``--policy fcfs``
  reports it; ``--policy none`` judges its blocks by content only (docs/engines.md).
  With ``prefix_caching`` false (a config built by hand) the prompts are distinct as
  before, and a readmitted sequence's hits on its own blocks show as a difference;
- ``max_num_seqs = max_seqs``, ``max_num_batched_tokens = token_budget``,
  ``num_kvcache_blocks = num_blocks``, ``kvcache_block_size = block_size`` (the class
  attribute ``Sequence.block_size`` too; nano-vllm's ``Config`` requires a multiple of
  256, a rule of its config, not of the scheduler, which any size exercises alike);
- ``chunked_prefill`` has no counterpart: nano-vllm never chunks a prefill, so the
  config is run as it is (no ValueError: the harness would count it as a rejected
  valid call), and what a prompt over the budget does is reported as found;
- a step is ``schedule()``, then ``postprocess(seqs, fake tokens)``; the entry's
  ``scheduled`` is ``len(seq) - num_cached_tokens`` for a prefill and 1 for a decode;
  ``preempted`` are the sequences running before the step and waiting after it;
  ``finished`` those ``postprocess`` finished; ``blocks`` every sequence's
  ``block_table`` after ``schedule()`` and before ``postprocess()`` (the harness
  derives allocations and frees from them);
- nano-vllm has no abort: ``abort(id)`` is the adapter's, applied at the start of the
  next step with the engine's own primitives (the sequence leaves ``waiting`` and
  ``running``, and ``block_manager.deallocate`` gives its blocks back), as
  ``LLMEngine.reset`` does for each sequence;
- with nothing waiting or running, ``schedule()`` (which asserts that it scheduled
  something) is not called: the step is idle;
- ``view()`` is the engine's own queues: ``waiting`` and ``running`` deques, and the
  block tables of the sequences that hold blocks.

Bounds: one engine per ``make`` (the global ``Sequence.counter`` is reset there, so ids
repeat across examples as they would in a fresh process).  With
``$SCHEDCHECK_ENGINE_TALLY`` naming a file, each process appends its counts of engines
made, requests added and steps run at exit (``engine_loading.Tally``).
"""

from __future__ import annotations

import itertools
import types

import engine_loading

TALLIES: dict = {}  # package -> engine_loading.Tally


def load(package: str) -> types.SimpleNamespace:
    """The scheduler modules of the installed nano-vllm ``package`` (``nanovllmnpu`` or ``nanovllm``)."""
    engine_loading.bare_package(package)
    engine_loading.stub_module(f"{package}.config", Config=type("Config", (), {}))
    engine_loading.bare_package(f"{package}.engine")
    return types.SimpleNamespace(
        sequence=engine_loading.load(f"{package}.engine.sequence"),
        sampling=engine_loading.load(f"{package}.sampling_params"),
        scheduler=engine_loading.load(f"{package}.engine.scheduler"),
    )


class NanoVLLMAdapter:
    """nano-vllm's ``Scheduler`` behind add_request, abort, step() -> entry and view()."""

    def __init__(self, config: dict, modules: types.SimpleNamespace, package: str) -> None:
        self._tally = TALLIES.setdefault(package, engine_loading.Tally(package))
        self._tally.add("makes")
        self._Sequence = modules.sequence.Sequence
        self._SamplingParams = modules.sampling.SamplingParams
        self._Sequence.block_size = config["block_size"]
        self._Sequence.counter = itertools.count()
        settings = types.SimpleNamespace(
            max_num_seqs=config["max_seqs"], max_num_batched_tokens=config["token_budget"], eos=-1,
            num_kvcache_blocks=config["num_blocks"], kvcache_block_size=config["block_size"])
        self.scheduler = modules.scheduler.Scheduler(settings)
        self._caching = config.get("prefix_caching") is True
        # the ids the adapter makes (a prompt without ``tokens``, every sampled token): distinct, never the eos, and
        # negative, so never equal to a token a request was given (issue 20: generated tokens are the request's own)
        self._tokens = itertools.count(-2, -1)
        self._seqs = {}  # request id -> Sequence
        self._ids = {}  # seq_id -> request id
        self._to_abort = []

    def add_request(self, request: dict) -> None:
        """Queue ``request`` as a Sequence that generates ``output`` tokens: its prompt is its ``tokens`` when
        ``prefix_caching`` is on and it has them, else ``prompt`` distinct tokens."""
        self._tally.add("requests")
        if self._caching and request.get("tokens") is not None:
            prompt = list(request["tokens"])
        else:
            prompt = [next(self._tokens) for _ in range(request["prompt"])]
        seq = self._Sequence(prompt, self._SamplingParams(max_tokens=request["output"], ignore_eos=True))
        self._seqs[request["id"]] = seq
        self._ids[seq.seq_id] = request["id"]
        self.scheduler.add(seq)

    def abort(self, request_id: int) -> None:
        """Abort ``request_id`` at the start of the next step."""
        self._to_abort.append(request_id)

    def _abort_due(self) -> list:
        aborted = []
        for request_id in self._to_abort:
            seq = self._seqs.get(request_id)
            if seq is None or seq.is_finished:
                continue
            for queue in (self.scheduler.waiting, self.scheduler.running):
                while seq in queue:
                    queue.remove(seq)
            if seq.block_table:
                self.scheduler.block_manager.deallocate(seq)
            seq.status = type(seq.status).FINISHED
            aborted.append(request_id)
        self._to_abort = []
        return aborted

    def _tables(self) -> dict:
        seqs = list(self.scheduler.waiting) + list(self.scheduler.running)
        return {self._ids[s.seq_id]: list(s.block_table) for s in seqs if s.block_table}

    def step(self) -> dict:
        """Apply the due aborts, run ``schedule()`` and ``postprocess()`` with fake tokens; the tick's entry."""
        self._tally.add("steps")
        aborted = self._abort_due()
        entry = {"scheduled": [], "preempted": [], "aborted": aborted, "finished": [], "blocks": self._tables()}
        if self.scheduler.is_finished():
            return entry
        running_before = [s for s in self.scheduler.running if s.status.name == "RUNNING"]
        seqs, is_prefill = self.scheduler.schedule()
        entry["scheduled"] = [[self._ids[s.seq_id], len(s) - s.num_cached_tokens if is_prefill else 1] for s in seqs]
        seen = set()
        for s in running_before:
            if s.status.name == "WAITING" and s.seq_id not in seen:
                seen.add(s.seq_id)
                entry["preempted"].append(self._ids[s.seq_id])
        entry["blocks"] = self._tables()
        self.scheduler.postprocess(seqs, [next(self._tokens) for _ in seqs])
        entry["finished"] = [self._ids[s.seq_id] for s in seqs if s.is_finished]
        return entry

    def view(self) -> dict:
        """The engine's own queues and block tables."""
        return {"waiting": [self._ids[s.seq_id] for s in self.scheduler.waiting],
                "running": [self._ids[s.seq_id] for s in self.scheduler.running],
                "blocks": self._tables()}
