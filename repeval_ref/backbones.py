"""Every way of getting an encoder by name: torchvision, timm, the zoo, local weight files.

Book: chapter "Linear probes", the PyTorch reference loop; seed 000, "In PyTorch"
(a real backbone replaces the small encoder, the rest of the loop is unchanged).

This module sits above both :mod:`repeval_ref.torch` (evaluation code and the small
architectures) and :mod:`repeval_ref.zoo` (the project's trained encoders), as the model
loaders of DINOv2 and CLIP_benchmark sit above their evaluation code: evaluation code
never imports a loader, a loader may import anything below it.

* :func:`load_backbone` builds a torchvision or timm architecture and loads its
  weights from a *local* file, or returns an encoder of :mod:`repeval_ref.zoo`. Both
  libraries are imported only when asked for; a download that cannot happen offline is
  reported with a message that says what to do.
* :class:`BackboneUnavailable` is the error for a library or weights that this machine
  does not have.
"""

from __future__ import annotations

import importlib
import os
import urllib.error

import torch
from torch import nn

from . import zoo

__all__ = ["load_backbone", "BackboneUnavailable"]


class BackboneUnavailable(RuntimeError):
    """A requested backbone library or its weights are not available on this machine."""


def _import_library(library):
    if library not in ("torchvision", "timm"):
        raise ValueError(f"library must be 'torchvision' or 'timm', got {library!r}")
    try:
        return importlib.import_module(library)
    except ImportError as exc:
        raise BackboneUnavailable(
            f"{library} is not installed, so a {library} backbone cannot be built. Install a "
            f"{library} build that matches this torch ({torch.__version__}), or use the "
            "built-in SmallCNN (the default of `repeval loop`)."
        ) from exc


def _offline_message(library, arch):
    return (
        f"could not download pretrained weights for {library} model {arch!r}: this machine "
        "cannot reach the model hub. Download the weights elsewhere, copy the file here, "
        "and pass its path as weights=... (or --weights PATH)."
    )


def _load_state(path):
    """The state dict stored in ``path``; ValueError naming the file if it is not a checkpoint."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except OSError:  # unreadable file: the OS error says why
        raise
    except Exception as exc:  # torch.load's errors differ by file kind (KeyError, EOFError, ...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"weights file {path!r} is not a PyTorch checkpoint that loads with "
            f"weights_only=True ({type(exc).__name__}: {first[:200]}); save it with "
            "torch.save(model.state_dict(), path)"
        ) from exc
    if isinstance(state, dict):
        for key in ("state_dict", "model", "module"):  # common checkpoint wrappers
            if key in state and isinstance(state[key], dict):
                state = state[key]
                break
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"weights file {path!r} does not hold a state dict of tensors")
    return state


def _strip_classifier(model):
    """Replace the classification head by the identity so ``forward`` returns features."""
    if hasattr(model, "reset_classifier"):  # timm
        model.reset_classifier(0)
        return model
    for attr in ("fc", "head", "heads", "classifier"):
        if isinstance(getattr(model, attr, None), nn.Module):
            setattr(model, attr, nn.Identity())
            return model
    return model


def load_backbone(arch, weights=None, *, library="torchvision", hub=False, keep_head=False):
    """Build a torchvision or timm backbone and load its weights from a local file, or load a zoo
    encoder.

    Parameters
    ----------
    arch : str
        Architecture name, e.g. ``"resnet50"`` or ``"vit_b_16"`` (torchvision), or
        ``"vit_base_patch14_dinov2"`` (timm).
    weights : str or os.PathLike, optional
        Path to a local state dict (``torch.save(model.state_dict(), path)``, or a
        checkpoint dict with a ``"state_dict"``/``"model"`` entry). Loaded with
        ``weights_only=True``; a file that is not such a checkpoint is a
        ``ValueError`` naming it. Without it the model is randomly initialised unless
        ``hub=True`` (the loop command refuses that unless ``--random-init`` is given).
    library : {"torchvision", "timm", "zoo"}
        Which library builds the architecture; imported only now. ``"zoo"``: ``arch``
        names an encoder of :mod:`repeval_ref.zoo`, returned by
        :func:`repeval_ref.zoo.load` with its own weights (frozen; ``weights`` and
        ``hub`` must be left out; its ``forward`` already returns pooled features).
        ``arch="zoo:NAME"`` means the same whatever ``library`` says.
    hub : bool
        Ask the library to download pretrained weights. Offline this fails, and the
        failure is re-raised as :class:`BackboneUnavailable` with instructions.
    keep_head : bool
        Keep the classification head (default: replaced by the identity, so the
        model returns its pooled features).

    Returns
    -------
    torch.nn.Module
        The model in evaluation mode.
    """
    if not isinstance(arch, str) or not arch:
        raise TypeError(f"arch must be a non-empty string, got {arch!r}")
    if arch.startswith("zoo:"):
        library, arch = "zoo", arch[len("zoo:") :]
    if library == "zoo":
        if weights is not None or hub:
            raise ValueError(
                f"zoo encoder {arch!r} loads the weights shipped with it; leave out weights and hub"
            )
        return zoo.load(arch)
    if weights is not None and hub:
        raise ValueError("pass either weights (a local path) or hub=True, not both")
    if weights is not None:
        weights = os.fspath(weights)
        if not os.path.isfile(weights):
            raise FileNotFoundError(f"weights file not found: {weights!r}")
    lib = _import_library(library)
    try:
        if library == "torchvision":
            model = lib.models.get_model(arch, weights="DEFAULT" if hub else None)
        else:
            model = lib.create_model(arch, pretrained=bool(hub))
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        raise BackboneUnavailable(_offline_message(library, arch)) from exc
    except (OSError, RuntimeError) as exc:
        if hub and any(
            w in str(exc).lower()
            for w in ("connect", "resolve", "network", "offline", "download", "urlopen")
        ):
            raise BackboneUnavailable(_offline_message(library, arch)) from exc
        raise
    if weights is not None:
        state = _load_state(weights)
        missing, unexpected = model.load_state_dict(state, strict=False)
        head_names = ("fc.", "head.", "heads.", "classifier.")
        missing = [k for k in missing if not k.startswith(head_names)]
        if missing or unexpected:
            raise ValueError(
                f"weights file {weights!r} does not fit {library} {arch!r}: "
                f"missing {missing[:5]}, unexpected {list(unexpected)[:5]}"
            )
    if not keep_head:
        model = _strip_classifier(model)
    return model.eval()
