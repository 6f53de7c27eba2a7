"""Two routines of the BLAS/LAPACK that SciPy ships, which SciPy does not wrap usefully here.

Book: ``book/performance.md``. Used by the band reduction of
:mod:`repeval_ref.labelfree._symeig`.

- :func:`band_to_tridiagonal`: LAPACK's ``dsytrd_sb2st`` (LAPACK 3.7 and later), the
  band-to-tridiagonal stage of LAPACK's two-stage solvers. It chases the bulges in
  cache-sized tiles; ``scipy.linalg.eig_banded`` goes through ``dsbtrd``, a sweep of
  Givens rotations over the whole band that took about twice as long on a
  10,000-row band of half-width 48.
- :func:`gemm_add`: ``C += alpha * op(A) @ op(B)`` written into ``C`` by one
  ``cblas_dgemm`` with ``beta = 1``, for ``C`` a strided view of a larger matrix. NumPy
  has no in-place multiply-accumulate, so ``C -= A @ B.T`` allocates a temporary (fresh
  pages from the kernel at these sizes), writes the product there and reads it back.

Both are found by name in the LP64 OpenBLAS that SciPy loads (``threadpoolctl`` lists
the loaded libraries and their files; SciPy's wheels prefix the symbols with
``scipy_``) and called through :mod:`ctypes`, which releases the GIL during the call,
so worker threads run them in parallel. Where the library or a symbol is missing
(another BLAS, a SciPy built differently) each function says so by returning
``None``, and the caller keeps its pure SciPy/NumPy route; the results are the same
up to rounding (tested both ways).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

__all__ = ["band_to_tridiagonal", "gemm_add", "gemm_subtract"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


@functools.cache
def _symbol(name):
    """The function ``name`` (without prefix or trailing underscore) of SciPy's LP64 LAPACK, or
    None."""
    try:
        import scipy.linalg  # noqa: F401  (loads SciPy's BLAS, so threadpoolctl lists it)
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - both come with the project
        return None
    paths = [
        info["filepath"]
        for info in threadpool_info()
        if info.get("user_api") == "blas" and info.get("filepath")
    ]
    # SciPy's own library first (numpy's is ILP64, whose symbols end in 64_)
    paths.sort(key=lambda p: "scipy.libs" not in p and "scipy/" not in p)
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:  # pragma: no cover - a listed library that cannot be opened
            continue
        for symbol in (f"scipy_{name}", name):
            fortran = not name.startswith("cblas_")
            fn = getattr(lib, symbol + ("_" if fortran else ""), None)
            if fn is not None:
                fn.restype = None
                return fn
    return None


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def band_to_tridiagonal(band):
    """Tridiagonal form of a symmetric band matrix, by LAPACK's ``dsytrd_sb2st``.

    Parameters
    ----------
    band : numpy.ndarray of shape (kd + 1, n)
        The lower band in LAPACK's layout (as for ``scipy.linalg.eig_banded`` with
        ``lower=True``): ``band[i, j]`` holds ``A[j + i, j]``; ``kd >= 1``, ``n > kd``.
        Not modified.

    Returns
    -------
    (d, e) : tuple of numpy.ndarray of shapes (n,) and (n - 1,), or None
        Diagonal and off-diagonal of a tridiagonal matrix orthogonally similar to the
        band matrix (so with the same eigenvalues); None where the routine is not
        available.
    """
    band = np.asarray(band, dtype=np.float64)
    if band.ndim != 2 or band.shape[0] < 2:
        raise ValueError(f"band must have shape (kd + 1, n) with kd >= 1, got {band.shape}")
    kd, n = band.shape[0] - 1, band.shape[1]
    if n <= kd:
        raise ValueError(f"band needs more columns than its half-width, got shape {band.shape}")
    fn = _symbol("dsytrd_sb2st")
    if fn is None:
        return None
    Int = ctypes.c_int
    ab = np.array(band, order="F")  # the routine overwrites its input
    d, e = np.zeros(n), np.zeros(n - 1)

    def call(hous, lhous, work, lwork):
        info = Int(0)
        fn(
            b"N",
            b"N",
            b"L",
            ctypes.byref(Int(n)),
            ctypes.byref(Int(kd)),
            _ptr(ab),
            ctypes.byref(Int(kd + 1)),
            _ptr(d),
            _ptr(e),
            _ptr(hous),
            ctypes.byref(Int(lhous)),
            _ptr(work),
            ctypes.byref(Int(lwork)),
            ctypes.byref(info),
            ctypes.c_size_t(1),
            ctypes.c_size_t(1),
            ctypes.c_size_t(1),
        )  # lengths of the 3 flags
        return info.value

    hous, work = np.zeros(1), np.zeros(1)
    if call(hous, -1, work, -1) != 0:  # pragma: no cover - a query cannot fail here
        return None
    lhous, lwork = int(hous[0]), int(work[0])
    if lhous < 1 or lwork < 1:  # pragma: no cover - an implausible answer to the query
        return None
    info = call(np.zeros(lhous), lhous, np.zeros(lwork), lwork)
    if info != 0:  # pragma: no cover - only for an argument out of range, checked above
        raise RuntimeError(f"dsytrd_sb2st failed with info = {info}")
    return d, e


def gemm_add(C, A, B, alpha=1.0, trans_a=False, trans_b=False):
    """``C += alpha * op(A) @ op(B)`` in place, by one ``cblas_dgemm`` with ``beta = 1``.

    ``op(M)`` is ``M.T`` where ``trans_*`` is true, else ``M``.

    Parameters
    ----------
    C : numpy.ndarray of shape (m, n)
        float64, writeable, rows contiguous (``C.strides[1] == 8``), any row stride: a
        block of a larger C-ordered matrix.
    A : numpy.ndarray of shape (m, k), or (k, m) with ``trans_a``
    B : numpy.ndarray of shape (k, n), or (n, k) with ``trans_b``
        float64 with contiguous rows, like ``C``.
    alpha : float
    trans_a, trans_b : bool

    Returns
    -------
    bool
        True when done; False (``C`` untouched) where ``cblas_dgemm`` is not available
        or an array is not laid out as above, so that the caller does it with NumPy.
    """
    m, n = C.shape
    ma, ka = A.shape[::-1] if trans_a else A.shape
    kb, nb = B.shape[::-1] if trans_b else B.shape
    if ma != m or nb != n or ka != kb:
        raise ValueError(f"shapes do not match: C {C.shape}, op(A) {(ma, ka)}, op(B) {(kb, nb)}")
    if C.size == 0 or ka == 0:
        return True  # nothing to add
    arrays = (C, A, B)
    if not C.flags.writeable or any(
        a.dtype != np.float64
        or a.strides[1] != 8
        or a.strides[0] % 8
        or (a.shape[0] > 1 and a.strides[0] < 8 * a.shape[1])
        for a in arrays
    ):
        return False
    fn = _symbol("cblas_dgemm")
    if fn is None:
        return False
    Int, D = ctypes.c_int, ctypes.c_double
    ld = [max(a.strides[0] // 8, a.shape[1], 1) for a in arrays]
    fn(
        Int(_ROW_MAJOR),
        Int(_TRANS if trans_a else _NO_TRANS),
        Int(_TRANS if trans_b else _NO_TRANS),
        Int(m),
        Int(n),
        Int(ka),
        D(alpha),
        _ptr(A),
        Int(ld[1]),
        _ptr(B),
        Int(ld[2]),
        D(1.0),
        _ptr(C),
        Int(ld[0]),
    )
    return True


def gemm_subtract(C, A, B):
    """``C -= A @ B.T`` in place (:func:`gemm_add` with ``alpha = -1``, ``trans_b``).

    Returns
    -------
    bool
        As :func:`gemm_add`.
    """
    return gemm_add(C, A, B, alpha=-1.0, trans_b=True)
