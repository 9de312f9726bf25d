"""The search engine: Hypothesis finds counterexamples by running the target on generated calls.

What it establishes: no counterexample among the calls it ran (a bounded, sampled
claim; every report states the bounds it covered and whether each check finished).
Modules: ``strategies`` (the input domain and its neighbours), ``judge`` (one call's
verdict from the oracle), ``minimize`` (shrinking a failure to a minimal call),
``engine`` (the ordered checks of ``schedcheck verify``; the stateful test lives in
``proofs.online.stateful``), ``differential`` (two targets side by side),
``parallel`` (checks spread over workers) and
``profiles`` (search settings and example databases).
"""
