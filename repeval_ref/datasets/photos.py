"""Grey natural photographs that ship inside installed Python packages.

They are the backgrounds of :func:`repeval_ref.datasets.fashion_mnist_shifted` and
:func:`repeval_ref.datasets.fashion_mnist_cluttered`. Only files present in the
installed packages are read (scikit-learn's ``sklearn/datasets/images`` and the few
images bundled in scikit-image's ``skimage/data``; the images scikit-image fetches
from the internet on demand are never used), and each file's SHA-256 is checked, so a
seed gives the same backgrounds on every machine.

========== ================ ================================================ ================
name       package          subject and photographer                         licence
========== ================ ================================================ ================
china      scikit-learn     a temple in China (danielbuechele, Flickr)        CC BY 2.0
flower     scikit-learn     a flower (vultilion, Flickr)                      CC BY 2.0
astronaut  scikit-image     astronaut Eileen Collins (NASA)                   public domain
camera     scikit-image     a photographer with a camera (Lav Varshney)       CC0
chelsea    scikit-image     Chelsea the cat (Stefan van der Walt)             CC0
coffee     scikit-image     a cup of coffee (Rachel Michetti)                 CC0
rocket     scikit-image     launch of DSCOVR on a Falcon 9 (SpaceX)           public domain
brick      scikit-image     a brick wall (CC0Textures, Bricks25)              CC0
grass      scikit-image     grass (linolafett, DeviantArt)                    CC0
gravel     scikit-image     gravel (CC0Textures, Gravel04)                    CC0
========== ================ ================================================ ================

Colour photographs are turned grey with the ITU-R BT.601 luma weights
``0.299 R + 0.587 G + 0.114 B``, rounded to the nearest grey level (halves to even),
computed exactly in integers so that no machine's arithmetic can move a pixel. PNG files decode
to the same pixels everywhere; the three JPEG files (china, flower, rocket) go through
Pillow's libjpeg, whose output could in principle differ between builds, so
:data:`GREY_SHA256` records the grey pixels (Pillow 13.0 decoding the JPEG files) and
``tests/test_datasets_real.py`` checks them (a failure there means the shifted and
cluttered variants differ from the ones the project's encoders were measured on).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path

import numpy as np

__all__ = ["BACKGROUND_PHOTOS", "PHOTO_SOURCES", "GREY_SHA256", "background_photos"]

#: name -> (package, path inside the package, licence, SHA-256 of the file)
PHOTO_SOURCES = {
    "china": (
        "sklearn",
        "datasets/images/china.jpg",
        "CC BY 2.0",
        "8378025ad2519d649d02e32bd98990db4ab572357d9f09841c2fbfbb4fefad29",
    ),
    "flower": (
        "sklearn",
        "datasets/images/flower.jpg",
        "CC BY 2.0",
        "a77f6ec41e353afdf8bdff2ea981b2955535d8d83294f8cfa49cf4e423dd5638",
    ),
    "astronaut": (
        "skimage",
        "data/astronaut.png",
        "public domain",
        "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5",
    ),
    "camera": (
        "skimage",
        "data/camera.png",
        "CC0",
        "b0793d2adda0fa6ae899c03989482bff9a42d3d5690fc7e3648f2795d730c23a",
    ),
    "chelsea": (
        "skimage",
        "data/chelsea.png",
        "CC0",
        "596aa1e7cb875eb79f437e310381d26b338a81c2da23439704a73c4651e8c4bb",
    ),
    "coffee": (
        "skimage",
        "data/coffee.png",
        "CC0",
        "cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7",
    ),
    "rocket": (
        "skimage",
        "data/rocket.jpg",
        "public domain",
        "c2dd0de7c538df8d111e479619b129464d0269d0ae5fd18ca91d33a7fdfea95c",
    ),
    "brick": (
        "skimage",
        "data/brick.png",
        "CC0",
        "7966caf324f6ba843118d98f7a07746d22f6a343430add0233eca5f6eaaa8fcf",
    ),
    "grass": (
        "skimage",
        "data/grass.png",
        "CC0",
        "b6b6022426b38936c43a4ac09635cd78af074e90f42ffa8227ac8b7452d39f89",
    ),
    "gravel": (
        "skimage",
        "data/gravel.png",
        "CC0",
        "c48615b451bf1e606fbd72c0aa9f8cc0f068ab7111ef7d93bb9b0f2586440c12",
    ),
}

#: name -> SHA-256 of the grey uint8 pixels (C order) that :func:`background_photos` returns.
GREY_SHA256 = {
    "china": "af89fae46d37f89b4ed66949ae0e292bf501be2a6a52f97a90a945b81fa189ed",
    "flower": "30e95f69c229774cf9218f6d0c220bb972d9ad3463906c7890e9fd7f2c2092df",
    "astronaut": "1f494e884126fe76d055003f1e92bf75e056d188c75b6fe5f4587e4c0b40bd7d",
    "camera": "5cb24482a53416f99052258be2b1ee38cd31c559a70c8a8b321cba231b332e21",
    "chelsea": "cd822d0a5b86379f987b3120f75a6e7c7be64e292b25a23bd858af5c9db1fed6",
    "coffee": "67b552b6f52686ebf5dade94086ab2b1d1693dd06ae1e44f7faec4517f0746f9",
    "rocket": "a085ff3db7e5c7be0845abf3f2296d0c79d053f3f3d54065904408ad34c72424",
    "brick": "664a145c5253f0d66db1a12776785f0ea35a44cc7447ffc933f6d6118dc58643",
    "grass": "b18dae4c68bf850a7a7b28a29d1846c76be890665117b57fd125fe29c4d4ede6",
    "gravel": "3d51ad45f789cd8b98534b7af6bce774e499ead45421135afd757358c7230009",
}

#: The photographs in the order the variants number them.
BACKGROUND_PHOTOS = tuple(PHOTO_SOURCES)

_PIP_NAMES = {"sklearn": "scikit-learn", "skimage": "scikit-image"}


def _package_dir(package):
    # find_spec locates a top-level package without importing it
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            f"package {package} is not installed (its photographs are the backgrounds); "
            f"install it with `pip install {_PIP_NAMES[package]}` (or `make venv`)"
        )
    return Path(list(spec.submodule_search_locations)[0])


def _photo_path(name):
    package, relative, _, digest = PHOTO_SOURCES[name]
    path = _package_dir(package) / relative
    if not path.is_file():
        raise ValueError(
            f"photograph {name!r}: file {str(path)!r} is missing from the installed {package}"
        )
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    if actual != digest:
        raise ValueError(
            f"checksum mismatch for photograph {name!r} ({str(path)!r}): SHA-256 {actual[:16]}..., "
            f"expected {digest[:16]}... (a different version of {package} ships a different file)"
        )
    return path


#: BT.601 luma weights in thousandths: ``0.299 R + 0.587 G + 0.114 B`` is ``LUMA_1000 . rgb / 1000``
LUMA_1000 = np.array([299, 587, 114], dtype=np.int64)


def _grey(rgb):
    """Grey levels of an 8-bit image: BT.601 luma, rounded to the nearest level, halves to even.

    Computed in integers (thousandths of a grey level), so every machine gives the same
    pixels: a floating-point product sums the three terms in whatever order the BLAS
    kernel picks, and a luma of exactly ``k + 1/2`` (a thousandths sum ending in 500)
    then lands on either side.
    """
    if rgb.ndim == 2:
        return rgb.astype(np.uint8)
    thousandths = rgb[..., :3].astype(np.int64) @ LUMA_1000  # integer matmul: exact
    level, rest = np.divmod(thousandths, 1000)
    level += (rest > 500) | ((rest == 500) & (level % 2 == 1))  # halves to the even level
    return level.astype(np.uint8)  # at most 255: weights sum to 1000


@functools.lru_cache(maxsize=1)
def _load_all():
    from PIL import Image

    photos = {}
    for name in BACKGROUND_PHOTOS:
        with Image.open(_photo_path(name)) as im:
            array = np.asarray(im.convert("RGB") if im.mode not in ("L", "RGB") else im)
        grey = _grey(array)
        grey.flags.writeable = False
        photos[name] = grey
    return photos


def background_photos():
    """The ten background photographs as grey images, at their full resolution.

    Returns
    -------
    dict
        :data:`BACKGROUND_PHOTOS` name -> read-only ``numpy.ndarray`` of uint8, shape
        ``(H, W)`` (for instance china ``(427, 640)``, camera ``(512, 512)``). Each
        call returns the same cached arrays; copy one before changing it.

    Raises
    ------
    ValueError
        A package is not installed, a file is missing, or its SHA-256 differs from
        :data:`PHOTO_SOURCES`.
    """
    return dict(_load_all())
