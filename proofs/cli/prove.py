"""The ``schedcheck prove`` subcommand: check the encodings against the spec that runs, run every Z3 claim, print the ledger.

What it establishes: the ledger reports, per claim, what ``proofs.smt.claims`` (or
``proofs.smt.serving_claims``) returned within its CPU budget (``proofs.smt.run``):
status, method, bound, whether its hypotheses are satisfiable, the mutant that refutes
it, wall and CPU seconds.  The validation rows (``proofs.smt.conformance``) run first;
when one is refuted (the encoding is not the spec's step), the other claims are
stopped and no proof is reported.  Exit codes from ``proofs.outcomes``: 0 when every
row passes (proved, by construction, lemma, checked, a finding's refutation), 1 when
one is refuted, 2 when one is unknown or vacuous (running out of budget is never a
pass).  Bounds: per-job claims for every n from 1 to ``--max-jobs``; the policy
theorem for every n from 1 to ``--policy-jobs``; the serving model's per-request
claims for every n from 1 to ``--max-requests``, and its any-n rows for every n.
"""

from __future__ import annotations

import argparse
import difflib
import json

from proofs.cli.paths import HTML_HELP, output_problem
from proofs.cli.usage import usage_error
from proofs.report import ci as ci_reports

HELP_EPILOG = """exit codes:
  0  every row passes: proved, by construction, lemma, checked, or a finding's conjecture refuted
  1  a claim was refuted (its counterexample is printed), or the encoding disagrees with the spec
     that runs (the state, the field and both values are printed, and no proof is reported)
  2  usage error, or a claim is unknown (timed out, the solver gave up) or vacuous
     (its hypotheses are unsatisfiable, so its check proves nothing)

statuses: proved (a theorem about the step), by construction (true of every state of the
representation, no step needed), lemma (a helper fact the proofs use), checked (the encoding
agreed with spec.step and the registry on every state tried: a test, not a proof), refuted,
unknown, vacuous.  Every run first checks the encoding against the spec that runs (rows
"encoding matches spec.step" and "predicates match the registry"); every proof depends on them.

columns: claim, status, method (inductive, by construction, witness, one step,
abstraction, product induction, bounded, validation), bound (n <= N: every n from 1 to N),
hyp sat (the claim's hypotheses are satisfiable: yes/no), refuted by (the mutant
of the step or the encoding under which Z3 refutes the claim: --mutant NAME), seconds.

rule_needed:<rule> rows are proved when BOTH halves hold: without the rule Z3
finds the concrete run shown (breaking the named claim), and with every rule that
claim is proved."""

