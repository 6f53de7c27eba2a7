"""Rankings of encoders across tasks: ranks per task, the mean rank, and Kendall's tau between
tasks.

Book: the practitioners' page, "Many encoders" (a suite of tasks); used by ``repeval suite``.

A suite scores ``m`` encoders on ``t`` tasks. A mean over tasks (VTAB's headline number)
hides the tasks on which two encoders swap places; this module keeps the places:

* :func:`task_ranks`: the rank of every encoder within every task, 1 for the highest
  accuracy; encoders with equal accuracy share the average of the ranks they span
  (``scipy.stats.rankdata(-score, method="average")``, written out here).
* :func:`kendall_tau_b` and :func:`tau_b_matrix`: Kendall's tau-b between two tasks'
  rankings (the tie-corrected tau: ``sum_p s_a(p) s_b(p) / sqrt(T_a T_b)`` over the
  ``m (m - 1) / 2`` pairs ``p`` of encoders, with ``s(p)`` the sign of their score
  difference and ``T`` the number of pairs not tied on that task). Undefined (NaN) when
  every encoder ties on one of the two tasks.
* :func:`rank_bootstrap`: percentile intervals for the mean rank and for every tau, by
  resampling the *test items of each task*: a replicate draws, for every task
  independently, ``n_k`` of its ``n_k`` test items with replacement, the same items for
  every encoder (the encoders are paired: they answered the same images), re-scores
  every encoder on them, re-ranks within every task, and recomputes the mean rank and
  the taus. The fitted probes and neighbour sets are held fixed: the interval is the
  spread due to which test images the task happened to contain, the quantity a Wilson
  interval describes for one cell.

Every function takes plain arrays and returns arrays or numbers.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_finite_numbers, check_int, check_probability_level, check_rng

__all__ = ["task_ranks", "mean_rank", "kendall_tau_b", "tau_b_matrix", "rank_bootstrap"]


def _scores(scores, name="scores"):
    s = as_finite_numbers(scores, name, ndim=2)
    if s.shape[0] < 2 or s.shape[1] < 1:
        raise ValueError(f"{name} needs at least 2 encoders and 1 task, got shape {s.shape}")
    return s


def _ranks(s):
    """Average ranks along axis -2 (encoders), 1 for the largest; any leading axes are batches."""
    a = s[..., :, None, :]
    b = s[..., None, :, :]
    greater = np.sum(b > a, axis=-2)  # encoders j scoring above encoder i
    equal = np.sum(b == a, axis=-2) - 1  # others tied with i
    return 1.0 + greater + 0.5 * equal


def task_ranks(scores):
    """The rank of every encoder within every task; 1 is the best, ties get average ranks.

    Parameters
    ----------
    scores : array_like of float, shape (m, t)
        Score (accuracy) of encoder ``i`` on task ``j``; higher is better. ``m >= 2``.

    Returns
    -------
    numpy.ndarray of float64, shape (m, t)
        ``rank[i, j] = 1 + #{k : s[k, j] > s[i, j]} + #{k != i : s[k, j] == s[i, j]} / 2``,
        which is ``scipy.stats.rankdata(-scores[:, j], method="average")``. Every
        column sums to ``m (m + 1) / 2``.
    """
    return _ranks(_scores(scores))


def mean_rank(scores):
    """Each encoder's rank averaged over the tasks, shape (m,) (see :func:`task_ranks`)."""
    return task_ranks(scores).mean(axis=1)


def _pair_signs(r):
    """Signs of the score differences of every pair i < j: (..., m, t) -> (..., P, t)."""
    m = r.shape[-2]
    i, j = np.triu_indices(m, k=1)
    return np.sign(r[..., i, :] - r[..., j, :])


def _tau_from_signs(sg):
    """tau-b for every pair of columns of the pair signs ``sg`` (..., P, t) -> (..., t, t)."""
    num = np.einsum("...pa,...pb->...ab", sg, sg)
    untied = np.einsum("...pa,...pa->...a", sg, sg)  # pairs not tied on each task
    den = np.sqrt(untied[..., :, None] * untied[..., None, :])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def kendall_tau_b(x, y):
    """Kendall's tau-b between two rankings (or scores) of the same ``m`` encoders.

    Parameters
    ----------
    x, y : array_like of float, shape (m,)
        Scores or ranks; only their order matters. ``m >= 2``.

    Returns
    -------
    float
        ``sum_{i<j} sgn(x_i - x_j) sgn(y_i - y_j) / sqrt(T_x T_y)``, with ``T_x`` the
        number of pairs not tied in ``x``; NaN when ``T_x`` or ``T_y`` is 0 (every
        encoder tied). Equal to ``scipy.stats.kendalltau(x, y).statistic``.
    """
    x = np.asarray(x)
    y = np.asarray(y)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"x and y must be 1-dimensional, got shapes {x.shape} and {y.shape}")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}")
    s = _scores(np.stack([x, y], axis=1), "x and y")
    return float(_tau_from_signs(_pair_signs(s))[0, 1])


def tau_b_matrix(scores):
    """Kendall's tau-b between the rankings of every pair of tasks.

    Parameters
    ----------
    scores : array_like of float, shape (m, t)

    Returns
    -------
    numpy.ndarray of float64, shape (t, t)
        Symmetric; entry ``(a, b)`` is :func:`kendall_tau_b` of columns ``a`` and ``b``
        (the diagonal is 1, or NaN for a task on which every encoder ties).
    """
    return _tau_from_signs(_pair_signs(_scores(scores)))


