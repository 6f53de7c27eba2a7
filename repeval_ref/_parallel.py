"""Thread counts of the package's own worker pools.

The tiled k-NN search (:mod:`repeval_ref.knn`), the band reduction of the two-stage
eigenvalue solver (:mod:`repeval_ref.labelfree._symeig`) and the kernel of the
diffusion spectral entropy (:mod:`repeval_ref.labelfree.relational`) share their work
among worker threads, each calling a one-thread BLAS (``threadpoolctl``): as many
workers as the BLAS would have had threads, so that the products never wait for one
another and no two thread pools compete for the cores. Book: ``book/performance.md``.
"""

from __future__ import annotations

import os

__all__ = ["blas_thread_count", "pool_size"]


def blas_thread_count():
    """Threads of the loaded BLAS libraries, as ``threadpoolctl`` reports them now.

    Inside a ``threadpool_limits(limits=1, user_api="blas")`` block this is 1.

    Returns
    -------
    int
        The largest thread count among the loaded BLAS libraries; 1 where none is
        loaded or ``threadpoolctl`` cannot tell.
    """
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return 1
    counts = [
        info.get("num_threads") or 1 for info in threadpool_info() if info.get("user_api") == "blas"
    ]
    return max(counts) if counts else 1


def pool_size():
    """Worker threads for a tiled computation: the BLAS's threads, at most the cores.

    Call it before holding the BLAS at one thread (inside such a block it returns 1).

    Returns
    -------
    int
        ``max(1, min(blas_thread_count(), os.cpu_count()))``.
    """
    return max(1, min(blas_thread_count(), os.cpu_count() or 1))
