"""``repeval report`` and ``repeval compare``: one encoder, or two, on the user's features.

Each command is a frozen settings object (:class:`ReportSettings`, :class:`CompareSettings`),
a function that computes from it and writes nothing (:func:`run_report`,
:func:`run_compare`) and a thin ``cmd_*`` that runs it and writes the files and the
terminal lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import _evaluate as E
from . import _render as R
from ._arguments import PROBE_C_HELP, Settings, add_command, add_options, positive_int
from ._evaluate import (
    acc_entry,
    blas_threads,
    class_indices,
    knn_curve_predictions,
    knn_section,
    label_free_section,
    low_shot_section,
    probe_section,
    ridge_section,
)
from ._inputs import (
    InputError,
    _short,
    check_out_dir,
    load_split,
    prepare_split,
    read_input,
    refuse_zero_rows,
    split_text,
)
from ._progress import Progress


def report_verdicts(rep, train_x, train_y, test_y, spectrum):
    """The report's verdicts (all-zero rows never get here: the inputs refuse them)."""
    from ..verdicts import (
        chance_verdict,
        collapse_verdict,
        dropped_features_verdict,
        few_per_class_verdict,
        spectrum_cliff_verdict,
        unseen_labels_verdict,
    )

    out = []
    for e in rep["knn"]["headline"][:1]:
        out.append(chance_verdict(e["correct"], e["n"], test_y, f"weighted k-NN (k={e['k']})"))
    p = rep["linear_probe"]
    out.append(chance_verdict(p["correct"], p["n"], test_y, "the linear probe"))
    lf = rep["label_free"]
    out.append(
        collapse_verdict(
            lf["rankme"]["value"],
            lf["mean_pairwise_cosine"]["value"],
            int(train_x.shape[1]),
            lf["participation_ratio"]["value"],
        )
    )
    out.append(spectrum_cliff_verdict(spectrum))
    out.append(
        dropped_features_verdict(
            p["dropped_constant_features"], 0, int(train_x.shape[1]), int(train_x.shape[0])
        )
    )
    out.append(few_per_class_verdict(train_y))
    out.append(unseen_labels_verdict(train_y, test_y))
    return out


def _report_inputs(args, progress=None):
    """Read and check the inputs of :class:`ReportSettings` ``args``; ``(train_x, train_y,
    test_x, test_y, src)``."""
    train_x, train_y, test_x, test_y, src = load_split(
        args.train, args.test, progress=progress, test_fraction=args.test_fraction, seed=args.seed
    )
    if train_x.shape[1] != test_x.shape[1]:
        raise InputError(
            f"TRAIN has {train_x.shape[1]} features per row but TEST has {test_x.shape[1]} "
            f"({src['who'][0]}, {src['who'][1]})"
        )
    return train_x, train_y, test_x, test_y, src


def _report_header(src, train_x, test_x, K, seed):
    """The sentence saying what was read, how it was split and with which seed."""
    test = (
        f"TEST `{src['test']}`"
        if src["test"]
        else f"TEST a stratified {src['split']['test_fraction']:g} of it (seed {seed})"
    )
    return (
        f"TRAIN `{src['train']}` ({train_x.shape[0]} x {train_x.shape[1]}), {test} "
        f"({test_x.shape[0]} rows), {K} classes, seed {seed} (probe validation split, "
        "low-shot draws, subsamples)."
    )


@dataclass(frozen=True)
class ReportSettings(Settings):
    """Everything ``repeval report`` computes from; the fields are its options (``repeval report
    --help``)."""

    train: str
    test: str | None = None
    test_fraction: float | None = None
    seed: int = 0
    draws: int = E.LOW_SHOT_DRAWS
    dse_samples: int = 2000
    pair_samples: int = 5000
    id_samples: int = 10000
    id_batch: int = 1000
    probe_c: tuple = E.PROBE_CS
    blas_threads: int = 1

    def __post_init__(self):
        self._check_at_least(
            draws=2, dse_samples=1, pair_samples=1, id_samples=1, id_batch=3, blas_threads=1
        )
        object.__setattr__(self, "probe_c", tuple(float(c) for c in self.probe_c))


