"""The artifact-token check can fail: it flags a planted high-norm token and passes a clean ViT.

* ``TinyViT.forward_tokens(x, pre_norm=True)`` reads the residual stream before the final
  LayerNorm; the default output is unchanged, bit for bit.
* A TinyViT with one planted high-norm patch token (by surgery on its position
  embedding, or by a hook that adds a large vector to one token after an intermediate
  block) is flagged by :func:`repeval_ref.high_norm_tokens` on the pre-norm tokens, at
  exactly the planted position; the same model without the plant is not.
* The old measurement, after the final LayerNorm, cannot flag the planted token: a
  LayerNorm gives every token the same norm before its affine map, so the ratio to the
  median is at most ``max|gamma| / min|gamma|`` (with zero bias) whatever the tokens.
* The floor-1 functions agree with a brute-force loop, are scale-invariant per image and
  reject bad input.
"""

import numpy as np
import pytest
import torch

import repeval_ref as R
from repeval_ref.artifacts import ARTIFACT_RATIO
from repeval_ref.torch import TinyViT

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PLANTED = 5  # patch index of the planted token (token 1 + PLANTED)


def _model(seed=0):
    torch.manual_seed(seed)
    return TinyViT(image_size=28, patch_size=7, dim=32, depth=4, heads=4).eval()


def _images(n=40, seed=1):
    return torch.rand(n, 1, 28, 28, generator=torch.Generator().manual_seed(seed))


def _patch_norms(model, x, pre_norm):
    with torch.no_grad():
        return model.forward_tokens(x, pre_norm=pre_norm)[:, 1:].norm(dim=-1).double().numpy()


