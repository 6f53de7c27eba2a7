"""The zoo's training infrastructure: the ResNet backbone, the validation split, resumable
training, the recipe search."""

import json

import numpy as np
import pytest
import torch

from repeval_ref.torch.models import ResidualBlock, SmallResNet, default_blocks
from repeval_ref.zoo import recipes
from repeval_ref.zoo.extraction import TokenView
from repeval_ref.zoo.registry import ARCHITECTURES, build_encoder
from repeval_ref.zoo.train import encoder_config, train_encoder

pytestmark = pytest.mark.usefixtures("one_torch_thread", "one_blas_thread_for_training")


@pytest.fixture(scope="module")
def train_split():
    from repeval_ref.datasets import fashion_mnist

    return fashion_mnist("train")


# ----------------------------------------------------------------------------- the ResNet backbone


def test_resnet_size_shapes_and_blocks():
    enc = build_encoder("resnet", seed=0)
    n_params = sum(p.numel() for p in enc.parameters())
    assert 300_000 <= n_params <= 1_000_000
    x = torch.randn(5, 1, 28, 28)
    enc.eval()
    assert enc(x).shape == (5, enc.out_dim) == (5, ARCHITECTURES["resnet"]["widths"][-1])
    fmap = enc.feature_map(x)
    assert fmap.shape == (5, 128, 4, 4)  # three stride-2 stages: 28 -> 14 -> 7 -> 4
    assert torch.allclose(enc(x), fmap.mean(dim=(2, 3)))
    assert default_blocks(enc) == ["blocks.0", "blocks.1", "blocks.2"]
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in enc.modules())
    tokens = TokenView(enc)(
        x
    )  # the extraction's view: the global average first, then the 16 positions
    assert tokens.shape == (5, 17, 128) and torch.allclose(tokens[:, 0], enc(x), atol=1e-6)


def test_resnet_same_seed_same_weights_other_seed_other_weights():
    a, b, c = (build_encoder("resnet", seed=s).state_dict() for s in (3, 3, 4))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if a[k].is_floating_point())


def test_resnet_group_norm_variant_and_bad_input():
    enc = SmallResNet(1, (16, 32), (1, 1), norm="group", groups=4)
    assert enc(torch.randn(2, 1, 28, 28)).shape == (2, 32)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in enc.modules())
    with pytest.raises(ValueError, match="norm"):
        SmallResNet(norm="layer")
    with pytest.raises(ValueError, match="norm"):
        ResidualBlock(4, 4, norm="instance")
    with pytest.raises(ValueError, match="widths and depths"):
        SmallResNet(widths=(16, 32), depths=(1,))
    with pytest.raises(ValueError, match="groups"):
        SmallResNet(widths=(12, 24), depths=(1, 1), norm="group", groups=8)
    with pytest.raises(ValueError, match="x must be"):
        SmallResNet()(torch.zeros(2, 3, 28, 28))


