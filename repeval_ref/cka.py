"""Similarity of two representations of the same samples: linear, RBF and minibatch CKA.

Linear centred kernel alignment (Kornblith et al. 2019) compares two feature matrices
``X`` (n, p) and ``Y`` (n, q) computed on the same n samples, for example two layers
or two encoders (seed 003, section 6). With the sample Gram matrices
:math:`K = XX^\\top`, :math:`L = YY^\\top` and the centring matrix
:math:`H = I - \\mathbf{1}\\mathbf{1}^\\top / n`,

.. math:: \\mathrm{HSIC}(K, L) = \\frac{\\operatorname{tr}(K H L H)}{(n-1)^2},
   \\qquad
   \\mathrm{CKA} = \\frac{\\mathrm{HSIC}(K, L)}{\\sqrt{\\mathrm{HSIC}(K, K)\\,\\mathrm{HSIC}(L,
   L)}}.

For linear kernels, :math:`\\operatorname{tr}(KHLH) = \\lVert \\tilde X^\\top \\tilde Y \\rVert_F^2`
with column-centred :math:`\\tilde X = HX`, :math:`\\tilde Y = HY`, so everything is
computed from p x q, p x p and q x q matrices and no n x n matrix is formed.
"""

from __future__ import annotations

import numpy as np

from ._validation import (
    as_float_array,
    check_bool,
    check_int,
    check_positive,
    check_rng,
    check_same_length,
)

__all__ = ["linear_cka", "rbf_cka", "hsic_unbiased", "minibatch_cka", "MinibatchCKA", "cka_matrix"]


def _center_columns(X, name):
    """Column-centred, rescaled copy of ``X``; an all-constant ``X`` raises ``ValueError``.

    A column that is exactly constant is set to exactly zero (its rounded mean
    would otherwise leave residues of order 1e-17). The result is divided by its
    largest absolute entry, which changes no CKA value (CKA is invariant to
    isotropic scaling) and keeps the products below away from overflow and
    underflow.
    """
    constant = np.ptp(X, axis=0) == 0
    if np.all(constant):
        raise ValueError(
            f"{name} is constant in every column; after centring it is zero and CKA is undefined"
        )
    Xc = X - X.mean(axis=0, keepdims=True)
    Xc[:, constant] = 0.0
    return Xc / np.max(np.abs(Xc))


def _same_rows(arrays, name):
    """Row count of ``arrays[0]``; ``ValueError`` naming ``{name}[i]`` if another differs.

    ``arrays`` is the validated list of per-layer arrays given as argument ``name``
    (the samples are the rows, so every layer must have the same number of them).
    """
    n = arrays[0].shape[0]
    for i, A in enumerate(arrays):
        if A.shape[0] != n:
            raise ValueError(f"{name}[{i}] has {A.shape[0]} rows but {name}[0] has {n}")
    return n


def _hsic_linear(Xc, Yc):
    """Biased HSIC estimate with linear kernels, from already column-centred inputs.

    Returns :math:`\\lVert X_c^\\top Y_c \\rVert_F^2 / (n-1)^2`, equal to
    :math:`\\operatorname{tr}(KHLH)/(n-1)^2` with :math:`K = XX^\\top`, :math:`L = YY^\\top`.
    """
    n = Xc.shape[0]
    cross = Xc.T @ Yc
    return float(np.sum(cross * cross)) / (n - 1) ** 2


