"""Multi-layer frozen feature extraction: hooks, pooling, a disk cache, and torchrun.

Book: chapter "Linear probes" ("Which features, and which hyperparameters") and the
PyTorch reference loop; seed 000, "Which layer", "Which grid" and "In PyTorch": the
features of a real backbone are extracted once and cached to disk, after which probes
train in minutes; one forward pass can return every block's output, which is how
DINOv2 trains its whole grid of probes at once.

What :func:`extract_features` does
----------------------------------
* Runs the model once over the data, frozen (:func:`~repeval_ref.torch.freeze.evaluation_mode`
  and :func:`torch.no_grad`), with forward hooks on the chosen blocks.
* Pools each block's output (:func:`pool_output`): ``"cls"`` (token 0 of a token
  sequence), ``"mean"`` (mean of the patch tokens, after the ``n_prefix_tokens``
  class and register tokens, or the spatial mean of a convolutional map), ``"flat"``
  (an output that is already ``(b, d)``).
  :meth:`Features.view` then concatenates the last ``n`` blocks and/or class token
  with mean patch token (``"cls+mean"``).
* On CUDA runs under bfloat16 autocast; the stored features are float32.
* Optionally caches every (block, pooling) array as a ``.npy`` file written through
  :func:`numpy.lib.format.open_memmap` and read back memory-mapped. The cache
  directory is ``cache_dir / model_name / data_name``; its ``meta.json`` records a
  fingerprint of the model's state dict and of the data, the effective autocast
  setting, the stored dtype and ``n_prefix_tokens``. A rerun with the same
  fingerprints and settings skips the forward passes; a mismatch (the weights, the
  data or the precision changed under the same names; a cache written before these
  settings were recorded) is a *stale cache*: it is recomputed (``on_stale="recompute"``)
  or raises :class:`StaleCacheError` (``on_stale="error"``).
* Under ``torchrun`` (an initialised ``torch.distributed`` group and
  ``distributed=True``) each rank reads the samples ``rank, rank + world, ...`` given by
  :class:`torch.utils.data.DistributedSampler` (no shuffling). That sampler pads the
  index list by repeating the first samples when ``n`` is not divisible by the world
  size; after an all-gather of every batch, sample ``p = j * world + r`` (the ``j``-th
  of rank ``r``) is written at position ``p`` and positions ``p >= n`` (the padding)
  are dropped, so the result is in dataset order, with no sample duplicated or lost.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import shutil
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

from .._validation import check_int
from .freeze import evaluation_mode
from .models import default_blocks, default_prefix_tokens

__all__ = [
    "cache_name",
    "pool_output",
    "BlockTaps",
    "Features",
    "extract_features",
    "model_fingerprint",
    "dataset_fingerprint",
    "resolve_device",
    "StaleCacheError",
    "POOLINGS",
]

#: Poolings stored per block; "cls+mean" is built from the first two by :meth:`Features.view`.
POOLINGS = ("cls", "mean", "flat")
_CACHE_VERSION = 1


class StaleCacheError(ValueError):
    """The cached features were computed from other weights or other data."""


def pool_output(out, pooling, n_prefix_tokens=1):
    """Pool one block's output into one vector per sample.

    Parameters
    ----------
    out : torch.Tensor
        ``(b, t, d)`` tokens (the first ``n_prefix_tokens`` are the class token and
        any register tokens, the rest the patches), ``(b, c, h, w)`` a convolutional
        map, or ``(b, d)`` vectors.
    pooling : {"cls", "mean", "flat"}
        ``"cls"``: ``out[:, 0]`` of tokens (the class token). ``"mean"``: mean of the
        patch tokens ``out[:, n_prefix_tokens:]`` (tokens) or the spatial mean (maps).
        ``"flat"``: a ``(b, d)`` output unchanged.
    n_prefix_tokens : int
        Tokens before the patch tokens, left out of the ``"mean"`` pooling of token
        sequences. 1 (the default) is a class token only; a ViT with registers has
        ``1 + registers`` (timm's ``num_prefix_tokens``, which
        :func:`~repeval_ref.torch.models.default_prefix_tokens` reads); 0 means no class
        token (then ``"cls"`` is refused). Ignored for maps and vectors.

    Returns
    -------
    torch.Tensor of shape (b, d) (``(b, c)`` for maps)
    """
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a tensor, got {type(out).__name__}")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    n_prefix_tokens = check_int(n_prefix_tokens, "n_prefix_tokens", minimum=0)
    if out.ndim == 3:
        if pooling == "cls":
            if n_prefix_tokens < 1:
                raise ValueError(
                    "pooling 'cls' needs a class token, but n_prefix_tokens=0; use 'mean'"
                )
            return out[:, 0]
        if pooling == "mean":
            if out.shape[1] <= n_prefix_tokens:
                raise ValueError(
                    f"mean pooling of tokens needs at least one patch token after the "
                    f"{n_prefix_tokens} prefix token(s); got {out.shape[1]} tokens"
                )
            return out[:, n_prefix_tokens:].mean(dim=1)
        raise ValueError(
            f"pooling 'flat' needs a (b, d) output, got tokens of shape {tuple(out.shape)}"
        )
    if out.ndim == 4:
        if pooling == "mean":
            return out.mean(dim=(2, 3))
        raise ValueError(f"a convolutional map (b, c, h, w) has no {pooling!r} pooling; use 'mean'")
    if out.ndim == 2:
        if pooling == "flat":
            return out
        raise ValueError(f"a (b, d) output is already pooled; use pooling 'flat', not {pooling!r}")
    raise ValueError(f"cannot pool an output of shape {tuple(out.shape)}")


class BlockTaps:
    """Forward hooks that keep the latest output of named submodules.

    Use as a context manager; the hooks are removed on exit::

        with BlockTaps(model, ["blocks.10", "blocks.11"]) as taps:
            model(x)
            tokens = taps.outputs["blocks.11"]

    A tuple output keeps its first element (the hidden states of most blocks).
    """

    def __init__(self, model, names):
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        names = list(names)
        if not names:
            raise ValueError("names is empty: choose at least one block")
        if len(set(names)) != len(names):
            raise ValueError(f"names contains duplicates: {names}")
        self.modules = {}
        for name in names:
            try:
                self.modules[name] = model.get_submodule(name)
            except AttributeError:
                raise ValueError(f"model has no submodule named {name!r}") from None
        self.names = names
        self.outputs = {}
        self._handles = []

    def _hook(self, name):
        def hook(_module, _inputs, output):
            if isinstance(output, (tuple, list)):
                output = output[0]
            self.outputs[name] = output

        return hook

    def __enter__(self):
        self._handles = [m.register_forward_hook(self._hook(n)) for n, m in self.modules.items()]
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles = []
        self.outputs = {}
        return False


@dataclass
class Features:
    """Extracted features: one (n, d) float32 array per (block, pooling).

    Attributes
    ----------
    arrays : dict of (str, str) -> numpy.ndarray
        ``arrays[(block, pooling)]`` has shape ``(n, d)``; memory-mapped when it comes
        from the cache.
    labels : numpy.ndarray of int64 or None
        Labels of the samples if the data yielded ``(x, y)`` pairs.
    layers : list of str
        The blocks, in the order given (normally depth order).
    from_cache : bool
        True when nothing was recomputed.
    """

    arrays: dict
    labels: np.ndarray | None
    layers: list
    from_cache: bool = False
    meta: dict = field(default_factory=dict)

    @property
    def n(self):
        return next(iter(self.arrays.values())).shape[0]

    def view(self, n_last=1, pooling="cls"):
        """Concatenate the pooled outputs of the last ``n_last`` blocks.

        Parameters
        ----------
        n_last : int
            How many of the last blocks (DINOv2 uses 1 or 4).
        pooling : {"cls", "mean", "flat", "cls+mean"}
            ``"cls+mean"`` puts the class token and the mean patch token of each
            block side by side.

        Returns
        -------
        numpy.ndarray of shape (n, sum of dims), float32
        """
        n_last = check_int(n_last, "n_last", minimum=1, maximum=len(self.layers))
        parts = pooling.split("+") if isinstance(pooling, str) else None
        if not parts or any(p not in POOLINGS for p in parts):
            raise ValueError(f"pooling must be one of {POOLINGS} or 'cls+mean', got {pooling!r}")
        cols = []
        for layer in self.layers[-n_last:]:
            for p in parts:
                if (layer, p) not in self.arrays:
                    raise ValueError(f"no {p!r} features for block {layer!r}; extract them first")
                cols.append(np.asarray(self.arrays[(layer, p)]))
        return np.concatenate(cols, axis=1)


# ----------------------------------------------------------------------------------
# Fingerprints


def model_fingerprint(model):
    """SHA-256 of a model's state dict (names, dtypes, shapes and raw bytes), as hex.

    Any change to a weight or a buffer (running statistics included) changes it.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(
            (t.to(torch.uint8) if t.dtype == torch.bool else t)
            .reshape(-1)
            .view(torch.uint8)
            .numpy()
            .tobytes()
        )
    return h.hexdigest()


