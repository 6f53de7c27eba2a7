"""Tests of the tasks' knobs and of their calibration on a baseline.

The knobs (``blend`` of the shifted set; ``sides`` and ``clutter`` of the cluttered
canvases; ``severity`` of the corruptions) are checked for shapes, seeds, pinned bytes
of a small sample and their argument checks; the calibration for its choice rule, its
rows (training split only), a run on a small fixed sample, and the committed record:
every chosen value inside the band, and every detectable difference equal to a root of
McNemar's power function found here by bisection (not formula (2) of repeval_ref.power).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
from scipy import stats

from repeval_ref import datasets as ds
from repeval_ref.datasets import calibration as cal
from repeval_ref.datasets import variants


def sha(*arrays):
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()


@pytest.fixture(scope="module")
def clean_test():
    return ds.fashion_mnist("test")


@pytest.fixture(scope="module")
def record():
    return cal.load_record()


# ------------------------------------------------------------------ shifted: blend
def test_blend_one_is_the_default_and_zero_the_clean_garments(clean_test):
    default, labels = ds.fashion_mnist_shifted("test", seed=0)
    full, _ = ds.fashion_mnist_shifted("test", seed=0, blend=1)
    none, none_labels = ds.fashion_mnist_shifted("test", seed=0, blend=0.0)
    assert np.array_equal(default, full)
    assert np.array_equal(none, clean_test[0]) and np.array_equal(none_labels, clean_test[1])


def test_blend_dims_the_photograph_by_rounding(clean_test):
    half, labels = ds.fashion_mnist_shifted("test", seed=4, blend=0.5)
    full, _ = ds.fashion_mnist_shifted("test", seed=4)
    assert half.shape == (10000, 28, 28) and half.dtype == np.uint8 and labels.dtype == np.int64
    # where the garment is black both images show the crop B itself: half of it, rounded
    black = clean_test[0] == 0
    assert np.array_equal(half[black], np.rint(0.5 * full[black].astype(float)).astype(np.uint8))
    # on the garment, |round(B / 2) - G| with B = G + X or G - X read back from the full image
    g = clean_test[0].astype(int)[~black]
    x = full.astype(int)[~black]
    candidates = [np.abs(np.rint(0.5 * b_) - g) for b_ in (g + x, g - x)]
    ok = [
        (c == half[~black]) & (b_ >= 0) & (b_ <= 255) for c, b_ in zip(candidates, (g + x, g - x))
    ]
    assert np.all(ok[0] | ok[1])


@pytest.mark.recompute  # a pinned digest: exact on every processor
def test_blend_seeds_and_pinned_sample():
    a, _ = ds.fashion_mnist_shifted("test", seed=0, blend=0.4)
    b, _ = ds.fashion_mnist_shifted("test", seed=0, blend=0.4)
    c, _ = ds.fashion_mnist_shifted("test", seed=1, blend=0.4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert sha(a[:16]) == "48afc4246b6571c453b4af4bb82b043d39ecb80859d771b8c1831a6a7daa95f4"


@pytest.mark.parametrize(
    "blend,kind",
    [
        (-0.1, ValueError),
        (1.5, ValueError),
        (float("nan"), ValueError),
        (True, TypeError),
        ("0.5", TypeError),
    ],
)
def test_blend_is_checked(blend, kind):
    with pytest.raises(kind, match="blend"):
        ds.fashion_mnist_shifted("test", blend=blend)


# ---------------------------------------------------------- cluttered: sides, clutter
def test_default_sides_and_clutter_give_the_default_images():
    a = ds.fashion_mnist_cluttered("test", seed=0, return_boxes=True)
    b = ds.fashion_mnist_cluttered("test", seed=0, sides=(14, 28), clutter=1.0, return_boxes=True)
    for x, y in zip(a, b):
        assert np.array_equal(x, y)


@pytest.mark.slow
@pytest.mark.recompute  # a pinned digest: exact on every processor
def test_garment_filling_the_canvas_does_not_move():
    images, labels, boxes = ds.fashion_mnist_cluttered(
        "test", seed=0, sides=(56, 56), return_boxes=True
    )
    assert images.shape == (10000, 56, 56) and images.dtype == np.uint8 and labels.shape == (10000,)
    assert np.all(boxes == [0, 0, 56, 56])
    again, _ = ds.fashion_mnist_cluttered("test", seed=0, sides=(56, 56))
    other, _ = ds.fashion_mnist_cluttered("test", seed=1, sides=(56, 56))
    assert np.array_equal(images, again) and not np.array_equal(images, other)
    assert sha(images[:16]) == "952372c5871dd148320add36294d7f0dae179804a11f2256890712ded550488b"


def test_sides_bound_the_boxes_and_clutter_zero_leaves_black_around_the_garment():
    images, _, boxes = ds.fashion_mnist_cluttered(
        "test", seed=1, sides=(20, 40), clutter=0.0, return_boxes=True
    )
    side = boxes[:, 2] - boxes[:, 0]
    assert side.min() == 20 and side.max() == 40 and np.array_equal(side, boxes[:, 3] - boxes[:, 1])
    inside = np.zeros(images.shape, dtype=bool)
    for i, (t, left, b, r) in enumerate(boxes[:200]):
        inside[i, t:b, left:r] = True
    assert not images[:200][~inside[:200]].any()  # no photograph left outside the boxes
    # the crops are the same draws whatever the sizes and the clutter
    photo, row, col = ds.cluttered_crops("test", seed=1)
    lay = variants._cluttered_layout(10000, "test", 1, 56, (20, 40))
    assert np.array_equal(photo, lay["photo"]) and np.array_equal(row, lay["row"])


@pytest.mark.slow
@pytest.mark.recompute  # a pinned digest: exact on every processor
def test_clutter_seeds_and_pinned_sample():
    a, _, boxes = ds.fashion_mnist_cluttered(
        "test", seed=1, sides=(20, 40), clutter=0.5, return_boxes=True
    )
    b, _ = ds.fashion_mnist_cluttered("test", seed=1, sides=(20, 40), clutter=0.5)
    c, _ = ds.fashion_mnist_cluttered("test", seed=2, sides=(20, 40), clutter=0.5)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert (
        sha(a[:16], boxes[:16])
        == "b9d5b49d5d3933d75fd0cab321d5d56f67e3e5797d16401d93bf351e8c5565dd"
    )


@pytest.mark.parametrize(
    "kwargs,kind,word",
    [
        ({"sides": (0, 10)}, ValueError, "sides[0]"),
        ({"sides": (10, 57)}, ValueError, "sides[1]"),
        ({"sides": (30, 20)}, ValueError, "sides"),
        ({"sides": 28}, TypeError, "sides"),
        ({"sides": (10, 20, 30)}, TypeError, "sides"),
        ({"sides": (10.5, 20)}, TypeError, "sides[0]"),
        ({"clutter": -0.5}, ValueError, "clutter"),
        ({"clutter": 2}, ValueError, "clutter"),
        ({"clutter": None}, TypeError, "clutter"),
    ],
)
def test_cluttered_knobs_are_checked(kwargs, kind, word):
    with pytest.raises(kind) as excinfo:
        ds.fashion_mnist_cluttered("test", **kwargs)
    assert word in str(excinfo.value)


# -------------------------------------------------------------- corruptions: severity
@pytest.mark.parametrize("severity,kind", [(0, ValueError), (6, ValueError), (2.5, TypeError)])
def test_severity_is_checked(severity, kind):
    with pytest.raises(kind, match="severity"):
        ds.fashion_mnist_corrupted("test", "contrast", severity)


@pytest.mark.recompute  # a pinned digest: exact on every processor
def test_corrupted_seeds_and_pinned_sample():
    a, labels = ds.fashion_mnist_corrupted("test", "contrast", 4, seed=0)
    assert a.shape == (10000, 28, 28) and a.dtype == np.uint8 and labels.dtype == np.int64
    assert sha(a[:16]) == "569e9e662740d88799fb6fac3c5ad145f74ed8b1bc93b3d133fc7c3aa47e2d31"
    noisy = [
        ds.fashion_mnist_corrupted("test", "gaussian_noise", 4, seed=s)[0][:64] for s in (0, 0, 1)
    ]
    assert np.array_equal(noisy[0], noisy[1]) and not np.array_equal(noisy[0], noisy[2])


# --------------------------------------------------------------------- calibration
def test_choose_knob_takes_the_value_in_band_closest_to_the_target():
    values = (1, 2, 3, 4, 5)
    assert cal.choose_knob(values, [0.9, 0.8, 0.62, 0.58, 0.3]) == 3 - 1  # 0.62 beats 0.58
    assert cal.choose_knob(values, [0.9, 0.86, 0.84, 0.2, 0.1]) == 2  # only one inside
    assert cal.choose_knob(values, [0.9, 0.7, 0.5, 0.3, 0.1]) == 1  # tie: the earlier
    assert cal.choose_knob(values, [0.12, 0.11, 0.1, 0.1, 0.1]) is None  # none inside
    assert cal.choose_knob(values, [0.9, 0.85, 0.4, 0.3, 0.1], target=0.4) == 2  # bounds inclusive


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"band": (0.9, 0.4)}, "band"),
        ({"band": (0.4,)}, "band"),
        ({"target": 0.95}, "target"),
        ({"accuracies": [0.5]}, "accuracies"),
        ({"accuracies": [0.5, 1.2]}, "accuracies"),
    ],
)
def test_choose_knob_checks_its_arguments(kwargs, word):
    args = {"values": (1, 2), "accuracies": [0.5, 0.6], **kwargs}
    with pytest.raises(ValueError, match=word):
        cal.choose_knob(args.pop("values"), args.pop("accuracies"), **args)


def test_calibration_rows_are_disjoint_training_rows_of_their_own_seed():
    fit, evaluate = cal.calibration_rows(7, 300, 200)
    assert fit.shape == (300,) and evaluate.shape == (200,)
    assert not np.intersect1d(fit, evaluate).size and max(fit.max(), evaluate.max()) < 60000
    again = cal.calibration_rows(7, 300, 200)
    other = cal.calibration_rows(8, 300, 200)
    assert np.array_equal(fit, again[0]) and not np.array_equal(fit, other[0])
    for bad, word in [
        ({"seed": -1}, "seed"),
        ({"n_fit": 5}, "n_fit"),
        ({"n_eval": 59000, "n_fit": 2000}, "n_fit"),
    ]:
        with pytest.raises(ValueError, match=word):
            cal.calibration_rows(**{"seed": 0, "n_fit": 100, "n_eval": 100, **bad})


@pytest.mark.parametrize(
    "task,value,word",
    [
        ("fashion_blurred", 1, "task"),
        ("fashion_shifted", 1.5, "blend"),
        ("fashion_cluttered", 57, "garment_side"),
        ("fashion_corrupted/contrast", 6, "severity"),
    ],
)
def test_task_images_check_their_arguments(task, value, word):
    with pytest.raises(ValueError, match=word):
        cal.task_images(task, value, [0, 1, 2])


def test_raw_pixel_probe_checks_its_arguments():
    x = np.zeros((20, 4, 4), dtype=np.uint8)
    y = np.arange(20) % 2
    x[y == 1, 0, 0] = 200
    assert cal.raw_pixel_probe(x, y, x, y).all()
    with pytest.raises(ValueError, match="train_labels"):
        cal.raw_pixel_probe(x, y[:5], x, y)
    with pytest.raises(ValueError, match="test_labels"):
        cal.raw_pixel_probe(x, y, x, y[:5])
    with pytest.raises(ValueError, match="pixels"):
        cal.raw_pixel_probe(x, y, x[:, :2], y)
    with pytest.raises(ValueError, match="C must"):
        cal.raw_pixel_probe(x, y, x, y, C=0)


@pytest.mark.slow
def test_calibration_on_a_small_fixed_sample_lands_in_the_band():
    rec = cal.calibrate_task("fashion_shifted", seed=11, n_fit=300, n_eval=200, grid=(0.3, 0.9))
    assert rec["knob"] == "blend" and rec["in_band"] and rec["chosen"] == 0.3
    low, high = cal.BAND
    assert low <= rec["baseline_accuracy"] <= high
    assert rec["accuracies"][1] < low  # the harsher blend is out of band
    assert rec["test_size"] == cal.TEST_SIZE
    assert 0 < rec["discordance_measured"] <= rec["discordance"] + 1e-12


@pytest.mark.slow
def test_calibration_says_so_when_no_value_reaches_the_band():
    rec = cal.calibrate_task("fashion_shifted", seed=11, n_fit=300, n_eval=200, grid=(1.0,))
    assert rec["chosen"] is None and not rec["in_band"] and "no value of blend" in rec["note"]
    assert "detectable_difference" not in rec


# --------------------------------------------------------------- the committed record
def mcnemar_power(delta, psi, n, alpha=0.05):
    """Power of McNemar's two-sided test (normal approximation, far tail neglected)."""
    z_a = stats.norm.ppf(1 - alpha / 2)
    return stats.norm.cdf(
        (delta * math.sqrt(n) - z_a * math.sqrt(psi)) / math.sqrt(psi - delta * delta)
    )