def linear_cka(X, Y, debiased=False):
    """Linear centred kernel alignment between two representations of the same samples.

    .. math:: \\mathrm{CKA}(X, Y) =
       \\frac{\\lVert \\tilde X^\\top \\tilde Y \\rVert_F^2}
            {\\lVert \\tilde X^\\top \\tilde X \\rVert_F \\, \\lVert \\tilde Y^\\top \\tilde Y
            \\rVert_F},

    with :math:`\\tilde X, \\tilde Y` the column-centred inputs (Kornblith et al. 2019).
    The value lies in [0, 1]; it is 1 when ``Y`` is an orthogonal transform of ``X``
    up to scale and translation, and it is invariant to orthogonal transforms,
    isotropic scaling and translation of either input, but not to general invertible
    linear maps. No small constant is added to the denominator: a zero denominator
    (an input that is constant) is an error, not a silent near-zero score.

    Book ``book/cka.md`` (seed 003, section 6).

    Parameters
    ----------
    X : array_like of shape (n, p)
        First representation, one row per sample; ``n >= 2``.
    Y : array_like of shape (n, q)
        Second representation of the same ``n`` samples, in the same order.
    debiased : bool, default False
        Replace each biased HSIC by the unbiased estimator of Song et al. (2012)
        (:func:`hsic_unbiased`), as in Kornblith et al.'s code. The biased CKA is
        pulled up for ``n`` not much larger than the dimensions (two independent
        random representations score far above 0); the debiased one is close to 0
        there. Needs ``n >= 4``; the value may then fall slightly below 0 and is not
        clipped. Computed from the features in :math:`O(n(p+q) + n p q)`, no n x n
        matrix.

    Returns
    -------
    float
        CKA in [0, 1] (rounding excess beyond the bounds is clipped), or the
        debiased value (at most 1, possibly slightly negative).

    Raises
    ------
    ValueError
        Non-2-D input, fewer than 2 rows, different numbers of rows, NaN/inf, or an
        input whose every column is constant (zero after centring).
    """
    debiased = check_bool(debiased, "debiased")
    X = as_float_array(X, "X", ndim=2, min_rows=4 if debiased else 2)
    Y = as_float_array(Y, "Y", ndim=2, min_rows=4 if debiased else 2)
    check_same_length(X=X, Y=Y)
    Xc = _center_columns(X, "X")
    Yc = _center_columns(Y, "Y")
    if debiased:
        return _debiased_linear_cka(Xc, Yc)
    hsic_xy = _hsic_linear(Xc, Yc)
    norm_x = np.sqrt(_hsic_linear(Xc, Xc))
    norm_y = np.sqrt(_hsic_linear(Yc, Yc))
    if norm_x == 0:  # pragma: no cover - excluded by the constant-column check
        raise ValueError("X is zero after centring; CKA is undefined")
    if norm_y == 0:  # pragma: no cover
        raise ValueError("Y is zero after centring; CKA is undefined")
    return float(min(1.0, max(0.0, hsic_xy / (norm_x * norm_y))))


# ---------------------------------------------------------------------------
# unbiased HSIC, debiased and RBF CKA, minibatch CKA (seed 003, section 6)
# ---------------------------------------------------------------------------


def _hsic_u_parts(tr_kl, sum_k, sum_l, row_kl, n):
    """Song et al. (2012) unbiased HSIC from the sums it needs (zero-diagonal Grams).

    ``tr_kl = tr(K~ L~)``, ``sum_k = 1' K~ 1``, ``sum_l = 1' L~ 1``,
    ``row_kl = 1' K~ L~ 1``.
    """
    return (tr_kl + sum_k * sum_l / ((n - 1) * (n - 2)) - 2.0 * row_kl / (n - 2)) / (n * (n - 3))


