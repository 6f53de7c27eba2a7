"""A mistake costs the points of its own part, and nothing earns points for nothing.

Each answer below is a real submission's function with one mistake (or one that computes
nothing), run through the registered hidden checks (:func:`autograder.checks.run_check`)
for several grading seeds. For an answer wrong in one part, the checks of that part fail
and the checks of the other parts are credited in full; the expected split is stated
per check, so a check that starts to charge a neighbour's mistake fails here. The
tolerance test of the checks (:func:`autograder.checks._helpers.close`) is compared with
a brute-force reading of its rule.
"""

import math

import numpy as np
import pytest

from autograder.build import solution_source
from autograder.checks import check_points, format_findings, run_check
from autograder.checks._helpers import close, differs
from autograder.exercises import load

SEEDS = (3, 1234, 987654)


def _solution(exercise, *edits, name=None):
    """The notebook's solution with ``edits`` [(old, new), ...] applied (each must occur),
    as the function ``name`` (default: the exercise's)."""
    source = solution_source(load(exercise))
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    ns = {}
    exec(compile(source, f"<{exercise}>", "exec"), ns)
    return ns[name or exercise]


def _scores(fn, function, seed):
    """{check: points} over the hidden checks of ``function`` for one seed."""
    exercise = {"mcnemar_exact": "wilson_interval", "paired_bootstrap_ci": "wilson_interval"}
    spec = load(exercise.get(function, function))
    out = {}
    for check in spec.HIDDEN:
        if check.split("/", 1)[0] == function:
            findings = run_check(check, fn, seed)
            out[check.split("/", 1)[1]] = (sum(f.points for f in findings), findings)
    return out


def _assert_split(fn, function, lost, seeds=SEEDS):
    """The checks named in ``lost`` score 0 and every other check of ``function`` its
    full points, on every seed."""
    for seed in seeds:
        scores = _scores(fn, function, seed)
        assert set(lost) <= set(scores), (lost, sorted(scores))
        for check, (points, findings) in scores.items():
            full = check_points(f"{function}/{check}")
            want = 0 if check in lost else full
            assert points == want, format_findings(f"{function}/{check}", findings, seed)


def _assert_nothing(fn, function, seeds=SEEDS):
    for seed in seeds:
        for check, (points, findings) in _scores(fn, function, seed).items():
            assert points == 0, format_findings(f"{function}/{check}", findings, seed)


# ------------------------------------------------------------ one mistake, one part
ONE_PART = {
    # ddof=0: the spread's checks only; supports, labels and inputs are right
    "low-shot std with ddof=0": (
        "low_shot_eval",
        [("accuracies.std(ddof=1)", "accuracies.std()")],
        ("matches_reference", "ddof"),
    ),
    # no bias column: the residual is wrong, the floor is right
    "rank bound without the bias column": (
        "rank_bound",
        [("design = np.hstack([H, np.ones((n, 1))])", "design = H")],
        ("matches_reference",),
    ),
    # uncentred CKA: not translation invariant; scale, properties and memory are right
    "CKA without centring": (
        "linear_cka",
        [("Xc = Xc - Xc.mean(axis=0)", "pass"), ("Yc = Yc - Yc.mean(axis=0)", "pass")],
        ("matches_reference", "translation_invariance"),
    ),
    # b' with the original W: W' is right, validation and inputs are right
    "folded bias with the original W": (
        "fold_batchnorm",
        [("b_folded = b - W_folded.T @ mu", "b_folded = b - W.T @ mu")],
        ("matches_reference", "logits_identity"),
    ),
    # 0/1 targets: every PRESS a quarter of the exact one; the bias, scale, absent class,
    # properties and memory are right
    "ridge PRESS on 0/1 targets": (
        "ridge_loo",
        [("T = -np.ones((n, K))", "T = np.zeros((n, K))")],
        ("matches_reference",),
    ),
    # local indices: the merge is wrong, the tie rule and short shards are right on them
    "merge without the offsets": (
        "merge_topk",
        [("np.asarray(i).astype(np.int64) + int(off)", "np.asarray(i).astype(np.int64)")],
        ("matches_whole_bank",),
    ),
    # squared singular values: the value is wrong; centring, 0 log 0 and properties right
    "RankMe on squared singular values": (
        "rankme",
        [
            (
                "sigma = np.linalg.svd(Z, compute_uv=False)",
                "sigma = np.linalg.svd(Z, compute_uv=False) ** 2",
            )
        ],
        ("matches_reference",),
    ),
    # (N - 1) / sum: duplicates, memory and properties are right
    "TwoNN with N - 1": (
        "two_nn_id",
        [("float(len(X) / np.sum", "float((len(X) - 1) / np.sum")],
        ("matches_reference",),
    ),
    # the tails not halved: the gain, the single call and the inputs are right
    "bootstrap interval with whole tails": (
        "wilson_interval",
        [
            (
                "np.percentile(gains, [100 * (1 - level) / 2, 100 * (1 + level) / 2])",
                "np.percentile(gains, [100 * (1 - level), 100 * level])",
            )
        ],
        ("matches_reference", "empty_cells"),
        "paired_bootstrap_ci",
    ),
}


