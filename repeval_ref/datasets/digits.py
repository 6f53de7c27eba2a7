"""The 8 x 8 ``sklearn.datasets.load_digits`` images as tensors, the data of the PyTorch reference
loop.

Book: chapter "Linear probes", the PyTorch reference loop (``repeval loop`` trains its
small CNN on these images and probes its features). PyTorch is imported only when the
function is called, so ``import repeval_ref.datasets`` does not need it.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._validation import check_int

__all__ = ["digits_images"]


def digits_images(seed=0, test_size=0.25):
    """``load_digits`` as image tensors with a stratified train/test split.

    Parameters
    ----------
    seed : int
        ``random_state`` of the split.
    test_size : float in (0, 1) or int
        Share (or number) of the 1797 images held out for testing, as
        ``sklearn.model_selection.train_test_split`` reads it.

    Returns
    -------
    x_train, x_test : torch.Tensor of shape (n, 1, 8, 8), float32 in [0, 1]
    y_train, y_test : numpy.ndarray of int64
    """
    seed = check_int(seed, "seed", minimum=0)
    if isinstance(test_size, bool) or not isinstance(test_size, numbers.Real):
        raise ValueError(
            f"test_size must be a share in (0, 1) or a number of images, got {test_size!r}"
        )
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    xtr, xte, ytr, yte = train_test_split(
        x, d.target.astype(np.int64), test_size=test_size, stratify=d.target, random_state=seed
    )
    return torch.from_numpy(xtr), torch.from_numpy(xte), ytr, yte
