"""Tests of the real images of repeval_ref.datasets: Fashion-MNIST, its shifted and
cluttered variants, and the packaged background photographs.

The idx files are parsed here a second time with ``struct`` on the raw bytes; the
variants are rebuilt from their random layout with independent arithmetic (pixel
replication and block sums instead of the resampling matrices); bad files are written
into ``tmp_path`` (copies of the real ones, altered, or small synthetic idx files).
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import struct

import numpy as np
import pytest

from repeval_ref import datasets as ds
from repeval_ref.datasets import fashion, photos, variants


def parse_by_hand(path):
    with gzip.open(path, "rb") as fh:
        raw = fh.read()
    magic, n = struct.unpack(">II", raw[:8])
    if magic == 2051:  # 0x00000803: unsigned bytes, 3 dimensions
        rows, cols = struct.unpack(">II", raw[8:16])
        return np.array(list(raw[16 : 16 + 3 * rows * cols]), dtype=np.uint8), (n, rows, cols), raw
    assert magic == 2049  # 0x00000801: unsigned bytes, 1 dimension
    return np.frombuffer(raw[8:], dtype=np.uint8), (n,), raw


@pytest.fixture(scope="module")
def test_split():
    return ds.fashion_mnist("test")


@pytest.fixture(scope="module")
def train_split():
    return ds.fashion_mnist("train")


def one_line_value_error(excinfo, *words):
    message = str(excinfo.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


# --------------------------------------------------------------- Fashion-MNIST
@pytest.mark.parametrize("split,n", [("train", 60000), ("test", 10000)])
def test_fashion_mnist_matches_an_independent_parse(split, n, request):
    images, labels = request.getfixturevalue(f"{split}_split")
    image_file, label_file = fashion.FASHION_MNIST_FILES[split]
    first_bytes, shape, raw = parse_by_hand(f"{fashion.DEBIAN_DIR}/{image_file}")
    assert shape == (n, 28, 28) and images.shape == shape and images.dtype == np.uint8
    # the first three images, byte for byte, and the whole payload through frombuffer
    assert np.array_equal(images[:3].ravel(), first_bytes)
    assert np.array_equal(images.ravel(), np.frombuffer(raw, np.uint8, offset=16))
    label_bytes, label_shape, label_raw = parse_by_hand(f"{fashion.DEBIAN_DIR}/{label_file}")
    assert label_shape == (n,) and labels.dtype == np.int64 and np.array_equal(labels, label_bytes)
    assert np.array_equal(np.bincount(labels, minlength=10), np.full(10, n // 10))
    assert hashlib.sha256(raw).hexdigest() == fashion.IDX_SHA256[image_file]
    assert hashlib.sha256(label_raw).hexdigest() == fashion.IDX_SHA256[label_file]


def test_debian_files_are_the_pinned_gzip_files():
    for name, digest in fashion.GZIP_SHA256.items():
        with open(f"{fashion.DEBIAN_DIR}/{name}", "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == digest


def test_fashion_mnist_classes_and_known_first_labels(test_split, train_split):
    assert len(ds.FASHION_MNIST_CLASSES) == 10 and ds.FASHION_MNIST_CLASSES[9] == "Ankle boot"
    # the data set's README shows the first training image: an ankle boot
    assert train_split[1][0] == 9 and test_split[1][0] == 9
    assert train_split[0].max() == 255 and train_split[0].min() == 0


def test_results_are_copies_the_cache_cannot_be_corrupted():
    images, labels = ds.fashion_mnist("test")
    images[:] = 7
    labels[:] = 3
    again, again_labels = ds.fashion_mnist("test")
    assert again[0].max() == 255 and np.bincount(again_labels).size == 10
    assert again.flags.writeable and again_labels.flags.writeable


@pytest.fixture
def copied_dir(tmp_path):
    for name in fashion.FASHION_MNIST_FILES["test"]:
        shutil.copy(f"{fashion.DEBIAN_DIR}/{name}", tmp_path / name)
    return tmp_path


def test_data_dir_and_environment_variable_are_used(copied_dir, monkeypatch, test_split):
    images, labels = ds.fashion_mnist("test", data_dir=copied_dir)
    assert np.array_equal(images, test_split[0]) and np.array_equal(labels, test_split[1])
    monkeypatch.setenv("REPEVAL_DATA", str(copied_dir))
    assert fashion.fashion_mnist_dir() == copied_dir
    images, _ = ds.fashion_mnist("test")
    assert np.array_equal(images, test_split[0])
    # the training files are not in that directory: the message names one of them
    with pytest.raises(ValueError) as excinfo:
        ds.fashion_mnist("train")
    one_line_value_error(
        excinfo,
        "train-images-idx3-ubyte.gz",
        str(copied_dir),
        "make data",
        "apt-get install",
        "REPEVAL_DATA",
    )


def test_decompressed_files_are_accepted(copied_dir, test_split):
    for name in fashion.FASHION_MNIST_FILES["test"]:
        (copied_dir / name[:-3]).write_bytes(gzip.decompress((copied_dir / name).read_bytes()))
        (copied_dir / name).unlink()
    images, labels = ds.fashion_mnist("test", data_dir=copied_dir)
    assert np.array_equal(images, test_split[0]) and np.array_equal(labels, test_split[1])


def test_missing_file(tmp_path):
    with pytest.raises(ValueError) as excinfo:
        ds.fashion_mnist("test", data_dir=tmp_path)
    one_line_value_error(excinfo, "t10k-images-idx3-ubyte.gz", "make data")


def test_checksum_mismatch(copied_dir):
    path = copied_dir / "t10k-labels-idx1-ubyte.gz"
    raw = bytearray(gzip.decompress(path.read_bytes()))
    raw[8] = (raw[8] + 1) % 10  # one label changed: still a valid idx file
    path.write_bytes(gzip.compress(bytes(raw)))
    assert fashion.read_idx(path)[0] == raw[8]
    with pytest.raises(ValueError) as excinfo:
        ds.fashion_mnist("test", data_dir=copied_dir)
    one_line_value_error(excinfo, "checksum mismatch", "t10k-labels-idx1-ubyte.gz")


def test_truncated_gzip_file(copied_dir):
    path = copied_dir / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:100000])
    with pytest.raises(ValueError) as excinfo:
        ds.fashion_mnist("test", data_dir=copied_dir)
    one_line_value_error(excinfo, "t10k-images-idx3-ubyte.gz", "truncated or corrupted")


@pytest.mark.slow
def test_truncated_idx_inside_a_valid_gzip(copied_dir):
    path = copied_dir / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-784]))
    with pytest.raises(ValueError) as excinfo:
        ds.fashion_mnist("test", data_dir=copied_dir)
    one_line_value_error(excinfo, "checksum mismatch", "t10k-images-idx3-ubyte.gz")
    with pytest.raises(ValueError) as excinfo:
        fashion.read_idx(path)
    one_line_value_error(excinfo, "truncated", "t10k-images-idx3-ubyte.gz")


@pytest.mark.parametrize("bad", ["val", "TEST", 0, None])
def test_wrong_split(bad):
    with pytest.raises(ValueError) as excinfo:
        ds.fashion_mnist(bad)
    one_line_value_error(excinfo, "split")


def test_data_dir_that_is_not_a_directory(tmp_path):
    with pytest.raises(ValueError) as excinfo:
        ds.fashion_mnist("test", data_dir=tmp_path / "nowhere")
    one_line_value_error(excinfo, "data_dir", "nowhere")
    with pytest.raises(TypeError, match="data_dir"):
        ds.fashion_mnist("test", data_dir=3)


# -------------------------------------------------------------- read_idx itself
def write_idx(path, array, kind, compress=True, extra=b""):
    header = struct.pack(">HBB", 0, kind, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + array.astype(array.dtype.newbyteorder(">")).tobytes() + extra
    path.write_bytes(gzip.compress(payload) if compress else payload)
    return path


@pytest.mark.parametrize("compress", [True, False])
def test_read_idx_of_synthetic_files(tmp_path, compress):
    rng = np.random.default_rng(0)
    bytes3d = rng.integers(0, 256, size=(5, 3, 4)).astype(np.uint8)
    ints2d = rng.integers(-(10**6), 10**6, size=(7, 2)).astype(np.int32)
    floats1d = rng.standard_normal(6).astype(np.float32)
    for array, kind in ((bytes3d, 0x08), (ints2d, 0x0C), (floats1d, 0x0D)):
        got = fashion.read_idx(write_idx(tmp_path / f"a{kind}", array, kind, compress))
        assert got.shape == array.shape and np.array_equal(got, array)
        assert got.dtype.isnative


@pytest.mark.parametrize(
    "damage,words",
    [
        (lambda p: p[:-1], ("truncated", "needs")),
        (lambda p: p + b"\0", ("longer than its header",)),
        (lambda p: b"\x01" + p[1:], ("not an idx file",)),
        (lambda p: p[:2] + b"\x07" + p[3:], ("not an idx file",)),
        (lambda p: p[:6], ("truncated", "header")),
        (lambda p: p[:3], ("truncated",)),
    ],
)
def test_read_idx_refuses_damaged_files(tmp_path, damage, words):
    path = write_idx(
        tmp_path / "x.idx", np.arange(24, dtype=np.uint8).reshape(2, 3, 4), 0x08, compress=False
    )
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError) as excinfo:
        fashion.read_idx(path)
    one_line_value_error(excinfo, "x.idx", *words)


def test_read_idx_of_missing_file(tmp_path):
    with pytest.raises(ValueError) as excinfo:
        fashion.read_idx(tmp_path / "absent.gz")
    one_line_value_error(excinfo, "absent.gz")


# -------------------------------------------------------------------- photographs
def test_background_photos_are_the_packaged_files_in_grey():
    from PIL import Image

    shot = ds.background_photos()
    assert tuple(shot) == ds.BACKGROUND_PHOTOS and len(shot) == 10
    for name, grey in shot.items():
        path = photos._photo_path(name)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == photos.PHOTO_SOURCES[name][3]
        # Pillow's own luma conversion (fixed-point ITU-R 601) agrees to one grey level
        reference = np.asarray(Image.open(path).convert("RGB").convert("L"))
        assert grey.dtype == np.uint8 and grey.shape == reference.shape
        assert np.abs(grey.astype(int) - reference).max() <= 1
        assert not grey.flags.writeable
    assert shot["camera"].shape == (512, 512) and shot["china"].shape == (427, 640)


def test_grey_is_the_exactly_rounded_luma():
    """Against Python's exact fractions: round(0.299 R + 0.587 G + 0.114 B), halves to even
    (``round`` of a Fraction), on every colour whose luma is an exact half and on random ones."""
    from fractions import Fraction

    rng = np.random.default_rng(0)
    colours = rng.integers(0, 256, size=(4000, 3))
    sums = colours @ photos.LUMA_1000
    halves = colours[sums % 1000 == 500]
    assert len(halves) > 0
    colours = np.concatenate([colours, halves, [[0, 0, 0], [255, 255, 255]]])
    grey = photos._grey(colours.astype(np.uint8)[None])[0]
    exact = [round(Fraction(299 * r + 587 * g + 114 * b, 1000)) for r, g, b in colours.tolist()]
    assert grey.tolist() == exact


@pytest.mark.recompute  # exact: no kernel may move a grey level
def test_grey_pixels_are_the_pinned_ones():
    # PNG decoding is exact; this catches a JPEG decoder that differs from the one used here
    for name, grey in ds.background_photos().items():
        assert (
            hashlib.sha256(np.ascontiguousarray(grey).tobytes()).hexdigest()
            == photos.GREY_SHA256[name]
        ), name


def test_photo_missing_or_different(tmp_path, monkeypatch):
    monkeypatch.setattr(photos, "_package_dir", lambda package: tmp_path)
    with pytest.raises(ValueError) as excinfo:
        photos._photo_path("camera")
    one_line_value_error(excinfo, "camera", "missing")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "camera.png").write_bytes(b"not the photograph")
    with pytest.raises(ValueError) as excinfo:
        photos._photo_path("camera")
    one_line_value_error(excinfo, "checksum mismatch", "camera")


def test_package_not_installed(monkeypatch):
    monkeypatch.setattr(photos.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError) as excinfo:
        photos._package_dir("skimage")
    one_line_value_error(excinfo, "skimage", "pip install scikit-image")


# -------------------------------------------------------------------- variants
def half_resolution_by_hand(photo):
    """2 x 2 block means rounded to the nearest integer (halves up: sums of 4 integers)."""
    h, w = photo.shape[0] // 2 * 2, photo.shape[1] // 2 * 2
    p = photo[:h, :w].astype(np.int64)
    total = p[0::2, 0::2] + p[1::2, 0::2] + p[0::2, 1::2] + p[1::2, 1::2]
    # total / 4 rounded: .5 happens (total = 4k + 2); numpy's rint rounds it to even
    return np.rint(total / 4.0).astype(np.uint8)


def resize_by_hand(garment, side):
    """Area averaging by pixel replication: repeat each pixel ``side`` times each way,
    then sum blocks of 28 x 28 (integers), divide by 28^2 rounding halves up."""
    big = np.repeat(np.repeat(garment.astype(np.int64), side, axis=0), side, axis=1)
    sums = big.reshape(side, 28, side, 28).sum(axis=(1, 3))
    return ((2 * sums + 784) // (2 * 784)).astype(np.uint8)


def test_half_resolution_bank_and_resize_matrix():
    bank = variants._photo_bank()
    for name, half in zip(ds.BACKGROUND_PHOTOS, bank):
        assert np.array_equal(half, half_resolution_by_hand(ds.background_photos()[name]))
    rng = np.random.default_rng(1)
    garments = rng.integers(0, 256, size=(20, 28, 28)).astype(np.uint8)
    for side in (14, 17, 23, 28, 40):
        r = ds.resize_matrix(side, 28)
        assert np.allclose(r.sum(axis=1), 1.0) and np.allclose(r.sum(axis=0), side / 28)
        ours = variants._scaled_garments(garments, side)
        by_hand = np.stack([resize_by_hand(g, side) for g in garments])
        assert np.array_equal(ours, by_hand)
    with pytest.raises(ValueError, match="n_out"):
        ds.resize_matrix(0, 28)


def test_shifted_is_the_absolute_difference_with_photo_crops(test_split):
    images, labels = ds.fashion_mnist_shifted("test", seed=3)
    garments, true_labels = test_split
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert np.array_equal(labels, true_labels)
    rng = np.random.default_rng([3, 1, 0])
    photo, row, col = variants._draw_crops(rng, 10000, 28)
    bank = [half_resolution_by_hand(ds.background_photos()[n]) for n in ds.BACKGROUND_PHOTOS]
    assert set(np.unique(photo)) == set(range(10))  # every photograph is used
    for i in range(0, 10000, 97):
        crop = bank[photo[i]][row[i] : row[i] + 28, col[i] : col[i] + 28]
        assert crop.shape == (28, 28)
        expected = np.abs(crop.astype(int) - garments[i].astype(int))
        assert np.array_equal(images[i], expected)
    # on the garment's black surround the photograph shows unchanged
    assert np.mean(images[garments == 0]) > 40


def test_shifted_train_split_and_determinism(train_split):
    a, la = ds.fashion_mnist_shifted("train", seed=0)
    b, _ = ds.fashion_mnist_shifted("train", seed=0)
    c, _ = ds.fashion_mnist_shifted("train", seed=1)
    assert a.shape == (60000, 28, 28) and np.array_equal(la, train_split[1])
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    a[:] = 0
    assert ds.fashion_mnist_shifted("train", seed=0)[0].max() == 255  # memo not corrupted
    # the shift is a real change of domain: images differ from the originals on most pixels
    assert np.mean(b != train_split[0]) > 0.5


def test_cluttered_garments_are_where_the_boxes_say(test_split):
    images, labels, boxes = ds.fashion_mnist_cluttered("test", seed=2, return_boxes=True)
    garments, true_labels = test_split
    assert images.shape == (10000, 56, 56) and images.dtype == np.uint8
    assert boxes.shape == (10000, 4) and boxes.dtype == np.int64
    assert np.array_equal(labels, true_labels)
    side = boxes[:, 2] - boxes[:, 0]
    assert np.array_equal(side, boxes[:, 3] - boxes[:, 1])
    assert side.min() == 14 and side.max() == 28
    assert boxes[:, :2].min() >= 0 and boxes[:, 2:].max() <= 56
    photo, row, col = ds.cluttered_crops("test", seed=2)  # the public view of the same draws
    lay = variants._cluttered_layout(10000, "test", 2, 56)
    assert np.array_equal(photo, lay["photo"]) and np.array_equal(row, lay["row"])
    assert np.array_equal(col, lay["col"]) and photo.dtype == np.int64
    assert set(np.unique(photo)) == set(range(len(ds.BACKGROUND_PHOTOS)))
    bank = [half_resolution_by_hand(ds.background_photos()[n]) for n in ds.BACKGROUND_PHOTOS]
    for i in range(0, 10000, 41):
        background = bank[lay["photo"][i]][
            lay["row"][i] : lay["row"][i] + 56, lay["col"][i] : lay["col"][i] + 56
        ].astype(int)
        top, left, bottom, right = boxes[i]
        outside = np.ones((56, 56), bool)
        outside[top:bottom, left:right] = False
        assert np.array_equal(images[i][outside], background[outside])
        g = resize_by_hand(garments[i], bottom - top).astype(int)
        b = background[top:bottom, left:right]
        composite = np.floor((g * g + (255 - g) * b) / 255 + 0.5).astype(int)
        assert np.array_equal(images[i][top:bottom, left:right], composite)


@pytest.mark.slow
def test_cluttered_object_area_fraction(train_split):
    _, _, boxes = ds.fashion_mnist_cluttered("train", seed=0, return_boxes=True)
    side = boxes[:, 2] - boxes[:, 0]
    fraction = side**2 / 56**2
    sides = np.arange(14, 29)
    closed_form = np.mean(sides**2) / 56**2  # sides uniform on 14..28
    sd = np.std(sides**2) / 56**2 / np.sqrt(side.size)
    assert abs(fraction.mean() - closed_form) < 4 * sd
    assert abs(closed_form - 0.147) < 5e-4  # the docstring's figure
    assert np.all(np.isin(side, sides)) and np.all(np.bincount(side)[14:] > 3500)
    # garment pixels (non-zero after resizing) as a share of the canvas: docstring 0.084
    covered = np.empty(side.size)
    for s in np.unique(side):
        chosen = side == s
        covered[chosen] = (variants._scaled_garments(train_split[0][chosen], int(s)) > 0).sum(
            axis=(1, 2)
        )
    assert abs(covered.mean() / 56**2 - 0.084) < 1e-3
    assert abs(np.mean(covered / side**2) - 0.58) < 0.01


@pytest.mark.slow
def test_cluttered_determinism_splits_and_canvas(test_split):
    a = ds.fashion_mnist_cluttered("test", seed=5)
    b = ds.fashion_mnist_cluttered("test", seed=5)
    c = ds.fashion_mnist_cluttered("test", seed=6)
    assert len(a) == 2 and np.array_equal(a[0], b[0]) and not np.array_equal(a[0], c[0])
    big, _, boxes = ds.fashion_mnist_cluttered("test", seed=5, canvas=80, return_boxes=True)
    side = boxes[:, 2] - boxes[:, 0]
    assert big.shape == (10000, 80, 80) and side.min() == 20 and side.max() == 40
    # the shifted and cluttered draws of one seed are independent streams
    assert not np.array_equal(
        variants._cluttered_layout(100, "test", 0, 56)["photo"],
        variants._cluttered_layout(100, "train", 0, 56)["photo"],
    )


BAD_VARIANT_CALLS = [
    (lambda: ds.fashion_mnist_shifted("validation"), ValueError, "split"),
    (lambda: ds.fashion_mnist_shifted("test", seed=-1), ValueError, "seed"),
    (lambda: ds.fashion_mnist_shifted("test", seed=1.5), TypeError, "seed"),
    (lambda: ds.fashion_mnist_cluttered("dev"), ValueError, "split"),
    (lambda: ds.fashion_mnist_cluttered("test", seed=-2), ValueError, "seed"),
    (lambda: ds.fashion_mnist_cluttered("test", canvas=20), ValueError, "canvas"),
    (lambda: ds.fashion_mnist_cluttered("test", canvas=1000), ValueError, "canvas"),
    (lambda: ds.fashion_mnist_cluttered("test", canvas=True), TypeError, "canvas"),
    (lambda: ds.fashion_mnist_cluttered("test", return_boxes="yes"), TypeError, "return_boxes"),
    (
        lambda: ds.fashion_mnist_cluttered("test", data_dir="/nonexistent/dir"),
        ValueError,
        "data_dir",
    ),
]


@pytest.mark.parametrize("call,exc,argname", BAD_VARIANT_CALLS)
def test_variant_bad_arguments(call, exc, argname):
    with pytest.raises(exc) as excinfo:
        call()
    assert argname in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_cluttered_crops_validates_its_arguments():
    with pytest.raises(ValueError, match="split"):
        ds.cluttered_crops("val")
    with pytest.raises(ValueError, match="seed"):
        ds.cluttered_crops("test", seed=-1)
    with pytest.raises(ValueError, match="canvas"):
        ds.cluttered_crops("test", canvas=20)
    a, b = ds.cluttered_crops("test", seed=3), ds.cluttered_crops("test", seed=3, canvas=60)
    assert not np.array_equal(a[1], b[1]) or not np.array_equal(a[2], b[2])
