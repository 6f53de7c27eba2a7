"""Row 1: exact weighted k-NN, ``repeval_ref.knn_classify`` against faiss and scikit-learn.

All three read the same float32 bank and queries from ``.npy`` files and return one
predicted label per query. Timings are end to end, from the raw float32 arrays to the
predictions: unit-normalising, building the faiss index, searching and voting.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def make_data(tmp, n_bank, n_query, d, n_classes, noise=1.5, seed=0):
    """Clustered float32 features (class centre + ``noise`` x Gaussian), written to ``tmp``."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_classes, d), dtype=np.float32)
    paths = {}
    for name, n in (("bank", n_bank), ("query", n_query)):
        y = rng.integers(0, n_classes, size=n)
        X = np.empty((n, d), dtype=np.float32)
        for lo in range(0, n, 20000):
            hi = min(n, lo + 20000)
            X[lo:hi] = rng.standard_normal((hi - lo, d), dtype=np.float32)
            X[lo:hi] *= noise
            X[lo:hi] += centres[y[lo:hi]]
        np.save(Path(tmp) / f"{name}_x.npy", X)
        np.save(Path(tmp) / f"{name}_y.npy", y)
        paths[name] = (str(Path(tmp) / f"{name}_x.npy"), str(Path(tmp) / f"{name}_y.npy"))
        del X
    return paths


def _load(paths):
    bank = np.load(paths["bank"][0])
    bank_y = np.load(paths["bank"][1])
    query = np.load(paths["query"][0])
    query_y = np.load(paths["query"][1])
    return bank, bank_y, query, query_y


def _accuracy(pred, y):
    return float(np.mean(pred == y))


def blas_kernels():
    """The BLAS libraries loaded in this process: API, version, kernel and threads."""
    from threadpoolctl import threadpool_info

    return [
        f"{i.get('internal_api')} {i.get('version')} {i.get('architecture', '?')} "
        f"({i.get('num_threads')} threads)"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]


def peak_gflops():
    """Theoretical single-precision peak of this machine's cores, and how it is derived.

    ``cores x FMA units x fp32 lanes x 2 flops x clock``: 16 lanes with AVX-512, 8 with
    AVX2/FMA; 2 FMA units per core (true of the x86 server cores of recent years: Intel
    since Skylake-SP, AMD since Zen 2 for 256-bit and Zen 4/5 for 512-bit operations);
    the clock is the nominal one of ``/proc/cpuinfo`` (cores may turbo above it).
    Also the peak with 8 lanes, the most an AVX2 kernel (OpenBLAS "Haswell") can reach.
    """
    import os

    flags, mhz = set(), None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("cpu MHz") and mhz is None:
                    mhz = float(line.split(":", 1)[1])
    except OSError:
        return None
    if mhz is None:
        return None
    lanes = 16 if "avx512f" in flags else 8 if {"avx2", "fma"} <= flags else 4
    cores = os.cpu_count() or 1
    peak = cores * 2 * lanes * 2 * mhz / 1e3
    return {
        "gflops": peak,
        "gflops_avx2": cores * 2 * 8 * 2 * mhz / 1e3,
        "lanes": lanes,
        "cores": cores,
        "fma_units_per_core": 2,
        "nominal_mhz": mhz,
        "derivation": f"{cores} cores x 2 FMA units x {lanes} fp32 lanes x 2 flops x "
        f"{mhz / 1e3:.3f} GHz (nominal) = {peak:.0f} GFLOP/s",
    }


