"""Tables of typical mistakes for the hint test.

``MISTAKES[exercise][variant] = (source, cause)``: ``source`` redefines one graded
function of the exercise with exactly one typical mistake (the notebook's other functions
stay the reference solution's); ``cause`` is a phrase that the first failing hint must
contain, because it names that mistake. ``CAUSES[exercise]`` lists every cause phrase of
the exercise: a hint may only contain the phrases of the mistakes the answer has.

Hints are diagnosed from the answer's behaviour on targeted inputs, never from its
source text, so the phrases below must appear whatever the answer's variable names.
"""

# ------------------------------------------------------------------------ k-NN
_KNN_HEAD = """
import numpy as np

def knn_classify(bank, bank_y, queries, k, tau, n_classes):
    a = np.asarray(bank, float); a = a / np.linalg.norm(a, axis=1, keepdims=True)
    q = np.asarray(queries, float); q = q / np.linalg.norm(q, axis=1, keepdims=True)
    sims = q @ a.T
"""
_KNN_VOTE = """
    s = np.take_along_axis(sims, nbr, axis=1)
    w = np.exp((s - s.max(axis=1, keepdims=True)) / tau)
    votes = np.zeros((len(sims), n_classes))
    for i in range(len(sims)):
        np.add.at(votes[i], np.asarray(bank_y)[nbr[i]], w[i])
    return np.argmax(votes, axis=1)
"""
_KNN_SELECT = """
    kk = min(k, sims.shape[1])
    nbr = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
"""

KNN = {
    "no_normalisation": (
        """
import numpy as np

def knn_classify(bank, bank_y, queries, k, tau, n_classes):
    sims = np.asarray(queries, float) @ np.asarray(bank, float).T
"""
        + _KNN_SELECT
        + _KNN_VOTE,
        "normalise both banks",
    ),
    "overflow": (
        _KNN_HEAD
        + _KNN_SELECT
        + """
    w = np.exp(np.take_along_axis(sims, nbr, axis=1) / tau)
    votes = np.zeros((len(sims), n_classes))
    for i in range(len(sims)):
        np.add.at(votes[i], np.asarray(bank_y)[nbr[i]], w[i])
    return np.argmax(votes, axis=1)
""",
        "votes overflow",
    ),
    "ties_to_larger": (
        _KNN_HEAD
        + _KNN_SELECT
        + _KNN_VOTE.replace(
            "return np.argmax(votes, axis=1)",
            "return n_classes - 1 - np.argmax(votes[:, ::-1], axis=1)",
        ),
        "equal vote totals must go to the smaller label",
    ),
    "k_plus_one": (
        _KNN_HEAD
        + """
    kk = min(k + 1, sims.shape[1])
    nbr = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
"""
        + _KNN_VOTE,
        "off-by-one in k",
    ),
    "k_minus_one": (
        _KNN_HEAD
        + """
    kk = min(k - 1, sims.shape[1])
    nbr = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
"""
        + _KNN_VOTE,
        "off-by-one in k",
    ),
    "unweighted": (
        _KNN_HEAD
        + _KNN_SELECT
        + """
    votes = np.zeros((len(sims), n_classes))
    for i in range(len(sims)):
        np.add.at(votes[i], np.asarray(bank_y)[nbr[i]], 1.0)
    return np.argmax(votes, axis=1)
""",
        "plain majority vote",
    ),
    "no_min_k": (
        _KNN_HEAD
        + """
    if k > sims.shape[1]:
        raise ValueError("k larger than the bank")
    nbr = np.argsort(-sims, axis=1, kind="stable")[:, :k]
"""
        + _KNN_VOTE,
        "min(k, n_train)",
    ),
    "unstable_selection": (
        _KNN_HEAD
        + """
    kk = min(k, sims.shape[1])
    nbr = np.argsort(-sims[:, ::-1], axis=1, kind="stable")[:, :kk]
    nbr = sims.shape[1] - 1 - nbr
"""
        + _KNN_VOTE,
        "smaller indices among equal similarities",
    ),
    "stub": (
        """
def knn_classify(bank, bank_y, queries, k, tau, n_classes):
    raise NotImplementedError()
""",
        "NotImplementedError",
    ),
}

