"""Masked-patch reconstruction (MAE-style): encode the visible patches, rebuild the hidden ones.

Book: the Performance appendix (the zoo); seed 000 (a masked-image model reads poorly
with a linear probe on a pooled vector, better with an attentive probe or fine-tuning).

For each image a share ``mask_ratio`` of the patches is hidden at random. The encoder
(the zoo ViT) sees the class token and the visible patches only; a small decoder
receives the encoded visible tokens plus a shared learned mask token at every hidden
position (with its own position embedding) and predicts each patch's pixels. With
``pred, target`` (b, P, p*p) and ``mask`` (b, P) equal to 1 where a patch is hidden::

    L = sum_{i, j} mask_ij * mean_k (pred_ijk - target_ijk)^2  /  sum_{i, j} mask_ij,

so visible patches do not count. Targets are the pixels of each patch standardised
by that patch's mean and variance (MAE's ``norm_pix_loss``). The decoder is thrown
away after training.
"""

from __future__ import annotations

import torch
from torch import nn

from ..torch.models import TransformerBlock

__all__ = ["masked_reconstruction_loss", "patchify", "random_mask", "make_heads", "training_loss"]


def masked_reconstruction_loss(pred, target, mask):
    """Mean squared error over the hidden patches only.

    Parameters
    ----------
    pred, target : torch.Tensor of shape (b, P, q)
        Predicted and true pixels of each patch.
    mask : torch.Tensor of shape (b, P)
        1 (or True) where the patch was hidden, 0 where visible; at least one 1.

    Returns
    -------
    torch.Tensor, scalar
    """
    if pred.ndim != 3 or pred.shape != target.shape or mask.shape != pred.shape[:2]:
        raise ValueError(
            f"pred and target must be (b, P, q) and mask (b, P), got {tuple(pred.shape)}, "
            f"{tuple(target.shape)} and {tuple(mask.shape)}"
        )
    mask = mask.to(pred.dtype)
    if not mask.sum() > 0:
        raise ValueError("mask hides no patch; the loss is undefined")
    per_patch = (pred - target).pow(2).mean(dim=2)
    return (per_patch * mask).sum() / mask.sum()


def patchify(x, patch_size):
    """Images (b, c, H, W) -> patches (b, (H/p) * (W/p), c * p * p), row-major like the patch
    embedding."""
    b, c, h, w = x.shape
    p = patch_size
    x = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // p) * (w // p), c * p * p)


def random_mask(b, n_patches, mask_ratio, generator):
    """Indices of the kept patches (b, n_keep) and the 0/1 mask (b, n_patches), 1 = hidden."""
    n_keep = max(1, int(round(n_patches * (1 - mask_ratio))))
    order = torch.argsort(torch.rand(b, n_patches, generator=generator), dim=1, stable=True)
    keep = order[:, :n_keep]
    mask = torch.ones(b, n_patches)
    mask.scatter_(1, keep, 0.0)
    return keep, mask


class _Decoder(nn.Module):
    def __init__(self, dim, dec_dim, depth, heads, n_patches, out):
        super().__init__()
        self.embed = nn.Linear(dim, dec_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dec_dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 1 + n_patches, dec_dim))
        self.blocks = nn.ModuleList(TransformerBlock(dec_dim, heads, 2) for _ in range(depth))
        self.norm = nn.LayerNorm(dec_dim)
        self.pred = nn.Linear(dec_dim, out)

    def forward(self, encoded, keep, n_patches):
        b = encoded.shape[0]
        e = self.embed(encoded)
        full = self.mask_token.expand(b, n_patches, -1).clone()
        full = full.scatter(1, keep[:, :, None].expand(-1, -1, e.shape[2]), e[:, 1:])
        t = torch.cat([e[:, :1], full], dim=1) + self.pos
        for block in self.blocks:
            t = block(t)
        return self.pred(self.norm(t))[:, 1:]


def make_heads(encoder, cfg):
    n_patches = encoder.pos_embed.shape[1] - 1
    q = encoder.patch_embed.in_channels * encoder.patch_embed.kernel_size[0] ** 2
    return {
        "decoder": _Decoder(
            encoder.out_dim,
            cfg["decoder_dim"],
            cfg["decoder_depth"],
            cfg["decoder_heads"],
            n_patches,
            q,
        )
    }


def encode_visible(encoder, x, keep):
    """The zoo ViT run on the class token and the kept patches only: (b, 1 + n_keep, dim)."""
    p = encoder.patch_embed(x).flatten(2).transpose(1, 2) + encoder.pos_embed[:, 1:]
    vis = p.gather(1, keep[:, :, None].expand(-1, -1, p.shape[2]))
    cls = (encoder.cls_token + encoder.pos_embed[:, :1]).expand(x.shape[0], -1, -1)
    t = torch.cat([cls, vis], dim=1)
    for block in encoder.blocks:
        t = block(t)
    return encoder.norm(t)


def training_loss(encoder, heads, x, y, generator, cfg, state):
    from .augment import random_flip

    x = random_flip(x, generator)
    n_patches = encoder.pos_embed.shape[1] - 1
    keep, mask = random_mask(x.shape[0], n_patches, cfg["mask_ratio"], generator)
    keep, mask = keep.to(x.device), mask.to(x.device)  # drawn on the generator's CPU
    pred = heads["decoder"](encode_visible(encoder, x, keep), keep, n_patches)
    target = patchify(x, encoder.patch_embed.kernel_size[0])
    mu, var = target.mean(dim=2, keepdim=True), target.var(dim=2, keepdim=True)
    target = (target - mu) / (var + 1e-6).sqrt()
    return masked_reconstruction_loss(pred, target, mask)
