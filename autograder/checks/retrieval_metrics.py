"""Hidden checks of the exercise "Retrieval metrics" (book/retrieval.md).

Contract: ``retrieval_metrics(query_h, query_y, corpus_h, corpus_y, ks=(1, 5, 10))``
returns a dict of Python floats with ``recall@k``, ``hit@k``, ``ndcg@k`` for each k and
``mrr``, ``map``: cosine ranking of the whole corpus, equal similarities ordered by corpus
index ascending, relevance = same label; recall@k is the fraction of ALL relevant items
in the top k, hit@k whether there is at least one; binary nDCG with log2(rank + 1)
discounts and ideal DCG over min(k, R) items; MRR and MAP over the whole ranking; queries
without a relevant item are left out (ValueError if none is left).
Reference: :func:`repeval_ref.retrieval_metrics`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import close, differs, frozen_copies, gate, is_plain_float, mutated

EX = "retrieval_metrics"


def _ref(*args, **kw):
    from repeval_ref import retrieval_metrics

    return retrieval_metrics(*args, **kw)


def _keys(ks):
    return {f"{m}@{k}" for m in ("recall", "hit", "ndcg") for k in ks} | {"mrr", "map"}


def _clusters(rng, n, K, d=8, spread=1.2, centres=None):
    if centres is None:
        centres = rng.normal(size=(K, d))
    y = rng.integers(0, K, size=n)
    return centres[y] + spread * rng.normal(size=(n, centres.shape[1])), y, centres


def _call(fn, qh, qy, ch, cy, ks):
    out, _ = call_student(
        fn, qh.copy(), qy.copy(), ch.copy(), cy.copy(), ks, what="retrieval_metrics"
    )
    if not isinstance(out, dict):
        raise StudentError(f"retrieval_metrics should return a dict, got {type(out).__name__}")
    missing = sorted(_keys(ks) - set(out))
    if missing:
        raise StudentError(
            f"retrieval_metrics' dict lacks the keys {', '.join(missing)} (for ks = {tuple(ks)})"
        )
    try:
        return {k: float(out[k]) for k in _keys(ks)}, out
    except (TypeError, ValueError):
        raise StudentError("every value of retrieval_metrics' dict must be a number") from None


def _differs(got, want):
    return sorted(k for k in want if not abs(got[k] - want[k]) < 1e-12)


def _not_computed(got, want):
    """Empty when most metrics of ``got`` (a dict) equal the reference's ``want``, else what
    differs. Self-consistency checks (ties, queries without relevant items, the
    properties) need the metrics computed, not every family right: a slip in one family
    (nDCG, recall, MAP) is charged by the checks of that family, not by these as well."""
    if not isinstance(got, dict) or any(k not in got for k in want):
        return differs(got, want)
    try:
        bad = _differs({k: float(got[k]) for k in want}, want)
    except (TypeError, ValueError):
        return differs(got, want)
    if 2 * len(bad) < len(want):
        return ""
    return f"{len(bad)} of {len(want)} metrics differ ({', '.join(bad[:4])})"


def _problem(rng, n_q=40, n_c=120, K=5):
    qh, qy, centres = _clusters(rng, n_q, K)
    ch, cy, _ = _clusters(rng, n_c, K, centres=centres)
    cy[:K] = np.arange(K)  # every query label occurs in the corpus
    return qh, qy, ch, cy


def _ndcg_variants(qh, qy, ch, cy, ks):
    """nDCG@k with the ideal DCG over k ranks instead of min(k, R), and with the discount
    1 / log2(j + 2) of ranks counted from 1 (two typical slips), on the same ranking."""
    q = qh / np.linalg.norm(qh, axis=1, keepdims=True)
    c = ch / np.linalg.norm(ch, axis=1, keepdims=True)
    rel = cy[np.argsort(-(q @ c.T), axis=1, kind="stable")] == qy[:, None]
    n_rel = rel.sum(axis=1)
    rel, n_rel = rel[n_rel > 0], n_rel[n_rel > 0]
    ranks = np.arange(1, rel.shape[1] + 1)
    out = {}
    for name, disc in (
        ("ideal_k", 1.0 / np.log2(ranks + 1)),
        ("shifted", 1.0 / np.log2(ranks + 2)),
    ):
        dcg, ideal = np.cumsum(rel * disc, axis=1), np.cumsum(disc)
        vals = {}
        for k in ks:
            top = min(k, rel.shape[1]) - 1
            cut = top if name == "ideal_k" else np.minimum(n_rel, top + 1) - 1
            vals[f"ndcg@{k}"] = float(np.mean(dcg[:, top] / ideal[cut]))
        out[name] = vals
    return out


def _ndcg_cause(got, qh, qy, ch, cy, ks):
    """The sentence that names what makes the student's nDCG differ."""
    variants = _ndcg_variants(qh, qy, ch, cy, ks)
    if all(abs(got[k] - v) < 1e-12 for k, v in variants["ideal_k"].items()):
        return (
            " Your ideal DCG sums k discounts. The best ranking puts the min(k, R) "
            "relevant items at the top, so when R < k it sums only R discounts "
            "1 / log2(j + 1)."
        )
    if all(abs(got[k] - v) < 1e-12 for k, v in variants["shifted"].items()):
        return (
            " Your discounts are 1 / log2(j + 2) for ranks j counted from 1: the item "
            "at rank j = 1 is discounted by 1 / log2(2) = 1, not by 1 / log2(3)."
        )
    return (
        " nDCG@k divides DCG@k (the sum over the top k of rel_j / log2(j + 1), with "
        "j = 1 for the first item) by the best DCG@k possible for that query."
    )


