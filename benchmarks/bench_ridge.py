"""Row 2: ridge probe with exact leave-one-out (PRESS) over a grid of penalties.

``repeval_ref.ridge_loo`` (one thin SVD for the whole grid) against scikit-learn's
``RidgeCV`` (efficient leave-one-out, ``store_cv_results=True``) and against a plain
loop that, for every penalty, fits ``sklearn.linear_model.Ridge`` and computes the
diagonal of the hat matrix from a Cholesky factor of ``H_c^T H_c + lam I``.
All three fit an unpenalised intercept to one-vs-rest targets in {-1, 1}.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def make_data(tmp, n, d, n_classes, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_classes, d)) * 0.5
    y = rng.integers(0, n_classes, size=n)
    H = centres[y] + rng.standard_normal((n, d))
    H[:, : d // 2] *= np.linspace(3.0, 0.1, d // 2)  # an uneven spectrum
    paths = {"h": str(Path(tmp) / "ridge_h.npy"), "y": str(Path(tmp) / "ridge_y.npy")}
    np.save(paths["h"], H)
    np.save(paths["y"], y)
    return paths


def lam_grid(n_lams):
    """Penalties spread evenly in log scale (13 values: 1e-2 .. 1e4)."""
    return np.logspace(-2, 4, n_lams).tolist()


def _targets(y):
    K = int(y.max()) + 1
    T = -np.ones((y.shape[0], K))
    T[np.arange(y.shape[0]), y] = 1.0
    return T


def repeval(paths, lams):
    from repeval_ref import ridge_loo

    H, y = np.load(paths["h"]), np.load(paths["y"])

    def work():
        _, press = ridge_loo(H, y, lams)
        return {"press": press.tolist()}

    return work


def sklearn_ridgecv(paths, lams):
    from sklearn.linear_model import RidgeCV

    H, y = np.load(paths["h"]), np.load(paths["y"])

    def work():
        T = _targets(y)
        model = RidgeCV(alphas=lams, fit_intercept=True, store_cv_results=True).fit(H, T)
        # cv_results_: squared leave-one-out errors, shape (n, K, n_alphas)
        press = model.cv_results_.mean(axis=(0, 1))
        return {"press": press.tolist()}

    return work


def per_lambda_loop(paths, lams):
    import scipy.linalg
    from sklearn.linear_model import Ridge

    H, y = np.load(paths["h"]), np.load(paths["y"])

    def work():
        T = _targets(y)
        n, d = H.shape
        Hc = H - H.mean(axis=0)
        press = []
        for lam in lams:
            model = Ridge(alpha=lam, fit_intercept=True, solver="cholesky").fit(H, T)
            fitted = model.predict(H)
            factor = scipy.linalg.cho_factor(Hc.T @ Hc + lam * np.eye(d))
            Z = scipy.linalg.cho_solve(factor, Hc.T)  # (d, n)
            leverage = 1.0 / n + np.einsum("ij,ji->i", Hc, Z)
            E = (T - fitted) / (1.0 - leverage)[:, None]
            press.append(float(np.mean(E * E)))
        return {"press": press}

    return work
