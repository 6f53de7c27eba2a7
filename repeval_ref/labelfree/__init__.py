"""Label-free measures of a representation: metrics of features that need no labels.

Book: ``book/rankme.md`` ("Measuring a representation without labels"); seed 000,
seed 002 (section 3: spectral, relational and manifold metrics; section 4.1: their
sensitivity) and seed 003 (section 5: intrinsic geometry). They are the checks the book
recommends for a run where no labelled data exist yet. The modules are organised by
what they compute, each layer built on the public functions of the ones before it:

* :mod:`~repeval_ref.labelfree.eigenvalue_metrics`: metrics of one spectrum, a list
  of eigenvalues or singular values (RankMe, alpha-ReQ and reptrix's weighted fit,
  NE-sum, stable rank, condition number, participation ratio, explained-variance
  dimension, isotropy; :func:`spectrum_metrics` for 002's sensitivity study);
* :mod:`~repeval_ref.labelfree.spectrum`: from features to their spectrum (SVD
  singular values, streamed Gram and covariance eigenvalues, centring);
* :mod:`~repeval_ref.labelfree.spectral`: the spectral metrics of a feature matrix,
  each one spectrum followed by one metric of it (with reptrix's conventions beside
  the papers');
* :mod:`~repeval_ref.labelfree.sphere`: metrics of the unit-normalised rows (mean
  pairwise cosine, alignment, uniformity, per-coordinate spread);
* :mod:`~repeval_ref.labelfree.relational`: Self-Cluster and the diffusion spectral
  entropy;
* :mod:`~repeval_ref.labelfree.intrinsic_dimension`: the TwoNN dimension and its
  batched form;
* :mod:`~repeval_ref.labelfree.synthetic`: power-law spectra and features with a given
  spectrum;
* :mod:`~repeval_ref.labelfree.summary`: every streamed metric in two passes;
* :mod:`~repeval_ref.labelfree._streaming` (row batches and float64 moments) and
  :mod:`~repeval_ref.labelfree._symeig` (two-stage symmetric eigenvalues), the
  machinery underneath.

Every public function is importable from here (``from repeval_ref.labelfree import
rankme``) and the original ones from the top level (``repeval_ref.rankme``).
"""

from __future__ import annotations

from ._streaming import Moments, accumulate_moments
from .eigenvalue_metrics import (
    alpha_req_of_spectrum,
    alpha_req_weighted_of_spectrum,
    check_fit_range,
    check_spectrum,
    condition_number_of_gram_spectrum,
    condition_number_of_spectrum,
    explained_variance_dimension_of_spectrum,
    fit_range_indices,
    gram_rounding_level,
    isotropy_ratio_of_spectrum,
    ne_sum_of_spectrum,
    participation_ratio_of_spectrum,
    rankme_of_spectrum,
    spectrum_metrics,
    stable_rank_of_spectrum,
)
from .intrinsic_dimension import TwoNNBatched, two_nn_id, two_nn_id_batched, unique_row_order
from .relational import diffusion_spectral_entropy, self_cluster, self_cluster_of_gram
from .spectral import (
    alpha_req,
    alpha_req_weighted,
    condition_number,
    explained_variance_dimension,
    isotropy_ratio,
    ne_sum,
    participation_ratio,
    rankme,
    rankme_normalized,
    rankme_squared_shares,
    stable_rank,
)
from .spectrum import (
    FeatureSingularValues,
    covariance_spectrum,
    feature_singular_values,
    gram_spectrum,
    is_in_memory,
    singular_values,
    singular_values_from_gram,
)
from .sphere import (
    alignment,
    mean_pairwise_cosine,
    mean_pairwise_cosine_of_sum,
    uniformity,
    unit_coordinate_std,
    unit_moments,
    unit_row_transform,
)
from .summary import label_free_summary
from .synthetic import power_law_spectrum, sample_features_with_spectrum

__all__ = [
    # streamed first and second moments of rows (features too large to hold twice)
    "Moments",
    "accumulate_moments",
    # metrics of a spectrum
    "check_spectrum",
    "gram_rounding_level",
    "check_fit_range",
    "fit_range_indices",
    "rankme_of_spectrum",
    "alpha_req_of_spectrum",
    "alpha_req_weighted_of_spectrum",
    "stable_rank_of_spectrum",
    "ne_sum_of_spectrum",
    "condition_number_of_spectrum",
    "condition_number_of_gram_spectrum",
    "participation_ratio_of_spectrum",
    "explained_variance_dimension_of_spectrum",
    "isotropy_ratio_of_spectrum",
    "spectrum_metrics",
    # features -> spectrum
    "is_in_memory",
    "singular_values",
    "singular_values_from_gram",
    "feature_singular_values",
    "FeatureSingularValues",
    "gram_spectrum",
    "covariance_spectrum",
    # spectral metrics of features
    "rankme",
    "rankme_normalized",
    "rankme_squared_shares",
    "alpha_req",
    "alpha_req_weighted",
    "ne_sum",
    "stable_rank",
    "condition_number",
    "participation_ratio",
    "explained_variance_dimension",
    "isotropy_ratio",
    # the unit sphere
    "unit_row_transform",
    "unit_moments",
    "mean_pairwise_cosine_of_sum",
    "mean_pairwise_cosine",
    "alignment",
    "uniformity",
    "unit_coordinate_std",
    # relational metrics
    "self_cluster",
    "self_cluster_of_gram",
    "diffusion_spectral_entropy",
    # intrinsic dimension
    "two_nn_id",
    "two_nn_id_batched",
    "TwoNNBatched",
    "unique_row_order",
    # synthetic spectra
    "power_law_spectrum",
    "sample_features_with_spectrum",
    # one-pass summary
    "label_free_summary",
]