# -------------------------------------------------------------------- Wilson
_WILSON_HEAD = """
import numpy as np

def wilson_interval(k, n, z=1.959963984540054):
    p = k / n
"""
_WILSON_ENDS = """
    lo, hi = max(0.0, centre - half), min(1.0, centre + half)
    if k == 0:
        lo = 0.0
    if k == n:
        hi = 1.0
    return float(lo), float(hi)
"""

WILSON = {
    "wald": (
        _WILSON_HEAD
        + """
    centre = p
    half = z * np.sqrt(p * (1 - p) / n)
"""
        + _WILSON_ENDS,
        "normal (Wald) interval",
    ),
    "no_centre_shift": (
        _WILSON_HEAD
        + """
    shrink = 1 + z * z / n
    centre = p
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / shrink
"""
        + _WILSON_ENDS,
        "centred on p = k/n",
    ),
    "no_shrink": (
        _WILSON_HEAD
        + """
    centre = p + z * z / (2 * n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
"""
        + _WILSON_ENDS,
        "not divided by 1 + z^2/n",
    ),
    "no_extra_variance": (
        _WILSON_HEAD
        + """
    shrink = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / shrink
    half = z * np.sqrt(p * (1 - p) / n) / shrink
"""
        + _WILSON_ENDS,
        "lacks the term z^2/(4n^2)",
    ),
    "fixed_z": (
        """
import numpy as np

def wilson_interval(k, n, z=1.959963984540054):
    z = 1.96
    p = k / n
    shrink = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / shrink
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / shrink
"""
        + _WILSON_ENDS,
        "fixed 1.96",
    ),
    "inexact_ends": (
        _WILSON_HEAD
        + """
    shrink = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / shrink
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / shrink
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))
""",
        "must be exactly",
    ),
}


def _derived(exercise, old, new):
    """The exercise's reference solution with the line ``old`` replaced by ``new``."""
    from autograder.build import solution_source
    from autograder.exercises import load

    source = solution_source(load(exercise))
    if source.count(old) != 1:
        raise AssertionError(f"{exercise}: the solution no longer holds {old!r} once")
    return source.replace(old, new)


_FOLD_BIAS = "b_folded = b - W_folded.T @ mu"
_TWONN_RETURN = "return float(len(X) / np.sum(np.log(r2 / r1)))"
_RANKME_SHARES = "shares = sigma / sigma.sum() + eps"
_CKA_CROSS = "cross = np.linalg.norm(Xc.T @ Yc) ** 2"
_CKA_RETURN = "return float(cross / (np.linalg.norm(Xc.T @ Xc) * np.linalg.norm(Yc.T @ Yc)))"

DERIVED = {
    "fold_batchnorm": {
        "bias_not_shifted": (
            _derived("fold_batchnorm", _FOLD_BIAS, "b_folded = b"),
            "the mean must be absorbed into the bias",
        ),
        "bias_with_original_w": (
            _derived("fold_batchnorm", _FOLD_BIAS, "b_folded = b - W.T @ mu"),
            "uses the original W",
        ),
        "divides_by_variance": (
            _derived(
                "fold_batchnorm", "W_folded = W / s[:, None]", "W_folded = W / s[:, None] ** 2"
            ),
            "row j of W must be divided by s_j",
        ),
    },
    "two_nn_id": {
        "n_minus_one": (
            _derived(
                "two_nn_id", _TWONN_RETURN, "return float((len(X) - 1) / np.sum(np.log(r2 / r1)))"
            ),
            "not (N - 1)",
        ),
        "inverse": (
            _derived("two_nn_id", _TWONN_RETURN, "return float(np.mean(np.log(r2 / r1)))"),
            "the inverse of the estimate",
        ),
    },
    "rankme": {
        "no_eps": (_derived("rankme", _RANKME_SHARES, "shares = sigma / sigma.sum()"), "Add eps"),
        "squared_singular_values": (
            _derived("rankme", _RANKME_SHARES, "shares = sigma ** 2 / (sigma ** 2).sum() + eps"),
            "squared singular values",
        ),
        "entropy_not_exponentiated": (
            _derived(
                "rankme",
                "return float(np.exp(-np.sum(shares * np.log(shares))))",
                "return float(-np.sum(shares * np.log(shares)))",
            ),
            "entropy of the shares",
        ),
    },
    "linear_cka": {
        "cross_not_squared": (
            _derived("linear_cka", _CKA_CROSS, "cross = np.linalg.norm(Xc.T @ Yc)"),
            "not squared",
        ),
        "sqrt_denominator": (
            _derived(
                "linear_cka",
                _CKA_RETURN,
                _CKA_RETURN.replace(
                    "(np.linalg.norm(Xc.T @ Xc) * np.linalg.norm(Yc.T @ Yc))",
                    "np.sqrt(np.linalg.norm(Xc.T @ Xc) * np.linalg.norm(Yc.T @ Yc))",
                ),
            ),
            "square root too many",
        ),
    },
}

