"""One encoder on one task of ``repeval suite``, and the on-disk cache of these evaluations.

The protocols are computed by the calls ``repeval leaderboard`` makes, with the same
arguments; an evaluation is stored under a fingerprint of its features, its split and
its settings, so a second run with the same inputs reads it back.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from . import _evaluate as E
from . import _render as R
from ._evaluate import acc_entry, blas_threads, knn_curve_predictions, low_shot_section, probe_cell
from ._suite_encoders import _sha
from ._suite_render import PAIRED

#: version of what the result cache stores; bump when an evaluation changes
RESULT_CACHE_VERSION = 2


def _settings_key(args, protocols):
    return {
        "version": RESULT_CACHE_VERSION,
        "k": args.k,
        "tau": E.KNN_TAU,
        "probe_c": [float(c) for c in args.probe_c],
        "seed": args.seed,
        "draws": args.draws,
        "shots": args.shots,
        "protocols": list(protocols),
    }


def evaluate(name, inp, tr, te, classes, counts, args, protocols, progress, result_dir):
    """One encoder on one task: the chosen protocols; ``(entries, correct, from_cache)``.

    The calls are those of ``repeval leaderboard`` (:func:`._evaluate.knn_curve_predictions`,
    :func:`._evaluate.probe_section`, :func:`._evaluate.low_shot_section`) with the same
    arguments, so the same features and settings give the same numbers.
    """
    X = inp.x
    yi = np.searchsorted(classes, inp.y)
    key = None
    if result_dir is not None:
        key = _sha(
            X.shape,
            X.tobytes(),
            yi.tobytes(),
            tr.tobytes(),
            te.tobytes(),
            json.dumps(_settings_key(args, protocols), sort_keys=True),
        )
        hit = _read_result(result_dir, key, protocols)
        if hit is not None:
            return hit[0], hit[1], True
    Xtr, Xte, ytr, yte = X[tr], X[te], yi[tr], yi[te]
    entries, correct = {}, {}
    if "knn" in protocols:
        pred = knn_curve_predictions(
            Xtr, ytr, Xte, (args.k,), classes.size, progress, label=f"{name}: k-NN"
        )[0]
        correct["knn"] = pred == yte
        entries["knn"] = acc_entry(correct["knn"])
    with blas_threads(args.blas_threads):
        if "probe" in protocols:
            who = f"the training part of {inp.path}"
            _, entries["probe"], pred = probe_cell(Xtr, ytr, Xte, yte, args, progress, who)
            correct["probe"] = pred == yte
        if "fewshot" in protocols:
            entries["fewshot"] = low_shot_section(
                Xtr, ytr, Xte, yte, counts, args.draws, args.seed, shots_list=(args.shots,)
            )[0]
    if key is not None:
        _write_result(result_dir, key, entries, correct)
    return entries, correct, False


def _read_result(result_dir, key, protocols):
    path = Path(result_dir) / f"{key}.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            entries = json.loads(str(z["entries"]))
            correct = {p: z[f"correct_{p}"].astype(bool) for p in PAIRED if p in protocols}
    except (OSError, ValueError, KeyError):
        return None
    if set(entries) != set(protocols):
        return None
    return entries, correct


def _write_result(result_dir, key, entries, correct):
    buf = io.BytesIO()
    np.savez(
        buf,
        entries=np.array(json.dumps(entries, default=R.json_default)),
        **{f"correct_{p}": c for p, c in correct.items()},
    )
    try:
        R.write_files(result_dir, {f"{key}.npz": buf.getvalue()})
    except OSError:
        pass  # a cache that cannot be written only costs time
