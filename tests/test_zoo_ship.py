"""Shipping a plateau run's encoders (repeval_ref/zoo/ship.py): weights, manifest, and the registry
they must match.

A tiny plateau run (400 training images, batches of 32, two epochs) is shipped into a
temporary weights folder; the registry entry of its name is patched to the recipe the
run chose, as the real registry is once an encoder of the plateau run is registered.
"""

import json
import os

import numpy as np
import pytest
import torch

from repeval_ref import zoo
from repeval_ref.zoo import plateau, ship
from repeval_ref.zoo.build import sha256_file
from repeval_ref.zoo.registry import ENCODERS

pytestmark = pytest.mark.usefixtures("one_torch_thread", "one_blas_thread_for_training")

_N = 400
_SEARCH = {"val_size": 100, "n_train": 64, "epochs": 1, "n_probe": 100, "n_val": 100, "Cs": [0.1]}
_PLAN = [
    {
        "name": "supervised_vit",
        "base": "supervised_vit",
        "overrides": {"batch_size": 32, "train_images": 60000},
        "epochs": 2,
        "grid": {"lr": [1e-4, 1e-3]},
    }
]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished tiny plateau run and its training images."""
    import threadpoolctl

    from repeval_ref.datasets import fashion_mnist

    x, y = fashion_mnist("train")
    x, y = x[:_N].copy(), y[:_N].copy()
    runs = tmp_path_factory.mktemp("runs")
    torch.set_num_threads(1)
    with threadpoolctl.threadpool_limits(1):
        status = plateau.run_plateau(runs, plan=_PLAN, search=_SEARCH, images=x, labels=y, log=None)
    torch.use_deterministic_algorithms(False)
    assert status["state"] == "finished"
    return runs, x, y


def _read(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture
def registered(tiny_run, monkeypatch):
    """The registry's supervised_vit set to the configuration the tiny run trained."""
    record = _read(tiny_run[0] / "supervised_vit" / "train.json")
    monkeypatch.setitem(ENCODERS, "supervised_vit", dict(record["config"]))
    return record


def test_shipped_weights_are_the_runs_and_the_manifest_holds_its_records(
    tiny_run, registered, tmp_path
):
    runs = tiny_run[0]
    (tmp_path / "supervised_vit").mkdir()
    (tmp_path / "supervised_vit" / "epoch99.pt").write_bytes(b"an older training's file")
    entries = ship.ship_plateau(runs, weights_dir=str(tmp_path))
    assert list(entries) == ["supervised_vit"]
    assert not (
        tmp_path / "supervised_vit" / "epoch99.pt"
    ).exists()  # the folder holds what the manifest lists
    manifest = _read(tmp_path / "manifest.json")
    entry = manifest["encoders"]["supervised_vit"]
    payload = torch.load(runs / "supervised_vit" / "weights.pt", weights_only=True)
    assert [c["step"] for c in entry["checkpoints"].values()] == [
        c[2] for c in payload["checkpoints"]
    ]
    for info in entry["checkpoints"].values():
        assert sha256_file(tmp_path / info["file"]) == info["sha256"]
    loaded = zoo.load("supervised_vit", weights_dir=str(tmp_path)).state_dict()
    final = payload["checkpoints"][-1][3]
    assert entry["final"] == payload["checkpoints"][-1][0]
    assert set(loaded) == set(final) and all(torch.equal(loaded[k], final[k]) for k in final)
    # the records of the run, unchanged
    search = _read(runs / "supervised_vit" / "search.json")
    assert entry["recipe_search"]["trials"] == search["trials"]
    assert entry["recipe_search"]["chosen"] == search["chosen"] == entry["recipe"]
    assert entry["training"]["loss_per_epoch"] == registered["curve"]
    assert entry["hyperparameters"]["epochs"] == len(registered["curve"]) == 2
    assert entry["hyperparameters"]["lr"] == search["chosen"]["lr"]
    assert entry["data"]["subset_size"] == _N
    t = entry["training"]
    assert len(t["epoch_seconds"]) == len(t["epoch_cpu_seconds"]) == 2
    assert t["estimated_seconds"] == pytest.approx(sum(t["epoch_cpu_seconds"]), abs=0.11)
    assert t["seconds"] == registered["seconds"] and t["device"] == "cpu"


def test_the_registered_recipe_retrains_the_shipped_weights(tiny_run, registered, tmp_path):
    """What `make zoo` runs for the name (train_encoder with the registered configuration)
    gives the shipped weights bit for bit."""
    from repeval_ref.zoo.train import train_encoder

    runs, x, y = tiny_run
    ship.ship_plateau(runs, ["supervised_vit"], weights_dir=str(tmp_path))
    again = train_encoder("supervised_vit", x, y)
    shipped = zoo.load("supervised_vit", weights_dir=str(tmp_path)).state_dict()
    final = again["checkpoints"][-1][3]
    assert all(torch.equal(shipped[k], final[k]) for k in final)