@pytest.mark.parametrize("objective", ["supervised", "simclr", "dino"])
def test_resnet_takes_one_step_of_each_objective(objective):
    import importlib

    cfg = encoder_config(f"{objective}_vit", overrides={"arch": "resnet"})
    mod = importlib.import_module(f"repeval_ref.zoo.{objective}")
    enc = build_encoder("resnet", seed=0)
    heads = torch.nn.ModuleDict(mod.make_heads(enc, cfg))
    state = mod.init_state(enc, heads, cfg) if hasattr(mod, "init_state") else {}
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    opt = torch.optim.AdamW(list(enc.parameters()) + list(heads.parameters()), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(8, 1, 28, 28), torch.arange(8) % 10
    loss = mod.training_loss(enc, heads, x, y, gen, cfg, state)
    loss.backward()
    opt.step()
    if hasattr(mod, "after_step"):
        mod.after_step(enc, heads, state, cfg, 0.5)
    assert loss.ndim == 0 and torch.isfinite(loss)
    assert all(p.grad is not None for p in enc.parameters())
    after = enc.state_dict()
    assert any(
        not torch.equal(before[k], after[k]) for k in before if before[k].is_floating_point()
    )


def test_mae_on_the_resnet_and_unknown_overrides_are_value_errors():
    with pytest.raises(ValueError, match="overrides"):
        encoder_config("mae_vit", overrides={"arch": "resnet"})
    with pytest.raises(ValueError, match="overrides"):
        encoder_config("supervised_vit", overrides={"learning_rate": 1e-3})
    with pytest.raises(ValueError, match="overrides"):
        encoder_config("supervised_vit", overrides={"arch": "resnet50"})
    with pytest.raises(ValueError, match="epochs"):
        encoder_config("supervised_vit", epochs=-1)


# ----------------------------------------------------------------------------- the validation split


def test_validation_split_is_disjoint_complete_stratified_and_seeded():
    y = np.repeat(np.arange(10), 600)[np.random.default_rng(1).permutation(6000)]
    tr, va = recipes.validation_split(y, size=500, seed=0)
    assert tr.size == 5500 and va.size == 500
    assert np.intersect1d(tr, va).size == 0
    assert np.array_equal(np.sort(np.concatenate([tr, va])), np.arange(6000))
    assert np.all(np.diff(tr) > 0) and np.all(np.diff(va) > 0)
    assert np.all(
        np.abs(np.bincount(y[va], minlength=10) - 50) <= 1
    )  # shares of the whole, to one row
    tr2, va2 = recipes.validation_split(y, size=500, seed=0)
    assert np.array_equal(va, va2) and np.array_equal(tr, tr2)
    _, va3 = recipes.validation_split(y, size=500, seed=1)
    assert not np.array_equal(va, va3)


def test_validation_split_of_the_training_images_keeps_class_shares(train_split):
    _, y = train_split
    tr, va = recipes.validation_split(y, size=5000, seed=0)
    assert va.size == 5000 and tr.size == 55000
    assert set(np.bincount(y[va], minlength=10)) == {500}


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"labels": np.zeros((4, 2), dtype=int)}, "labels"),
        ({"labels": np.array([0.5, 1.5, 0.5, 1.5])}, "labels"),
        ({"labels": np.array([0, 0, 1])}, "labels"),
        ({"labels": np.array([0, 1] * 10), "size": 1}, "size"),
        ({"labels": np.array([0, 1] * 10), "size": 19}, "size"),
        ({"labels": np.array([0, 1] * 10), "size": 2.5}, "size"),
        ({"labels": np.array([0, 1] * 10), "size": 4, "seed": -1}, "seed"),
    ],
)
def test_validation_split_bad_input_names_the_argument(kwargs, word):
    kwargs = {"size": 4, **kwargs}
    with pytest.raises(ValueError, match=word):
        recipes.validation_split(**kwargs)


# ----------------------------------------------------------------------------- resumable training


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,overrides,n_images",
    [
        (
            "dino_vit",
            {"arch": "resnet", "batch_size": 32},
            128,
        ),  # teacher, centre, BatchNorm buffers
        ("simclr_vit", {}, 512),
    ],
)
def test_interrupted_and_resumed_training_is_bit_identical(
    tmp_path, train_split, name, overrides, n_images
):
    x, y = train_split
    kw = {"epochs": 2, "n_images": n_images, "overrides": overrides}
    whole = train_encoder(name, x, y, **kw)
    path = tmp_path / "state.pt"
    first = train_encoder(name, x, y, **kw, state_file=path, stop_after=1)
    assert (
        not first["complete"]
        and first["epochs_done"] == 1
        and len(first["curve"]) == 1
        and path.exists()
    )
    rest = train_encoder(name, x, y, **kw, state_file=path)
    assert rest["complete"] and rest["epochs_done"] == 2
    assert rest["curve"] == whole["curve"]
    assert [c[:3] for c in rest["checkpoints"]] == [c[:3] for c in whole["checkpoints"]]
    for (_, _, _, a), (_, _, _, b) in zip(rest["checkpoints"], whole["checkpoints"]):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert rest["seconds"] >= first["seconds"] > 0


