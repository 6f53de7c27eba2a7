"""The linear probe of the reference loop: non-affine BatchNorm + Linear, and its fold.

Book: chapter "Linear probes" (the probe recipe, "BatchNorm before a probe changes
nothing but conditioning"); seed 000, "Frozen means evaluation mode" and "In PyTorch".

The probe computes ``logits = W^T diag(s)^{-1} (h - mu) + b`` where, in evaluation
mode, ``mu`` is the BatchNorm's running mean and ``s = sqrt(running_var + eps)``.
MAE puts this non-affine BatchNorm in front of its probe. The theorem of the book says
the same classifier is a plain linear layer on the raw features::

    W' = diag(s)^{-1} W,      b' = b - W'^T mu,

which :func:`fold_probe` computes with :func:`repeval_ref.fold_batchnorm` and returns
as an ``nn.Linear``. Only the optimisation differs (conditioning), not the set of
classifiers.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .._validation import as_labels, check_int, check_positive
from .schedule import cosine_schedule

__all__ = ["LinearProbe", "train_probe", "fold_probe", "probe_accuracy", "running_mean_shift"]


class LinearProbe(nn.Module):
    """``BatchNorm1d(d, affine=False)`` followed by ``Linear(d, n_classes)``.

    Parameters
    ----------
    d : int
        Feature dimension.
    n_classes : int
        Number of classes ``K``.
    batchnorm : bool
        Put the non-affine BatchNorm in front (default). Without it the probe is the
        bare linear layer.
    """

    def __init__(self, d, n_classes, *, batchnorm=True):
        super().__init__()
        d = check_int(d, "d", minimum=1)
        n_classes = check_int(n_classes, "n_classes", minimum=2)
        self.bn = nn.BatchNorm1d(d, affine=False) if batchnorm else nn.Identity()
        self.linear = nn.Linear(d, n_classes)

    def forward(self, h):
        return self.linear(self.bn(h))


def _features_tensor(h, name):
    if isinstance(h, np.ndarray):
        h = torch.from_numpy(np.ascontiguousarray(h))
    if not isinstance(h, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy array, got {type(h).__name__}")
    if h.ndim != 2 or h.shape[0] < 1 or h.shape[1] < 1:
        raise ValueError(
            f"{name} must be a non-empty 2-dimensional (n, d) array, got shape {tuple(h.shape)}"
        )
    if not h.is_floating_point():
        h = h.to(torch.float32)
    if not bool(torch.isfinite(h).all()):
        raise ValueError(f"{name} contains NaN or infinite values")
    return h.detach()


def _labels_tensor(y, name, n, n_classes):
    if isinstance(y, torch.Tensor):
        y = y.detach().cpu().numpy()
    return torch.from_numpy(as_labels(y, name, n=n, n_classes=n_classes))


def train_probe(
    features,
    labels,
    n_classes,
    *,
    epochs=30,
    lr=0.1,
    weight_decay=0.0,
    batch_size=128,
    momentum=0.9,
    batchnorm=True,
    seed=0,
    device=None,
):
    """Train a :class:`LinearProbe` on fixed (cached) features by cross-entropy.

    SGD with momentum and a cosine learning-rate schedule over all steps, as in the
    usual linear-probe recipes; the features never change, so the problem is convex
    in ``(W, b)`` (the BatchNorm only reconditions it).

    Parameters
    ----------
    features : torch.Tensor or numpy.ndarray of shape (n, d)
    labels : array_like of int, shape (n,)
    n_classes : int
    epochs, batch_size : int
    lr : float
        Peak learning rate.
    weight_decay, momentum : float
    batchnorm : bool
        Use the non-affine BatchNorm in front of the linear layer.
    seed : int
        Seed of the initialisation and of the shuffling.
    device : str or torch.device, optional
        Where to train (default: where ``features`` are).

    Returns
    -------
    LinearProbe
        The trained probe, in evaluation mode.
    """
    h = _features_tensor(features, "features")
    n_classes = check_int(n_classes, "n_classes", minimum=2)
    y = _labels_tensor(labels, "labels", h.shape[0], n_classes)
    epochs = check_int(epochs, "epochs", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=2)
    lr = check_positive(lr, "lr")
    weight_decay = check_positive(weight_decay, "weight_decay", allow_zero=True)
    momentum = check_positive(momentum, "momentum", allow_zero=True)
    device = torch.device(device) if device is not None else h.device
    h, y = h.to(device, torch.float32), y.to(device)
    torch.manual_seed(int(seed))
    probe = LinearProbe(h.shape[1], n_classes, batchnorm=batchnorm).to(device)
    opt = torch.optim.SGD(probe.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(h.shape[0] / batch_size)
    total = epochs * steps_per_epoch
    sched = cosine_schedule(opt, total)
    gen = torch.Generator().manual_seed(int(seed))
    probe.train()
    for _ in range(epochs):
        order = torch.randperm(h.shape[0], generator=gen).to(device)
        for start in range(0, h.shape[0], batch_size):
            idx = order[start : start + batch_size]
            if idx.numel() < 2:  # BatchNorm needs two samples for batch statistics
                sched.step()
                continue
            loss = nn.functional.cross_entropy(probe(h[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    return probe.eval()


def _input_width(probe):
    """The feature width a probe takes, when it can be read off (LinearProbe, Linear), else None."""
    if isinstance(probe, LinearProbe):
        return probe.linear.in_features
    if isinstance(probe, nn.Linear):
        return probe.in_features
    return None


@torch.no_grad()
def probe_accuracy(probe, features, labels):
    """Top-1 accuracy (a Python float) of ``probe`` in evaluation mode on ``features``.

    The probe's training flags are restored afterwards.

    Parameters
    ----------
    probe : torch.nn.Module
        Maps ``(n, d)`` features to ``(n, K)`` logits, e.g. a :class:`LinearProbe`.
    features : torch.Tensor or numpy.ndarray of shape (n, d)
        For a :class:`LinearProbe` or ``nn.Linear``, ``d`` must be its input width.
    labels : array_like of int, shape (n,)

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``features`` do not have the width the probe was trained on, or the
        labels do not match them.
    """
    from .freeze import evaluation_mode

    if not isinstance(probe, nn.Module):
        raise TypeError(f"probe must be a torch.nn.Module, got {type(probe).__name__}")
    h = _features_tensor(features, "features")
    y = _labels_tensor(labels, "labels", h.shape[0], None)
    width = _input_width(probe)
    if width is not None and h.shape[1] != width:
        raise ValueError(
            f"features have {h.shape[1]} columns but the probe expects {width} "
            f"(features of shape {tuple(h.shape)})"
        )
    param = next(probe.parameters(), None)
    dev = param.device if param is not None else h.device
    dtype = param.dtype if param is not None else torch.float32
    with evaluation_mode(probe):
        pred = probe(h.to(dev, dtype)).argmax(dim=1).cpu()
    return float((pred == y).double().mean())


def fold_probe(probe):
    """Fold the probe's non-affine BatchNorm into its linear layer.

    Book: "BatchNorm before a probe changes nothing but conditioning". With the
    BatchNorm's frozen statistics ``mu`` (running mean) and ``s = sqrt(running_var +
    eps)``, the eval-mode logits ``W^T diag(s)^{-1} (h - mu) + b`` equal ``W'^T h + b'``
    with ``W' = diag(s)^{-1} W`` and ``b' = b - W'^T mu``
    (:func:`repeval_ref.fold_batchnorm`, computed in float64).

    Parameters
    ----------
    probe : LinearProbe
        With a non-affine ``BatchNorm1d`` that tracks running statistics.

    Returns
    -------
    torch.nn.Linear
        A new layer (same dtype and device as ``probe.linear``) whose output equals
        ``probe`` in evaluation mode to float tolerance. ``probe`` is not modified.
    """
    from .. import fold_batchnorm

    if not isinstance(probe, LinearProbe):
        raise TypeError(f"probe must be a LinearProbe, got {type(probe).__name__}")
    bn, lin = probe.bn, probe.linear
    if not isinstance(bn, nn.BatchNorm1d):
        raise ValueError("probe has no BatchNorm to fold (it was built with batchnorm=False)")
    if bn.affine:
        raise ValueError("fold_probe expects a non-affine BatchNorm (affine=False)")
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError(
            "the BatchNorm does not track running statistics; there is nothing frozen to fold"
        )
    W = lin.weight.detach().cpu().double().numpy().T  # (d, K): logits = W^T h + b
    b = lin.bias.detach().cpu().double().numpy()
    mu = bn.running_mean.detach().cpu().double().numpy()
    s = np.sqrt(bn.running_var.detach().cpu().double().numpy() + bn.eps)
    W_fold, b_fold = fold_batchnorm(W, b, mu, s)
    folded = nn.Linear(W.shape[0], W.shape[1]).to(device=lin.weight.device, dtype=lin.weight.dtype)
    with torch.no_grad():
        folded.weight.copy_(torch.from_numpy(np.ascontiguousarray(np.asarray(W_fold).T)))
        folded.bias.copy_(torch.from_numpy(np.asarray(b_fold)))
    return folded.eval()


def running_mean_shift(module, batch):
    """How far one training-mode forward pass moves the BatchNorm running means.

    Book: the pitfall of the reference loop (a single forward pass in training mode
    changes the "frozen" encoder). Runs ``module`` once in training mode under
    ``torch.no_grad()`` on ``batch`` and returns ``max_j |mu_after_j - mu_before_j|``
    over every BatchNorm running mean. The module's state and training flags are
    restored afterwards, so the demonstration leaves no trace.

    Returns
    -------
    float
        The largest absolute change of a running-mean entry (0.0 if no BatchNorm).
    """
    from .freeze import restore_training_flags, state_snapshot, training_flags

    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(batch, torch.Tensor):
        raise TypeError(f"batch must be a torch.Tensor, got {type(batch).__name__}")
    if batch.ndim == 0 or batch.shape[0] < 2:
        raise ValueError("batch needs at least 2 samples for training-mode BatchNorm")
    bns = [
        m
        for m in module.modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_mean is not None
    ]
    if not bns:
        return 0.0
    snapshot = state_snapshot(module)
    flags = training_flags(module)
    before = [m.running_mean.detach().clone() for m in bns]
    try:
        module.train()
        param = next(module.parameters(), None)
        with torch.no_grad():
            module(batch.to(param.device) if param is not None else batch)
        return float(max((m.running_mean - b).abs().max() for m, b in zip(bns, before)))
    finally:
        restore_training_flags(flags)
        module.load_state_dict(snapshot)
