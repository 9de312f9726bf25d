"""The worked examples of prefix caching (issue 20): P1 and P2 as the issue gives them, and C1-C5 worked by hand.

Each example is (requests, config, trace, totals, records): the full expected result
of `serve(requests, config)`, the trace entries with every list (`hits` included), the
totals with `cache_hit_tokens`, and per request its record fields (the caller's keys
are the request's own).  C1-C5 were computed by hand from the issue's text before any
scheduler ran them; the comment above each gives the reasoning a reader can follow
tick by tick.  tests/test_serving_cache_corpus.py checks the correct caching
schedulers of the corpus against every one; the spec's `run` can be checked the same
way (`EXAMPLES` is plain data).
"""


def _config(max_seqs, token_budget, block_size, num_blocks, chunked_prefill=True):
    return {"max_seqs": max_seqs, "token_budget": token_budget, "block_size": block_size,
            "num_blocks": num_blocks, "chunked_prefill": chunked_prefill, "prefix_caching": True}


def _request(rid, arrival, output, tokens=None, prompt=None, abort=None):
    out = {"id": rid, "arrival": arrival, "prompt": len(tokens) if tokens is not None else prompt, "output": output}
    if tokens is not None:
        out["tokens"] = list(tokens)
    if abort is not None:
        out["abort"] = abort
    return out


def _entry(tick, scheduled, allocated=(), freed=(), finished=(), hits=(), preempted=(), aborted=()):
    return {"tick": tick, "scheduled": [list(x) for x in scheduled], "preempted": list(preempted),
            "aborted": list(aborted), "freed": [[i, list(b)] for i, b in freed],
            "allocated": [[i, list(b)] for i, b in allocated], "finished": list(finished),
            "hits": [[i, list(b)] for i, b in hits]}


def _totals(makespan, computed, hits, useful, recomputed, aborted, budget, preemptions):
    return {"makespan_ticks": makespan, "computed_tokens": computed, "cache_hit_tokens": hits,
            "useful_tokens": useful, "recomputed_tokens": recomputed, "aborted_tokens": aborted,
            "token_utilization": computed / (budget * makespan) if makespan else 0.0, "preemptions": preemptions}


def _record(rid, start, first_token, finish, aborted, generated, preemptions, computed, cached):
    return {"id": rid, "start": start, "first_token": first_token, "finish": finish, "aborted": aborted,
            "generated": generated, "preemptions": preemptions, "computed": computed, "cached": cached}


# P1 (issue 20): request 1 hits both blocks request 0 registered and freed; the cap leaves its last token to compute.
P1 = (
    [_request(0, 0, 1, tokens=[1, 2, 3, 4]), _request(1, 1, 1, tokens=[1, 2, 3, 4, 5])],
    _config(2, 8, 2, 8),
    [
        _entry(0, [[0, 4]], allocated=[(0, [0, 1])], freed=[(0, [0, 1])], finished=[0]),
        _entry(1, [[1, 1]], hits=[(1, [0, 1])], allocated=[(1, [2])], freed=[(1, [0, 1, 2])], finished=[1]),
    ],
    _totals(2, 5, 4, 9, 0, 0, 8, 0),
    [_record(0, 0, 1, 1, None, 1, 0, 4, 0), _record(1, 1, 2, 2, None, 1, 0, 1, 4)],
)

# P2 (issue 20): the free queue is LRU with the tail of each release first; taking block 1 evicts [1, 2, 3, 4].
P2 = (
    [_request(0, 0, 1, tokens=[1, 2, 3, 4]), _request(1, 0, 1, tokens=[9, 9]), _request(2, 0, 1, tokens=[1, 2, 7]),
     _request(3, 0, 1, tokens=[1, 2, 3, 4, 5])],
    _config(1, 8, 2, 3),
    [
        _entry(0, [[0, 4]], allocated=[(0, [0, 1])], freed=[(0, [0, 1])], finished=[0]),
        _entry(1, [[1, 2]], allocated=[(1, [2])], freed=[(1, [2])], finished=[1]),
        _entry(2, [[2, 1]], hits=[(2, [0])], allocated=[(2, [1])], freed=[(2, [0, 1])], finished=[2]),
        _entry(3, [[3, 3]], hits=[(3, [0])], allocated=[(3, [2, 1])], freed=[(3, [0, 2, 1])], finished=[3]),
    ],
    _totals(4, 10, 4, 14, 0, 0, 8, 0),
    [_record(0, 0, 1, 1, None, 1, 0, 4, 0), _record(1, 1, 2, 2, None, 1, 0, 2, 0),
     _record(2, 2, 3, 3, None, 1, 0, 1, 2), _record(3, 3, 4, 4, None, 1, 0, 3, 2)],
)

