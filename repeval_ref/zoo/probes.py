"""Trainable read-outs for the evaluation table: an attentive probe, fine-tuning and LP-FT.

Book: the Performance appendix (the zoo's evaluation table); seed 000 ("Attentive
probe": one learned query cross-attends to the frozen patch tokens; LP-FT, Kumar et
al. 2022: fitting the linear head first and then fine-tuning everything keeps
out-of-distribution accuracy that fine-tuning from a random head loses).

* :class:`AttentiveProbe` and :func:`train_attentive_probe` live in
  :mod:`repeval_ref.torch.attentive` (book chapter ``book/attentive.md``) and are
  re-exported here, so the evaluation table's code keeps importing them from this module.
* :func:`finetune` trains a copy of an encoder and a linear head end to end, either
  from a random head (fine-tuning) or from a head first fitted on the frozen features
  by :func:`linear_head` (LP-FT), and returns the trained model as a function.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..torch.attentive import AttentiveProbe, train_attentive_probe
from ..torch.schedule import cosine_factor

__all__ = ["AttentiveProbe", "train_attentive_probe", "predict", "finetune", "linear_head"]


def _fit(forward, params, x, y, epochs, lr, weight_decay, batch_size, seed, modules=()):
    params = [p for p in params if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    n = x.shape[0]
    steps = epochs * max(1, n // batch_size)
    step = 0
    for m in modules:
        m.train()
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for b in range(max(1, n // batch_size)):
            idx = order[b * batch_size : (b + 1) * batch_size]
            for g in opt.param_groups:
                g["lr"] = lr * cosine_factor(step, steps)
            loss = F.cross_entropy(forward(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
    for m in modules:
        m.eval()


@torch.no_grad()
def predict(forward, x, batch_size=1024):
    """Arg-max predictions of ``forward`` over ``x`` in batches (numpy int64)."""
    out = [forward(x[i : i + batch_size]).argmax(dim=1) for i in range(0, x.shape[0], batch_size)]
    return torch.cat(out).numpy().astype(np.int64)


def finetune(
    encoder,
    x,
    y,
    *,
    head_init=None,
    n_classes=10,
    epochs=3,
    lr=5e-4,
    weight_decay=0.05,
    batch_size=256,
    seed=0,
):
    """Train a copy of ``encoder`` and a linear head end to end on images ``x`` (n, c, H, W).

    Parameters
    ----------
    encoder : torch.nn.Module with ``out_dim``
        Frozen or not; a trainable deep copy is made.
    head_init : (weight, bias) tensors, optional
        Start of the linear head (LP-FT: a probe fitted on the frozen features);
        default PyTorch's random initialisation of ``nn.Linear``, seeded (plain
        fine-tuning, as in Kumar et al.).

    Returns
    -------
    callable
        ``images -> logits`` of the fine-tuned model (evaluation mode).
    """
    model = copy.deepcopy(encoder)
    for p in model.parameters():
        p.requires_grad_(True)
    torch.manual_seed(seed)
    head = nn.Linear(model.out_dim, n_classes)  # fine-tuning: PyTorch's default random head
    if head_init is not None:
        with torch.no_grad():
            head.weight.copy_(head_init[0])
            head.bias.copy_(head_init[1])
    yt = torch.as_tensor(np.asarray(y, dtype=np.int64))
    _fit(
        lambda xb: head(model(xb)),
        list(model.parameters()) + list(head.parameters()),
        x,
        yt,
        epochs,
        lr,
        weight_decay,
        batch_size,
        seed,
        modules=(model,),
    )
    return lambda xb: head(model(xb))


def linear_head(encoder, x, y, *, n_classes=10, epochs=10, lr=1e-2, batch_size=256, seed=0):
    """The linear head of LP-FT: trained on the frozen encoder's features, returned as (weight,
    bias)."""
    with torch.no_grad():
        h = torch.cat([encoder(x[i : i + 1024]) for i in range(0, x.shape[0], 1024)])
    head = nn.Linear(h.shape[1], n_classes)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
    yt = torch.as_tensor(np.asarray(y, dtype=np.int64))
    _fit(head, head.parameters(), h, yt, epochs, lr, 0.0, batch_size, seed)
    return head.weight.detach().clone(), head.bias.detach().clone()