def hsic_unbiased(K, L):
    """Unbiased HSIC estimator of Song et al. (2012) from two n x n Gram matrices.

    With :math:`\\tilde K, \\tilde L` the Gram matrices with their diagonals set to 0,

    .. math:: \\mathrm{HSIC}_1(K, L) = \\frac{1}{n(n-3)} \\Bigl[
       \\operatorname{tr}(\\tilde K \\tilde L)
       + \\frac{\\mathbf 1^\\top \\tilde K \\mathbf 1 \\; \\mathbf 1^\\top \\tilde L \\mathbf
         1}{(n-1)(n-2)}
       - \\frac{2}{n-2} \\mathbf 1^\\top \\tilde K \\tilde L \\mathbf 1 \\Bigr].

    Its expectation is the population HSIC (the biased estimator
    :math:`\\operatorname{tr}(KHLH)/(n-1)^2` is off by :math:`O(1/n)`). It is the
    building block of the debiased CKA (Kornblith et al. 2019) and of minibatch CKA
    (Nguyen et al. 2021). Book ``book/cka.md``; seed 003, section 6.

    Parameters
    ----------
    K, L : array_like of shape (n, n)
        Symmetric Gram (kernel) matrices of the same ``n >= 4`` samples.

    Returns
    -------
    float
    """
    K = as_float_array(K, "K", ndim=2, min_rows=4)
    L = as_float_array(L, "L", ndim=2, min_rows=4)
    for M, name in ((K, "K"), (L, "L")):
        if M.shape[0] != M.shape[1]:
            raise ValueError(f"{name} must be square, got shape {M.shape}")
    if K.shape != L.shape:
        raise ValueError(f"K has shape {K.shape} but L has shape {L.shape}")
    return float(_hsic_u_gram(K, L))


def _zero_diag(K):
    K = K.copy()
    np.fill_diagonal(K, 0.0)
    return K


def _hsic_u_gram(K, L):
    n = K.shape[0]
    Kt, Lt = _zero_diag(K), _zero_diag(L)
    return _hsic_u_parts(
        float(np.sum(Kt * Lt)),
        float(Kt.sum()),
        float(Lt.sum()),
        float(Kt.sum(axis=1) @ Lt.sum(axis=1)),
        n,
    )


def _hsic_u_linear(Xc, Yc):
    """Unbiased HSIC of the linear kernels of ``Xc`` and ``Yc`` without n x n matrices."""
    n = Xc.shape[0]
    a = np.einsum("ij,ij->i", Xc, Xc)  # diagonal of K
    b = np.einsum("ij,ij->i", Yc, Yc)
    sx, sy = Xc.sum(axis=0), Yc.sum(axis=0)
    cross = Xc.T @ Yc
    tr_kl = float(np.sum(cross * cross) - a @ b)
    sum_k = float(sx @ sx - a.sum())
    sum_l = float(sy @ sy - b.sum())
    row_kl = float((Xc @ sx - a) @ (Yc @ sy - b))
    return _hsic_u_parts(tr_kl, sum_k, sum_l, row_kl, n)


def _ratio(h_xy, h_xx, h_yy):
    if not h_xx > 0:
        raise ValueError(
            "the unbiased HSIC of X with itself is not positive; debiased CKA is undefined "
            "(too few samples or a degenerate X)"
        )
    if not h_yy > 0:
        raise ValueError(
            "the unbiased HSIC of Y with itself is not positive; debiased CKA is undefined "
            "(too few samples or a degenerate Y)"
        )
    return float(min(1.0, h_xy / np.sqrt(h_xx * h_yy)))


def _debiased_linear_cka(Xc, Yc):
    return _ratio(_hsic_u_linear(Xc, Yc), _hsic_u_linear(Xc, Xc), _hsic_u_linear(Yc, Yc))


_RBF_MEDIANS = ("full", "pairs")


def _rbf_gram(X, sigma_frac, name, median="full"):
    """RBF Gram matrix of the rows of ``X`` with a median-heuristic bandwidth.

    ``median="full"``: :math:`\\sigma^2 = \\text{sigma\\_frac}^2 \\times
    \\operatorname{median}_{i,j} \\lVert x_i - x_j \\rVert^2` over the full n x n matrix,
    zero diagonal included (Kornblith et al.'s ``gram_rbf(x, threshold)``).
    ``median="pairs"``: :math:`\\sigma = \\text{sigma\\_frac} \\times
    \\operatorname{median}_{i<j} \\lVert x_i - x_j \\rVert`.
    """
    from scipy.spatial.distance import pdist, squareform

    sq = pdist(X, "sqeuclidean")
    D2 = squareform(sq)
    if median == "full":
        sigma2 = sigma_frac * sigma_frac * float(np.median(D2))
        if not sigma2 > 0:
            raise ValueError(
                f"{name}: the median squared distance over all n x n pairs (zero diagonal "
                "included) is 0 (mostly duplicate rows), so the RBF bandwidth is 0"
            )
    else:
        med = float(np.median(np.sqrt(sq)))
        if not med > 0:
            raise ValueError(
                f"{name}: the median distance between distinct samples is 0 (mostly duplicate "
                "rows), so the RBF bandwidth is 0"
            )
        sigma2 = (sigma_frac * med) ** 2
    return np.exp(-D2 / (2.0 * sigma2))


