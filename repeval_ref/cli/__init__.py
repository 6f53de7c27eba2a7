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
:mod:`._evaluate` (calls into the package), :mod:`._render` (tables, plots, files), and
one module per command: :mod:`.report`, :mod:`.compare`, :mod:`.leaderboard`,
:mod:`.suite`, :mod:`.loop` (with :mod:`._loop_settings`, :mod:`._loop_data` and
:mod:`.pretrain`, the training of its small CNN) and :mod:`.zoo`. Each is a frozen
settings object, a ``run_*`` that computes and returns its results, and a ``cmd_*`` that
prints and writes them.
"""

from __future__ import annotations

import argparse
import os
import sys

from ._arguments import EXIT_INPUT, EXIT_INTERNAL, FILES_HELP, Parser, wrap
from ._evaluate import (
    KNN_CURVE_KS,
    KNN_HEADLINE_KS,
    KNN_TAU,
    LOW_SHOT_DRAWS,
    PAIRED_BOOTSTRAP,
    PROBE_CS,
    SHOTS,
    TEST_FRACTION,
)
from ._inputs import InputError, _short, load_features

__all__ = [
    "main",
    "build_parser",
    "load_features",
    "InputError",
    "KNN_TAU",
    "KNN_CURVE_KS",
    "KNN_HEADLINE_KS",
    "PROBE_CS",
    "SHOTS",
    "LOW_SHOT_DRAWS",
    "PAIRED_BOOTSTRAP",
    "TEST_FRACTION",
]


def build_parser():
    """The ``repeval`` parser: every subcommand, ``loop`` and ``zoo`` listed for ``--help``."""
    from ._suite_parser import add_suite_parser
    from .compare import add_compare_parser
    from .leaderboard import add_leaderboard_parser
    from .report import add_report_parser

    parser = Parser(
        prog="repeval",
        description=wrap(
            "Evaluate learned representations on your own features: labelled "
            "protocols with honest error bars, label-free metrics, verdicts in "
            "plain words, and comparisons of two or many encoders (the repeval "
            "course's reference package)."
        ),
        epilog=FILES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version="%(prog)s " + _version())
    sub = parser.add_subparsers(
        dest="command", metavar="{report,compare,leaderboard,suite,loop,zoo}"
    )

    add_report_parser(sub)
    add_compare_parser(sub)
    add_leaderboard_parser(sub)
    add_suite_parser(sub)
    # Listed here for `repeval --help`; main() hands their arguments to their own parsers.
    for name, summary in PROGRAMS.items():
        sub.add_parser(name, help=summary, add_help=False)
    return parser


#: subcommands that are whole programs with their own parser (:mod:`.loop`, :mod:`.zoo`)
PROGRAMS = {
    "loop": "the PyTorch reference loop (see repeval loop --help)",
    "zoo": (
        "train, evaluate and tabulate the zoo (same as python -m repeval_ref.zoo; see repeval "
        "zoo --help)"
    ),
}


def _run_program(name, argv):
    """Run the program of subcommand ``name`` on ``argv``, named ``repeval NAME``; its exit
    status."""
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
        return _fail(
            f"internal error ({type(exc).__name__}: {_short(exc)}); "
            "set REPEVAL_TRACEBACK=1 to see the traceback",
            EXIT_INTERNAL,
        )


def _fail(message, status):
    sys.stderr.write(f"repeval: error: {message}\n")
    return status
