"""End-to-end tests of the ``repeval`` command on features written from load_digits."""

import contextlib
import io
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits

from repeval_ref import linear_cka, wilson_interval
from repeval_ref.cli import load_features, main

FAST = ["--quiet", "--probe-c", "0.1,1", "--draws", "3"]


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    p = np.random.default_rng(0).permutation(len(y))
    return (
        X[p[:360]].astype(np.float32),
        y[p[:360]],
        X[p[360:540]].astype(np.float32),
        y[p[360:540]],
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory, digits):
    d = tmp_path_factory.mktemp("feats")
    Xtr, ytr, Xte, yte = digits
    np.savez(d / "train.npz", features=Xtr, labels=ytr)
    np.savez(d / "test.npz", features=Xte, labels=yte)
    return d


@pytest.fixture(scope="module")
def report(files):
    """One full run (with progress lines, as stderr is not a TTY here); reused by several tests."""
    out = files / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = [
        "report",
        str(files / "train.npz"),
        str(files / "test.npz"),
        "--out",
        str(out),
        "--probe-c",
        "0.1,1",
        "--draws",
        "3",
        "--id-batch",
        "100",
    ]
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = main(argv)
    return rc, out, stdout.getvalue(), stderr.getvalue()


def _error(capsys, prefix="repeval: error:"):
    """The one error line; only stage lines (ending in "...") may come before it."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines and all(line.endswith(" ...") for line in lines[:-1]), captured.err
    lines = lines[-1:]
    assert lines[0].startswith(prefix), lines[0]
    assert "Traceback" not in captured.err
    return lines[0]


# -------------------------------------------------------------------------- report


def test_report_writes_all_outputs(report):
    rc, out = report[:2]
    assert rc == 0
    for name in ("report.md", "report.json", "spectrum.png", "knn_vs_k.png", "lowshot.png"):
        assert (out / name).exists(), name
    for name in ("spectrum.png", "knn_vs_k.png", "lowshot.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert "Wilson" in md and "Self-Cluster" in md and "![spectrum](spectrum.png)" in md
    assert "## Verdicts" in md


def test_report_json_accuracies_and_intervals(report, digits):
    from repeval_ref import knn_classify

    rep = json.loads((report[1] / "report.json").read_text())
    Xtr, ytr, Xte, yte = digits
    assert rep["inputs"]["n_train"] == 360 and rep["inputs"]["n_classes"] == 10
    assert [e["k"] for e in rep["knn"]["headline"]] == [20, 200]
    # k-NN accuracy is the library's, with its Wilson interval
    pred = knn_classify(Xtr, ytr, Xte, 20, 0.07, 10)
    k20 = rep["knn"]["headline"][0]
    assert k20["correct"] == int(np.sum(pred == yte))
    assert k20["wilson95"] == pytest.approx(list(wilson_interval(k20["correct"], 180)))
    entries = rep["knn"]["curve"] + [rep["linear_probe"], rep["ridge_probe"]]
    for e in entries:
        lo, hi = e["wilson95"]
        assert lo <= e["accuracy"] <= hi and e["n"] == 180
    assert rep["linear_probe"]["best_C"] in (0.1, 1.0)
    assert rep["linear_probe"]["dropped_constant_features"] >= 1  # digits has blank pixels
    assert rep["linear_probe"]["accuracy"] > 0.85
    assert [e["shots"] for e in rep["low_shot"]] == [1, 5, 20]
    assert all(e["mean"] is not None and e["std"] >= 0 for e in rep["low_shot"])


def test_report_label_free_metrics_match_the_library(report, digits):
    import repeval_ref as r

    lf = json.loads((report[1] / "report.json").read_text())["label_free"]
    X = digits[0].astype(np.float64)
    assert lf["rankme"]["value"] == pytest.approx(r.rankme(X))
    assert lf["ne_sum"]["value"] == pytest.approx(r.ne_sum(X))
    assert lf["self_cluster"]["value"] == pytest.approx(r.self_cluster(X))
    assert lf["participation_ratio"]["value"] == pytest.approx(r.participation_ratio(X))
    assert lf["mean_pairwise_cosine"]["value"] == pytest.approx(r.mean_pairwise_cosine(X))
    expected = {
        "rankme",
        "rankme_normalized",
        "alpha_req",
        "ne_sum",
        "stable_rank",
        "condition_number",
        "participation_ratio",
        "dims_for_90pct_variance",
        "isotropy_ratio",
        "mean_pairwise_cosine",
        "uniformity",
        "self_cluster",
        "diffusion_spectral_entropy",
        "two_nn_id",
        "two_nn_id_batched",
    }
    assert expected <= set(lf)
    for name in expected:
        assert lf[name]["value"] is not None, (name, lf[name])


def test_report_prints_a_table_and_a_progress_bar(report):
    _, _, out, err = report
    assert "weighted k-NN (k=20, tau=0.07)" in out
    assert "low-shot nearest class mean, 20-shot" in out
    assert (
        "TwoNN intrinsic dimension, batched" in out and "+-" in out
    )  # 3 batches of 120 rows: a spread
    # tqdm bars that move within a stage: the probe counts its fits, k-NN its queries
    assert "linear probe" in err and "3/3" in err and "180/180" in err


def test_quiet_report_has_empty_stderr(tmp_path, digits, capsys):
    Xtr, ytr, Xte, yte = digits
    paths = _write_pair(tmp_path, Xtr[:120], ytr[:120], Xte[:40], yte[:40])
    assert main(["report", *paths, "--out", str(tmp_path / "o")] + FAST) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "skipped" in captured.out  # some classes have < 20 samples


# --------------------------------------------------------------------- file formats


def test_npy_pairs_and_torch_files_load_like_npz(tmp_path, digits):
    import torch

    X, y = digits[0], digits[1]
    np.save(tmp_path / "train_features.npy", X)
    np.save(tmp_path / "train_labels.npy", y)
    np.save(tmp_path / "emb.npy", X)
    np.save(tmp_path / "emb_labels.npy", y)
    torch.save({"features": torch.from_numpy(X), "labels": torch.from_numpy(y)}, tmp_path / "d.pt")
    torch.save((torch.from_numpy(X), torch.from_numpy(y)), tmp_path / "t.pth")
    for name in ("train_features.npy", "emb.npy", "d.pt", "t.pth"):
        F, L = load_features(tmp_path / name, "TRAIN")
        np.testing.assert_array_equal(F, X.astype(np.float64))
        np.testing.assert_array_equal(L, y)


def test_report_runs_on_torch_files(tmp_path, digits, capsys):
    import torch

    Xtr, ytr, Xte, yte = (a[:150] for a in digits)
    torch.save(
        {"features": torch.from_numpy(Xtr), "labels": torch.from_numpy(ytr)}, tmp_path / "tr.pt"
    )
    torch.save(
        {"features": torch.from_numpy(Xte), "labels": torch.from_numpy(yte)}, tmp_path / "te.pt"
    )
    assert (
        main(
            [
                "report",
                str(tmp_path / "tr.pt"),
                str(tmp_path / "te.pt"),
                "--out",
                str(tmp_path / "o"),
            ]
            + FAST
        )
        == 0
    )
    assert (tmp_path / "o" / "report.json").exists()


# ------------------------------------------------------------------------- compare


def test_compare_end_to_end(tmp_path, capsys):
    X, y = load_digits(return_X_y=True)
    X, y = X[:400], y[:400]
    B = np.maximum(X @ np.random.default_rng(1).normal(size=(64, 24)), 0)
    np.savez(tmp_path / "a.npz", features=X, labels=y)
    np.savez(tmp_path / "b.npz", features=B, labels=y)
    rc = main(
        [
            "compare",
            str(tmp_path / "a.npz"),
            str(tmp_path / "b.npz"),
            "--boot",
            "500",
            "--out",
            str(tmp_path / "c"),
            "--quiet",
            "--probe-c",
            "1",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "linear CKA" in out and "McNemar" in out
    res = json.loads((tmp_path / "c" / "compare.json").read_text())
    assert res["linear_cka"] == pytest.approx(linear_cka(X, B))
    assert 0 <= res["rbf_cka"] <= 1
    for proto in ("knn", "probe"):
        e = res["paired"][proto]
        assert e["gain_B_minus_A"] == pytest.approx(e["B"]["accuracy"] - e["A"]["accuracy"])
        lo, hi = e["bootstrap95"]
        assert lo <= e["gain_B_minus_A"] <= hi
        assert 0 <= e["mcnemar_p"] <= 1
        assert e["A"]["n"] == 100  # 25 % of 400 held out


def test_compare_identical_inputs(tmp_path, capsys):
    X, y = load_digits(return_X_y=True)
    np.savez(tmp_path / "a.npz", features=X[:200], labels=y[:200])
    rc = main(
        [
            "compare",
            str(tmp_path / "a.npz"),
            str(tmp_path / "a.npz"),
            "--boot",
            "200",
            "--out",
            str(tmp_path / "c"),
            "--quiet",
            "--probe-c",
            "1",
        ]
    )
    assert rc == 0
    res = json.loads((tmp_path / "c" / "compare.json").read_text())
    assert res["linear_cka"] == pytest.approx(1.0) and res["rbf_cka"] == pytest.approx(1.0)
    assert res["paired"]["knn"]["mcnemar_p"] == 1.0
    assert res["paired"]["knn"]["gain_B_minus_A"] == 0.0


def test_compare_without_labels_reports_cka_only(tmp_path, capsys):
    rng = np.random.default_rng(2)
    A = rng.normal(size=(50, 6))
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", A @ rng.normal(size=(6, 4)))
    assert main(["compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--quiet"]) == 0
    assert "paired accuracy comparison skipped" in capsys.readouterr().out


# ----------------------------------------------------------------------- bad input


def _write_pair(d, Xtr, ytr, Xte=None, yte=None):
    np.savez(d / "tr.npz", features=Xtr, labels=ytr)
    if Xte is None:
        Xte, yte = Xtr, ytr
    np.savez(d / "te.npz", features=Xte, labels=yte)
    return [str(d / "tr.npz"), str(d / "te.npz")]


def _run_report(paths, out):
    return main(["report", *paths, "--out", str(out)] + FAST)


@pytest.fixture
def small():
    rng = np.random.default_rng(3)
    return rng.normal(size=(30, 4)), np.repeat([0, 1, 2], 10)


def test_missing_file(tmp_path, capsys):
    rc = _run_report([str(tmp_path / "nope.npz"), str(tmp_path / "nope2.npz")], tmp_path / "o")
    assert rc == 2
    assert "TRAIN file not found" in _error(capsys)


def test_missing_keys(tmp_path, small, capsys):
    X, y = small
    np.savez(tmp_path / "nolab.npz", features=X)
    np.savez(tmp_path / "nofeat.npz", embeddings=X, labels=y)
    np.savez(tmp_path / "ok.npz", features=X, labels=y)
    assert _run_report([str(tmp_path / "nolab.npz"), str(tmp_path / "ok.npz")], tmp_path / "o") == 2
    assert "no array 'labels'" in _error(capsys)
    assert (
        _run_report([str(tmp_path / "ok.npz"), str(tmp_path / "nofeat.npz")], tmp_path / "o") == 2
    )
    msg = _error(capsys)
    assert "TEST" in msg and "no array 'features'" in msg and "embeddings" in msg


def test_length_mismatch(tmp_path, small, capsys):
    X, y = small
    assert _run_report(_write_pair(tmp_path, X, y[:-1]), tmp_path / "o") == 2
    assert "30 feature rows but 29 labels" in _error(capsys)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_features(tmp_path, small, capsys, bad):
    X, y = small
    X = X.copy()
    X[7, 1] = bad
    assert _run_report(_write_pair(tmp_path, X, y), tmp_path / "o") == 2
    assert "NaN or infinite values (first in row 7)" in _error(capsys)


def test_one_class_only(tmp_path, small, capsys):
    X, _ = small
    assert _run_report(_write_pair(tmp_path, X, np.zeros(30, dtype=int)), tmp_path / "o") == 2
    assert "only one class" in _error(capsys)


def test_class_with_a_single_sample(tmp_path, small, capsys):
    X, y = small
    y = y.copy()
    y[0] = 5
    assert _run_report(_write_pair(tmp_path, X, y), tmp_path / "o") == 2
    msg = _error(capsys)
    assert "class 5 has 1 sample" in msg and "at least 2" in msg


def test_non_numeric_features_and_labels(tmp_path, small, capsys):
    X, y = small
    assert _run_report(_write_pair(tmp_path, X.astype(str), y), tmp_path / "o") == 2
    assert "features must be numeric" in _error(capsys)
    assert (
        _run_report(_write_pair(tmp_path, X, np.array(["cat", "dog", "eel"] * 10)), tmp_path / "o")
        == 2
    )
    assert "labels must be integers" in _error(capsys)
    assert _run_report(_write_pair(tmp_path, X, y + 0.5), tmp_path / "o") == 2
    assert "whole numbers" in _error(capsys)


def test_unreadable_and_unsupported_files(tmp_path, small, capsys):
    X, y = small
    (tmp_path / "junk.npz").write_bytes(b"not a zip archive at all")
    np.savez(tmp_path / "ok.npz", features=X, labels=y)
    assert _run_report([str(tmp_path / "junk.npz"), str(tmp_path / "ok.npz")], tmp_path / "o") == 2
    assert "not a valid .npz archive" in _error(capsys)
    (tmp_path / "f.csv").write_text("1,2\n")
    assert _run_report([str(tmp_path / "f.csv"), str(tmp_path / "ok.npz")], tmp_path / "o") == 2
    assert "unsupported type .csv" in _error(capsys)
    (tmp_path / "bad.pt").write_bytes(b"garbage")
    assert _run_report([str(tmp_path / "bad.pt"), str(tmp_path / "ok.npz")], tmp_path / "o") == 2
    assert "not a valid PyTorch file" in _error(capsys)


def test_npy_without_labels_file(tmp_path, small, capsys):
    X, y = small
    np.save(tmp_path / "x_features.npy", X)
    np.savez(tmp_path / "ok.npz", features=X, labels=y)
    assert (
        _run_report([str(tmp_path / "x_features.npy"), str(tmp_path / "ok.npz")], tmp_path / "o")
        == 2
    )
    assert "x_labels.npy not found" in _error(capsys)


def test_shape_and_label_mismatch_between_train_and_test(tmp_path, small, capsys):
    X, y = small
    assert _run_report(_write_pair(tmp_path, X, y, X[:, :3], y), tmp_path / "o") == 2
    assert "TRAIN has 4 features per row but TEST has 3" in _error(capsys)
    assert _run_report(_write_pair(tmp_path, X, y, X, np.full(30, 9)), tmp_path / "o") == 2
    assert "TEST has label 9 that never occurs in TRAIN" in _error(capsys)
    assert _run_report(_write_pair(tmp_path, X[:, 0], y), tmp_path / "o") == 2
    assert "2-D array" in _error(capsys)


def test_compare_bad_inputs(tmp_path, small, capsys):
    X, y = small
    np.savez(tmp_path / "a.npz", features=X, labels=y)
    np.savez(tmp_path / "short.npz", features=X[:-1], labels=y[:-1])
    np.savez(tmp_path / "other.npz", features=X, labels=y[::-1])
    yy = y.copy()
    yy[0] = 7
    np.savez(tmp_path / "single.npz", features=X, labels=yy)
    cases = [
        ("short.npz", "A has 30 rows but B has 29"),
        ("other.npz", "different labels"),
        ("single.npz", "class 7 has 1 sample"),
    ]
    for name, text in cases:
        b = "single.npz" if name == "single.npz" else name
        a = "single.npz" if name == "single.npz" else "a.npz"
        assert main(["compare", str(tmp_path / a), str(tmp_path / b), "--quiet"]) == 2
        assert text in _error(capsys)
    assert main(["compare", str(tmp_path / "a.npz"), str(tmp_path / "missing.npz")]) == 2
    assert "B file not found" in _error(capsys)


def test_argument_errors_are_one_line_with_status_2(capsys):
    for argv in (
        ["report"],
        ["report", "a", "b", "--draws", "1"],
        ["report", "a", "b", "--probe-c", "x"],
        ["compare", "a", "b", "--test-fraction", "1.5"],
        ["frobnicate"],
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        msg = _error(capsys, prefix="repeval")
        assert "error:" in msg and "--help" in msg


def test_no_subcommand_prints_help(capsys):
    assert main([]) == 2
    assert "report" in capsys.readouterr().err


def test_help_explains_every_option(capsys):
    for argv, options in (
        (["--help"], ["report", "compare"]),
        (
            ["report", "--help"],
            [
                "--out",
                "--seed",
                "--draws",
                "--dse-samples",
                "--pair-samples",
                "--id-batch",
                "--probe-c",
                "--quiet",
                "TRAIN",
                "TEST",
                ".npz",
                ".npy",
                ".pt",
            ],
        ),
        (
            ["compare", "--help"],
            [
                "--test-fraction",
                "--k",
                "--boot",
                "--cka-samples",
                "--seed",
                "--out",
                "--probe-c",
                "--quiet",
                "A",
                "B",
            ],
        ),
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
        text = capsys.readouterr().out
        for opt in options:
            assert opt in text, (argv, opt)


@pytest.mark.slow
def test_console_script_process_exit_status(tmp_path):
    """As a separate process: help exits 0, bad input exits 2 with one line and no traceback."""
    ok = subprocess.run(
        [sys.executable, "-m", "repeval_ref.cli", "--help"], capture_output=True, text=True
    )
    assert ok.returncode == 0 and "usage: repeval" in ok.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "repeval_ref.cli",
            "report",
            str(tmp_path / "x.npz"),
            str(tmp_path / "y.npz"),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"repeval: error: TRAIN file not found: {tmp_path / 'x.npz'}"
    ]


def test_entry_point_is_declared():
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="console_scripts") if ep.name == "repeval"]
    if not eps:
        pytest.skip("package not installed (pip install -e .)")
    assert eps[0].value == "repeval_ref.cli:main"


def test_zero_feature_row_is_refused_naming_the_file_and_row(tmp_path, small, capsys):
    X, y = small
    Xz = X.copy()
    Xz[4] = 0.0  # cosine similarity cannot normalise a zero vector
    paths = _write_pair(tmp_path, Xz, y, X, y)
    out = tmp_path / "o"
    assert _run_report(paths, out) == 2  # refused: exit 2, one line on stderr
    msg = _error(capsys)
    assert f"TRAIN file {paths[0]}: feature row 4 is all zeros (1 of 30 rows)" in msg
    assert "train_h" not in msg and "remove such rows" in msg
    assert not out.exists()  # refused before anything is computed or written


def test_zero_feature_rows_in_test_are_listed_in_the_file_numbering(tmp_path, small, capsys):
    X, y = small
    Xz = X.copy()
    Xz[[2, 9]] = 0.0
    paths = _write_pair(tmp_path, X, y, Xz, y)
    assert _run_report(paths, tmp_path / "o") == 2
    msg = _error(capsys)
    assert f"TEST file {paths[1]}: feature rows 2, 9 are all zeros (2 of 30 rows)" in msg
    assert not (tmp_path / "o").exists()


def test_compare_refuses_a_zero_row_with_labels_and_accepts_it_without(tmp_path, small, capsys):
    X, y = small
    Xz = X.copy()
    Xz[0] = 0.0
    np.savez(tmp_path / "a.npz", features=Xz, labels=y)
    np.savez(tmp_path / "b.npz", features=X, labels=y)
    rc = main(
        [
            "compare",
            str(tmp_path / "a.npz"),
            str(tmp_path / "b.npz"),
            "--quiet",
            "--boot",
            "100",
            "--probe-c",
            "1",
            "--out",
            str(tmp_path / "c"),
        ]
    )
    assert rc == 2
    assert f"A file {tmp_path / 'a.npz'}: feature row 0 is all zeros" in _error(capsys)
    assert not (tmp_path / "c").exists()
    # without labels only CKA runs, which a zero row does not disturb
    np.save(tmp_path / "a.npy", Xz)
    np.save(tmp_path / "b.npy", X)
    assert (
        main(
            [
                "compare",
                str(tmp_path / "a.npy"),
                str(tmp_path / "b.npy"),
                "--quiet",
                "--out",
                str(tmp_path / "c2"),
            ]
        )
        == 0
    )
    res = json.loads((tmp_path / "c2" / "compare.json").read_text())
    assert res["linear_cka"] == pytest.approx(linear_cka(Xz, X)) and res["paired"] is None


def test_npz_that_is_not_a_zip_archive(tmp_path, small, capsys):
    X, y = small
    np.savez(tmp_path / "ok.npz", features=X, labels=y)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    assert _run_report([str(tmp_path / "junk.npz"), str(tmp_path / "ok.npz")], tmp_path / "o") == 2
    msg = _error(capsys)
    assert "is not a valid .npz archive" in msg and "pickle" not in msg
    np.save(tmp_path / "arr.npy", X)
    (tmp_path / "arr.npz").write_bytes((tmp_path / "arr.npy").read_bytes())
    assert _run_report([str(tmp_path / "arr.npz"), str(tmp_path / "ok.npz")], tmp_path / "o") == 2
    assert "rename it to .npy" in _error(capsys)


def test_corrupt_torch_files_give_one_clear_line(tmp_path, small, capsys):
    import torch

    X, y = small
    np.savez(tmp_path / "ok.npz", features=X, labels=y)
    torch.save({"features": torch.as_tensor(X), "labels": torch.as_tensor(y)}, tmp_path / "good.pt")
    good = (tmp_path / "good.pt").read_bytes()
    (tmp_path / "trunc.pt").write_bytes(good[: len(good) // 2])
    (tmp_path / "garbage.pt").write_bytes(b"xxxx")
    (tmp_path / "empty.pt").write_bytes(b"")
    torch.save({"features": X, "labels": y}, tmp_path / "numpy.pt")  # numpy objects, not tensors
    cases = [
        ("trunc.pt", "truncated or corrupted"),
        ("garbage.pt", "is not a valid PyTorch file"),
        ("empty.pt", "is empty"),
        ("numpy.pt", "holds Python objects other than tensors"),
    ]
    for name, text in cases:
        assert _run_report([str(tmp_path / name), str(tmp_path / "ok.npz")], tmp_path / "o") == 2
        msg = _error(capsys)
        assert text in msg and "weights_only" not in msg, msg


def test_compare_help_shows_the_seed_default(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "seed of the split, bootstrap and subsample (default: 0)" in text


def test_compare_rbf_cka_uses_kornblith_bandwidth(tmp_path, capsys):
    from repeval_ref import rbf_cka

    rng = np.random.default_rng(5)
    A = rng.normal(size=(40, 6))
    B = np.tanh(A @ rng.normal(size=(6, 3)))
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    assert (
        main(
            [
                "compare",
                str(tmp_path / "a.npy"),
                str(tmp_path / "b.npy"),
                "--quiet",
                "--out",
                str(tmp_path / "c"),
            ]
        )
        == 0
    )
    res = json.loads((tmp_path / "c" / "compare.json").read_text())
    assert res["rbf_cka"] == pytest.approx(rbf_cka(A, B, sigma_frac=0.5, median="full"), rel=1e-12)
    assert "Kornblith" in res["rbf_cka_note"]


def test_low_shot_support_mean_of_zero_is_a_skipped_entry(tmp_path, capsys):
    # class 0: ten copies each of e1 and -e1, so its 20-shot support (all 20 rows)
    # averages to exactly the zero vector; 1- and 5-shot means are not zero
    rng = np.random.default_rng(0)
    e1 = np.array([1.0, 0.0, 0.0])
    X = np.vstack([np.tile(e1, (10, 1)), np.tile(-e1, (10, 1)), rng.normal(size=(20, 3)) + 3])
    y = np.repeat([0, 1], 20)
    paths = _write_pair(tmp_path, X, y)
    assert _run_report(paths, tmp_path / "o") == 0
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    by_shots = {e["shots"]: e for e in rep["low_shot"]}
    assert by_shots[20]["mean"] is None and "zero vector" in by_shots[20]["note"]
    assert by_shots[1]["mean"] is not None
    assert "train_h" not in capsys.readouterr().out


# ------------------------------------------------------- from the loop to the report


@pytest.fixture(scope="module")
def loop_outputs(tmp_path_factory):
    """The loop on the default digits encoder, writing both of its feature layouts."""
    from repeval_ref.cli.loop import main as loop_main

    d = tmp_path_factory.mktemp("loop")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = loop_main(
            [
                "--pretrain-epochs",
                "1",
                "--probe-epochs",
                "1",
                "--cache-dir",
                str(d / "cache"),
                "--save-features",
                str(d / "saved"),
            ]
        )
    assert rc == 0
    return d, err.getvalue()


@pytest.mark.slow
def test_loop_features_go_straight_into_report(loop_outputs, capsys):
    d, log = loop_outputs
    assert f"repeval report {d / 'saved'}" in log
    assert main(["report", str(d / "saved"), "--out", str(d / "r1")] + FAST) == 0
    rep = json.loads((d / "r1" / "report.json").read_text())
    saved = np.load(d / "saved" / "train.npz")
    assert rep["inputs"]["n_train"] == saved["labels"].size and rep["inputs"]["n_classes"] == 10
    assert rep["linear_probe"]["accuracy"] > 0.5  # a trained encoder, labels carried along
    # the cache folder of the model (MODEL/digits-train, MODEL/digits-test) reads the same
    assert main(["report", str(d / "cache" / "small-cnn"), "--out", str(d / "r2")] + FAST) == 0
    rep2 = json.loads((d / "r2" / "report.json").read_text())
    assert rep2["knn"]["curve"] == rep["knn"]["curve"]
    # and one cache folder, or its __flat.npy (labels.npy beside it), as TRAIN and TEST
    m = d / "cache" / "small-cnn"
    assert (
        main(
            [
                "report",
                str(m / "digits-train"),
                str(m / "digits-test" / "__flat.npy"),
                "--out",
                str(d / "r3"),
            ]
            + FAST
        )
        == 0
    )
    assert json.loads((d / "r3" / "report.json").read_text())["knn"]["curve"] == rep["knn"]["curve"]
    capsys.readouterr()
    assert (
        main(["compare", str(m), str(d / "saved"), "--quiet", "--boot", "200", "--probe-c", "1"])
        == 0
    )
    assert "linear CKA" in capsys.readouterr().out


@pytest.mark.slow
def test_report_test_fraction_splits_one_file_with_a_seed(files, digits):
    from sklearn.model_selection import train_test_split

    X = np.vstack([digits[0], digits[2]])
    y = np.concatenate([digits[1], digits[3]])
    np.savez(files / "all.npz", features=X, labels=y)
    reps = []
    for seed, name in ((3, "s3"), (3, "s3b"), (4, "s4")):
        assert (
            main(
                [
                    "report",
                    str(files / "all.npz"),
                    "--test-fraction",
                    "0.3",
                    "--seed",
                    str(seed),
                    "--out",
                    str(files / name),
                ]
                + FAST
            )
            == 0
        )
        reps.append(json.loads((files / name / "report.json").read_text()))
    _, te = train_test_split(np.arange(y.size), test_size=0.3, stratify=y, random_state=3)
    assert reps[0]["inputs"]["n_test"] == te.size and reps[0]["inputs"]["split"]["seed"] == 3
    assert reps[0]["knn"]["curve"] == reps[1]["knn"]["curve"]  # same seed, same numbers
    assert reps[0]["knn"]["curve"] != reps[2]["knn"]["curve"]
    from repeval_ref import knn_classify

    tr = np.setdiff1d(np.arange(y.size), te)
    pred = knn_classify(X[tr], y[tr], X[te], 20, 0.07, 10)
    k20 = [e for e in reps[0]["knn"]["curve"] if e["k"] == 20][0]
    assert k20["correct"] == int(np.sum(pred == y[te]))


def test_report_needs_test_or_fraction(files, capsys):
    assert main(["report", str(files / "train.npz"), "--out", str(files / "x")] + FAST) == 2
    assert "--test-fraction" in _error(capsys)
    assert (
        main(
            [
                "report",
                str(files / "train.npz"),
                str(files / "test.npz"),
                "--test-fraction",
                "0.2",
                "--out",
                str(files / "x"),
            ]
            + FAST
        )
        == 2
    )
    assert "cannot be combined" in _error(capsys)


def test_some_unseen_test_labels_are_a_verdict_not_an_error(tmp_path, small, capsys):
    X, y = small
    yt = y.copy()
    yt[:4] = 9
    assert _run_report(_write_pair(tmp_path, X, y, X, yt), tmp_path / "o") == 0
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    v = {x["name"]: x for x in rep["verdicts"] if x["name"] == "unseen_labels"}["unseen_labels"]
    assert v["fired"] and v["numbers"]["rows"] == 4
    assert "never occur in TRAIN" in capsys.readouterr().out


def test_k_nn_curve_equals_knn_classify_at_every_k(report, digits):
    from repeval_ref import knn_classify

    rep = json.loads((report[1] / "report.json").read_text())
    Xtr, ytr, Xte, yte = digits
    for e in rep["knn"]["curve"]:
        assert e["correct"] == int(np.sum(knn_classify(Xtr, ytr, Xte, e["k"], 0.07, 10) == yte)), e[
            "k"
        ]


def test_no_source_file_shorthands_in_help_or_output(report, capsys):
    import re

    texts = [report[2], (report[1] / "report.md").read_text()]
    for argv in (
        ["--help"],
        ["report", "--help"],
        ["compare", "--help"],
        ["leaderboard", "--help"],
    ):
        with pytest.raises(SystemExit):
            main(argv)
        texts.append(capsys.readouterr().out)
    for t in texts:
        # seed file numbers ("002") and private names ("RankMe*") must not reach the user
        assert not re.search(r"(?<![\d.,])00[0-3](?![\d.%])", t) and "RankMe*" not in t, t[:200]
    assert "RankMe / d" in report[2] and "Self-Cluster" in report[2]


def test_compare_says_how_to_read_interval_and_p_together(tmp_path, capsys):
    X, y = load_digits(return_X_y=True)
    np.savez(tmp_path / "a.npz", features=X[:300], labels=y[:300])
    np.savez(
        tmp_path / "b.npz",
        features=X[:300] + np.random.default_rng(0).normal(size=(300, 64)) * 3,
        labels=y[:300],
    )
    assert (
        main(
            [
                "compare",
                str(tmp_path / "a.npz"),
                str(tmp_path / "b.npz"),
                "--quiet",
                "--boot",
                "300",
                "--probe-c",
                "1",
            ]
        )
        == 0
    )
    out = " ".join(capsys.readouterr().out.split())
    assert "how to read them together" in out and "p < 0.05" in out


# ------------------------------------------------- repeval loop / repeval zoo: one command


def _program(*args, timeout=120, cwd=None):
    import os

    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", COLUMNS="100")
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd
    )


def test_repeval_lists_loop_and_zoo(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "{report,compare,leaderboard,suite,loop,zoo}" in text
    assert "repeval loop --help" in text and "python -m repeval_ref.zoo" in text
    assert "repeval_ref.loop" not in text


@pytest.mark.slow
@pytest.mark.parametrize(
    "old, new",
    [
        (["-m", "repeval_ref.zoo"], ["-m", "repeval_ref.cli", "zoo"]),
        (["-m", "repeval_ref.zoo", "table"], ["-m", "repeval_ref.cli", "zoo", "table"]),
    ],
)
def test_help_of_repeval_zoo_is_that_of_python_m_repeval_ref_zoo(old, new):
    """Same arguments, same help; only the program name differs (and so argparse's line
    wrapping)."""
    a, b = _program(*old, "--help"), _program(*new, "--help")
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    old_prog, new_prog = "python -m repeval_ref." + old[1].rsplit(".", 1)[1], "repeval " + new[2]
    assert f"usage: {old_prog}" in a.stdout and f"usage: {new_prog}" in b.stdout
    assert " ".join(a.stdout.replace(old_prog, new_prog).split()) == " ".join(b.stdout.split())


@pytest.mark.slow
def test_zoo_table_needs_its_output_path(tmp_path):
    """`zoo table` writes where its caller says: --out is required, nothing goes to
    benchmarks/results."""
    for cmd in (["-m", "repeval_ref.zoo", "table"], ["-m", "repeval_ref.cli", "zoo", "table"]):
        proc = _program(*cmd, cwd=tmp_path)
        assert proc.returncode == 2
        assert "the following arguments are required: --out" in proc.stderr
    from repeval_ref.zoo.table import write_table

    with pytest.raises(TypeError):
        write_table()  # noqa - the path is required
    with pytest.raises(ValueError, match="path"):
        write_table("", ["raw_pixels"])  # refused before any computation
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # trains and evaluates the zoo's probes
def test_repeval_zoo_table_real_run(tmp_path):
    """One real run of `repeval zoo` (about a minute): the raw-pixel row, written at --out only."""
    out = tmp_path / "t" / "zoo_table.json"
    proc = _program(
        "-m",
        "repeval_ref.cli",
        "zoo",
        "table",
        "--out",
        str(out),
        "--only",
        "raw_pixels",
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "raw_pixels done" in proc.stdout
    table = json.loads(out.read_text())
    assert [r["name"] for r in table["rows"]] == ["raw_pixels"]
    assert 0.5 < table["rows"][0]["knn20"]["acc"] <= 1
    assert (tmp_path / "t" / "zoo_table.md").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


@pytest.mark.slow  # one shipped encoder through the manifest's protocols (features from the cache)
def test_repeval_zoo_evaluate_writes_out_and_leaves_the_package_unchanged(tmp_path):
    """`zoo evaluate` writes its accuracies at --out; the shipped manifest keeps every byte."""
    from repeval_ref.zoo.build import MANIFEST

    before = pathlib.Path(MANIFEST).read_bytes()
    assert (
        _program("-m", "repeval_ref.cli", "zoo", "evaluate", cwd=tmp_path).returncode == 2
    )  # --out needed
    out = tmp_path / "ev" / "zoo_evaluation.json"
    proc = _program(
        "-m",
        "repeval_ref.cli",
        "zoo",
        "evaluate",
        "--only",
        "random_cnn",
        "--out",
        str(out),
        timeout=900,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert pathlib.Path(MANIFEST).read_bytes() == before
    result = json.loads(out.read_text())["encoders"]["random_cnn"]
    shipped = json.loads(before)["encoders"]["random_cnn"]
    assert set(result["checkpoints"]) == set(shipped["checkpoints"])
    assert result["test"]["n_test"] == 10000 and 0.1 < result["test"]["knn20"] <= 1
    # the same protocol as the shipped record: the recomputed accuracies lie close to it
    assert abs(result["test"]["knn20"] - shipped["test"]["knn20"]) < 0.02
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ev"]


# ------------------------------------------------------------- files at real sizes


def _sparse_npy(path, shape, dtype=np.float32):
    """A .npy file whose header says ``shape``, its data a hole of zeros (no disk space used)."""
    header = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
        "fortran_order": False,
        "shape": shape,
    }
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.truncate(fh.tell() + int(np.prod(shape)) * np.dtype(dtype).itemsize)
    return path


def test_a_wrong_label_count_is_refused_from_the_headers(tmp_path, capsys):
    """An 8 GiB feature file (a sparse hole) with one label too few: refused before any row is
    read."""
    feats = _sparse_npy(tmp_path / "train_features.npy", (1 << 21, 1024))
    np.save(tmp_path / "train_labels.npy", np.zeros((1 << 21) - 1, dtype=np.int64))
    assert main(["report", str(feats), "--test-fraction", "0.2", "--out", str(tmp_path / "o")]) == 2
    line = _error(capsys)
    assert f"{1 << 21} feature rows but {(1 << 21) - 1} labels" in line and str(feats) in line
    assert capsys.readouterr().err == ""  # no stage line either: nothing was read
    # the same check from the members of an .npz archive, before they are loaded
    np.savez(
        tmp_path / "short.npz", features=np.ones((30, 4), np.float32), labels=np.zeros(29, np.int64)
    )
    assert main(["report", str(tmp_path / "short.npz"), "--test-fraction", "0.2"]) == 2
    assert "30 feature rows but 29 labels" in _error(capsys)


def test_float32_features_stay_float32_and_npy_stays_mapped(tmp_path):
    from repeval_ref.cli._files import read_file

    X = np.arange(40, dtype=np.float32).reshape(10, 4) + 1
    np.save(tmp_path / "a_features.npy", X)
    np.save(tmp_path / "a_labels.npy", np.arange(10) % 2)
    x, y, _ = read_file(tmp_path / "a_features.npy", "TRAIN")
    assert isinstance(x, np.memmap) and x.dtype == np.float32 and np.array_equal(x, X)
    assert y.dtype == np.int64 and np.array_equal(y, np.arange(10) % 2)
    np.savez(tmp_path / "b.npz", features=X.astype(np.float64), labels=np.arange(10) % 2)
    assert load_features(tmp_path / "b.npz", "TRAIN")[0].dtype == np.float64
    np.savez(tmp_path / "c.npz", features=X.astype(np.int16), labels=np.arange(10) % 2)
    assert (
        load_features(tmp_path / "c.npz", "TRAIN")[0].dtype == np.float64
    )  # other dtypes: float64


def test_a_nan_deep_in_a_file_is_found_block_by_block(tmp_path, capsys):
    """The finite check walks the rows in blocks and still names the first bad row."""
    from repeval_ref.cli import _files, _inputs

    X = np.ones((500, 8), np.float32)
    X[377, 5] = np.nan
    np.save(tmp_path / "f_features.npy", X)
    np.save(tmp_path / "f_labels.npy", np.arange(500) % 3)
    blocks = _files.row_blocks(X, block_bytes=8 * 4 * 64)
    assert len(blocks) == 8 and blocks[0] == slice(0, 64) and blocks[-1] == slice(448, 500)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_files, "BLOCK_BYTES", 8 * 4 * 64)
        assert len(_files.row_blocks(X)) == 8
        assert (
            main(["report", str(tmp_path / "f_features.npy"), "--test-fraction", "0.2", "--quiet"])
            == 2
        )
    assert "NaN or infinite values (first in row 377)" in _error(capsys)
    assert np.array_equal(_inputs.zero_rows(np.vstack([X[:3], np.zeros((1, 8)), X[:70]])), [3])


def test_stage_lines_reach_a_log_at_once(files, tmp_path):
    """Off a terminal, the first line names the file, its shape and dtype; every stage starts a
    line."""
    proc = _program(
        "-m",
        "repeval_ref.cli",
        "report",
        str(files / "train.npz"),
        str(files / "test.npz"),
        "--out",
        str(tmp_path / "o"),
        "--probe-c",
        "1",
        "--draws",
        "2",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == f"reading TRAIN file {files / 'train.npz'}: 360 x 64 float32 ..."
    for stage in (
        "k-NN: 180 queries ...",
        "linear probe: 2 fits ...",
        "ridge probe (exact leave-one-out) ...",
        "low-shot nearest class mean: 3 shot counts ...",
        "label-free metrics: 5 groups ...",
    ):
        assert stage in lines, stage
    assert "\r" not in proc.stderr


def test_terminal_tables_fit_100_columns(tmp_path, capsys):
    from repeval_ref.cli._render import table

    rows = [["a" * 40, "word " * 30, "x"], ["b", "c", "d"]]
    text = table(rows, ["first", "second column", "third"])
    assert max(map(len, text.splitlines())) <= 100
    assert " ".join(text.split()).count("word") == 30  # wrapped, nothing lost
    assert table([["a", "b"]], ["h1", "h2"]) == "h1  h2\n--  --\na   b"
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(3), 40)
    centres = rng.normal(size=(3, 10))
    for i, name in enumerate(
        ("an_encoder_with_a_long_descriptive_name", "second_encoder_name", "third")
    ):
        np.savez(
            tmp_path / f"{name}.npz",
            features=centres[y] + (i + 1) * rng.normal(size=(120, 10)),
            labels=y,
        )
    assert (
        main(
            [
                "leaderboard",
                str(tmp_path),
                "--out",
                str(tmp_path / "lb"),
                "--quiet",
                "--probe-c",
                "1",
                "--draws",
                "2",
                "--boot",
                "200",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines() if not line.startswith("wrote ")) <= 100, out
    assert (
        "5-shot" in (tmp_path / "lb" / "leaderboard.md").read_text()
    )  # the details are in the files


def test_a_split_of_a_npy_file_is_mapped_not_copied(tmp_path):
    """``--test-fraction`` on a ``.npy`` file: both parts are read-only float32 memory maps
    holding the rows of the stratified split, and no temporary file is left behind."""
    import glob
    import tempfile

    from repeval_ref._blocks import is_read_only_map
    from repeval_ref.cli._files import rows_to_map
    from repeval_ref.cli._inputs import load_split, stratified_split

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6)).astype(np.float32)
    y = np.arange(300) % 3
    np.save(tmp_path / "f_features.npy", X)
    np.save(tmp_path / "f_labels.npy", y)
    before = set(glob.glob(f"{tempfile.gettempdir()}/repeval-rows-*"))
    xtr, ytr, xte, yte, src = load_split(tmp_path / "f_features.npy", None, test_fraction=0.2)
    tr, te = stratified_split(y, 0.2, 0)
    for part, rows in ((xtr, tr), (xte, te)):
        assert is_read_only_map(part) and part.dtype == np.float32
        np.testing.assert_array_equal(part, X[rows])
    assert np.array_equal(ytr, y[tr]) and np.array_equal(yte, y[te]) and src["test"] is None
    assert set(glob.glob(f"{tempfile.gettempdir()}/repeval-rows-*")) == before
    # a copy a block at a time gives the same rows, in the order asked
    rows = np.array([299, 0, 7, 7, 150])
    np.testing.assert_array_equal(rows_to_map(X, rows, block_bytes=24), X[rows])
    with pytest.raises(ValueError, match="rows"):
        rows_to_map(X, np.array([300]))
