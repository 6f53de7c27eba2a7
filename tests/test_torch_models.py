"""Block names, prefix tokens and checkpoint loading of repeval_ref.torch.models."""

import sys
import types
from collections import OrderedDict

import numpy as np
import pytest
import torch
from torch import nn

from repeval_ref.backbones import load_backbone
from repeval_ref.torch import SmallCNN, TinyViT, default_blocks
from repeval_ref.torch.extract import extract_features
from repeval_ref.torch.models import TransformerBlock, default_prefix_tokens

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _TVEncoder(nn.Module):
    """torchvision's ``vision_transformer.Encoder``: ``layers`` is an OrderedDict-built
    Sequential."""

    def __init__(self, seq_length, depth, dim, heads):
        super().__init__()
        self.pos_embedding = nn.Parameter(0.02 * torch.randn(1, seq_length, dim))
        self.dropout = nn.Dropout(0.0)
        layers = OrderedDict()
        for i in range(depth):
            layers[f"encoder_layer_{i}"] = TransformerBlock(dim, heads, 2)
        self.layers = nn.Sequential(layers)
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        return self.ln(self.layers(self.dropout(x + self.pos_embedding)))


class _TVVisionTransformer(nn.Module):
    """The module layout of ``torchvision.models.vision_transformer.VisionTransformer``.

    torchvision is not installed here; this reproduces its attribute names (``conv_proj``,
    ``class_token``, ``encoder.layers.encoder_layer_<i>``, ``encoder.ln``, ``heads.head``)
    and its forward pass (class token prepended, ``x[:, 0]`` into the heads).
    """

    def __init__(self, image_size=8, patch_size=4, depth=3, dim=16, heads=2, num_classes=5):
        super().__init__()
        self.conv_proj = nn.Conv2d(1, dim, patch_size, stride=patch_size)
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.encoder = _TVEncoder(1 + (image_size // patch_size) ** 2, depth, dim, heads)
        self.heads = nn.Sequential(OrderedDict(head=nn.Linear(dim, num_classes)))

    def tokens(self, x):
        p = self.conv_proj(x).flatten(2).transpose(1, 2)
        return torch.cat([self.class_token.expand(x.shape[0], -1, -1), p], dim=1)

    def forward(self, x):
        return self.heads(self.encoder(self.tokens(x))[:, 0])


def test_default_blocks_uses_torchvision_vit_names_and_extracts():
    torch.manual_seed(0)
    vit = _TVVisionTransformer()
    names = default_blocks(vit)
    assert names == [
        "encoder.layers.encoder_layer_0",
        "encoder.layers.encoder_layer_1",
        "encoder.layers.encoder_layer_2",
    ]
    assert all(vit.get_submodule(n) is vit.encoder.layers[i] for i, n in enumerate(names))
    x = torch.rand(5, 1, 8, 8)
    feats = extract_features(
        vit, x, layers=default_blocks(vit), poolings=("cls", "mean"), device="cpu"
    )
    assert feats.layers == names
    vit.eval()
    with torch.no_grad():  # the blocks by hand
        t = vit.tokens(x) + vit.encoder.pos_embedding
        outs = []
        for block in vit.encoder.layers:
            t = block(t)
            outs.append(t)
    for name, out in zip(names, outs):
        np.testing.assert_allclose(
            feats.arrays[(name, "cls")], out[:, 0].numpy(), rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(
            feats.arrays[(name, "mean")], out[:, 1:].mean(1).numpy(), rtol=1e-5, atol=1e-6
        )


def test_torchvision_vit_through_load_backbone(tmp_path, monkeypatch):
    torch.manual_seed(1)
    trained = _TVVisionTransformer()
    torch.save(trained.state_dict(), tmp_path / "vit.pth")
    tv = types.ModuleType("torchvision")
    tv.models = types.SimpleNamespace(get_model=lambda name, weights=None: _TVVisionTransformer())
    monkeypatch.setitem(sys.modules, "torchvision", tv)
    model = load_backbone("vit_b_16", tmp_path / "vit.pth")
    assert isinstance(model.heads, nn.Identity)
    feats = extract_features(
        model, torch.rand(3, 1, 8, 8), layers=default_blocks(model), device="cpu"
    )
    assert feats.view(2, "cls").shape == (3, 32)


def test_default_blocks_other_layouts():
    assert default_blocks(TinyViT(depth=2, dim=8, heads=2)) == ["blocks.0", "blocks.1"]
    assert default_blocks(SmallCNN()) == ["blocks.0", "blocks.1", "blocks.2"]

    class Named(nn.Module):  # a ``blocks`` Sequential with its own child names
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(OrderedDict(stem=nn.Identity(), stage_a=nn.Identity()))

    assert default_blocks(Named()) == ["blocks.stem", "blocks.stage_a"]

    class ResNetLike(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer2 = nn.Identity()  # registered out of order on purpose
            self.layer1 = nn.Identity()
            self.layer10 = nn.Identity()  # not a ResNet stage

    assert default_blocks(ResNetLike()) == ["layer1", "layer2"]
    with pytest.raises(ValueError, match="pass the layer names"):
        default_blocks(nn.Linear(2, 2))
    with pytest.raises(TypeError, match="model"):
        default_blocks("resnet")


def test_default_prefix_tokens():
    vit = TinyViT(depth=1, dim=8, heads=2)
    assert default_prefix_tokens(vit) == 1  # no attribute: the class token only
    vit.num_prefix_tokens = 5  # timm: class token + 4 registers
    assert default_prefix_tokens(vit) == 5
    vit.num_prefix_tokens = 0  # timm without a class token
    assert default_prefix_tokens(vit) == 0
    vit.num_prefix_tokens = "5"
    assert default_prefix_tokens(vit) == 1


def test_weights_file_that_is_not_a_checkpoint(tmp_path, monkeypatch):
    tv = types.ModuleType("torchvision")
    tv.models = types.SimpleNamespace(get_model=lambda name, weights=None: SmallCNN())
    monkeypatch.setitem(sys.modules, "torchvision", tv)
    (tmp_path / "notes.txt").write_text("these are not weights")
    (tmp_path / "empty.pth").write_bytes(b"")
    for name in ("notes.txt", "empty.pth"):
        with pytest.raises(ValueError, match="is not a PyTorch checkpoint"):
            load_backbone("small", tmp_path / name)
