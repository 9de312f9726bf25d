"""The serving model's worked examples S1-S3 (issue 10), exactly as the issue gives them."""

S1_CONFIG = {"max_seqs": 2, "token_budget": 4, "block_size": 2, "num_blocks": 8, "chunked_prefill": True}
S1_REQUESTS = [{"id": 0, "arrival": 0, "prompt": 6, "output": 2}, {"id": 1, "arrival": 0, "prompt": 2, "output": 3}]
S1_TRACE = [
    {"tick": 0, "scheduled": [[0, 4]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0, 1]]], "finished": []},
    {"tick": 1, "scheduled": [[0, 2], [1, 2]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [2]], [1, [3]]], "finished": []},
    {"tick": 2, "scheduled": [[0, 1], [1, 1]], "preempted": [], "aborted": [], "freed": [[0, [0, 1, 2, 4]]], "allocated": [[0, [4]], [1, [5]]], "finished": [0]},
    {"tick": 3, "scheduled": [[1, 1]], "preempted": [], "aborted": [], "freed": [[1, [3, 5]]], "allocated": [], "finished": [1]},
]
S1_TOTALS = {"makespan_ticks": 4, "computed_tokens": 11, "useful_tokens": 11, "recomputed_tokens": 0, "aborted_tokens": 0, "token_utilization": 0.6875, "preemptions": 0}
S1_RECORDS = [
    {"id": 0, "start": 0, "first_token": 2, "finish": 3, "aborted": None, "generated": 2, "preemptions": 0, "computed": 7},
    {"id": 1, "start": 1, "first_token": 2, "finish": 4, "aborted": None, "generated": 3, "preemptions": 0, "computed": 4},
]

S2_CONFIG = {"max_seqs": 2, "token_budget": 8, "block_size": 1, "num_blocks": 4, "chunked_prefill": True}
S2_REQUESTS = [{"id": 0, "arrival": 0, "prompt": 2, "output": 3}, {"id": 1, "arrival": 0, "prompt": 1, "output": 2}]
S2_TRACE = [
    {"tick": 0, "scheduled": [[0, 2], [1, 1]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0, 1]], [1, [2]]], "finished": []},
    {"tick": 1, "scheduled": [[0, 1]], "preempted": [1], "aborted": [], "freed": [[1, [2]]], "allocated": [[0, [3]]], "finished": []},
    {"tick": 2, "scheduled": [[0, 1]], "preempted": [], "aborted": [], "freed": [[0, [0, 1, 3, 2]]], "allocated": [[0, [2]]], "finished": [0]},
    {"tick": 3, "scheduled": [[1, 2]], "preempted": [], "aborted": [], "freed": [[1, [0, 1]]], "allocated": [[1, [0, 1]]], "finished": [1]},
]
S2_TOTALS = {"makespan_ticks": 4, "computed_tokens": 7, "useful_tokens": 6, "recomputed_tokens": 1, "aborted_tokens": 0, "token_utilization": 0.21875, "preemptions": 1}
S2_RECORDS = [
    {"id": 0, "start": 0, "first_token": 1, "finish": 3, "aborted": None, "generated": 3, "preemptions": 0, "computed": 4},
    {"id": 1, "start": 0, "first_token": 1, "finish": 4, "aborted": None, "generated": 2, "preemptions": 1, "computed": 3},
]

