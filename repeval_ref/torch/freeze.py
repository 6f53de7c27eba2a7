"""Frozen feature extraction and the encoder-state check.

Book: chapter "Linear probes", box "Frozen means evaluation mode" and the PyTorch
reference loop; seed 000, sections "Frozen means evaluation mode" and "In PyTorch".

A frozen encoder is frozen in two senses at once:

* no gradient reaches it (extraction runs under :func:`torch.no_grad`), and
* it runs in *evaluation mode*, so every BatchNorm normalises with its stored running
  statistics (and does not update them) and every dropout layer is the identity.

Forgetting the second half is a silent bug: one forward pass in training mode replaces
part of each BatchNorm's running mean by the current batch's mean, so the encoder that
is evaluated is no longer the encoder that was trained. :func:`state_snapshot` and
:func:`state_diff` check the whole state (parameters *and* buffers such as running
statistics and ``num_batches_tracked``) bit for bit, which catches that bug.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

import numpy as np
import torch
from torch import nn

__all__ = [
    "frozen_features",
    "evaluation_mode",
    "training_flags",
    "restore_training_flags",
    "state_snapshot",
    "state_diff",
    "state_unchanged",
    "module_device",
]


def _check_module(encoder, name="encoder"):
    if not isinstance(encoder, nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module, got {type(encoder).__name__}")


def module_device(module):
    """Return the device of ``module``'s first parameter or buffer (CPU if it has none)."""
    _check_module(module, "module")
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return torch.device("cpu")


def training_flags(module):
    """Return every submodule's own ``training`` flag.

    Parameters
    ----------
    module : torch.nn.Module

    Returns
    -------
    list of (torch.nn.Module, bool)
        One entry per distinct submodule (``module`` itself included), in
        ``module.modules()`` order. A module shared by two parents appears once,
        since it has one flag.
    """
    _check_module(module, "module")
    return [(m, bool(m.training)) for m in module.modules()]


def restore_training_flags(flags):
    """Set each module's ``training`` flag back to the value recorded by :func:`training_flags`.

    Only the flag of each listed module is set (``m.training = flag``); ``Module.train``
    is not called, because it would overwrite the children's flags with the parent's.
    """
    for m, flag in flags:
        m.training = flag


@contextlib.contextmanager
def evaluation_mode(module):
    """Context manager: ``module.eval()`` inside, every submodule's own flag restored after.

    ``module.train(mode)`` after the block would be wrong when the submodules had
    different flags before (a frozen backbone inside a model in training mode, a
    BatchNorm deliberately left in eval mode, ...); this restores each flag exactly.
    """
    flags = training_flags(module)
    try:
        module.eval()
        yield module
    finally:
        restore_training_flags(flags)


def _batch_input(batch, index):
    """Return the input tensor of one batch: a tensor, or the first item of a (x, y) pair."""
    if isinstance(batch, (tuple, list)):
        if len(batch) == 0:
            raise ValueError(
                f"batches[{index}] is an empty tuple; expected a tensor or (input, label)"
            )
        batch = batch[0]
    elif isinstance(batch, Mapping):
        raise TypeError(f"batches[{index}] is a mapping; pass tensors or (input, label) tuples")
    if isinstance(batch, np.ndarray):
        batch = torch.from_numpy(batch)
    if not isinstance(batch, torch.Tensor):
        raise TypeError(
            f"batches[{index}] must be a tensor, an ndarray or an (input, label) tuple, "
            f"got {type(batch).__name__}"
        )
    if batch.ndim == 0 or batch.shape[0] == 0:
        raise ValueError(f"batches[{index}] has no samples (shape {tuple(batch.shape)})")
    return batch


