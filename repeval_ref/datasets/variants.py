"""Fashion-MNIST under a nuisance shift, and Fashion-MNIST garments in clutter.

Both variants keep the garments, the labels and the order of :func:`fashion_mnist`;
only the surroundings change, and they come from the grey photographs of
:mod:`repeval_ref.datasets.photos` (packaged with scikit-learn and scikit-image; CC BY
2.0, CC0 or public domain, listed there). Before cropping, every photograph is
shrunk to half its size by averaging 2 x 2 blocks (rounded to the nearest grey
level, halves to even), so a crop holds more structure than a flat patch of sky or wall.

Every random choice is drawn from ``numpy.random.default_rng([seed, split, variant])``
(``split`` 0 for train, 1 for test; ``variant`` 0 shifted, 1 cluttered), all at once
and vectorised: the same ``seed`` gives the same images on every machine, the two
splits and the two variants use independent draws, and 60,000 images take a second or
two. Results are memoised in the process (the functions return copies). Train and test
images draw their backgrounds from the same ten photographs.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .._validation import check_int, check_split
from .fashion import _file_key, _load, fashion_mnist_dir
from .photos import BACKGROUND_PHOTOS, background_photos

__all__ = ["fashion_mnist_shifted", "fashion_mnist_cluttered", "resize_matrix"]

_SPLIT_CODE = {"train": 0, "test": 1}


def _check_seed(seed):
    return check_int(seed, "seed", minimum=0)


def _check_share(value, name):
    """A real number in [0, 1], returned as a float; ``name`` is used in the error."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in [0, 1], got {value!r}")
    value = float(value)
    if not 0.0 <= value <= 1.0:  # also refuses NaN
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def _dimmed(crops, strength):
    """Photograph crops multiplied by ``strength`` and rounded (halves to even), uint8.

    ``strength == 1`` returns the crops themselves, so the default images are unchanged.
    """
    if strength == 1.0:
        return crops
    return np.rint(crops.astype(np.float64) * strength).astype(np.uint8)


