"""RankMe within one family of runs, beside RankMe across the zoo's objectives.

Book: chapter ``book/rankme.md`` ("Within one family of runs"). Garrido et al. (2023) propose
RankMe to choose among runs of one self-supervised method (hyper-parameters of one objective),
not to rank different methods. The study trains a sweep of short SimCLR runs of the zoo's ViT
(:data:`repeval_ref.zoo.registry.ENCODERS` ``["simclr_vit"]`` with its temperature and the width
of the projector's output changed), and for every run computes the uncentred RankMe
(:func:`repeval_ref.rankme`, ``center=False``) of the backbone's class token and of the
projector's outputs on a fixed subset of training images, and the test accuracy of a linear
probe on the class token. Beside it, the same backbone RankMe and probe for the final checkpoint
of every trained zoo encoder (one per objective and architecture). :func:`spearman_interval`
gives Spearman's rho with a percentile interval from a bootstrap over runs.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time

import numpy as np

from ._common import check_settings_keys, evaluation_split, probe_predictions

__all__ = ["SETTINGS", "run", "spearman_interval", "summarise"]

SETTINGS = {
    "full": {
        "base": "simclr_vit",
        "temperatures": [0.05, 0.1, 0.2, 0.5],
        "proj_dims": [16, 64, 256],
        "train_images": 10000,
        "epochs": 6,
        "eval_train": 2000,
        "eval_test": 1000,
        "subset_seed": 0,
        "Cs": [0.01, 0.1, 1.0],
        "zoo": "all",
    },
    "small": {
        "base": "simclr_vit",
        "temperatures": [0.1, 0.5],
        "proj_dims": [16, 64],
        "train_images": 512,
        "epochs": 1,
        "eval_train": 300,
        "eval_test": 200,
        "subset_seed": 0,
        "Cs": [0.1, 1.0],
        "zoo": ["supervised_cnn", "simclr_vit", "mae_vit"],
    },
}


def spearman_interval(x, y, n_boot, rng, level=0.95):
    """Spearman's rho of ``x`` and ``y`` with a percentile bootstrap interval over the pairs.

    Each replicate draws ``len(x)`` pairs with replacement (one call
    ``rng.integers(0, n, size=(n_boot, n))``); a replicate in which ``x`` or ``y`` is
    constant has no rho and is left out (their number is returned).

    Parameters
    ----------
    x, y : array_like of float, shape (n,), ``n >= 3``, finite
    n_boot : int, >= 1
    rng : numpy.random.Generator or int
    level : float in (0, 1), default 0.95

    Returns
    -------
    dict
        ``rho``, ``lo``, ``hi``, ``n``, ``n_boot``, ``undefined`` (replicates left out).

    Raises
    ------
    ValueError
        ``x`` and ``y`` of different or too short lengths, not finite; ``n_boot`` < 1;
        ``level`` outside (0, 1); every replicate undefined.
    """
    from scipy import stats

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size < 3:
        raise ValueError(f"x and y must be 1-D of one length >= 3, got {a.shape} and {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("x and y must be finite")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")
    if not (isinstance(level, float) and 0 < level < 1):
        raise ValueError(f"level must be a float in (0, 1), got {level!r}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n = a.size
    idx = rng.integers(0, n, size=(n_boot, n))
    rhos = []
    for row in idx:
        xa, yb = a[row], b[row]
        if np.ptp(xa) == 0 or np.ptp(yb) == 0:
            continue
        rhos.append(stats.spearmanr(xa, yb).statistic)
    if not rhos:
        raise ValueError("every bootstrap replicate has a constant x or y: no interval")
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    lo, hi = np.percentile(rhos, q)
    return {
        "rho": float(stats.spearmanr(a, b).statistic),
        "lo": float(lo),
        "hi": float(hi),
        "n": int(n),
        "n_boot": int(n_boot),
        "undefined": int(n_boot - len(rhos)),
    }


def _check_settings(settings):
    check_settings_keys(settings, SETTINGS["full"])
    runs = len(settings["temperatures"]) * len(settings["proj_dims"])
    if runs < 3:
        raise ValueError(f"settings: the sweep has {runs} runs; a rank correlation needs >= 3")


def _probe_acc(htr, ytr, hte, yte, Cs):
    pred, best_c = probe_predictions(htr, ytr, hte, yte, Cs)
    return float(np.mean(pred == yte)), best_c


def run(settings, log=None):
    """Train the sweep and measure every run; measure the zoo's final checkpoints.

    Returns
    -------
    dict
        ``runs``: per run its ``temperature``, ``proj_dim``, ``seed`` (the registered one),
        ``train_images``, ``epochs``, ``steps``, ``train_cpu_seconds``, ``rankme_backbone``,
        ``rankme_projector``, ``probe`` (test accuracy) and ``probe_C``; ``zoo``: per trained
        zoo encoder ``rankme_backbone`` and ``probe``; ``eval_train_rows``,
        ``eval_test_rows``.
    """
    import torch

    from .. import zoo
    from ..labelfree import rankme
    from ..zoo.extraction import extract
    from ..zoo.inputs import to_tensor
    from ..zoo.registry import build_encoder
    from ..zoo.simclr import make_heads
    from ..zoo.train import deterministic_torch, train_encoder

    _check_settings(settings)
    deterministic_torch()
    split = evaluation_split(settings["eval_train"], settings["eval_test"], settings["subset_seed"])
    px_tr, y_tr, px_te, y_te, tr, te = split
    ytr, yte = y_tr[tr], y_te[te]
    xtr, xte = to_tensor(px_tr[tr]), to_tensor(px_te[te])
    runs = []
    for temperature, proj_dim in itertools.product(settings["temperatures"], settings["proj_dims"]):
        c0 = time.process_time()
        with tempfile.TemporaryDirectory() as tmp:
            state_file = os.path.join(tmp, "state.pt")
            out = train_encoder(
                settings["base"],
                px_tr,
                y_tr,
                epochs=settings["epochs"],
                n_images=settings["train_images"],
                overrides={"temperature": float(temperature), "proj_dim": int(proj_dim)},
                state_file=state_file,
            )
            heads_state = torch.load(state_file, map_location="cpu", weights_only=True)["heads"]
        train_cpu = time.process_time() - c0
        cfg = out["config"]
        encoder = build_encoder(cfg["arch"], cfg["seed"])
        encoder.load_state_dict(out["checkpoints"][-1][3])
        encoder.eval()
        projector = make_heads(encoder, cfg)["projector"]
        projector.load_state_dict(
            {k.split(".", 1)[1]: v for k, v in heads_state.items() if k.startswith("projector.")}
        )
        projector.eval()
        with torch.no_grad():
            htr, hte = extract(encoder, xtr, "cls"), extract(encoder, xte, "cls")
            ztr = projector(torch.from_numpy(np.asarray(htr, dtype=np.float32))).numpy()
        acc, best_c = _probe_acc(htr, ytr, hte, yte, settings["Cs"])
        row = {
            "temperature": float(temperature),
            "proj_dim": int(proj_dim),
            "seed": int(cfg["seed"]),
            "train_images": int(out["subset"].size),
            "epochs": int(cfg["epochs"]),
            "steps": int(out["steps"]),
            "train_cpu_seconds": round(train_cpu, 1),
            "rankme_backbone": float(rankme(np.asarray(htr, dtype=np.float64), center=False)),
            "rankme_projector": float(rankme(np.asarray(ztr, dtype=np.float64), center=False)),
            "probe": acc,
            "probe_C": best_c,
        }
        runs.append(row)
        if log is not None:
            log(
                f"t={temperature:g} p={proj_dim}: rankme backbone {row['rankme_backbone']:.1f} "
                f"projector {row['rankme_projector']:.1f} probe {acc:.3f} ({train_cpu:.0f} CPU s)"
            )
    names = settings["zoo"]
    if names == "all":
        names = [
            n for n, e in zoo.manifest()["encoders"].items() if e["objective"] != "random_init"
        ]
    zoo_rows = []
    for name in names:
        htr_z, _ = zoo.features(name, "train", indices=tr)
        hte_z, _ = zoo.features(name, "test", indices=te)
        acc, _ = _probe_acc(htr_z, ytr, hte_z, yte, settings["Cs"])
        zoo_rows.append(
            {
                "encoder": name,
                "objective": zoo.manifest()["encoders"][name]["objective"],
                "rankme_backbone": float(rankme(np.asarray(htr_z, dtype=np.float64), center=False)),
                "probe": acc,
            }
        )
    return {
        "runs": runs,
        "zoo": zoo_rows,
        "eval_train_rows": int(tr.size),
        "eval_test_rows": int(te.size),
    }


def summarise(record, n_boot=2000, seed=0, level=0.95):
    """Spearman's rho of RankMe with the probe: within the sweep (backbone, projector) and
    across the zoo (backbone), each with :func:`spearman_interval`."""
    if not isinstance(record, dict) or not record.get("runs") or not record.get("zoo"):
        raise ValueError("record must be a record of run() with 'runs' and 'zoo'")
    runs, zoo_rows = record["runs"], record["zoo"]
    acc = [r["probe"] for r in runs]
    pairs = {
        "within_backbone": ([r["rankme_backbone"] for r in runs], acc),
        "within_projector": ([r["rankme_projector"] for r in runs], acc),
        "across_zoo": ([r["rankme_backbone"] for r in zoo_rows], [r["probe"] for r in zoo_rows]),
    }
    return {
        key: spearman_interval(x, y, n_boot, np.random.default_rng([seed, i]), level)
        for i, (key, (x, y)) in enumerate(pairs.items())
    }
