"""Tests of repeval_ref.attentive: the attentive probe forward pass."""

import numpy as np
import pytest
import torch

from repeval_ref import attentive_probe


def make_params(seed=0, B=3, T=7, d=8, K=5, scale=1.0):
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(B, T, d)) * scale
    q = rng.normal(size=d)
    Wk, Wv, Wo = (rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(3))
    W_cls = rng.normal(size=(d, K))
    return H, q, Wk, Wv, Wo, W_cls


def loop_reference(tokens_all, query, key_w, value_w, out_w, cls_w, heads, skip):
    """Explicit double loop over images and heads, straight from the definition."""
    B, T, d = tokens_all.shape
    dk = d // heads
    logits = np.zeros((B, cls_w.shape[1]))
    A = np.zeros((B, heads, T - skip))
    for b in range(B):
        tokens = tokens_all[b, skip:]
        keys, values = tokens @ key_w, tokens @ value_w
        o = np.zeros(d)
        for j in range(heads):
            cols = slice(j * dk, (j + 1) * dk)
            s = keys[:, cols] @ query[cols] / np.sqrt(dk)
            w = np.exp(s - s.max())
            w /= w.sum()
            A[b, j] = w
            o[cols] = values[:, cols].T @ w
        logits[b] = cls_w.T @ (out_w.T @ o)
    return logits, A


