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
        (
            {"corpus_h": np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [2.0, 1.0]])},
            ValueError,
            "corpus_h has a zero vector at row 1",
        ),
        ({"query_h": np.ones((3, 3))}, ValueError, "query_h has 3 features but corpus_h has 2"),
        ({"query_y": [0, 1]}, ValueError, "query_y has 2 entries but 3"),
        ({"corpus_y": [0, 1, 1]}, ValueError, "corpus_y has 3 entries but 4"),
        (
            {"query_h": np.array([[1.0, np.nan], [1.0, 0.0], [0.0, 1.0]])},
            ValueError,
            "query_h contains NaN",
        ),
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


# ----------------------------------------------------------------------------- ranking_metrics,
# precision_at_k, tie rules, exclude_self and per-query output

from itertools import permutations, product  # noqa: E402

from repeval_ref.retrieval import precision_at_k, ranking_metrics  # noqa: E402


def _trec(scores, gains, ks, ignore=None, name=lambda j: f"d{j:05d}"):
    """trec_eval's measures per query (dict of arrays) for a score and gain matrix."""
    n_q, n = scores.shape
    qrels, run = {}, {}
    for i in range(n_q):
        keep = range(n) if ignore is None else np.flatnonzero(~ignore[i])
        qrels[f"q{i:05d}"] = {name(j): int(gains[i, j]) for j in keep}
        run[f"q{i:05d}"] = {name(j): float(scores[i, j]) for j in keep}
    cut = ",".join(str(k) for k in ks)
    measures = {
        f"recall.{cut}",
        f"P.{cut}",
        f"success.{cut}",
        f"ndcg_cut.{cut}",
        "recip_rank",
        "map",
    }
    res = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    rows = [res[f"q{i:05d}"] for i in range(n_q)]
    out = {
        "mrr": np.array([r["recip_rank"] for r in rows]),
        "map": np.array([r["map"] for r in rows]),
    }
    for k in ks:
        for ours, theirs in (
            ("recall", "recall"),
            ("precision", "P"),
            ("hit", "success"),
            ("ndcg", "ndcg_cut"),
        ):
            out[f"{ours}@{k}"] = np.array([r[f"{theirs}_{k}"] for r in rows])
    return out


def _assert_per_query_equal(ours, ref, rows, tol=1e-9):
    for name, values in ref.items():
        np.testing.assert_allclose(
            ours[name][rows], values[rows], rtol=tol, atol=1e-12, err_msg=name
        )


@pytest.mark.parametrize("seed", [0, 1])
def test_ranking_metrics_agree_with_trec_eval_binary_and_graded(seed):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(25, 40))
    gains = rng.integers(0, 4, size=(25, 40)) * (rng.random((25, 40)) < 0.3)
    gains[3] = 0  # a query without relevant items: NaN here, skipped in the means
    ks = (1, 3, 10, 100)
    ours = ranking_metrics(scores, gains, ks, per_query=True)
    ref = _trec(scores, gains, ks)
    kept = gains.sum(axis=1) > 0
    assert np.all(np.isnan(ours["map"][~kept]))
    # trec_eval's nDCG uses the graded gains as given; the binary measures use gain > 0
    _assert_per_query_equal(ours, ref, kept)
    means = ranking_metrics(scores, gains, ks)
    for name in means:
        assert means[name] == pytest.approx(float(np.mean(ref[name][kept])), rel=1e-12)


def test_ignore_equals_removing_the_items_and_matches_trec_eval():
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(12, 30))
    gains = (rng.random((12, 30)) < 0.3).astype(float)
    gains[:, 0] = 1.0
    ignore = rng.random((12, 30)) < 0.25
    ignore[:, 0] = False
    ks = (1, 5, 40)
    ours = ranking_metrics(scores, gains, ks, ignore=ignore, per_query=True)
    ref = _trec(scores, gains, ks, ignore=ignore)
    _assert_per_query_equal(ours, ref, np.ones(12, bool))
    for i in range(12):  # the same row with the ignored columns deleted
        keep = ~ignore[i]
        one = ranking_metrics(scores[i : i + 1, keep], gains[i : i + 1, keep], ks)
        for name in one:
            assert ours[name][i] == pytest.approx(one[name], rel=1e-12), name


