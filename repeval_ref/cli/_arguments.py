"""The command line of ``repeval``: argument types, shared options and the settings base class.

Every subcommand's parser is built from :data:`OPTIONS`, the definition of each option
that more than one command takes (``--seed``, ``--k``, ``--probe-c``, ...), through
:func:`add_options`; a command changes only what differs (its default or its help
line). Each command's settings are a frozen dataclass derived from :class:`Settings`,
whose fields are the command's options under their ``dest`` names.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass, fields

import numpy as np

from ._evaluate import KNN_HEADLINE_KS, LOW_SHOT_DRAWS, PAIRED_BOOTSTRAP, PROBE_CS, TEST_FRACTION

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """Argument errors in one line (exit status 2), with a pointer to --help."""

    def error(self, message):
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def positive_int(text):
    """An integer >= 1 from the command line (:class:`argparse.ArgumentTypeError` otherwise)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def fraction(text):
    """A number in the open interval (0, 1) from the command line."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {v}")
    return v


def c_grid(text):
    """A tuple of positive finite numbers from a comma-separated list."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive numbers, got {text!r}"
        ) from None
    if not values or any(not (np.isfinite(v) and v > 0) for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive numbers, got {text!r}")
    return tuple(values)


def wrap(text):
    """``text``, its whitespace made single spaces, filled to 88 columns (the descriptions of the
    subcommands)."""
    return textwrap.fill(" ".join(text.split()), width=88)


def add_command(sub, name, summary, description):
    """A subcommand of ``repeval``: its parser in ``sub``, the input formats as its epilog.

    Parameters
    ----------
    sub : the subparsers action of the ``repeval`` parser
    name, summary : str
        The subcommand and its line in ``repeval --help``.
    description : str
        Its description, any whitespace (filled by :func:`wrap`).
    """
    return sub.add_parser(
        name,
        help=summary,
        description=wrap(description),
        epilog=FILES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def check_prog(prog):
    """Raise ValueError unless ``prog``, the program name of a usage line, is a non-empty string."""
    if not isinstance(prog, str) or not prog:
        raise ValueError(f"prog must be a non-empty string, got {prog!r}")
    return prog


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

PROBE_C_HELP = (
    "candidate inverse regularisation strengths C of the logistic-regression probe, "
    "comma separated, tried on a validation split of the training part; the first "
    "C of the list with the best validation accuracy wins (default: 1e-4,1e-3,...,100)"
)

BLAS_HELP = (
    "threads of BLAS and LAPACK in the probe fits, the SVDs and eigenproblems (the "
    "k-NN's large products keep every thread); on a busy machine one thread is often "
    "faster (default: %(default)s)"
)

OUT_HELP = "output directory, created if needed (default: %(default)s)"

#: the options of more than one command: flag -> keyword arguments of ``add_argument``
OPTIONS = {
    "--out": dict(metavar="DIR", help=OUT_HELP),
    "--test-fraction": dict(type=fraction, default=TEST_FRACTION),
    "--seed": dict(type=int, default=0),
    "--k": dict(
        type=positive_int,
        default=KNN_HEADLINE_KS[0],
        help="k of the weighted k-NN (default: %(default)s)",
    ),
    "--boot": dict(
        type=positive_int,
        default=PAIRED_BOOTSTRAP,
        help="paired bootstrap replicates per pair (default: %(default)s)",
    ),
    "--draws": dict(
        type=positive_int,
        default=LOW_SHOT_DRAWS,
        help="low-shot support draws per shot count, >= 2 (default: %(default)s)",
    ),
    "--id-batch": dict(
        type=positive_int,
        default=1000,
        metavar="N",
        help="batch size of the batched TwoNN dimension (default: %(default)s)",
    ),
    "--probe-c": dict(
        type=c_grid,
        default=PROBE_CS,
        metavar="C1,C2,...",
        help="candidate C of the probe (default: 1e-4,...,100)",
    ),
    "--alpha": dict(
        type=fraction,
        default=0.05,
        help="level below which an adjusted p separates two encoders (default: %(default)s)",
    ),
    "--blas-threads": dict(type=positive_int, default=1, metavar="N", help=BLAS_HELP),
    "--quiet": dict(action="store_true", help="no progress bars"),
}


def add_options(parser, *specs):
    """Add options to ``parser`` in the order given.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    *specs : str or (str, dict)
        A flag of :data:`OPTIONS` as defined there, or ``(flag, changes)``: the
        definition of :data:`OPTIONS` (empty for a flag of one command only) updated
        with ``changes``, the keyword arguments of ``add_argument``.
    """
    for spec in specs:
        flag, changes = (spec, {}) if isinstance(spec, str) else spec
        if not isinstance(flag, str) or not flag.startswith("--") or not isinstance(changes, dict):
            raise ValueError(f"specs must be flags or (flag, dict) pairs, got {spec!r}")
        if flag not in OPTIONS and not changes:
            raise ValueError(f"specs: {flag} is not a shared option; give its definition")
        parser.add_argument(flag, **{**OPTIONS.get(flag, {}), **changes})


@dataclass(frozen=True)
class Settings:
    """Base of the commands' settings: frozen, one field per option of the command."""

    @classmethod
    def from_args(cls, args):
        """The settings of a parsed command line (an :class:`argparse.Namespace`)."""
        if not isinstance(args, argparse.Namespace):
            raise ValueError(f"args must be an argparse.Namespace, got {type(args).__name__}")
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})

    def _check_at_least(self, **minimum):
        """Raise ValueError naming the first field below its minimum."""
        for name, low in minimum.items():
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


__all__ = [
    "Parser",
    "positive_int",
    "fraction",
    "c_grid",
    "wrap",
    "add_command",
    "check_prog",
    "FILES_HELP",
    "PROBE_C_HELP",
    "BLAS_HELP",
    "OUT_HELP",
    "OPTIONS",
    "add_options",
    "Settings",
    "EXIT_OK",
    "EXIT_INTERNAL",
    "EXIT_INPUT",
]
