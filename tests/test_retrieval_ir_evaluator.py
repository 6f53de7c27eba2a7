"""repeval_ref.ir_evaluator_metrics: sentence-transformers' conventions, checked three ways.

* where the conventions agree with trec_eval's (accuracy@k = hit@k, precision@k, recall@k,
  nDCG@k), against :func:`repeval_ref.ranking_metrics`;
* MRR@k and MAP@k against a loop written from the evaluator's documented definitions;
* against ranx, whose ``mrr@k`` is the same and whose ``map@k`` divides by ``R`` instead of
  ``min(k, R)``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import repeval_ref as rr


def toy(seed, n_q=12, n_c=40, d=6, max_rel=15):
    rng = np.random.default_rng(seed)
    Q, C = rng.normal(size=(n_q, d)), rng.normal(size=(n_c, d))
    queries = {f"q{i}": Q[i] for i in range(n_q)}
    corpus = {f"d{j:03d}": C[j] for j in range(n_c)}
    relevant = {
        f"q{i}": {f"d{j:03d}" for j in rng.choice(n_c, rng.integers(1, max_rel), replace=False)}
        for i in range(n_q)
    }
    return queries, corpus, relevant, Q, C


def cosine(Q, C):
    return (Q / np.linalg.norm(Q, axis=1, keepdims=True)) @ (
        C / np.linalg.norm(C, axis=1, keepdims=True)
    ).T


def loop_reference(scores, relevant_idx, k_mrr, k_map):
    """MRR@k and MAP@k query by query, as the evaluator defines them."""
    mrr, ap = [], []
    for s, rel in zip(scores, relevant_idx):
        ranked = sorted(range(len(s)), key=lambda j: -s[j])
        rr_q = 0.0
        for pos, j in enumerate(ranked[:k_mrr]):
            if j in rel:
                rr_q = 1.0 / (pos + 1)
                break
        mrr.append(rr_q)
        correct, total = 0, 0.0
        for pos, j in enumerate(ranked[:k_map]):
            if j in rel:
                correct += 1
                total += correct / (pos + 1)
        ap.append(total / min(k_map, len(rel)))
    return float(np.mean(mrr)), float(np.mean(ap))


@pytest.mark.parametrize("seed", range(6))
def test_shared_conventions_match_ranking_metrics(seed):
    queries, corpus, relevant, Q, C = toy(seed)
    ks = (1, 3, 5, 10)
    got = rr.ir_evaluator_metrics(
        queries, corpus, relevant, accuracy_at_k=ks, precision_recall_at_k=ks, ndcg_at_k=ks
    )
    rel = np.array(
        [
            [f"d{j:03d}" in relevant[f"q{i}"] for j in range(len(corpus))]
            for i in range(len(queries))
        ],
        dtype=float,
    )
    ref = rr.ranking_metrics(cosine(Q, C), rel, ks=ks)
    for k in ks:
        assert got[f"accuracy@{k}"] == pytest.approx(ref[f"hit@{k}"], abs=1e-12)
        assert got[f"precision@{k}"] == pytest.approx(ref[f"precision@{k}"], abs=1e-12)
        assert got[f"recall@{k}"] == pytest.approx(ref[f"recall@{k}"], abs=1e-12)
        assert got[f"ndcg@{k}"] == pytest.approx(ref[f"ndcg@{k}"], abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 3, 10, 100])
def test_truncated_mrr_and_map_match_a_loop(seed, k):
    queries, corpus, relevant, Q, C = toy(seed)
    got = rr.ir_evaluator_metrics(queries, corpus, relevant, mrr_at_k=(k,), map_at_k=(k,))
    idx = [{int(d[1:]) for d in relevant[f"q{i}"]} for i in range(len(queries))]
    mrr, ap = loop_reference(cosine(Q, C), idx, k, k)
    assert got[f"mrr@{k}"] == pytest.approx(mrr, abs=1e-12)
    assert got[f"map@{k}"] == pytest.approx(ap, abs=1e-12)


@pytest.mark.slow
def test_against_ranx():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import ranx
    queries, corpus, relevant, Q, C = toy(11, n_q=10, n_c=60, max_rel=20)
    S = cosine(Q, C)
    qrels = ranx.Qrels({q: {d: 1 for d in docs} for q, docs in relevant.items()})
    run = ranx.Run(
        {
            f"q{i}": {f"d{j:03d}": float(S[i, j]) for j in range(S.shape[1])}
            for i in range(S.shape[0])
        }
    )
    k = 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_q = {
            m: ranx.evaluate(qrels, run, m, return_mean=False, threads=1)
            for m in (f"mrr@{k}", f"map@{k}")
        }
    got = rr.ir_evaluator_metrics(queries, corpus, relevant, mrr_at_k=(k,), map_at_k=(k,))
    assert got[f"mrr@{k}"] == pytest.approx(float(np.mean(per_q[f"mrr@{k}"])), abs=1e-12)
    # ranx's own order; a Qrels has no __iter__, so a plain loop would index it by 0, 1, ...
    qids = qrels.keys()
    R = np.array([len(relevant[q]) for q in qids])
    rescaled = per_q[f"map@{k}"] * R / np.minimum(k, R)  # ranx divides by R
    assert got[f"map@{k}"] == pytest.approx(float(np.mean(rescaled)), abs=1e-12)
    assert (R > k).any()  # the two conventions differ here


def test_queries_without_relevant_documents_are_left_out_and_absent_ids_count_in_R():
    queries = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0]}
    corpus = {"x": [1.0, 0.1], "y": [0.1, 1.0]}
    relevant = {"a": {"x", "ghost"}, "b": set()}  # "c" is not listed, "b" has nothing
    got = rr.ir_evaluator_metrics(
        queries,
        corpus,
        relevant,
        accuracy_at_k=(1,),
        precision_recall_at_k=(1, 2),
        mrr_at_k=(1,),
        ndcg_at_k=(2,),
        map_at_k=(2,),
    )
    assert got["accuracy@1"] == 1.0 and got["mrr@1"] == 1.0
    assert got["recall@2"] == 0.5  # "ghost" can never be retrieved
    assert got["precision@2"] == 0.5
    assert got["map@2"] == pytest.approx(0.5)  # 1 / min(2, R=2)
    assert got["ndcg@2"] == pytest.approx(1.0 / (1.0 + 1.0 / np.log2(3)))


def test_equal_scores_keep_the_corpus_order():
    queries = {"q": [1.0, 0.0]}
    corpus = {name: [1.0, 0.0] for name in ("d2", "d0", "d1")}  # every score ties
    first = rr.ir_evaluator_metrics(queries, corpus, {"q": {"d2"}}, mrr_at_k=(3,))["mrr@3"]
    last = rr.ir_evaluator_metrics(queries, corpus, {"q": {"d1"}}, mrr_at_k=(3,))["mrr@3"]
    assert first == 1.0 and last == pytest.approx(1 / 3)


def test_dot_and_cosine_differ_on_vectors_of_different_length():
    queries = {"q": [1.0, 0.0]}
    corpus = {"near": [1.0, 0.05], "long": [3.0, 3.0]}
    relevant = {"q": {"near"}}
    assert rr.ir_evaluator_metrics(queries, corpus, relevant, mrr_at_k=(2,))["mrr@2"] == 1.0
    assert (
        rr.ir_evaluator_metrics(queries, corpus, relevant, similarity="dot", mrr_at_k=(2,))["mrr@2"]
        == 0.5
    )


def _valid():
    return dict(
        queries={"q0": [1.0, 0.0], "q1": [0.0, 1.0]},
        corpus={"d0": [1.0, 0.2], "d1": [0.3, 1.0], "d2": [1.0, 1.0]},
        relevant_docs={"q0": {"d0"}, "q1": ["d1", "d2"]},
    )


@pytest.mark.parametrize(
    "arg, value, match",
    [
        ("queries", {}, "queries"),
        ("queries", [[1.0, 0.0]], "queries"),
        ("corpus", {"d0": [1.0, 0.0, 0.0]}, "corpus"),
        ("corpus", {"d0": [1.0, 0.0], "d1": [1.0]}, "corpus"),
        ("corpus", {"d0": [np.nan, 0.0]}, "corpus"),
        ("queries", {"q0": [0.0, 0.0]}, "queries"),
        ("relevant_docs", {"q9": {"d0"}}, "relevant_docs"),
        ("relevant_docs", [("q0", "d0")], "relevant_docs"),
        ("relevant_docs", {"q0": "d0"}, "relevant_docs"),
        ("similarity", "euclidean", "similarity"),
        ("map_at_k", (), "map_at_k"),
        ("mrr_at_k", (0,), "mrr_at_k"),
        ("ndcg_at_k", (2.5,), "ndcg_at_k"),
        ("accuracy_at_k", "abc", "accuracy_at_k"),
    ],
)
def test_bad_input_names_the_argument(arg, value, match):
    args = _valid()
    args[arg] = value
    with pytest.raises((ValueError, TypeError), match=match):
        rr.ir_evaluator_metrics(**args)


def test_valid_call_runs():
    out = rr.ir_evaluator_metrics(**_valid())
    assert set(out) >= {"accuracy@1", "precision@3", "recall@10", "mrr@10", "ndcg@10", "map@100"}
