"""Strategies and bad inputs for the serving model's ``serve(requests, config)``.

``valid_calls`` covers the whole serving domain, not only small numbers: 0 to 12
requests (one call in sixteen has up to 150 cheap ones), ids spread wide and
beyond 64 bits, arrivals that tie, have long idle gaps or start past 2**40, prompts
and outputs from 1 to the pool's limit, aborts before, during and after a request
runs, budgets tight (1) and loose, block pools exactly big enough for the largest
request or much larger, both chunking modes, lists, tuples and subclasses.  Every
drawn call is inside the domain (both feasibility rules hold by construction, and
``spec.serving.is_valid`` is asserted by the engine).  Everything shrinks towards
fewer requests, then smaller numbers.

``bad_calls`` lists one call per class of bad input, systematically (every field of
a request and of the config times every kind of bad value, missing and extra keys,
repeated ids, an abort before arrival or None, both feasibility rules, a non-list,
a non-dict); ``corrupted_calls`` combines them at random.  The minimiser of a
failing call is ``proofs.search.minimize_serving``.
"""

from __future__ import annotations

import random

from proofs.search.built import built_once, st
from proofs.search.strategies import BAD_VALUES, JobDict, JobList

MAX_REQUESTS = 12
DRAWS_PREFIX_CACHING = True  # caching_calls: drawn for a target that supports it (proofs.models.declared.draws_caching)
MANY_REQUESTS = 150
CONFIG_KEYS = ("max_seqs", "token_budget", "block_size", "num_blocks", "chunked_prefill")
REQUEST_KEYS = ("id", "arrival", "prompt", "output")
ARRIVAL_BASES = (0, 0, 0, 5, 2**31, 2**40, 2**64)
ID_BASES = (0, 0, -(2**63), 2**64, -(10**20))

Call = tuple  # (requests, config)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def peak_tokens(config: dict) -> int:
    """The most tokens ``prompt + output - 1`` a request may need under ``config`` (both rules)."""
    limit = config["num_blocks"] * config["block_size"]
    if not config["chunked_prefill"]:
        limit = min(limit, config["token_budget"])
    return limit


@built_once
@st.composite
def configs(draw):
    """A valid config: tight and loose budgets, small and large blocks, small and large pools."""
    return {
        "max_seqs": draw(st.integers(1, 4) | st.sampled_from((1, 2, 8, 64))),
        "token_budget": draw(st.integers(1, 16) | st.sampled_from((1, 2, 64, 2**20))),
        "block_size": draw(st.integers(1, 4) | st.sampled_from((1, 16))),
        "num_blocks": draw(st.integers(1, 12) | st.sampled_from((1, 2, 64))),
        "chunked_prefill": draw(st.booleans()),
    }


def _abort_after(when: str, arrival: int, offset: int) -> dict:
    """The abort key of a request: none, at its arrival, soon after, or late (maybe after it finished)."""
    if when == "none":
        return {}
    return {"abort": arrival + {"arrival": 0, "soon": 1 + offset % 4, "late": 5 + offset % 36}[when]}


def _many_requests(seed: int, n: int, limit: int, arrival_base: int, id_base: int) -> list[dict]:
    """``n`` cheap requests built from one drawn seed (drawing each field would cost a draw per field)."""
    rng = random.Random(seed)
    requests = []
    for index in range(n):
        total = rng.randint(1, max(1, min(limit, 6)))
        output = rng.randint(1, total)
        arrival = arrival_base + rng.randint(0, 3) * rng.randint(0, 1)
        when = rng.choice(("none", "none", "none", "arrival", "soon", "late"))
        requests.append({"id": id_base + 2 * index + rng.randint(0, 1), "arrival": arrival,
                         "prompt": total - output + 1, "output": output, **_abort_after(when, arrival, rng.randint(0, 99))})
    return requests


