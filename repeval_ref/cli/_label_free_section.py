"""The label-free metrics of the commands: computed on the training features, failures noted.

``repeval report`` computes every one (:func:`label_free_section`); ``leaderboard`` the
cheap ones, and ranks five of them beside the accuracy (:data:`LABEL_FREE_RANKINGS`).
:data:`LABEL_FREE_NAMES` names each metric and its convention in the tables.
"""

from __future__ import annotations

import numpy as np

from ._inputs import _short

__all__ = ["LABEL_FREE_RANKINGS", "LABEL_FREE_NAMES", "label_free_section"]


#: label-free metrics that ``leaderboard`` ranks beside accuracy:
#: key -> (name, sign that makes "better" larger, why)
LABEL_FREE_RANKINGS = {
    "rankme": ("RankMe (effective rank)", +1, "higher: more directions used (Garrido et al.)"),
    "ne_sum": ("NE-sum", +1, "higher: variance spread over more directions"),
    "alpha_req_gap": ("|alpha-ReQ - 1|", -1, "lower: spectrum decay close to 1/i (Agrawal et al.)"),
    "self_cluster": (
        "Self-Cluster",
        -1,
        "lower: closer to uniform on the sphere (Tsitsulin et al.)",
    ),
    "two_nn_id_batched": (
        "TwoNN intrinsic dimension, batched",
        -1,
        "lower: the comparative study of label-free metrics found low intrinsic "
        "dimension the most consistent sign of quality",
    ),
}

#: key -> (display name, convention); the names are the papers' and the book's
LABEL_FREE_NAMES = {
    "rankme": ("RankMe (effective rank)", "not centred (Garrido et al.)"),
    "rankme_normalized": ("RankMe / d", "RankMe divided by the feature dimension d"),
    "alpha_req": ("alpha-ReQ (eigenspectrum decay)", "centred; fit over i in [10, floor(0.9 d)]"),
    "ne_sum": ("NE-sum", "centred; trace / largest eigenvalue"),
    "ne_sum_normalized": ("NE-sum / d", "NE-sum divided by d"),
    "stable_rank": ("stable rank", "not centred"),
    "condition_number": ("condition number", "not centred; non-zero singular values"),
    "participation_ratio": ("participation ratio", "centred"),
    "dims_for_90pct_variance": ("dimensions for 90% of the variance", "centred"),
    "isotropy_ratio": ("isotropy ratio", "centred; smallest / largest eigenvalue"),
    "mean_pairwise_cosine": ("mean pairwise cosine", "not centred"),
    "uniformity": ("uniformity (Wang & Isola)", "t = 2"),
    "alignment": ("alignment (Wang & Isola)", ""),
    "self_cluster": ("Self-Cluster", "rows l2-normalised"),
    "diffusion_spectral_entropy": ("diffusion spectral entropy", "bits"),
    "two_nn_id": ("TwoNN intrinsic dimension", ""),
    "two_nn_id_batched": ("TwoNN intrinsic dimension, batched", ""),
}


def _median_distance(X, rng, m=2000):
    from scipy.spatial.distance import pdist

    if X.shape[0] > m:
        X = X[np.sort(rng.choice(X.shape[0], m, replace=False))]
    dist = pdist(X)
    dist = dist[dist > 0]
    if dist.size == 0:
        raise ValueError("all sampled points coincide; no bandwidth can be chosen")
    return float(np.median(dist))


