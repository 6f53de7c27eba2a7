"""Self-distillation with a momentum teacher (DINO-style): centring and sharpening.

Book: the Performance appendix (the zoo); seed 000 (self-distilled encoders suit a
k-NN read-out).

A student (encoder + head) and a teacher of the same shape see two augmented views.
The teacher is not trained by gradients: after every step its weights become
``m * teacher + (1 - m) * student`` (momentum ``m``, raised from ``momentum`` to 1
along a cosine over training). With student logits ``s`` and teacher logits ``t``
(b, K), a centre ``c`` (K,) and temperatures ``tau_s > tau_t``::

    P_t = softmax((t - c) / tau_t)      (centring and sharpening: no gradient)
    L   = -(1/b) sum_i sum_k P_t[i, k] log softmax(s / tau_s)[i, k],

averaged over the two cross pairs (teacher on view 1, student on view 2, and the
reverse). The centre follows the teacher's mean logit,
``c <- r c + (1 - r) mean_i t_i``. Centring keeps one prototype from winning every
image; sharpening keeps the target from becoming uniform; together they stop the
collapse a plain Siamese objective suffers. The shipped encoder is the teacher's.
Local crops (multi-crop) are left out at this scale.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.nn import functional as F

from ._heads import mlp
from .augment import two_views

__all__ = ["dino_loss", "make_heads", "init_state", "training_loss", "after_step", "export"]


def dino_loss(student_logits, teacher_logits, center, student_temperature, teacher_temperature):
    """Cross-entropy of the centred, sharpened teacher distribution and the student's.

    Parameters
    ----------
    student_logits, teacher_logits : torch.Tensor of shape (b, K)
    center : torch.Tensor of shape (K,)
    student_temperature, teacher_temperature : float
        Both ``> 0``.

    Returns
    -------
    torch.Tensor, scalar (no gradient flows into the teacher's logits)
    """
    if student_logits.ndim != 2 or student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"student_logits and teacher_logits must have the same shape (b, K), got "
            f"{tuple(student_logits.shape)} and {tuple(teacher_logits.shape)}"
        )
    if center.shape != (student_logits.shape[1],):
        raise ValueError(
            f"center must have shape ({student_logits.shape[1]},), got {tuple(center.shape)}"
        )
    if not (student_temperature > 0 and teacher_temperature > 0):
        raise ValueError("student_temperature and teacher_temperature must be > 0")
    target = F.softmax((teacher_logits.detach() - center) / teacher_temperature, dim=1)
    log_p = F.log_softmax(student_logits / student_temperature, dim=1)
    return -(target * log_p).sum(dim=1).mean()


def make_heads(encoder, cfg):
    return {
        "head": nn.Sequential(
            mlp(encoder.out_dim, cfg["head_hidden"], cfg["head_bottleneck"]),
            _Normalise(),
            nn.Linear(cfg["head_bottleneck"], cfg["prototypes"], bias=False),
        )
    }


class _Normalise(nn.Module):
    def forward(self, x):
        return F.normalize(x, dim=1)


def init_state(encoder, heads, cfg):
    teacher = nn.Sequential(copy.deepcopy(encoder), copy.deepcopy(heads["head"]))
    for p in teacher.parameters():
        p.requires_grad_(False)
    return {
        "teacher": teacher,
        "center": torch.zeros(cfg["prototypes"], device=next(encoder.parameters()).device),
    }


def training_loss(encoder, heads, x, y, generator, cfg, state):
    b = x.shape[0]
    views = two_views(x, generator, tuple(cfg["crop_scale"]))
    s = heads["head"](encoder(views))
    with torch.no_grad():
        t = state["teacher"](views)
    ts, tt, c = cfg["student_temperature"], cfg["teacher_temperature"], state["center"]
    loss = 0.5 * (dino_loss(s[b:], t[:b], c, ts, tt) + dino_loss(s[:b], t[b:], c, ts, tt))
    r = cfg["center_momentum"]
    state["center"] = r * c + (1 - r) * t.mean(dim=0)
    return loss


def after_step(encoder, heads, state, cfg, progress):
    """EMA update of the teacher; ``progress`` in [0, 1] raises the momentum to 1 by a cosine."""
    m = 1 - (1 - cfg["momentum"]) * (math.cos(math.pi * progress) + 1) / 2
    student = list(encoder.parameters()) + list(heads["head"].parameters())
    with torch.no_grad():
        for pt, ps in zip(state["teacher"].parameters(), student):
            pt.mul_(m).add_(ps.detach(), alpha=1 - m)


def export(encoder, heads, state):
    """The teacher's encoder is the one evaluated and shipped (as in DINO)."""
    return state["teacher"][0]
