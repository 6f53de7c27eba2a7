"""The zoo's evaluation table (repeval_ref.zoo.table): its 10-shot column, its fine-tuning
search, its floors and a tiny end-to-end table, each checked against an independent
computation."""

import json

import numpy as np
import pytest
import torch
from torch import nn

from repeval_ref.zoo import table as T

#: a table small enough for a test: a few hundred rows, a few steps
TINY = {
    "train": 400,
    "test": 300,
    "attentive": {"epochs": 1},
    "finetune": {"fit": 150, "val": 100, "steps": 6, "eval_every": 3},
    "lp_head": {"steps": 6, "eval_every": 3},
    "fewshot": {"draws": 2},
}


def _clusters(n_per_class, d, seed, shift=0.0):
    """Ten Gaussian classes in d dimensions (class c centred at 2 e_c), rows shuffled."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(10), n_per_class)
    centres = 2.0 * np.eye(10, d)
    h = centres[y] + rng.normal(size=(y.size, d)) + shift
    order = rng.permutation(y.size)
    return h[order], y[order]


# ----------------------------------------------------------------------------- 10-shot


def _independent_supports(y, shots, draws, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        parts = []
        for c in sorted(set(y.tolist())):
            parts.append(rng.choice(np.flatnonzero(y == c), size=shots, replace=False))
        out.append(np.concatenate(parts))
    return out


def _independent_fewshot(htr, ytr, hte, yte, shots, draws, seed, Cs, folds):
    """Per-draw test accuracy and C: CV written out with scikit-learn's pieces."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.preprocessing import StandardScaler

    def fit(h, y, C):
        scaler = StandardScaler().fit(h)
        return scaler, LogisticRegression(C=C, max_iter=2000).fit(scaler.transform(h), y)

    accs, chosen = [], []
    for support in _independent_supports(ytr, shots, draws, seed):
        h, y = htr[support], ytr[support]
        scores = []
        for C in Cs:
            fold = []
            for a, b in StratifiedKFold(folds).split(h, y):
                scaler, clf = fit(h[a], y[a], C)
                fold.append(np.mean(clf.predict(scaler.transform(h[b])) == y[b]))
            scores.append(np.mean(fold))
        C = Cs[int(np.argmax(scores))]
        scaler, clf = fit(h, y, C)
        accs.append(float(np.mean(clf.predict(scaler.transform(hte)) == yte)))
        chosen.append(C)
    return accs, chosen


def test_fewshot_column_equals_an_independent_scikit_learn_fit_on_the_same_supports():
    htr, ytr = _clusters(30, 12, seed=1)
    hte, yte = _clusters(20, 12, seed=2)
    p = T.resolve_protocol({"fewshot": {"draws": 4, "seed": 3}})
    cell = T.fewshot_probe(htr, ytr, hte, yte, p)
    f = p["fewshot"]
    accs, Cs = _independent_fewshot(htr, ytr, hte, yte, 10, 4, 3, f["Cs"], f["folds"])
    assert cell["draws"] == pytest.approx(accs, abs=1e-12) and cell["C"] == Cs
    assert cell["acc"] == pytest.approx(np.mean(accs)) and cell["std"] == pytest.approx(
        np.std(accs, ddof=1)
    )
    assert (cell["lo"], cell["hi"]) == (min(accs), max(accs))
    assert cell["n"] == yte.size and cell["shots"] == 10 and "draws" in cell["interval"]
    assert len(set(cell["draws"])) > 1  # the draws differ, so the spread is real


def test_support_draws_take_ten_per_class_from_the_training_rows_only(monkeypatch):
    htr, ytr = _clusters(25, 6, seed=4)
    hte, yte = _clusters(10, 6, seed=5, shift=100.0)  # test rows far from every training row
    supports = T.fewshot_supports(ytr, 10, 5, seed=0)
    assert [s.tolist() for s in supports] == [
        s.tolist() for s in _independent_supports(ytr, 10, 5, 0)
    ]
    for s in supports:
        assert s.size == 100 and np.unique(s).size == 100 and s.min() >= 0 and s.max() < ytr.size
        assert np.array_equal(np.bincount(ytr[s], minlength=10), np.full(10, 10))
    assert len({tuple(s) for s in supports}) == 5
    fitted = []
    real_fit = T._fewshot_fit
    monkeypatch.setattr(
        T,
        "_fewshot_fit",
        lambda h, y, Cs, folds: fitted.append((h, y)) or real_fit(h, y, Cs, folds),
    )
    T.fewshot_probe(htr, ytr, hte, yte, T.resolve_protocol())
    assert len(fitted) == 5
    for (h, y), s in zip(fitted, supports):
        assert np.array_equal(h, htr[s]) and np.array_equal(y, ytr[s])
        assert np.abs(h).max() < 50  # no test row (all near 100) was fitted on


