"""Fine-tuning runs scored on a validation split carved out of the training images.

Book: chapter ``book/lpft.md`` ("On the zoo": every method's learning rate and number of
steps are chosen on validation images taken from the training split, never on the test
split).

Three pieces:

* :func:`carve_validation` draws two disjoint, seeded index sets from a pool of training
  images: the images a model fits on and the images it is scored on while it trains.
* :func:`train_with_validation` trains one configuration (a model and its optimizer) on
  mini-batches drawn from the fit indices, records validation accuracy every
  ``eval_every`` steps, and leaves the model in the state of its best checkpoint. It
  receives one image array and indexes both sets into it, so the images it scores on
  are by construction images of the same pool it trains from; nothing else in the array
  is read, so a test split has no way in.
* :func:`select_on_validation` picks the best entry of a table of validation scores
  (settings by checkpoints) with a stated tie rule.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .._validation import check_int
from .freeze import (
    evaluation_mode,
    module_device,
    restore_training_flags,
    state_snapshot,
    training_flags,
)

__all__ = ["carve_validation", "train_with_validation", "select_on_validation", "ValidationCurve"]


def carve_validation(n_pool, n_fit, n_val, *, seed=0):
    """Two disjoint random index sets of a pool of training images: fit and validation.

    Parameters
    ----------
    n_pool : int
        Number of training images to draw from (indices ``0 .. n_pool - 1``).
    n_fit, n_val : int
        Sizes of the two sets, each ``>= 1``, with ``n_fit + n_val <= n_pool``.
    seed : int
        Seed of the NumPy generator that draws them (``np.random.default_rng(seed)``).

    Returns
    -------
    fit : ndarray of int, shape (n_fit,)
    val : ndarray of int, shape (n_val,)
        Distinct indices, no index in both; the first ``n_fit + n_val`` entries of one
        seeded permutation of the pool, so the same seed gives the same sets.

    Raises
    ------
    ValueError
        A size below one, or ``n_fit + n_val`` larger than ``n_pool``.
    """
    n_pool = check_int(n_pool, "n_pool", minimum=2)
    n_fit = check_int(n_fit, "n_fit", minimum=1)
    n_val = check_int(n_val, "n_val", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    if n_fit + n_val > n_pool:
        raise ValueError(f"n_fit + n_val = {n_fit + n_val} exceeds n_pool = {n_pool}")
    order = np.random.default_rng(seed).permutation(n_pool)
    return order[:n_fit].copy(), order[n_fit : n_fit + n_val].copy()


@dataclass
class ValidationCurve:
    """What :func:`train_with_validation` records for one configuration.

    Attributes
    ----------
    steps : ndarray of int, shape (k,)
        The checkpoints: ``0, eval_every, 2 * eval_every, ...`` and the last step.
    accuracy : ndarray of float, shape (k,)
        Validation accuracy at each checkpoint (fraction of ``val`` classified right).
    best_index : int
        Position of the first maximum of ``accuracy`` (the earliest best checkpoint).
    best_step : int
        ``steps[best_index]``.
    best_accuracy : float
        ``accuracy[best_index]``.
    state : dict of str to torch.Tensor
        A CPU copy of the model's ``state_dict`` at ``best_step`` (what the model holds
        when the call returns).
    """

    steps: np.ndarray
    accuracy: np.ndarray
    best_index: int
    best_step: int
    best_accuracy: float
    state: dict


def _index_set(idx, name, n):
    idx = np.asarray(idx)
    if idx.ndim != 1 or idx.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of indices, got shape {idx.shape}")
    if not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"{name} must hold integer indices, got dtype {idx.dtype}")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"{name} has indices outside 0..{n - 1}")
    if np.unique(idx).size != idx.size:
        raise ValueError(f"{name} repeats an index")
    return idx.astype(np.int64)


def _accuracy(model, images, labels, idx, eval_batch, device):
    right = 0
    with evaluation_mode(model), torch.no_grad():
        for start in range(0, idx.size, eval_batch):
            part = torch.as_tensor(idx[start : start + eval_batch])
            pred = model(images[part].to(device)).argmax(1).cpu()
            right += int((pred == labels[part]).sum())
    return right / idx.size


def train_with_validation(
    model,
    optimizer,
    images,
    labels,
    fit,
    val,
    *,
    steps,
    eval_every,
    batch_size=64,
    seed=0,
    loss=None,
    eval_batch=1024,
):
    """Train one configuration, track validation accuracy, and keep the best checkpoint.

    Step ``t`` (``t = 1 .. steps``) draws ``batch_size`` positions of ``fit`` uniformly with
    replacement from a ``torch.Generator`` seeded with ``seed``, computes ``loss`` on those
    images and takes one ``optimizer`` step. Before the first step and after every
    ``eval_every``-th step (and after the last) the model is scored on all of ``val`` in
    evaluation mode. Each training step runs with the ``training`` flags the model's
    submodules had when it was passed in (so a part left in evaluation mode, such as a
    frozen BatchNorm, stays so), and those flags are restored at the end.

    The selection rule is the earliest checkpoint with the highest validation accuracy;
    the model is loaded with that checkpoint's state before returning. The optimizer's
    own state (moments, step counts) is not rolled back.

    Parameters
    ----------
    model : torch.nn.Module
        Maps a batch of ``images`` to logits of shape (batch, n_classes).
    optimizer : torch.optim.Optimizer
        Over the parameters of ``model`` that should train.
    images : torch.Tensor, shape (n, ...)
        The pool of training images (or features); only rows in ``fit`` and ``val`` are read.
    labels : array-like of int, shape (n,)
    fit, val : array-like of int
        Disjoint 1-D index sets into ``images`` without repeats (see :func:`carve_validation`).
    steps : int
        Number of optimizer steps, ``>= 0``.
    eval_every : int
        Steps between validation checkpoints, ``>= 1``.
    batch_size : int
        Images per step, ``>= 1``.
    seed : int
        Seed of the batch generator, ``>= 0``.
    loss : callable, optional
        ``loss(logits, targets)`` returning a scalar tensor; default cross-entropy.
    eval_batch : int
        Images per forward pass when scoring ``val``.

    Returns
    -------
    ValidationCurve

    Raises
    ------
    TypeError
        A ``model`` that is not a module, an ``optimizer`` that is not an optimizer, or
        ``images`` that is not a tensor.
    ValueError
        ``labels`` not of length ``n``; ``fit`` or ``val`` empty, out of range, repeating
        an index, or sharing one; a count out of range.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    if images.ndim < 1 or images.shape[0] < 2:
        raise ValueError(f"images must hold at least two rows, got shape {tuple(images.shape)}")
    n = images.shape[0]
    labels = torch.as_tensor(np.asarray(labels)).reshape(-1)
    if labels.shape[0] != n or labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise ValueError(
            f"labels must be {n} integer labels, one per image, got {labels.shape[0]} "
            f"of dtype {labels.dtype}"
        )
    labels = labels.to(torch.int64)
    fit = _index_set(fit, "fit", n)
    val = _index_set(val, "val", n)
    if np.intersect1d(fit, val).size:
        raise ValueError("val shares indices with fit: the validation images must be held out")
    steps = check_int(steps, "steps", minimum=0)
    eval_every = check_int(eval_every, "eval_every", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    eval_batch = check_int(eval_batch, "eval_batch", minimum=1)
    if loss is None:
        loss = F.cross_entropy
    elif not callable(loss):
        raise ValueError(f"loss must be callable, got {type(loss).__name__}")

    device = module_device(model)
    flags = training_flags(model)
    generator = torch.Generator().manual_seed(seed)
    fit_t = torch.as_tensor(fit)
    checkpoints, curve = [], []
    best, best_state = -np.inf, None
    for step in range(steps + 1):
        if step % eval_every == 0 or step == steps:
            acc = _accuracy(model, images, labels, val, eval_batch, device)
            checkpoints.append(step)
            curve.append(acc)
            if acc > best:  # strict: the earliest best checkpoint is kept
                best, best_state = acc, state_snapshot(model)
        if step == steps:
            break
        restore_training_flags(flags)
        pick = fit_t[torch.randint(0, fit_t.numel(), (batch_size,), generator=generator)]
        value = loss(model(images[pick].to(device)), labels[pick].to(device))
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
    restore_training_flags(flags)
    model.load_state_dict(best_state)
    curve = np.asarray(curve, dtype=float)
    best_index = int(np.argmax(curve))
    return ValidationCurve(
        steps=np.asarray(checkpoints, dtype=np.int64),
        accuracy=curve,
        best_index=best_index,
        best_step=int(checkpoints[best_index]),
        best_accuracy=float(curve[best_index]),
        state=best_state,
    )


def select_on_validation(scores):
    """The position of the best validation score, ties going to the first in row-major order.

    Parameters
    ----------
    scores : array-like of float, shape (n_settings,) or (n_settings, n_checkpoints)
        Validation scores, higher is better: one row per setting in the order the grid
        lists them, one column per checkpoint in training order.

    Returns
    -------
    tuple of int
        ``(setting,)`` or ``(setting, checkpoint)``: the maximum of ``scores``; among
        equal maxima the lowest row, then the lowest column, which is the first maximum of
        the row-major flattening. With rows in grid order and columns in time this keeps
        the first setting listed and, within it, the fewest steps.

    Raises
    ------
    ValueError
        ``scores`` empty, of another dimension, or with a value that is not finite.
    """
    if (
        isinstance(scores, (str, bytes))
        or isinstance(scores, numbers.Number)
        and not np.ndim(scores)
    ):
        raise ValueError("scores must be a 1-D or 2-D array of validation scores")
    try:
        arr = np.asarray(scores, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"scores must be an array of numbers: {exc}") from None
    if arr.ndim not in (1, 2):
        raise ValueError(f"scores must be 1-D or 2-D, got {arr.ndim} dimensions")
    if arr.size == 0:
        raise ValueError("scores is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError("scores holds a value that is not finite")
    flat = int(np.argmax(arr.reshape(-1)))  # NumPy returns the first maximum
    return tuple(int(i) for i in np.unravel_index(flat, arr.shape))
