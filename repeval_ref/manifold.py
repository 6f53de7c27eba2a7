"""Manifold label-free metric at scale: the TwoNN dimension averaged over batches.

Seed 002, section 3.3 and appendix B.2: the TwoNN estimate of Facco et al. (2017)
(:func:`repeval_ref.labelfree.two_nn_id`) needs nearest neighbours, an
:math:`O(N^2 d)` search; 002 computes it on batches of ``N_b`` samples and averages
the per-batch estimates, reporting the spread across batches as the estimation noise.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .labelfree._streaming import is_batch_iterator, iter_batches
from ._validation import as_float_array, check_int, check_rng
from .labelfree.intrinsic_dimension import two_nn_id

__all__ = ["two_nn_id_batched", "TwoNNBatched"]

TwoNNBatched = namedtuple("TwoNNBatched", ["mean", "std", "estimates"])
TwoNNBatched.__doc__ = """Result of :func:`two_nn_id_batched`.

mean : float
    Average of the per-batch TwoNN estimates.
std : float or None
    Their sample standard deviation (``ddof=1``); ``None`` with a single batch.
estimates : numpy.ndarray of shape (n_batches,)
    The per-batch estimates.
"""


def two_nn_id_batched(X, batch_size=2000, rng=None):
    """TwoNN intrinsic dimension averaged over disjoint random batches (as in 002).

    The rows are shuffled with ``rng`` and cut into
    :math:`B = \\max(1, \\lfloor N / N_b \\rfloor)` disjoint batches of
    :math:`\\lfloor N/B \\rfloor` or :math:`\\lceil N/B \\rceil` rows (every row is used
    once; each batch has at least ``N_b`` rows unless ``N < N_b``). On each batch
    :math:`\\hat d_b = n_b / \\sum_{i \\in b} \\log(r_{2,i} / r_{1,i})` with
    neighbours searched *within the batch*
    (:func:`repeval_ref.labelfree.two_nn_id`); the result is the mean of the
    :math:`\\hat d_b` and their standard deviation across batches.

    Smaller batches make the neighbours farther apart, which changes the scale at
    which the dimension is measured: compare models with the same ``batch_size``.
    Cost :math:`O(N N_b d)` instead of :math:`O(N^2 d)`. When ``X`` is an iterator,
    each batch it yields is used as one TwoNN batch (no shuffling; ``batch_size`` and
    ``rng`` are ignored). Not centred (distances only). Seed 002, sections 3.3 and B.2.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Points; every batch needs at least 3 rows and no duplicate points.
    batch_size : int, default 2000
        ``N_b``, ``>= 3``.
    rng : numpy.random.Generator or int, optional
        Source of the shuffle.

    Returns
    -------
    TwoNNBatched
        ``(mean, std, estimates)``; ``std`` is ``None`` when there is one batch.
    """
    if is_batch_iterator(X):
        estimates = [two_nn_id(b) for b in iter_batches(X, "X")]
    else:
        batch_size = check_int(batch_size, "batch_size", minimum=3)
        rng = check_rng(rng)
        if not isinstance(X, np.ndarray):
            X = as_float_array(X, "X", ndim=2)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
        n = X.shape[0]
        if n < 3:
            raise ValueError(f"X needs at least 3 rows, got shape {X.shape}")
        n_batches = max(1, n // batch_size)
        perm = rng.permutation(n)
        estimates = []
        for part in np.array_split(perm, n_batches):
            rows = np.asarray(X[np.sort(part)])
            estimates.append(two_nn_id(as_float_array(rows, "X", ndim=2)))
    est = np.asarray(estimates, dtype=float)
    std = float(np.std(est, ddof=1)) if est.shape[0] > 1 else None
    return TwoNNBatched(float(est.mean()), std, est)
