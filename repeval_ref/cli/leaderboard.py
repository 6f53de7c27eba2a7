"""``repeval leaderboard``: many encoders on the same split, one ranked table with error bars.

Inputs name one encoder each (a features file, or a folder the loop wrote), a folder of
such inputs, or a TOML list::

    [[encoder]]
    name = "supervised"          # optional; default: the file name
    path = "feats/sup.npz"       # relative to the TOML file
    method = "supervised"        # optional; the training method

Every encoder must hold the same images in the same order (same labels). The rows are
split by the rule of every ``repeval`` command: the loop's own train/test parts are the
split and are never re-split; single files are split once (stratified, seeded). Every
encoder is evaluated on that split: weighted k-NN, the linear probe with C chosen on a
split of TRAIN, low-shot nearest class mean (mean and std over the shared default number
of draws), label-free metrics and verdicts. An all-zero feature row is refused with one
line naming the file and the row, as in ``repeval report``. Every pair of encoders gets a
paired bootstrap interval and an exact McNemar p-value per protocol, corrected across
pairs (Holm or Benjamini-Hochberg).

The computation is here (:class:`LeaderboardSettings`, :func:`run_leaderboard`), with the
command that writes its result (:func:`cmd_leaderboard`); the tables, plots and pages
are :mod:`._leaderboard_render`.
Outputs (``--out``): ``leaderboard.csv``, ``leaderboard.md``, ``leaderboard.json`` and
``leaderboard.html`` (self-contained: plots inline as base64 PNG, no external files).
All inputs are read and checked before anything is written; the files are written to
temporary names and renamed, so bad input leaves nothing behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import _evaluate as E
from . import _render as R
from ._arguments import Settings, add_command, add_options
from ._evaluate import (
    acc_entry,
    blas_threads,
    knn_curve_predictions,
    low_shot_section,
    probe_cell,
)
from ._inputs import (
    InputError,
    _short,
    check_encoder_list,
    check_out_dir,
    prepare_split,
    read_input,
    refuse_zero_rows,
    split_folder,
)
from ._label_free_section import label_free_section
from ._leaderboard_stats import label_free_rankings, pairwise, ranking
from ._progress import Progress

FEATURE_SUFFIXES = (".npz", ".npy", ".pt", ".pth")

METHOD_WARNING = (
    "label-free scores compare encoders only within one training method: the "
    "comparative study of label-free metrics found their correlation with accuracy "
    "changes strength and even sign between supervised and self-supervised models "
    "and between architectures"
)


# ----------------------------------------------------------------------------- inputs


def _is_encoder_path(path):
    path = Path(path)
    if path.is_file():
        return path.suffix.lower() in FEATURE_SUFFIXES and not path.name.endswith("labels.npy")
    if path.is_dir():
        try:
            if split_folder(path) is not None:
                return True
        except InputError:
            return True  # an encoder folder with a problem: reported when read
        # one folder of the loop's cache: labels.npy beside the feature arrays
        return (path / "labels.npy").is_file() and any(
            p.suffix == ".npy" and p.name != "labels.npy" for p in path.iterdir()
        )
    return False


def _toml_entries(path):
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the list {path}: {_short(exc)}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"the list {path} is not valid TOML ({_short(exc)})") from None
    items = data.get("encoder", [])
    if not isinstance(items, list) or not all(isinstance(e, dict) for e in items):
        raise InputError(f"the list {path} must hold [[encoder]] tables with a 'path' each")
    out = []
    for i, e in enumerate(items):
        if "path" not in e or not isinstance(e["path"], str):
            raise InputError(f"the list {path}: encoder {i + 1} has no 'path'")
        extra = set(e) - {"path", "name", "method"}
        if extra:
            raise InputError(
                f"the list {path}: encoder {i + 1} has unknown keys {', '.join(sorted(extra))} "
                "(allowed: path, name, method)"
            )
        p = Path(e["path"])
        p = p if p.is_absolute() else Path(path).parent / p
        out.append(
            {
                "path": p,
                "name": str(e.get("name", p.stem if p.is_file() else p.name)),
                "method": e.get("method"),
            }
        )
    return out


def resolve_entries(inputs):
    """The encoders named by the command line: ``[{"path", "name", "method"}, ...]``."""
    entries = []
    for item in inputs:
        p = Path(item)
        if p.suffix.lower() == ".toml":
            if not p.is_file():
                raise InputError(f"list file not found: {p}")
            entries += _toml_entries(p)
        elif p.is_dir() and not _is_encoder_path(p):
            found = sorted(q for q in p.iterdir() if _is_encoder_path(q))
            if not found:
                raise InputError(
                    f"folder {p} holds no feature files (.npz, .npy, .pt) or encoder folders"
                )
            entries += [
                {"path": q, "name": q.stem if q.is_file() else q.name, "method": None}
                for q in found
            ]
        elif not p.exists():
            raise InputError(f"file not found: {p}")
        else:
            entries.append({"path": p, "name": p.stem if p.is_file() else p.name, "method": None})
    if not entries:
        raise InputError("no encoders given (an empty list)")
    seen = {}
    for e in entries:
        key = e["path"].resolve()
        if key in seen:
            raise InputError(
                f"encoder {e['path']} is given twice (as {seen[key]} and {e['name']}); "
                "each encoder may appear once"
            )
        seen[key] = e["name"]
    check_encoder_list(
        entries,
        "two encoders are both named {name!r}; give them distinct names (in a TOML list)",
        "a leaderboard",
        "path",
    )
    return entries


def _load_entry(e, progress=None):
    """One encoder read and checked (all-zero rows refused); an :class:`~._inputs.Input`."""
    inp = read_input(e["path"], f"encoder {e['name']}", progress=progress)
    refuse_zero_rows(inp)
    return inp


def load_encoders(entries, progress=None):
    """Read every encoder and check that they describe the same images in the same order."""
    data = [_load_entry(e, progress) for e in entries]
    check_same_images(entries, data)
    return data


def check_same_images(entries, data):
    """Raise :class:`InputError` unless every input holds the first one's images in its order.

    ``entries`` name the inputs (``{"name", "path"}`` each), ``data`` are their
    :class:`~._inputs.Input`; the sizes of the parts and the labels must be equal.
    """
    ref, ref_e = data[0], entries[0]
    ref_name = ref_e["name"]
    for e, d in zip(entries[1:], data[1:]):
        paths = f"({e['path']} vs {ref_e['path']})"
        if d.x.shape[0] != ref.x.shape[0]:
            raise InputError(
                f"{e['name']} has {d.x.shape[0]} rows but {ref_name} has "
                f"{ref.x.shape[0]} {paths}; every encoder needs the same images in the same order"
            )
        if d.sizes != ref.sizes:
            raise InputError(
                f"{e['name']} and {ref_name} are split differently into train and test {paths} "
                "(give every encoder as one file, or every one as a loop folder)"
            )
        if not np.array_equal(d.y, ref.y):
            a, b = set(np.unique(ref.y).tolist()), set(np.unique(d.y).tolist())
            if a != b:
                extra = sorted(b - a)[:3] or sorted(a - b)[:3]
                raise InputError(
                    f"{e['name']} and {ref_name} have mismatched classes (class "
                    f"{extra[0]} occurs in only one of them) {paths}; every encoder needs the "
                    "same labelled images"
                )
            row = int(np.flatnonzero(d.y != ref.y)[0])
            raise InputError(
                f"{e['name']} and {ref_name} list their labels in a different order "
                f"(first difference at row {row}) {paths}; every encoder needs the same images "
                "in the same order"
            )


# ------------------------------------------------------------------------ evaluation


def _evaluate_one(entry, d, tr, te, args, classes, counts, progress):
    X = d.x
    yi = np.searchsorted(classes, d.y)
    Xtr, Xte, ytr, yte = X[tr], X[te], yi[tr], yi[te]
    res = {
        "name": entry["name"],
        "path": str(entry["path"]),
        "method": entry["method"],
        "dim": int(X.shape[1]),
    }
    pred_knn = knn_curve_predictions(
        Xtr, ytr, Xte, (args.k,), classes.size, progress, label=f"{entry['name']}: k-NN"
    )[0]
    with blas_threads(args.blas_threads):
        return _evaluate_rest(entry, res, pred_knn, X, Xtr, Xte, ytr, yte, args, counts, progress)


def _evaluate_rest(entry, res, pred_knn, X, Xtr, Xte, ytr, yte, args, counts, progress):
    from ..labelfree.spectrum import gram_spectrum
    from ..verdicts import (
        chance_verdict,
        collapse_verdict,
        dropped_features_verdict,
        spectrum_cliff_verdict,
    )

    who = f"the training part of {entry['name']} ({entry['path']})"
    res["knn"] = acc_entry(pred_knn == yte)
    info, res["probe"], pred_probe = probe_cell(Xtr, ytr, Xte, yte, args, progress, who)
    res["low_shot"] = low_shot_section(
        Xtr, ytr, Xte, yte, counts, args.draws, args.seed, shots_list=E.SHOTS
    )
    lf = label_free_section(Xtr, seed=args.seed, id_batch=args.id_batch, full=False)
    res["label_free"] = {k: v["value"] for k, v in lf.items() if k != "alignment"}
    a = res["label_free"].get("alpha_req")
    res["label_free"]["alpha_req_gap"] = None if a is None else abs(a - 1.0)
    spectrum = gram_spectrum(Xtr, center=True)
    res["verdicts"] = [
        chance_verdict(res["knn"]["correct"], res["knn"]["n"], yte, f"weighted k-NN (k={args.k})"),
        chance_verdict(res["probe"]["correct"], res["probe"]["n"], yte, "the linear probe"),
        collapse_verdict(
            lf["rankme"]["value"],
            lf["mean_pairwise_cosine"]["value"],
            int(X.shape[1]),
            lf["participation_ratio"]["value"],
        ),
        spectrum_cliff_verdict(spectrum),
        dropped_features_verdict(
            info["dropped_constant_features"], 0, int(X.shape[1]), int(X.shape[0])
        ),
    ]
    return res, {"knn": pred_knn == yte, "probe": pred_probe == yte}


# ---------------------------------------------------------------------------- command


@dataclass(frozen=True)
class LeaderboardSettings(Settings):
    """Everything ``repeval leaderboard`` computes from; the fields are its options (``--help``)."""

    inputs: tuple = ()
    test_fraction: float = E.TEST_FRACTION
    seed: int = 0
    k: int = E.KNN_HEADLINE_KS[0]
    rank_by: str = "probe"
    correction: str = "holm"
    alpha: float = 0.05
    boot: int = E.PAIRED_BOOTSTRAP
    draws: int = E.LOW_SHOT_DRAWS
    id_batch: int = 1000
    probe_c: tuple = E.PROBE_CS
    blas_threads: int = 1

    def __post_init__(self):
        if self.rank_by not in ("probe", "knn"):
            raise ValueError(f"rank_by must be 'probe' or 'knn', got {self.rank_by!r}")
        self._check_at_least(k=1, boot=1, draws=2, id_batch=3, blas_threads=1)
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "probe_c", tuple(float(c) for c in self.probe_c))


def _method_warning(entries):
    """The warning on comparing label-free scores across training methods, or None."""
    methods = {e["method"] for e in entries}
    if None in methods and len(methods) > 1 or None not in methods and len(methods) > 1:
        given = sorted(m for m in methods if m)
        return (
            f"these encoders come from different training methods ({', '.join(given)}"
            f"{', and some without a method' if None in methods else ''}); " + METHOD_WARNING
        )
    if methods == {None}:
        return (
            'the training methods of these encoders are not given (add method = "..." to '
            "each entry of a TOML list); " + METHOD_WARNING
        )
    return None


def run_leaderboard(settings: LeaderboardSettings, progress=None):
    """Every encoder on one split, ranked, every pair compared; nothing is written.

    Parameters
    ----------
    settings : LeaderboardSettings
    progress : Progress, optional
        Receives a line per encoder read and evaluated (default: silent).

    Returns
    -------
    dict
        What ``leaderboard.json`` holds: ``settings``, ``encoders`` (each one's
        accuracies, low-shot means, label-free values and verdicts), ``pairs`` (per
        protocol), ``ranking``, ``label_free_rankings`` and ``method_warning``.
    """
    if not isinstance(settings, LeaderboardSettings):
        raise ValueError(f"settings must be a LeaderboardSettings, got {type(settings).__name__}")
    args = settings
    progress = progress if progress is not None else Progress(enabled=False)
    from ..multiple_testing import CORRECTIONS

    if args.correction not in CORRECTIONS:
        raise ValueError(
            f"correction must be one of {', '.join(CORRECTIONS)}, got {args.correction!r}"
        )
    entries = resolve_entries(args.inputs)
    data = load_encoders(entries, progress)
    ref = data[0]
    tr, te, split, classes, counts = prepare_split(
        ref, args.test_fraction, args.seed, f"the labels of {ref.files[0]}"
    )
    results, correct = [], {"knn": [], "probe": []}
    for e, d in zip(entries, data):
        res, corr = _evaluate_one(e, d, tr, te, args, classes, counts, progress)
        results.append(res)
        for k in correct:
            correct[k].append(corr[k])
    names = [r["name"] for r in results]
    pairs = {p: pairwise(names, correct[p], args.boot, args.seed, args.correction) for p in correct}
    return {
        "settings": {
            "k": args.k,
            "tau": E.KNN_TAU,
            "rank_by": args.rank_by,
            "alpha": args.alpha,
            "correction": args.correction,
            "correction_name": CORRECTIONS[args.correction],
            "seed": args.seed,
            "test_fraction": split.get("test_fraction"),
            "split": split,
            "n_train": int(tr.size),
            "n_test": int(te.size),
            "n_classes": int(classes.size),
            "n_boot": args.boot,
            "draws": args.draws,
            "probe_C_grid": list(args.probe_c),
        },
        "encoders": results,
        "pairs": pairs,
        "ranking": ranking(results, args.rank_by, pairs[args.rank_by], args.alpha),
        "label_free_rankings": label_free_rankings(results, args.rank_by),
        "method_warning": _method_warning(entries),
    }


def cmd_leaderboard(args):
    """``repeval leaderboard``: :func:`run_leaderboard` on the parsed settings, then the files
    and the table."""
    from ._leaderboard_render import print_leaderboard, render_files

    outdir = check_out_dir(args.out)
    board = run_leaderboard(LeaderboardSettings.from_args(args), Progress(enabled=not args.quiet))
    try:
        written = R.write_files(outdir, render_files(board))
    except OSError as exc:
        raise InputError(f"cannot write the leaderboard to {outdir}: {_short(exc)}") from None
    print_leaderboard(board, written)
    return 0


LEADERBOARD_DESCRIPTION = """\
Evaluate every encoder on the same split: weighted k-NN, the linear probe (C chosen on a
split of TRAIN), low-shot nearest class mean, label-free metrics and verdicts; rank them
with 95% Wilson intervals, compare every pair (paired bootstrap interval, exact McNemar
p corrected across pairs by Holm or Benjamini-Hochberg) and mark neighbours in the
ranking that are not separated. Writes leaderboard.csv, .md, .json and a self-contained
.html page to --out. Inputs: feature files, loop folders, a folder of them, or a TOML
list ([[encoder]] tables with path, and optionally name and method)."""


def add_leaderboard_parser(sub):
    """The ``leaderboard`` subcommand of ``sub`` (the subparsers of ``repeval``)."""
    from ..multiple_testing import CORRECTIONS

    lp = add_command(
        sub,
        "leaderboard",
        "rank many encoders of the same images, with error bars",
        LEADERBOARD_DESCRIPTION,
    )
    lp.add_argument(
        "inputs",
        metavar="INPUT",
        nargs="*",
        help="feature files or loop folders (one encoder each), a folder of them, or a .toml list",
    )
    add_options(
        lp,
        ("--out", dict(default="repeval_leaderboard")),
        (
            "--test-fraction",
            dict(
                help="share of images held out for testing when the encoders are single "
                "files; loop folders keep their own parts (default: %(default)s)"
            ),
        ),
        (
            "--seed",
            dict(help="seed of the split, probe split, draws and bootstrap (default: %(default)s)"),
        ),
        "--k",
        (
            "--rank-by",
            dict(
                choices=("probe", "knn"),
                default="probe",
                help="protocol of the ranking (default: %(default)s)",
            ),
        ),
        (
            "--correction",
            dict(
                choices=tuple(CORRECTIONS),
                default="holm",
                help="multiple-comparison correction across pairs: holm (family-wise error) or "
                "bh (Benjamini-Hochberg false discovery rate) (default: %(default)s)",
            ),
        ),
        "--alpha",
        "--boot",
        "--draws",
        "--id-batch",
        "--probe-c",
        "--blas-threads",
        "--quiet",
    )
    lp.set_defaults(func=cmd_leaderboard)
