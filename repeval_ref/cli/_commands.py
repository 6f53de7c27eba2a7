"""``repeval report`` and ``repeval compare``: one encoder, or two, on the user's features."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import _render as R
from ._evaluate import (KNN_CURVE_KS, KNN_HEADLINE_KS, KNN_TAU, ZERO_ROWS_SHORT, acc_entry,
                        blas_threads, knn_section, label_free_section, low_shot_section, probe_section,
                        ridge_section)
from ._inputs import (InputError, _check_classes, _short, _zero_row_note, load_features, load_split,
                      split_folder, stratified_split)
from ._progress import Progress


def class_indices(train_y, test_y, arg_test="TEST"):
    """Classes of TRAIN, and both label arrays as indices into them (-1: unseen in TRAIN)."""
    classes, counts = _check_classes(train_y, "TRAIN")
    pos = np.searchsorted(classes, test_y).clip(0, classes.size - 1)
    yte = np.where(classes[pos] == test_y, pos, -1)
    if np.all(yte < 0):
        raise InputError(f"{arg_test} has label {test_y[0]} that never occurs in TRAIN "
                         f"(no {arg_test} label does)")
    return classes, counts, np.searchsorted(classes, train_y), yte


def report_verdicts(rep, train_x, train_y, test_y, spectrum, n_zero_rows):
    from ..verdicts import (chance_verdict, collapse_verdict, dropped_features_verdict,
                            few_per_class_verdict, spectrum_cliff_verdict, unseen_labels_verdict)

    out = []
    for e in rep["knn"]["headline"][:1]:
        out.append(chance_verdict(e["correct"], e["n"], test_y, f"weighted k-NN (k={e['k']})"))
    p = rep["linear_probe"]
    out.append(chance_verdict(p["correct"], p["n"], test_y, "the linear probe"))
    lf = rep["label_free"]
    out.append(collapse_verdict(lf["rankme"]["value"], lf["mean_pairwise_cosine"]["value"],
                                int(train_x.shape[1]), lf["participation_ratio"]["value"]))
    out.append(spectrum_cliff_verdict(spectrum))
    out.append(dropped_features_verdict(p["dropped_constant_features"], n_zero_rows,
                                        int(train_x.shape[1]), int(train_x.shape[0])))
    out.append(few_per_class_verdict(train_y))
    out.append(unseen_labels_verdict(train_y, test_y))
    return out


def cmd_report(args):
    from ..labelfree.spectrum import gram_spectrum

    progress = Progress(enabled=not args.quiet)
    train_x, train_y, test_x, test_y, src = load_split(args.train, args.test,
                                                       test_fraction=args.test_fraction, seed=args.seed)
    if train_x.shape[1] != test_x.shape[1]:
        raise InputError(f"TRAIN has {train_x.shape[1]} features per row but TEST has {test_x.shape[1]}")
    classes, counts, ytr, yte = class_indices(train_y, test_y)
    K = classes.size
    outdir = Path(args.out)
    if outdir.exists() and not outdir.is_dir():
        raise InputError(f"cannot create output directory {outdir}: a file of that name exists")

    rep = {"inputs": {"train": src["train"], "test": src["test"], "split": src["split"],
                      "n_train": int(train_x.shape[0]), "n_test": int(test_x.shape[0]),
                      "dim": int(train_x.shape[1]), "n_classes": int(K),
                      "classes": classes.tolist(), "seed": args.seed}}
    train_zero = _zero_row_note(train_x, "TRAIN", src["train"])
    test_zero = _zero_row_note(test_x, "TEST", src["test"] or src["train"])
    cosine_skip = "; ".join(filter(None, [train_zero, test_zero]))
    n_zero = int((~train_x.any(axis=1)).sum() + (~test_x.any(axis=1)).sum())
    if cosine_skip:
        rep["skipped"] = cosine_skip
        curve = []
    else:
        curve, _ = knn_section(train_x, ytr, test_x, yte, K, progress)
    rep["knn"] = {"tau": KNN_TAU, "curve": curve,
                  "headline": [e for e in curve if e["k"] in KNN_HEADLINE_KS]}
    if cosine_skip:
        rep["knn"]["skipped"] = cosine_skip
    with blas_threads(args.blas_threads):
        info, entry, _ = probe_section(train_x, ytr, test_x, yte, args.seed, args.probe_c, progress)
        rep["linear_probe"] = {**entry, **info, "C_grid": list(args.probe_c),
                               "selection": "validation split of TRAIN (1/5), never TEST"}
        progress.stage("ridge probe (exact leave-one-out)")
        rep["ridge_probe"] = ridge_section(train_x, ytr, test_x, yte)
        rep["low_shot"] = low_shot_section(train_x, ytr, test_x, yte, counts, args.draws, args.seed,
                                           cosine_skip=cosine_skip, progress=progress)
        rep["label_free"] = label_free_section(
            train_x, seed=args.seed, pair_samples=args.pair_samples, dse_samples=args.dse_samples,
            id_batch=args.id_batch, id_samples=args.id_samples, cosine_skip=train_zero, progress=progress)
        progress.stage("verdicts, plots and files")
        spectrum = gram_spectrum(train_x, center=True)
    rep["verdicts"] = report_verdicts(rep, train_x, train_y, test_y, spectrum, n_zero)
    plots = R.report_plots(spectrum, curve, rep["low_shot"])
    rep["plots"] = {name.split(".")[0].replace("knn_vs_k", "knn"): name for name in plots}
    acc_rows, lf_rows = R.report_rows(rep)
    verdict_text = R.verdict_lines(rep["verdicts"])
    what = (f"TRAIN `{src['train']}` ({train_x.shape[0]} x {train_x.shape[1]}), TEST "
            + (f"`{src['test']}`" if src["test"] else
               f"a stratified {src['split']['test_fraction']:g} of it (seed {args.seed})")
            + f" ({test_x.shape[0]} rows), {K} classes, seed {args.seed}.")
    md = ["# repeval report", "", what, ""]
    if cosine_skip:
        md += [f"**Incomplete report.** {cosine_skip}: the weighted k-NN, low-shot nearest "
               "class mean and the cosine-based label-free metrics were skipped.", ""]
    md += ["## Verdicts", ""] + verdict_text + [""]
    md += ["## Accuracy (95 % Wilson interval)", "", R.md_table(acc_rows, ["protocol", "test accuracy"]), ""]
    if curve:
        md += ["Weighted k-NN accuracy against k: "
               + ", ".join(f"k={e['k']}: {100 * e['accuracy']:.2f}%" for e in curve) + ".", ""]
    md += ["## Label-free metrics (TRAIN features)", "",
           R.md_table(lf_rows, ["metric", "value", "convention"]), "", "## Plots", ""]
    md += [f"![{k}]({v})" for k, v in rep["plots"].items()]
    try:
        R.write_files(outdir, {**plots, "report.json": json.dumps(rep, indent=2, default=_plain),
                               "report.md": "\n".join(md) + "\n"})
    except OSError as exc:
        raise InputError(f"cannot write the report to {outdir}: {_short(exc)}") from None
    print(R.table(acc_rows, ["protocol", "test accuracy [95% Wilson]"]))
    print()
    print(R.table(lf_rows, ["label-free metric (TRAIN)", "value", "convention"]))
    print("\nverdicts:")
    print("\n".join(verdict_text))
    print(f"\nwrote {outdir / 'report.md'}, {outdir / 'report.json'} and {len(plots)} plots")
    if cosine_skip:
        return _fail(f"{cosine_skip}; weighted k-NN, low-shot nearest class mean and the cosine-based "
                     f"label-free metrics were skipped (the rest of the report is in {outdir})")
    return 0


def _plain(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _fail(message, status=2):
    import sys

    sys.stderr.write(f"repeval: error: {message}\n")
    return status


def _load_for_compare(path, arg):
    """Features (and labels) of one input of ``compare``; a loop model folder is train + test."""
    pair = split_folder(path) if Path(path).is_dir() else None
    if pair is None:
        return load_features(path, arg, need_labels=False)
    xa, ya = load_features(pair[0], arg)
    xb, yb = load_features(pair[1], arg)
    if xa.shape[1] != xb.shape[1]:
        raise InputError(f"{arg}: the train and test features in {path} have different dimensions")
    return np.vstack([xa, xb]), np.concatenate([ya, yb])


#: ``compare``: a difference counts as established when the bootstrap interval excludes 0 and
#: McNemar's p is below this level; the two are flagged as disagreeing when only one holds.
COMPARE_ALPHA = 0.05

READ_TOGETHER = ("how to read them together: the paired bootstrap interval is a range for the "
                 "accuracy difference; McNemar's exact test asks whether the images only one "
                 "encoder gets right split evenly. With few such images the test is coarse and the "
                 "two can disagree; call a difference established only when the interval excludes "
                 f"0 and p < {COMPARE_ALPHA:g}")


def cmd_compare(args):
    from ..knn import knn_classify
    from ..uncertainty import mcnemar_exact, paired_bootstrap_ci
    from ..cka import linear_cka, rbf_cka

    progress = Progress(enabled=not args.quiet)
    xa, ya = _load_for_compare(args.a, "A")
    xb, yb = _load_for_compare(args.b, "B")
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
    rng = np.random.default_rng(args.seed)
    res = {"inputs": {"a": str(args.a), "b": str(args.b), "n": int(n),
                      "dim_a": int(xa.shape[1]), "dim_b": int(xb.shape[1]), "seed": args.seed}}
    progress.stage("linear and RBF CKA")
    try:
        res["linear_cka"] = linear_cka(xa, xb)
        res["linear_cka_debiased"] = linear_cka(xa, xb, debiased=True)
    except ValueError as exc:
        raise InputError(f"CKA is undefined for these inputs: {_short(exc)}") from None
    m = min(n, args.cka_samples)
    idx = np.arange(n) if m == n else np.sort(rng.choice(n, m, replace=False))
    try:
        res["rbf_cka"] = rbf_cka(xa[idx], xb[idx], sigma_frac=0.5)
    except ValueError as exc:
        res["rbf_cka"] = None
        res["rbf_cka_note"] = _short(exc)
    else:
        res["rbf_cka_note"] = (f"sigma^2 = 0.5^2 x median squared distance over all n x n pairs "
                               f"(Kornblith et al.'s RBF kernel, threshold 0.5), on {m} rows")
    rows = [["linear CKA", R.fmt(res["linear_cka"])],
            ["linear CKA (debiased)", R.fmt(res["linear_cka_debiased"])],
            ["RBF CKA (sigma_frac 0.5)", R.fmt(res["rbf_cka"])]]
    acc_rows = []
    if y is None:
        res["paired"] = None
    else:
        classes = _check_classes(y, "labels", why="the images are split into train and test")[0]
        yi = np.searchsorted(classes, y)
        tr, te = stratified_split(y, args.test_fraction, args.seed, "labels")
        K = classes.size
        res["paired"] = {"split": {"n_train": int(tr.size), "n_test": int(te.size),
                                   "test_fraction": args.test_fraction, "stratified": True}}
        zero_ab = "; ".join(filter(None, [_zero_row_note(xa, "A", args.a),
                                          _zero_row_note(xb, "B", args.b)]))
        for proto in ("knn", "probe"):
            if proto == "knn" and zero_ab:
                res["paired"]["knn"] = {"skipped": zero_ab}
                acc_rows.append([f"weighted k-NN (k={args.k}, tau={KNN_TAU})", "skipped: all-zero rows",
                                 "(cosine similarity undefined)", "", ""])
                continue
            correct = {}
            for name, X in (("A", xa), ("B", xb)):
                if proto == "knn":
                    progress.stage(f"weighted k-NN of {name}")
                    correct[name] = knn_classify(X[tr], yi[tr], X[te], args.k, KNN_TAU, K) == yi[te]
                else:
                    with blas_threads(args.blas_threads):
                        _, _, pred = probe_section(X[tr], yi[tr], X[te], yi[te], args.seed,
                                                   args.probe_c, progress)
                    correct[name] = pred == yi[te]
            gain, lo, hi = paired_bootstrap_ci(correct["A"], correct["B"], args.boot, args.seed)
            p = mcnemar_exact(correct["A"], correct["B"])
            label = f"weighted k-NN (k={args.k}, tau={KNN_TAU})" if proto == "knn" else "linear probe"
            disagree = (lo > 0 or hi < 0) != (p < COMPARE_ALPHA)
            res["paired"][proto] = {"A": acc_entry(correct["A"]), "B": acc_entry(correct["B"]),
                                    "gain_B_minus_A": gain, "bootstrap95": [lo, hi],
                                    "n_boot": args.boot, "mcnemar_p": p,
                                    "discordant": int(np.sum(correct["A"] != correct["B"])),
                                    "interval_and_test_disagree": bool(disagree)}
            acc_rows.append([label, R.acc_text(res["paired"][proto]["A"]),
                             R.acc_text(res["paired"][proto]["B"]),
                             f"{100 * gain:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]", R.fmt(p)])
    print(R.table(rows, ["similarity", "value"]))
    if acc_rows:
        print()
        print(R.table(acc_rows, ["protocol", "A [95% Wilson]", "B [95% Wilson]",
                                 "B - A, pts [95% paired bootstrap]", "McNemar p"]))
        print()
        for proto, e in res["paired"].items():
            if isinstance(e, dict) and e.get("interval_and_test_disagree"):
                print(f"{proto}: the bootstrap interval and McNemar's test disagree "
                      f"({e['discordant']} images where only one encoder is right)")
        print(R._wrap(READ_TOGETHER + "."))
        res["how_to_read"] = READ_TOGETHER
    else:
        print("\nno labels in A or B: paired accuracy comparison skipped")
    if args.out:
        outdir = Path(args.out)
        try:
            R.write_files(outdir, {"compare.json": json.dumps(res, indent=2, default=_plain)})
        except OSError as exc:
            raise InputError(f"cannot write to output directory {outdir}: {_short(exc)}") from None
        print(f"\nwrote {outdir / 'compare.json'}")
    if y is not None and zero_ab:
        return _fail(f"{zero_ab}; the paired k-NN comparison was skipped")
    return 0


__all__ = ["cmd_report", "cmd_compare", "COMPARE_ALPHA", "KNN_CURVE_KS", "ZERO_ROWS_SHORT"]
