"""``repeval compare A B``: two representations of the same images, side by side.

Linear and RBF CKA between A and B and, when both carry labels, their k-NN and probe on
one split compared image by image (paired bootstrap interval, exact McNemar test).
:class:`CompareSettings` holds the options; :func:`run_compare` computes and writes
nothing; :func:`cmd_compare` prints the tables and writes ``compare.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import _evaluate as E
from . import _render as R
from ._arguments import PROBE_C_HELP, Settings, add_command, add_options, positive_int
from ._evaluate import acc_entry, blas_threads, knn_curve_predictions, probe_section
from ._inputs import InputError, _short, prepare_split, read_input, refuse_zero_rows, split_text
from ._progress import Progress


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


__all__ = ["CompareSettings", "run_compare", "cmd_compare", "add_compare_parser", "COMPARE_ALPHA"]