def test_a_state_file_of_another_configuration_is_refused(tmp_path, train_split):
    x, y = train_split
    path = tmp_path / "state.pt"
    train_encoder("supervised_vit", x, y, epochs=2, n_images=256, state_file=path, stop_after=1)
    with pytest.raises(ValueError, match="state_file"):
        train_encoder(
            "supervised_vit", x, y, epochs=2, n_images=256, overrides={"lr": 5e-3}, state_file=path
        )
    path.write_bytes(b"not a state")
    with pytest.raises(ValueError, match="state_file"):
        train_encoder("supervised_vit", x, y, epochs=2, n_images=256, state_file=path)
    with pytest.raises(ValueError, match="stop_after"):
        train_encoder("supervised_vit", x, y, epochs=2, n_images=256, stop_after=0)
    with pytest.raises(ValueError, match="time_limit"):
        train_encoder("supervised_vit", x, y, epochs=2, n_images=256, time_limit=-1)


def test_a_time_limit_stops_at_the_end_of_an_epoch(train_split):
    x, y = train_split
    out = train_encoder("supervised_vit", x, y, epochs=3, n_images=256, time_limit=1e-6)
    assert out["epochs_done"] == 1 and not out["complete"] and len(out["curve"]) == 1


def test_saving_the_state_does_not_change_the_run(tmp_path, train_split):
    x, y = train_split
    plain = train_encoder("mae_vit", x, y, epochs=2, n_images=512)
    saved = train_encoder("mae_vit", x, y, epochs=2, n_images=512, state_file=tmp_path / "s.pt")
    assert plain["curve"] == saved["curve"] and saved["complete"]
    a, b = plain["checkpoints"][-1][3], saved["checkpoints"][-1][3]
    assert all(torch.equal(a[k], b[k]) for k in a)
    again = train_encoder("mae_vit", x, y, epochs=2, n_images=512, state_file=tmp_path / "s.pt")
    assert again["curve"] == plain["curve"]  # a finished state file is read back, not retrained


# ----------------------------------------------------------------------------- the recipe search

_TINY = {"val_size": 300, "n_train": 128, "epochs": 1, "n_probe": 200, "n_val": 200, "Cs": (0.1,)}


@pytest.fixture
def no_test_split(monkeypatch):
    """The training split only: any read of the test split fails the test; returns the splits
    read."""
    from repeval_ref import datasets
    from repeval_ref.datasets import fashion

    real_images, real_labels = fashion.fashion_mnist("train")
    reads, real_load = [], fashion._load

    def guarded_load(directory, split, key):
        assert split != "test", "the recipe search read the test split"
        return real_load(directory, split, key)

    def small_train_split(split, **kwargs):
        reads.append(split)
        assert split != "test", "the recipe search read the test split"
        return real_images[:2000].copy(), real_labels[:2000].copy()

    monkeypatch.setattr(fashion, "_load", guarded_load)
    monkeypatch.setattr(fashion, "fashion_mnist", small_train_split)
    monkeypatch.setattr(datasets, "fashion_mnist", small_train_split)
    return reads


def test_recipe_search_chooses_the_best_validation_score_and_never_reads_the_test_split(
    no_test_split,
):
    grid = {"lr": [1e-4, 1e-3, 3e-3]}
    record = recipes.search_recipe("supervised_vit", grid, overrides={"batch_size": 64}, **_TINY)
    assert no_test_split == ["train"]
    scores = [t["val_probe"] for t in record["trials"]]
    assert [t["setting"] for t in record["trials"]] == [{"lr": v} for v in grid["lr"]]
    assert all(0.0 <= s <= 1.0 for s in scores) and max(scores) > 0.3
    assert record["chosen"] == record["trials"][int(np.argmax(scores))]["setting"]
    assert record["score"] == max(scores)
    assert record["validation"]["size"] == 300 and record["validation"]["scored_rows"] == 200
    assert record["seconds"] > 0 and all(len(t["curve"]) == 1 for t in record["trials"])
    assert json.loads(json.dumps(record)) == record  # ready for the manifest


