"""The manifest's accuracies: a 20-NN vote and a tuned linear probe on frozen features.

Book: the Performance appendix (the zoo). Two evaluations are recorded per encoder:

* ``test``: the final checkpoint, class-token features (a CNN's global average), a
  seeded subset of 10,000 training images and all 10,000 test images. 20-NN
  (``tau = 0.07``, :func:`repeval_ref.knn_classify`) with the training subset as
  the bank; a logistic-regression probe (:func:`repeval_ref.linear_probe_done_right`,
  ``C`` chosen on a validation fifth of the training subset) refitted on the whole
  subset and scored on the test images.
* ``small``: every checkpoint, on fixed seeded subsets (2,000 training rows as bank
  and probe set, 1,000 test rows), cheap enough for the tests to reproduce and for a
  chapter to plot a metric against the progress of training.
"""
from __future__ import annotations

import numpy as np

__all__ = ["PROTOCOL", "subset_indices", "knn_and_probe", "record_evaluation"]

PROTOCOL = {
    "k": 20, "tau": 0.07, "Cs": [0.01, 0.1, 1.0], "probe_seed": 0, "pooling": "cls",
    "test": {"train": 10000, "test": 10000, "subset_seed": 0},
    "small": {"train": 2000, "test": 1000, "subset_seed": 0},
}


def subset_indices(n, size, seed):
    """Sorted first ``size`` rows of ``default_rng(seed).permutation(n)`` (all rows if ``size >= n``)."""
    if size >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).permutation(n)[:size])


def knn_and_probe(bank_h, bank_y, probe_h, probe_y, test_h, test_y):
    """20-NN and tuned linear-probe accuracy of ``test_h``.

    Returns
    -------
    dict with ``knn20``, ``probe``, ``probe_C``, ``n_test`` (accuracies as floats).
    """
    from ..knn import knn_classify
    from ..linear_probe import linear_probe_done_right

    pred = knn_classify(bank_h, bank_y, test_h, PROTOCOL["k"], PROTOCOL["tau"], 10)
    best_c, acc = linear_probe_done_right(probe_h, probe_y, test_h, test_y, PROTOCOL["Cs"],
                                          seed=PROTOCOL["probe_seed"])
    return {"knn20": float(np.mean(pred == test_y)), "probe": float(acc), "probe_C": float(best_c),
            "n_test": int(test_y.size)}


def _small(name, checkpoint):
    from .extraction import features

    p = PROTOCOL["small"]
    tr = subset_indices(60000, p["train"], p["subset_seed"])
    te = subset_indices(10000, p["test"], p["subset_seed"] + 1)
    htr, ytr = features(name, "train", "cls", checkpoint=checkpoint, indices=tr)
    hte, yte = features(name, "test", "cls", checkpoint=checkpoint, indices=te)
    return knn_and_probe(htr, ytr, htr, ytr, hte, yte)


def _full(name, checkpoint):
    from .extraction import features

    p = PROTOCOL["test"]
    tr = subset_indices(60000, p["train"], p["subset_seed"])
    htr, ytr = features(name, "train", "cls", checkpoint=checkpoint, indices=tr)
    hte, yte = features(name, "test", "cls", checkpoint=checkpoint)
    return knn_and_probe(htr, ytr, htr, ytr, hte, yte)


def record_evaluation(name, *, small_only=False):
    """Compute and store in the manifest the accuracies of encoder ``name``; return them."""
    from .loader import checkpoints
    from .build import read_manifest, update_manifest

    entry = read_manifest()["encoders"][name]
    out = {ck: _small(name, ck) for ck in checkpoints(name)}
    if not small_only:
        out["test"] = _full(name, entry["final"])

    def change(manifest):  # applied to a fresh read, under the lock
        e = manifest["encoders"][name]
        for ck, res in out.items():
            if ck == "test":
                e["test"] = res
            else:
                e["checkpoints"][ck]["small"] = res
        e["evaluation_protocol"] = PROTOCOL

    update_manifest(change)
    return {name: out}
