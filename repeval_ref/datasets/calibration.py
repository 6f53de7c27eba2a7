"""Fix each comparison task's difficulty with a baseline read-out alone, and state its power.

A comparison between two read-outs can only show a difference when the task leaves room
for one: at chance (10 % on ten classes) every method fails alike, near the ceiling
every method succeeds alike. So, before any compared method is run, each task's knob is
set so that a *baseline* that none of the chapters compares lands inside a band,
:data:`BAND` (40-85 %), as close as the grid allows to :data:`TARGET` (60 %); the knob
is then never moved again.

The baseline is a linear probe on raw pixels: ``sklearn.linear_model.LogisticRegression``
(``C =`` :data:`PROBE_C`, L-BFGS) on pixels standardised with the mean and standard
deviation of all the pixels of its own training images (:func:`raw_pixel_probe`; one
mean and one spread, not one per pixel, which would magnify whatever a shifted image
puts on the garments' nearly constant black border). It is fitted on
:data:`FIT_SIZE` images and scored on :data:`EVAL_SIZE` other images, both drawn from
the *training* split of Fashion-MNIST (rows and variant draws from
:data:`CALIBRATION_SEED`, :func:`calibration_rows`), so that the test images the
comparisons use are never seen here.

The tasks (:data:`TASKS`), each with the protocol of the chapter that uses it:

* ``fashion_shifted`` (out of distribution): fitted on clean garments, scored on the
  same kind of garments blended onto photographs; knob ``blend``
  (:func:`~repeval_ref.datasets.fashion_mnist_shifted`).
* ``fashion_cluttered`` (in distribution): fitted and scored on cluttered canvases;
  knob ``garment_side``, one garment side ``s`` for every image, ``sides = (s, s)`` of
  :func:`~repeval_ref.datasets.fashion_mnist_cluttered` (the garment moves over
  ``56 - s + 1`` positions each way; 56 fills the canvas and does not move), at the
  default ``clutter = 1``. A second sweep over ``clutter`` at the default sizes
  (14 to 28) is recorded beside it.
* ``fashion_corrupted/<corruption>`` (out of distribution): fitted on clean garments,
  scored on garments under one corruption; knob ``severity`` (1-5, the SSIM-matched
  ladder of :mod:`repeval_ref.datasets.corruptions`).

Power. For the chosen knob, :func:`detectable_difference` gives the smallest paired
accuracy difference that McNemar's test detects at two-sided level 0.05 with power 0.8
on :data:`TEST_SIZE` test images (:func:`repeval_ref.power.paired_detectable_difference`).
The stated discordance assumption is the upper bound for two methods at the baseline's
accuracy, ``min(2 a, 2 - 2 a)`` (:func:`repeval_ref.power.discordance_upper_bound`), so
the difference given is conservative; the discordance measured between two baseline
probes fitted on the two halves of the fitting images is recorded beside it, with the
difference it would give.

``python -m repeval_ref.datasets.calibration`` writes the record,
``repeval_ref/datasets/calibration.json`` (:func:`write_record`); ``make calibration``
runs it. Nothing in it is typed by hand.

Using the calibrated tasks. The generators keep their own defaults (``blend=1``, the
full photograph; garment sides from a quarter to a half of the canvas), which describe
the family of images and which older results were computed with. The experiments read
the calibrated setting by name instead: :func:`calibrated_value` returns the knob value
the committed record chose, :func:`calibrated_images` the images at that value (seed 0,
the comparisons' seed, on either split), and :func:`task_statement` what a page states
beside a comparison (band, knob, value, the baseline's accuracy and the smallest paired
difference detectable with the page's own number of test images). The value is thus
written once, in the record that measured it, and a page or the transfer suite cannot
move it without rerunning the calibration.
"""

from __future__ import annotations

import json
import numbers
import sys
import time
from pathlib import Path

import numpy as np

from .. import power
from .._validation import check_int
from .corruptions import CORRUPTIONS, SEVERITIES, corrupt
from .fashion import fashion_mnist
from .variants import fashion_mnist_cluttered, fashion_mnist_shifted

