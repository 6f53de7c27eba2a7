"""Image data for the reference loop: a folder of class subfolders, read with Pillow.

Book: the PyTorch reference loop (seed 000, "In PyTorch"). torchvision is not required:
:class:`ImageFolder` reproduces the usual evaluation transform (resize the short side
to ``resize``, center-crop ``crop``, scale to [0, 1], normalise with the ImageNet mean
and standard deviation: on ImageNet, short side 256 and crop 224).
"""
from __future__ import annotations

import os

import numpy as np
import torch
from torch.utils.data import Dataset

from .._validation import check_int

__all__ = ["ImageFolder", "IMAGENET_MEAN", "IMAGENET_STD"]

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
    """

    def __init__(self, root, crop=224, resize=None):
        root = os.fspath(root)
        if not os.path.isdir(root):
            raise FileNotFoundError(f"image folder not found: {root!r}")
        self.crop = check_int(crop, "crop", minimum=1)
        self.resize = check_int(resize, "resize", minimum=self.crop) if resize is not None else round(self.crop * 256 / 224)
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

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        from PIL import Image

        path, label = self.samples[i]
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            scale = self.resize / min(w, h)
            im = im.resize((max(self.crop, round(w * scale)), max(self.crop, round(h * scale))), Image.BICUBIC)
            w, h = im.size
            left, top = (w - self.crop) // 2, (h - self.crop) // 2
            im = im.crop((left, top, left + self.crop, top + self.crop))
            x = torch.from_numpy(np.asarray(im, dtype=np.float32) / 255.0).permute(2, 0, 1)
        mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
        return (x - mean) / std, label
