"""``repeval leaderboard``: ranking, intervals, corrected pairwise tests, and bad input."""

import json

import numpy as np
import pytest

from repeval_ref.cli import main
from repeval_ref.cli._leaderboard_stats import pairwise

FAST = ["--quiet", "--probe-c", "0.1,1", "--draws", "2", "--boot", "500", "--id-batch", "100"]
FILES = ("leaderboard.csv", "leaderboard.md", "leaderboard.json", "leaderboard.html")


def _encoders(n=900, d=16, K=5, noises=(2.0, 3.5, 6.0), seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(K), n // K)
    rng.shuffle(y)
    centres = 2.0 * rng.normal(size=(K, d))
    return y, [centres[y] + s * rng.normal(size=(n, d)) for s in noises]


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    d = tmp_path_factory.mktemp("lb")
    y, feats = _encoders()
    names = ["clean", "noisy", "noisiest"]
    for name, X in zip(names, feats):
        np.savez(d / f"{name}.npz", features=X, labels=y)
    # listed in scrambled order: the ranking must not follow the input order
    (d / "list.toml").write_text(
        "".join(
            f'[[encoder]]\nname = "{n}"\npath = "{n}.npz"\nmethod = "{m}"\n\n'
            for n, m in (
                ("noisy", "contrastive"),
                ("noisiest", "supervised"),
                ("clean", "contrastive"),
            )
        )
    )
    out = d / "out"
    rc = main(["leaderboard", str(d / "list.toml"), "--out", str(out)] + FAST)
    return rc, d, out, json.loads((out / "leaderboard.json").read_text())


@pytest.mark.slow
def test_ranks_encoders_in_order_of_noise(board):
    rc, _, out, res = board
    assert rc == 0
    assert [r["name"] for r in res["ranking"]] == ["clean", "noisy", "noisiest"]
    for p in ("knn", "probe"):
        acc = {r["name"]: r[p]["accuracy"] for r in res["encoders"]}
        assert acc["clean"] > acc["noisy"] > acc["noisiest"]
    assert all(r["separated_from_next"] for r in res["ranking"][:-1])
    for name in FILES:
        assert (out / name).stat().st_size > 0


def test_pairwise_p_values_are_holm_corrected(board):
    from statsmodels.stats.multitest import multipletests

    res = board[3]
    assert res["settings"]["correction"] == "holm"
    for proto in ("knn", "probe"):
        pairs = res["pairs"][proto]
        assert len(pairs) == 3
        raw = [p["mcnemar_p"] for p in pairs]
        np.testing.assert_allclose(
            [p["mcnemar_p_adjusted"] for p in pairs],
            multipletests(raw, method="holm")[1],
            atol=1e-15,
        )
        for p in pairs:
            lo, hi = p["bootstrap95"]
            assert lo <= p["gain_b_minus_a"] <= hi


def test_html_is_self_contained_and_warns_about_methods(board):
    out, res = board[2], board[3]
    page = (out / "leaderboard.html").read_text()
    assert page.count("data:image/png;base64,") >= 2
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "different training methods" in res["method_warning"] and "Warning" in page
    md = (out / "leaderboard.md").read_text()
    assert "Holm" in md and "Spearman" in md and "Wilson" in md


def test_label_free_rankings_and_spearman(board):
    from scipy.stats import spearmanr

    res = board[3]
    acc = [r["probe"]["accuracy"] for r in res["encoders"]]
    rank = res["label_free_rankings"]["rankme"]
    score = [r["label_free"]["rankme"] for r in res["encoders"]]
    assert rank["order"] == [
        res["encoders"][i]["name"] for i in np.argsort(-np.array(score), kind="stable")
    ]
    if rank["spearman_rho"] is not None:
        assert rank["spearman_rho"] == pytest.approx(spearmanr(score, acc)[0])


def test_csv_has_one_row_per_encoder(board):
    import csv

    rows = list(csv.DictReader((board[2] / "leaderboard.csv").open()))
    assert [r["encoder"] for r in rows] == ["clean", "noisy", "noisiest"]
    assert all(
        float(r["probe_wilson_low"]) <= float(r["probe_accuracy"]) <= float(r["probe_wilson_high"])
        for r in rows
    )


@pytest.mark.slow
def test_equal_encoders_are_not_separated_and_bh_is_named(tmp_path):
    y, feats = _encoders(n=400, noises=(3.0, 3.0), seed=3)
    for i, X in enumerate(feats):
        np.savez(tmp_path / f"e{i}.npz", features=X, labels=y)
    out = tmp_path / "o"
    assert (
        main(
            [
                "leaderboard",
                str(tmp_path / "e0.npz"),
                str(tmp_path / "e1.npz"),
                "--correction",
                "bh",
                "--out",
                str(out),
            ]
            + FAST
        )
        == 0
    )
    res = json.loads((out / "leaderboard.json").read_text())
    assert res["ranking"][0]["separated_from_next"] is False
    assert "NOT separated" in (out / "leaderboard.md").read_text()
    assert "Benjamini-Hochberg" in res["settings"]["correction_name"]
    assert "not given" in res["method_warning"]


@pytest.mark.slow
def test_a_folder_of_files(tmp_path):
    y, feats = _encoders(n=300, noises=(2.0, 5.0), seed=4)
    enc = tmp_path / "encs"
    enc.mkdir()
    np.savez(enc / "a.npz", features=feats[0], labels=y)
    np.save(enc / "b_features.npy", feats[1])
    np.save(enc / "b_labels.npy", y)
    out = tmp_path / "o"
    assert main(["leaderboard", str(enc), "--out", str(out)] + FAST) == 0
    res = json.loads((out / "leaderboard.json").read_text())
    assert sorted(r["name"] for r in res["encoders"]) == ["a", "b_features"]


def test_interval_coverage_in_a_seeded_simulation():
    """Wilson intervals and the paired bootstrap intervals cover the truth about 95 % of the
    time."""
    from repeval_ref.cli._evaluate import acc_entry

    rng = np.random.default_rng(0)
    n, pa, pb, sims = 300, 0.70, 0.78, 400
    hit_w = hit_b = 0
    for s in range(sims):
        # paired outcomes: a shared difficulty makes the two encoders' errors correlated
        u = rng.random(n)
        a, b = u < pa, u < pb
        flip = rng.random(n) < 0.1
        a = np.where(flip, rng.random(n) < pa, a)
        lo, hi = acc_entry(a)["wilson95"]
        hit_w += lo <= pa <= hi
        pair = pairwise(["a", "b"], [a, b], 400, s, "holm")[0]
        lo, hi = pair["bootstrap95"]
        hit_b += lo <= pb - pa <= hi
    assert 0.92 <= hit_w / sims <= 0.98
    assert 0.90 <= hit_b / sims <= 0.98


# ------------------------------------------------------------------------- bad input


def _one_line_error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("repeval: error:"), err
    return err[0]


def test_bad_inputs_give_one_line_status_2_and_write_nothing(tmp_path, capsys):
    y, feats = _encoders(n=200, noises=(2.0, 4.0), seed=5)
    np.savez(tmp_path / "a.npz", features=feats[0], labels=y)
    np.savez(tmp_path / "short.npz", features=feats[1][:-5], labels=y[:-5])
    np.savez(tmp_path / "perm.npz", features=feats[1], labels=y[::-1])
    other = y.copy()
    other[other == 4] = 7
    np.savez(tmp_path / "classes.npz", features=feats[1], labels=other)
    (tmp_path / "empty").mkdir()
    (tmp_path / "none.toml").write_text("# no encoders\n")
    (tmp_path / "twice.toml").write_text(
        '[[encoder]]\npath = "a.npz"\n[[encoder]]\npath = "a.npz"\nname = "x"\n'
    )
    (tmp_path / "broken.toml").write_text("[[encoder]\npath = 1\n")
    cases = [
        (["a.npz", "short.npz"], "195 rows but a has 200"),
        (["a.npz", "perm.npz"], "different order"),
        (["a.npz", "classes.npz"], "mismatched classes"),
        (["a.npz", "a.npz"], "given twice"),
        (["twice.toml"], "given twice"),
        (["empty"], "no feature files"),
        (["none.toml"], "no encoders given"),
        ([], "no encoders given"),
        (["broken.toml"], "not valid TOML"),
        (["a.npz"], "at least 2 encoders"),
        (["a.npz", "missing.npz"], "not found"),
    ]
    for names, text in cases:
        out = tmp_path / "out"
        rc = main(["leaderboard", *[str(tmp_path / n) for n in names], "--out", str(out)] + FAST)
        assert rc == 2, names
        msg = _one_line_error(capsys)
        assert text in msg, (names, msg)
        assert not out.exists(), names  # nothing half-written


def test_failed_rename_leaves_no_partial_files(tmp_path, monkeypatch):
    from repeval_ref.cli import _render

    calls = {"n": 0}
    real = _render.os.fdopen

    def flaky(fd, *a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            import os

            os.close(fd)
            raise OSError("disk full")
        return real(fd, *a, **k)

    monkeypatch.setattr(_render.os, "fdopen", flaky)
    with pytest.raises(OSError):
        _render.write_files(tmp_path, {"a.txt": "1", "b.txt": "2", "c.txt": "3"})
    assert sorted(p.name for p in tmp_path.iterdir()) == []