def run_report(settings: ReportSettings, progress=None):
    """Every protocol and label-free metric on one encoder's features; nothing is written.

    An all-zero feature row is refused (:class:`InputError` naming the file and the
    row): cosine similarity is undefined for it, and the report neither drops images
    nor leaves a protocol out.

    Parameters
    ----------
    settings : ReportSettings
    progress : Progress, optional
        Receives a line per file read and per protocol, and the k-NN's and probe's
        progress (default: silent).

    Returns
    -------
    dict
        ``report``: what ``report.json`` holds but its ``plots`` (``inputs``, ``knn``,
        ``linear_probe``, ``ridge_probe``, ``low_shot``, ``label_free``, ``verdicts``);
        ``spectrum``: the centred Gram spectrum of TRAIN, shape (min(n, d),), for the
        plots; ``header``: the sentence saying what was read and how it was split.
    """
    if not isinstance(settings, ReportSettings):
        raise ValueError(f"settings must be a ReportSettings, got {type(settings).__name__}")
    args = settings
    progress = progress if progress is not None else Progress(enabled=False)
    train_x, train_y, test_x, test_y, src = _report_inputs(
        args, progress
    )  # before the heavy imports
    from ..labelfree.spectrum import gram_spectrum

    who = src["who"]
    classes, counts, ytr, yte = class_indices(train_y, test_y, who, src["test_rows"])
    K = classes.size
    rep = {
        "inputs": {
            "train": src["train"],
            "test": src["test"],
            "split": src["split"],
            "n_train": int(train_x.shape[0]),
            "n_test": int(test_x.shape[0]),
            "dim": int(train_x.shape[1]),
            "n_classes": int(K),
            "classes": classes.tolist(),
            "seed": args.seed,
        }
    }
    curve, _ = knn_section(train_x, ytr, test_x, yte, K, progress)
    rep["knn"] = {
        "tau": E.KNN_TAU,
        "curve": curve,
        "headline": [e for e in curve if e["k"] in E.KNN_HEADLINE_KS],
    }
    with blas_threads(args.blas_threads):
        info, entry, _ = probe_section(
            train_x, ytr, test_x, yte, args.seed, args.probe_c, progress, who[0]
        )
        rep["linear_probe"] = {
            **entry,
            **info,
            "C_grid": list(args.probe_c),
            "selection": "validation split of TRAIN (1/5), never TEST",
        }
        progress.stage("ridge probe (exact leave-one-out)")
        rep["ridge_probe"] = ridge_section(train_x, ytr, test_x, yte, who[0])
        rep["low_shot"] = low_shot_section(
            train_x, ytr, test_x, yte, counts, args.draws, args.seed, progress=progress
        )
        rep["label_free"] = label_free_section(
            train_x,
            seed=args.seed,
            pair_samples=args.pair_samples,
            dse_samples=args.dse_samples,
            id_batch=args.id_batch,
            id_samples=args.id_samples,
            progress=progress,
        )
        progress.stage("verdicts, plots and files")
        spectrum = gram_spectrum(train_x, center=True)
    rep["verdicts"] = report_verdicts(rep, train_x, train_y, test_y, spectrum)
    return {
        "report": rep,
        "spectrum": spectrum,
        "header": _report_header(src, train_x, test_x, K, args.seed),
    }


def cmd_report(args):
    """``repeval report``: :func:`run_report` on the parsed settings, then the files and the
    terminal lines."""
    outdir = check_out_dir(args.out)
    result = run_report(ReportSettings.from_args(args), Progress(enabled=not args.quiet))
    rep, what = result["report"], result["header"]
    plots = R.report_plots(result["spectrum"], rep["knn"]["curve"], rep["low_shot"])
    rep["plots"] = {name.split(".")[0].replace("knn_vs_k", "knn"): name for name in plots}
    md = _report_markdown(rep, what)
    try:
        R.write_files(
            outdir,
            {
                **plots,
                "report.json": json.dumps(rep, indent=2, default=R.json_default),
                "report.md": md,
            },
        )
    except OSError as exc:
        raise InputError(f"cannot write the report to {outdir}: {_short(exc)}") from None
    _print_report(rep, what, outdir, len(plots))
    return 0


