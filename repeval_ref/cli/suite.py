"""``repeval suite``: many encoders on many tasks, one model x task table with honest error bars.

Encoders (positional, any mix):

* ``zoo:NAME`` or ``NAME``: an encoder of :mod:`repeval_ref.zoo` (its names include
  ``efficientnet_lite0``); ``zoo`` alone stands for all of them;
* a feature folder: one entry per task in a format ``repeval report`` reads, named after
  the task (``DIR/fashion/`` with ``train.npz`` and ``test.npz`` as the loop writes them,
  or ``DIR/fashion.npz``, ``.npy`` or ``.pt``); the encoder is named after the folder;
* ``--backbone torchvision:ARCH`` or ``timm:ARCH`` with ``--weights PATH`` (or
  ``--random-init``), as the loop's ``--backbone`` takes it.

Tasks: the transfer suite of :mod:`repeval_ref.datasets.transfer` (those installed here,
or ``--tasks``); with feature folders only, the tasks the first folder holds. Every
image encoder's features are extracted once and cached on disk, keyed by a fingerprint
of the weights and of the images (:func:`repeval_ref.zoo.extraction.extract`); the
evaluation of one encoder on one task is cached too, keyed by a fingerprint of its
features, of the split and of the settings, so a second run reads both back.

Protocols, each computed by the functions ``report`` and ``leaderboard`` call, with their
defaults: weighted k-NN (k = 20, tau = 0.07), the linear probe with C chosen on a
validation split of the training part, and low-shot nearest class mean (10 shots by
default, mean and std over the shared default number of draws). The split rule is the
one of every command: a task's (or a folder's) train and test parts are never re-split;
a single feature file is split once, stratified and seeded.

Statistics: a 95% Wilson interval per cell; the rank of every encoder within every task
(ties share the average rank); the mean rank over tasks with a bootstrap interval and
Kendall's tau-b between every pair of tasks' rankings with its interval (test items
resampled within each task: :func:`repeval_ref.rank_agreement.rank_bootstrap`); and,
within each task, every pair of encoders compared by the leaderboard's machinery
(paired bootstrap interval, exact McNemar p, Holm or Benjamini-Hochberg across the pairs
of that task).

Outputs (``--out``): ``suite.csv``, ``suite.md``, ``suite.json``, ``suite.html``
(self-contained: inline style, the heat map as an inline PNG; no outside request) and
``suite_heatmap.png``. All inputs are read and checked before anything is written.

The command is three modules: :mod:`._suite_encoders` (encoders, tasks and the feature
cache), this one (:class:`SuiteSettings`, :func:`run_suite`, the result cache and the
command) and :mod:`._suite_render` (tables, heat map, pages).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _evaluate as E
from . import _render as R
from ._arguments import Settings, add_command, add_options, positive_int
from ._evaluate import (
    acc_entry,
    blas_threads,
    knn_curve_predictions,
    low_shot_section,
    probe_cell,
)
from ._inputs import InputError, _short, check_out_dir, prepare_split, read_input, refuse_zero_rows
from ._progress import Progress
from ._suite_encoders import (
    DEFAULT_BATCH,
    EFFICIENTNET_BATCH,
    ImageEncoder,
    _image_input,
    _sha,
    _task_card,
    folder_task_entries,
    resolve_encoders,
    task_source,
    threads_limited,
)
from ._suite_render import PAIRED
from .leaderboard import check_same_images, pairwise

PROTOCOLS = ("knn", "probe", "fewshot")
#: shots of the suite's low-shot column
SUITE_SHOTS = 10
#: bootstrap replicates of the mean-rank and tau intervals
RANK_BOOTSTRAP = 1000
#: version of what the result cache stores; bump when an evaluation changes
RESULT_CACHE_VERSION = 2


# ------------------------------------------------------------------ evaluation


def _settings_key(args, protocols):
    return {
        "version": RESULT_CACHE_VERSION,
        "k": args.k,
        "tau": E.KNN_TAU,
        "probe_c": [float(c) for c in args.probe_c],
        "seed": args.seed,
        "draws": args.draws,
        "shots": args.shots,
        "protocols": list(protocols),
    }


def evaluate(name, inp, tr, te, classes, counts, args, protocols, progress, result_dir):
    """One encoder on one task: the chosen protocols; ``(entries, correct, from_cache)``.

    The calls are those of ``repeval leaderboard`` (:func:`._evaluate.knn_curve_predictions`,
    :func:`._evaluate.probe_section`, :func:`._evaluate.low_shot_section`) with the same
    arguments, so the same features and settings give the same numbers.
    """
    X = inp.x
    yi = np.searchsorted(classes, inp.y)
    key = None
    if result_dir is not None:
        key = _sha(
            X.shape,
            X.tobytes(),
            yi.tobytes(),
            tr.tobytes(),
            te.tobytes(),
            json.dumps(_settings_key(args, protocols), sort_keys=True),
        )
        hit = _read_result(result_dir, key, protocols)
        if hit is not None:
            return hit[0], hit[1], True
    Xtr, Xte, ytr, yte = X[tr], X[te], yi[tr], yi[te]
    entries, correct = {}, {}
    if "knn" in protocols:
        pred = knn_curve_predictions(
            Xtr, ytr, Xte, (args.k,), classes.size, progress, label=f"{name}: k-NN"
        )[0]
        correct["knn"] = pred == yte
        entries["knn"] = acc_entry(correct["knn"])
    with blas_threads(args.blas_threads):
        if "probe" in protocols:
            who = f"the training part of {inp.path}"
            _, entries["probe"], pred = probe_cell(Xtr, ytr, Xte, yte, args, progress, who)
            correct["probe"] = pred == yte
        if "fewshot" in protocols:
            entries["fewshot"] = low_shot_section(
                Xtr, ytr, Xte, yte, counts, args.draws, args.seed, shots_list=(args.shots,)
            )[0]
    if key is not None:
        _write_result(result_dir, key, entries, correct)
    return entries, correct, False


def _read_result(result_dir, key, protocols):
    path = Path(result_dir) / f"{key}.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            entries = json.loads(str(z["entries"]))
            correct = {p: z[f"correct_{p}"].astype(bool) for p in PAIRED if p in protocols}
    except (OSError, ValueError, KeyError):
        return None
    if set(entries) != set(protocols):
        return None
    return entries, correct


def _write_result(result_dir, key, entries, correct):
    buf = io.BytesIO()
    np.savez(
        buf,
        entries=np.array(json.dumps(entries, default=R.json_default)),
        **{f"correct_{p}": c for p, c in correct.items()},
    )
    try:
        R.write_files(result_dir, {f"{key}.npz": buf.getvalue()})
    except OSError:
        pass  # a cache that cannot be written only costs time


def _load_feature_inputs(enc_entries, tasks, folders):
    """Each feature folder's input for each task, read and checked: ``{(encoder, task): Input}``."""
    out = {}
    for e in enc_entries:
        if e["kind"] != "features":
            continue
        have = folders[e["name"]]
        for task in tasks:
            if task not in have:
                raise InputError(
                    f"feature folder {e['path']} has no task {task!r} (expected "
                    f"{e['path'] / task}/ or {e['path'] / task}.npz)"
                )
            inp = read_input(have[task], f"encoder {e['name']}, task {task}")
            refuse_zero_rows(inp)
            out[(e["name"], task)] = inp
    return out


