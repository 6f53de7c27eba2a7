"""Every streamed label-free metric from two passes over the features.

Each public metric of :mod:`repeval_ref.spectral`, :mod:`repeval_ref.geometry` and
:mod:`repeval_ref.relational` reads the features once. For a large memory-mapped file
(seed 002 computes its metrics on up to ImageNet-size sets) :func:`label_free_summary`
reads them only twice:

1. the float64 mean and centred scatter of the rows (:mod:`repeval_ref._streaming`),
   which give both the centred and the uncentred d x d Gram matrix and hence every
   spectral and covariance-geometry metric;
2. the same moments of the unit-normalised rows, which give Self-Cluster
   (their uncentred Gram matrix) and the mean pairwise cosine (their sum).

Memory is :math:`O(d^2)` plus one row block; time :math:`O(N d^2)`.
"""
from __future__ import annotations

import numpy as np

from . import intrinsic_dimension as labelfree, relational, spectral, sphere as geometry
from ._streaming import accumulate_moments, gram_eigenvalues, is_batch_iterator
from .._validation import as_float_array

__all__ = ["label_free_summary"]


def label_free_summary(X, fit_range=(10, 0.9), threshold=0.9):
    """All streamed label-free metrics of ``X`` in two passes, with the conventions used.

    The values equal those of the individual functions up to rounding. RankMe and the
    condition number take the same route as :func:`repeval_ref.rankme` and
    :func:`repeval_ref.condition_number`: for an in-memory array the singular values
    of an SVD of ``X`` (which needs a float64 copy of ``X``; pass a memory map to
    avoid it), for a ``numpy.memmap`` the streamed Gram matrix (whose
    condition number is resolved only up to about ``1 / sqrt(d * eps)``, with a
    ``RuntimeWarning`` at that limit):

    ==========================  ==========================================  ========
    key                         function                                    centred
    ==========================  ==========================================  ========
    ``rankme``                  :func:`repeval_ref.rankme`                  no
    ``rankme_normalized``       :func:`repeval_ref.rankme_normalized`       no
    ``alpha_req``               :func:`repeval_ref.alpha_req`               yes
    ``ne_sum``                  :func:`repeval_ref.ne_sum`                  yes
    ``stable_rank``             :func:`repeval_ref.stable_rank`             no
    ``condition_number``        :func:`repeval_ref.condition_number`        no
    ``participation_ratio``     :func:`repeval_ref.participation_ratio`     yes
    ``explained_variance_dim``  :func:`repeval_ref.explained_variance_dimension`  yes
    ``isotropy_ratio``          :func:`repeval_ref.isotropy_ratio`          yes
    ``self_cluster``            :func:`repeval_ref.self_cluster`            no (unit rows)
    ``mean_pairwise_cosine``    :func:`repeval_ref.mean_pairwise_cosine`    no (unit rows)
    ==========================  ==========================================  ========

    A metric that is undefined for these features (for example alpha-ReQ when the
    covariance has zero eigenvalues inside ``fit_range``, or the relational metrics
    when a row is zero) is reported as ``None`` and its reason is stored under
    ``"notes"``.

    Parameters
    ----------
    X : array_like of shape (n, d) or numpy.memmap
        Features. An iterator cannot be read twice, so it is not accepted here; use
        the single metrics, or pass a memory map.
    fit_range : pair, default (10, 0.9)
        See :func:`repeval_ref.alpha_req`.
    threshold : float, default 0.9
        See :func:`repeval_ref.explained_variance_dimension`.

    Returns
    -------
    dict
        Metric name -> float, int or None; plus ``"n"``, ``"d"`` and ``"notes"``
        (metric name -> reason for each ``None``).
    """
    if is_batch_iterator(X):
        raise TypeError("label_free_summary reads X twice; pass an array or a numpy.memmap, "
                        "not an iterator")
    spectral._check_fit_range(fit_range)
    mom = accumulate_moments(X, "X")
    n, d = mom.n, mom.d
    centred = gram_eigenvalues(mom.gram(True))
    raw = gram_eigenvalues(mom.gram(False))
    out, notes = {"n": n, "d": d}, {}

    def put(name, fn):
        try:
            out[name] = fn()
        except ValueError as exc:
            out[name] = None
            notes[name] = str(exc)

    if spectral._in_memory(X):  # in memory: the singular values of an SVD, as the single metrics
        sigma = labelfree._singular_values(as_float_array(X, "X", ndim=2))

        def kappa_value():
            return spectral._kappa_from_singular_values(sigma, (n, d), None, "X")
    else:
        sigma = labelfree._sigma_from_gram(raw, n)

        def kappa_value():
            return spectral._kappa_from_spectrum(raw, None, "X", n=n)

    def rankme_value():
        return labelfree._rankme_from_sigma(sigma, False, 1e-7)

    put("rankme", rankme_value)
    put("rankme_normalized", lambda: rankme_value() / d)
    put("alpha_req", lambda: spectral._alpha_from_spectrum(centred, fit_range, "the covariance of X"))

    def ratio(lam, what):
        spectral._nonzero_spectrum(lam, what)
        return float(lam.sum() / lam[0])

    put("ne_sum", lambda: ratio(centred, "the covariance of X"))
    put("stable_rank", lambda: ratio(raw, "X"))
    put("condition_number", kappa_value)

    def geo(fn, *extra):
        spectral._nonzero_spectrum(centred, "the covariance of X")
        return fn(centred, *extra)

    put("participation_ratio", lambda: geo(geometry._pr_from_spectrum))
    put("explained_variance_dim", lambda: geo(geometry._evd_from_spectrum, threshold))
    put("isotropy_ratio", lambda: geo(geometry._isotropy_from_spectrum))

    try:
        unit = accumulate_moments(X, "X", transform=relational._unit_batch("X"))
    except ValueError as exc:
        for name in ("self_cluster", "mean_pairwise_cosine"):
            out[name] = None
            notes[name] = str(exc)
    else:
        G = unit.gram(False)
        F = float(np.sum(G * G))
        if n >= 2 and d >= 2:
            out["self_cluster"] = float((d * F - n * (d + n - 1)) / ((d - 1) * (n - 1) * n))
        else:
            out["self_cluster"] = None
            notes["self_cluster"] = "needs at least 2 rows and 2 columns"
        if n >= 2:
            s = unit.mean * n
            value = (float(s @ s) - n) / (n * (n - 1.0))
            out["mean_pairwise_cosine"] = float(min(1.0, max(-1.0 / (n - 1), value)))
        else:
            out["mean_pairwise_cosine"] = None
            notes["mean_pairwise_cosine"] = "needs at least 2 rows"
    out["notes"] = notes
    return out
