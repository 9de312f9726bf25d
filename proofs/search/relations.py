"""Metamorphic relations: what must hold between the results of related calls.

Each relation is a theorem about the reference (the policy theorem is proved by the
Z3 engine; the others follow from the step rules), so a target that breaks one has,
on one of the related calls, broken an invariant too.  They are search guides: they
make the harness compare calls the plain search would rarely pair.

- ``continuous_never_starts_later``: on the same input, no job starts later under
  continuous batching than under static batching;
- ``one_slot_policies_agree``: with one slot, static and continuous are the same schedule;
- ``enough_slots_no_wait``: with at least as many slots as jobs, continuous makes nobody wait;
- ``equal_group_policies_agree``: jobs arriving together with equal tokens get the same
  schedule under both policies.
"""

from __future__ import annotations

from typing import Callable

from proofs.search.judge import contract_part


def related_calls(jobs: list, slots: int) -> list[tuple]:
    """The calls the relations compare, for one list of jobs and a slot count."""
    calls = [(jobs, slots, False), (jobs, slots, True), (jobs, 1, False), (jobs, 1, True)]
    calls.append((jobs, max(1, len(jobs)), True))
    return calls


def broken_relations(jobs: list, slots: int, results: dict[tuple, dict]) -> list[str]:
    """The relations that ``results`` (keyed by (slots, continuous)) break, as sentences."""
    broken = []
    results = {key: contract_part(result) for key, result in results.items()}  # extra keys are not compared
    static, backfilled = results[(slots, False)], results[(slots, True)]
    start = {policy: {job["id"]: job["start"] for job in result["completed"]} for policy, result in
             (("static", static), ("continuous", backfilled))}
    for job_id, static_start in start["static"].items():
        if start["continuous"].get(job_id, static_start) > static_start:
            broken.append(
                f"continuous_never_starts_later: job {job_id} starts at {start['continuous'][job_id]} "
                f"under continuous but at {static_start} under static"
            )
            break
    if results[(1, False)] != results[(1, True)]:
        broken.append("one_slot_policies_agree: with slots=1 static and continuous differ")
    wide = results[(max(1, len(jobs)), True)]
    if any(job["wait"] != 0 for job in wide["completed"]):
        broken.append(f"enough_slots_no_wait: with slots={max(1, len(jobs))} a job waits under continuous")
    if jobs and len({(job["arrival"], job["tokens"]) for job in jobs}) == 1 and static != backfilled:
        broken.append("equal_group_policies_agree: equal jobs arriving together are scheduled differently")
    return broken


def check_relations(schedule: Callable, jobs: list, slots: int) -> list[str]:
    """Run ``schedule`` on the related calls and return the relations it breaks."""
    results = {(s, c): schedule([dict(job) for job in j], s, c) for j, s, c in related_calls(jobs, slots)}
    return broken_relations(jobs, slots, results)
