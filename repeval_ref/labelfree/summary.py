"""Every streamed label-free metric from two passes over the features.

Book: ``book/rankme.md`` (label-free checks); seed 002, section 3 (spectral and
relational metrics) and seed 003, section 5 (covariance geometry). Each public metric
of :mod:`repeval_ref.labelfree.spectral`, :mod:`repeval_ref.labelfree.sphere` and
:mod:`repeval_ref.labelfree.relational` reads the features once. For a large
memory-mapped file (seed 002 computes its metrics on up to ImageNet-size sets)
:func:`label_free_summary` reads them only twice:

1. the float64 mean and centred scatter of the rows
   (:mod:`repeval_ref.labelfree._streaming`), which give both the centred and the
   uncentred d x d Gram matrix and hence every spectral and covariance-geometry metric
   (:mod:`repeval_ref.labelfree.eigenvalue_metrics` of their eigenvalues);
2. the same moments of the unit-normalised rows
   (:func:`~repeval_ref.labelfree.sphere.unit_moments`), which give Self-Cluster
   (their uncentred Gram matrix) and the mean pairwise cosine (their sum).

Memory is :math:`O(d^2)` plus one row block; time :math:`O(N d^2)`. Only the public
functions of those modules are used, so the summary computes each metric exactly as
the single function does.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array
from . import eigenvalue_metrics as spec
from ._streaming import accumulate_moments, is_batch_iterator
from .relational import self_cluster_of_gram
from .spectrum import is_in_memory, singular_values, singular_values_from_gram
from .sphere import mean_pairwise_cosine_of_sum, unit_moments

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
        raise TypeError(
            "label_free_summary reads X twice; pass an array or a numpy.memmap, not an iterator"
        )
    spec.check_fit_range(fit_range)
    mom = accumulate_moments(X, "X")
    n, d = mom.n, mom.d
    centred = mom.eigenvalues(True)
    raw = mom.eigenvalues(False)
    out, notes = {"n": n, "d": d}, {}

    def put(name, fn):
        try:
            out[name] = fn()
        except ValueError as exc:
            out[name] = None
            notes[name] = str(exc)

    if is_in_memory(X):  # in memory: the singular values of an SVD, as the single metrics
        sigma = singular_values(as_float_array(X, "X", ndim=2))

        def kappa_value():
            rtol = max(n, d) * np.finfo(float).eps  # the SVD's rank tolerance, as condition_number
            return spec.condition_number_of_spectrum(sigma, rtol, name="X")
    else:
        sigma = singular_values_from_gram(raw, n)

        def kappa_value():
            return spec.condition_number_of_gram_spectrum(raw, n, name="X")

    cov = "the covariance of X"
    put("rankme", lambda: spec.rankme_of_spectrum(sigma, 1e-7, name="X"))
    put("rankme_normalized", lambda: spec.rankme_of_spectrum(sigma, 1e-7, name="X") / d)
    put("alpha_req", lambda: spec.alpha_req_of_spectrum(centred, fit_range, name=cov))
    put("ne_sum", lambda: spec.ne_sum_of_spectrum(centred, name=cov))
    put("stable_rank", lambda: spec.stable_rank_of_spectrum(raw, name="X"))
    put("condition_number", kappa_value)
    put("participation_ratio", lambda: spec.participation_ratio_of_spectrum(centred, name=cov))
    put(
        "explained_variance_dim",
        lambda: spec.explained_variance_dimension_of_spectrum(centred, threshold, name=cov),
    )
    put("isotropy_ratio", lambda: spec.isotropy_ratio_of_spectrum(centred, name=cov))

    try:
        unit = unit_moments(X, "X")
    except ValueError as exc:
        for name in ("self_cluster", "mean_pairwise_cosine"):
            out[name] = None
            notes[name] = str(exc)
    else:
        if n >= 2 and d >= 2:
            out["self_cluster"] = self_cluster_of_gram(unit.gram(False), n)
        else:
            out["self_cluster"] = None
            notes["self_cluster"] = "needs at least 2 rows and 2 columns"
        if n >= 2:
            out["mean_pairwise_cosine"] = mean_pairwise_cosine_of_sum(unit.mean * n, n)
        else:
            out["mean_pairwise_cosine"] = None
            notes["mean_pairwise_cosine"] = "needs at least 2 rows"
    out["notes"] = notes
    return out