def test_support_draws_refuse_bad_input():
    y = np.repeat(np.arange(3), 4)
    with pytest.raises(ValueError, match="class"):
        T.fewshot_supports(y, 5, 2, 0)
    for kwargs, name in [
        (dict(shots=0), "shots"),
        (dict(draws=0), "draws"),
        (dict(seed=-1), "seed"),
    ]:
        args = {"shots": 2, "draws": 2, "seed": 0, **kwargs}
        with pytest.raises(ValueError, match=name):
            T.fewshot_supports(y, **args)
    with pytest.raises(ValueError, match="train_y"):
        T.fewshot_supports(np.zeros((2, 2), dtype=int), 1, 1, 0)


# ----------------------------------------------------------------------------- fine-tuning search


def _linear(seed):
    torch.manual_seed(seed)
    return nn.Linear(6, 10)


def test_search_rate_keeps_the_rate_and_step_of_highest_validation_accuracy():
    from repeval_ref.torch.tuning import train_with_validation

    h, y = _clusters(30, 6, seed=6)
    x = torch.as_tensor(h, dtype=torch.float32)
    fit, val = np.arange(200), np.arange(200, 300)
    lrs = [1e-3, 3e-2, 3e-1]
    settings = {"steps": 24, "eval_every": 4, "batch_size": 16, "weight_decay": 0.0, "seed": 1}
    recipe, module = T.search_rate(lambda: _linear(0), x, y, fit, val, lrs, settings)
    best = (-1.0, None, None)
    for lr in lrs:  # the same runs by hand, and the argmax over (rate, step) written out
        m = _linear(0)
        curve = train_with_validation(
            m,
            torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=0.0),
            x,
            y,
            fit,
            val,
            steps=24,
            eval_every=4,
            batch_size=16,
            seed=1,
        )
        for step, acc in zip(curve.steps, curve.accuracy):
            if acc > best[0]:
                best = (acc, lr, int(step))
    assert (recipe["val_acc"], recipe["lr"], recipe["steps"]) == best
    assert recipe["lrs"] == lrs and recipe["n_fit"] == 200 and recipe["n_val"] == 100
    assert recipe["curve_steps"] == list(range(0, 25, 4)) and len(recipe["curves"]) == 3
    assert not module.training
    with torch.no_grad():  # the module returned is the chosen checkpoint
        assert np.mean(module(x[val]).argmax(1).numpy() == y[val]) == pytest.approx(best[0])
    assert best[2] > 0  # the stub learns: the choice is not the untrained start


