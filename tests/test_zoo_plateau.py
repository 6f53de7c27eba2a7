"""The plateau run (repeval_ref/zoo/plateau.py): resumable, skips finished steps, never reads the
test split.

Tiny images, batches, grids and epochs (a few seconds in all): the real plan is only
checked for its shape, not run.
"""

import json
import os

import pytest
import torch

from repeval_ref.zoo import plateau, recipes

pytestmark = pytest.mark.usefixtures("one_torch_thread", "one_blas_thread_for_training")

_N = 400  # training images of the tiny runs
_SEARCH = {"val_size": 100, "n_train": 64, "epochs": 1, "n_probe": 100, "n_val": 100, "Cs": [0.1]}
_PLAN = [
    {
        "name": "supervised_vit",
        "base": "supervised_vit",
        "overrides": {"batch_size": 32, "train_images": 60000},
        "epochs": 2,
        "grid": {"lr": [1e-4, 1e-3, 3e-3]},
    }
]
_UNITS = 3 + 2  # search trials + training epochs of _PLAN


@pytest.fixture(scope="module")
def tiny_train():
    """The first 400 training images (all distinct, so that an image tells its row)."""
    from repeval_ref.datasets import fashion_mnist

    x, y = fashion_mnist("train")
    x, y = x[:_N].copy(), y[:_N].copy()
    assert len({im.tobytes() for im in x}) == _N
    return x, y


def _run(runs, data, **kwargs):
    return plateau.run_plateau(
        runs, plan=_PLAN, search=_SEARCH, images=data[0], labels=data[1], log=None, **kwargs
    )


def _without_times(record):
    """A record without the keys that measure time (they differ between two equal runs)."""
    if isinstance(record, dict):
        return {
            k: _without_times(v)
            for k, v in record.items()
            if k not in ("seconds", "finished", "epoch_seconds", "epoch_cpu_seconds")
        }
    if isinstance(record, list):
        return [_without_times(v) for v in record]
    return record


def _read(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory, tiny_train):
    """One uninterrupted tiny run (shared by the tests that compare with it)."""
    import threadpoolctl

    runs = tmp_path_factory.mktemp("whole")
    torch.set_num_threads(1)
    with threadpoolctl.threadpool_limits(1):
        status = _run(runs, tiny_train)
    torch.use_deterministic_algorithms(False)
    return runs, status


@pytest.mark.slow
def test_an_uninterrupted_run_writes_its_records_and_status(whole_run):
    runs, status = whole_run
    assert status["state"] == "finished" and status["failed"] == []
    folder = runs / "supervised_vit"
    search, train = _read(folder / "search.json"), _read(folder / "train.json")
    rounds = 1 + len(search.get("edge_grids", []))
    assert search["complete"] and len(search["trials"]) == 3 + rounds - 1 and search["seconds"] > 0
    tried = [t["setting"] for t in search["trials"]]
    assert search["chosen"] in tried
    best = max(t["val_probe"] for t in search["trials"])
    assert search["score"] == best  # the best over every round
    # a further round was searched exactly when the best so far sat at an edge
    for extra in search.get("edge_grids", []):
        assert len(extra["lr"]) == 1 and extra["lr"][0] not in _PLAN[0]["grid"]["lr"]
    assert train["recipe"] == search["chosen"] and train["config"]["lr"] == search["chosen"]["lr"]
    assert train["n_images"] == _N and train["epochs"] == 2 and len(train["curve"]) == 2
    assert [c["name"] for c in train["checkpoints"]] == ["epoch0.5", "epoch1", "epoch1.5", "epoch2"]
    on_disk = _read(runs / "status.json")
    assert on_disk["encoders"]["supervised_vit"]["phase"] == "done"
    assert on_disk["encoders"]["supervised_vit"]["train"]["curve"] == train["curve"]
    assert len(on_disk["encoders"]["supervised_vit"]["search"]["trials_log"]) == len(
        search["trials"]
    )
    weights = torch.load(folder / "weights.pt", weights_only=True)
    assert [c[0] for c in weights["checkpoints"]] == [c["name"] for c in train["checkpoints"]]


