"""repeval_ref: the reference package of the repeval course.

Every formula of the book lives once, here, in the module named after the concept it
belongs to; the book calls these functions to compute its numbers and the autograder
compares students' functions with them.

Public functions are importable from the top level (``from repeval_ref import
knn_classify``). The import is lazy: a submodule (and heavy dependencies such as
PyTorch or scikit-learn) is loaded the first time one of its names is used.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> submodule that defines it
_EXPORTS = {
    # protocols with labels
    "knn_classify": "knn",
    "knn_classify_curve": "knn",
    "merge_topk": "shard_merge",
    "linear_probe_done_right": "linear_probe",
    "probe_accuracy_grid": "linear_probe",
    "linear_probe_warm_path": "linear_probe",
    "f1_scores": "f1",
    "holm": "multiple_testing",
    "benjamini_hochberg": "multiple_testing",
    "task_ranks": "rank_agreement",
    "mean_rank": "rank_agreement",
    "kendall_tau_b": "rank_agreement",
    "tau_b_matrix": "rank_agreement",
    "rank_bootstrap": "rank_agreement",
    "ridge_probe": "ridge",
    "ridge_loo": "ridge",
    "loo_scores": "ridge",
    "attentive_probe": "attentive",
    "attentive_probe_param_count": "attentive",
    "linear_probe_param_count": "attentive",
    "low_shot_eval": "lowshot",
    "transfer": "lpft_theory",
    "prediction_error": "lpft_theory",
    "layerwise_lr": "lpft_theory",
    "layerwise_lr_scales": "lpft_theory",
    # BatchNorm folding and the rank bound
    "fold_batchnorm": "batchnorm",
    "unfold_batchnorm": "batchnorm",
    # PyTorch reference loop (repeval_ref.torch)
    "frozen_features": "torch",
    "carve_validation": "torch.tuning",
    "train_with_validation": "torch.tuning",
    "select_on_validation": "torch.tuning",
    "rank_bound": "probe_rank",
    "soft_rank_floor": "probe_rank",
    "norm_constrained_residual": "probe_rank",
    # honest error bars
    "wilson_interval": "uncertainty",
    "mcnemar_exact": "uncertainty",
    "paired_bootstrap_ci": "uncertainty",
    "binomial_standard_error": "uncertainty",
    "paired_standard_error": "uncertainty",
    "expected_max_of_normals": "uncertainty",
    "item_bootstrap_ci": "uncertainty",
    "paired_item_bootstrap_ci": "uncertainty",
    "paired_comparison": "uncertainty",
    "prediction_verdict": "uncertainty",
    "paired_sample_size": "power",
    "paired_detectable_difference": "power",
    "discordance_upper_bound": "power",
    "unpaired_detectable_difference": "power",
    # checks that must be able to fail: artifact tokens, where a probe looks
    "token_norm_ratios": "artifacts",
    "high_norm_tokens": "artifacts",
    "attention_mass_ratio": "attention_mass",
    "tile_iou_counts": "segmentation",
    "mean_iou": "segmentation",
    "region_bootstrap_miou": "segmentation",
    # label-free metrics, retrieval, similarity
    "rankme": "labelfree.spectral",
    "two_nn_id": "labelfree.intrinsic_dimension",
    "retrieval_metrics": "retrieval",
    "ranking_metrics": "retrieval",
    "precision_at_k": "retrieval",
    "ir_evaluator_metrics": "retrieval",
    "linear_cka": "cka",
    "rbf_cka": "cka",
    "hsic_unbiased": "cka",
    "minibatch_cka": "cka",
    "MinibatchCKA": "cka",
    "cka_matrix": "cka",
    "rankme_normalized": "labelfree.spectral",
    "gram_spectrum": "labelfree.spectrum",
    "alpha_req": "labelfree.spectral",
    "ne_sum": "labelfree.spectral",
    "stable_rank": "labelfree.spectral",
    "condition_number": "labelfree.spectral",
    "power_law_spectrum": "labelfree.synthetic",
    "sample_features_with_spectrum": "labelfree.synthetic",
    "self_cluster": "labelfree.relational",
    "diffusion_spectral_entropy": "labelfree.relational",
    "two_nn_id_batched": "labelfree.intrinsic_dimension",
    "participation_ratio": "labelfree.spectral",
    "explained_variance_dimension": "labelfree.spectral",
    "isotropy_ratio": "labelfree.spectral",
    "mean_pairwise_cosine": "labelfree.sphere",
    "alignment": "labelfree.sphere",
    "uniformity": "labelfree.sphere",
    "label_free_summary": "labelfree.summary",
    "spectrum_metrics": "labelfree.eigenvalue_metrics",
    "rankme_squared_shares": "labelfree.spectral",
    "alpha_req_weighted": "labelfree.spectral",
    "unit_coordinate_std": "labelfree.sphere",
}

__all__ = sorted(_EXPORTS) + ["datasets"]


def __getattr__(name):
    if name == "datasets":
        return importlib.import_module(".datasets", __name__)
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'repeval_ref' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
