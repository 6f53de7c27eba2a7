"""A grid of linear probes trained at once, selected on a validation split (DINOv2 style).

Book: chapter "Linear probes" ("Which grid", and hyperparameters are picked on
held-out training data, the test set is only reported); seed 000,
"Which grid": DINOv2 searches 13 learning rates x {last block, last 4 blocks} x {with,
without the pooled patch tokens}, 52 configurations trained together on the features of
a single forward pass.

Here a configuration is a *feature view* (which blocks, which pooling; see
:meth:`repeval_ref.torch.extract.Features.view`) and a learning rate. All heads see the
same mini-batches (the same sample indices in every view). The heads of one view are
trained as one stacked weight matrix (``_HeadStack``): their non-affine BatchNorms
would compute identical statistics, so one normalisation serves them all, and their
logits and weight gradients are one matrix product each instead of one per head. The
update is SGD's, with each head's own learning rate, so every head follows the
trajectory of :func:`~repeval_ref.torch.probe.train_probe` trained alone (a test checks
this to float tolerance), for the cost of one pass over the data per view. The
trained heads come back as separate :class:`~repeval_ref.torch.probe.LinearProbe`
modules.

Selection is on a stratified validation split carved from the training set; the
test set is only evaluated, for the report (and, to show the optimism of choosing on
it, for every configuration in the table).
"""

from __future__ import annotations

import contextlib
import copy
import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .._validation import as_labels, check_int, check_positive
from .freeze import evaluation_mode
from .probe import LinearProbe, _features_tensor
from .schedule import cosine_factor

__all__ = ["train_probe_grid", "grid_accuracies", "probe_grid_search", "grid_views", "GridResult"]


def _check_views(views, name, n=None):
    if not isinstance(views, dict) or not views:
        raise TypeError(f"{name} must be a non-empty dict from view name to (n, d) features")
    out = {}
    for key, h in views.items():
        h = _features_tensor(h, f"{name}[{key!r}]").to(torch.float32)
        if n is None:
            n = h.shape[0]
        elif h.shape[0] != n:
            raise ValueError(f"{name}[{key!r}] has {h.shape[0]} rows, expected {n}")
        out[key] = h
    return out, n


def _check_lrs(lrs):
    """``lrs`` as a list of positive floats: one number, or a sequence of numbers."""
    if isinstance(lrs, (str, bytes)):
        raise TypeError(f"lrs must be a number or a sequence of numbers, got the string {lrs!r}")
    if isinstance(lrs, numbers.Real) and not isinstance(lrs, bool):
        lrs = [lrs]
    elif isinstance(lrs, (np.ndarray, torch.Tensor)) and lrs.ndim == 0:
        lrs = [lrs.item()]
    elif isinstance(lrs, (dict, set)) or not hasattr(lrs, "__iter__"):
        raise TypeError(f"lrs must be a number or a sequence of numbers, got {type(lrs).__name__}")
    else:
        lrs = [
            v.item() if isinstance(v, (np.generic, torch.Tensor)) and np.ndim(v) == 0 else v
            for v in lrs
        ]
    if not lrs:
        raise ValueError("lrs is empty")
    return [check_positive(lr, f"lrs[{i}]") for i, lr in enumerate(lrs)]