# C1: a preemption after which the victim hits its own block, one holding its own generated token.
# block_size 2, 4 blocks, no chunking.  Request 1 (prompt 1) computes p0 at tick 0 and its first
# output g0 at tick 1, which fills its block 1 = [p0, g0]: registered.  At tick 2 it takes block 3
# for g1.  At tick 3 request 0 needs a block with none free: request 1 (computed 3) is preempted,
# its table [1, 3] freed last block first (queue 3, 1) and request 0 takes block 3 (never full,
# never registered).  Request 0 finishes (queue 1, 3, 2, 0).  At tick 4 request 1 comes back with
# known = 4 (p0 g0 g1 g2): its cap is 3 tokens, so it may hit block 0 of its chain only, [p0, g0]:
# block 1, still registered; it computes g1 g2 (n = 2) into a new block, the head 3.  Ledger:
# computed 11 + hits 2 = useful 10 + recomputed 3.
C1 = (
    [_request(0, 0, 4, prompt=2), _request(1, 0, 5, prompt=1)],
    _config(2, 8, 2, 4, chunked_prefill=False),
    [
        _entry(0, [[0, 2], [1, 1]], allocated=[(0, [0]), (1, [1])]),
        _entry(1, [[0, 1], [1, 1]], allocated=[(0, [2])]),
        _entry(2, [[0, 1], [1, 1]], allocated=[(1, [3])]),
        _entry(3, [[0, 1]], preempted=[1], allocated=[(0, [3])], freed=[(1, [1, 3]), (0, [0, 2, 3])], finished=[0]),
        _entry(4, [[1, 2]], hits=[(1, [1])], allocated=[(1, [3])]),
        _entry(5, [[1, 1]], allocated=[(1, [2])], freed=[(1, [1, 3, 2])], finished=[1]),
    ],
    _totals(6, 11, 2, 10, 3, 0, 8, 1),
    [_record(0, 0, 1, 4, None, 4, 0, 5, 0), _record(1, 0, 1, 6, None, 5, 1, 6, 2)],
)

# C2: a hit block of count 0 keeps a request from fitting.  block_size 2, 3 blocks.  Request 0
# ([1, 2]) registers block 0 and frees it at tick 0 (queue: 0).  At tick 1 request 2 ([1, 2, 5])
# would hit block 0 and need one new block: 1 new + 1 evictable hit = 2 > 1 free, so it does not
# fit (counting only the new block, it would, and then find no block to take).  At tick 2 request
# 1's decode takes block 0, the head, which evicts [1, 2]; request 2 no longer hits and waits for
# blocks.  At tick 3 it computes its whole prompt into blocks 0 and 2 (block 2, registered by
# request 1, is evicted) and registers [1, 2] again in block 0.
C2 = (
    [_request(0, 0, 1, tokens=[1, 2]), _request(1, 0, 3, prompt=3), _request(2, 1, 1, tokens=[1, 2, 5])],
    _config(2, 8, 2, 3),
    [
        _entry(0, [[0, 2], [1, 3]], allocated=[(0, [0]), (1, [1, 2])], freed=[(0, [0])], finished=[0]),
        _entry(1, [[1, 1]]),
        _entry(2, [[1, 1]], allocated=[(1, [0])], freed=[(1, [1, 2, 0])], finished=[1]),
        _entry(3, [[2, 3]], allocated=[(2, [0, 2])], freed=[(2, [0, 2])], finished=[2]),
    ],
    _totals(4, 10, 0, 10, 0, 0, 8, 0),
    [_record(0, 0, 1, 1, None, 1, 0, 2, 0), _record(1, 0, 1, 3, None, 3, 0, 5, 0),
     _record(2, 3, 4, 4, None, 1, 0, 3, 0)],
)

