"""Row ``report``: ``repeval report`` end to end against the report as it was before issue 19.

Both sides read the same two ``.npz`` files (TRAIN and TEST float32 features with
integer labels) and write a complete report (tables, JSON, plots) to a fresh folder.
The competitor is :mod:`benchmarks._report_before`, a frozen copy of the command-line
code that ran one full similarity pass per k of the k-NN curve and fitted the
logistic-regression probe from scratch for every C. The subject is today's
:func:`repeval_ref.cli.main`: one similarity pass for the whole k-NN curve and the C
sweep warm-started along the regularisation path.

Each child returns the k-NN curve (correct counts per k) and the probe's chosen C and
test accuracy, so the parent checks that the k-NN numbers are identical and that the
probe accuracies lie within the stated tolerance.
"""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np


def make_data(tmp, n_train, n_test, d, n_classes, noise=4.0, rank=48, seed=0):
    """Clustered float32 features written as ``train.npz`` and ``test.npz`` in ``tmp``.

    Class centres live in a ``rank``-dimensional subspace, and every row adds isotropic
    Gaussian noise of scale ``noise`` in all ``d`` dimensions, which gives a spectrum
    with a visible bend and a k-NN accuracy well between chance and 100 %.
    """
    rng = np.random.default_rng(seed)
    rank = min(rank, d)
    basis = np.linalg.qr(rng.standard_normal((d, rank)))[0]  # (d, rank), orthonormal
    centres = (rng.standard_normal((n_classes, rank)) * 3.0) @ basis.T
    paths = {}
    for name, n in (("train", n_train), ("test", n_test)):
        y = np.arange(n) % n_classes  # balanced: every class in both files
        rng.shuffle(y)
        X = (centres[y] + noise * rng.standard_normal((n, d))).astype(np.float32)
        path = Path(tmp) / f"report_{name}.npz"
        np.savez(path, features=X, labels=y)
        paths[name] = str(path)
    return paths


def _summary(rep):
    curve = {str(e["k"]): e["correct"] for e in rep["knn"]["curve"]}
    probe = rep["linear_probe"]
    return {"knn_correct": curve, "probe_C": probe["best_C"], "probe_accuracy": probe["accuracy"],
            "n_test": rep["inputs"]["n_test"]}


def _runner(main, paths, out):
    def work():
        with contextlib.redirect_stdout(io.StringIO()):
            rc = main(["report", paths["train"], paths["test"], "--out", out, "--quiet"])
        if rc != 0:
            raise RuntimeError(f"report exited with status {rc}")
        return _summary(json.loads((Path(out) / "report.json").read_text()))

    return work


def before(paths, out):
    from benchmarks._report_before import main

    return _runner(main, paths, out)


def repeval(paths, out):
    from repeval_ref.cli import main

    return _runner(main, paths, out)