def _plant_in_position_embedding(model, scale=60.0):
    """Weight surgery: a large fixed vector in the planted patch's position embedding."""
    direction = torch.randn(model.out_dim, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        model.pos_embed[0, 1 + PLANTED] += scale * direction / direction.norm()
    return model


def _plant_by_hook(model, block=1, scale=60.0):
    """A hook that adds a large vector to the planted token after an intermediate block."""
    direction = torch.randn(model.out_dim, generator=torch.Generator().manual_seed(8))
    vector = scale * direction / direction.norm()

    def hook(_module, _inputs, out):
        out = out.clone()
        out[:, 1 + PLANTED] += vector
        return out

    return model.blocks[block].register_forward_hook(hook)


# ------------------------------------------------------------------------ the pre-norm reading


def test_default_output_is_unchanged_bit_for_bit():
    model, x = _model(), _images(8)
    with torch.no_grad():
        t = model.tokens(x)
        for block in model.blocks:
            t = block(t)
        by_hand = model.norm(t)
        assert torch.equal(model.forward_tokens(x), by_hand)
        assert torch.equal(model.forward_tokens(x, pre_norm=False), by_hand)
        assert torch.equal(model(x), by_hand[:, 0])
        pre = model.forward_tokens(x, pre_norm=True)
        assert torch.equal(pre, t)
        assert torch.equal(model.norm(pre), model.forward_tokens(x))


@pytest.mark.parametrize("bad", [1, 0, "yes", None])
def test_pre_norm_must_be_a_bool(bad):
    with pytest.raises(TypeError, match="pre_norm"):
        _model().forward_tokens(_images(2), pre_norm=bad)


# ------------------------------------------------------------------ planted token vs clean model


def test_clean_model_is_not_flagged():
    norms = _patch_norms(_model(), _images(), pre_norm=True)
    assert not R.high_norm_tokens(norms).any()
    assert R.token_norm_ratios(norms).max() < 2.0  # far from the cut, not just under it


def test_planted_token_in_the_position_embedding_is_flagged_where_it_was_planted():
    model, x = _plant_in_position_embedding(_model()), _images()
    flags = R.high_norm_tokens(_patch_norms(model, x, pre_norm=True))
    assert flags[:, PLANTED].all()  # every image, at the planted patch
    assert flags.sum() == len(x)  # and nowhere else


@pytest.mark.parametrize("block", [0, 1, 2])
def test_planted_token_added_inside_the_network_is_flagged(block):
    model, x = _model(), _images()
    handle = _plant_by_hook(model, block)
    try:
        flags = R.high_norm_tokens(_patch_norms(model, x, pre_norm=True))
    finally:
        handle.remove()
    assert flags[:, PLANTED].all() and flags.sum() == len(x)
    # the hook is gone: the same model is clean again
    assert not R.high_norm_tokens(_patch_norms(model, x, pre_norm=True)).any()


def test_a_weak_plant_below_the_cut_is_not_flagged():
    # the check is a threshold, not a detector of any change: twice the median passes
    model, x = _model(), _images()
    median = np.median(_patch_norms(model, x, pre_norm=True))
    norms = _patch_norms(_plant_in_position_embedding(model, scale=float(median)), x, pre_norm=True)
    assert R.token_norm_ratios(norms)[:, PLANTED].min() > 1.1  # the plant is there ...
    assert not R.high_norm_tokens(norms).any()  # ... but well below the cut


# --------------------------------------- the measurement after the final LayerNorm cannot fail


def test_after_the_final_layernorm_the_planted_token_is_invisible():
    model, x = _plant_in_position_embedding(_model()), _images()
    post = _patch_norms(model, x, pre_norm=False)
    assert not R.high_norm_tokens(post).any()
    # default LayerNorm (weight 1, bias 0): every token has norm sqrt(d v / (v + eps))
    np.testing.assert_allclose(R.token_norm_ratios(post), 1.0, atol=1e-3)


def test_after_a_layernorm_the_ratio_is_bounded_by_its_affine_weights():
    # whatever the tokens (even one 1000 times the others), the post-norm ratio stays below
    # max|gamma| / min|gamma|, so a cut at 4 can never fire when the weights spread less
    model, x = _plant_in_position_embedding(_model(), scale=6000.0), _images()
    gamma = torch.empty(model.out_dim).uniform_(
        0.5, 1.5, generator=torch.Generator().manual_seed(3)
    )
    with torch.no_grad():
        model.norm.weight.copy_(gamma)
    bound = float(gamma.abs().max() / gamma.abs().min())
    pre = R.token_norm_ratios(_patch_norms(model, x, pre_norm=True))
    post = R.token_norm_ratios(_patch_norms(model, x, pre_norm=False))
    assert pre[:, PLANTED].min() > 100
    assert post.max() <= bound * (1 + 1e-6) and bound < ARTIFACT_RATIO
    assert not R.high_norm_tokens(post).any() and R.high_norm_tokens(pre)[:, PLANTED].all()


# ------------------------------------------------------------------------ the floor-1 functions


def test_ratios_and_flags_match_a_loop():
    rng = np.random.default_rng(0)
    norms = rng.gamma(20.0, 1.0, size=(30, 17))
    norms[rng.random(norms.shape) < 0.03] *= rng.uniform(2, 12)
    ratios, flags = R.token_norm_ratios(norms), R.high_norm_tokens(norms, threshold=3.0)
    for i in range(norms.shape[0]):
        row = sorted(norms[i])
        median = row[len(row) // 2]  # odd length: the middle value
        for j in range(norms.shape[1]):
            assert ratios[i, j] == pytest.approx(norms[i, j] / median, rel=1e-12)
            assert flags[i, j] == (norms[i, j] > 3.0 * median)
    assert flags.any() and not flags.all()
    assert np.array_equal(R.high_norm_tokens(norms), ratios > ARTIFACT_RATIO)


def test_flags_do_not_depend_on_each_images_scale():
    rng = np.random.default_rng(1)
    norms = rng.gamma(5.0, 1.0, size=(12, 9))
    norms[3, 4] *= 20
    scaled = norms * rng.uniform(0.01, 100.0, size=(12, 1))
    assert np.array_equal(R.high_norm_tokens(norms), R.high_norm_tokens(scaled))
    assert R.high_norm_tokens(norms)[3, 4]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(norms=np.ones(5)), "norms"),
        (dict(norms=np.ones((2, 3, 4))), "norms"),
        (dict(norms=-np.ones((2, 3))), "norms"),
        (dict(norms=np.array([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])), "norms"),
        (dict(norms=np.array([[np.nan, 1.0, 1.0]])), "norms"),
        (dict(norms=np.ones((2, 3)), threshold=1.0), "threshold"),
        (dict(norms=np.ones((2, 3)), threshold=0.5), "threshold"),
        (dict(norms=np.ones((2, 3)), threshold=np.inf), "threshold"),
    ],
)
def test_bad_input_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        R.high_norm_tokens(**kwargs)
