"""The command line of ``repeval suite``: its options, their types and its description.

The options map one to one onto the fields of :class:`.suite.SuiteSettings`; the parsed
arguments go to :func:`.suite.cmd_suite`.
"""

from __future__ import annotations

import argparse

from ._arguments import add_command, add_options, positive_int
from ._suite_encoders import DEFAULT_BATCH, EFFICIENTNET_BATCH
from .suite import PROTOCOLS, RANK_BOOTSTRAP, SUITE_SHOTS, cmd_suite


def _tasks_arg(text):
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    if not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"expected distinct comma-separated task names, got {text!r}"
        )
    return names


def _protocols_arg(text):
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in PROTOCOLS]
    if not names or bad or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"expected distinct protocols from {','.join(PROTOCOLS)}, got {text!r}"
        )
    return tuple(p for p in PROTOCOLS if p in names)


SUITE_DESCRIPTION = """\
Evaluate encoders (zoo names, zoo for all of them, feature folders with one entry per
task, or --backbone) on every task of the transfer suite: weighted k-NN, the linear
probe (C chosen on a split of TRAIN) and low-shot nearest class mean, each with the
defaults of report and leaderboard. Writes a model x task table (suite.csv, .md, .json
and a self-contained .html, plus a heat map) with a 95% Wilson interval per cell, the
rank per task, the mean rank with a bootstrap interval, Kendall's tau-b between every
pair of tasks with its interval, and paired tests within each task corrected across
pairs (Holm or Benjamini-Hochberg). Features and evaluations are cached on disk by
fingerprint. An all-zero feature row is refused; a task's train and test parts are never
re-split."""


def add_suite_parser(sub):
    """The ``suite`` subcommand of ``sub`` (the subparsers of ``repeval``)."""
    from ..multiple_testing import CORRECTIONS

    sp = add_command(
        sub,
        "suite",
        "many encoders on the transfer suite's tasks: a model x task table",
        SUITE_DESCRIPTION,
    )
    sp.add_argument(
        "encoders",
        metavar="ENCODER",
        nargs="*",
        help="zoo:NAME or NAME (a zoo encoder), zoo (all of them), or a feature folder",
    )
    add_options(
        sp,
        (
            "--backbone",
            dict(
                default=None,
                metavar="SPEC",
                help="one more encoder: torchvision:ARCH or timm:ARCH (with --weights or "
                "--random-init), or zoo:NAME",
            ),
        ),
        (
            "--weights",
            dict(default=None, metavar="PATH", help="local weights file of the --backbone"),
        ),
        (
            "--random-init",
            dict(
                action="store_true", help="run the --backbone untrained (its features mean nothing)"
            ),
        ),
        (
            "--image-size",
            dict(
                type=positive_int,
                default=224,
                metavar="N",
                help="side the task images are resized to for a torchvision/timm --backbone "
                "(default: %(default)s; the zoo's encoders use their own input sizes)",
            ),
        ),
        (
            "--tasks",
            dict(
                type=_tasks_arg,
                default=None,
                metavar="T1,T2,...",
                help=(
                    "tasks to run (default: every installed task of the suite, or the tasks of "
                    "the first feature folder)"
                ),
            ),
        ),
        (
            "--protocols",
            dict(
                type=_protocols_arg,
                default=PROTOCOLS,
                metavar="P1,P2,...",
                help="from knn,probe,fewshot (default: all three)",
            ),
        ),
        ("--out", dict(default="repeval_suite")),
        (
            "--seed",
            dict(
                help="seed of the split of single files, the probe split, the draws and the "
                "bootstraps (default: %(default)s)"
            ),
        ),
        "--k",
        (
            "--shots",
            dict(
                type=positive_int,
                default=SUITE_SHOTS,
                help="labelled images per class of the low-shot protocol (default: %(default)s)",
            ),
        ),
        ("--draws", dict(help="low-shot support draws, >= 2 (default: %(default)s)")),
        "--probe-c",
        (
            "--test-fraction",
            dict(
                help="share held out when a feature folder gives a task as one file; task "
                "splits and loop folders keep their own parts (default: %(default)s)"
            ),
        ),
        (
            "--correction",
            dict(
                choices=tuple(CORRECTIONS),
                default="holm",
                help="correction across the pairs of encoders within each task "
                "(default: %(default)s)",
            ),
        ),
        "--alpha",
        "--boot",
        (
            "--rank-boot",
            dict(
                type=positive_int,
                default=RANK_BOOTSTRAP,
                help=(
                    "bootstrap replicates of the mean-rank and tau intervals (default: %(default)s)"
                ),
            ),
        ),
        (
            "--cache-dir",
            dict(
                default=None,
                metavar="DIR",
                help="cache root: features in DIR/zoo-features, evaluations in DIR/suite-results "
                "(default: $REPEVAL_CACHE, else ~/.cache/repeval)",
            ),
        ),
        ("--no-cache", dict(action="store_true", help="neither read nor write any cache")),
        (
            "--batch-size",
            dict(
                type=positive_int,
                default=None,
                help=f"extraction batch (default: {EFFICIENTNET_BATCH} for efficientnet_lite0, "
                f"{DEFAULT_BATCH} for the others)",
            ),
        ),
        (
            "--blas-threads",
            dict(
                help="threads of PyTorch's extraction and of BLAS and LAPACK in the k-NN, the "
                "probe fits and the low-shot means; on a busy machine one thread is often "
                "faster (default: %(default)s)"
            ),
        ),
        "--quiet",
    )
    sp.set_defaults(func=cmd_suite)
