"""A deliberately collapsing Siamese model: SimSiam with neither predictor nor stop-gradient.

Book: the Performance appendix (the zoo); seed 000 (label-free scores such as RankMe
exist to catch a collapsed representation).

Two views through the same encoder and projector give ``z1, z2``; the loss is the
negative cosine similarity ::

    L = -(1/b) sum_i  z1_i . z2_i / (|z1_i| |z2_i|),

with gradients flowing through both branches. SimSiam (Chen & He) needs a predictor
on one branch and a stop-gradient on the other; without them a constant output
reaches the minimum ``L = -1``, and the encoder is driven towards it.
"""

from __future__ import annotations

from torch.nn import functional as F

from ._heads import projected_views, projector_heads

__all__ = ["negative_cosine", "make_heads", "training_loss", "SHIPPED_HEADS"]

#: The projector is shipped beside the encoder: its output (the embedding the loss
#: sees) is where the collapse is complete; see :func:`repeval_ref.zoo.load_head`.
SHIPPED_HEADS = ("projector",)


def negative_cosine(z1, z2):
    """Mean negative cosine similarity of matching rows, gradients through both.

    Parameters
    ----------
    z1, z2 : torch.Tensor of shape (b, p)

    Returns
    -------
    torch.Tensor, scalar in [-1, 1]
    """
    if z1.ndim != 2 or z1.shape != z2.shape:
        raise ValueError(
            f"z1 and z2 must have the same shape (b, p), got {tuple(z1.shape)} and "
            f"{tuple(z2.shape)}"
        )
    return -F.cosine_similarity(z1, z2, dim=1).mean()


def make_heads(encoder, cfg):
    return projector_heads(encoder, cfg)


def training_loss(encoder, heads, x, y, generator, cfg, state):
    z1, z2 = projected_views(encoder, heads, x, generator, cfg)
    return negative_cosine(z1, z2)