def train_probe_grid(
    views,
    labels,
    n_classes,
    lrs,
    *,
    epochs=30,
    batch_size=128,
    weight_decay=0.0,
    momentum=0.9,
    batchnorm=True,
    seed=0,
    device=None,
):
    """Train one probe per (view, learning rate), all from the same batches in one pass.

    Parameters
    ----------
    views : dict of str -> (n, d_v) array or tensor
        Training features of every view (same samples, same order).
    labels : array_like of int, shape (n,)
    n_classes : int
    lrs : sequence of float
        Peak learning rates (cosine schedule over all steps).
    epochs, batch_size, weight_decay, momentum, batchnorm, seed, device
        As in :func:`~repeval_ref.torch.probe.train_probe`; each head is initialised
        from ``torch.manual_seed(seed)``, exactly as ``train_probe`` initialises its
        probe, so a grid head equals the probe trained alone with that learning rate.

    Returns
    -------
    heads : torch.nn.ModuleList of LinearProbe
        In evaluation mode, one per configuration.
    configs : list of dict
        ``{"view": name, "lr": lr}`` in the order of ``heads`` (views outer, rates inner).
    """
    views, n = _check_views(views, "views")
    n_classes = check_int(n_classes, "n_classes", minimum=2)
    y = torch.from_numpy(
        as_labels(
            labels.cpu().numpy() if isinstance(labels, torch.Tensor) else labels,
            "labels",
            n=n,
            n_classes=n_classes,
        )
    )
    lrs = _check_lrs(lrs)
    epochs = check_int(epochs, "epochs", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=2)
    weight_decay = check_positive(weight_decay, "weight_decay", allow_zero=True)
    momentum = check_positive(momentum, "momentum", allow_zero=True)
    device = torch.device(device) if device is not None else next(iter(views.values())).device
    views = {k: v.to(device) for k, v in views.items()}
    y = y.to(device)

    stacks = [_HeadStack(views[name], n_classes, lrs, batchnorm, seed, device) for name in views]
    total = epochs * math.ceil(n / batch_size)
    gen = torch.Generator().manual_seed(int(seed))
    step = 0
    with torch.no_grad():
        for _ in range(epochs):
            order = torch.randperm(n, generator=gen).to(device)
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                if idx.numel() >= 2:  # BatchNorm needs two samples; the schedule advances anyway
                    yb = y[idx]
                    factor = cosine_factor(step, total)
                    for stack in stacks:
                        stack.step(idx, yb, factor, momentum, weight_decay)
                step += 1

    configs, heads = [], nn.ModuleList()
    for name, stack in zip(views, stacks):
        for j, lr in enumerate(lrs):
            heads.append(stack.head(j))
            configs.append({"view": name, "lr": lr})
    return heads.eval(), configs


class _HeadStack:
    """The heads of one view, trained as one ``(d, H K)`` weight matrix.

    Every head of a view sees the same batches, so their non-affine BatchNorms compute
    identical batch statistics and running statistics: one normalisation serves all of
    them. The logits of the ``H`` heads are one matrix product ``x_n W + b`` with the
    heads' weights side by side in ``W``; the cross-entropy gradient is formed in closed
    form, ``(softmax(z) - onehot(y)) / B``, and ``W``'s gradient is one product ``x_nᵀ G``.
    The update is :class:`torch.optim.SGD`'s (weight decay added to the gradient, heavy-ball
    momentum without dampening, the first buffer equal to the first gradient), column by
    column with each head's learning rate, so head ``j`` follows exactly the trajectory of
    ``train_probe`` with ``lr = lrs[j]``, up to floating-point rounding.
    """

    def __init__(self, h, n_classes, lrs, batchnorm, seed, device):
        self.h, self.K, self.H = h, n_classes, len(lrs)
        d = h.shape[1]
        torch.manual_seed(int(seed))  # the initialisation train_probe gives a lone probe
        self.template = LinearProbe(d, n_classes, batchnorm=batchnorm).to(device)
        lin = self.template.linear
        self.W = lin.weight.detach().T.repeat(1, self.H).contiguous()  # (d, H K)
        self.b = lin.bias.detach().repeat(self.H).clone()  # (H K,)
        self.lr = torch.tensor(lrs, dtype=torch.float32, device=device).repeat_interleave(n_classes)
        self.buf_W = self.buf_b = None
        bn = self.template.bn
        self.bn = bn if isinstance(bn, nn.BatchNorm1d) else None

    def step(self, idx, yb, factor, momentum, weight_decay):
        x = self.h[idx]
        if self.bn is not None:
            bn = self.bn
            bn.num_batches_tracked += 1
            x = nn.functional.batch_norm(
                x, bn.running_mean, bn.running_var, training=True, momentum=bn.momentum, eps=bn.eps
            )
        B = x.shape[0]
        z = torch.addmm(self.b, x, self.W).view(B, self.H, self.K)
        g = torch.softmax(z, dim=2)
        g[torch.arange(B, device=x.device), :, yb] -= 1.0
        g = g.view(B, self.H * self.K).div_(B)
        grad_W = x.T @ g
        grad_b = g.sum(dim=0)
        if weight_decay:
            grad_W.add_(self.W, alpha=weight_decay)
            grad_b.add_(self.b, alpha=weight_decay)
        if momentum and self.buf_W is not None:
            self.buf_W.mul_(momentum).add_(grad_W)
            self.buf_b.mul_(momentum).add_(grad_b)
        else:
            self.buf_W, self.buf_b = grad_W, grad_b
        lr = self.lr * factor
        self.W.sub_(self.buf_W * lr)
        self.b.sub_(self.buf_b * lr)

    def head(self, j):
        """Head ``j`` as its own :class:`LinearProbe` (the shared BatchNorm statistics copied)."""
        probe = copy.deepcopy(self.template)
        cols = slice(j * self.K, (j + 1) * self.K)
        with torch.no_grad():
            probe.linear.weight.copy_(self.W[:, cols].T)
            probe.linear.bias.copy_(self.b[cols])
        return probe


