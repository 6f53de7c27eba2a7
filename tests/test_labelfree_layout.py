"""The layers of repeval_ref.labelfree: metrics of an eigenvalue list, the feature-level
functions built on them, and a one-pass summary that uses only public names (book/rankme.md)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import repeval_ref as R
from repeval_ref import labelfree as lf
from repeval_ref._validation import check_center

EPS = np.finfo(float).eps


def _features(n=60, d=9, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) * np.linspace(3.0, 0.2, d) + 1.5


def _memmap(tmp_path, X):
    path = tmp_path / "X.npy"
    np.save(path, X)
    return np.load(path, mmap_mode="r")


# ------------------------------------------------------------------ closed forms


@pytest.mark.parametrize("d", [1, 2, 7, 50])
def test_flat_spectrum_closed_forms(d):
    lam = np.full(d, 2.5)
    sigma = np.sqrt(lam)
    assert lf.rankme_of_spectrum(sigma, eps=0.0) == pytest.approx(d, rel=1e-12)
    eps = 1e-3  # every share is 1/d + eps: exp(-d (1/d + eps) log(1/d + eps))
    assert lf.rankme_of_spectrum(sigma, eps=eps) == pytest.approx(
        (1 / d + eps) ** -(1 + d * eps), rel=1e-12
    )
    assert lf.participation_ratio_of_spectrum(lam) == pytest.approx(d, rel=1e-12)
    assert lf.stable_rank_of_spectrum(lam) == pytest.approx(d, rel=1e-12)
    assert lf.ne_sum_of_spectrum(lam) == pytest.approx(d, rel=1e-12)
    assert lf.condition_number_of_spectrum(sigma) == 1.0
    assert lf.condition_number_of_gram_spectrum(lam) == 1.0
    assert lf.isotropy_ratio_of_spectrum(lam) == 1.0
    # k equal eigenvalues hold k/d of the total: 90 % needs ceil(0.9 d) of them
    assert lf.explained_variance_dimension_of_spectrum(lam, 0.9) == int(np.ceil(0.9 * d - 1e-9))
    if d >= 2:
        assert lf.alpha_req_of_spectrum(lam, (1, d)) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.3])
def test_power_law_closed_forms(alpha):
    d = 40
    i = np.arange(1, d + 1, dtype=float)
    lam = 7.0 * i**-alpha
    assert lf.ne_sum_of_spectrum(lam) == pytest.approx(np.sum(i**-alpha), rel=1e-12)
    assert lf.participation_ratio_of_spectrum(lam) == pytest.approx(
        np.sum(i**-alpha) ** 2 / np.sum(i ** (-2 * alpha)), rel=1e-12
    )
    assert lf.condition_number_of_spectrum(np.sqrt(lam)) == pytest.approx(
        d ** (alpha / 2), rel=1e-12
    )
    assert lf.isotropy_ratio_of_spectrum(lam) == pytest.approx(d**-alpha, rel=1e-12)
    assert lf.alpha_req_of_spectrum(lam, (1, d)) == pytest.approx(alpha, rel=1e-10)
    assert lf.alpha_req_weighted_of_spectrum(lam, (3, 30)) == pytest.approx(alpha, rel=1e-10)
    p = np.sqrt(lam) / np.sqrt(lam).sum()
    assert lf.rankme_of_spectrum(np.sqrt(lam), eps=0.0) == pytest.approx(
        np.exp(-np.sum(p * np.log(p))), rel=1e-12
    )


def test_one_direction_and_order_of_the_values():
    lam = np.r_[5.0, np.zeros(6)]
    assert lf.rankme_of_spectrum(np.sqrt(lam), eps=0.0) == 1.0
    assert lf.participation_ratio_of_spectrum(lam) == 1.0 and lf.stable_rank_of_spectrum(lam) == 1.0
    assert lf.isotropy_ratio_of_spectrum(lam) == 0.0
    assert lf.explained_variance_dimension_of_spectrum(lam) == 1
    rng = np.random.default_rng(3)
    lam = rng.uniform(0.1, 4.0, size=12)
    shuffled = rng.permutation(lam)
    for fn in (
        lf.participation_ratio_of_spectrum,
        lf.stable_rank_of_spectrum,
        lf.isotropy_ratio_of_spectrum,
        lf.rankme_of_spectrum,
        lf.condition_number_of_spectrum,
        lambda v: lf.alpha_req_of_spectrum(v, (2, 11)),
    ):
        assert fn(shuffled) == fn(np.sort(lam)[::-1])


# ---------------------------------------------- feature level = list of its spectrum


@pytest.mark.parametrize("shape", [(60, 9), (7, 12)])
def test_feature_metrics_are_the_list_metrics_of_their_spectrum(shape):
    X = _features(*shape)
    n, d = X.shape
    for center in (False, True):
        sigma = lf.singular_values(X, center=center)
        np.testing.assert_allclose(
            sigma,
            np.linalg.svd(X - X.mean(0) if center else X, compute_uv=False),
            rtol=1e-12,
            atol=1e-12 * sigma[0],
        )
        assert R.rankme(X, center=center) == lf.rankme_of_spectrum(sigma)
        assert R.rankme_normalized(X, center=center) == lf.rankme_of_spectrum(sigma) / d
        lam = lf.gram_spectrum(X, center=center)
        assert R.stable_rank(X, center=center) == lf.stable_rank_of_spectrum(lam)
        assert R.ne_sum(X, center=center) == lf.ne_sum_of_spectrum(lam)
        assert R.alpha_req(X, (1, 0.4), center=center) == lf.alpha_req_of_spectrum(lam, (1, 0.4))
        assert R.condition_number(X, center=center) == lf.condition_number_of_spectrum(
            sigma, max(n, d) * EPS
        )
    cov = lf.covariance_spectrum(X)
    np.testing.assert_array_equal(cov, lf.gram_spectrum(X, center=True))
    assert R.participation_ratio(X) == lf.participation_ratio_of_spectrum(cov)
    assert R.explained_variance_dimension(X, 0.8) == lf.explained_variance_dimension_of_spectrum(
        cov, 0.8
    )
    assert R.isotropy_ratio(X) == lf.isotropy_ratio_of_spectrum(cov)
    # reptrix's conventions are the same list metrics of the squared singular values
    lam_c = lf.singular_values(X, center=True) ** 2
    assert R.rankme_squared_shares(X) == lf.rankme_of_spectrum(lam_c)
    k = min(n, d) - 1
    assert R.alpha_req_weighted(X, (2, k)) == lf.alpha_req_weighted_of_spectrum(lam_c, (2, k))


def test_streamed_features_take_the_gram_route(tmp_path):
    X = _features(200, 10, seed=4)
    mm = _memmap(tmp_path, X)
    lam = lf.gram_spectrum(X, center=False)
    assert R.condition_number(mm) == lf.condition_number_of_gram_spectrum(lam, 200)
    sv = lf.feature_singular_values(mm)
    assert (sv.n, sv.d) == (200, 10)
    np.testing.assert_array_equal(sv.values, lf.singular_values_from_gram(lam, 200))
    np.testing.assert_allclose(sv.values, lf.singular_values(X), rtol=1e-10)
    assert R.rankme(iter([X[:50], X[50:]])) == pytest.approx(R.rankme(X), rel=1e-10)
    assert lf.is_in_memory(X) and not lf.is_in_memory(mm) and not lf.is_in_memory(iter([X]))


def test_sphere_and_relational_layers():
    X = _features(80, 6, seed=5)
    n = X.shape[0]
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    mom = lf.unit_moments(X)
    np.testing.assert_allclose(mom.mean * n, U.sum(0), rtol=1e-12)
    assert R.self_cluster(X) == lf.self_cluster_of_gram(mom.gram(False), n)
    G = U.T @ U
    d = X.shape[1]
    F = np.sum((U @ U.T) ** 2)
    assert lf.self_cluster_of_gram(G, n) == pytest.approx(
        (d * F - n * (d + n - 1)) / ((d - 1) * (n - 1) * n), rel=1e-10
    )
    s = U.sum(0)
    assert R.mean_pairwise_cosine(X) == pytest.approx(
        lf.mean_pairwise_cosine_of_sum(s, n), rel=1e-12
    )
    brute = (U @ U.T)[~np.eye(n, dtype=bool)].mean()
    assert lf.mean_pairwise_cosine_of_sum(s, n) == pytest.approx(brute, rel=1e-10)
    with pytest.raises(ValueError, match="zero vector at row 3"):
        lf.unit_moments(np.r_[X[:3], np.zeros((1, 6)), X[3:]])


# ------------------------------------------------------------------------ checks


def test_list_metrics_validate_their_input():
    for fn in (
        lf.participation_ratio_of_spectrum,
        lf.stable_rank_of_spectrum,
        lf.isotropy_ratio_of_spectrum,
        lf.explained_variance_dimension_of_spectrum,
    ):
        with pytest.raises(ValueError, match="eigenvalues must be 1-dimensional"):
            fn(np.eye(3))
        with pytest.raises(ValueError, match="eigenvalues must be >= 0"):
            fn([1.0, -0.5])
        with pytest.raises(ValueError, match="NaN"):
            fn([1.0, np.nan])
        with pytest.raises(ValueError, match="the covariance of Y is zero"):
            fn(np.zeros(4), name="the covariance of Y")
    with pytest.raises(ValueError, match="singular_values must be >= 0"):
        lf.rankme_of_spectrum([1.0, -1.0])
    with pytest.raises(ValueError, match="the spectrum has all singular values zero"):
        lf.rankme_of_spectrum(np.zeros(3))
    with pytest.raises(ValueError, match="eps"):
        lf.rankme_of_spectrum([1.0], eps=-1.0)
    with pytest.raises(ValueError, match="rtol"):
        lf.condition_number_of_spectrum([2.0, 1.0], rtol=1.0)
    with pytest.raises(ValueError, match="threshold"):
        lf.explained_variance_dimension_of_spectrum([2.0, 1.0], threshold=1.5)
    assert lf.fit_range_indices((0, 0.5), 20) == (1, 10)
    with pytest.raises(ValueError, match="exceeds"):
        lf.fit_range_indices((1, 21), 20)
    with pytest.raises(TypeError, match="two ints"):
        lf.alpha_req_weighted_of_spectrum(np.ones(10), (1.0, 5))
    with pytest.raises(ValueError, match="n must be >= 2"):
        lf.mean_pairwise_cosine_of_sum([1.0, 0.0], 1)
    with pytest.raises(ValueError, match="gram must be square"):
        lf.self_cluster_of_gram(np.ones((3, 2)), 5)


def test_check_center_is_shared():
    assert check_center(True) is True and check_center(np.bool_(False)) is False
    for bad in (1, 0, None, "yes"):
        with pytest.raises(TypeError, match="center must be True or False"):
            check_center(bad)
    X = _features(20, 4)
    for fn in (
        R.rankme,
        R.rankme_normalized,
        R.alpha_req,
        R.ne_sum,
        R.stable_rank,
        R.condition_number,
        R.gram_spectrum,
        R.rankme_squared_shares,
        R.alpha_req_weighted,
    ):
        with pytest.raises(TypeError, match="center must be True or False"):
            fn(X, center=1)
    with pytest.raises(TypeError, match="exact must be True or False"):
        R.sample_features_with_spectrum(np.ones(3), 5, exact=1)


def test_condition_number_tolerance_is_that_of_its_route():
    # the same threshold rule sigma_i > rtol * sigma_1; only the default rtol differs:
    # the relative accuracy of SVD values (max(n, d) eps) or of Gram eigenvalues (sqrt(d eps))
    sigma = np.array([1.0, 1e-3, 1e-9])
    assert lf.condition_number_of_spectrum(sigma) == pytest.approx(1e9)
    assert lf.condition_number_of_spectrum(sigma, rtol=1e-6) == pytest.approx(1e3)
    with pytest.warns(RuntimeWarning, match="resolution limit"):
        kappa = lf.condition_number_of_gram_spectrum(np.array([1.0, 1e-14, 1e-18]))
    assert kappa == pytest.approx(1e7)  # 1e-18 is below sqrt(3 eps) * 1 and dropped


def test_parallel_pool_size_is_one_definition():
    from repeval_ref import _parallel, knn

    assert knn.pool_size is _parallel.pool_size
    assert 1 <= _parallel.pool_size() <= max(1, _parallel.blas_thread_count())


# ------------------------------------------------------------------- module layout


def test_private_modules_live_inside_the_subpackage():
    """The streamed moments and the eigenvalue solver are private to repeval_ref.labelfree."""
    for top_level in ("repeval_ref._symeig", "repeval_ref._streaming"):
        assert importlib.util.find_spec(top_level) is None, top_level
    importlib.import_module("repeval_ref.labelfree._symeig")
    importlib.import_module("repeval_ref.labelfree._streaming")


def test_the_package_exports_its_names_and_the_top_level_points_into_it():
    from repeval_ref.labelfree import rankme, rankme_normalized, two_nn_id  # noqa: F401

    for name in lf.__all__:
        assert hasattr(lf, name), name
    for name, module in R._EXPORTS.items():
        if getattr(R, name).__module__.startswith("repeval_ref.labelfree"):
            assert module.startswith("labelfree."), (name, module)
            assert getattr(importlib.import_module(f"repeval_ref.{module}"), name) is getattr(
                R, name
            )


ROOT = Path(__file__).resolve().parents[1]


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path):
    """Absolute names of the modules a Python file imports (``from a import b``: a and a.b)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def _python_files():
    for folder in ("repeval_ref", "tests", "benchmarks", "autograder"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path != Path(__file__).resolve():
                yield path


@pytest.mark.slow
def test_private_names_of_the_subpackage_stay_inside_it():
    # modules outside repeval_ref.labelfree take only public names from it
    for path in _python_files():
        if "tests" in path.parts or "labelfree" in path.parts:
            continue
        for full in _imported_modules(path):
            head, _, last = full.rpartition(".")
            if head.startswith("repeval_ref.labelfree") and last.startswith("_"):
                raise AssertionError(f"{path.relative_to(ROOT)} imports {full}")


# ------------------------------------------------------------- layering, read with ast


def _private_imports(module):
    """Private names ``module`` takes from other modules: ``from m import _x`` or ``m._x``."""
    tree = ast.parse(inspect.getsource(module))
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"from {'.' * node.level}{node.module or ''} import {alias.name}")
                elif node.module is None or inspect.ismodule(
                    getattr(module, alias.asname or alias.name, None)
                ):
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_label_free_summary_uses_only_public_names():
    from repeval_ref.labelfree import summary

    assert _private_imports(summary) == []
    # and what it imports from the package are the public layers
    tree = ast.parse(inspect.getsource(summary))
    sources = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level
    }
    assert sources <= {"_validation", None, "_streaming", "relational", "spectrum", "sphere"}, (
        sources
    )


def test_private_names_cross_module_borders_only_inside_the_subpackage():
    names = [m for m in lf.__all__ if inspect.ismodule(getattr(lf, m, None))]
    assert names == []  # the package exports functions, not modules
    for sub in (
        "eigenvalue_metrics",
        "spectrum",
        "spectral",
        "sphere",
        "relational",
        "intrinsic_dimension",
        "synthetic",
        "summary",
        "_streaming",
        "_symeig",
    ):
        module = importlib.import_module(f"repeval_ref.labelfree.{sub}")
        tree = ast.parse(inspect.getsource(module))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name.startswith("_") for a in node.names):
                # only siblings (level 1) may hand over private names, never repeval_ref itself
                assert node.level == 1, (sub, node.module, [a.name for a in node.names])


def test_every_module_of_the_subpackage_names_its_chapter():
    for path in sorted((ROOT / "repeval_ref" / "labelfree").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        chapters = re.findall(r"book/([a-z_]+)\.md", doc)
        assert chapters, path.name
        assert all((ROOT / "book" / f"{c}.md").exists() for c in chapters), (path.name, chapters)
