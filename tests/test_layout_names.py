"""Module names that say what is inside, and one home for repeated argument checks.

* The top-level names come from the modules named after their concept
  (:mod:`repeval_ref.uncertainty`, :mod:`repeval_ref.lpft_theory`,
  :mod:`repeval_ref.probe_rank`, :mod:`repeval_ref.cka`).
* Every public function that takes a training (or corpus) set and a test (or query) set
  of features rejects sets of different widths with the one message of
  :func:`repeval_ref._validation.check_same_width`, naming both arguments.
* The other shared checks (:func:`~repeval_ref._validation.check_bool`,
  :func:`~repeval_ref._validation.as_sequence`) give one message for every function that
  uses them.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import repeval_ref as R
from repeval_ref import _validation as V


def test_top_level_names_come_from_the_modules_of_their_concept():
    expected = {
        "wilson_interval": "uncertainty",
        "paired_bootstrap_ci": "uncertainty",
        "item_bootstrap_ci": "uncertainty",
        "transfer": "lpft_theory",
        "layerwise_lr_scales": "lpft_theory",
        "rank_bound": "probe_rank",
        "soft_rank_floor": "probe_rank",
        "linear_cka": "cka",
        "cka_matrix": "cka",
        "MinibatchCKA": "cka",
    }
    for name, module in expected.items():
        assert getattr(R, name).__module__ == f"repeval_ref.{module}", name


def test_rank_bound_stays_a_function_after_its_module_is_imported():
    # a module called rank_bound.py would replace the attribute repeval_ref.rank_bound
    # (the function) by the module as soon as any of its names is imported
    importlib.import_module("repeval_ref.probe_rank")
    assert callable(R.soft_rank_floor)
    assert callable(R.rank_bound) and R.rank_bound.__name__ == "rank_bound"


# ----------------------------------------------------------------- same-width check


def _data(d_train=4, d_test=3, n_train=20, n_test=6):
    rng = np.random.default_rng(0)
    train_h = rng.normal(size=(n_train, d_train)) + 0.5
    test_h = rng.normal(size=(n_test, d_test)) + 0.5
    train_y = np.arange(n_train) % 2
    test_y = np.arange(n_test) % 2
    return train_h, train_y, test_h, test_y


def _numpy_calls():
    tr, ytr, te, yte = _data()
    return {
        "knn_classify": lambda: R.knn_classify(tr, ytr, te, 3, 0.1, 2),
        "knn_classify_curve": lambda: R.knn_classify_curve(tr, ytr, te, [1, 3], 0.1, 2),
        "linear_probe_done_right": lambda: R.linear_probe_done_right(tr, ytr, te, yte, [1.0]),
        "probe_accuracy_grid": lambda: R.probe_accuracy_grid(tr, ytr, te, yte, [1.0]),
        "linear_probe_warm_path": lambda: R.linear_probe_warm_path(tr, ytr, te, yte, [1.0]),
        "ridge_probe": lambda: R.ridge_probe(tr, ytr, te, 1.0),
        "low_shot_eval": lambda: R.low_shot_eval(tr, ytr, te, yte, 2, 2, 0),
    }


@pytest.mark.parametrize("name", sorted(_numpy_calls()))
def test_train_and_test_of_different_widths_are_rejected(name):
    with pytest.raises(ValueError, match="^test_h has 3 features but train_h has 4$"):
        _numpy_calls()[name]()


def test_retrieval_query_and_corpus_of_different_widths_are_rejected():
    tr, ytr, te, yte = _data()
    with pytest.raises(ValueError, match="^query_h has 3 features but corpus_h has 4$"):
        R.retrieval_metrics(te, yte, tr, ytr, ks=(1,))


def test_torch_knn_rejects_different_widths(one_torch_thread):
    pytest.importorskip("torch")
    from repeval_ref.torch import knn_classify_torch

    tr, ytr, te, _ = _data()
    with pytest.raises(ValueError, match="^test_h has 3 features but train_h has 4$"):
        knn_classify_torch(tr, ytr, te, 3, 0.1, 2)


def test_sharded_knn_on_an_empty_shard_rejects_different_widths(tmp_path, one_torch_thread):
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    from repeval_ref.torch import knn_classify_sharded

    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'init'}", rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match="^test_h has 3 features but train_shard_h has 4$"):
            knn_classify_sharded(
                torch.zeros((0, 4), dtype=torch.float64),
                torch.zeros(0, dtype=torch.int64),
                torch.ones((5, 3), dtype=torch.float64),
                3,
                0.1,
                2,
                shard_offset=0,
            )
    finally:
        dist.destroy_process_group()


def test_check_same_width_message_and_silence():
    a, b = np.zeros((2, 3)), np.zeros((5, 3))
    assert V.check_same_width(a, b, "a", "b") is None
    with pytest.raises(ValueError, match="^queries has 3 features but bank has 7$"):
        V.check_same_width(a, np.zeros((1, 7)), "queries", "bank")


def test_as_train_test_checks_in_order_and_converts():
    tr, ytr, te, yte = _data(d_test=4)
    out = V.as_train_test(tr.astype(np.float32), ytr.astype(float), te, yte)
    assert [x.dtype for x in out] == [np.float64, np.int64, np.float64, np.int64]
    with pytest.raises(ValueError, match="train_y has 19 entries"):
        V.as_train_test(tr, ytr[:-1], te, yte)
    with pytest.raises(ValueError, match="test_y has 5 entries"):
        V.as_train_test(tr, ytr, te, yte[:-1])


# ------------------------------------------------------------- the other shared checks


@pytest.mark.parametrize("value", [1, 0, "yes", None, np.array([True])])
def test_check_bool_rejects_what_is_not_a_bool(value):
    with pytest.raises(TypeError, match="^flag must be True or False, got "):
        V.check_bool(value, "flag")


def test_check_bool_returns_python_bools():
    assert V.check_bool(np.bool_(True), "flag") is True
    assert V.check_bool(False, "flag") is False


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: R.ridge_probe(*_data(d_test=4)[:3], 1.0, bias=1), "bias must be True or False"),
        (
            lambda: R.linear_cka(np.eye(5), np.eye(5), debiased="yes"),
            "debiased must be True or False",
        ),
        (lambda: R.rbf_cka(np.eye(5), np.eye(5), debiased=0), "debiased must be True or False"),
        (lambda: R.cka_matrix([np.eye(5)], debiased=None), "debiased must be True or False"),
        (
            lambda: R.retrieval_metrics(np.eye(3), [0, 1, 2], np.eye(3), [0, 1, 2], per_query=1),
            "per_query must be True or False",
        ),
    ],
)
def test_switches_of_the_formula_modules_share_one_message(call, message):
    with pytest.raises(TypeError, match=f"^{message}, got "):
        call()


@pytest.mark.parametrize("value", ["abc", b"ab", 3, 2.5, None, np.float64(1.0), np.array(1.0)])
def test_as_sequence_rejects_strings_and_scalars(value):
    with pytest.raises(TypeError, match="^Cs must be a sequence of positive numbers, got "):
        V.as_sequence(value, "Cs", "positive numbers")


def test_as_sequence_accepts_iterables():
    assert V.as_sequence((1, 2), "ks", "integers") == [1, 2]
    assert V.as_sequence(np.array([3, 4]), "ks", "integers") == [3, 4]
    assert V.as_sequence((k for k in range(2)), "ks", "integers") == [0, 1]


def test_sequence_arguments_keep_their_messages():
    tr, ytr, te, yte = _data(d_test=4)
    with pytest.raises(TypeError, match="^Cs must be a sequence of positive numbers, got 1.0$"):
        R.linear_probe_done_right(tr, ytr, te, yte, 1.0)
    with pytest.raises(TypeError, match="^ks must be a sequence of integers, got 'abc'$"):
        R.knn_classify_curve(tr, ytr, te, "abc", 0.1, 2)
    with pytest.raises(TypeError, match="^ks must be a sequence of integers, got None$"):
        R.retrieval_metrics(te, yte, tr, ytr, ks=None)
