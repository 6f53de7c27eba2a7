"""Linear probing, fine-tuning and LP-FT in a two-layer linear network.

Book: chapter ``book/lpft.md`` (fine-tuning and LP-FT); seed 000, boxes "Fine-tuning protocols",
"Feature distortion in two dimensions, by hand" and the research exercise
"Feature distortion and LP-FT" (after Kumar et al. 2022).

The model is ``f(x) = v^T B x`` with a feature extractor ``B`` (d' x d) and a head
``v`` (d',). On ``n`` inputs ``X`` (n x d) with targets ``y`` the loss and its
gradients are::

    r = X B^T v - y,              L = (1/n) r^T r,
    grad_v L = (2/n) B X^T r,     grad_B L = (2/n) v (X^T r)^T.

Every row of ``grad_B L`` is a multiple of ``r^T X``, so ``B u`` never changes for a
direction ``u`` orthogonal to the span of the training inputs: feature distortion.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import as_float_array, check_int, check_positive

__all__ = [
    "transfer",
    "linear_net_gradients",
    "prediction_error",
    "layerwise_lr",
    "layerwise_lr_scales",
]


def _check_model(v, B, d, vname="v", bname="B"):
    B = as_float_array(B, bname, ndim=2)
    v = as_float_array(v, vname, ndim=1)
    if B.shape[1] != d:
        raise ValueError(f"{bname} must have {d} columns to match X, got shape {B.shape}")
    if v.shape[0] != B.shape[0]:
        raise ValueError(
            f"{vname} has length {v.shape[0]} but {bname} has {B.shape[0]} rows (features)"
        )
    return v, B


def _check_data(X, y):
    X = as_float_array(X, "X", ndim=2)
    y = as_float_array(y, "y", ndim=1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"mismatched lengths: X has {X.shape[0]} rows, y has {y.shape[0]}")
    return X, y


def _grads(X, y, v, B):
    """Loss and both gradients at (v, B); no checks."""
    n = X.shape[0]
    r = X @ (B.T @ v) - y
    Xr = X.T @ r
    return (r @ r) / n, (2.0 / n) * (B @ Xr), (2.0 / n) * np.outer(v, Xr)


def linear_net_gradients(X, y, v, B):
    """Squared loss of ``f(x) = v^T B x`` and its gradients.

    ``L = (1/n) ||X B^T v - y||^2``, ``grad_v = (2/n) B X^T r``,
    ``grad_B = (2/n) v (X^T r)^T`` with ``r = X B^T v - y`` (seed 000, proof that the
    features move only inside the training span).

    Parameters
    ----------
    X : array_like of shape (n, d)
    y : array_like of shape (n,)
    v : array_like of shape (d',)
    B : array_like of shape (d', d)

    Returns
    -------
    loss : float
    grad_v : numpy.ndarray of shape (d',)
    grad_B : numpy.ndarray of shape (d', d)
    """
    X, y = _check_data(X, y)
    v, B = _check_model(v, B, X.shape[1])
    loss, gv, gB = _grads(X, y, v, B)
    return float(loss), gv, gB


def _descend(X, y, v, B, lr, steps, move_B):
    """Full-batch gradient descent with simultaneous updates; returns new arrays."""
    v, B = v.copy(), B.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(steps):
            loss, gv, gB = _grads(X, y, v, B)
            if not math.isfinite(loss):
                break
            v = v - lr * gv
            if move_B:
                B = B - lr * gB
    if not (np.all(np.isfinite(v)) and np.all(np.isfinite(B))) or (
        steps and not math.isfinite(loss)
    ):
        raise ValueError(
            f"gradient descent diverged (non-finite loss or parameters): lr={lr} is too large"
        )
    return v, B


def transfer(X, y, B0, v0, lr, steps):
    """Linear probing, full fine-tuning and LP-FT of ``f(x) = v^T B x``.

    Full-batch gradient descent on ``L = (1/n) ||X B^T v - y||^2`` with step ``lr``;
    both gradients are taken at the current parameters (simultaneous updates).

    * ``"lp"``: only ``v`` moves, from ``(v0, B0)``, for ``steps`` steps.
    * ``"ft"``: ``v`` and ``B`` move, from ``(v0, B0)``, for ``steps`` steps.
    * ``"lpft"``: fine-tuning for ``steps`` steps from ``(v_LP, B0)``.

    Parameters
    ----------
    X : array_like of shape (n, d)
        In-distribution training inputs.
    y : array_like of shape (n,)
        Targets.
    B0 : array_like of shape (d', d)
        Pretrained feature extractor.
    v0 : array_like of shape (d',)
        Initial head.
    lr : float
        Step size, ``> 0``.
    steps : int
        Number of steps, ``>= 0``.

    Returns
    -------
    dict
        ``{"lp": (v, B), "ft": (v, B), "lpft": (v, B)}`` with new arrays of shapes
        (d',) and (d', d); the inputs are not modified.

    Raises
    ------
    ValueError
        On bad shapes or values, or if the iteration diverges (``lr`` too large).

    Notes
    -----
    Book ``book/lpft.md``; seed 000, "Feature distortion and LP-FT" (Kumar et al. 2022).
    """
    X, y = _check_data(X, y)
    v0, B0 = _check_model(v0, B0, X.shape[1], vname="v0", bname="B0")
    lr = check_positive(lr, "lr")
    steps = check_int(steps, "steps", minimum=0)
    lp = _descend(X, y, v0, B0, lr, steps, move_B=False)
    ft = _descend(X, y, v0, B0, lr, steps, move_B=True)
    lpft = _descend(X, y, lp[0], B0, lr, steps, move_B=True)
    return {"lp": lp, "ft": ft, "lpft": lpft}


def prediction_error(v, B, X, v_star, B_star):
    """Mean squared difference between the model and the true function on ``X``.

    ``(1/m) sum_i (v^T B x_i - v_*^T B_* x_i)^2`` over the rows of ``X``: the ID
    error on in-distribution inputs, the OOD error on shifted ones (book
    ``book/lpft.md``; seed 000,
    "Feature distortion and LP-FT").

    Parameters
    ----------
    v : array_like of shape (d',)
    B : array_like of shape (d', d)
    X : array_like of shape (m, d)
    v_star : array_like of shape (d*',)
    B_star : array_like of shape (d*', d)

    Returns
    -------
    float
    """
    X = as_float_array(X, "X", ndim=2)
    v, B = _check_model(v, B, X.shape[1])
    v_star, B_star = _check_model(v_star, B_star, X.shape[1], vname="v_star", bname="B_star")
    diff = X @ (B.T @ v - B_star.T @ v_star)
    return float(np.mean(diff * diff))


def layerwise_lr(base_lr, decay, n_blocks):
    """Learning rates under layer-wise learning-rate decay.

    Layer ``i`` trains at ``base_lr * decay ** (L + 1 - i)`` with ``L = n_blocks``;
    layer 0 is the embeddings, layer ``l`` is block ``l`` and layer ``L + 1`` the
    head (book ``book/lpft.md``; seed 000, "Fine-tuning protocols").

    Parameters
    ----------
    base_lr : float
        Base rate ``eta > 0`` (the head's rate).
    decay : float
        ``zeta`` in ``(0, 1]``.
    n_blocks : int
        Number of blocks ``L >= 0``.

    Returns
    -------
    numpy.ndarray of float64, shape (n_blocks + 2,)
        Entry ``i`` is the rate of layer ``i``.
    """
    base_lr = check_positive(base_lr, "base_lr")
    decay = check_positive(decay, "decay")
    if decay > 1.0:
        raise ValueError(f"decay must lie in (0, 1], got {decay}")
    n_blocks = check_int(n_blocks, "n_blocks", minimum=0)
    return base_lr * layerwise_lr_scales(n_blocks + 2, decay)


def layerwise_lr_scales(n_layers, decay):
    """Multipliers of the base rate under layer-wise decay, top layer first at 1.

    With ``n_layers = L + 1`` layers numbered ``0..L`` (for a ViT: the embeddings, the
    blocks, the head), layer ``i`` is scaled by ``decay ** (L - i)``, so the top layer
    keeps the base rate and each layer below trains ``decay`` times slower than the one
    above it. :func:`layerwise_lr` is ``base_lr`` times these scales with
    ``n_layers = n_blocks + 2`` (book ``book/lpft.md``).

    Parameters
    ----------
    n_layers : int
        Number of layers, ``>= 1``.
    decay : float
        ``zeta`` in ``(0, 1]``.

    Returns
    -------
    numpy.ndarray of float64, shape (n_layers,)
        Entry ``i`` is the scale of layer ``i``; the last entry is 1.
    """
    n_layers = check_int(n_layers, "n_layers", minimum=1)
    decay = check_positive(decay, "decay")
    if decay > 1.0:
        raise ValueError(f"decay must lie in (0, 1], got {decay}")
    exponents = np.arange(n_layers - 1, -1, -1, dtype=np.float64)
    return decay**exponents