def test_reverse_index_ties_reproduce_trec_eval_with_sortable_names():
    rng = np.random.default_rng(4)
    scores = np.round(rng.normal(size=(20, 50)), 1)  # many exact ties
    gains = (rng.random((20, 50)) < 0.3).astype(float)
    gains[:, 7] = 1.0
    ks = (1, 5, 10)
    ref = _trec(scores, gains, ks)
    rev = ranking_metrics(scores, gains, ks, ties="reverse_index", per_query=True)
    _assert_per_query_equal(rev, ref, np.ones(20, bool))
    # with the default rule some numbers differ: the ties are really broken the other way
    fwd = ranking_metrics(scores, gains, ks, ties="index", per_query=True)
    assert any(not np.allclose(fwd[n], ref[n]) for n in ref)
    # names that do not sort like the indices ("d10" < "d9") change trec_eval's order
    plain = _trec(scores, gains, ks, name=lambda j: f"d{j}")
    assert any(not np.allclose(plain[n], ref[n]) for n in ref)


def _metrics_of_ranked(g, ks):
    """Definitions applied to one explicit ranked list of gains."""
    rel = g > 0
    R = rel.sum()
    out = {}
    ideal = np.sort(g)[::-1]
    for k in ks:
        top = rel[:k]
        out[f"recall@{k}"] = top.sum() / R
        out[f"precision@{k}"] = top.sum() / k
        out[f"hit@{k}"] = float(top.any())
        m = min(k, len(g))
        disc = 1 / np.log2(np.arange(2, m + 2))
        out[f"ndcg@{k}"] = float(g[:m] @ disc) / float(ideal[:m] @ disc)
    pos = np.flatnonzero(rel) + 1
    out["mrr"] = 1 / pos[0]
    out["map"] = float(np.mean(np.arange(1, len(pos) + 1) / pos))
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 7))
def test_average_ties_equal_the_mean_over_every_order_of_the_ties(seed, n):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 3, n).astype(float)
    g = rng.integers(0, 3, n) * (rng.random(n) < 0.6).astype(float)
    g[rng.integers(n)] = max(1.0, g.max())
    ks = (1, 2, 4, 10)
    groups = [np.flatnonzero(s == v) for v in sorted(set(s), reverse=True)]
    total, count = None, 0
    for perms in product(*[permutations(grp) for grp in groups]):
        m = _metrics_of_ranked(g[np.concatenate(perms)], ks)
        total = m if total is None else {key: total[key] + m[key] for key in m}
        count += 1
    ours = ranking_metrics(s[None], g[None], ks, ties="average")
    for key in total:
        assert ours[key] == pytest.approx(total[key] / count, rel=1e-12, abs=1e-14), key
    for k in ks:
        assert precision_at_k(s[None], g[None], k, ties="average")[0] == pytest.approx(
            total[f"precision@{k}"] / count, rel=1e-12, abs=1e-14
        )


def test_average_ties_ndcg_matches_scikit_learn():
    from sklearn.metrics import ndcg_score

    rng = np.random.default_rng(5)
    scores = np.round(rng.normal(size=(15, 40)), 1)
    gains = rng.integers(0, 3, size=(15, 40)).astype(float)
    for k in (1, 5, 40):
        ours = ranking_metrics(scores, gains, (k,), ties="average")[f"ndcg@{k}"]
        assert ours == pytest.approx(ndcg_score(gains, scores, k=k, ignore_ties=False), rel=1e-12)
        # without ties every rule gives scikit-learn's value
        smooth = scores + 1e-3 * rng.normal(size=scores.shape)
        for ties in ("index", "reverse_index", "average"):
            assert ranking_metrics(smooth, gains, (k,), ties=ties)[f"ndcg@{k}"] == pytest.approx(
                ndcg_score(gains, smooth, k=k), rel=1e-12
            )


