"""Fashion-MNIST, read from its four original gzipped idx files (nothing is downloaded).

Fashion-MNIST (Xiao, Rasul and Vollgraf 2017, Zalando SE, MIT/Expat licence) holds
70,000 grey 28 x 28 pictures of clothing articles in ten balanced classes: 60,000 for
training (6,000 per class) and 10,000 for testing (1,000 per class). On Debian and
Ubuntu the package ``dataset-fashion-mnist`` installs the four files under
:data:`DEBIAN_DIR` (``make data`` does that); on any other system, copy the four files
from https://github.com/zalandoresearch/fashion-mnist into one directory and point the
environment variable ``REPEVAL_DATA`` at it (or pass ``data_dir``).

Every file is checked before it is used: the SHA-256 of its decompressed idx content
must equal :data:`IDX_SHA256` (the digest of the content rather than of the gzip file,
so that a re-compressed copy of the same images is accepted), and its idx header
(magic number, element type, number of dimensions, sizes) must agree with its length.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from .._validation import check_split

__all__ = [
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_FILES",
    "DEBIAN_DIR",
    "IDX_SHA256",
    "GZIP_SHA256",
    "fashion_mnist",
    "fashion_mnist_dir",
    "read_idx",
]

#: The ten class names; label ``c`` is ``FASHION_MNIST_CLASSES[c]``.
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

#: Where ``apt-get install dataset-fashion-mnist`` puts the four files.
DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"

#: split -> (images file, labels file), as the data set's authors name them.
FASHION_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}

#: SHA-256 of the decompressed idx content of each file (what is verified).
IDX_SHA256 = {
    "train-images-idx3-ubyte.gz": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",  # noqa: E501
    "train-labels-idx1-ubyte.gz": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",  # noqa: E501
    "t10k-images-idx3-ubyte.gz": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte.gz": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}

#: SHA-256 of the gzip files as Debian's ``dataset-fashion-mnist``
#: (0.0~git20200523.55506a9-1) ships them; for reference, not required.
GZIP_SHA256 = {
    "train-images-idx3-ubyte.gz": "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",  # noqa: E501
    "train-labels-idx1-ubyte.gz": "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",  # noqa: E501
    "t10k-images-idx3-ubyte.gz": "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    "t10k-labels-idx1-ubyte.gz": "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
}

_INSTALL_HINT = (
    "install them with `make data` (runs `apt-get install -y dataset-fashion-mnist`) or copy "
    "the four files of https://github.com/zalandoresearch/fashion-mnist into a directory "
    "and set REPEVAL_DATA to it"
)

# idx element type codes (third byte of the magic number) -> big-endian dtype
_IDX_TYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def fashion_mnist_dir(data_dir=None):
    """The directory the Fashion-MNIST files are read from.

    ``data_dir`` when given, else the environment variable ``REPEVAL_DATA`` when set
    and non-empty, else :data:`DEBIAN_DIR`.

    Returns
    -------
    pathlib.Path
    """
    if data_dir is None:
        data_dir = os.environ.get("REPEVAL_DATA") or DEBIAN_DIR
        origin = "REPEVAL_DATA" if os.environ.get("REPEVAL_DATA") else "the Debian location"
    else:
        origin = "data_dir"
        if not isinstance(data_dir, (str, os.PathLike)):
            raise TypeError(f"data_dir must be a path, got {type(data_dir).__name__}")
    path = Path(data_dir)
    if origin != "the Debian location" and not path.is_dir():
        raise ValueError(
            f"{origin} {str(path)!r} is not a directory holding the Fashion-MNIST files"
        )
    return path


def _raw_bytes(path):
    """The decompressed bytes of ``path`` (a ``.gz`` file, or an uncompressed idx file)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ValueError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{str(path)!r} is truncated or corrupted (gzip: {exc})") from None


def _parse_idx(data, name):
    """Parse the bytes of an idx file; ``name`` is used in error messages."""
    if len(data) < 4:
        raise ValueError(f"{name} is truncated: {len(data)} bytes, shorter than an idx header")
    zero, kind, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind not in _IDX_TYPES or ndim < 1:
        raise ValueError(f"{name} is not an idx file (magic number 0x{data[:4].hex()})")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(
            f"{name} is truncated: {len(data)} bytes, shorter than its {header}-byte header"
        )
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = _IDX_TYPES[kind]
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        state = "truncated" if len(data) < expected else "longer than its header says"
        raise ValueError(
            f"{name} is {state}: {len(data)} bytes, the header (shape {shape}) needs {expected}"
        )
    return (
        np.frombuffer(data, dtype=dtype, offset=header)
        .reshape(shape)
        .astype(dtype.newbyteorder("="))
    )


