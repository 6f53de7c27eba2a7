"""Train the zoo, write its weights and its manifest (``python -m repeval_ref.zoo train``).

Book: the Performance appendix (the zoo). The manifest
(``repeval_ref/zoo/weights/manifest.json``) records, per encoder: objective,
architecture, hyperparameters, the data (split, seed, subset size), the training time,
the loss per epoch, the torch version, and for each checkpoint its file, size and
SHA-256; :func:`record_evaluation` adds the 20-NN and linear-probe accuracies.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import time

import torch

from .registry import ARCHITECTURES

__all__ = [
    "WEIGHTS_DIR",
    "MANIFEST",
    "read_manifest",
    "write_manifest",
    "update_manifest",
    "train_and_save",
    "save_trained",
    "sha256_file",
]

WEIGHTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights")
MANIFEST = os.path.join(WEIGHTS_DIR, "manifest.json")


def sha256_file(path):
    """SHA-256 of a file's bytes, as hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(path=None):
    """The manifest as a dict (empty encoders dict if the file does not exist yet)."""
    path = path or MANIFEST
    if not os.path.isfile(path):
        return {"format": 1, "encoders": {}}
    with open(path) as f:
        return json.load(f)


def write_manifest(manifest, path=None):
    path = path or MANIFEST
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def _state_bytes(state):
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def train_and_save(
    name, *, weights_dir=None, manifest_path=None, log=print, device=None, epochs_scale=1
):
    """Train ``name`` on Fashion-MNIST's training split, save its checkpoints, update the manifest.

    ``device`` is where it trains (default the CPU, see
    :func:`repeval_ref.zoo.train.resolve_device`); ``epochs_scale`` multiplies the
    registered number of epochs (a positive integer; 1 keeps the recipe as shipped, a
    larger value is the longer training of a GPU run). Returns the manifest entry of
    ``name`` (without the evaluation, which :func:`repeval_ref.zoo.evaluate.record_evaluation`
    adds).
    """
    from ..datasets import fashion_mnist
    from .train import encoder_config, train_encoder

    if isinstance(epochs_scale, bool) or not isinstance(epochs_scale, int) or epochs_scale < 1:
        raise ValueError(f"epochs_scale must be an integer >= 1, got {epochs_scale!r}")
    images, labels = fashion_mnist("train")
    epochs = encoder_config(name)["epochs"] * epochs_scale
    result = train_encoder(name, images, labels, log=log, device=device, epochs=epochs)
    return save_trained(name, result, weights_dir=weights_dir, manifest_path=manifest_path)


def _write_checkpoints(name, checkpoints, heads, weights_dir):
    """Write every checkpoint (and the heads shipped beside it) under ``weights_dir/name``.

    Files of ``name`` that the new checkpoints do not name (those of an earlier training
    with other checkpoints) are removed, so that the folder holds what the manifest lists.
    Returns the manifest's ``checkpoints`` dict.
    """
    folder = os.path.join(weights_dir, name)
    os.makedirs(folder, exist_ok=True)
    out, written = {}, set()

    def write(rel, state):
        data = _state_bytes(state)
        with open(os.path.join(weights_dir, rel), "wb") as f:
            f.write(data)
        written.add(os.path.basename(rel))
        return {"file": rel, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    for ck_name, epoch, step, state in checkpoints:
        out[ck_name] = {**write(f"{name}/{ck_name}.pt", state), "epoch": epoch, "step": step}
        for head, head_state in heads.get(ck_name, {}).items():
            out[ck_name].setdefault("heads", {})[head] = write(
                f"{name}/{ck_name}.{head}.pt", head_state
            )
    for stale in sorted(set(os.listdir(folder)) - written):
        if stale.endswith(".pt"):
            os.remove(os.path.join(folder, stale))
    return out


def save_trained(name, result, *, weights_dir=None, manifest_path=None, training=None, extra=None):
    """Write the checkpoints of a finished training of ``name`` and its manifest entry.

    Parameters
    ----------
    name : str
        The encoder's name in :data:`~repeval_ref.zoo.registry.ENCODERS`.
    result : dict
        What :func:`repeval_ref.zoo.train.train_encoder` returns (``config``,
        ``checkpoints``, ``heads``, ``subset``, ``seconds``, ``steps``, ``curve``);
        ``n_images`` may stand for ``subset``.
    training : dict, optional
        Fields added to (or replacing) the entry's ``training`` record (times, machine, date).
    extra : dict, optional
        Top-level fields added to the entry (a recipe search, where the weights come from).

    Returns
    -------
    dict
        The manifest entry written.
    """
    cfg = result["config"]
    weights_dir = weights_dir or WEIGHTS_DIR
    n_images = int(result["subset"].size) if "subset" in result else int(result["n_images"])
    entry = {
        "objective": cfg["objective"],
        "architecture": dict(ARCHITECTURES[cfg["arch"]], name=cfg["arch"]),
        "hyperparameters": {k: v for k, v in cfg.items() if k not in ("objective", "arch")},
        "parameters": int(
            sum(v.numel() for v in result["checkpoints"][-1][3].values() if v.is_floating_point())
            - _buffers(result["checkpoints"][-1][3])
        ),
        "data": {
            "dataset": "fashion_mnist",
            "split": "train",
            "subset_seed": cfg["seed"],
            "subset_size": n_images,
            "order_seed": cfg["seed"] + 2,
            "normalisation": "(x / 255 - 0.2860) / 0.3530",
        },
        "training": {
            "seconds": round(result["seconds"], 1),
            "steps": result["steps"],
            "loss_per_epoch": result["curve"],
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "machine": platform.machine(),
            "device": result.get("device", "cpu"),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            **(training or {}),
        },
        "checkpoints": _write_checkpoints(
            name, result["checkpoints"], result.get("heads", {}), weights_dir
        ),
        "final": result["checkpoints"][-1][0],
        **(extra or {}),
    }
    update_manifest(lambda m: m["encoders"].__setitem__(name, entry), manifest_path)
    return entry


def update_manifest(change, path=None):
    """Read the manifest, apply ``change(manifest)`` in place and write it back, under a file
    lock."""
    import fcntl

    path = path or MANIFEST
    os.makedirs(os.path.dirname(path), exist_ok=True)
    import tempfile

    lock_path = os.path.join(
        tempfile.gettempdir(),
        "repeval-zoo-" + hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:16] + ".lock",
    )
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = read_manifest(path)
        change(manifest)
        write_manifest(manifest, path)
    return manifest


def _buffers(state):
    """Floating-point buffers (BatchNorm running statistics) are not parameters."""
    return sum(v.numel() for k, v in state.items() if v.is_floating_point() and ("running_" in k))