def test_all_rules_agree_without_ties_and_bracket_the_average_with_ties():
    rng = np.random.default_rng(6)
    scores = rng.normal(size=(30, 60))
    gains = (rng.random((30, 60)) < 0.2).astype(float)
    gains[:, 0] = 1.0
    base = [
        ranking_metrics(scores, gains, (1, 5), ties=t)
        for t in ("index", "reverse_index", "average")
    ]
    for other in base[1:]:
        for name in base[0]:
            assert other[name] == pytest.approx(base[0][name], rel=1e-12)
    tied = np.round(scores)
    avg = ranking_metrics(tied, gains, (1, 5), ties="average", per_query=True)
    # the best order of each tied group puts its relevant items first, the worst last; the
    # mean over all orders lies between the two, and strictly so somewhere
    best = ranking_metrics(tied + 0.01 * gains, gains, (1, 5), per_query=True)
    worst = ranking_metrics(tied - 0.01 * gains, gains, (1, 5), per_query=True)
    for name in avg:
        assert np.all(worst[name] <= avg[name] + 1e-12) and np.all(
            avg[name] <= best[name] + 1e-12
        ), name
    assert np.any(worst["map"] < avg["map"] - 1e-9) and np.any(avg["map"] < best["map"] - 1e-9)


def test_precision_at_k_brute_force_and_consistency():
    rng = np.random.default_rng(7)
    scores = np.round(rng.normal(size=(20, 15)), 1)
    gains = (rng.random((20, 15)) < 0.3).astype(float)
    gains[4] = 0.0
    for k in (1, 3, 15, 20):
        for ties, key in (
            ("index", lambda j, row: (-row[j], j)),
            ("reverse_index", lambda j, row: (-row[j], -j)),
        ):
            p = precision_at_k(scores, gains, k, ties=ties)
            for i in range(20):
                order = sorted(range(15), key=lambda j: key(j, scores[i]))
                assert p[i] == pytest.approx(sum(gains[i, j] > 0 for j in order[:k]) / k)
            assert p[4] == 0.0  # defined for a row without relevant items
            kept = gains.sum(axis=1) > 0
            means = ranking_metrics(scores, gains, (k,), ties=ties)
            assert means[f"precision@{k}"] == pytest.approx(float(np.mean(p[kept])), rel=1e-12)
        avg = precision_at_k(scores, gains, k, ties="average")
        assert ranking_metrics(scores, gains, (k,), ties="average")[
            f"precision@{k}"
        ] == pytest.approx(float(np.mean(avg[gains.sum(axis=1) > 0])), rel=1e-12)
    ign = np.zeros((20, 15), bool)
    ign[:, :5] = True
    np.testing.assert_allclose(
        precision_at_k(scores, gains, 3, ignore=ign), precision_at_k(scores[:, 5:], gains[:, 5:], 3)
    )


@pytest.mark.parametrize("ties", ["index", "reverse_index", "average"])
def test_retrieval_metrics_equals_ranking_metrics_on_the_cosine_matrix(ties):
    qh, qy, ch, cy = _random_problem(9, n_q=30, n_c=40)
    ch = np.vstack([ch, ch[:10]])  # duplicated rows: exact ties
    cy = np.concatenate([cy, cy[:10]])
    qn = qh / np.linalg.norm(qh, axis=1, keepdims=True)
    cn = ch / np.linalg.norm(ch, axis=1, keepdims=True)
    gains = (cy[None, :] == qy[:, None]).astype(float)
    ks = (1, 5, 10)
    ours = retrieval_metrics(qh, qy, ch, cy, ks, ties=ties)
    ref = ranking_metrics(qn @ cn.T, gains, ks, ties=ties)
    for name in ours:
        assert ours[name] == pytest.approx(ref[name], rel=1e-12), name