def smallest_detectable(psi, n, power=0.8):
    lo, hi = 1e-9, psi * (1 - 1e-12)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if mcnemar_power(mid, psi, n) >= power else (mid, hi)
    return hi


def test_record_holds_every_task_with_its_band_knob_and_settings(record):
    assert record["band"] == list(cal.BAND) and record["chance"] == cal.CHANCE
    assert record["calibration_split"] == "train" and record["seed"] == cal.CALIBRATION_SEED
    assert set(record["tasks"]) == set(cal.TASKS)
    for task, rec in record["tasks"].items():
        assert rec["knob"] == cal.TASKS[task]["knob"]
        assert rec["grid"] == list(cal.TASKS[task]["grid"])
        assert len(rec["accuracies"]) == len(rec["grid"])
        assert cal.choose_knob(rec["grid"], rec["accuracies"]) == (
            None if rec["chosen"] is None else rec["grid"].index(rec["chosen"])
        )


def test_every_chosen_value_has_its_baseline_inside_the_band(record):
    low, high = record["band"]
    chosen = 0
    for task, rec in record["tasks"].items():
        if rec["in_band"]:
            chosen += 1
            assert low <= rec["baseline_accuracy"] <= high, task
            assert rec["baseline_accuracy"] == rec["accuracies"][rec["grid"].index(rec["chosen"])]
        else:
            assert rec["chosen"] is None and rec["note"], task
    assert chosen >= 3


