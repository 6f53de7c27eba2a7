"""The random-initialisation encoder: the zoo's ViT exactly as every objective starts it.

Book: the Performance appendix (the zoo); seed 000 (a random network is the floor any
pre-training must beat, and a surprisingly strong k-NN baseline on small images).

There is no loss: the shipped weights are the seeded initialisation that the other
ViT objectives of the zoo start from (same seed, same architecture), so "random" is
literally the zero-th checkpoint of each of them.
"""

from __future__ import annotations

__all__ = ["training_loss", "make_heads"]


def make_heads(encoder, cfg):
    """No heads: nothing is trained."""
    return {}


def training_loss(encoder, heads, x, y, generator, cfg, state):  # pragma: no cover - never called
    raise RuntimeError("random_init has no training loss; it ships its initial weights")
