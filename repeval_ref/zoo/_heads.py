"""Small heads shared by the objectives (projectors and predictors); discarded after training."""

from __future__ import annotations

from torch import nn

from .augment import two_views

__all__ = ["mlp", "projector_heads", "projected_views"]


def mlp(d_in, d_hidden, d_out):
    """``Linear -> GELU -> Linear``: the projection head of SimCLR, DINO and the Siamese model."""
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.GELU(), nn.Linear(d_hidden, d_out))


def projector_heads(encoder, cfg):
    """``{"projector": mlp(encoder.out_dim, cfg["proj_hidden"], cfg["proj_dim"])}``: the heads
    of SimCLR and of the Siamese model."""
    return {"projector": mlp(encoder.out_dim, cfg["proj_hidden"], cfg["proj_dim"])}


def projected_views(encoder, heads, x, generator, cfg):
    """Two views of every image (:func:`repeval_ref.zoo.augment.two_views`, crop area
    ``cfg["crop_scale"]``) through ``encoder`` and ``heads["projector"]`` in one batch.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        ``z1, z2``, each of shape ``(b, p)``: row ``i`` of both comes from image ``i``.
    """
    z = heads["projector"](encoder(two_views(x, generator, tuple(cfg["crop_scale"]))))
    return z[: x.shape[0]], z[x.shape[0] :]
