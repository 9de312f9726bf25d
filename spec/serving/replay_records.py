"""The serving replay's end: unfinished requests, then the result's records and totals against its trace."""

from __future__ import annotations

import math
from collections import Counter

from spec.serving.domain import fcfs_key
from spec.serving.metrics import CACHE_RECORD_KEY, CACHE_TOTAL_KEY, token_utilization


class RecordChecks:
    """The end-of-trace half of ``spec.serving.result_checks.Replay`` (a mixin: it reads the replay's state)."""

    def end(self) -> None:
        """The end-of-trace claims: every abort happened, every request finished or was aborted."""
        self.overdue_aborts(math.inf)
        live = list(self.waiting.after) + list(self.running.after)
        for request_id in sorted(live, key=lambda i: fcfs_key(self.of[i].request)):
            r = self.of[request_id]
            self.report(
                "every_job_completes_once",
                f"request {request_id} is still {r.status} after the last tick: it never finishes nor is aborted",
                tick=self.previous_tick, ids=[request_id],
            )

    def close(self, records: list, result: dict) -> None:
        """``end``, then the result's per-request records and totals against what the trace says."""
        assert self.records, "close() checks records: make the Replay with records=True"
        self.end()
        self.check_records(records)
        self.check_totals(result)

    def check_records(self, records: list) -> None:
        listed = Counter(record["id"] for record in records)
        for request_id in self.of:
            if listed[request_id] != 1:
                self.report(
                    "every_job_completes_once",
                    f"result requests lists request {request_id} {listed[request_id]} times",
                    ids=[request_id], expected=1, actual=listed[request_id],
                )
        for request_id in listed:
            if request_id not in self.of:
                self.report(
                    "every_job_completes_once", f"result requests lists request {request_id}, which is not in the input",
                    ids=[request_id],
                )
        ids = [record["id"] for record in records]
        if ids != sorted(ids):
            self.report("metrics_consistent", f"result requests are ordered {ids}, not by id", expected=sorted(ids), actual=ids)
        for record in records:
            r = self.of.get(record["id"])
            if r is None:
                continue
            request = r.request
            request_id = request.id
            if not 0 <= record["generated"] <= request.output:
                self.report(
                    "nonnegative_remaining",
                    f"request {request_id}: generated={record['generated']}, outside 0..output={request.output}",
                    ids=[request_id], expected=f"0..{request.output}", actual=record["generated"],
                )
            if (record["finish"] is None) == (record["aborted"] is None):
                self.report(
                    "every_job_completes_once",
                    f"request {request_id}: finish={record['finish']} and aborted={record['aborted']}; "
                    "a request ends exactly one way",
                    ids=[request_id],
                )
            if "tokens" in record and (
                not isinstance(record["tokens"], (list, tuple)) or list(record["tokens"]) != list(request.tokens or ())
            ):
                self.report(
                    "metrics_consistent",
                    f"request {request_id}: tokens={record['tokens']!r}, the caller gave "
                    f"{'none' if request.tokens is None else list(request.tokens)}",
                    ids=[request_id], expected=request.tokens, actual=record["tokens"],
                )
            cached = record.get(CACHE_RECORD_KEY, 0)
            if cached != r.hit_tokens:
                self.report(
                    "metrics_consistent",
                    f"request {request_id}: cached={cached}, but its admissions' hits give it {r.hit_tokens} tokens",
                    ids=[request_id], expected=r.hit_tokens, actual=cached,
                )
            if record["computed"] != r.total:
                self.report(
                    "work_conservation",
                    f"request {request_id}: computed={record['computed']}, but the trace schedules {r.total} tokens for it",
                    ids=[request_id], expected=r.total, actual=record["computed"],
                )
            expect = {
                "arrival": request.arrival,
                "prompt": request.prompt,
                "output": request.output,
                "start": r.start,
                "first_token": r.first_token,
                "finish": r.finish,
                "aborted": r.aborted_at,
                "generated": r.generated,
                "preemptions": r.preemptions,
            }
            if ("abort" in record) != (request.abort is not None) or record.get("abort") != request.abort:
                self.report(
                    "metrics_consistent",
                    f"request {request_id}: abort={record.get('abort', '<absent>')}, the caller gave "
                    f"{'no abort' if request.abort is None else request.abort}",
                    ids=[request_id], expected=request.abort, actual=record.get("abort"),
                )
            for field, value in expect.items():
                if record[field] != value or type(record[field]) is not type(value):
                    self.report(
                        "metrics_consistent",
                        f"request {request_id}: {field}={record[field]}, the trace says {value}",
                        ids=[request_id], expected=value, actual=record[field],
                    )

    def check_totals(self, result: dict) -> None:
        ledger = {
            "computed_tokens": self.computed,
            CACHE_TOTAL_KEY: self.hit_tokens,
            "useful_tokens": self.useful,
            "recomputed_tokens": self.recomputed,
            "aborted_tokens": self.aborted,
        }
        hit_tokens = result.get(CACHE_TOTAL_KEY, 0)
        for field, value in ledger.items():
            given = result.get(field, 0)
            if given != value:
                self.report("work_conservation", f"{field}={given}, the trace says {value}", expected=value, actual=given)
        parts = result["useful_tokens"] + result["recomputed_tokens"] + result["aborted_tokens"]
        if result["computed_tokens"] + hit_tokens != parts:
            with_hits = f" + {CACHE_TOTAL_KEY}={hit_tokens}" if hit_tokens else ""
            self.report(
                "work_conservation",
                f"computed_tokens={result['computed_tokens']}{with_hits} but useful + recomputed + aborted = {parts}",
                expected=parts, actual=result["computed_tokens"] + hit_tokens,
            )
        makespan = 0 if self.last_scheduled_tick is None else self.last_scheduled_tick + 1
        if result["makespan_ticks"] != makespan:
            self.report(
                "metrics_consistent",
                f"makespan_ticks={result['makespan_ticks']}, expected the last tick with scheduled work + 1 = {makespan}",
                expected=makespan, actual=result["makespan_ticks"],
            )
        if result["preemptions"] != self.preemptions:
            self.report(
                "metrics_consistent", f"preemptions={result['preemptions']}, the trace preempts {self.preemptions} times",
                expected=self.preemptions, actual=result["preemptions"],
            )
        ratio = token_utilization(self.computed, self.config.token_budget, makespan)
        if not math.isclose(result["token_utilization"], ratio, rel_tol=1e-9, abs_tol=0.0):
            self.report(
                "metrics_consistent",
                f"token_utilization={result['token_utilization']!r}, expected {self.computed}/"
                f"({self.config.token_budget}*{makespan}) = {ratio!r}",
                expected=ratio, actual=result["token_utilization"],
            )