@built_once
def valid_calls(max_requests: int = MAX_REQUESTS, many: bool = True, caching: bool = False):
    """A valid (requests, config), shrinking towards the smallest input: across the whole domain, or under memory pressure.

    With the default arguments, one call in four comes from a generator aimed at a corner of the
    coverage model (``proofs.search.aim``).  With ``caching`` (a target that supports prefix
    caching: our impl, or one whose DOMAIN declares ``prefix_caching`` true, proofs.models.declared),
    two calls in five are drawn from prompt families with ``prefix_caching`` (``caching_calls``)."""
    anywhere = st.one_of(_any_calls(max_requests, many), _pressure_calls(max_requests), _budget_calls(max_requests))
    if max_requests == MAX_REQUESTS and many:
        anywhere = _aimed_or(anywhere)
    if caching:
        return _caching_or(anywhere, caching_calls(min(max_requests, 8)))
    return anywhere


FAMILIES = ("identical prompts", "prefix on a block boundary", "prefix off a block boundary",
            "equal up to the last token", "extended prompt", "private prompt")  # how a request's tokens were drawn
# what --json's statistics count per call, read back from the tokens (an extension shows as a prefix shared)
FAMILY_FEATURES = (*FAMILIES[:4], FAMILIES[5], "abort of a request sharing its prompt")
CACHING_MODES = ("families", "memory pressure", "twins")


@built_once
@st.composite
def _caching_or(draw, anywhere, cached):
    """Two calls in five from ``cached`` (the last branches), the rest from ``anywhere``."""
    from proofs.search.aim import CACHED_BRANCHES

    if draw(st.integers(0, CACHED_BRANCHES[-1])) in CACHED_BRANCHES:
        return draw(cached)
    return draw(anywhere)


@built_once
@st.composite
def caching_calls(draw, max_requests: int = 8):
    """A valid call with prefix caching drawn by Hypothesis (``build_caching_call``, so it shrinks)."""
    from proofs.search.aim import DrawChooser

    return build_caching_call(DrawChooser(draw), max_requests)


