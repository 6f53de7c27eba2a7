"""Hooks, pooling, disk cache and backbone loading (repeval_ref.torch.extract / models)."""

import os
import sys
import types
import urllib.error

import numpy as np
import pytest
import torch
from torch import nn

from repeval_ref.backbones import BackboneUnavailable, load_backbone
from repeval_ref.torch import SmallCNN, TinyViT, default_blocks
from repeval_ref.torch.extract import (
    BlockTaps,
    StaleCacheError,
    dataset_fingerprint,
    extract_features,
    model_fingerprint,
    pool_output,
)
from repeval_ref.torch.freeze import state_snapshot, state_unchanged, training_flags

pytestmark = pytest.mark.usefixtures("one_torch_thread")


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
    for bad_out, bad_pool in (
        (fmap, "cls"),
        (flat, "mean"),
        (tokens, "flat"),
        (tokens, "max"),
        (tokens[:, :1], "mean"),
    ):
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
        np.testing.assert_allclose(
            feats.arrays[(f"blocks.{i}", "cls")], t[:, 0].numpy(), rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(
            feats.arrays[(f"blocks.{i}", "mean")], t[:, 1:].mean(1).numpy(), rtol=1e-5, atol=1e-6
        )
    vit.train()
    assert [f for _, f in training_flags(vit)] == flags and state_unchanged(vit, snap)
    # Views: last n blocks concatenated, class token with mean patch token.
    v = feats.view(2, "cls+mean")
    expected = np.concatenate(
        [ref[1][:, 0], ref[1][:, 1:].mean(1), ref[2][:, 0], ref[2][:, 1:].mean(1)], axis=1
    )
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
    kw = dict(
        poolings=("cls", "mean"), batch_size=5, device="cpu", cache_dir=tmp_path, model_name="vit"
    )
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
        self.layer2 = nn.Sequential(
            nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU()
        )
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
    monkeypatch.setitem(
        sys.modules, "torchvision", _fake_torchvision(lambda n: _ResNetLike(), fail_download=True)
    )
    with pytest.raises(BackboneUnavailable, match="cannot reach the model hub.*weights="):
        load_backbone("resnet50", hub=True)
    with pytest.raises(FileNotFoundError):
        load_backbone("resnet50", tmp_path / "missing.pth")
    monkeypatch.setitem(sys.modules, "timm", None)  # import timm -> ImportError
    with pytest.raises(BackboneUnavailable, match="timm is not installed"):
        load_backbone("vit_base_patch16_224", library="timm")
    with pytest.raises(ValueError):
        load_backbone("resnet50", library="keras")


# ---------------------------------------------------------------------------------
# Subsets of an image folder, precision in the cache, prefix tokens, bad inputs.


def _png_folder(root, per_class=24, size=6, seed=0):
    from PIL import Image

    rng = np.random.default_rng(seed)
    for name in ["a", "b"]:
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            arr = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
            Image.fromarray(arr).save(root / name / f"{i:03d}.png")


def test_subset_of_an_image_folder_fingerprints_every_selected_file(tmp_path):
    from PIL import Image
    from torch.utils.data import Subset

    from repeval_ref.torch.data import ImageFolder

    _png_folder(tmp_path / "imgs")
    full = ImageFolder(tmp_path / "imgs", crop=4, resize=4)
    train_idx = np.array([i for i in range(len(full)) if i % 4 != 3])  # 36 of 48: the loop's 75 %
    test_idx = np.array([i for i in range(len(full)) if i % 4 == 3])
    train, test = Subset(full, train_idx), Subset(full, test_idx)
    # The old fingerprint read 32 evenly spaced items of the subset; pick one it skipped.
    probed = set(np.linspace(0, len(train) - 1, num=32).round().astype(int).tolist())
    j = next(k for k in range(len(train)) if k not in probed)
    path = full.samples[int(train_idx[j])][0]

    torch.manual_seed(0)
    cnn = SmallCNN(in_channels=3, width=2).eval()
    kw = dict(
        layers=["blocks.2"],
        poolings=("mean",),
        device="cpu",
        cache_dir=tmp_path / "cache",
        model_name="cnn",
        data_name="train",
        on_stale="error",
    )
    first = extract_features(cnn, train, **kw)
    assert not first.from_cache and first.n == 36
    assert extract_features(cnn, train, **kw).from_cache  # unchanged files: a hit
    fp_train, fp_test = dataset_fingerprint(train), dataset_fingerprint(test)
    assert (
        dataset_fingerprint(Subset(train, np.arange(len(train)))) == fp_train
    )  # nested, same items

    st = os.stat(path)
    Image.fromarray(np.zeros((6, 6, 3), dtype=np.uint8)).save(
        path
    )  # a changed image outside the sample
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # coarse file-system clocks
    assert dataset_fingerprint(train) != fp_train
    assert dataset_fingerprint(test) == fp_test  # the test split does not hold that file
    with pytest.raises(StaleCacheError, match="data"):
        extract_features(cnn, train, **kw)
    # Nested subsets are looked through too, and another selection is another fingerprint.
    inner = Subset(full, np.arange(len(full)))
    assert dataset_fingerprint(Subset(inner, train_idx)) == dataset_fingerprint(train)
    assert dataset_fingerprint(Subset(full, train_idx[:-1])) != dataset_fingerprint(train)
    # The preprocessing is part of the fingerprint of an image folder.
    assert dataset_fingerprint(
        ImageFolder(tmp_path / "imgs", crop=3, resize=4)
    ) != dataset_fingerprint(full)


def test_cache_records_autocast_and_dtype(tmp_path):
    import json

    vit = _vit()
    x, y = _data(6)
    kw = dict(
        poolings=("cls",), device="cpu", cache_dir=tmp_path, model_name="vit", on_stale="error"
    )
    bf16 = extract_features(vit, (x, y), autocast=True, **kw)  # bfloat16 autocast on the CPU
    meta_path = tmp_path / "vit" / "data" / "meta.json"
    meta = json.loads(meta_path.read_text())
    assert (
        meta["autocast"] == "bfloat16"
        and meta["dtype"] == "float32"
        and meta["n_prefix_tokens"] == 1
    )
    assert bf16.arrays[("blocks.2", "cls")].dtype == np.float32
    assert extract_features(vit, (x, y), autocast=True, **kw).from_cache
    with pytest.raises(StaleCacheError, match="autocast setting 'bfloat16', this run uses 'off'"):
        extract_features(vit, (x, y), autocast=False, **kw)
    with pytest.warns(UserWarning, match="autocast"):
        f32 = extract_features(vit, (x, y), autocast=False, **dict(kw, on_stale="recompute"))
    assert not f32.from_cache and json.loads(meta_path.read_text())["autocast"] == "off"
    assert not np.array_equal(f32.arrays[("blocks.2", "cls")], bf16.arrays[("blocks.2", "cls")])
    # A cache written before the setting was recorded is stale, with the reason.
    meta = json.loads(meta_path.read_text())
    for key in ("autocast", "dtype", "n_prefix_tokens"):
        del meta[key]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(
        StaleCacheError, match="does not record the autocast setting.*older version"
    ):
        extract_features(vit, (x, y), autocast=False, **kw)


class _RegisterViT(TinyViT):
    """A timm-style ViT with register tokens: [class, 2 registers, patches]."""

    num_prefix_tokens = 3

    def __init__(self):
        super().__init__(image_size=8, patch_size=4, dim=16, depth=2, heads=2)
        self.registers = nn.Parameter(torch.randn(1, 2, 16))

    def tokens(self, x):
        t = super().tokens(x)
        return torch.cat([t[:, :1], self.registers.expand(t.shape[0], -1, -1), t[:, 1:]], dim=1)


def test_mean_pooling_leaves_out_register_tokens(tmp_path):
    torch.manual_seed(0)
    vit = _RegisterViT().eval()
    x = _data(5)[0]
    ref = _manual_tokens(vit, x)[-1]  # (5, 1 + 2 + 4, 16)
    feats = extract_features(vit, x, layers="blocks.1", poolings=("cls", "mean"), device="cpu")
    np.testing.assert_allclose(
        feats.view(1, "mean"), ref[:, 3:].mean(1).numpy(), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(feats.view(1, "cls"), ref[:, 0].numpy(), rtol=1e-5, atol=1e-6)
    only_cls = extract_features(
        vit, x, layers="blocks.1", poolings="mean", device="cpu", n_prefix_tokens=1
    )
    np.testing.assert_allclose(
        only_cls.view(1, "mean"), ref[:, 1:].mean(1).numpy(), rtol=1e-5, atol=1e-6
    )
    # n_prefix_tokens is part of the cache settings.
    kw = dict(
        layers="blocks.1", poolings="mean", device="cpu", cache_dir=tmp_path, on_stale="error"
    )
    extract_features(vit, x, **kw)
    with pytest.raises(StaleCacheError, match="n_prefix_tokens 3, this run uses 1"):
        extract_features(vit, x, n_prefix_tokens=1, **kw)
    tokens = torch.randn(2, 4, 3)
    torch.testing.assert_close(pool_output(tokens, "mean", n_prefix_tokens=0), tokens.mean(1))
    with pytest.raises(ValueError, match="class token"):
        pool_output(tokens, "cls", n_prefix_tokens=0)
    with pytest.raises(ValueError, match="patch token"):
        pool_output(tokens, "mean", n_prefix_tokens=4)
    with pytest.raises(ValueError, match="n_prefix_tokens"):
        extract_features(vit, x, n_prefix_tokens=-1)


def test_extract_bad_inputs_name_the_argument(monkeypatch):
    vit = _vit()
    x, y = _data(4)
    one = extract_features(vit, x, layers="blocks.0", device="cpu")  # a string is one block name
    assert one.layers == ["blocks.0"]
    with pytest.raises(TypeError, match="layers"):
        extract_features(vit, x, layers=3)
    with pytest.raises(TypeError, match="layers"):
        extract_features(vit, x, layers=["blocks.0", 1])
    with pytest.raises(ValueError, match="layers is empty"):
        extract_features(vit, x, layers=[])
    with pytest.raises(TypeError, match="data.*int"):
        extract_features(vit, [1, 2, 3])
    with pytest.raises(TypeError, match="data"):
        extract_features(vit, "images/")
    with pytest.raises(TypeError, match="label of data"):
        extract_features(vit, [(x[0], "cat")])
    with pytest.raises(ValueError, match="data.*lengths"):
        extract_features(vit, (x, y[:3]))
    # A list of (input, label) pairs is a dataset; NumPy labels in a tuple are converted.
    pairs = extract_features(vit, [(x[i], int(y[i])) for i in range(4)], device="cpu")
    np.testing.assert_array_equal(pairs.labels, y.numpy())
    assert np.array_equal(extract_features(vit, (x, y.numpy()), device="cpu").labels, y.numpy())
    with pytest.raises(ValueError, match="device 'tpu'.*available here: cpu"):
        extract_features(vit, x, device="tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device 'cuda' is not available.*available here: cpu"):
        extract_features(vit, x, device="cuda")
    with pytest.raises(TypeError, match="device"):
        extract_features(vit, x, device=3.5)
