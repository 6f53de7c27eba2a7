"""``repeval report TRAIN [TEST]``: every protocol and label-free metric on one encoder.

:class:`ReportSettings` holds the options and :func:`run_report` computes, writing
nothing: weighted k-NN over a curve of k, the tuned linear probe, the ridge probe with
exact leave-one-out, low-shot nearest class mean, the label-free metrics and the
verdicts. :func:`cmd_report` prints them and writes ``report.md``, ``report.json`` and
the plots.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from . import _evaluate as E
from . import _render as R
from ._arguments import PROBE_C_HELP, Settings, add_command, add_options, positive_int
from ._evaluate import (
    blas_threads,
    class_indices,
    knn_section,
    low_shot_section,
    probe_section,
    ridge_section,
)
from ._inputs import InputError, _short, check_out_dir, load_split
from ._label_free_section import label_free_section
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


__all__ = ["ReportSettings", "run_report", "cmd_report", "report_verdicts", "add_report_parser"]
