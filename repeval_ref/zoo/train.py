"""The training loop shared by every objective of the zoo, deterministic on the CPU.

Book: the Performance appendix (the zoo). Each objective module supplies
``make_heads(encoder, cfg)`` and ``training_loss(encoder, heads, x, y, generator, cfg,
state)``, optionally ``init_state``, ``after_step`` (DINO's teacher update),
``export`` (which module is shipped) and ``SHIPPED_HEADS`` (heads saved beside it). This loop owns the rest: seeding, one thread,
deterministic algorithms, the data order, AdamW with a linear warm-up and cosine
decay, the loss curve and the checkpoints at fixed shares of the steps.
"""
from __future__ import annotations

import copy
import importlib
import time

import numpy as np
import torch

from ..torch.schedule import cosine_factor
from .inputs import to_tensor
from .registry import CHECKPOINT_FRACTIONS, ENCODERS, build_encoder

__all__ = ["train_encoder", "deterministic_torch", "checkpoint_name"]


def deterministic_torch():
    """One intra-op thread and deterministic kernels (call before training or evaluating).

    The BLAS and OpenMP pools of NumPy and scikit-learn are also limited to one thread
    (:mod:`threadpoolctl`): on a machine whose cores are busy with other jobs, their
    spinning worker threads made one logistic-regression probe more than ten times slower.
    """
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    threadpool_limits(1)


def checkpoint_name(epoch):
    """``"epoch2"``, ``"epoch0.5"``: the name of the checkpoint after ``epoch`` epochs."""
    return f"epoch{epoch:g}"


def train_encoder(name, images, labels, *, epochs=None, n_images=None, log=None):
    """Train the zoo encoder ``name`` from its seeded initialisation.

    Parameters
    ----------
    name : str
        A key of :data:`~repeval_ref.zoo.registry.ENCODERS`.
    images : numpy.ndarray of uint8, shape (n, 28, 28)
    labels : numpy.ndarray of int64, shape (n,)
    epochs : int, optional
        Override the registered number of epochs (tests use 1).
    n_images : int, optional
        Train on the first ``n_images`` of a seeded permutation (default: the
        registered ``train_images``, capped at ``n``).
    log : callable, optional
        Called with one line of text per epoch.

    Returns
    -------
    dict
        ``checkpoints``: list of ``(name, epoch, step, state_dict)``; ``heads``: per
        checkpoint name, the state dicts of the heads the objective ships
        (``SHIPPED_HEADS``, e.g. the collapsed model's projector); ``curve``: mean
        loss per epoch; ``seconds``: wall time of the training; ``steps``; ``subset``:
        the training indices used (numpy array); ``config``.
    """
    if name not in ENCODERS:
        raise ValueError(f"unknown zoo encoder {name!r}; known: {sorted(ENCODERS)}")
    cfg = copy.deepcopy(ENCODERS[name])
    if epochs is not None:
        cfg["epochs"] = int(epochs)
    deterministic_torch()
    seed = cfg["seed"]
    n = images.shape[0]
    n_use = min(n, int(n_images if n_images is not None else cfg["train_images"]))
    subset = np.sort(np.random.default_rng(seed).permutation(n)[:n_use])
    x_all = to_tensor(images[subset])
    y_all = torch.from_numpy(np.asarray(labels, dtype=np.int64)[subset])
    encoder = build_encoder(cfg["arch"], seed)
    objective = importlib.import_module(f".{cfg['objective']}", __package__)
    export = getattr(objective, "export", lambda enc, heads, state: enc)
    if cfg["epochs"] == 0:
        state = encoder.state_dict()
        return {"checkpoints": [("init", 0, 0, {k: v.clone() for k, v in state.items()})], "curve": [],
                "seconds": 0.0, "steps": 0, "subset": subset, "config": cfg}
    torch.manual_seed(seed + 1)
    heads = torch.nn.ModuleDict(objective.make_heads(encoder, cfg))
    state = objective.init_state(encoder, heads, cfg) if hasattr(objective, "init_state") else {}
    params = list(encoder.parameters()) + list(heads.parameters())
    opt = torch.optim.AdamW(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    gen = torch.Generator().manual_seed(seed + 2)
    bs = cfg["batch_size"]
    steps_per_epoch = n_use // bs  # the last incomplete batch is dropped
    if steps_per_epoch < 1:
        raise ValueError(f"n_images={n_use} is smaller than one batch of {bs}")
    total = steps_per_epoch * cfg["epochs"]
    marks = {max(1, int(round(f * total))): f for f in CHECKPOINT_FRACTIONS}
    warmup = max(1, int(round(cfg["warmup"] * total)))  # cfg["warmup"] is a share of the steps
    checkpoints, curve, step, shipped = [], [], 0, {}
    encoder.train()
    heads.train()
    t0 = time.perf_counter()
    for epoch in range(cfg["epochs"]):
        order = torch.randperm(n_use, generator=gen)
        losses = []
        for b in range(steps_per_epoch):
            idx = order[b * bs:(b + 1) * bs]
            for group in opt.param_groups:
                group["lr"] = cfg["lr"] * cosine_factor(step, total, warmup)
            loss = objective.training_loss(encoder, heads, x_all[idx], y_all[idx], gen, cfg, state)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if hasattr(objective, "after_step"):
                objective.after_step(encoder, heads, state, cfg, step / total)
            losses.append(float(loss.detach()))
            if step in marks:
                ep = cfg["epochs"] * marks[step]
                sd = export(encoder, heads, state).state_dict()
                checkpoints.append((checkpoint_name(ep), ep, step, {k: v.detach().clone() for k, v in sd.items()}))
                shipped[checkpoint_name(ep)] = {h: {k: v.detach().clone() for k, v in heads[h].state_dict().items()}
                                                for h in getattr(objective, "SHIPPED_HEADS", ())}
        curve.append(float(np.mean(losses)))
        if log is not None:
            log(f"{name} epoch {epoch + 1}/{cfg['epochs']} loss {curve[-1]:.4f} "
                f"({time.perf_counter() - t0:.0f} s)")
    seconds = time.perf_counter() - t0
    return {"checkpoints": checkpoints, "curve": curve, "seconds": seconds, "steps": total,
            "subset": subset, "config": cfg, "heads": shipped}
