"""The training loop shared by every objective of the zoo, deterministic on the CPU.

Book: the Performance appendix (the zoo). Each objective module supplies
``make_heads(encoder, cfg)`` and ``training_loss(encoder, heads, x, y, generator, cfg,
state)``, optionally ``init_state``, ``after_step`` (DINO's teacher update),
``export`` (which module is shipped) and ``SHIPPED_HEADS`` (heads saved beside it). This loop owns
the rest: seeding, one thread, deterministic algorithms, the data order, AdamW with a linear warm-up
and cosine decay, the loss curve and the checkpoints at fixed shares of the steps.

Devices: the loop runs on the CPU unless a ``device`` is named (``"cuda"`` on a machine
with a GPU). The images, the data order and every augmentation draw stay on the CPU's
seeded generators and only the batches move, so a GPU run sees the same data in the same
order; its arithmetic differs, so it is not bit-identical to the CPU run, and the result
records the device it ran on. Checkpoints come back to the CPU.

Resumable runs: given a
``state_file``, the loop writes its whole state after every epoch (model, heads, the
objective's state such as DINO's teacher and centre, the optimiser, the step, the
generator states, the curve and the checkpoints so far) and, when the file exists,
resumes from it; a run stopped after ``k`` epochs and resumed ends bit-identical to an
uninterrupted one.
"""

from __future__ import annotations

import copy
import importlib
import os
import time

import numpy as np
import torch

from ..torch.schedule import cosine_factor
from .inputs import to_tensor
from .registry import ARCHITECTURES, CHECKPOINT_FRACTIONS, ENCODERS, build_encoder

__all__ = [
    "train_encoder",
    "encoder_config",
    "deterministic_torch",
    "checkpoint_name",
    "resolve_device",
    "check_known_settings",
]


def check_known_settings(changes, config, name, owner):
    """Raise ValueError unless every key of ``changes`` is a setting of ``config``.

    Parameters
    ----------
    changes, config : dict
    name : str
        The argument holding ``changes``, as the message names it.
    owner : str
        What ``config`` configures, as the message names it (``"'dino_vit'"``).
    """
    unknown = sorted(set(changes) - set(config))
    if unknown:
        raise ValueError(
            f"{name} has settings {unknown} that {owner} does not have; known: {sorted(config)}"
        )


def deterministic_torch():
    """One intra-op thread and deterministic kernels (call before training or evaluating).

    The BLAS and OpenMP pools of NumPy and scikit-learn are also limited to one thread
    (:mod:`threadpoolctl`): where the cores are shared with other jobs, their spinning
    worker threads slow small fits such as a logistic-regression probe down many times.
    """
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    threadpool_limits(1)


def checkpoint_name(epoch):
    """``"epoch2"``, ``"epoch0.5"``: the name of the checkpoint after ``epoch`` epochs."""
    return f"epoch{epoch:g}"


def encoder_config(name, *, epochs=None, overrides=None):
    """The training configuration of zoo encoder ``name``, with optional changes.

    Parameters
    ----------
    name : str
        A key of :data:`~repeval_ref.zoo.registry.ENCODERS`.
    epochs : int, optional
        Replaces the registered number of epochs (>= 0).
    overrides : dict, optional
        Replaces registered settings (e.g. ``{"arch": "resnet", "lr": 3e-3}``); every
        key must already be a setting of ``name``, and ``"arch"`` a key of
        :data:`~repeval_ref.zoo.registry.ARCHITECTURES`.

    Returns
    -------
    dict
        A deep copy of the registered configuration with the changes applied.
    """
    if not isinstance(name, str) or name not in ENCODERS:
        raise ValueError(f"unknown zoo encoder {name!r}; known: {sorted(ENCODERS)}")
    cfg = copy.deepcopy(ENCODERS[name])
    if overrides is not None:
        if not isinstance(overrides, dict):
            raise ValueError(
                f"overrides must be a dict of settings, got {type(overrides).__name__}"
            )
        check_known_settings(overrides, cfg, "overrides", repr(name))
        cfg.update(copy.deepcopy(overrides))
    if epochs is not None:
        if isinstance(epochs, bool) or int(epochs) != epochs or epochs < 0:
            raise ValueError(f"epochs must be an integer >= 0, got {epochs!r}")
        cfg["epochs"] = int(epochs)
    if cfg["arch"] not in ARCHITECTURES:
        raise ValueError(
            f"overrides names an unknown architecture {cfg['arch']!r}; known: "
            f"{sorted(ARCHITECTURES)}"
        )
    if cfg["objective"] == "mae" and ARCHITECTURES[cfg["arch"]]["kind"] != "vit":
        raise ValueError(f"overrides: the mae objective needs a ViT, not {cfg['arch']!r}")
    return cfg