def read_idx(path):
    """Read one idx file (gzipped or not) into a NumPy array, checking its header.

    The idx format (LeCun et al.) starts with a big-endian magic number ``00 00 TT
    DD`` (``TT`` the element type, ``0x08`` for unsigned bytes; ``DD`` the number of
    dimensions), then ``DD`` big-endian 32-bit sizes, then the elements in C order.
    No checksum is verified here (see :func:`fashion_mnist`).

    Parameters
    ----------
    path : str or os.PathLike
        An idx file; read through gzip when it starts with the gzip magic bytes.

    Returns
    -------
    numpy.ndarray
        Native byte order, shape given by the header (a new array).

    Raises
    ------
    ValueError
        Unreadable, not an idx file, truncated, or longer than its header says.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a path, got {type(path).__name__}")
    return _parse_idx(_raw_bytes(path), repr(str(path))).copy()


def _locate(directory, filename):
    """``directory/filename``, or the same name without ``.gz`` if only that exists."""
    gz = directory / filename
    if gz.is_file():
        return gz
    plain = directory / filename[: -len(".gz")]
    if plain.is_file():
        return plain
    raise ValueError(
        f"Fashion-MNIST file {filename} not found in {str(directory)!r}; {_INSTALL_HINT}"
    )


def _verified_array(directory, filename):
    path = _locate(directory, filename)
    data = _raw_bytes(path)
    digest = hashlib.sha256(data).hexdigest()
    if digest != IDX_SHA256[filename]:
        raise ValueError(
            f"checksum mismatch for {str(path)!r}: SHA-256 of its content is {digest[:16]}..., "
            f"expected {IDX_SHA256[filename][:16]}... (a corrupted or different file); "
            f"{_INSTALL_HINT}"
        )
    return _parse_idx(data, repr(str(path)))


def _file_key(directory, split):
    """Identity of the two files of a split (path, size, mtime) for the in-process cache."""
    key = []
    for filename in FASHION_MNIST_FILES[split]:
        path = _locate(directory, filename)
        st = path.stat()
        key.append((str(path.resolve()), st.st_size, st.st_mtime_ns))
    return tuple(key)


@functools.lru_cache(maxsize=4)
def _load(directory, split, key):
    del key  # only part of the cache key
    image_file, label_file = FASHION_MNIST_FILES[split]
    images = _verified_array(directory, image_file)
    labels = _verified_array(directory, label_file)
    n = 60000 if split == "train" else 10000
    if images.shape != (n, 28, 28) or images.dtype != np.uint8:
        raise ValueError(
            f"{image_file} holds {images.dtype} {images.shape}, expected uint8 ({n}, 28, 28)"
        )
    if labels.shape != (n,) or labels.min() < 0 or labels.max() > 9:
        raise ValueError(
            f"{label_file} holds labels {labels.shape} outside 0..9 or of the wrong length"
        )
    images = np.ascontiguousarray(images)
    labels = labels.astype(np.int64)
    images.flags.writeable = False
    labels.flags.writeable = False
    return images, labels


def fashion_mnist(split, *, data_dir=None):
    """The Fashion-MNIST images and labels of one split.

    Parameters
    ----------
    split : {"train", "test"}
        60,000 training or 10,000 test images, in the files' order.
    data_dir : str or os.PathLike, optional
        Directory holding the four files (gzipped, or decompressed under the same names
        without ``.gz``). Default: ``$REPEVAL_DATA`` if set, else :data:`DEBIAN_DIR`.

    Returns
    -------
    images : numpy.ndarray of uint8, shape (N, 28, 28)
        Grey levels 0 (background) to 255; ``N`` is 60000 or 10000.
    labels : numpy.ndarray of int64, shape (N,)
        Class indices into :data:`FASHION_MNIST_CLASSES` (each class 6000 or 1000 times).

    Both arrays are fresh copies: the parsed files are cached in the process (first
    call about a second, later calls a copy), and changing a result does not change
    the next one.

    Raises
    ------
    ValueError
        Wrong ``split``; a missing file (the message names it and the command that
        installs it); a file whose content fails the SHA-256 check of
        :data:`IDX_SHA256`; a truncated or corrupted file.

    Notes
    -----
    Pixels: Zalando SE's article photographs as released in Fashion-MNIST (MIT/Expat
    licence), unchanged.
    """
    split = check_split(split)
    directory = fashion_mnist_dir(data_dir)
    images, labels = _load(directory, split, _file_key(directory, split))
    return images.copy(), labels.copy()
