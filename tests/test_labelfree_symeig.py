"""Two-stage symmetric eigenvalues (repeval_ref.labelfree._symeig), against LAPACK's one-stage
route."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from scipy.stats import ortho_group

from repeval_ref.labelfree._symeig import eigvalsh_two_stage


def sym(rng, n):
    a = rng.normal(size=(n, n))
    return (a + a.T) / 2


@pytest.mark.parametrize(
    "bandwidth,n",
    [
        pytest.param(bandwidth, n, marks=pytest.mark.slow)
        if (bandwidth, n) == (64, 700)
        else (bandwidth, n)
        for n in [1, 2, 3, 5, 47, 48, 49, 50, 97, 301, 700]
        for bandwidth in [1, 3, 48, 64]
    ],
)
def test_equals_lapack_one_stage(n, bandwidth):
    rng = np.random.default_rng(n * 100 + bandwidth)
    A = sym(rng, n)
    want = scipy.linalg.eigvalsh(A)
    got = eigvalsh_two_stage(A, bandwidth=bandwidth)
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * scale * np.sqrt(n))


def test_known_spectrum_with_multiplicities():
    # Q diag(lam) Q^T: the eigenvalues are known exactly, several repeated, some negative
    rng = np.random.default_rng(1)
    n = 260
    lam = np.sort(np.concatenate([np.full(40, 2.0), np.full(30, -1.0), rng.uniform(-3, 3, n - 70)]))
    Q = ortho_group.rvs(n, random_state=2)
    A = (Q * lam) @ Q.T
    np.testing.assert_allclose(eigvalsh_two_stage(A, bandwidth=16), lam, atol=1e-12)


def test_default_keeps_the_input_and_overwrite_works_in_place():
    rng = np.random.default_rng(3)
    A = sym(rng, 150)
    want = scipy.linalg.eigvalsh(A)
    before = A.copy()
    np.testing.assert_allclose(eigvalsh_two_stage(A, bandwidth=8), want, atol=1e-12)
    np.testing.assert_array_equal(A, before)  # the default works on a copy
    work = np.ascontiguousarray(A)
    np.testing.assert_allclose(eigvalsh_two_stage(work, overwrite_a=True), want, atol=1e-12)
    assert not np.array_equal(work, before)


def test_kernel_matrix_of_the_diffusion_entropy():
    # the PSD normalised Gaussian kernel of DSE: eigenvalues in [0, 1], the largest 1
    rng = np.random.default_rng(4)
    X = rng.normal(size=(500, 6))
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = np.exp(-sq / 8.0)
    d = 1 / np.sqrt(K.sum(1))
    G = K * d[:, None] * d[None, :]
    got = eigvalsh_two_stage(G)
    np.testing.assert_allclose(got, scipy.linalg.eigvalsh(G), atol=1e-13)
    assert got[-1] == pytest.approx(1.0, abs=1e-12) and got[0] > -1e-12


def test_bad_input():
    with pytest.raises(ValueError, match="square"):
        eigvalsh_two_stage(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="bandwidth"):
        eigvalsh_two_stage(np.eye(3), bandwidth=0)
    with pytest.raises(ValueError, match="overwrite_a"):
        eigvalsh_two_stage(np.eye(3, dtype=np.float32), overwrite_a=True)
