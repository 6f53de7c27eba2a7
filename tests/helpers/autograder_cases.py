"""Typical wrong solutions of the exercises, shared by the autograder tests.

``WRONG[exercise][variant] = (source, failing_checks)``: ``source`` defines the student's
function with one classic mistake; ``failing_checks`` are exactly the hidden checks it
must lose (all their points), every other check must pass in full.
"""

KNN_NO_NORMALISATION = """
import numpy as np

def knn_classify(bank, bank_y, queries, k, tau, n_classes):
    sims = np.asarray(queries, float) @ np.asarray(bank, float).T   # raw dot products
    kk = min(k, sims.shape[1])
    nbr = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
    s = np.take_along_axis(sims, nbr, axis=1)
    w = np.exp((s - s.max(axis=1, keepdims=True)) / tau)
    votes = np.zeros((len(sims), n_classes))
    for i in range(len(sims)):
        np.add.at(votes[i], np.asarray(bank_y)[nbr[i]], w[i])
    return np.argmax(votes, axis=1)
"""

KNN_OVERFLOW = """
import numpy as np

def knn_classify(bank, bank_y, queries, k, tau, n_classes):
    a = np.asarray(bank, float); a = a / np.linalg.norm(a, axis=1, keepdims=True)
    q = np.asarray(queries, float); q = q / np.linalg.norm(q, axis=1, keepdims=True)
    sims = q @ a.T
    kk = min(k, sims.shape[1])
    nbr = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
    w = np.exp(np.take_along_axis(sims, nbr, axis=1) / tau)   # overflows for small tau
    votes = np.zeros((len(sims), n_classes))
    for i in range(len(sims)):
        np.add.at(votes[i], np.asarray(bank_y)[nbr[i]], w[i])
    return np.argmax(votes, axis=1)
"""

KNN_TIES_TO_LARGER = """
import numpy as np

def knn_classify(bank, bank_y, queries, k, tau, n_classes):
    a = np.asarray(bank, float); a = a / np.linalg.norm(a, axis=1, keepdims=True)
    q = np.asarray(queries, float); q = q / np.linalg.norm(q, axis=1, keepdims=True)
    sims = q @ a.T
    kk = min(k, sims.shape[1])
    nbr = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
    s = np.take_along_axis(sims, nbr, axis=1)
    w = np.exp((s - s.max(axis=1, keepdims=True)) / tau)
    votes = np.zeros((len(sims), n_classes))
    for i in range(len(sims)):
        np.add.at(votes[i], np.asarray(bank_y)[nbr[i]], w[i])
    # last maximum instead of the first: ties go to the larger label
    return n_classes - 1 - np.argmax(votes[:, ::-1], axis=1)
"""

PROBE_TUNED_ON_TEST = """
from sklearn.linear_model import LogisticRegression
import numpy as np

def linear_probe_done_right(h_train, y_train, h_test, y_test, Cs, seed=0):
    X, Xt = np.asarray(h_train, float), np.asarray(h_test, float)
    m, s = X.mean(0), X.std(0)
    accs = [LogisticRegression(C=C, max_iter=2000).fit((X - m) / s, y_train)
            .score((Xt - m) / s, y_test) for C in Cs]
    best = int(np.argmax(accs))
    return float(Cs[best]), float(accs[best])
"""

PROBE_TEST_STATISTICS = """
from sklearn.linear_model import LogisticRegression
import numpy as np

def linear_probe_done_right(h_train, y_train, h_test, y_test, Cs, seed=0):
    X, y = np.asarray(h_train, float), np.asarray(y_train)
    n = len(X)
    perm = np.random.default_rng(seed).permutation(n)
    va, fi = perm[: n // 5], perm[n // 5:]
    m, s = X[fi].mean(0), X[fi].std(0)
    accs = [LogisticRegression(C=C, max_iter=2000).fit((X[fi] - m) / s, y[fi])
            .score((X[va] - m) / s, y[va]) for C in Cs]
    C = Cs[int(np.argmax(accs))]
    Xt = np.asarray(h_test, float)
    clf = LogisticRegression(C=C, max_iter=2000).fit((X - X.mean(0)) / X.std(0), y)
    return float(C), float(clf.score((Xt - Xt.mean(0)) / Xt.std(0), y_test))  # test stats
"""

FROZEN_LEFT_IN_EVAL = """
import torch

def frozen_features(encoder, batches):
    encoder.eval()                      # never restored
    with torch.no_grad():
        outs = [encoder(b[0] if isinstance(b, (tuple, list)) else b) for b in batches]
    return torch.cat(outs).cpu()
"""

FROZEN_NO_EVAL = """
import torch

def frozen_features(encoder, batches):
    with torch.no_grad():               # no gradients, but BatchNorm still in training mode
        outs = [encoder(b[0] if isinstance(b, (tuple, list)) else b) for b in batches]
    return torch.cat(outs).cpu()
"""

FOLD_MULTIPLY = """
import numpy as np

def fold_batchnorm(W, b, mu, s):
    s = np.asarray(s, float)
    if np.any(s <= 0):
        raise ValueError("s must be positive")
    W2 = np.asarray(W, float) * s[:, None]
    return W2, np.asarray(b, float) - W2.T @ np.asarray(mu, float)
"""