def test_detectable_differences_equal_an_independent_computation(record):
    for task, rec in record["tasks"].items():
        if not rec["in_band"]:
            continue
        a = rec["baseline_accuracy"]
        assert rec["discordance"] == pytest.approx(min(2 * a, 2 - 2 * a), abs=2e-4), task
        assert rec["alpha"] == 0.05 and rec["power"] == 0.8
        for psi, delta in [
            (rec["discordance"], rec["detectable_difference"]),
            (rec["discordance_measured"], rec["detectable_difference_measured"]),
        ]:
            assert smallest_detectable(psi, rec["test_size"]) == pytest.approx(delta, abs=2e-4), (
                task
            )
    # and the function itself, unrounded, against the bisection
    assert cal.detectable_difference(0.6, 10000) == pytest.approx(
        smallest_detectable(0.8, 10000), abs=1e-9
    )


def test_clutter_sweep_is_recorded_with_its_verdict(record):
    sweep = record["tasks"]["fashion_cluttered"]["clutter_sweep"]
    assert sweep["grid"] == list(cal.CLUTTER_GRID) and len(sweep["accuracies"]) == len(
        sweep["grid"]
    )
    assert sweep["in_band"] == (cal.choose_knob(sweep["grid"], sweep["accuracies"]) is not None)
    assert ("cannot" in sweep["note"]) == (not sweep["in_band"])