def _choose_tasks(args, enc_entries, src, folders):
    image = any(e["kind"] != "features" for e in enc_entries)
    if args.tasks is not None:
        tasks = args.tasks
        if image:
            avail = tuple(src.available_tasks())
            missing = [t for t in tasks if t not in avail]
            if missing:
                known = tuple(src.TRANSFER_TASKS)
                why = "unknown task" if missing[0] not in known else "task not installed here"
                raise InputError(
                    f"--tasks: {why} {missing[0]!r} (installed: {', '.join(avail) or 'none'}; "
                    f"the suite: {', '.join(known)})"
                )
        return tasks
    if image:
        tasks = tuple(src.available_tasks())
        if not tasks:
            raise InputError(
                "no task of the suite is installed here (see repeval_ref.datasets.transfer)"
            )
        return tasks
    first = next(e for e in enc_entries if e["kind"] == "features")
    tasks = tuple(folders[first["name"]])
    if not tasks:
        raise InputError(
            f"feature folder {first['path']} holds no task (a sub-folder or a feature file per "
            "task)"
        )
    return tasks


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


def _cache_root(args):
    if args.no_cache:
        return None
    if args.cache_dir is not None:
        return Path(args.cache_dir)
    return Path(os.environ.get("REPEVAL_CACHE") or Path.home() / ".cache" / "repeval")