@pytest.mark.slow
def test_a_run_interrupted_after_every_unit_ends_with_the_same_records_and_state(
    tmp_path, tiny_train, whole_run
):
    whole, _ = whole_run
    states = []
    for _ in range(_UNITS + 1):  # a time limit stops each call after one trial or one epoch
        status = _run(tmp_path, tiny_train, time_limit=1e-9)
        states.append(status["state"])
        if status["state"] == "finished":
            break
        if len(states) == 1:
            progress = _read(tmp_path / "status.json")["encoders"]["supervised_vit"]
            assert progress["phase"] == "search" and len(progress["search"]["trials_log"]) == 1
        if len(states) == 4:
            progress = _read(tmp_path / "status.json")["encoders"]["supervised_vit"]
            assert progress["phase"] == "training" and progress["train"]["epoch"] == 1
    assert states == ["stopped"] * (_UNITS - 1) + ["finished"]
    for record in ("search.json", "train.json"):
        assert _without_times(_read(tmp_path / "supervised_vit" / record)) == _without_times(
            _read(whole / "supervised_vit" / record)
        )
    a = torch.load(tmp_path / "supervised_vit" / "weights.pt", weights_only=True)
    b = torch.load(whole / "supervised_vit" / "weights.pt", weights_only=True)
    assert [c[:3] for c in a["checkpoints"]] == [c[:3] for c in b["checkpoints"]]
    for (*_, sa), (*_, sb) in zip(a["checkpoints"], b["checkpoints"]):
        assert all(torch.equal(sa[k], sb[k]) for k in sb)
    sa, sb = (
        torch.load(r / "supervised_vit" / "state.pt", weights_only=True) for r in (tmp_path, whole)
    )
    assert all(torch.equal(sa["encoder"][k], sb["encoder"][k]) for k in sb["encoder"])
    assert sa["run"]["curve"] == sb["run"]["curve"] and sa["run"]["step"] == sb["run"]["step"]


def test_finished_steps_are_skipped(tmp_path, tiny_train, whole_run, monkeypatch):
    import shutil

    from repeval_ref.zoo import train

    whole, _ = whole_run
    runs = tmp_path / "copy"
    shutil.copytree(whole, runs)

    def must_not_run(*args, **kwargs):
        raise AssertionError("a finished step ran again")

    monkeypatch.setattr(recipes, "search_recipe", must_not_run)
    monkeypatch.setattr(train, "train_encoder", must_not_run)
    status = _run(runs, tiny_train)
    assert status["state"] == "finished" and status["encoders"]["supervised_vit"]["phase"] == "done"
    # a failing step is recorded, and the run goes on to report it
    os.remove(runs / "supervised_vit" / "train.json")
    status = _run(runs, tiny_train)
    assert status["state"] == "failed" and status["failed"] == ["supervised_vit"]
    assert "a finished step ran again" in status["encoders"]["supervised_vit"]["error"]


@pytest.mark.slow
def test_the_search_reads_only_training_rows_and_the_training_all_of_them(
    tmp_path, tiny_train, monkeypatch
):
    """Every image a search trial trains or probes on is a row of its own part of the training
    split."""
    from repeval_ref import datasets
    from repeval_ref.datasets import fashion
    from repeval_ref.zoo import train

    x, y = tiny_train
    row_of = {im.tobytes(): i for i, im in enumerate(x)}
    seen = {"search": [], "probe": [], "val": [], "final": []}

    def train_split_only(split, **kwargs):
        assert split == "train", "the plateau run read the test split"
        return x.copy(), y.copy()

    def rows(images):
        return {row_of[im.tobytes()] for im in images}

    real_train, real_score = train.train_encoder, recipes.validation_score

    def spy_train(name, images, labels, **kwargs):
        seen["final" if "state_file" in kwargs else "search"].append(rows(images))
        return real_train(name, images, labels, **kwargs)

    def spy_score(encoder, fit_images, fit_labels, val_images, val_labels, **kwargs):
        seen["probe"].append(rows(fit_images))
        seen["val"].append(rows(val_images))
        return real_score(encoder, fit_images, fit_labels, val_images, val_labels, **kwargs)

    monkeypatch.setattr(datasets, "fashion_mnist", train_split_only)
    monkeypatch.setattr(fashion, "fashion_mnist", train_split_only)
    monkeypatch.setattr(train, "train_encoder", spy_train)
    monkeypatch.setattr(recipes, "validation_score", spy_score)
    status = plateau.run_plateau(tmp_path, plan=_PLAN, search=_SEARCH, log=None)
    assert status["state"] == "finished"
    fit, val = (set(r.tolist()) for r in recipes.validation_split(y, _SEARCH["val_size"], 0))
    trials = _read(tmp_path / "supervised_vit" / "search.json")["trials"]
    assert len(seen["search"]) == len(seen["probe"]) == len(seen["val"]) == len(trials) >= 3
    assert all(r <= fit for r in seen["search"] + seen["probe"]) and all(
        r <= val for r in seen["val"]
    )
    assert seen["final"] and all(r == set(range(_N)) for r in seen["final"])  # all training images


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"runs": None}, "runs"),
        ({"runs": ""}, "runs"),
        ({"names": ["dino_cnn"]}, "names"),
        ({"names": "supervised_vit"}, "names"),
        ({"names": []}, "names"),
        ({"time_limit": 0}, "time_limit"),
        ({"time_limit": True}, "time_limit"),
        ({"search": {"n_trian": 64}}, "search"),
        ({"plan": []}, "plan"),
        ({"plan": [{"name": "x", "base": "supervised_vit"}]}, "plan"),
        ({"plan": [{**_PLAN[0], "overrides": {"learning_rate": 1e-3}}]}, "overrides"),
        ({"plan": _PLAN * 2}, "plan"),
        ({"labels": None}, "images and labels"),
    ],
)
def test_bad_arguments_name_themselves(tmp_path, tiny_train, kwargs, word):
    args = {
        "runs": tmp_path,
        "plan": _PLAN,
        "search": _SEARCH,
        "images": tiny_train[0],
        "labels": tiny_train[1],
        "log": None,
        **kwargs,
    }
    with pytest.raises(ValueError, match=word):
        plateau.run_plateau(args.pop("runs"), **args)


