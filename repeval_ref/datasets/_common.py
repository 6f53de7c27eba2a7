"""Label layouts and random bases shared by the synthetic generators.

Private to :mod:`repeval_ref.datasets`: the generators of :mod:`.toy`, :mod:`.textures`
and :mod:`.setups` build their labels and random orthonormal bases with these helpers,
so that the row-order conventions described in the package docstring hold everywhere.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

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

