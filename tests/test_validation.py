"""Bad input for every public function of ``repeval_ref``.

Table driven. ``VALID`` builds, for each public function, a small set of arguments on
which it succeeds. The tests then

* change one argument at a time to a bad value (mismatched length, wrong ndim,
  NaN or inf, empty, k < 1, tau <= 0, C <= 0, labels out of range, a zero vector to
  normalise, ...) and require a ``ValueError`` or ``TypeError`` whose message names
  that argument;
* call every function on its valid arguments and check that no input array was
  modified (both by comparing with copies and by passing read-only arrays) and that
  no NaN comes out.

The PyTorch loop (``frozen_features``), the validation search of fine-tuning
(``carve_validation``, ``train_with_validation``, ``select_on_validation``) and the
``MinibatchCKA`` accumulator class have their own bad-input tests in
``tests/test_torch_*.py`` and ``tests/test_cka*.py``,
and the generators of ``repeval_ref.datasets`` theirs in ``tests/test_datasets.py``
(the two that take arrays are checked for mutation at the end of this file).
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest

import repeval_ref as R

# ----------------------------------------------------------------------------- valid calls


def _rng(seed=0):
    return np.random.default_rng(seed)


def _feat(n, d, seed=0):
    return _rng(seed).normal(size=(n, d)) + 0.5


def _labels(n, k):
    return np.arange(n) % k


def _bits(seed, n=12):
    return _rng(seed).integers(0, 2, n)


VALID = {
    # protocols with labels
    "knn_classify": lambda: dict(
        train_h=_feat(10, 3),
        train_y=_labels(10, 3),
        test_h=_feat(4, 3, 1),
        k=3,
        tau=0.1,
        n_classes=3,
    ),
    "linear_probe_done_right": lambda: dict(
        train_h=_feat(30, 3),
        train_y=_labels(30, 2),
        test_h=_feat(10, 3, 1),
        test_y=_labels(10, 2),
        Cs=[0.1, 1.0],
        seed=0,
    ),
    "attentive_probe": lambda: dict(
        H=_rng(1).normal(size=(2, 5, 4)),
        q=_rng(2).normal(size=4),
        Wk=_feat(4, 4, 3),
        Wv=_feat(4, 4, 4),
        Wo=_feat(4, 4, 5),
        W_cls=_feat(4, 3, 6),
        n_heads=2,
        n_prefix=1,
    ),
    "attentive_probe_param_count": lambda: dict(d=8, n_heads=2, n_classes=3),
    "linear_probe_param_count": lambda: dict(d=8, n_classes=3, bias=True),
    "low_shot_eval": lambda: dict(
        train_h=_feat(20, 3),
        train_y=_labels(20, 2),
        test_h=_feat(6, 3, 1),
        test_y=_labels(6, 2),
        n_per_class=2,
        n_draws=3,
        rng=_rng(5),
    ),
    "transfer": lambda: dict(
        X=_feat(6, 4),
        y=_rng(1).normal(size=6),
        B0=_feat(2, 4, 2),
        v0=_rng(3).normal(size=2),
        lr=0.01,
        steps=3,
    ),
    "fold_batchnorm": lambda: dict(
        W=_feat(3, 2),
        b=_rng(1).normal(size=2),
        mu=_rng(2).normal(size=3),
        s=np.array([0.5, 1.0, 2.0]),
    ),
    "rank_bound": lambda: dict(H=_feat(12, 3), y=_labels(12, 4), n_classes=4),
    "soft_rank_floor": lambda: dict(H=_feat(12, 3), y=_labels(12, 4), n_classes=4, weight_norm=0.5),
    "norm_constrained_residual": lambda: dict(
        H=_feat(12, 3), y=_labels(12, 4), n_classes=4, weight_norm=0.5
    ),
    "ridge_probe": lambda: dict(
        train_h=_feat(12, 3), train_y=_labels(12, 3), test_h=_feat(4, 3, 1), lam=0.1
    ),
    "ridge_loo": lambda: dict(
        train_h=_feat(12, 3), train_y=_labels(12, 3), lams=np.array([0.0, 0.1, 1.0])
    ),
    "wilson_interval": lambda: dict(k=3, n=10),
    "mcnemar_exact": lambda: dict(a_correct=_bits(1), b_correct=_bits(2)),
    "paired_bootstrap_ci": lambda: dict(
        a_correct=_bits(1), b_correct=_bits(2), n_boot=20, rng=_rng(3), level=0.9
    ),
    "rankme": lambda: dict(Z=_feat(10, 4)),
    "two_nn_id": lambda: dict(X=_feat(10, 3)),
    "retrieval_metrics": lambda: dict(
        query_h=_feat(4, 3),
        query_y=_labels(4, 2),
        corpus_h=_feat(8, 3, 1),
        corpus_y=_labels(8, 2),
        ks=(1, 3),
    ),
    "linear_cka": lambda: dict(X=_feat(10, 3), Y=_feat(10, 2, 1)),
    # the other exported functions
    "ranking_metrics": lambda: dict(
        scores=_feat(4, 6), relevance=(_feat(4, 6, 1) > 0.5) * 1.0, ks=(1, 3)
    ),
    "precision_at_k": lambda: dict(scores=_feat(4, 6), relevance=(_feat(4, 6, 1) > 0.5) * 1.0, k=3),
    "ir_evaluator_metrics": lambda: dict(
        queries={f"q{i}": v for i, v in enumerate(_feat(3, 4))},
        corpus={f"d{j}": v for j, v in enumerate(_feat(7, 4, 1))},
        relevant_docs={"q0": {"d1", "d2"}, "q1": {"d5"}},
    ),
    "f1_scores": lambda: dict(y_true=_labels(9, 3), y_pred=_labels(9, 3)[::-1].copy()),
    "probe_accuracy_grid": lambda: dict(
        train_h=_feat(30, 3),
        train_y=_labels(30, 2),
        test_h=_feat(10, 3, 1),
        test_y=_labels(10, 2),
        Cs=[0.1, 1.0],
    ),
    "loo_scores": lambda: dict(train_h=_feat(12, 3), train_y=_labels(12, 3), lam=0.1),
    "prediction_error": lambda: dict(
        v=_rng(1).normal(size=2),
        B=_feat(2, 4),
        X=_feat(5, 4, 2),
        v_star=_rng(3).normal(size=2),
        B_star=_feat(2, 4, 4),
    ),
    "layerwise_lr": lambda: dict(base_lr=0.1, decay=0.75, n_blocks=3),
    "layerwise_lr_scales": lambda: dict(n_layers=4, decay=0.75),
    "unfold_batchnorm": lambda: dict(
        W_folded=_feat(3, 2),
        b_folded=_rng(1).normal(size=2),
        mu=_rng(2).normal(size=3),
        s=np.array([0.5, 1.0, 2.0]),
    ),
    "binomial_standard_error": lambda: dict(p=0.3, n=100),
    "paired_standard_error": lambda: dict(a_correct=_bits(1), b_correct=_bits(2)),
    "expected_max_of_normals": lambda: dict(m=5),
    "item_bootstrap_ci": lambda: dict(
        item_stats=_feat(8, 2),
        metric=lambda T: T[:, 0] / T[:, 1],
        n_boot=20,
        rng=_rng(3),
        level=0.9,
    ),
    "paired_item_bootstrap_ci": lambda: dict(
        a_stats=_feat(8, 2),
        b_stats=_feat(8, 2, 1),
        metric=lambda T: T[:, 0] / T[:, 1],
        n_boot=20,
        rng=_rng(3),
    ),
    "tile_iou_counts": lambda: dict(
        pred=_rng(1).integers(0, 3, (4, 5, 5)), true=_rng(2).integers(0, 3, (4, 5, 5)), n_classes=3
    ),
    "mean_iou": lambda: dict(counts=np.array([[1.0, 2.0, 0.0], [2.0, 5.0, 3.0]])),
    "region_bootstrap_miou": lambda: dict(
        counts=R.tile_iou_counts(
            _rng(1).integers(0, 3, (6, 4, 4)), _rng(2).integers(0, 3, (6, 4, 4)), 3
        ),
        regions=np.array([4, 4, 1, 1, 9, 9]),
        n_boot=20,
        rng=_rng(3),
        level=0.9,
    ),
    "rbf_cka": lambda: dict(X=_feat(10, 3), Y=_feat(10, 2, 1)),
    "hsic_unbiased": lambda: dict(
        K=(lambda A: A @ A.T)(_feat(6, 3)), L=(lambda A: A @ A.T)(_feat(6, 2, 1))
    ),
    "minibatch_cka": lambda: dict(layers=[_feat(12, 3), _feat(12, 2, 1)], batch_size=6, rng=0),
    "cka_matrix": lambda: dict(
        features_a=[_feat(12, 3), _feat(12, 2, 1)], features_b=[_feat(12, 4, 2)]
    ),
    "rankme_normalized": lambda: dict(Z=_feat(10, 4)),
    "gram_spectrum": lambda: dict(X=_feat(10, 4)),
    "alpha_req": lambda: dict(X=_feat(60, 8), fit_range=(1, 6)),
    "ne_sum": lambda: dict(X=_feat(10, 4)),
    "stable_rank": lambda: dict(X=_feat(10, 4)),
    "condition_number": lambda: dict(X=_feat(10, 4)),
    "power_law_spectrum": lambda: dict(alpha=1.0, d=5),
    "sample_features_with_spectrum": lambda: dict(
        eigenvalues=np.array([3.0, 2.0, 1.0]), n=10, rng=0
    ),
    "self_cluster": lambda: dict(X=_feat(10, 4)),
    "diffusion_spectral_entropy": lambda: dict(X=_feat(10, 4), sigma=1.0),
    "two_nn_id_batched": lambda: dict(X=_feat(12, 3), batch_size=6, rng=0),
    "participation_ratio": lambda: dict(X=_feat(10, 4)),
    "explained_variance_dimension": lambda: dict(X=_feat(10, 4)),
    "isotropy_ratio": lambda: dict(X=_feat(10, 4)),
    "mean_pairwise_cosine": lambda: dict(X=_feat(10, 4)),
    "alignment": lambda: dict(X=_feat(10, 4), Y=_feat(10, 4, 1)),
    "uniformity": lambda: dict(X=_feat(10, 4)),
    "label_free_summary": lambda: dict(X=_feat(30, 12)),
    "spectrum_metrics": lambda: dict(eigenvalues=np.arange(12.0, 0.0, -1.0), fit_range=(1, 6)),
    "rankme_squared_shares": lambda: dict(X=_feat(10, 4)),
    "alpha_req_weighted": lambda: dict(X=_feat(60, 8), fit_range=(1, 6)),
    "unit_coordinate_std": lambda: dict(Z=_feat(10, 4)),
    # the sharded k-NN of the PyTorch loop's chapter
    "merge_topk": lambda: dict(
        shard_vals=[_feat(3, 2), _feat(3, 1, 1), np.zeros((3, 0))],
        shard_idx=[np.array([[0, 1]] * 3), np.array([[0]] * 3), np.zeros((3, 0), int)],
        offsets=[0, 2, 3],
        k=2,
    ),
    # what the practitioners' command line calls
    "knn_classify_curve": lambda: dict(
        train_h=_feat(10, 3),
        train_y=_labels(10, 3),
        test_h=_feat(4, 3, 1),
        ks=[1, 3],
        tau=0.1,
        n_classes=3,
    ),
    "linear_probe_warm_path": lambda: dict(
        train_h=_feat(30, 3),
        train_y=_labels(30, 2),
        test_h=_feat(10, 3, 1),
        test_y=_labels(10, 2),
        Cs=[0.1, 1.0],
        seed=0,
    ),
    "holm": lambda: dict(p=np.array([0.01, 0.04, 0.3])),
    "benjamini_hochberg": lambda: dict(p=np.array([0.01, 0.04, 0.3])),
    # checks that can fail, power and one paired comparison
    "paired_comparison": lambda: dict(
        a_correct=_bits(1), b_correct=_bits(2), n_boot=20, rng=_rng(3)
    ),
    "prediction_verdict": lambda: dict(lo=-0.01, hi=0.02, predicted=0.05),
    "paired_sample_size": lambda: dict(difference=0.02, discordance=0.1),
    "paired_detectable_difference": lambda: dict(n=1000, discordance=0.1),
    "discordance_upper_bound": lambda: dict(accuracy_a=0.8, accuracy_b=0.7),
    "unpaired_detectable_difference": lambda: dict(n=1000, accuracy=0.7),
    "token_norm_ratios": lambda: dict(norms=np.abs(_feat(5, 6)) + 0.1),
    "high_norm_tokens": lambda: dict(norms=np.abs(_feat(5, 6)) + 0.1, threshold=4.0),
    "attention_mass_ratio": lambda: dict(
        attention=np.full((6, 3, 3), 1 / 9),
        masks=np.eye(3, dtype=bool)[None].repeat(6, 0),
        n_boot=20,
        rng=_rng(3),
    ),
    # rankings across the tasks of a suite
    "task_ranks": lambda: dict(scores=_feat(5, 3)),
    "mean_rank": lambda: dict(scores=_feat(5, 3)),
    "tau_b_matrix": lambda: dict(scores=_feat(5, 3)),
    "kendall_tau_b": lambda: dict(x=_feat(6, 1)[:, 0], y=_feat(6, 1, 1)[:, 0]),
    "rank_bootstrap": lambda: dict(
        correct=[_rng(1).random((4, 30)) < 0.6, _rng(2).random((4, 20)) < 0.7],
        n_boot=50,
        seed=0,
        level=0.9,
    ),
}

NOT_COVERED_HERE = {
    "frozen_features",
    "MinibatchCKA",  # see the module docstring
    "train_with_validation",
    "select_on_validation",
    "carve_validation",
}

# Array arguments of each function and their kind: "f" float features, "y" labels,
# "b" 0/1 correctness vectors, "v" a float vector whose ndim is checked.
ARRAYS = {
    "knn_classify": {"train_h": "f", "train_y": "y", "test_h": "f"},
    "knn_classify_curve": {"train_h": "f", "train_y": "y", "test_h": "f"},
    "linear_probe_warm_path": {"train_h": "f", "train_y": "y", "test_h": "f", "test_y": "y"},
    "linear_probe_done_right": {"train_h": "f", "train_y": "y", "test_h": "f", "test_y": "y"},
    "probe_accuracy_grid": {"train_h": "f", "train_y": "y", "test_h": "f", "test_y": "y"},
    "attentive_probe": {"H": "f", "q": "v", "Wk": "f", "Wv": "f", "Wo": "f", "W_cls": "f"},
    "low_shot_eval": {"train_h": "f", "train_y": "y", "test_h": "f", "test_y": "y"},
    "transfer": {"X": "f", "y": "v", "B0": "f", "v0": "v"},
    "fold_batchnorm": {"W": "f", "b": "v", "mu": "v", "s": "v"},
    "unfold_batchnorm": {"W_folded": "f", "b_folded": "v", "mu": "v", "s": "v"},
    "rank_bound": {"H": "f", "y": "y"},
    "soft_rank_floor": {"H": "f", "y": "y"},
    "norm_constrained_residual": {"H": "f", "y": "y"},
    "ridge_probe": {"train_h": "f", "train_y": "y", "test_h": "f"},
    "ridge_loo": {"train_h": "f", "train_y": "y", "lams": "v"},
    "loo_scores": {"train_h": "f", "train_y": "y"},
    "mcnemar_exact": {"a_correct": "b", "b_correct": "b"},
    "paired_bootstrap_ci": {"a_correct": "b", "b_correct": "b"},
    "paired_standard_error": {"a_correct": "b", "b_correct": "b"},
    "paired_comparison": {"a_correct": "b", "b_correct": "b"},
    "token_norm_ratios": {"norms": "f"},
    "high_norm_tokens": {"norms": "f"},
    "region_bootstrap_miou": {"counts": "f", "regions": "y"},
    "rankme": {"Z": "f"},
    "rankme_normalized": {"Z": "f"},
    "two_nn_id": {"X": "f"},
    "retrieval_metrics": {"query_h": "f", "query_y": "y", "corpus_h": "f", "corpus_y": "y"},
    "ranking_metrics": {"scores": "f", "relevance": "f"},
    "precision_at_k": {"scores": "f", "relevance": "f"},
    "f1_scores": {"y_true": "y", "y_pred": "y"},
    "linear_cka": {"X": "f", "Y": "f"},
    "rbf_cka": {"X": "f", "Y": "f"},
    "hsic_unbiased": {"K": "f", "L": "f"},
    "prediction_error": {"v": "v", "B": "f", "X": "f", "v_star": "v", "B_star": "f"},
    "sample_features_with_spectrum": {"eigenvalues": "v"},
    "alignment": {"X": "f", "Y": "f"},
    "spectrum_metrics": {"eigenvalues": "v"},
    "unit_coordinate_std": {"Z": "f"},
    "rankme_squared_shares": {"X": "f"},
    "alpha_req_weighted": {"X": "f"},
    "task_ranks": {"scores": "f"},
    "mean_rank": {"scores": "f"},
    "tau_b_matrix": {"scores": "f"},
    "kendall_tau_b": {"x": "v", "y": "v"},
    **{
        name: {"X": "f"}
        for name in (
            "gram_spectrum",
            "alpha_req",
            "ne_sum",
            "stable_rank",
            "condition_number",
            "self_cluster",
            "diffusion_spectral_entropy",
            "two_nn_id_batched",
            "participation_ratio",
            "explained_variance_dimension",
            "isotropy_ratio",
            "mean_pairwise_cosine",
            "uniformity",
            "label_free_summary",
        )
    },
}


def _call(name, args):
    return getattr(R, name)(**args)


def _names_arg(exc, arg):
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(arg)}(?![A-Za-z0-9_])", str(exc)) is not None


def _expect_error(name, arg, value, *, errors=(ValueError, TypeError), named=None):
    args = VALID[name]()
    args[arg] = value
    with pytest.raises(errors) as info:
        _call(name, args)
    named = arg if named is None else named
    assert _names_arg(info.value, named), (
        f"{name}: message {str(info.value)!r} does not name {named!r}"
    )


def test_every_public_function_is_covered():
    public = set(R.__all__) - {"datasets"}
    assert public - set(VALID) - NOT_COVERED_HERE == set()
    assert set(VALID) <= public


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_arguments_work(name):
    out = _call(name, VALID[name]())
    assert out is not None


# ----------------------------------------------------------------------------- generic cases


# vectors whose length is not tied to another argument
FREE_LENGTH = {
    ("ridge_loo", "lams"),
    ("sample_features_with_spectrum", "eigenvalues"),
    ("spectrum_metrics", "eigenvalues"),
}

# scalar arguments that must be numbers (a string or None is a TypeError naming them)
SCALARS = {
    "knn_classify": ["k", "tau", "n_classes"],
    "knn_classify_curve": ["tau", "n_classes"],
    "merge_topk": ["k"],
    "linear_probe_warm_path": ["seed"],
    "linear_probe_done_right": ["seed"],
    "attentive_probe": ["n_heads", "n_prefix"],
    "attentive_probe_param_count": ["d", "n_heads", "n_classes"],
    "linear_probe_param_count": ["d", "n_classes"],
    "low_shot_eval": ["n_per_class", "n_draws"],
    "transfer": ["lr", "steps"],
    "rank_bound": ["n_classes"],
    "ridge_probe": ["lam"],
    "loo_scores": ["lam"],
    "wilson_interval": ["k", "n", "z"],
    "paired_bootstrap_ci": ["n_boot", "level"],
    "rankme": ["eps"],
    "layerwise_lr": ["base_lr", "decay", "n_blocks"],
    "layerwise_lr_scales": ["n_layers", "decay"],
    "binomial_standard_error": ["p", "n"],
    "expected_max_of_normals": ["m"],
    "item_bootstrap_ci": ["n_boot", "level"],
    "paired_item_bootstrap_ci": ["n_boot", "level"],
    "tile_iou_counts": ["n_classes"],
    "region_bootstrap_miou": ["n_boot", "level"],
    "precision_at_k": ["k"],
    "paired_comparison": ["n_boot", "level", "power"],
    "prediction_verdict": ["lo", "hi", "predicted"],
    "paired_sample_size": ["difference", "discordance", "alpha", "power"],
    "paired_detectable_difference": ["n", "discordance", "alpha", "power"],
    "discordance_upper_bound": ["accuracy_a", "accuracy_b"],
    "unpaired_detectable_difference": ["n", "accuracy", "alpha", "power"],
    "high_norm_tokens": ["threshold"],
    "attention_mass_ratio": ["n_boot", "level"],
    "rank_bootstrap": ["n_boot", "level"],
}


@pytest.mark.parametrize(
    ("name", "arg", "value"),
    [(f, a, v) for f, args in SCALARS.items() for a in args for v in ("abc", None)],
)
def test_scalar_arguments_must_be_numbers(name, arg, value):
    _expect_error(name, arg, value, errors=(TypeError, ValueError))


def _generic_cases():
    """(function, argument, description, bad value builder) for every array argument."""
    cases = []
    for name, arrays in ARRAYS.items():
        for arg, kind in arrays.items():

            def base(name=name, arg=arg):
                return np.asarray(VALID[name]()[arg])

            cases.append((name, arg, "wrong ndim (extra axis)", lambda b=base: b()[..., None]))
            cases.append((name, arg, "string", lambda: "abc"))
            cases.append((name, arg, "None", lambda: None))
            if kind in ("f", "v"):
                cases.append((name, arg, "NaN", lambda b=base: _poison(b(), np.nan)))
                cases.append((name, arg, "+inf", lambda b=base: _poison(b(), np.inf)))
                cases.append((name, arg, "-inf", lambda b=base: _poison(b(), -np.inf)))
                cases.append((name, arg, "empty", lambda b=base: b()[:0]))
            if kind == "v" and (name, arg) not in FREE_LENGTH:
                cases.append((name, arg, "one entry short", lambda b=base: b()[:-1]))
            if kind == "y":
                cases.append((name, arg, "negative label", lambda b=base: _poison(b(), -1)))
                cases.append((name, arg, "non-integer label", lambda b=base: _poison(b(), 0.5)))
                cases.append((name, arg, "NaN label", lambda b=base: _poison(b(), np.nan)))
                cases.append((name, arg, "one label short", lambda b=base: b()[:-1]))
            if kind == "b":
                cases.append((name, arg, "value 2", lambda b=base: _poison(b(), 2)))
                cases.append((name, arg, "NaN", lambda b=base: _poison(b(), np.nan)))
                cases.append((name, arg, "empty", lambda b=base: b()[:0]))
                cases.append((name, arg, "one short", lambda b=base: b()[:-1]))
    return cases


def _poison(a, value):
    a = np.array(
        a, dtype=np.float64 if isinstance(value, float) else np.result_type(a, type(value))
    )
    a.flat[a.size // 2] = value
    return a


GENERIC = _generic_cases()


@pytest.mark.parametrize(
    ("name", "arg", "what", "make"), GENERIC, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in GENERIC]
)
def test_generic_bad_array(name, arg, what, make):
    named = arg
    if (
        what.startswith("one")
        and name
        in ("mcnemar_exact", "paired_bootstrap_ci", "paired_standard_error", "paired_comparison")
        and arg == "a_correct"
    ):
        named = "b_correct"  # the length of b_correct is checked against a_correct
    _expect_error(name, arg, make(), named=named)


# ----------------------------------------------------------------------------- specific cases

SPECIFIC = [
    # knn_classify: k < 1, tau <= 0, labels outside 0..n_classes-1, zero vectors, dims
    ("knn_classify", "k", 0),
    ("knn_classify", "k", -2),
    ("knn_classify", "k", 2.5),
    ("knn_classify", "tau", 0.0),
    ("knn_classify", "tau", -0.1),
    ("knn_classify", "tau", np.nan),
    ("knn_classify", "tau", np.inf),
    ("knn_classify", "n_classes", 0),
    ("knn_classify", "train_y", np.array([0, 1, 2, 3, 0, 1, 2, 0, 1, 2])),  # 3 with n_classes=3
    ("knn_classify", "train_h", np.vstack([np.zeros(3), _feat(9, 3)])),
    ("knn_classify", "test_h", np.vstack([_feat(3, 3, 1), np.zeros(3)])),
    ("knn_classify", "test_h", _feat(4, 2, 1)),
    # linear_probe_done_right: C <= 0, empty grid, too few rows, bad seed
    ("linear_probe_done_right", "Cs", []),
    ("linear_probe_done_right", "Cs", [0.1, 0.0]),
    ("linear_probe_done_right", "Cs", [-1.0]),
    ("linear_probe_done_right", "Cs", [np.nan]),
    ("linear_probe_done_right", "Cs", [np.inf]),
    ("linear_probe_done_right", "Cs", 1.0),
    ("linear_probe_done_right", "seed", -1),
    ("linear_probe_done_right", "seed", 0.5),
    ("linear_probe_done_right", "test_h", _feat(10, 4, 1)),
    ("probe_accuracy_grid", "Cs", []),
    ("probe_accuracy_grid", "Cs", [0.0]),
    # attentive_probe: n_heads not dividing d, n_prefix >= T, shapes
    ("attentive_probe", "n_heads", 3),
    ("attentive_probe", "n_heads", 0),
    ("attentive_probe", "n_prefix", 5),
    ("attentive_probe", "n_prefix", 6),
    ("attentive_probe", "n_prefix", -1),
    ("attentive_probe", "q", np.ones(3)),
    ("attentive_probe", "Wk", np.ones((4, 3))),
    ("attentive_probe", "Wo", np.ones((3, 4))),
    ("attentive_probe", "W_cls", np.ones((3, 3))),
    ("attentive_probe_param_count", "n_heads", 3),
    ("attentive_probe_param_count", "d", 0),
    ("attentive_probe_param_count", "n_classes", 0),
    ("attentive_probe_param_count", "d", 2.5),
    ("linear_probe_param_count", "n_classes", 0),
    ("linear_probe_param_count", "bias", "yes"),
    # low_shot_eval: n_per_class < 1 or larger than a class, fewer than 2 draws, rng, zeros
    ("low_shot_eval", "n_per_class", 0),
    ("low_shot_eval", "n_per_class", 11),
    ("low_shot_eval", "n_draws", 1),
    ("low_shot_eval", "n_draws", 0),
    ("low_shot_eval", "rng", "seed"),
    ("low_shot_eval", "rng", 1.5),
    ("low_shot_eval", "train_h", np.vstack([np.zeros(3), _feat(19, 3)])),
    ("low_shot_eval", "test_h", np.vstack([np.zeros(3), _feat(5, 3, 1)])),
    ("low_shot_eval", "test_h", _feat(6, 4, 1)),
    # transfer: negative or zero step size, negative steps, shapes
    ("transfer", "lr", 0.0),
    ("transfer", "lr", -0.1),
    ("transfer", "lr", np.nan),
    ("transfer", "steps", -1),
    ("transfer", "steps", 1.5),
    ("layerwise_lr_scales", "n_layers", 0),
    ("layerwise_lr_scales", "decay", 0.0),
    ("layerwise_lr_scales", "decay", 1.5),
    ("layerwise_lr_scales", "decay", np.nan),
    ("transfer", "B0", _feat(2, 3)),
    ("transfer", "v0", np.ones(3)),
    # fold_batchnorm: negative or zero scale, shapes
    ("fold_batchnorm", "s", np.array([0.5, 0.0, 2.0])),
    ("fold_batchnorm", "s", np.array([0.5, -1.0, 2.0])),
    ("fold_batchnorm", "s", np.ones(2)),
    ("fold_batchnorm", "mu", np.ones(4)),
    ("fold_batchnorm", "b", np.ones(3)),
    ("unfold_batchnorm", "s", np.array([0.5, 0.0, 2.0])),
    # rank_bound: labels outside 0..n_classes-1
    ("rank_bound", "y", _labels(12, 5)),
    ("rank_bound", "n_classes", 0),
    ("rank_bound", "n_classes", 2.5),
    # ridge_probe / ridge_loo: negative penalty, empty grid, bias type
    ("ridge_probe", "lam", -1.0),
    ("ridge_probe", "lam", np.nan),
    ("ridge_probe", "lam", np.inf),
    ("ridge_probe", "bias", "yes"),
    ("ridge_probe", "test_h", _feat(4, 2, 1)),
    ("ridge_loo", "lams", np.array([0.1, -1.0])),
    ("ridge_loo", "lams", np.array([])),
    ("ridge_loo", "lams", np.array([np.nan])),
    ("ridge_loo", "lams", 0.1),
    ("loo_scores", "lam", -1.0),
    # wilson_interval: n = 0, k outside 0..n, z <= 0
    ("wilson_interval", "n", 0),
    ("wilson_interval", "n", -3),
    ("wilson_interval", "k", -1),
    ("wilson_interval", "k", 11),
    ("wilson_interval", "k", 2.5),
    ("wilson_interval", "z", 0.0),
    ("wilson_interval", "z", -1.96),
    ("wilson_interval", "z", np.nan),
    ("wilson_interval", "z", np.inf),
    # paired_bootstrap_ci: level outside (0, 1), n_boot < 1, rng
    ("paired_bootstrap_ci", "level", 0.0),
    ("paired_bootstrap_ci", "level", 1.0),
    ("paired_bootstrap_ci", "level", 1.5),
    ("paired_bootstrap_ci", "level", -0.1),
    ("paired_bootstrap_ci", "level", np.nan),
    ("paired_bootstrap_ci", "n_boot", 0),
    ("paired_bootstrap_ci", "rng", "seed"),
    # per-item bootstrap (any number of item axes is legal, so the generic cases do not apply)
    ("item_bootstrap_ci", "item_stats", np.ones((0, 2))),
    ("item_bootstrap_ci", "item_stats", "abc"),
    ("item_bootstrap_ci", "item_stats", _poison(_feat(8, 2), np.nan)),
    ("item_bootstrap_ci", "item_stats", _poison(_feat(8, 2), np.inf)),
    ("item_bootstrap_ci", "metric", "mean"),
    ("item_bootstrap_ci", "metric", lambda T: T),
    ("item_bootstrap_ci", "metric", lambda T: T[:, 0] * np.nan),
    ("item_bootstrap_ci", "n_boot", 0),
    ("item_bootstrap_ci", "level", 1.0),
    ("item_bootstrap_ci", "rng", "seed"),
    ("paired_item_bootstrap_ci", "b_stats", _feat(7, 2)),
    ("paired_item_bootstrap_ci", "a_stats", None),
    ("paired_item_bootstrap_ci", "b_stats", _poison(_feat(8, 2), np.nan)),
    ("paired_item_bootstrap_ci", "metric", None),
    ("paired_item_bootstrap_ci", "level", 0.0),
    # tile_iou_counts / mean_iou: labels outside the classes, shapes, kinds, impossible counts
    ("tile_iou_counts", "pred", np.full((4, 5, 5), 3)),
    ("tile_iou_counts", "true", np.full((4, 5, 5), -1)),
    ("tile_iou_counts", "true", np.zeros((4, 5, 4), int)),
    ("tile_iou_counts", "pred", np.zeros((4, 5, 5))),
    ("tile_iou_counts", "pred", np.zeros(4, int)),
    ("tile_iou_counts", "pred", "abc"),
    ("tile_iou_counts", "n_classes", 0),
    ("tile_iou_counts", "ignore_index", 0.5),
    ("mean_iou", "counts", np.ones((3, 3))),
    ("mean_iou", "counts", -np.ones((2, 3))),
    ("mean_iou", "counts", np.array([[2.0, 1.0], [1.0, 1.0]])),
    ("mean_iou", "counts", np.zeros((2, 3))),
    ("mean_iou", "counts", np.array([[np.nan, 1.0], [1.0, 1.0]])),
    ("mean_iou", "counts", np.ones(2)),
    # region_bootstrap_miou: no (intersection, union) axis, an empty region, a region id too few
    ("region_bootstrap_miou", "counts", np.ones((6, 3, 3))),
    ("region_bootstrap_miou", "counts", np.zeros((6, 2, 3))),
    ("region_bootstrap_miou", "regions", np.array([4, 4, 1, 1, 9])),
    ("region_bootstrap_miou", "n_boot", 0),
    ("region_bootstrap_miou", "level", 0.0),
    ("region_bootstrap_miou", "rng", "seed"),
    # rankme: negative eps, all-zero matrix
    ("rankme", "eps", -1e-7),
    ("rankme", "eps", np.nan),
    ("rankme", "center", "yes"),
    ("rankme", "Z", np.zeros((5, 3))),
    # spectrum_metrics / reptrix conventions / unit_coordinate_std
    ("spectrum_metrics", "eigenvalues", np.array([1.0, -0.5, 0.2])),
    ("spectrum_metrics", "eigenvalues", np.zeros(4)),
    ("spectrum_metrics", "eps", -1.0),
    ("spectrum_metrics", "fit_range", 3),
    ("rankme_squared_shares", "X", np.ones((5, 3))),
    ("rankme_squared_shares", "eps", -1e-7),
    ("rankme_squared_shares", "center", "yes"),
    ("alpha_req_weighted", "fit_range", (0, 5)),
    ("alpha_req_weighted", "fit_range", (3, 9)),
    ("alpha_req_weighted", "fit_range", (4, 4)),
    ("alpha_req_weighted", "fit_range", (1.0, 5)),
    ("alpha_req_weighted", "fit_range", 5),
    ("alpha_req_weighted", "center", 1),
    ("unit_coordinate_std", "Z", np.vstack([np.zeros(4), _feat(9, 4)])),
    # two_nn_id: fewer than 3 points, duplicates
    ("two_nn_id", "X", _feat(2, 3)),
    ("two_nn_id", "X", np.vstack([_feat(9, 3), _feat(1, 3)])),
    # retrieval_metrics: k < 1, empty cutoffs, zero vectors, no query with a relevant item
    ("retrieval_metrics", "ks", (0,)),
    ("retrieval_metrics", "ks", (1, -1)),
    ("retrieval_metrics", "ks", ()),
    ("retrieval_metrics", "ks", (1.5,)),
    ("retrieval_metrics", "query_h", np.vstack([np.zeros(3), _feat(3, 3)])),
    ("retrieval_metrics", "corpus_h", np.vstack([np.zeros(3), _feat(7, 3, 1)])),
    ("retrieval_metrics", "corpus_h", _feat(8, 4, 1)),
    ("retrieval_metrics", "ties", "random"),
    ("retrieval_metrics", "ties", None),
    ("retrieval_metrics", "exclude_self", True),  # 4 queries, 8 corpus items
    ("retrieval_metrics", "exclude_self", "yes"),
    ("retrieval_metrics", "per_query", 1),
    # ranking_metrics / precision_at_k: shapes, negative gains, bad masks, cutoffs, ties
    ("ranking_metrics", "relevance", -np.ones((4, 6))),
    ("ranking_metrics", "relevance", np.ones((4, 5))),
    ("ranking_metrics", "relevance", np.zeros((4, 6))),  # no row with a relevant item
    ("ranking_metrics", "ignore", np.zeros((4, 5), bool)),
    ("ranking_metrics", "ignore", np.full((4, 6), 2)),
    ("ranking_metrics", "ignore", "all"),
    ("ranking_metrics", "ks", (0,)),
    ("ranking_metrics", "ks", ()),
    ("ranking_metrics", "ties", "stable"),
    ("ranking_metrics", "per_query", "no"),
    # ir_evaluator_metrics: mappings, cutoffs, the similarity; f1_scores: labels, zero_division
    ("ir_evaluator_metrics", "queries", {}),
    ("ir_evaluator_metrics", "corpus", [[1.0, 2.0]]),
    ("ir_evaluator_metrics", "relevant_docs", {"nobody": {"d0"}}),
    ("ir_evaluator_metrics", "map_at_k", (0,)),
    ("ir_evaluator_metrics", "similarity", "l2"),
    ("f1_scores", "labels", []),
    ("f1_scores", "labels", [0, 0]),
    ("f1_scores", "zero_division", 0.5),
    ("precision_at_k", "k", 0),
    ("precision_at_k", "k", 1.5),
    ("precision_at_k", "ties", "first"),
    ("precision_at_k", "relevance", -np.ones((4, 6))),
    ("precision_at_k", "ignore", np.ones((3, 6), bool)),
    # merge_topk: k < 1, NaN similarities, negative or overlapping indices, ragged queries
    ("merge_topk", "k", 0),
    ("merge_topk", "shard_vals", [np.full((3, 2), np.nan), _feat(3, 1), np.zeros((3, 0))]),
    ("merge_topk", "shard_vals", [_feat(3, 2), _feat(2, 1), np.zeros((3, 0))]),
    (
        "merge_topk",
        "shard_idx",
        [-np.ones((3, 2), int), np.zeros((3, 1), int), np.zeros((3, 0), int)],
    ),
    (
        "merge_topk",
        "shard_idx",
        [np.zeros((3, 1), int), np.zeros((3, 1), int), np.zeros((3, 0), int)],
    ),
    ("merge_topk", "offsets", [0, 1, 3]),
    ("merge_topk", "offsets", [0, -2, 3]),
    ("merge_topk", "offsets", [0, 2]),
    # linear_cka: constant features (zero after centring), too few rows, lengths
    ("linear_cka", "X", np.ones((10, 3))),
    ("linear_cka", "Y", np.full((10, 2), 7.0)),
    ("linear_cka", "X", _feat(1, 3)),
    ("linear_cka", "Y", _feat(9, 2, 1)),
    # power: shares outside [0, 1], a difference above the discordance, alpha and power ranges
    ("paired_sample_size", "difference", 0.0),
    ("paired_sample_size", "difference", 1.5),
    ("paired_sample_size", "discordance", 0.01),
    ("paired_sample_size", "power", 1.0),
    ("paired_detectable_difference", "n", 0),
    ("paired_detectable_difference", "discordance", 0.0),
    ("paired_detectable_difference", "discordance", np.nan),
    ("paired_detectable_difference", "alpha", 0.0),
    ("paired_detectable_difference", "power", 0.3),
    ("discordance_upper_bound", "accuracy_a", -0.1),
    ("discordance_upper_bound", "accuracy_b", 1.1),
    ("unpaired_detectable_difference", "accuracy", 2.0),
    ("unpaired_detectable_difference", "alpha", 1.0),
    ("paired_comparison", "power", 0.1),
    ("paired_comparison", "level", 0.0),
    ("paired_comparison", "rng", "seed"),
    # artifact tokens: negative norms, a zero median, a threshold that is not above 1
    ("token_norm_ratios", "norms", -np.ones((3, 4))),
    ("token_norm_ratios", "norms", np.zeros((3, 4))),
    ("high_norm_tokens", "threshold", 1.0),
    ("high_norm_tokens", "threshold", np.nan),
    # attention-mass ratio: shapes, weights that do not sum to one, empty regions
    ("attention_mass_ratio", "attention", np.full((6, 3, 3), 0.2)),
    ("attention_mass_ratio", "attention", np.full((6, 9), 1 / 9)),
    ("attention_mass_ratio", "attention", np.full(6, 1.0)),
    ("attention_mass_ratio", "attention", "abc"),
    ("attention_mass_ratio", "attention", None),
    ("attention_mass_ratio", "masks", np.zeros((6, 3, 3), bool)),
    ("attention_mass_ratio", "masks", "abc"),
    ("attention_mass_ratio", "masks", np.full((6, 3, 3), 2)),
    ("attention_mass_ratio", "n_boot", 0),
    ("attention_mass_ratio", "level", 1.0),
    ("attention_mass_ratio", "rng", "seed"),
]


@pytest.mark.parametrize(
    ("name", "arg", "value"), SPECIFIC, ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(SPECIFIC)]
)
def test_specific_bad_input(name, arg, value):
    _expect_error(name, arg, value)


def test_retrieval_without_any_relevant_item_raises():
    args = VALID["retrieval_metrics"]()
    args["query_y"] = np.full(4, 5)
    with pytest.raises(ValueError, match="relevant"):
        R.retrieval_metrics(**args)


def test_mcnemar_and_bootstrap_mismatched_lengths_name_b_correct():
    with pytest.raises(ValueError, match="b_correct"):
        R.mcnemar_exact(_bits(1), _bits(2, 11))
    with pytest.raises(ValueError, match="b_correct"):
        R.paired_bootstrap_ci(_bits(1), _bits(2, 11), 10, _rng())


@pytest.mark.parametrize("n", [2, 3, 4])
def test_ridge_loo_leverage_one_raises(n):
    # n <= d + 1 with lam = 0: the least-squares fit interpolates every point (leverage 1)
    H = _feat(n, 3)
    y = _labels(n, 2)
    with pytest.raises(ValueError, match="leverage"):
        R.ridge_loo(H, y, [0.0])
    with pytest.raises(ValueError, match="leverage"):
        R.loo_scores(H, y, 0.0)
    # a positive penalty removes the division by zero
    press = R.ridge_loo(H, y, [1.0])[1]
    assert np.all(np.isfinite(press))


def test_ridge_loo_leverage_one_from_a_single_outlying_direction():
    # a feature that is nonzero on one training point only gives that point leverage 1
    H = _feat(12, 3)
    H = np.c_[H, np.zeros(12)]
    H[4, 3] = 1.0
    with pytest.raises(ValueError, match="leverage"):
        R.ridge_loo(H, _labels(12, 3), [0.0, 0.1])


def test_linear_probe_constant_feature_raises():
    args = VALID["linear_probe_done_right"]()
    args["train_h"] = args["train_h"].copy()
    args["train_h"][:, 1] = 3.0
    with pytest.raises(ValueError, match="train_h"):
        R.linear_probe_done_right(**args)


def test_linear_probe_too_few_rows_raises():
    with pytest.raises(ValueError, match="train_h"):
        R.linear_probe_done_right(_feat(4, 2), [0, 1, 0, 1], _feat(3, 2, 1), [0, 1, 0], [1.0])


@pytest.mark.parametrize("name", ["mcnemar_exact", "paired_bootstrap_ci", "paired_standard_error"])
def test_paired_functions_reject_empty_vectors(name):
    args = VALID[name]()
    args["a_correct"] = np.array([], dtype=int)
    args["b_correct"] = np.array([], dtype=int)
    with pytest.raises(ValueError, match="a_correct"):
        _call(name, args)


# ----------------------------------------------------------------------------- no NaN out, no
# mutation


def _flatten(out):
    if isinstance(out, dict):
        for v in out.values():
            yield from _flatten(v)
    elif isinstance(out, (tuple, list)):
        for v in out:
            yield from _flatten(v)
    elif out is None:
        return
    else:
        yield out


EDGE_OK = [
    # legal edge cases that must give finite numbers, never NaN
    ("knn_classify", dict(k=50)),
    ("knn_classify", dict(tau=1e-4)),
    ("knn_classify", dict(tau=1e8)),
    ("attentive_probe", dict(H=1e6 * _rng(1).normal(size=(2, 5, 4)))),
    ("attentive_probe", dict(n_prefix=4)),
    ("ridge_probe", dict(lam=0.0)),
    ("ridge_probe", dict(train_h=_feat(3, 6), train_y=[0, 1, 2], test_h=_feat(2, 6, 1), lam=0.0)),
    ("ridge_loo", dict(lams=np.array([0.0, 0.0, 1e-12]))),
    ("wilson_interval", dict(k=0, n=1)),
    ("wilson_interval", dict(k=1, n=1)),
    ("wilson_interval", dict(k=0, n=10)),
    ("wilson_interval", dict(k=10, n=10)),
    ("mcnemar_exact", dict(a_correct=np.ones(5, int), b_correct=np.ones(5, int))),
    ("paired_bootstrap_ci", dict(a_correct=np.ones(5, int), b_correct=np.ones(5, int))),
    ("paired_bootstrap_ci", dict(a_correct=np.array([1]), b_correct=np.array([0]), n_boot=1)),
    ("rankme", dict(Z=np.diag([3.0, 3.0, 3.0, 0.0]), eps=0.0)),
    ("retrieval_metrics", dict(query_y=np.array([0, 1, 9, 9]), ks=(100,))),
    ("low_shot_eval", dict(n_per_class=10)),
    ("two_nn_id", dict(X=_feat(3, 2))),
    ("rank_bound", dict(H=np.ones((12, 3)))),
    ("transfer", dict(steps=0)),
]


@pytest.mark.parametrize(
    ("name", "override"), EDGE_OK, ids=[f"{c[0]}-{i}" for i, c in enumerate(EDGE_OK)]
)
def test_edge_cases_return_no_nan(name, override):
    args = VALID[name]()
    args.update(override)
    for value in _flatten(_call(name, args)):
        assert np.all(np.isfinite(np.asarray(value, dtype=np.float64))), (name, override)


def _arrays_in(args):
    return {
        k: v
        for k, v in args.items()
        if isinstance(v, np.ndarray) or (isinstance(v, list) and v and isinstance(v[0], np.ndarray))
    }


@pytest.mark.parametrize("name", sorted(VALID))
def test_inputs_are_not_modified(name):
    args = VALID[name]()
    before = copy.deepcopy(args)
    out = _call(name, args)
    for key, value in _arrays_in(args).items():
        values = value if isinstance(value, list) else [value]
        olds = before[key] if isinstance(before[key], list) else [before[key]]
        for new, old in zip(values, olds):
            assert new.dtype == old.dtype and np.array_equal(new, old), f"{name} modified {key}"
    for value in _flatten(out):
        if isinstance(value, (float, np.ndarray)):
            assert not np.any(np.isnan(np.asarray(value, dtype=np.float64))), name


@pytest.mark.parametrize("name", sorted(VALID))
def test_read_only_inputs_are_accepted(name):
    # writing into an input in place would raise on a read-only array
    args = VALID[name]()
    for value in _arrays_in(args).values():
        for arr in value if isinstance(value, list) else [value]:
            arr.setflags(write=False)
    _call(name, args)


@pytest.mark.parametrize(
    "name",
    [
        "knn_classify",
        "low_shot_eval",
        "retrieval_metrics",
        "ridge_probe",
        "rank_bound",
        "linear_probe_done_right",
    ],
)
def test_integer_and_float32_features_are_not_modified(name):
    # dtype conversions must copy, never write back through a view
    args = VALID[name]()
    for key, kind in ARRAYS[name].items():
        if kind == "f":
            args[key] = args[key].astype(np.float32)
    before = copy.deepcopy(args)
    _call(name, args)
    for key in ARRAYS[name]:
        assert np.array_equal(args[key], before[key]) and args[key].dtype == before[key].dtype


def test_dataset_functions_taking_arrays_do_not_modify_them():
    from repeval_ref import datasets as ds

    H = _feat(20, 6)
    images = _rng(1).uniform(size=(3, 12, 12))
    H0, images0 = H.copy(), images.copy()
    H.setflags(write=False)
    images.setflags(write=False)
    ds.random_projection(H, 2, 0)
    ds.random_filter_features(images, n_filters=4)
    assert np.array_equal(H, H0) and np.array_equal(images, images0)


def test_check_split_takes_train_or_test_only():
    from repeval_ref._validation import check_split

    assert check_split("train") == "train" and check_split("test") == "test"
    for bad in ("val", "Train", b"train", None, 0, ["train"]):
        message = f"split must be 'train' or 'test', got {bad!r}"
        with pytest.raises(ValueError, match=re.escape(message)):
            check_split(bad)


@pytest.mark.parametrize(
    "name, before, after",
    [
        ("fashion_mnist", (), ()),
        ("fashion_mnist_shifted", (), ()),
        ("fashion_mnist_cluttered", (), ()),
        ("cluttered_crops", (), ()),
        ("fashion_mnist_corrupted", (), ("CORRUPTION", 1)),
        ("mnist_5k", (), ()),
        ("sklearn_digits_28", (), ()),
        ("opencv_digits", (), ()),
        ("fashion_subset_rows", (), ()),
        ("fashion_corruption_mix", (), ()),
        ("load_task", ("fashion",), ()),
    ],
)
def test_every_split_reader_refuses_another_split_with_one_message(name, before, after):
    from repeval_ref import datasets as ds

    after = tuple(ds.CORRUPTIONS[0] if a == "CORRUPTION" else a for a in after)
    with pytest.raises(ValueError, match=re.escape("split must be 'train' or 'test', got 'val'")):
        getattr(ds, name)(*before, "val", *after)
