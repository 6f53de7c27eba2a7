"""What the studies share: the check of a settings dict, the evaluation split of
Fashion-MNIST, and the linear probe on fixed features."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["EvaluationSplit", "check_settings_keys", "evaluation_split", "probe_predictions"]


def check_settings_keys(settings, required):
    """Refuse ``settings`` unless it is a dict holding every key of ``required``.

    Parameters
    ----------
    settings : dict
        A study's settings.
    required : iterable of str
        The keys the study reads (those of its full budget).

    Raises
    ------
    ValueError
        If ``settings`` is not a dict, or names the keys it lacks.
    """
    if not isinstance(settings, dict):
        raise ValueError(f"settings must be a dict, got {type(settings).__name__}")
    missing = sorted(set(required) - set(settings))
    if missing:
        raise ValueError(f"settings lacks {missing}")


class EvaluationSplit(NamedTuple):
    """Fashion-MNIST's two splits whole, and the rows of each a study evaluates on."""

    train_images: np.ndarray  # uint8, shape (60000, 28, 28)
    train_labels: np.ndarray  # int, shape (60000,)
    test_images: np.ndarray  # uint8, shape (10000, 28, 28)
    test_labels: np.ndarray  # int, shape (10000,)
    train_rows: np.ndarray  # int, shape (n_train,)
    test_rows: np.ndarray  # int, shape (n_test,)


def evaluation_split(n_train, n_test, seed):
    """Fashion-MNIST and the training and test rows a study evaluates on.

    Parameters
    ----------
    n_train, n_test : int, >= 1
        How many rows of each split (drawn by :func:`repeval_ref.zoo.evaluate.subset_indices`).
    seed : int
        The seed of the training rows; the test rows use ``seed + 1``.

    Returns
    -------
    EvaluationSplit
        Both splits whole, ``train_rows`` of shape (n_train,) and ``test_rows`` of shape
        (n_test,).
    """
    from ..datasets import fashion_mnist
    from ..zoo.evaluate import subset_indices

    px_tr, y_tr = fashion_mnist("train")
    px_te, y_te = fashion_mnist("test")
    return EvaluationSplit(
        px_tr,
        np.asarray(y_tr),
        px_te,
        np.asarray(y_te),
        subset_indices(len(y_tr), n_train, seed),
        subset_indices(len(y_te), n_test, seed + 1),
    )


def probe_predictions(train_features, train_labels, test_features, test_labels, Cs):
    """The zoo's linear probe on fixed features: its test predictions and chosen ``C``.

    Columns that are constant on the probe's fitting rows (the last four fifths of a fixed
    permutation of the training rows) cannot be standardised and are left out.

    Parameters
    ----------
    train_features : numpy.ndarray, shape (n, d)
    train_labels : numpy.ndarray of int, shape (n,)
    test_features : numpy.ndarray, shape (m, d)
    test_labels : numpy.ndarray of int, shape (m,)
    Cs : sequence of float
        The inverse regularisation strengths searched
        (:func:`repeval_ref.linear_probe.linear_probe_warm_path`).

    Returns
    -------
    predictions : numpy.ndarray of int, shape (m,)
    best_c : float
    """
    from ..linear_probe import linear_probe_warm_path

    n = train_features.shape[0]
    keep = train_features[np.random.default_rng(0).permutation(n)[n // 5 :]].std(axis=0) > 0
    best_c, _, pred = linear_probe_warm_path(
        train_features[:, keep], train_labels, test_features[:, keep], test_labels, Cs, seed=0
    )
    return pred, float(best_c)