def test_reverse_index_in_retrieval_metrics_against_a_loop():
    ch = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [-1.0, 0.2]])
    cy = np.array([1, 0, 0, 0])
    # item 0 is relevant and tied with items 1 and 2: last of the three under reverse_index
    out = retrieval_metrics([[1.0, 0.9]], [1], ch, cy, ks=(1, 3), ties="reverse_index")
    assert out["mrr"] == pytest.approx(1 / 3) and out["hit@1"] == 0.0 and out["hit@3"] == 1.0
    avg = retrieval_metrics([[1.0, 0.9]], [1], ch, cy, ks=(1, 3), ties="average")
    assert avg["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert avg["hit@1"] == pytest.approx(1 / 3) and avg["recall@1"] == pytest.approx(1 / 3)


def test_exclude_self_equals_leaving_the_item_out_by_hand():
    rng = np.random.default_rng(10)
    h = rng.normal(size=(25, 6))
    y = rng.integers(0, 4, size=25)
    y[0] = 9  # the only item of its class: no relevant item once it is excluded
    ks = (1, 3, 30)
    per = retrieval_metrics(h, y, h, y, ks, exclude_self=True, per_query=True)
    assert np.isnan(per["mrr"][0])
    for i in range(1, 25):
        others = np.delete(np.arange(25), i)
        one = retrieval_metrics(h[i : i + 1], y[i : i + 1], h[others], y[others], ks)
        for name in one:
            assert per[name][i] == pytest.approx(one[name], rel=1e-12), name
    # without the option every query finds itself first
    naive = retrieval_metrics(h, y, h, y, ks)
    assert naive["mrr"] == 1.0 and naive["hit@1"] == 1.0
    means = retrieval_metrics(h, y, h, y, ks, exclude_self=True)
    for name in means:
        assert means[name] == pytest.approx(float(np.nanmean(per[name])), rel=1e-12)


def test_exclude_self_with_small_blocks(monkeypatch):
    qh, qy, _, _ = _random_problem(11, n_q=50, n_c=1, n_classes=4)
    full = retrieval_metrics(qh, qy, qh, qy, (1, 5), exclude_self=True, per_query=True)
    monkeypatch.setattr(retrieval, "_BLOCK_ENTRIES", 3 * 50)
    blocked = retrieval_metrics(qh, qy, qh, qy, (1, 5), exclude_self=True, per_query=True)
    for name in full:
        np.testing.assert_array_equal(full[name], blocked[name])


def test_per_query_output_shapes_and_means():
    qh, qy, ch, cy = _random_problem(12, n_q=20, n_c=30, n_classes=3)
    qy[:2] = 7
    per = retrieval_metrics(qh, qy, ch, cy, (1, 5), per_query=True)
    means = retrieval_metrics(qh, qy, ch, cy, (1, 5))
    assert set(per) == set(means)
    for name in per:
        assert per[name].shape == (20,)
        assert np.all(np.isnan(per[name][:2])) and not np.any(np.isnan(per[name][2:]))
        assert float(np.mean(per[name][2:])) == pytest.approx(means[name], rel=1e-12)


def test_ranx_agrees_without_ties():
    ranx = pytest.importorskip("ranx")
    from helpers.ranx_case import METRICS, ranx_case

    scores, gains, _, _, theirs = ranx_case(ranx)
    ours = ranking_metrics(scores, gains, (5,))
    for name in METRICS:
        assert ours[name] == pytest.approx(theirs[name], rel=1e-9), name


def test_torchmetrics_conventions_reproduced():
    tm = pytest.importorskip("torchmetrics.functional.retrieval")
    import torch

    rng = np.random.default_rng(14)
    scores = np.round(rng.normal(size=(12, 40)), 1)  # ties, and about half the scores <= 0
    gains = (rng.random((12, 40)) < 0.3).astype(float)
    gains[:, 0] = 1.0
    s32 = scores.astype(np.float32)
    # nDCG: torchmetrics averages the gains of tied items, i.e. ties="average"
    ours_ndcg = ranking_metrics(s32, gains, (5, 40), ties="average", per_query=True)
    for i in range(12):
        p, t = torch.tensor(s32[i]), torch.tensor(gains[i]).long()
        assert tm.retrieval_normalized_dcg(p, t, top_k=5).item() == pytest.approx(
            ours_ndcg["ndcg@5"][i], rel=1e-6
        )
    # AP and reciprocal rank: items scoring <= 0 stop counting as relevant, in torch's order
    smooth = (rng.normal(size=(12, 40))).astype(np.float32)  # no ties, some scores <= 0
    positive = gains * (smooth > 0)
    ours_ap = ranking_metrics(smooth, positive, (5,), per_query=True)
    plain_ap = ranking_metrics(smooth, gains, (5,), per_query=True)
    differs = 0
    for i in range(12):
        p, t = torch.tensor(smooth[i]), torch.tensor(gains[i]).long()
        ap = tm.retrieval_average_precision(p, t).item()
        expected = 0.0 if np.isnan(ours_ap["map"][i]) else ours_ap["map"][i]
        assert ap == pytest.approx(expected, rel=1e-6)
        differs += not np.isclose(ap, plain_ap["map"][i])
    assert differs > 0  # the convention really changes AP on these scores


def _scores_from_order(order):
    """Scores under which every rule ranks each row exactly in ``order``."""
    S = np.empty(order.shape)
    np.put_along_axis(
        S, order, -np.arange(order.shape[1], dtype=float)[None].repeat(len(order), 0), axis=1
    )
    return S


@pytest.mark.slow
def test_ranx_with_ties_is_the_package_in_numbas_quicksort_order():
    ranx = pytest.importorskip("ranx")
    numba = pytest.importorskip("numba")
    import warnings

    rng = np.random.default_rng(15)
    scores = np.round(rng.normal(size=(10, 60)), 1)  # many ties
    gains = (rng.random((10, 60)) < 0.3).astype(float)
    gains[:, 0] = 1.0
    qrels = ranx.Qrels(
        {f"q{i}": {f"d{j:03d}": 1 for j in np.flatnonzero(gains[i])} for i in range(10)}
    )
    run = ranx.Run(
        {f"q{i}": {f"d{j:03d}": float(scores[i, j]) for j in range(60)} for i in range(10)}
    )
    names = ["precision@5", "recall@5", "ndcg@5", "mrr", "map"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = ranx.evaluate(qrels, run, names, threads=1)
    argsort = numba.njit(lambda a: np.argsort(a))  # ranx sorts the negated scores this way
    order = np.stack([argsort(-row) for row in scores])
    ours = ranking_metrics(_scores_from_order(order), gains, (5,))
    for name in names:
        assert ours[name] == pytest.approx(theirs[name], rel=1e-12), name


def test_torchmetrics_with_ties_is_the_package_in_torchs_order():
    tm = pytest.importorskip("torchmetrics.functional.retrieval")
    import torch

    rng = np.random.default_rng(16)
    scores = np.round(rng.normal(size=(8, 50)), 1).astype(np.float32)
    gains = (rng.random((8, 50)) < 0.3).astype(float)
    gains[:, 0] = 1.0
    positive = gains * (scores > 0)
    for i in range(8):
        p, t = torch.tensor(scores[i]), torch.tensor(gains[i]).long()
        by_arg = _scores_from_order(torch.argsort(p, descending=True).numpy()[None])
        by_topk = _scores_from_order(p.topk(50)[1].numpy()[None])
        top5 = p.topk(5)[1].numpy()
        by_top5 = _scores_from_order(np.r_[top5, np.setdiff1d(np.arange(50), top5)][None])
        assert (
            tm.retrieval_hit_rate(p, t, top_k=1).item()
            == ranking_metrics(by_arg, gains[i : i + 1], (1,))["hit@1"]
        )
        assert tm.retrieval_precision(p, t, top_k=5).item() == pytest.approx(
            precision_at_k(by_top5, positive[i : i + 1], 5)[0], abs=1e-7
        )
        if positive[i].sum() > 0:
            rec = (
                ranking_metrics(by_arg, positive[i : i + 1], (5,))["recall@5"]
                * positive[i].sum()
                / gains[i].sum()
            )
            assert tm.retrieval_recall(p, t, top_k=5).item() == pytest.approx(rec, abs=1e-7)
            mine = ranking_metrics(by_topk, positive[i : i + 1], (5,))
            assert tm.retrieval_reciprocal_rank(p, t).item() == pytest.approx(mine["mrr"], abs=1e-7)
            assert tm.retrieval_average_precision(p, t).item() == pytest.approx(
                mine["map"], abs=1e-6
            )