@pytest.mark.parametrize("n_heads,n_prefix", [(1, 0), (2, 1), (4, 0), (8, 3)])
def test_matches_double_loop(n_heads, n_prefix):
    params = make_params(seed=n_heads)
    logits, A = attentive_probe(*params, n_heads=n_heads, n_prefix=n_prefix)
    ref_logits, ref_A = loop_reference(*params, heads=n_heads, skip=n_prefix)
    assert logits.shape == (3, 5) and A.shape == (3, n_heads, 7 - n_prefix)
    assert logits.dtype == np.float64 and A.dtype == np.float64
    np.testing.assert_allclose(logits, ref_logits, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(A, ref_A, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n_heads", [1, 2, 4])
def test_matches_torch_scaled_dot_product_attention(n_heads):
    params = make_params(seed=10 + n_heads, B=4, T=9, d=12, K=3)
    H, q, Wk, Wv, Wo, W_cls = params
    n_prefix = 2
    logits, A = attentive_probe(*params, n_heads=n_heads, n_prefix=n_prefix)
    Ht = torch.tensor(H[:, n_prefix:])
    B, T, d = Ht.shape
    dk = d // n_heads
    keys = (Ht @ torch.tensor(Wk)).reshape(B, T, n_heads, dk).transpose(1, 2)  # (B, h, T, dk)
    values = (Ht @ torch.tensor(Wv)).reshape(B, T, n_heads, dk).transpose(1, 2)
    query = torch.tensor(q).reshape(1, n_heads, 1, dk).expand(B, n_heads, 1, dk)
    out = torch.nn.functional.scaled_dot_product_attention(query, keys, values)  # (B, h, 1, dk)
    o = out.squeeze(2).reshape(B, d)
    ref_logits = (o @ torch.tensor(Wo) @ torch.tensor(W_cls)).numpy()
    ref_A = torch.softmax(query @ keys.transpose(-1, -2) / dk**0.5, dim=-1).squeeze(2).numpy()
    np.testing.assert_allclose(logits, ref_logits, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(A, ref_A, rtol=1e-10, atol=1e-12)


def test_attention_rows_are_distributions():
    params = make_params(seed=5, B=6, T=11, d=12)
    _, A = attentive_probe(*params, n_heads=3, n_prefix=1)
    assert np.all(A >= 0)
    np.testing.assert_allclose(A.sum(axis=-1), 1.0, atol=1e-12)


def test_prefix_tokens_are_dropped():
    H, q, Wk, Wv, Wo, W_cls = make_params(seed=6)
    logits, A = attentive_probe(H, q, Wk, Wv, Wo, W_cls, 2, n_prefix=2)
    H2 = H.copy()
    H2[:, :2] = np.random.default_rng(7).normal(size=H2[:, :2].shape) * 100
    logits2, A2 = attentive_probe(H2, q, Wk, Wv, Wo, W_cls, 2, n_prefix=2)
    np.testing.assert_array_equal(logits, logits2)
    np.testing.assert_array_equal(A, A2)
    # and equals running on the remaining tokens without a prefix
    logits3, A3 = attentive_probe(H[:, 2:], q, Wk, Wv, Wo, W_cls, 2)
    np.testing.assert_allclose(logits, logits3, atol=1e-14)
    np.testing.assert_allclose(A, A3, atol=1e-15)
    # whereas changing a kept token does change the output
    H2[:, 3] += 1.0
    assert not np.allclose(attentive_probe(H2, q, Wk, Wv, Wo, W_cls, 2, n_prefix=2)[0], logits)


def test_zero_keys_give_mean_pooling():
    H, q, _, Wv, Wo, W_cls = make_params(seed=8, T=5)
    d = H.shape[2]
    logits, A = attentive_probe(H, q, np.zeros((d, d)), Wv, Wo, W_cls, n_heads=1)
    np.testing.assert_allclose(A, 1.0 / 5)
    np.testing.assert_allclose(logits, H.mean(axis=1) @ Wv @ Wo @ W_cls, atol=1e-12)


def test_huge_scores_stay_finite():
    H, q, Wk, Wv, Wo, W_cls = make_params(seed=9, d=4)
    d = H.shape[2]
    # keys = H, query chosen so that the scores reach about 1e4 and beyond
    q = np.full(d, 1e4)
    logits, A = attentive_probe(H * 10, q, np.eye(d), Wv, Wo, W_cls, n_heads=1)
    assert np.abs(H * 10 @ q).max() / np.sqrt(d) > 1e4
    assert np.all(np.isfinite(logits)) and np.all(np.isfinite(A))
    np.testing.assert_allclose(A.sum(axis=-1), 1.0)
    # the softmax is saturated: one-hot on the highest-scoring token
    top = np.argmax(H @ q, axis=1)
    np.testing.assert_allclose(A[:, 0, :], np.eye(H.shape[1])[top], atol=1e-12)


def test_permuting_tokens_permutes_attention_only():
    H, q, Wk, Wv, Wo, W_cls = make_params(seed=10, T=9, d=8)
    perm = np.random.default_rng(11).permutation(9)
    logits, A = attentive_probe(H, q, Wk, Wv, Wo, W_cls, 4)
    logits_p, A_p = attentive_probe(H[:, perm], q, Wk, Wv, Wo, W_cls, 4)
    np.testing.assert_allclose(logits_p, logits, atol=1e-12)
    np.testing.assert_allclose(A_p, A[:, :, perm], atol=1e-15)


def test_head_split_uses_contiguous_column_blocks():
    # zeroing the query piece of head 1 makes only that head uniform
    H, q, Wk, Wv, Wo, W_cls = make_params(seed=12, d=8, T=6)
    q = q.copy()
    q[4:8] = 0.0
    _, A = attentive_probe(H, q, Wk, Wv, Wo, W_cls, n_heads=2)
    np.testing.assert_allclose(A[:, 1], 1.0 / 6)
    assert np.abs(A[:, 0] - 1.0 / 6).max() > 1e-3


def test_inputs_not_mutated():
    params = make_params(seed=13)
    copies = [p.copy() for p in params]
    attentive_probe(*params, 2, 1)
    for p, c in zip(params, copies):
        np.testing.assert_array_equal(p, c)


def test_bad_inputs():
    H, q, Wk, Wv, Wo, W_cls = make_params(d=8, T=7)
    with pytest.raises(ValueError, match="n_heads"):
        attentive_probe(H, q, Wk, Wv, Wo, W_cls, 3)
    with pytest.raises(ValueError, match="n_heads"):
        attentive_probe(H, q, Wk, Wv, Wo, W_cls, 0)
    with pytest.raises(TypeError, match="n_heads"):
        attentive_probe(H, q, Wk, Wv, Wo, W_cls, 2.5)
    with pytest.raises(ValueError, match="n_prefix"):
        attentive_probe(H, q, Wk, Wv, Wo, W_cls, 2, n_prefix=-1)
    with pytest.raises(ValueError, match="n_prefix"):
        attentive_probe(H, q, Wk, Wv, Wo, W_cls, 2, n_prefix=7)
    with pytest.raises(ValueError, match="H"):
        attentive_probe(H[0], q, Wk, Wv, Wo, W_cls, 2)
    with pytest.raises(ValueError, match="q"):
        attentive_probe(H, q[:4], Wk, Wv, Wo, W_cls, 2)
    with pytest.raises(ValueError, match="Wk"):
        attentive_probe(H, q, Wk[:4], Wv, Wo, W_cls, 2)
    with pytest.raises(ValueError, match="Wv"):
        attentive_probe(H, q, Wk, Wv[:, :4], Wo, W_cls, 2)
    with pytest.raises(ValueError, match="Wo"):
        attentive_probe(H, q, Wk, Wv, Wo[None], W_cls, 2)
    with pytest.raises(ValueError, match="W_cls"):
        attentive_probe(H, q, Wk, Wv, Wo, W_cls[:4], 2)
    Hn = H.copy()
    Hn[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="H"):
        attentive_probe(Hn, q, Wk, Wv, Wo, W_cls, 2)
    qn = q.copy()
    qn[0] = np.inf
    with pytest.raises(ValueError, match="q"):
        attentive_probe(H, qn, Wk, Wv, Wo, W_cls, 2)
    with pytest.raises(ValueError, match="H"):
        attentive_probe(np.zeros((2, 0, 8)), q, Wk, Wv, Wo, W_cls, 2)


def test_overflowing_products_raise_instead_of_nan():
    """Finite but huge inputs (1e200) overflow the scores: a ValueError, never NaN logits."""
    H, q, Wk, Wv, Wo, W_cls = make_params(d=8, T=7)
    with pytest.raises(ValueError, match="scores overflow"):
        attentive_probe(H * 1e200, q * 1e200, Wk, Wv, Wo, W_cls, 2)
    with pytest.raises(ValueError, match="logits overflow"):
        attentive_probe(H, q, Wk, Wv * 1e200, Wo * 1e200, W_cls, 2)
    # Large scores that fit in float64 are fine: the softmax subtracts the row maximum.
    logits, A = attentive_probe(H * 1e100, q * 1e100, Wk, Wv, Wo, W_cls, 2)
    assert np.all(np.isfinite(A)) and np.all(np.isfinite(logits))
    np.testing.assert_allclose(A.sum(axis=-1), 1.0)
