"""The ``repeval`` command: evaluate your own features with the course's protocols.

``repeval report TRAIN [TEST] [--out DIR]`` runs the labelled protocols (weighted k-NN
over a curve of k, the honestly tuned linear probe, the closed-form ridge probe with
exact leave-one-out, low-shot nearest-class-mean) and every label-free metric of the
package on a training and a test set of features, states verdicts in plain words, and
writes ``report.md``, ``report.json`` and PNG plots. Without TEST it reads a folder
written by ``repeval loop`` (whose train and test parts are never
re-split), or splits one labelled file (``--test-fraction``, seeded and stratified).

Every command follows one split rule and one set of defaults (:data:`LOW_SHOT_DRAWS`,
:data:`PAIRED_BOOTSTRAP`, :data:`TEST_FRACTION`), so the same inputs and settings give
the same accuracies and low-shot figures in the loop, ``report``, ``compare``,
``leaderboard`` and ``suite``. An all-zero feature row is refused with one line naming the file and
the row, as other bad input is.

``repeval compare A B`` compares two representations of the same images (two
encoders, or two layers): linear and RBF CKA, and a paired comparison of the k-NN and
probe predictions of the two (paired bootstrap interval, exact McNemar test).

``repeval leaderboard A B C ...`` evaluates many encoders on the same split and
writes one ranked table with error bars, pairwise tests corrected for multiplicity,
and label-free rankings beside the accuracy ranking (CSV, Markdown, JSON, HTML).

``repeval suite ENCODER ...`` evaluates many encoders (zoo names, feature folders, a
``--backbone``) on the tasks of the transfer suite and writes a model x task table with
Wilson intervals, ranks per task, the mean rank and Kendall's tau between tasks with
bootstrap intervals, and paired tests within each task (:mod:`.suite`).

``repeval loop ...`` runs the PyTorch reference loop (:mod:`.loop`) and ``repeval zoo ...``
trains, evaluates and tabulates the zoo (:mod:`.zoo`; the same program as
``python -m repeval_ref.zoo``, which differs only by the program name in usage and error
lines). Both take their own arguments (``repeval loop --help``) and end with their exit
status.

Input files: ``.npz`` with arrays ``features`` (n, d) and ``labels`` (n,); ``.npy``
feature files whose labels sit next to them (see ``--help``); PyTorch ``.pt``/``.pth``
files holding a dict with ``features`` and ``labels`` tensors or a pair
``(features, labels)``; the loop's folders. Bad input ends with a one-line message on
stderr and exit status 2; no traceback is shown unless ``REPEVAL_TRACEBACK=1`` is set.

The command holds the features in memory (as float64). For sets larger than memory,
call the streamed functions on a ``numpy.memmap`` instead
(:func:`repeval_ref.label_free_summary`, :func:`repeval_ref.rankme`, ...).

The layer is split by concern: :mod:`._inputs` (reading and checking),
:mod:`._evaluate` (calls into the package), :mod:`._render` (tables, plots, files),
:mod:`._commands` (report, compare), :mod:`.leaderboard`, :mod:`.suite`, :mod:`.loop` (with
:mod:`.pretrain`, the training of its small CNN) and :mod:`.zoo`.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ._evaluate import (KNN_CURVE_KS, KNN_HEADLINE_KS, KNN_TAU, LOW_SHOT_DRAWS, PAIRED_BOOTSTRAP, PROBE_CS,
                        SHOTS, TEST_FRACTION)
from ._inputs import InputError, _short, load_features

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2

__all__ = ["main", "build_parser", "load_features", "InputError", "KNN_TAU", "KNN_CURVE_KS",
           "KNN_HEADLINE_KS", "PROBE_CS", "SHOTS", "LOW_SHOT_DRAWS", "PAIRED_BOOTSTRAP", "TEST_FRACTION"]


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


def _c_grid(text):
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive numbers, got {text!r}") from None
    if not values or any(not (np.isfinite(v) and v > 0) for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive numbers, got {text!r}")
    return tuple(values)


FILES_HELP = """\
input files:
  .npz       arrays 'features' (n, d) and 'labels' (n,) of integer class ids
  .npy       the features; labels are read from the sibling file whose name has
             'features' replaced by 'labels' (train_features.npy -> train_labels.npy),
             or NAME_labels.npy when the name does not contain 'features', or
             labels.npy in the same folder
  .pt/.pth   torch.save of {'features': tensor, 'labels': tensor} or (features, labels)
  folders    written by repeval loop: --save-features DIR (DIR/train.npz,
             DIR/test.npz), or one folder of its --cache-dir (MODEL/DATA-train holds
             __flat.npy and labels.npy; MODEL alone stands for its -train and -test)

