"""Trainable read-outs for the evaluation table: an attentive probe, fine-tuning and LP-FT.

Book: the Performance appendix (the zoo's evaluation table); seed 000 ("Attentive
probe": one learned query cross-attends to the frozen patch tokens; LP-FT, Kumar et
al. 2022: fitting the linear head first and then fine-tuning everything keeps
out-of-distribution accuracy that fine-tuning from a random head loses).

* :class:`AttentiveProbe` computes exactly the forward pass of
  :func:`repeval_ref.attentive_probe` (learned query ``q``, key/value/output maps,
  classifier ``W_cls``, no biases) with trainable torch parameters;
  :func:`train_attentive_probe` fits it with AdamW on frozen tokens.
* :func:`finetune` trains a copy of an encoder and a linear head end to end, either
  from a random head (fine-tuning) or from a head first fitted on the frozen features
  by :func:`linear_head` (LP-FT), and returns the trained model as a function.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["AttentiveProbe", "train_attentive_probe", "predict", "finetune", "predict_images"]


class AttentiveProbe(nn.Module):
    """Multi-head attentive probe with one learned query (the forward of :func:`repeval_ref.attentive_probe`).

    Parameters
    ----------
    dim : int
        Token width ``d``.
    n_classes : int
    n_heads : int
        Must divide ``dim``.
    n_prefix : int
        Leading tokens (class token) left out of the attention.
    """

    def __init__(self, dim, n_classes, n_heads=4, n_prefix=1):
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"n_heads={n_heads} does not divide dim={dim}")
        self.n_heads, self.n_prefix = int(n_heads), int(n_prefix)
        self.q = nn.Parameter(0.02 * torch.randn(dim))
        self.Wk = nn.Parameter(torch.randn(dim, dim) / math.sqrt(dim))
        self.Wv = nn.Parameter(torch.randn(dim, dim) / math.sqrt(dim))
        self.Wo = nn.Parameter(torch.randn(dim, dim) / math.sqrt(dim))
        self.W_cls = nn.Parameter(torch.zeros(dim, n_classes))

    def forward(self, H):
        """Logits (B, K) and attention weights (B, n_heads, T - n_prefix) for tokens H (B, T, d)."""
        if H.ndim != 3 or H.shape[2] != self.q.shape[0] or H.shape[1] <= self.n_prefix:
            raise ValueError(f"H must have shape (B, T > {self.n_prefix}, {self.q.shape[0]}), got {tuple(H.shape)}")
        B, T, d = H.shape
        h, dk = self.n_heads, d // self.n_heads
        tokens = H[:, self.n_prefix:]
        keys = (tokens @ self.Wk).reshape(B, -1, h, dk)
        values = (tokens @ self.Wv).reshape(B, -1, h, dk)
        scores = torch.einsum("bthk,hk->bht", keys, self.q.reshape(h, dk)) / math.sqrt(dk)
        A = torch.softmax(scores, dim=-1)
        o = torch.einsum("bht,bthk->bhk", A, values).reshape(B, d)
        return o @ self.Wo @ self.W_cls, A


def _standardise(train, *others):
    mu = train.mean(axis=(0, 1) if train.ndim == 3 else 0, keepdims=True)
    sd = train.std(axis=(0, 1) if train.ndim == 3 else 0, keepdims=True) + 1e-6
    return [torch.from_numpy(((a - mu) / sd).astype(np.float32)) for a in (train, *others)]


def train_attentive_probe(train_tokens, train_y, *, n_classes=10, n_heads=4, n_prefix=1, epochs=20, lr=3e-3,
                          weight_decay=1e-4, batch_size=256, seed=0):
    """Fit an :class:`AttentiveProbe` on frozen tokens (standardised per channel).

    Parameters
    ----------
    train_tokens : numpy.ndarray of shape (n, T, d)
    train_y : numpy.ndarray of int, shape (n,)

    Returns
    -------
    probe : AttentiveProbe
    transform : callable
        Applies the training tokens' standardisation to other tokens (numpy -> tensor).
    """
    train_tokens = np.asarray(train_tokens, dtype=np.float32)
    if train_tokens.ndim != 3:
        raise ValueError(f"train_tokens must have shape (n, T, d), got {train_tokens.shape}")
    mu = train_tokens.mean(axis=(0, 1), keepdims=True)
    sd = train_tokens.std(axis=(0, 1), keepdims=True) + 1e-6

    def transform(t):
        return torch.from_numpy(((np.asarray(t, dtype=np.float32) - mu) / sd).astype(np.float32))

    x = transform(train_tokens)
    y = torch.as_tensor(np.asarray(train_y, dtype=np.int64))
    torch.manual_seed(seed)
    probe = AttentiveProbe(x.shape[2], n_classes, n_heads, n_prefix)
    _fit(lambda xb: probe(xb)[0], probe.parameters(), x, y, epochs, lr, weight_decay, batch_size, seed)
    return probe.eval(), transform


def _fit(forward, params, x, y, epochs, lr, weight_decay, batch_size, seed, modules=()):
    params = [p for p in params if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    n = x.shape[0]
    steps = epochs * max(1, n // batch_size)
    step = 0
    for m in modules:
        m.train()
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for b in range(max(1, n // batch_size)):
            idx = order[b * batch_size:(b + 1) * batch_size]
            for g in opt.param_groups:
                g["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
            loss = F.cross_entropy(forward(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
    for m in modules:
        m.eval()


@torch.no_grad()
def predict(forward, x, batch_size=1024):
    """Arg-max predictions of ``forward`` over ``x`` in batches (numpy int64)."""
    out = [forward(x[i:i + batch_size]).argmax(dim=1) for i in range(0, x.shape[0], batch_size)]
    return torch.cat(out).numpy().astype(np.int64)


def finetune(encoder, x, y, *, head_init=None, n_classes=10, epochs=3, lr=5e-4, weight_decay=0.05,
             batch_size=256, seed=0):
    """Train a copy of ``encoder`` and a linear head end to end on images ``x`` (n, c, H, W).

    Parameters
    ----------
    encoder : torch.nn.Module with ``out_dim``
        Frozen or not; a trainable deep copy is made.
    head_init : (weight, bias) tensors, optional
        Start of the linear head (LP-FT: a probe fitted on the frozen features);
        default PyTorch's random initialisation of ``nn.Linear``, seeded (plain
        fine-tuning, as in Kumar et al.).

    Returns
    -------
    callable
        ``images -> logits`` of the fine-tuned model (evaluation mode).
    """
    model = copy.deepcopy(encoder)
    for p in model.parameters():
        p.requires_grad_(True)
    torch.manual_seed(seed)
    head = nn.Linear(model.out_dim, n_classes)  # fine-tuning: PyTorch's default random head
    if head_init is not None:
        with torch.no_grad():
            head.weight.copy_(head_init[0])
            head.bias.copy_(head_init[1])
    yt = torch.as_tensor(np.asarray(y, dtype=np.int64))
    _fit(lambda xb: head(model(xb)), list(model.parameters()) + list(head.parameters()), x, yt, epochs, lr,
         weight_decay, batch_size, seed, modules=(model,))
    return lambda xb: head(model(xb))


def linear_head(encoder, x, y, *, n_classes=10, epochs=10, lr=1e-2, batch_size=256, seed=0):
    """The linear head of LP-FT: trained on the frozen encoder's features, returned as (weight, bias)."""
    with torch.no_grad():
        h = torch.cat([encoder(x[i:i + 1024]) for i in range(0, x.shape[0], 1024)])
    head = nn.Linear(h.shape[1], n_classes)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
    yt = torch.as_tensor(np.asarray(y, dtype=np.int64))
    _fit(head, head.parameters(), h, yt, epochs, lr, 0.0, batch_size, seed)
    return head.weight.detach().clone(), head.bias.detach().clone()
