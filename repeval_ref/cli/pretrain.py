"""Supervised pre-training of the loop's built-in small CNN on the digits, so its features mean
something.

Book: chapter "Linear probes", the PyTorch reference loop; seed 000, "In PyTorch".
``repeval loop`` (:mod:`repeval_ref.cli.loop`) trains its
:class:`~repeval_ref.torch.models.SmallCNN` with :func:`pretrain_encoder` for
``--pretrain-epochs`` epochs before evaluating it frozen. This is training code for the
offline demo, so it lives beside the loop and not in :mod:`repeval_ref.torch`, which
only evaluates encoders.
"""

from __future__ import annotations

import torch
from torch import nn

from .._validation import as_labels, check_int, check_positive

__all__ = ["pretrain_encoder"]


def pretrain_encoder(
    encoder, images, labels, n_classes, *, epochs=3, lr=3e-3, batch_size=64, seed=0
):
    """Train ``encoder`` plus a throw-away linear head by cross-entropy (supervised pre-training).

    The head is discarded, as the projection head of a pre-trained model is before
    evaluation; the encoder is returned in evaluation mode. This only exists so that
    the offline demo has an encoder whose features mean something.

    Parameters
    ----------
    encoder : torch.nn.Module with attribute ``out_dim``
    images : torch.Tensor of shape (n, ...)
    labels : array_like of int, shape (n,)
    n_classes : int
    epochs, batch_size : int
    lr : float
        Adam learning rate.
    seed : int
        Seed of the shuffling and of the head's initialisation.

    Returns
    -------
    torch.nn.Module
        ``encoder`` itself (trained in place), in evaluation mode.
    """
    if not isinstance(encoder, nn.Module):
        raise TypeError(f"encoder must be a torch.nn.Module, got {type(encoder).__name__}")
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    n_classes = check_int(n_classes, "n_classes", minimum=2)
    y = torch.from_numpy(as_labels(labels, "labels", n=images.shape[0], n_classes=n_classes))
    epochs = check_int(epochs, "epochs", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    lr = check_positive(lr, "lr")
    out_dim = getattr(encoder, "out_dim", None)
    if out_dim is None:
        raise ValueError("encoder needs an integer attribute out_dim (its feature dimension)")
    gen = torch.Generator().manual_seed(int(seed))
    head = nn.Linear(out_dim, n_classes)
    with torch.no_grad():
        head.weight.normal_(0, 0.01, generator=gen)
        head.bias.zero_()
    opt = torch.optim.Adam(list(encoder.parameters()) + list(head.parameters()), lr=lr)
    encoder.train()
    for _ in range(epochs):
        order = torch.randperm(images.shape[0], generator=gen)
        for start in range(0, images.shape[0], batch_size):
            idx = order[start : start + batch_size]
            if idx.numel() < 2:  # a batch of one has no BatchNorm statistics
                continue
            loss = nn.functional.cross_entropy(head(encoder(images[idx])), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return encoder.eval()
