"""Supervised pre-training: cross-entropy of a linear head on the encoder's features.

Book: the Performance appendix (the zoo); seed 000 (the supervised encoder is the
reference point the label-free objectives are compared with).

Loss for logits ``s`` (b, K) and labels ``y``::

    L = -(1/b) sum_i [ s_{i, y_i} - log sum_c exp(s_{i, c}) ].

Inputs are mirrored left-right at random; the head is thrown away after training.
"""

from __future__ import annotations

import torch
from torch import nn

from .augment import random_flip

__all__ = ["cross_entropy", "make_heads", "training_loss"]


def cross_entropy(logits, labels):
    """Mean negative log-likelihood of ``labels`` under ``softmax(logits)``.

    Parameters
    ----------
    logits : torch.Tensor of shape (b, K)
    labels : torch.Tensor of int64, shape (b,), values in ``0 .. K - 1``

    Returns
    -------
    torch.Tensor, scalar
    """
    if logits.ndim != 2 or labels.shape != (logits.shape[0],):
        raise ValueError(
            f"logits must be (b, K) and labels (b,), got {tuple(logits.shape)} and "
            f"{tuple(labels.shape)}"
        )
    log_p = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    return -log_p.gather(1, labels[:, None]).mean()


def make_heads(encoder, cfg):
    return {"classifier": nn.Linear(encoder.out_dim, cfg["n_classes"])}


def training_loss(encoder, heads, x, y, generator, cfg, state):
    return cross_entropy(heads["classifier"](encoder(random_flip(x, generator))), y)
