"""Typical wrong solutions of the exercises from attentive probes to CKA.

Same format as ``autograder_cases.WRONG``: ``WRONG_MORE[exercise][variant] = (source,
failing_checks)``. ``source`` defines one function of the exercise's notebook with one
classic mistake (the notebook's other functions stay right); ``failing_checks`` are
exactly the hidden checks it must lose in full, every other check must pass in full.
``FEEDBACK_WORDS_MORE`` gives words the feedback of each case must contain.
``ISSUE_CASES`` names the cases the end-to-end test submits.
"""

from autograder.build import solution_source
from autograder.exercises import load


def _derived(exercise, old, new):
    """The exercise's own solution with one line replaced (fails loudly if it moved)."""
    source = solution_source(load(exercise))
    if source.count(old) != 1:
        raise AssertionError(f"{exercise}: the solution no longer contains {old!r}")
    return source.replace(old, new)


ATTENTIVE_KEEPS_PREFIX = """
import numpy as np
# mistake: the class token and registers are kept

def attentive_probe(H, q, Wk, Wv, Wo, W_cls,   # n_prefix ignored
                    n_heads, n_prefix=0):
    B, T, d = H.shape
    dk = d // n_heads
    K = (H @ Wk).reshape(B, T, n_heads, dk)
    V = (H @ Wv).reshape(B, T, n_heads, dk)
    s = np.einsum("bthk,hk->bht", K, q.reshape(n_heads, dk)) / np.sqrt(dk)
    A = np.exp(s - s.max(-1, keepdims=True))
    A = A / A.sum(-1, keepdims=True)
    o = np.einsum("bht,bthk->bhk", A, V).reshape(B, d)
    return o @ Wo @ W_cls, A
"""


ATTENTIVE_NAIVE_SOFTMAX = """
import numpy as np
# mistake: exponentials of raw scores

def attentive_probe(H, q, Wk, Wv, Wo, W_cls,   # softmax without the max shift
                    n_heads, n_prefix=0):
    H = H[:, n_prefix:]
    B, T, d = H.shape
    dk = d // n_heads
    K = (H @ Wk).reshape(B, T, n_heads, dk)
    V = (H @ Wv).reshape(B, T, n_heads, dk)
    s = np.einsum("bthk,hk->bht", K, q.reshape(n_heads, dk)) / np.sqrt(dk)
    A = np.exp(s)
    A = A / A.sum(-1, keepdims=True)
    o = np.einsum("bht,bthk->bhk", A, V).reshape(B, d)
    return o @ Wo @ W_cls, A
"""


ATTENTIVE_INTERLEAVED_HEADS = """
import numpy as np
# mistake: head j takes every n_heads-th column

def attentive_probe(H, q, Wk, Wv, Wo, W_cls,   # heads interleaved
                    n_heads, n_prefix=0):
    H = H[:, n_prefix:]
    B, T, d = H.shape
    dk = d // n_heads
    K = (H @ Wk).reshape(B, T, dk, n_heads).transpose(0, 1, 3, 2)
    V = (H @ Wv).reshape(B, T, dk, n_heads).transpose(0, 1, 3, 2)
    s = np.einsum("bthk,hk->bht", K, q.reshape(dk, n_heads).T) / np.sqrt(dk)
    A = np.exp(s - s.max(-1, keepdims=True))
    A = A / A.sum(-1, keepdims=True)
    o = np.einsum("bht,bthk->bkh", A, V).reshape(B, d)
    return o @ Wo @ W_cls, A
"""


TRANSFER_SEQUENTIAL = """
import numpy as np

def transfer(X, y, B0, v0,     # sequential updates
             lr, steps):
    n = len(X)
    def run(v, B, move):
        v, B = v.copy(), B.copy()
        for _ in range(steps):
            r = X @ B.T @ v - y
            v = v - lr * 2 / n * B @ (X.T @ r)
            if move:
                r = X @ B.T @ v - y          # gradient for B at the NEW head
                B = B - lr * 2 / n * np.outer(v, X.T @ r)
        return v, B
    lp = run(v0, B0, False)
    return {"lp": lp, "ft": run(v0, B0, True), "lpft": run(lp[0], B0, True)}
"""


TRANSFER_LPFT_FROM_V0 = """
import numpy as np

def transfer(X, y, B0, v0,     # LP-FT restarts from v0
             lr, steps):
    n = len(X)
    def run(v, B, move):
        v, B = v.copy(), B.copy()
        for _ in range(steps):
            g = X.T @ (X @ B.T @ v - y)
            v, B = v - lr * 2 / n * B @ g, (B - lr * 2 / n * np.outer(v, g)) if move else B
        return v, B
    lp = run(v0, B0, False)
    return {"lp": lp, "ft": run(v0, B0, True), "lpft": run(v0, B0, True)}
"""


