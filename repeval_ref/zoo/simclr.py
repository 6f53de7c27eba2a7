"""Contrastive pre-training with two augmented views (SimCLR-style InfoNCE).

Book: the Performance appendix (the zoo); seed 000 (contrastive encoders spread the
classes so that a k-NN vote works well).

For a batch of ``b`` images, two views give projections ``z`` (2b, p), normalised to
unit length. With cosine similarities ``s_ij = z_i . z_j / tau`` and ``pos(i)`` the
other view of the same image::

    L = (1 / 2b) sum_i [ -s_{i, pos(i)} + log sum_{j != i} exp(s_ij) ],

the "NT-Xent" loss; the ``2b - 2`` other images of the batch are the negatives. The
projection head is thrown away after training.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from ._heads import projected_views, projector_heads

__all__ = ["info_nce", "make_heads", "training_loss"]


def info_nce(z1, z2, temperature):
    """NT-Xent loss of two batches of projections whose rows ``i`` are views of one image.

    Parameters
    ----------
    z1, z2 : torch.Tensor of shape (b, p)
        Projections of the first and second views (normalised here).
    temperature : float
        ``tau > 0``.

    Returns
    -------
    torch.Tensor, scalar
    """
    if z1.ndim != 2 or z1.shape != z2.shape or z1.shape[0] < 2:
        raise ValueError(
            f"z1 and z2 must have the same shape (b >= 2, p), got {tuple(z1.shape)} and "
            f"{tuple(z2.shape)}"
        )
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    b = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    s = z @ z.T / temperature
    s = s.masked_fill(torch.eye(2 * b, dtype=torch.bool, device=s.device), float("-inf"))
    rows = torch.arange(2 * b, device=s.device)
    pos = (rows + b) % (2 * b)  # the other view: i + b for the first b rows, i - b after
    return (torch.logsumexp(s, dim=1) - s[rows, pos]).mean()


def make_heads(encoder, cfg):
    return projector_heads(encoder, cfg)


def training_loss(encoder, heads, x, y, generator, cfg, state):
    z1, z2 = projected_views(encoder, heads, x, generator, cfg)
    return info_nce(z1, z2, cfg["temperature"])
