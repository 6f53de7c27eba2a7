"""``repeval suite`` end to end on small fake tasks: files, numbers checked independently, cache,
errors.

The task registry (:mod:`repeval_ref.datasets.transfer`) is replaced by three small
tasks (one with 56 x 56 images, as the cluttered task has); the encoders are two zoo
encoders (their shipped weights) and a feature folder of raw pixels.
"""

import contextlib
import io
import json
import re

import numpy as np
import pytest
from scipy.stats import kendalltau, rankdata

from repeval_ref import knn_classify, wilson_interval
from repeval_ref.cli import main

QUICK = ["--quiet", "--probe-c", "0.1,1", "--rank-boot", "200", "--boot", "2000"]
K = 4


def _task_images(seed, side, n):
    """Images whose class sets which quadrant is bright, with noise; labels balanced."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(K), n // K)
    rng.shuffle(y)
    x = rng.integers(10, 90, size=(n, side, side))
    h = side // 2
    for c in range(K):
        r, q = divmod(c, 2)
        x[y == c, r * h : (r + 1) * h, q * h : (q + 1) * h] += 140
    return x.clip(0, 255).astype(np.uint8), y.astype(np.int64)


FAKE = {"alpha": (28, 1), "beta": (28, 2), "gamma": (56, 3)}


def _fake_data():
    data = {}
    for t, (side, seed) in FAKE.items():
        data[t] = {
            "train": _task_images(seed, side, 80),
            "test": _task_images(seed + 100, side, 48),
        }
    return data


@contextlib.contextmanager
def fake_tasks(data=None):
    """The transfer registry replaced by the fake tasks (what ``repeval suite`` reads through
    it)."""
    from repeval_ref.datasets import transfer

    data = data or _fake_data()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(transfer, "TRANSFER_TASKS", tuple(data))
        mp.setattr(transfer, "available_tasks", lambda: tuple(data))
        mp.setattr(transfer, "load_task", lambda name, split: data[name][split])
        mp.setattr(
            transfer,
            "task_card",
            lambda name: {
                "name": name,
                "title": f"fake {name} | test",
                "licence": "CC0",
                "image_size": data[name]["train"][0].shape[1:],
                "shift": "none",
                "n_train": 80,
                "n_test": 48,
            },
        )
        yield data


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _pixel_folder(root, data, name="pixels"):
    """A feature folder: each task's raw pixels as a loop folder (train.npz, test.npz)."""
    for t, parts in data.items():
        (root / name / t).mkdir(parents=True)
        for split, (x, y) in parts.items():
            np.savez(
                root / name / t / f"{split}.npz",
                features=x.reshape(len(x), -1).astype(np.float32),
                labels=y,
            )
    return root / name


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    with fake_tasks() as data:
        pixels = _pixel_folder(root, data)
        argv = [
            "suite",
            "zoo:supervised_cnn",
            "random_vit",
            str(pixels),
            "--out",
            str(root / "out"),
            "--cache-dir",
            str(root / "cache"),
        ] + QUICK
        first = _run(argv)
        second = _run(argv[: -len(QUICK)] + QUICK + ["--out", str(root / "out2")])
    assert first[0] == 0 and second[0] == 0, (first[2], second[2])
    return {
        "root": root,
        "data": data,
        "pixels": pixels,
        "first": first,
        "second": second,
        "json": json.loads((root / "out" / "suite.json").read_text()),
        "json2": json.loads((root / "out2" / "suite.json").read_text()),
    }