# ------------------------------------------------------------------ ridge LOO
_RIDGE_PRESS = "press[j] = np.sum(loo**2) / (n * K)"

RIDGE_LOO = {
    "divides_by_n": (
        _derived("ridge_loo", _RIDGE_PRESS, "press[j] = np.sum(loo**2) / n"),
        "n K entries",
    ),
    "leverage_without_bias": (
        _derived("ridge_loo", "leverage = 1.0 / n + (U**2) @ shrink", "leverage = (U**2) @ shrink"),
        "includes the term 1/n",
    ),
    "zero_one_targets": (
        _derived("ridge_loo", "T = -np.ones((n, K))", "T = np.zeros((n, K))"),
        "0/1 targets",
    ),
    "classes_from_unique": (
        _derived(
            "ridge_loo", "n, K = len(H), int(y.max()) + 1", "n, K = len(H), len(np.unique(y))"
        ),
        "K = the largest label + 1",
    ),
    # the bias penalised like the weights, and nothing else: the leverages and fitted
    # values without an n x n matrix (autograder_cases' answer with this mistake forms the
    # hat matrix as well, which the memory check rightly names)
    "penalised_bias": (
        """
import numpy as np

def ridge_loo(train_h, train_y, lams):
    H = np.asarray(train_h, float); y = np.asarray(train_y)
    n, K = len(H), int(y.max()) + 1
    T = -np.ones((n, K)); T[np.arange(n), y] = 1
    Z = np.hstack([np.ones((n, 1)), H])              # the bias column is penalised too
    press = []
    for lam in lams:
        A = np.linalg.solve(Z.T @ Z + lam * np.eye(Z.shape[1]), Z.T)
        leverage = np.einsum("ij,ji->i", Z, A)
        e = (T - Z @ (A @ T)) / (1 - leverage)[:, None]
        press.append((e ** 2).sum() / (n * K))
    press = np.array(press)
    return float(np.asarray(lams, float)[int(np.argmin(press))]), press
""",
        "unpenalised bias",
    ),
    # right values, but through the n x n hat matrix of each penalty (its diagonal taken
    # afterwards), or through the full U of an SVD without full_matrices=False
    "hat_matrix": (
        _derived(
            "ridge_loo",
            "leverage = 1.0 / n + (U**2) @ shrink",
            "hat = (U * shrink) @ U.T\n        leverage = 1.0 / n + np.diag(hat)",
        ),
        "forms an n x n matrix",
    ),
    "full_svd": (
        _derived(
            "ridge_loo",
            "U, s, _ = np.linalg.svd(Hc, full_matrices=False)",
            "U, s, _ = np.linalg.svd(Hc)\n    U = U[:, :len(s)]",
        ),
        "forms an n x n matrix",
    ),
}

# ----------------------------------------------------------------- rank bound
_RANK_COUNTS = "counts = np.sort(np.bincount(y, minlength=n_classes))"