def test_recipe_search_takes_the_first_maximum_over_a_product_grid(monkeypatch, no_test_split):
    table = {
        (1e-3, 0.1): 0.5,
        (1e-3, 0.5): 0.7,
        (3e-3, 0.1): 0.2,
        (3e-3, 0.5): 0.7,
        (1e-2, 0.1): float("nan"),
        (1e-2, 0.5): 0.6,
    }
    seen = []

    def fake_score(encoder, fit_images, fit_labels, val_images, val_labels, *, Cs, seed):
        lr, tau = seen.pop(0)
        return table[(lr, tau)], 0.1

    real_train = recipes.__dict__.get("_trained_encoder")

    def record_setting(result):
        seen.append((result["config"]["lr"], result["config"]["temperature"]))
        return real_train(result)

    monkeypatch.setattr(recipes, "validation_score", fake_score)
    monkeypatch.setattr(recipes, "_trained_encoder", record_setting)
    grid = {"lr": [1e-3, 3e-3, 1e-2], "temperature": [0.1, 0.5]}
    record = recipes.search_recipe(
        "simclr_vit", grid, overrides={"batch_size": 64}, **{**_TINY, "n_train": 64}
    )
    assert [tuple(t["setting"].values()) for t in record["trials"]] == list(table)
    assert record["chosen"] == {"lr": 1e-3, "temperature": 0.5} and record["score"] == 0.7


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"grid": {}}, "grid"),
        ({"grid": {"learning_rate": [1e-3]}}, "grid"),
        ({"grid": {"lr": []}}, "grid"),
        ({"grid": {"lr": [1e-3]}, "images": np.zeros((10, 28, 28), np.uint8)}, "images"),
        ({"grid": {"lr": [1e-3]}, "n_train": 0}, "n_train"),
        ({"grid": {"lr": [1e-3]}, "overrides": {"arch": "mlp"}}, "overrides"),
    ],
)
def test_recipe_search_bad_input_names_the_argument(kwargs, word):
    with pytest.raises(ValueError, match=word):
        recipes.search_recipe("supervised_vit", **kwargs)


@pytest.mark.slow
def test_an_interrupted_search_resumes_from_its_trials_file(tmp_path, no_test_split):
    grid = {"lr": [1e-4, 1e-3, 3e-3]}
    kw = {"overrides": {"batch_size": 64}, **_TINY}
    whole = recipes.search_recipe("supervised_vit", grid, **kw)
    path = tmp_path / "trials.json"
    first = recipes.search_recipe("supervised_vit", grid, **kw, trials_file=path, time_limit=1e-9)
    assert not first["complete"] and first["chosen"] is None and len(first["trials"]) == 1
    rest = recipes.search_recipe("supervised_vit", grid, **kw, trials_file=path)
    assert rest["complete"] and whole["complete"]

    def without_seconds(record):
        return {
            **record,
            "seconds": None,
            "trials": [{**t, "seconds": None} for t in record["trials"]],
        }

    assert without_seconds(rest) == without_seconds(whole)
    assert rest["trials"][0] == first["trials"][0]  # read back, not retrained
    with pytest.raises(ValueError, match="trials_file"):
        recipes.search_recipe("supervised_vit", {"lr": [1e-3]}, **kw, trials_file=path)
    path.write_text("not json")
    with pytest.raises(ValueError, match="trials_file"):
        recipes.search_recipe("supervised_vit", grid, **kw, trials_file=path)


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"time_limit": 1.0}, "trials_file"),
        ({"time_limit": 0, "trials_file": "t.json"}, "time_limit"),
        ({"trials_file": 3}, "trials_file"),
    ],
)
def test_recipe_search_resume_arguments_name_themselves(kwargs, word):
    with pytest.raises(ValueError, match=word):
        recipes.search_recipe("supervised_vit", {"lr": [1e-3]}, **kwargs)
