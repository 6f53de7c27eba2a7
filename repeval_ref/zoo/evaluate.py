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

__all__ = [
    "PROTOCOL",
    "PLATEAU",
    "subset_indices",
    "knn_and_probe",
    "plateau_evidence",
    "plateau_verdict",
    "evaluate_encoder",
    "record_evaluation",
]

PROTOCOL = {
    "k": 20,
    "tau": 0.07,
    "Cs": [0.01, 0.1, 1.0],
    "probe_seed": 0,
    "pooling": "cls",
    "test": {"train": 10000, "test": 10000, "subset_seed": 0},
    "small": {"train": 2000, "test": 1000, "subset_seed": 0},
}


def subset_indices(n, size, seed):
    """Sorted first ``size`` rows of ``default_rng(seed).permutation(n)`` (all rows if ``size >=
    n``)."""
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
    best_c, acc = linear_probe_done_right(
        probe_h, probe_y, test_h, test_y, PROTOCOL["Cs"], seed=PROTOCOL["probe_seed"]
    )
    return {
        "knn20": float(np.mean(pred == test_y)),
        "probe": float(acc),
        "probe_C": float(best_c),
        "n_test": int(test_y.size),
    }


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


#: The plateau check: the probe gain from each earlier checkpoint to the final one, a
#: paired bootstrap over the test images; "at its plateau" when the last quarter of the
#: training gained at most ``max_gain`` at the upper end of that interval.
PLATEAU = {"max_gain": 0.01, "n_boot": 2000, "seed": 0, "level": 0.95}


def plateau_verdict(gains, max_gain=PLATEAU["max_gain"]):
    """Whether a training reached its plateau, from the gains of its checkpoints.

    Parameters
    ----------
    gains : list of dict
        One per earlier checkpoint, in training order, each with ``hi`` (upper end of
        the paired interval of the final probe's gain over that checkpoint's); the last
        is the checkpoint at three quarters of the training.
    max_gain : float
        The largest gain of the last quarter still called a plateau (accuracy, in [0, 1)).

    Returns
    -------
    str
        ``"at its plateau"`` when the last gain's interval ends at or below ``max_gain``,
        else ``"still rising"``; ``"no earlier checkpoint"`` for an empty list.

    Notes
    -----
    A necessary condition, not a sufficient one: the cosine schedule of the zoo's
    training lowers the learning rate towards zero over the last quarter, which flattens
    the end of any run; the gains from the earlier checkpoints say how much of the
    training's progress came late.
    """
    if not isinstance(gains, (list, tuple)) or any(
        not isinstance(g, dict) or "hi" not in g for g in gains
    ):
        raise ValueError(f"gains must be a list of dicts with an 'hi' entry, got {gains!r}")
    if (
        isinstance(max_gain, bool)
        or not isinstance(max_gain, (int, float))
        or not 0 <= max_gain < 1
    ):
        raise ValueError(f"max_gain must be an accuracy difference in [0, 1), got {max_gain!r}")
    if not gains:
        return "no earlier checkpoint"
    return "at its plateau" if gains[-1]["hi"] <= max_gain else "still rising"