LOWSHOT_DDOF0 = """
import numpy as np
# mistake: population standard deviation

def low_shot_eval(train_h, train_y,   # population std
                  test_h, test_y, n_per_class, n_draws, rng):
    tr = train_h / np.linalg.norm(train_h, axis=1, keepdims=True)
    te = test_h / np.linalg.norm(test_h, axis=1, keepdims=True)
    classes = np.unique(train_y)
    accs = []
    for _ in range(n_draws):
        means = np.array([tr[rng.choice(np.flatnonzero(train_y == label), size=n_per_class,
                                        replace=False)].mean(0) for label in classes])
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        accs.append(np.mean(classes[np.argmax(te @ means.T, axis=1)] == test_y))
    return float(np.mean(accs)), float(np.std(accs))
"""


LOWSHOT_EXTRA_RANDOM_CALL = """
import numpy as np
# mistake: one more random call than allowed

def low_shot_eval(train_h, train_y,   # shuffles the test set first
                  test_h, test_y, n_per_class, n_draws, rng):
    order = rng.permutation(len(test_y))
    test_h, test_y = test_h[order], test_y[order]
    tr = train_h / np.linalg.norm(train_h, axis=1, keepdims=True)
    te = test_h / np.linalg.norm(test_h, axis=1, keepdims=True)
    classes = np.unique(train_y)
    accs = []
    for _ in range(n_draws):
        means = np.array([tr[rng.choice(np.flatnonzero(train_y == label), size=n_per_class,
                                        replace=False)].mean(0) for label in classes])
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        accs.append(np.mean(classes[np.argmax(te @ means.T, axis=1)] == test_y))
    return float(np.mean(accs)), float(np.std(accs, ddof=1))
"""


LOWSHOT_ARGMAX_AS_LABEL = """
import numpy as np
# mistake: the position of the best mean is used as the label

def low_shot_eval(train_h, train_y,   # argmax used as the label
                  test_h, test_y, n_per_class, n_draws, rng):
    tr = train_h / np.linalg.norm(train_h, axis=1, keepdims=True)
    te = test_h / np.linalg.norm(test_h, axis=1, keepdims=True)
    classes = np.unique(train_y)
    accs = []
    for _ in range(n_draws):
        means = np.array([tr[rng.choice(np.flatnonzero(train_y == label), size=n_per_class,
                                        replace=False)].mean(0) for label in classes])
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        accs.append(np.mean(np.argmax(te @ means.T, axis=1) == test_y))
    return float(np.mean(accs)), float(np.std(accs, ddof=1))
"""


RANKME_ALWAYS_CENTRES = """
import numpy as np

def rankme(Z, center=False, eps=1e-7):     # always centres
    Z = np.asarray(Z, float)
    s = np.linalg.svd(Z - Z.mean(0), compute_uv=False)
    p = s / s.sum() + eps
    p = p[p > 0]
    return float(np.exp(-np.sum(p * np.log(p))))
"""


RANKME_ZERO_LOG_ZERO = """
import numpy as np

def rankme(Z, center=False, eps=1e-7):     # 0 log 0 not handled
    Z = np.asarray(Z, float)
    if center:
        Z = Z - Z.mean(0)
    s = np.linalg.svd(Z, compute_uv=False)
    p = s / s.sum() + eps
    return float(np.exp(-np.sum(p * np.log(p))))
"""


TWONN_DISTANCE_MATRIX = """
import numpy as np
from scipy.spatial.distance import cdist

def two_nn_id(X):                          # full distance matrix
    D = cdist(X, X)
    np.fill_diagonal(D, np.inf)
    D.sort(axis=1)
    if np.any(D[:, 0] == 0):
        raise ValueError("duplicate points")
    return float(len(X) / np.sum(np.log(D[:, 1] / D[:, 0])))
"""


TWONN_NO_DUPLICATE_CHECK = """
import numpy as np
from scipy.spatial import cKDTree

def two_nn_id(X):                          # no duplicate check
    d, _ = cKDTree(X).query(X, k=3)
    return float(len(X) / np.sum(np.log(d[:, 2] / d[:, 1])))
"""


CKA_NO_CENTRING = """
import numpy as np

def linear_cka(X, Y):          # no centring
    return float(np.linalg.norm(X.T @ Y) ** 2
                 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y)))
"""


