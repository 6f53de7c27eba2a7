"""Small heads shared by the objectives (projectors and predictors); discarded after training."""
from __future__ import annotations

from torch import nn

__all__ = ["mlp"]


def mlp(d_in, d_hidden, d_out):
    """``Linear -> GELU -> Linear``: the projection head of SimCLR, DINO and the Siamese model."""
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.GELU(), nn.Linear(d_hidden, d_out))
