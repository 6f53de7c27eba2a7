"""Retrieval metrics for a labelled query set and corpus: recall@k, hit@k, nDCG@k, MRR, MAP.

Each query ranks the whole corpus by cosine similarity; a corpus item is relevant to a
query when it carries the same label (seed 003, section 4, retrieval metrics).

Two quantities that are often confused are kept apart here:

* ``recall@k`` is the fraction of *all* relevant corpus items found in the top k;
* ``hit@k`` (trec_eval's ``success_k``) is 1 if *at least one* relevant item is in the
  top k. Code that calls ``relevance[:, :k].any()`` "recall@k" computes hit@k.

The definitions follow trec_eval (``recall_k``, ``success_k``, ``ndcg_cut_k``,
``recip_rank``, ``map``) for binary relevance, and the tests compare with it.
"""
from __future__ import annotations

import numbers

import numpy as np

from ._validation import as_float_array, as_labels, check_int, unit_rows

__all__ = ["retrieval_metrics"]

# Upper bound on the number of similarity entries held at once (query block x corpus).
_BLOCK_ENTRIES = 1 << 21


def _check_ks(ks):
    """Return ``ks`` as a tuple of ints >= 1 (a single int is accepted as one cutoff)."""
    if isinstance(ks, numbers.Integral) and not isinstance(ks, bool):
        ks = (ks,)
    if isinstance(ks, (str, bytes)):
        raise TypeError(f"ks must be a sequence of integers, got {ks!r}")
    try:
        ks = tuple(ks)
    except TypeError:
        raise TypeError(f"ks must be a sequence of integers, got {ks!r}") from None
    if len(ks) == 0:
        raise ValueError("ks must contain at least one cutoff")
    return tuple(check_int(k, "ks", minimum=1) for k in ks)


def _ranked_relevance(sims, query_y, corpus_y):
    """Relevance (0/1) of the corpus items in ranked order, one row per query.

    Sorting is by descending similarity; equal similarities keep the corpus order
    (a stable sort of the negated scores), so ties are broken by index ascending.
    """
    order = np.argsort(-sims, axis=1, kind="stable")
    return corpus_y[order] == query_y[:, None]


def _block_sums(rel, ks, discounts, ideal_cum):
    """Per-metric sums over the queries of one block that have a relevant item.

    Parameters
    ----------
    rel : bool array of shape (b, n_corpus)
        Ranked relevance of each query in the block.
    ks : tuple of int
    discounts : array of shape (n_corpus,)
        ``1 / log2(rank + 1)`` for rank = 1 .. n_corpus.
    ideal_cum : array of shape (n_corpus,)
        ``ideal_cum[j]`` is the ideal DCG of ``j + 1`` relevant items.

    Returns
    -------
    sums : dict of float
    n_kept : int
    """
    n_rel = rel.sum(axis=1)
    keep = n_rel > 0
    rel, n_rel = rel[keep], n_rel[keep]
    n_corpus = rel.shape[1]
    sums = {}
    if rel.shape[0] == 0:
        return sums, 0
    relf = rel.astype(np.float64)
    hits = np.cumsum(relf, axis=1)  # relevant items among the top j + 1
    gains = np.cumsum(relf * discounts, axis=1)  # DCG at cutoff j + 1
    for k in ks:
        kk = min(k, n_corpus)
        found = hits[:, kk - 1]
        sums[f"recall@{k}"] = float(np.sum(found / n_rel))
        sums[f"hit@{k}"] = float(np.sum(found > 0))
        ideal = ideal_cum[np.minimum(n_rel, kk) - 1]
        sums[f"ndcg@{k}"] = float(np.sum(gains[:, kk - 1] / ideal))
    ranks = np.arange(1, n_corpus + 1, dtype=np.float64)
    first = np.argmax(rel, axis=1) + 1  # every kept row has a relevant item
    sums["mrr"] = float(np.sum(1.0 / first))
    precision_at_hits = np.where(rel, hits / ranks, 0.0)
    sums["map"] = float(np.sum(precision_at_hits.sum(axis=1) / n_rel))
    return sums, int(rel.shape[0])