@pytest.mark.parametrize("case", sorted(ONE_PART))
def test_one_mistake_costs_only_its_part(case):
    exercise, edits, lost, *function = ONE_PART[case]
    function = function[0] if function else exercise
    fn = _solution(exercise, *edits, name=function)
    _assert_split(fn, function, lost)


def test_interleaved_heads_cost_only_the_forward_pass():
    """Heads over interleaved columns: the prefix is dropped and the softmax is stable,
    so those checks keep their points."""
    from helpers.autograder_cases_more import ATTENTIVE_INTERLEAVED_HEADS

    ns = {}
    exec(compile(ATTENTIVE_INTERLEAVED_HEADS, "<interleaved>", "exec"), ns)
    _assert_split(ns["attentive_probe"], "attentive_probe", ("matches_reference",))


def test_ddof_zero_scores_what_a_careful_ta_gives():
    """The instructor's case: 2 of 9 hidden points lost to the ddof, nothing else."""
    fn = _solution("low_shot_eval", ("accuracies.std(ddof=1)", "accuracies.std()"))
    total = sum(check_points(c) for c in load("low_shot_eval").HIDDEN)
    for seed in SEEDS:
        got = sum(p for p, _ in _scores(fn, "low_shot_eval", seed).values())
        assert got == total - check_points("low_shot_eval/matches_reference") - check_points(
            "low_shot_eval/ddof"
        )
        ddof = _scores(fn, "low_shot_eval", seed)["ddof"][1][0]
        assert "ddof=1" in ddof.message


def test_whole_tail_interval_keeps_the_gain():
    """The interval variant above differs from the reference on its interval only."""
    fn = _solution(
        "wilson_interval",
        (
            "np.percentile(gains, [100 * (1 - level) / 2, 100 * (1 + level) / 2])",
            "np.percentile(gains, [100 * (1 - level), 100 * level])",
        ),
        name="paired_bootstrap_ci",
    )
    ref = _solution("wilson_interval", name="paired_bootstrap_ci")
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, 101), rng.integers(0, 2, 101)
    got = fn(a, b, 333, np.random.default_rng(5), level=0.9)
    want = ref(a, b, 333, np.random.default_rng(5), level=0.9)
    assert got[0] == want[0] and got[1:] != want[1:]


# ------------------------------------------------------------ answers that compute nothing
def _wilson_nan(k, n, z=1.959963984540054):
    return float("nan"), float("nan")


def _probe_fits_nothing(fit_h, fit_y, held_h, held_y, grid, seed=0):
    majority = np.bincount(np.asarray(fit_y)).argmax()
    return float(grid[0]), float(np.mean(np.asarray(held_y) == majority))


def _low_shot_from_len(pool_h, pool_y, query_h, query_y, shots, draws, gen):
    return 1.0 / len(query_y), 1.0 / math.sqrt(len(query_y))


def _low_shot_two_fake_accuracies(pool_h, pool_y, query_h, query_y, shots, draws, gen):
    # accuracies 1/n and 2/n read back from (mean, std) with ddof=1: integral, in [0, 1]
    n = len(query_y)
    return 1.5 / n, 1.0 / (math.sqrt(2.0) * n)


def _transfer_inputs(X, y, B0, v0, lr, steps):
    return {"lp": (v0, B0), "ft": (v0, B0), "lpft": (v0, B0)}


def _rankme_three(Z, center=False, eps=1e-7):
    return 3.0


def _knn_one_nearest(train_h, train_y, test_h, k, tau, n_classes):
    a = np.asarray(train_h, float)
    q = np.asarray(test_h, float)
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    return np.asarray(train_y)[np.argmax(q @ a.T, axis=1)].astype(np.int64)