__all__ = [
    "BAND",
    "TARGET",
    "CHANCE",
    "CALIBRATION_SEED",
    "FIT_SIZE",
    "EVAL_SIZE",
    "TEST_SIZE",
    "PROBE_C",
    "TASKS",
    "RECORD_PATH",
    "calibration_rows",
    "raw_pixel_probe",
    "choose_knob",
    "detectable_difference",
    "task_images",
    "calibrate_task",
    "calibrate_all",
    "write_record",
    "load_record",
    "summary_rows",
    "calibrated_value",
    "calibrated_images",
    "task_statement",
    "CORRUPTED_MIX",
]

#: The band the baseline's accuracy must land in (shares, inclusive).
BAND = (0.40, 0.85)

#: Where in the band the knob aims: the value closest to it is chosen.
TARGET = 0.60

#: Accuracy of a guess on ten balanced classes.
CHANCE = 0.10

#: Seed of the calibration rows and of the variants' draws (the comparisons use seed 0).
CALIBRATION_SEED = 2026

#: Training-split images the baseline is fitted on, and images it is scored on.
FIT_SIZE, EVAL_SIZE = 3000, 2000

#: Test images a comparison is scored on (the full Fashion-MNIST test split).
TEST_SIZE = 10000

#: Inverse regularisation strength of the baseline probe (fixed, not tuned).
PROBE_C = 0.01

#: Level and power of the detectable difference.
ALPHA, POWER = 0.05, 0.8

#: task -> knob, its grid, and whether the probe is fitted on clean garments ("ood")
#: or on the task's own images ("id").
TASKS = {
    "fashion_shifted": {
        "knob": "blend",
        "grid": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
        "protocol": "ood",
    },
    "fashion_cluttered": {"knob": "garment_side", "grid": (28, 40, 48, 52, 56), "protocol": "id"},
    **{
        f"fashion_corrupted/{c}": {"knob": "severity", "grid": SEVERITIES, "protocol": "ood"}
        for c in CORRUPTIONS
    },
}

#: The clutter strengths of the second sweep of the cluttered task (default garment sizes).
CLUTTER_GRID = (1.0, 0.5, 0.0)

#: Where :func:`write_record` writes by default.
RECORD_PATH = Path(__file__).with_name("calibration.json")


def _check_task(task):
    if not isinstance(task, str) or task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}; got {task!r}")
    return task


def _check_band(band):
    if (
        not isinstance(band, (tuple, list))
        or len(band) != 2
        or not all(isinstance(b, numbers.Real) and not isinstance(b, bool) for b in band)
        or not 0.0 <= band[0] < band[1] <= 1.0
    ):
        raise ValueError(f"band must be a pair (low, high) with 0 <= low < high <= 1, got {band!r}")
    return float(band[0]), float(band[1])


def calibration_rows(seed=CALIBRATION_SEED, n_fit=FIT_SIZE, n_eval=EVAL_SIZE):
    """Two disjoint sets of Fashion-MNIST *training* rows: to fit the baseline, and to score it.

    Parameters
    ----------
    seed : int
        Seed of ``numpy.random.default_rng([seed, 26])``, whose permutation of the
        60,000 rows is cut into the two sets, ``>= 0``.
    n_fit, n_eval : int
        Sizes, ``>= 10`` each, ``n_fit + n_eval <= 60000``.

    Returns
    -------
    fit_rows, eval_rows : numpy.ndarray of int64
        Each sorted.
    """
    seed = check_int(seed, "seed", minimum=0)
    n_fit = check_int(n_fit, "n_fit", minimum=10)
    n_eval = check_int(n_eval, "n_eval", minimum=10)
    if n_fit + n_eval > 60000:
        raise ValueError(f"n_fit + n_eval must be at most 60000, got {n_fit + n_eval}")
    order = np.random.default_rng([seed, 26]).permutation(60000)
    return np.sort(order[:n_fit]), np.sort(order[n_fit : n_fit + n_eval])


def _flat(images):
    return np.asarray(images, dtype=np.float64).reshape(len(images), -1)