def rbf_cka(X, Y, sigma_frac=0.5, debiased=False, median="full"):
    """CKA with Gaussian (RBF) kernels, bandwidth a fraction of the median distance.

    :math:`K_{ij} = \\exp(-\\lVert x_i - x_j \\rVert^2 / (2\\sigma_X^2))`, the same for
    ``L`` on ``Y`` (with its own :math:`\\sigma_Y`), and

    .. math:: \\mathrm{CKA} = \\frac{\\operatorname{tr}(KHLH)}
       {\\sqrt{\\operatorname{tr}(KHKH)\\operatorname{tr}(LHLH)}}.

    Kornblith et al. (2019) set the bandwidth as a fraction of the median distance
    (``threshold`` in their public code; ``0.5`` is one of their settings). Two
    medians are offered:

    * ``median="full"`` (default), exactly Kornblith et al.'s ``gram_rbf(x, threshold)``
      with ``threshold = sigma_frac``:

      .. math:: \\sigma_X^2 = \\text{sigma\\_frac}^2 \\,
         \\operatorname{median}_{1 \\le i, j \\le n} \\lVert x_i - x_j \\rVert^2,

      the median of the squared distances over the full n x n matrix, its ``n`` zero
      diagonal entries included (so the bandwidth is a little smaller than with
      distinct pairs when ``n`` is small; the two converge as ``n`` grows).
    * ``median="pairs"``: the median distance over distinct pairs,
      :math:`\\sigma_X = \\text{sigma\\_frac} \\, \\operatorname{median}_{i<j}
      \\lVert x_i - x_j \\rVert` (the convention of this package before it
      followed Kornblith's code).

    With ``debiased=True`` the unbiased HSIC (:func:`hsic_unbiased`) replaces the biased
    one (Kornblith's ``cka(..., debiased=True)``). Forms n x n matrices: memory
    :math:`O(n^2)`, subsample large sets. Invariant to orthogonal transforms,
    translation and isotropic scaling of either input (the bandwidth scales along).
    Book ``book/cka.md``; seed 003, section 6.

    Parameters
    ----------
    X : array_like of shape (n, p)
    Y : array_like of shape (n, q)
        Representations of the same ``n >= 2`` samples (``>= 4`` when debiased).
    sigma_frac : float, default 0.5
        Bandwidth as a fraction of the median distance (Kornblith's ``threshold``),
        ``> 0``.
    debiased : bool, default False
    median : {"full", "pairs"}, default "full"
        Which median sets the bandwidth (see above).

    Returns
    -------
    float
        In [0, 1] (biased); at most 1 and possibly slightly negative (debiased).

    Raises
    ------
    ValueError
        For bad input, an unknown ``median``, or a zero median (mostly duplicate rows).
    """
    debiased = check_bool(debiased, "debiased")
    sigma_frac = check_positive(sigma_frac, "sigma_frac")
    if not isinstance(median, str) or median not in _RBF_MEDIANS:
        raise ValueError(f"median must be 'full' or 'pairs', got {median!r}")
    m = 4 if debiased else 2
    X = as_float_array(X, "X", ndim=2, min_rows=m)
    Y = as_float_array(Y, "Y", ndim=2, min_rows=m)
    check_same_length(X=X, Y=Y)
    K = _rbf_gram(X, sigma_frac, "X", median)
    L = _rbf_gram(Y, sigma_frac, "Y", median)
    if debiased:
        return _ratio(_hsic_u_gram(K, L), _hsic_u_gram(K, K), _hsic_u_gram(L, L))
    Kc = K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean()
    Lc = L - L.mean(axis=0) - L.mean(axis=1)[:, None] + L.mean()
    h_xy = float(np.sum(Kc * Lc))
    h_xx = float(np.sum(Kc * Kc))
    h_yy = float(np.sum(Lc * Lc))
    if not (h_xx > 0 and h_yy > 0):  # pragma: no cover - excluded by the median check
        raise ValueError("a centred RBF Gram matrix is zero; CKA is undefined")
    return float(min(1.0, max(0.0, h_xy / np.sqrt(h_xx * h_yy))))