def build_caching_call(c, max_requests: int = 8):
    """A valid call with prefix caching (issue 20): requests whose ``tokens`` come from a few prompt families,
    built from the chooser ``c`` (proofs.search.aim: Hypothesis's draws, or the bulk phase's seeded ones).

    Each request's prompt is a copy of a base prompt (identical), a prefix of it cut on a block
    boundary or one token off it, the base with its last token changed, the base extended, or a
    private prompt without ``tokens``.  The mode: ``families`` (anything goes), ``memory pressure``
    (a pool just big enough for the largest request, several seats, long outputs: eviction and
    preemption meet hits) or ``twins`` (copies and extensions of one prompt arriving within two
    ticks, chunked under a small or a huge budget, half of them aborted soon after they arrive:
    aborts of requests holding shared blocks).  ``prefix_caching`` is true in eight calls of ten
    (false or absent otherwise, with the same tokens: caching off must ignore them)."""
    mode = c.pick(CACHING_MODES)
    pressure, twins = mode == "memory pressure", mode == "twins"
    bs = c.pick((1, 2, 2, 3, 4, 16))
    chunked = True if twins else c.boolean()
    families = [[c.integer(0, 3) for _ in range(c.integer(bs + 1 if twins else 1, 3 * bs + 2))]
                for _ in range(1 if twins else c.integer(1, 3))]
    n = c.integer(2 if pressure or twins else 1, min(max_requests, 4) if twins else max(2, max_requests))
    kinds = (FAMILIES[0], FAMILIES[4]) if twins else FAMILIES
    requests = []
    for rid in range(n):
        base = c.pick(families)
        kind = c.pick(kinds)
        if kind == FAMILIES[0]:
            tokens = list(base)
        elif kind in FAMILIES[1:3]:
            edge = c.integer(1, max(1, len(base) // bs)) * bs
            if kind == FAMILIES[2]:
                edge += c.pick((-1, 1))
            tokens = base[:max(1, min(len(base), edge))]
        elif kind == FAMILIES[3]:
            tokens = base[:-1] + [9]
        elif kind == FAMILIES[4]:
            tokens = base + [c.integer(0, 3) for _ in range(c.integer(1, bs + 1))]
        else:
            tokens = None
        arrival = c.integer(0, 1 if pressure else 2 if twins else 4)
        request = {"id": rid, "arrival": arrival,
                   "prompt": len(tokens) if tokens is not None else c.integer(1, 2 * bs + 1),
                   "output": c.integer(2, 8) if pressure else c.integer(1, 4)}
        if tokens is not None:
            request["tokens"] = tokens if c.boolean() else tuple(tokens)
        if c.integer(0, 1 if twins else 3) == 0:
            request["abort"] = arrival + (c.integer(1, 3) if twins else c.integer(0, 6))
        requests.append(request)
    peak = max(r["prompt"] + r["output"] - 1 for r in requests)
    need = _ceil_div(peak, bs)
    if twins:
        budget = c.integer(1, 2 * bs + 1) if c.boolean() else 10**6
    elif chunked:
        budget = c.pick((c.integer(1, 4), c.integer(1, 2 * peak), 10**6))
    else:
        budget = peak + c.pick((0, 0, 1, 3))
    config = {"max_seqs": c.integer(2, 4) if pressure or twins else c.integer(1, 4), "token_budget": budget,
              "block_size": bs, "num_blocks": need + c.pick((0, 1) if pressure else (0, 1, 2, 4, 8)),
              "chunked_prefill": chunked}
    caching = c.pick((True,) * 8 + (False, None))
    if caching is not None:
        config["prefix_caching"] = caching
    if c.boolean():
        requests = tuple(requests)
    return requests, config


def caching_features(call: Call) -> list[str]:
    """The prompt families a caching call's requests were drawn from, read back from their tokens
    (what ``--json``'s statistics count, one per call and family)."""
    requests, config = call
    if not any("tokens" in r for r in requests) and "prefix_caching" not in config:
        return []
    named = ["prefix caching on" if config.get("prefix_caching") else "prefix caching off"]
    bs = config["block_size"]
    prompts = [tuple(r["tokens"]) for r in requests if r.get("tokens") is not None]
    found = set()
    for i, one in enumerate(prompts):
        for j, other in enumerate(prompts):
            if i == j:
                continue
            if one == other:
                found.add(FAMILIES[0])
            elif len(one) < len(other) and other[:len(one)] == one:
                found.add(FAMILIES[1] if len(one) % bs == 0 else FAMILIES[2])
            elif len(one) == len(other) and one[:-1] == other[:-1]:
                found.add(FAMILIES[3])
    if any(r.get("tokens") is None for r in requests):
        found.add(FAMILIES[5])
    if any("abort" in r for r in requests) and len(prompts) > len(set(prompts)):
        found.add("abort of a request sharing its prompt")
    named += sorted(found)
    return named


@built_once
@st.composite
def _aimed_or(draw, anywhere):
    """A call aimed at a corner (the last branch), or one drawn from ``anywhere``."""
    from proofs.search.aim import AIMED_BRANCH, aimed_calls

    if draw(st.integers(0, AIMED_BRANCH)) == AIMED_BRANCH:
        return draw(aimed_calls("serving"))
    return draw(anywhere)


@built_once
@st.composite
def _budget_calls(draw, max_requests: int):
    """Several requests at once whose prompts are near the token budget, in a pool that holds them all:
    what is left of the budget after the running pass decides each admission (chunked or not)."""
    budget = draw(st.integers(2, 12))
    config = {
        "max_seqs": draw(st.integers(2, 4)),
        "token_budget": budget,
        "block_size": draw(st.integers(1, 2)),
        "num_blocks": draw(st.integers(budget, 4 * budget)),
        "chunked_prefill": draw(st.booleans()),
    }
    n = draw(st.integers(2, max(2, min(max_requests, 6))))
    requests = []
    for index in range(n):
        prompt = draw(st.integers(max(1, budget // 2), budget))
        output = draw(st.integers(1, max(1, budget - prompt + 1)))
        requests.append({"id": index, "arrival": draw(st.integers(0, 3)), "prompt": prompt, "output": output})
    return requests, config


@built_once
@st.composite
def _pressure_calls(draw, max_requests: int):
    """Several requests at once with short prompts and long outputs in a pool that holds only some of them:
    decode growth preempts, often with three or more running (victim order), resumes and re-admits."""
    block_size = draw(st.integers(1, 2))
    config = {
        "max_seqs": draw(st.integers(2, 3) | st.integers(2, 6)),
        "token_budget": draw(st.integers(4, 16) | st.just(2**20)),
        "block_size": block_size,
        "num_blocks": draw(st.integers(3, 10)),
        "chunked_prefill": draw(st.booleans() | st.just(True)),
    }
    limit = peak_tokens(config)
    n = draw(st.integers(4, max(4, min(max_requests, 8))) | st.integers(2, 3))
    arrival_base = draw(st.sampled_from((0, 0, 3, 2**40)))
    requests = []
    for index in range(n):
        if draw(st.booleans()):  # big ones preempt the others; small ones fill the pool again when a big one leaves
            total = draw(st.integers(max(1, limit // 2), max(1, limit)))
        else:
            total = draw(st.integers(1, max(1, limit // 4)))
        prompt = draw(st.integers(1, max(1, min(3, total))))
        request = {"id": index, "arrival": arrival_base + draw(st.integers(0, 2)), "prompt": prompt,
                   "output": total - prompt + 1}
        if draw(st.integers(0, 5)) == 0:
            request["abort"] = request["arrival"] + draw(st.integers(0, 12))
        requests.append(request)
    return requests, config


@built_once
@st.composite
def _any_calls(draw, max_requests: int = MAX_REQUESTS, many: bool = True):
    """A valid (requests, config) anywhere in the domain."""
    config = draw(configs())
    limit = peak_tokens(config)
    arrival_base = draw(st.sampled_from(ARRIVAL_BASES))
    id_base = draw(st.sampled_from(ID_BASES))
    if many and draw(st.integers(0, 15)) == 0:  # hundreds of cheap requests, from one seed
        n = draw(st.integers(max_requests + 1, MANY_REQUESTS))
        requests = _many_requests(draw(st.integers(0, 2**32)), n, limit, arrival_base, id_base)
    else:
        n = draw(st.integers(0, max_requests))
        spread = draw(st.sampled_from((0, 3, 20, 2**33)))  # ties, near, spread out, long idle gaps
        id_step = draw(st.sampled_from((1, 1, 7, 2**40)))
        offsets = draw(st.lists(st.integers(-3, 3 * max(n, 1)), min_size=n, max_size=n, unique=True))
        # "tight": every request near the largest the rules allow, so budgets and pools run short
        # (preemption, a head that does not fit, an unchunked admission that stops the pass)
        tight = draw(st.booleans())
        requests = []
        for offset in offsets:
            low = max(1, limit // 2) if tight else 1
            total = draw(st.integers(low, max(low, limit)))  # prompt + output - 1, at most what the rules allow
            output = draw(st.integers(1, total))
            arrival = arrival_base + (draw(st.integers(0, spread)) if spread else 0)
            when = draw(st.sampled_from(("none", "none", "none", "arrival", "soon", "late")))
            requests.append({"id": id_base + offset * id_step, "arrival": arrival, "prompt": total - output + 1,
                             "output": output, **_abort_after(when, arrival, offset)})
    container = draw(st.sampled_from(("list", "list", "list", "tuple", "subclasses")))
    if container == "tuple":
        requests = tuple(requests)
    elif container == "subclasses":
        requests = JobList(JobDict(r) for r in requests)
        config = JobDict(config)
    return requests, config


def measure(call: Call) -> dict:
    """The sizes of one valid call: ``{field: (low, high)}`` for requests, max_seqs, arrivals, prompt, output, ids."""
    requests, config = call
    sizes = {"requests": (len(requests), len(requests)), "max_seqs": (config["max_seqs"], config["max_seqs"]),
             "token_budget": (config["token_budget"], config["token_budget"]),
             "num_blocks": (config["num_blocks"], config["num_blocks"])}
    for field, key in (("arrivals", "arrival"), ("prompt", "prompt"), ("output", "output"), ("ids", "id")):
        values = [request[key] for request in requests]
        if values:
            sizes[field] = (min(values), max(values))
    return sizes


SHOWN = ("requests", "max_seqs", "token_budget", "num_blocks", "arrivals", "prompt", "output")


def features(call: Call) -> list[str]:
    """The interesting cases a valid call falls in, each named as the engine's statistics show it."""
    requests, config = call
    n = len(requests)
    named = ["chunked prefill" if config["chunked_prefill"] else "no chunking",
             "no requests" if n == 0 else "1 request" if n == 1 else f"2-{MAX_REQUESTS} requests" if n <= MAX_REQUESTS
             else f"{MAX_REQUESTS + 1}+ requests"]
    if not requests:
        return named
    arrivals = sorted(r["arrival"] for r in requests)
    ids = [r["id"] for r in requests]
    if len(set(arrivals)) < n:
        named.append("same-tick arrivals")
    if any(b - a >= 2**32 for a, b in zip(arrivals, arrivals[1:])):
        named.append("idle gap >= 2**32")
    if arrivals[-1] >= 2**32:
        named.append("arrival >= 2**32")
    if min(ids) < 0:
        named.append("negative id")
    if any(abs(i) >= 2**63 for i in ids):
        named.append("id beyond 64 bits")
    if any("abort" in r for r in requests):
        named.append("aborts")
    if config["token_budget"] == 1:
        named.append("token budget 1")
    if config["max_seqs"] == 1:
        named.append("one sequence")
    if config.get("reserve_full_sequence"):
        named.append("reserve full sequence")
    return named + caching_features(call)


def _request(request_id=0, arrival=0, prompt=1, output=1, **override):
    request = {"id": request_id, "arrival": arrival, "prompt": prompt, "output": output}
    request.update(override)
    return request


def _config(**override):
    config = {"max_seqs": 2, "token_budget": 8, "block_size": 2, "num_blocks": 8, "chunked_prefill": True}
    config.update(override)
    return config


def bad_calls() -> list[tuple[str, tuple]]:
    """One (rule, call) per class of bad input; each call must raise ValueError."""
    ok, config = _request(0), _config()
    calls = []
    for field in REQUEST_KEYS + ("abort",):
        for kind, value in BAD_VALUES.items():
            calls.append((f"requests[0].{field} is {kind}", ([_request(**{field: value})], config)))
    calls += [
        ("requests[0].arrival < 0", ([_request(arrival=-1)], config)),
        ("requests[0].prompt == 0", ([_request(prompt=0)], config)),
        ("requests[0].output == 0", ([_request(output=0)], config)),
        ("requests[0].prompt < 0", ([_request(prompt=-1)], config)),
        ("requests[0].abort < arrival", ([_request(arrival=3, abort=2)], config)),
        ("repeated id", ([ok, _request(0, arrival=1)], config)),
        ("extra key", ([dict(ok, priority=0)], config)),
        ("peak KV need exceeds the pool",
         ([_request(prompt=4, output=2)], _config(block_size=2, num_blocks=2))),
        ("peak KV need exceeds the pool by one token",
         ([_request(prompt=4, output=1), _request(1, prompt=5, output=1)], _config(block_size=2, num_blocks=2))),
        ("no chunking: a request larger than the budget",
         ([_request(prompt=8, output=2)], _config(token_budget=8, chunked_prefill=False))),
    ]
    for key in REQUEST_KEYS:
        calls.append((f"missing key {key!r}", ([{k: v for k, v in ok.items() if k != key}], config)))
    for key in CONFIG_KEYS:
        calls.append((f"config missing key {key!r}", ([ok], {k: v for k, v in config.items() if k != key})))
        if key == "chunked_prefill":
            for kind, value in {"int 1": 1, "int 0": 0, "None": None, "str": "True"}.items():
                calls.append((f"config.chunked_prefill is {kind}", ([ok], dict(config, chunked_prefill=value))))
        else:
            for kind, value in {"zero": 0, "negative": -1, **BAD_VALUES}.items():
                calls.append((f"config.{key} is {kind}", ([ok], dict(config, **{key: value}))))
    calls.append(("config extra key", ([ok], dict(config, watermark=0.01))))
    for kind, value in {"None": None, "list": list(config.items()), "str": "config", "int": 3}.items():
        calls.append((f"config is a {kind}", ([ok], value)))
    for kind, value in {"None": None, "dict": ok, "str": "requests", "int": 3, "set": {1, 2}}.items():
        calls.append((f"requests is a {kind}", (value, config)))
    for kind, value in {"None": None, "list": [0, 0, 1, 1], "tuple": (0, 0, 1, 1), "int": 5}.items():
        calls.append((f"a request is a {kind}", ([value], config)))
    return calls


@built_once
@st.composite
def corrupted_calls(draw):
    """A valid call with one or two things broken, anywhere in it."""
    requests, config = draw(_any_calls(max_requests=5, many=False))
    requests = [dict(r) for r in requests] or [_request()]
    config = dict(config)
    pool_tokens = config["num_blocks"] * config["block_size"]  # before any damage to the config
    for _ in range(draw(st.integers(1, 2))):
        damage = draw(st.sampled_from(("field", "missing", "extra", "repeat", "config", "abort", "peak")))
        index = draw(st.integers(0, len(requests) - 1))
        if damage == "field":
            field = draw(st.sampled_from(REQUEST_KEYS))
            bad = BAD_VALUES | {"negative": -1, "zero": 0}
            choice = draw(st.sampled_from(sorted(bad)))
            if (field, choice) in (("id", "negative"), ("id", "zero"), ("arrival", "zero")):
                choice = "str"  # those values are valid there
            requests[index][field] = bad[choice]
        elif damage == "missing":
            requests[index].pop(draw(st.sampled_from(REQUEST_KEYS)), None)
        elif damage == "extra":
            requests[index]["extra"] = 0
        elif damage == "repeat":
            requests.append(dict(requests[index]))
        elif damage == "abort":
            arrival = requests[index].get("arrival")
            requests[index]["abort"] = (arrival - 1) if type(arrival) is int and arrival > 0 else None
        elif damage == "peak":
            requests[index]["prompt"] = pool_tokens + 1
        else:
            key = draw(st.sampled_from(CONFIG_KEYS))
            config[key] = draw(st.sampled_from((0, -2, True, 2.0, "2", None))) if key != "chunked_prefill" else 1
    return requests, config


def rejected_variants(call: Call) -> list[Call]:
    """Invalid calls that a validator rejects only after reading every request of ``call``."""
    requests, config = call
    fresh = max((r["id"] for r in requests), default=0) + 1
    late_zero = list(requests) + [_request(fresh, prompt=0)]
    repeated = list(requests) + [dict(requests[0])] if requests else [_request(prompt=0)]
    return [(late_zero, config), (repeated, config)]


def other_calls(call: Call) -> list[Call]:
    """Valid calls made before a repeated call, to catch state kept between calls."""
    requests, config = call
    return [
        (requests, dict(config, chunked_prefill=True)),
        (requests, dict(config, max_seqs=config["max_seqs"] + 1)),
        (requests, dict(config, num_blocks=config["num_blocks"] + 1)),
    ]