# C3: an abort of a request whose blocks another request shares.  block_size 2, 6 blocks.  Request 0
# ([1..5]) registers blocks 0 ([1, 2]) and 1 ([1..4]) at tick 0 and block 2 ([1..5, g0]) at tick 1;
# request 1 ([1, 2, 3, 4, 6]) arrives at tick 1 and hits blocks 0 and 1 (count 1 -> 2, nothing
# evictable), computing only its token 6 into a new block 3.  Request 0 is aborted at tick 2: its
# counts fall to 1, 1 and 0, so its freed lists only block 2; the 6 tokens it held are aborted
# work.  Request 1 then computes its first output (position 5, still in block 3: no new block;
# worked by hand first with one block too many here, corrected once the schedulers disagreed and
# the rule, ceil(6 / 2) = 3 blocks already held, was read again) and finishes, freeing [0, 1, 3].
# Ledger: 8 computed + 4 hits = 6 useful + 6 aborted.
C3 = (
    [_request(0, 0, 3, tokens=[1, 2, 3, 4, 5], abort=2), _request(1, 1, 2, tokens=[1, 2, 3, 4, 6])],
    _config(2, 8, 2, 6),
    [
        _entry(0, [[0, 5]], allocated=[(0, [0, 1, 2])]),
        _entry(1, [[0, 1], [1, 1]], hits=[(1, [0, 1])], allocated=[(1, [3])]),
        _entry(2, [[1, 1]], aborted=[0], freed=[(0, [2]), (1, [0, 1, 3])], finished=[1]),
    ],
    _totals(3, 8, 4, 6, 0, 6, 8, 0),
    [_record(0, 0, 1, None, 2, 2, 0, 6, 0), _record(1, 1, 2, 3, None, 2, 0, 2, 4)],
)

# C4: two identical prompts whose copies of one chain are both registered; the first is evicted,
# the second hit.  block_size 2, 4 blocks.  Requests 0 and 1 both have tokens [7, 7]: one full
# block, which the cap (known - 1 = 1 token) forbids either to hit, so at tick 0 each computes its
# own copy and the chain [7, 7] holds blocks [0, 1] in registration order.  Request 0 finishes
# first (queue 2, 3, 0), request 1 at tick 1 (queue 3, 0, 2, 1).  At tick 2 request 2 (private
# prompt of 3) takes the head blocks 3 and 0, evicting the earliest copy; request 3 ([7, 7, 9]),
# admitted after it in the same tick, hits the chain's remaining block 1 (count 0: it leaves the
# queue, then block 2, never full, is taken).
C4 = (
    [_request(0, 0, 1, tokens=[7, 7]), _request(1, 0, 2, tokens=[7, 7]), _request(2, 2, 1, prompt=3),
     _request(3, 2, 1, tokens=[7, 7, 9])],
    _config(2, 8, 2, 4),
    [
        _entry(0, [[0, 2], [1, 2]], allocated=[(0, [0]), (1, [1])], freed=[(0, [0])], finished=[0]),
        _entry(1, [[1, 1]], allocated=[(1, [2])], freed=[(1, [1, 2])], finished=[1]),
        _entry(2, [[2, 3], [3, 1]], hits=[(3, [1])], allocated=[(2, [3, 0]), (3, [2])],
               freed=[(2, [3, 0]), (3, [1, 2])], finished=[2, 3]),
    ],
    _totals(3, 9, 2, 11, 0, 0, 8, 0),
    [_record(0, 0, 1, 1, None, 1, 0, 2, 0), _record(1, 0, 1, 2, None, 2, 0, 3, 0),
     _record(2, 2, 3, 3, None, 1, 0, 3, 0), _record(3, 2, 3, 3, None, 1, 0, 1, 2)],
)

# C5: a hit in the tick that registered the block, and a shared block freed by its last holder.
# block_size 2, 5 blocks.  Request 0 ([1..5]) is admitted first and its blocks 0 and 1 are
# registered when it is scheduled, so request 1 ([1, 2, 3, 4, 6]), admitted after it in the same
# tick, hits them (count 1 -> 2).  Both finish at the end of the tick: request 0's release brings
# only block 2 to 0, request 1's brings 0, 1 and 3 (queue 4, 2, 3, 1, 0): each shared block is
# freed once, by its last holder.
C5 = (
    [_request(0, 0, 1, tokens=[1, 2, 3, 4, 5]), _request(1, 0, 1, tokens=[1, 2, 3, 4, 6])],
    _config(2, 8, 2, 5),
    [
        _entry(0, [[0, 5], [1, 1]], hits=[(1, [0, 1])], allocated=[(0, [0, 1, 2]), (1, [3])],
               freed=[(0, [2]), (1, [0, 1, 3])], finished=[0, 1]),
    ],
    _totals(1, 6, 4, 10, 0, 0, 8, 0),
    [_record(0, 0, 1, 1, None, 1, 0, 5, 0), _record(1, 0, 1, 1, None, 1, 0, 1, 4)],
)

EXAMPLES = {"P1": P1, "P2": P2, "C1": C1, "C2": C2, "C3": C3, "C4": C4, "C5": C5}
