"""Exercise spec: exact leave-one-out of the ridge probe (book/invariances.md; seed 001)."""

NAME = "ridge_loo"
TITLE = "Leave-one-out for free: choosing the ridge penalty"
LEVEL = "research"
ASSIGNMENT = "protocols"
CHAPTER = "invariances"

STATEMENT = r"""
A least-squares probe has a closed form, and so does its leave-one-out error: one
decomposition of the training features gives the error of all $n$ refits for every
penalty on a grid. Write

```python
ridge_loo(train_h, train_y, lams)
```

**The probe.** Targets $t_i \in \{-1, 1\}^K$ hold $+1$ in the column of the true class and
$-1$ elsewhere, with $K$ = the largest label + 1. The probe predicts $b + W^\top h$; it
minimises $\sum_i \lVert t_i - b - W^\top h_i\rVert^2 + \lambda\lVert W\rVert_F^2$, so the
bias $b$ is **not** penalised.

**Leave-one-out.** Let $\mathcal{H}$ be the hat matrix of this fit (fitted training
scores $= \mathcal{H}T$). The residual of training point $i$ when it is left out of the
fit is $e_{(i)} = (t_i - (\mathcal{H}T)_i) / (1 - \mathcal{H}_{ii})$, and

$$\mathrm{PRESS}(\lambda) = \frac{1}{nK}\sum_{i=1}^n \lVert e_{(i)}\rVert^2 .$$

A convenient route: centre the features and the targets with their training means (that is
what an unpenalised bias does), take one thin SVD $H_c = U S V^\top$, and use
$\mathcal{H} = \tfrac1n \mathbf{1}\mathbf{1}^\top + U\,\mathrm{diag}\big(s_k^2/(s_k^2+\lambda)\big)U^\top$
without ever forming an $n\times n$ matrix: only its diagonal (the leverages) and its
product with the targets enter the residuals. The hidden tests use 6000 training points and
measure the memory your function allocates.

**Return** `(best_lam, press)`: `press` a float array of shape `(len(lams),)` and
`best_lam` the first `lam` of smallest PRESS, as a Python float. Do not modify the inputs.
"""

SOLUTION = r'''import numpy as np


def ridge_loo(train_h, train_y, lams):
    """Exact leave-one-out error (PRESS) of the ridge probe with bias, for each lambda.

    Returns (best_lam, press) with press of shape (len(lams),).
    """
    ### BEGIN SOLUTION
    H = np.asarray(train_h, dtype=float)
    y = np.asarray(train_y).astype(int)
    grid = np.asarray(lams, dtype=float)
    n, K = len(H), int(y.max()) + 1
    T = -np.ones((n, K))
    T[np.arange(n), y] = 1.0
    Hc = H - H.mean(axis=0)
    Tc = T - T.mean(axis=0)
    U, s, _ = np.linalg.svd(Hc, full_matrices=False)
    keep = s > s.max() * max(Hc.shape) * np.finfo(float).eps
    U, s = U[:, keep], s[keep]
    UtT = U.T @ Tc
    press = np.empty(len(grid))
    for j, lam in enumerate(grid):
        shrink = s**2 / (s**2 + lam)
        residual = Tc - U @ (shrink[:, None] * UtT)          # T - (hat T)
        leverage = 1.0 / n + (U**2) @ shrink
        loo = residual / (1.0 - leverage)[:, None]
        press[j] = np.sum(loo**2) / (n * K)
    return float(grid[int(np.argmin(press))]), press
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

rng = np.random.default_rng(1)
y = np.array([0, 1, 2] * 10)
h = np.eye(3)[y] @ rng.normal(size=(3, 4)) + 0.3 * rng.normal(size=(30, 4))
lams = [0.01, 1.0, 100.0]

best, press = ridge_loo(h, y, lams)
assert best in lams, "best_lam must be one of the candidates"
assert np.shape(press) == (3,), f"one PRESS value per lambda, got shape {np.shape(press)}"
assert np.all(np.asarray(press) > 0), "PRESS is a mean of squares: positive here"
assert best == lams[int(np.argmin(press))], "best_lam is the lambda of smallest PRESS"

# a brute-force check of one lambda: refit without point 0, predict it
lam = 1.0
def fit_predict(h_fit, t_fit, h_new):
    mu, tm = h_fit.mean(0), t_fit.mean(0)
    W = np.linalg.solve((h_fit - mu).T @ (h_fit - mu) + lam * np.eye(4), (h_fit - mu).T @ (t_fit - tm))
    return tm + (h_new - mu) @ W
T = -np.ones((30, 3)); T[np.arange(30), y] = 1
errs = [T[i] - fit_predict(np.delete(h, i, 0), np.delete(T, i, 0), h[i]) for i in range(30)]
brute = np.sum(np.square(errs)) / (30 * 3)
_, press1 = ridge_loo(h, y, [lam])
assert np.isclose(press1[0], brute), f"PRESS(1.0) = {press1[0]}, 30 explicit refits give {brute}"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "ridge_loo/matches_reference",
    "ridge_loo/bias_unpenalised",
    "ridge_loo/scale_invariance",
    "ridge_loo/properties",
    "ridge_loo/absent_class",
    "ridge_loo/no_hat_matrix",
]