def _report_markdown(rep, what):
    acc_rows, lf_rows = R.report_rows(rep)
    draws = {e["draws"] for e in rep["low_shot"] if e["mean"] is not None}
    md = (
        ["# repeval report", "", what, "", "## Verdicts", ""]
        + R.verdict_lines(rep["verdicts"])
        + [""]
    )
    md += [
        "## Accuracy",
        "",
        "Every accuracy comes with its 95 % Wilson interval in brackets. The low-shot rows are "
        f"different: {R.LOWSHOT_SPREAD}"
        + (f" ({', '.join(map(str, sorted(draws)))} draws per shot count)." if draws else "."),
        "",
        R.md_table(acc_rows, ["protocol", R.ACCURACY_HEADER]),
        "",
    ]
    curve = rep["knn"]["curve"]
    md += [
        "Weighted k-NN accuracy against k: "
        + ", ".join(f"k={e['k']}: {100 * e['accuracy']:.2f}%" for e in curve)
        + ".",
        "",
    ]
    md += [
        "## Label-free metrics (TRAIN features)",
        "",
        R.md_table(lf_rows, ["metric", "value", "convention"]),
        "",
        "## Plots",
        "",
    ]
    md += [f"![{k}]({v})" for k, v in rep["plots"].items()]
    return "\n".join(md) + "\n"


def _print_report(rep, what, outdir, n_plots):
    acc_rows, lf_rows = R.report_rows(rep, plus="+-")
    print(R._wrap(what.replace("`", "")))
    print()
    print(R.table(acc_rows, ["protocol", R.ACCURACY_HEADER.replace("±", "+-")]))
    print()
    print(R.table(lf_rows, ["label-free metric (TRAIN)", "value", "convention"]))
    print("\nverdicts:")
    print("\n".join(R.verdict_lines(rep["verdicts"])))
    print(f"\nwrote {outdir / 'report.md'}, {outdir / 'report.json'} and {n_plots} plots")


def _compare_inputs(args, progress=None):
    """Read A and B of :class:`CompareSettings` ``args``, check that they hold the same images.

    Returns ``(a, b)`` as :class:`~._inputs.Input`.
    """
    a = read_input(args.a, "A", need_labels=False, progress=progress)
    b = read_input(args.b, "B", need_labels=False, progress=progress)
    if a.x.shape[0] != b.x.shape[0]:
        raise InputError(
            f"A has {a.x.shape[0]} rows but B has {b.x.shape[0]} (A: {a.path}, B: {b.path}); "
            "compare needs the same images in the same order"
        )
    if a.x.shape[0] < 4:
        raise InputError(
            f"A and B need at least 4 rows, got {a.x.shape[0]} (A: {a.path}, B: {b.path})"
        )
    if a.y is not None and b.y is not None and not np.array_equal(a.y, b.y):
        row = int(np.flatnonzero(a.y != b.y)[0])
        raise InputError(
            f"A and B have different labels (first at row {row}; A: {a.path}, B: {b.path}); "
            "compare needs the same images in the same order"
        )
    if a.sizes != b.sizes and (a.y is not None or b.y is not None):
        raise InputError(
            f"A ({a.path}) and B ({b.path}) are split differently into train and test "
            "(give both as one file each, or both as loop folders)"
        )
    return a, b


def _name_line(inp, role):
    parts = " + ".join(str(f) for f in inp.files) if len(inp.files) > 1 else str(inp.files[0])
    return f"{role} = {inp.path} ({inp.x.shape[0]} x {inp.x.shape[1]}; read from {parts})"


#: ``compare``: a difference counts as established when the bootstrap interval excludes 0 and
#: McNemar's p is below this level; the two are flagged as disagreeing when only one holds.
COMPARE_ALPHA = 0.05

READ_TOGETHER = (
    "how to read them together: the paired bootstrap interval is a range for the "
    "accuracy difference; McNemar's exact test asks whether the images only one "
    "encoder gets right split evenly. With few such images the test is coarse and the "
    "two can disagree; call a difference established only when the interval excludes "
    f"0 and p < {COMPARE_ALPHA:g}"
)


