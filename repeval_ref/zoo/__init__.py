"""Encoders for every chapter: EfficientNet-Lite0 (ImageNet weights) and the project's own.

:func:`load` returns a frozen encoder by name. This first version knows the
pretrained ImageNet encoder only; the encoders the project pretrains join the
registry below.
"""
from __future__ import annotations

__all__ = ["load", "known_names"]


def _efficientnet_lite0(checkpoint):
    from .efficientnet import efficientnet_lite0

    if checkpoint is not None:
        raise ValueError(f"checkpoint: efficientnet_lite0 has one set of weights (ImageNet), got {checkpoint!r}")
    return efficientnet_lite0("imagenet")


_REGISTRY = {"efficientnet_lite0": _efficientnet_lite0}


def known_names():
    """Names that :func:`load` accepts, sorted."""
    return sorted(_REGISTRY)


def load(name, checkpoint=None):
    """The frozen encoder ``name`` (evaluation mode, ``requires_grad`` off).

    Parameters
    ----------
    name : str
        One of :func:`known_names`.
    checkpoint : str, optional
        Which saved point of training (encoders with several checkpoints).

    Raises
    ------
    ValueError
        For an unknown ``name`` (the message lists the known ones) or ``checkpoint``.
    """
    if name not in _REGISTRY:
        raise ValueError(f"name: unknown encoder {name!r}; known: {', '.join(known_names())}")
    return _REGISTRY[name](checkpoint)
