"""Choosing a zoo encoder's recipe on a validation split of the training images.

Book: the Performance appendix (the zoo). The plateau zoo chooses its learning rate,
temperature and augmentation strength without ever reading the test split:

* :func:`validation_split` carves a seeded, stratified validation subset (e.g. 5,000
  images) out of Fashion-MNIST's 60,000 training images (scikit-learn's
  :class:`~sklearn.model_selection.StratifiedShuffleSplit`);
* :func:`search_recipe` trains one encoder configuration briefly for every setting of
  a small grid on the rest of the training images, scores each by a linear probe
  (:func:`repeval_ref.linear_probe_done_right`: fitted on training-part features,
  accuracy on the validation rows) and returns a record for the manifest: the grid,
  every setting's score, the chosen setting (the first maximum) and the seconds spent.
  Given a ``trials_file``, the search is resumable: every finished setting is written
  there, a later call with the same arguments reuses it, and ``time_limit`` stops a
  call between two settings (the plateau driver, :mod:`repeval_ref.zoo.plateau`).
"""

from __future__ import annotations

import itertools
import json
import os
import time

import numpy as np
import torch

__all__ = ["validation_split", "validation_score", "grid_settings", "search_recipe"]


def validation_split(labels, size=5000, seed=0):
    """A seeded, stratified split of training rows into a fitting part and a validation part.

    Parameters
    ----------
    labels : array_like of int, shape (n,)
        Class of every training image (each class at least twice).
    size : int
        Rows of the validation part, ``n_classes <= size <= n - n_classes``.
    seed : int
        ``random_state`` of :class:`~sklearn.model_selection.StratifiedShuffleSplit`.

    Returns
    -------
    train_idx : numpy.ndarray of int64, shape (n - size,)
        Sorted rows of the fitting part.
    val_idx : numpy.ndarray of int64, shape (size,)
        Sorted rows of the validation part; class shares match ``labels`` (to one row).
    """
    from sklearn.model_selection import StratifiedShuffleSplit

    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(
            f"labels must be a non-empty 1-D integer array, got {y.dtype} of shape {y.shape}"
        )
    classes, counts = np.unique(y, return_counts=True)
    if counts.min() < 2:
        raise ValueError(
            f"labels: class {classes[counts.argmin()]} has a single row; a stratified split "
            "needs two"
        )
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise ValueError(f"size must be an integer, got {size!r}")
    if not classes.size <= size <= y.size - classes.size:
        raise ValueError(
            f"size must be between {classes.size} and {y.size - classes.size} "
            f"(the number of classes and n minus it), got {size}"
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    splitter = StratifiedShuffleSplit(n_splits=1, test_size=int(size), random_state=int(seed))
    train_idx, val_idx = next(splitter.split(np.zeros((y.size, 1)), y))
    return np.sort(train_idx).astype(np.int64), np.sort(val_idx).astype(np.int64)


def _seeded_rows(rows, size, seed):
    """Sorted first ``size`` entries of a seeded permutation of ``rows`` (all if fewer)."""
    if size >= rows.size:
        return rows
    return np.sort(np.random.default_rng(seed).permutation(rows)[:size])


@torch.no_grad()
def _encode(encoder, images, batch_size=512):
    """Frozen features (n, d) of uint8 ``images`` (n, 28, 28), in evaluation mode."""
    from .inputs import to_tensor

    encoder.eval()
    x = to_tensor(images)
    return torch.cat(
        [encoder(x[i : i + batch_size]) for i in range(0, x.shape[0], batch_size)]
    ).numpy()


def validation_score(
    encoder, fit_images, fit_labels, val_images, val_labels, *, Cs=(0.01, 0.1, 1.0), seed=0
):
    """Linear-probe accuracy on the validation rows of an encoder's frozen features.

    Parameters
    ----------
    encoder : torch.nn.Module
        Maps normalised images (b, 1, 28, 28) to features (b, d).
    fit_images : numpy.ndarray of uint8, shape (n_fit, 28, 28)
        Training-part images the probe is fitted on (``C`` is chosen on a fifth of them).
    fit_labels : numpy.ndarray of int, shape (n_fit,)
    val_images : numpy.ndarray of uint8, shape (n_val, 28, 28)
        Validation images the probe is scored on.
    val_labels : numpy.ndarray of int, shape (n_val,)
    Cs : sequence of float
        Candidate inverse regularisation strengths of the probe.
    seed : int
        Seed of the probe's inner split.

    Returns
    -------
    accuracy : float
        Share of validation rows classified right.
    C : float
        The chosen ``C``.
    """
    from ..linear_probe import linear_probe_done_right

    if not isinstance(encoder, torch.nn.Module):
        raise ValueError(f"encoder must be a torch.nn.Module, got {type(encoder).__name__}")
    fit_h = _encode(encoder, fit_images)
    val_h = _encode(encoder, val_images)
    C, acc = linear_probe_done_right(fit_h, fit_labels, val_h, val_labels, list(Cs), seed=seed)
    return float(acc), float(C)


def grid_settings(grid, config):
    """Every combination of a grid, in order (the last key varies fastest).

    Parameters
    ----------
    grid : dict of str -> non-empty list
        Candidate values of settings of ``config`` (e.g. ``{"lr": [1e-3, 3e-3],
        "crop_scale": [[0.2, 1.0], [0.5, 1.0]]}``).
    config : dict
        The configuration the settings belong to.

    Returns
    -------
    list of dict
        One ``{key: value}`` per combination, ``prod(len(values))`` of them.
    """
    if not isinstance(grid, dict) or not grid:
        raise ValueError(
            f"grid must be a non-empty dict of setting -> candidate values, got {grid!r}"
        )
    from .train import check_known_settings

    check_known_settings(grid, config, "grid", "the configuration")
    for key, values in grid.items():
        if not isinstance(values, (list, tuple)) or len(values) == 0:
            raise ValueError(f"grid[{key!r}] must be a non-empty list of values, got {values!r}")
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def _trained_encoder(result):
    """The encoder of a training result's final checkpoint, rebuilt and loaded."""
    from .registry import build_encoder

    encoder = build_encoder(result["config"]["arch"], seed=0)
    encoder.load_state_dict(result["checkpoints"][-1][3])
    return encoder


def _check_budget(**values):
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{key} must be an integer >= 1, got {value!r}")


def _score_setting(name, setting, base, images, labels, rows, budget, Cs, log):
    """Train one setting briefly and score it; a diverged setting scores NaN with its error."""
    from .train import train_encoder

    t0 = time.perf_counter()
    result = train_encoder(
        name,
        images[rows["train"]],
        labels[rows["train"]],
        epochs=budget["epochs"],
        n_images=budget["n_train"],
        overrides={**base, **setting},
    )
    entry = {"setting": setting, "curve": result["curve"]}
    try:
        acc, C = validation_score(
            _trained_encoder(result),
            images[rows["probe"]],
            labels[rows["probe"]],
            images[rows["val"]],
            labels[rows["val"]],
            Cs=Cs,
            seed=budget["seed"],
        )
        entry.update(val_probe=acc, probe_C=C)
    except ValueError as exc:  # NaN or constant features after a diverged run
        entry.update(val_probe=float("nan"), probe_C=None, error=str(exc).splitlines()[0])
    entry["seconds"] = round(time.perf_counter() - t0, 2)
    if log is not None:
        log(
            f"{name} {setting}: validation probe {entry['val_probe']:.4f} "
            f"({entry['seconds']:.0f} s)"
        )
    return entry


def search_recipe(
    name,
    grid,
    *,
    images=None,
    labels=None,
    overrides=None,
    val_size=5000,
    seed=0,
    n_train=4096,
    epochs=1,
    n_probe=2000,
    n_val=2000,
    Cs=(0.01, 0.1, 1.0),
    log=None,
    trials_file=None,
    time_limit=None,
):
    """Try every setting of a small grid for one encoder; choose by a validation probe.

    Every setting trains the configuration ``name`` (with ``overrides``, then the
    setting, applied) from its seeded initialisation on ``n_train`` images of the
    fitting part of :func:`validation_split` for ``epochs`` epochs; a logistic-regression
    probe fitted on ``n_probe`` fitting-part images scores it on ``n_val`` validation
    images. The test split is never read.

    Parameters
    ----------
    name : str
        A key of :data:`~repeval_ref.zoo.registry.ENCODERS` (the base configuration).
    grid : dict of str -> list
        Candidate values (:func:`grid_settings`), e.g. three or more learning rates
        times two temperatures.
    images : numpy.ndarray of uint8, shape (n, 28, 28), optional
        Training images (default: Fashion-MNIST's training split).
    labels : numpy.ndarray of int64, shape (n,), optional
        Their labels; given with ``images`` or not at all.
    overrides : dict, optional
        Settings replaced in the base configuration for every trial (e.g.
        ``{"arch": "resnet"}``); the grid's values override these.
    val_size : int
        Rows of the validation split.
    seed : int
        Seed of the validation split, of the probe and scored subsets, of the probe.
    n_train, epochs, n_probe, n_val : int
        The budget of each trial: training images and epochs; probe-fitting images
        (fitting part) and scored validation images (at most ``val_size``).
    Cs : sequence of float
        Candidate ``C`` of the probe.
    log : callable, optional
        Called with one line per setting.
    trials_file : str or os.PathLike, optional
        A JSON file where every finished setting is written. If it exists, it must have
        been written by a search with the same arguments, and its settings are reused
        instead of retrained: an interrupted search resumes where it stopped and ends
        with the record of an uninterrupted one (up to ``seconds``).
    time_limit : float, optional
        Stop after the first setting that ends once this call has run ``time_limit``
        seconds (needs ``trials_file``); the record is then incomplete.

    Returns
    -------
    dict
        JSON-ready record (as it reads back from JSON): ``base``, ``overrides``, ``grid``,
        ``trials`` (per setting: ``setting``, ``val_probe``, ``probe_C``, ``curve``,
        ``seconds``, and ``error`` when it diverged), ``complete``, ``chosen`` (the
        setting of the first maximal score; None while incomplete), ``score``,
        ``validation`` and ``budget`` (what was used) and ``seconds`` (summed over the
        calls that share the ``trials_file``).
    """
    from .train import encoder_config

    base = dict(overrides or {})
    config = encoder_config(name, overrides=base)
    settings = grid_settings(grid, config)
    _check_budget(val_size=val_size, n_train=n_train, epochs=epochs, n_probe=n_probe, n_val=n_val)
    _check_resume(trials_file, time_limit)
    if (images is None) != (labels is None):
        raise ValueError(
            "images and labels must be given together (or neither: the training split)"
        )
    if images is None:
        from .. import datasets

        images, labels = datasets.fashion_mnist("train")
    images, labels = np.asarray(images), np.asarray(labels)
    if images.ndim != 3 or images.dtype != np.uint8 or labels.shape != (images.shape[0],):
        raise ValueError(
            f"images must be uint8 (n, H, W) with labels (n,), got {images.dtype} {images.shape} "
            f"and {labels.shape}"
        )
    t0 = time.perf_counter()
    train_idx, val_idx = validation_split(labels, val_size, seed)
    rows = {
        "train": train_idx,
        "probe": _seeded_rows(train_idx, n_probe, seed + 1),
        "val": _seeded_rows(val_idx, n_val, seed + 2),
    }
    budget = {"epochs": int(epochs), "n_train": int(n_train), "seed": int(seed)}
    record = _json_ready(
        {
            "base": name,
            "overrides": base,
            "grid": {k: list(v) for k, v in grid.items()},
            "validation": {
                "method": "sklearn StratifiedShuffleSplit of the training split",
                "size": int(val_size),
                "seed": int(seed),
                "scored_rows": int(rows["val"].size),
                "probe_rows": int(rows["probe"].size),
                "probe_Cs": [float(c) for c in Cs],
            },
            "budget": {"epochs": int(epochs), "n_train": int(min(n_train, train_idx.size))},
        }
    )
    trials = _read_trials(trials_file, record)
    reused = sum(t["seconds"] for t in trials)
    for setting in settings[len(trials) :]:
        trials.append(
            _json_ready(_score_setting(name, setting, base, images, labels, rows, budget, Cs, log))
        )
        _write_trials(trials_file, record, trials)
        if (
            time_limit is not None
            and time.perf_counter() - t0 >= time_limit
            and len(trials) < len(settings)
        ):
            break
    record.update(trials=trials, seconds=round(time.perf_counter() - t0 + reused, 1))
    return _choose(name, record, len(settings))


def _choose(name, record, n_settings):
    """Add ``complete``, ``chosen`` and ``score`` (the first maximal validation probe) to a search
    record."""
    trials = record["trials"]
    if len(trials) < n_settings:
        return {**record, "complete": False, "chosen": None, "score": None}
    scores = np.array([t["val_probe"] for t in trials], dtype=float)
    if np.all(np.isnan(scores)):
        raise ValueError(
            f"grid: every setting of {name!r} failed to train ({trials[0].get('error')})"
        )
    best = int(np.nanargmax(scores))  # the first maximum: earlier settings win ties
    return {
        **record,
        "complete": True,
        "chosen": trials[best]["setting"],
        "score": float(scores[best]),
    }


def _json_ready(value):
    """``value`` as it reads back from JSON (tuples become lists), so resumed and fresh records are
    equal."""
    return json.loads(json.dumps(value))


def _read_trials(path, search):
    """The finished trials that ``path`` holds for the search described by ``search`` ([] without a
    file)."""
    if path is None or not os.path.exists(path):
        return []
    try:
        with open(path) as f:
            payload = json.load(f)
        saved, trials = payload["search"], payload["trials"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"trials_file {os.fspath(path)!r} cannot be read as the trials of a search: {exc}"
        ) from exc
    if saved != search:
        raise ValueError(f"trials_file {os.fspath(path)!r} was written for another search: {saved}")
    return list(trials)


def _write_trials(path, search, trials):
    """Write the search and its finished trials to ``path`` atomically (nothing without a path)."""
    if path is None:
        return
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"search": search, "trials": trials}, f, indent=1)
    os.replace(tmp, path)


def _check_resume(trials_file, time_limit):
    if trials_file is not None and not isinstance(trials_file, (str, os.PathLike)):
        raise ValueError(f"trials_file must be a path, got {type(trials_file).__name__}")
    if time_limit is not None:
        if (
            isinstance(time_limit, bool)
            or not isinstance(time_limit, (int, float))
            or not time_limit > 0
        ):
            raise ValueError(f"time_limit must be a number of seconds > 0, got {time_limit!r}")
        if trials_file is None:
            raise ValueError(
                "time_limit needs a trials_file, where a later call finds the finished settings"
            )