@dataclass(frozen=True)
class CompareSettings(Settings):
    """Everything ``repeval compare`` computes from; the fields are its options (``repeval
    compare --help``)."""

    a: str
    b: str
    test_fraction: float = E.TEST_FRACTION
    k: int = E.KNN_HEADLINE_KS[0]
    boot: int = E.PAIRED_BOOTSTRAP
    cka_samples: int = 2000
    seed: int = 0
    probe_c: tuple = E.PROBE_CS
    blas_threads: int = 1

    def __post_init__(self):
        self._check_at_least(k=1, boot=1, cka_samples=1, blas_threads=1)
        object.__setattr__(self, "probe_c", tuple(float(c) for c in self.probe_c))


def run_compare(settings: CompareSettings, progress=None):
    """CKA of A and B, and with labels a paired comparison of their k-NN and probe predictions.

    With labels, A and B are split by the rule of every command: a loop folder's own
    train and test parts, else one stratified, seeded split of the file. An all-zero
    feature row is then refused (one line naming the file and the row); without
    labels only CKA runs, which an all-zero row does not disturb. Nothing is written.

    Parameters
    ----------
    settings : CompareSettings
    progress : Progress, optional
        Receives a line per file read, for CKA and for each encoder's k-NN and probe
        (default: silent).

    Returns
    -------
    dict
        ``compare``: what ``compare.json`` holds (``inputs``, ``linear_cka``,
        ``linear_cka_debiased``, ``rbf_cka``, ``rbf_cka_note``, ``paired``: None
        without labels, else the split and per protocol each encoder's accuracy, the
        gain of B with its bootstrap interval and McNemar's p); ``inputs``: A and B as
        read (:class:`~._inputs.Input`).
    """
    if not isinstance(settings, CompareSettings):
        raise ValueError(f"settings must be a CompareSettings, got {type(settings).__name__}")
    args = settings
    progress = progress if progress is not None else Progress(enabled=False)
    a, b = _compare_inputs(args, progress)  # before the heavy imports
    from ..cka import linear_cka, rbf_cka

    xa, xb = a.x, b.x
    y = a.y if a.y is not None else b.y
    n = xa.shape[0]
    rng = np.random.default_rng(args.seed)
    res = {
        "inputs": {
            "a": str(args.a),
            "b": str(args.b),
            "a_files": [str(f) for f in a.files],
            "b_files": [str(f) for f in b.files],
            "n": int(n),
            "dim_a": int(xa.shape[1]),
            "dim_b": int(xb.shape[1]),
            "seed": args.seed,
        }
    }
    if y is not None:
        for inp in (a, b):
            refuse_zero_rows(inp)
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
        res["rbf_cka_note"] = (
            f"sigma^2 = 0.5^2 x median squared distance over all n x n pairs "
            f"(Kornblith et al.'s RBF kernel, threshold 0.5), on {m} rows"
        )
    res["paired"] = None
    if y is not None:
        _paired(args, a, b, y, res, progress)
    return {"compare": res, "inputs": (a, b)}


def cmd_compare(args):
    """``repeval compare A B``: :func:`run_compare` on the parsed settings, then the terminal
    lines and files."""
    result = run_compare(CompareSettings.from_args(args), Progress(enabled=not args.quiet))
    res = result["compare"]
    _print_compare(args, *result["inputs"], res)
    if args.out:
        outdir = Path(args.out)
        try:
            R.write_files(
                outdir, {"compare.json": json.dumps(res, indent=2, default=R.json_default)}
            )
        except OSError as exc:
            raise InputError(f"cannot write to output directory {outdir}: {_short(exc)}") from None
        print(f"\nwrote {outdir / 'compare.json'}")
    return 0


