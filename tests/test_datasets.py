"""Tests of repeval_ref.datasets: determinism, shapes, the geometric facts each
generator promises, and the protocol orderings the book's setups are built for
(seed 000: toy geometries, rankings that flip, exercise setups; seed 001: textures).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import signal, stats

from repeval_ref import datasets as ds


def centred_effective_rank(H):
    """exp(entropy of sigma / sum(sigma)) of the centred matrix, computed here with numpy."""
    s = np.linalg.svd(H - H.mean(axis=0), compute_uv=False)
    p = s / s.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


# Every generator, called small; each returns a tuple/dict of arrays.
GENERATORS = {
    "disk_and_ring": lambda rng: ds.disk_and_ring(50, rng),
    "long_blobs": lambda rng: ds.long_blobs(50, rng),
    "toy_clustered": lambda rng: ds.toy_geometry("clustered", 50, rng),
    "toy_collapsed": lambda rng: ds.toy_geometry("collapsed", 50, rng),
    "synthetic_encoders": lambda rng: ds.synthetic_encoders(rng, n_train=30, n_test=20),
    "texture_images": lambda rng: ds.texture_images(2, rng),
    "linear_probe_setup": lambda rng: ds.linear_probe_setup(rng, n_train=40, n_test=30),
    "transfer_setup": lambda rng: ds.transfer_setup(rng),
    "low_shot_setup": lambda rng: ds.low_shot_setup(rng, 5, 3),
    "rank_setup_noisy_clusters": lambda rng: ds.rank_setup_noisy_clusters(rng, n=60),
    "circle_clusters": lambda rng: ds.circle_clusters(4, rng, d=5),
    "gaussian_clusters": lambda rng: ds.gaussian_clusters(4, 3, 6, rng, return_centres=True),
    "feature_transforms": lambda rng: {
        k: f(np.arange(12.0).reshape(3, 4)) for k, f in ds.feature_transforms(4, rng).items()
    },
}


def flatten(out):
    """All arrays of a generator's output, in a fixed order (dict keys sorted)."""
    if isinstance(out, dict):
        items = [out[k] for k in sorted(out)]
    else:
        items = list(out)
    arrays = []
    for item in items:
        if isinstance(item, (tuple, list, dict)):
            arrays.extend(flatten(item))
        elif isinstance(item, np.ndarray):
            arrays.append(item)
    return arrays


# ------------------------------------------------------------------ determinism
@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_same_seed_same_output_different_seed_different(name):
    make = GENERATORS[name]
    a, b = flatten(make(7)), flatten(make(np.random.default_rng(7)))
    assert len(a) == len(b) > 0
    for x, z in zip(a, b):
        assert x.dtype == z.dtype and np.array_equal(x, z)
    c = flatten(make(8))
    assert any(not np.array_equal(x, z) for x, z in zip(a, c))


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generator_is_advanced(name):
    rng = np.random.default_rng(3)
    first, second = flatten(GENERATORS[name](rng)), flatten(GENERATORS[name](rng))
    assert any(not np.array_equal(x, z) for x, z in zip(first, second))


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_dtypes_are_float64_features_and_int64_labels(name):
    for arr in flatten(GENERATORS[name](0)):
        assert arr.dtype in (np.float64, np.int64)
        assert np.all(np.isfinite(arr))


