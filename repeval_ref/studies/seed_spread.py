"""The training-seed term: how far a zoo encoder's test accuracy moves between pretraining seeds.

Book: chapter ``book/noise.md`` ("How far top-1 moves"). The same recipe of a zoo encoder
(:data:`repeval_ref.zoo.registry.ENCODERS`) is pretrained from scratch under several seeds;
the seed sets the initialisation, the order of the training images and every augmentation
draw (:func:`repeval_ref.zoo.train.train_encoder`). Each pretrained encoder is read out
with the zoo's two frozen evaluations on the same rows: a 20-NN vote (``tau = 0.07``) with
a seeded subset of training images as the bank, and a logistic-regression probe (``C``
chosen on a validation fifth of that subset, :func:`repeval_ref.linear_probe.
linear_probe_warm_path`), both scored on the same test images. The record holds every
run's seed, times and per-image correct flags, so that the spread between seeds can be
set beside the binomial standard error of one accuracy over the test images.
"""

from __future__ import annotations

import math
import time

import numpy as np

from . import array_to_flags
from ._common import check_settings_keys, evaluation_split, probe_predictions

__all__ = ["SETTINGS", "run", "seed_sd", "summarise"]

SETTINGS = {
    "full": {
        "encoder": "supervised_cnn",
        "seeds": [0, 1, 2],
        "train_images": 60000,
        "epochs": None,  # the registered recipe (3 epochs for supervised_cnn)
        "eval_train": 10000,
        "eval_test": 10000,
        "subset_seed": 0,
        "k": 20,
        "tau": 0.07,
        "Cs": [0.01, 0.1, 1.0],
    },
    "small": {
        "encoder": "supervised_cnn",
        "seeds": [0, 1, 2],
        "train_images": 4096,
        "epochs": 1,
        "eval_train": 1000,
        "eval_test": 1000,
        "subset_seed": 0,
        "k": 20,
        "tau": 0.07,
        "Cs": [0.01, 0.1, 1.0],
    },
}

READOUTS = ("knn20", "probe")


def seed_sd(accuracies, level=0.95):
    """Sample standard deviation over seeds and its chi-square interval.

    For ``m`` accuracies with sample variance ``s^2`` (``ddof=1``), the interval for the
    seed standard deviation assumes normal seed-to-seed variation:
    ``[s sqrt((m-1)/q_hi), s sqrt((m-1)/q_lo)]`` with ``q_lo, q_hi`` the
    ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of chi-square with ``m - 1`` degrees
    of freedom.

    Parameters
    ----------
    accuracies : array_like of float, shape (m,)
        One accuracy per seed, ``m >= 2``.
    level : float, default 0.95
        Confidence level in (0, 1).

    Returns
    -------
    dict
        ``sd``, ``lo``, ``hi``, ``mean``, ``m`` and ``df`` (``m - 1``).

    Raises
    ------
    ValueError
        ``accuracies`` not a 1-D finite array of at least 2 values, or ``level`` outside
        (0, 1).
    """
    from scipy import stats

    a = np.asarray(accuracies, dtype=float)
    if a.ndim != 1 or a.size < 2 or not np.all(np.isfinite(a)):
        raise ValueError(
            f"accuracies must be a 1-D array of at least 2 finite values, got {a.tolist()}"
        )
    if not (isinstance(level, float) and 0 < level < 1):
        raise ValueError(f"level must be a float in (0, 1), got {level!r}")
    m = a.size
    s = float(a.std(ddof=1))
    q_lo, q_hi = stats.chi2.ppf([(1 - level) / 2, (1 + level) / 2], m - 1)
    return {
        "sd": s,
        "lo": s * math.sqrt((m - 1) / q_hi),
        "hi": s * math.sqrt((m - 1) / q_lo),
        "mean": float(a.mean()),
        "m": int(m),
        "df": int(m - 1),
    }


def _check_settings(settings):
    check_settings_keys(settings, SETTINGS["full"])
    seeds = settings["seeds"]
    if (
        not isinstance(seeds, list)
        or len(seeds) < 2
        or len(set(seeds)) != len(seeds)
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)
    ):
        raise ValueError(f"settings['seeds'] must be >= 2 distinct integers >= 0, got {seeds!r}")
    for key in ("train_images", "eval_train", "eval_test", "k"):
        v = settings[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"settings[{key!r}] must be an integer >= 1, got {v!r}")


def _features(encoder, images):
    from ..zoo.extraction import extract
    from ..zoo.inputs import to_tensor

    encoder.eval()
    return extract(encoder, to_tensor(images), "cls")


def _readouts(htr, ytr, hte, yte, settings):
    from ..knn import knn_classify

    knn = knn_classify(htr, ytr, hte, settings["k"], settings["tau"], 10)
    pred, best_c = probe_predictions(htr, ytr, hte, yte, settings["Cs"])
    return {"knn20": knn == yte, "probe": pred == yte}, best_c


