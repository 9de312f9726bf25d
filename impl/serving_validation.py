"""Input checks for the serving scheduler: reject anything outside the domain before any work.

Written independently of spec/ on purpose: the scheduler under check must not lean
on the checker, so a mistake in one is not silently shared by the other.  The order
of the checks and the messages follow the contract (README, "Checking a serving scheduler").
"""

from __future__ import annotations

from typing import Any, NamedTuple

CONFIG_KEYS = ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill")
SWITCHES = ("reserve_full_sequence",)  # optional bools, False when absent
INT_CONFIG_KEYS = CONFIG_KEYS[:4]
BOOL_CONFIG_KEYS = ("chunked_prefill", "prefix_caching")
REQUEST_KEYS = ("id", "arrival", "prompt", "output")
OPTIONAL_KEYS = ("abort", "tokens")
REQUEST_RULES = {"id": ("an int", None), "arrival": ("an int >= 0", 0), "prompt": ("an int >= 1", 1), "output": ("an int >= 1", 1)}


class Config(NamedTuple):
    max_seqs: int
    token_budget: int
    block_size: int
    num_blocks: int
    chunked_prefill: bool
    reserve_full_sequence: bool = False
    prefix_caching: bool | None = None  # None when the caller's config has no such key (off, and no caching keys)


class Row(NamedTuple):
    id: int
    arrival: int
    prompt: int
    output: int
    abort: int | None  # None when the caller gave no abort key
    tokens: tuple | None = None  # the prompt's token ids, None when the caller gave none


def check_config(config: Any) -> Config:
    """Return the config's five values, or raise ValueError naming the key, the value and the rule."""
    if not isinstance(config, dict):
        raise ValueError(f"config={config!r}: expected a dict with keys {', '.join(CONFIG_KEYS)}")
    for key in CONFIG_KEYS:
        if key not in config:
            raise ValueError(f"config: missing key {key!r}")
    for key in config:
        if key not in CONFIG_KEYS and key not in SWITCHES and key != "prefix_caching":
            raise ValueError(f"config: unexpected key {key!r}; a config has exactly {', '.join(CONFIG_KEYS)} "
                             f"and optionally {' and '.join(SWITCHES + ('prefix_caching',))}")
    values = {key: config[key] for key in CONFIG_KEYS}
    for key in INT_CONFIG_KEYS:
        value = values[key]
        if type(value) is not int or value < 1:
            raise ValueError(f"config.{key}={value!r}: expected an int >= 1")
    for key in BOOL_CONFIG_KEYS + SWITCHES:
        if key in config and type(config[key]) is not bool:
            raise ValueError(f"config.{key}={config[key]!r}: expected a bool (True or False)")
    for key in SWITCHES:
        values[key] = config.get(key, False)
    return Config(**values, prefix_caching=config.get("prefix_caching"))


def check_request_fields(request: Any, where: str) -> Row:
    """Return the fields of a well-formed request dict, or raise ValueError naming ``where``."""
    if not isinstance(request, dict):
        raise ValueError(f"{where}={request!r}: expected a dict with keys id, arrival, prompt, output[, abort][, tokens]")
    for key in REQUEST_KEYS:
        if key not in request:
            raise ValueError(f"{where}: missing key {key!r}")
    for key in request:
        if key not in REQUEST_KEYS and key not in OPTIONAL_KEYS:
            raise ValueError(
                f"{where}: unexpected key {key!r}; a request has exactly id, arrival, prompt, output and optionally abort and tokens"
            )
    values = {key: request[key] for key in REQUEST_KEYS}
    for key in REQUEST_KEYS:
        value = values[key]
        rule, least = REQUEST_RULES[key]
        if type(value) is not int or (least is not None and value < least):
            raise ValueError(f"{where}.{key}={value!r}: expected {rule}")
    abort = None
    if "abort" in request:
        abort = request["abort"]
        if type(abort) is not int or abort < values["arrival"]:
            raise ValueError(f"{where}.abort={abort!r}: expected an int >= arrival={values['arrival']}")
    tokens = None
    if "tokens" in request:
        tokens = request["tokens"]
        prompt = values["prompt"]
        if not isinstance(tokens, (list, tuple)) or len(tokens) != prompt:
            raise ValueError(f"{where}.tokens={tokens!r}: expected a list or tuple of exactly prompt={prompt} ints")
        tokens = tuple(tokens)
        for position, token in enumerate(tokens):
            if type(token) is not int:
                raise ValueError(f"{where}.tokens[{position}]={token!r}: expected an int")
    return Row(values["id"], values["arrival"], values["prompt"], values["output"], abort, tokens)


def check_feasible(row: Row, config: Config, where: str) -> None:
    """Raise ValueError when the request could never finish under ``config`` (KV pool or, unchunked, token budget)."""
    tokens = row.prompt + row.output - 1
    blocks = -(-tokens // config.block_size)
    if blocks > config.num_blocks:
        raise ValueError(
            f"{where}: prompt={row.prompt} + output={row.output} - 1 = {tokens} tokens need {blocks} blocks "
            f"of block_size={config.block_size}, more than num_blocks={config.num_blocks}"
        )
    if not config.chunked_prefill and tokens > config.token_budget:
        raise ValueError(
            f"{where}: prompt={row.prompt} + output={row.output} - 1 = {tokens} tokens exceed "
            f"token_budget={config.token_budget}, and without chunked_prefill a request must be (re)computed in one tick"
        )


def check_requests(requests: Any, config: Config) -> list[Row]:
    """Return every request's fields, in input order, or raise ValueError at the first broken rule."""
    if not isinstance(requests, (list, tuple)):
        raise ValueError(f"requests={requests!r}: expected a list or tuple of request dicts")
    rows = []
    index_of_id: dict[int, int] = {}
    for index, request in enumerate(requests):
        where = f"requests[{index}]"
        row = check_request_fields(request, where)
        if row.id in index_of_id:
            raise ValueError(f"{where}.id={row.id!r}: ids must be unique (also requests[{index_of_id[row.id]}].id)")
        index_of_id[row.id] = index
        check_feasible(row, config, where)
        rows.append(row)
    return rows