def _paired(args, a, b, y, res, progress):
    """The paired k-NN and probe comparison of A and B on one split, into ``res["paired"]``."""
    from ..uncertainty import mcnemar_exact, paired_bootstrap_ci

    inp = a if a.y is not None else b
    tr, te, split, classes, _ = prepare_split(
        inp, args.test_fraction, args.seed, f"{inp.roles[0]} file {inp.files[0]}"
    )
    yi = np.searchsorted(classes, y)
    res["paired"] = {"split": split}
    for proto in ("knn", "probe"):
        correct = {}
        for name, enc in (("A", a), ("B", b)):
            X = enc.x
            if proto == "knn":
                pred = knn_curve_predictions(
                    X[tr],
                    yi[tr],
                    X[te],
                    (args.k,),
                    classes.size,
                    progress,
                    label=f"weighted k-NN of {name}",
                )[0]
            else:
                with blas_threads(args.blas_threads):
                    _, _, pred = probe_section(
                        X[tr],
                        yi[tr],
                        X[te],
                        yi[te],
                        args.seed,
                        args.probe_c,
                        progress,
                        f"the training part of {name} ({enc.path})",
                    )
            correct[name] = pred == yi[te]
        gain, lo, hi = paired_bootstrap_ci(correct["A"], correct["B"], args.boot, args.seed)
        p = mcnemar_exact(correct["A"], correct["B"])
        disagree = (lo > 0 or hi < 0) != (p < COMPARE_ALPHA)
        res["paired"][proto] = {
            "A": acc_entry(correct["A"]),
            "B": acc_entry(correct["B"]),
            "gain_B_minus_A": gain,
            "bootstrap95": [lo, hi],
            "n_boot": args.boot,
            "seed": args.seed,
            "mcnemar_p": p,
            "discordant": int(np.sum(correct["A"] != correct["B"])),
            "interval_and_test_disagree": bool(disagree),
        }
    res["how_to_read"] = READ_TOGETHER


def _paired_rows(args, paired):
    """The printed rows of the paired comparison."""
    rows = []
    for proto in ("knn", "probe"):
        e = paired[proto]
        gain, (lo, hi) = e["gain_B_minus_A"], e["bootstrap95"]
        label = f"weighted k-NN (k={args.k}, tau={E.KNN_TAU})" if proto == "knn" else "linear probe"
        rows.append(
            [
                label,
                R.acc_text(e["A"]),
                R.acc_text(e["B"]),
                f"{100 * gain:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]",
                R.fmt(e["mcnemar_p"]),
            ]
        )
    return rows


def _print_compare(args, a, b, res):
    rows = [
        ["linear CKA", R.fmt(res["linear_cka"])],
        ["linear CKA (debiased)", R.fmt(res["linear_cka_debiased"])],
        ["RBF CKA (sigma_frac 0.5)", R.fmt(res["rbf_cka"])],
    ]
    print(_name_line(a, "A"))
    print(_name_line(b, "B"))
    print(f"seed {args.seed} (split, bootstrap, RBF CKA subsample)")
    print()
    print(R.table(rows, ["similarity", "value"]))
    if res["paired"] is None:
        print("\nno labels in A or B: paired accuracy comparison skipped")
        return
    print(f"\nsplit: {split_text(res['paired']['split'])}")
    print()
    print(
        R.table(
            _paired_rows(args, res["paired"]),
            [
                "protocol",
                "A [95% Wilson]",
                "B [95% Wilson]",
                f"B - A, pts [95% paired bootstrap, {args.boot} replicates]",
                "McNemar p",
            ],
        )
    )
    print()
    for proto, e in res["paired"].items():
        if isinstance(e, dict) and e.get("interval_and_test_disagree"):
            print(
                f"{proto}: the bootstrap interval and McNemar's test disagree "
                f"({e['discordant']} images where only one encoder is right)"
            )
    print(R._wrap(READ_TOGETHER + "."))


REPORT_DESCRIPTION = """\
Weighted k-NN (k = 20 and 200, tau = 0.07, plus a curve over k from one similarity
pass), the linear probe with C chosen on a validation split of TRAIN (never TEST), the
ridge probe with lambda chosen by exact leave-one-out, low-shot nearest-class-mean
accuracy at 1, 5 and 20 shots, 95% Wilson intervals on every accuracy, every label-free
metric on the TRAIN features, and verdicts (chance level, collapse, spectrum cliff,
dropped features, small classes, unseen labels). Writes report.md, report.json and PNG
plots to --out."""


