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

The command is six modules: :mod:`._suite_encoders` (encoders, tasks and the feature
cache), :mod:`._suite_results` (one encoder on one task, and the cache of these
evaluations), :mod:`._suite_ranking` (ranks, mean rank and tau between tasks), this one
(:class:`SuiteSettings`, :func:`run_suite` and the command), :mod:`._suite_parser` (its
options) and :mod:`._suite_render` (tables, heat map, pages).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _evaluate as E
from . import _render as R
from ._arguments import Settings
from ._inputs import InputError, _short, check_out_dir, prepare_split, refuse_zero_rows
from ._leaderboard_stats import pairwise
from ._progress import Progress
from ._suite_encoders import (
    ImageEncoder,
    _image_input,
    _task_card,
    choose_tasks,
    folder_task_entries,
    load_feature_inputs,
    resolve_encoders,
    task_source,
    threads_limited,
)
from ._suite_ranking import rank_protocols
from ._suite_render import PAIRED
from ._suite_results import evaluate
from .leaderboard import check_same_images

PROTOCOLS = ("knn", "probe", "fewshot")
#: shots of the suite's low-shot column
SUITE_SHOTS = 10
#: bootstrap replicates of the mean-rank and tau intervals
RANK_BOOTSTRAP = 1000


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

    t_start = time.perf_counter()
    enc_entries = resolve_encoders(args.encoders, args.backbone, args.weights, args.random_init)
    folders = {
        e["name"]: folder_task_entries(e["path"]) for e in enc_entries if e["kind"] == "features"
    }
    src = task_source()
    tasks = choose_tasks(args, enc_entries, src, folders)
    protocols = args.protocols
    root = _cache_root(args)
    feat_dir = None if root is None else root / "zoo-features"
    result_dir = None if root is None else root / "suite-results"
    feat_inputs = load_feature_inputs(enc_entries, tasks, folders)
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
    ranking = rank_protocols(protocols, tasks, per_task, correct, len(names), args)
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
    from ._suite_page import render_html
    from ._suite_render import heatmap_png, print_suite, render_csv, render_markdown

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


__all__ = [
    "SuiteSettings",
    "run_suite",
    "cmd_suite",
    "PROTOCOLS",
    "SUITE_SHOTS",
    "RANK_BOOTSTRAP",
]
