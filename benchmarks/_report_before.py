"""Frozen copy of ``repeval_ref/cli.py`` as of commit 41cec37, the competitor of the report row.

``benchmarks/bench_report.py`` times ``repeval report`` against this code path (a k-NN
pass per k, a cold-started probe fit per C) on the same files. Only the relative
imports were made absolute, and later the modules ``repeval_ref.noise`` and
``repeval_ref.similarity`` imported under their new names ``repeval_ref.uncertainty`` and
``repeval_ref.cka`` (the same functions); nothing else was changed. Not used by the package.

The ``repeval`` command: evaluate your own features with the course's protocols.

``repeval report TRAIN TEST [--out DIR]`` runs the labelled protocols (weighted k-NN,
the honestly tuned linear probe, the closed-form ridge probe with exact leave-one-out,
low-shot nearest-class-mean) and every label-free metric of the package on a
training and a test set of features, and writes ``report.md``, ``report.json`` and
PNG plots.

``repeval compare A B`` compares two representations of the same images (two
encoders, or two layers): linear and RBF CKA, and a paired comparison of the k-NN and
probe predictions of the two (paired bootstrap interval, exact McNemar test).

Input files: ``.npz`` with arrays ``features`` (n, d) and ``labels`` (n,); ``.npy``
feature files whose labels sit next to them (see ``--help``); PyTorch ``.pt``/``.pth``
files holding a dict with ``features`` and ``labels`` tensors or a pair
``(features, labels)``. Bad input ends with a one-line message on stderr and exit
status 2; no traceback is shown unless ``REPEVAL_TRACEBACK=1`` is set.

The command holds the features in memory (as float64). For sets larger than memory,
call the streamed functions on a ``numpy.memmap`` instead
(:func:`repeval_ref.label_free_summary`, :func:`repeval_ref.rankme`, ...).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2

KNN_TAU = 0.07
KNN_HEADLINE_KS = (20, 200)
KNN_CURVE_KS = (1, 5, 10, 20, 50, 100, 200)
PROBE_CS = tuple(10.0 ** np.arange(-4, 3))
SHOTS = (1, 5, 20)


class InputError(Exception):
    """Bad user input: reported in one line with exit status 2."""


# --------------------------------------------------------------------------- progress


class Progress:
    """A minimal progress bar on stderr (one line per step when stderr is not a TTY)."""

    def __init__(self, total, enabled=True, width=24):
        self.total, self.enabled, self.width = total, enabled, width
        self.done = 0
        self.tty = enabled and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        self.t0 = time.monotonic()

    def step(self, label):
        if not self.enabled:
            return
        self.done = min(self.done + 1, self.total)
        filled = int(round(self.width * self.done / self.total))
        bar = "#" * filled + "." * (self.width - filled)
        line = f"[{bar}] {self.done}/{self.total} {label} ({time.monotonic() - self.t0:.1f}s)"
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
            if self.done == self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self):
        if self.enabled and self.tty and self.done < self.total:
            sys.stderr.write("\n")
            sys.stderr.flush()


# ---------------------------------------------------------------------------- loading


def _labels_path_for(path):
    """Sibling labels file of a ``.npy`` features file."""
    name = path.name
    stem = name[: -len(".npy")]
    i = stem.rfind("features")
    if i >= 0:
        return path.with_name(stem[:i] + "labels" + stem[i + len("features"):] + ".npy")
    return path.with_name(stem + "_labels.npy")


def _to_numpy(obj, what):
    if hasattr(obj, "detach") and hasattr(obj, "cpu"):  # a torch tensor
        obj = obj.detach().cpu()
        if str(getattr(obj, "dtype", "")) == "torch.bfloat16":
            obj = obj.float()
        return obj.numpy()
    try:
        return np.asarray(obj)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is bad input
        raise InputError(f"{what} cannot be read as an array ({exc})") from None


_NPY_MAGIC = b"\x93NUMPY"


def _read_npz(path, arg, need_labels):
    import zipfile

    if not zipfile.is_zipfile(path):
        with open(path, "rb") as fh:
            head = fh.read(len(_NPY_MAGIC))
        hint = ("it is a .npy array file: rename it to .npy" if head == _NPY_MAGIC
                else "np.savez writes a zip archive; this file is not one")
        raise InputError(f"{arg} file {path} is not a valid .npz archive ({hint})")
    try:
        with np.load(path, allow_pickle=False) as data:
            keys = set(data.files)
            if "features" not in keys:
                raise InputError(
                    f"{arg} file {path} has no array 'features' (it holds: "
                    f"{', '.join(sorted(keys)) or 'nothing'})"
                )
            feats = data["features"]
            labels = data["labels"] if "labels" in keys else None
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{arg} file {path} is not a readable .npz archive ({_short(exc)})") from None
    if labels is None and need_labels:
        raise InputError(f"{arg} file {path} has no array 'labels' (it holds: {', '.join(sorted(keys))})")
    return feats, labels


def _read_npy(path, arg, need_labels):
    try:
        feats = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{arg} file {path} is not a readable .npy array ({_short(exc)})") from None
    lpath = _labels_path_for(path)
    if not lpath.exists():
        if need_labels:
            raise InputError(
                f"{arg}: labels file {lpath} not found (for a .npy features file the labels "
                f"are read from {lpath.name})"
            )
        return feats, None
    try:
        labels = np.load(lpath, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{arg} labels file {lpath} is not a readable .npy array ({_short(exc)})") from None
    return feats, labels


def _read_pt(path, arg, need_labels):
    import zipfile

    import torch

    with open(path, "rb") as fh:
        head = fh.read(2)
    if not head:
        raise InputError(f"{arg} file {path} is empty")
    # torch.save writes a zip archive (the legacy format is a pickle, first byte 0x80)
    if not zipfile.is_zipfile(path) and head == b"PK":
        raise InputError(f"{arg} file {path} is a truncated or corrupted PyTorch file (its zip "
                         "archive cannot be read)")
    if not zipfile.is_zipfile(path) and head[:1] != b"\x80":
        raise InputError(f"{arg} file {path} is not a valid PyTorch file (torch.save writes a zip "
                         "archive; this file is neither that nor a legacy pickle)")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds on bad files
        raise InputError(_pt_load_error(path, arg, exc)) from None
    if isinstance(obj, dict):
        if "features" not in obj:
            raise InputError(
                f"{arg} file {path} has no entry 'features' (it holds: "
                f"{', '.join(sorted(map(str, obj))) or 'nothing'})"
            )
        feats, labels = obj["features"], obj.get("labels")
    elif isinstance(obj, (tuple, list)) and len(obj) == 2:
        feats, labels = obj
    else:
        raise InputError(
            f"{arg} file {path} must hold a dict with 'features' and 'labels' or a pair "
            f"(features, labels), got {type(obj).__name__}"
        )
    if labels is None and need_labels:
        raise InputError(f"{arg} file {path} has no entry 'labels'")
    return _to_numpy(feats, f"{arg} features"), (None if labels is None else _to_numpy(labels, f"{arg} labels"))


def _pt_load_error(path, arg, exc):
    """One line explaining why ``torch.load(path, weights_only=True)`` failed."""
    import re

    text = str(exc)
    found = re.search(r"GLOBAL (\S+)", text)
    if found:
        return (f"{arg} file {path} holds Python objects other than tensors ({found.group(1)}), "
                "which repeval does not unpickle; save torch tensors, e.g. torch.save({'features': "
                "torch.as_tensor(X), 'labels': torch.as_tensor(y)}, path)")
    if "zip archive" in text or isinstance(exc, EOFError):
        return f"{arg} file {path} is a truncated or corrupted PyTorch file (the archive cannot be read)"
    if type(exc).__name__ == "UnpicklingError":
        return f"{arg} file {path} is a corrupted PyTorch file (its contents cannot be unpickled)"
    return f"{arg} file {path} is not a readable PyTorch file ({type(exc).__name__}: {_short(exc)})"


def _short(exc):
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def load_features(path, arg, need_labels=True):
    """Read ``(features, labels)`` from an .npz, .npy or .pt file; validate both.

    Returns
    -------
    features : numpy.ndarray of float64, shape (n, d)
    labels : numpy.ndarray of int64, shape (n,), or None (only when not needed)
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{arg} file not found: {path}")
    if path.is_dir():
        raise InputError(f"{arg} is a directory, not a features file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        feats, labels = _read_npz(path, arg, need_labels)
    elif suffix == ".npy":
        feats, labels = _read_npy(path, arg, need_labels)
    elif suffix in (".pt", ".pth"):
        feats, labels = _read_pt(path, arg, need_labels)
    else:
        raise InputError(f"{arg} file {path} has an unsupported type {suffix or '(none)'}; "
                         "use .npz, .npy or .pt")
    feats = _check_features(feats, arg)
    if labels is not None:
        labels = _check_labels(labels, arg, feats.shape[0])
    return feats, labels


def _check_features(X, arg):
    if X.dtype == object or not (np.issubdtype(X.dtype, np.number) or X.dtype == bool):
        raise InputError(f"{arg}: features must be numeric, got dtype {X.dtype}")
    if np.iscomplexobj(X):
        raise InputError(f"{arg}: features must be real numbers, got dtype {X.dtype}")
    if X.ndim != 2:
        raise InputError(f"{arg}: features must be a 2-D array (n, d), got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise InputError(f"{arg}: features are empty (shape {X.shape})")
    X = X.astype(np.float64)
    finite = np.isfinite(X)
    if not finite.all():
        row = int(np.flatnonzero(~finite.all(axis=1))[0])
        raise InputError(f"{arg}: features contain NaN or infinite values (first in row {row})")
    return X


def _check_labels(y, arg, n):
    if y.dtype == object or not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
        raise InputError(f"{arg}: labels must be integers, got dtype {y.dtype}")
    if y.ndim != 1:
        raise InputError(f"{arg}: labels must be a 1-D array, got shape {y.shape}")
    if y.shape[0] != n:
        raise InputError(f"{arg}: {n} feature rows but {y.shape[0]} labels; they must have the same length")
    if not np.issubdtype(y.dtype, np.integer) and y.dtype != bool:
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise InputError(f"{arg}: labels must be whole numbers (class ids)")
    return y.astype(np.int64)


def _check_classes(y, arg, *, min_per_class=2, why="the probe's model selection splits it"):
    classes, counts = np.unique(y, return_counts=True)
    if classes.size < 2:
        raise InputError(f"{arg}: only one class ({classes[0]}) in the labels; at least 2 are needed")
    small = np.flatnonzero(counts < min_per_class)
    if small.size:
        c = small[0]
        raise InputError(
            f"{arg}: class {classes[c]} has {counts[c]} sample(s); every class needs at least "
            f"{min_per_class} ({why})"
        )
    return classes, counts


def _zero_row_note(X, arg, path):
    """A user-facing sentence when some feature rows are all zeros, else None.

    Cosine similarity (weighted k-NN, low-shot nearest class mean, the cosine-based
    label-free metrics) needs unit-normalised rows, which a zero row does not have.
    """
    zero = np.flatnonzero(~X.any(axis=1))
    if zero.size == 0:
        return None
    more = f" ({zero.size} such rows in all)" if zero.size > 1 else ""
    return (f"{arg} file {path}: feature row {int(zero[0])} is all zeros{more}, so its cosine "
            "similarity is undefined")


# ------------------------------------------------------------------------- protocols


def _acc_entry(correct):
    correct = np.asarray(correct, dtype=bool)
    return _acc_from_counts(int(correct.sum()), int(correct.size))


def _acc_from_counts(k, n):
    from repeval_ref.uncertainty import wilson_interval

    lo, hi = wilson_interval(k, n)
    return {"accuracy": k / n, "correct": k, "n": n, "wilson95": [lo, hi]}


def _knn_predictions(train_x, train_y, test_x, k, n_classes):
    from repeval_ref.knn import knn_classify

    return knn_classify(train_x, train_y, test_x, k, KNN_TAU, n_classes)


def _probe_columns(train_x, seed):
    """Columns kept for the probe: those not constant on the probe's fitting part.

    Replicates the split of :func:`repeval_ref.linear_probe.linear_probe_done_right`
    (the fitting part is ``permutation(n)[n // 5:]``); a constant feature carries no
    information and cannot be standardised.
    """
    n = train_x.shape[0]
    fit = np.random.default_rng(seed).permutation(n)[n // 5:]
    keep = np.ptp(train_x[fit], axis=0) > 0
    if not keep.any():
        raise InputError("TRAIN: every feature is constant; no probe can be fitted")
    return keep


def _probe(train_x, train_y, test_x, test_y, seed, Cs, predictions=False):
    from repeval_ref.linear_probe import linear_probe_done_right

    import warnings

    from sklearn.exceptions import ConvergenceWarning

    keep = _probe_columns(train_x, seed)
    with warnings.catch_warnings(record=True) as probe_warnings:
        warnings.filterwarnings("always", category=ConvergenceWarning)
        best_C, acc = linear_probe_done_right(train_x[:, keep], train_y, test_x[:, keep], test_y,
                                              Cs, seed=seed)
        out = {"best_C": best_C, "dropped_constant_features": int((~keep).sum())}
        if predictions:
            from sklearn.linear_model import LogisticRegression

            tr, te = train_x[:, keep], test_x[:, keep]
            mean, std = tr.mean(axis=0), tr.std(axis=0)
            clf = LogisticRegression(C=best_C, max_iter=2000).fit((tr - mean) / std, train_y)
            result = clf.predict((te - mean) / std) == test_y
        else:
            n_test = test_y.shape[0]
            result = _acc_from_counts(int(round(acc * n_test)), n_test)
    out["convergence_warnings"] = sum(issubclass(w.category, ConvergenceWarning) for w in probe_warnings)
    return out, result


def _ridge(train_x, train_y, test_x, test_y):
    from repeval_ref.ridge import ridge_loo, ridge_probe

    centred = train_x - train_x.mean(axis=0)
    scale = float(np.sum(centred**2)) / train_x.shape[1]
    if not scale > 0:
        raise InputError("TRAIN: every feature is constant; the ridge probe is undefined")
    lams = scale * np.logspace(-6, 2, 17)
    best, press = ridge_loo(train_x, train_y, lams)
    pred = np.argmax(ridge_probe(train_x, train_y, test_x, best), axis=1)
    return {"best_lambda": best, "lambda_grid": lams.tolist(), "press": press.tolist()}, pred == test_y


# ------------------------------------------------------------------ label-free metrics


def _median_distance(X, rng, m=2000):
    from scipy.spatial.distance import pdist

    if X.shape[0] > m:
        X = X[np.sort(rng.choice(X.shape[0], m, replace=False))]
    dist = pdist(X)
    dist = dist[dist > 0]
    if dist.size == 0:
        raise ValueError("all sampled points coincide; no bandwidth can be chosen")
    return float(np.median(dist))


COSINE_METRICS = ("mean_pairwise_cosine", "uniformity", "self_cluster")
ZERO_ROWS_SHORT = "all-zero feature rows, cosine similarity undefined (see the report's note)"


def _label_free(X, args, progress, cosine_skip=None):
    """Every label-free metric on the training features; failures become notes.

    ``cosine_skip``: reason why the metrics on unit-normalised rows
    (:data:`COSINE_METRICS`) cannot run (zero rows); they are then marked skipped.
    """
    from repeval_ref import labelfree

    rng = np.random.default_rng(args.seed)
    out = {}

    def run(name, fn, note=""):
        if cosine_skip and name in COSINE_METRICS:
            out[name] = {"value": None, "note": f"skipped: {ZERO_ROWS_SHORT}"}
            return
        try:
            value = fn()
        except (ValueError, ArithmeticError) as exc:
            out[name] = {"value": None, "note": _short(exc)}
        else:
            out[name] = {"value": value, "note": note}

    progress.step("spectral metrics")
    run("rankme", lambda: labelfree.rankme(X), "not centred (Garrido et al.)")
    run("rankme_normalized", lambda: labelfree.rankme_normalized(X), "RankMe / d (002, RankMe*)")
    run("alpha_req", lambda: labelfree.alpha_req(X), "centred; fit over i in [10, floor(0.9 d)]")
    run("ne_sum", lambda: labelfree.ne_sum(X), "centred; trace / largest eigenvalue")
    run("ne_sum_normalized", lambda: labelfree.ne_sum(X) / X.shape[1], "NE-sum / d")
    run("stable_rank", lambda: labelfree.stable_rank(X), "not centred")
    run("condition_number", lambda: labelfree.condition_number(X), "not centred; non-zero singular values")
    progress.step("geometry")
    run("participation_ratio", lambda: labelfree.participation_ratio(X), "centred")
    run("dims_for_90pct_variance", lambda: labelfree.explained_variance_dimension(X, 0.9), "centred")
    run("isotropy_ratio", lambda: labelfree.isotropy_ratio(X), "centred; smallest / largest eigenvalue")
    run("mean_pairwise_cosine", lambda: labelfree.mean_pairwise_cosine(X), "not centred")
    n_uni = min(X.shape[0], args.pair_samples)
    sub = X if n_uni == X.shape[0] else X[np.sort(rng.choice(X.shape[0], n_uni, replace=False))]
    run("uniformity", lambda: labelfree.uniformity(sub), f"t = 2, on {n_uni} rows")
    out["alignment"] = {"value": None, "note": "needs positive pairs (two views per sample); "
                        "use repeval_ref.alignment"}
    progress.step("relational metrics")
    run("self_cluster", lambda: labelfree.self_cluster(X), "rows l2-normalised")
    try:
        sigma = _median_distance(X, rng)
    except ValueError as exc:
        out["diffusion_spectral_entropy"] = {"value": None, "note": _short(exc)}
    else:
        n_dse = min(X.shape[0], args.dse_samples)
        run("diffusion_spectral_entropy",
            lambda: labelfree.diffusion_spectral_entropy(X, sigma, n_sub=args.dse_samples, rng=rng),
            f"bits; sigma = median pairwise distance = {sigma:.4g}; {n_dse} rows")
    progress.step("intrinsic dimension (TwoNN)")
    unique = np.unique(X, axis=0)
    dup = X.shape[0] - unique.shape[0]
    dup_note = f"; {dup} duplicate rows removed" if dup else ""
    run("two_nn_id", lambda: labelfree.two_nn_id(unique), "all rows" + dup_note)
    try:
        res = labelfree.two_nn_id_batched(unique, batch_size=args.id_batch, rng=rng)
    except ValueError as exc:
        out["two_nn_id_batched"] = {"value": None, "note": _short(exc)}
    else:
        spread = ("std across batches" if res.std is not None
                  else "a single batch, so no spread: lower --id-batch")
        out["two_nn_id_batched"] = {
            "value": res.mean, "std": res.std, "n_batches": int(res.estimates.size),
            "note": f"{res.estimates.size} batch(es) of >= {min(args.id_batch, unique.shape[0])} rows; "
                    + spread + dup_note,
        }
    return out


# ------------------------------------------------------------------------------ plots


def _plots(outdir, spectrum, knn_curve, lowshot):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = {}
    s = np.sqrt(spectrum)
    d = s.size
    s = s[s > np.sqrt(d * np.finfo(float).eps) * s[0]]  # drop rounding residues of zero values
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.loglog(np.arange(1, s.size + 1), s, marker=".", lw=1)
    hi = int(np.floor(0.9 * d))
    if hi > 10:
        ax.axvspan(10, hi, color="0.9", zorder=0, label="alpha-ReQ fit range")
        ax.legend(loc="lower left", fontsize=8)
    ax.set_xlabel("index i")
    ax.set_ylabel(r"singular value $\sigma_i$ (centred)")
    ax.set_title("Singular-value spectrum of TRAIN")
    fig.tight_layout()
    files["spectrum"] = "spectrum.png"
    fig.savefig(outdir / files["spectrum"], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 3.6))
    if knn_curve:
        ks = [e["k"] for e in knn_curve]
        acc = np.array([e["accuracy"] for e in knn_curve])
        lo = np.array([e["wilson95"][0] for e in knn_curve])
        hi = np.array([e["wilson95"][1] for e in knn_curve])
        ax.errorbar(ks, acc, yerr=[acc - lo, hi - acc], marker="o", capsize=3)
        ax.set_xscale("log")
    else:
        ax.text(0.5, 0.5, "skipped: zero feature rows\n(cosine similarity undefined)",
                ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("k (neighbours)")
    ax.set_ylabel("test accuracy (95% Wilson)")
    ax.set_title(f"Weighted k-NN, tau = {KNN_TAU}")
    fig.tight_layout()
    files["knn"] = "knn_vs_k.png"
    fig.savefig(outdir / files["knn"], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 3.6))
    done = [e for e in lowshot if e.get("mean") is not None]
    if done:
        ax.errorbar([e["shots"] for e in done], [e["mean"] for e in done],
                    yerr=[e["std"] for e in done], marker="o", capsize=3)
    ax.set_xscale("log")
    ax.set_xlabel("labelled examples per class")
    ax.set_ylabel("accuracy (mean +- std over draws)")
    ax.set_title("Low-shot nearest class mean")
    fig.tight_layout()
    files["lowshot"] = "lowshot.png"
    fig.savefig(outdir / files["lowshot"], dpi=110)
    plt.close(fig)
    return files


# ----------------------------------------------------------------------------- tables


def _fmt(v, digits=4):
    if v is None:
        return "n/a"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return f"{v:.{digits}g}" if abs(v) >= 1e4 or (v != 0 and abs(v) < 1e-3) else f"{v:.{digits}f}"


def _acc_text(e):
    lo, hi = e["wilson95"]
    return f"{100 * e['accuracy']:.2f}%  [{100 * lo:.2f}, {100 * hi:.2f}]"


def _table(rows, headers):
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join([line, sep] + body)


def _md_table(rows, headers):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _report_rows(rep):
    acc_rows = []
    if rep["knn"].get("skipped"):
        acc_rows.append([f"weighted k-NN (tau={KNN_TAU})", f"skipped: {ZERO_ROWS_SHORT}"])
    for e in rep["knn"]["headline"]:
        acc_rows.append([f"weighted k-NN (k={e['k']}, tau={KNN_TAU})", _acc_text(e)])
    p = rep["linear_probe"]
    dropped = p["dropped_constant_features"]
    extra = f"; {dropped} constant features dropped" if dropped else ""
    acc_rows.append([f"linear probe (C={_fmt(p['best_C'], 3)}, chosen on a split of TRAIN{extra})",
                     _acc_text(p)])
    r = rep["ridge_probe"]
    acc_rows.append([f"ridge probe (lambda={_fmt(r['best_lambda'], 3)}, exact LOO)", _acc_text(r)])
    for e in rep["low_shot"]:
        if e["mean"] is None:
            acc_rows.append([f"low-shot NCM, {e['shots']}-shot", f"skipped: {e['note']}"])
        else:
            acc_rows.append([f"low-shot NCM, {e['shots']}-shot ({e['draws']} draws)",
                             f"{100 * e['mean']:.2f}% +- {100 * e['std']:.2f}"])
    lf_rows = []
    for name, e in rep["label_free"].items():
        val = _fmt(e["value"])
        if e.get("std") is not None:
            val += f" +- {_fmt(e['std'])}"
        lf_rows.append([name, val, e.get("note", "")])
    return acc_rows, lf_rows


# --------------------------------------------------------------------------- commands


def cmd_report(args):
    from repeval_ref.lowshot import low_shot_eval
    from repeval_ref.labelfree.spectrum import gram_spectrum

    progress = Progress(8 + len(KNN_CURVE_KS) + len(SHOTS), enabled=not args.quiet)
    train_x, train_y = load_features(args.train, "TRAIN")
    test_x, test_y = load_features(args.test, "TEST")
    if train_x.shape[1] != test_x.shape[1]:
        raise InputError(f"TRAIN has {train_x.shape[1]} features per row but TEST has {test_x.shape[1]}")
    classes, counts = _check_classes(train_y, "TRAIN")
    unseen = np.setdiff1d(np.unique(test_y), classes)
    if unseen.size:
        raise InputError(f"TEST has label {unseen[0]} that never occurs in TRAIN")
    if test_x.shape[0] < 1:
        raise InputError("TEST has no rows")
    progress.step("features loaded and checked")
    ytr = np.searchsorted(classes, train_y)
    yte = np.searchsorted(classes, test_y)
    K = classes.size
    outdir = Path(args.out)
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory {outdir}: {_short(exc)}") from None

    rep = {
        "inputs": {"train": str(args.train), "test": str(args.test),
                   "n_train": int(train_x.shape[0]), "n_test": int(test_x.shape[0]),
                   "dim": int(train_x.shape[1]), "n_classes": int(K),
                   "classes": classes.tolist(), "seed": args.seed},
    }
    train_zero = _zero_row_note(train_x, "TRAIN", args.train)
    cosine_skip = "; ".join(filter(None, [train_zero, _zero_row_note(test_x, "TEST", args.test)]))
    if cosine_skip:
        rep["skipped"] = cosine_skip
    curve = []
    for k in KNN_CURVE_KS:
        progress.step(f"k-NN k={k}")
        if cosine_skip:
            continue
        e = _acc_entry(_knn_predictions(train_x, ytr, test_x, k, K) == yte)
        e["k"] = k
        e["all_train_points_vote"] = bool(k >= train_x.shape[0])
        curve.append(e)
    rep["knn"] = {"tau": KNN_TAU, "curve": curve,
                  "headline": [e for e in curve if e["k"] in KNN_HEADLINE_KS]}
    if cosine_skip:
        rep["knn"]["skipped"] = cosine_skip
    progress.step("linear probe")
    info, acc_entry = _probe(train_x, ytr, test_x, yte, args.seed, args.probe_c)
    rep["linear_probe"] = {**acc_entry, **info, "C_grid": list(args.probe_c),
                           "selection": "validation split of TRAIN (1/5), never TEST"}
    progress.step("ridge probe (exact leave-one-out)")
    info, correct = _ridge(train_x, ytr, test_x, yte)
    rep["ridge_probe"] = {**_acc_entry(correct), **info}
    low = []
    for shots in SHOTS:
        progress.step(f"low-shot {shots}-shot")
        if cosine_skip:
            low.append({"shots": shots, "mean": None, "std": None, "draws": 0, "note": ZERO_ROWS_SHORT})
            continue
        if shots > counts.min():
            low.append({"shots": shots, "mean": None, "std": None, "draws": 0,
                        "note": f"smallest TRAIN class has {counts.min()} samples"})
            continue
        try:
            m, s = low_shot_eval(train_x, ytr, test_x, yte, shots, args.draws, args.seed)
        except ValueError:  # a support set whose unit features cancel out exactly
            low.append({"shots": shots, "mean": None, "std": None, "draws": 0,
                        "note": "in a random draw the unit features of one class's support set "
                                "average to the zero vector (cosine undefined); try another --seed"})
            continue
        low.append({"shots": shots, "mean": m, "std": s, "draws": args.draws, "note": ""})
    rep["low_shot"] = low
    rep["label_free"] = _label_free(train_x, args, progress, cosine_skip=train_zero)
    progress.step("plots and files")
    spectrum = gram_spectrum(train_x, center=True)
    rep["plots"] = _plots(outdir, spectrum, curve, low)
    acc_rows, lf_rows = _report_rows(rep)
    with open(outdir / "report.json", "w") as fh:
        json.dump(rep, fh, indent=2)
    md = [
        "# repeval report", "",
        f"TRAIN `{args.train}` ({train_x.shape[0]} x {train_x.shape[1]}), TEST `{args.test}` "
        f"({test_x.shape[0]} rows), {K} classes, seed {args.seed}.", "",
    ]
    if cosine_skip:
        md += [f"**Incomplete report.** {cosine_skip}: the weighted k-NN, low-shot nearest "
               "class mean and the cosine-based label-free metrics were skipped.", ""]
    md += ["## Accuracy (95 % Wilson interval)", "", _md_table(acc_rows, ["protocol", "test accuracy"]), ""]
    if curve:
        md += ["k-NN accuracy against k: "
               + ", ".join(f"k={e['k']}: {100 * e['accuracy']:.2f}%" for e in curve) + ".", ""]
    md += [
        "## Label-free metrics (TRAIN features)", "", _md_table(lf_rows, ["metric", "value", "convention"]),
        "", "## Plots", "",
    ]
    md += [f"![{k}]({v})" for k, v in rep["plots"].items()]
    (outdir / "report.md").write_text("\n".join(md) + "\n")
    progress.close()
    print(_table(acc_rows, ["protocol", "test accuracy [95% Wilson]"]))
    print()
    print(_table(lf_rows, ["label-free metric (TRAIN)", "value", "convention"]))
    print(f"\nwrote {outdir / 'report.md'}, {outdir / 'report.json'} and {len(rep['plots'])} plots")
    if cosine_skip:
        return _fail(f"{cosine_skip}; weighted k-NN, low-shot NCM and the cosine-based label-free "
                     f"metrics were skipped (the rest of the report is in {outdir})", EXIT_INPUT)
    return EXIT_OK


def cmd_compare(args):
    from sklearn.model_selection import train_test_split

    from repeval_ref.uncertainty import mcnemar_exact, paired_bootstrap_ci
    from repeval_ref.cka import linear_cka, rbf_cka

    progress = Progress(6, enabled=not args.quiet)
    xa, ya = load_features(args.a, "A", need_labels=False)
    xb, yb = load_features(args.b, "B", need_labels=False)
    if xa.shape[0] != xb.shape[0]:
        raise InputError(f"A has {xa.shape[0]} rows but B has {xb.shape[0]}; compare needs the "
                         "same images in the same order")
    if xa.shape[0] < 4:
        raise InputError(f"A and B need at least 4 rows, got {xa.shape[0]}")
    if ya is not None and yb is not None and not np.array_equal(ya, yb):
        raise InputError("A and B have different labels; compare needs the same images in the same order")
    y = ya if ya is not None else yb
    n = xa.shape[0]
    zero_ab = None
    progress.step("features loaded and checked")
    rng = np.random.default_rng(args.seed)
    res = {"inputs": {"a": str(args.a), "b": str(args.b), "n": int(n),
                      "dim_a": int(xa.shape[1]), "dim_b": int(xb.shape[1]), "seed": args.seed}}
    progress.step("linear CKA")
    try:
        res["linear_cka"] = linear_cka(xa, xb)
        res["linear_cka_debiased"] = linear_cka(xa, xb, debiased=True)
    except ValueError as exc:
        raise InputError(f"CKA is undefined for these inputs: {_short(exc)}") from None
    progress.step("RBF CKA")
    m = min(n, args.cka_samples)
    idx = np.arange(n) if m == n else np.sort(rng.choice(n, m, replace=False))
    try:
        res["rbf_cka"] = rbf_cka(xa[idx], xb[idx], sigma_frac=0.5)
    except ValueError as exc:
        res["rbf_cka"] = None
        res["rbf_cka_note"] = _short(exc)
    else:
        res["rbf_cka_note"] = (f"sigma^2 = 0.5^2 x median squared distance over all n x n pairs "
                               f"(Kornblith et al.'s gram_rbf, threshold 0.5), on {m} rows")
    rows = [["linear CKA", _fmt(res["linear_cka"])],
            ["linear CKA (debiased)", _fmt(res["linear_cka_debiased"])],
            ["RBF CKA (sigma_frac 0.5)", _fmt(res["rbf_cka"])]]
    acc_rows = []
    if y is None:
        res["paired"] = None
        progress.step("no labels: accuracy comparison skipped")
    else:
        classes = _check_classes(y, "labels", why="the images are split into train and test")[0]
        yi = np.searchsorted(classes, y)
        try:
            tr, te = train_test_split(np.arange(n), test_size=args.test_fraction,
                                      stratify=yi, random_state=args.seed)
        except ValueError as exc:
            raise InputError(f"cannot split the images into train and test: {_short(exc)}") from None
        tr, te = np.sort(tr), np.sort(te)
        K = classes.size
        res["paired"] = {"split": {"n_train": int(tr.size), "n_test": int(te.size),
                                   "test_fraction": args.test_fraction, "stratified": True}}
        zero_ab = "; ".join(filter(None, [_zero_row_note(xa, "A", args.a),
                                          _zero_row_note(xb, "B", args.b)]))
        for proto in ("knn", "probe"):
            progress.step(f"{proto} predictions of A and B")
            if proto == "knn" and zero_ab:
                res["paired"]["knn"] = {"skipped": zero_ab}
                acc_rows.append([f"k-NN (k={args.k}, tau={KNN_TAU})", "skipped: all-zero rows",
                                 "(cosine similarity undefined)", "", ""])
                continue
            correct = {}
            for name, X in (("A", xa), ("B", xb)):
                if proto == "knn":
                    pred = _knn_predictions(X[tr], yi[tr], X[te], args.k, K)
                    correct[name] = pred == yi[te]
                else:
                    _, correct[name] = _probe(X[tr], yi[tr], X[te], yi[te], args.seed, args.probe_c,
                                              predictions=True)
            gain, lo, hi = paired_bootstrap_ci(correct["A"], correct["B"], args.boot, args.seed)
            p = mcnemar_exact(correct["A"], correct["B"])
            label = f"k-NN (k={args.k}, tau={KNN_TAU})" if proto == "knn" else "linear probe"
            res["paired"][proto] = {"A": _acc_entry(correct["A"]), "B": _acc_entry(correct["B"]),
                                    "gain_B_minus_A": gain, "bootstrap95": [lo, hi],
                                    "n_boot": args.boot, "mcnemar_p": p}
            acc_rows.append([label, _acc_text(res["paired"][proto]["A"]), _acc_text(res["paired"][proto]["B"]),
                             f"{100 * gain:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]", _fmt(p)])
    progress.step("done")
    progress.close()
    print(_table(rows, ["similarity", "value"]))
    if acc_rows:
        print()
        print(_table(acc_rows, ["protocol", "A [95% Wilson]", "B [95% Wilson]",
                                "B - A, pts [95% paired bootstrap]", "McNemar p"]))
    else:
        print("\nno labels in A or B: paired accuracy comparison skipped")
    if args.out:
        outdir = Path(args.out)
        try:
            outdir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create output directory {outdir}: {_short(exc)}") from None
        with open(outdir / "compare.json", "w") as fh:
            json.dump(res, fh, indent=2)
        print(f"\nwrote {outdir / 'compare.json'}")
    if y is not None and zero_ab:
        return _fail(f"{zero_ab}; the paired k-NN comparison was skipped", EXIT_INPUT)
    return EXIT_OK


# ----------------------------------------------------------------------------- parser


class _Parser(argparse.ArgumentParser):
    """Argument errors in one line (exit status 2), with a pointer to --help."""

    def error(self, message):
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _fraction(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {v}")
    return v


FILES_HELP = """\
input files:
  .npz       arrays 'features' (n, d) and 'labels' (n,) of integer class ids
  .npy       the features; labels are read from the sibling file whose name has
             'features' replaced by 'labels' (train_features.npy -> train_labels.npy),
             or NAME_labels.npy when the name does not contain 'features'
  .pt/.pth   torch.save of {'features': tensor, 'labels': tensor} or (features, labels)

Bad input (missing file or key, length mismatch, NaN/inf, non-numeric data, a single
class, a class too small to split) ends with a one-line message and exit status 2.
An all-zero feature row has no cosine similarity: the cosine-based parts (weighted
k-NN, low-shot NCM, cosine label-free metrics) are skipped, the rest is still written,
and the command ends with a one-line message naming the file and row, exit status 2."""


def _c_grid(text):
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive numbers, got {text!r}") from None
    if not values or any(not (np.isfinite(v) and v > 0) for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive numbers, got {text!r}")
    return tuple(values)


def _wrap(text):
    import textwrap

    return textwrap.fill(text, width=88)


PROBE_C_HELP = ("candidate inverse regularisation strengths C of the logistic-regression probe, "
                "comma separated, tried in order on a validation split of the training part "
                "(default: 1e-4,1e-3,...,100)")


def build_parser():
    parser = _Parser(
        prog="repeval",
        description=_wrap("Evaluate learned representations on your own features: labelled "
                    "protocols with honest error bars, label-free metrics, and "
                    "comparisons of two encoders (the repeval course's reference package)."),
        epilog=FILES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version="%(prog)s " + _version())
    sub = parser.add_subparsers(dest="command", metavar="{report,compare}")

    rp = sub.add_parser(
        "report", help="evaluate one representation (train and test features)",
        description=_wrap("Weighted k-NN (k = 20 and 200, tau = 0.07, plus a curve over k), the "
                    "linear probe with C chosen on a validation split of TRAIN (never TEST), "
                    "the ridge probe with lambda chosen by exact leave-one-out, low-shot "
                    "nearest-class-mean accuracy at 1, 5 and 20 shots, 95% Wilson intervals "
                    "on every accuracy, and every label-free metric on the TRAIN features. "
                    "Writes report.md, report.json and PNG plots to --out."),
        epilog=FILES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rp.add_argument("train", metavar="TRAIN", help="training features and labels (.npz, .npy or .pt)")
    rp.add_argument("test", metavar="TEST", help="test features and labels, same feature dimension")
    rp.add_argument("--out", default="repeval_report", metavar="DIR",
                    help="output directory, created if needed (default: %(default)s)")
    rp.add_argument("--seed", type=int, default=0,
                    help="seed of every random choice: probe validation split, low-shot draws, "
                         "subsamples (default: %(default)s)")
    rp.add_argument("--draws", type=_positive_int, default=10,
                    help="low-shot support draws per shot count, >= 2 (default: %(default)s)")
    rp.add_argument("--dse-samples", type=_positive_int, default=2000, metavar="N",
                    help="rows used by the diffusion spectral entropy, an N x N eigenproblem "
                         "(002 uses 10000; default: %(default)s)")
    rp.add_argument("--pair-samples", type=_positive_int, default=5000, metavar="N",
                    help="rows used by the all-pairs uniformity (default: %(default)s)")
    rp.add_argument("--id-batch", type=_positive_int, default=1000, metavar="N",
                    help="batch size of the batched TwoNN dimension (default: %(default)s)")
    rp.add_argument("--probe-c", type=_c_grid, default=PROBE_CS, metavar="C1,C2,...", help=PROBE_C_HELP)
    rp.add_argument("--quiet", action="store_true", help="no progress bar")
    rp.set_defaults(func=cmd_report)

    cp = sub.add_parser(
        "compare", help="compare two representations of the same images",
        description=_wrap("Linear CKA (biased and debiased) and RBF CKA between A and B (same "
                    "images, same order: two encoders or two layers). With labels, the "
                    "images are split once (stratified) into train and test, and the k-NN "
                    "and linear-probe predictions of A and B on the same test images are "
                    "compared: accuracy with 95% Wilson intervals, the gain of B over A "
                    "with a paired bootstrap interval, and the exact McNemar p-value."),
        epilog=FILES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cp.add_argument("a", metavar="A", help="features of encoder/layer A (labels optional)")
    cp.add_argument("b", metavar="B", help="features of encoder/layer B for the same images")
    cp.add_argument("--test-fraction", type=_fraction, default=0.25,
                    help="share of images held out for testing (default: %(default)s)")
    cp.add_argument("--k", type=_positive_int, default=20, help="k of the weighted k-NN (default: %(default)s)")
    cp.add_argument("--boot", type=_positive_int, default=10000,
                    help="paired bootstrap replicates (default: %(default)s)")
    cp.add_argument("--cka-samples", type=_positive_int, default=2000, metavar="N",
                    help="rows used by RBF CKA, which forms N x N kernels (default: %(default)s)")
    cp.add_argument("--seed", type=int, default=0,
                    help="seed of the split, bootstrap and subsample (default: %(default)s)")
    cp.add_argument("--out", metavar="DIR", default=None, help="also write compare.json to DIR")
    cp.add_argument("--probe-c", type=_c_grid, default=PROBE_CS, metavar="C1,C2,...", help=PROBE_C_HELP)
    cp.add_argument("--quiet", action="store_true", help="no progress bar")
    cp.set_defaults(func=cmd_compare)
    return parser


def _version():
    from repeval_ref import __version__

    return __version__


def main(argv=None):
    """Entry point of the ``repeval`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    if args.command == "report" and args.draws < 2:
        parser.error("--draws must be at least 2 (a spread needs two draws)")
    if args.command == "report" and args.id_batch < 3:
        parser.error("--id-batch must be at least 3")
    try:
        return args.func(args)
    except InputError as exc:
        return _fail(str(exc), EXIT_INPUT)
    except (ValueError, TypeError) as exc:
        if os.environ.get("REPEVAL_TRACEBACK"):
            raise
        return _fail(_short(exc), EXIT_INPUT)
    except MemoryError:
        return _fail("out of memory; use smaller subsample options", EXIT_INTERNAL)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:  # noqa: BLE001 - never show a traceback to the user
        if os.environ.get("REPEVAL_TRACEBACK"):
            raise
        return _fail(f"internal error ({type(exc).__name__}: {_short(exc)}); "
                     "set REPEVAL_TRACEBACK=1 to see the traceback", EXIT_INTERNAL)


def _fail(message, status):
    sys.stderr.write(f"repeval: error: {message}\n")
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
