"""The seeded two-dimensional toy geometries and the three caricature encoders.

Sources: seed 000 ("Two toy representations, by hand", "Every protocol is a question
with a budget", "A simulation in which the rankings flip").
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from .._validation import check_int, check_rng
from ._common import _cycled_labels, _orthonormal_columns

__all__ = [
    "TOY_GEOMETRIES",
    "disk_and_ring",
    "long_blobs",
    "long_blobs_bayes_accuracy",
    "toy_geometry",
    "synthetic_encoders",
]

#: Names accepted by :func:`toy_geometry`, in the order the book shows them.
TOY_GEOMETRIES = ("clustered", "disk_and_ring", "long_blobs", "collapsed")


def _annulus(rng, m, r_in, r_out):
    """``m`` points uniform in area on the annulus ``r_in <= |x| <= r_out``."""
    # The area inside radius r grows like r^2, so r^2 is uniform between the bounds.
    radius = np.sqrt(rng.uniform(r_in**2, r_out**2, size=m))
    angle = rng.uniform(0.0, 2.0 * np.pi, size=m)
    return np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])


# ------------------------------------------------------------------ toy geometries
def disk_and_ring(n, rng):
    """Two classes in the plane: a full disk and a ring around it.

    Class 0 is uniform on the unit disk ``|x| <= 1``; class 1 is uniform in area on
    the ring ``1.5 <= |x| <= 2.5``. A gap of 0.5 separates the classes, so every
    nearest neighbour has the right label, yet no straight line separates them.

    Parameters
    ----------
    n : int
        Number of points, ``>= 2``. Labels cycle ``0, 1, 0, 1, ...`` (balanced;
        class 0 has one more point when ``n`` is odd).
    rng : numpy.random.Generator or int
        Random source.

    Returns
    -------
    X : numpy.ndarray of float64, shape (n, 2)
    y : numpy.ndarray of int64, shape (n,)

    Notes
    -----
    Book ``book/protocols.md``, "Two toy representations"; seed 000, "Two toy
    representations, by hand" (disk and ring).
    """
    n = check_int(n, "n", minimum=2)
    rng = check_rng(rng)
    y = _cycled_labels(n, 2)
    X = np.empty((n, 2))
    m0 = int(np.sum(y == 0))
    X[y == 0] = _annulus(rng, m0, 0.0, 1.0)
    X[y == 1] = _annulus(rng, n - m0, 1.5, 2.5)
    return X, y


def long_blobs(n, rng):
    """Two elongated Gaussian classes whose long axis carries no label.

    Class 0 has mean ``(-0.75, 0)`` and class 1 mean ``(+0.75, 0)``; both have
    standard deviation 1 along axis 0 and 4 along axis 1, independent. The Bayes
    classifier thresholds axis 0 at 0 (see :func:`long_blobs_bayes_accuracy`),
    while Euclidean nearest neighbours are chosen mostly by the useless axis 1.

    Parameters
    ----------
    n, rng
        As for :func:`disk_and_ring`: ``n >= 2`` points with labels ``0, 1, 0, 1, ...``,
        and the random source (a generator or an int seed).

    Returns
    -------
    X, y : numpy.ndarray
        As :func:`disk_and_ring` returns them: float64 points of shape (n, 2) and int64
        labels of shape (n,).

    Notes
    -----
    Book ``book/protocols.md``, "Two toy representations"; seed 000, "Two toy
    representations, by hand" (long blobs).
    """
    n = check_int(n, "n", minimum=2)
    rng = check_rng(rng)
    y = _cycled_labels(n, 2)
    noise = rng.standard_normal((n, 2)) * np.array([1.0, 4.0])
    X = noise + np.column_stack([np.where(y == 1, 0.75, -0.75), np.zeros(n)])
    return X, y


def long_blobs_bayes_accuracy():
    """Best possible accuracy on :func:`long_blobs`: ``Phi(0.75) ~= 0.7734``.

    With equal priors and equal covariances the Bayes rule thresholds axis 0 halfway
    between the means; each mean lies 0.75 standard deviations from the threshold,
    so the accuracy is the standard normal CDF at 0.75 (computed with
    ``scipy.stats.norm``).

    Returns
    -------
    float
    """
    return float(stats.norm.cdf(0.75))


def _clustered_2d(n, rng):
    """Four tight blobs at (+-1, +-1); class 0 owns the left pair, class 1 the right."""
    y = _cycled_labels(n, 2)
    top = rng.integers(0, 2, size=n) * 2.0 - 1.0  # which corner of the class's pair
    centres = np.column_stack([np.where(y == 1, 1.0, -1.0), top])
    return centres + 0.25 * rng.standard_normal((n, 2)), y


def _collapsed_2d(n, rng):
    """The four blobs of ``clustered`` pressed onto the diagonal ``x1 = x2``.

    Each point keeps only its coordinate along ``u = (1, 1)/sqrt(2)``; across the
    diagonal it gets fresh noise of standard deviation 0.02 that carries no label.
    The upper-left blob (class 0) and the lower-right blob (class 1) both sit at
    ``u = 0`` and land on top of each other.
    """
    X, y = _clustered_2d(n, rng)
    u = np.array([1.0, 1.0]) / np.sqrt(2.0)
    w = np.array([1.0, -1.0]) / np.sqrt(2.0)
    across = 0.02 * rng.standard_normal(n)
    return np.outer(X @ u, u) + np.outer(across, w), y


def toy_geometry(name, n, rng):
    """One of the four two-class toy representations of the protocols chapter.

    * ``"clustered"``: four blobs (standard deviation 0.25) at ``(+-1, +-1)``; class 0
      owns the two left blobs, class 1 the two right ones. Both k-NN and a linear
      probe read it, and its centred features spread evenly over two directions
      (effective rank about 2.0).
    * ``"disk_and_ring"``: :func:`disk_and_ring`, readable by k-NN, not by a line.
    * ``"long_blobs"``: :func:`long_blobs`, readable by a line, poorly by 1-NN.
    * ``"collapsed"``: the ``clustered`` points pressed onto the diagonal
      ``x1 = x2`` (their coordinate across it is replaced by label-free noise of
      standard deviation 0.02), so one blob of each class lands on the other: no
      classifier can beat about 75 %, and the effective rank of the centred
      features is about 1.1.

    Parameters
    ----------
    name : str
        One of :data:`TOY_GEOMETRIES`.
    n : int
        Number of points, ``>= 2``, labelled ``0, 1, 0, 1, ...`` in turn.
    rng : numpy.random.Generator or int
        Random source.

    Returns
    -------
    X, y : numpy.ndarray
        The float64 points, shape (n, 2), and their int64 labels, shape (n,).

    Notes
    -----
    Book ``book/protocols.md``, the widget of four geometries; seed 000, "Every
    protocol is a question with a budget" (the toy geometries, the collapsed case and
    its effective rank 1.1 against 2.0).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    makers = {
        "clustered": _clustered_2d,
        "disk_and_ring": disk_and_ring,
        "long_blobs": long_blobs,
        "collapsed": _collapsed_2d,
    }
    if name not in makers:
        raise ValueError(f"name must be one of {TOY_GEOMETRIES}, got {name!r}")
    n = check_int(n, "n", minimum=2)
    rng = check_rng(rng)
    return makers[name](n, rng)