@functools.lru_cache(maxsize=1)
def _photo_bank():
    """The photographs at half resolution (2 x 2 block means, rounded), uint8."""
    bank = []
    for name in BACKGROUND_PHOTOS:
        photo = background_photos()[name]
        h, w = photo.shape[0] // 2 * 2, photo.shape[1] // 2 * 2
        blocks = photo[:h, :w].reshape(h // 2, 2, w // 2, 2).astype(np.float64)
        half = np.rint(blocks.mean(axis=(1, 3))).astype(np.uint8)
        half.flags.writeable = False
        bank.append(half)
    return tuple(bank)


def _draw_crops(rng, n, side):
    """Photograph index and top-left corner of ``n`` random ``side x side`` crops."""
    bank = _photo_bank()
    photo = rng.integers(0, len(bank), size=n)
    heights = np.array([p.shape[0] for p in bank])[photo]
    widths = np.array([p.shape[1] for p in bank])[photo]
    # one uniform draw per corner coordinate, scaled to the chosen photograph's range
    row = np.floor(rng.random(n) * (heights - side + 1)).astype(np.int64)
    col = np.floor(rng.random(n) * (widths - side + 1)).astype(np.int64)
    return photo, row, col


def _gather_crops(photo, row, col, side):
    """The crops drawn by :func:`_draw_crops`, as uint8 of shape ``(n, side, side)``."""
    out = np.empty((photo.size, side, side), dtype=np.uint8)
    for p, image in enumerate(_photo_bank()):
        chosen = np.flatnonzero(photo == p)
        if chosen.size:
            windows = sliding_window_view(image, (side, side))
            out[chosen] = windows[row[chosen], col[chosen]]
    return out


def _overlap_counts(n_out, n_in):
    """Integer matrix ``K = n_in * resize_matrix(n_out, n_in)`` computed exactly.

    Measured in units of ``1 / n_out`` of an input pixel, output interval ``i`` is
    ``[i n_in, (i + 1) n_in)`` and input pixel ``j`` is ``[j n_out, (j + 1) n_out)``;
    ``K[i, j]`` is the (integer) length of their overlap.
    """
    i = np.arange(n_out, dtype=np.int64)[:, None]
    j = np.arange(n_in, dtype=np.int64)[None, :]
    overlap = np.minimum((i + 1) * n_in, (j + 1) * n_out) - np.maximum(i * n_in, j * n_out)
    return np.maximum(overlap, 0)


def resize_matrix(n_out, n_in):
    """The ``(n_out, n_in)`` matrix of area-weighted resampling along one axis.

    Output pixel ``i`` covers the input interval ``[i, i + 1) * n_in / n_out``; its
    weight on input pixel ``j`` is the length of the overlap of that interval with
    ``[j, j + 1)``, divided by ``n_in / n_out``. Rows sum to 1 and every weight is a
    multiple of ``1 / n_in``. ``R @ image @ R.T`` resizes a square image by averaging
    over areas (the "box" filter), which shrinks without aliasing and enlarges by
    replicating pixels. Takes and returns what
    :func:`~repeval_ref.datasets.handwritten.linear_resize_matrix` does: lengths
    ``n_out, n_in >= 1``, a float64 matrix of shape (n_out, n_in).
    """
    n_out = check_int(n_out, "n_out", minimum=1)
    n_in = check_int(n_in, "n_in", minimum=1)
    return _overlap_counts(n_out, n_in) / n_in


# ------------------------------------------------------------------- shifted
@functools.lru_cache(maxsize=4)
def _shifted(directory, split, key, seed, blend):
    garments, labels = _load(directory, split, key)
    rng = np.random.default_rng([seed, _SPLIT_CODE[split], 0])
    photo, row, col = _draw_crops(rng, garments.shape[0], 28)
    crops = _dimmed(_gather_crops(photo, row, col, 28), blend)
    images = np.abs(crops.astype(np.int16) - garments.astype(np.int16)).astype(np.uint8)
    images.flags.writeable = False
    return images, labels


def fashion_mnist_shifted(split="test", *, seed=0, blend=1.0, data_dir=None):
    """Fashion-MNIST garments blended onto photograph crops: an out-of-distribution domain.

    In the manner of MNIST-M (Ganin et al. 2016), each image ``i`` of
    :func:`fashion_mnist` is combined with a ``28 x 28`` crop ``B_i`` of one of the
    ten grey photographs of :mod:`repeval_ref.datasets.photos` (photograph uniform,
    crop position uniform within the half-resolution photograph) as

    ``X_i = |round(b B_i) - G_i|``  (per pixel, in grey levels 0..255)

    where ``G_i`` is the garment and ``b`` the blend strength (``blend``; the product
    rounded to a grey level, halves to even). Where the garment is black (its
    background) the photograph shows; on the garment the photograph is inverted by the
    garment's brightness. ``blend=1`` (the default) is the full photograph; ``blend=0``
    gives the clean garments of :func:`fashion_mnist`, and the values between dim the
    photograph, so that ``blend`` sets how far the domain lies from Fashion-MNIST (the
    knob of :mod:`repeval_ref.datasets.calibration`). The crops drawn do not depend on
    ``blend``. Shapes, classes and the order of the images are those of Fashion-MNIST,
    so an encoder trained on Fashion-MNIST runs on it unchanged.

    Parameters
    ----------
    split : {"train", "test"}
        Which garments (default ``"test"``, the evaluation domain; ``"train"`` for
        tuning experiments).
    seed : int
        Seed of the crops, ``>= 0``.
    blend : float
        Strength ``b`` of the photograph, in ``[0, 1]`` (default 1, the full photograph).
    data_dir : str or os.PathLike, optional
        As in :func:`fashion_mnist`.

    Returns
    -------
    images : numpy.ndarray of uint8, shape (N, 28, 28)
    labels : numpy.ndarray of int64, shape (N,)
        Exactly the labels of ``fashion_mnist(split)``.

    Raises
    ------
    ValueError
        ``split`` unknown, ``seed < 0`` or ``blend`` outside ``[0, 1]``.

    Notes
    -----
    Every pixel is a function of one Fashion-MNIST pixel (Zalando SE, MIT licence) and
    one pixel of a photograph shipped with scikit-learn or scikit-image (licences in
    :mod:`repeval_ref.datasets.photos`).
    """
    split = check_split(split)
    seed = _check_seed(seed)
    blend = _check_share(blend, "blend")
    directory = fashion_mnist_dir(data_dir)
    images, labels = _shifted(directory, split, _file_key(directory, split), seed, blend)
    return images.copy(), labels.copy()


# ----------------------------------------------------------------- cluttered
def _side_range(canvas):
    """Default smallest and largest garment side on a ``canvas``: a quarter and a half of it."""
    return -(-canvas // 4), canvas // 2


def _check_sides(sides, canvas):
    """``sides`` as a pair of ints ``1 <= lo <= hi <= canvas``; ``None`` gives the default range."""
    if sides is None:
        return _side_range(canvas)
    if isinstance(sides, (str, bytes)) or not hasattr(sides, "__len__") or len(sides) != 2:
        raise TypeError(f"sides must be a pair (smallest, largest) of garment sides, got {sides!r}")
    lo = check_int(sides[0], "sides[0]", minimum=1, maximum=canvas)
    hi = check_int(sides[1], "sides[1]", minimum=1, maximum=canvas)
    if lo > hi:
        raise ValueError(f"sides must have smallest <= largest, got {tuple(sides)!r}")
    return lo, hi


def _cluttered_layout(n, split, seed, canvas, sides=None):
    """All random choices of :func:`fashion_mnist_cluttered`, in drawing order."""
    rng = np.random.default_rng([seed, _SPLIT_CODE[split], 1])
    photo, row, col = _draw_crops(rng, n, canvas)
    lo, hi = _side_range(canvas) if sides is None else sides
    side = rng.integers(lo, hi + 1, size=n)
    top = np.floor(rng.random(n) * (canvas - side + 1)).astype(np.int64)
    left = np.floor(rng.random(n) * (canvas - side + 1)).astype(np.int64)
    return {"photo": photo, "row": row, "col": col, "side": side, "top": top, "left": left}


def cluttered_crops(split, *, seed=0, canvas=56):
    """Where the background of each :func:`fashion_mnist_cluttered` image was cut from.

    The same draws as that function with the same ``split``, ``seed`` and ``canvas``
    (it calls the same layout), without loading any image: a canvas's photograph and
    the corner of its crop in the half-resolution photograph. Grouping images by
    ``photo`` (or by part of a photograph) gives regions whose images share a
    background, for splits and bootstraps by region.

    Parameters
    ----------
    split : {"train", "test"}
    seed : int
        As in :func:`fashion_mnist_cluttered`, ``>= 0``.
    canvas : int
        As in :func:`fashion_mnist_cluttered`, ``>= 28``.

    Returns
    -------
    photo : numpy.ndarray of int64, shape (N,)
        Index into :data:`BACKGROUND_PHOTOS` (N = 60000 for ``"train"``, 10000 for ``"test"``).
    row, col : numpy.ndarray of int64, shape (N,)
        Top-left corner of the ``canvas x canvas`` crop in the photograph halved in
        each direction (``background_photos()[name]`` has twice these coordinates).
    """
    split = check_split(split)
    seed = _check_seed(seed)
    canvas = check_int(canvas, "canvas", minimum=28, maximum=min(p.shape[0] for p in _photo_bank()))
    n = 60000 if split == "train" else 10000
    lay = _cluttered_layout(n, split, seed, canvas)
    return lay["photo"].copy(), lay["row"].copy(), lay["col"].copy()


def _scaled_garments(garments, side):
    """Garments resized to ``side x side`` by area averaging, rounded (halves up) to uint8.

    ``K G K^T`` with the integer ``K`` of :func:`_overlap_counts` (entries at most 28,
    rows summing to 28) has integer entries below ``28 * 28 * 255 < 2^24``, so float32
    products hold it exactly, in any summation order; dividing by ``28^2`` and rounding
    in integers then gives the same result on every machine.
    """
    m, n_in = garments.shape[0], garments.shape[1]
    k = _overlap_counts(side, n_in).astype(np.float32)
    cols = (garments.reshape(m * n_in, n_in).astype(np.float32) @ k.T).reshape(m, n_in, side)
    exact = np.rint(np.matmul(k, cols)).astype(np.int64)  # (m, side, side)
    denominator = n_in * n_in
    return ((2 * exact + denominator) // (2 * denominator)).astype(np.uint8)


# _OVER[g, b]: garment grey level g laid over background b with opacity g / 255,
# round((g * g + (255 - g) * b) / 255) with halves rounded up, in integers.
_G, _B = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
_OVER = ((_G * _G + (255 - _G) * _B + 127) // 255).astype(np.uint8)
_OVER.flags.writeable = False
del _G, _B


def _over(garment, background):
    """The garment over the background, its grey level used as its opacity (uint8)."""
    return _OVER[garment, background]


@functools.lru_cache(maxsize=2)  # a 60,000-image canvas set is 188 MB
def _cluttered(directory, split, key, seed, canvas, sides, clutter):
    garments, labels = _load(directory, split, key)
    n = garments.shape[0]
    lay = _cluttered_layout(n, split, seed, canvas, sides)
    images = _dimmed(_gather_crops(lay["photo"], lay["row"], lay["col"], canvas), clutter)
    for s in np.unique(lay["side"]):
        chosen = np.flatnonzero(lay["side"] == s)
        rows = lay["top"][chosen, None] + np.arange(s)
        cols = lay["left"][chosen, None] + np.arange(s)
        index = (chosen[:, None, None], rows[:, :, None], cols[:, None, :])
        images[index] = _over(_scaled_garments(garments[chosen], int(s)), images[index])
    boxes = np.column_stack(
        [lay["top"], lay["left"], lay["top"] + lay["side"], lay["left"] + lay["side"]]
    )
    images.flags.writeable = False
    boxes.flags.writeable = False
    return images, labels, boxes


def fashion_mnist_cluttered(
    split, *, seed=0, canvas=56, sides=None, clutter=1.0, data_dir=None, return_boxes=False
):
    """Fashion-MNIST garments, shrunk and placed at random, on a cluttered photograph.

    Image ``i`` starts as a ``canvas x canvas`` crop of one of the ten grey photographs
    of :mod:`repeval_ref.datasets.photos` (photograph uniform, position uniform within
    the half-resolution photograph). Garment ``i`` of :func:`fashion_mnist` is resized
    to ``s x s`` pixels by area averaging (:func:`resize_matrix`, rounded to grey
    levels), ``s`` uniform among the integers of ``sides`` (by default from
    ``ceil(canvas / 4)`` to ``canvas // 2``, 14 to 28 on the default canvas), and laid
    over the crop at a uniform position inside the canvas, its own grey level ``g``
    acting as its opacity:

    ``X = round((g * g + (255 - g) * B) / 255)``  inside the box, ``X = B`` outside,

    in integer arithmetic (halves round up), where ``B = round(c P)`` is the photograph
    crop ``P`` dimmed by the clutter strength ``c`` (``clutter``; halves to even). The
    black surround of a garment is transparent, so the photograph shows everywhere
    except on the garment.

    Two knobs set the difficulty (:mod:`repeval_ref.datasets.calibration` calibrates
    them): ``sides``, the garment's size, and with it how far it can move (a garment
    of side ``canvas`` fills the canvas and does not move at all); and ``clutter``,
    how strongly the photograph shows (0: the garment on black, 1: the full photograph).
    The crops drawn do not depend on either; the positions follow the sizes.

    Object area. The box covers ``s^2 / canvas^2`` of the image: between 1/16 and 1/4,
    0.147 on average on the default canvas (the mean of ``s^2`` over 14..28 divided by
    56^2). The garment's own pixels (grey level above 0 after resizing) cover 0.58 of
    its box on average, 0.084 of the canvas (training split, ``seed=0``; the original
    28 x 28 images are 0.50 non-zero). A mean over all positions of the image is
    therefore mostly background.

    Parameters
    ----------
    split : {"train", "test"}
    seed : int
        Seed of the crops, sizes and positions, ``>= 0``.
    canvas : int
        Side of the square images, ``>= 28`` (default 56).
    sides : (int, int), optional
        Smallest and largest garment side, ``1 <= smallest <= largest <= canvas``;
        default ``(ceil(canvas / 4), canvas // 2)``. Sides above 28 enlarge the garment
        (pixels replicated by the same area resampling).
    clutter : float
        Strength ``c`` of the background photograph, in ``[0, 1]`` (default 1).
    data_dir : str or os.PathLike, optional
        As in :func:`fashion_mnist`.
    return_boxes : bool
        Also return where each garment lies.

    Returns
    -------
    images : numpy.ndarray of uint8, shape (N, canvas, canvas)
    labels : numpy.ndarray of int64, shape (N,)
        Exactly the labels of ``fashion_mnist(split)``.
    boxes : numpy.ndarray of int64, shape (N, 4)
        Only if ``return_boxes``: ``(top, left, bottom, right)``, the garment occupying
        rows ``top:bottom`` and columns ``left:right`` (``bottom - top = right - left = s``).

    Raises
    ------
    ValueError
        ``split`` unknown, ``seed < 0``, ``canvas`` out of range, ``sides`` out of
        ``[1, canvas]`` or decreasing, ``clutter`` outside ``[0, 1]``.

    Notes
    -----
    Every pixel inside a box combines one pixel of the resized Fashion-MNIST garment
    (Zalando SE, MIT licence) with one photograph pixel; every pixel outside is a
    photograph pixel (scikit-learn or scikit-image; licences in
    :mod:`repeval_ref.datasets.photos`).
    """
    split = check_split(split)
    seed = _check_seed(seed)
    # the smallest half-resolution photograph (chelsea, 150 rows) bounds the canvas
    canvas = check_int(canvas, "canvas", minimum=28, maximum=min(p.shape[0] for p in _photo_bank()))
    sides = _check_sides(sides, canvas)
    clutter = _check_share(clutter, "clutter")
    if not isinstance(return_boxes, (bool, np.bool_)):
        raise TypeError(f"return_boxes must be a bool, got {return_boxes!r}")
    directory = fashion_mnist_dir(data_dir)
    images, labels, boxes = _cluttered(
        directory, split, _file_key(directory, split), seed, canvas, sides, clutter
    )
    if return_boxes:
        return images.copy(), labels.copy(), boxes.copy()
    return images.copy(), labels.copy()