def _objective_state_dict(state):
    """The objective's state (modules and tensors, e.g. DINO's teacher and centre) as tensors."""
    out = {}
    for key, value in state.items():
        if isinstance(value, torch.nn.Module):
            out[key] = {"module": {k: v.detach().clone() for k, v in value.state_dict().items()}}
        elif isinstance(value, torch.Tensor):
            out[key] = {"tensor": value.detach().clone()}
        else:
            raise ValueError(
                f"state[{key!r}] is a {type(value).__name__}; a resumable objective keeps "
                f"only modules and tensors in its state"
            )
    return out


def _load_objective_state(state, saved):
    """Put the saved objective state back into ``state`` (in place)."""
    if set(saved) != set(state):
        raise ValueError(
            f"state_file holds objective state {sorted(saved)}, this objective has {sorted(state)}"
        )
    for key, value in saved.items():
        if "module" in value:
            state[key].load_state_dict(value["module"])
        else:
            state[key] = value["tensor"].to(state[key].device, copy=True)


def _save_run(path, cfg, subset, encoder, heads, state, opt, gen, run):
    """Write the whole training state to ``path`` atomically (a temporary file, then a rename)."""
    payload = {
        "format": 1,
        "config": cfg,
        "subset": torch.from_numpy(np.asarray(subset, dtype=np.int64)),
        "encoder": encoder.state_dict(),
        "heads": heads.state_dict(),
        "objective_state": _objective_state_dict(state),
        "optimizer": opt.state_dict(),
        "generator": gen.get_state(),
        "torch_rng": torch.get_rng_state(),
        "run": run,
    }
    tmp = f"{path}.tmp{os.getpid()}"
    torch.save(payload, tmp)
    os.replace(tmp, path)


