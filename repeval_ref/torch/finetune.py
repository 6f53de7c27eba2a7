"""Partial fine-tuning and layer-wise learning-rate decay for a torch model.

Book: chapter ``book/lpft.md`` (fine-tuning, partial fine-tuning and LP-FT); seed 000,
box "Fine-tuning protocols".

Both helpers see a model as a stack of *layers*, numbered as in the book:

* layer ``0``: every parameter registered before the first block (for a ViT the patch
  embedding, the class token and the position embedding);
* layer ``l`` for ``l = 1..L``: block ``l`` (``blocks[l - 1]``), together with any
  parameter registered after it that belongs to no later block and not to the head
  (a final LayerNorm goes with the last block);
* layer ``L + 1``: the head, when the model has one (``head=`` names it).

:func:`freeze_all_but_last` trains the last ``j`` blocks and the head: ``j = 0`` is a
linear probe, ``j = L`` full fine-tuning (the embeddings train too).
:func:`layerwise_lr_groups` builds optimizer parameter groups in which layer ``i``
trains at ``base_lr * decay ** (L + 1 - i)``, the scales of
:func:`repeval_ref.layerwise_lr_scales`. MAE's reference code puts the final norm with
the head (one factor of ``decay`` faster than here); the difference is one LayerNorm.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from .._validation import check_int, check_positive
from ..lpft_theory import layerwise_lr_scales
from .models import default_blocks

__all__ = ["parameter_layers", "freeze_all_but_last", "layerwise_lr_groups"]


def _block_names(model, blocks):
    if blocks is None:
        names = default_blocks(model)
    elif isinstance(blocks, str):
        try:
            container = model.get_submodule(blocks)
        except AttributeError:
            raise ValueError(f"blocks: model has no submodule {blocks!r}") from None
        names = [f"{blocks}.{child}" for child, _ in container.named_children()]
    elif isinstance(blocks, Sequence) and all(isinstance(b, str) for b in blocks):
        names = list(blocks)
    else:
        raise ValueError(
            "blocks must be None, the name of a container of blocks, or a list of block names"
        )
    if not names:
        raise ValueError("blocks: the model has no blocks to number")
    if len(set(names)) != len(names):
        raise ValueError(f"blocks: a block is named twice in {names}")
    for name in names:
        try:
            model.get_submodule(name)
        except AttributeError:
            raise ValueError(f"blocks: model has no submodule {name!r}") from None
    return names


def _inside(param_name, module_name):
    return param_name.startswith(module_name + ".")


def parameter_layers(model, *, blocks=None, head=None):
    """The layer number of every parameter of ``model`` (see the module notes).

    Parameters
    ----------
    model : torch.nn.Module
    blocks : str or list of str, optional
        The blocks in depth order: the name of a container whose children are the
        blocks (``"encoder.blocks"``) or a list of submodule names; default
        :func:`~repeval_ref.torch.models.default_blocks`.
    head : str, optional
        Name of the head submodule (layer ``L + 1``); default none.

    Returns
    -------
    layers : dict of str to int
        Parameter name (as ``model.named_parameters()`` gives it) to its layer, in
        ``0..L + 1``.
    n_blocks : int
        ``L``.

    Raises
    ------
    TypeError
        If ``model`` is not a module.
    ValueError
        Unknown or repeated block names, a head that is unknown, holds no parameter or
        overlaps a block, or a block without parameters.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    names = _block_names(model, blocks)
    L = len(names)
    if head is not None:
        if not isinstance(head, str):
            raise ValueError(f"head must be the name of a submodule, got {type(head).__name__}")
        try:
            model.get_submodule(head)
        except AttributeError:
            raise ValueError(f"head: model has no submodule {head!r}") from None
        if any(b == head or _inside(b, head) or _inside(head, b) for b in names):
            raise ValueError(f"head {head!r} overlaps a block")
    layers, current, seen = {}, 0, set()
    for pname, _ in model.named_parameters():
        if head is not None and _inside(pname, head):
            layers[pname] = L + 1
            continue
        for i, b in enumerate(names, start=1):
            if _inside(pname, b):
                current = max(current, i)
                layers[pname] = i
                seen.add(i)
                break
        else:
            layers[pname] = current
    missing = sorted(set(range(1, L + 1)) - seen)
    if missing:
        raise ValueError(
            f"blocks: block(s) {missing} hold no parameter (or come out of depth order)"
        )
    if head is not None and L + 1 not in layers.values():
        raise ValueError(f"head {head!r} holds no parameter")
    return layers, L


