"""Hidden checks give nothing for nothing.

* For each of the 18 graded functions, answers that compute nothing score 0 on every
  hidden check, for several grading seeds: ``return None``, returning the first argument
  unchanged, and returning zeros shaped like the reference's output (computed on copies,
  so the caller's arrays and generator are untouched, or on the caller's own arguments,
  so that the reference's side effects, generator draws and ``ValueError``\\ s happen).
  The same holds for outputs of the reference's shape filled with NaN, with constants
  (3.0 for a number, ones for an array) and with values made from the inputs' sizes
  alone (``1 / len(x)``, ``len(x)``), on every seed: no tolerance test lets a NaN
  through, and every check's inputs make a constant or a size a wrong answer.
* A solution that mutates its input on any option path of the contract loses the
  mutation check's points (``rankme`` with ``Z -= Z.mean(0)`` under ``center=True``).
* Every edge case an exercise's statement names is built into the check's inputs on
  every grading seed: an answer that is wrong only at that edge case loses the check's
  points for every seed tried.
"""

import copy

import numpy as np
import pytest

import repeval_ref
from autograder.build import solution_source
from autograder.checks import check_points, format_findings, registry, run_check
from autograder.exercises import all_specs, load

#: the 18 functions the notebooks ask for (some notebooks ask for several)
GRADED = sorted({c.split("/", 1)[0] for s in all_specs() for c in s.HIDDEN})
SEEDS = (3, 1234, 987654)
KINDS = ("none", "first_argument", "zeros", "zeros_after_reference")
#: outputs shaped like the reference's, filled with values that compute nothing
FILLED = ("nan", "constant", "from_shapes")


def test_eighteen_graded_functions():
    assert len(GRADED) == 18, GRADED