def _update_with_item(h, item):
    if isinstance(item, (tuple, list)):
        for part in item:
            _update_with_item(h, part)
    elif isinstance(item, torch.Tensor):
        t = item.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(
            t.reshape(-1).view(torch.uint8).numpy().tobytes()
            if t.dtype != torch.bool
            else t.numpy().tobytes()
        )
    elif isinstance(item, np.ndarray):
        h.update(f"{item.dtype}{item.shape}".encode())
        h.update(np.ascontiguousarray(item).tobytes())
    else:
        h.update(repr(item).encode())


def _through_subsets(dataset):
    """Look through (nested) :class:`~torch.utils.data.Subset` wrappers.

    Returns ``(base, indices)``: the innermost dataset and the positions in it of the
    items of ``dataset`` (an int64 array), or ``(dataset, None)`` if it is no Subset.
    """
    indices = None
    while isinstance(dataset, Subset):
        idx = np.asarray(dataset.indices, dtype=np.int64).reshape(-1)
        indices = idx if indices is None else idx[indices]
        dataset = dataset.dataset
    return dataset, indices


def _file_samples(dataset):
    """The ``(path, label, ...)`` list of an image-folder-like dataset (``samples`` or ``imgs``), or
    None."""
    for attr in ("samples", "imgs"):
        samples = getattr(dataset, attr, None)
        if (
            isinstance(samples, (list, tuple))
            and samples
            and isinstance(samples[0], (tuple, list))
            and len(samples[0]) >= 2
            and isinstance(samples[0][0], (str, os.PathLike))
        ):
            return samples
    return None


