"""Hidden checks of the exercise "Frozen means evaluation mode" (book/batchnorm.md).

Contract: ``frozen_features(encoder, batches)`` runs ``encoder`` in evaluation mode and
under ``torch.no_grad()`` over ``batches`` (input tensors, or ``(input, label)`` tuples),
returns the outputs concatenated in order as a detached CPU tensor of shape (n, d), and
afterwards restores every submodule's own ``training`` flag; the encoder's state
(running statistics included) is bit-for-bit unchanged.
Reference: :func:`repeval_ref.torch.freeze.frozen_features`.
"""

from __future__ import annotations

import copy

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import gate

EX = "frozen_features"


def _torch():
    import torch

    return torch


def _ref(encoder, batches):
    from repeval_ref.torch.freeze import frozen_features

    return frozen_features(encoder, batches)


def _encoder(rng, with_bn=True):
    torch = _torch()
    nn = torch.nn
    torch.manual_seed(int(rng.integers(0, 2**31 - 1)))
    layers = [nn.Linear(6, 8)]
    if with_bn:
        layers += [nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5)]
    else:
        layers += [nn.Tanh()]
    layers += [nn.Linear(8, 4)]
    enc = nn.Sequential(*layers)
    if with_bn:
        bn = enc[1]
        with torch.no_grad():  # statistics "from pretraining", far from the new data's
            bn.running_mean.copy_(torch.from_numpy(rng.normal(size=8) * 2.0).float())
            bn.running_var.copy_(torch.from_numpy(np.exp(rng.normal(size=8))).float())
            bn.num_batches_tracked.fill_(1000)
    return enc


def _batches(rng, sizes=(5, 3, 7)):
    torch = _torch()
    return [torch.from_numpy(rng.normal(loc=1.5, scale=3.0, size=(m, 6))).float() for m in sizes]


def _state(enc):
    return {k: v.detach().clone() for k, v in enc.state_dict().items()}


def _moved(enc, before):
    torch = _torch()
    return [k for k, v in enc.state_dict().items() if not torch.equal(v, before[k])]


def _flags(enc):
    return {name or "<encoder>": m.training for name, m in enc.named_modules()}


def _wrong_features(got, want):
    """``None`` if the student's features equal the reference's, else what differs."""
    torch = _torch()
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if not torch.allclose(got.detach().cpu().float(), want.float(), atol=1e-6):
        return "the features are not the encoder's evaluation-mode outputs"
    return None


def _features(fn, enc, batches):
    torch = _torch()
    out, _ = call_student(fn, enc, batches, what="frozen_features")
    if not isinstance(out, torch.Tensor):
        raise StudentError(
            f"frozen_features should return a torch.Tensor, got {type(out).__name__}"
        )
    return out


@register(
    f"{EX}/eval_mode",
    points=2,
    summary="BatchNorm running statistics do not move; eval-mode features",
)
def eval_mode(fn, rng):
    torch = _torch()
    enc = _encoder(rng)
    enc.train()  # as it comes out of pretraining
    batches = _batches(rng)
    want = _ref(copy.deepcopy(enc), [b.clone() for b in batches])
    before = _state(enc)
    got = _features(fn, enc, batches)
    moved = _moved(enc, before)
    if moved:
        shift = float((enc[1].running_mean - before["1.running_mean"]).abs().max())
        return [
            finding(
                "evaluation mode",
                False,
                2,
                f"your extraction changed the encoder's state ({', '.join(moved)}); "
                f"the BatchNorm running mean moved by up to {shift:.3g}. No gradient "
                "is needed for that: a forward pass in training mode updates running "
                "statistics. Call encoder.eval() before extracting.",
            )
        ]
    same = tuple(got.shape) == tuple(want.shape) and torch.allclose(
        got.detach().cpu().float(), want.float(), atol=1e-6
    )
    return [
        finding(
            "evaluation mode",
            same,
            2,
            "the features differ from evaluation-mode features (BatchNorm must use "
            "its stored statistics and dropout must be off): call encoder.eval() "
            "before the forward passes.",
        )
    ]