def freeze_all_but_last(model, j, *, blocks=None, head=None):
    """Partial fine-tuning: train the last ``j`` blocks and the head, freeze the rest.

    Sets ``requires_grad`` on every parameter of ``model`` (in place): the head's
    parameters and those of layers ``L - j + 1 .. L`` train; when ``j = L`` layer 0
    (the embeddings) trains as well, so ``j = L`` is full fine-tuning and ``j = 0`` a
    linear probe on the frozen encoder. Training or evaluation mode is left as it is.

    Parameters
    ----------
    model : torch.nn.Module
    j : int
        Number of trainable blocks, ``0 <= j <= L``.
    blocks, head
        As in :func:`parameter_layers`.

    Returns
    -------
    list of str
        Names of the trainable parameters, in ``named_parameters`` order.

    Raises
    ------
    ValueError
        ``j`` outside ``0..L``, or as :func:`parameter_layers`.
    """
    layers, L = parameter_layers(model, blocks=blocks, head=head)
    j = check_int(j, "j", minimum=0, maximum=L)
    trainable = []
    for pname, p in model.named_parameters():
        layer = layers[pname]
        on = layer == L + 1 or layer > L - j or (j == L and layer == 0)
        p.requires_grad_(on)
        if on:
            trainable.append(pname)
    return trainable


def layerwise_lr_groups(model, base_lr, decay, *, blocks=None, head=None, weight_decay=None):
    """Optimizer parameter groups with layer-wise learning-rate decay.

    Layer ``i`` (see :func:`parameter_layers`) trains at ``base_lr * decay ** (L + 1 - i)``:
    the head at ``base_lr``, block ``L`` at ``base_lr * decay``, the embeddings at
    ``base_lr * decay ** (L + 1)``. Only parameters with ``requires_grad`` are listed, so
    the groups can follow :func:`freeze_all_but_last`; each appears in exactly one group.

    Parameters
    ----------
    model : torch.nn.Module
    base_lr : float
        The head's rate, ``> 0``.
    decay : float
        In ``(0, 1]``; ``1`` gives every layer ``base_lr``.
    blocks, head
        As in :func:`parameter_layers`.
    weight_decay : float, optional
        Put into every group when given (``>= 0``).

    Returns
    -------
    list of dict
        One group per layer that has a trainable parameter, from layer 0 up:
        ``{"params": [...], "lr": float, "layer": int, "names": [...]}``, ready for
        ``torch.optim.AdamW(groups)``.

    Raises
    ------
    TypeError
        A ``base_lr``, ``decay`` or ``weight_decay`` that is not a real number.
    ValueError
        A ``base_lr`` that is not positive, ``decay`` outside ``(0, 1]``, a negative
        ``weight_decay``, no trainable parameter, or as :func:`parameter_layers`.
    """
    layers, L = parameter_layers(model, blocks=blocks, head=head)
    base_lr = check_positive(base_lr, "base_lr")
    scales = layerwise_lr_scales(L + 2, decay)
    if weight_decay is not None:
        weight_decay = check_positive(weight_decay, "weight_decay", allow_zero=True)
    groups = {}
    for pname, p in model.named_parameters():
        if not p.requires_grad:
            continue
        i = layers[pname]
        g = groups.setdefault(
            i, {"params": [], "lr": base_lr * float(scales[i]), "layer": i, "names": []}
        )
        if weight_decay is not None:
            g["weight_decay"] = float(weight_decay)
        g["params"].append(p)
        g["names"].append(pname)
    if not groups:
        raise ValueError("model has no trainable parameter (every requires_grad is off)")
    return [groups[i] for i in sorted(groups)]