def _describe_transform(dataset):
    """A stable description of the preprocessing settings a dataset exposes."""
    parts = []
    for attr in ("crop", "resize", "transform", "target_transform", "loader"):
        if not hasattr(dataset, attr):
            continue
        value = getattr(dataset, attr)
        text = repr(value)
        if " at 0x" in text:  # a function or object without a stable repr: name it instead
            qualname = getattr(value, "__qualname__", type(value).__qualname__)
            text = f"{type(value).__module__}.{qualname}"
        parts.append(f"{attr}={text}")
    return "|".join(parts)


def _hash_files(h, samples, positions):
    for i in positions:
        path, label = samples[int(i)][:2]
        st = os.stat(path)
        h.update(f"{int(i)}|{os.fspath(path)}|{label}|{st.st_size}|{st.st_mtime_ns}\n".encode())


def dataset_fingerprint(dataset, n_probe=32):
    """A cheap fingerprint (SHA-256 hex) of a dataset, for the feature cache.

    A :class:`~torch.utils.data.Subset` (nested ones too) is looked through to the
    dataset underneath, and the positions it selects are part of the fingerprint.
    Then, in order of preference:

    * ``fingerprint()`` of the (underlying) dataset if it defines it, combined with
      the selected positions;
    * for an image folder with a ``samples`` (or ``imgs``) list of ``(path, label)``:
      the path, label, file size and modification time of every *selected* file,
      and the preprocessing settings it exposes (``crop``, ``resize``, ``transform``);
    * for a :class:`~torch.utils.data.TensorDataset`: its full content;
    * otherwise the length plus the full content of ``n_probe`` samples at evenly
      spaced indices (first and last included). A change elsewhere can go unnoticed;
      pass ``data_fingerprint=`` to :func:`extract_features` when that matters.

    Parameters
    ----------
    dataset : Dataset
        Indexable, with a length.
    n_probe : int
        Samples read by the last, generic, fallback.

    Returns
    -------
    str
    """
    n_probe = check_int(n_probe, "n_probe", minimum=1)
    if hasattr(dataset, "fingerprint") and callable(dataset.fingerprint):
        return str(dataset.fingerprint())
    base, indices = _through_subsets(dataset)
    h = hashlib.sha256()
    if indices is not None:
        h.update(f"subset of {type(base).__name__}: {len(base)} items, selected ".encode())
        h.update(indices.tobytes())
        h.update(b"|")
        if hasattr(base, "fingerprint") and callable(base.fingerprint):
            h.update(str(base.fingerprint()).encode())
            return h.hexdigest()
    positions = indices if indices is not None else range(len(base))
    samples = _file_samples(base)
    if samples is not None:
        h.update(_describe_transform(base).encode() + b"\n")
        _hash_files(h, samples, positions)
        return h.hexdigest()
    if isinstance(base, TensorDataset):  # cheap to hash in full
        for t in base.tensors:
            _update_with_item(h, t)
        return h.hexdigest()
    n = len(dataset)
    h.update(f"n={n}|".encode())
    for i in sorted(set(np.linspace(0, n - 1, num=min(n, n_probe)).round().astype(int).tolist())):
        _update_with_item(h, dataset[i])
    return h.hexdigest()