def retrieval_metrics(query_h, query_y, corpus_h, corpus_y, ks=(1, 5, 10)):
    """Recall@k, hit@k, nDCG@k, MRR and MAP of cosine retrieval with label relevance.

    Every query ranks the whole corpus by cosine similarity, highest first; equal
    similarities are ordered by corpus index, lowest first. A corpus item is relevant
    to a query when its label equals the query's label; a query has ``R`` relevant
    items. Queries with ``R = 0`` are left out of every average. For each kept query,
    with ``rel_j`` the relevance of the item at rank ``j`` (1-based):

    * ``recall@k`` = :math:`\\sum_{j \\le k} rel_j / R`;
    * ``hit@k`` = 1 if :math:`\\sum_{j \\le k} rel_j > 0`, else 0;
    * ``ndcg@k`` = :math:`\\mathrm{DCG@k} / \\mathrm{IDCG@k}` with
      :math:`\\mathrm{DCG@k} = \\sum_{j \\le k} rel_j / \\log_2(j + 1)` and
      :math:`\\mathrm{IDCG@k} = \\sum_{j \\le \\min(k, R)} 1 / \\log_2(j + 1)`;
    * reciprocal rank = ``1 / j`` for the first relevant ``j`` in the whole ranking;
    * average precision = :math:`\\frac1R \\sum_{j: rel_j = 1} \\mathrm{precision@}j`
      over the whole ranking.

    Each value returned is the mean over the kept queries (``mrr`` and ``map`` are
    the means of reciprocal rank and average precision). A cutoff larger than the
    corpus means the whole ranking. These match trec_eval's ``recall_k``,
    ``success_k``, ``ndcg_cut_k``, ``recip_rank`` and ``map`` for binary relevance
    when no scores tie.

    Book ``book/retrieval.md`` (seed 003, section 4). The seed's "Recall@k" is hit@k;
    both are returned here under their own names.

    Parameters
    ----------
    query_h : array_like of shape (n_queries, d)
        Query features; no zero rows (they cannot be unit-normalised).
    query_y : array_like of int, shape (n_queries,)
        Query labels (non-negative integers).
    corpus_h : array_like of shape (n_corpus, d)
        Corpus features; no zero rows.
    corpus_y : array_like of int, shape (n_corpus,)
        Corpus labels (non-negative integers).
    ks : sequence of int, default (1, 5, 10)
        Cutoffs, each >= 1 (a single int is accepted).

    Returns
    -------
    dict of str -> float
        Keys ``recall@k``, ``hit@k``, ``ndcg@k`` for each ``k`` in ``ks``, and
        ``mrr`` and ``map``.

    Raises
    ------
    ValueError
        Wrong shapes, mismatched lengths or dimensions, NaN/inf, a zero feature
        vector, an empty or non-positive cutoff, or no query with a relevant item.
    TypeError
        Non-numeric inputs or non-integer cutoffs.

    Notes
    -----
    Queries are processed in blocks, so memory is bounded by about
    ``2**21`` similarity entries plus the inputs, whatever the number of queries.
    """
    query_h = as_float_array(query_h, "query_h", ndim=2)
    corpus_h = as_float_array(corpus_h, "corpus_h", ndim=2)
    query_y = as_labels(query_y, "query_y", n=query_h.shape[0])
    corpus_y = as_labels(corpus_y, "corpus_y", n=corpus_h.shape[0])
    if query_h.shape[1] != corpus_h.shape[1]:
        raise ValueError(
            f"query_h has {query_h.shape[1]} features but corpus_h has {corpus_h.shape[1]}"
        )
    ks = _check_ks(ks)

    q = unit_rows(query_h, "query_h")
    c = unit_rows(corpus_h, "corpus_h")
    n_corpus = c.shape[0]
    discounts = 1.0 / np.log2(np.arange(2, n_corpus + 2, dtype=np.float64))
    ideal_cum = np.cumsum(discounts)

    names = [f"{m}@{k}" for m in ("recall", "hit", "ndcg") for k in ks] + ["mrr", "map"]
    totals = dict.fromkeys(names, 0.0)
    n_kept = 0
    block = max(1, _BLOCK_ENTRIES // n_corpus)
    for start in range(0, q.shape[0], block):
        stop = start + block
        sims = q[start:stop] @ c.T
        rel = _ranked_relevance(sims, query_y[start:stop], corpus_y)
        sums, kept = _block_sums(rel, ks, discounts, ideal_cum)
        n_kept += kept
        for name, value in sums.items():
            totals[name] += value
    if n_kept == 0:
        raise ValueError(
            "no query has a relevant corpus item (no label of query_y occurs in corpus_y)"
        )
    return {name: totals[name] / n_kept for name in names}
