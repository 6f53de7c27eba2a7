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


def vote(labels, sims, tau, n_classes):
    """The weighted vote of :func:`repeval_ref.knn_classify` on given neighbours.

    ``labels`` and ``sims`` are (m, k) arrays of the neighbours' labels and cosine
    similarities; weights ``exp((s - s_max) / tau)``, argmax ties to the smaller label.
    """
    m, k = labels.shape
    with np.errstate(under="ignore"):
        w = np.exp((sims - sims.max(axis=1, keepdims=True)) / tau)
    rows = np.repeat(np.arange(m), k)
    votes = np.bincount(rows * n_classes + labels.ravel(), weights=w.ravel().astype(np.float64),
                        minlength=m * n_classes).reshape(m, n_classes)
    return np.argmax(votes, axis=1)


def repeval(paths, k, tau, n_classes, out):
    from repeval_ref import knn_classify

    bank, bank_y, query, query_y = _load(paths)

    def work():
        pred = knn_classify(bank, bank_y, query, k, tau, n_classes, dtype=np.float32)
        np.save(out, pred)
        return {"accuracy": _accuracy(pred, query_y)}

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
        D, I = index.search(xq, k + 1)
        t_search = time.perf_counter() - t0
        pred = vote(bank_y[I[:, :k]], D[:, :k], tau, n_classes)
        np.save(out, pred)
        tie = D[:, k - 1] == D[:, k]
        gap = (D[:, k - 1] - D[:, k]).astype(np.float64)
        np.save(out.replace(".npy", "_gap.npy"), gap)
        return {"accuracy": _accuracy(pred, query_y), "search_seconds": t_search,
                "rows_with_kth_tie": int(tie.sum()), "faiss_threads": faiss.omp_get_max_threads()}

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