FOLD_ACCEPTS_BAD_SCALE = """
import numpy as np

def fold_batchnorm(W, b, mu, s):
    W2 = np.asarray(W, float) / np.asarray(s, float)[:, None]     # no check that s > 0
    return W2, np.asarray(b, float) - W2.T @ np.asarray(mu, float)
"""

RANK_BALANCED_FLOOR = """
import numpy as np

def rank_bound(H, y, n_classes):
    H = np.asarray(H, float); y = np.asarray(y)
    n = len(H)
    Y = np.eye(n_classes)[y]
    Z = np.hstack([H, np.ones((n, 1))])
    coef = np.linalg.lstsq(Z, Y, rcond=None)[0]
    r = int(np.linalg.matrix_rank(H))
    return float(((Y - Z @ coef) ** 2).sum()), int(max(n_classes - r - 1, 0) * n // n_classes)
"""

RIDGE_PENALISED_BIAS = """
import numpy as np

def ridge_loo(train_h, train_y, lams):
    H = np.asarray(train_h, float); y = np.asarray(train_y)
    n, K = len(H), int(y.max()) + 1
    T = -np.ones((n, K)); T[np.arange(n), y] = 1
    Z = np.hstack([np.ones((n, 1)), H])              # the bias column is penalised too
    press = []
    for lam in lams:
        hat = Z @ np.linalg.solve(Z.T @ Z + lam * np.eye(Z.shape[1]), Z.T)
        e = (T - hat @ T) / (1 - np.diag(hat))[:, None]
        press.append((e ** 2).sum() / (n * K))
    press = np.array(press)
    return float(np.asarray(lams, float)[int(np.argmin(press))]), press
"""

WRONG = {
    "knn_classify": {
        "no_normalisation": (KNN_NO_NORMALISATION, {"knn_classify/matches_reference"}),
        "overflow": (KNN_OVERFLOW, {"knn_classify/small_tau"}),
        "ties_to_larger": (KNN_TIES_TO_LARGER, {"knn_classify/ties"}),
    },
    "linear_probe_done_right": {
        "tuned_on_test": (
            PROBE_TUNED_ON_TEST,
            {
                "linear_probe_done_right/recipe",
                "linear_probe_done_right/selection_ignores_test_set",
            },
        ),
        "test_statistics": (
            PROBE_TEST_STATISTICS,
            {
                "linear_probe_done_right/recipe",
                "linear_probe_done_right/test_uses_training_statistics",
            },
        ),
    },
    "frozen_features": {
        "left_in_eval": (FROZEN_LEFT_IN_EVAL, {"frozen_features/restores_flags"}),
        "running_stats_move": (FROZEN_NO_EVAL, {"frozen_features/eval_mode"}),
    },
    "fold_batchnorm": {
        "multiplies": (
            FOLD_MULTIPLY,
            {"fold_batchnorm/matches_reference", "fold_batchnorm/logits_identity"},
        ),
        "accepts_bad_scale": (FOLD_ACCEPTS_BAD_SCALE, {"fold_batchnorm/rejects_bad_scale"}),
    },
    "rank_bound": {
        "balanced_floor": (
            RANK_BALANCED_FLOOR,
            {"rank_bound/matches_reference", "rank_bound/unbalanced_floor"},
        ),
    },
    "ridge_loo": {
        "penalised_bias": (
            RIDGE_PENALISED_BIAS,
            {
                "ridge_loo/matches_reference",
                "ridge_loo/bias_unpenalised",
                "ridge_loo/scale_invariance",
            },
        ),
    },
}

#: property checks a wrong solution loses as well, because the part of the result they
#: read is wrong on their inputs: a property (inputs untouched, an invariance, a return
#: type, a rejected input) is credited together with a part computed right (or as a
#: mistake in another part computes it), so that a constant earns nothing while a
#: mistake in one part does not cost its neighbours' points
GATED = {
    ("knn_classify", "no_normalisation"): {"knn_classify/properties"},
    ("frozen_features", "running_stats_move"): {"frozen_features/restores_flags"},
    ("fold_batchnorm", "multiplies"): {
        "fold_batchnorm/properties",
        "fold_batchnorm/rejects_bad_scale",
    },
    ("rank_bound", "balanced_floor"): {"rank_bound/absent_class"},
    # (the wrong answer forms an explicit n x n hat matrix: a real loss, not a gate)
    ("ridge_loo", "penalised_bias"): {"ridge_loo/no_hat_matrix"},
}
for (_ex, _var), _extra in GATED.items():
    WRONG[_ex][_var] = (WRONG[_ex][_var][0], WRONG[_ex][_var][1] | _extra)

#: words the feedback of each wrong solution must contain (the problem named)
FEEDBACK_WORDS = {
    ("knn_classify", "no_normalisation"): "normalise both banks",
    ("knn_classify", "overflow"): "votes overflow at tau = 0.001",
    ("knn_classify", "ties_to_larger"): "smaller label",
    ("linear_probe_done_right", "tuned_on_test"): "best TEST accuracy",
    ("linear_probe_done_right", "test_statistics"): "its own mean and std",
    ("frozen_features", "left_in_eval"): "Leaving the encoder in evaluation mode",
    ("frozen_features", "running_stats_move"): "Call encoder.eval()",
    ("fold_batchnorm", "multiplies"): "must divide by s_j",
    ("fold_batchnorm", "accepts_bad_scale"): "raise ValueError naming s",
    ("rank_bound", "balanced_floor"): "SMALLEST counts",
    ("ridge_loo", "penalised_bias"): "unpenalised bias",
}
