"""Partial fine-tuning and layer-wise decay groups (repeval_ref.torch.finetune, book/lpft.md)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch
from torch import nn

import repeval_ref as R
from repeval_ref.torch.finetune import freeze_all_but_last, layerwise_lr_groups, parameter_layers
from repeval_ref.torch.models import TinyViT

DEPTH = 3


def _model(seed=0):
    torch.manual_seed(seed)
    enc = TinyViT(image_size=8, patch_size=2, dim=8, depth=DEPTH, heads=2)
    return nn.Sequential(OrderedDict(encoder=enc, head=nn.Linear(8, 4)))


KW = dict(blocks="encoder.blocks", head="head")


@pytest.mark.parametrize("n_layers", [1, 2, 5, 26])
@pytest.mark.parametrize("decay", [0.3, 0.75, 1.0])
def test_scales_match_the_closed_form(n_layers, decay):
    L = n_layers - 1
    expected = np.array([decay ** (L - i) for i in range(n_layers)])
    np.testing.assert_allclose(R.layerwise_lr_scales(n_layers, decay), expected, rtol=1e-14)
    # layerwise_lr is the base rate times the scales of n_blocks + 2 layers
    if n_layers >= 2:
        np.testing.assert_allclose(
            R.layerwise_lr(0.1, decay, n_layers - 2), 0.1 * expected, rtol=1e-14
        )


def test_vit_l_example_of_the_seed():
    s = R.layerwise_lr_scales(26, 0.75)  # embeddings, 24 blocks, head
    assert s[24] == pytest.approx(0.75) and s[12] == pytest.approx(0.75**13)
    assert s[0] == pytest.approx(0.75**25) and s[25] == 1.0


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.5, np.nan])
def test_scales_reject_bad_decay(bad):
    with pytest.raises(ValueError, match="decay"):
        R.layerwise_lr_scales(3, bad)


def test_layers_follow_the_blocks():
    m = _model()
    layers, L = parameter_layers(m, **KW)
    assert L == DEPTH
    for name, layer in layers.items():
        if name.startswith("encoder.blocks."):
            assert layer == int(name.split(".")[2]) + 1
        elif name.startswith("head."):
            assert layer == L + 1
        elif name.startswith("encoder.norm."):
            assert layer == L  # the final norm goes with the last block
        else:
            assert layer == 0  # patch embedding, class token, positions
    assert set(layers) == {n for n, _ in m.named_parameters()}


@pytest.mark.parametrize("j", range(DEPTH + 1))
def test_freeze_all_but_last(j):
    m = _model()
    layers, L = parameter_layers(m, **KW)
    names = freeze_all_but_last(m, j, **KW)
    on = {n for n, p in m.named_parameters() if p.requires_grad}
    assert on == set(names)
    expected = {n for n, i in layers.items() if i == L + 1 or i > L - j or (j == L)}
    assert on == expected
    if j == 0:
        assert on == {"head.weight", "head.bias"}
    if j == L:
        assert on == set(layers)
    # a step with the frozen parameters leaves them bit for bit unchanged
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1)
    loss = m(torch.randn(5, 1, 8, 8)).square().sum()
    loss.backward()
    opt.step()
    for n, p in m.named_parameters():
        assert torch.equal(p, before[n]) == (n not in on)


@pytest.mark.parametrize("j", [1, DEPTH])
def test_groups_cover_each_trainable_parameter_once(j):
    m = _model()
    freeze_all_but_last(m, j, **KW)
    groups = layerwise_lr_groups(m, 1e-3, 0.5, weight_decay=0.05, **KW)
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids))
    assert set(ids) == {id(p) for p in m.parameters() if p.requires_grad}
    layers, L = parameter_layers(m, **KW)
    for g in groups:
        assert g["lr"] == pytest.approx(1e-3 * 0.5 ** (L + 1 - g["layer"]))
        assert all(layers[n] == g["layer"] for n in g["names"])
        assert g["weight_decay"] == 0.05
    opt = torch.optim.AdamW(groups)  # torch accepts the groups as they are
    assert len(opt.param_groups) == len(groups)


def test_decay_one_gives_one_rate():
    groups = layerwise_lr_groups(_model(), 0.01, 1.0, **KW)
    assert [g["layer"] for g in groups] == list(range(DEPTH + 2))
    assert all(g["lr"] == 0.01 for g in groups)


def test_default_blocks_on_a_bare_encoder():
    torch.manual_seed(0)
    enc = TinyViT(image_size=8, patch_size=2, dim=8, depth=2, heads=2)
    layers, L = parameter_layers(enc)
    assert L == 2 and max(layers.values()) == 2
    assert freeze_all_but_last(enc, 0) == []


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        (dict(blocks="encoder.nope", head="head"), "blocks"),
        (dict(blocks=["encoder.blocks.0", "encoder.blocks.0"], head="head"), "blocks"),
        (dict(blocks=[], head="head"), "blocks"),
        (dict(blocks=3, head="head"), "blocks"),
        (dict(blocks="encoder.blocks", head="tail"), "head"),
        (dict(blocks="encoder.blocks", head="encoder.blocks.1"), "head"),
        (dict(blocks="encoder.blocks", head=nn.Linear(2, 2)), "head"),
    ],
)
def test_bad_layout(kwargs, word):
    with pytest.raises(ValueError, match=word):
        parameter_layers(_model(), **kwargs)


def test_bad_arguments():
    m = _model()
    with pytest.raises(TypeError, match="model"):
        parameter_layers("not a model")
    for j in (-1, DEPTH + 1):
        with pytest.raises(ValueError, match="j"):
            freeze_all_but_last(m, j, **KW)
    with pytest.raises(TypeError, match="j"):
        freeze_all_but_last(m, "2", **KW)
    for lr in (0.0, -1.0, np.inf):
        with pytest.raises(ValueError, match="base_lr"):
            layerwise_lr_groups(m, lr, 0.5, **KW)
    for lr in ("a", True, None):
        with pytest.raises(TypeError, match="base_lr"):
            layerwise_lr_groups(m, lr, 0.5, **KW)
    for decay in (0.0, 1.2):
        with pytest.raises(ValueError, match="decay"):
            layerwise_lr_groups(m, 0.1, decay, **KW)
    with pytest.raises(ValueError, match="weight_decay"):
        layerwise_lr_groups(m, 0.1, 0.5, weight_decay=-1.0, **KW)
    for p in m.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="trainable"):
        layerwise_lr_groups(m, 0.1, 0.5, **KW)