S3_CONFIG = {"max_seqs": 1, "token_budget": 8, "block_size": 4, "num_blocks": 2, "chunked_prefill": False}
S3_REQUESTS = [{"id": 0, "arrival": 0, "prompt": 3, "output": 4, "abort": 2}, {"id": 1, "arrival": 1, "prompt": 2, "output": 1}]
S3_TRACE = [
    {"tick": 0, "scheduled": [[0, 3]], "preempted": [], "aborted": [], "freed": [], "allocated": [[0, [0]]], "finished": []},
    {"tick": 1, "scheduled": [[0, 1]], "preempted": [], "aborted": [], "freed": [], "allocated": [], "finished": []},
    {"tick": 2, "scheduled": [[1, 2]], "preempted": [], "aborted": [0], "freed": [[0, [0]], [1, [0]]], "allocated": [[1, [0]]], "finished": [1]},
]
S3_TOTALS = {"makespan_ticks": 3, "computed_tokens": 6, "useful_tokens": 2, "recomputed_tokens": 0, "aborted_tokens": 4, "token_utilization": 0.25, "preemptions": 0}
S3_RECORDS = [
    {"id": 0, "start": 0, "first_token": 1, "finish": None, "aborted": 2, "generated": 2, "preemptions": 0, "computed": 4},
    {"id": 1, "start": 2, "first_token": 3, "finish": 3, "aborted": None, "generated": 1, "preemptions": 0, "computed": 2},
]

EXAMPLES = {
    "S1": (S1_REQUESTS, S1_CONFIG, S1_TRACE, S1_TOTALS, S1_RECORDS, (11, 16)),
    "S2": (S2_REQUESTS, S2_CONFIG, S2_TRACE, S2_TOTALS, S2_RECORDS, (7, 32)),
    "S3": (S3_REQUESTS, S3_CONFIG, S3_TRACE, S3_TOTALS, S3_RECORDS, (6, 24)),
}


def expected_result(name: str) -> dict:
    """The whole result the issue gives for example ``name``: trace, records (with the caller's keys), totals."""
    requests, _config, trace, totals, records, _ratio = EXAMPLES[name]
    by_id = {r["id"]: r for r in requests}
    return {
        "trace": trace,
        "requests": [{**by_id[rec["id"]], **rec} for rec in records],
        **totals,
    }


# --- prefix caching (issue 20): P1 and P2 as the issue gives them, C1-C4 worked by hand ------------------------


def _e(tick, scheduled, preempted=(), aborted=(), freed=(), allocated=(), finished=(), hits=()):
    """One trace entry with prefix caching (every list present, ``hits`` last)."""
    return {"tick": tick, "scheduled": [list(p) for p in scheduled], "preempted": list(preempted),
            "aborted": list(aborted), "freed": [[i, list(b)] for i, b in freed],
            "allocated": [[i, list(b)] for i, b in allocated], "finished": list(finished),
            "hits": [[i, list(b)] for i, b in hits]}


def _cache_config(**changes):
    return {"max_seqs": 2, "token_budget": 8, "chunked_prefill": True, "prefix_caching": True, **changes}


P1_CONFIG = _cache_config(block_size=2, num_blocks=8)
P1_REQUESTS = [{"id": 0, "arrival": 0, "prompt": 4, "tokens": [1, 2, 3, 4], "output": 1},
               {"id": 1, "arrival": 1, "prompt": 5, "tokens": [1, 2, 3, 4, 5], "output": 1}]
P1_TRACE = [
    _e(0, [(0, 4)], allocated=[(0, [0, 1])], freed=[(0, [0, 1])], finished=[0]),  # queue 2..7, 1, 0
    _e(1, [(1, 1)], hits=[(1, [0, 1])], allocated=[(1, [2])], freed=[(1, [0, 1, 2])], finished=[1]),
]
P1_TOTALS = {"makespan_ticks": 2, "computed_tokens": 5, "cache_hit_tokens": 4, "useful_tokens": 9,
             "recomputed_tokens": 0, "aborted_tokens": 0, "preemptions": 0}
P1_RECORDS = {1: {"cached": 4, "computed": 1}}

P2_CONFIG = _cache_config(block_size=2, num_blocks=3, max_seqs=1)
P2_REQUESTS = [{"id": i, "arrival": 0, "prompt": len(t), "tokens": t, "output": 1}
               for i, t in enumerate([[1, 2, 3, 4], [9, 9], [1, 2, 7], [1, 2, 3, 4, 5]])]