RANK_BOUND = {
    "no_bias_column": (
        _derived("rank_bound", "design = np.hstack([H, np.ones((n, 1))])", "design = H"),
        "without the bias column",
    ),
    "drops_k_minus_r": (
        _derived("rank_bound", "dropped = n_classes - r - 1", "dropped = n_classes - r"),
        "the bias adds one",
    ),
    "largest_counts": (
        _derived(
            "rank_bound",
            _RANK_COUNTS,
            _RANK_COUNTS.replace("minlength=n_classes))", "minlength=n_classes))[::-1]"),
        ),
        "LARGEST counts",
    ),
    "columns_as_rank": (
        _derived("rank_bound", "r = int(np.linalg.matrix_rank(H))", "r = H.shape[1]"),
        "not its number of columns",
    ),
    "negative_count_wraps": (
        _derived(
            "rank_bound",
            "floor = int(counts[:dropped].sum()) if dropped > 0 else 0",
            "floor = int(counts[:dropped].sum())",
        ),
        "must not wrap around",
    ),
    "counts_of_present_labels": (
        _derived(
            "rank_bound", _RANK_COUNTS, "counts = np.sort(np.unique(y, return_counts=True)[1])"
        ),
        "A class that counts 0",
    ),
}

# ------------------------------------------------------------------ merge top-k
_MERGE_ORDER = "order = np.lexsort((glob, -vals), axis=1)[:, :kk]"

MERGE_TOPK = {
    "local_indices": (
        _derived(
            "merge_topk",
            "glob = np.concatenate([np.asarray(i).astype(np.int64) + int(off)",
            "glob = np.concatenate([np.asarray(i).astype(np.int64) + 0 * int(off)",
        ),
        "add each shard's offset",
    ),
    "ties_in_pooled_order": (
        _derived(
            "merge_topk", _MERGE_ORDER, 'order = np.argsort(-vals, axis=1, kind="stable")[:, :kk]'
        ),
        "smaller *global* index",
    ),
    "ascending": (
        _derived("merge_topk", _MERGE_ORDER, "order = np.lexsort((glob, vals), axis=1)[:, :kk]"),
        "k smallest similarities",
    ),
    "padded_to_k": (
        """
import numpy as np

def merge_topk(shard_vals, shard_idx, offsets, k):
    vals = np.concatenate([np.asarray(v, dtype=float) for v in shard_vals], axis=1)
    glob = np.concatenate([np.asarray(i).astype(np.int64) + int(off)
                           for i, off in zip(shard_idx, offsets)], axis=1)
    out_v = np.full((len(vals), k), -np.inf)
    out_i = np.full((len(vals), k), -1, dtype=np.int64)
    order = np.lexsort((glob, -vals), axis=1)[:, :k]
    n = order.shape[1]
    out_v[:, :n] = np.take_along_axis(vals, order, axis=1)
    out_i[:, :n] = np.take_along_axis(glob, order, axis=1)
    return out_v, out_i
""",
        "without padding",
    ),
    "shards_assumed_sorted": (
        """
import numpy as np

def merge_topk(shard_vals, shard_idx, offsets, k):
    m = np.asarray(shard_vals[0]).shape[0]
    total = sum(np.asarray(v).shape[1] for v in shard_vals)
    kk = min(k, total)
    V = np.empty((m, kk))
    I = np.empty((m, kk), dtype=np.int64)
    for q in range(m):
        heads = [0] * len(shard_vals)          # a k-way merge of (assumed) sorted lists
        for j in range(kk):
            best = None
            for s, (v, i) in enumerate(zip(shard_vals, shard_idx)):
                if heads[s] < np.shape(v)[1]:
                    key = (-v[q, heads[s]], int(offsets[s]) + int(i[q, heads[s]]))
                    if best is None or key < best[0]:
                        best = (key, s)
            (neg, g), s = best
            V[q, j], I[q, j] = -neg, g
            heads[s] += 1
    return V, I
""",
        "may come in any order",
    ),
}