# ------------------------------------------------- three encoders, three rankings
def synthetic_encoders(rng, n_train=1000, n_test=1000):
    """Features of three caricature encoders for one ten-class task.

    All three encoders see the same images, so they share the labels; the labels
    cycle ``0, 1, ..., 9, 0, ...`` in the training and in the test set.

    * ``"clustered"`` (16-d): the class centre ``c_y`` (ten standard normal vectors
      drawn once) plus isotropic noise of standard deviation 1.25 per coordinate.
      Noisy class centres, the geometry contrastive training aims for.
    * ``"spread"`` (64-d), the masked-autoencoder caricature, three blocks:
      16 coordinates ``0.55 m_y + N(0, I)`` (a weak linear class signal);
      16 coordinates ``s * 1.5 a_y + N(0, 0.3^2 I)`` with a sign ``s = +-1`` drawn
      afresh for every image (a strong signal that averages to zero within a class,
      so no linear map reads it but ``|.|`` does); and 32 nuisance coordinates
      ``N(0, 5.5^2 I)`` that carry nothing and dominate the distances.
      ``m_c`` and ``a_c`` are standard normal class vectors drawn once.
    * ``"collapsed"`` (3-d): the clustered features multiplied by one fixed
      ``16 x 3`` matrix with orthonormal columns, i.e. squeezed into 3 dimensions.

    With ``rng=0`` and the default sizes, weighted cosine 20-NN (``tau = 0.07``),
    ``LogisticRegression`` on standardised features, a one-hidden-layer MLP probe
    (``MLPClassifier((64,), max_iter=300)`` on standardised features) and the
    effective rank (RankMe) of the centred training features give

    =========  ======  ======  ======  ==============
    encoder    20-NN   linear  MLP     effective rank
    =========  ======  ======  ======  ==============
    clustered  0.854   0.889   0.868   15.6
    spread     0.150   0.574   0.997   48.9
    collapsed  0.369   0.391   0.380   3.0
    =========  ======  ======  ======  ==============

    so k-NN ranks clustered > collapsed > spread, the linear probe clustered >
    spread > collapsed, the MLP puts spread first, and the effective rank ranks
    spread > clustered > collapsed (exact values depend on ``rng``).

    Parameters
    ----------
    rng : numpy.random.Generator or int
        Random source (class vectors, projection and noise).
    n_train, n_test : int
        Number of training and test images, each ``>= 10``.

    Returns
    -------
    dict
        ``{"clustered": ..., "spread": ..., "collapsed": ...}``, each value a tuple
        ``(train_h, train_y, test_h, test_y)`` with ``train_h`` of shape
        ``(n_train, d)``, ``test_h`` of shape ``(n_test, d)`` (float64) and int64
        labels; ``d`` is 16, 64 and 3.

    Notes
    -----
    Book ``book/protocols.md``; seed 000, "A simulation in which the rankings flip"
    and "Three protocols, three rankings".
    """
    rng = check_rng(rng)
    n_train = check_int(n_train, "n_train", minimum=10)
    n_test = check_int(n_test, "n_test", minimum=10)
    n_classes, d = 10, 16

    # The encoders themselves: drawn once, shared by the training and test images.
    centres = rng.standard_normal((n_classes, d))
    squeeze = _orthonormal_columns(rng, d, 3)
    weak = rng.standard_normal((n_classes, 16))
    strong = rng.standard_normal((n_classes, 16))

    def encode(m):
        y = _cycled_labels(m, n_classes)
        clustered = centres[y] + 1.25 * rng.standard_normal((m, d))
        sign = rng.choice(np.array([-1.0, 1.0]), size=(m, 1))
        spread = np.hstack(
            [
                0.55 * weak[y] + rng.standard_normal((m, 16)),
                sign * 1.5 * strong[y] + 0.3 * rng.standard_normal((m, 16)),
                5.5 * rng.standard_normal((m, 32)),
            ]
        )
        return y, {"clustered": clustered, "spread": spread, "collapsed": clustered @ squeeze}

    train_y, train = encode(n_train)
    test_y, test = encode(n_test)
    return {
        name: (train[name], train_y.copy(), test[name], test_y.copy())
        for name in ("clustered", "spread", "collapsed")
    }