@dataclass(frozen=True)
class _SuiteInputs:
    """What every task of a suite run reads: the settings, the encoders and their inputs.

    Attributes
    ----------
    settings : SuiteSettings
    encoders : list of dict
        The encoders as :func:`resolve_encoders` returns them.
    feature_inputs : dict
        ``{(encoder, task): Input}`` of the feature folders.
    image_encoders : dict
        ``{encoder: ImageEncoder}`` of the zoo and backbone encoders.
    source : module
        Lists and loads the tasks (:func:`task_source`).
    images : dict
        The images of the task at hand, loaded once for every image encoder.
    result_dir : pathlib.Path or None
        The cache of evaluations (None: no cache).
    progress : Progress
    """

    settings: SuiteSettings
    encoders: list
    feature_inputs: dict
    image_encoders: dict
    source: object
    images: dict
    result_dir: Path | None
    progress: Progress


@dataclass(frozen=True)
class _SuiteTally:
    """What a suite run gathers task after task.

    Attributes
    ----------
    per_task : dict
        Per task: its card, split, sizes, each encoder's entries and the pairs.
    correct : dict
        ``{protocol: {task: bool array (n_encoders, n_test)}}`` of the paired protocols.
    cache : dict
        Counts of features and evaluations read from the caches or computed.
    timing : dict
        Seconds of each phase: images and features, evaluations, paired tests.
    """

    per_task: dict
    correct: dict
    cache: dict = field(
        default_factory=lambda: dict.fromkeys(
            ("features_read", "features_computed", "evaluations_read", "evaluations_computed"), 0
        )
    )
    timing: dict = field(
        default_factory=lambda: dict.fromkeys(
            ("images_and_features_s", "evaluations_s", "paired_tests_s"), 0.0
        )
    )


def _one_task(task, run, tally):
    """Features, evaluations and paired tests of every encoder on one task, into ``tally``.

    Parameters
    ----------
    task : str
    run : _SuiteInputs
    tally : _SuiteTally
    """
    args, progress, images = run.settings, run.progress, run.images
    cache, timing, correct = tally.cache, tally.timing, tally.correct
    enc_entries, src = run.encoders, run.source
    names = [e["name"] for e in enc_entries]
    progress.stage(f"task {task}")
    t0 = time.perf_counter()
    data = []
    for e in enc_entries:
        if e["kind"] == "features":
            data.append(run.feature_inputs[(e["name"], task)])
        else:
            inp, hit = _image_input(run.image_encoders[e["name"]], task, src, images)
            refuse_zero_rows(inp)
            data.append(inp)
            cache["features_read" if hit else "features_computed"] += 1
    images.clear()
    t1 = time.perf_counter()
    timing["images_and_features_s"] += t1 - t0
    entries = [{"name": e["name"], "path": str(e["path"] or e["spec"])} for e in enc_entries]
    check_same_images(entries, data)
    ref = data[0]
    tr, te, split, classes, counts = prepare_split(
        ref,
        args.test_fraction,
        args.seed,
        f"the labels of {ref.files[0]}",
        context=f"task {task}: ",
    )
    results, task_correct = [], {p: [] for p in correct}
    for e, inp in zip(enc_entries, data):
        ent, corr, hit = evaluate(
            e["name"], inp, tr, te, classes, counts, args, args.protocols, progress, run.result_dir
        )
        cache["evaluations_read" if hit else "evaluations_computed"] += 1
        results.append({"name": e["name"], "dim": int(inp.x.shape[1]), **ent})
        for p in task_correct:
            task_correct[p].append(corr[p])
    t2 = time.perf_counter()
    timing["evaluations_s"] += t2 - t1
    pairs = {
        p: pairwise(names, task_correct[p], args.boot, args.seed, args.correction)
        for p in task_correct
    }
    for p in task_correct:
        correct[p][task] = np.stack(task_correct[p])
    timing["paired_tests_s"] += time.perf_counter() - t2
    card = _task_card(src, task) if task in tuple(src.TRANSFER_TASKS) else {"name": task}
    tally.per_task[task] = {
        "card": card,
        "split": split,
        "n_train": int(tr.size),
        "n_test": int(te.size),
        "n_classes": int(classes.size),
        "results": results,
        "pairs": pairs,
    }