def products(paths, k, tau, n_classes, out, mode="blas"):
    """The bare similarity products of the benchmark: unit queries times the raw bank.

    The floor of any exact search with this BLAS. ``mode="blas"``: blocks of 2,048
    queries x 16,384 bank rows, the BLAS's own threads. ``mode="tiles"``: the tile grid
    of ``knn_classify`` (one-thread products on as many worker threads as the BLAS has
    threads), without the scaling, the selection or the vote.
    """
    bank, bank_y, query, query_y = _load(paths)

    def work():
        q = query / np.linalg.norm(query, axis=1, keepdims=True)
        nq, nb = q.shape[0], bank.shape[0]
        if mode == "blas":
            rows, cols = 2048, 16384
            buf = np.empty(rows * cols, dtype=np.float32)
            for s in range(0, nq, rows):
                qb = q[s : s + rows]
                for c in range(0, nb, cols):
                    w = min(cols, nb - c)
                    np.matmul(
                        qb, bank[c : c + w].T, out=buf[: qb.shape[0] * w].reshape(qb.shape[0], w)
                    )
            return {"blas": blas_kernels()}
        from concurrent.futures import ThreadPoolExecutor

        from threadpoolctl import threadpool_limits

        from repeval_ref import knn as K
        from repeval_ref._parallel import blas_thread_count

        rows = K.auto_block_size(nb, 4)
        cols = max(1, K._TILE_BYTES // (4 * rows))
        workers = blas_thread_count()

        def block(s):
            qb = q[s : s + rows]
            buf = np.empty(qb.shape[0] * cols, dtype=np.float32)
            for c in range(0, nb, cols):
                w = min(cols, nb - c)
                np.matmul(qb, bank[c : c + w].T, out=buf[: qb.shape[0] * w].reshape(qb.shape[0], w))

        kernels = blas_kernels()
        with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
            list(pool.map(block, range(0, nq, rows)))
        return {"blas": kernels, "workers": workers}

    return work


def vote(labels, sims, tau, n_classes):
    """The weighted vote of :func:`repeval_ref.knn_classify` on given neighbours.

    ``labels`` and ``sims`` are (m, k) arrays of the neighbours' labels and cosine
    similarities; weights ``exp((s - s_max) / tau)``, argmax ties to the smaller label.
    """
    m, k = labels.shape
    with np.errstate(under="ignore"):
        w = np.exp((sims - sims.max(axis=1, keepdims=True)) / tau)
    rows = np.repeat(np.arange(m), k)
    votes = np.bincount(
        rows * n_classes + labels.ravel(),
        weights=w.ravel().astype(np.float64),
        minlength=m * n_classes,
    ).reshape(m, n_classes)
    return np.argmax(votes, axis=1)


def repeval(paths, k, tau, n_classes, out):
    from repeval_ref import knn_classify

    bank, bank_y, query, query_y = _load(paths)

    def work():
        pred = knn_classify(bank, bank_y, query, k, tau, n_classes, dtype=np.float32)
        np.save(out, pred)
        return {"accuracy": _accuracy(pred, query_y), "blas": blas_kernels()}

    return work


def faiss_flat(paths, k, tau, n_classes, out):
    import faiss

    bank, bank_y, query, query_y = _load(paths)

    def work():
        import time

        xb = np.array(bank, dtype=np.float32, copy=True)
        faiss.normalize_L2(xb)
        index = faiss.IndexFlatIP(xb.shape[1])
        index.add(xb)
        del xb
        xq = np.array(query, dtype=np.float32, copy=True)
        faiss.normalize_L2(xq)
        t0 = time.perf_counter()
        # one more neighbour than needed, to see ties at the k-th place
        D, nbr = index.search(xq, k + 1)
        t_search = time.perf_counter() - t0
        pred = vote(bank_y[nbr[:, :k]], D[:, :k], tau, n_classes)
        np.save(out, pred)
        tie = D[:, k - 1] == D[:, k]
        gap = (D[:, k - 1] - D[:, k]).astype(np.float64)
        np.save(out.replace(".npy", "_gap.npy"), gap)
        return {
            "accuracy": _accuracy(pred, query_y),
            "search_seconds": t_search,
            "rows_with_kth_tie": int(tie.sum()),
            "faiss_threads": faiss.omp_get_max_threads(),
            "blas": blas_kernels(),
        }

    return work


def sklearn_brute(paths, k, tau, n_classes, out):
    from sklearn.neighbors import KNeighborsClassifier

    bank, bank_y, query, query_y = _load(paths)

    def work():
        clf = KNeighborsClassifier(n_neighbors=k, metric="cosine", algorithm="brute")
        pred = clf.fit(bank, bank_y).predict(query)
        np.save(out, pred)
        return {"accuracy": _accuracy(pred, query_y)}

    return work