def test_summary_rows_read_the_record(record):
    rows = cal.summary_rows(record)
    assert [r["task"] for r in rows] == list(record["tasks"])
    for r in rows:
        assert r["band"] == tuple(record["band"])
        assert r["detectable_difference"] == record["tasks"][r["task"]].get("detectable_difference")
    with pytest.raises(ValueError, match="record"):
        cal.summary_rows({"tasks": {}})


def _corners(f, *ranges):
    """Lowest and highest of ``f`` over the corners of the boxes ``ranges`` (f monotone in each)."""
    import itertools

    values = [f(*corner) for corner in itertools.product(*ranges)]
    return min(values), max(values)


@pytest.mark.slow
@pytest.mark.recompute
def test_record_is_what_the_command_measures(record, record_property):
    """The shifted task's record, measured again, on any machine.

    The grid, the sizes and the chosen value must be the record's. Each accuracy of the
    sweep must lie within three binomial standard errors of the paired disagreement that
    refitting the baseline on its rows, or its pixels, in reverse order produces (the same
    fit, summed in other orders: ``tests/helpers/reproduce.py``), plus the record's rounding to four
    digits; the measured discordance within that of its two half fits together; the
    numbers derived from them (the discordance bound, the detectable differences) within
    what those ranges give when carried through their formulas.
    """
    from helpers import reproduce

    task = "fashion_shifted"
    assert cal.TASKS[task]["protocol"] == "ood"  # one baseline, fitted on clean garments
    rec = cal.calibrate_task(task)
    old = record["tasks"][task]
    assert set(rec) == set(old)
    for key in (
        "knob",
        "protocol",
        "grid",
        "chosen",
        "in_band",
        "test_size",
        "alpha",
        "power",
        "discordance_assumed",
    ):
        assert rec[key] == old[key], key
    rounding = 5e-5

    def three_orders(x, y):
        """The baseline fitted on the images as given, on its rows reversed, and on its
        pixels reversed (a permutation of the features): each predicts its own images."""
        as_given, rows = cal._fitted_probe(x, y), cal._fitted_probe(x[::-1], y[::-1])
        pixels = cal._fitted_probe(x[:, ::-1, ::-1], y)
        return lambda images: (as_given(images), rows(images), pixels(images[:, ::-1, ::-1]))

    fit, scored = cal.calibration_rows()
    allowed = []
    for value in old["grid"]:
        x_fit, y_fit, x_eval, y_eval = cal._task_pair(
            task, value, fit, scored, cal.CALIBRATION_SEED
        )
        if not allowed:
            baseline = three_orders(x_fit, y_fit)
        reach = reproduce.reach(*baseline(x_eval))
        allowed.append(reproduce.allowed_difference(reach, y_eval.size) + rounding)
        if value == old["chosen"]:
            half = len(fit) // 2
            halves = [(x_fit[:half], y_fit[:half]), (x_fit[half:], y_fit[half:])]
            reach = sum(reproduce.reach(*three_orders(x, y)(x_eval)) for x, y in halves)
            allowed_discordance = reproduce.allowed_difference(reach, y_eval.size) + rounding
    for value, got, want, tol in zip(old["grid"], rec["accuracies"], old["accuracies"], allowed):
        reproduce.assert_within(
            record_property, f"calibration/accuracies/{task}:{value}", got, want, tol
        )
    i = old["grid"].index(old["chosen"])
    a = (old["baseline_accuracy"] - allowed[i], old["baseline_accuracy"] + allowed[i])
    d = (
        old["discordance_measured"] - allowed_discordance,
        old["discordance_measured"] + allowed_discordance,
    )
    n = old["test_size"]
    expected = {
        "baseline_accuracy": a,
        "discordance": _corners(lambda x: min(2 * x, 2 - 2 * x), a),
        "detectable_difference": _corners(lambda x: cal.detectable_difference(x, n), a),
        "discordance_measured": d,
        "detectable_difference_measured": _corners(
            lambda x, q: cal.detectable_difference(x, n, q), a, d
        ),
    }
    for key, (lo, hi) in expected.items():
        # the range made symmetric about the record's value (its wider side on both)
        reproduce.assert_within(
            record_property,
            f"calibration/{key}/{task}",
            rec[key],
            old[key],
            max(hi - old[key], old[key] - lo) + rounding,
        )