class MinibatchCKA:
    """Accumulator of minibatch linear CKA between several layers (Nguyen et al. 2021).

    For minibatches :math:`b = 1..B` of the same samples seen by layers
    :math:`\\ell = 1..m`, with linear Gram matrices :math:`K^{(\\ell)}_b`,

    .. math:: \\mathrm{CKA}_{\\text{mb}}(\\ell, \\ell') =
       \\frac{\\sum_b \\mathrm{HSIC}_1(K^{(\\ell)}_b, K^{(\\ell')}_b)}
       {\\sqrt{\\sum_b \\mathrm{HSIC}_1(K^{(\\ell)}_b, K^{(\\ell)}_b)\\,
               \\sum_b \\mathrm{HSIC}_1(K^{(\\ell')}_b, K^{(\\ell')}_b)}},

    with the unbiased :math:`\\mathrm{HSIC}_1` (:func:`hsic_unbiased`), so the value
    does not drift with the minibatch size the way averaged biased CKA would. Memory is
    :math:`O(m^2)` plus one minibatch: feed it minibatches from a forward loop with
    :meth:`update` and read the m x m matrix with :meth:`result`. Book
    ``book/cka.md``; seed 003, section 6.

    Parameters
    ----------
    n_layers : int
        Number of representations compared, ``>= 1``.
    """

    def __init__(self, n_layers):
        self.n_layers = check_int(n_layers, "n_layers", minimum=1)
        self._sums = np.zeros((self.n_layers, self.n_layers))
        self.n_batches = 0

    def update(self, features):
        """Add one minibatch: a sequence of ``n_layers`` arrays of shape (b, p_l), ``b >= 4``."""
        if isinstance(features, np.ndarray) or not isinstance(features, (list, tuple)):
            raise TypeError("features must be a list or tuple of per-layer arrays")
        if len(features) != self.n_layers:
            raise ValueError(
                f"features has {len(features)} layers but {self.n_layers} were declared"
            )
        arrays = [
            as_float_array(
                np.asarray(F).reshape(np.shape(F)[0], -1) if np.ndim(F) > 2 else F,
                f"features[{i}]",
                ndim=2,
                min_rows=4,
            )
            for i, F in enumerate(features)
        ]
        b = _same_rows(arrays, "features")
        tilde = []
        for F in arrays:
            K = F @ F.T
            np.fill_diagonal(K, 0.0)
            tilde.append(K)
        rows = np.stack([K.sum(axis=1) for K in tilde])  # (m, b)
        totals = rows.sum(axis=1)
        flat = np.stack([K.ravel() for K in tilde])  # (m, b*b)
        tr = flat @ flat.T
        row_kl = rows @ rows.T
        self._sums += _hsic_u_parts(
            tr,
            np.outer(totals, np.ones_like(totals)),
            np.outer(np.ones_like(totals), totals),
            row_kl,
            b,
        )
        self.n_batches += 1
        return self

    def result(self):
        """The m x m matrix of minibatch CKA values (diagonal 1)."""
        if self.n_batches == 0:
            raise ValueError("no minibatch has been added; call update() first")
        diag = np.diag(self._sums).copy()
        bad = np.flatnonzero(~(diag > 0))
        if bad.size:
            raise ValueError(
                f"layer {bad[0]} has a non-positive summed unbiased HSIC with itself "
                "(constant features or too few samples); CKA is undefined"
            )
        out = self._sums / np.sqrt(np.outer(diag, diag))
        np.fill_diagonal(out, 1.0)
        return np.minimum(out, 1.0)