one split rule for every command: a loop folder's train and test parts are the split
and are never re-split; a single labelled file is split once, stratified by class and
seeded by --seed, identically by report (--test-fraction), compare and leaderboard.
With the same inputs and settings the commands print the same accuracies and low-shot
figures (low-shot: mean +- std over the same default number of draws).

Bad input (missing file or key, length mismatch, NaN/inf, non-numeric data, a single
class, a class too small to split) ends with a one-line message naming the file and,
where it applies, the row within that file (counted from 0), and exit status 2.
An all-zero feature row is refused the same way: cosine similarity (weighted k-NN,
low-shot nearest class mean, cosine label-free metrics) is undefined for it, and no
command drops images or leaves a protocol out; remove such rows from every input of
those images. (compare without labels only computes CKA and accepts them.)"""

PROBE_C_HELP = ("candidate inverse regularisation strengths C of the logistic-regression probe, "
                "comma separated, tried on a validation split of the training part; the first "
                "C of the list with the best validation accuracy wins (default: 1e-4,1e-3,...,100)")


def _wrap(text):
    import textwrap

    return textwrap.fill(text, width=88)


def build_parser():
    from ._commands import cmd_compare, cmd_report
    from .leaderboard import BLAS_HELP, add_leaderboard_parser
    from .suite import add_suite_parser

    parser = _Parser(
        prog="repeval",
        description=_wrap("Evaluate learned representations on your own features: labelled "
                          "protocols with honest error bars, label-free metrics, verdicts in "
                          "plain words, and comparisons of two or many encoders (the repeval "
                          "course's reference package)."),
        epilog=FILES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version="%(prog)s " + _version())
    sub = parser.add_subparsers(dest="command", metavar="{report,compare,leaderboard,suite,loop,zoo}")

    rp = sub.add_parser(
        "report", help="evaluate one representation (train and test features)",
        description=_wrap("Weighted k-NN (k = 20 and 200, tau = 0.07, plus a curve over k from one "
                          "similarity pass), the linear probe with C chosen on a validation split "
                          "of TRAIN (never TEST), the ridge probe with lambda chosen by exact "
                          "leave-one-out, low-shot nearest-class-mean accuracy at 1, 5 and 20 "
                          "shots, 95% Wilson intervals on every accuracy, every label-free metric "
                          "on the TRAIN features, and verdicts (chance level, collapse, spectrum "
                          "cliff, dropped features, small classes, unseen labels). Writes "
                          "report.md, report.json and PNG plots to --out."),
        epilog=FILES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rp.add_argument("train", metavar="TRAIN",
                    help="training features and labels (.npz, .npy, .pt or a loop folder); alone, "
                         "a folder the loop wrote for one model, or a file split by --test-fraction")
    rp.add_argument("test", metavar="TEST", nargs="?", default=None,
                    help="test features and labels, same feature dimension")
    rp.add_argument("--test-fraction", type=_fraction, default=None, metavar="F",
                    help="without TEST: hold out this share of TRAIN's rows for testing "
                         "(stratified by class, seeded by --seed); not for a loop folder, whose "
                         "train and test parts are never re-split")
    rp.add_argument("--out", default="repeval_report", metavar="DIR",
                    help="output directory, created if needed (default: %(default)s)")
    rp.add_argument("--seed", type=int, default=0,
                    help="seed of every random choice: split, probe validation split, low-shot "
                         "draws, subsamples (default: %(default)s)")
    rp.add_argument("--draws", type=_positive_int, default=LOW_SHOT_DRAWS,
                    help="low-shot support draws per shot count, >= 2 (default: %(default)s)")
    rp.add_argument("--dse-samples", type=_positive_int, default=2000, metavar="N",
                    help="rows used by the diffusion spectral entropy, an N x N eigenproblem "
                         "(the comparative study of label-free metrics uses 10000; "
                         "default: %(default)s)")
    rp.add_argument("--pair-samples", type=_positive_int, default=5000, metavar="N",
                    help="rows used by the all-pairs uniformity (default: %(default)s)")
    rp.add_argument("--id-samples", type=_positive_int, default=10000, metavar="N",
                    help="rows used by the TwoNN dimension on all pairs, an N x N distance "
                         "search; above N distinct rows a seeded random N (default: %(default)s)")
    rp.add_argument("--id-batch", type=_positive_int, default=1000, metavar="N",
                    help="batch size of the batched TwoNN dimension (default: %(default)s)")
    rp.add_argument("--probe-c", type=_c_grid, default=PROBE_CS, metavar="C1,C2,...", help=PROBE_C_HELP)
    rp.add_argument("--blas-threads", type=_positive_int, default=1, metavar="N", help=BLAS_HELP)
    rp.add_argument("--quiet", action="store_true", help="no progress bars")
    rp.set_defaults(func=cmd_report)

    cp = sub.add_parser(
        "compare", help="compare two representations of the same images",
        description=_wrap("Linear CKA (biased and debiased) and RBF CKA between A and B (same "
                          "images, same order: two encoders or two layers). With labels, the "
                          "images are split as every command splits them (a loop folder's own "
                          "train and test parts; a single file once, stratified and seeded), and "
                          "the k-NN and linear-probe predictions of A and B on the same test "
                          "images are compared: accuracy with 95% Wilson intervals, the gain of B "
                          "over A with a paired bootstrap interval, and the exact McNemar p-value, "
                          "with a line on reading the two together. The output names A and B by "
                          "their paths and prints the split sizes and the seed."),
        epilog=FILES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cp.add_argument("a", metavar="A", help="features of encoder/layer A (labels optional)")
    cp.add_argument("b", metavar="B", help="features of encoder/layer B for the same images")
    cp.add_argument("--test-fraction", type=_fraction, default=TEST_FRACTION,
                    help="share of images held out for testing when A and B are single files; "
                         "loop folders keep their own parts (default: %(default)s)")
    cp.add_argument("--k", type=_positive_int, default=KNN_HEADLINE_KS[0],
                    help="k of the weighted k-NN (default: %(default)s)")
    cp.add_argument("--boot", type=_positive_int, default=PAIRED_BOOTSTRAP,
                    help="paired bootstrap replicates (default: %(default)s)")
    cp.add_argument("--cka-samples", type=_positive_int, default=2000, metavar="N",
                    help="rows used by RBF CKA, which forms N x N kernels (default: %(default)s)")
    cp.add_argument("--seed", type=int, default=0,
                    help="seed of the split, bootstrap and subsample (default: %(default)s)")
    cp.add_argument("--out", metavar="DIR", default=None, help="also write compare.json to DIR")
    cp.add_argument("--probe-c", type=_c_grid, default=PROBE_CS, metavar="C1,C2,...", help=PROBE_C_HELP)
    cp.add_argument("--blas-threads", type=_positive_int, default=1, metavar="N", help=BLAS_HELP)
    cp.add_argument("--quiet", action="store_true", help="no progress bars")
    cp.set_defaults(func=cmd_compare)

    add_leaderboard_parser(sub, FILES_HELP, _positive_int, _fraction, _c_grid, _wrap)
    add_suite_parser(sub, FILES_HELP, _positive_int, _fraction, _c_grid, _wrap)
    # Listed here for `repeval --help`; main() hands their arguments to their own parsers.
    for name, summary in PROGRAMS.items():
        sub.add_parser(name, help=summary, add_help=False)
    return parser


#: subcommands that are whole programs with their own parser (:mod:`.loop`, :mod:`.zoo`)
PROGRAMS = {
    "loop": "the PyTorch reference loop (see repeval loop --help)",
    "zoo": "train, evaluate and tabulate the zoo (same as python -m repeval_ref.zoo; see repeval zoo --help)",
}


def _run_program(name, argv):
    """Run the program of subcommand ``name`` on ``argv``, named ``repeval NAME``; its exit status."""
    if name == "loop":
        from .loop import main as program
    else:
        from .zoo import main as program
    return program(list(argv), prog=f"repeval {name}")


def _version():
    from .. import __version__

    return __version__


def main(argv=None):
    """Entry point of the ``repeval`` console script; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in PROGRAMS:
        return _run_program(argv[0], argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    if getattr(args, "draws", 2) < 2:
        parser.error("--draws must be at least 2 (a spread needs two draws)")
    if getattr(args, "id_batch", 3) < 3:
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