def test_a_run_directory_in_use_is_refused(tmp_path, tiny_train):
    import fcntl

    with open(tmp_path / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ValueError, match="runs"):
            _run(tmp_path, tiny_train)


def test_the_cli_needs_a_run_directory():
    from repeval_ref.cli.zoo import main

    with pytest.raises(SystemExit) as exc:
        main(["plateau"])
    assert exc.value.code == 2


def test_the_plan_follows_the_issue_and_the_budget():
    from repeval_ref.zoo.registry import ARCHITECTURES
    from repeval_ref.zoo.train import encoder_config

    names = plateau.plan_names()
    assert sorted(names) == sorted(
        f"{o}_{a}"
        for o, a in [
            ("supervised", "resnet"),
            ("simclr", "resnet"),
            ("dino", "resnet"),
            ("supervised", "vit"),
            ("dino", "vit"),
            ("mae", "vit"),
            ("simclr", "vit"),
            ("supervised", "cnn"),
        ]
    )
    assert names[:2] == ["supervised_vit", "mae_vit"] and names.index(
        "supervised_resnet"
    ) < names.index("dino_vit")
    budget = {
        "supervised_vit": 15,
        "simclr_vit": 30,
        "dino_vit": 30,
        "mae_vit": 70,
        "supervised_resnet": 10,
        "simclr_resnet": 10,
        "dino_resnet": 8,  # repeval_ref/zoo/BUDGET.md
        "supervised_cnn": 3,
    }  # the CNN's registered epochs, searched after the plateau run
    for entry in plateau.PLAN:
        cfg = encoder_config(entry["base"], epochs=entry["epochs"], overrides=entry["overrides"])
        objective, arch = entry["name"].split("_")
        assert cfg["objective"] == objective and ARCHITECTURES[cfg["arch"]]["kind"] == arch
        assert cfg["train_images"] == 60000 and cfg["epochs"] == budget[entry["name"]]
        assert len(entry["grid"]["lr"]) >= 3
        assert len(recipes.grid_settings(entry["grid"], cfg)) >= 3
        if objective in ("simclr", "dino"):
            assert any("temperature" in key for key in entry["grid"])


