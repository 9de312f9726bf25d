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