P2_TRACE = [
    _e(0, [(0, 4)], allocated=[(0, [0, 1])], freed=[(0, [0, 1])], finished=[0]),  # queue 2, 1, 0
    _e(1, [(1, 2)], allocated=[(1, [2])], freed=[(1, [2])], finished=[1]),  # queue 1, 0, 2
    # request 2 hits block 0; taking block 1 evicts the chain [1, 2, 3, 4]
    _e(2, [(2, 1)], hits=[(2, [0])], allocated=[(2, [1])], freed=[(2, [0, 1])], finished=[2]),
    # request 3 hits only block 0: [1, 2, 3, 4] was evicted
    _e(3, [(3, 3)], hits=[(3, [0])], allocated=[(3, [2, 1])], freed=[(3, [0, 2, 1])], finished=[3]),
]
P2_TOTALS = {"makespan_ticks": 4, "computed_tokens": 10, "cache_hit_tokens": 4, "useful_tokens": 14,
             "recomputed_tokens": 0, "aborted_tokens": 0, "preemptions": 0}
P2_RECORDS = {2: {"cached": 2, "computed": 1}, 3: {"cached": 2, "computed": 3}}

# C1: a victim hits its own blocks after its preemption, one of them holding its first generated token.
C1_CONFIG = _cache_config(block_size=2, num_blocks=4)
C1_REQUESTS = [{"id": 0, "arrival": 0, "prompt": 2, "tokens": [1, 2], "output": 3},
               {"id": 1, "arrival": 0, "prompt": 3, "tokens": [4, 5, 6], "output": 4}]
C1_TRACE = [
    _e(0, [(0, 2), (1, 3)], allocated=[(0, [0]), (1, [1, 2])]),  # queue 3; block 1 holds [4, 5]
    _e(1, [(0, 1), (1, 1)], allocated=[(0, [3])]),  # block 2 fills: [4, 5, 6, g0], request 1's own token
    # request 1 needs a third block, none is free: it preempts itself (queue 2, 1), then 0 finishes (queue 2, 1, 3, 0)
    _e(2, [(0, 1)], preempted=[1], freed=[(1, [1, 2]), (0, [0, 3])], finished=[0]),
    # known 5, cap 4: both its blocks are still cached; its new block is the queue's head, 3
    _e(3, [(1, 1)], hits=[(1, [1, 2])], allocated=[(1, [3])]),
    _e(4, [(1, 1)], freed=[(1, [1, 2, 3])], finished=[1]),
]
C1_TOTALS = {"makespan_ticks": 5, "computed_tokens": 10, "cache_hit_tokens": 4, "useful_tokens": 10,
             "recomputed_tokens": 4, "aborted_tokens": 0, "preemptions": 1}
C1_RECORDS = {1: {"cached": 4, "computed": 6, "preemptions": 1, "finish": 5}}

# C2: a hit block of count 0 keeps a request from fitting (it leaves the free queue too).
C2_CONFIG = _cache_config(block_size=2, num_blocks=4)
C2_REQUESTS = [{"id": 0, "arrival": 0, "prompt": 3, "tokens": [1, 2, 3], "output": 1},
               {"id": 1, "arrival": 1, "prompt": 5, "output": 2},
               {"id": 2, "arrival": 1, "prompt": 3, "tokens": [1, 2, 9], "output": 1}]
C2_TRACE = [
    _e(0, [(0, 3)], allocated=[(0, [0, 1])], freed=[(0, [0, 1])], finished=[0]),  # queue 2, 3, 1, 0
    # request 2 would hit block 0 and need one new block: 2 blocks, but the queue holds only block 0
    _e(1, [(1, 5)], allocated=[(1, [2, 3, 1])]),
    _e(2, [(1, 1)], freed=[(1, [2, 3, 1])], finished=[1]),  # the pass stops again at request 2: queue [0]
    _e(3, [(2, 1)], hits=[(2, [0])], allocated=[(2, [1])], freed=[(2, [0, 1])], finished=[2]),
]
C2_TOTALS = {"makespan_ticks": 4, "computed_tokens": 10, "cache_hit_tokens": 2, "useful_tokens": 12,
             "recomputed_tokens": 0, "aborted_tokens": 0, "preemptions": 0}
