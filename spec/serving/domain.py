"""The input domain of the serving model: exactly which calls ``serve(requests, config)`` must accept.

A valid config is a dict with exactly ``max_seqs``, ``token_budget``, ``block_size``
and ``num_blocks`` (each an int >= 1) and ``chunked_prefill`` (a bool), and optionally
the policy switch ``reserve_full_sequence`` (a bool, False when absent) and
``prefix_caching`` (a bool; absent reads as False).  Valid requests are a list or
tuple of dicts with exactly ``id`` (an int), ``arrival`` (>= 0), ``prompt`` (>= 1),
``output`` (>= 1) and optionally ``abort`` (an int >= arrival; None is rejected) and
``tokens`` (a list or tuple of exactly ``prompt`` ints: the prompt's token ids, read
only with prefix caching on), ids unique.  Every int is exactly ``int`` (bool and
other subclasses rejected); list, tuple and dict subclasses are accepted.

Two more rules keep every run finite: a request's peak KV need,
ceil((prompt + output - 1) / block_size) blocks, fits in the pool, and without
chunked prefill prompt + output - 1 <= token_budget, because a preempted request
must be recomputed in one tick.  The order of the checks and their messages are
fixed: config first, then each request in order.
"""

from __future__ import annotations

from typing import Any, NamedTuple

CONFIG_KEYS = ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill")
OPTIONAL_CONFIG_KEYS = ("reserve_full_sequence", "prefix_caching")  # exactly bool; absent reads as False
REQUEST_KEYS = ("id", "arrival", "prompt", "output")
OPTIONAL_KEYS = ("abort", "tokens")


class Request(NamedTuple):
    """One client request: id, arrival tick, prompt and output tokens, and the tick it is cancelled (or None)."""

    id: int
    arrival: int
    prompt: int
    output: int
    abort: int | None = None
    tokens: tuple[int, ...] | None = None  # the prompt's token ids, when the caller gave them

    @property
    def work(self) -> int:
        """The tokens it computes when never preempted: prompt + output - 1 (the last token is not fed back)."""
        return self.prompt + self.output - 1


class Config(NamedTuple):
    """The engine's limits: running sequences, tokens per tick, tokens per KV block, blocks, and chunking."""

    max_seqs: int
    token_budget: int
    block_size: int
    num_blocks: int
    chunked_prefill: bool
    reserve_full_sequence: bool = False  # admit only when blocks for the whole known sequence are free (vLLM's default)
    prefix_caching: bool | None = None  # None: the caller's config has no such key (caching off, as with False)


def fcfs_key(request: Request) -> tuple[int, int]:
    """The order of the waiting queue's fresh part: earlier arrival first, then smaller id."""
    return (request.arrival, request.id)