def minibatch_cka(layers, batch_size=256, rng=None):
    """Minibatch linear CKA between all pairs of layers, for layer-by-layer heat maps.

    Shuffles the ``n`` samples with ``rng``, cuts them into
    :math:`\\max(1, \\lfloor n / b \\rfloor)` disjoint minibatches of at least
    ``batch_size`` rows and accumulates :class:`MinibatchCKA` over them (Nguyen et al.
    2021). With a single minibatch the result equals ``linear_cka(..., debiased=True)``
    for every pair. Arrays of more than two dimensions (conv feature maps) are
    flattened after the first axis. Memory: one minibatch of every layer. Book
    ``book/cka.md``; seed 003, section 6.

    Parameters
    ----------
    layers : sequence of array_like, each of shape (n, p_l) (numpy.memmap allowed)
        Representations of the same ``n`` samples, in the same order.
    batch_size : int, default 256
        Minibatch size ``b >= 4``.
    rng : numpy.random.Generator or int, optional

    Returns
    -------
    numpy.ndarray of float64, shape (m, m)
        Symmetric, unit diagonal; entry ``(i, j)`` compares ``layers[i]`` and ``layers[j]``.
    """
    if isinstance(layers, np.ndarray) or not isinstance(layers, (list, tuple)) or not layers:
        raise TypeError("layers must be a non-empty list or tuple of arrays")
    batch_size = check_int(batch_size, "batch_size", minimum=4)
    rng = check_rng(rng)
    arrays = []
    for i, A in enumerate(layers):
        if not isinstance(A, np.ndarray):
            A = as_float_array(A, f"layers[{i}]", ndim=(2, 3, 4, 5))
        if A.ndim < 2:
            raise ValueError(f"layers[{i}] must be at least 2-dimensional, got shape {A.shape}")
        arrays.append(A)
    n = _same_rows(arrays, "layers")
    if n < 4:
        raise ValueError(f"layers need at least 4 samples, got {n}")
    acc = MinibatchCKA(len(arrays))
    perm = rng.permutation(n)
    for part in np.array_split(perm, max(1, n // batch_size)):
        idx = np.sort(part)
        acc.update([np.asarray(A[idx]).reshape(len(idx), -1) for A in arrays])
    return acc.result()


# ---------------------------------------------------------------------------
# layer x layer CKA between two models (book/cka.md, the heat maps)
# ---------------------------------------------------------------------------

_CKA_KINDS = ("linear", "rbf")


def _layer_list(layers, name, min_rows):
    """Validate a list of per-layer arrays; flatten axes after the first; same row count."""
    if isinstance(layers, np.ndarray) or not isinstance(layers, (list, tuple)) or not layers:
        raise TypeError(f"{name} must be a non-empty list or tuple of (n, d_l) arrays")
    arrays = []
    for i, A in enumerate(layers):
        if np.ndim(A) > 2:
            A = np.asarray(A).reshape(np.shape(A)[0], -1)
        arrays.append(as_float_array(A, f"{name}[{i}]", ndim=2, min_rows=min_rows))
    _same_rows(arrays, name)
    return arrays


def _layer_stats(arrays, name, kind, debiased, sigma_frac):
    """Per-layer objects that the pairwise HSIC needs, computed once per layer."""
    out = []
    for i, A in enumerate(arrays):
        label = f"{name}[{i}]"
        if kind == "linear":
            out.append(_center_columns(A, label))
        else:
            K = _rbf_gram(A, sigma_frac, label)
            if not debiased:
                K = K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean()
            out.append(K)
    return out


def _pair_hsic(A, B, kind, debiased):
    if kind == "linear":
        return _hsic_u_linear(A, B) if debiased else _hsic_linear(A, B)
    return _hsic_u_gram(A, B) if debiased else float(np.sum(A * B))


def cka_matrix(features_a, features_b=None, kind="linear", debiased=False, sigma_frac=0.5):
    """CKA between every layer of one model and every layer of another, on the same samples.

    Entry ``(i, j)`` is ``linear_cka(features_a[i], features_b[j], debiased)`` (or
    ``rbf_cka(..., sigma_frac, debiased)`` with ``kind="rbf"``), but every layer is
    centred (or its Gram matrix built) once, not once per pair. With ``features_b``
    omitted the matrix compares the layers of ``features_a`` with each other: it is
    symmetric with a unit diagonal. This is the layer-by-layer heat map of Kornblith
    et al. (2019) and Nguyen et al. (2021); for sets too large for one pass use
    :func:`minibatch_cka` instead. Arrays of more than two dimensions (conv feature
    maps) are flattened after the first axis. Book ``book/cka.md``; seed 003, section 6
    (its ``compare_layer_representations``).

    Parameters
    ----------
    features_a : list or tuple of array_like, each of shape (n, d_i)
        Representations of the same ``n`` samples, one per layer (``n >= 2``, ``>= 4``
        when debiased).
    features_b : list or tuple of array_like, each of shape (n, e_j), optional
        The other model's layers on the same samples in the same order; default
        ``features_a``.
    kind : {"linear", "rbf"}, default "linear"
        Linear kernels (no n x n matrix) or RBF kernels with Kornblith et al.'s
        median bandwidth (n x n matrices, one per layer).
    debiased : bool, default False
        Use the unbiased HSIC of Song et al. (2012), as :func:`linear_cka` does.
    sigma_frac : float, default 0.5
        RBF bandwidth as a fraction of the median distance (ignored for linear).

    Returns
    -------
    numpy.ndarray of float64, shape (len(features_a), len(features_b))
        In [0, 1] (biased); at most 1 and possibly slightly negative (debiased).

    Raises
    ------
    TypeError
        ``features_a`` or ``features_b`` is not a non-empty list or tuple, or
        ``debiased`` is not a bool.
    ValueError
        An unknown ``kind``; a non-positive ``sigma_frac``; a layer that is not finite,
        has too few rows, is constant, or has another number of rows than the rest.
    """
    debiased = check_bool(debiased, "debiased")
    if not isinstance(kind, str) or kind not in _CKA_KINDS:
        raise ValueError(f"kind must be 'linear' or 'rbf', got {kind!r}")
    sigma_frac = check_positive(sigma_frac, "sigma_frac")
    m = 4 if debiased else 2
    A = _layer_list(features_a, "features_a", m)
    same = features_b is None
    B = A if same else _layer_list(features_b, "features_b", m)
    if B[0].shape[0] != A[0].shape[0]:
        raise ValueError(
            f"features_b has {B[0].shape[0]} rows per layer but features_a has {A[0].shape[0]}"
        )
    SA = _layer_stats(A, "features_a", kind, debiased, sigma_frac)
    SB = SA if same else _layer_stats(B, "features_b", kind, debiased, sigma_frac)
    self_a = np.array([_pair_hsic(S, S, kind, debiased) for S in SA])
    self_b = self_a if same else np.array([_pair_hsic(S, S, kind, debiased) for S in SB])
    for name, vals in (("features_a", self_a), ("features_b", self_b)):
        bad = np.flatnonzero(~(vals > 0))
        if bad.size:
            raise ValueError(
                f"{name}[{bad[0]}] has a non-positive HSIC with itself "
                "(too few samples or a degenerate layer); CKA is undefined"
            )
    out = np.empty((len(SA), len(SB)))
    for i, Si in enumerate(SA):
        for j, Sj in enumerate(SB):
            if same and j < i:
                out[i, j] = out[j, i]
                continue
            out[i, j] = _pair_hsic(Si, Sj, kind, debiased) / np.sqrt(self_a[i] * self_b[j])
    if same:
        np.fill_diagonal(out, 1.0)
    out = np.minimum(out, 1.0)
    return out if debiased else np.maximum(out, 0.0)