C2_RECORDS = {2: {"cached": 2, "computed": 1, "start": 3}}

# C3: an abort of a request whose blocks another request shares: its freed lists only the unshared one.
C3_CONFIG = _cache_config(block_size=2, num_blocks=8)
C3_REQUESTS = [{"id": 0, "arrival": 0, "prompt": 5, "tokens": [1, 2, 3, 4, 5], "output": 4, "abort": 2},
               {"id": 1, "arrival": 1, "prompt": 5, "tokens": [1, 2, 3, 4, 6], "output": 2}]
C3_TRACE = [
    _e(0, [(0, 5)], allocated=[(0, [0, 1, 2])]),
    _e(1, [(0, 1), (1, 1)], hits=[(1, [0, 1])], allocated=[(1, [3])]),  # blocks 0 and 1 now have count 2
    _e(2, [(1, 1)], aborted=[0], freed=[(0, [2]), (1, [0, 1, 3])], finished=[1]),
]
C3_TOTALS = {"makespan_ticks": 3, "computed_tokens": 8, "cache_hit_tokens": 4, "useful_tokens": 6,
             "recomputed_tokens": 0, "aborted_tokens": 6, "preemptions": 0}
C3_RECORDS = {0: {"aborted": 2, "computed": 6}, 1: {"cached": 4, "computed": 2}}

# C4: two identical prompts register two copies of one chain; the first copy is evicted, the second is hit.
C4_CONFIG = _cache_config(block_size=2, num_blocks=4)
C4_REQUESTS = [{"id": 0, "arrival": 0, "prompt": 2, "tokens": [1, 2], "output": 2},
               {"id": 1, "arrival": 0, "prompt": 2, "tokens": [1, 2], "output": 2},
               {"id": 2, "arrival": 2, "prompt": 3, "output": 1},
               {"id": 3, "arrival": 3, "prompt": 3, "tokens": [1, 2, 5], "output": 1}]
C4_TRACE = [
    # known 2, cap 1: no hit is possible, so request 1 computes [1, 2] again: blocks 0 and 1 hold the same chain
    _e(0, [(0, 2), (1, 2)], allocated=[(0, [0]), (1, [1])]),
    _e(1, [(0, 1), (1, 1)], allocated=[(0, [2]), (1, [3])], freed=[(0, [0, 2]), (1, [1, 3])], finished=[0, 1]),
    _e(2, [(2, 3)], allocated=[(2, [2, 0])], freed=[(2, [2, 0])], finished=[2]),  # the queue was 2, 0, 3, 1: 0 evicted
    _e(3, [(3, 1)], hits=[(3, [1])], allocated=[(3, [3])], freed=[(3, [1, 3])], finished=[3]),
]
C4_TOTALS = {"makespan_ticks": 4, "computed_tokens": 10, "cache_hit_tokens": 2, "useful_tokens": 12,
             "recomputed_tokens": 0, "aborted_tokens": 0, "preemptions": 0}
C4_RECORDS = {3: {"cached": 2, "computed": 1}}

CACHE_EXAMPLES = {
    "P1": (P1_REQUESTS, P1_CONFIG, P1_TRACE, P1_TOTALS, P1_RECORDS),
    "P2": (P2_REQUESTS, P2_CONFIG, P2_TRACE, P2_TOTALS, P2_RECORDS),
    "C1": (C1_REQUESTS, C1_CONFIG, C1_TRACE, C1_TOTALS, C1_RECORDS),
    "C2": (C2_REQUESTS, C2_CONFIG, C2_TRACE, C2_TOTALS, C2_RECORDS),
    "C3": (C3_REQUESTS, C3_CONFIG, C3_TRACE, C3_TOTALS, C3_RECORDS),
    "C4": (C4_REQUESTS, C4_CONFIG, C4_TRACE, C4_TOTALS, C4_RECORDS),
}
