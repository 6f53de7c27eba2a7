"""Hypothesis property tests of the core formula functions: shapes, dtypes, ranges, validation.

Random shapes and dtypes go in; the output shapes, dtypes and ranges are checked
(and that nothing comes out NaN). Random bad values go in; a ``ValueError`` naming the
argument comes out. The exact semantics are tested against independent computations
in each module's own test file; these tests check what must hold for every input.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import repeval_ref as R

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

seeds = st.integers(0, 2**32 - 1)
float_dtypes = st.sampled_from([np.float64, np.float32, np.int64])


def _features(rng, n, d, dtype, scale=1.0):
    """Features with no zero row, in the requested dtype (integers are small whole numbers)."""
    if np.issubdtype(dtype, np.integer):
        X = rng.integers(-3, 4, size=(n, d))
        X[np.all(X == 0, axis=1), 0] = 1
        return X.astype(dtype)
    X = rng.normal(size=(n, d)) * scale
    X[np.all(X == 0, axis=1), 0] = 1.0
    return X.astype(dtype)


def _is_py_float(x):
    return type(x) is float and np.isfinite(x)


# ----------------------------------------------------------------------------- shapes, dtypes,
# ranges


@FAST
@given(
    seed=seeds,
    n_train=st.integers(1, 40),
    n_test=st.integers(1, 15),
    d=st.integers(1, 6),
    K=st.integers(1, 5),
    k=st.integers(1, 60),
    log_tau=st.floats(-4, 4),
    dtype=float_dtypes,
    block=st.integers(1, 20),
)
def test_knn_classify_shapes_and_range(seed, n_train, n_test, d, K, k, log_tau, dtype, block):
    rng = np.random.default_rng(seed)
    tr, te = _features(rng, n_train, d, dtype), _features(rng, n_test, d, dtype)
    y = rng.integers(0, K, n_train)
    pred = R.knn_classify(tr, y, te, k, 10.0**log_tau, K)
    assert pred.shape == (n_test,) and pred.dtype == np.int64
    assert set(pred.tolist()) <= set(y.tolist())  # only labels of neighbours can win
    # the block size never changes the predictions
    assert np.array_equal(R.knn_classify(tr, y, te, k, 10.0**log_tau, K, block_size=block), pred)


@FAST
@given(
    seed=seeds,
    B=st.integers(1, 4),
    T=st.integers(1, 7),
    dk=st.integers(1, 4),
    h=st.integers(1, 4),
    K=st.integers(1, 5),
    data=st.data(),
    log_scale=st.floats(-2, 6),
)
def test_attentive_probe_shapes_and_simplex(seed, B, T, dk, h, K, data, log_scale):
    rng = np.random.default_rng(seed)
    d = dk * h
    n_prefix = data.draw(st.integers(0, T - 1))
    H = rng.normal(size=(B, T, d)) * 10.0**log_scale
    logits, A = R.attentive_probe(
        H,
        rng.normal(size=d),
        rng.normal(size=(d, d)),
        rng.normal(size=(d, d)),
        rng.normal(size=(d, d)),
        rng.normal(size=(d, K)),
        h,
        n_prefix,
    )
    assert logits.shape == (B, K) and A.shape == (B, h, T - n_prefix)
    assert np.all(np.isfinite(logits)) and np.all(A >= 0)
    np.testing.assert_allclose(A.sum(axis=-1), 1.0, rtol=1e-12)


@FAST
@given(
    seed=seeds,
    K=st.integers(2, 4),
    per_class=st.integers(2, 8),
    d=st.integers(4, 6),
    n_test=st.integers(1, 10),
    n_draws=st.integers(2, 5),
    data=st.data(),
    dtype=float_dtypes,
)
def test_low_shot_eval_range(seed, K, per_class, d, n_test, n_draws, data, dtype):
    rng = np.random.default_rng(seed)
    n_per_class = data.draw(st.integers(1, per_class))
    tr = rng.normal(size=(K * per_class, d)) + 3 * np.eye(K, d)[np.repeat(np.arange(K), per_class)]
    y = np.repeat(np.arange(K), per_class)
    te = _features(rng, n_test, d, np.float64)
    mean, std = R.low_shot_eval(
        tr.astype(dtype) if dtype != np.int64 else tr,
        y,
        te.astype(np.float64),
        rng.integers(0, K, n_test),
        n_per_class,
        n_draws,
        rng,
    )
    assert _is_py_float(mean) and _is_py_float(std)
    assert 0.0 <= mean <= 1.0 and std >= 0.0


@FAST
@given(
    seed=seeds,
    n=st.integers(1, 20),
    d=st.integers(1, 8),
    K=st.integers(1, 4),
    m=st.integers(1, 6),
    lam=st.sampled_from([0.0, 1e-8, 1e-2, 1.0, 1e3]),
    bias=st.booleans(),
    dtype=float_dtypes,
)
def test_ridge_probe_shapes(seed, n, d, K, m, lam, bias, dtype):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, K, n)
    S = R.ridge_probe(_features(rng, n, d, dtype), y, _features(rng, m, d, dtype), lam, bias)
    assert S.shape == (m, int(y.max()) + 1) and S.dtype == np.float64
    assert np.all(np.isfinite(S))


@FAST
@given(
    seed=seeds,
    n=st.integers(6, 25),
    d=st.integers(1, 4),
    K=st.integers(2, 4),
    lams=st.lists(st.sampled_from([1e-6, 1e-3, 0.1, 1.0, 10.0, 1e4]), min_size=1, max_size=6),
)
def test_ridge_loo_shapes_and_choice(seed, n, d, K, lams):
    rng = np.random.default_rng(seed)
    best, press = R.ridge_loo(rng.normal(size=(n, d)), rng.integers(0, K, n), lams)
    assert type(best) is float and best in lams
    assert press.shape == (len(lams),) and press.dtype == np.float64 and np.all(press >= 0)
    assert best == lams[int(np.flatnonzero(press == press.min())[0])]  # the first minimum


@FAST
@given(n=st.integers(1, 10**6), frac=st.floats(0, 1), z=st.floats(0.01, 5))
def test_wilson_interval_contains_the_estimate(n, frac, z):
    k = int(round(frac * n))
    lo, hi = R.wilson_interval(k, n, z)
    assert type(lo) is float and type(hi) is float
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    assert (lo == 0.0) == (k == 0) and (hi == 1.0) == (k == n)


@FAST
@given(seed=seeds, n=st.integers(1, 60), dtype=st.sampled_from([bool, np.int64, np.float64]))
def test_mcnemar_range_and_symmetry(seed, n, dtype):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 2, n).astype(dtype), rng.integers(0, 2, n).astype(dtype)
    p = R.mcnemar_exact(a, b)
    assert type(p) is float and 0.0 < p <= 1.0
    assert p == R.mcnemar_exact(b, a)


@FAST
@given(seed=seeds, n=st.integers(1, 60), n_boot=st.integers(1, 200), level=st.floats(0.01, 0.99))
def test_paired_bootstrap_ranges(seed, n, n_boot, level):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 2, n), rng.integers(0, 2, n)
    gain, lo, hi = R.paired_bootstrap_ci(a, b, n_boot, rng, level)
    assert all(type(v) is float for v in (gain, lo, hi))
    assert gain == pytest.approx(b.mean() - a.mean(), abs=1e-15)
    assert -1.0 <= lo <= hi <= 1.0


@FAST
@given(
    seed=seeds,
    n=st.integers(1, 30),
    d=st.integers(1, 10),
    center=st.booleans(),
    log_scale=st.floats(-30, 30),
    dtype=float_dtypes,
)
def test_rankme_range(seed, n, d, center, log_scale, dtype):
    rng = np.random.default_rng(seed)
    Z = _features(rng, n, d, dtype, 10.0**log_scale if dtype != np.int64 else 1.0)
    assume(not center or n >= 2)
    try:
        r = R.rankme(Z, center=center)
    except ValueError as exc:  # only an all-constant matrix after centring may fail
        assert center and "singular values zero" in str(exc)
        return
    assert _is_py_float(r) and 1.0 - 1e-6 <= r <= min(n, d) * (1 + 1e-5)


@FAST
@given(
    seed=seeds,
    n=st.integers(3, 60),
    d=st.integers(1, 20),
    log_scale=st.floats(-5, 5),
    offset=st.floats(-1e3, 1e3),
)
def test_two_nn_positive(seed, n, d, log_scale, offset):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 10.0**log_scale + offset
    r = R.two_nn_id(X)
    assert _is_py_float(r) and r > 0


@FAST
@given(
    seed=seeds,
    nq=st.integers(1, 10),
    nc=st.integers(1, 20),
    d=st.integers(1, 5),
    K=st.integers(1, 4),
    ks=st.lists(st.integers(1, 25), min_size=1, max_size=4, unique=True),
    dtype=float_dtypes,
)
def test_retrieval_metrics_ranges(seed, nq, nc, d, K, ks, dtype):
    rng = np.random.default_rng(seed)
    qy, cy = rng.integers(0, K, nq), rng.integers(0, K, nc)
    assume(np.isin(qy, cy).any())
    out = R.retrieval_metrics(
        _features(rng, nq, d, dtype), qy, _features(rng, nc, d, dtype), cy, ks
    )
    assert set(out) == {f"{m}@{k}" for m in ("recall", "hit", "ndcg") for k in ks} | {"mrr", "map"}
    assert all(type(v) is float and 0.0 <= v <= 1.0 + 1e-12 for v in out.values())
    for k in ks:
        assert out[f"recall@{k}"] <= out[f"hit@{k}"] + 1e-12
    for k1, k2 in zip(sorted(ks), sorted(ks)[1:]):
        assert out[f"recall@{k1}"] <= out[f"recall@{k2}"] + 1e-12
        assert out[f"hit@{k1}"] <= out[f"hit@{k2}"] + 1e-12
    if 1 in ks:
        assert out["mrr"] >= out["hit@1"] - 1e-12


@FAST
@given(
    seed=seeds, n=st.integers(2, 30), p=st.integers(1, 6), q=st.integers(1, 6), dtype=float_dtypes
)
def test_linear_cka_range_and_symmetry(seed, n, p, q, dtype):
    rng = np.random.default_rng(seed)
    X, Y = _features(rng, n, p, dtype), _features(rng, n, q, dtype)
    assume(np.ptp(X, axis=0).max() > 0 and np.ptp(Y, axis=0).max() > 0)
    c = R.linear_cka(X, Y)
    assert type(c) is float and 0.0 <= c <= 1.0
    assert c == pytest.approx(R.linear_cka(Y, X), rel=1e-9, abs=1e-12)
    assert R.linear_cka(X, X) == pytest.approx(1.0)


@FAST
@given(seed=seeds, d=st.integers(1, 6), K=st.integers(1, 5), m=st.integers(1, 5))
def test_fold_batchnorm_same_logits(seed, d, K, m):
    rng = np.random.default_rng(seed)
    W, b, mu, s = (
        rng.normal(size=(d, K)),
        rng.normal(size=K),
        rng.normal(size=d),
        rng.uniform(0.1, 3, d),
    )
    Wf, bf = R.fold_batchnorm(W, b, mu, s)
    assert Wf.shape == (d, K) and bf.shape == (K,)
    h = rng.normal(size=(m, d))
    np.testing.assert_allclose(h @ Wf + bf, ((h - mu) / s) @ W + b, rtol=1e-10, atol=1e-10)


@FAST
@given(
    seed=seeds, n=st.integers(1, 40), d=st.integers(1, 6), r=st.integers(1, 6), K=st.integers(1, 8)
)
def test_rank_bound_residual_above_floor(seed, n, d, r, K):
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(n, min(r, d))) @ rng.normal(size=(min(r, d), d))
    residual, floor = R.rank_bound(H, rng.integers(0, K, n), K)
    assert type(residual) is float and type(floor) is int
    assert 0 <= floor <= n and residual >= floor - 1e-8 * max(1, n)


@FAST
@given(
    seed=seeds,
    n=st.integers(1, 12),
    d=st.integers(1, 6),
    dp=st.integers(1, 4),
    steps=st.integers(0, 20),
)
def test_transfer_shapes(seed, n, d, dp, steps):
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(n, d)), rng.normal(size=n)
    B0, v0 = rng.normal(size=(dp, d)), rng.normal(size=dp)
    out = R.transfer(X, y, B0, v0, 1e-3, steps)
    assert set(out) == {"lp", "ft", "lpft"}
    for v, B in out.values():
        assert v.shape == (dp,) and B.shape == (dp, d) and np.all(np.isfinite(B))
    np.testing.assert_array_equal(out["lp"][1], B0)  # linear probing never moves the features


# ----------------------------------------------------------------------------- random bad values


def _valid_calls(rng):
    """One valid call per function, as (function name, kwargs, names of float arrays)."""
    n, d = 12, 4
    y3 = np.arange(n) % 3
    tr, te = rng.normal(size=(n, d)) + 0.1, rng.normal(size=(5, d)) + 0.1
    return [
        (
            "knn_classify",
            dict(train_h=tr, train_y=y3, test_h=te, k=3, tau=0.1, n_classes=3),
            ["train_h", "test_h"],
        ),
        (
            "low_shot_eval",
            dict(
                train_h=tr,
                train_y=y3,
                test_h=te,
                test_y=np.arange(5) % 3,
                n_per_class=2,
                n_draws=2,
                rng=rng,
            ),
            ["train_h", "test_h"],
        ),
        ("ridge_probe", dict(train_h=tr, train_y=y3, test_h=te, lam=0.1), ["train_h", "test_h"]),
        ("ridge_loo", dict(train_h=tr, train_y=y3, lams=np.array([0.1, 1.0])), ["train_h", "lams"]),
        ("rank_bound", dict(H=tr, y=y3, n_classes=3), ["H"]),
        (
            "fold_batchnorm",
            dict(W=rng.normal(size=(d, 3)), b=np.zeros(3), mu=np.zeros(d), s=np.ones(d)),
            ["W", "b", "mu", "s"],
        ),
        (
            "attentive_probe",
            dict(
                H=rng.normal(size=(2, 3, d)),
                q=np.ones(d),
                Wk=np.eye(d),
                Wv=np.eye(d),
                Wo=np.eye(d),
                W_cls=np.ones((d, 2)),
                n_heads=2,
            ),
            ["H", "q", "Wk", "Wv", "Wo", "W_cls"],
        ),
        (
            "transfer",
            dict(X=tr, y=np.ones(n), B0=np.ones((2, d)), v0=np.ones(2), lr=1e-3, steps=2),
            ["X", "y", "B0", "v0"],
        ),
        ("rankme", dict(Z=tr), ["Z"]),
        ("two_nn_id", dict(X=tr), ["X"]),
        (
            "retrieval_metrics",
            dict(query_h=te, query_y=np.arange(5) % 3, corpus_h=tr, corpus_y=y3),
            ["query_h", "corpus_h"],
        ),
        ("linear_cka", dict(X=tr, Y=tr[:, :2] ** 2), ["X", "Y"]),
    ]


@FAST
@given(
    seed=seeds,
    which=st.integers(0, 11),
    bad=st.sampled_from([np.nan, np.inf, -np.inf]),
    data=st.data(),
)
def test_random_nonfinite_entry_raises_naming_the_argument(seed, which, bad, data):
    rng = np.random.default_rng(seed)
    name, kwargs, float_args = _valid_calls(rng)[which]
    arg = data.draw(st.sampled_from(float_args))
    value = np.array(kwargs[arg], dtype=np.float64)
    value.flat[data.draw(st.integers(0, value.size - 1))] = bad
    kwargs[arg] = value
    with pytest.raises(ValueError, match=arg):
        getattr(R, name)(**kwargs)


@FAST
@given(seed=seeds, k=st.integers(-10, 0), tau=st.floats(-1e3, 0), n_classes=st.integers(-5, 0))
def test_knn_random_bad_scalars(seed, k, tau, n_classes):
    rng = np.random.default_rng(seed)
    _, kwargs, _ = _valid_calls(rng)[0]
    for arg, value in (("k", k), ("tau", tau), ("n_classes", n_classes)):
        bad = dict(kwargs, **{arg: value})
        with pytest.raises(ValueError, match=arg):
            R.knn_classify(**bad)


@FAST
@given(
    level=st.one_of(
        st.floats(max_value=0.0, allow_nan=False), st.floats(min_value=1.0, allow_nan=False)
    ),
    seed=seeds,
)
def test_bootstrap_random_bad_level(level, seed):
    rng = np.random.default_rng(seed)
    with pytest.raises(ValueError, match="level"):
        R.paired_bootstrap_ci(rng.integers(0, 2, 10), rng.integers(0, 2, 10), 10, rng, level)


@FAST
@given(
    n=st.integers(-5, 50), k=st.integers(-5, 60), z=st.floats(allow_nan=True, allow_infinity=True)
)
def test_wilson_random_arguments(n, k, z):
    good = n >= 1 and 0 <= k <= n and np.isfinite(z) and z > 0
    if good:
        lo, hi = R.wilson_interval(k, n, z)
        assert 0.0 <= lo <= hi <= 1.0
    else:
        with pytest.raises(ValueError):
            R.wilson_interval(k, n, z)


@FAST
@given(seed=seeds, d=st.integers(1, 6), data=st.data())
def test_fold_batchnorm_random_nonpositive_scale(seed, d, data):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.5, 2, d)
    s[data.draw(st.integers(0, d - 1))] = data.draw(
        st.floats(max_value=0.0, allow_nan=False, allow_infinity=False)
    )
    with pytest.raises(ValueError, match="s"):
        R.fold_batchnorm(rng.normal(size=(d, 2)), np.zeros(2), np.zeros(d), s)


@FAST
@given(seed=seeds, d=st.integers(1, 12), h=st.integers(1, 12), T=st.integers(1, 5), data=st.data())
def test_attentive_random_head_and_prefix_validation(seed, d, h, T, data):
    rng = np.random.default_rng(seed)
    n_prefix = data.draw(st.integers(0, T + 2))
    args = (
        rng.normal(size=(1, T, d)),
        rng.normal(size=d),
        np.eye(d),
        np.eye(d),
        np.eye(d),
        np.ones((d, 2)),
    )
    if d % h:
        with pytest.raises(ValueError, match="n_heads"):
            R.attentive_probe(*args, h, n_prefix)
    elif n_prefix >= T:
        with pytest.raises(ValueError, match="n_prefix"):
            R.attentive_probe(*args, h, n_prefix)
    else:
        logits, A = R.attentive_probe(*args, h, n_prefix)
        assert A.shape == (1, h, T - n_prefix)


@FAST
@given(
    seed=seeds,
    per_class=st.integers(1, 6),
    n_per_class=st.integers(-3, 10),
    n_draws=st.integers(-2, 4),
)
def test_low_shot_random_counts(seed, per_class, n_per_class, n_draws):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], per_class)
    tr = rng.normal(size=(2 * per_class, 3)) + 0.1
    args = (tr, y, tr, y)
    if n_per_class < 1 or n_per_class > per_class:
        with pytest.raises(ValueError, match="n_per_class"):
            R.low_shot_eval(*args, n_per_class, max(n_draws, 2), rng)
    elif n_draws < 2:
        with pytest.raises(ValueError, match="n_draws"):
            R.low_shot_eval(*args, n_per_class, n_draws, rng)
    else:
        mean, std = R.low_shot_eval(*args, n_per_class, n_draws, rng)
        assert 0.0 <= mean <= 1.0 and std >= 0.0


# ----------------------------------------------------------------------------- scale invariance


@FAST
@given(seed=seeds, log_scale=st.floats(-300, 300), n=st.integers(4, 20), d=st.integers(1, 5))
def test_cosine_functions_ignore_the_scale_of_the_features(seed, log_scale, n, d):
    # Regression (audit): the unit normalisation computed sum(x^2), which underflowed
    # to 0 below about 1e-154 (a spurious "zero vector" error) and overflowed above
    # about 1e154 (every feature became 0). Cosine-based functions and TwoNN are scale
    # invariant, at every representable scale.
    rng = np.random.default_rng(seed)
    tr, te = rng.normal(size=(n, d)) + 0.1, rng.normal(size=(5, d)) + 0.1
    y, yt = np.arange(n) % 2, np.arange(5) % 2
    s = 10.0**log_scale
    assert np.array_equal(
        R.knn_classify(tr * s, y, te * s, 3, 0.1, 2), R.knn_classify(tr, y, te, 3, 0.1, 2)
    )
    a = R.retrieval_metrics(te * s, yt, tr * s, y, ks=(1, 3))
    b = R.retrieval_metrics(te, yt, tr, y, ks=(1, 3))
    assert a == pytest.approx(b, rel=1e-9)
    a = R.low_shot_eval(tr * s, y, te * s, yt, 1, 2, np.random.default_rng(0))
    b = R.low_shot_eval(tr, y, te, yt, 1, 2, np.random.default_rng(0))
    assert a == pytest.approx(b, rel=1e-9, abs=1e-12)
    assert R.rank_bound(tr * s, y, 2)[0] == pytest.approx(R.rank_bound(tr, y, 2)[0], rel=1e-7)
