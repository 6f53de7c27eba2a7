"""Hooks, pooling, disk cache and backbone loading (repeval_ref.torch.extract / models)."""
import os
import sys
import types
import urllib.error

import numpy as np
import pytest
import torch
from torch import nn

from repeval_ref.torch import BackboneUnavailable, SmallCNN, TinyViT, default_blocks, load_backbone
from repeval_ref.torch.extract import (
    BlockTaps,
    StaleCacheError,
    dataset_fingerprint,
    extract_features,
    model_fingerprint,
    pool_output,
)
from repeval_ref.torch.freeze import state_snapshot, state_unchanged, training_flags


@pytest.fixture(autouse=True)
def _one_thread():
    """Small tensors: one intra-op thread avoids spinning against other jobs on 2 cores."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _vit(seed=0):
    torch.manual_seed(seed)
    return TinyViT(image_size=8, patch_size=4, dim=16, depth=3, heads=2)


def _data(n=21, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def _manual_tokens(vit, x):
    """Every block's tokens, computed by calling the blocks by hand."""
    out = []
    with torch.no_grad():
        t = vit.tokens(x)
        for block in vit.blocks:
            t = block(t)
            out.append(t)
    return out


def test_pooling_against_hand_computation():
    tokens = torch.arange(2 * 3 * 2, dtype=torch.float32).reshape(2, 3, 2)
    torch.testing.assert_close(pool_output(tokens, "cls"), tokens[:, 0])
    torch.testing.assert_close(pool_output(tokens, "mean"), (tokens[:, 1] + tokens[:, 2]) / 2)
    fmap = torch.randn(2, 4, 3, 5)
    torch.testing.assert_close(pool_output(fmap, "mean"), fmap.flatten(2).mean(-1))
    flat = torch.randn(3, 4)
    assert pool_output(flat, "flat") is flat
    for bad_out, bad_pool in ((fmap, "cls"), (flat, "mean"), (tokens, "flat"), (tokens, "max"), (tokens[:, :1], "mean")):
        with pytest.raises(ValueError):
            pool_output(bad_out, bad_pool)


