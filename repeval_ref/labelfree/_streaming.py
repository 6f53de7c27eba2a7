"""Row batches of a feature matrix, and the float64 moments accumulated over them.

Book: ``book/rankme.md`` (label-free checks on features too large for memory).

The label-free metrics of seed 002 (section 3) need only the d x d second-moment matrix
of the features (or of their unit-normalised rows), never an N x N matrix. This module
reads a feature matrix in row batches, so that ``N`` may exceed the memory:

* an in-memory array, a ``numpy.memmap`` or a ``np.load(..., mmap_mode="r")`` array is
  cut into consecutive row blocks of bounded size (each block is converted to float64
  on its own, so a float32 memory map is never copied whole, and the map's pages are
  released after each block: :func:`repeval_ref._blocks.release_pages`);
* any iterator (a generator, ``iter(list_of_batches)``, a data loader) is read batch
  by batch; every batch must be a 2-D array with the same number of columns.

A list or tuple is taken as a nested array of rows, not as a list of batches: wrap a
list of batches in ``iter(...)``.

Moments are merged with the pairwise update of Chan, Golub and LeVeque (1979): each
batch contributes its own mean and centred scatter, so the centred covariance is never
formed as the difference of two large numbers.
"""

from __future__ import annotations

import collections.abc
from dataclasses import dataclass

import numpy as np

from .._blocks import release_pages
from .._validation import as_float_array

# target size of one float64 block read from an array (bytes)
_BLOCK_BYTES = 32 * 2**20


def is_batch_iterator(X):
    """True when ``X`` is an iterator of batches rather than one array."""
    return isinstance(X, collections.abc.Iterator)


def iter_batches(X, name="X", *, block_rows=None, transform=None):
    """Yield validated float64 row batches of ``X``.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of arrays (n_b, d)
        The features.
    name : str
        Argument name used in error messages.
    block_rows : int, optional
        Rows per block when ``X`` is an array (default: about 32 MB of float64).
    transform : callable, optional
        Applied to every validated batch (for example unit-normalising the rows);
        it receives the batch and the index of its first row.

    Yields
    ------
    numpy.ndarray of float64, shape (n_b, d)
        Each batch; ``ValueError`` is raised for NaN/inf, a wrong number of
        dimensions, a batch whose width differs from the first, or no rows at all.
    """
    if is_batch_iterator(X):
        source = _from_iterator(X, name)
    else:
        source = _from_array(X, name, block_rows)
    d = None
    start = 0
    for batch, label in source:
        if d is None:
            d = batch.shape[1]
        elif batch.shape[1] != d:
            raise ValueError(
                f"{label} has {batch.shape[1]} columns but earlier batches of {name} have {d}"
            )
        out = batch if transform is None else transform(batch, start)
        start += batch.shape[0]
        yield out
    if d is None or start == 0:
        raise ValueError(f"{name} holds no rows")


def _from_array(X, name, block_rows):
    if isinstance(X, (str, bytes)) or X is None:
        raise TypeError(
            f"{name} must be a numeric array or an iterator of batches, got {type(X).__name__}"
        )
    if not isinstance(X, np.ndarray):
        # array_like (lists, tensors): small enough to hold; validate it whole
        X = as_float_array(X, name, ndim=2)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional, got shape {X.shape}")
    n, d = X.shape
    if n == 0 or d == 0:
        raise ValueError(f"{name} has an empty axis, got shape {X.shape}")
    if block_rows is None:
        block_rows = max(1, _BLOCK_BYTES // (8 * d))
    for lo in range(0, n, block_rows):
        hi = min(n, lo + block_rows)
        label = name if (lo == 0 and hi == n) else f"{name} (rows {lo}..{hi - 1})"
        yield as_float_array(np.asarray(X[lo:hi]), label, ndim=2), label
        release_pages(X)  # a read-only memory map keeps about one block resident


def _from_iterator(X, name):
    for i, batch in enumerate(X):
        label = f"{name} batch {i}"
        yield as_float_array(batch, label, ndim=2), label


@dataclass(frozen=True)
class Moments:
    """Float64 first and second moments of ``n`` rows of dimension ``d``.

    Attributes
    ----------
    n : int
        Number of rows.
    mean : numpy.ndarray of shape (d,)
        Column means.
    scatter : numpy.ndarray of shape (d, d)
        Centred scatter matrix :math:`\\sum_i (x_i - \\bar x)(x_i - \\bar x)^\\top`.
    """

    n: int
    mean: np.ndarray
    scatter: np.ndarray

    @property
    def d(self):
        return int(self.mean.shape[0])

    def gram(self, center):
        """:math:`\\tilde X^\\top \\tilde X` with centred rows, or :math:`X^\\top X` without."""
        if center:
            return self.scatter
        return self.scatter + self.n * np.outer(self.mean, self.mean)

    def eigenvalues(self, center):
        """Eigenvalues of :meth:`gram`, largest first (:func:`gram_eigenvalues`)."""
        return gram_eigenvalues(self.gram(center))


def accumulate_moments(X, name="X", *, transform=None, block_rows=None):
    """Mean and centred scatter of the rows of ``X``, streamed in row batches.

    Memory is ``O(d^2 + block)``; the result does not depend on how the rows are
    batched (up to rounding).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
    name : str
        Argument name used in error messages.
    transform : callable, optional
        See :func:`iter_batches`.
    block_rows : int, optional
        See :func:`iter_batches`.

    Returns
    -------
    Moments
    """
    n = 0
    mean = None
    scatter = None
    for batch in iter_batches(X, name, block_rows=block_rows, transform=transform):
        nb = batch.shape[0]
        if nb == 0:
            continue
        mb = batch.mean(axis=0)
        cb = batch - mb
        sb = cb.T @ cb
        if mean is None:
            n, mean, scatter = nb, mb, sb
            continue
        delta = mb - mean
        total = n + nb
        scatter = scatter + sb + np.outer(delta, delta) * (n * nb / total)
        mean = mean + delta * (nb / total)
        n = total
    if mean is None:
        raise ValueError(f"{name} holds no rows")
    scatter = 0.5 * (scatter + scatter.T)
    return Moments(n=int(n), mean=mean, scatter=scatter)


def gram_eigenvalues(G):
    """Eigenvalues of a symmetric positive semi-definite matrix, largest first.

    Negative rounding residues are set to zero.
    """
    lam = np.linalg.eigvalsh(G)[::-1]
    return np.clip(lam, 0.0, None)
