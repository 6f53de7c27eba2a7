"""The cosine learning-rate schedule of every probe and encoder this package trains.

Book: chapter "Linear probes" (the probe's schedule), the attentive-probe chapter, and
the Performance appendix (the zoo's training). One formula, written once: the learning
rate of step ``s`` (counted from 0) out of ``T`` steps is ``lr * cosine_factor(s, T, w)``,

* without warm-up (``w = 0``): ``0.5 * (1 + cos(pi * min(s, T) / T))``, from 1 at the
  first step down to 0 at ``s = T`` (and 0 after it);
* with ``w >= 1`` warm-up steps: ``(s + 1) / w`` for ``s < w`` (a linear ramp whose
  last step reaches 1), then ``0.5 * (1 + cos(pi * (min(s, T) - w) / max(1, T - w)))``.

With ``w = 0`` the second line is the first, so the two are one formula. The
expressions are evaluated in exactly this order, so the factors are bit-for-bit those
the five training loops computed before they shared this function (checked in
``tests/test_torch_schedule.py``).
"""

from __future__ import annotations

import math

import torch

from .._validation import check_int

__all__ = ["cosine_factor", "cosine_schedule"]


def cosine_factor(step, total, warmup=0):
    """Multiplier of the peak learning rate at ``step`` of ``total``: linear warm-up, then cosine
    decay.

    Parameters
    ----------
    step : int
        Step index, >= 0 (the first step is 0). Steps past ``total`` get the final
        factor of the cosine (0).
    total : int
        Number of steps of the whole schedule, >= 1.
    warmup : int
        Warm-up steps, 0 <= warmup <= total: ``(step + 1) / warmup`` for
        ``step < warmup``. 0 (default): no warm-up, the cosine starts at 1.

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    ValueError
        If an argument is out of range (the message names it).
    """
    step = check_int(step, "step", minimum=0)
    total = check_int(total, "total", minimum=1)
    warmup = check_int(warmup, "warmup", minimum=0, maximum=total)
    t = min(step, total)
    if t < warmup:
        return (t + 1) / warmup
    return 0.5 * (1.0 + math.cos(math.pi * (t - warmup) / max(1, total - warmup)))


def cosine_schedule(optimizer, total, warmup=0):
    """A ``LambdaLR`` that multiplies each group's initial learning rate by :func:`cosine_factor`.

    Call ``scheduler.step()`` once per optimisation step (also for a skipped batch, so
    that the schedule runs over ``total`` steps whatever is skipped).

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
    total, warmup : int
        As in :func:`cosine_factor`.

    Returns
    -------
    torch.optim.lr_scheduler.LambdaLR
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(
            f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    total = check_int(total, "total", minimum=1)
    warmup = check_int(warmup, "warmup", minimum=0, maximum=total)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: cosine_factor(step, total, warmup)
    )