@torch.no_grad()
def grid_accuracies(heads, configs, views, labels):
    """Top-1 accuracy of every head on its own view of ``views``.

    Each head is evaluated in evaluation mode; every submodule's training flag is
    restored afterwards (:func:`~repeval_ref.torch.freeze.evaluation_mode`).

    Parameters
    ----------
    heads : sequence of torch.nn.Module
        As returned by :func:`train_probe_grid` (an ``nn.ModuleList``).
    configs : list of dict
        ``configs[i]["view"]`` names the view head ``i`` reads.
    views : dict of str -> (n, d_v) features
    labels : array_like of int, shape (n,)

    Returns
    -------
    numpy.ndarray of float64, shape (len(heads),)
    """
    views, n = _check_views(views, "views")
    y = torch.from_numpy(
        as_labels(
            labels.cpu().numpy() if isinstance(labels, torch.Tensor) else labels, "labels", n=n
        )
    )
    if len(heads) != len(configs):
        raise ValueError(f"{len(heads)} heads but {len(configs)} configs")
    for c in configs:
        if c["view"] not in views:
            raise ValueError(f"views has no view {c['view']!r}")
    acc = np.empty(len(heads))
    with contextlib.ExitStack() as stack:
        for h in heads:
            stack.enter_context(evaluation_mode(h))
        for i, (h, c) in enumerate(zip(heads, configs)):
            dev = next(h.parameters()).device
            pred = h(views[c["view"]].to(dev)).argmax(dim=1).cpu()
            acc[i] = float((pred == y).double().mean())
    return acc


@dataclass
class GridResult:
    """Outcome of :func:`probe_grid_search`.

    Attributes
    ----------
    configs : list of dict
        Every configuration (``view``, ``lr``).
    val_acc : numpy.ndarray
        Validation accuracy of every configuration (the selection criterion).
    test_acc : numpy.ndarray
        Test accuracy of every configuration (reported, never used to choose).
    best : int
        Index of the chosen configuration: the first with the highest ``val_acc``.
    chosen : dict
        ``configs[best]``.
    chosen_val_acc : float
        Its validation accuracy, always that of the head trained without the
        validation split (the one it was chosen by), also when ``refit=True``: the
        refitted head has seen the validation samples, so its validation accuracy
        would mean nothing.
    chosen_test_acc : float
        Its test accuracy: of the refitted head (trained on the whole training set)
        when ``refit=True``, else of the grid's head.
    heads : torch.nn.ModuleList
        The trained heads.
    """

    configs: list
    val_acc: np.ndarray
    test_acc: np.ndarray
    best: int
    chosen: dict
    chosen_val_acc: float
    chosen_test_acc: float
    heads: nn.ModuleList

    def report(self):
        """One line: the chosen configuration with its validation and test accuracy."""
        c = self.chosen
        return (
            f"chosen probe: view={c['view']} lr={c['lr']:g} "
            f"val acc={self.chosen_val_acc:.4f} test acc={self.chosen_test_acc:.4f} "
            f"({len(self.configs)} configurations trained at once)"
        )