def raw_pixel_probe(
    train_images, train_labels, test_images, test_labels, *, C=PROBE_C, max_iter=1000
):
    """Which test images a logistic-regression probe on standardised raw pixels gets right.

    Parameters
    ----------
    train_images : array_like, shape (n, H, W)
        Grey levels; the standardisation (subtract the mean grey level of all their
        pixels, divide by the standard deviation of all their pixels) is taken from
        these alone and applied to the test images unchanged.
    train_labels : array_like of int, shape (n,)
    test_images : array_like, shape (m, H, W)
    test_labels : array_like of int, shape (m,)
    C : float
        Inverse regularisation strength, ``> 0`` (default :data:`PROBE_C`).
    max_iter : int
        L-BFGS iterations, ``>= 1``.

    Returns
    -------
    numpy.ndarray of bool, shape (m,)
        ``True`` where the prediction equals the label; its mean is the accuracy.
    """
    predict = _fitted_probe(train_images, train_labels, C=C, max_iter=max_iter)
    y_test = np.asarray(test_labels)
    if y_test.ndim != 1 or len(y_test) != len(test_images):
        raise ValueError(
            f"test_labels must hold one label per test image ({len(test_images)}), "
            f"got shape {y_test.shape}"
        )
    return predict(test_images) == y_test


def _fitted_probe(train_images, train_labels, *, C=PROBE_C, max_iter=1000):
    """Fit the baseline; return the function that predicts labels of images of the same size."""
    import threadpoolctl
    from sklearn.linear_model import LogisticRegression

    x_train = _flat(train_images)
    y_train = np.asarray(train_labels)
    if y_train.ndim != 1 or len(y_train) != len(x_train):
        raise ValueError(
            f"train_labels must hold one label per training image ({len(x_train)}), "
            f"got shape {y_train.shape}"
        )
    if isinstance(C, bool) or not isinstance(C, numbers.Real) or not C > 0:
        raise ValueError(f"C must be > 0, got {C!r}")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    # one mean and one spread for all pixels: per-pixel statistics would divide the
    # nearly constant border pixels of the garments by a tiny spread and blow up any
    # background a shifted image puts there
    mean = float(x_train.mean())
    scale = float(x_train.std()) or 1.0
    model = LogisticRegression(C=float(C), max_iter=max_iter)
    # one BLAS thread: the solver's sums (and so the fitted probe, to a few images in a
    # thousand) would otherwise depend on how many threads the machine gives it
    with threadpoolctl.threadpool_limits(1):
        model.fit((x_train - mean) / scale, y_train)

    def predict(images):
        x = _flat(images)
        if x.shape[1] != x_train.shape[1]:
            raise ValueError(
                f"test_images have {x.shape[1]} pixels, train_images {x_train.shape[1]}"
            )
        with threadpoolctl.threadpool_limits(1):
            return model.predict((x - mean) / scale)

    return predict


def choose_knob(values, accuracies, band=BAND, target=TARGET):
    """The knob value whose baseline accuracy lies in ``band``, closest to ``target``.

    Parameters
    ----------
    values : sequence
        The knob's grid.
    accuracies : sequence of float
        The baseline's accuracy at each value, in ``[0, 1]``.
    band : (float, float)
        Inclusive bounds, ``0 <= low < high <= 1``.
    target : float
        Inside ``band``; ties go to the earlier value.

    Returns
    -------
    int or None
        Index into ``values``; ``None`` when no accuracy lies in the band.
    """
    low, high = _check_band(band)
    if (
        isinstance(target, bool)
        or not isinstance(target, numbers.Real)
        or not low <= target <= high
    ):
        raise ValueError(f"target must lie in the band [{low}, {high}], got {target!r}")
    accuracies = [float(a) for a in accuracies]
    if len(accuracies) != len(values) or not accuracies:
        raise ValueError(
            f"accuracies must have one entry per value ({len(values)}), got {len(accuracies)}"
        )
    if not all(0.0 <= a <= 1.0 for a in accuracies):
        raise ValueError(f"accuracies must lie in [0, 1], got {accuracies}")
    inside = [i for i, a in enumerate(accuracies) if low <= a <= high]
    if not inside:
        return None
    return min(inside, key=lambda i: (abs(accuracies[i] - target), i))