# --------------------------------------------------------------- toy geometries
def test_disk_and_ring_radii_and_uniform_area():
    X, y = ds.disk_and_ring(4001, 0)
    assert X.shape == (4001, 2) and y.shape == (4001,)
    assert np.array_equal(np.bincount(y), [2001, 2000])
    assert np.array_equal(y[:4], [0, 1, 0, 1])
    r = np.linalg.norm(X, axis=1)
    assert r[y == 0].max() <= 1.0
    assert r[y == 1].min() >= 1.5 and r[y == 1].max() <= 2.5
    # uniform in area: r^2 is uniform on [0, 1] for the disk and on [2.25, 6.25] for the ring
    assert stats.kstest(r[y == 0] ** 2, stats.uniform(0, 1).cdf).pvalue > 1e-3
    assert stats.kstest(r[y == 1] ** 2, stats.uniform(2.25, 4.0).cdf).pvalue > 1e-3
    # and the angle is uniform
    angle = np.arctan2(X[:, 1], X[:, 0])
    assert stats.kstest(angle, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 1e-3


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 300), seed=st.integers(0, 2**32 - 1))
def test_disk_and_ring_bounds_hold_for_any_seed_and_size(n, seed):
    X, y = ds.disk_and_ring(n, seed)
    r = np.linalg.norm(X, axis=1)
    assert X.shape == (n, 2) and np.array_equal(y, np.arange(n) % 2)
    assert np.all(r[y == 0] <= 1.0) and np.all((r[y == 1] >= 1.5) & (r[y == 1] <= 2.5))
    # so the gap is at least 0.5 and 1-NN within the sample is always right
    gaps = np.linalg.norm(X[y == 0][:, None] - X[y == 1][None], axis=2)
    assert gaps.size == 0 or gaps.min() >= 0.5 - 1e-12


def test_disk_and_ring_knn_reads_it_a_line_does_not():
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

    Xtr, ytr = ds.disk_and_ring(400, 1)
    Xte, yte = ds.disk_and_ring(2000, 2)
    assert KNeighborsClassifier(1).fit(Xtr, ytr).score(Xte, yte) == 1.0
    assert LogisticRegression().fit(Xtr, ytr).score(Xte, yte) < 0.7


def test_long_blobs_moments_and_bayes_accuracy():
    X, y = ds.long_blobs(20000, 0)
    assert np.array_equal(np.bincount(y), [10000, 10000])
    for c, mean0 in ((0, -0.75), (1, 0.75)):
        Xc = X[y == c]
        assert abs(Xc[:, 0].mean() - mean0) < 0.05 and abs(Xc[:, 1].mean()) < 0.2
        assert abs(Xc[:, 0].std() - 1.0) < 0.05 and abs(Xc[:, 1].std() - 4.0) < 0.15
    bayes = ds.long_blobs_bayes_accuracy()
    assert isinstance(bayes, float)
    assert bayes == pytest.approx(0.5 * (1 + math.erf(0.75 / math.sqrt(2))), abs=1e-12)
    assert round(bayes, 3) == 0.773
    # the Bayes rule thresholds axis 0 at zero; its empirical accuracy matches
    assert np.mean((X[:, 0] > 0) == (y == 1)) == pytest.approx(bayes, abs=0.01)


def test_long_blobs_linear_beats_one_nn():
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

    Xtr, ytr = ds.long_blobs(400, 3)
    Xte, yte = ds.long_blobs(2000, 4)
    linear = LogisticRegression().fit(Xtr, ytr).score(Xte, yte)
    one_nn = KNeighborsClassifier(1).fit(Xtr, ytr).score(Xte, yte)
    assert linear > one_nn + 0.03
    assert linear <= ds.long_blobs_bayes_accuracy() + 0.03


@pytest.mark.parametrize("name", ds.TOY_GEOMETRIES)
def test_toy_geometry_shapes_and_balance(name):
    X, y = ds.toy_geometry(name, 301, 5)
    assert X.shape == (301, 2) and X.dtype == np.float64 and y.dtype == np.int64
    assert np.array_equal(np.bincount(y), [151, 150])


def test_toy_geometry_delegates_to_named_generators():
    for name, fn in (("disk_and_ring", ds.disk_and_ring), ("long_blobs", ds.long_blobs)):
        a, b = ds.toy_geometry(name, 40, 9), fn(40, 9)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_collapsed_geometry_has_lower_effective_rank_than_clustered():
    Xc, _ = ds.toy_geometry("clustered", 400, 0)
    Xk, yk = ds.toy_geometry("collapsed", 400, 0)
    er_clustered, er_collapsed = centred_effective_rank(Xc), centred_effective_rank(Xk)
    assert er_clustered == pytest.approx(2.0, abs=0.05)
    assert er_collapsed == pytest.approx(1.1, abs=0.05)
    # the package's RankMe (centred, as in the simulation) agrees with the numpy formula
    from repeval_ref import rankme

    assert rankme(Xc, center=True, eps=0.0) == pytest.approx(er_clustered, rel=1e-9)
    assert rankme(Xk, center=True, eps=0.0) == pytest.approx(er_collapsed, rel=1e-9)


