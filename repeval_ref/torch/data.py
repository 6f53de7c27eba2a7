"""Image data for the reference loop: a folder of class subfolders, read with Pillow.

Book: the PyTorch reference loop (seed 000, "In PyTorch"). torchvision is not required:
:class:`ImageFolder` reproduces the usual evaluation transform (resize the short side
to ``resize``, center-crop ``crop``, scale to [0, 1], normalise with the ImageNet mean
and standard deviation: on ImageNet, short side 256 and crop 224; an encoder trained
with another normalisation passes its own ``mean`` and ``std``). :class:`PreparedImages`
hands in-memory images to an encoder through the encoder's own preparation function,
one item at a time.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch.utils.data import Dataset

from .._validation import check_int

__all__ = ["ImageFolder", "PreparedImages", "IMAGENET_MEAN", "IMAGENET_STD"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm")


class ImageFolder(Dataset):
    """``root/<class>/<image>`` files as ``(tensor (3, crop, crop), label)`` pairs.

    Classes are the sorted subfolder names (label = position); ``samples`` is the
    sorted list of ``(path, label)``, which :func:`~repeval_ref.torch.extract.dataset_fingerprint`
    uses to key the feature cache.

    Parameters
    ----------
    root : str or os.PathLike
    crop : int
        Side of the center crop (224 on ImageNet).
    resize : int, optional
        Short side after resizing (default ``round(crop * 256 / 224)``).
    mean, std : sequence of 3 floats
        Per-channel normalisation ``(x - mean) / std`` of the [0, 1] pixels (default:
        the ImageNet statistics).
    """

    def __init__(self, root, crop=224, resize=None, mean=IMAGENET_MEAN, std=IMAGENET_STD):
        root = os.fspath(root)
        if not os.path.isdir(root):
            raise FileNotFoundError(f"image folder not found: {root!r}")
        self.crop = check_int(crop, "crop", minimum=1)
        self.resize = (
            check_int(resize, "resize", minimum=self.crop)
            if resize is not None
            else round(self.crop * 256 / 224)
        )
        self.classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        if not self.classes:
            raise ValueError(f"{root!r} has no class subfolders")
        self.samples = []
        for label, cls in enumerate(self.classes):
            for dirpath, _dirs, files in sorted(os.walk(os.path.join(root, cls))):
                for f in sorted(files):
                    if f.lower().endswith(_EXTENSIONS):
                        self.samples.append((os.path.join(dirpath, f), label))
        if not self.samples:
            raise ValueError(f"{root!r} contains no images with extensions {_EXTENSIONS}")
        self.targets = np.array([lab for _, lab in self.samples], dtype=np.int64)
        self.mean, self.std = (
            _channel_stats(mean, "mean"),
            _channel_stats(std, "std", positive=True),
        )
        # Read by the feature cache's fingerprint (with crop and resize).
        self.transform = f"normalize(mean={self.mean}, std={self.std})"

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        from PIL import Image

        path, label = self.samples[i]
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            scale = self.resize / min(w, h)
            im = im.resize(
                (max(self.crop, round(w * scale)), max(self.crop, round(h * scale))), Image.BICUBIC
            )
            w, h = im.size
            left, top = (w - self.crop) // 2, (h - self.crop) // 2
            im = im.crop((left, top, left + self.crop, top + self.crop))
            x = torch.from_numpy(np.asarray(im, dtype=np.float32) / 255.0).permute(2, 0, 1)
        mean = torch.tensor(self.mean).view(3, 1, 1)
        std = torch.tensor(self.std).view(3, 1, 1)
        return (x - mean) / std, label


def _channel_stats(values, name, positive=False):
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be 3 numbers, got {values!r}") from None
    if len(out) != 3 or not all(np.isfinite(out)) or (positive and min(out) <= 0):
        raise ValueError(
            f"{name} must be 3 finite{' positive' if positive else ''} numbers, got {values!r}"
        )
    return out


class PreparedImages(Dataset):
    """In-memory images and labels, each item passed through an encoder's preparation function.

    Item ``i`` is ``(prepare(images[i:i + 1], size=size)[0], labels[i])``. The raw
    images are kept, not their prepared form, which can be far larger (60,000
    Fashion-MNIST images resized to 96 px are 6.6 GB as float32).
    :meth:`fingerprint` keys the feature cache on the raw content, the labels, the
    size and the function's name.

    Parameters
    ----------
    images : torch.Tensor of shape (n, ...)
        Whatever ``prepare`` accepts, e.g. ``(n, 1, H, W)`` floats in [0, 1].
    labels : torch.Tensor of int, shape (n,)
    prepare : callable
        ``prepare(images, size=size) -> (m, C, size, size)`` tensor, such as
        :func:`repeval_ref.zoo.efficientnet.prepare_images`.
    size : int
        Side of the prepared images.
    """

    def __init__(self, images, labels, prepare, size):
        if not isinstance(images, torch.Tensor) or images.ndim < 2:
            raise ValueError(
                f"images must be a tensor with a sample axis, got {type(images).__name__}"
            )
        if (
            not isinstance(labels, torch.Tensor)
            or labels.shape != (images.shape[0],)
            or labels.is_floating_point()
        ):
            raise ValueError(f"labels must be an integer tensor of shape ({images.shape[0]},)")
        if not callable(prepare):
            raise ValueError(f"prepare must be callable, got {type(prepare).__name__}")
        self.images, self.labels = images, labels.to(torch.int64)
        self.prepare, self.size = prepare, check_int(size, "size", minimum=1)

    def __len__(self):
        return self.images.shape[0]

    def __getitem__(self, i):
        return self.prepare(self.images[i : i + 1], size=self.size)[0], self.labels[i]

    def fingerprint(self):
        import hashlib

        name = getattr(self.prepare, "__qualname__", type(self.prepare).__qualname__)
        h = hashlib.sha256(
            f"prepared|{name}|size={self.size}|"
            f"{tuple(self.images.shape)}|{self.images.dtype}|".encode()
        )
        h.update(self.images.contiguous().numpy().tobytes())
        h.update(self.labels.numpy().tobytes())
        return h.hexdigest()
