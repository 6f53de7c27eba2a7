"""Helpers shared inside :mod:`repeval_ref.datasets`.

Private to the package. The generators of :mod:`.toy`, :mod:`.textures` and
:mod:`.setups` build their labels and random orthonormal bases with the first three
helpers, so that the row-order conventions described in the package docstring hold
everywhere. The loaders of the transfer suite (:mod:`.handwritten`, :mod:`.transfer`)
share the stratified draws, the content digest and the error raised when a data set
is not installed.
"""

from __future__ import annotations

import hashlib

import numpy as np
from scipy import stats


class DataNotInstalledError(FileNotFoundError):
    """A data set's files are not on this machine; the message says what to install.

    A subclass of ``FileNotFoundError``; its message is a single line.
    """


def _cycled_labels(n, n_classes):
    """Labels 0, 1, ..., K-1, 0, 1, ... of length ``n`` (int64)."""
    return np.arange(n, dtype=np.int64) % n_classes


def _grouped_labels(n_per_class, n_classes):
    """Labels 0 repeated ``n_per_class`` times, then 1, ... (int64)."""
    return np.repeat(np.arange(n_classes, dtype=np.int64), n_per_class)


def _orthonormal_columns(rng, d, k):
    """A ``(d, k)`` matrix with orthonormal columns, uniformly distributed (Haar)."""
    q = stats.ortho_group.rvs(d, random_state=rng) if d > 1 else np.ones((1, 1))
    return np.asarray(q[:, :k], dtype=np.float64)


def _stratified_choice(labels, n, rng):
    """Sorted indices of a stratified sample of ``n`` rows of ``labels`` (no replacement).

    Class ``c`` (``n_c`` rows out of ``N``) gets ``floor(n n_c / N)`` rows, and the
    ``n - sum floor(.)`` rows left over go to the classes with the largest remainders
    (ties to the smaller label). Within each class, in increasing label order, the rows
    are the first ones of ``rng.permutation`` of that class's row indices.
    """
    labels = np.asarray(labels)
    classes, counts = np.unique(labels, return_counts=True)
    total = int(counts.sum())
    numerators = n * counts
    quota = numerators // total
    remainder = numerators - quota * total
    extra = n - int(quota.sum())
    # largest remainder first; a stable sort keeps the smaller label first among ties
    quota[np.argsort(-remainder, kind="stable")[:extra]] += 1
    chosen = []
    for c, q in zip(classes, quota):
        rows = np.flatnonzero(labels == c)
        chosen.append(rng.permutation(rows)[:q])
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def _stratified_split(labels, n_test, seed):
    """Train and test row indices (each sorted) with ``n_test`` test rows, stratified.

    The test rows are :func:`_stratified_choice` with ``numpy.random.default_rng(seed)``;
    every other row is a training row.
    """
    test = _stratified_choice(labels, n_test, np.random.default_rng(seed))
    train = np.setdiff1d(np.arange(len(labels), dtype=np.int64), test, assume_unique=True)
    return train, test


def _content_sha256(*pairs):
    """SHA-256 of ``(images, labels)`` pairs: for each pair in turn, the images' uint8
    bytes in C order, then the labels as little-endian 64-bit integers."""
    h = hashlib.sha256()
    for images, labels in pairs:
        h.update(np.ascontiguousarray(images, dtype=np.uint8).tobytes())
        h.update(np.ascontiguousarray(labels, dtype="<i8").tobytes())
    return h.hexdigest()


def _check_content_sha256(pair, expected, what, cause):
    """Raise ValueError unless the :func:`_content_sha256` of ``pair`` is ``expected``.

    ``pair`` is one ``(images, labels)`` pair; the message names ``what`` was checked
    (``"task 'fashion' test"``) and the likely ``cause`` of a mismatch.
    """
    digest = _content_sha256(pair)
    if digest != expected:
        raise ValueError(
            f"{what}: SHA-256 of its content is {digest[:16]}..., expected {expected[:16]}... "
            f"({cause})"
        )
