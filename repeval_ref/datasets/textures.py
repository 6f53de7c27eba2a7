"""Grey texture images, a frozen random-filter encoder and five changes of coordinates.

Source: seed 001, "Examples" (synthetic textures, 32 random 5 x 5 filters, the five
fixed maps and the invariance table before them).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .._validation import as_float_array, check_int, check_rng
from ._common import _grouped_labels, _orthonormal_columns

__all__ = [
    "TEXTURE_CLASSES",
    "texture_images",
    "random_filter_features",
    "feature_transforms",
]

#: Element kinds of :func:`texture_images`; the label is the position in this tuple.
TEXTURE_CLASSES = ("disk", "ring", "bar", "cross")

_IMAGE_SIZE = 32


def _element_mask(kind, cy, cx, half, angle):
    """Boolean ``32 x 32`` mask of one element centred at ``(cy, cx)``.

    ``half`` is the half-size (radius of a disk or ring, half-length of a bar or of a
    cross's arms); rings are 1.2 pixels thick and bars 1.4 pixels wide.
    """
    rows, cols = np.indices((_IMAGE_SIZE, _IMAGE_SIZE), dtype=np.float64)
    dy, dx = rows - cy, cols - cx
    dist = np.hypot(dy, dx)
    if kind == 0:
        return dist <= half
    if kind == 1:
        return (dist <= half) & (dist >= half - 1.2)
    along = np.cos(angle) * dx + np.sin(angle) * dy
    across = np.cos(angle) * dy - np.sin(angle) * dx
    first_arm = (np.abs(along) <= half) & (np.abs(across) <= 0.7)
    if kind == 2:
        return first_arm
    second_arm = (np.abs(across) <= half) & (np.abs(along) <= 0.7)
    return first_arm | second_arm


def _one_texture(kind, rng):
    background = rng.uniform(0.3, 0.5)
    image = np.full((_IMAGE_SIZE, _IMAGE_SIZE), background)
    for _ in range(int(rng.integers(5, 10))):
        half = rng.uniform(2.0, 4.0)
        cy, cx = rng.uniform(half, _IMAGE_SIZE - 1 - half, size=2)
        angle = rng.uniform(0.0, np.pi)
        image[_element_mask(kind, cy, cx, half, angle)] += rng.uniform(0.2, 0.6)
    return image + rng.normal(0.0, 0.05, size=image.shape)


def texture_images(n_per_class, rng):
    """Grey ``32 x 32`` textures of four classes of scattered elements.

    Class ``c`` scatters elements of kind :data:`TEXTURE_CLASSES` ``[c]`` (disk,
    ring, bar, cross): each image has a flat background level drawn from
    ``U[0.3, 0.5]``, then 5 to 9 elements, each with half-size ``U[2, 4]`` pixels, a
    centre uniform inside the image (at least one half-size from the border),
    orientation ``U[0, pi)`` (bars and crosses) and contrast ``U[0.2, 0.6]`` added
    to the pixels it covers (overlaps add up), and finally Gaussian pixel noise of
    standard deviation 0.05.

    Parameters
    ----------
    n_per_class : int
        Images per class, ``>= 1``.
    rng : numpy.random.Generator or int
        Random source.

    Returns
    -------
    images : numpy.ndarray of float64, shape (4 * n_per_class, 32, 32)
    labels : numpy.ndarray of int64, shape (4 * n_per_class,)
        Grouped by class: ``n_per_class`` disks, then rings, bars, crosses.

    Notes
    -----
    Book, invariances of the protocols; seed 001, "Examples" (synthetic textures).
    """
    n_per_class = check_int(n_per_class, "n_per_class", minimum=1)
    rng = check_rng(rng)
    labels = _grouped_labels(n_per_class, len(TEXTURE_CLASSES))
    images = np.stack([_one_texture(int(kind), rng) for kind in labels])
    return images, labels


def random_filter_features(images, n_filters=32, size=5, seed=1000, *, chunk=256):
    """A frozen, untrained representation: random filters, ReLU, average pooling.

    The filters ``W_f`` (``f = 1..n_filters``, each ``size x size``) are standard
    normal draws from ``numpy.random.default_rng(seed)``, shifted to zero mean and
    scaled to unit Frobenius norm. Feature ``f`` of an image ``I`` is

    ``h_f = mean_{i,j} max(0, sum_{a,b} I[i+a, j+b] W_f[a, b])``

    over all valid positions (no padding), i.e. a ReLU of the cross-correlation,
    globally averaged. The same ``seed`` always gives the same encoder.

    Parameters
    ----------
    images : array_like of shape (n, H, W)
        Grey images with ``H, W >= size``.
    n_filters : int
        Number of filters (feature dimension), ``>= 1``.
    size : int
        Filter side length, ``>= 2``.
    seed : int
        Seed of the filter bank (not of the data).
    chunk : int
        Images processed at once (memory bound only; the result does not depend on it).

    Returns
    -------
    numpy.ndarray of float64, shape (n, n_filters)
        Non-negative features.

    Notes
    -----
    Seed 001, "Examples" (32 random 5 x 5 filters, zero mean, unit norm, ReLU,
    global average pooling; nothing is trained).
    """
    images = as_float_array(images, "images", ndim=3)
    n_filters = check_int(n_filters, "n_filters", minimum=1)
    size = check_int(size, "size", minimum=2)
    chunk = check_int(chunk, "chunk", minimum=1)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    if images.shape[1] < size or images.shape[2] < size:
        raise ValueError(
            f"images must be at least {size} x {size} pixels for size={size}, got shape "
            f"{images.shape}"
        )
    filters = np.random.default_rng(int(seed)).standard_normal((n_filters, size, size))
    filters -= filters.mean(axis=(1, 2), keepdims=True)
    filters /= np.linalg.norm(filters.reshape(n_filters, -1), axis=1)[:, None, None]

    out = np.empty((images.shape[0], n_filters))
    for start in range(0, images.shape[0], chunk):
        windows = sliding_window_view(images[start : start + chunk], (size, size), axis=(1, 2))
        responses = np.einsum("nijab,fab->nijf", windows, filters, optimize=True)
        out[start : start + chunk] = np.maximum(responses, 0.0).mean(axis=(1, 2))
    return out


def feature_transforms(d, seed):
    """Five fixed, exactly invertible changes of coordinates of ``R^d``.

    Returns functions ``F -> G`` acting on feature matrices of shape ``(n, d)``
    (rows are feature vectors); the same ``seed`` gives the same maps.

    * ``"rotation"``: ``G = F Q^T`` with ``Q`` a Haar-random orthogonal matrix.
    * ``"scale"``: ``G = 10 F``.
    * ``"translation"``: ``G = F + t`` with ``t ~ N(0, 0.05^2 I)``.
    * ``"diagonal"``: ``G = F diag(10^u)`` with ``u_j ~ U[-2, 2]`` per feature.
    * ``"dense"``: ``G = F A^T`` with ``A = U diag(10^v) V^T``, ``U, V`` Haar-random
      orthogonal and ``v_j ~ U[-1, 1]`` (singular values between 0.1 and 10).

    Parameters
    ----------
    d : int
        Feature dimension, ``>= 1``.
    seed : int or numpy.random.Generator
        Random source of the maps.

    Returns
    -------
    dict
        ``{"rotation", "scale", "translation", "diagonal", "dense"}`` -> callable
        taking an array of shape ``(n, d)`` and returning a new float64 array of the
        same shape (input validated, never modified).

    Notes
    -----
    Seed 001, "Examples" (the five fixed maps) and the invariance table before it.
    """
    d = check_int(d, "d", minimum=1)
    rng = check_rng(seed, "seed")
    rotation = _orthonormal_columns(rng, d, d)
    shift = rng.normal(0.0, 0.05, size=d)
    diagonal = 10.0 ** rng.uniform(-2.0, 2.0, size=d)
    left, right = _orthonormal_columns(rng, d, d), _orthonormal_columns(rng, d, d)
    dense = (left * 10.0 ** rng.uniform(-1.0, 1.0, size=d)) @ right.T

    def checked(F):
        F = as_float_array(F, "F")
        if F.shape[1] != d:
            raise ValueError(f"F must have {d} columns (the d of these maps), got shape {F.shape}")
        return F

    return {
        "rotation": lambda F: checked(F) @ rotation.T,
        "scale": lambda F: 10.0 * checked(F),
        "translation": lambda F: checked(F) + shift,
        "diagonal": lambda F: checked(F) * diagonal,
        "dense": lambda F: checked(F) @ dense.T,
    }
