"""Exact weighted k-NN in PyTorch: blocked, with a running top-k merge, and sharded.

Book: chapter ``book/knn.md`` ("The weighted k-NN classifier"); seed 000, "The weighted
k-NN classifier". The rule is the one of :func:`repeval_ref.knn_classify` and the
predictions are the same::

    s_i = hat h_i^T hat q,    y_hat = argmax_c sum_{i in N_k} exp((s_i - s_max) / tau) [y_i = c],

with unit-normalised banks, ``N_k`` the ``min(k, n_train)`` largest similarities
(ties at the boundary to the smaller training index), and class ties to the smaller
label.

How it scales
-------------
The test set is cut into blocks of ``query_block`` rows and the bank into chunks of
``bank_block`` rows. For each (query block, bank chunk) pair one matrix product gives
a ``query_block x bank_block`` similarity tile; its ``k`` best entries are merged
into a running list of ``k`` candidates per query. So the memory is
``O(query_block * bank_block)`` and the full ``n_test x n_train`` matrix never
exists. On a GPU the tiles can be ``bfloat16``; ``benchmarks/gpu/run_gpu.py`` measures
how close a 1.28M x 768 bank with 50k queries comes to the matrix-multiply bound.

Candidates are kept sorted by (similarity descending, training index ascending). A
tile's candidates come from :func:`torch.topk`; when the ``k``-th value of a row is
tied with entries that were left out, that row is redone with a stable sort, so the
boundary rule (smaller index first) holds exactly. Merging the running list (all of
whose indices are smaller than the new chunk's) with the tile's list by a stable sort
on the similarity keeps the lexicographic order.

On a GPU, :func:`torch.topk` over a wide tile costs several times the product that made
it, so the selection runs in two stages there (:func:`_select_topk`): the maxima of
chunks of ``_CHUNK`` columns, then the ``k`` best entries of the ``k`` chunks with the
largest maxima, which contain the row's ``k`` best. The tie check above still runs over
the whole row, so the rules and the predictions do not change.

:func:`knn_classify_sharded` splits the bank across ``torch.distributed`` ranks: each
rank computes its local candidates with *global* indices, the candidates (similarity,
index, label) are gathered from all ranks and merged the same way, and every rank
votes and returns the same predictions.
"""

from __future__ import annotations

import numpy as np
import torch

from .._validation import as_float_array, as_labels, check_int, check_positive, check_same_width
from ..knn import settle_near_ties

__all__ = [
    "knn_classify_torch",
    "knn_classify_sharded",
    "topk_neighbors",
    "weighted_vote",
    "shard_range",
]

_FLOAT_DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.float16)


def _as_tensor(x, name, dtype):
    if isinstance(x, torch.Tensor):
        if not (x.is_floating_point() or x.dtype in (torch.int32, torch.int64, torch.uint8)):
            raise TypeError(f"{name} must hold real numbers, got dtype {x.dtype}")
        if x.ndim != 2:
            raise ValueError(f"{name} must be 2-dimensional, got shape {tuple(x.shape)}")
        if x.shape[0] < 1 or x.shape[1] < 1:
            raise ValueError(f"{name} is empty, got shape {tuple(x.shape)}")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} contains NaN or infinite values")
        return x.detach()
    return torch.from_numpy(as_float_array(x, name))


def _unit(x, name, dtype, device):
    """Unit-normalise rows (norms computed in float64 on the CPU or float32 on GPU)."""
    x = x.to(device)
    work = x.to(
        torch.float64 if x.device.type == "cpu" or dtype == torch.float64 else torch.float32
    )
    norms = torch.linalg.vector_norm(work, dim=1, keepdim=True)
    zero = torch.nonzero(norms[:, 0] == 0)
    if zero.numel():
        raise ValueError(
            f"{name} has a zero vector at row {int(zero[0, 0])}; it cannot be unit-normalised"
        )
    return (work / norms).to(dtype)


def _check_dtype(dtype):
    if dtype not in _FLOAT_DTYPES:
        raise TypeError(f"dtype must be one of {_FLOAT_DTYPES}, got {dtype!r}")
    return dtype


def _lexsort_desc(vals, idx):
    """Sort each row by (value descending, index ascending); returns (vals, idx, perm)."""
    by_index = torch.argsort(idx, dim=1, stable=True)
    vals, idx = torch.gather(vals, 1, by_index), torch.gather(idx, 1, by_index)
    order = torch.argsort(vals, dim=1, descending=True, stable=True)
    return (
        torch.gather(vals, 1, order),
        torch.gather(idx, 1, order),
        torch.gather(by_index, 1, order),
    )