def detectable_difference(accuracy, n=TEST_SIZE, discordance=None, alpha=ALPHA, power_=POWER):
    """Smallest paired accuracy difference McNemar's test detects on ``n`` test images.

    Parameters
    ----------
    accuracy : float
        The baseline's accuracy, in (0, 1): the compared methods are assumed near it.
    n : int
        Test images both methods are scored on, ``>= 1``.
    discordance : float, optional
        Share of images on which the two methods disagree. Default: the upper bound
        ``min(2 a, 2 - 2 a)`` for two methods of accuracy ``a``
        (:func:`repeval_ref.power.discordance_upper_bound`), which makes the result
        conservative.
    alpha, power_ : float
        Two-sided level and power (0.05 and 0.8).

    Returns
    -------
    float
        The difference as a share (``inf`` when none is detectable).
    """
    if (
        isinstance(accuracy, bool)
        or not isinstance(accuracy, numbers.Real)
        or not 0.0 < accuracy < 1.0
    ):
        raise ValueError(f"accuracy must lie in (0, 1), got {accuracy!r}")
    if discordance is None:
        discordance = power.discordance_upper_bound(accuracy, accuracy)
    return power.paired_detectable_difference(n, discordance, alpha=alpha, power=power_)


def _corruption_draws(seed, corruption, severity):
    return np.random.default_rng([seed, 26, 2, CORRUPTIONS.index(corruption), severity])


def task_images(task, value, rows, *, seed=CALIBRATION_SEED):
    """The training-split images of ``task`` at knob ``value``, for the given rows.

    Parameters
    ----------
    task : str
        A key of :data:`TASKS`.
    value : float or int
        A knob value (``blend`` in [0, 1], ``garment_side`` in 1..56, ``severity`` in 1..5).
    rows : array_like of int
        Rows of the Fashion-MNIST training split.
    seed : int
        Seed of the variant's draws (:data:`CALIBRATION_SEED`, not the comparisons' 0).

    Returns
    -------
    images : numpy.ndarray of uint8, shape (len(rows), H, W)
    labels : numpy.ndarray of int64, shape (len(rows),)
    """
    task = _check_task(task)
    rows = np.asarray(rows, dtype=np.int64)
    if task == "fashion_shifted":
        images, labels = fashion_mnist_shifted("train", seed=seed, blend=value)
    elif task == "fashion_cluttered":
        side = check_int(value, "garment_side", minimum=1, maximum=56)
        images, labels = fashion_mnist_cluttered("train", seed=seed, sides=(side, side))
    else:
        corruption = task.split("/", 1)[1]
        images, labels = fashion_mnist("train")
        return (
            corrupt(
                images[rows], corruption, value, rng=_corruption_draws(seed, corruption, value)
            ),
            labels[rows],
        )
    return images[rows], labels[rows]


def _power_record(accuracy, measured_discordance, n):
    bound = power.discordance_upper_bound(accuracy, accuracy)
    return {
        "test_size": n,
        "alpha": ALPHA,
        "power": POWER,
        "discordance_assumed": (
            "upper bound min(2a, 2 - 2a) for two methods at the baseline's accuracy a"
        ),
        "discordance": round(bound, 4),
        "detectable_difference": round(detectable_difference(accuracy, n), 4),
        "discordance_measured": round(measured_discordance, 4),
        "detectable_difference_measured": round(
            detectable_difference(accuracy, n, measured_discordance), 4
        ),
    }


def _task_pair(task, value, fit, evaluate, seed, clutter=False):
    """Fitting and scoring images of one knob value (clean fitting images out of distribution)."""
    if clutter:
        images, labels = fashion_mnist_cluttered("train", seed=seed, clutter=value)
        return images[fit], labels[fit], images[evaluate], labels[evaluate]
    if TASKS[task]["protocol"] == "ood":
        clean_x, clean_y = fashion_mnist("train")
        x_fit, y_fit = clean_x[fit], clean_y[fit]
    else:
        x_fit, y_fit = task_images(task, value, fit, seed=seed)
    return (x_fit, y_fit) + task_images(task, value, evaluate, seed=seed)


def _sweep(task, grid, fit, evaluate, seed, clutter=False):
    """Baseline accuracy at every value of ``grid`` (one fit for all values out of distribution)."""
    accuracies, probe = [], None
    for value in grid:
        x_fit, y_fit, x_eval, y_eval = _task_pair(task, value, fit, evaluate, seed, clutter)
        if probe is None or TASKS[task]["protocol"] == "id" or clutter:
            probe = _fitted_probe(x_fit, y_fit)
        accuracies.append(float(np.mean(probe(x_eval) == y_eval)))
    return accuracies


