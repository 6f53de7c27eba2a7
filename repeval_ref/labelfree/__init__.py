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

# each name imported here is exported by __all__, built from the submodules' own lists
from . import (
    eigenvalue_metrics,
    intrinsic_dimension,
    relational,
    spectral,
    spectrum,
    sphere,
    summary,
    synthetic,
)
from ._streaming import Moments, accumulate_moments  # noqa: F401
from .eigenvalue_metrics import (  # noqa: F401
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
from .intrinsic_dimension import TwoNNBatched, two_nn_id, two_nn_id_batched, unique_row_order  # noqa: F401
from .relational import diffusion_spectral_entropy, self_cluster, self_cluster_of_gram  # noqa: F401
from .spectral import (  # noqa: F401
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
from .spectrum import (  # noqa: F401
    FeatureSingularValues,
    covariance_spectrum,
    feature_singular_values,
    gram_spectrum,
    is_in_memory,
    singular_values,
    singular_values_from_gram,
)
from .sphere import (  # noqa: F401
    alignment,
    mean_pairwise_cosine,
    mean_pairwise_cosine_of_sum,
    uniformity,
    unit_coordinate_std,
    unit_moments,
    unit_row_transform,
)
from .summary import label_free_summary  # noqa: F401
from .synthetic import power_law_spectrum, sample_features_with_spectrum  # noqa: F401

__all__ = [
    # streamed first and second moments of rows (features too large to hold twice)
    "Moments",
    "accumulate_moments",
    *eigenvalue_metrics.__all__,  # metrics of a spectrum
    *spectrum.__all__,  # features -> spectrum
    *spectral.__all__,  # spectral metrics of features
    *sphere.__all__,  # the unit sphere
    *relational.__all__,  # relational metrics
    *intrinsic_dimension.__all__,  # intrinsic dimension
    *synthetic.__all__,  # synthetic spectra
    *summary.__all__,  # one-pass summary
]
