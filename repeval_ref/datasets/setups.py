"""Data for the graded exercises and for the rank chapter.

Source: seed 000 (the exercises "A linear probe done right", "Feature distortion and
LP-FT", "Low-shot evaluation with honest error bars", and "What a linear probe can and
cannot read"); :func:`gaussian_clusters` is a generic stand-in also used with seed 003.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array, check_int, check_positive, check_rng
from ._common import _cycled_labels, _grouped_labels, _orthonormal_columns

__all__ = [
    "LINEAR_PROBE_CS",
    "linear_probe_setup",
    "transfer_setup",
    "low_shot_setup",
    "rank_setup_noisy_clusters",
    "random_projection",
    "circle_clusters",
    "gaussian_clusters",
]

#: The grid of inverse regularisation strengths used with :func:`linear_probe_setup`:
#: 13 values from 1e-4 to 1e2, two per decade.
LINEAR_PROBE_CS = np.logspace(-4, 2, 13)
LINEAR_PROBE_CS.flags.writeable = False


def linear_probe_setup(rng, n_train=800, n_test=600):
    """Data for the exercise "A linear probe done right" (4 classes, 20 features).

    Latent model, per image with label ``y`` (labels cycle ``0, 1, 2, 3``):

    * ``u ~ N(0, I_4)``, a sensor-noise signal;
    * coordinates 0-3 (signal): ``2 e_y + N(0, I_4) + 0.7 u``, where the four class
      means ``2 e_c`` are the vertices of a regular simplex with unit-norm direction
      vectors ``e_c`` (``e = (I - 1/4) / ||.||``);
    * coordinates 4-7 (sensor channels): ``u + N(0, 0.1^2 I_4)`` on training images;
    * coordinates 8-19: pure noise ``N(0, I_12)``.

    A probe that is allowed large weights subtracts the sensor channels from the
    signal coordinates and cancels ``0.7 u``; a strongly regularised one does not.
    The test images come from a slightly different camera: their sensor channels
    are read with gain 2.5 and offset 0.8, which breaks the cancellation learned on
    the training camera. Finally every coordinate is multiplied by a fixed factor
    ``10^w``, ``w ~ U[-2, 2]`` (the same for training and test), so coordinates
    differ in scale by up to four orders of magnitude.

    With ``rng=0`` and :data:`LINEAR_PROBE_CS`, the honest recipe
    (:func:`repeval_ref.linear_probe_done_right`, ``seed=0``) picks ``C ~ 0.032`` and
    scores 0.773, while the best test accuracy over the grid is 0.853 at
    ``C ~ 0.0032``: eight points of optimism from tuning on the test set.

    Parameters
    ----------
    rng : numpy.random.Generator or int
        Random source.
    n_train, n_test : int
        Training and test set sizes, ``>= 20`` each (defaults 800 and 600).

    Returns
    -------
    train_h : numpy.ndarray of float64, shape (n_train, 20)
    train_y : numpy.ndarray of int64, shape (n_train,)
    test_h : numpy.ndarray of float64, shape (n_test, 20)
    test_y : numpy.ndarray of int64, shape (n_test,)

    Notes
    -----
    Book ``book/protocols.md``, "Tuning on the test set"; seed 000, the exercise
    "A linear probe done right" (coordinates on very different scales, test images
    from a slightly different camera, a 600-image test set).
    """
    rng = check_rng(rng)
    n_train = check_int(n_train, "n_train", minimum=20)
    n_test = check_int(n_test, "n_test", minimum=20)
    n_classes, p, n_noise = 4, 4, 12
    simplex = np.eye(n_classes) - 1.0 / n_classes
    means = 2.0 * simplex / np.linalg.norm(simplex[0])
    scales = 10.0 ** rng.uniform(-2.0, 2.0, size=2 * p + n_noise)

    def images(m, gain, offset):
        y = _cycled_labels(m, n_classes)
        u = rng.standard_normal((m, p))
        signal = means[y] + rng.standard_normal((m, p)) + 0.7 * u
        sensor = gain * (u + 0.1 * rng.standard_normal((m, p))) + offset
        noise = rng.standard_normal((m, n_noise))
        return np.hstack([signal, sensor, noise]) * scales, y

    train_h, train_y = images(n_train, 1.0, 0.0)
    test_h, test_y = images(n_test, 2.5, 0.8)
    return train_h, train_y, test_h, test_y


def transfer_setup(rng):
    """Data for the exercise "Feature distortion and LP-FT" (Kumar et al. 2022).

    Inputs live in ``R^20``; the true function is ``f(x) = v_*^T B_* x`` with three
    features (the orthonormal rows of ``B_*``). A random orthonormal basis splits
    ``R^20`` into an 8-dimensional subspace ``S``, which the 24 in-distribution (ID)
    inputs span, and its 12-dimensional complement. Each row of ``B_*`` is
    ``(a_i + b_i) / sqrt(2)`` with ``a_i`` orthonormal in ``S`` and ``b_i``
    orthonormal in the complement, so every true feature is half visible to the ID
    data. ``v_*`` has norm 1.5. The pretrained extractor is
    ``B0 = B_* + 0.12 G / sqrt(20)`` (``G`` standard normal), the initial head
    ``v0 ~ N(0, 0.01^2 I)``, and the out-of-distribution (OOD) inputs are standard
    normal in all of ``R^20``. Targets are noiseless, ``y = X B_*^T v_*``.

    With ``rng=0`` and :func:`repeval_ref.transfer` at the suggested ``lr`` and
    ``steps``, the mean squared errors against the true function
    (:func:`repeval_ref.lpft_theory.prediction_error`) are: ID 5.4e-3 for LP, 4e-31
    for FT and 7e-32 for LP-FT; OOD 0.012 for LP, 0.172 for FT and 0.0065 for
    LP-FT. FT fits the ID data best and is an order of magnitude worse than LP out
    of distribution; LP-FT is best on both, as Kumar et al. found.

    Parameters
    ----------
    rng : numpy.random.Generator or int
        Random source.

    Returns
    -------
    dict
        ``X`` (24, 20), ``y`` (24,), ``B_star`` (3, 20), ``v_star`` (3,),
        ``B0`` (3, 20), ``v0`` (3,), ``X_ood`` (1000, 20) as float64 arrays, plus
        ``lr`` (float, 0.05) and ``steps`` (int, 2000), the suggested step size and
        number of gradient steps per method.

    Notes
    -----
    Book, chapter on fine-tuning and LP-FT; seed 000, "Why fine-tuning can hurt out
    of distribution" and the research exercise "Feature distortion and LP-FT".
    """
    rng = check_rng(rng)
    n, d, k, r, n_ood = 24, 20, 3, 8, 1000
    basis = _orthonormal_columns(rng, d, d)
    inside, outside = basis[:, :r], basis[:, r:]
    a = inside @ _orthonormal_columns(rng, r, k)
    b = outside @ _orthonormal_columns(rng, d - r, k)
    B_star = ((a + b) / np.sqrt(2.0)).T
    v_star = rng.standard_normal(k)
    v_star *= 1.5 / np.linalg.norm(v_star)
    X = rng.standard_normal((n, r)) @ inside.T
    y = X @ B_star.T @ v_star
    B0 = B_star + 0.12 * rng.standard_normal((k, d)) / np.sqrt(d)
    v0 = 0.01 * rng.standard_normal(k)
    X_ood = rng.standard_normal((n_ood, d))
    return {
        "X": X,
        "y": y,
        "B_star": B_star,
        "v_star": v_star,
        "B0": B0,
        "v0": v0,
        "X_ood": X_ood,
        "lr": 0.05,
        "steps": 2000,
    }


def low_shot_setup(rng, n_train_per_class=40, n_test_per_class=20):
    """Data for the exercise "Low-shot evaluation with honest error bars".

    Ten classes in ``R^12``. The class centres are ten orthonormal vectors (rows of
    a Haar-random orthogonal matrix), and each image adds isotropic noise
    ``N(0, (1.4^2 / 12) I)``, so a feature's noise has about 1.4 times the norm of
    its centre.

    With ``rng=0`` the nearest-class-mean classifier of
    :func:`repeval_ref.low_shot_eval` over 30 support draws (draw generator
    ``numpy.random.default_rng(3)``) gives 45.7 +- 7.8 % at one shot per class,
    67.9 +- 2.7 % at five and 77.3 +- 1.7 % at twenty (mean +- standard deviation
    over draws): the mean rises and the spread between draws shrinks as shots are
    added. Exact values depend on ``rng``.

    Parameters
    ----------
    rng : numpy.random.Generator or int
        Random source.
    n_train_per_class : int
        Labelled pool per class from which supports are drawn, ``>= 1``
        (default 40, enough for twenty shots).
    n_test_per_class : int
        Test images per class, ``>= 1`` (default 20).

    Returns
    -------
    train_h : numpy.ndarray of float64, shape (10 * n_train_per_class, 12)
    train_y : numpy.ndarray of int64
        Grouped by class.
    test_h : numpy.ndarray of float64, shape (10 * n_test_per_class, 12)
    test_y : numpy.ndarray of int64
        Grouped by class.

    Notes
    -----
    Book, chapter on low-shot evaluation; seed 000, "Few labels, many tasks, every
    pixel" and the exercise "Low-shot evaluation with honest error bars".
    """
    rng = check_rng(rng)
    n_train_per_class = check_int(n_train_per_class, "n_train_per_class", minimum=1)
    n_test_per_class = check_int(n_test_per_class, "n_test_per_class", minimum=1)
    n_classes, d, spread = 10, 12, 1.4
    centres = _orthonormal_columns(rng, d, n_classes).T

    def draw(per_class):
        y = _grouped_labels(per_class, n_classes)
        return centres[y] + spread / np.sqrt(d) * rng.standard_normal((y.size, d)), y

    train_h, train_y = draw(n_train_per_class)
    test_h, test_y = draw(n_test_per_class)
    return train_h, train_y, test_h, test_y


def rank_setup_noisy_clusters(rng, n=2000, n_classes=10, d=20, noise=0.3):
    """Ten noisy clusters with unequal class sizes, for the rank bound.

    Class centres are standard normal in ``R^d``; each point is its centre plus
    ``N(0, noise^2 I)``. Labels are drawn independently and uniformly (not cycled),
    so the class counts differ and the Eckart-Young floor of
    :func:`repeval_ref.rank_bound` is a sum of genuinely different counts. Project
    with :func:`random_projection` to get rank-``r`` representations. With ``rng=0``
    and projections drawn from ``numpy.random.default_rng(1)`` for ``r = 1, 2, 4,
    8`` in turn, the least-squares residual against its floor is 1628.7 / 1567,
    1466.1 / 1359, 1092.3 / 952 and 620.0 / 178, and the argmax accuracy of the
    affine least-squares probe climbs 0.214, 0.400, 0.733, 0.994.

    Parameters
    ----------
    rng : numpy.random.Generator or int
        Random source.
    n : int
        Number of points, ``>= n_classes``.
    n_classes : int
        Number of clusters, ``>= 2``.
    d : int
        Ambient dimension, ``>= 1``.
    noise : float
        Within-cluster standard deviation, ``> 0``.

    Returns
    -------
    H : numpy.ndarray of float64, shape (n, d)
    y : numpy.ndarray of int64, shape (n,)
        In random order.

    Notes
    -----
    Book ``book/rank.md``; seed 000, "What a linear probe can and cannot read" (random
    rank-r projections of ten noisy clusters).
    """
    rng = check_rng(rng)
    n_classes = check_int(n_classes, "n_classes", minimum=2)
    n = check_int(n, "n", minimum=n_classes)
    d = check_int(d, "d", minimum=1)
    noise = check_positive(noise, "noise")
    centres = rng.standard_normal((n_classes, d))
    y = rng.integers(0, n_classes, size=n).astype(np.int64)
    return centres[y] + noise * rng.standard_normal((n, d)), y


def random_projection(H, r, rng):
    """Project rows of ``H`` onto ``r`` random directions: ``H G``, ``G ~ N(0, 1)``.

    The result has rank at most ``r`` (exactly ``min(r, rank H)`` with probability 1).

    Parameters
    ----------
    H : array_like of shape (n, d)
    r : int
        Number of directions, ``>= 1``.
    rng : numpy.random.Generator or int

    Returns
    -------
    numpy.ndarray of float64, shape (n, r)

    Notes
    -----
    Seed 000, "What a linear probe can and cannot read".
    """
    H = as_float_array(H, "H")
    r = check_int(r, "r", minimum=1)
    rng = check_rng(rng)
    return H @ rng.standard_normal((H.shape[1], r))


def circle_clusters(n_per_class, rng, n_classes=10, d=2, radius=1.0, spread=0.02):
    """Tight clusters evenly spaced on a circle: rank 2, yet perfectly separable.

    Centre ``c`` sits at angle ``2 pi c / n_classes`` on a circle of ``radius``; each
    point adds isotropic 2-D noise of standard deviation ``spread``. With ``d > 2``
    the plane is embedded in ``R^d`` through a random ``d x 2`` matrix with
    orthonormal columns, so the features still have rank 2 (with two classes and
    ``spread=0`` the two centres are antipodal and the rank is 1). The affine scores
    ``h^T mu_c - ||mu_c||^2 / 2`` pick the nearest centre, which is the right one
    whenever ``spread`` is small against the gap ``radius * sin(pi / n_classes)``.

    Parameters
    ----------
    n_per_class : int
        Points per cluster, ``>= 1``.
    rng : numpy.random.Generator or int
    n_classes : int
        Number of clusters, ``>= 2``.
    d : int
        Ambient dimension, ``>= 2``.
    radius, spread : float
        Circle radius (``> 0``) and noise standard deviation (``>= 0``).

    Returns
    -------
    H : numpy.ndarray of float64, shape (n_classes * n_per_class, d)
    y : numpy.ndarray of int64
        Grouped by class.
    centres : numpy.ndarray of float64, shape (n_classes, d)

    Notes
    -----
    Book ``book/rank.md``; seed 000, the first caveat after the rank bound (ten tight
    clusters on a circle).
    """
    n_per_class = check_int(n_per_class, "n_per_class", minimum=1)
    rng = check_rng(rng)
    n_classes = check_int(n_classes, "n_classes", minimum=2)
    d = check_int(d, "d", minimum=2)
    radius = check_positive(radius, "radius")
    spread = check_positive(spread, "spread", allow_zero=True)
    angles = 2.0 * np.pi * np.arange(n_classes) / n_classes
    plane_centres = radius * np.column_stack([np.cos(angles), np.sin(angles)])
    y = _grouped_labels(n_per_class, n_classes)
    points = plane_centres[y] + spread * rng.standard_normal((y.size, 2))
    embed = np.eye(d, 2) if d == 2 else _orthonormal_columns(rng, d, 2)
    return points @ embed.T, y, plane_centres @ embed.T


def gaussian_clusters(n_per_class, n_classes, d, rng, spread=1.0, return_centres=False):
    """General-purpose labelled Gaussian clusters.

    Class centres are standard normal in ``R^d`` (drawn once per call); each point
    is its centre plus ``N(0, spread^2 I)``. Used for k-NN, retrieval, CKA and the
    label-free examples.

    Parameters
    ----------
    n_per_class : int
        Points per class, ``>= 1``.
    n_classes : int
        Number of classes, ``>= 1``.
    d : int
        Dimension, ``>= 1``.
    rng : numpy.random.Generator or int
    spread : float
        Within-class standard deviation per coordinate, ``>= 0``.
    return_centres : bool
        Also return the class centres.

    Returns
    -------
    X, y, centres : numpy.ndarray
        As :func:`circle_clusters` returns them: float64 points of shape
        ``(n_classes * n_per_class, d)``, int64 labels grouped by class, and the float64
        centres of shape ``(n_classes, d)``, these only when ``return_centres`` is true.

    Notes
    -----
    A generic stand-in for labelled features where a chapter needs one: the
    weighted k-NN and label-free sections of seed 000, the retrieval metrics and
    CKA of seed 003.
    """
    n_per_class = check_int(n_per_class, "n_per_class", minimum=1)
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    d = check_int(d, "d", minimum=1)
    rng = check_rng(rng)
    spread = check_positive(spread, "spread", allow_zero=True)
    if not isinstance(return_centres, (bool, np.bool_)):
        raise TypeError(f"return_centres must be a bool, got {return_centres!r}")
    centres = rng.standard_normal((n_classes, d))
    y = _grouped_labels(n_per_class, n_classes)
    X = centres[y] + spread * rng.standard_normal((y.size, d))
    return (X, y, centres) if return_centres else (X, y)
