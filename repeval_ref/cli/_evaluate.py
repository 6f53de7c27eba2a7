"""The evaluations behind ``repeval report``, ``compare`` and ``leaderboard``.

Each function calls the package's computation (:mod:`repeval_ref.knn`,
:mod:`repeval_ref.linear_probe`, :mod:`repeval_ref.ridge`, :mod:`repeval_ref.lowshot`;
the label-free metrics in :mod:`._label_free_section`) and turns its result into plain
numbers for the tables; no formula lives here. Progress is reported through a
:class:`~repeval_ref.cli._progress.Progress` that moves within each stage.
"""

from __future__ import annotations

import warnings

import numpy as np

from ._inputs import InputError, _check_classes

KNN_TAU = 0.07
KNN_HEADLINE_KS = (20, 200)
KNN_CURVE_KS = (1, 5, 10, 20, 50, 100, 200)
PROBE_CS = tuple(10.0 ** np.arange(-4, 3))
SHOTS = (1, 5, 20)
#: Low-shot support draws per shot count: the one default of every command (report,
#: leaderboard, the loop's summary), so that they print the same low-shot figures.
LOW_SHOT_DRAWS = 10
#: Paired bootstrap replicates per pair: the one default of compare and leaderboard.
PAIRED_BOOTSTRAP = 10000
#: Share of a single labelled file held out for testing by compare and leaderboard.
TEST_FRACTION = 0.25


# --------------------------------------------------------------------- BLAS threads


def blas_threads(n):
    """A context in which BLAS and LAPACK use at most ``n`` threads (``None``: no limit).

    Applies to the probe's L-BFGS fits, the ridge probe's SVD and the label-free
    decompositions; the k-NN's large block products run outside this limit. Measurements
    of the thread count's effect are in ``benchmarks/``.
    """
    import contextlib

    if n is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n)


# ------------------------------------------------------------------------ accuracy


def acc_from_counts(k, n):
    from ..uncertainty import wilson_interval

    lo, hi = wilson_interval(k, n)
    return {"accuracy": k / n, "correct": k, "n": n, "wilson95": [lo, hi]}


def acc_entry(correct):
    correct = np.asarray(correct, dtype=bool)
    return acc_from_counts(int(correct.sum()), int(correct.size))


# ------------------------------------------------------------------------- classes


def class_indices(train_y, test_y, who=("TRAIN", "TEST"), test_rows=None):
    """Classes of TRAIN, and both label arrays as indices into them (-1: unseen in TRAIN).

    Parameters
    ----------
    train_y, test_y : numpy.ndarray of int64
    who : (str, str)
        The training and test rows as error lines name them (their files, or the parts
        of one file).
    test_rows : numpy.ndarray of int, optional
        Each test row's number in its file (default ``0, 1, ...``).

    Returns
    -------
    classes, counts : numpy.ndarray
        The TRAIN classes and their sizes.
    ytr, yte : numpy.ndarray of int64
    """
    if len(who) != 2:
        raise ValueError(f"who must name the training and the test rows, got {who!r}")
    classes, counts = _check_classes(train_y, who[0])
    pos = np.searchsorted(classes, test_y).clip(0, classes.size - 1)
    yte = np.where(classes[pos] == test_y, pos, -1)
    if np.all(yte < 0):
        row = 0 if test_rows is None else int(test_rows[0])
        raise InputError(
            f"TEST has label {test_y[0]} that never occurs in TRAIN ({who[1]}, row {row}; "
            f"no label of it occurs in {who[0]})"
        )
    return classes, counts, np.searchsorted(classes, train_y), yte


# --------------------------------------------------------------------------- k-NN


def feature_dtype(*arrays):
    """float32 when every array is float32, else float64: the precision of the k-NN.

    Parameters
    ----------
    *arrays : numpy.ndarray
        At least one.

    Returns
    -------
    numpy.dtype
    """
    if not arrays:
        raise ValueError("arrays must hold at least one array")
    f32 = np.dtype(np.float32)
    return f32 if all(np.asanyarray(a).dtype == f32 for a in arrays) else np.dtype(np.float64)