def _correct_list(correct):
    if isinstance(correct, np.ndarray) and correct.ndim == 3:
        correct = list(correct)
    if isinstance(correct, (str, bytes)) or not hasattr(correct, "__len__"):
        raise TypeError("correct must be a sequence of (m, n_task) boolean arrays, one per task")
    out = []
    for k, c in enumerate(correct):
        a = np.asarray(c)
        if a.dtype != bool:
            if (
                a.dtype == object
                or not np.issubdtype(a.dtype, np.number)
                or not np.all(np.isin(a, (0, 1)))
            ):
                raise ValueError(f"correct[{k}] must hold booleans (or 0 and 1)")
            a = a.astype(bool)
        if a.ndim != 2 or a.shape[1] < 1:
            raise ValueError(f"correct[{k}] must have shape (encoders, test items), got {a.shape}")
        out.append(a)
    if not out:
        raise ValueError("correct is empty: give at least one task")
    m = out[0].shape[0]
    if m < 2:
        raise ValueError(f"correct needs at least 2 encoders, got {m}")
    bad = next((k for k, a in enumerate(out) if a.shape[0] != m), None)
    if bad is not None:
        raise ValueError(f"correct[{bad}] has {out[bad].shape[0]} encoders but correct[0] has {m}")
    return out


#: index draws are made in blocks of about this many items (the stream is the same as one call)
_BLOCK_ITEMS = 2_000_000


def rank_bootstrap(correct, n_boot=1000, seed=0, level=0.95):
    """Ranks, mean rank and task-to-task Kendall tau-b, with item-bootstrap percentile intervals.

    Parameters
    ----------
    correct : sequence of t array_like of bool, task ``k`` of shape (m, n_k)
        ``correct[k][i, r]``: encoder ``i`` classified test item ``r`` of task ``k``
        correctly. The tasks may have different sizes; every task lists the same ``m``
        encoders in the same order, ``m >= 2``.
    n_boot : int
        Bootstrap replicates, ``>= 1``.
    seed : int or numpy.random.Generator
        Seed of the draws.
    level : float
        Confidence level of the percentile intervals, in (0, 1).

    Returns
    -------
    dict
        ``accuracy`` (m, t); ``ranks`` (m, t) (:func:`task_ranks` of the accuracies);
        ``mean_rank`` (m,) and ``mean_rank_interval`` (m, 2); ``tau`` (t, t)
        (:func:`tau_b_matrix`) and ``tau_interval`` (t, t, 2); ``tau_defined`` (t, t),
        the number of replicates in which tau was defined (the interval is taken over
        those; NaN where none); ``n_boot``, ``level``.

    Notes
    -----
    The draws, exactly: ``rng = numpy.random.default_rng(seed)``; for each task ``k`` in
    order, ``idx_k = rng.integers(0, n_k, size=(n_boot, n_k))`` (made in blocks of
    replicates, which gives the same numbers as one call). Replicate ``b`` scores
    encoder ``i`` on task ``k`` as ``correct[k][i, idx_k[b]].mean()``, ranks the
    encoders within each task (:func:`task_ranks`), averages the ranks over tasks and
    computes :func:`tau_b_matrix`. The interval is
    ``numpy.percentile(values, [100 (1 - level) / 2, 100 (1 + level) / 2])``.
    """
    tasks = _correct_list(correct)
    n_boot = check_int(n_boot, "n_boot", minimum=1)
    rng = check_rng(seed, "seed")
    level = check_probability_level(level)
    m, t = tasks[0].shape[0], len(tasks)
    acc = np.stack([c.mean(axis=1) for c in tasks], axis=1)
    boot = np.empty((n_boot, m, t))
    for k, c in enumerate(tasks):
        n = c.shape[1]
        items = c.T  # (n, m)
        block = max(1, _BLOCK_ITEMS // n)
        for lo in range(0, n_boot, block):
            hi = min(n_boot, lo + block)
            idx = rng.integers(0, n, size=(hi - lo, n))
            boot[lo:hi, :, k] = items[idx].sum(axis=1) / n
    ranks_b = _ranks(boot)  # (B, m, t)
    mean_b = ranks_b.mean(axis=2)  # (B, m)
    tau_b = _tau_from_signs(_pair_signs(ranks_b))  # (B, t, t)
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    mean_int = np.percentile(mean_b, q, axis=0).T
    defined = np.sum(np.isfinite(tau_b), axis=0)
    tau_int = np.full((t, t, 2), np.nan)
    for a in range(t):
        for b in range(t):
            vals = tau_b[:, a, b]
            vals = vals[np.isfinite(vals)]
            if vals.size:
                tau_int[a, b] = np.percentile(vals, q)
    ranks = _ranks(acc)
    return {
        "accuracy": acc,
        "ranks": ranks,
        "mean_rank": ranks.mean(axis=1),
        "mean_rank_interval": mean_int,
        "tau": _tau_from_signs(_pair_signs(ranks)),
        "tau_interval": tau_int,
        "tau_defined": defined,
        "n_boot": n_boot,
        "level": level,
    }
