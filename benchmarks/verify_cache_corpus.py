"""Verify every `cache_` buggy scheduler of the serving corpus with prefix caching drawn, and print what catches it.

The search now draws prefix caching itself for a target that supports it (each
`cache_` file declares `DOMAIN = {"prefix_caching": [False, True]}`;
`proofs.search.serving.DRAWS_PREFIX_CACHING`), so this script runs the plain verify
(the CLI's `main`: sandbox, judge, oracle, minimiser, --seed 0, --budget 60, no example
database, fresh save folders); with a tree whose search does not (`--tree`), it widens
the serving search's valid calls to also draw the corpus's caching prompt families
(`tests.test_serving_cache_corpus.cache_calls`), as before.  It prints one row per file: verdict,
the invariant that names the counterexample, whether it is the file's EXPECTED (or one
of its ALSO), and the wall seconds.  It needs a spec that knows prefix caching; `--tree
PATH` takes spec/, impl/ and proofs/ from another checkout (for example the `cache`
branch's worktree before it is merged), the corpus and its families from this one.

    python benchmarks/verify_cache_corpus.py [--tree /work/wt/cache] [NAME ...]
"""

import argparse
import json
import pathlib
import re
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUGGY = ROOT / "tests" / "corpus" / "serving" / "buggy"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", help="take spec/, impl/ and proofs/ from this checkout")
    parser.add_argument("names", nargs="*", help="cache_ file stems (default: all)")
    args = parser.parse_args(argv)
    if args.tree:
        sys.path.insert(0, str(pathlib.Path(args.tree).resolve()))
    import spec.serving  # from --tree when given: imported before this checkout's tests

    if "no_false_sharing" not in spec.serving.NAMES:
        print(f"{spec.serving.__file__}: this spec has no prefix caching (issue 20)", file=sys.stderr)
        return 2
    from hypothesis import strategies as st

    import proofs.search.serving as search
    from proofs.cli.main import main as schedcheck

    sys.path.insert(1 if args.tree else 0, str(ROOT))
    tests_package = sys.modules.get("tests")
    if tests_package is not None and str(ROOT) not in str(getattr(tests_package, "__file__", "")):
        del sys.modules["tests"]  # the other tree's tests package, if anything imported it
    from tests.test_serving_cache_corpus import cache_calls

    plain_calls = search.valid_calls

    def with_caching(max_requests=search.MAX_REQUESTS, many=True):
        return st.one_of(plain_calls(max_requests, many), cache_calls(), cache_calls())

    if not getattr(search, "DRAWS_PREFIX_CACHING", False):  # the search draws caching itself now: verify as it is
        search.valid_calls = with_caching
    names = args.names or sorted(p.stem for p in BUGGY.glob("cache_*.py"))
    rows = []
    for name in names:
        text = (BUGGY / f"{name}.py").read_text()
        expected = re.search(r'^EXPECTED = "(\w+)"', text, re.M).group(1)
        also = re.search(r"^ALSO = \(([^)]*)\)", text, re.M)
        also = tuple(re.findall(r'"(\w+)"', also.group(1))) if also else ()
        with tempfile.TemporaryDirectory() as scratch:
            report = pathlib.Path(scratch) / "report.json"
            started = time.perf_counter()
            schedcheck(["verify", "--model", "serving", f"{BUGGY / name}.py:serve", "--seed", "0", "--budget", "60",
                        "--db", "none", "--save-dir", scratch, "--json", str(report)])
            seconds = time.perf_counter() - started
            data = json.loads(report.read_text())
        first = data["counterexamples"][0]["property"] if data["counterexamples"] else None
        mark = "EXPECTED" if first == expected else "ALSO" if first in also else "missed" if first is None else "OTHER"
        rows.append((name, data["verdict"], first or "-", mark, seconds))
    print()
    print("| buggy scheduler | verdict | first invariant | named by | wall s |")
    print("| --- | --- | --- | --- | ---: |")
    for name, verdict, first, mark, seconds in rows:
        print(f"| {name} | {verdict} | {first} | {mark} | {seconds:.1f} |")
    caught = sum(1 for row in rows if row[3] in ("EXPECTED", "ALSO"))
    print(f"\n{caught} of {len(rows)} caught by their EXPECTED or ALSO invariant")
    return 0 if caught == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