@pytest.mark.slow
def test_the_four_formats_and_the_heat_map_are_written(run):
    out = run["root"] / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "suite.csv",
        "suite.html",
        "suite.json",
        "suite.md",
        "suite_heatmap.png",
    ]
    assert (out / "suite_heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    s = run["json"]
    assert s["tasks"] == list(FAKE) and [e["name"] for e in s["encoders"]] == [
        "supervised_cnn",
        "random_vit",
        "pixels",
    ]
    import csv

    rows = list(csv.DictReader(io.StringIO((out / "suite.csv").read_text())))
    assert len(rows) == 3 * 3  # protocols x encoders
    for r in rows:
        if r["protocol"] == "knn":
            e = s["per_task"]["gamma"]["results"][
                [x["name"] for x in s["encoders"]].index(r["encoder"])
            ]["knn"]
            assert float(r["gamma"]) == pytest.approx(e["accuracy"]) and r["seed"] == "0"
    printed = run["first"][1]
    assert re.search(r"\bseed 0\b", printed)
    assert "features: 0 read from the cache, 6 computed" in printed


def test_a_second_run_reads_every_cache_and_gives_the_same_numbers(run):
    assert (
        "features: 6 read from the cache, 0 computed; evaluations: 9 read from the cache, 0 "
        "computed" in run["second"][1]
    )
    a, b = run["json"], run["json2"]
    assert a["per_task"] == b["per_task"] and a["ranking"] == b["ranking"]


def test_the_feature_folder_cells_equal_an_independent_count(run):
    s, data = run["json"], run["data"]
    i = [e["name"] for e in s["encoders"]].index("pixels")
    for t, parts in data.items():
        (xtr, ytr), (xte, yte) = parts["train"], parts["test"]
        pred = knn_classify(
            xtr.reshape(len(xtr), -1).astype(np.float64),
            ytr,
            xte.reshape(len(xte), -1).astype(np.float64),
            20,
            0.07,
            K,
        )
        e = s["per_task"][t]["results"][i]["knn"]
        k = int(np.sum(pred == yte))
        assert (e["correct"], e["n"]) == (k, yte.size)
        np.testing.assert_allclose(e["wilson95"], wilson_interval(k, yte.size))
        # the task's own parts, never re-split
        assert s["per_task"][t]["n_train"] == 80 and s["per_task"][t]["n_test"] == 48


def test_ranks_mean_rank_and_tau_agree_with_scipy(run):
    s = run["json"]
    for p in ("knn", "probe"):
        acc = np.array(
            [[s["per_task"][t]["results"][i][p]["accuracy"] for t in s["tasks"]] for i in range(3)]
        )
        rk = s["ranking"][p]
        ranks = np.column_stack(
            [rankdata(-acc[:, j], method="average") for j in range(acc.shape[1])]
        )
        np.testing.assert_allclose(rk["ranks"], ranks)
        np.testing.assert_allclose(rk["mean_rank"], ranks.mean(axis=1))
        for a in range(3):
            for b in range(3):
                ref = kendalltau(acc[:, a], acc[:, b]).statistic
                got = rk["tau"][a][b]
                assert (got is None and np.isnan(ref)) or got == pytest.approx(ref)
        for lo, hi in rk["mean_rank_interval"]:
            assert 1 <= lo <= hi <= 3


@pytest.mark.slow
def test_per_task_corrections_equal_statsmodels(run):
    from statsmodels.stats.multitest import multipletests

    s = run["json"]
    for t in s["tasks"]:
        for p in ("knn", "probe"):
            pairs = s["per_task"][t]["pairs"][p]
            assert len(pairs) == 3  # every pair of the 3 encoders, within this task only
            raw = [q["mcnemar_p"] for q in pairs]
            np.testing.assert_allclose(
                [q["mcnemar_p_adjusted"] for q in pairs],
                multipletests(raw, method="holm")[1],
                atol=1e-12,
            )


def _feature_suite(root, n_enc=3, seed=0):
    """Feature folders only (fast): n_enc encoders of rising noise on three tasks."""
    rng = np.random.default_rng(seed)
    centres = 2.0 * rng.normal(size=(K, 10))
    folders = []
    for e in range(n_enc):
        for t in ("t1", "t2", "t3"):
            y = np.repeat(np.arange(K), 40)
            np.random.default_rng([seed, len(t), ord(t[1])]).shuffle(y)
            x = centres[y] + (1.5 + 0.7 * e) * rng.normal(size=(y.size, 10))
            d = root / f"enc{e}" / t
            d.mkdir(parents=True)
            np.savez(d / "train.npz", features=x[:100], labels=y[:100])
            np.savez(d / "test.npz", features=x[100:], labels=y[100:])
        folders.append(root / f"enc{e}")
    return folders


def test_bh_correction_and_rank_intervals_recomputed_from_the_folders(tmp_path):
    from statsmodels.stats.multitest import multipletests

    from repeval_ref.rank_agreement import rank_bootstrap

    folders = _feature_suite(tmp_path, n_enc=4)
    rc, _, err = _run(
        [
            "suite",
            *map(str, folders),
            "--out",
            str(tmp_path / "o"),
            "--correction",
            "bh",
            "--protocols",
            "knn",
            "--no-cache",
            "--seed",
            "5",
        ]
        + QUICK
    )
    assert rc == 0, err
    s = json.loads((tmp_path / "o" / "suite.json").read_text())
    correct = []
    for t in s["tasks"]:
        rows = []
        for f in folders:
            tr, te = np.load(f / t / "train.npz"), np.load(f / t / "test.npz")
            rows.append(
                knn_classify(tr["features"], tr["labels"], te["features"], 20, 0.07, K)
                == te["labels"]
            )
        correct.append(np.stack(rows))
        pairs = s["per_task"][t]["pairs"]["knn"]
        assert len(pairs) == 6
        np.testing.assert_allclose(
            [q["mcnemar_p_adjusted"] for q in pairs],
            multipletests([q["mcnemar_p"] for q in pairs], method="fdr_bh")[1],
            atol=1e-12,
        )
    ref = rank_bootstrap(correct, n_boot=200, seed=5)
    rk = s["ranking"]["knn"]
    np.testing.assert_allclose(rk["mean_rank_interval"], ref["mean_rank_interval"])
    got = np.array(
        [[[np.nan if v is None else v for v in c] for c in r] for r in rk["tau_interval"]]
    )
    np.testing.assert_allclose(
        got, ref["tau_interval"]
    )  # NaN (tau never defined) where both say so
    assert set(s["ranking"]) == {"knn"} and s["settings"]["protocols"] == ["knn"]


def test_the_markdown_tables_parse_with_the_header_s_column_count(run):
    from test_cli_consistency import _check_tables

    html = _check_tables((run["root"] / "out" / "suite.md").read_text())
    assert "<td>fake alpha | test</td>" in html  # an escaped pipe stays inside its cell


def _contrast(fg, bg):
    def lum(h):
        c = [int(h[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        c = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    a, b = sorted((lum(fg), lum(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def test_the_html_is_self_contained_and_marked_up_for_screen_readers(run):
    page = (run["root"] / "out" / "suite.html").read_text()
    refs = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]+)""", page, flags=re.I)
    assert refs and all(r.startswith("data:image/png;base64,") for r in refs), refs
    assert not re.search(r"https?:|url\(|@import|<script|<link", page, flags=re.I)
    assert '<html lang="en">' in page and "<title>" in page
    assert page.count("<table>") == page.count("<caption>") > 0
    ths = re.findall(r"<th[ >][^>]*", page)
    assert ths and all('scope="col"' in t or 'scope="row"' in t for t in ths)
    alts = re.findall(r'<img alt="([^"]*)"', page)
    assert len(alts) == 1 and len(alts[0]) > 40
    # every text colour of the style sheet on every background it is set on: WCAG AA (4.5:1)
    for bg in ("#ffffff", "#e8e8e8", "#f4f4f4"):
        assert _contrast("#1a1a1a", bg) >= 4.5
    assert _contrast("#767676", "#ffffff") >= 4.5  # the cell borders
    assert set(re.findall(r"#[0-9a-f]{3,6}\b", page)) <= {
        "#1a1a1a",
        "#fff",
        "#767676",
        "#e8e8e8",
        "#f4f4f4",
    }


def test_outputs_follow_the_umask(tmp_path):
    import os

    folders = _feature_suite(tmp_path, n_enc=2)
    old = os.umask(0o022)
    try:
        rc, _, err = _run(
            [
                "suite",
                *map(str, folders),
                "--out",
                str(tmp_path / "o"),
                "--no-cache",
                "--protocols",
                "knn",
            ]
            + QUICK
        )
    finally:
        os.umask(old)
    assert rc == 0, err
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "o").iterdir()} == {0o644}


def _one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("repeval: error:"), err
    return lines[0]


def test_bad_input_is_one_line_with_status_2_naming_what_was_given(tmp_path):
    folders = _feature_suite(tmp_path, n_enc=2)
    missing = tmp_path / "nosuch"
    rc, _, err = _run(
        ["suite", str(folders[0]), str(missing), "--out", str(tmp_path / "o")] + QUICK
    )
    assert rc == 2 and f"not found: {missing}" in _one_line(err)
    rc, _, err = _run(
        ["suite", str(folders[0]), "zoo:nosuch", "--out", str(tmp_path / "o")] + QUICK
    )
    assert rc == 2 and "unknown zoo encoder 'nosuch'" in _one_line(err)
    rc, _, err = _run(["suite", str(folders[0]), "--out", str(tmp_path / "o")] + QUICK)
    assert rc == 2 and "at least 2 encoders" in _one_line(err)
    (folders[1] / "t3" / "train.npz").unlink()
    (folders[1] / "t3" / "test.npz").unlink()
    (folders[1] / "t3").rmdir()
    rc, _, err = _run(["suite", *map(str, folders), "--out", str(tmp_path / "o")] + QUICK)
    assert rc == 2 and f"feature folder {folders[1]} has no task 't3'" in _one_line(err)
    rc, _, err = _run(
        [
            "suite",
            "zoo:random_vit",
            "zoo:mae_vit",
            "--backbone",
            "torchvision:resnet18",
            "--out",
            str(tmp_path / "o"),
        ]
        + QUICK
    )
    assert (
        rc == 2
        and "--backbone torchvision:resnet18 needs exactly one of --weights" in _one_line(err)
    )
    rc, _, err = _run(
        [
            "suite",
            "zoo:random_vit",
            "--backbone",
            "torchvision:resnet18",
            "--weights",
            str(tmp_path / "w.pt"),
            "--out",
            str(tmp_path / "o"),
        ]
        + QUICK
    )
    assert rc == 2 and f"not found: {tmp_path / 'w.pt'} (--weights)" in _one_line(err)
    with fake_tasks():
        rc, _, err = _run(
            [
                "suite",
                "zoo:random_vit",
                "zoo:mae_vit",
                "--tasks",
                "alpha,nosuch",
                "--out",
                str(tmp_path / "o"),
            ]
            + QUICK
        )
    assert rc == 2 and "--tasks: unknown task 'nosuch'" in _one_line(err)
    assert not (tmp_path / "o").exists()  # nothing written on bad input


def test_a_zero_row_in_a_feature_folder_names_the_file_and_row(tmp_path):
    folders = _feature_suite(tmp_path, n_enc=2)
    f = folders[1] / "t2" / "test.npz"
    z = dict(np.load(f))
    z["features"][7] = 0.0
    np.savez(f, **z)
    rc, _, err = _run(
        ["suite", *map(str, folders), "--out", str(tmp_path / "o"), "--no-cache"] + QUICK
    )
    assert rc == 2 and f"encoder enc1, task t2 file {f}: feature row 7 is all zeros" in _one_line(
        err
    )


def test_a_backbone_goes_through_the_loader_and_is_cached(tmp_path, monkeypatch):
    import torch

    import repeval_ref.backbones as B

    calls = []

    def tiny(arch, weights=None, *, library="torchvision", hub=False, keep_head=False):
        calls.append((arch, weights, library))
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 6, 3),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
        ).eval()

    monkeypatch.setattr(B, "load_backbone", tiny)
    with fake_tasks() as data:
        pixels = _pixel_folder(tmp_path, data)
        argv = [
            "suite",
            str(pixels),
            "--backbone",
            "torchvision:tiny",
            "--random-init",
            "--image-size",
            "20",
            "--out",
            str(tmp_path / "o"),
            "--cache-dir",
            str(tmp_path / "c"),
            "--protocols",
            "knn,fewshot",
            "--tasks",
            "alpha,gamma",
        ] + QUICK
        rc, out, err = _run(argv)
        assert rc == 0, err
        rc, out2, err = _run(argv)
    assert rc == 0, err
    s = json.loads((tmp_path / "o" / "suite.json").read_text())
    assert [r["dim"] for r in s["per_task"]["gamma"]["results"]] == [56 * 56, 6]
    assert calls[0] == ("tiny", None, "torchvision")
    assert "features: 0 read from the cache, 2 computed" in out
    assert "features: 2 read from the cache, 0 computed" in out2
    assert s["ranking"]["fewshot"]["mean_rank_interval"] is None  # no per-image answers to resample


def test_chunked_preparation_equals_preparing_all_images_at_once():
    """The extraction prepares images a chunk at a time; the inputs are those of one call."""
    import torch

    from repeval_ref.cli._suite_encoders import _ChunkedImages
    from repeval_ref.zoo.extraction import encoder_inputs

    x, y = _task_images(4, 28, 40)
    whole = encoder_inputs("efficientnet_lite0", x)
    data = _ChunkedImages(x, y, lambda imgs: encoder_inputs("efficientnet_lite0", imgs), chunk=7)
    stacked = torch.stack([data[i][0] for i in range(len(data))])
    torch.testing.assert_close(stacked, whole)
    assert [int(data[i][1]) for i in range(len(data))] == y.tolist()


def test_the_phases_are_timed_and_add_up_to_less_than_the_whole(run):
    t = run["json"]["timing"]
    assert set(t) == {
        "images_and_features_s",
        "evaluations_s",
        "paired_tests_s",
        "rank_bootstrap_s",
    }
    assert all(v >= 0 for v in t.values())
    assert sum(t.values()) <= run["json"]["seconds"] + 0.05


def test_threads_are_limited_inside_the_context_and_restored_after(two_threads):
    import torch
    from threadpoolctl import threadpool_info

    from repeval_ref.cli._suite_encoders import threads_limited

    before = torch.get_num_threads()
    with threads_limited(1):
        assert torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpool_info())
    assert torch.get_num_threads() == before
    with threads_limited(None):
        assert torch.get_num_threads() == before


@pytest.mark.slow
def test_efficientnet_runs_folded_in_small_batches_with_the_features_of_the_unfolded_network(
    tmp_path,
):
    """The suite's EfficientNet-Lite0: folded BatchNorms, batches of 32; features as the plain
    model's."""
    import torch

    from repeval_ref.cli._suite_encoders import EFFICIENTNET_BATCH, ImageEncoder, default_batch_size
    from repeval_ref.zoo import load
    from repeval_ref.zoo.extraction import encoder_inputs

    eff = {
        "name": "efficientnet_lite0",
        "kind": "zoo",
        "spec": "zoo:efficientnet_lite0",
        "path": None,
    }
    vit = {"name": "random_vit", "kind": "zoo", "spec": "zoo:random_vit", "path": None}
    assert default_batch_size(eff) == EFFICIENTNET_BATCH == 32 and default_batch_size(vit) == 256
    x, y = _task_images(5, 28, 12)
    with torch.no_grad():
        plain = load("efficientnet_lite0")(encoder_inputs("efficientnet_lite0", x)).numpy()
    feats = {}
    for bs in (None, 5):
        enc = ImageEncoder(eff, tmp_path / f"c{bs}", 224, bs)
        assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in enc.model().modules())
        feats[bs], hit = enc.features("t", "test", x, y)
        assert not hit
    np.testing.assert_allclose(feats[None], plain, rtol=0, atol=1e-4 * np.abs(plain).max())
    np.testing.assert_allclose(feats[5], feats[None], rtol=0, atol=1e-5 * np.abs(plain).max())


@pytest.mark.slow
def test_the_html_passes_axe_core_in_chromium(run):
    """The accessibility check of the book's pages (axe-core: no serious or critical violation)."""
    import test_book_browser as TB

    if TB._chromium() is None:
        TB._missing("chromium is not installed (`apt-get install -y chromium`)")
    axe = TB.AXE  # the book's axe-core (REPEVAL_AXE_JS overrides, as for the book)
    if not axe.exists():
        TB._missing(f"axe-core is not installed ({axe} missing); run `make axe`")
    gen = TB.browser.__wrapped__()
    browser = next(gen)
    try:
        browser.call("Page.navigate", url=(run["root"] / "out" / "suite.html").as_uri())
        browser.wait_event("Page.loadEventFired", timeout=60)
        browser.evaluate(axe.read_text())
        violations = browser.evaluate(TB._AXE_RUN, await_promise=True)
        requests = [
            ev["params"]["request"]["url"]
            for ev in browser.events
            if ev.get("method") == "Network.requestWillBeSent"
        ]
    finally:
        with contextlib.suppress(StopIteration):
            next(gen)
    assert not [u for u in requests if re.match(r"https?://", u)]
    assert not [v for v in violations if v["impact"] in ("serious", "critical")], violations


def test_heat_map_labels_are_never_clipped(run):
    """Long encoder and task names: the PNG keeps a blank margin on every side, no label cut."""
    import copy

    import matplotlib.image as mpimg

    from repeval_ref.cli._suite_render import heatmap_png

    suite = copy.deepcopy(run["json"])
    for e in suite["encoders"]:
        e["name"] = "an_encoder_whose_name_is_long_enough_to_leave_the_figure_" + e["name"]
    png = heatmap_png(suite)
    img = mpimg.imread(io.BytesIO(png), format="png")[..., :3]
    for edge in (img[0], img[-1], img[:, 0], img[:, -1]):
        assert np.all(edge > 0.95), "a label reaches the edge of the image"
    short = heatmap_png(run["json"])
    assert (
        mpimg.imread(io.BytesIO(short), format="png").shape[1] < img.shape[1]
    )  # the canvas grew to fit


def test_terminal_tables_fit_100_columns_and_files_keep_the_intervals(run):
    printed = run["first"][1]
    assert (
        max(len(line) for line in printed.splitlines() if not line.startswith("wrote ")) <= 100
    ), printed
    assert (
        "[" in (run["root"] / "out" / "suite.md").read_text()
    )  # Wilson intervals stay in the files


def test_run_suite_on_settings_returns_the_numbers_the_command_wrote(run):
    """The pure function on a settings object computes what `repeval suite` wrote to suite.json."""
    from repeval_ref.cli._render import plain_tree
    from repeval_ref.cli.suite import SuiteSettings, run_suite

    settings = SuiteSettings(
        encoders=("zoo:supervised_cnn", "random_vit", str(run["pixels"])),
        probe_c=(0.1, 1),
        rank_boot=200,
        boot=2000,
        cache_dir=str(run["root"] / "cache"),
    )
    with fake_tasks(run["data"]):
        result = plain_tree(run_suite(settings))
    for key in ("tasks", "encoders", "per_task", "ranking", "settings"):
        assert result[key] == run["json"][key], key
    assert result["cache"]["evaluations_computed"] == 0  # read back from the command's cache
    with pytest.raises(ValueError, match="protocols"):
        SuiteSettings(protocols=("knn", "nope"))
    with pytest.raises(ValueError, match="settings must be a SuiteSettings"):
        run_suite({"encoders": ["zoo"]})


def _shortened(word, name):
    """Whether ``word`` is ``name`` as the terminal tables abbreviate it: head ``~`` tail."""
    head, sep, tail = word.partition("~")
    return bool(sep) and len(word) < len(name) and name.startswith(head) and name.endswith(tail)


def test_the_terminal_table_fits_100_columns_and_never_cuts_a_name(run, capsys):
    """Long encoder names: every line <= 100 characters, each name whole or abbreviated."""
    import copy

    from repeval_ref.cli._render import abbreviate, table
    from repeval_ref.cli._suite_render import print_suite

    suite = copy.deepcopy(run["json"])
    names = [
        f"a_self_supervised_vision_transformer_with_a_long_descriptive_name_{i}"
        for i in range(len(suite["encoders"]))
    ]
    names[0] = "short"
    for e, name in zip(suite["encoders"], names):
        e["name"] = name
    print_suite(suite, [])
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100, out
    words = out.split()
    assert "short" in words
    for name in names[1:]:
        assert any(_shortened(w, name) for w in words), (name, out)
    # the rule: head and tail around "~", and only as far as the width needs
    assert abbreviate("a_long_encoder_name_7", 12) == "a_long_e~e_7"
    assert abbreviate("short", 12) == "short"
    rows = [[n] + ["93.10 (1.5)"] * 12 for n in names]
    text = table(rows, ["encoder"] + [f"task_{i}" for i in range(12)])
    assert max(map(len, text.splitlines())) <= 100
    assert "left out here, in the written files: task_" in text and "task_0" in text.split()
    for name in names[1:]:
        assert any(_shortened(w, name) for w in text.split())