def test_collapsed_geometry_caps_every_classifier():
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

    Xtr, ytr = ds.toy_geometry("clustered", 400, 1)
    Xte, yte = ds.toy_geometry("clustered", 2000, 2)
    assert LogisticRegression().fit(Xtr, ytr).score(Xte, yte) > 0.97
    assert KNeighborsClassifier(5).fit(Xtr, ytr).score(Xte, yte) > 0.97
    Xtr, ytr = ds.toy_geometry("collapsed", 400, 1)
    Xte, yte = ds.toy_geometry("collapsed", 2000, 2)
    # two of the four blobs (one per class) overlap: at most about 3/4 is reachable
    assert KNeighborsClassifier(25).fit(Xtr, ytr).score(Xte, yte) < 0.8
    assert LogisticRegression().fit(Xtr, ytr).score(Xte, yte) < 0.8


# ------------------------------------------------------------ rankings that flip
def test_synthetic_encoders_shapes():
    out = ds.synthetic_encoders(0, n_train=53, n_test=27)
    assert set(out) == {"clustered", "spread", "collapsed"}
    for name, d in (("clustered", 16), ("spread", 64), ("collapsed", 3)):
        tr, ytr, te, yte = out[name]
        assert tr.shape == (53, d) and te.shape == (27, d)
        assert np.array_equal(ytr, np.arange(53) % 10) and np.array_equal(yte, np.arange(27) % 10)
    # collapsed = clustered times one fixed 16 x 3 matrix with orthonormal columns
    P, *_ = np.linalg.lstsq(out["clustered"][0], out["collapsed"][0], rcond=None)
    assert np.allclose(P.T @ P, np.eye(3), atol=1e-10)
    assert np.allclose(out["clustered"][2] @ P, out["collapsed"][2], atol=1e-10)