# ------------------------------------- McNemar and the paired bootstrap (same notebook)
_MCNEMAR_HEAD = """
import numpy as np
from scipy import stats

def mcnemar_exact(a_correct, b_correct):
    a = np.asarray(a_correct).astype(bool)
    b = np.asarray(b_correct).astype(bool)
    n01, n10 = int(np.sum(b & ~a)), int(np.sum(a & ~b))
    if n01 + n10 == 0:
        return 1.0
"""
_BOOT_HEAD = """
import numpy as np

def paired_bootstrap_ci(a_correct, b_correct, n_boot, rng, level=0.95):
    a = np.asarray(a_correct).astype(int)
    b = np.asarray(b_correct).astype(int)
    n = len(a)
"""
_BOOT_DRAW = """
    counts = rng.multinomial(n, cells / n, size=n_boot)
"""
_BOOT_CELLS = "    cells = np.bincount(2 * a + b, minlength=4)"
_BOOT_GAINS = "    gains = (counts[:, 1] - counts[:, 2]) / n\n"
_BOOT_TAILS = "[100 * (1 - level) / 2, 100 * (1 + level) / 2]"
_BOOT_END = """    lo, hi = np.percentile(gains, TAILS)
    return float(b.mean() - a.mean()), float(lo), float(hi)
"""

PAIRED = {
    "mcnemar_one_sided": (
        _MCNEMAR_HEAD
        + """
    return float(stats.binom.cdf(min(n01, n10), n01 + n10, 0.5))
""",
        "one-sided tail",
    ),
    "mcnemar_uncapped": (
        _MCNEMAR_HEAD
        + """
    return float(2 * stats.binom.cdf(min(n01, n10), n01 + n10, 0.5))
""",
        "cannot exceed 1",
    ),
    "mcnemar_chi_square": (
        _MCNEMAR_HEAD
        + """
    stat = (abs(n01 - n10) - 1) ** 2 / (n01 + n10)
    return float(stats.chi2.sf(stat, 1))
""",
        "chi-square approximation",
    ),
    "mcnemar_count_of_b": (
        _MCNEMAR_HEAD
        + """
    return float(min(1.0, 2 * stats.binom.cdf(n01, n01 + n10, 0.5)))
""",
        "smaller of the two discordant counts",
    ),
    "bootstrap_gain_reversed": (
        _BOOT_HEAD
        + _BOOT_CELLS
        + _BOOT_DRAW
        + _BOOT_GAINS
        + """
    lo, hi = np.percentile(gains, TAILS)
    return float(a.mean() - b.mean()), float(lo), float(hi)
""".replace("TAILS", _BOOT_TAILS),
        "B's accuracy minus A's",
    ),
    "bootstrap_cells_swapped": (
        _BOOT_HEAD
        + _BOOT_CELLS
        + _BOOT_DRAW
        + "    gains = (counts[:, 2] - counts[:, 1]) / n\n"
        + _BOOT_END.replace("TAILS", _BOOT_TAILS),
        "cell 1 (only B right) counts for B",
    ),
    "bootstrap_fixed_95": (
        _BOOT_HEAD
        + _BOOT_CELLS
        + _BOOT_DRAW
        + _BOOT_GAINS
        + _BOOT_END.replace("TAILS", "[2.5, 97.5]"),
        "the 95% one although level",
    ),
    "bootstrap_one_tail_each": (
        _BOOT_HEAD
        + _BOOT_CELLS
        + _BOOT_DRAW
        + _BOOT_GAINS
        + _BOOT_END.replace("TAILS", "[100 * (1 - level), 100 * level]"),
        "1 - level out in each tail",
    ),
    "bootstrap_no_minlength": (
        _BOOT_HEAD
        + "    cells = np.bincount(2 * a + b)"
        + _BOOT_DRAW
        + _BOOT_GAINS
        + _BOOT_END.replace("TAILS", _BOOT_TAILS),
        "count with minlength=4",
    ),
}
WILSON.update(PAIRED)

# ------------------------------------------------------------------ retrieval
RETRIEVAL = {
    "ideal_over_k": (
        _derived(
            "retrieval_metrics",
            'out[f"ndcg@{k}"] = float(np.mean(dcg[:, top] / ideal[np.minimum(n_rel, top + 1) - '
            "1]))",
            'out[f"ndcg@{k}"] = float(np.mean(dcg[:, top] / ideal[top]))',
        ),
        "min(k, R) relevant items at the top",
    ),
    "discount_shifted": (
        _derived(
            "retrieval_metrics",
            "discount = 1.0 / np.log2(ranks + 1)",
            "discount = 1.0 / np.log2(ranks + 2)",
        ),
        "discounted by 1 / log2(2) = 1",
    ),
}

