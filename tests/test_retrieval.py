"""Tests of repeval_ref.retrieval.retrieval_metrics, including a trec_eval cross-check."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import repeval_ref.retrieval as retrieval
from repeval_ref.retrieval import retrieval_metrics

pytrec_eval = pytest.importorskip("pytrec_eval")


def _random_problem(seed, n_q=40, n_c=60, d=8, n_classes=5, signal=1.0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_classes, d))
    qy = rng.integers(0, n_classes, size=n_q)
    cy = rng.integers(0, n_classes, size=n_c)
    qh = signal * centers[qy] + rng.normal(size=(n_q, d))
    ch = signal * centers[cy] + rng.normal(size=(n_c, d))
    return qh, qy, ch, cy


def _trec_eval_means(qh, qy, ch, cy, ks):
    """Mean trec_eval measures over the queries that have a relevant corpus item."""
    qn = qh / np.linalg.norm(qh, axis=1, keepdims=True)
    cn = ch / np.linalg.norm(ch, axis=1, keepdims=True)
    sims = qn @ cn.T
    qrels, run = {}, {}
    for i in range(len(qy)):
        relevant = {f"d{j}": 1 for j in np.flatnonzero(cy == qy[i])}
        if not relevant:
            continue
        qrels[f"q{i}"] = relevant
        run[f"q{i}"] = {f"d{j}": float(sims[i, j]) for j in range(len(cy))}
    cut = ",".join(str(k) for k in ks)
    measures = {f"recall.{cut}", f"success.{cut}", f"ndcg_cut.{cut}", "recip_rank", "map"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    assert set(per_query) == set(qrels)
    # trec_eval orders equal scores by document name, not by corpus index: the data
    # used with this helper must have no ties.
    for i in range(len(qy)):
        assert len(np.unique(sims[i])) == len(cy)

    def mean(name):
        return float(np.mean([v[name] for v in per_query.values()]))

    out = {"mrr": mean("recip_rank"), "map": mean("map")}
    for k in ks:
        out[f"recall@{k}"] = mean(f"recall_{k}")
        out[f"hit@{k}"] = mean(f"success_{k}")
        out[f"ndcg@{k}"] = mean(f"ndcg_cut_{k}")
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agrees_with_trec_eval(seed):
    qh, qy, ch, cy = _random_problem(seed, n_q=30, n_c=25 + 10 * seed, n_classes=8)
    qy[:3] = 8  # a label absent from the corpus: these queries are skipped by both
    ks = (1, 3, 5, 10, 100)  # 100 exceeds the corpus: the whole ranking
    ours = retrieval_metrics(qh, qy, ch, cy, ks=ks)
    ref = _trec_eval_means(qh, qy, ch, cy, ks)
    assert set(ours) == set(ref)
    for name, value in ref.items():
        assert ours[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_agrees_with_trec_eval_on_larger_problem_with_small_blocks(monkeypatch):
    qh, qy, ch, cy = _random_problem(7, n_q=120, n_c=200, d=16, n_classes=6, signal=0.7)
    ref = _trec_eval_means(qh, qy, ch, cy, (1, 5, 10, 50))
    full = retrieval_metrics(qh, qy, ch, cy, ks=(1, 5, 10, 50))
    # Force many small query blocks: the result must not depend on the blocking.
    monkeypatch.setattr(retrieval, "_BLOCK_ENTRIES", 7 * 200)
    blocked = retrieval_metrics(qh, qy, ch, cy, ks=(1, 5, 10, 50))
    for name, value in ref.items():
        assert full[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
        assert blocked[name] == pytest.approx(full[name], rel=1e-12, abs=1e-15), name


def test_keys_and_types():
    qh, qy, ch, cy = _random_problem(3)
    out = retrieval_metrics(qh, qy, ch, cy, ks=(2, 7))
    expected = {"recall@2", "recall@7", "hit@2", "hit@7", "ndcg@2", "ndcg@7", "mrr", "map"}
    assert set(out) == expected
    assert all(type(v) is float for v in out.values())
    default = retrieval_metrics(qh, qy, ch, cy)
    assert set(default) == {f"{m}@{k}" for m in ("recall", "hit", "ndcg") for k in (1, 5, 10)} | {
        "mrr",
        "map",
    }


def test_hand_example_recall_differs_from_hit():
    # One query along the x axis; corpus at decreasing cosine: ranks 1..5 are
    # items 0..4. Relevant (label 1): items 1 and 3 (ranks 2 and 4), R = 2.
    angles = np.deg2rad([0, 10, 20, 30, 40])
    ch = np.column_stack([np.cos(angles), np.sin(angles)])
    cy = np.array([0, 1, 0, 1, 0])
    qh = np.array([[1.0, 0.0]])
    qy = np.array([1])
    out = retrieval_metrics(qh, qy, ch, cy, ks=(1, 2, 3, 4, 5))
    # hit@k: is any relevant item in the top k? (what the seed calls "Recall@k")
    assert [out[f"hit@{k}"] for k in (1, 2, 3, 4, 5)] == [0.0, 1.0, 1.0, 1.0, 1.0]
    # recall@k: which fraction of the relevant items is in the top k?
    assert [out[f"recall@{k}"] for k in (1, 2, 3, 4, 5)] == [0.0, 0.5, 0.5, 1.0, 1.0]
    assert out["mrr"] == pytest.approx(1 / 2)
    assert out["map"] == pytest.approx((1 / 2 + 2 / 4) / 2)
    idcg2 = 1 + 1 / np.log2(3)
    assert out["ndcg@2"] == pytest.approx((1 / np.log2(3)) / idcg2)
    assert out["ndcg@4"] == pytest.approx((1 / np.log2(3) + 1 / np.log2(5)) / idcg2)
    assert out["ndcg@1"] == 0.0


def test_ideal_dcg_uses_min_of_k_and_number_relevant():
    # Three relevant items at ranks 1, 2, 3 of a corpus of 4: nDCG@k = 1 for every k,
    # which requires the ideal DCG to stop at min(k, R) items.
    angles = np.deg2rad([0, 5, 10, 60])
    ch = np.column_stack([np.cos(angles), np.sin(angles)])
    cy = np.array([2, 2, 2, 0])
    out = retrieval_metrics([[1.0, 0.0]], [2], ch, cy, ks=(1, 2, 3, 4, 10))
    for k in (1, 2, 3, 4, 10):
        assert out[f"ndcg@{k}"] == pytest.approx(1.0)
    assert out["map"] == pytest.approx(1.0)
    assert out["recall@2"] == pytest.approx(2 / 3)


def test_ties_are_broken_by_corpus_index():
    # Items 0, 1, 2 are identical vectors (exactly equal similarity); only item 2 is
    # relevant. Ties go to the lower index, so item 2 is ranked third.
    ch = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [-1.0, 0.2]])
    cy = np.array([0, 0, 1, 0])
    out = retrieval_metrics([[1.0, 0.9]], [1], ch, cy, ks=(1, 2, 3))
    assert out["hit@2"] == 0.0 and out["hit@3"] == 1.0
    assert out["mrr"] == pytest.approx(1 / 3)
    # Moving the relevant item first among the tied ones makes it rank 1.
    out2 = retrieval_metrics([[1.0, 0.9]], [1], ch, [1, 0, 0, 0], ks=(1,))
    assert out2["hit@1"] == 1.0 and out2["mrr"] == 1.0


def test_queries_without_relevant_items_are_left_out():
    qh, qy, ch, cy = _random_problem(4, n_q=20, n_c=30, n_classes=3)
    base = retrieval_metrics(qh, qy, ch, cy)
    # Add queries of a class (label 9) that the corpus does not contain.
    rng = np.random.default_rng(0)
    qh2 = np.vstack([qh, rng.normal(size=(5, qh.shape[1]))])
    qy2 = np.concatenate([qy, np.full(5, 9)])
    extended = retrieval_metrics(qh2, qy2, ch, cy)
    for name in base:
        assert extended[name] == pytest.approx(base[name], rel=1e-12)


def test_no_query_with_relevant_item_raises():
    with pytest.raises(ValueError, match="no query has a relevant corpus item"):
        retrieval_metrics([[1.0, 0.0]], [3], [[1.0, 0.0], [0.0, 1.0]], [0, 1])


def test_invariant_to_positive_row_scaling():
    qh, qy, ch, cy = _random_problem(5)
    rng = np.random.default_rng(1)
    base = retrieval_metrics(qh, qy, ch, cy, ks=(1, 5, 10, 20))
    scaled = retrieval_metrics(
        qh * rng.uniform(0.01, 100, size=(len(qh), 1)),
        qy,
        ch * rng.uniform(0.01, 100, size=(len(ch), 1)),
        cy,
        ks=(1, 5, 10, 20),
    )
    for name in base:
        assert scaled[name] == pytest.approx(base[name], rel=1e-12)


def test_perfect_and_worst_rankings():
    # Two well separated classes: every query ranks all its relevant items first.
    qh = np.array([[1.0, 0.0], [0.0, 1.0]])
    ch = np.array([[1.0, 0.01], [0.98, 0.02], [0.01, 1.0], [0.02, 0.99]])
    cy = np.array([0, 0, 1, 1])
    out = retrieval_metrics(qh, [0, 1], ch, cy, ks=(1, 2, 4))
    assert out["mrr"] == 1.0 and out["map"] == pytest.approx(1.0)
    assert out["recall@1"] == 0.5 and out["recall@2"] == 1.0 and out["hit@1"] == 1.0
    # Swapped labels: the relevant items come last.
    worst = retrieval_metrics(qh, [1, 0], ch, cy, ks=(1, 2, 4))
    assert worst["hit@2"] == 0.0 and worst["recall@4"] == 1.0
    assert worst["mrr"] == pytest.approx(1 / 3)
    assert worst["map"] == pytest.approx((1 / 3 + 2 / 4) / 2)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_q=st.integers(1, 6),
    n_c=st.integers(1, 12),
    k=st.integers(1, 15),
)
def test_bounds_and_monotonicity_property(seed, n_q, n_c, k):
    rng = np.random.default_rng(seed)
    qh = rng.normal(size=(n_q, 3))
    ch = rng.normal(size=(n_c, 3))
    cy = rng.integers(0, 2, size=n_c)
    qy = np.full(n_q, cy[0])  # every query has at least one relevant item
    out = retrieval_metrics(qh, qy, ch, cy, ks=(k, k + 1))
    for value in out.values():
        assert 0.0 <= value <= 1.0 + 1e-12
    assert out[f"recall@{k}"] <= out[f"hit@{k}"] + 1e-12
    assert out[f"recall@{k}"] <= out[f"recall@{k + 1}"] + 1e-12
    assert out[f"hit@{k}"] <= out[f"hit@{k + 1}"]
    if k >= n_c:
        assert out[f"recall@{k}"] == pytest.approx(1.0)


def _loop_reference(qh, qy, ch, cy, ks):
    """Plain-Python, one query at a time, straight from the definitions."""
    sums = {f"{m}@{k}": 0.0 for m in ("recall", "hit", "ndcg") for k in ks}
    sums.update(mrr=0.0, map=0.0)
    kept = 0
    for i in range(len(qy)):
        q = qh[i] / np.linalg.norm(qh[i])
        sims = [float(q @ (c / np.linalg.norm(c))) for c in ch]
        order = sorted(range(len(ch)), key=lambda j: (-sims[j], j))
        rel = [int(cy[j] == qy[i]) for j in order]
        R = sum(rel)
        if R == 0:
            continue
        kept += 1
        for k in ks:
            top = rel[:k]
            sums[f"recall@{k}"] += sum(top) / R
            sums[f"hit@{k}"] += float(any(top))
            dcg = sum(r / np.log2(j + 2) for j, r in enumerate(top))
            idcg = sum(1 / np.log2(j + 2) for j in range(min(k, R)))
            sums[f"ndcg@{k}"] += dcg / idcg
        ranks = [j + 1 for j, r in enumerate(rel) if r]
        sums["mrr"] += 1 / ranks[0]
        sums["map"] += sum((n + 1) / rank for n, rank in enumerate(ranks)) / R
    return {name: v / kept for name, v in sums.items()}


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_q=st.integers(1, 8),
    n_c=st.integers(1, 15),
    n_classes=st.integers(1, 4),
    ties=st.booleans(),
)
def test_matches_loop_reference_property(seed, n_q, n_c, n_classes, ties):
    rng = np.random.default_rng(seed)
    qh = rng.normal(size=(n_q, 3))
    ch = rng.normal(size=(n_c, 3))
    if ties:  # exact duplicates of corpus rows give exactly tied similarities
        ch = ch[rng.integers(0, max(1, n_c // 2), size=n_c)]
    qy = rng.integers(0, n_classes, size=n_q)
    cy = rng.integers(0, n_classes, size=n_c)
    cy[0] = qy[0]  # at least one query has a relevant item
    ks = (1, 2, 5, 20)
    ours = retrieval_metrics(qh, qy, ch, cy, ks=ks)
    ref = _loop_reference(qh, qy, ch, cy, ks)
    assert set(ours) == set(ref)
    for name in ref:
        assert ours[name] == pytest.approx(ref[name], rel=1e-12, abs=1e-15), name


def test_does_not_modify_inputs():
    qh, qy, ch, cy = _random_problem(6)
    copies = [a.copy() for a in (qh, qy, ch, cy)]
    retrieval_metrics(qh, qy, ch, cy)
    for a, b in zip((qh, qy, ch, cy), copies):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "change, err, match",
    [
        ({"query_h": np.zeros((3, 2))}, ValueError, "query_h has a zero vector"),
        ({"corpus_h": np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [2.0, 1.0]])}, ValueError,
         "corpus_h has a zero vector at row 1"),
        ({"query_h": np.ones((3, 3))}, ValueError, "query_h has 3 features but corpus_h has 2"),
        ({"query_y": [0, 1]}, ValueError, "query_y has 2 entries but 3"),
        ({"corpus_y": [0, 1, 1]}, ValueError, "corpus_y has 3 entries but 4"),
        ({"query_h": np.array([[1.0, np.nan], [1.0, 0.0], [0.0, 1.0]])}, ValueError,
         "query_h contains NaN"),
        ({"corpus_h": np.full((4, 2), np.inf)}, ValueError, "corpus_h contains NaN or infinite"),
        ({"query_h": np.ones(3)}, ValueError, "query_h must be 2-dimensional"),
        ({"query_y": [0.5, 1, 0]}, ValueError, "query_y must hold whole-number"),
        ({"corpus_y": [0, -1, 1, 0]}, ValueError, "corpus_y contains negative"),
        ({"ks": ()}, ValueError, "ks must contain at least one cutoff"),
        ({"ks": (1, 0)}, ValueError, "ks must be >= 1"),
        ({"ks": (-3,)}, ValueError, "ks must be >= 1"),
        ({"ks": (1.5,)}, TypeError, "ks must be an integer"),
        ({"ks": "5"}, TypeError, "ks must be a sequence"),
        ({"ks": None}, TypeError, "ks must be a sequence"),
        ({"query_h": "abc"}, TypeError, "query_h"),
    ],
)
def test_bad_input(change, err, match):
    args = {
        "query_h": np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
        "query_y": np.array([0, 1, 0]),
        "corpus_h": np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0]]),
        "corpus_y": np.array([0, 1, 1, 0]),
        "ks": (1, 2),
    }
    args.update(change)
    with pytest.raises(err, match=match):
        retrieval_metrics(**args)


def test_single_int_cutoff_and_numpy_ints_accepted():
    qh, qy, ch, cy = _random_problem(8)
    a = retrieval_metrics(qh, qy, ch, cy, ks=5)
    b = retrieval_metrics(qh, qy, ch, cy, ks=np.array([5]))
    assert set(a) == {"recall@5", "hit@5", "ndcg@5", "mrr", "map"}
    assert a == b