@register(
    f"{EX}/matches_reference",
    points=3,
    summary="every metric equals the reference on random data without ties",
)
def matches_reference(fn, rng):
    ks = (1, 3, 10)
    qh, qy, ch, cy = _problem(rng)
    want = _ref(qh, qy, ch, cy, ks=ks)
    got, _ = _call(fn, qh, qy, ch, cy, ks)
    bad = _differs(got, want)
    if not bad:
        return [finding("matches the reference", True, 3, "")]
    shown = ", ".join(f"{k} = {got[k]:.4f} (expected {want[k]:.4f})" for k in bad[:4])
    msg = f"these metrics differ: {shown}."
    if any(k.startswith("recall@") for k in bad) and all(
        abs(got[f"recall@{k}"] - want[f"hit@{k}"]) < 1e-12 for k in ks
    ):
        msg += (
            " Your recall@k equals hit@k: recall@k is the fraction of ALL the query's "
            "relevant items that appear in the top k (found / R), not whether one "
            "of them does."
        )
    elif any(k.startswith("ndcg@") for k in bad):
        msg += _ndcg_cause(got, qh, qy, ch, cy, ks)
    elif "map" in bad:
        msg += (
            " Average precision averages precision@j over the ranks j of ALL R relevant "
            "items in the whole ranking, and divides by R."
        )
    return [finding("matches the reference", False, 3, msg)]


@register(
    f"{EX}/recall_is_fraction",
    points=2,
    summary="recall@k is the fraction of all relevant items found, not hit@k",
)
def recall_is_fraction(fn, rng):
    # few classes, many relevant items per query: recall@k and hit@k differ a lot
    ks = (1, 5, 20)
    qh, qy, ch, cy = _problem(rng, n_q=25, n_c=90, K=3)
    want = _ref(qh, qy, ch, cy, ks=ks)
    got, _ = _call(fn, qh, qy, ch, cy, ks)
    bad = [k for k in ks if not abs(got[f"recall@{k}"] - want[f"recall@{k}"]) < 1e-12]
    if not bad:
        return [finding("recall is a fraction", True, 2, "")]
    k = bad[0]
    msg = (
        f"with about 30 relevant items per query your recall@{k} is "
        f"{got[f'recall@{k}']:.4f}, expected {want[f'recall@{k}']:.4f}."
    )
    if abs(got[f"recall@{k}"] - want[f"hit@{k}"]) < 1e-12:
        msg += (
            f" That is hit@{k} (at least one relevant item in the top {k}), the quantity "
            "many code bases mislabel as recall. Recall@k divides the number of relevant "
            "items in the top k by the number R of relevant items in the corpus."
        )
    return [finding("recall is a fraction", False, 2, msg)]