# ------------------------------------------------------------------ low-shot
LOW_SHOT = {
    # the check tests' ddof=0 answer, named more closely (its feedback words, "ddof=1",
    # also close the hint of every other spread mistake)
    "ddof0": (
        _derived(
            "low_shot_eval",
            "return float(accuracies.mean()), float(accuracies.std(ddof=1))",
            "return float(accuracies.mean()), float(accuracies.std())",
        ),
        "is the population standard deviation",
    ),
    "means_not_rescaled": (
        _derived(
            "low_shot_eval",
            "centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)",
            "pass",
        ),
        "rescale each class mean",
    ),
    "raw_pool": (
        _derived(
            "low_shot_eval", "pool = pool / np.linalg.norm(pool, axis=1, keepdims=True)", "pass"
        ),
        "scale every row of train_h to unit length before averaging",
    ),
    "standard_error": (
        _derived(
            "low_shot_eval",
            "return float(accuracies.mean()), float(accuracies.std(ddof=1))",
            "return float(accuracies.mean()), float(accuracies.std(ddof=1) / np.sqrt(n_draws))",
        ),
        "you returned the standard error",
    ),
}

# ------------------------------------------------------- region bootstrap mIoU
_REGION_IDS = "ids, which = np.unique(np.asarray(regions), return_inverse=True)"

REGION_BOOTSTRAP = {
    "tiles_resampled": (
        _derived(
            "region_bootstrap_miou",
            _REGION_IDS,
            "ids = which = np.arange(len(counts))              # every tile on its own",
        ),
        "Your interval resamples tiles",
    ),
    "mean_of_tile_mious": (
        _derived(
            "region_bootstrap_miou",
            "return float(miou_of(counts.sum(axis=0))), float(lo), float(hi)",
            "return float(np.mean(miou_of(counts))), float(lo), float(hi)",
        ),
        "average of the tiles' own mIoUs",
    ),
    "ids_as_indices": (
        _derived(
            "region_bootstrap_miou",
            _REGION_IDS,
            "which = np.asarray(regions); ids = np.arange(which.max() + 1)",
        ),
        "an id is a name, not an index",
    ),
    "absent_class_as_zero": (
        _derived(
            "region_bootstrap_miou",
            "return ratio.sum(axis=-1) / present.sum(axis=-1)",
            "return ratio.mean(axis=-1)",
        ),
        "counted the class as IoU 0",
    ),
}

# ---------------------------------------------------------------- attentive probe
_ATT_SCORES = 'scores = np.einsum("bthc,hc->bht", keys, queries) / np.sqrt(head_width)'

ATTENTIVE = {
    "unscaled_scores": (
        _derived("attentive_probe", _ATT_SCORES, _ATT_SCORES.replace(" / np.sqrt(head_width)", "")),
        "not divided by sqrt(dk)",
    ),
    "scaled_by_full_width": (
        _derived(
            "attentive_probe",
            _ATT_SCORES,
            _ATT_SCORES.replace("np.sqrt(head_width)", "np.sqrt(width)"),
        ),
        "divide by sqrt(dk) = sqrt(d / n_heads)",
    ),
    "wo_transposed": (
        _derived(
            "attentive_probe",
            "return pooled @ Wo @ W_cls, weights",
            "return pooled @ Wo.T @ W_cls, weights",
        ),
        "use W_O transposed",
    ),
}

# ---------------------------------------------------------------------- transfer
TRANSFER = {
    "gradient_without_two": (
        _derived(
            "transfer", "step_v = (2.0 / n) * (B @ back)", "step_v = (1.0 / n) * (B @ back)"
        ).replace(
            "step_B = (2.0 / n) * np.outer(v, back)", "step_B = (1.0 / n) * np.outer(v, back)"
        ),
        "carries the factor 2/n, not 1/n",
    ),
    "one_step_more": (
        _derived("transfer", "for _ in range(steps):", "for _ in range(steps + 1):"),
        "steps instead of",
    ),
    "lp_moves_features": (
        _derived("transfer", "probed = descend(v0, B0, False)", "probed = descend(v0, B0, True)"),
        "LP must keep B fixed at B0",
    ),
}