def _measured_discordance(task, value, fit, evaluate, seed):
    """Share of scoring images on which baselines fitted on the two halves of ``fit`` disagree
    about correctness (one right, the other wrong)."""
    x_fit, y_fit, x_eval, y_eval = _task_pair(task, value, fit, evaluate, seed)
    half = len(fit) // 2
    a = _fitted_probe(x_fit[:half], y_fit[:half])(x_eval) == y_eval
    b = _fitted_probe(x_fit[half:], y_fit[half:])(x_eval) == y_eval
    return float(np.mean(a != b))


def calibrate_task(
    task,
    *,
    seed=CALIBRATION_SEED,
    n_fit=FIT_SIZE,
    n_eval=EVAL_SIZE,
    grid=None,
    band=BAND,
    target=TARGET,
    test_size=TEST_SIZE,
):
    """Sweep a task's knob with the baseline, choose the value, and state the task's power.

    Parameters
    ----------
    task : str
        A key of :data:`TASKS`.
    seed : int
        Seed of the calibration rows and of the variant's draws.
    n_fit, n_eval : int
        Calibration sizes (:func:`calibration_rows`).
    grid : sequence, optional
        Knob values to try (default ``TASKS[task]["grid"]``).
    band, target : see :func:`choose_knob`.
    test_size : int
        Test images of the comparisons, for the detectable difference.

    Returns
    -------
    dict
        ``knob``, ``grid``, ``accuracies``, ``chosen`` (value or ``None``),
        ``baseline_accuracy``, ``in_band``, the power record and a ``note`` when no value
        lands in the band.
    """
    task = _check_task(task)
    test_size = check_int(test_size, "test_size", minimum=1)
    band = _check_band(band)
    grid = tuple(TASKS[task]["grid"] if grid is None else grid)
    if not grid:
        raise ValueError("grid must hold at least one knob value")
    fit, evaluate = calibration_rows(seed, n_fit, n_eval)
    accuracies = _sweep(task, grid, fit, evaluate, seed)
    index = choose_knob(grid, accuracies, band, target)
    record = {
        "knob": TASKS[task]["knob"],
        "protocol": (
            "probe fitted on clean garments, scored on the task's images"
            if TASKS[task]["protocol"] == "ood"
            else "probe fitted and scored on the task's images"
        ),
        "grid": list(grid),
        "accuracies": [round(a, 4) for a in accuracies],
    }
    if index is None:
        closest = min(range(len(grid)), key=lambda i: abs(accuracies[i] - target))
        record.update(
            chosen=None,
            in_band=False,
            baseline_accuracy=round(accuracies[closest], 4),
            note=(
                f"no value of {record['knob']} brings the baseline into [{band[0]}, {band[1]}]; "
                f"closest: {grid[closest]} at {accuracies[closest]:.3f}"
            ),
        )
        return record
    record.update(chosen=grid[index], in_band=True, baseline_accuracy=round(accuracies[index], 4))
    measured = _measured_discordance(task, grid[index], fit, evaluate, seed)
    record.update(_power_record(accuracies[index], measured, test_size))
    return record