@register(
    f"{EX}/ties_by_index",
    points=1,
    summary="equal similarities are ranked by corpus index, lowest first",
)
def ties_by_index(fn, rng):
    # Every corpus row is stored twice under two different labels, so for any query the
    # two copies tie exactly. Query by query, your metrics must equal your own metrics on
    # a corpus without ties where the later copy is turned very slightly away from the
    # query, i.e. ranked just after the earlier copy, as the tie rule says.
    ks = (1, 2, 4)
    K, d, m = 4, 6, 10
    qh, qy, _ = _clusters(rng, 8, K, d)
    base = rng.normal(size=(m, d))
    ch = np.vstack([base, base])
    labels = rng.integers(0, K, size=m)
    cy = np.concatenate([labels, (labels + 1 + rng.integers(0, K - 1, size=m)) % K])
    cy[:K] = np.arange(K)
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    for i in range(len(qy)):
        q = qh[i] / np.linalg.norm(qh[i])
        away = q[None, :] - (unit @ q)[:, None] * unit  # part of q orthogonal to each row
        proxy = np.vstack([unit, unit - 1e-9 * away])
        got, _ = _call(fn, qh[i : i + 1], qy[i : i + 1], ch, cy, ks)
        want, _ = _call(fn, qh[i : i + 1], qy[i : i + 1], proxy, cy, ks)
        ref = _ref(qh[i : i + 1], qy[i : i + 1], proxy, cy, ks=ks)
        wrong = _not_computed(want, ref)
        if wrong:
            # the metrics are wrong without ties already: say why when it is the nDCG
            why = (
                _ndcg_cause(want, qh[i : i + 1], qy[i : i + 1], proxy, cy, ks).strip()
                if any(k.startswith("ndcg@") for k in _differs(want, ref))
                else ""
            )
            return gate(
                [finding("ties by index", False, 1, why)], f"on a corpus without ties: {wrong}"
            )
        bad = _differs(got, want)
        if bad:
            return [
                finding(
                    "ties by index",
                    False,
                    1,
                    "when two corpus items have the same cosine similarity to a "
                    "query (here: the same row stored twice), the one with the "
                    "smaller corpus index must come first. Sort with "
                    "np.argsort(-sims, axis=1, kind='stable'); reversing an "
                    "ascending sort puts the larger index first. Metrics that "
                    f"changed: {', '.join(bad)}.",
                )
            ]
    return [finding("ties by index", True, 1, "")]


@register(
    f"{EX}/queries_without_relevant",
    points=1,
    summary="queries whose label is absent from the corpus are left out",
)
def queries_without_relevant(fn, rng):
    ks = (1, 5)
    qh, qy, ch, cy = _problem(rng, n_q=30, n_c=80, K=4)
    alone = rng.normal(size=(6, qh.shape[1]))  # queries of a label not in the corpus
    all_h = np.vstack([qh, alone])
    all_y = np.concatenate([qy, np.full(6, 9)])
    order = rng.permutation(len(all_y))
    got, _ = _call(fn, all_h[order], all_y[order], ch, cy, ks)
    only, _ = _call(fn, qh, qy, ch, cy, ks)
    wrong = _not_computed(only, _ref(qh, qy, ch, cy, ks=ks))
    if wrong:
        return gate(
            [finding("queries without relevant items", False, 1, "")],
            f"without the 6 added queries: {wrong}",
        )
    bad = _differs(got, only)
    if bad:
        return [
            finding(
                "queries without relevant items",
                False,
                1,
                "adding 6 queries whose label never occurs in the corpus changed "
                f"{', '.join(bad)}. Such queries have no relevant item (R = 0): "
                "recall is undefined for them and every metric would count them as "
                "failures of the encoder. Leave them out of every average.",
            )
        ]
    try:
        out, _ = call_student(fn, alone, np.full(6, 9), ch, cy, ks, what="retrieval_metrics")
    except StudentError as exc:
        if str(exc).startswith("retrieval_metrics raised ValueError"):
            return [finding("queries without relevant items", True, 1, "")]
        return [
            finding(
                "queries without relevant items",
                False,
                1,
                f"when no query has a relevant item: {exc}. Raise ValueError "
                "(there is nothing to average).",
            )
        ]
    return [
        finding(
            "queries without relevant items",
            False,
            1,
            "when no query has a relevant item you returned a result; there is "
            "nothing to average: raise ValueError.",
        )
    ]