def frozen_features(encoder, batches):
    """Extract features with a frozen encoder: evaluation mode and no gradients.

    Book: "Linear probes" (frozen means evaluation mode); seed 000, "In PyTorch".

    During extraction ``encoder`` is in evaluation mode (BatchNorm uses its running
    statistics and does not update them, dropout is off) and everything runs under
    :func:`torch.no_grad`. Afterwards every submodule's own ``training`` flag is
    restored to what it was before the call (submodules may have had different flags),
    and the encoder's state dict is bit-for-bit what it was.

    Parameters
    ----------
    encoder : torch.nn.Module
        Maps an input batch of shape ``(b, ...)`` to features of shape ``(b, d)``.
    batches : iterable
        Any iterable (list, generator, ``DataLoader``) whose items are either input
        tensors of shape ``(b, ...)`` or tuples/lists ``(input, label, ...)`` whose
        first item is the input tensor (labels are ignored). NumPy arrays are accepted
        and converted with :func:`torch.from_numpy`. Each input is moved to the device
        of the encoder's first parameter (CPU for an encoder without parameters); its
        dtype is left as given.

    Returns
    -------
    torch.Tensor of shape (n, d)
        The batch outputs concatenated in order (``n`` = total number of samples),
        detached, on the CPU.

    Raises
    ------
    TypeError
        If ``encoder`` is not an ``nn.Module`` or a batch is not a tensor/array/tuple.
    ValueError
        If ``batches`` yields nothing or an empty batch, if an output is not 2-D, or if
        the outputs' feature dimension or batch size does not match the input.
    """
    _check_module(encoder)
    if isinstance(batches, (torch.Tensor, np.ndarray)):
        raise TypeError("batches must be an iterable of batches; wrap a single tensor as [tensor]")
    if not isinstance(batches, Iterable):
        raise TypeError(f"batches must be an iterable of batches, got {type(batches).__name__}")
    device = module_device(encoder)
    outputs = []
    with evaluation_mode(encoder), torch.no_grad():
        for i, batch in enumerate(batches):
            x = _batch_input(batch, i).to(device)
            out = encoder(x)
            if not isinstance(out, torch.Tensor):
                raise TypeError(
                    f"encoder output for batch {i} is {type(out).__name__}, not a tensor"
                )
            if out.ndim != 2:
                raise ValueError(
                    f"encoder output for batch {i} must be 2-dimensional (b, d), "
                    f"got shape {tuple(out.shape)}"
                )
            if out.shape[0] != x.shape[0]:
                raise ValueError(
                    f"encoder output for batch {i} has {out.shape[0]} rows for {x.shape[0]} inputs"
                )
            if outputs and out.shape[1] != outputs[0].shape[1]:
                raise ValueError(
                    f"encoder output for batch {i} has {out.shape[1]} features, "
                    f"earlier batches had {outputs[0].shape[1]}"
                )
            outputs.append(out.detach().cpu())
    if not outputs:
        raise ValueError("batches is empty: no batch to extract features from")
    return torch.cat(outputs, dim=0)


def state_snapshot(module):
    """Copy ``module``'s entire state (parameters and buffers) to the CPU.

    Returns
    -------
    dict of str -> torch.Tensor
        A detached clone of every ``state_dict`` entry, running statistics and
        ``num_batches_tracked`` included.
    """
    _check_module(module, "module")
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def _bits(t):
    """The raw bytes of a tensor as a uint8 vector (bitwise, so NaN == NaN, -0 != +0)."""
    t = t.detach().cpu().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        return t.to(torch.uint8)
    return t.view(torch.uint8)


def state_diff(module, snapshot):
    """Names of the state entries of ``module`` that are not bit-identical to ``snapshot``.

    Parameters
    ----------
    module : torch.nn.Module
    snapshot : dict of str -> torch.Tensor
        As returned by :func:`state_snapshot`.

    Returns
    -------
    list of str
        Entries whose dtype, shape or bytes differ, plus entries present in only one
        of the two (sorted). Empty if the state is unchanged.
    """
    _check_module(module, "module")
    if not isinstance(snapshot, Mapping):
        raise TypeError(
            f"snapshot must be a dict from state_snapshot, got {type(snapshot).__name__}"
        )
    current = module.state_dict()
    changed = sorted(set(current) ^ set(snapshot))
    for name in current.keys() & snapshot.keys():
        a, b = current[name], snapshot[name]
        if not isinstance(b, torch.Tensor):
            raise TypeError(f"snapshot[{name!r}] is not a tensor")
        if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(_bits(a), _bits(b)):
            changed.append(name)
    return sorted(changed)


def state_unchanged(module, snapshot):
    """True if ``module``'s whole state is bit-for-bit equal to ``snapshot``."""
    return not state_diff(module, snapshot)