def test_a_choice_at_an_edge_of_the_learning_rates_is_searched_beyond_it():
    grid = {"lr": [1e-4, 1e-3, 3e-3], "temperature": [0.1, 0.5]}
    assert plateau.edge_extension(grid, {"lr": 3e-3, "temperature": 0.1}, grid["lr"]) == {
        "lr": [pytest.approx(9e-3)],
        "temperature": [0.1, 0.5],
    }
    assert plateau.edge_extension(grid, {"lr": 1e-4}, grid["lr"])["lr"] == [
        pytest.approx(1e-4 / 3, rel=1e-5)
    ]
    assert plateau.edge_extension(grid, {"lr": 1e-3}, grid["lr"]) is None  # inside
    assert plateau.edge_extension({"lr": [1e-3]}, {"lr": 1e-3}, [1e-3]) is None  # no range
    assert plateau.edge_extension({"tau": [1]}, {"tau": 1}, []) is None  # no lr searched
    # after one extension the new value is an edge of everything tried
    tried = grid["lr"] + [9e-3]
    assert plateau.edge_extension(grid, {"lr": 9e-3}, tried)["lr"] == [pytest.approx(2.7e-2)]
    assert plateau.edge_extension(grid, {"lr": 3e-3}, tried) is None
    # the value beyond is written as a person would write it, not as a float product
    assert plateau.edge_extension({"lr": [3e-4, 1e-3]}, {"lr": 3e-4}, [3e-4, 1e-3])["lr"] == [1e-4]
    assert plateau.edge_extension({"lr": [1e-3, 3e-3]}, {"lr": 3e-3}, [1e-3, 3e-3])["lr"] == [9e-3]
    with pytest.raises(ValueError, match="grid"):
        plateau.edge_extension(None, {"lr": 1}, [1, 2])


def test_two_rounds_merge_into_the_first_maximum():
    first = {
        "trials": [1, 2],
        "grid": {"lr": [1, 2]},
        "seconds": 3.0,
        "chosen": {"lr": 2},
        "score": 0.7,
    }
    tie = {"trials": [3], "grid": {"lr": [6]}, "seconds": 1.0, "chosen": {"lr": 6}, "score": 0.7}
    got = plateau._merged(first, tie)
    assert got["chosen"] == {"lr": 2} and got["trials"] == [1, 2, 3] and got["seconds"] == 4.0
    assert got["edge_grids"] == [{"lr": [6]}] and got["grid"] == {"lr": [1, 2]}
    better = {**tie, "score": 0.8}
    assert plateau._merged(first, better)["chosen"] == {"lr": 6}


@pytest.mark.parametrize("extension_wins", [False, True])
def test_a_record_from_before_the_edge_search_is_extended_where_it_is_read(
    tmp_path, monkeypatch, extension_wins
):
    """A search record without ``edge_done`` whose choice sits at an edge is searched beyond it
    when read back; the training is kept when the choice stands and removed when it moves."""
    entry = {**_PLAN[0], "grid": {"lr": [1e-4, 1e-3, 3e-3]}}
    folder = tmp_path / entry["name"]
    folder.mkdir()
    old = {
        "name": entry["name"],
        "trials": [{"lr": r} for r in entry["grid"]["lr"]],
        "grid": entry["grid"],
        "seconds": 3.0,
        "chosen": {"lr": 3e-3},
        "score": 0.7,
        "complete": True,
    }
    (folder / "search.json").write_text(json.dumps(old))
    for stale in ("train.json", "state.pt", "weights.pt"):
        (folder / stale).write_text("{}")
    grids = []

    def fake_search(base, grid, **kwargs):
        grids.append(grid)
        score = 0.8 if extension_wins and grid["lr"][0] > 5e-3 else 0.6
        return {
            "trials": [{"lr": grid["lr"][0]}],
            "grid": grid,
            "seconds": 1.0,
            "chosen": {"lr": grid["lr"][0]},
            "score": score,
            "complete": True,
        }

    monkeypatch.setattr(recipes, "search_recipe", fake_search)
    run = plateau._Run(tmp_path, None, None)
    record = plateau._search(entry, run, None, None, {})
    assert (
        record["edge_done"] is True and json.loads((folder / "search.json").read_text()) == record
    )
    if extension_wins:  # 9e-3 wins, so 2.7e-2 is tried too (the second and last step)
        assert [g["lr"] for g in grids] == [[pytest.approx(9e-3)], [pytest.approx(2.7e-2)]]
        assert record["chosen"] == {"lr": pytest.approx(9e-3)}
        assert not any((folder / f).exists() for f in ("train.json", "state.pt", "weights.pt"))
    else:  # the old choice stands after one step: its training is kept
        assert [g["lr"] for g in grids] == [[pytest.approx(9e-3)]]
        assert record["chosen"] == {"lr": 3e-3}
        assert all((folder / f).exists() for f in ("train.json", "state.pt", "weights.pt"))
    # read back once more, nothing is searched again
    grids.clear()
    assert (
        plateau._search(entry, plateau._Run(tmp_path, None, None), None, None, {}) == record
        and grids == []
    )