def probe_grid_search(
    train_views,
    train_labels,
    test_views,
    test_labels,
    n_classes,
    lrs,
    *,
    val_fraction=0.2,
    refit=False,
    seed=0,
    **train_kwargs,
):
    """Train a probe grid, choose on a validation split of the training set, report test accuracy.

    Parameters
    ----------
    train_views, test_views : dict of str -> (n, d_v) features
        The same views for the training and the test samples.
    train_labels, test_labels : array_like of int
    n_classes : int
    lrs : sequence of float
    val_fraction : float
        Share of the training set held out (stratified when every class has at least
        two samples) for the selection.
    refit : bool
        Retrain the chosen configuration on the whole training set before measuring
        its test accuracy (the VTAB recipe).
    seed : int
        Seed of the split and of the training.
    **train_kwargs
        Passed to :func:`train_probe_grid` (epochs, batch_size, weight_decay, ...).

    Returns
    -------
    GridResult
    """
    from sklearn.model_selection import train_test_split

    train_views, n = _check_views(train_views, "train_views")
    test_views, n_test = _check_views(test_views, "test_views")
    if set(train_views) != set(test_views):
        raise ValueError("train_views and test_views must have the same view names")
    for k in train_views:
        if train_views[k].shape[1] != test_views[k].shape[1]:
            raise ValueError(
                f"view {k!r} has {train_views[k].shape[1]} features in training, "
                f"{test_views[k].shape[1]} in test"
            )
    n_classes = check_int(n_classes, "n_classes", minimum=2)
    y = as_labels(
        train_labels.cpu().numpy() if isinstance(train_labels, torch.Tensor) else train_labels,
        "train_labels",
        n=n,
        n_classes=n_classes,
    )
    y_test = as_labels(
        test_labels.cpu().numpy() if isinstance(test_labels, torch.Tensor) else test_labels,
        "test_labels",
        n=n_test,
        n_classes=n_classes,
    )
    val_fraction = check_positive(val_fraction, "val_fraction")
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must lie strictly between 0 and 1, got {val_fraction}")
    counts = np.bincount(y, minlength=n_classes)
    stratify = y if counts[counts > 0].min() >= 2 else None
    fit_idx, val_idx = train_test_split(
        np.arange(n), test_size=val_fraction, random_state=int(seed), stratify=stratify
    )
    if len(fit_idx) < 2 or len(val_idx) < 1:
        raise ValueError(f"the training set ({n} samples) is too small to carve a validation split")
    fit_t, val_t = torch.from_numpy(np.sort(fit_idx)), torch.from_numpy(np.sort(val_idx))
    fit_views = {k: v[fit_t] for k, v in train_views.items()}
    val_views = {k: v[val_t] for k, v in train_views.items()}
    heads, configs = train_probe_grid(
        fit_views, y[fit_t.numpy()], n_classes, lrs, seed=seed, **train_kwargs
    )
    val_acc = grid_accuracies(heads, configs, val_views, y[val_t.numpy()])
    test_acc = grid_accuracies(heads, configs, test_views, y_test)
    best = int(np.argmax(val_acc))  # selection: validation only (first best on ties)
    chosen = dict(configs[best])
    chosen_test = float(test_acc[best])
    if refit:
        view = chosen["view"]
        head, cfg = train_probe_grid(
            {view: train_views[view]}, y, n_classes, [chosen["lr"]], seed=seed, **train_kwargs
        )
        chosen_test = float(grid_accuracies(head, cfg, {view: test_views[view]}, y_test)[0])
    return GridResult(
        configs, val_acc, test_acc, best, chosen, float(val_acc[best]), chosen_test, heads
    )


def grid_views(features, n_lasts=(1, 4), poolings=("cls", "cls+mean")):
    """The DINOv2 feature views of a :class:`~repeval_ref.torch.extract.Features`.

    Returns
    -------
    dict of str -> numpy.ndarray
        ``"last{n}/{pooling}"`` -> ``features.view(n, pooling)`` for every ``n`` in
        ``n_lasts`` (capped at the number of extracted blocks, duplicates dropped) and
        every pooling.
    """
    out = {}
    for n_last in n_lasts:
        n_last = min(check_int(n_last, "n_lasts entry", minimum=1), len(features.layers))
        for pooling in poolings:
            out.setdefault(f"last{n_last}/{pooling}", features.view(n_last, pooling))
    return out