def add_report_parser(sub):
    """The ``report`` subcommand of ``sub`` (the subparsers of ``repeval``)."""
    rp = add_command(
        sub, "report", "evaluate one representation (train and test features)", REPORT_DESCRIPTION
    )
    rp.add_argument(
        "train",
        metavar="TRAIN",
        help="training features and labels (.npz, .npy, .pt or a loop folder); alone, "
        "a folder the loop wrote for one model, or a file split by --test-fraction",
    )
    rp.add_argument(
        "test",
        metavar="TEST",
        nargs="?",
        default=None,
        help="test features and labels, same feature dimension",
    )
    add_options(
        rp,
        (
            "--test-fraction",
            dict(
                default=None,
                metavar="F",
                help="without TEST: hold out this share of TRAIN's rows for testing "
                "(stratified by class, seeded by --seed); not for a loop folder, whose "
                "train and test parts are never re-split",
            ),
        ),
        ("--out", dict(default="repeval_report")),
        (
            "--seed",
            dict(
                help="seed of every random choice: split, probe validation split, low-shot "
                "draws, subsamples (default: %(default)s)"
            ),
        ),
        "--draws",
        (
            "--dse-samples",
            dict(
                type=positive_int,
                default=2000,
                metavar="N",
                help="rows used by the diffusion spectral entropy, an N x N eigenproblem "
                "(the comparative study of label-free metrics uses 10000; "
                "default: %(default)s)",
            ),
        ),
        (
            "--pair-samples",
            dict(
                type=positive_int,
                default=5000,
                metavar="N",
                help="rows used by the all-pairs uniformity (default: %(default)s)",
            ),
        ),
        (
            "--id-samples",
            dict(
                type=positive_int,
                default=10000,
                metavar="N",
                help="rows used by the TwoNN dimension on all pairs, an N x N distance "
                "search; above N distinct rows a seeded random N (default: %(default)s)",
            ),
        ),
        "--id-batch",
        ("--probe-c", dict(help=PROBE_C_HELP)),
        "--blas-threads",
        "--quiet",
    )
    rp.set_defaults(func=cmd_report)


COMPARE_DESCRIPTION = """\
Linear CKA (biased and debiased) and RBF CKA between A and B (same images, same order:
two encoders or two layers). With labels, the images are split as every command splits
them (a loop folder's own train and test parts; a single file once, stratified and
seeded), and the k-NN and linear-probe predictions of A and B on the same test images
are compared: accuracy with 95% Wilson intervals, the gain of B over A with a paired
bootstrap interval, and the exact McNemar p-value, with a line on reading the two
together. The output names A and B by their paths and prints the split sizes and the
seed."""


def add_compare_parser(sub):
    """The ``compare`` subcommand of ``sub`` (the subparsers of ``repeval``)."""
    cp = add_command(
        sub, "compare", "compare two representations of the same images", COMPARE_DESCRIPTION
    )
    cp.add_argument("a", metavar="A", help="features of encoder/layer A (labels optional)")
    cp.add_argument("b", metavar="B", help="features of encoder/layer B for the same images")
    add_options(
        cp,
        (
            "--test-fraction",
            dict(
                help="share of images held out for testing when A and B are single files; "
                "loop folders keep their own parts (default: %(default)s)"
            ),
        ),
        "--k",
        ("--boot", dict(help="paired bootstrap replicates (default: %(default)s)")),
        (
            "--cka-samples",
            dict(
                type=positive_int,
                default=2000,
                metavar="N",
                help="rows used by RBF CKA, which forms N x N kernels (default: %(default)s)",
            ),
        ),
        ("--seed", dict(help="seed of the split, bootstrap and subsample (default: %(default)s)")),
        ("--out", dict(default=None, help="also write compare.json to DIR")),
        ("--probe-c", dict(help=PROBE_C_HELP)),
        "--blas-threads",
        "--quiet",
    )
    cp.set_defaults(func=cmd_compare)


__all__ = [
    "ReportSettings",
    "run_report",
    "cmd_report",
    "CompareSettings",
    "run_compare",
    "cmd_compare",
    "add_report_parser",
    "add_compare_parser",
    "COMPARE_ALPHA",
]