def run(settings, log=None):
    """Pretrain ``settings["encoder"]`` once per seed and read each run out on the same rows.

    Parameters
    ----------
    settings : dict
        A budget of :data:`SETTINGS`: ``encoder``, ``seeds``, ``train_images`` (the
        pretraining subset, seeded by each run's seed), ``epochs`` (``None``: registered),
        ``eval_train`` / ``eval_test`` (rows of the read-outs, drawn with
        ``subset_seed`` and ``subset_seed + 1`` as in the zoo's evaluation), ``k``,
        ``tau``, ``Cs``.
    log : callable, optional
        Called with one line per finished run.

    Returns
    -------
    dict
        ``runs``: per seed ``seed``, ``train_images``, ``epochs``, ``steps``,
        ``train_cpu_seconds``, ``train_wall_seconds``, ``eval_cpu_seconds``,
        ``probe_C``, and per read-out ``acc`` and ``correct`` (a string of 0/1 over the
        test rows); ``eval_train_rows`` and ``eval_test_rows`` (counts);
        ``test_labels_sha256`` (of the test rows' labels, so paired reads can check them).
    """
    import hashlib

    import torch

    from ..zoo.registry import build_encoder
    from ..zoo.train import deterministic_torch, train_encoder

    _check_settings(settings)
    deterministic_torch()
    split = evaluation_split(settings["eval_train"], settings["eval_test"], settings["subset_seed"])
    xtr_all, ytr_all, xte_all, yte_all, tr, te = split
    ytr, yte = ytr_all[tr], yte_all[te]
    runs = []
    for seed in settings["seeds"]:
        c0, t0 = time.process_time(), time.perf_counter()
        out = train_encoder(
            settings["encoder"],
            xtr_all,
            ytr_all,
            epochs=settings["epochs"],
            n_images=settings["train_images"],
            overrides={"seed": int(seed)},
        )
        train_cpu, train_wall = time.process_time() - c0, time.perf_counter() - t0
        encoder = build_encoder(out["config"]["arch"], int(seed))
        encoder.load_state_dict(out["checkpoints"][-1][3])
        c1 = time.process_time()
        with torch.no_grad():
            htr, hte = _features(encoder, xtr_all[tr]), _features(encoder, xte_all[te])
        correct, best_c = _readouts(htr, ytr, hte, yte, settings)
        row = {
            "seed": int(seed),
            "train_images": int(out["subset"].size),
            "epochs": int(out["config"]["epochs"]),
            "steps": int(out["steps"]),
            "train_cpu_seconds": round(train_cpu, 1),
            "train_wall_seconds": round(train_wall, 1),
            "eval_cpu_seconds": round(time.process_time() - c1, 1),
            "probe_C": best_c,
        }
        for r in READOUTS:
            row[r] = {"acc": float(np.mean(correct[r])), "correct": array_to_flags(correct[r])}
        runs.append(row)
        if log is not None:
            log(
                f"seed {seed}: knn20 {row['knn20']['acc']:.4f} probe {row['probe']['acc']:.4f} "
                f"(train {train_cpu:.0f} CPU s)"
            )
    return {
        "encoder": settings["encoder"],
        "runs": runs,
        "eval_train_rows": int(tr.size),
        "eval_test_rows": int(te.size),
        "test_labels_sha256": hashlib.sha256(yte.astype(np.int64).tobytes()).hexdigest(),
    }


def summarise(record, level=0.95):
    """The numbers a page prints, per read-out, from a record of :func:`run`.

    Returns
    -------
    dict
        Per read-out (``"knn20"``, ``"probe"``): ``accs`` (per seed), ``seed``
        (:func:`seed_sd`), ``test_se`` (binomial standard error of the mean accuracy over
        the test rows, :func:`repeval_ref.uncertainty.binomial_standard_error`),
        ``ratio`` (seed SD / test SE) and ``discordance`` (mean share of test rows on
        which two seeds disagree in correctness, over all pairs of seeds).

    Raises
    ------
    ValueError
        ``record`` lacks runs, or the runs' flags differ in length.
    """
    from itertools import combinations

    from ..uncertainty import binomial_standard_error
    from . import flags_to_array

    if not isinstance(record, dict) or not isinstance(record.get("runs"), list):
        raise ValueError("record must be a dict with a list of 'runs'")
    if len(record["runs"]) < 2:
        raise ValueError(f"record holds {len(record['runs'])} run(s); the spread needs >= 2")
    out = {}
    for r in READOUTS:
        flags = [flags_to_array(run[r]["correct"]) for run in record["runs"]]
        if len({f.size for f in flags}) != 1:
            raise ValueError(f"record: the runs' {r} flags differ in length")
        accs = np.array([f.mean() for f in flags])
        sd = seed_sd(accs, level)
        se = binomial_standard_error(float(accs.mean()), int(flags[0].size))
        disc = [float(np.mean(a != b)) for a, b in combinations(flags, 2)]
        out[r] = {
            "accs": accs.tolist(),
            "seed": sd,
            "test_se": float(se),
            "ratio": sd["sd"] / float(se),
            "discordance": float(np.mean(disc)),
        }
    return out