def _zeros_like(x):
    import torch

    if isinstance(x, torch.Tensor):
        return torch.zeros_like(x)
    if isinstance(x, dict):
        return {k: _zeros_like(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_zeros_like(v) for v in x)
    if isinstance(x, np.ndarray):
        return np.zeros_like(x)
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return 0
    if isinstance(x, float):
        return 0.0
    return x


def _filled_like(x, kind, sizes, counter):
    """``x`` (the reference's output) with every number replaced: NaN (``"nan"``), a
    constant (``"constant"``: 3.0, 1, ones) or a value made from the sizes of the
    arguments alone (``"from_shapes"``: ``k / n`` and ``n`` for the k-th number, with
    ``n`` the length of one argument)."""
    import torch

    def number(is_int):
        counter[0] += 1
        n = sizes[counter[0] % len(sizes)]
        if kind == "nan":
            return float("nan")
        if kind == "constant":
            return 1 if is_int else 3.0
        return n if is_int else counter[0] / n

    if isinstance(x, torch.Tensor):
        if kind == "nan":
            return torch.full_like(x, float("nan"))
        if kind == "constant":
            return torch.ones_like(x)
        return torch.full_like(x, 1.0 / sizes[0])
    if isinstance(x, dict):
        return {k: _filled_like(v, kind, sizes, counter) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_filled_like(v, kind, sizes, counter) for v in x)
    if isinstance(x, np.ndarray):
        if np.issubdtype(x.dtype, np.integer) or x.dtype == bool:
            if kind == "nan":
                return np.full(x.shape, np.nan)
            if kind == "constant":
                return np.ones_like(x)
            return (np.arange(x.size) % 2).reshape(x.shape).astype(x.dtype)
        if kind == "from_shapes":
            return np.full(x.shape, 1.0 / sizes[0])
        return np.full(x.shape, np.nan if kind == "nan" else 1.0)
    if isinstance(x, bool):
        return x
    if isinstance(x, (int, np.integer)):
        return number(True)
    if isinstance(x, (float, np.floating)):
        return number(False)
    return x


def _sizes(args):
    sizes = [len(a) for a in args if hasattr(a, "__len__") and len(a)]
    sizes += [int(a) for a in args if isinstance(a, int) and not isinstance(a, bool) and a > 0]
    return sizes or [1]


def _degenerate(kind, name):
    ref = getattr(repeval_ref, name)
    state = {}

    def answer(*args, **kwargs):
        if kind == "none":
            return None
        if kind == "first_argument":
            return args[0]
        if kind == "zeros_after_reference":
            return _zeros_like(ref(*args, **kwargs))
        if kind in FILLED:
            sizes = _sizes(args)
            try:  # the reference on copies gives the shape; the caller sees no side effect
                out = ref(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                state["last"] = _filled_like(out, kind, sizes, [0])
            except Exception:
                pass
            return state.get("last")
        try:  # "zeros": the reference runs on copies, the caller sees no side effect
            state["last"] = _zeros_like(ref(*copy.deepcopy(args), **copy.deepcopy(kwargs)))
        except Exception:
            pass  # inputs the reference rejects: the last zeros
        return state.get("last")

    answer.__name__ = name
    return answer


@pytest.mark.parametrize(
    "name,kind",
    [
        pytest.param(name, kind, marks=pytest.mark.slow)
        if name == "linear_probe_done_right" and kind != "first_argument"
        else (name, kind)
        for kind in KINDS
        for name in GRADED
    ],
)
def test_answers_that_compute_nothing_score_zero(name, kind):
    checks = [c for c in registry() if c.split("/", 1)[0] == name]
    assert checks
    for seed in SEEDS[:2]:
        for check in checks:
            findings = run_check(check, _degenerate(kind, name), seed)
            assert sum(f.points for f in findings) == 0, format_findings(check, findings, seed)


@pytest.mark.parametrize(
    "name,kind",
    [
        pytest.param(name, kind, marks=pytest.mark.slow)
        if name == "linear_probe_done_right"
        else (name, kind)
        for kind in FILLED
        for name in GRADED
    ],
)
def test_filled_answers_score_zero_on_every_seed(name, kind):
    checks = [c for c in registry() if c.split("/", 1)[0] == name]
    for seed in SEEDS:
        for check in checks:
            findings = run_check(check, _degenerate(kind, name), seed)
            assert sum(f.points for f in findings) == 0, format_findings(check, findings, seed)


# ------------------------------------------------------------------ every option path
def _namespace(exercise):
    ns = {}
    exec(compile(solution_source(load(exercise)), "<solution>", "exec"), ns)
    return ns


def _mutates_on(fn, when):
    """The right function, which scribbles on its first array argument when ``when``
    holds for the keyword arguments of the call (one option path of the contract)."""

    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        if when(kwargs):
            a = args[0]
            a -= a.mean(axis=0)
        return out

    wrapper.__name__ = fn.__name__
    return wrapper


@pytest.mark.parametrize(
    "when,label",
    [
        (lambda kw: kw.get("center", False), "center=True"),
        (lambda kw: "eps" in kw, "eps given"),
        (lambda kw: True, "every call"),
    ],
)
def test_rankme_mutation_on_any_option_path_loses_the_mutation_check(when, label):
    fn = _mutates_on(_namespace("rankme")["rankme"], when)
    for seed in SEEDS:
        findings = run_check("rankme/properties", fn, seed)
        assert sum(f.points for f in findings) == 0, (
            label,
            format_findings("rankme/properties", findings, seed),
        )
        assert "modified Z in place" in findings[0].message


def test_rankme_centring_in_place_is_named_with_its_option():
    def rankme(Z, center=False, eps=1e-7):
        if center:
            Z -= Z.mean(0)  # the caller's array changes
        sigma = np.linalg.svd(Z, compute_uv=False)
        p = sigma / sigma.sum() + eps
        p = p[p > 0]
        return float(np.exp(-np.sum(p * np.log(p))))

    f = run_check("rankme/properties", rankme, 5)
    assert f[0].points == 0 and "center=True" in f[0].message
    # the value itself is right on every path: only the mutation check is lost
    for check in load("rankme").HIDDEN:
        if check != "rankme/properties":
            assert sum(x.points for x in run_check(check, rankme, 5)) == check_points(check)


def test_squared_singular_values_are_not_told_to_centre():
    """center_option isolates the centring with the student's own function and credits
    it: the squared singular values are matches_reference's mistake."""

    def rankme(Z, center=False, eps=1e-7):
        Z = np.asarray(Z, float)
        if center:
            Z = Z - Z.mean(0)
        sigma = np.linalg.svd(Z, compute_uv=False) ** 2  # the mistake
        p = sigma / sigma.sum() + eps
        return float(np.exp(-np.sum(p * np.log(p))))

    for seed in SEEDS:
        f = run_check("rankme/center_option", rankme, seed)
        # the centring is right: its point is kept, the slip is charged by the value
        assert f[0].points == check_points("rankme/center_option")
        assert "centring itself is right" in f[0].message
        assert "should subtract the column means" not in f[0].message
        main = run_check("rankme/matches_reference", rankme, seed)
        assert "squared singular values" in main[0].message


# ------------------------------------------------------------------ edge cases, every seed
EDGE_SEEDS = tuple(range(8))

NDCG_IDEAL_OVER_K = """
import numpy as np

def retrieval_metrics(query_h, query_y, corpus_h, corpus_y, ks=(1, 5, 10)):
    q = np.asarray(query_h, float); c = np.asarray(corpus_h, float)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    order = np.argsort(-(q @ c.T), axis=1, kind="stable")
    rel = np.asarray(corpus_y)[order] == np.asarray(query_y)[:, None]
    R = rel.sum(1)
    rel, R = rel[R > 0], R[R > 0]
    if len(rel) == 0:
        raise ValueError("no query has a relevant item")
    n = rel.shape[1]
    disc = 1.0 / np.log2(np.arange(2, n + 2))
    found = np.cumsum(rel, 1); dcg = np.cumsum(rel * disc, 1); ideal = np.cumsum(disc)
    out = {}
    for k in ks:
        t = min(k, n) - 1
        out[f"recall@{k}"] = float(np.mean(found[:, t] / R))
        out[f"hit@{k}"] = float(np.mean(found[:, t] > 0))
        out[f"ndcg@{k}"] = float(np.mean(dcg[:, t] / ideal[t]))   # ideal over k, not min(k, R)
    out["mrr"] = float(np.mean(1.0 / (np.argmax(rel, 1) + 1)))
    out["map"] = float(np.mean((found / np.arange(1, n + 1) * rel).sum(1) / R))
    return out
"""

WILSON_CLIPPED_ONLY = """
import numpy as np

def wilson_interval(k, n, z=1.959963984540054):
    p = k / n
    s = 1.0 + z * z / n
    c = (p + z * z / (2 * n)) / s
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / s
    return float(max(0.0, c - h)), float(min(1.0, c + h))     # clipping only
"""

KNN_ARGPARTITION = """
import numpy as np

def knn_classify(bank, bank_y, queries, k, tau, n_classes):
    a = np.asarray(bank, float); a = a / np.linalg.norm(a, axis=1, keepdims=True)
    q = np.asarray(queries, float); q = q / np.linalg.norm(q, axis=1, keepdims=True)
    sims = q @ a.T
    kk = min(k, a.shape[0])
    if kk < a.shape[0]:
        nbr = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]   # arbitrary among ties
    else:
        nbr = np.broadcast_to(np.arange(a.shape[0]), (len(q), kk))
    s = np.take_along_axis(sims, nbr, axis=1)
    w = np.exp((s - s.max(axis=1, keepdims=True)) / tau)
    votes = np.zeros((len(q), n_classes))
    np.add.at(votes, (np.repeat(np.arange(len(q)), kk), np.asarray(bank_y)[nbr].ravel()),
              w.ravel())
    return np.argmax(votes, axis=1)
"""

KNN_K_NOT_CAPPED = KNN_ARGPARTITION.replace("kk = min(k, a.shape[0])", "kk = k").replace(
    "np.argpartition(-sims, kk - 1, axis=1)[:, :kk]   # arbitrary among ties",
    "np.argsort(-sims, axis=1, kind='stable')[:, :kk]",
)

MCNEMAR_ONE_SIDED = """
import numpy as np
from scipy import stats

def mcnemar_exact(a_correct, b_correct):
    a = np.asarray(a_correct).astype(bool); b = np.asarray(b_correct).astype(bool)
    n01 = int(np.sum(b & ~a)); n10 = int(np.sum(a & ~b))
    if n01 + n10 == 0:
        return 1.0
    return float(min(1.0, stats.binom.cdf(min(n01, n10), n01 + n10, 0.5)))   # no factor 2
"""

RANK_FLOOR_WRAPS = """
import numpy as np

def rank_bound(H, y, n_classes):
    H = np.asarray(H, float); y = np.asarray(y)
    Y = np.eye(n_classes)[y]
    Z = np.hstack([H, np.ones((len(H), 1))])
    res = float(((Y - Z @ np.linalg.lstsq(Z, Y, rcond=None)[0]) ** 2).sum())
    r = int(np.linalg.matrix_rank(H))
    counts = np.sort(np.bincount(y, minlength=n_classes))
    return res, int(counts[: n_classes - r - 1].sum())        # negative count wraps around
"""

TWONN_NO_DUPLICATE_CHECK = """
import numpy as np
from scipy.spatial import cKDTree

def two_nn_id(X):
    X = np.asarray(X, float)
    d, _ = cKDTree(X).query(X, k=3)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(len(X) / np.sum(np.log(d[:, 2] / d[:, 1])))
"""

RANKME_NAN_AT_ZERO = """
import numpy as np

def rankme(Z, center=False, eps=1e-7):
    Z = np.asarray(Z, float)
    if center:
        Z = Z - Z.mean(0)
    s = np.linalg.svd(Z, compute_uv=False)
    p = s / s.sum() + eps
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.exp(-np.sum(p * np.log(p))))            # 0 log 0 = nan
"""

FOLD_NO_CHECK = """
import numpy as np

def fold_batchnorm(W, b, mu, s):
    W2 = np.asarray(W, float) / np.asarray(s, float)[:, None]
    return W2, np.asarray(b, float) - W2.T @ np.asarray(mu, float)
"""

from helpers.autograder_cases import KNN_TIES_TO_LARGER  # noqa: E402
from helpers.autograder_cases_more import (  # noqa: E402
    LOWSHOT_ARGMAX_AS_LABEL,
    MCNEMAR_ZERO_DISCORDANT,
    RETRIEVAL_KEEPS_QUERIES_WITHOUT_RELEVANT,
    RETRIEVAL_TIES_REVERSED,
)

RETRIEVAL_K_NOT_CAPPED = solution_source(load("retrieval_metrics")).replace(
    "top = min(k, n_c) - 1", "top = k - 1"
)

#: (notebook, answer source, check that must lose points on every seed)
EDGE_CASES = {
    "retrieval with R = 0 queries kept": (
        "retrieval_metrics",
        RETRIEVAL_KEEPS_QUERIES_WITHOUT_RELEVANT,
        "retrieval_metrics/queries_without_relevant",
    ),
    "retrieval ties by larger index": (
        "retrieval_metrics",
        RETRIEVAL_TIES_REVERSED,
        "retrieval_metrics/ties_by_index",
    ),
    "retrieval k beyond the corpus": (
        "retrieval_metrics",
        RETRIEVAL_K_NOT_CAPPED,
        "retrieval_metrics/properties",
    ),
    "k-NN class ties to the larger label": (
        "knn_classify",
        KNN_TIES_TO_LARGER,
        "knn_classify/ties",
    ),
    "low-shot labels not 0 .. K - 1": (
        "low_shot_eval",
        LOWSHOT_ARGMAX_AS_LABEL,
        "low_shot_eval/labels_not_contiguous",
    ),
    "McNemar without discordant pairs": (
        "wilson_interval",
        MCNEMAR_ZERO_DISCORDANT,
        "mcnemar_exact/no_discordant_pairs",
    ),
    "nDCG ideal over k (R < k)": (
        "retrieval_metrics",
        NDCG_IDEAL_OVER_K,
        "retrieval_metrics/fewer_relevant_than_k",
    ),
    "Wilson clipped, not exact at k = 0, n": (
        "wilson_interval",
        WILSON_CLIPPED_ONLY,
        "wilson_interval/extremes",
    ),
    "k-NN argpartition at tied k-th place": (
        "knn_classify",
        KNN_ARGPARTITION,
        "knn_classify/ties_at_kth",
    ),
    "k-NN k beyond the bank": ("knn_classify", KNN_K_NOT_CAPPED, "knn_classify/k_larger_than_bank"),
    "McNemar without the factor 2": (
        "wilson_interval",
        MCNEMAR_ONE_SIDED,
        "mcnemar_exact/matches_reference",
    ),
    "rank floor wraps at r + 1 >= K": (
        "rank_bound",
        RANK_FLOOR_WRAPS,
        "rank_bound/full_rank_floor_zero",
    ),
    "TwoNN with duplicates": ("two_nn_id", TWONN_NO_DUPLICATE_CHECK, "two_nn_id/duplicates"),
    "RankMe 0 log 0 at eps = 0": ("rankme", RANKME_NAN_AT_ZERO, "rankme/known_spectra"),
    "fold accepts s <= 0": ("fold_batchnorm", FOLD_NO_CHECK, "fold_batchnorm/rejects_bad_scale"),
}


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_edge_case_wrong_answer_loses_on_every_seed(case):
    exercise, source, check = EDGE_CASES[case]
    ns = _namespace(exercise)
    exec(compile(source, "<edge>", "exec"), ns)
    fn = ns[check.split("/", 1)[0]]
    for seed in EDGE_SEEDS:
        findings = run_check(check, fn, seed)
        assert sum(f.points for f in findings) < check_points(check), (
            case,
            format_findings(check, findings, seed),
        )


def test_edge_case_answers_are_otherwise_right_on_random_data():
    """The nDCG answer agrees with the reference wherever no query has R < k, so only a
    constructed input can catch it."""
    ns = {}
    exec(NDCG_IDEAL_OVER_K, ns)
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 6))
    cy = rng.integers(0, 3, size=90)
    cy[:3] = np.arange(3)
    ch = centres[cy] + rng.normal(size=(90, 6))
    qy = rng.integers(0, 3, size=20)
    qh = centres[qy] + rng.normal(size=(20, 6))
    got = ns["retrieval_metrics"](qh, qy, ch, cy, ks=(1, 5, 10))
    want = repeval_ref.retrieval_metrics(qh, qy, ch, cy, ks=(1, 5, 10))
    assert all(abs(got[k] - want[k]) < 1e-12 for k in want)