DEFAULT_MAX_JOBS = 16  # every per-job row for n = 1..16 (docs/prove.md, "Growth with the bound")
DEFAULT_MAX_REQUESTS = 8  # the serving model: every per-request row for n = 1..8 (none CAPPED; docs/prove.md, "Serving model")
DEFAULT_BUDGET = 120.0
DEFAULT_POLICY_JOBS = 16  # the policy theorem for n = 1..16
FIELDS = ("claim", "status", "kind", "method", "bound", "hypotheses_satisfiable", "refuted_by", "seconds",
          "cpu_seconds", "counterexample")


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``prove`` to an argparse subparsers object; its handler returns the exit code."""
    from proofs.smt.model import MUTANTS
    from proofs.smt.serving_model import MUTANTS as SERVING_MUTANTS

    parser = subparsers.add_parser(
        "prove",
        help="prove the invariants, termination and the policy theorem with Z3",
        description="Prove the spec's invariants (inductive, per job), termination, the any-n "
        "abstraction, the policy theorem and why each domain rule is needed, with Z3.",
        epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", choices=("chapter", "serving"), default="chapter",
                        help="which model of the spec: chapter (default) or serving (KV blocks, preemption, aborts)")
    parser.add_argument("--max-requests", type=int, default=DEFAULT_MAX_REQUESTS, metavar="N",
                        help=f"--model serving: the per-request proofs hold for every n from 1 to N (default {DEFAULT_MAX_REQUESTS})")
    parser.add_argument("--max-jobs", type=int, default=DEFAULT_MAX_JOBS, metavar="N",
                        help=f"the per-job proofs hold for every n from 1 to N jobs (default {DEFAULT_MAX_JOBS})")
    parser.add_argument("--policy-jobs", type=int, default=DEFAULT_POLICY_JOBS, metavar="N",
                        help=f"the policy theorem for every n from 1 to N, at most --max-jobs (default {DEFAULT_POLICY_JOBS})")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET, metavar="S",
                        help=f"CPU seconds per claim (a claim that uses them up is unknown); the wall-clock safety net is "
                        f"4x that plus 30 s, so a loaded machine does not cut a claim short (default {DEFAULT_BUDGET:g})")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    ci_reports.add_output_arguments(parser)
    parser.add_argument("--html", metavar="PATH", help=HTML_HELP)
    parser.add_argument("--mutant", choices=sorted(set(MUTANTS) | set(SERVING_MUTANTS)),
                        help="prove against a deliberately broken step or encoding (the refuted by column names one per row)")
    parser.add_argument("--claims", metavar="SUBSTRING", action="append",
                        help="only the claims whose name contains SUBSTRING (repeatable)")
    parser.add_argument("--workers", type=int, default=2, help="claims proved at once (default 2)")
    parser.add_argument("--no-seconds", action="store_true", help="leave the seconds column out of the printed ledger")
    parser.set_defaults(handler=handle)
    return parser


def prove(max_jobs: int = DEFAULT_MAX_JOBS, budget: float = DEFAULT_BUDGET, mutant: str | None = None,
          only: list[str] | None = None, workers: int = 2, policy_jobs: int | None = DEFAULT_POLICY_JOBS) -> list[dict]:
    """The ledger rows (with a ``detail`` field beside the JSON's fields)."""
    from proofs.smt import claims as z3_claims
    from proofs.smt import run as z3_run

    claims = _select(z3_claims.claims(max_jobs, mutant, policy_jobs), only)
    return z3_run.run_claims(claims, budget, workers, stop_on_disagreement=mutant is None)


def prove_serving(max_requests: int = DEFAULT_MAX_REQUESTS, budget: float = DEFAULT_BUDGET, mutant: str | None = None,
                  only: list[str] | None = None, workers: int = 2) -> list[dict]:
    """The serving model's ledger rows (``proofs.smt.serving_claims``)."""
    from proofs.smt import run as z3_run
    from proofs.smt import serving_claims

    claims = _select(serving_claims.claims(max_requests, mutant), only)
    return z3_run.run_claims(claims, budget, workers, stop_on_disagreement=mutant is None)


class UnknownClaim(ValueError):
    """A ``--claims`` substring that no claim's name contains: a usage error, said before any claim runs."""


def _select(claims: list, only: list[str] | None) -> list:
    """The claims whose name contains one of ``only``, every row they assume, and the validation rows, which
    every run checks (all when ``only`` is empty); ``UnknownClaim`` for a substring no name contains."""
    if not only:
        return claims
    names = [c.claim for c in claims]
    for part in only:
        if not any(part in name for name in names):
            close = difflib.get_close_matches(part, names, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(map(repr, close))}?" if close else f"the claims are {', '.join(names)}"
            raise UnknownClaim(f"--claims={part!r}: no claim's name contains it ({hint})")
    by_name = {c.claim: c for c in claims}
    keep = {c.claim for c in claims if c.kind == "validation" or any(part in c.claim for part in only)}
    frontier = list(keep)
    while frontier:
        for dep in by_name[frontier.pop()].depends:
            if dep in by_name and dep not in keep:
                keep.add(dep)
                frontier.append(dep)
    return [c for c in claims if c.claim in keep]


def as_json(rows: list[dict]) -> dict:
    from proofs.smt.run import verdict

    return {"verdict": verdict(rows), "results": [{k: row[k] for k in FIELDS} for row in rows]}


def _counterexample_lines(row: dict) -> list[str]:
    cex = row["counterexample"]
    if not cex:
        return []
    if isinstance(cex, dict) and "field" in cex and "state" in cex:  # a validation row's disagreement
        return [f"    state (n={cex.get('n')}): {cex['state']}",
                f"    field: {cex['field']}: the spec gives {cex['spec']!r}, the encoding {cex['encoding']!r}"]
    if isinstance(cex, dict) and "call" in cex:
        lines = []
        if "without_rule" in cex:
            lines.append(f"    without {cex['without_rule']}: Z3 breaks {cex['breaks']}:")
        else:
            lines.append(f"    counterexample: breaks {cex.get('breaks', row['claim'])}")
        lines.append(f"    {cex['call']}")
        if cex.get("shows"):
            lines.append(f"    # shows: {cex['shows']}")
        if "after_steps" in cex:
            lines.append(f"    # after {cex['after_steps']} step(s): {json.dumps(cex['state'], sort_keys=True)}")
        if cex.get("served_per_step"):
            lines.append(f"    # served per step: {cex['served_per_step']}")
        return lines
    return [f"    counterexample: {json.dumps(cex, sort_keys=True, default=str)}"]


DISAGREEMENT = ("the encoding disagrees with the spec that runs: no proof is reported (the proofs would be about "
                "another step)")


def disagrees(rows: list[dict]) -> bool:
    """True when a validation row is refuted: the ledger then reports no proof."""
    return any(r.get("kind") == "validation" and r["status"] == "refuted" for r in rows)


def render(rows: list[dict], seconds: bool = True, mutant: str | None = None, model: str = "chapter") -> str:
    """The printed ledger: one row per claim, seconds last (omitted with seconds=False)."""
    from proofs.smt.run import PASSING, summary, verdict

    header = ["claim", "status", "method", "bound", "hyp sat", "refuted by"] + (["seconds", "cpu s"] if seconds else [])
    table = [[r["claim"], r["status"], r["method"], r["bound"], r["hypotheses_satisfiable"], r["refuted_by"] or "-"]
             + ([f"{r['seconds']:.2f}", "-" if r.get("cpu_seconds") is None else f"{r['cpu_seconds']:.2f}"]
                if seconds else []) for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *table)]
    out = ["schedcheck prove  engine=z3" + (f"  model={model}" if model != "chapter" else "")
           + (f"  mutant={mutant}" if mutant else "")]
    out.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for row, cells in zip(rows, table):
        out.append("  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip())
        if row["status"] not in PASSING or row["claim"].startswith("rule_needed:"):
            out += _counterexample_lines(row)
        if row["status"] in ("unknown", "vacuous") and row.get("detail"):
            out.append(f"    {row['status']}: {row['detail'].splitlines()[0][:300]}")
    if disagrees(rows) and not mutant:
        out.append(DISAGREEMENT)
    out.append(f"verdict: {verdict(rows)}  ({summary(rows)})")
    return "\n".join(out)


def handle(args: argparse.Namespace) -> int:
    """The ``prove`` handler: run, print, write JSON, return 0/1/2."""
    from proofs.smt.run import exit_code

    from proofs.smt.model import MUTANTS
    from proofs.smt.serving_model import MUTANTS as SERVING_MUTANTS

    model = getattr(args, "model", "chapter")
    if model == "serving" and args.max_requests < 1:
        return usage_error(f"--max-requests={args.max_requests!r}: expected an int >= 1")
    if args.mutant and args.mutant not in (SERVING_MUTANTS if model == "serving" else MUTANTS):
        return usage_error(f"--mutant={args.mutant!r}: not a mutant of the {model} model's encoding")
    if args.max_jobs < 1:
        return usage_error(f"--max-jobs={args.max_jobs!r}: expected an int >= 1")
    if args.policy_jobs < 1:
        return usage_error(f"--policy-jobs={args.policy_jobs!r}: expected an int >= 1")
    if args.budget <= 0:
        return usage_error(f"--budget={args.budget!r}: expected seconds > 0")
    problem = output_problem({"--json": args.json, "--junit": args.junit, "--sarif": args.sarif, "--html": args.html}, {})
    if problem:
        return usage_error(problem)
    try:
        if model == "serving":
            rows = prove_serving(args.max_requests, args.budget, args.mutant, args.claims, max(1, args.workers))
        else:
            rows = prove(args.max_jobs, args.budget, args.mutant, args.claims, max(1, args.workers), args.policy_jobs)
    except UnknownClaim as error:  # raised by _select, before any claim runs
        return usage_error(str(error))
    print(render(rows, seconds=not args.no_seconds, mutant=args.mutant, model=model))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle_:
            json.dump(as_json(rows), handle_, indent=2, sort_keys=True, default=str)
            handle_.write("\n")
    if args.junit or args.sarif:
        ci_reports.write_outputs(args, "prove", json.loads(json.dumps(as_json(rows), default=str)), None)
    if args.html:
        from proofs.report import html

        page = html.prove_page(json.loads(json.dumps(as_json(rows), default=str)), seconds=not args.no_seconds,
                               mutant=args.mutant)
        html.write(args.html, page)
    return exit_code(rows)