def _load_run(path, cfg, subset, encoder, heads, state, opt, gen):
    """Restore a state written by :func:`_save_run` into the freshly built objects; return
    ``run``."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file
        raise ValueError(f"state_file {path!r} cannot be read as a training state: {exc}") from exc
    if not isinstance(payload, dict) or payload.get("format") != 1:
        raise ValueError(f"state_file {path!r} is not a training state of this loop")
    if payload["config"] != cfg:
        raise ValueError(
            f"state_file {path!r} was written for another configuration: {payload['config']}"
        )
    if not np.array_equal(payload["subset"].numpy(), subset):
        raise ValueError(f"state_file {path!r} was written for other training images")
    encoder.load_state_dict(payload["encoder"])
    heads.load_state_dict(payload["heads"])
    _load_objective_state(state, payload["objective_state"])
    opt.load_state_dict(payload["optimizer"])
    gen.set_state(payload["generator"])
    torch.set_rng_state(payload["torch_rng"])
    return payload["run"]


def resolve_device(device):
    """``device`` (``None``, a string such as ``"cpu"`` or ``"cuda:0"``, or a
    :class:`torch.device`) as a :class:`torch.device` that this machine has.

    Raises
    ------
    ValueError
        ``device`` names no torch device, or a CUDA device that this machine lacks.
    """
    if device is None:
        return torch.device("cpu")
    if not isinstance(device, (str, torch.device)):
        raise ValueError(
            f"device must be a string such as 'cpu' or 'cuda', got {type(device).__name__}"
        )
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise ValueError(f"device {device!r} is not a torch device: {exc}") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {device!r}: this machine has no CUDA device (torch {torch.__version__})"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    elif dev.type != "cpu":
        raise ValueError(f"device {device!r}: the zoo trains on 'cpu' or 'cuda', not {dev.type!r}")
    return dev


def _check_stops(stop_after, time_limit, state_file):
    if stop_after is not None and (
        isinstance(stop_after, bool) or int(stop_after) != stop_after or stop_after < 1
    ):
        raise ValueError(f"stop_after must be an integer >= 1, got {stop_after!r}")
    if time_limit is not None and not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"time_limit must be a number of seconds > 0, got {time_limit!r}")
    if state_file is not None and not isinstance(state_file, (str, os.PathLike)):
        raise ValueError(f"state_file must be a path, got {type(state_file).__name__}")


def train_encoder(
    name,
    images,
    labels,
    *,
    epochs=None,
    n_images=None,
    log=None,
    overrides=None,
    state_file=None,
    stop_after=None,
    time_limit=None,
    device=None,
):
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
    overrides : dict, optional
        Registered settings to replace (:func:`encoder_config`), e.g. another
        architecture or learning rate for a recipe search.
    state_file : str or os.PathLike, optional
        Where the whole training state is written after every epoch. If the file
        exists, training resumes from it (it must have been written for the same
        configuration and images); the result is bit-identical to an uninterrupted run.
    stop_after : int, optional
        Stop once this many epochs (counted from the start of training, not of this
        call) are done, leaving the rest to a later call with the same ``state_file``.
    time_limit : float, optional
        Stop at the end of the first epoch after which this call has run ``time_limit``
        seconds.
    device : str or torch.device, optional
        Where the model trains (default the CPU; ``"cuda"`` on a machine with a GPU,
        see :func:`resolve_device`). Data, order and augmentation draws do not depend on it.

    Returns
    -------
    dict
        ``checkpoints``: list of ``(name, epoch, step, state_dict)``; ``heads``: per
        checkpoint name, the state dicts of the heads the objective ships
        (``SHIPPED_HEADS``, e.g. the collapsed model's projector); ``curve``: mean
        loss per epoch; ``seconds``: wall time of the training (summed over resumed
        calls); ``steps``; ``subset``: the training indices used (numpy array);
        ``config``; ``epochs_done`` and ``complete`` (False when stopped early); ``device``
        (where it trained, e.g. ``"cpu"``). Checkpoints and heads are on the CPU.
    """
    cfg = encoder_config(name, epochs=epochs, overrides=overrides)
    _check_stops(stop_after, time_limit, state_file)
    dev = resolve_device(device)
    deterministic_torch()
    if (
        dev.type == "cuda"
    ):  # several CUDA kernels (grid_sample's backward) have no deterministic form
        torch.use_deterministic_algorithms(False)
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
        return {
            "checkpoints": [("init", 0, 0, {k: v.clone() for k, v in state.items()})],
            "curve": [],
            "seconds": 0.0,
            "steps": 0,
            "subset": subset,
            "config": cfg,
            "epochs_done": 0,
            "complete": True,
            "device": "cpu",
        }
    torch.manual_seed(seed + 1)
    heads = torch.nn.ModuleDict(objective.make_heads(encoder, cfg))
    encoder.to(dev)
    heads.to(dev)
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
    run = {"epoch": 0, "step": 0, "curve": [], "checkpoints": [], "shipped": {}, "seconds": 0.0}
    if state_file is not None and os.path.exists(state_file):
        run = _load_run(state_file, cfg, subset, encoder, heads, state, opt, gen)
    step, checkpoints, curve, shipped = (
        run["step"],
        run["checkpoints"],
        run["curve"],
        run["shipped"],
    )
    seconds_before = run["seconds"]  # spent by earlier calls on this state file
    encoder.train()
    heads.train()
    t0 = time.perf_counter()
    for epoch in range(run["epoch"], cfg["epochs"]):
        order = torch.randperm(n_use, generator=gen)
        losses = []
        for b in range(steps_per_epoch):
            idx = order[b * bs : (b + 1) * bs]
            for group in opt.param_groups:
                group["lr"] = cfg["lr"] * cosine_factor(step, total, warmup)
            loss = objective.training_loss(
                encoder, heads, x_all[idx].to(dev), y_all[idx].to(dev), gen, cfg, state
            )
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
                checkpoints.append(
                    (
                        checkpoint_name(ep),
                        ep,
                        step,
                        {k: v.detach().to("cpu", copy=True) for k, v in sd.items()},
                    )
                )
                shipped[checkpoint_name(ep)] = {
                    h: {
                        k: v.detach().to("cpu", copy=True) for k, v in heads[h].state_dict().items()
                    }
                    for h in getattr(objective, "SHIPPED_HEADS", ())
                }
        curve.append(float(np.mean(losses)))
        elapsed = time.perf_counter() - t0
        run.update(epoch=epoch + 1, step=step, seconds=seconds_before + elapsed)
        if log is not None:
            log(f"{name} epoch {epoch + 1}/{cfg['epochs']} loss {curve[-1]:.4f} ({elapsed:.0f} s)")
        if state_file is not None:
            _save_run(state_file, cfg, subset, encoder, heads, state, opt, gen, run)
        if (stop_after is not None and epoch + 1 >= stop_after) or (
            time_limit is not None and elapsed >= time_limit
        ):
            break
    return {
        "checkpoints": checkpoints,
        "curve": curve,
        "seconds": run["seconds"],
        "steps": total,
        "subset": subset,
        "config": cfg,
        "heads": shipped,
        "epochs_done": run["epoch"],
        "complete": run["epoch"] == cfg["epochs"],
        "device": str(dev),
    }