CKA_FUDGE = """
import numpy as np

def linear_cka(X, Y):          # + 1e-10 in the denominator
    X = X - X.mean(0); Y = Y - Y.mean(0)
    return float(np.linalg.norm(X.T @ Y) ** 2
                 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y) + 1e-10))
"""


CKA_GRAM_MATRICES = """
import numpy as np

def linear_cka(X, Y):          # n x n Gram matrices
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    K, L = Xc @ Xc.T, Yc @ Yc.T
    return float(np.sum(K * L) / np.sqrt(np.sum(K * K) * np.sum(L * L)))
"""


WILSON_WALD = """
import numpy as np
from scipy import stats

def wilson_interval(k, n, z=1.959963984540054):     # WALD
    p = k / n
    half = z * np.sqrt(p * (1 - p) / n)
    return float(p - half), float(p + half)
"""


MCNEMAR_ZERO_DISCORDANT = """
import numpy as np
from scipy import stats

def mcnemar_exact(a_correct, b_correct):             # binomtest needs n >= 1
    a = np.asarray(a_correct).astype(bool); b = np.asarray(b_correct).astype(bool)
    n01, n10 = int(np.sum(~a & b)), int(np.sum(a & ~b))
    return float(stats.binomtest(n01, n01 + n10, 0.5).pvalue)
"""


BOOTSTRAP_LOOP = """
import numpy as np
from scipy import stats

def paired_bootstrap_ci(a_correct, b_correct, n_boot, rng, level=0.95):   # loops
    a = np.asarray(a_correct).astype(int); b = np.asarray(b_correct).astype(int)
    n = len(a)
    gains = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        gains.append(b[idx].mean() - a[idx].mean())
    lo, hi = np.percentile(gains, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(b.mean() - a.mean()), float(lo), float(hi)
"""


RETRIEVAL_RECALL_AS_HIT = _derived(
    "retrieval_metrics",
    'out[f"recall@{k}"] = float(np.mean(found[:, top] / n_rel))',
    'out[f"recall@{k}"] = float(np.mean(found[:, top] > 0))     # any relevant in top k',
)

RETRIEVAL_TIES_REVERSED = _derived(
    "retrieval_metrics",
    'order = np.argsort(-(q @ c.T), axis=1, kind="stable")',
    'order = np.argsort(q @ c.T, axis=1, kind="stable")[:, ::-1]',
)

RETRIEVAL_KEEPS_QUERIES_WITHOUT_RELEVANT = _derived(
    "retrieval_metrics",
    "rel, n_rel = rel[n_rel > 0], n_rel[n_rel > 0]",
    "n_rel = np.maximum(n_rel, 1)                                # counts them as misses",
)

WRONG_MORE = {
    "attentive_probe": {
        "keeps_prefix": (ATTENTIVE_KEEPS_PREFIX, {"attentive_probe/prefix_dropped"}),
        "naive_softmax": (ATTENTIVE_NAIVE_SOFTMAX, {"attentive_probe/stable_softmax"}),
        # the head split is matches_reference's part: the prefix and the stable softmax
        # are right with it and keep their points
        "interleaved_heads": (ATTENTIVE_INTERLEAVED_HEADS, {"attentive_probe/matches_reference"}),
    },
    "transfer": {
        "sequential": (
            TRANSFER_SEQUENTIAL,
            {"transfer/matches_reference", "transfer/simultaneous_updates"},
        ),
        "lpft_from_v0": (
            TRANSFER_LPFT_FROM_V0,
            {
                "transfer/matches_reference",
                "transfer/simultaneous_updates",
                "transfer/kumar_ordering",
            },
        ),
    },
    "low_shot_eval": {
        "ddof0": (LOWSHOT_DDOF0, {"low_shot_eval/matches_reference", "low_shot_eval/ddof"}),
        "extra_random_call": (
            LOWSHOT_EXTRA_RANDOM_CALL,
            {"low_shot_eval/matches_reference", "low_shot_eval/random_calls"},
        ),
        "argmax_as_label": (LOWSHOT_ARGMAX_AS_LABEL, {"low_shot_eval/labels_not_contiguous"}),
    },
    "wilson_interval": {
        "wald": (WILSON_WALD, {"wilson_interval/matches_reference", "wilson_interval/extremes"}),
        "mcnemar_zero_discordant": (MCNEMAR_ZERO_DISCORDANT, {"mcnemar_exact/no_discordant_pairs"}),
        "bootstrap_loop": (
            BOOTSTRAP_LOOP,
            {
                "paired_bootstrap_ci/matches_reference",
                "paired_bootstrap_ci/single_multinomial_call",
            },
        ),
    },
    "rankme": {
        "always_centres": (RANKME_ALWAYS_CENTRES, {"rankme/matches_reference"}),
        "zero_log_zero": (RANKME_ZERO_LOG_ZERO, {"rankme/known_spectra"}),
    },
    "two_nn_id": {
        "distance_matrix": (TWONN_DISTANCE_MATRIX, {"two_nn_id/no_n_by_n_matrix"}),
        "no_duplicate_check": (TWONN_NO_DUPLICATE_CHECK, {"two_nn_id/duplicates"}),
    },
    "retrieval_metrics": {
        "recall_as_hit": (
            RETRIEVAL_RECALL_AS_HIT,
            {"retrieval_metrics/matches_reference", "retrieval_metrics/recall_is_fraction"},
        ),
        "ties_reversed": (RETRIEVAL_TIES_REVERSED, {"retrieval_metrics/ties_by_index"}),
        "keeps_queries_without_relevant": (
            RETRIEVAL_KEEPS_QUERIES_WITHOUT_RELEVANT,
            {"retrieval_metrics/queries_without_relevant"},
        ),
    },
    "linear_cka": {
        "no_centring": (
            CKA_NO_CENTRING,
            {"linear_cka/matches_reference", "linear_cka/translation_invariance"},
        ),
        "fudge": (CKA_FUDGE, {"linear_cka/scale_invariance"}),
        "gram_matrices": (CKA_GRAM_MATRICES, {"linear_cka/no_gram_matrix"}),
    },
}