_CHUNK = 256  # columns per chunk of the two-stage selection (fastest of 64..512 on an H200)
_TWO_STAGE = (
    None  # None: on CUDA only (on a CPU the direct selection is as fast); True/False force it
)


def _select_topk(sims, k, chunk=None, two_stage=None):
    """``torch.topk(sims, k, dim=1)`` in two stages when the rows are long.

    The row is cut into chunks of ``chunk`` columns; the ``k`` chunks with the largest
    maxima hold every entry larger than the row's ``k``-th largest value (if one such
    entry sat in another chunk, the ``k`` chosen maxima and that entry would be ``k + 1``
    entries above the ``k``-th value), and at least ``k`` entries at or above it. So the
    ``k`` best of those ``k * chunk`` candidates have the same values as the ``k`` best of
    the row, and the same entries wherever the ``k``-th value is not tied with an entry
    left out (which :func:`_tile_topk` checks over the whole row). One pass for the chunk
    maxima and a selection among ``k * chunk`` candidates replace the selection over the
    whole row, which is several times slower on a GPU.

    ``two_stage=None`` (default) follows the module setting ``_TWO_STAGE``: two stages on
    CUDA tensors whose rows hold at least ``8 k`` chunks; ``True`` forces them wherever
    the row holds at least ``k`` chunks (tests use this on the CPU).

    Returns values (sorted descending) and column indices, like :func:`torch.topk`.
    """
    chunk = _CHUNK if chunk is None else chunk
    n_rows, width = sims.shape
    n_full = width // chunk
    n_chunks = -(-width // chunk)
    if two_stage is None:
        two_stage = _TWO_STAGE
    if two_stage is None:
        two_stage = sims.device.type == "cuda" and n_full >= 8 * k
    if not two_stage or n_chunks < k:
        return torch.topk(sims, k, dim=1, largest=True, sorted=True)
    maxima = sims[:, : n_full * chunk].view(n_rows, n_full, chunk).amax(dim=2)
    if width > n_full * chunk:
        maxima = torch.cat([maxima, sims[:, n_full * chunk :].amax(dim=1, keepdim=True)], dim=1)
    chunks = torch.topk(maxima, k, dim=1, largest=True, sorted=False).indices
    cols = (chunks[:, :, None] * chunk + torch.arange(chunk, device=sims.device)).reshape(
        n_rows, -1
    )
    outside = cols >= width  # the short last chunk
    cols = cols.clamp_(max=width - 1)
    cand = torch.gather(sims, 1, cols)
    if bool(outside.any()):
        cand = cand.masked_fill(outside, float("-inf"))
    vals, pos = torch.topk(cand, k, dim=1, largest=True, sorted=True)
    return vals, torch.gather(cols, 1, pos)


def _tile_topk(sims, k, exact_ties=True):
    """The ``k`` best columns of each row of ``sims``, ties at the boundary to smaller column.

    Returns values and column indices, sorted by (value desc, column asc). With
    ``exact_ties=False`` the choice among entries tied at the ``k``-th value is
    whatever :func:`torch.topk` returns (for low-precision tiles, where ties are
    frequent and the ranking is only as precise as the dtype anyway).
    """
    k = min(k, sims.shape[1])
    vals, cols = _select_topk(sims, k)
    if not exact_ties:
        return _lexsort_desc(vals, cols)[:2]
    kth = vals[:, -1:]
    # Rows where an entry equal to the k-th value was left out: the choice among the
    # tied entries is arbitrary there, so redo those rows with a stable sort.
    left_out = (sims == kth).sum(dim=1) > (vals == kth).sum(dim=1)
    if bool(left_out.any()):
        rows = torch.nonzero(left_out)[:, 0]
        order = torch.argsort(sims[rows], dim=1, descending=True, stable=True)[:, :k]
        cols[rows] = order
        vals[rows] = torch.gather(sims[rows], 1, order)
    vals, cols, _ = _lexsort_desc(vals, cols)
    return vals, cols


def _merge(vals_a, idx_a, vals_b, idx_b, k):
    """Merge two candidate lists; every index in ``a`` is smaller than every index in ``b``.

    Both lists are sorted by (value desc, index asc); a stable sort of their
    concatenation on the value keeps that order, so the first ``k`` are the answer.
    """
    vals = torch.cat([vals_a, vals_b], dim=1)
    idx = torch.cat([idx_a, idx_b], dim=1)
    order = torch.argsort(vals, dim=1, descending=True, stable=True)[:, :k]
    return torch.gather(vals, 1, order), torch.gather(idx, 1, order)


def topk_neighbors(
    bank, queries, k, *, query_block=1024, bank_block=65536, index_offset=0, exact_ties=True
):
    """Exact top-k of ``queries @ bank.T`` per row, blocked, with a running merge.

    Parameters
    ----------
    bank : torch.Tensor of shape (n_bank, d)
        Already unit-normalised rows (any float dtype; the product runs in it).
    queries : torch.Tensor of shape (n_query, d)
        Already unit-normalised, same dtype and device as ``bank``.
    k : int
        Candidates per query; at most ``n_bank`` are returned.
    query_block, bank_block : int
        Tile sizes; the largest temporary is ``query_block x bank_block``.
    index_offset : int
        Added to the returned indices (global index of ``bank[0]`` in a sharded bank).
    exact_ties : bool
        Resolve ties at the ``k``-th similarity toward the smaller index (default).
        False skips that check (faster for bfloat16/float16 tiles, where ties are common).

    Returns
    -------
    vals : torch.Tensor of shape (n_query, min(k, n_bank)), float64
        Similarities, each row sorted in decreasing order.
    idx : torch.Tensor of int64, same shape
        Their bank indices (plus ``index_offset``); ties in similarity are ordered by
        increasing index, and the boundary of the top-k keeps the smaller indices.
    """
    k = check_int(k, "k", minimum=1)
    query_block = check_int(query_block, "query_block", minimum=1)
    bank_block = check_int(bank_block, "bank_block", minimum=1)
    n_bank, n_query = bank.shape[0], queries.shape[0]
    k_eff = min(k, n_bank)
    out_vals = torch.empty(n_query, k_eff, dtype=torch.float64)
    out_idx = torch.empty(n_query, k_eff, dtype=torch.int64)
    for qs in range(0, n_query, query_block):
        q = queries[qs : qs + query_block]
        run_vals = run_idx = None
        for bs in range(0, n_bank, bank_block):
            sims = q @ bank[bs : bs + bank_block].T
            vals, cols = _tile_topk(sims, k_eff, exact_ties)
            vals, cols = vals.to(torch.float64), cols + (bs + index_offset)
            if run_vals is None:
                run_vals, run_idx = vals, cols
            else:
                run_vals, run_idx = _merge(run_vals, run_idx, vals, cols, k_eff)
        out_vals[qs : qs + q.shape[0]] = run_vals.cpu()
        out_idx[qs : qs + q.shape[0]] = run_idx.cpu()
    return out_vals, out_idx


def _prepare(train_h, train_y, test_h, k, tau, n_classes, dtype, device, query_block, bank_block):
    train = _as_tensor(train_h, "train_h", dtype)
    test = _as_tensor(test_h, "test_h", dtype)
    check_same_width(test, train, "test_h", "train_h")
    k = check_int(k, "k", minimum=1)
    tau = check_positive(tau, "tau")
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    y = train_y.detach().cpu().numpy() if isinstance(train_y, torch.Tensor) else train_y
    y = torch.from_numpy(as_labels(y, "train_y", n=train.shape[0], n_classes=n_classes))
    check_int(query_block, "query_block", minimum=1)
    check_int(bank_block, "bank_block", minimum=1)
    dtype = _check_dtype(dtype)
    device = torch.device(device) if device is not None else train.device
    return train, y, test, k, tau, n_classes, dtype, device


def knn_classify_torch(
    train_h,
    train_y,
    test_h,
    k,
    tau,
    n_classes,
    *,
    dtype=torch.float64,
    device=None,
    query_block=1024,
    bank_block=65536,
    exact_ties=None,
):
    """Weighted k-NN predictions, computed in tiles with a running top-k merge.

    Same rule and same predictions as :func:`repeval_ref.knn_classify` (in float64);
    see the module docstring for the algorithm.

    Parameters
    ----------
    train_h : torch.Tensor or array_like of shape (n_train, d)
        Feature bank; no zero rows.
    train_y : array_like of int, shape (n_train,)
        Labels in ``0 .. n_classes - 1``.
    test_h : torch.Tensor or array_like of shape (n_test, d)
        Queries; no zero rows.
    k : int
        Neighbours (all of them vote if ``k > n_train``).
    tau : float
        Temperature, ``> 0``.
    n_classes : int
    dtype : torch.dtype
        Precision of the normalised features and the similarity products: float64
        (default, exact agreement with the NumPy reference), float32, or bfloat16 /
        float16 (fast on CUDA; ranking then has the precision of the dtype).
    device : str or torch.device, optional
        Where to compute (default: where ``train_h`` lives; CPU for arrays).
    query_block, bank_block : int
        Tile sizes (test rows x bank rows per similarity tile). They never change
        the predictions.
    exact_ties : bool, optional
        Break ties at the ``k``-th similarity toward the smaller training index.
        Default: True for float64/float32, False for bfloat16/float16 (where ties
        are frequent and checking them would cost a sort of the tied rows).

    Returns
    -------
    numpy.ndarray of int64, shape (n_test,)
    """
    train, y, test, k, tau, n_classes, dtype, device = _prepare(
        train_h, train_y, test_h, k, tau, n_classes, dtype, device, query_block, bank_block
    )
    bank = _unit(train, "train_h", dtype, device)
    queries = _unit(test, "test_h", dtype, device)
    vals, idx = topk_neighbors(
        bank,
        queries,
        k,
        query_block=query_block,
        bank_block=bank_block,
        exact_ties=_exact_ties(exact_ties, dtype),
    )
    return weighted_vote(vals, idx, y[idx], tau, n_classes)


def _exact_ties(exact_ties, dtype):
    """``exact_ties`` as given, or by default True for float64 and float32 products."""
    return bool(dtype in (torch.float64, torch.float32) if exact_ties is None else exact_ties)


def weighted_vote(vals, idx, labels, tau, n_classes):
    """Temperature-weighted class vote of neighbour lists.

    ``votes_c = sum_j exp((s_j - s_max) / tau) [y_j = c]`` with ``s_max`` the row's
    largest similarity; the prediction is the first class with the largest total
    (smaller label on ties). The votes of a row are added in increasing training
    index, the order :func:`repeval_ref.knn_classify` adds them in; rows whose two
    best totals lie within ``1e-12`` (relative) are re-added in decreasing weight, as
    the reference does, so two classes holding the same similarities tie exactly and
    the smaller label wins.

    Parameters
    ----------
    vals : torch.Tensor of shape (m, k), float
        Neighbour similarities.
    idx : torch.Tensor of int64, shape (m, k)
        Their training indices (distinct within a row).
    labels : torch.Tensor of int64, shape (m, k)
        Their labels, in ``0 .. n_classes - 1``.
    tau : float
        Temperature, ``> 0``.
    n_classes : int

    Returns
    -------
    numpy.ndarray of int64, shape (m,)
    """
    tau = check_positive(tau, "tau")
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    if not (vals.shape == idx.shape == labels.shape) or vals.ndim != 2 or vals.shape[1] < 1:
        raise ValueError(
            f"vals, idx and labels must share one (m, k) shape with k >= 1, got "
            f"{tuple(vals.shape)}, {tuple(idx.shape)}, {tuple(labels.shape)}"
        )
    vals, idx, labels = vals.cpu().to(torch.float64), idx.cpu(), labels.cpu()
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= n_classes):
        raise ValueError(f"labels must lie in 0..{n_classes - 1}")
    order = torch.argsort(idx, dim=1)
    s = torch.gather(vals, 1, order)
    lab = torch.gather(labels, 1, order)
    s_max = vals.max(dim=1, keepdim=True).values
    weights = torch.exp((s - s_max) / tau)
    votes = torch.zeros(vals.shape[0], n_classes, dtype=weights.dtype)
    for j in range(s.shape[1]):
        votes.scatter_add_(1, lab[:, j : j + 1], weights[:, j : j + 1])
    votes = votes.numpy()
    if n_classes > 1:  # the reference's rule for (nearly) tied classes: re-add by weight
        settle_near_ties(votes, lab.numpy().ravel(), weights.numpy().ravel(), n_classes)
    return np.argmax(votes, axis=1).astype(np.int64)


