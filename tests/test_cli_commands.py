"""The commands of ``repeval`` as settings, a pure ``run_*`` and a thin ``cmd_*``.

Every ``run_*`` of :mod:`repeval_ref.cli` takes a frozen settings object (never an
argparse namespace), and returns the numbers its command writes: each is run here
beside the command on the same inputs and compared with the file the command wrote.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import json
import pkgutil
import typing

import numpy as np
import pytest
from sklearn.datasets import load_digits

import repeval_ref.cli
from repeval_ref.cli import main
from repeval_ref.cli._arguments import Settings
from repeval_ref.cli._render import json_default


def _run_functions():
    for info in pkgutil.iter_modules(repeval_ref.cli.__path__):
        if info.name == "__main__":  # runs the command when imported
            continue
        module = importlib.import_module(f"repeval_ref.cli.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("run_") and fn.__module__ == module.__name__:
                yield f"{module.__name__}.{name}", fn


def test_no_run_function_takes_an_argparse_namespace():
    found = dict(_run_functions())
    assert {
        "repeval_ref.cli.report.run_report",
        "repeval_ref.cli.compare.run_compare",
        "repeval_ref.cli.leaderboard.run_leaderboard",
        "repeval_ref.cli.suite.run_suite",
        "repeval_ref.cli.loop.run_loop",
        "repeval_ref.cli.zoo.run_zoo",
    } <= set(found)
    for name, fn in found.items():
        first = next(iter(inspect.signature(fn).parameters.values()))
        hint = typing.get_type_hints(fn).get(first.name)
        assert inspect.isclass(hint) and issubclass(hint, Settings), (
            f"{name}: first parameter {hint!r}"
        )
        assert dataclasses.is_dataclass(hint) and hint.__dataclass_params__.frozen, name
        with pytest.raises(ValueError, match="settings must be a"):
            fn(argparse.Namespace(**{f.name: None for f in dataclasses.fields(hint)}))


def test_settings_refuse_bad_values_naming_the_field():
    from repeval_ref.cli.compare import CompareSettings
    from repeval_ref.cli.leaderboard import LeaderboardSettings
    from repeval_ref.cli.report import ReportSettings

    with pytest.raises(ValueError, match="draws"):
        ReportSettings(train="x.npz", draws=1)
    with pytest.raises(ValueError, match="id_batch"):
        ReportSettings(train="x.npz", id_batch=2)
    with pytest.raises(ValueError, match="boot"):
        CompareSettings(a="a.npz", b="b.npz", boot=0)
    with pytest.raises(ValueError, match="rank_by"):
        LeaderboardSettings(inputs=("a.npz", "b.npz"), rank_by="ridge")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ReportSettings(train="x.npz").seed = 1


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    root = tmp_path_factory.mktemp("commands")
    X, y = load_digits(return_X_y=True)
    X, y = X[:400], y[:400]
    noise = np.random.default_rng(0).normal(size=X.shape)
    np.savez(root / "a.npz", features=X, labels=y)
    np.savez(root / "b.npz", features=X + 4 * noise, labels=y)
    return root


def _plain(tree):
    return json.loads(json.dumps(tree, default=json_default))


def test_run_report_returns_what_report_wrote(digits, capsys):
    from repeval_ref.cli.report import ReportSettings, run_report

    out = digits / "report"
    assert (
        main(
            [
                "report",
                str(digits / "a.npz"),
                "--test-fraction",
                "0.25",
                "--out",
                str(out),
                "--quiet",
                "--probe-c",
                "0.1,1",
                "--dse-samples",
                "200",
                "--pair-samples",
                "300",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    written = json.loads((out / "report.json").read_text())
    result = run_report(
        ReportSettings(
            train=str(digits / "a.npz"),
            test_fraction=0.25,
            probe_c=(0.1, 1),
            dse_samples=200,
            pair_samples=300,
        )
    )
    assert set(written) - set(result["report"]) == {"plots"}
    assert _plain(result["report"]) == {k: v for k, v in written.items() if k != "plots"}
    assert result["header"].replace("`", "") in " ".join(printed.split())
    assert result["spectrum"].ndim == 1 and np.all(np.diff(result["spectrum"]) <= 1e-9)


def test_run_compare_returns_what_compare_wrote(digits, capsys):
    from repeval_ref.cli.compare import CompareSettings, run_compare

    out = digits / "compare"
    assert (
        main(
            [
                "compare",
                str(digits / "a.npz"),
                str(digits / "b.npz"),
                "--out",
                str(out),
                "--quiet",
                "--boot",
                "300",
                "--probe-c",
                "1",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    written = json.loads((out / "compare.json").read_text())
    result = run_compare(
        CompareSettings(a=str(digits / "a.npz"), b=str(digits / "b.npz"), boot=300, probe_c=(1,))
    )
    assert _plain(result["compare"]) == written
    a, b = result["inputs"]
    assert a.x.shape == b.x.shape == (400, 64)
    knn = written["paired"]["knn"]
    assert f"{100 * knn['gain_B_minus_A']:+.2f}" in printed  # the printed gain is the returned one
    # the gain is B's accuracy minus A's, on the same test images
    assert knn["gain_B_minus_A"] == pytest.approx(knn["B"]["accuracy"] - knn["A"]["accuracy"])


def test_run_leaderboard_returns_what_leaderboard_wrote(digits, capsys):
    from repeval_ref.cli.leaderboard import LeaderboardSettings, run_leaderboard

    out = digits / "board"
    assert (
        main(
            [
                "leaderboard",
                str(digits / "a.npz"),
                str(digits / "b.npz"),
                "--out",
                str(out),
                "--quiet",
                "--boot",
                "300",
                "--probe-c",
                "1",
            ]
        )
        == 0
    )
    capsys.readouterr()
    written = json.loads((out / "leaderboard.json").read_text())
    board = run_leaderboard(
        LeaderboardSettings(
            inputs=(str(digits / "a.npz"), str(digits / "b.npz")), boot=300, probe_c=(1,)
        )
    )
    assert _plain(board) == written
    assert [r["name"] for r in board["ranking"]] == sorted(
        ["a", "b"],
        key=lambda n: -next(e["probe"]["accuracy"] for e in board["encoders"] if e["name"] == n),
    )


def test_zoo_evaluate_writes_what_run_zoo_returns(tmp_path, monkeypatch, capsys):
    from repeval_ref.cli.zoo import ZooSettings, main, run_zoo
    from repeval_ref.zoo import evaluate, train

    def fake(name):  # stands for the shipped encoder's evaluation (minutes of features)
        test = {"knn20": len(name) / 100, "probe": 0.5, "probe_C": 1.0, "n_test": 7}
        return {"checkpoints": {}, "test": test, "plateau": None, "evaluation_protocol": {}}

    monkeypatch.setattr(evaluate, "evaluate_encoder", fake)
    monkeypatch.setattr(train, "deterministic_torch", lambda: None)  # leave torch's threads
    lines = []
    result = run_zoo(
        ZooSettings(command="evaluate", out=str(tmp_path / "x.json"), only=["random_cnn"]),
        log=lines.append,
    )
    assert result == {"command": "evaluate", "encoders": {"random_cnn": fake("random_cnn")}}
    assert lines == ["random_cnn: 20-NN 0.1000, probe 0.5000 (C=1) on 7 test images"]
    assert not (tmp_path / "x.json").exists()  # run_zoo writes nothing
    out = tmp_path / "ev" / "zoo_evaluation.json"
    assert main(["evaluate", "--only", "random_cnn", "--out", str(out)], prog="repeval zoo") == 0
    assert json.loads(out.read_text()) == {"format": 1, "encoders": result["encoders"]}
    assert capsys.readouterr().out == f"{lines[0]}\nwrote {out}\n"
