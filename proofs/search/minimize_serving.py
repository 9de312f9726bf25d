"""The deterministic final minimisation of a failing call of the serving model, ``serve(requests, config)``.

Hypothesis's shrinker gets close; this pass makes the answer canonical, so that the
same bug gives the same counterexample on every run.  ``minimize_valid_call`` greedily
tries smaller valid calls in the order of what "smaller" means to a reader
(``size_key``): fewer requests, then no aborts and the canonical form (arrivals from 0,
ids 0..n-1 in FCFS order), then a smaller config (chunked prefill first; a smaller block
size with the pool's block count kept, else with its tokens kept), then smaller
requests; each number goes to the smallest value that still fails, without assuming
failure is monotone in it (``proofs.search.minimize.smallest_failing_scan``).  With
prefix caching, a shorter prompt keeps the head of its ``tokens``; then caching is
turned off if the failure does not need it, else each request's ``tokens`` dropped
where it can be and every token value made as small as still fails (renamed
wherever it occurs, then each occurrence alone).  It keeps a
candidate only when it is valid and still fails, repeats until nothing changes or its
deadline passes, and never returns a call that was not seen to fail.
``minimize_invalid_call`` drops the requests an invalid call does not need, keeping it
invalid.  ``one_step_larger`` is the call the engine tries to show that a failure is
not an artefact of small numbers.
"""

from __future__ import annotations

import time
from typing import Callable

from proofs.search.minimize import smallest_failing_coarse, smallest_failing_scan

Call = tuple  # (requests, config)


def size_key(call: Call) -> tuple:
    """How big a valid call looks to a reader: requests, then tokens, config, arrivals, aborts, ids."""
    requests, config = call
    return (
        len(requests),
        sum(r["prompt"] + r["output"] for r in requests),
        sum(1 for r in requests if "abort" in r),
        config["num_blocks"] * config["block_size"] + config["token_budget"] + config["max_seqs"] + config["block_size"],
        sum(r["arrival"] for r in requests),
        sum(r["abort"] - r["arrival"] for r in requests if "abort" in r),
        sum(abs(r["id"]) for r in requests),
        [r["id"] for r in requests],
        (not config["chunked_prefill"],),
        # prefix caching last: a call that fails without it (or with fewer named tokens) says less to read
        (config.get("prefix_caching") is True, sum(1 for r in requests if "tokens" in r),
         sum(t for r in requests for t in r.get("tokens", ()) if type(t) is int)),
    )