def calibrate_all(*, seed=CALIBRATION_SEED, n_fit=FIT_SIZE, n_eval=EVAL_SIZE, verbose=False):
    """:func:`calibrate_task` for every task of :data:`TASKS`, plus the clutter sweep.

    Returns
    -------
    dict
        The settings (band, target, chance, seed, sizes, probe) and one record per task.
    """
    out = {
        "band": list(BAND),
        "target": TARGET,
        "chance": CHANCE,
        "seed": seed,
        "fit_size": n_fit,
        "eval_size": n_eval,
        "calibration_split": "train",
        "baseline": f"LogisticRegression(C={PROBE_C}, lbfgs) on standardised raw pixels",
        "tasks": {},
    }
    for task in TASKS:
        start = time.perf_counter()
        out["tasks"][task] = calibrate_task(task, seed=seed, n_fit=n_fit, n_eval=n_eval)
        if verbose:
            rec = out["tasks"][task]
            print(
                f"{task}: {rec['knob']} {rec['grid']} -> {rec['accuracies']} chosen "
                f"{rec['chosen']} ({time.perf_counter() - start:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    fit, evaluate = calibration_rows(seed, n_fit, n_eval)
    accuracies = _sweep("fashion_cluttered", CLUTTER_GRID, fit, evaluate, seed, clutter=True)
    index = choose_knob(CLUTTER_GRID, accuracies)
    out["tasks"]["fashion_cluttered"]["clutter_sweep"] = {
        "knob": "clutter",
        "sides": "default (14, 28)",
        "grid": list(CLUTTER_GRID),
        "accuracies": [round(a, 4) for a in accuracies],
        "in_band": index is not None,
        "note": (
            "clutter alone at the default garment sizes "
            f"{'brings' if index is not None else 'cannot bring'} the baseline into the band "
            f"(best {max(accuracies):.3f})"
        ),
    }
    if verbose:
        print(f"clutter sweep: {accuracies}", file=sys.stderr)
    return out


def write_record(path=RECORD_PATH, **kwargs):
    """Run :func:`calibrate_all` and write its record as JSON to ``path``; return the record."""
    record = calibrate_all(**kwargs)
    Path(path).write_text(json.dumps(record, indent=1) + "\n")
    return record


def load_record(path=RECORD_PATH):
    """The committed calibration record (a dict, as :func:`calibrate_all` returns it)."""
    return json.loads(Path(path).read_text())


def summary_rows(record=None):
    """One row per task of a calibration record, for a page's table.

    Parameters
    ----------
    record : dict, optional
        As :func:`calibrate_all` returns it; default the committed one (:func:`load_record`).

    Returns
    -------
    list of dict
        Keys ``task``, ``band`` (low, high), ``knob``, ``value`` (``None`` when no value
        lands in the band), ``baseline_accuracy``, ``in_band``, ``test_size`` and
        ``detectable_difference`` (both ``None`` without a chosen value).
    """
    record = load_record() if record is None else record
    if not isinstance(record, dict) or "tasks" not in record or "band" not in record:
        raise ValueError("record must be a calibration record with 'band' and 'tasks'")
    rows = []
    for task, rec in record["tasks"].items():
        rows.append(
            {
                "task": task,
                "band": tuple(record["band"]),
                "knob": rec["knob"],
                "value": rec["chosen"],
                "baseline_accuracy": rec["baseline_accuracy"],
                "in_band": rec["in_band"],
                "test_size": rec.get("test_size"),
                "detectable_difference": rec.get("detectable_difference"),
            }
        )
    return rows


#: Name of the transfer suite's mixture of the six corruptions (each on a sixth of the images,
#: each at its own calibrated severity), accepted by :func:`task_statement`.
CORRUPTED_MIX = "fashion_corrupted"


def _calibrated_record(task, record):
    record = load_record() if record is None else record
    if not isinstance(record, dict) or "tasks" not in record or "band" not in record:
        raise ValueError("record must be a calibration record with 'band' and 'tasks'")
    if task not in record["tasks"]:
        raise ValueError(f"task must be one of {', '.join(record['tasks'])}; got {task!r}")
    rec = record["tasks"][task]
    if rec.get("chosen") is None or not rec.get("in_band"):
        raise ValueError(
            f"task {task!r} has no calibrated value: {rec.get('note', 'no value in the band')}"
        )
    return record, rec


def calibrated_value(task, record=None):
    """The knob value the calibration chose for ``task``.

    Parameters
    ----------
    task : str
        A key of :data:`TASKS` (``"fashion_shifted"``, ``"fashion_cluttered"``,
        ``"fashion_corrupted/<corruption>"``).
    record : dict, optional
        A calibration record; default the committed one (:func:`load_record`).

    Returns
    -------
    float or int
        ``blend`` (float), the garment side (int) or the severity (int).

    Raises
    ------
    ValueError
        ``task`` unknown, or its calibration found no value in the band.
    """
    task = _check_task(task)
    _, rec = _calibrated_record(task, record)
    return rec["chosen"]


def calibrated_images(task, split, *, seed=0, return_boxes=False, record=None):
    """The images of ``task`` at its calibrated knob value.

    Parameters
    ----------
    task : str
        A key of :data:`TASKS`.
    split : {"train", "test"}
        The 60,000 or 10,000 Fashion-MNIST rows, in the files' order.
    seed : int
        Seed of the variant's draws (default 0, the comparisons' seed; the calibration
        itself used :data:`CALIBRATION_SEED` on training rows).
    return_boxes : bool
        Also return the garment boxes (``fashion_cluttered`` only).
    record : dict, optional
        A calibration record; default the committed one.

    Returns
    -------
    images : numpy.ndarray of uint8, shape (N, 28, 28), or (N, 56, 56) for the cluttered task
    labels : numpy.ndarray of int64, shape (N,)
    boxes : numpy.ndarray of int64, shape (N, 4)
        Only with ``return_boxes``; see :func:`~repeval_ref.datasets.fashion_mnist_cluttered`.
    """
    value = calibrated_value(task, record)
    if not isinstance(return_boxes, (bool, np.bool_)):
        raise ValueError(f"return_boxes must be a bool, got {return_boxes!r}")
    if return_boxes and task != "fashion_cluttered":
        raise ValueError(f"return_boxes is only for 'fashion_cluttered', got task {task!r}")
    if task == "fashion_shifted":
        return fashion_mnist_shifted(split, seed=seed, blend=value)
    if task == "fashion_cluttered":
        return fashion_mnist_cluttered(
            split, seed=seed, sides=(value, value), return_boxes=bool(return_boxes)
        )
    from .corruptions import fashion_mnist_corrupted

    return fashion_mnist_corrupted(split, task.split("/", 1)[1], value, seed=seed)


def task_statement(task, test_size, record=None):
    """What a page states beside a comparison run on ``task``: band, knob, power.

    Parameters
    ----------
    task : str
        A key of :data:`TASKS`, or :data:`CORRUPTED_MIX` for the transfer suite's
        mixture of the six corruptions at their calibrated severities (its baseline
        accuracy is the mean of the six calibrated accuracies, each corruption covering
        a sixth of the images; it was not measured on the mixture itself).
    test_size : int
        Test images the page's comparison is scored on, ``>= 1``.
    record : dict, optional
        A calibration record; default the committed one.

    Returns
    -------
    dict
        ``band_low``, ``band_high`` and ``chance`` (shares); ``knob`` (str); ``value``
        (the knob value, or for the mixture a string listing each corruption's
        severity); ``baseline`` (str, the baseline read-out), ``baseline_accuracy``;
        ``test_size``; ``detectable`` (smallest paired accuracy difference McNemar's
        test detects at level 0.05 with power 0.8 on ``test_size`` images, at the
        conservative discordance bound, :func:`detectable_difference`); ``alpha`` and
        ``power``, the level and power it assumes; ``recorded_test_size`` and
        ``recorded_detectable`` (the same for the record's own test size).
    """
    test_size = check_int(test_size, "test_size", minimum=1)
    record = load_record() if record is None else record
    if task == CORRUPTED_MIX:
        parts = [t for t in TASKS if t.startswith(CORRUPTED_MIX + "/")]
        recs = [_calibrated_record(t, record)[1] for t in parts]
        accuracy = float(np.mean([r["baseline_accuracy"] for r in recs]))
        knob = "severity"
        value = ", ".join(
            f"{t.split('/', 1)[1].replace('_', ' ')} {r['chosen']}" for t, r in zip(parts, recs)
        )
        recorded_n = recs[0]["test_size"]
    else:
        task = _check_task(task)
        record, rec = _calibrated_record(task, record)
        accuracy, knob, value = float(rec["baseline_accuracy"]), rec["knob"], rec["chosen"]
        recorded_n = rec["test_size"]
    low, high = _check_band(tuple(record["band"]))
    return {
        "band_low": low,
        "band_high": high,
        "chance": float(record["chance"]),
        "knob": knob,
        "value": value,
        "baseline": record["baseline"],
        "baseline_accuracy": accuracy,
        "test_size": test_size,
        "detectable": detectable_difference(accuracy, test_size),
        "alpha": ALPHA,
        "power": POWER,
        "recorded_test_size": recorded_n,
        "recorded_detectable": detectable_difference(accuracy, recorded_n),
    }


if __name__ == "__main__":  # pragma: no cover - the command that writes the record
    import threadpoolctl

    with threadpoolctl.threadpool_limits(1):
        started = time.perf_counter()
        write_record(verbose=True)
        print(f"wrote {RECORD_PATH} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
