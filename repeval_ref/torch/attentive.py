"""A trainable attentive probe: one learned query per head cross-attends to frozen tokens.

Book: chapter ``book/attentive.md`` ("Attentive probes"); seed 000, "Attentive probe".

* :class:`AttentiveProbe` holds the parameters of :func:`repeval_ref.attentive_probe`
  (query ``q``, key/value/output maps ``Wk``, ``Wv``, ``Wo``, classifier ``W_cls``, no
  biases) as torch parameters; its ``forward`` is the same computation, so the NumPy
  function applied to :meth:`AttentiveProbe.numpy_params` gives the same logits.
* :func:`train_attentive_probe` standardises the tokens per channel with the training
  set's statistics and fits the probe with AdamW and a cosine learning-rate schedule.
* :func:`attentive_predict` applies a trained probe to new tokens in batches.

The encoder is not involved: the probe reads token arrays that were extracted once
(for the zoo, ``repeval_ref.zoo.features(..., pooling="tokens")``).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .._validation import as_float_array, as_labels, check_divisor, check_int, check_positive
from .schedule import cosine_factor

__all__ = ["AttentiveProbe", "train_attentive_probe", "attentive_predict"]


class AttentiveProbe(nn.Module):
    """Multi-head attentive probe with one learned query (the forward of
    :func:`repeval_ref.attentive_probe`).

    Parameters
    ----------
    dim : int
        Token width ``d``.
    n_classes : int
        Number of classes ``K``.
    n_heads : int, default 4
        Number of heads ``h``; must divide ``dim`` (head width ``d / h``).
    n_prefix : int, default 1
        Leading tokens (class token, registers) left out of the attention.

    Attributes
    ----------
    q : Parameter of shape (dim,)
    Wk, Wv, Wo : Parameter of shape (dim, dim)
    W_cls : Parameter of shape (dim, n_classes), initialised to zero

    Raises
    ------
    ValueError
        ``dim``, ``n_classes`` or ``n_heads`` below 1, ``n_heads`` not dividing ``dim``,
        ``n_prefix`` below 0.
    """

    def __init__(self, dim, n_classes, n_heads=4, n_prefix=1):
        super().__init__()
        dim = check_int(dim, "dim", minimum=1)
        n_classes = check_int(n_classes, "n_classes", minimum=1)
        n_heads = check_divisor(n_heads, "n_heads", dim, "dim")
        self.n_heads, self.n_prefix = n_heads, check_int(n_prefix, "n_prefix", minimum=0)
        self.q = nn.Parameter(0.02 * torch.randn(dim))
        self.Wk = nn.Parameter(torch.randn(dim, dim) / math.sqrt(dim))
        self.Wv = nn.Parameter(torch.randn(dim, dim) / math.sqrt(dim))
        self.Wo = nn.Parameter(torch.randn(dim, dim) / math.sqrt(dim))
        self.W_cls = nn.Parameter(torch.zeros(dim, n_classes))

    def forward(self, H):
        """Logits (B, K) and attention weights (B, n_heads, T - n_prefix) for tokens ``H`` (B, T,
        d)."""
        if H.ndim != 3 or H.shape[2] != self.q.shape[0] or H.shape[1] <= self.n_prefix:
            raise ValueError(
                f"H must have shape (B, T > {self.n_prefix}, {self.q.shape[0]}), got "
                f"{tuple(H.shape)}"
            )
        B, T, d = H.shape
        h, dk = self.n_heads, d // self.n_heads
        tokens = H[:, self.n_prefix :]
        keys = (tokens @ self.Wk).reshape(B, -1, h, dk)
        values = (tokens @ self.Wv).reshape(B, -1, h, dk)
        scores = torch.einsum("bthk,hk->bht", keys, self.q.reshape(h, dk)) / math.sqrt(dk)
        A = torch.softmax(scores, dim=-1)
        o = torch.einsum("bht,bthk->bhk", A, values).reshape(B, d)
        return o @ self.Wo @ self.W_cls, A

    def numpy_params(self):
        """The parameters as float64 arrays, keyed as the arguments of
        :func:`repeval_ref.attentive_probe`."""
        out = {
            k: getattr(self, k).detach().cpu().double().numpy().copy()
            for k in ("q", "Wk", "Wv", "Wo", "W_cls")
        }
        out.update(n_heads=self.n_heads, n_prefix=self.n_prefix)
        return out


def train_attentive_probe(
    train_tokens,
    train_y,
    *,
    n_classes=10,
    n_heads=4,
    n_prefix=1,
    epochs=20,
    lr=3e-3,
    weight_decay=1e-4,
    batch_size=256,
    seed=0,
):
    """Fit an :class:`AttentiveProbe` on frozen tokens, standardised per channel.

    Each channel is standardised with the mean and standard deviation over all training
    images and tokens; AdamW runs ``epochs`` passes over the shuffled training set with
    a cosine learning-rate decay from ``lr`` to zero, minimising the cross-entropy.

    Parameters
    ----------
    train_tokens : array_like of shape (n, T, d)
        Frozen tokens (class token first when ``n_prefix = 1``).
    train_y : array_like of int, shape (n,)
        Labels in ``0 .. n_classes - 1``.
    n_classes, n_heads, n_prefix : int
        As for :class:`AttentiveProbe`.
    epochs, batch_size : int
        Passes over the data (``>= 0``) and minibatch size (``>= 1``); each epoch takes
        ``max(1, n // batch_size)`` steps (an incomplete last batch is dropped).
    lr, weight_decay : float
        AdamW's peak learning rate (``> 0``) and decoupled weight decay (``>= 0``).
    seed : int
        Seeds the initialisation and the shuffling.

    Returns
    -------
    probe : AttentiveProbe
        In evaluation mode.
    transform : callable
        ``tokens (m, T, d) -> float32 tensor``: the training standardisation, for new tokens.

    Raises
    ------
    ValueError
        ``train_tokens`` not 3-D, empty, with NaN/inf, or with ``T <= n_prefix``; labels of
        another length or outside ``0 .. n_classes - 1``; any setting out of range.
    """
    arr = np.asarray(train_tokens)
    if arr.ndim != 3:
        raise ValueError(f"train_tokens must have shape (n, T, d), got shape {arr.shape}")
    n, T, d = arr.shape
    flat = as_float_array(arr.reshape(n, T * d), "train_tokens", ndim=2)
    arr = flat.reshape(n, T, d).astype(np.float32)
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    y = as_labels(train_y, "train_y", n=n, n_classes=n_classes)
    n_heads = check_int(n_heads, "n_heads", minimum=1)
    n_prefix = check_int(n_prefix, "n_prefix", minimum=0)
    if n_prefix >= T:
        raise ValueError(f"n_prefix={n_prefix} would drop all T={T} tokens of train_tokens")
    epochs = check_int(epochs, "epochs", minimum=0)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    lr = check_positive(lr, "lr")
    weight_decay = check_positive(weight_decay, "weight_decay", allow_zero=True)
    seed = check_int(seed, "seed", minimum=0)

    mu = arr.mean(axis=(0, 1), keepdims=True)
    sd = arr.std(axis=(0, 1), keepdims=True) + 1e-6

    def transform(tokens):
        t = np.asarray(tokens, dtype=np.float32)
        if t.ndim != 3 or t.shape[2] != d:
            raise ValueError(f"tokens must have shape (m, T, {d}), got {t.shape}")
        return torch.from_numpy(((t - mu) / sd).astype(np.float32))

    x = transform(arr)
    yt = torch.as_tensor(y.astype(np.int64))
    torch.manual_seed(seed)
    probe = AttentiveProbe(d, n_classes, n_heads, n_prefix)
    opt = torch.optim.AdamW(probe.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    per_epoch = max(1, n // batch_size)
    steps, step = epochs * per_epoch, 0
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for b in range(per_epoch):
            idx = order[b * batch_size : (b + 1) * batch_size]
            for group in opt.param_groups:
                group["lr"] = lr * cosine_factor(step, steps)
            loss = F.cross_entropy(probe(x[idx])[0], yt[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
    return probe.eval(), transform


@torch.no_grad()
def attentive_predict(probe, tokens, transform=None, batch_size=1024):
    """Arg-max class of a trained :class:`AttentiveProbe` for every image.

    Parameters
    ----------
    probe : AttentiveProbe
    tokens : array_like or tensor of shape (m, T, d)
    transform : callable, optional
        The ``transform`` returned by :func:`train_attentive_probe` (default: none, the
        tokens are used as given).
    batch_size : int, default 1024

    Returns
    -------
    numpy.ndarray of int64, shape (m,)
    """
    if not isinstance(probe, AttentiveProbe):
        raise ValueError(f"probe must be an AttentiveProbe, got {type(probe).__name__}")
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    x = (
        transform(tokens)
        if transform is not None
        else torch.as_tensor(np.asarray(tokens, dtype=np.float32))
    )
    if x.ndim != 3 or x.shape[0] == 0:
        raise ValueError(f"tokens must have shape (m >= 1, T, d), got {tuple(x.shape)}")
    out = [probe(x[i : i + batch_size])[0].argmax(dim=1) for i in range(0, x.shape[0], batch_size)]
    return torch.cat(out).numpy().astype(np.int64)