# ----------------------------------------------------------------------------------
# Cache


def cache_name(name):
    """The file-system-safe form of a model, data or layer name, as the cache writes it.

    Letters, digits, ``-``, ``_`` and ``.`` are kept; every other character becomes
    ``_`` (so ``"zoo:efficientnet_lite0"`` is ``"zoo_efficientnet_lite0"``). A cache
    folder is ``cache_dir/cache_name(model_name)/cache_name(data_name)``. Public so that
    a caller (the loop command) can name the folder it had written, e.g. for
    ``repeval report``.

    Parameters
    ----------
    name : str
        Any name; a non-string is read through ``str`` (as the cache always did).

    Returns
    -------
    str
    """
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


def _file_for(directory, layer, pooling):
    return os.path.join(directory, f"{cache_name(layer)}__{pooling}.npy")


def _read_meta(directory):
    try:
        with open(os.path.join(directory, "meta.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


_SETTING_NAMES = {
    "autocast": "autocast setting",
    "dtype": "output dtype",
    "n_prefix_tokens": "n_prefix_tokens",
}


def _cache_state(directory, model_fp, data_fp, wanted, settings):
    """'hit', 'miss' (nothing usable, nothing wrong), 'partial' or 'stale: <reason>'.

    ``settings`` holds the extraction settings that change the numbers (autocast,
    stored dtype, prefix tokens left out of the mean); each must equal the cached one.
    """
    meta = _read_meta(directory)
    if meta is None:
        return "miss", None
    if meta.get("version") != _CACHE_VERSION:
        return (
            f"stale: the cache has format version {meta.get('version')!r}, this code writes "
            f"{_CACHE_VERSION}",
            meta,
        )
    if not meta.get("complete", False):
        return "stale: the cache was not completely written", meta
    if meta.get("model_fingerprint") != model_fp:
        return "stale: the model's weights differ from those the cache was computed with", meta
    if meta.get("data_fingerprint") != data_fp:
        return "stale: the data differ from those the cache was computed with", meta
    for key, value in settings.items():
        if key not in meta:
            return (
                f"stale: the cache does not record the {_SETTING_NAMES[key]} it was computed with "
                "(it was written by an older version of this code)"
            ), meta
        if meta[key] != value:
            return (
                f"stale: the cache was computed with {_SETTING_NAMES[key]} {meta[key]!r}, "
                f"this run uses {value!r}"
            ), meta
    entries = meta.get("entries", {})
    for layer, pooling in wanted:
        key = f"{layer}|{pooling}"
        path = _file_for(directory, layer, pooling)
        if key not in entries or not os.path.isfile(path):
            return "partial", meta
        try:
            arr = np.load(path, mmap_mode="r")
        except (OSError, ValueError):
            return "stale: a cached array cannot be read", meta
        if list(arr.shape) != entries[key] or arr.shape[0] != meta.get("n"):
            return "stale: a cached array has the wrong shape", meta
    return "hit", meta


def _load_cached(directory, meta, wanted, layers):
    arrays = {
        (layer, p): np.load(_file_for(directory, layer, p), mmap_mode="r") for layer, p in wanted
    }
    labels_path = os.path.join(directory, "labels.npy")
    labels = np.load(labels_path) if os.path.isfile(labels_path) else None
    return Features(arrays, labels, list(layers), from_cache=True, meta=meta)


# ----------------------------------------------------------------------------------
# Extraction


def _as_dataset(data):
    """``data`` as a map-style dataset; TypeError/ValueError naming ``data`` if it cannot be one."""
    if isinstance(data, torch.Tensor):
        if data.ndim < 1:
            raise ValueError(
                "data must be a tensor of inputs with a sample axis, got a 0-dimensional tensor"
            )
        return TensorDataset(data)
    if (
        isinstance(data, tuple)
        and data
        and all(isinstance(t, (torch.Tensor, np.ndarray)) for t in data)
    ):
        tensors = [
            torch.from_numpy(np.asarray(t)) if isinstance(t, np.ndarray) else t for t in data
        ]
        if any(t.ndim < 1 for t in tensors):
            raise ValueError("data: every tensor of an (inputs, labels) tuple needs a sample axis")
        lengths = [t.shape[0] for t in tensors]
        if len(set(lengths)) > 1:
            raise ValueError(f"data: the tensors of the tuple have different lengths {lengths}")
        return TensorDataset(*tensors)
    if isinstance(data, (str, bytes, dict)):
        raise TypeError(
            "data must be a Dataset (indexable with a length), a tensor of inputs, or a tuple "
            f"(inputs, labels) of tensors; got {type(data).__name__}"
        )
    if isinstance(data, Dataset) or (hasattr(data, "__getitem__") and hasattr(data, "__len__")):
        return data
    raise TypeError(
        "data must be a Dataset (indexable with a length), a tensor of inputs, or a tuple "
        f"(inputs, labels) of tensors; got {type(data).__name__}"
    )


def _check_first_item(dataset):
    """Read ``dataset[0]`` and check it is an input tensor or an ``(input, integer label)`` pair."""
    item = dataset[0]
    x, y = (
        (item[0], item[1] if len(item) > 1 else None)
        if isinstance(item, (tuple, list)) and item
        else (item, None)
    )
    if not isinstance(x, (torch.Tensor, np.ndarray)):
        raise TypeError(
            "data must yield input tensors or (input tensor, integer label) pairs; "
            f"data[0] is {'a pair whose input is ' if x is not item else ''}{type(x).__name__}"
        )
    if x.ndim < 1:
        raise ValueError("data[0] is a 0-dimensional input; every input needs at least one axis")
    if y is not None:
        if isinstance(y, torch.Tensor):
            is_int = y.ndim == 0 and not (
                y.is_floating_point() or y.is_complex() or y.dtype == torch.bool
            )
        elif isinstance(y, np.ndarray):
            is_int = y.ndim == 0 and np.issubdtype(y.dtype, np.integer)
        else:
            is_int = isinstance(y, numbers.Integral) and not isinstance(y, (bool, np.bool_))
        if not is_int:
            raise TypeError(
                f"data must yield (input, integer label) pairs; the label of data[0] is {y!r} "
                f"({type(y).__name__})"
            )


def _already_on_gpu(data):
    """True for a tensor, or a tuple of tensors, that already lives on a CUDA device."""
    tensors = data if isinstance(data, tuple) else (data,)
    return any(isinstance(t, torch.Tensor) and t.is_cuda for t in tensors)


def _split_batch(batch):
    if isinstance(batch, (tuple, list)):
        x = batch[0]
        y = batch[1] if len(batch) > 1 else None
    else:
        x, y = batch, None
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"data must yield tensors (or (tensor, label) pairs), got a batch of {type(x).__name__}"
        )
    return x, y


def _progress(iterable, enabled, total, desc):
    if not enabled:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is optional
        return iterable
    return tqdm(iterable, total=total, desc=desc, leave=False)


def _available_devices():
    names = ["cpu"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        names.append("mps")
    return names


def resolve_device(device=None):
    """Check a device request against this machine and return it as a :class:`torch.device`.

    Parameters
    ----------
    device : str, torch.device or None
        ``None`` or ``"auto"``: CUDA if available, else the CPU. Otherwise any torch
        device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, ...) whose
        device is present here.

    Returns
    -------
    torch.device

    Raises
    ------
    TypeError
        If ``device`` is neither a string nor a ``torch.device``.
    ValueError
        If torch does not know the device, or it is not available on this machine
        (the message lists the available ones).
    """
    if device is None or (isinstance(device, str) and device == "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(
            f"device must be a string such as 'cpu' or 'cuda', or a torch.device; got {device!r}"
        )
    available = ", ".join(_available_devices())
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise ValueError(
            f"device {device!r} is not a device torch knows; available here: {available}"
        ) from exc
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        ok = torch.cuda.is_available() and (
            dev.index is None or dev.index < torch.cuda.device_count()
        )
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        ok = mps is not None and mps.is_available()
    else:  # xpu, hpu, ...: ask the backend's module when torch has one
        backend = getattr(torch, dev.type, None)
        ok = bool(getattr(backend, "is_available", lambda: False)())
    if not ok:
        raise ValueError(
            f"device {str(device)!r} is not available on this machine; available here: {available}"
        )
    return dev


def extract_features(
    model,
    data,
    layers=None,
    *,
    poolings=("cls",),
    batch_size=64,
    device=None,
    autocast="auto",
    progress=False,
    num_workers=0,
    cache_dir=None,
    model_name=None,
    data_name="data",
    data_fingerprint=None,
    on_stale="recompute",
    distributed=False,
    n_prefix_tokens=None,
):
    """Extract pooled outputs of several blocks in one frozen pass, with an optional disk cache.

    Parameters
    ----------
    model : torch.nn.Module
        The encoder. It is moved to ``device`` (in place) and run in evaluation mode
        under :func:`torch.no_grad`; its submodules' training flags are restored
        afterwards and its weights are never modified.
    data : Dataset, torch.Tensor, or tuple of tensors
        Items are inputs ``x`` or pairs ``(x, y)`` with an integer label ``y``
        (labels are returned in :attr:`Features.labels`). A tensor or tuple of
        tensors (NumPy arrays are converted) is wrapped in a
        :class:`~torch.utils.data.TensorDataset`. The first item is read up front
        to check its kind.
    layers : str or list of str, optional
        Names of the blocks to tap (``model.get_submodule`` names), in depth order;
        a single string is one block. Default: every block found by
        :func:`~repeval_ref.torch.models.default_blocks`.
    poolings : sequence of {"cls", "mean", "flat"}
        Poolings stored for every block (see :func:`pool_output`).
    n_prefix_tokens : int, optional
        Tokens before the patch tokens (class token and register tokens), left out
        of the ``"mean"`` pooling of token outputs. Default:
        :func:`~repeval_ref.torch.models.default_prefix_tokens`, i.e. a timm model's
        ``num_prefix_tokens`` when it has one, else 1 (the class token only).
    batch_size, num_workers : int
        DataLoader settings (no shuffling: features come out in dataset order).
    device : str or torch.device, optional
        Default: CUDA if available, else the CPU. Checked with
        :func:`resolve_device` (a device not present here is a ``ValueError``).
    autocast : {"auto", True, False}
        bfloat16 autocast; "auto" turns it on for CUDA only. The features are stored
        as float32 either way; the effective setting and the stored dtype are recorded
        in the cache, and a cache computed under another setting is stale.
    progress : bool
        Show a progress bar (needs tqdm; silently none without it).
    cache_dir : str or os.PathLike, optional
        Cache root; no caching if None.
    model_name : str, optional
        Cache key of the model (default: its class name). The state-dict fingerprint
        is stored alongside and checked.
    data_name : str
        Cache key of the data.
    data_fingerprint : str, optional
        Overrides :func:`dataset_fingerprint`.
    on_stale : {"recompute", "error"}
        What to do when the cache under these names was computed from other weights
        or data.
    distributed : bool
        Split the data across the ranks of the initialised ``torch.distributed``
        group (see the module docstring); every rank returns the full features.

    Returns
    -------
    Features
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    dataset = _as_dataset(data)
    n = len(dataset)
    if n == 0:
        raise ValueError("data is empty")
    if layers is None:
        layers = default_blocks(model)
    elif isinstance(layers, str):
        layers = [layers]
    elif isinstance(layers, (bytes, dict)) or not hasattr(layers, "__iter__"):
        raise TypeError(
            f"layers must be a block name or a list of block names, got {type(layers).__name__}"
        )
    layers = list(layers)
    if not layers:
        raise ValueError("layers is empty: choose at least one block")
    bad = [layer for layer in layers if not isinstance(layer, str)]
    if bad:
        raise TypeError(f"layers must hold block names (strings), got {bad[0]!r}")
    n_prefix_tokens = (
        default_prefix_tokens(model)
        if n_prefix_tokens is None
        else check_int(n_prefix_tokens, "n_prefix_tokens", minimum=0)
    )
    if isinstance(poolings, str):
        poolings = (poolings,)
    poolings = tuple(poolings)
    if (
        not poolings
        or any(p not in POOLINGS for p in poolings)
        or len(set(poolings)) != len(poolings)
    ):
        raise ValueError(f"poolings must be distinct values from {POOLINGS}, got {poolings!r}")
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    num_workers = check_int(num_workers, "num_workers", minimum=0)
    if on_stale not in ("recompute", "error"):
        raise ValueError(f"on_stale must be 'recompute' or 'error', got {on_stale!r}")
    if autocast not in ("auto", True, False):
        raise ValueError(f"autocast must be 'auto', True or False, got {autocast!r}")
    wanted = [(layer, p) for layer in layers for p in poolings]
    BlockTaps(model, layers)  # validates the names before any work
    device = resolve_device(device)
    use_amp = (device.type == "cuda") if autocast == "auto" else bool(autocast)
    settings = {
        "autocast": "bfloat16" if use_amp else "off",
        "dtype": "float32",
        "n_prefix_tokens": n_prefix_tokens,
    }
    _check_first_item(dataset)

    rank, world = 0, 1
    if distributed:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "distributed=True needs an initialised torch.distributed process group"
            )
        rank, world = dist.get_rank(), dist.get_world_size()

    directory = None
    if cache_dir is not None:
        directory = os.path.join(
            os.fspath(cache_dir),
            cache_name(model_name or type(model).__name__),
            cache_name(data_name),
        )
        model_fp = model_fingerprint(model)
        data_fp = (
            str(data_fingerprint) if data_fingerprint is not None else dataset_fingerprint(dataset)
        )
        state, meta = _cache_state(directory, model_fp, data_fp, wanted, settings)
        if state == "hit":
            return _load_cached(directory, meta, wanted, layers)
        if state.startswith("stale"):
            msg = f"feature cache {directory!r} is {state}"
            if on_stale == "error":
                raise StaleCacheError(
                    msg + " (remove it, use other names, or on_stale='recompute')"
                )
            warnings.warn(msg + "; recomputing", stacklevel=2)
        if distributed:
            dist.barrier()  # every rank has read the cache before rank 0 rewrites it
        if rank == 0:
            if state != "partial" and os.path.isdir(directory):
                shutil.rmtree(directory)
            os.makedirs(directory, exist_ok=True)
            old = _read_meta(directory) if state == "partial" else None
            meta = {
                "version": _CACHE_VERSION,
                "complete": False,
                "model_fingerprint": model_fp,
                "data_fingerprint": data_fp,
                "n": n,
                **settings,
                "entries": dict(old["entries"]) if old else {},
            }
            with open(os.path.join(directory, "meta.json"), "w") as f:
                json.dump(meta, f)

    model.to(device)
    sampler = None
    if distributed:
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(
            dataset, num_replicas=world, rank=rank, shuffle=False, drop_last=False
        )
    on_gpu = _already_on_gpu(data)
    if on_gpu:  # CUDA tensors cannot be pinned or sent through worker processes
        num_workers = 0
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        sampler=sampler,
        num_workers=num_workers,
        pin_memory=device.type == "cuda" and not on_gpu,
    )
    write_here = directory is None or rank == 0
    arrays, labels, has_labels = {}, None, None
    local_pos = 0
    with evaluation_mode(model), torch.no_grad(), BlockTaps(model, layers) as taps:
        batches = _progress(loader, progress and rank == 0, len(loader), "extracting")
        for batch in batches:
            x, y = _split_batch(batch)
            b = x.shape[0]
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_amp):
                model(x.to(device, non_blocking=True))
            pooled = {
                (layer, p): pool_output(taps.outputs[layer], p, n_prefix_tokens).float()
                for layer, p in wanted
            }
            if has_labels is None:
                has_labels = y is not None
            y_t = torch.as_tensor(y).reshape(b).to(torch.int64) if has_labels else None
            if distributed:
                pooled, y_t, positions = _gather_batch(pooled, y_t, local_pos, world, n)
            else:
                positions = np.arange(local_pos, local_pos + b)
            local_pos += b
            if not write_here:
                continue
            for key, t in pooled.items():
                if key not in arrays:
                    arrays[key] = _allocate(directory, key, n, t.shape[1])
                arrays[key][positions] = t.cpu().numpy()
            if has_labels:
                if labels is None:
                    labels = np.empty(n, dtype=np.int64)
                labels[positions] = y_t.cpu().numpy()

    if directory is not None:
        if rank == 0:
            for arr in arrays.values():
                arr.flush()
            if labels is not None:
                np.save(os.path.join(directory, "labels.npy"), labels)
            meta["entries"].update(
                {f"{layer}|{p}": list(arrays[(layer, p)].shape) for layer, p in wanted}
            )
            meta["complete"] = True
            with open(os.path.join(directory, "meta.json"), "w") as f:
                json.dump(meta, f)
        if distributed:
            dist.barrier()
        meta = _read_meta(directory)
        result = _load_cached(directory, meta, wanted, layers)
        result.from_cache = False
        return result
    return Features(arrays, labels, layers, from_cache=False, meta=dict(settings, n=n))


def _allocate(directory, key, n, d):
    if directory is None:
        return np.empty((n, d), dtype=np.float32)
    return np.lib.format.open_memmap(
        _file_for(directory, *key), mode="w+", dtype=np.float32, shape=(n, d)
    )


def _gather_batch(pooled, y, local_pos, world, n):
    """All-gather one batch from every rank; return it with its dataset positions.

    Rank ``r``'s ``j``-th sample under :class:`DistributedSampler` (no shuffling) is
    padded position ``j * world + r``; positions ``>= n`` are the sampler's padding.
    Every rank has the same number of samples and hence the same batch sizes.
    """
    import torch.distributed as dist

    comm = (
        torch.device("cuda", torch.cuda.current_device())
        if dist.get_backend() == "nccl"
        else torch.device("cpu")
    )
    out = {}
    b = None
    for key, t in pooled.items():
        parts = [torch.empty_like(t, device=comm) for _ in range(world)]
        dist.all_gather(parts, t.contiguous().to(comm))
        b = t.shape[0]
        out[key] = torch.stack(parts, dim=1).reshape(b * world, -1)  # row = i * world + r
    if y is not None:
        parts = [torch.empty_like(y, device=comm) for _ in range(world)]
        dist.all_gather(parts, y.to(comm))
        y = torch.stack(parts, dim=1).reshape(-1)
    positions = (local_pos + np.arange(b))[:, None] * world + np.arange(world)[None, :]
    positions = positions.reshape(-1)
    keep = positions < n
    out = {k: v[torch.from_numpy(keep).to(v.device)] for k, v in out.items()}
    if y is not None:
        y = y[torch.from_numpy(keep).to(y.device)]
    return out, y, positions[keep]