@pytest.fixture
def feature_cache(tmp_path, monkeypatch):
    """The extraction cache of the tables these tests compute: a temporary folder."""
    monkeypatch.setenv("REPEVAL_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_the_fine_tuning_choice_never_reads_the_test_images(feature_cache, monkeypatch):
    """Test and OOD images and labels replaced by noise: the same recipes, other test scores."""
    from repeval_ref.zoo import extraction
    from repeval_ref.zoo.evaluate import subset_indices
    from repeval_ref.zoo.loader import load
    from repeval_ref.zoo.train import deterministic_torch

    deterministic_torch()
    p = T.resolve_protocol(TINY)
    tr, te = subset_indices(60000, p["train"], 0), subset_indices(10000, p["test"], 1)
    clean = T.finetune_columns("random_vit", load("random_vit"), tr, te, p)
    real = extraction.load_images
    rng = np.random.default_rng(0)

    def poisoned(dataset, split):
        x, y = real(dataset, split)
        if split == "test":
            return rng.integers(0, 256, size=x.shape, dtype=np.uint8), rng.permutation(y)
        return x, y

    monkeypatch.setattr(extraction, "load_images", poisoned)
    dirty = T.finetune_columns("random_vit", load("random_vit"), tr, te, p)
    assert dirty["ft_recipe"] == clean["ft_recipe"] and dirty["lpft_recipe"] == clean["lpft_recipe"]
    assert dirty["ft_id"] != clean["ft_id"] and dirty["lpft_ood"] != clean["lpft_ood"]


def test_a_resnet_encoder_goes_through_the_tokens_the_attentive_probe_and_fine_tuning(monkeypatch):
    """Nothing assumes a ViT: SmallResNet's 128 channels, its 1 + 16 tokens, BatchNorm in FT."""
    from repeval_ref.zoo.extraction import encoder_inputs, extract, load_images
    from repeval_ref.zoo.registry import build_encoder

    enc = build_encoder("resnet").eval()
    x, y = load_images("fashion", "test")
    tokens = extract(enc, encoder_inputs("random_resnet", x[:60]), "tokens")
    assert tokens.shape == (60, 17, 128)
    assert np.allclose(tokens[:, 0], tokens[:, 1:].mean(axis=1), atol=1e-5)
    p = T.resolve_protocol({"attentive": {"epochs": 1}})
    cell = T._attentive(tokens[:40], y[:40], tokens[40:], y[40:60], p)
    assert cell["heads"] == 4 and cell["n"] == 20
    p = T.resolve_protocol(
        {
            "train": 200,
            "finetune": {"fit": 60, "val": 40, "steps": 2, "eval_every": 1},
            "lp_head": {"steps": 2, "eval_every": 1},
        }
    )
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    out = T.finetune_columns("random_resnet", enc, np.arange(200), np.arange(30), p)
    assert out["ft_id"]["n"] == out["lpft_ood"]["n"] == 30
    assert all(
        torch.equal(v, enc.state_dict()[k]) for k, v in before.items()
    )  # the encoder itself untouched


@pytest.mark.parametrize("width, heads", [(64, 4), (128, 4), (1280, 4), (49, 7), (10, 5), (7, 7)])
def test_attentive_heads_divide_the_width(width, heads):
    assert T.attentive_heads(width, 4) == heads and width % heads == 0


# ----------------------------------------------------------------------------- floors


def _row(name, arch, probe, fewshot):
    return {
        "name": name,
        "arch": arch,
        "probe_cls": {"acc": probe, "lo": probe, "hi": probe},
        "fewshot10": {"acc": fewshot, "lo": fewshot, "hi": fewshot},
    }


def _table(*rows):
    return {
        "rows": [
            _row("raw_pixels", None, 0.8, 0.7),
            *rows,
            _row("efficientnet_lite0", "efficientnet_lite0", 0.1, 0.1),
        ]
    }


def test_floors_pass_fail_and_missing_counterparts():
    table = _table(
        _row("random_vit", "vit", 0.70, 0.50),
        _row("supervised_vit", "vit", 0.86, 0.75),  # passes both
        _row("simclr_vit", "vit", 0.85, 0.58),  # fails on 10-shot
        _row("mae_vit", "vit", 0.75, 0.65),  # fails on the probe
        _row("dino_vit", "vit", 0.80, 0.60),  # exactly 10 points: passes
        _row("collapsed_vit", "vit", 0.60, 0.40),  # exempt
        _row("supervised_resnet", "resnet", 0.93, 0.80),
    )  # no random_resnet
    out = {c["name"]: c for c in T.floors(table)}
    assert list(out) == ["supervised_vit", "simclr_vit", "mae_vit", "dino_vit", "supervised_resnet"]
    assert (
        out["supervised_vit"]["verdict"] == "pass"
        and out["supervised_vit"]["random"] == "random_vit"
    )
    assert out["supervised_vit"]["probe"] == {
        "trained": 0.86,
        "random": 0.70,
        "difference": pytest.approx(0.16),
        "clears": True,
    }
    assert out["simclr_vit"]["verdict"] == "fail"
    assert out["simclr_vit"]["probe"]["clears"] and not out["simclr_vit"]["fewshot10"]["clears"]
    assert out["mae_vit"]["verdict"] == "fail"
    assert not out["mae_vit"]["probe"]["clears"] and out["mae_vit"]["fewshot10"]["clears"]
    assert out["dino_vit"]["verdict"] == "pass"
    assert out["supervised_resnet"] == {
        "name": "supervised_resnet",
        "arch": "resnet",
        "random": "random_resnet",
        "margin": 0.1,
        "probe": None,
        "fewshot10": None,
        "verdict": "no random row",
    }
    assert [c["verdict"] for c in T.floors(table, margin=0.2)][:4] == ["fail"] * 4
    assert all(c["verdict"] == "pass" for c in T.floors(table, margin=0.0) if c["probe"])
    md = T.render_markdown(
        {
            **table,
            "protocol": T.resolve_protocol(),
            "seconds": 1.0,
            "rows": [{**r, "objective": "o", "params": 1, "rankme": 1.0} for r in table["rows"]],
        }
    )
    assert (
        "no random row: random_resnet is not in the table" in md
        and "| simclr_vit | random_vit |" in md
    )


def test_floors_refuse_bad_input():
    good = _table(_row("random_vit", "vit", 0.7, 0.5), _row("supervised_vit", "vit", 0.9, 0.8))
    for margin in (-0.1, 1.0, True, "0.1", float("nan")):
        with pytest.raises(ValueError, match="margin"):
            T.floors(good, margin)
    no_arch = _table(
        _row("random_vit", "vit", 0.7, 0.5),
        {"name": "supervised_vit", "probe_cls": {"acc": 0.9}, "fewshot10": {"acc": 0.8}},
    )
    no_fewshot = _table(
        _row("random_vit", "vit", 0.7, 0.5),
        {"name": "supervised_vit", "arch": "vit", "probe_cls": {"acc": 0.9}},
    )
    twice = _table(_row("random_vit", "vit", 0.7, 0.5), _row("random_vit", "vit", 0.7, 0.5))
    for bad in (None, [], {"rows": None}, {"rows": [{"arch": "vit"}]}, no_arch, no_fewshot, twice):
        with pytest.raises(ValueError, match="table"):
            T.floors(bad)


# ----------------------------------------------------------------------------- protocol


def test_protocol_overrides_merge_and_are_checked():
    p = T.resolve_protocol({"finetune": {"steps": 7}})
    assert (
        p["finetune"]["steps"] == 7 and p["finetune"]["lrs"] == T.TABLE_PROTOCOL["finetune"]["lrs"]
    )
    assert T.TABLE_PROTOCOL["finetune"]["steps"] != 7  # the module's protocol is left alone
    assert len(p["finetune"]["lrs"]) >= 3 and len(T.TABLE_PROTOCOL["lp_head"]["lrs"]) >= 3
    assert T.TABLE_PROTOCOL["train"] == T.TABLE_PROTOCOL["test"] == 10000
    for bad, where in [
        ({"nope": 1}, "protocol"),
        ({"finetune": {"nope": 1}}, "finetune"),
        ({"finetune": 3}, "finetune"),
        ({"train": 0}, "train"),
        ({"finetune": {"fit": 9000, "val": 2000}}, "exceeds"),
        ({"finetune": {"lrs": []}}, "lrs"),
        ({"fewshot": {"folds": 11}}, "folds"),
        ("tiny", "protocol"),
    ]:
        with pytest.raises(ValueError, match=where):
            T.resolve_protocol(bad)


# ----------------------------------------------------------------------------- end to end


def test_a_tiny_table_of_two_shipped_encoders(feature_cache):
    """supervised_cnn and random_vit under the TINY protocol (a few seconds), written with
    write_table."""
    from repeval_ref.knn import knn_classify
    from repeval_ref.zoo import features
    from repeval_ref.zoo.evaluate import subset_indices

    out = feature_cache / "t" / "zoo_table.json"
    table = T.write_table(out, ["supervised_cnn", "random_vit"], protocol=TINY)
    on_disk = json.loads(out.read_text())
    assert on_disk == json.loads(json.dumps(table))
    assert on_disk["protocol"] == T.resolve_protocol(TINY) and on_disk["protocol"]["train"] == 400
    rows = {r["name"]: r for r in table["rows"]}
    assert [r["name"] for r in table["rows"]] == [
        "supervised_cnn",
        "random_vit",
    ]  # row_names() order
    assert rows["supervised_cnn"]["arch"] == "cnn" and rows["random_vit"]["arch"] == "vit"
    tr, te = subset_indices(60000, 400, 0), subset_indices(10000, 300, 1)
    for name, row in rows.items():
        htr, ytr = features(name, "train", "cls", indices=tr)
        hte, yte = features(name, "test", "cls", indices=te)
        assert row["knn20"]["acc"] == np.mean(knn_classify(htr, ytr, hte, 20, 0.07, 10) == yte)
        assert (
            row["fewshot10"]["draws"]
            == T.fewshot_probe(htr, ytr, hte, yte, table["protocol"])["draws"]
        )
        for c in T.COLUMNS:
            assert row[c]["n"] == 300 and row[c]["lo"] <= row[c]["acc"] <= row[c]["hi"]
        for key in ("ft_recipe", "lpft_recipe"):
            r = row[key]
            assert (
                r["lr"] in T.TABLE_PROTOCOL["finetune"]["lrs"]
                and r["steps"] in (0, 3, 6)
                and r["n_fit"] == 150
                and r["n_val"] == 100
            )
    assert (
        "note" in rows["supervised_cnn"]["probe_mean"]
    )  # a CNN's class token is its positions' mean
    assert table["floors"] == [
        {
            "name": "supervised_cnn",
            "arch": "cnn",
            "random": "random_cnn",
            "margin": 0.1,
            "probe": None,
            "fewshot10": None,
            "verdict": "no random row",
        }
    ]
    md = (feature_cache / "t" / "zoo_table.md").read_text()
    assert (
        "10-shot" in md and "Wilson" in md and "not a Wilson interval" in md and "random_cnn" in md
    )
    with pytest.raises(ValueError, match="merge"):  # rows of another protocol are not mixed in
        T.write_table(out, ["random_vit"], merge=True, protocol={**TINY, "test": 200})


def test_bad_names_are_refused_before_any_computation(tmp_path):
    for names in (["nope"], "random_vit", []):
        with pytest.raises(ValueError, match="names"):
            T.write_table(tmp_path / "t.json", names)
    with pytest.raises(ValueError, match="protocol"):
        T.write_table(tmp_path / "t.json", ["random_vit"], protocol={"nope": 1})
    assert list(tmp_path.iterdir()) == []