def blocks_for(tokens: int, block_size: int) -> int:
    """The KV blocks that hold ``tokens`` cached tokens: ceil(tokens / block_size)."""
    return -(-tokens // block_size)


def _is_int(value: Any) -> bool:
    return type(value) is int


def validate_config(config: Any) -> Config:
    """Return the Config of a valid config dict; raise ValueError naming the first broken rule."""
    if not isinstance(config, dict):
        raise ValueError(f"config={config!r}: expected a dict with keys {', '.join(CONFIG_KEYS)}")
    for key in CONFIG_KEYS:
        if key not in config:
            raise ValueError(f"config: missing key {key!r}")
    for key in config:
        if key not in CONFIG_KEYS and key not in OPTIONAL_CONFIG_KEYS:
            raise ValueError(f"config: unexpected key {key!r}; a config has exactly {', '.join(CONFIG_KEYS)} "
                             f"and optionally {' and '.join(OPTIONAL_CONFIG_KEYS)}")
    for key in CONFIG_KEYS[:4]:
        value = config[key]
        if not _is_int(value) or value < 1:
            raise ValueError(f"config.{key}={value!r}: expected an int >= 1")
    for key in ("chunked_prefill",) + OPTIONAL_CONFIG_KEYS:
        if key in config and type(config[key]) is not bool:
            raise ValueError(f"config.{key}={config[key]!r}: expected a bool (True or False)")
    return Config(*(config[key] for key in CONFIG_KEYS), config.get("reserve_full_sequence", False),
                  config.get("prefix_caching"))


def _request_fields(raw: Any, where: str) -> Request:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}={raw!r}: expected a dict with keys id, arrival, prompt, output[, abort][, tokens]")
    for key in REQUEST_KEYS:
        if key not in raw:
            raise ValueError(f"{where}: missing key {key!r}")
    for key in raw:
        if key not in REQUEST_KEYS and key not in OPTIONAL_KEYS:
            raise ValueError(
                f"{where}: unexpected key {key!r}; a request has exactly id, arrival, prompt, output "
                "and optionally abort and tokens"
            )
    request_id, arrival, prompt, output = (raw[key] for key in REQUEST_KEYS)
    if not _is_int(request_id):
        raise ValueError(f"{where}.id={request_id!r}: expected an int")
    if not _is_int(arrival) or arrival < 0:
        raise ValueError(f"{where}.arrival={arrival!r}: expected an int >= 0")
    if not _is_int(prompt) or prompt < 1:
        raise ValueError(f"{where}.prompt={prompt!r}: expected an int >= 1")
    if not _is_int(output) or output < 1:
        raise ValueError(f"{where}.output={output!r}: expected an int >= 1")
    abort = None
    if "abort" in raw:
        abort = raw["abort"]
        if not _is_int(abort) or abort < arrival:
            raise ValueError(f"{where}.abort={abort!r}: expected an int >= arrival={arrival}")
    tokens = None
    if "tokens" in raw:
        tokens = check_tokens(raw["tokens"], prompt, f"{where}.tokens")
    return Request(request_id, arrival, prompt, output, abort, tokens)


def check_tokens(tokens: Any, prompt: int, where: str) -> tuple[int, ...]:
    """The prompt's token ids as a tuple; raise ValueError unless a list or tuple of exactly ``prompt`` exact ints."""
    if not isinstance(tokens, (list, tuple)) or len(tokens) != prompt:
        raise ValueError(f"{where}={tokens!r}: expected a list or tuple of exactly prompt={prompt} ints")
    for position, token in enumerate(tokens):
        if not _is_int(token):
            raise ValueError(f"{where}[{position}]={token!r}: expected an int")
    return tuple(tokens)


def check_feasible(request: Request, where: str, config: Config) -> None:
    """Raise ValueError when ``request`` could never finish under ``config`` (KV pool, or one-tick recompute)."""
    p, o = request.prompt, request.output
    work = request.work
    need = blocks_for(work, config.block_size)
    if need > config.num_blocks:
        raise ValueError(
            f"{where}: prompt={p} + output={o} - 1 = {work} tokens need {need} blocks of "
            f"block_size={config.block_size}, more than num_blocks={config.num_blocks}"
        )
    if not config.chunked_prefill and work > config.token_budget:
        raise ValueError(
            f"{where}: prompt={p} + output={o} - 1 = {work} tokens exceed token_budget={config.token_budget}, "
            "and without chunked_prefill a request must be (re)computed in one tick"
        )


def validate(requests: Any, config: Any) -> tuple[tuple[Request, ...], Config]:
    """Return the requests (in input order) and config of a valid call; raise ValueError naming the first broken rule."""
    parsed_config = validate_config(config)
    if not isinstance(requests, (list, tuple)):
        raise ValueError(f"requests={requests!r}: expected a list or tuple of request dicts")
    parsed = []
    first_index_of: dict[int, int] = {}
    for index, raw in enumerate(requests):
        where = f"requests[{index}]"
        request = _request_fields(raw, where)
        if request.id in first_index_of:
            raise ValueError(
                f"{where}.id={request.id!r}: ids must be unique (also requests[{first_index_of[request.id]}].id)"
            )
        first_index_of[request.id] = index
        check_feasible(request, where, parsed_config)
        parsed.append(request)
    return tuple(parsed), parsed_config


def is_valid(requests: Any, config: Any) -> bool:
    """True exactly when ``serve(requests, config)`` is in the domain."""
    try:
        validate(requests, config)
    except ValueError:
        return False
    return True