@register(
    f"{EX}/restores_flags", points=2, summary="every submodule's training flag restored afterwards"
)
def restores_flags(fn, rng):
    out = []
    for label, setup in (
        ("encoder in training mode", "train"),
        ("mixed per-module flags", "mixed"),
    ):
        enc = _encoder(rng)
        enc.train()
        if setup == "mixed":
            enc[1].eval()  # a frozen BatchNorm inside a training encoder
            enc[4].eval()
        before = _flags(enc)
        batches = _batches(rng, (4, 4))
        want = _ref(copy.deepcopy(enc), [b.clone() for b in batches])
        got = _features(fn, enc, batches)
        after = _flags(enc)
        wrong = [k for k in before if after.get(k) != before[k]]
        msg = (
            (
                f"with the {label}, {len(wrong)} module(s) came back with a different "
                f"training flag (e.g. {wrong[0] if wrong else ''}: was "
                f"{before[wrong[0]] if wrong else ''}). "
            )
            if wrong
            else ""
        )
        if wrong and all(after.values()):
            msg += (
                "Every module came back in training mode, so the modules that were "
                "deliberately in evaluation mode lost their flag: encoder.train() at the "
                "end (or restoring the top module's flag alone) is not enough. Record "
                "every submodule's own flag before encoder.eval() and set each back."
            )
        elif wrong:
            msg += (
                "Leaving the encoder in evaluation mode silently changes the caller's "
                "model: record every submodule's own flag before encoder.eval() and set "
                "each back afterwards."
            )
        out += gate(
            [finding(label, not wrong, 1, msg)],
            _wrong_features(got, want) and f"features: {_wrong_features(got, want)}",
        )
    return out


@register(
    f"{EX}/output",
    points=1,
    summary="(n, d) tensor in batch order, also for (input, label) batches",
)
def output(fn, rng):
    torch = _torch()
    enc = _encoder(rng, with_bn=False)
    xs = _batches(rng, (3, 6, 2))
    batches = [(x, torch.zeros(len(x), dtype=torch.long)) for x in xs]
    want = _ref(copy.deepcopy(enc), [(x.clone(), y) for x, y in batches])
    try:
        got = _features(fn, enc, batches)
    except StudentError as exc:
        # plain tensors work (the other checks pass them): the tuples are the trouble
        return [
            finding(
                "shape and order",
                False,
                1,
                f"with batches that are (input, label) tuples: {exc}. Such a batch "
                "is not a tensor: feed the encoder batch[0], the input only, and "
                "ignore the label.",
            )
        ]
    if tuple(got.shape) != tuple(want.shape):
        return [
            finding(
                "shape and order",
                False,
                1,
                f"the result has shape {tuple(got.shape)}, expected "
                f"{tuple(want.shape)}: concatenate the batch outputs along dim 0 "
                "(batches may be (input, label) tuples: use the input only).",
            )
        ]
    ok = torch.allclose(got.detach().cpu().float(), want.float(), atol=1e-6)
    return [
        finding(
            "shape and order",
            ok,
            1,
            "the features are not the encoder's outputs in the order of the batches.",
        )
    ]


@register(f"{EX}/no_grad", points=1, summary="no autograd graph, no gradients")
def no_grad(fn, rng):
    enc = _encoder(rng, with_bn=False)
    batches = _batches(rng, (4,))
    want = _ref(copy.deepcopy(enc), [b.clone() for b in batches])
    got = _features(fn, enc, batches)
    problems = []
    if got.requires_grad or got.grad_fn is not None:
        problems.append(
            "the returned tensor is still attached to an autograd graph: run "
            "the forward passes under torch.no_grad() (a graph per batch wastes "
            "memory on a real backbone)"
        )
    if any(p.grad is not None for p in enc.parameters()):
        problems.append("some parameters received gradients")
    wrong = _wrong_features(got, want)
    return gate(
        [finding("no gradients", not problems, 1, "; ".join(problems))],
        wrong and f"features: {wrong}",
    )