def label_free_section(
    X,
    *,
    seed,
    pair_samples=5000,
    dse_samples=2000,
    id_batch=1000,
    id_samples=10000,
    progress=None,
    full=True,
):
    """Every label-free metric on the training features; failures become notes.

    The spectral and covariance metrics, Self-Cluster and the mean pairwise cosine come
    from :func:`repeval_ref.label_free_summary` (one SVD and two passes instead of one
    decomposition per metric). ``full=False`` leaves out the costly all-pairs metrics
    (uniformity, diffusion spectral entropy, TwoNN on all rows). The commands refuse
    all-zero rows before this runs, so the metrics on unit-normalised rows are defined.
    """
    from ..labelfree import (
        diffusion_spectral_entropy,
        label_free_summary,
        two_nn_id,
        two_nn_id_batched,
        uniformity,
        unique_row_order,
    )

    rng = np.random.default_rng(seed)
    out = {}
    steps = 5 if full else 2
    task = progress.task("label-free metrics", steps, unit="groups") if progress else None

    def tick():
        if task:
            task.update(1)

    def put(name, value, note=None, **extra):
        out[name] = {
            "value": value,
            "note": LABEL_FREE_NAMES[name][1] if note is None else note,
            **extra,
        }

    def run(name, fn, note=None):
        try:
            value = fn()
        except (ValueError, ArithmeticError) as exc:
            put(name, None, _short(exc))
        else:
            put(name, value, note)

    summ = label_free_summary(X)
    notes = summ["notes"]
    d = X.shape[1]
    for key, src in (
        ("rankme", "rankme"),
        ("rankme_normalized", "rankme_normalized"),
        ("alpha_req", "alpha_req"),
        ("ne_sum", "ne_sum"),
        ("ne_sum_normalized", "ne_sum"),
        ("stable_rank", "stable_rank"),
        ("condition_number", "condition_number"),
        ("participation_ratio", "participation_ratio"),
        ("dims_for_90pct_variance", "explained_variance_dim"),
        ("isotropy_ratio", "isotropy_ratio"),
        ("mean_pairwise_cosine", "mean_pairwise_cosine"),
        ("self_cluster", "self_cluster"),
    ):
        value = summ[src]
        if value is None:
            put(key, None, _short(ValueError(notes.get(src, "undefined"))))
        else:
            put(key, value / d if key == "ne_sum_normalized" else value)
    tick()
    out["alignment"] = {
        "value": None,
        "note": "needs positive pairs (two views per sample); use repeval_ref.alignment",
    }
    if full:
        n_uni = min(X.shape[0], pair_samples)
        sub = X if n_uni == X.shape[0] else X[np.sort(rng.choice(X.shape[0], n_uni, replace=False))]
        run("uniformity", lambda: uniformity(sub), f"t = 2, on {n_uni} rows")
        tick()
        try:
            sigma = _median_distance(X, rng)
        except ValueError as exc:
            put("diffusion_spectral_entropy", None, _short(exc))
        else:
            n_dse = min(X.shape[0], dse_samples)
            run(
                "diffusion_spectral_entropy",
                lambda: diffusion_spectral_entropy(X, sigma, n_sub=dse_samples, rng=rng),
                f"bits; sigma = median pairwise distance = {sigma:.4g}; {n_dse} rows",
            )
        tick()
    distinct = unique_row_order(X)  # X[distinct] is np.unique(X, axis=0), never copied whole
    n_distinct = distinct.shape[0]
    dup = X.shape[0] - n_distinct
    dup_note = f"; {dup} duplicate rows removed" if dup else ""
    if full:
        if n_distinct > id_samples:
            pick = np.sort(rng.choice(n_distinct, id_samples, replace=False))
            run(
                "two_nn_id",
                lambda: two_nn_id(X[distinct[pick]]),
                f"a random {id_samples} of the {n_distinct} distinct rows (--id-samples)"
                + dup_note,
            )
        else:
            run("two_nn_id", lambda: two_nn_id(X[distinct]), "all rows" + dup_note)
        tick()
    try:
        res = two_nn_id_batched(X, batch_size=id_batch, rng=rng, rows=distinct)
    except ValueError as exc:
        put("two_nn_id_batched", None, _short(exc))
    else:
        spread = (
            "std across batches"
            if res.std is not None
            else "a single batch, so no spread: lower --id-batch"
        )
        put(
            "two_nn_id_batched",
            res.mean,
            f"{res.estimates.size} batch(es) of >= {min(id_batch, n_distinct)} rows; "
            + spread
            + dup_note,
            std=res.std,
            n_batches=int(res.estimates.size),
        )
    tick()
    if task:
        task.close()
    return out


# ------------------------------------------------------------------- one summary