def test_one_sided_mcnemar_is_told_about_the_factor_two():
    ns = _namespace("wilson_interval")
    exec(MCNEMAR_ONE_SIDED, ns)
    for seed in SEEDS:
        main = run_check("mcnemar_exact/matches_reference", ns["mcnemar_exact"], seed)
        edge = run_check("mcnemar_exact/no_discordant_pairs", ns["mcnemar_exact"], seed)
        assert "multiply the tail by 2" in main[0].message
        assert "Multiply the tail by 2" in edge[0].message
        assert "capped" not in edge[0].message or "one-sided" in edge[0].message


def test_wilson_clipped_answer_is_told_to_return_the_exact_end():
    ns = _namespace("wilson_interval")
    exec(WILSON_CLIPPED_ONLY, ns)
    for seed in SEEDS:
        f = run_check("wilson_interval/extremes", ns["wilson_interval"], seed)
        assert sum(x.points for x in f) == 0
        assert all("clipping to [0, 1] does not remove" in x.message for x in f)
    # the statement promises what the check demands
    assert "clipping to $[0, 1]$ does not remove" in load("wilson_interval").STATEMENT


def test_knn_statement_and_solution_keep_the_smaller_index():
    spec = load("knn_classify")
    assert "smaller index" in spec.STATEMENT and "argpartition` picks arbitrarily" in spec.STATEMENT
    assert "argpartition" not in spec.SOLUTION
    ns = {}
    exec(KNN_ARGPARTITION, ns)
    # duplicated bank rows: the honest argpartition answer differs from the reference
    rng = np.random.default_rng(1)
    bank = rng.normal(size=(300, 8))
    bank = np.vstack([bank, bank, bank])
    labels = rng.integers(0, 10, size=len(bank))
    queries = rng.normal(size=(200, 8))
    want = repeval_ref.knn_classify(bank, labels, queries, 20, 0.07, 10)
    mine = _namespace("knn_classify")["knn_classify"](bank, labels, queries, 20, 0.07, 10)
    assert np.array_equal(mine, want)
    assert (ns["knn_classify"](bank, labels, queries, 20, 0.07, 10) != want).any()