#: property checks a wrong solution loses as well because the part of the result they
#: read is wrong on their inputs (see ``autograder_cases.GATED``)
GATED_MORE = {
    ("wilson_interval", "bootstrap_loop"): {"paired_bootstrap_ci/empty_cells"},
}
for (_ex, _var), _extra in GATED_MORE.items():
    WRONG_MORE[_ex][_var] = (WRONG_MORE[_ex][_var][0], WRONG_MORE[_ex][_var][1] | _extra)

FEEDBACK_WORDS_MORE = {
    ("attentive_probe", "keeps_prefix"): "you kept the prefix tokens",
    ("attentive_probe", "naive_softmax"): "overflows",
    ("attentive_probe", "interleaved_heads"): "contiguous block of columns",
    ("transfer", "sequential"): "Your updates are sequential",
    ("transfer", "lpft_from_v0"): "Your LP-FT equals FT",
    ("low_shot_eval", "ddof0"): "ddof=1",
    ("low_shot_eval", "extra_random_call"): "you made other random calls",
    ("low_shot_eval", "argmax_as_label"): "classes[argmax]",
    ("wilson_interval", "wald"): "Wald",
    ("wilson_interval", "mcnemar_zero_discordant"): "return p = 1.0",
    ("wilson_interval", "bootstrap_loop"): "one multinomial draw",
    ("rankme", "always_centres"): "You centred the columns although center=False",
    ("rankme", "zero_log_zero"): "0 * log 0",
    ("two_nn_id", "distance_matrix"): "builds all pairwise distances",
    ("two_nn_id", "no_duplicate_check"): "raise ValueError",
    ("retrieval_metrics", "recall_as_hit"): "Your recall@k equals hit@k",
    ("retrieval_metrics", "ties_reversed"): "smaller corpus index must come first",
    ("retrieval_metrics", "keeps_queries_without_relevant"): "Leave them out of every average",
    ("linear_cka", "no_centring"): "You did not centre the columns",
    ("linear_cka", "fudge"): "Do not add one",
    ("linear_cka", "gram_matrices"): "n x n Gram matrices",
}

#: the wrong solutions the end-to-end test submits (exercise, variant)
ISSUE_CASES = [
    ("attentive_probe", "keeps_prefix"),
    ("transfer", "sequential"),
    ("low_shot_eval", "ddof0"),
    ("low_shot_eval", "extra_random_call"),
    ("retrieval_metrics", "recall_as_hit"),
    ("linear_cka", "no_centring"),
]


def full_cell_source(exercise, variant):
    """Source for the whole solution cell of a wrong submission.

    A notebook may define several functions (``wilson_interval`` holds three); the wrong
    source defines one of them. Appending it to the right solution redefines only that
    function, which is what a student with this one mistake would submit.
    """
    source, _ = WRONG_MORE[exercise][variant]
    return solution_source(load(exercise)) + "\n\n" + source