@register(
    f"{EX}/properties",
    points=1,
    summary="the exact keys, Python floats, k beyond the corpus, inputs untouched",
)
def properties(fn, rng):
    qh, qy, ch, cy = _problem(rng, n_q=10, n_c=15, K=3)
    arrays = [qh, qy, ch, cy]
    before = frozen_copies(*arrays)
    want = _ref(*frozen_copies(*arrays), ks=(1, 4))
    out, _ = call_student(fn, *arrays, (1, 4), what="retrieval_metrics")
    problems = []
    changed = mutated(before, arrays, ["query_h", "query_y", "corpus_h", "corpus_y"])
    if changed:
        problems.append(f"your function modified {', '.join(changed)} in place")
    if not isinstance(out, dict) or set(out) != _keys((1, 4)):
        got = sorted(out) if isinstance(out, dict) else type(out).__name__
        problems.append(
            f"for ks = (1, 4) return exactly the keys {sorted(_keys((1, 4)))}, got {got}"
        )
    elif not all(is_plain_float(v) for v in out.values()):
        problems.append("every value must be a Python float (float(x))")
    big, _ = _call(fn, *before, (40,))
    full, _ = _call(fn, *before, (15,))
    if not all(close(big[f"{m}@40"], full[f"{m}@15"]) for m in ("recall", "hit", "ndcg")):
        problems.append(
            "with k = 40 > 15 corpus items the metrics must equal those at "
            "k = 15 (the whole ranking)"
        )
    wrong = _not_computed(out, want) or _not_computed(big, _ref(*before, ks=(40,)))
    return gate([finding("properties", not problems, 1, "; ".join(problems))], wrong)


@register(
    f"{EX}/fewer_relevant_than_k",
    points=1,
    summary="nDCG@k and recall@k when a query has fewer relevant items R than k",
)
def fewer_relevant_than_k(fn, rng):
    # Constructed, not left to chance: label 0 has exactly R = 2 items in a corpus of 40,
    # and one query of label 0 is scored at k = 5 and 10 > R. The ideal DCG then sums
    # min(k, R) = 2 discounts; summing k of them lowers nDCG@k below 1 even for a perfect
    # ranking, and recall@k must reach 1 once both items are found.
    ks = (1, 5, 10)
    d = 6
    centres = rng.normal(size=(4, d)) * 3.0
    cy = np.concatenate([[0, 0], rng.integers(1, 4, size=38)])
    perm = rng.permutation(len(cy))
    cy = cy[perm]
    ch = centres[cy] + 0.5 * rng.normal(size=(len(cy), d))
    qy = np.array([0, 0, int(rng.integers(1, 4))])
    qh = centres[qy] + 0.5 * rng.normal(size=(3, d))
    want = _ref(qh, qy, ch, cy, ks=ks)
    got, _ = _call(fn, qh, qy, ch, cy, ks)
    # the parts R < k governs: nDCG@k and recall@k (hit, MRR and MAP are scored elsewhere,
    # and a recall@k that is hit@k by recall_is_fraction)
    bad = [
        m
        for m in _differs(got, want)
        if m.startswith("ndcg@")
        or (m.startswith("recall@") and not abs(got[m] - want["hit@" + m[7:]]) < 1e-12)
    ]
    if not bad:
        return [finding("R < k", True, 1, "")]
    shown = ", ".join(f"{k} = {got[k]:.4f} (expected {want[k]:.4f})" for k in bad[:4])
    msg = f"with a label that has only R = 2 relevant items in the corpus and k up to 10: {shown}."
    if any(k.startswith("ndcg@") for k in bad):
        msg += _ndcg_cause(got, qh, qy, ch, cy, ks)
    if any(k.startswith("recall@") for k in bad):
        msg += " recall@k divides by R, the number of relevant items, which may be below k."
    return [finding("R < k", False, 1, msg)]