def test_one_pass_returns_every_block_in_order():
    vit = _vit()
    vit.train()  # extraction must switch to eval mode and restore this
    flags = [f for _, f in training_flags(vit)]
    snap = state_snapshot(vit)
    x, y = _data()
    feats = extract_features(vit, (x, y), poolings=("cls", "mean"), batch_size=4, device="cpu")
    assert feats.layers == ["blocks.0", "blocks.1", "blocks.2"] and not feats.from_cache
    np.testing.assert_array_equal(feats.labels, y.numpy())
    vit.eval()
    ref = _manual_tokens(vit, x)
    for i, t in enumerate(ref):
        np.testing.assert_allclose(feats.arrays[(f"blocks.{i}", "cls")], t[:, 0].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(feats.arrays[(f"blocks.{i}", "mean")], t[:, 1:].mean(1).numpy(), rtol=1e-5, atol=1e-6)
    vit.train()
    assert [f for _, f in training_flags(vit)] == flags and state_unchanged(vit, snap)
    # Views: last n blocks concatenated, class token with mean patch token.
    v = feats.view(2, "cls+mean")
    expected = np.concatenate([ref[1][:, 0], ref[1][:, 1:].mean(1), ref[2][:, 0], ref[2][:, 1:].mean(1)], axis=1)
    np.testing.assert_allclose(v, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        feats.view(4, "cls")
    with pytest.raises(ValueError):
        feats.view(1, "cls+max")


def test_model_output_and_cnn_blocks():
    torch.manual_seed(0)
    cnn = SmallCNN(width=4).eval()
    x, _ = _data(9)
    f_blocks = extract_features(cnn, x, poolings=("mean",), batch_size=4, device="cpu")
    f_out = extract_features(cnn, x, layers=[""], poolings=("flat",), batch_size=4, device="cpu")
    assert f_blocks.labels is None
    with torch.no_grad():
        out = cnn(x).numpy()
    np.testing.assert_allclose(f_blocks.arrays[("blocks.2", "mean")], out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f_out.view(1, "flat"), out, rtol=1e-5, atol=1e-6)


def test_block_taps_remove_hooks_and_validate():
    vit = _vit()
    with BlockTaps(vit, ["blocks.1"]) as taps:
        vit(_data(2)[0])
        assert taps.outputs["blocks.1"].shape == (2, 5, 16)
    assert all(len(b._forward_hooks) == 0 for b in vit.blocks)
    with pytest.raises(ValueError):
        BlockTaps(vit, ["blocks.7"])
    with pytest.raises(ValueError):
        BlockTaps(vit, [])


class _CountingViT(TinyViT):
    calls = 0

    def forward(self, x):
        type(self).calls += 1
        return super().forward(x)


def test_cache_skips_extraction_and_detects_stale(tmp_path):
    torch.manual_seed(0)
    vit = _CountingViT(image_size=8, patch_size=4, dim=16, depth=2, heads=2)
    x, y = _data(13)
    kw = dict(poolings=("cls", "mean"), batch_size=5, device="cpu", cache_dir=tmp_path, model_name="vit")
    _CountingViT.calls = 0
    first = extract_features(vit, (x, y), **kw)
    assert _CountingViT.calls == 3 and not first.from_cache
    files = sorted(os.listdir(tmp_path / "vit" / "data"))
    assert "meta.json" in files and "labels.npy" in files and "blocks.1__cls.npy" in files
    second = extract_features(vit, (x, y), **kw)
    assert _CountingViT.calls == 3 and second.from_cache  # no forward pass at all
    assert isinstance(second.arrays[("blocks.0", "cls")], np.memmap)
    for key in first.arrays:
        np.testing.assert_array_equal(first.arrays[key], second.arrays[key])
    np.testing.assert_array_equal(second.labels, y.numpy())

    # Other weights under the same name: stale.
    with torch.no_grad():
        vit.blocks[0].mlp[0].bias.add_(1.0)
    with pytest.raises(StaleCacheError, match="weights"):
        extract_features(vit, (x, y), on_stale="error", **kw)
    with pytest.warns(UserWarning, match="stale"):
        third = extract_features(vit, (x, y), **kw)
    assert _CountingViT.calls == 6 and not third.from_cache
    assert not np.array_equal(third.arrays[("blocks.1", "cls")], first.arrays[("blocks.1", "cls")])
    # Other data under the same name: stale too.
    x2 = x.clone()
    x2[0, 0, 0, 0] += 0.5
    with pytest.raises(StaleCacheError, match="data"):
        extract_features(vit, (x2, y), on_stale="error", **kw)
    # An interrupted write is never taken for a valid cache.
    meta = tmp_path / "vit" / "data" / "meta.json"
    meta.write_text(meta.read_text().replace('"complete": true', '"complete": false'))
    with pytest.raises(StaleCacheError, match="completely"):
        extract_features(vit, (x, y), on_stale="error", **kw)


def test_fingerprints():
    a, b = _vit(0), _vit(0)
    assert model_fingerprint(a) == model_fingerprint(b)
    with torch.no_grad():
        b.norm.weight[0] += 1e-6
    assert model_fingerprint(a) != model_fingerprint(b)
    ds = torch.utils.data.TensorDataset(*_data(5))
    ds2 = torch.utils.data.TensorDataset(*_data(5, seed=1))
    assert dataset_fingerprint(ds) == dataset_fingerprint(torch.utils.data.TensorDataset(*_data(5)))
    assert dataset_fingerprint(ds) != dataset_fingerprint(ds2)


def test_extract_bad_inputs():
    vit = _vit()
    x, y = _data(4)
    with pytest.raises(TypeError):
        extract_features("model", x)
    with pytest.raises(ValueError):
        extract_features(vit, x[:0])
    with pytest.raises(ValueError):
        extract_features(vit, x, poolings=("max",))
    with pytest.raises(ValueError):
        extract_features(vit, x, layers=["nope"])
    with pytest.raises(ValueError):
        extract_features(vit, x, on_stale="ignore")
    with pytest.raises(TypeError):
        extract_features(vit, 42)
    with pytest.raises(RuntimeError, match="torch.distributed"):
        extract_features(vit, x, distributed=True)


# ---------------------------------------------------------------------------------
# Backbones: torchvision and timm are not installed, so the code paths are exercised with
# stand-in modules that expose the same entry points.

def _fake_torchvision(model_factory, fail_download=False):
    tv = types.ModuleType("torchvision")
    tv.models = types.SimpleNamespace()

    def get_model(name, weights=None):
        if weights is not None and fail_download:
            raise urllib.error.URLError("no route to host")
        return model_factory(name)

    tv.models.get_model = get_model
    return tv


class _ResNetLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.layer1 = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.layer2 = nn.Sequential(nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.layer2(self.layer1(self.stem(x))).mean((2, 3)))


def test_torchvision_path_with_local_weights(tmp_path, monkeypatch):
    torch.manual_seed(1)
    trained = _ResNetLike()
    path = tmp_path / "resnet.pth"
    torch.save({"state_dict": trained.state_dict()}, path)
    monkeypatch.setitem(sys.modules, "torchvision", _fake_torchvision(lambda name: _ResNetLike()))
    model = load_backbone("resnet_like", path, library="torchvision")
    assert isinstance(model.fc, nn.Identity) and not model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, trained.state_dict()[k])
    assert default_blocks(model) == ["layer1", "layer2"]
    x = _data(3)[0]
    feats = extract_features(model, x, poolings=("mean",), device="cpu")
    with torch.no_grad():
        np.testing.assert_allclose(feats.view(1, "mean"), model(x).numpy(), rtol=1e-5, atol=1e-6)
    # Weights that do not fit the architecture are refused with a clear message.
    torch.save({"bogus.weight": torch.zeros(2)}, tmp_path / "bad.pth")
    with pytest.raises(ValueError, match="does not fit"):
        load_backbone("resnet_like", tmp_path / "bad.pth", library="torchvision")


def test_timm_path_with_a_vit_stand_in(tmp_path, monkeypatch):
    timm = types.ModuleType("timm")
    timm.create_model = lambda name, pretrained=False: _vit(3)
    monkeypatch.setitem(sys.modules, "timm", timm)
    torch.save(_vit(3).state_dict(), tmp_path / "vit.pth")
    model = load_backbone("vit_tiny", tmp_path / "vit.pth", library="timm")
    assert default_blocks(model) == ["blocks.0", "blocks.1", "blocks.2"]
    feats = extract_features(model, _data(4)[0], poolings=("cls", "mean"), device="cpu")
    assert feats.view(2, "cls+mean").shape == (4, 64)


def test_offline_download_and_missing_library_messages(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision", _fake_torchvision(lambda n: _ResNetLike(), fail_download=True))
    with pytest.raises(BackboneUnavailable, match="cannot reach the model hub.*weights="):
        load_backbone("resnet50", hub=True)
    with pytest.raises(FileNotFoundError):
        load_backbone("resnet50", tmp_path / "missing.pth")
    monkeypatch.setitem(sys.modules, "timm", None)  # import timm -> ImportError
    with pytest.raises(BackboneUnavailable, match="timm is not installed"):
        load_backbone("vit_base_patch16_224", library="timm")
    with pytest.raises(ValueError):
        load_backbone("resnet50", library="keras")