def plateau_evidence(name, *, weights_dir=None, cache_dir=None):
    """The linear probe of every checkpoint of ``name`` and its paired gain to the final one.

    The ``test`` protocol of :data:`PROTOCOL` (class token, 10,000 seeded training rows,
    all 10,000 test images, ``C`` tuned on a validation fifth), each checkpoint's probe
    fitted with :func:`repeval_ref.linear_probe.linear_probe_warm_path`; the gains are
    :func:`repeval_ref.uncertainty.paired_comparison` of each earlier checkpoint against
    the final one over the same test images.

    Returns
    -------
    dict
        ``probe`` (checkpoint -> test accuracy), ``gains`` (one dict per earlier
        checkpoint: ``from``, ``gain``, ``lo``, ``hi``, ``verdict``, ``detectable``),
        ``verdict`` (:func:`plateau_verdict`), ``criterion`` (in words) and ``protocol``.
    """
    from ..linear_probe import linear_probe_warm_path
    from ..uncertainty import paired_comparison
    from .extraction import features
    from .loader import checkpoints

    p = PROTOCOL["test"]
    tr = subset_indices(60000, p["train"], p["subset_seed"])
    correct = {}
    for ck in checkpoints(name, weights_dir):
        kw = dict(checkpoint=ck, cache_dir=cache_dir, weights_dir=weights_dir)
        htr, ytr = features(name, "train", "cls", indices=tr, **kw)
        hte, yte = features(name, "test", "cls", **kw)
        _, _, pred = linear_probe_warm_path(
            htr, ytr, hte, yte, PROTOCOL["Cs"], seed=PROTOCOL["probe_seed"]
        )
        correct[ck] = pred == yte
    names = list(correct)
    final = names[-1]
    gains = []
    for ck in names[:-1]:
        c = paired_comparison(
            correct[ck], correct[final], PLATEAU["n_boot"], PLATEAU["seed"], PLATEAU["level"]
        )
        gains.append(
            {"from": ck, **{k: c[k] for k in ("gain", "lo", "hi", "verdict", "detectable")}}
        )
    return {
        "probe": {ck: float(np.mean(v)) for ck, v in correct.items()},
        "gains": gains,
        "verdict": plateau_verdict(gains),
        "criterion": (
            f"at its plateau when the probe gained at most {PLATEAU['max_gain']:.0%} over the "
            "last quarter of the training, at the upper end of the paired "
            f"{PLATEAU['level']:.0%} interval"
        ),
        "protocol": {"train": p["train"], "test": int(yte.size), **PLATEAU},
    }


def evaluate_encoder(name, *, small_only=False):
    """The manifest's accuracies of the shipped encoder ``name``, computed and returned, not stored.

    Parameters
    ----------
    name : str
        An encoder of the manifest.
    small_only : bool
        Only the ``small`` protocol of every checkpoint (no ``test`` entry, no plateau check).

    Returns
    -------
    dict
        ``checkpoints`` (checkpoint -> ``small`` accuracies, as :func:`knn_and_probe`
        returns them), ``test`` (the final checkpoint on the ``test`` protocol, or None),
        ``plateau`` (:func:`plateau_evidence` for an encoder with several checkpoints,
        else None) and ``evaluation_protocol`` (:data:`PROTOCOL`).

    Raises
    ------
    ValueError
        If ``name`` is not an encoder of the manifest.
    """
    from .build import read_manifest
    from .loader import checkpoints

    encoders = read_manifest()["encoders"]
    if name not in encoders:
        raise ValueError(
            f"name must be an encoder of the manifest ({', '.join(sorted(encoders))}), got {name!r}"
        )
    entry = encoders[name]
    small = {ck: _small(name, ck) for ck in checkpoints(name)}
    test = plateau = None
    if not small_only:
        test = _full(name, entry["final"])
        if len(entry["checkpoints"]) > 1:
            plateau = plateau_evidence(name)
    return {"checkpoints": small, "test": test, "plateau": plateau, "evaluation_protocol": PROTOCOL}


def record_evaluation(name, *, small_only=False):
    """Compute the accuracies of encoder ``name`` (:func:`evaluate_encoder`) and store them in the
    manifest.

    Called where the shipped weights themselves change (``train``, ``ship``); returns
    ``{name: {checkpoint: small accuracies, ..., "test": test accuracies}}``.
    """
    from .build import update_manifest

    result = evaluate_encoder(name, small_only=small_only)

    def change(manifest):  # applied to a fresh read, under the lock
        e = manifest["encoders"][name]
        for ck, res in result["checkpoints"].items():
            e["checkpoints"][ck]["small"] = res
        if result["test"] is not None:
            e["test"] = result["test"]
        if result["plateau"] is not None:
            e["plateau"] = result["plateau"]
        e["evaluation_protocol"] = PROTOCOL

    update_manifest(change)
    out = dict(result["checkpoints"])
    if result["test"] is not None:
        out["test"] = result["test"]
    return {name: out}