# ------------------------------------------------------ the calibrated setting, by name
def test_calibrated_values_are_the_records_choices(record):
    for task, rec in record["tasks"].items():
        if rec["in_band"]:
            assert cal.calibrated_value(task) == rec["chosen"], task
    # another record is read, not the committed one
    other = {
        "band": [0.4, 0.85],
        "chance": 0.1,
        "baseline": "b",
        "tasks": {"fashion_shifted": {**record["tasks"]["fashion_shifted"], "chosen": 0.7}},
    }
    assert cal.calibrated_value("fashion_shifted", other) == 0.7


def test_calibrated_value_refuses_a_task_without_a_value_in_band(record):
    out = {
        **record,
        "tasks": {
            "fashion_shifted": {
                **record["tasks"]["fashion_shifted"],
                "chosen": None,
                "in_band": False,
                "note": "none in band",
            }
        },
    }
    with pytest.raises(ValueError, match="no calibrated value"):
        cal.calibrated_value("fashion_shifted", out)
    with pytest.raises(ValueError, match="task"):
        cal.calibrated_value("fashion_blurred")


def test_calibrated_images_are_the_generators_at_the_chosen_value(record):
    blend = record["tasks"]["fashion_shifted"]["chosen"]
    x, y = cal.calibrated_images("fashion_shifted", "test")
    ref_x, ref_y = ds.fashion_mnist_shifted("test", seed=0, blend=blend)
    assert np.array_equal(x, ref_x) and np.array_equal(y, ref_y)
    side = record["tasks"]["fashion_cluttered"]["chosen"]
    x, y, boxes = cal.calibrated_images("fashion_cluttered", "test", seed=3, return_boxes=True)
    ref = ds.fashion_mnist_cluttered("test", seed=3, sides=(side, side), return_boxes=True)
    assert all(np.array_equal(a, b) for a, b in zip((x, y, boxes), ref))
    assert np.all(boxes[:, 2] - boxes[:, 0] == side)
    severity = record["tasks"]["fashion_corrupted/contrast"]["chosen"]
    x, _ = cal.calibrated_images("fashion_corrupted/contrast", "test")
    assert np.array_equal(x, ds.fashion_mnist_corrupted("test", "contrast", severity, seed=0)[0])
    with pytest.raises(ValueError, match="return_boxes"):
        cal.calibrated_images("fashion_shifted", "test", return_boxes=True)