def minimize_valid_call(
    call: Call, fails: Callable[[Call], bool], is_valid: Callable[..., bool], seconds: float = 10.0, coarse: bool = False
) -> Call:
    """Shrink a valid call that ``fails`` to a canonical smaller valid one that still fails.

    Plain lists and dicts are tried first; a candidate outside the domain is never
    tried.  ``coarse`` shrinks numbers by factors of 16 (for failures that cost a
    timeout to observe)."""
    deadline = time.monotonic() + seconds
    smallest = smallest_failing_coarse if coarse else smallest_failing_scan
    plain = ([dict(r) for r in call[0]], dict(call[1]))
    best = plain if fails(plain) else call

    def attempt(candidate: Call) -> bool:
        nonlocal best
        if time.monotonic() > deadline or size_key(candidate) >= size_key(best) or not is_valid(*candidate):
            return False
        if fails(candidate):
            best = candidate
            return True
        return False

    def with_requests(requests) -> Call:
        return ([dict(r) for r in requests], dict(best[1]))

    def with_field(index: int, field: str, value: int) -> Call:
        requests = [dict(r) for r in best[0]]
        if field == "arrival" and "abort" in requests[index]:  # keep the abort where it was relative to arrival
            requests[index]["abort"] += value - requests[index]["arrival"]
        if field == "prompt" and "tokens" in requests[index]:  # a shorter prompt keeps the head of its tokens
            requests[index]["tokens"] = list(requests[index]["tokens"])[:value]
        requests[index][field] = value
        return with_requests(requests)

    def with_config(key: str, value) -> Call:
        return ([dict(r) for r in best[0]], dict(best[1], **{key: value}))

    def smaller_blocks(value: int) -> bool:
        """Smaller blocks, the pool's block count kept; else with as many more blocks as keep the pool's tokens
        (a smaller pool may no longer hold a request, or no longer fail: a budget overshoot needs room to run)."""
        if attempt(with_config("block_size", value)):
            return True
        pool = best[1]["num_blocks"] * best[1]["block_size"]
        return attempt(([dict(r) for r in best[0]], dict(best[1], block_size=value, num_blocks=-(-pool // value))))

    changed = True
    while changed and time.monotonic() < deadline:
        before = best
        chunk = max(1, len(best[0]) // 2)  # halving chunks: a large input shrinks in a few dozen probes
        while chunk >= 1 and best[0]:
            index = len(best[0]) - chunk
            while index >= 0:
                attempt(with_requests(best[0][:index] + best[0][index + chunk:]))
                index = min(index, len(best[0])) - chunk
            chunk //= 2
        # no abort, then the canonical form: arrivals from 0, ids 0..n-1 in FCFS order, id order
        for index in range(len(best[0])):
            if "abort" in best[0][index]:
                attempt(with_requests([{k: v for k, v in r.items() if not (i == index and k == "abort")}
                                       for i, r in enumerate(best[0])]))
        earliest = min((r["arrival"] for r in best[0]), default=0)
        if earliest:
            attempt(with_requests([
                dict(r, arrival=r["arrival"] - earliest, **({"abort": r["abort"] - earliest} if "abort" in r else {}))
                for r in best[0]
            ]))
        order = sorted(range(len(best[0])), key=lambda i: (best[0][i]["arrival"], best[0][i]["id"]))
        renumbered = [dict(r) for r in best[0]]
        for new_id, index in enumerate(order):
            renumbered[index]["id"] = new_id
        attempt(with_requests(renumbered))
        attempt(with_requests(sorted(best[0], key=lambda r: r["id"])))
        # smaller config (chunked first: more budgets are valid with it), then smaller requests
        if not best[1]["chunked_prefill"]:
            attempt(with_config("chunked_prefill", True))
        for key, low in (("max_seqs", 1), ("num_blocks", 1), ("token_budget", 1)):
            smallest(best[1][key], low, lambda v, k=key: attempt(with_config(k, v)))
        smallest(best[1]["block_size"], 1, smaller_blocks)
        for field, low in (("prompt", 1), ("output", 1), ("arrival", 0)):
            for index in range(len(best[0])):
                smallest(best[0][index][field], low, lambda v, i=index, f=field: attempt(with_field(i, f, v)))
        for index in range(len(best[0])):
            if "abort" in best[0][index]:
                arrival = best[0][index]["arrival"]
                smallest(best[0][index]["abort"], arrival,
                         lambda v, i=index: attempt(with_requests(
                             [dict(r, abort=v) if j == i else dict(r) for j, r in enumerate(best[0])])))
        # prefix caching: off if the failure does not need it, else fewer named tokens, each as small as it can be
        if best[1].get("prefix_caching") is True:
            attempt(([{k: v for k, v in r.items() if k != "tokens"} for r in best[0]],
                     {k: v for k, v in best[1].items() if k != "prefix_caching"}))
        for index in range(len(best[0])):
            if "tokens" in best[0][index]:
                attempt(with_requests([{k: v for k, v in r.items() if not (i == index and k == "tokens")}
                                       for i, r in enumerate(best[0])]))
        for value in sorted({t for r in best[0] for t in r.get("tokens", ()) if type(t) is int and t > 0}):
            # one token value renamed wherever it occurs (shared prefixes stay shared), then each occurrence alone
            smallest(value, 0, lambda v, old=value: attempt(with_requests(
                [dict(r, tokens=[v if t == old else t for t in r["tokens"]]) if "tokens" in r else dict(r)
                 for r in best[0]])))
        for index in range(len(best[0])):
            for position in range(len(best[0][index].get("tokens", ()))):
                if best[0][index]["tokens"][position] > 0:
                    smallest(best[0][index]["tokens"][position], 0,
                             lambda v, i=index, k=position: attempt(with_requests(
                                 [dict(r, tokens=[v if j == k else t for j, t in enumerate(r["tokens"])]) if n == i
                                  else dict(r) for n, r in enumerate(best[0])])))
        changed = best != before
    return best


def minimize_invalid_call(call: Call, fails: Callable[[Call], bool], is_valid: Callable[..., bool], seconds: float = 5.0) -> Call:
    """Shrink an invalid call by dropping the requests it does not need to fail, keeping it invalid."""
    deadline = time.monotonic() + seconds
    requests, config = call
    if not isinstance(requests, (list, tuple)):
        return call
    best = list(requests)
    index = len(best) - 1
    while index >= 0 and time.monotonic() < deadline:
        candidate = best[:index] + best[index + 1:]
        if not is_valid(candidate, config) and fails((candidate, config)):
            best = candidate
        index -= 1
    return (type(requests)(best) if isinstance(requests, tuple) else best, config)


def one_step_larger(call: Call) -> Call:
    """The call with every arrival, abort, prompt and output 16 times larger (each named token 16 times) and the pool
    and budget to match."""
    requests, config = call
    config = dict(config, num_blocks=16 * config["num_blocks"], token_budget=16 * config["token_budget"])
    larger = []
    for r in requests:
        grown = dict(r, arrival=16 * r["arrival"], prompt=16 * r["prompt"], output=16 * r["output"])
        if "tokens" in r:  # each token 16 times: prompts that shared a prefix still do
            grown["tokens"] = [token for token in r["tokens"] for _ in range(16)]
        if "abort" in r:
            grown["abort"] = 16 * r["abort"]
        larger.append(grown)
    return larger, config