def shard_range(n, rank, world_size):
    """Contiguous slice ``[start, stop)`` of ``range(n)`` held by ``rank`` of ``world_size``.

    The first ``n % world_size`` ranks hold one more row; shards are in rank order.
    """
    n = check_int(n, "n", minimum=0)
    world_size = check_int(world_size, "world_size", minimum=1)
    rank = check_int(rank, "rank", minimum=0, maximum=world_size - 1)
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def knn_classify_sharded(
    train_shard_h,
    train_shard_y,
    test_h,
    k,
    tau,
    n_classes,
    *,
    shard_offset,
    n_train=None,
    dtype=torch.float64,
    device=None,
    query_block=1024,
    bank_block=65536,
    exact_ties=None,
    group=None,
):
    """Weighted k-NN with the bank split across ``torch.distributed`` ranks.

    Each rank passes its own contiguous slice of the bank (rows ``shard_offset ..
    shard_offset + len - 1`` of the global bank; shards in rank order, see
    :func:`shard_range`) and the *same* queries. Each rank finds its local top-k with
    global indices; similarities, indices and labels are all-gathered and merged,
    and every rank returns the same predictions, equal to
    :func:`knn_classify_torch` on the whole bank.

    Parameters
    ----------
    train_shard_h : torch.Tensor or array_like of shape (n_shard, d)
        This rank's slice of the bank (may be empty only if ``n_shard == 0`` is
        given as a (0, d) tensor).
    train_shard_y : array_like of int, shape (n_shard,)
    test_h : torch.Tensor or array_like of shape (n_test, d)
        All queries, identical on every rank.
    k, tau, n_classes, dtype, device, query_block, bank_block, exact_ties
        As in :func:`knn_classify_torch`.
    shard_offset : int
        Global index of this shard's first row.
    n_train : int, optional
        Size of the global bank; summed over ranks if not given.
    group : torch.distributed process group, optional

    Returns
    -------
    numpy.ndarray of int64, shape (n_test,)
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            "knn_classify_sharded needs an initialised torch.distributed process group"
        )
    shard_offset = check_int(shard_offset, "shard_offset", minimum=0)
    empty_shard = (
        isinstance(train_shard_h, torch.Tensor)
        and train_shard_h.ndim == 2
        and train_shard_h.shape[0] == 0
    )
    if empty_shard:
        train = train_shard_h.detach()
        test = _as_tensor(test_h, "test_h", dtype)
        check_same_width(test, train, "test_h", "train_shard_h")
        k = check_int(k, "k", minimum=1)
        tau = check_positive(tau, "tau")
        n_classes = check_int(n_classes, "n_classes", minimum=1)
        dtype = _check_dtype(dtype)
        device = torch.device(device) if device is not None else test.device
        y = torch.zeros(0, dtype=torch.int64)
    else:
        train, y, test, k, tau, n_classes, dtype, device = _prepare(
            train_shard_h,
            train_shard_y,
            test_h,
            k,
            tau,
            n_classes,
            dtype,
            device,
            query_block,
            bank_block,
        )
    world = dist.get_world_size(group)
    # Collective tensors must live on the backend's device (CUDA for NCCL).
    comm_device = (
        torch.device("cuda", torch.cuda.current_device())
        if dist.get_backend(group) == "nccl"
        else torch.device("cpu")
    )
    n_local = torch.tensor([train.shape[0]], dtype=torch.int64, device=comm_device)
    sizes = [torch.zeros_like(n_local) for _ in range(world)]
    dist.all_gather(sizes, n_local, group=group)
    total = int(sum(int(s) for s in sizes))
    if n_train is not None and check_int(n_train, "n_train", minimum=1) != total:
        raise ValueError(f"n_train={n_train} but the shards hold {total} rows in all")
    if total == 0:
        raise ValueError("the bank is empty on every rank")
    k_eff = min(k, total)
    queries = _unit(test, "test_h", dtype, device)
    n_test = queries.shape[0]
    vals = torch.full((n_test, k_eff), -torch.inf, dtype=torch.float64)
    idx = torch.full((n_test, k_eff), total + shard_offset + train.shape[0], dtype=torch.int64)
    lab = torch.zeros((n_test, k_eff), dtype=torch.int64)
    if train.shape[0]:
        bank = _unit(train, "train_shard_h", dtype, device)
        v, i = topk_neighbors(
            bank,
            queries,
            k_eff,
            query_block=query_block,
            bank_block=bank_block,
            index_offset=shard_offset,
            exact_ties=_exact_ties(exact_ties, dtype),
        )
        m = v.shape[1]
        vals[:, :m], idx[:, :m], lab[:, :m] = v, i, y[i - shard_offset]
    gathered = []
    for t in (vals, idx, lab):
        parts = [torch.empty_like(t, device=comm_device) for _ in range(world)]
        dist.all_gather(parts, t.to(comm_device), group=group)
        gathered.append(torch.cat([p.cpu() for p in parts], dim=1))
    all_vals, all_idx, all_lab = gathered
    # Rank order is index order, so a lexicographic sort of the concatenation is exact.
    all_vals, all_idx, perm = _lexsort_desc(all_vals, all_idx)
    all_lab = torch.gather(all_lab, 1, perm)
    vals, idx, labels = all_vals[:, :k_eff], all_idx[:, :k_eff], all_lab[:, :k_eff]
    if not bool(torch.isfinite(vals).all()):  # pragma: no cover - guarded by k_eff <= total
        raise RuntimeError("internal error: padding candidate selected")
    return weighted_vote(vals, idx, labels, tau, n_classes)