def test_task_statement_gives_band_knob_and_the_power_of_the_pages_test_size(record):
    rec = record["tasks"]["fashion_shifted"]
    st = cal.task_statement("fashion_shifted", 600)
    assert (st["band_low"], st["band_high"]) == tuple(record["band"]) and st["chance"] == record[
        "chance"
    ]
    assert st["knob"] == "blend" and st["value"] == rec["chosen"]
    assert st["baseline_accuracy"] == rec["baseline_accuracy"] and st["test_size"] == 600
    a = rec["baseline_accuracy"]
    assert st["detectable"] == pytest.approx(
        smallest_detectable(min(2 * a, 2 - 2 * a), 600), abs=1e-6
    )
    assert st["recorded_detectable"] == pytest.approx(rec["detectable_difference"], abs=1e-4)
    # fewer test images, a larger detectable difference
    assert st["detectable"] > cal.task_statement("fashion_shifted", 10000)["detectable"]
    # the corrupted mixture: the mean of its six calibrated baselines
    mix = cal.task_statement(cal.CORRUPTED_MIX, 5000)
    parts = [r for t, r in record["tasks"].items() if t.startswith("fashion_corrupted/")]
    assert len(parts) == 6
    assert mix["baseline_accuracy"] == pytest.approx(
        np.mean([r["baseline_accuracy"] for r in parts])
    )
    assert all(
        f"{t.split('/')[1].replace('_', ' ')} {r['chosen']}" in mix["value"]
        for t, r in record["tasks"].items()
        if t.startswith("fashion_corrupted/")
    )
    with pytest.raises(ValueError, match="test_size"):
        cal.task_statement("fashion_shifted", 0)