def test_a_registry_that_differs_from_the_trained_recipe_is_refused(
    tiny_run, registered, tmp_path, monkeypatch
):
    monkeypatch.setitem(
        ENCODERS, "supervised_vit", {**registered["config"], "lr": registered["config"]["lr"] * 3}
    )
    with pytest.raises(
        ValueError, match="names: the registered configuration of 'supervised_vit'.*'lr'"
    ):
        ship.ship_plateau(tiny_run[0], weights_dir=str(tmp_path))
    assert not (tmp_path / "manifest.json").exists()


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"names": ["dino_vit"]}, "no finished training"),
        ({"names": "supervised_vit"}, "names must be"),
        ({"names": []}, "names must be"),
    ],
)
def test_bad_names_name_themselves(tiny_run, tmp_path, kwargs, word):
    with pytest.raises(ValueError, match=word):
        ship.ship_plateau(tiny_run[0], weights_dir=str(tmp_path), **kwargs)


def test_bad_run_directories_are_refused(tmp_path):
    with pytest.raises(ValueError, match="runs must be"):
        ship.ship_plateau("")
    with pytest.raises(ValueError, match="not a directory"):
        ship.ship_plateau(tmp_path / "absent")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "train.json").write_text("{not json")
    with pytest.raises(ValueError, match="not readable JSON"):
        ship.ship_plateau(tmp_path, ["x"], weights_dir=str(tmp_path / "w"))


def test_damaged_weights_are_refused(tiny_run, registered, tmp_path):
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(tiny_run[0], runs)
    (runs / "supervised_vit" / "weights.pt").write_bytes(b"truncated")
    with pytest.raises(ValueError, match="weights of 'supervised_vit' do not load"):
        ship.ship_plateau(runs, weights_dir=str(tmp_path / "w"))


def test_the_time_estimate():
    # CPU seconds of every epoch: their sum
    assert ship.estimated_seconds([50, 900, 60], [40.0, 41.0, 42.0], 3) == (
        123.0,
        "CPU seconds of all 3 epochs",
    )
    # CPU seconds of the last two of four: the median wall epoch stands for the two without
    seconds, how = ship.estimated_seconds([5000, 100, 98, 102], [90.0, 91.0], 4)
    assert (
        seconds == pytest.approx(90 + 91 + 2 * np.median([5000, 100, 98, 102])) and "for 2" in how
    )
    # none: the median wall epoch times the epochs (a long pause does not move it)
    assert ship.estimated_seconds([10, 11, 500], [], 3)[0] == pytest.approx(33.0)
    for args in [([1], [1, 2], 1), ([1], [], 0), ([], [], 2), ([1], [-1], 1), ([1], [], True)]:
        with pytest.raises(ValueError):
            ship.estimated_seconds(*args)


def test_the_cli_ships_a_run(tiny_run, registered, tmp_path, monkeypatch, capsys):
    from repeval_ref.cli.zoo import main
    from repeval_ref.zoo import build

    monkeypatch.setattr(build, "WEIGHTS_DIR", str(tmp_path))
    monkeypatch.setattr(build, "MANIFEST", os.path.join(tmp_path, "manifest.json"))
    assert main(["ship", "--runs", str(tiny_run[0]), "--skip-eval"]) == 0
    assert "supervised_vit: shipped 4 checkpoints" in capsys.readouterr().out
    assert (tmp_path / "manifest.json").exists()


def test_run_zoo_returns_the_shipped_entries_the_manifest_records(
    tiny_run, registered, tmp_path, monkeypatch
):
    from repeval_ref.cli.zoo import ZooSettings, run_zoo
    from repeval_ref.zoo import build

    monkeypatch.setattr(build, "WEIGHTS_DIR", str(tmp_path))
    monkeypatch.setattr(build, "MANIFEST", os.path.join(tmp_path, "manifest.json"))
    runs = tiny_run[0]
    result = run_zoo(ZooSettings(command="ship", runs=str(runs), skip_eval=True))
    assert result["command"] == "ship" and result["evaluations"] == {}
    manifest = _read(tmp_path / "manifest.json")
    assert json.loads(json.dumps(result["entries"])) == {
        "supervised_vit": manifest["encoders"]["supervised_vit"]
    }
    # the checkpoints returned are those the run saved, step for step
    payload = torch.load(runs / "supervised_vit" / "weights.pt", weights_only=True)
    steps = [c["step"] for c in result["entries"]["supervised_vit"]["checkpoints"].values()]
    assert steps == [c[2] for c in payload["checkpoints"]]


def test_zoo_settings_refuse_bad_values_naming_the_option(tmp_path):
    from repeval_ref.cli.zoo import ZooSettings

    for bad, option in (
        ({"command": "fit"}, "command"),
        ({"command": "evaluate"}, "--out"),
        ({"command": "evaluate", "out": str(tmp_path)}, "--out"),
        ({"command": "ship"}, "--runs"),
        ({"command": "train", "epochs_scale": 0}, "--epochs-scale"),
        ({"command": "train", "epochs_scale": 2}, "--weights-dir"),
    ):
        with pytest.raises(ValueError, match=option):
            ZooSettings(**bad)
