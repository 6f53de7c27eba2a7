"""Retrieval metrics: recall@k, precision@k, hit@k, nDCG@k, MRR and MAP, with stated tie rules.

Two entry points share one ranking engine:

* :func:`ranking_metrics` takes a score matrix and a matrix of (binary or graded) gains,
  one row per query, and optionally a mask of items to leave out of a query's ranking
  (the "junk" images of the revisited Oxford and Paris protocol, or the query itself);
* :func:`retrieval_metrics` ranks a labelled corpus by cosine similarity to labelled
  queries, an item being relevant when it carries the query's label (seed 003,
  section 4), processed in blocks of queries so that memory stays bounded;
* :func:`precision_at_k` is the per-query precision at one cutoff;
* :func:`ir_evaluator_metrics` takes queries, a corpus and the relevant documents of each
  query as mappings from ids, the inputs of sentence-transformers'
  ``InformationRetrievalEvaluator``, and computes its six families of numbers with its
  conventions, which differ from trec_eval's in two of them (see its docstring).

Two quantities that are often confused are kept apart here:

* ``recall@k`` is the fraction of *all* relevant items found in the top k;
* ``hit@k`` (trec_eval's ``success_k``) is 1 if *at least one* relevant item is in the
  top k. Code that calls ``relevance[:, :k].any()`` "recall@k" computes hit@k.

The definitions follow trec_eval (``recall_k``, ``P_k``, ``success_k``, ``ndcg_cut_k``,
``recip_rank``, ``map``), and the tests compare with it. Equal scores need a rule; three
are offered (``ties=``): corpus index ascending (the default), index descending (what
trec_eval does when document names sort like the indices), and the average over every
order of the tied items (the tie-aware measures of McSherry and Najork 2008; for nDCG it
is the tie-averaged DCG of scikit-learn's ``ndcg_score`` and torchmetrics). The chapter
is ``book/retrieval.md``.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np
from scipy.special import gammaln

from ._validation import (
    as_float_array,
    as_labels,
    as_sequence,
    check_bool,
    check_int,
    check_same_width,
    unit_rows,
)

__all__ = ["retrieval_metrics", "ranking_metrics", "precision_at_k", "ir_evaluator_metrics"]

# Upper bound on the number of score entries ranked at once (query block x items).
_BLOCK_ENTRIES = 1 << 21

TIES = ("index", "reverse_index", "average")


def _check_ks(ks):
    """Return ``ks`` as a tuple of ints >= 1 (a single int is accepted as one cutoff)."""
    if isinstance(ks, numbers.Integral) and not isinstance(ks, bool):
        ks = (ks,)
    ks = as_sequence(ks, "ks", "integers")
    if len(ks) == 0:
        raise ValueError("ks must contain at least one cutoff")
    return tuple(check_int(k, "ks", minimum=1) for k in ks)


def _check_ties(ties):
    if not isinstance(ties, str) or ties not in TIES:
        raise ValueError(f"ties must be one of {', '.join(map(repr, TIES))}; got {ties!r}")
    return ties


def _order(s, ties):
    """Ranked order of each row of ``s``, highest score first, ties by the rule ``ties``."""
    if ties == "reverse_index":
        n = s.shape[1]
        return n - 1 - np.argsort(-s[:, ::-1], axis=1, kind="stable")
    return np.argsort(-s, axis=1, kind="stable")


def _block_rows(n_items, ties):
    """Rows per block: about ``_BLOCK_ENTRIES`` scores, a quarter of that for the heavier
    ``ties="average"`` (which holds some twenty arrays of the block's size at once)."""
    entries = _BLOCK_ENTRIES // 4 if ties == "average" else _BLOCK_ENTRIES
    return max(1, entries // n_items)


def _log_comb(n, m):
    """log C(n, m) for arrays with 0 <= m <= n."""
    return gammaln(n + 1.0) - gammaln(m + 1.0) - gammaln(n - m + 1.0)


def _rank_block(s, g, ks, ties):
    """Per-query metrics of one block of rows.

    Parameters
    ----------
    s : float array of shape (b, n)
        Scores, ``-inf`` for the items left out of a row's ranking.
    g : float array of shape (b, n)
        Non-negative gains, 0 for the items left out.
    ks : tuple of int
    ties : str

    Returns
    -------
    dict of str -> float array of shape (b,)
        NaN in the rows without a relevant item.
    """
    b, n = s.shape
    order = _order(s, ties)
    gs = np.take_along_axis(g, order, axis=1)
    rel = gs > 0
    n_rel = rel.sum(axis=1)
    keep = n_rel > 0
    R = np.where(keep, n_rel, 1).astype(np.float64)
    ranks = np.arange(1, n + 1, dtype=np.float64)
    discounts = 1.0 / np.log2(ranks + 1.0)
    ideal_dcg = np.cumsum(-np.sort(-g, axis=1) * discounts, axis=1)
    rows = np.arange(b)
    relf = rel.astype(np.float64)
    out = {}

    if ties == "average":
        ss = np.take_along_axis(s, order, axis=1)
        first = np.ones((b, n), dtype=bool)
        first[:, 1:] = ss[:, 1:] != ss[:, :-1]
        last = np.ones((b, n), dtype=bool)
        last[:, :-1] = first[:, 1:]
        pos = np.arange(n)
        start = np.maximum.accumulate(np.where(first, pos, 0), axis=1)
        end = np.minimum.accumulate(np.where(last, pos, n)[:, ::-1], axis=1)[:, ::-1]
        size = (end - start + 1).astype(np.float64)
        cum_rel = np.cumsum(relf, axis=1)
        rel_before = np.where(
            start > 0, np.take_along_axis(cum_rel, np.maximum(start - 1, 0), axis=1), 0.0
        )
        rel_group = np.take_along_axis(cum_rel, end, axis=1) - rel_before
        cum_gain = np.cumsum(gs, axis=1)
        gain_before = np.where(
            start > 0, np.take_along_axis(cum_gain, np.maximum(start - 1, 0), axis=1), 0.0
        )
        gain_group = np.take_along_axis(cum_gain, end, axis=1) - gain_before
        # every position of a tied group holds the group's mean relevance and mean gain:
        # the expected values over all orders of the group, exact for the linear metrics
        hits = np.cumsum(rel_group / size, axis=1)
        dcg = np.cumsum(gain_group / size * discounts, axis=1)
        # average precision (McSherry & Najork 2008): a relevant item at place p of its
        # group has, on average, (r - 1)(p - 1)/(size - 1) relevant group members before it
        within = pos - start  # p - 1
        others = np.where(size > 1, (rel_group - 1.0) * within / np.maximum(size - 1.0, 1.0), 0.0)
        ap = np.sum(rel_group / size * (rel_before + 1.0 + others) / ranks, axis=1) / R
        # reciprocal rank: the first relevant group starts after `a` items; the first
        # relevant item takes place j of the group with P = C(size-j, r-1) / C(size, r)
        f = np.argmax(rel, axis=1)
        a = start[rows, f].astype(np.float64)[:, None]
        m = size[rows, f][:, None]
        r = np.maximum(rel_group[rows, f], 1.0)[:, None]
        j = ranks[None, :]
        ok = j <= m - r + 1
        jj = np.where(ok, j, 1.0)
        logw = _log_comb(np.maximum(m - jj, r - 1), r - 1) - _log_comb(m, r)
        rr = np.sum(np.where(ok, np.exp(logw) / (a + jj), 0.0), axis=1)
        for k in ks:
            kk = min(k, n)
            found = hits[:, kk - 1]
            # hit@k: 1 if a relevant item precedes the group at the cutoff; otherwise the
            # chance that the group's first `taken` places are not all non-relevant
            a_k = start[:, kk - 1].astype(np.float64)
            size_k = size[:, kk - 1]
            r_k = rel_group[:, kk - 1]
            taken = kk - a_k
            room = size_k - r_k  # non-relevant members of that group
            fits = taken <= room
            log_none = np.where(
                fits,
                _log_comb(np.maximum(room, taken), np.where(fits, taken, 0.0))
                - _log_comb(size_k, taken),
                -np.inf,
            )
            miss = np.where(fits, np.exp(log_none), 0.0)
            hit = np.where(rel_before[:, kk - 1] > 0, 1.0, 1.0 - miss)
            out[f"recall@{k}"] = found / R
            out[f"precision@{k}"] = found / k
            out[f"hit@{k}"] = hit
            out[f"ndcg@{k}"] = dcg[:, kk - 1] / np.where(keep, ideal_dcg[:, kk - 1], 1.0)
    else:
        hits = np.cumsum(relf, axis=1)
        dcg = np.cumsum(gs * discounts, axis=1)
        ap = np.sum(np.where(rel, hits / ranks, 0.0), axis=1) / R
        rr = 1.0 / (np.argmax(rel, axis=1) + 1.0)
        for k in ks:
            kk = min(k, n)
            found = hits[:, kk - 1]
            out[f"recall@{k}"] = found / R
            out[f"precision@{k}"] = found / k
            out[f"hit@{k}"] = (found > 0).astype(np.float64)
            out[f"ndcg@{k}"] = dcg[:, kk - 1] / np.where(keep, ideal_dcg[:, kk - 1], 1.0)
    out["mrr"] = rr
    out["map"] = ap
    for name in out:
        out[name] = np.where(keep, out[name], np.nan)
    return out


def _names(ks, metrics):
    return [f"{m}@{k}" for m in metrics for k in ks] + ["mrr", "map"]


def _finish(per_query, names, per_query_flag):
    kept = ~np.isnan(per_query["map"])
    if not kept.any():
        raise ValueError(
            "relevance has no positive gain outside ignore in any row, so every "
            "query would be left out"
        )
    if per_query_flag:
        return {name: per_query[name] for name in names}
    return {name: float(np.mean(per_query[name][kept])) for name in names}


def _check_ranking_inputs(scores, relevance, ignore):
    scores = as_float_array(scores, "scores", ndim=2)
    relevance = as_float_array(relevance, "relevance", ndim=2)
    if relevance.shape != scores.shape:
        raise ValueError(
            f"relevance has shape {relevance.shape} but scores has shape {scores.shape}"
        )
    if np.any(relevance < 0):
        raise ValueError("relevance contains negative gains (use 0 for a non-relevant item)")
    if ignore is None:
        ignore = np.zeros(scores.shape, dtype=bool)
    else:
        if isinstance(ignore, (str, bytes)):
            raise TypeError("ignore must be a boolean array")
        ignore = np.asarray(ignore)
        if ignore.dtype != bool:
            if ignore.dtype == object or not np.issubdtype(ignore.dtype, np.number):
                raise TypeError(f"ignore must be a boolean array, got dtype {ignore.dtype}")
            if not np.all(np.isin(ignore, (0, 1))):
                raise ValueError("ignore must hold only True/False (or 0/1)")
            ignore = ignore.astype(bool)
        if ignore.shape != scores.shape:
            raise ValueError(f"ignore has shape {ignore.shape} but scores has shape {scores.shape}")
    return scores, relevance, ignore


def _rank_rows(scores, relevance, ignore, ks, ties, names):
    n = scores.shape[1]
    block = _block_rows(n, ties)
    parts = {name: [] for name in names}
    for start in range(0, scores.shape[0], block):
        stop = start + block
        s = np.where(ignore[start:stop], -np.inf, scores[start:stop])
        g = np.where(ignore[start:stop], 0.0, relevance[start:stop])
        res = _rank_block(s, g, ks, ties)
        for name in names:
            parts[name].append(res[name])
    return {name: np.concatenate(parts[name]) for name in names}


def ranking_metrics(
    scores, relevance, ks=(1, 5, 10), *, ties="index", ignore=None, per_query=False
):
    """Recall@k, precision@k, hit@k, nDCG@k, MRR and MAP of ranked lists given by scores.

    Row ``i`` ranks the items by ``scores[i]``, highest first. Item ``j`` has gain
    ``relevance[i, j] >= 0`` and is *relevant* when its gain is positive; a row has ``R``
    relevant items. Items with ``ignore[i, j]`` true are removed from row ``i`` before
    ranking (they neither count as relevant nor take a place). With ``rel_j`` the
    relevance (0/1) and ``g_j`` the gain of the item at rank ``j`` (1-based):

    * ``recall@k`` = :math:`\\sum_{j \\le k} rel_j / R`;
    * ``precision@k`` = :math:`\\sum_{j \\le k} rel_j / k` (``k`` even when the list is shorter);
    * ``hit@k`` = 1 if :math:`\\sum_{j \\le k} rel_j > 0`, else 0;
    * ``ndcg@k`` = :math:`\\sum_{j \\le k} g_j / \\log_2(j + 1)` divided by the same sum for
      the gains sorted in decreasing order (the ideal DCG);
    * reciprocal rank = ``1 / j`` for the first relevant ``j`` of the whole ranking;
    * average precision = :math:`\\frac1R \\sum_{j: rel_j = 1} \\mathrm{precision@}j`.

    Rows with ``R = 0`` are left out of every average. With binary gains these equal
    trec_eval's ``recall_k``, ``P_k``, ``success_k``, ``ndcg_cut_k``, ``recip_rank`` and
    ``map``; with graded gains trec_eval's nDCG (gains used as given, Järvelin and
    Kekäläinen). For the exponential gains :math:`2^g - 1` of Burges et al. (ranx's
    ``ndcg_burges``) pass ``2**g - 1``.

    Parameters
    ----------
    scores : array_like of shape (n_queries, n_items)
        Finite scores, higher is better.
    relevance : array_like of shape (n_queries, n_items)
        Non-negative gains: 0/1 for binary relevance, larger numbers for graded relevance.
    ks : sequence of int, default (1, 5, 10)
        Cutoffs, each >= 1 (a single int is accepted). A cutoff beyond the list means the
        whole list (precision still divides by ``k``).
    ties : {"index", "reverse_index", "average"}, default "index"
        Order of equal scores: item index ascending; item index descending (trec_eval,
        which breaks ties by document name descending, when the names sort like the
        indices); or the mean of each metric over all orders of the tied items (exact
        expectations under a uniformly random tie-breaker; for nDCG the tie-averaged DCG
        of scikit-learn's ``ndcg_score`` and torchmetrics).
    ignore : array_like of bool, shape (n_queries, n_items), optional
        Items removed from each row's ranking (junk images; the query itself).
    per_query : bool, default False
        Return one value per row (NaN for the rows left out) instead of the means.

    Returns
    -------
    dict of str -> float, or dict of str -> ndarray of shape (n_queries,)
        Keys ``recall@k``, ``precision@k``, ``hit@k``, ``ndcg@k`` for each ``k`` in ``ks``,
        then ``mrr`` and ``map``.

    Raises
    ------
    ValueError
        Wrong or mismatched shapes, NaN/inf scores, negative gains, a non-boolean
        ``ignore``, an empty or non-positive cutoff, an unknown ``ties``, or no row with a
        relevant item.
    TypeError
        Non-numeric inputs, non-integer cutoffs or a non-boolean ``per_query``.
    """
    scores, relevance, ignore = _check_ranking_inputs(scores, relevance, ignore)
    ks = _check_ks(ks)
    ties = _check_ties(ties)
    per_query = check_bool(per_query, "per_query")
    names = _names(ks, ("recall", "precision", "hit", "ndcg"))
    return _finish(_rank_rows(scores, relevance, ignore, ks, ties, names), names, per_query)


def precision_at_k(scores, relevance, k, *, ties="index", ignore=None):
    """Precision at cutoff ``k`` of every row: relevant items among the top ``k``, over ``k``.

    Row ``i`` ranks its items by ``scores[i]``, highest first; an item is relevant when
    ``relevance[i, j] > 0``; items with ``ignore[i, j]`` true are removed first. The
    denominator is ``k`` even when a row has fewer than ``k`` items (trec_eval's ``P_k``).
    Unlike recall, precision is defined for a row without relevant items (it is 0);
    :func:`ranking_metrics` nevertheless leaves such rows out of all its means.

    Parameters
    ----------
    scores : array_like of shape (n_queries, n_items)
        Finite scores, higher is better.
    relevance : array_like of shape (n_queries, n_items)
        Non-negative gains; positive means relevant.
    k : int
        The cutoff, >= 1.
    ties : {"index", "reverse_index", "average"}, default "index"
        Order of equal scores, as in :func:`ranking_metrics` ("average" gives the expected
        precision over all orders of the tied items).
    ignore : array_like of bool, shape (n_queries, n_items), optional
        Items removed from each row's ranking.

    Returns
    -------
    ndarray of shape (n_queries,)
        Precision@k of each row, in [0, 1].

    Raises
    ------
    ValueError
        Wrong or mismatched shapes, NaN/inf scores, negative gains, ``k < 1`` or an
        unknown ``ties``.
    TypeError
        Non-numeric inputs or a non-integer ``k``.
    """
    scores, relevance, ignore = _check_ranking_inputs(scores, relevance, ignore)
    k = check_int(k, "k", minimum=1)
    ties = _check_ties(ties)
    s = np.where(ignore, -np.inf, scores)
    rel = np.where(ignore, 0.0, (relevance > 0).astype(np.float64))
    n = s.shape[1]
    kk = min(k, n)
    if ties == "average":
        # expected count: whole groups above the cutoff plus the share of the straddling group
        order = _order(s, "index")
        ss = np.take_along_axis(s, order, axis=1)
        rs = np.take_along_axis(rel, order, axis=1)
        cut = ss[:, kk - 1][:, None]
        above = np.sum(np.where(ss > cut, rs, 0.0), axis=1)
        at = ss == cut
        n_at = at.sum(axis=1)
        slots = kk - np.sum(ss > cut, axis=1)
        found = above + np.sum(np.where(at, rs, 0.0), axis=1) * slots / n_at
    else:
        order = _order(s, ties)[:, :kk]
        found = np.take_along_axis(rel, order, axis=1).sum(axis=1)
    return found / k


def retrieval_metrics(
    query_h,
    query_y,
    corpus_h,
    corpus_y,
    ks=(1, 5, 10),
    *,
    ties="index",
    exclude_self=False,
    per_query=False,
):
    """Recall@k, hit@k, nDCG@k, MRR and MAP of cosine retrieval with label relevance.

    Every query ranks the whole corpus by cosine similarity, highest first; equal
    similarities are ordered by corpus index, lowest first (``ties`` changes that). A
    corpus item is relevant to a query when its label equals the query's label; a query
    has ``R`` relevant items. Queries with ``R = 0`` are left out of every average. For
    each kept query, with ``rel_j`` the relevance of the item at rank ``j`` (1-based):

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
    when no scores tie. Precision@k is in :func:`ranking_metrics` and
    :func:`precision_at_k`.

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
    ties : {"index", "reverse_index", "average"}, default "index"
        Order of equal similarities; see :func:`ranking_metrics`.
    exclude_self : bool, default False
        The queries are the corpus (``n_queries == n_corpus``, query ``i`` is corpus item
        ``i``): leave each query's own item out of its ranking, so that it neither
        counts as relevant nor takes the first place.
    per_query : bool, default False
        Return one value per query (NaN for the queries left out) instead of the means.

    Returns
    -------
    dict of str -> float, or dict of str -> ndarray of shape (n_queries,)
        Keys ``recall@k``, ``hit@k``, ``ndcg@k`` for each ``k`` in ``ks``, and
        ``mrr`` and ``map``.

    Raises
    ------
    ValueError
        Wrong shapes, mismatched lengths or dimensions, NaN/inf, a zero feature
        vector, an empty or non-positive cutoff, an unknown ``ties``, ``exclude_self``
        with different numbers of queries and corpus items, or no query with a relevant
        item.
    TypeError
        Non-numeric inputs, non-integer cutoffs or non-boolean flags.

    Notes
    -----
    Queries are processed in blocks, so memory is bounded by a small multiple of
    ``2**21`` similarity entries plus the inputs, whatever the number of queries.
    """
    query_h = as_float_array(query_h, "query_h", ndim=2)
    corpus_h = as_float_array(corpus_h, "corpus_h", ndim=2)
    query_y = as_labels(query_y, "query_y", n=query_h.shape[0])
    corpus_y = as_labels(corpus_y, "corpus_y", n=corpus_h.shape[0])
    check_same_width(query_h, corpus_h, "query_h", "corpus_h")
    ks = _check_ks(ks)
    ties = _check_ties(ties)
    exclude_self = check_bool(exclude_self, "exclude_self")
    per_query = check_bool(per_query, "per_query")
    if exclude_self and query_h.shape[0] != corpus_h.shape[0]:
        raise ValueError(
            f"exclude_self needs the queries to be the corpus, but query_h has "
            f"{query_h.shape[0]} rows and corpus_h {corpus_h.shape[0]}"
        )

    q = unit_rows(query_h, "query_h")
    c = unit_rows(corpus_h, "corpus_h")
    n_corpus = c.shape[0]
    names = _names(ks, ("recall", "hit", "ndcg"))
    parts = {name: [] for name in names}
    block = _block_rows(n_corpus, ties)
    for start in range(0, q.shape[0], block):
        stop = min(start + block, q.shape[0])
        sims = q[start:stop] @ c.T
        gains = (corpus_y[None, :] == query_y[start:stop, None]).astype(np.float64)
        if exclude_self:
            idx = np.arange(start, stop)
            sims[idx - start, idx] = -np.inf
            gains[idx - start, idx] = 0.0
        res = _rank_block(sims, gains, ks, ties)
        for name in names:
            parts[name].append(res[name])
    per = {name: np.concatenate(parts[name]) for name in names}
    try:
        return _finish(per, names, per_query)
    except ValueError:
        raise ValueError(
            "no query has a relevant corpus item (no label of query_y occurs in corpus_y"
            + (" apart from the query itself)" if exclude_self else ")")
        ) from None


SIMILARITIES = ("cosine", "dot")


def _check_cutoffs(ks, name):
    if isinstance(ks, numbers.Integral) and not isinstance(ks, bool):
        ks = (ks,)
    ks = as_sequence(ks, name, "integers")
    if len(ks) == 0:
        raise ValueError(f"{name} must contain at least one cutoff")
    return tuple(check_int(k, name, minimum=1) for k in ks)


def _stack_vectors(mapping, name):
    """Ids (in the mapping's order) and their vectors stacked as a float array (n, d)."""
    if not isinstance(mapping, Mapping):
        raise TypeError(
            f"{name} must be a mapping from ids to vectors, got {type(mapping).__name__}"
        )
    if len(mapping) == 0:
        raise ValueError(f"{name} is empty")
    ids = list(mapping)
    try:
        rows = [np.asarray(mapping[i]) for i in ids]
    except Exception as exc:  # pragma: no cover - exotic containers
        raise TypeError(f"{name} must map ids to numeric vectors") from exc
    widths = {r.shape for r in rows}
    if len(widths) != 1:
        raise ValueError(f"{name} holds vectors of different shapes: {sorted(map(str, widths))}")
    X = as_float_array(np.stack(rows), name, ndim=2)
    return ids, X


def ir_evaluator_metrics(
    queries,
    corpus,
    relevant_docs,
    *,
    similarity="cosine",
    accuracy_at_k=(1, 3, 5, 10),
    precision_recall_at_k=(1, 3, 5, 10),
    mrr_at_k=(10,),
    ndcg_at_k=(10,),
    map_at_k=(100,),
):
    """Retrieval numbers with the conventions of sentence-transformers' IR evaluator.

    The inputs are those of ``sentence_transformers.evaluation.InformationRetrievalEvaluator``
    with embeddings in place of texts: ``queries`` and ``corpus`` map ids to vectors and
    ``relevant_docs`` maps a query id to the ids of its relevant documents. Every query ranks
    the whole corpus by ``similarity``, highest first; equal scores keep the order of
    ``corpus`` (a stable sort, which is this function's choice: sentence-transformers leaves
    the order of tied documents to ``torch.topk`` and to a heap that compares the ids). Only
    queries that appear in ``relevant_docs`` with at least one id are scored, and ``R`` is the
    number of ids listed for a query, *including ids that are not in the corpus* (they can
    never be retrieved). With ``rel_j`` the relevance (0/1) of the document at rank ``j``:

    * ``accuracy@k``: 1 if a relevant document is in the top ``k`` (what
      :func:`ranking_metrics` calls ``hit@k`` and trec_eval ``success_k``);
    * ``precision@k`` = :math:`\\sum_{j \\le k} rel_j / k` and ``recall@k`` =
      :math:`\\sum_{j \\le k} rel_j / R`, as in :func:`ranking_metrics`;
    * ``mrr@k``: ``1 / j`` for the first relevant ``j <= k``, and 0 when none is in the top
      ``k`` (the package's ``mrr`` and trec_eval's ``recip_rank`` read the whole ranking);
    * ``ndcg@k``: binary gains, :math:`\\sum_{j \\le k} rel_j / \\log_2(j + 1)` divided by
      :math:`\\sum_{j \\le \\min(k, R)} 1 / \\log_2(j + 1)`, as in :func:`ranking_metrics`;
    * ``map@k``: :math:`\\sum_{j \\le k,\\ rel_j = 1} \\mathrm{precision@}j` divided by
      :math:`\\min(k, R)`, not by ``R`` as trec_eval's ``map`` and ranx's ``map@k`` divide, so
      a query with more relevant documents than ``k`` is not penalised for the ones beyond the
      cutoff.

    Each value is the mean over the scored queries.

    Parameters
    ----------
    queries : Mapping[hashable, array_like of shape (d,)]
        Query embeddings by query id; no zero vector when ``similarity="cosine"``.
    corpus : Mapping[hashable, array_like of shape (d,)]
        Document embeddings by document id, in the order used to break ties.
    relevant_docs : Mapping[hashable, Iterable[hashable]]
        Relevant document ids of each query id (a set, list or tuple).
    similarity : {"cosine", "dot"}, default "cosine"
        Cosine similarity (sentence-transformers' ``cos_sim``) or the plain dot product
        (``dot_score``).
    accuracy_at_k, precision_recall_at_k, mrr_at_k, ndcg_at_k, map_at_k : sequence of int
        Cutoffs (each >= 1), with the evaluator's defaults. A cutoff beyond the corpus
        means the whole ranking; precision still divides by ``k``.

    Returns
    -------
    dict of str -> float
        ``accuracy@k``, ``precision@k``, ``recall@k``, ``mrr@k``, ``ndcg@k`` and ``map@k``
        for the cutoffs of each family, in that order.

    Raises
    ------
    ValueError
        An empty ``queries`` or ``corpus``, vectors of different lengths, NaN/inf, a zero
        vector under cosine similarity, an empty or non-positive cutoff, an unknown
        ``similarity``, or no query with a relevant document in ``relevant_docs``.
    TypeError
        Arguments that are not mappings, non-numeric vectors, non-integer cutoffs.

    Notes
    -----
    Book ``book/retrieval.md``. The conventions are read from the evaluator's documentation
    and source (sentence-transformers 5.1); sentence-transformers itself is not a
    dependency. Unlike :func:`retrieval_metrics` with ``exclude_self=True``, the evaluator
    does not drop a document whose id equals the query's id.
    """
    q_ids, Q = _stack_vectors(queries, "queries")
    c_ids, C = _stack_vectors(corpus, "corpus")
    check_same_width(Q, C, "queries", "corpus")
    if not isinstance(relevant_docs, Mapping):
        raise TypeError(
            f"relevant_docs must be a mapping from query ids to document ids, "
            f"got {type(relevant_docs).__name__}"
        )
    if not isinstance(similarity, str) or similarity not in SIMILARITIES:
        raise ValueError(f"similarity must be one of {SIMILARITIES}, got {similarity!r}")
    families = {
        "accuracy": _check_cutoffs(accuracy_at_k, "accuracy_at_k"),
        "precision_recall": _check_cutoffs(precision_recall_at_k, "precision_recall_at_k"),
        "mrr": _check_cutoffs(mrr_at_k, "mrr_at_k"),
        "ndcg": _check_cutoffs(ndcg_at_k, "ndcg_at_k"),
        "map": _check_cutoffs(map_at_k, "map_at_k"),
    }
    position = {cid: j for j, cid in enumerate(c_ids)}
    kept, rel_sets = [], []
    for i, qid in enumerate(q_ids):
        docs = relevant_docs.get(qid)
        if docs is None:
            continue
        if isinstance(docs, (str, bytes)) or not hasattr(docs, "__iter__"):
            raise TypeError(f"relevant_docs[{qid!r}] must be a collection of document ids")
        docs = set(docs)
        if docs:
            kept.append(i)
            rel_sets.append(docs)
    if not kept:
        raise ValueError(
            "relevant_docs gives no query of queries a relevant document, so every "
            "query would be left out"
        )
    if similarity == "cosine":
        Q = unit_rows(Q, "queries")
        C = unit_rows(C, "corpus")
    Q = Q[kept]
    n_c = C.shape[0]
    R = np.array([len(d) for d in rel_sets], dtype=np.float64)
    max_k = min(max(max(ks) for ks in families.values()), n_c)
    ranks = np.arange(1, max_k + 1, dtype=np.float64)
    discount = 1.0 / np.log2(ranks + 1.0)
    parts = []
    block = _block_rows(n_c, "index")
    for start in range(0, Q.shape[0], block):
        stop = min(start + block, Q.shape[0])
        order = np.argsort(-(Q[start:stop] @ C.T), axis=1, kind="stable")[:, :max_k]
        rel = np.zeros((stop - start, n_c), dtype=bool)
        for row, docs in enumerate(rel_sets[start:stop]):
            cols = [position[d] for d in docs if d in position]
            rel[row, cols] = True
        parts.append(np.take_along_axis(rel, order, axis=1))
    hits = np.concatenate(parts).astype(np.float64)  # (n_kept, max_k), ranked order
    found = np.cumsum(hits, axis=1)
    first = np.where(hits.any(axis=1), np.argmax(hits, axis=1) + 1.0, np.inf)

    out = {}
    for k in families["accuracy"]:
        out[f"accuracy@{k}"] = float(np.mean(found[:, min(k, max_k) - 1] > 0))
    for k in families["precision_recall"]:
        out[f"precision@{k}"] = float(np.mean(found[:, min(k, max_k) - 1] / k))
    for k in families["precision_recall"]:
        out[f"recall@{k}"] = float(np.mean(found[:, min(k, max_k) - 1] / R))
    for k in families["mrr"]:
        out[f"mrr@{k}"] = float(np.mean(np.where(first <= k, 1.0 / first, 0.0)))
    for k in families["ndcg"]:
        kk = min(k, max_k)
        dcg = hits[:, :kk] @ discount[:kk]
        ideal_len = np.minimum(R, k).astype(int)
        full = np.cumsum(1.0 / np.log2(np.arange(1, int(ideal_len.max()) + 1) + 1.0))
        out[f"ndcg@{k}"] = float(np.mean(dcg / full[ideal_len - 1]))
    for k in families["map"]:
        kk = min(k, max_k)
        ap = np.sum(hits[:, :kk] * found[:, :kk] / ranks[:kk], axis=1) / np.minimum(R, k)
        out[f"map@{k}"] = float(np.mean(ap))
    return out
