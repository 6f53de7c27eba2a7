"""Exercise spec: recall@k, hit@k, nDCG@k, MRR and MAP of cosine retrieval (book/retrieval.md;
seed 003)."""

NAME = "retrieval_metrics"
TITLE = "Retrieval metrics, with recall@k done right"
LEVEL = "core"
ASSIGNMENT = "retrieval"
CHAPTER = "retrieval"

STATEMENT = r"""
When an encoder is used for search, each query ranks a whole corpus by similarity and we
ask how high the relevant items come. Here an item is relevant to a query when it
carries the same label. Write

```python
retrieval_metrics(query_h, query_y, corpus_h, corpus_y, ks=(1, 5, 10))
```

**Inputs.** Query features `query_h` `(n_q, d)` with integer labels `query_y` `(n_q,)`,
corpus features `corpus_h` `(n_c, d)` with labels `corpus_y` `(n_c,)`, and a tuple of
cutoffs `ks` (each `>= 1`; a cutoff larger than the corpus means the whole ranking).

**Ranking.** Score every corpus item by its cosine similarity to the query (divide the
rows of both matrices by their lengths, then one matrix product) and sort from the
highest score down. Items with **equal** scores are ordered by corpus index, smallest
first: `np.argsort(-sims, axis=1, kind="stable")` does exactly that.

**Per query**, let $R$ be its number of relevant corpus items and $\mathrm{rel}_j \in
\{0, 1\}$ the relevance of the item at rank $j = 1, 2, \dots$. A query with $R = 0$ is
**left out of every average** (nothing can be found for it); if no query is left, raise
`ValueError`.

* `recall@k` $= \frac{1}{R}\sum_{j \le k} \mathrm{rel}_j$: the fraction of *all* its
  relevant items that made it into the top $k$.
* `hit@k` $= 1$ if $\sum_{j \le k} \mathrm{rel}_j > 0$, else 0: whether at least one did.
  (Much published code computes this and calls it recall@k. They differ as soon as a
  query has more than one relevant item.)
* `ndcg@k` $= \mathrm{DCG@k} / \mathrm{IDCG@k}$ with
  $\mathrm{DCG@k} = \sum_{j \le k} \mathrm{rel}_j / \log_2(j + 1)$ and
  $\mathrm{IDCG@k} = \sum_{j=1}^{\min(k, R)} 1/\log_2(j + 1)$, the best possible DCG.
* reciprocal rank $= 1/j$ for the rank $j$ of the first relevant item (whole ranking).
* average precision $= \frac1R \sum_{j:\,\mathrm{rel}_j = 1} \mathrm{precision@}j$, where
  precision@j is the fraction of relevant items among the top $j$ (whole ranking).

**Return** a dict of Python floats: the mean over the kept queries of each quantity, under
the keys `"recall@k"`, `"hit@k"`, `"ndcg@k"` for every `k` in `ks`, plus `"mrr"` and `"map"`
(mean reciprocal rank and mean average precision). On one ranking without equal scores, the
per-query values are those of `trec_eval`'s `recall_k`, `success_k`, `ndcg_cut_k`, `recip_rank`
and `map` with binary relevance, and the means agree as long as every query has a relevant
item. Two conventions here are not `trec_eval`'s: it orders equal scores by document name,
*descending*, not by corpus index, smallest first; and it scores a query that appears in the
relevance judgements without any relevant item as 0 on every measure and keeps it in the
means, where this function leaves it out (`trec_eval` drops only a query that is absent from the
judgements altogether).
Do not modify the inputs.
"""

SOLUTION = r'''import numpy as np


def retrieval_metrics(query_h, query_y,       # queries
                      corpus_h, corpus_y,     # searched collection
                      ks=(1, 5, 10)):
    """Recall@k, hit@k, nDCG@k, MRR and MAP of cosine retrieval with label relevance."""
    ### BEGIN SOLUTION
    q = np.asarray(query_h, dtype=float)
    c = np.asarray(corpus_h, dtype=float)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    order = np.argsort(-(q @ c.T), axis=1, kind="stable")      # ties: smaller index first
    rel = np.asarray(corpus_y)[order] == np.asarray(query_y)[:, None]
    n_rel = rel.sum(axis=1)
    rel, n_rel = rel[n_rel > 0], n_rel[n_rel > 0]              # drop queries with R = 0
    if len(rel) == 0:
        raise ValueError("no query has a relevant item in the corpus")
    n_c = rel.shape[1]
    ranks = np.arange(1, n_c + 1)
    discount = 1.0 / np.log2(ranks + 1)
    found = np.cumsum(rel, axis=1)                             # relevant items in top j
    dcg = np.cumsum(rel * discount, axis=1)
    ideal = np.cumsum(discount)
    out = {}
    for k in ks:
        top = min(k, n_c) - 1
        out[f"recall@{k}"] = float(np.mean(found[:, top] / n_rel))
        out[f"hit@{k}"] = float(np.mean(found[:, top] > 0))
        out[f"ndcg@{k}"] = float(np.mean(dcg[:, top] / ideal[np.minimum(n_rel, top + 1) - 1]))
    out["mrr"] = float(np.mean(1.0 / (np.argmax(rel, axis=1) + 1)))
    precision = found / ranks
    out["map"] = float(np.mean((precision * rel).sum(axis=1) / n_rel))
    return out
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

# one query along the x axis; corpus items at decreasing cosine, labels 0 1 0 1 0
query_h = np.array([[1.0, 0.0]])
query_y = np.array([0])
angles = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
corpus_h = np.stack([np.cos(angles), np.sin(angles)], axis=1)
corpus_y = np.array([1, 0, 1, 1, 0])      # relevant at ranks 2 and 5, R = 2

m = retrieval_metrics(query_h, query_y, corpus_h, corpus_y, ks=(1, 2))
assert set(m) == {"recall@1", "recall@2", "hit@1", "hit@2", "ndcg@1", "ndcg@2", "mrr", "map"}, \
    f"unexpected keys {sorted(m)}"
assert m["hit@1"] == 0.0 and m["hit@2"] == 1.0, "the first relevant item is at rank 2"
assert m["recall@2"] == 0.5, f"1 of the 2 relevant items is in the top 2: recall@2 = 0.5, got {m['recall@2']}"
assert abs(m["mrr"] - 0.5) < 1e-12, "first relevant item at rank 2: reciprocal rank 1/2"
assert abs(m["map"] - (1 / 2 + 2 / 5) / 2) < 1e-12, "AP = (precision@2 + precision@5) / R"
assert abs(m["ndcg@2"] - (1 / np.log2(3)) / (1 + 1 / np.log2(3))) < 1e-12, "nDCG@2"

# a query whose label is not in the corpus is left out of the averages
m2 = retrieval_metrics(np.vstack([query_h, [[0.0, 1.0]]]), np.array([0, 7]),
                       corpus_h, corpus_y, ks=(1, 2))
assert m2 == m, "queries without any relevant item must be left out"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "retrieval_metrics/matches_reference",
    "retrieval_metrics/recall_is_fraction",
    "retrieval_metrics/ties_by_index",
    "retrieval_metrics/queries_without_relevant",
    "retrieval_metrics/fewer_relevant_than_k",
    "retrieval_metrics/properties",
]