@pytest.mark.slow
def test_synthetic_encoder_rankings_flip():
    """The orderings of seed 000's table: k-NN, linear probe, MLP probe and effective rank."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    from repeval_ref import knn_classify, rankme

    out = ds.synthetic_encoders(0, n_train=800, n_test=400)
    knn, linear, mlp, erank = {}, {}, {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for name, (tr, ytr, te, yte) in out.items():
            knn[name] = np.mean(knn_classify(tr, ytr, te, 20, 0.07, 10) == yte)
            scaler = StandardScaler().fit(tr)
            ztr, zte = scaler.transform(tr), scaler.transform(te)
            linear[name] = LogisticRegression(max_iter=300).fit(ztr, ytr).score(zte, yte)
            erank[name] = rankme(tr, center=True)
            if name != "collapsed":
                mlp[name] = (
                    MLPClassifier((32,), max_iter=200, random_state=0).fit(ztr, ytr).score(zte, yte)
                )
    assert knn["clustered"] > knn["collapsed"] > knn["spread"] > 0.1
    assert linear["clustered"] > linear["spread"] > linear["collapsed"]
    assert mlp["spread"] > max(mlp["clustered"], linear["clustered"], knn["clustered"])
    assert mlp["spread"] > 0.95
    assert erank["spread"] > erank["clustered"] > erank["collapsed"]
    assert 2.5 < erank["collapsed"] <= 3.0 + 1e-9
    assert 0.75 < knn["clustered"] < 0.95 and 0.75 < linear["clustered"] < 0.95


def test_spread_encoder_sign_block_is_linearly_invisible():
    """Within a class the sign-flipped block averages to ~0; its absolute value does not."""
    tr, ytr, _, _ = ds.synthetic_encoders(1, n_train=4000, n_test=10)["spread"]
    block = tr[:, 16:32]
    class_means = np.stack([block[ytr == c].mean(0) for c in range(10)])
    abs_means = np.stack([np.abs(block[ytr == c]).mean(0) for c in range(10)])
    row_norm = np.linalg.norm(block, axis=1).mean()
    assert np.linalg.norm(class_means, axis=1).max() < 0.15 * row_norm
    # |.| per class differs between classes by about as much as a coordinate's size
    assert abs_means.std(axis=0).mean() > 0.5
    assert tr[:, 32:].std() == pytest.approx(5.5, rel=0.05)


# --------------------------------------------------------------------- textures
def test_texture_images_shapes_and_values():
    images, labels = ds.texture_images(3, 0)
    assert images.shape == (12, 32, 32) and labels.shape == (12,)
    assert np.array_equal(labels, np.repeat(np.arange(4), 3))
    assert ds.TEXTURE_CLASSES == ("disk", "ring", "bar", "cross")
    # background 0.3-0.5 plus noise 0.05: the median pixel sits in that band
    med = np.median(images.reshape(12, -1), axis=1)
    assert np.all((med > 0.2) & (med < 0.6))
    # elements add 0.2-0.6 of contrast: every image has bright pixels above its median
    assert np.all(images.reshape(12, -1).max(axis=1) > med + 0.15)


def test_texture_elements_have_the_promised_shapes():
    # one noiseless element of each kind, through the private mask helper
    disk = ds.textures._element_mask(0, 15.0, 15.0, 3.0, 0.0)
    ring = ds.textures._element_mask(1, 15.0, 15.0, 3.0, 0.0)
    bar = ds.textures._element_mask(2, 15.0, 15.0, 3.0, 0.0)
    cross = ds.textures._element_mask(3, 15.0, 15.0, 3.0, 0.0)
    assert disk.sum() == np.sum(np.hypot(*np.indices((32, 32)) - 15.0) <= 3.0) == 29
    assert ring.sum() < disk.sum() and not ring[15, 15] and disk[15, 15]
    assert np.all(disk[ring])  # a ring is the rim of the disk of the same size
    # angle 0: a horizontal bar 7 pixels long (|dx| <= 3) and 1 pixel thick (|dy| <= 0.7)
    assert bar.sum() == 7 and np.all(bar[15, 12:19])
    # a cross adds the vertical arm: 7 + 7 - 1 shared pixel
    assert cross.sum() == 13 and np.all(cross[12:19, 15]) and np.array_equal(cross, cross.T)
    tilted = ds.textures._element_mask(2, 15.0, 15.0, 3.0, np.pi / 4)
    assert tilted[13, 13] and tilted[17, 17] and not tilted[15, 12]


def test_random_filter_features_match_scipy_correlation():
    images, _ = ds.texture_images(2, 1)
    original = images.copy()
    feats = ds.random_filter_features(images)
    assert feats.shape == (8, 32) and feats.dtype == np.float64
    assert np.all(feats >= 0) and np.all(feats.max(axis=0) > 0)
    assert np.array_equal(images, original)  # not modified
    # independent computation: the same filter bank, scipy's valid cross-correlation
    W = np.random.default_rng(1000).standard_normal((32, 5, 5))
    W -= W.mean(axis=(1, 2), keepdims=True)
    W /= np.linalg.norm(W.reshape(32, -1), axis=1)[:, None, None]
    expect = np.array(
        [
            [np.maximum(signal.correlate2d(img, w, mode="valid"), 0).mean() for w in W]
            for img in images
        ]
    )
    assert np.allclose(feats, expect, rtol=1e-10, atol=1e-12)
    # chunking changes nothing; another seed is another encoder
    assert np.allclose(ds.random_filter_features(images, chunk=3), feats, rtol=1e-12, atol=1e-14)
    assert not np.allclose(ds.random_filter_features(images, seed=1001), feats)
    assert ds.random_filter_features(images, n_filters=7, size=3).shape == (8, 7)


def test_texture_features_carry_the_classes():
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    tr_img, ytr = ds.texture_images(25, 0)
    te_img, yte = ds.texture_images(50, 1)
    ftr, fte = ds.random_filter_features(tr_img), ds.random_filter_features(te_img)
    scaler = StandardScaler().fit(ftr)
    acc = (
        LogisticRegression(max_iter=2000)
        .fit(scaler.transform(ftr), ytr)
        .score(scaler.transform(fte), yte)
    )
    assert 0.5 < acc < 1.0  # far above chance 0.25, not trivial


def affine_parts(f, d):
    """Matrix A and offset b with f(F) = F A + b, read off the basis vectors."""
    b = f(np.zeros((1, d)))[0]
    A = f(np.eye(d)) - b
    return A, b


def test_feature_transforms_are_the_promised_invertible_maps():
    d = 6
    maps = ds.feature_transforms(d, 104)
    assert set(maps) == {"rotation", "scale", "translation", "diagonal", "dense"}
    F = np.random.default_rng(0).normal(size=(9, d))
    F0 = F.copy()
    for name, f in maps.items():
        G = f(F)
        assert G.shape == F.shape and G.dtype == np.float64
        A, b = affine_parts(f, d)
        assert np.allclose(G, F @ A + b, atol=1e-10)
        # invertible: recover F from G exactly
        assert np.allclose(np.linalg.solve(A.T, (G - b).T).T, F, atol=1e-8)
        if name != "translation":
            assert np.allclose(b, 0)
        sv = np.linalg.svd(A, compute_uv=False)
        if name == "rotation":
            assert np.allclose(A.T @ A, np.eye(d), atol=1e-12)
        elif name == "scale":
            assert np.allclose(A, 10 * np.eye(d))
        elif name == "translation":
            assert np.allclose(A, np.eye(d)) and np.abs(b).max() < 0.05 * 5
        elif name == "diagonal":
            assert np.allclose(A, np.diag(np.diag(A)))
            assert np.all((np.diag(A) >= 1e-2) & (np.diag(A) <= 1e2))
        else:
            assert sv.min() >= 0.1 - 1e-12 and sv.max() <= 10 + 1e-9
            assert np.count_nonzero(np.abs(A) > 1e-8) == d * d
    assert np.array_equal(F, F0)
    # deterministic in the seed
    again = ds.feature_transforms(d, 104)
    assert all(np.array_equal(again[k](F), maps[k](F)) for k in maps)
    assert not np.allclose(ds.feature_transforms(d, 105)["dense"](F), maps["dense"](F))


def test_feature_transforms_statistics_over_many_coordinates():
    maps = ds.feature_transforms(400, 1)
    _, shift = affine_parts(maps["translation"], 400)
    assert shift.std() == pytest.approx(0.05, rel=0.15)
    log_diag = np.log10(maps["diagonal"](np.ones((1, 400)))[0])
    assert stats.kstest(log_diag, stats.uniform(-2, 4).cdf).pvalue > 1e-3


def test_feature_transforms_in_one_dimension():
    maps = ds.feature_transforms(1, 0)
    F = np.array([[2.0], [-3.0]])
    assert np.allclose(np.abs(maps["rotation"](F)), np.abs(F))
    assert np.allclose(maps["scale"](F), 10 * F)


def test_linear_probe_grid_is_read_only():
    with pytest.raises(ValueError):
        ds.LINEAR_PROBE_CS[0] = 1.0


def test_feature_transforms_reject_wrong_width():
    f = ds.feature_transforms(4, 0)["dense"]
    with pytest.raises(ValueError, match="F"):
        f(np.ones((3, 5)))
    with pytest.raises(ValueError, match="F"):
        f(np.array([[np.nan, 0, 0, 0]]))


# ----------------------------------------------------------------- exercise setups
LINEAR_PROBE_CS_EXPECTED = 10.0 ** (np.arange(13) / 2 - 4)


def test_linear_probe_setup_shapes_scales_and_camera():
    tr, ytr, te, yte = ds.linear_probe_setup(0)
    assert tr.shape == (800, 20) and te.shape == (600, 20)
    assert np.array_equal(np.bincount(ytr), [200] * 4) and np.array_equal(
        np.bincount(yte), [150] * 4
    )
    sd = tr.std(axis=0)
    assert sd.max() / sd.min() > 100  # coordinates on very different scales
    ratio = te.std(axis=0) / sd
    assert np.allclose(ratio[8:], 1, atol=0.15)  # pure-noise channels unchanged
    assert np.all(ratio[4:8] > 2.0)  # sensor channels read with a different gain
    assert np.all(
        np.abs(LINEAR_PROBE_CS_EXPECTED - ds.LINEAR_PROBE_CS) < 1e-12 * ds.LINEAR_PROBE_CS
    )


def test_linear_probe_setup_rewards_tuning_on_the_test_set():
    from repeval_ref.linear_probe import probe_accuracy_grid

    tr, ytr, te, yte = ds.linear_probe_setup(0)
    Cs = ds.LINEAR_PROBE_CS
    # validation accuracies of the honest recipe and test accuracies of the refit, per C
    val_acc, test_acc = probe_accuracy_grid(tr, ytr, te, yte, Cs, seed=0)
    honest = int(np.argmax(val_acc))  # first best C on the validation split
    tuned = int(np.argmax(test_acc))  # what tuning on the test set would pick
    assert Cs[tuned] < Cs[honest]  # the shifted camera favours stronger regularisation
    assert test_acc[tuned] - test_acc[honest] >= 0.03  # optimism of a few points
    assert 0.6 < test_acc[honest] < 0.9
    # the validation split itself prefers a weaker penalty than the test set does
    assert val_acc[honest] > val_acc[tuned]


def test_transfer_setup_geometry():
    S = ds.transfer_setup(0)
    X, y, Bs, vs = S["X"], S["y"], S["B_star"], S["v_star"]
    assert X.shape == (24, 20) and y.shape == (24,) and Bs.shape == (3, 20) and vs.shape == (3,)
    assert S["B0"].shape == (3, 20) and S["v0"].shape == (3,) and S["X_ood"].shape[1] == 20
    assert np.linalg.matrix_rank(X) == 8
    assert np.linalg.matrix_rank(S["X_ood"]) == 20
    assert np.allclose(Bs @ Bs.T, np.eye(3), atol=1e-12)
    assert np.allclose(y, X @ Bs.T @ vs)
    assert 0 < np.linalg.norm(S["B0"] - Bs) < 0.3
    assert np.linalg.norm(S["v0"]) < 0.1
    # every true feature is half inside the ID span, half outside it
    P = np.linalg.pinv(X) @ X  # projector onto the row space of X
    assert np.allclose(np.linalg.norm(Bs @ P, axis=1) ** 2, 0.5, atol=1e-10)
    assert isinstance(S["lr"], float) and isinstance(S["steps"], int)


def test_transfer_setup_reproduces_feature_distortion_ordering():
    from repeval_ref import transfer
    from repeval_ref.lpft_theory import prediction_error

    S = ds.transfer_setup(0)
    res = transfer(S["X"], S["y"], S["B0"], S["v0"], S["lr"], S["steps"])
    err = {
        m: (
            prediction_error(v, B, S["X"], S["v_star"], S["B_star"]),
            prediction_error(v, B, S["X_ood"], S["v_star"], S["B_star"]),
        )
        for m, (v, B) in res.items()
    }
    assert 1e-4 < err["lp"][0] < 5e-2
    assert err["ft"][0] < 1e-20 and err["lpft"][0] < 1e-20
    assert err["lpft"][1] < err["lp"][1] < err["ft"][1]
    assert err["ft"][1] > 3 * err["lp"][1]
    assert 0.05 < err["ft"][1] < 0.5


def test_low_shot_setup_shapes_and_curve():
    from repeval_ref import low_shot_eval

    tr, ytr, te, yte = ds.low_shot_setup(0)
    assert tr.shape == (400, 12) and te.shape == (200, 12)
    assert np.array_equal(ytr, np.repeat(np.arange(10), 40)) and np.array_equal(
        yte, np.repeat(np.arange(10), 20)
    )
    res = {k: low_shot_eval(tr, ytr, te, yte, k, 30, np.random.default_rng(3)) for k in (1, 5, 20)}
    means = [res[k][0] for k in (1, 5, 20)]
    sds = [res[k][1] for k in (1, 5, 20)]
    assert means[0] < means[1] < means[2]
    assert sds[0] > sds[1] > sds[2]
    assert 0.35 < means[0] < 0.6 and 0.55 < means[1] < 0.8 and 0.7 < means[2] < 0.9
    assert sds[0] > 0.04


def test_low_shot_centres_are_orthonormal():
    tr, ytr, _, _ = ds.low_shot_setup(0, n_train_per_class=3000, n_test_per_class=1)
    means = np.stack([tr[ytr == c].mean(0) for c in range(10)])
    assert np.allclose(means @ means.T, np.eye(10), atol=0.1)


def test_rank_setup_respects_the_floor_and_climbs_with_rank():
    from repeval_ref import rank_bound

    H, y = ds.rank_setup_noisy_clusters(0)
    assert H.shape == (2000, 20) and y.shape == (2000,)
    counts = np.bincount(y, minlength=10)
    assert len(set(counts)) > 1  # unequal class sizes
    rng = np.random.default_rng(1)
    acc = {}
    for r in (1, 4, 8):
        Hr = ds.random_projection(H, r, rng)
        assert Hr.shape == (2000, r) and np.linalg.matrix_rank(Hr) == r
        residual, floor = rank_bound(Hr, y, 10)
        assert floor == np.sort(counts)[: max(10 - r - 1, 0)].sum()
        assert residual >= floor - 1e-6
        Z = np.column_stack([np.ones(len(Hr)), Hr])
        W, *_ = np.linalg.lstsq(Z, np.eye(10)[y], rcond=None)
        acc[r] = np.mean((Z @ W).argmax(axis=1) == y)
    assert acc[1] < 0.35 and acc[8] > 0.97 and acc[1] < acc[4] < acc[8]


def test_circle_clusters_rank_two_and_perfect_nearest_centre():
    H, y, centres = ds.circle_clusters(30, 0, d=16)
    assert H.shape == (300, 16) and centres.shape == (10, 16)
    assert np.array_equal(y, np.repeat(np.arange(10), 30))
    assert np.linalg.matrix_rank(H) == 2
    assert np.allclose(np.linalg.norm(centres, axis=1), 1.0)
    scores = H @ centres.T - 0.5 * np.sum(centres**2, axis=1)
    assert np.array_equal(scores.argmax(axis=1), y)
    H2, _, c2 = ds.circle_clusters(5, 0, n_classes=4, radius=3.0, spread=0.0)
    assert np.allclose(c2, [[3, 0], [0, 3], [-3, 0], [0, -3]], atol=1e-12)
    assert np.allclose(H2, c2[np.repeat(np.arange(4), 5)])


@settings(max_examples=25, deadline=None)
@given(
    n_classes=st.integers(3, 24),
    d=st.integers(2, 12),
    seed=st.integers(0, 2**32 - 1),
    radius=st.floats(0.1, 100.0),
)
def test_circle_clusters_always_rank_two_and_separable(n_classes, d, seed, radius):
    H, y, centres = ds.circle_clusters(3, seed, n_classes=n_classes, d=d, radius=radius, spread=0.0)
    assert np.linalg.matrix_rank(H, tol=1e-9 * radius) == 2
    assert np.allclose(np.linalg.norm(centres, axis=1), radius)
    scores = H @ centres.T - 0.5 * np.sum(centres**2, axis=1)
    assert np.array_equal(scores.argmax(axis=1), y)


def test_gaussian_clusters_shapes_and_centres():
    X, y, centres = ds.gaussian_clusters(500, 3, 4, 0, spread=0.5, return_centres=True)
    assert X.shape == (1500, 4) and centres.shape == (3, 4)
    assert np.array_equal(y, np.repeat(np.arange(3), 500))
    for c in range(3):
        assert np.allclose(X[y == c].mean(0), centres[c], atol=0.1)
        assert np.allclose(X[y == c].std(0), 0.5, atol=0.05)
    X2, y2 = ds.gaussian_clusters(500, 3, 4, 0, spread=0.5)
    assert np.array_equal(X2, X) and np.array_equal(y2, y)


# ------------------------------------------------------------------- bad inputs
BAD_CALLS = [
    (lambda: ds.disk_and_ring(1, 0), ValueError, "n"),
    (lambda: ds.disk_and_ring(2.5, 0), TypeError, "n"),
    (lambda: ds.disk_and_ring(10, "seed"), TypeError, "rng"),
    (lambda: ds.long_blobs(0, 0), ValueError, "n"),
    (lambda: ds.toy_geometry("spiral", 10, 0), ValueError, "name"),
    (lambda: ds.toy_geometry(3, 10, 0), TypeError, "name"),
    (lambda: ds.toy_geometry("clustered", -1, 0), ValueError, "n"),
    (lambda: ds.synthetic_encoders(0, n_train=5), ValueError, "n_train"),
    (lambda: ds.synthetic_encoders(0, n_test=0), ValueError, "n_test"),
    (lambda: ds.synthetic_encoders(1.5), TypeError, "rng"),
    (lambda: ds.texture_images(0, 0), ValueError, "n_per_class"),
    (lambda: ds.random_filter_features(np.ones((2, 32)), 4), ValueError, "images"),
    (lambda: ds.random_filter_features(np.ones((2, 4, 4))), ValueError, "images"),
    (lambda: ds.random_filter_features(np.full((1, 8, 8), np.nan)), ValueError, "images"),
    (lambda: ds.random_filter_features(np.ones((1, 8, 8)), n_filters=0), ValueError, "n_filters"),
    (lambda: ds.random_filter_features(np.ones((1, 8, 8)), size=1), ValueError, "size"),
    (lambda: ds.random_filter_features(np.ones((1, 8, 8)), seed=1.5), TypeError, "seed"),
    (lambda: ds.random_filter_features("images"), TypeError, "images"),
    (lambda: ds.feature_transforms(0, 0), ValueError, "d"),
    (lambda: ds.feature_transforms(3, "x"), TypeError, "seed"),
    (lambda: ds.linear_probe_setup(0, n_train=10), ValueError, "n_train"),
    (lambda: ds.linear_probe_setup(0, n_test=3), ValueError, "n_test"),
    (lambda: ds.transfer_setup([1, 2]), TypeError, "rng"),
    (lambda: ds.low_shot_setup(0, 0), ValueError, "n_train_per_class"),
    (lambda: ds.low_shot_setup(0, 5, 0), ValueError, "n_test_per_class"),
    (lambda: ds.rank_setup_noisy_clusters(0, n=5), ValueError, "n"),
    (lambda: ds.rank_setup_noisy_clusters(0, n_classes=1), ValueError, "n_classes"),
    (lambda: ds.rank_setup_noisy_clusters(0, noise=0.0), ValueError, "noise"),
    (lambda: ds.rank_setup_noisy_clusters(0, noise=float("nan")), ValueError, "noise"),
    (lambda: ds.random_projection(np.ones((3, 2)), 0, 0), ValueError, "r"),
    (lambda: ds.random_projection(np.ones(3), 1, 0), ValueError, "H"),
    (lambda: ds.circle_clusters(0, 0), ValueError, "n_per_class"),
    (lambda: ds.circle_clusters(3, 0, d=1), ValueError, "d"),
    (lambda: ds.circle_clusters(3, 0, radius=0.0), ValueError, "radius"),
    (lambda: ds.circle_clusters(3, 0, spread=-0.1), ValueError, "spread"),
    (lambda: ds.circle_clusters(3, 0, n_classes=1), ValueError, "n_classes"),
    (lambda: ds.gaussian_clusters(3, 0, 2, 0), ValueError, "n_classes"),
    (lambda: ds.gaussian_clusters(3, 2, 0, 0), ValueError, "d"),
    (lambda: ds.gaussian_clusters(3, 2, 2, 0, spread=-1.0), ValueError, "spread"),
    (lambda: ds.gaussian_clusters(3, 2, 2, 0, return_centres="yes"), TypeError, "return_centres"),
]


@pytest.mark.parametrize("call,exc,argname", BAD_CALLS)
def test_bad_arguments_raise_naming_the_argument(call, exc, argname):
    with pytest.raises(exc, match=argname):
        call()


def test_exports():
    import repeval_ref

    assert repeval_ref.datasets is ds
    for name in ds.__all__:
        assert hasattr(ds, name)