NOTHING = {
    "Wilson (nan, nan)": (_wilson_nan, "wilson_interval"),
    "probe that fits nothing": (_probe_fits_nothing, "linear_probe_done_right"),
    "low-shot numbers from len(query_y)": (_low_shot_from_len, "low_shot_eval"),
    "low-shot two accuracies made up from n_test": (_low_shot_two_fake_accuracies, "low_shot_eval"),
    "transfer returns (v0, B0)": (_transfer_inputs, "transfer"),
    "RankMe is always 3": (_rankme_three, "rankme"),
    "k-NN ignores k and tau (1-NN)": (_knn_one_nearest, "knn_classify"),
}


@pytest.mark.parametrize("case", sorted(NOTHING))
def test_answers_that_compute_nothing_earn_nothing(case):
    fn, function = NOTHING[case]
    fn.__name__ = function
    _assert_nothing(fn, function)


def test_a_constant_c_without_a_fit_never_earns_the_selection_points():
    """On some seeds the validation-best C is the one a constant names; the check's
    points then still need the accuracy of a probe fitted with it."""

    def linear_probe_done_right(fit_h, fit_y, held_h, held_y, grid, seed=0):
        return float(grid[3]), 0.5

    lucky = 0
    for seed in (0, 3, 19, 22):
        findings = run_check(
            "linear_probe_done_right/selection_ignores_test_set", linear_probe_done_right, seed
        )
        assert sum(f.points for f in findings) == 0, format_findings("selection", findings, seed)
        lucky += "Not credited" in findings[0].message
    assert lucky >= 1  # the C itself was right on at least one of these seeds


def test_low_shot_other_random_calls_cost_only_the_random_calls():
    """One extra draw of the generator: the supports (and so the mean) differ, but the
    labels and the inputs are handled right and keep their points."""
    fn = _solution(
        "low_shot_eval",
        ("    accuracies = []\n", "    accuracies = []\n    rng.random()\n"),
    )
    _assert_split(fn, "low_shot_eval", ("matches_reference", "random_calls"))


def test_one_nearest_neighbour_differs_where_k_and_tau_are_scored():
    """1-NN loses the checks of k and tau because their inputs make k and tau matter,
    not by chance: on every seed it differs from the rule on each check's inputs."""
    rule = _solution("knn_classify")
    for seed in SEEDS + (0, 1, 2):
        for check in ("small_tau", "k_larger_than_bank", "ties_at_kth", "properties"):
            findings = run_check(f"knn_classify/{check}", _knn_one_nearest, seed)
            assert sum(f.points for f in findings) == 0, format_findings(check, findings, seed)
            right = run_check(f"knn_classify/{check}", rule, seed)
            assert sum(f.points for f in right) == check_points(f"knn_classify/{check}")


# ------------------------------------------------------------ the tolerance test
@pytest.mark.parametrize(
    "got,want",
    [
        (float("nan"), 0.5),
        (float("inf"), 1e308),
        (-float("inf"), -1e300),
        ([0.1, float("nan")], [0.1, 0.2]),
        (float("nan"), float("inf")),
        (float("inf"), -float("inf")),
    ],
)
def test_non_finite_answers_never_pass_a_finite_reference(got, want):
    assert not close(got, want, atol=1e300, rtol=1e300)
    assert differs(got, want, rtol=1e300, atol=1e300)


def test_close_follows_its_rule_elementwise():
    rng = np.random.default_rng(7)
    specials = np.array([np.nan, np.inf, -np.inf])
    for _ in range(300):
        want = rng.normal(size=5)
        got = want + rng.choice([0.0, 1e-13, 1e-6, 1.0], size=5)
        mask_w, mask_g = rng.random(5) < 0.2, rng.random(5) < 0.2
        want[mask_w] = rng.choice(specials, size=mask_w.sum())
        got[mask_g] = rng.choice(specials, size=mask_g.sum())
        atol, rtol = 1e-9, 1e-7
        expected = all(
            (math.isfinite(w) and math.isfinite(g) and abs(g - w) <= atol + rtol * abs(w))
            or (math.isnan(w) and math.isnan(g))
            or (math.isinf(w) and g == w)
            for g, w in zip(got, want)
        )
        assert close(got, want, atol=atol, rtol=rtol) is expected
        assert (differs(got, want, rtol=rtol, atol=atol) is None) is expected


def test_close_rejects_bad_tolerances_and_shapes():
    with pytest.raises(ValueError, match="atol"):
        close(1.0, 1.0, atol=-1.0)
    assert not close([1.0, 2.0], [1.0])
    assert not close("one", 1.0)
    assert close(float("nan"), float("nan"))