def _mutating_when(fn, key, value):
    """The right function, which scribbles on its first array argument only when the
    keyword (or the positional option) ``key`` has ``value``."""
    import inspect as _inspect

    params = list(_inspect.signature(fn).parameters)

    def wrapper(*args, **kwargs):
        bound = dict(zip(params, args), **kwargs)
        out = fn(*args, **kwargs)
        if key in bound and bound[key] == value:
            a = next(x for x in args if isinstance(x, np.ndarray) and x.size)
            a.flat[0] = a.flat[0] + 1 if a.dtype != bool else not a.flat[0]
        return out

    wrapper.__name__ = fn.__name__
    wrapper.__signature__ = _inspect.signature(fn)
    return wrapper


@pytest.mark.parametrize(
    "notebook,function,key,value",
    [
        ("attentive_probe", "attentive_probe", "n_prefix", 2),
        ("wilson_interval", "paired_bootstrap_ci", "level", 0.8),
        ("linear_probe_done_right", "linear_probe_done_right", "seed", 3),
    ],
)
def test_mutation_on_a_non_default_option_loses_the_properties_check(
    notebook, function, key, value
):
    fn = _mutating_when(_namespace(notebook)[function], key, value)
    findings = run_check(f"{function}/properties", fn, SEEDS[0])
    assert sum(f.points for f in findings) == 0, format_findings(
        f"{function}/properties", findings, SEEDS[0]
    )
    assert "in place" in findings[0].message and f"{key} = {value}" in findings[0].message
