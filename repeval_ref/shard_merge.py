"""Exact top-k over a bank split into shards: merging the shards' own top-k lists.

Book: chapter "The PyTorch reference loop" (``book/torchloop.md``, exact k-NN across
``torchrun`` ranks). When a feature bank is cut into contiguous shards, one per rank,
every rank can find the ``k`` most similar rows of *its* shard for each query. The
exact global top-k is then a merge of those lists, because a row that is among the
``k`` best of the whole bank is among the ``k`` best of its own shard (fewer rows
compete there). The merge needs two pieces of bookkeeping that are easy to get wrong:

* a shard reports indices into itself; the global index is that plus the shard's
  offset (the global index of its first row);
* among equal similarities the smaller *global* index comes first, at the boundary of
  the top-k as everywhere else, so the result does not depend on how the bank was cut.

:func:`repeval_ref.torch.knn_classify_sharded` performs the same merge on the
candidates it all-gathers from the ranks (``tests/test_shard_merge.py`` checks that the
two agree).
"""

from __future__ import annotations

import numbers

import numpy as np

from ._validation import as_float_array, check_int

__all__ = ["merge_topk"]


def _as_list(x, name):
    if isinstance(x, (str, bytes)) or x is None or isinstance(x, np.ndarray) and x.ndim < 1:
        raise TypeError(f"{name} must be a list with one entry per shard, got {type(x).__name__}")
    try:
        out = list(x)
    except TypeError:
        raise TypeError(
            f"{name} must be a list with one entry per shard, got {type(x).__name__}"
        ) from None
    if not out:
        raise ValueError(f"{name} is empty: give one entry per shard")
    return out


def _similarities(v, name):
    """A (m, k_s) float64 array; ``k_s = 0`` (an empty shard) is allowed."""
    shape = np.shape(v) if isinstance(v, np.ndarray) else None
    if shape is not None and len(shape) == 2 and shape[0] >= 1 and shape[1] == 0:
        if not (np.issubdtype(v.dtype, np.number) and v.dtype != bool):
            raise TypeError(f"{name} must hold numbers, got dtype {v.dtype}")
        return np.zeros(shape)
    return as_float_array(v, name, ndim=2)


def _local_indices(idx, name, shape):
    if isinstance(idx, (str, bytes)) or idx is None:
        raise TypeError(f"{name} must be an integer array, got {type(idx).__name__}")
    arr = np.asarray(idx)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"{name} has shape {arr.shape}, but its similarities have shape {shape}")
    if np.issubdtype(arr.dtype, np.floating) and (
        not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr))
    ):
        raise ValueError(f"{name} must hold whole numbers")
    arr = arr.astype(np.int64)
    if arr.size and arr.min() < 0:
        raise ValueError(
            f"{name} holds a negative index ({int(arr.min())}); local indices start at 0"
        )
    return arr


def merge_topk(shard_vals, shard_idx, offsets, k):
    """Exact global top-k from the top-k lists of contiguous shards of a bank.

    Book: "The PyTorch reference loop" (sharded exact k-NN).

    Shard ``s`` holds the global rows ``offsets[s], offsets[s] + 1, ...`` of the bank and
    has reported, for each of ``m`` queries, up to ``k`` candidates: their similarities
    ``shard_vals[s]`` and their *local* row numbers ``shard_idx[s]`` (global row =
    ``offsets[s] + local``). A shard with fewer than ``k`` rows reports all of them, an
    empty shard none (shape ``(m, 0)``). Within a shard the columns may come in any order.

    Parameters
    ----------
    shard_vals : list of S arrays, array ``s`` of shape (m, k_s)
        Similarities (finite), ``k_s <= k``; ``k_s`` may differ between shards.
    shard_idx : list of S integer arrays, array ``s`` of shape (m, k_s)
        Local row numbers (``>= 0``) of the same candidates.
    offsets : sequence of S ints
        Global index of each shard's first row (``>= 0``). The shards must not overlap:
        within a row, no global index may occur twice.
    k : int
        How many neighbours to return (``>= 1``).

    Returns
    -------
    vals : numpy.ndarray of float64, shape (m, min(k, sum_s k_s))
        The largest similarities of each row, in decreasing order.
    idx : numpy.ndarray of int64, same shape
        Their global indices. Equal similarities are ordered by increasing global
        index, and when the ``k``-th place is tied the smaller indices are kept; so
        ``(vals, idx)`` is the top-k of the concatenated bank under that rule, however
        the bank was cut.

    Raises
    ------
    ValueError
        Mismatched numbers of shards or queries, shapes of ``shard_idx`` that differ
        from ``shard_vals``, NaN or infinite similarities, negative indices or offsets,
        a global index repeated within a row (overlapping shards), no candidate at all,
        ``k < 1``. The message names the argument.
    TypeError
        Non-numeric arguments.
    """
    k = check_int(k, "k", minimum=1)
    vals_list = _as_list(shard_vals, "shard_vals")
    idx_list = _as_list(shard_idx, "shard_idx")
    if isinstance(offsets, (str, bytes)) or offsets is None:
        raise TypeError(f"offsets must be a sequence of integers, got {type(offsets).__name__}")
    off_list = _as_list(offsets, "offsets")
    if not len(vals_list) == len(idx_list) == len(off_list):
        raise ValueError(
            f"shard_vals, shard_idx and offsets must have one entry per shard, got "
            f"{len(vals_list)}, {len(idx_list)} and {len(off_list)}"
        )
    vals_parts, idx_parts, m = [], [], None
    for s, (v, i, off) in enumerate(zip(vals_list, idx_list, off_list)):
        if isinstance(off, np.ndarray) and off.ndim == 0:
            off = off.item()
        if not isinstance(off, numbers.Real):
            raise TypeError(f"offsets[{s}] must be an integer, got {type(off).__name__}")
        off = check_int(off, f"offsets[{s}]", minimum=0)
        v = _similarities(v, f"shard_vals[{s}]")
        if m is None:
            m = v.shape[0]
        elif v.shape[0] != m:
            raise ValueError(
                f"shard_vals[{s}] has {v.shape[0]} rows (queries), shard_vals[0] has {m}"
            )
        i = _local_indices(i, f"shard_idx[{s}]", v.shape)
        vals_parts.append(v)
        idx_parts.append(i + off)
    vals = np.concatenate(vals_parts, axis=1)
    glob = np.concatenate(idx_parts, axis=1)
    if vals.shape[1] == 0:
        raise ValueError("shard_vals holds no candidate: every shard reported an empty list")
    by_index = np.sort(glob, axis=1)
    if np.any(by_index[:, 1:] == by_index[:, :-1]):
        row = int(np.flatnonzero(np.any(by_index[:, 1:] == by_index[:, :-1], axis=1))[0])
        raise ValueError(
            f"shard_idx and offsets give the same global index twice in row {row}: "
            "the shards overlap (check offsets)"
        )
    # sort key: similarity decreasing, then global index increasing (last key is primary)
    order = np.lexsort((glob, -vals), axis=1)[:, : min(k, vals.shape[1])]
    return np.take_along_axis(vals, order, axis=1), np.take_along_axis(glob, order, axis=1)
