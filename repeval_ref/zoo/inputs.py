"""From uint8 grey images to the normalised tensors the zoo's encoders take."""

from __future__ import annotations

import numpy as np
import torch

from .registry import MEAN, STD

__all__ = ["to_tensor"]


def to_tensor(images, name="images"):
    """``(images / 255 - MEAN) / STD`` as float32 of shape (n, 1, H, W).

    Parameters
    ----------
    images : numpy.ndarray or torch.Tensor of uint8, shape (n, H, W)
        Grey images (Fashion-MNIST and its variants).

    Returns
    -------
    torch.Tensor of float32, shape (n, 1, H, W)
    """
    if isinstance(images, torch.Tensor):
        images = images.numpy()
    images = np.asarray(images)
    if images.ndim != 3 or images.shape[0] == 0 or images.dtype != np.uint8:
        raise ValueError(
            f"{name} must be a non-empty uint8 array of shape (n, H, W), got "
            f"{images.dtype} of shape {images.shape}"
        )
    x = torch.from_numpy(np.ascontiguousarray(images)).to(torch.float32).div_(255.0)
    return ((x - MEAN) / STD)[:, None]