def knn_curve_predictions(train_x, ytr, test_x, ks, n_classes, progress=None, label="k-NN"):
    """Predictions of the weighted k-NN for every k in ``ks`` from one similarity pass.

    The queries are handed to :func:`repeval_ref.knn.knn_classify_curve` in chunks that
    are whole multiples of its automatic block size, so the blocks (and hence every
    similarity and every prediction) are those of :func:`repeval_ref.knn_classify`;
    the chunks only let the progress bar move. The similarities are computed in the
    features' precision (:func:`feature_dtype`): float32 features stay float32.

    Returns
    -------
    numpy.ndarray of int64, shape (len(ks), n_test)
    """
    from ..knn import auto_block_size, knn_classify_curve

    n_test = test_x.shape[0]
    dtype = feature_dtype(train_x, test_x)
    block = auto_block_size(train_x.shape[0], dtype.itemsize)
    chunk = block * max(1, 4096 // block)
    out = np.empty((len(ks), n_test), dtype=np.int64)
    task = progress.task(label, n_test, unit="queries") if progress else None
    for lo in range(0, n_test, chunk):
        hi = min(n_test, lo + chunk)
        out[:, lo:hi] = knn_classify_curve(
            train_x, ytr, test_x[lo:hi], ks, KNN_TAU, n_classes, block_size=block, dtype=dtype
        )
        if task:
            task.update(hi - lo)
    if task:
        task.close()
    return out


def knn_section(train_x, ytr, test_x, yte, n_classes, progress=None, ks=KNN_CURVE_KS):
    """The k-NN curve with Wilson intervals, and the predictions at every k."""
    preds = knn_curve_predictions(train_x, ytr, test_x, ks, n_classes, progress)
    curve = []
    for k, pred in zip(ks, preds):
        e = acc_entry(pred == yte)
        e["k"] = int(k)
        e["all_train_points_vote"] = bool(k >= train_x.shape[0])
        curve.append(e)
    return curve, preds


# --------------------------------------------------------------------- linear probe


def probe_columns(train_x, seed, who="TRAIN"):
    """Columns kept for the probe: those not constant on the probe's fitting part.

    Replicates the split of :func:`repeval_ref.linear_probe.linear_probe_done_right`
    (the fitting part is ``permutation(n)[n // 5:]``); a constant feature carries no
    information and cannot be standardised. ``who`` names the training rows in the
    error line (the file, or the part of it).
    """
    from .._blocks import column_moments

    n = train_x.shape[0]
    fit = np.random.default_rng(seed).permutation(n)[n // 5 :]
    _, _, lo, hi = column_moments(train_x, np.sort(fit))  # a block of rows at a time
    keep = hi > lo
    if not keep.any():
        raise InputError(f"{who}: every feature is constant; no probe can be fitted")
    return keep


def probe_section(train_x, ytr, test_x, yte, seed, Cs, progress=None, who="TRAIN"):
    """The honestly tuned probe (C chosen on a split of TRAIN); info, accuracy entry,
    predictions."""
    from sklearn.exceptions import ConvergenceWarning

    from ..linear_probe import linear_probe_warm_path

    keep = probe_columns(train_x, seed, who)
    task = progress.task("linear probe", len(Cs) + 1, unit="fits") if progress else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", category=ConvergenceWarning)
        # every column kept (the usual case): a view of the features, a memory map included,
        # rather than a column-selected copy
        cols = slice(None) if keep.all() else keep
        best_C, val_acc, pred = linear_probe_warm_path(
            train_x[:, cols],
            ytr,
            test_x[:, cols],
            np.maximum(yte, 0),
            Cs,
            seed=seed,
            progress=task.update if task else None,
        )
    if task:
        task.close()
    info = {
        "best_C": best_C,
        "dropped_constant_features": int((~keep).sum()),
        "validation_accuracy": val_acc.tolist(),
        "convergence_warnings": sum(issubclass(w.category, ConvergenceWarning) for w in caught),
    }
    return info, acc_entry(pred == yte), pred


def probe_cell(train_x, ytr, test_x, yte, settings, progress, who):
    """:func:`probe_section` with the ``seed`` and ``probe_c`` of ``settings``, for a table cell.

    Returns
    -------
    info : dict
        As :func:`probe_section` returns it.
    entry : dict
        The accuracy entry with ``best_C`` and ``dropped_constant_features``.
    pred : numpy.ndarray of int, shape (n_test,)
    """
    info, acc, pred = probe_section(
        train_x, ytr, test_x, yte, settings.seed, settings.probe_c, progress, who
    )
    keys = ("best_C", "dropped_constant_features")
    return info, {**acc, **{k: info[k] for k in keys}}, pred


# ---------------------------------------------------------------------------- ridge


def ridge_section(train_x, ytr, test_x, yte, who="TRAIN"):
    """The ridge probe with its penalty chosen by exact leave-one-out; accuracy entry and grid."""
    from .._blocks import column_moments
    from ..ridge import ridge_loo, ridge_probe

    scale = float(np.sum(column_moments(train_x)[1])) / train_x.shape[1]  # streamed, float64
    if not scale > 0:
        raise InputError(f"{who}: every feature is constant; the ridge probe is undefined")
    lams = scale * np.logspace(-6, 2, 17)
    best, press = ridge_loo(train_x, ytr, lams)
    pred = np.argmax(ridge_probe(train_x, ytr, test_x, best), axis=1)
    info = {"best_lambda": best, "lambda_grid": lams.tolist(), "press": press.tolist()}
    return {**acc_entry(pred == yte), **info}


# ------------------------------------------------------------------------- low-shot


def low_shot_section(
    train_x, ytr, test_x, yte, counts, draws, seed, shots_list=SHOTS, progress=None
):
    """Low-shot nearest-class-mean accuracy per shot count: mean and std over ``draws`` draws.

    The spread is the standard deviation over random support sets, not an interval;
    every table labels it so. Test rows whose class is unseen in TRAIN are left out
    (said in the entry's note).
    """
    from ..lowshot import low_shot_eval

    seen = yte >= 0  # test rows whose class occurs in TRAIN
    low = []
    task = (
        progress.task("low-shot nearest class mean", len(shots_list), unit="shot counts")
        if progress
        else None
    )
    for shots in shots_list:
        entry = {"shots": shots, "mean": None, "std": None, "draws": 0, "seed": seed, "note": ""}
        if shots > counts.min():
            entry["note"] = f"smallest TRAIN class has {counts.min()} samples"
        else:
            try:
                m, s = low_shot_eval(train_x, ytr, test_x[seen], yte[seen], shots, draws, seed)
            except ValueError:  # a support set whose unit features cancel out exactly
                entry["note"] = (
                    "in a random draw the unit features of one class's support set "
                    "average to the zero vector (cosine undefined); try another --seed"
                )
            else:
                entry.update(mean=m, std=s, draws=draws)
                if not seen.all():
                    entry["note"] = (
                        f"on the {int(seen.sum())} TEST rows whose class occurs in TRAIN"
                    )
        low.append(entry)
        if task:
            task.update(1)
    if task:
        task.close()
    return low


def summary_section(
    train_x,
    train_y,
    test_x,
    test_y,
    *,
    seed=0,
    draws=LOW_SHOT_DRAWS,
    probe_c=PROBE_CS,
    blas=1,
    progress=None,
    who=("TRAIN", "TEST"),
):
    """The headline numbers of ``repeval report``, computed by the same calls as the report.

    Weighted k-NN at :data:`KNN_HEADLINE_KS`, the linear probe with C chosen on a
    validation split of TRAIN, and low-shot nearest class mean at :data:`SHOTS`, each
    with the report's defaults; the loop prints these so that its numbers and the
    report's agree on the same features.

    Returns
    -------
    dict
        ``knn`` (list of entries), ``linear_probe``, ``low_shot``, ``seed``, ``draws``,
        ``n_train`` and ``n_test``.
    """
    if not isinstance(draws, (int, np.integer)) or draws < 2:
        raise ValueError(f"draws must be an integer >= 2, got {draws!r}")
    classes, counts, ytr, yte = class_indices(train_y, test_y, who)
    curve, _ = knn_section(train_x, ytr, test_x, yte, classes.size, progress, ks=KNN_HEADLINE_KS)
    with blas_threads(blas):
        info, entry, _ = probe_section(train_x, ytr, test_x, yte, seed, probe_c, progress, who[0])
        low = low_shot_section(train_x, ytr, test_x, yte, counts, draws, seed, progress=progress)
    return {
        "knn": curve,
        "linear_probe": {**entry, **info},
        "low_shot": low,
        "seed": seed,
        "draws": int(draws),
        "n_train": int(train_x.shape[0]),
        "n_test": int(test_x.shape[0]),
    }
