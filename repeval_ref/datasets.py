"""Seeded synthetic data for every setup of the book and the graded exercises.

Each generator takes a random source ``rng`` (a ``numpy.random.Generator`` or an
integer seed, see :func:`repeval_ref._validation.check_rng`) and size arguments, and
returns plain NumPy arrays: float64 features and int64 labels. The same generator
state always gives the same arrays, and a ``Generator`` passed in is advanced, so
two calls with one ``Generator`` give two independent samples.

Row order. Generators that take a total size ``n`` cycle the labels
``0, 1, ..., K-1, 0, 1, ...`` (as balanced as ``n`` allows); generators that take a
per-class size put class 0 first, then class 1, and so on. Every docstring repeats
the order it uses.

Nothing here evaluates anything: the protocols live in their own modules
(:mod:`repeval_ref.knn`, :mod:`repeval_ref.linear_probe`, :mod:`repeval_ref.lowshot`,
:mod:`repeval_ref.finetune`, :mod:`repeval_ref.labelfree`, :mod:`repeval_ref.rank`).
The numbers each setup produces with those protocols are listed in the docstrings
and checked in ``tests/test_datasets.py``.

Sources: seed 000 (the toy geometries, the exercise setups and the simulation in
which the protocol rankings flip) and seed 001 (the texture example with a fixed
random-filter representation and five exact changes of coordinates).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import stats

from ._validation import as_float_array, check_int, check_positive, check_rng

__all__ = [
    "TOY_GEOMETRIES",
    "LINEAR_PROBE_CS",
    "TEXTURE_CLASSES",
    "disk_and_ring",
    "long_blobs",
    "long_blobs_bayes_accuracy",
    "toy_geometry",
    "synthetic_encoders",
    "texture_images",
    "random_filter_features",
    "feature_transforms",
    "linear_probe_setup",
    "transfer_setup",
    "low_shot_setup",
    "rank_setup_noisy_clusters",
    "random_projection",
    "circle_clusters",
    "gaussian_clusters",
]

#: Names accepted by :func:`toy_geometry`, in the order the book shows them.
TOY_GEOMETRIES = ("clustered", "disk_and_ring", "long_blobs", "collapsed")

#: The grid of inverse regularisation strengths used with :func:`linear_probe_setup`:
#: 13 values from 1e-4 to 1e2, two per decade.
LINEAR_PROBE_CS = np.logspace(-4, 2, 13)
LINEAR_PROBE_CS.flags.writeable = False

#: Element kinds of :func:`texture_images`; the label is the position in this tuple.
TEXTURE_CLASSES = ("disk", "ring", "bar", "cross")


# --------------------------------------------------------------------------- helpers
def _cycled_labels(n, n_classes):
    """Labels 0, 1, ..., K-1, 0, 1, ... of length ``n`` (int64)."""
    return np.arange(n, dtype=np.int64) % n_classes


def _grouped_labels(n_per_class, n_classes):
    """Labels 0 repeated ``n_per_class`` times, then 1, ... (int64)."""
    return np.repeat(np.arange(n_classes, dtype=np.int64), n_per_class)


def _orthonormal_columns(rng, d, k):
    """A ``(d, k)`` matrix with orthonormal columns, uniformly distributed (Haar)."""
    q = stats.ortho_group.rvs(d, random_state=rng) if d > 1 else np.ones((1, 1))
    return np.asarray(q[:, :k], dtype=np.float64)


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
    n : int
        Number of points, ``>= 2``. Labels cycle ``0, 1, 0, 1, ...``.
    rng : numpy.random.Generator or int
        Random source.

    Returns
    -------
    X : numpy.ndarray of float64, shape (n, 2)
    y : numpy.ndarray of int64, shape (n,)

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
        Number of points, ``>= 2``. Labels cycle ``0, 1, 0, 1, ...``.
    rng : numpy.random.Generator or int
        Random source.

    Returns
    -------
    X : numpy.ndarray of float64, shape (n, 2)
    y : numpy.ndarray of int64, shape (n,)

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
        spread = np.hstack([
            0.55 * weak[y] + rng.standard_normal((m, 16)),
            sign * 1.5 * strong[y] + 0.3 * rng.standard_normal((m, 16)),
            5.5 * rng.standard_normal((m, 32)),
        ])
        return y, {"clustered": clustered, "spread": spread, "collapsed": clustered @ squeeze}

    train_y, train = encode(n_train)
    test_y, test = encode(n_test)
    return {
        name: (train[name], train_y.copy(), test[name], test_y.copy())
        for name in ("clustered", "spread", "collapsed")
    }


# ---------------------------------------------------------- textures (seed 001)
_IMAGE_SIZE = 32


def _element_mask(kind, cy, cx, half, angle):
    """Boolean ``32 x 32`` mask of one element centred at ``(cy, cx)``.

    ``half`` is the half-size (radius of a disk or ring, half-length of a bar or of a
    cross's arms); rings are 1.2 pixels thick and bars 1.4 pixels wide.
    """
    rows, cols = np.indices((_IMAGE_SIZE, _IMAGE_SIZE), dtype=np.float64)
    dy, dx = rows - cy, cols - cx
    dist = np.hypot(dy, dx)
    if kind == 0:
        return dist <= half
    if kind == 1:
        return (dist <= half) & (dist >= half - 1.2)
    along = np.cos(angle) * dx + np.sin(angle) * dy
    across = np.cos(angle) * dy - np.sin(angle) * dx
    first_arm = (np.abs(along) <= half) & (np.abs(across) <= 0.7)
    if kind == 2:
        return first_arm
    second_arm = (np.abs(across) <= half) & (np.abs(along) <= 0.7)
    return first_arm | second_arm


def _one_texture(kind, rng):
    background = rng.uniform(0.3, 0.5)
    image = np.full((_IMAGE_SIZE, _IMAGE_SIZE), background)
    for _ in range(int(rng.integers(5, 10))):
        half = rng.uniform(2.0, 4.0)
        cy, cx = rng.uniform(half, _IMAGE_SIZE - 1 - half, size=2)
        angle = rng.uniform(0.0, np.pi)
        image[_element_mask(kind, cy, cx, half, angle)] += rng.uniform(0.2, 0.6)
    return image + rng.normal(0.0, 0.05, size=image.shape)


def texture_images(n_per_class, rng):
    """Grey ``32 x 32`` textures of four classes of scattered elements.

    Class ``c`` scatters elements of kind :data:`TEXTURE_CLASSES` ``[c]`` (disk,
    ring, bar, cross): each image has a flat background level drawn from
    ``U[0.3, 0.5]``, then 5 to 9 elements, each with half-size ``U[2, 4]`` pixels, a
    centre uniform inside the image (at least one half-size from the border),
    orientation ``U[0, pi)`` (bars and crosses) and contrast ``U[0.2, 0.6]`` added
    to the pixels it covers (overlaps add up), and finally Gaussian pixel noise of
    standard deviation 0.05.

    Parameters
    ----------
    n_per_class : int
        Images per class, ``>= 1``.
    rng : numpy.random.Generator or int
        Random source.

    Returns
    -------
    images : numpy.ndarray of float64, shape (4 * n_per_class, 32, 32)
    labels : numpy.ndarray of int64, shape (4 * n_per_class,)
        Grouped by class: ``n_per_class`` disks, then rings, bars, crosses.

    Notes
    -----
    Book, invariances of the protocols; seed 001, "Examples" (synthetic textures).
    """
    n_per_class = check_int(n_per_class, "n_per_class", minimum=1)
    rng = check_rng(rng)
    labels = _grouped_labels(n_per_class, len(TEXTURE_CLASSES))
    images = np.stack([_one_texture(int(kind), rng) for kind in labels])
    return images, labels


def random_filter_features(images, n_filters=32, size=5, seed=1000, *, chunk=256):
    """A frozen, untrained representation: random filters, ReLU, average pooling.

    The filters ``W_f`` (``f = 1..n_filters``, each ``size x size``) are standard
    normal draws from ``numpy.random.default_rng(seed)``, shifted to zero mean and
    scaled to unit Frobenius norm. Feature ``f`` of an image ``I`` is

    ``h_f = mean_{i,j} max(0, sum_{a,b} I[i+a, j+b] W_f[a, b])``

    over all valid positions (no padding), i.e. a ReLU of the cross-correlation,
    globally averaged. The same ``seed`` always gives the same encoder.

    Parameters
    ----------
    images : array_like of shape (n, H, W)
        Grey images with ``H, W >= size``.
    n_filters : int
        Number of filters (feature dimension), ``>= 1``.
    size : int
        Filter side length, ``>= 2``.
    seed : int
        Seed of the filter bank (not of the data).
    chunk : int
        Images processed at once (memory bound only; the result does not depend on it).

    Returns
    -------
    numpy.ndarray of float64, shape (n, n_filters)
        Non-negative features.

    Notes
    -----
    Seed 001, "Examples" (32 random 5 x 5 filters, zero mean, unit norm, ReLU,
    global average pooling; nothing is trained).
    """
    images = as_float_array(images, "images", ndim=3)
    n_filters = check_int(n_filters, "n_filters", minimum=1)
    size = check_int(size, "size", minimum=2)
    chunk = check_int(chunk, "chunk", minimum=1)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    if images.shape[1] < size or images.shape[2] < size:
        raise ValueError(
            f"images must be at least {size} x {size} pixels for size={size}, got shape {images.shape}"
        )
    filters = np.random.default_rng(int(seed)).standard_normal((n_filters, size, size))
    filters -= filters.mean(axis=(1, 2), keepdims=True)
    filters /= np.linalg.norm(filters.reshape(n_filters, -1), axis=1)[:, None, None]

    out = np.empty((images.shape[0], n_filters))
    for start in range(0, images.shape[0], chunk):
        windows = sliding_window_view(images[start:start + chunk], (size, size), axis=(1, 2))
        responses = np.einsum("nijab,fab->nijf", windows, filters, optimize=True)
        out[start:start + chunk] = np.maximum(responses, 0.0).mean(axis=(1, 2))
    return out


def feature_transforms(d, seed):
    """Five fixed, exactly invertible changes of coordinates of ``R^d``.

    Returns functions ``F -> G`` acting on feature matrices of shape ``(n, d)``
    (rows are feature vectors); the same ``seed`` gives the same maps.

    * ``"rotation"``: ``G = F Q^T`` with ``Q`` a Haar-random orthogonal matrix.
    * ``"scale"``: ``G = 10 F``.
    * ``"translation"``: ``G = F + t`` with ``t ~ N(0, 0.05^2 I)``.
    * ``"diagonal"``: ``G = F diag(10^u)`` with ``u_j ~ U[-2, 2]`` per feature.
    * ``"dense"``: ``G = F A^T`` with ``A = U diag(10^v) V^T``, ``U, V`` Haar-random
      orthogonal and ``v_j ~ U[-1, 1]`` (singular values between 0.1 and 10).

    Parameters
    ----------
    d : int
        Feature dimension, ``>= 1``.
    seed : int or numpy.random.Generator
        Random source of the maps.

    Returns
    -------
    dict
        ``{"rotation", "scale", "translation", "diagonal", "dense"}`` -> callable
        taking an array of shape ``(n, d)`` and returning a new float64 array of the
        same shape (input validated, never modified).

    Notes
    -----
    Seed 001, "Examples" (the five fixed maps) and the invariance table before it.
    """
    d = check_int(d, "d", minimum=1)
    rng = check_rng(seed, "seed")
    rotation = _orthonormal_columns(rng, d, d)
    shift = rng.normal(0.0, 0.05, size=d)
    diagonal = 10.0 ** rng.uniform(-2.0, 2.0, size=d)
    left, right = _orthonormal_columns(rng, d, d), _orthonormal_columns(rng, d, d)
    dense = (left * 10.0 ** rng.uniform(-1.0, 1.0, size=d)) @ right.T

    def checked(F):
        F = as_float_array(F, "F")
        if F.shape[1] != d:
            raise ValueError(f"F must have {d} columns (the d of these maps), got shape {F.shape}")
        return F

    return {
        "rotation": lambda F: checked(F) @ rotation.T,
        "scale": lambda F: 10.0 * checked(F),
        "translation": lambda F: checked(F) + shift,
        "diagonal": lambda F: checked(F) * diagonal,
        "dense": lambda F: checked(F) @ dense.T,
    }


# ----------------------------------------------------------------- exercise setups
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
    (:func:`repeval_ref.finetune.prediction_error`) are: ID 5.4e-3 for LP, 4e-31
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
        "X": X, "y": y, "B_star": B_star, "v_star": v_star,
        "B0": B0, "v0": v0, "X_ood": X_ood, "lr": 0.05, "steps": 2000,
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
    X : numpy.ndarray of float64, shape (n_classes * n_per_class, d)
    y : numpy.ndarray of int64
        Grouped by class.
    centres : numpy.ndarray of float64, shape (n_classes, d)
        Only when ``return_centres`` is true.

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