# ---------------------------------------------------------------- frozen features
FROZEN = {
    "train_at_the_end": (
        """
import torch

def frozen_features(encoder, batches):
    encoder.eval()
    outputs = []
    with torch.no_grad():
        for batch in batches:
            x = batch[0] if isinstance(batch, (tuple, list)) else batch
            outputs.append(encoder(x).cpu())
    encoder.train()                      # back to training mode, every module alike
    return torch.cat(outputs, dim=0)
""",
        "encoder.train() at the",
    ),
    "graph_kept": (
        _derived(
            "frozen_features", "        with torch.no_grad():\n", "        if True:\n"
        ).replace("outputs.append(encoder(x).detach().cpu())", "outputs.append(encoder(x).cpu())"),
        "attached to an autograd graph",
    ),
    "labels_fed_in": (
        _derived(
            "frozen_features",
            "x = batch[0] if isinstance(batch, (tuple, list)) else batch",
            "x = batch",
        ),
        "feed the encoder batch[0]",
    ),
}

# ------------------------------------------------------------------ linear probe
LINEAR_PROBE = {
    "last_of_tied_C": (
        _derived(
            "linear_probe_done_right",
            "best_C = Cs[int(np.argmax(scores))]",
            "best_C = Cs[len(scores) - 1 - int(np.argmax(scores[::-1]))]",
        ),
        "keep the earliest C",
    ),
    "no_refit": (
        _derived(
            "linear_probe_done_right",
            "    centre, spread = X.mean(axis=0), X.std(axis=0)\n"
            "    model = LogisticRegression(C=best_C, max_iter=2000).fit((X - centre) / spread, "
            "y)\n",
            "    centre, spread = X[fitting].mean(axis=0), X[fitting].std(axis=0)\n"
            "    model = LogisticRegression(C=best_C, max_iter=2000).fit(Z_fit, y[fitting])\n",
        ),
        "fitted on the fitting rows only",
    ),
}

MISTAKES = {
    "knn_classify": KNN,
    "wilson_interval": WILSON,
    **DERIVED,
    "ridge_loo": RIDGE_LOO,
    "rank_bound": RANK_BOUND,
    "merge_topk": MERGE_TOPK,
    "retrieval_metrics": RETRIEVAL,
    "low_shot_eval": LOW_SHOT,
    "region_bootstrap_miou": REGION_BOOTSTRAP,
    "attentive_probe": ATTENTIVE,
    "transfer": TRANSFER,
    "frozen_features": FROZEN,
    "linear_probe_done_right": LINEAR_PROBE,
}


# ------------------------------------------- the wrong answers of the check tests
def _with_known_wrong_answers(table):
    """``table`` plus the wrong answers of ``autograder_cases`` and
    ``autograder_cases_more`` whose named problem is listed (their feedback words are
    the cause), and a blank stub of every graded function of every exercise (its
    NotImplementedError is the cause: no hint may send it after a formula)."""
    from autograder.exercises import EXERCISES, load
    from helpers.autograder_cases import FEEDBACK_WORDS, WRONG
    from helpers.autograder_cases_more import FEEDBACK_WORDS_MORE, WRONG_MORE

    out = {name: dict(table.get(name, {})) for name in EXERCISES}
    words = {**FEEDBACK_WORDS, **FEEDBACK_WORDS_MORE}
    for wrong in (WRONG, WRONG_MORE):
        for name, variants in wrong.items():
            for variant, (source, _) in variants.items():
                if (name, variant) in words and variant not in out[name]:
                    out[name][variant] = (source, words[name, variant])
    for name in EXERCISES:
        for func in dict.fromkeys(c.split("/", 1)[0] for c in load(name).HIDDEN):
            stub = f"\ndef {func}(*args, **kwargs):\n    raise NotImplementedError()\n"
            out[name].setdefault(f"stub_{func}", (stub, "NotImplementedError"))
    return out


MISTAKES = _with_known_wrong_answers(MISTAKES)
