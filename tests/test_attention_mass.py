"""The attention-mass ratio with a bootstrap interval over images.

Checked against a loop that rebuilds each resample item by item with the same
multiplicities, against an index-resampling bootstrap, and on the two cases with a
known answer: uniform attention (ratio 1, no spread) and attention entirely inside the
region (ratio 1 / share).
"""

import numpy as np
import pytest

import repeval_ref as R


def _data(n=60, grid=(6, 6), lean=0.0, seed=0):
    rng = np.random.default_rng(seed)
    masks = rng.random((n,) + grid) < 0.25
    masks[:, 0, 0] = True  # every region holds a token
    logits = rng.normal(size=(n,) + grid) + lean * masks
    att = np.exp(logits)
    return att / att.sum(axis=(1, 2), keepdims=True), masks


def test_ratio_and_interval_match_a_loop_over_the_same_resamples():
    att, masks = _data(lean=0.8)
    n, n_boot = len(att), 300
    ratio, lo, hi = R.attention_mass_ratio(att, masks, n_boot, np.random.default_rng(5))
    mass = [float(np.sum(att[i][masks[i]])) for i in range(n)]
    share = [float(np.mean(masks[i])) for i in range(n)]
    assert ratio == pytest.approx(np.mean(mass) / np.mean(share), rel=1e-12)
    counts = np.random.default_rng(5).multinomial(n, np.full(n, 1 / n), size=n_boot)
    values = []
    for w in counts:
        picked = [i for i in range(n) for _ in range(w[i])]  # the resample, image by image
        values.append(np.mean([mass[i] for i in picked]) / np.mean([share[i] for i in picked]))
    assert (lo, hi) == pytest.approx(tuple(np.percentile(values, [2.5, 97.5])), rel=1e-12)


def test_interval_close_to_an_index_bootstrap():
    att, masks = _data(n=200, lean=0.5, seed=1)
    _, lo, hi = R.attention_mass_ratio(att, masks, 4000, 0)
    mass = (att * masks).sum(axis=(1, 2))
    share = masks.mean(axis=(1, 2))
    idx = np.random.default_rng(9).integers(0, 200, size=(4000, 200))
    ref = np.percentile(mass[idx].mean(axis=1) / share[idx].mean(axis=1), [2.5, 97.5])
    assert lo == pytest.approx(ref[0], abs=0.03) and hi == pytest.approx(ref[1], abs=0.03)


def test_uniform_attention_gives_one_without_spread():
    _, masks = _data()
    uniform = np.full(masks.shape, 1 / 36)
    assert R.attention_mass_ratio(uniform, masks, 200, 0) == pytest.approx(
        (1.0, 1.0, 1.0), rel=1e-12
    )


def test_attention_inside_the_region_gives_one_over_the_share():
    _, masks = _data(n=30)
    inside = masks / masks.sum(axis=(1, 2), keepdims=True)
    ratio, lo, hi = R.attention_mass_ratio(inside, masks, 500, 0)
    assert ratio == pytest.approx(1 / masks.mean())
    assert lo <= ratio <= hi and lo > 1


def test_a_lean_towards_the_region_is_detected_and_no_lean_is_not():
    # attention drawn independently of the region: true ratio 1, so the 95 % interval
    # should contain 1 about 95 times in 100; with a lean it should (almost) never
    null = [R.attention_mass_ratio(*_data(n=150, lean=0.0, seed=s), 400, s) for s in range(100)]
    covered = np.mean([lo < 1 < hi for _, lo, hi in null])
    assert 0.88 <= covered <= 1.0
    lean = [R.attention_mass_ratio(*_data(n=150, lean=1.0, seed=s), 400, s) for s in range(20)]
    assert all(lo > 1 for _, lo, _ in lean)


def test_flat_token_layout_gives_the_same_numbers():
    att, masks = _data()
    assert R.attention_mass_ratio(att, masks, 100, 0) == R.attention_mass_ratio(
        att.reshape(60, -1), masks.reshape(60, -1), 100, 0
    )


@pytest.mark.parametrize(
    ("change", "name"),
    [
        (lambda a, m: (a[:, :5], m), "masks"),
        (lambda a, m: (-a, m), "attention"),
        (lambda a, m: (2 * a, m), "attention"),
        (lambda a, m: (a, m * 2), "masks"),
        (lambda a, m: (a, np.zeros_like(m)), "masks"),
        (lambda a, m: (a[0], m[0]), "attention"),
        (lambda a, m: (np.where(a > 0.05, np.nan, a), m), "attention"),
    ],
)
def test_bad_input_names_the_argument(change, name):
    att, masks = change(*_data())
    with pytest.raises(ValueError, match=name):
        R.attention_mass_ratio(att, masks, 10, 0)