@dataclass(frozen=True)
class SuiteSettings(Settings):
    """Everything ``repeval suite`` computes from: its encoders, tasks, protocols and settings.

    The fields are the command's options (``repeval suite --help``) under the same names;
    :meth:`from_args` takes them from parsed arguments, and the defaults are the
    command's.
    """

    encoders: tuple = ()
    backbone: str | None = None
    weights: str | None = None
    random_init: bool = False
    image_size: int = 224
    tasks: tuple | None = None
    protocols: tuple = PROTOCOLS
    seed: int = 0
    k: int = E.KNN_HEADLINE_KS[0]
    shots: int = SUITE_SHOTS
    draws: int = E.LOW_SHOT_DRAWS
    probe_c: tuple = E.PROBE_CS
    test_fraction: float = E.TEST_FRACTION
    correction: str = "holm"
    alpha: float = 0.05
    boot: int = E.PAIRED_BOOTSTRAP
    rank_boot: int = RANK_BOOTSTRAP
    cache_dir: str | None = None
    no_cache: bool = False
    batch_size: int | None = None
    blas_threads: int | None = 1

    def __post_init__(self):
        bad = [p for p in self.protocols if p not in PROTOCOLS]
        if not self.protocols or bad:
            raise ValueError(
                f"protocols must be a non-empty subset of {PROTOCOLS}, got {self.protocols!r}"
            )
        if self.draws < 2:
            raise ValueError(f"draws must be at least 2, got {self.draws!r}")
        object.__setattr__(self, "encoders", tuple(self.encoders))
        object.__setattr__(self, "probe_c", tuple(float(c) for c in self.probe_c))


