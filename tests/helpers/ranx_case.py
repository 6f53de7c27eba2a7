"""The retrieval cross-check against ranx: its input, shared by the test and by `make venv`.

ranx compiles its metrics and its data structures with numba on first use (about a minute on
2 cores) and caches the machine code in the venv, keyed by the argument types. `make venv`
runs this file once, so that `tests/test_retrieval.py::test_ranx_agrees_without_ties`, which
builds the same objects, finds them compiled.
"""

import warnings

import numpy as np

METRICS = ["precision@5", "recall@5", "ndcg@5", "mrr", "map"]


def ranx_case(ranx):
    """(scores, gains, qrels, run, theirs): 10 queries of 30 items, no tied scores, and
    ranx's values of :data:`METRICS` on them."""
    rng = np.random.default_rng(13)
    scores = rng.normal(size=(10, 30))
    gains = (rng.random((10, 30)) < 0.3).astype(float)
    gains[:, 0] = 1.0
    qrels = ranx.Qrels(
        {f"q{i}": {f"d{j:03d}": 1 for j in np.flatnonzero(gains[i])} for i in range(10)}
    )
    run = ranx.Run(
        {f"q{i}": {f"d{j:03d}": float(scores[i, j]) for j in range(30)} for i in range(10)}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = ranx.evaluate(qrels, run, METRICS, threads=1)
    return scores, gains, qrels, run, theirs


if __name__ == "__main__":
    try:
        import ranx
    except ImportError:  # not installed: nothing to compile
        raise SystemExit(0) from None
    ranx_case(ranx)
