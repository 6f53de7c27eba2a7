"""The two LAPACK/BLAS routines called through ctypes (repeval_ref.labelfree._lapack)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from repeval_ref.labelfree import _lapack


def _band(A, kd):
    n = A.shape[0]
    band = np.zeros((kd + 1, n))
    for i in range(kd + 1):
        band[i, : n - i] = np.diagonal(A, -i)
    return band


def _random_band(n, kd, seed):
    A = np.random.default_rng(seed).standard_normal((n, n))
    A = A + A.T
    i, j = np.indices(A.shape)
    A[np.abs(i - j) > kd] = 0.0
    return A


def test_scipys_library_has_both_routines():
    # SciPy's wheels ship an OpenBLAS with LAPACK >= 3.7; if this fails, the fallbacks run
    assert _lapack._symbol("dsytrd_sb2st") is not None
    assert _lapack._symbol("cblas_dgemm") is not None


@pytest.mark.parametrize("n,kd", [(2, 1), (3, 2), (10, 1), (50, 7), (200, 48), (97, 96), (600, 48)])
def test_tridiagonal_form_keeps_the_eigenvalues(n, kd):
    A = _random_band(n, kd, seed=n + kd)
    band = _band(A, kd)
    before = band.copy()
    d, e = _lapack.band_to_tridiagonal(band)
    np.testing.assert_array_equal(band, before)  # input untouched
    assert d.shape == (n,) and e.shape == (n - 1,)
    got = scipy.linalg.eigvalsh_tridiagonal(d, e)
    want = np.linalg.eigvalsh(A)
    np.testing.assert_allclose(got, want, atol=1e-12 * np.abs(want).max())
    # an orthogonal similarity also keeps the Frobenius norm
    assert np.sum(d**2) + 2 * np.sum(e**2) == pytest.approx(np.sum(A**2), rel=1e-12)


def test_tridiagonal_form_of_a_diagonal_and_a_graded_matrix():
    d0 = np.linspace(-3, 5, 40)
    d, e = _lapack.band_to_tridiagonal(_band(np.diag(d0), 4))
    np.testing.assert_allclose(np.sort(d), d0, atol=1e-15)
    np.testing.assert_allclose(e, 0.0, atol=1e-15)
    A = (
        _random_band(120, 9, seed=1)
        * np.logspace(0, -40, 120)[:, None]
        * np.logspace(0, -40, 120)[None, :]
    )
    d, e = _lapack.band_to_tridiagonal(_band(A, 9))
    np.testing.assert_allclose(
        scipy.linalg.eigvalsh_tridiagonal(d, e), np.linalg.eigvalsh(A), atol=1e-13 * np.abs(A).max()
    )


def test_band_input_errors():
    with pytest.raises(ValueError, match="band"):
        _lapack.band_to_tridiagonal(np.ones(5))
    with pytest.raises(ValueError, match="band"):
        _lapack.band_to_tridiagonal(np.ones((1, 5)))
    with pytest.raises(ValueError, match="band"):
        _lapack.band_to_tridiagonal(np.ones((5, 4)))


def test_gemm_subtract_on_strided_blocks():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((70, 90))
    A, B = rng.standard_normal((12, 5)), rng.standard_normal((33, 5))
    want = big.copy()
    want[7:19, 40:73] -= A @ B.T
    assert _lapack.gemm_subtract(big[7:19, 40:73], A, B)
    np.testing.assert_allclose(big, want, rtol=0, atol=1e-13)  # the rest untouched too
    # views of larger matrices as the factors, as in the band reduction
    U = rng.standard_normal((40, 9))
    C = rng.standard_normal((20, 30))
    want = C - U[5:25, :6] @ U[:30, 3:9].T
    assert _lapack.gemm_subtract(C, U[5:25, :6], U[:30, 3:9])
    np.testing.assert_allclose(C, want, atol=1e-13)


def test_gemm_subtract_declines_what_it_cannot_do():
    rng = np.random.default_rng(1)
    C = rng.standard_normal((6, 8))
    before = C.copy()
    A, B = rng.standard_normal((6, 3)), rng.standard_normal((8, 3))
    assert not _lapack.gemm_subtract(C.T.copy().T, A, B)  # columns not contiguous
    assert not _lapack.gemm_subtract(C, A.astype(np.float32), B)
    assert not _lapack.gemm_subtract(C, np.broadcast_to(A[:1], (6, 3)), B)  # rows overlap
    np.testing.assert_array_equal(C, before)
    with pytest.raises(ValueError, match="shapes"):
        _lapack.gemm_subtract(C, A, B[:5])
    empty = np.zeros((0, 8))
    assert _lapack.gemm_subtract(empty, np.zeros((0, 3)), B)


def test_gemm_subtract_leaves_read_only_arrays_to_numpy():
    C = np.ones((3, 4))
    C.flags.writeable = False
    assert not _lapack.gemm_subtract(C, np.ones((3, 2)), np.ones((4, 2)))
    np.testing.assert_array_equal(C, 1.0)