def run_suite(settings: SuiteSettings, progress=None):
    """Every encoder on every task: the suite's result as one plain dict, no file written.

    Parameters
    ----------
    settings : SuiteSettings
    progress : Progress, optional
        Where the stage lines go (default: none).

    Returns
    -------
    dict
        ``settings``, ``tasks``, ``encoders``, ``per_task`` (per task: its card, split,
        sizes, each encoder's entries and the pairs), ``ranking`` (per protocol),
        ``cache`` (counts of what was read and computed), ``timing`` and ``seconds``.
    """
    if not isinstance(settings, SuiteSettings):
        raise ValueError(f"settings must be a SuiteSettings, got {type(settings).__name__}")
    args = settings
    progress = progress if progress is not None else Progress(enabled=False)
    from ..multiple_testing import CORRECTIONS
    from ..rank_agreement import mean_rank, rank_bootstrap, task_ranks, tau_b_matrix

    t_start = time.perf_counter()
    enc_entries = resolve_encoders(args.encoders, args.backbone, args.weights, args.random_init)
    folders = {
        e["name"]: folder_task_entries(e["path"]) for e in enc_entries if e["kind"] == "features"
    }
    src = task_source()
    tasks = _choose_tasks(args, enc_entries, src, folders)
    protocols = args.protocols
    root = _cache_root(args)
    feat_dir = None if root is None else root / "zoo-features"
    result_dir = None if root is None else root / "suite-results"
    feat_inputs = _load_feature_inputs(enc_entries, tasks, folders)
    image_encoders = {
        e["name"]: ImageEncoder(e, feat_dir, args.image_size, args.batch_size)
        for e in enc_entries
        if e["kind"] != "features"
    }
    names = [e["name"] for e in enc_entries]
    run = _SuiteInputs(
        args, enc_entries, feat_inputs, image_encoders, src, {}, result_dir, progress
    )
    tally = _SuiteTally({}, {p: {} for p in PAIRED if p in protocols})
    per_task, correct, cache, timing = tally.per_task, tally.correct, tally.cache, tally.timing
    with threads_limited(args.blas_threads):
        for task in tasks:
            _one_task(task, run, tally)
    progress.stage("ranks, mean rank and Kendall's tau (bootstrap)")
    t_rank = time.perf_counter()
    ranking = {}
    for p in protocols:
        if p in PAIRED:
            rb = rank_bootstrap(
                [correct[p][t] for t in tasks], n_boot=args.rank_boot, seed=args.seed
            )
            ranking[p] = {
                "tasks": list(tasks),
                "ranks": rb["ranks"],
                "mean_rank": rb["mean_rank"],
                "mean_rank_interval": rb["mean_rank_interval"],
                "tau": rb["tau"],
                "tau_interval": rb["tau_interval"],
                "tau_defined_replicates": rb["tau_defined"],
                "n_boot": rb["n_boot"],
                "interval": "bootstrap",
            }
        else:
            used = [
                t
                for t in tasks
                if all(r["fewshot"]["mean"] is not None for r in per_task[t]["results"])
            ]
            if not used:
                ranking[p] = None
                continue
            scores = np.array(
                [
                    [per_task[t]["results"][i]["fewshot"]["mean"] for t in used]
                    for i in range(len(names))
                ]
            )
            ranking[p] = {
                "tasks": used,
                "ranks": task_ranks(scores),
                "mean_rank": mean_rank(scores),
                "mean_rank_interval": None,
                "tau": tau_b_matrix(scores),
                "tau_interval": None,
                "tau_defined_replicates": None,
                "n_boot": None,
                "interval": "none: the low-shot figure is a mean over support draws, with no "
                "right/wrong answer per test image to resample",
            }
    settings = {
        "k": args.k,
        "tau": E.KNN_TAU,
        "seed": args.seed,
        "draws": args.draws,
        "shots": args.shots,
        "n_boot": args.boot,
        "rank_boot": args.rank_boot,
        "correction": args.correction,
        "correction_name": CORRECTIONS[args.correction],
        "alpha": args.alpha,
        "test_fraction": args.test_fraction,
        "probe_C_grid": [float(c) for c in args.probe_c],
        "protocols": list(protocols),
        "cache_dir": None if root is None else str(root),
    }
    return {
        "settings": settings,
        "tasks": list(tasks),
        "encoders": [
            {k: (str(v) if isinstance(v, Path) else v) for k, v in e.items()} for e in enc_entries
        ],
        "per_task": per_task,
        "ranking": ranking,
        "cache": cache,
        "timing": {
            **{k: round(v, 2) for k, v in timing.items()},
            "rank_bootstrap_s": round(time.perf_counter() - t_rank, 2),
        },
        "seconds": round(time.perf_counter() - t_start, 2),
    }


def cmd_suite(args):
    """``repeval suite``: :func:`run_suite` on the parsed settings, then the files and the
    terminal table."""
    from ._suite_render import heatmap_png, print_suite, render_csv, render_html, render_markdown

    progress = Progress(enabled=not args.quiet)
    outdir = check_out_dir(args.out)
    suite = R.plain_tree(run_suite(SuiteSettings.from_args(args), progress))
    progress.stage("tables, heat map and files")
    heat = heatmap_png(suite)
    files = {
        "suite.json": json.dumps(suite, indent=1, default=R.json_default),
        "suite.md": render_markdown(suite),
        "suite.csv": render_csv(suite),
        "suite.html": render_html(suite, heat),
        "suite_heatmap.png": heat,
    }
    try:
        written = R.write_files(outdir, files)
    except OSError as exc:
        raise InputError(f"cannot write the suite to {outdir}: {_short(exc)}") from None
    print_suite(suite, written)
    return 0


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


__all__ = [
    "SuiteSettings",
    "run_suite",
    "cmd_suite",
    "add_suite_parser",
    "evaluate",
    "PROTOCOLS",
    "PAIRED",
    "SUITE_SHOTS",
    "RANK_BOOTSTRAP",
    "resolve_encoders",
    "task_source",
    "ImageEncoder",
    "threads_limited",
    "DEFAULT_BATCH",
    "EFFICIENTNET_BATCH",
]
