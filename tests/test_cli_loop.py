"""`repeval loop` end to end on the digits default (subprocess)."""

import os
import re
import subprocess
import sys

import pytest


def _run(*args, timeout=240):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "repeval_ref.cli", "loop", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, proc.stderr


@pytest.mark.slow
def test_loop_default_on_digits():
    out, err = _run()
    acc = float(re.search(r"^probe accuracy: (\d\.\d+)$", out, re.M).group(1))
    assert 0.9 < acc <= 1.0
    assert re.search(r"^encoder state unchanged: True", out, re.M)
    diff = float(re.search(r"max \|logit difference\| = (\S+)$", out, re.M).group(1))
    assert diff < 1e-4
    shift = float(re.search(r"moved a running mean by (\d+\.\d+)$", out, re.M).group(1))
    assert shift > 0
    assert "restored after that demonstration: True" in err


@pytest.mark.slow
def test_loop_grid_with_cache_reuses_features(tmp_path, capsys):
    # In-process (the subprocess run above covers the command itself): faster on 2 cores.
    import torch

    from repeval_ref.cli.loop import main

    args = ["--pretrain-epochs", "0", "--probe-epochs", "5", "--grid", "--cache-dir", str(tmp_path)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(args) == 0
        out1, err1 = capsys.readouterr()
        assert main(args) == 0
        out2, err2 = capsys.readouterr()
    finally:
        torch.set_num_threads(threads)
    assert "written to the cache" in err1
    m = re.search(r"^chosen probe: view=(\S+) lr=(\S+) val acc=(\S+) test acc=(\S+)", out1, re.M)
    assert m and 0 <= float(m.group(3)) <= 1 and 0 <= float(m.group(4)) <= 1
    assert "encoder state unchanged: True" in out1
    assert "train read from the cache, test read from the cache" in err2
    assert out1 == out2  # same features, same probes, same numbers


PREFIX = "repeval loop: error: "


def _error_line(capsys, argv):
    """Run main(argv), expect exit status 2 and one clean error line on stderr; return it."""
    from repeval_ref.cli.loop import main

    with pytest.raises(SystemExit) as info:
        main(argv, prog="repeval loop")
    assert info.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(PREFIX) and err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err[len(PREFIX) :].strip()


def _fake_torchvision(monkeypatch):
    import types

    from repeval_ref.torch import SmallCNN

    tv = types.ModuleType("torchvision")
    tv.models = types.SimpleNamespace(
        get_model=lambda name, weights=None: SmallCNN(in_channels=3, width=4)
    )
    monkeypatch.setitem(sys.modules, "torchvision", tv)


def _image_folder(root, per_class=8, size=(20, 24)):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for c, name in enumerate(["cats", "dogs"]):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            arr = np.clip(rng.normal(60 + 120 * c, 30, size=(*size, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(arr).save(root / name / f"{i}.png")
    return root


def test_loop_clear_errors(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "timm", None)  # as on a machine without timm
    assert "timm is not installed" in _error_line(
        capsys, ["--backbone", "timm:vit_base_patch16_224", "--hub"]
    )
    assert "--backbone must be" in _error_line(capsys, ["--backbone", "keras:resnet"])
    assert "small CNN is for --data digits" in _error_line(
        capsys, ["--data", str(os.path.dirname(__file__))]
    )


def test_loop_user_errors_are_one_line_with_status_2(tmp_path, monkeypatch, capsys):
    import torch

    msg = _error_line(
        capsys,
        ["--backbone", "torchvision:resnet18", "--random-init", "--data", str(tmp_path / "nope")],
    )
    assert msg == (
        f"--data folder not found: {str(tmp_path / 'nope')!r} (use 'digits', 'fashion-mnist' "
        "or an image folder)"
    )
    assert "--probe-epochs must be >= 1, got 0" in _error_line(capsys, ["--probe-epochs", "0"])
    assert "--batch-size must be >= 2" in _error_line(capsys, ["--batch-size", "1"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    msg = _error_line(capsys, ["--device", "cuda"])
    assert "device 'cuda' is not available" in msg and "available here: cpu" in msg
    assert "device 'tpu' is not a device torch knows" in _error_line(capsys, ["--device", "tpu"])
    # A weights file that is not a checkpoint, and one for another architecture (library errors).
    _fake_torchvision(monkeypatch)
    (tmp_path / "w.txt").write_text("not weights")
    msg = _error_line(
        capsys, ["--backbone", "torchvision:small", "--weights", str(tmp_path / "w.txt")]
    )
    assert "is not a PyTorch checkpoint" in msg
    torch.save({"other.weight": torch.zeros(2)}, tmp_path / "other.pth")
    msg = _error_line(
        capsys, ["--backbone", "torchvision:small", "--weights", str(tmp_path / "other.pth")]
    )
    assert "does not fit torchvision 'small'" in msg
    assert "--weights file not found" in _error_line(
        capsys, ["--backbone", "torchvision:small", "--weights", str(tmp_path / "missing.pth")]
    )


def test_loop_refuses_a_named_backbone_without_weights(monkeypatch, capsys):
    _fake_torchvision(monkeypatch)
    msg = _error_line(capsys, ["--backbone", "torchvision:resnet18"])
    assert (
        "needs weights" in msg
        and "--weights PATH" in msg
        and "--hub" in msg
        and "--random-init" in msg
    )
    msg = _error_line(capsys, ["--backbone", "torchvision:resnet18", "--hub", "--random-init"])
    assert "not --hub and --random-init" in msg
    assert "is for a torchvision/timm --backbone" in _error_line(capsys, ["--random-init"])


def test_loop_random_init_runs_with_a_warning(tmp_path, monkeypatch, capsys):
    import torch

    from repeval_ref.cli.loop import main

    _fake_torchvision(monkeypatch)
    data = _image_folder(tmp_path / "imgs", size=(8, 8))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        code = main(
            [
                "--backbone",
                "torchvision:small",
                "--random-init",
                "--data",
                str(data),
                "--image-size",
                "8",
                "--probe-epochs",
                "2",
                "--device",
                "cpu",
            ]
        )
    finally:
        torch.set_num_threads(threads)
    out, err = capsys.readouterr()
    assert code == 0, out + err
    warning = [line for line in err.splitlines() if line.startswith("warning: --random-init")]
    assert len(warning) == 1 and "untrained" in warning[0]
    assert re.search(r"^probe accuracy: \d\.\d+$", out, re.M)


def test_loop_on_an_image_folder_with_a_local_torchvision_backbone(tmp_path, monkeypatch, capsys):
    """The image-folder path, with a stand-in for torchvision (not installed here)."""
    import torch

    from repeval_ref.cli.loop import main
    from repeval_ref.torch import SmallCNN

    _image_folder(tmp_path / "imgs")
    torch.manual_seed(0)
    torch.save(SmallCNN(in_channels=3, width=4).state_dict(), tmp_path / "w.pth")
    _fake_torchvision(monkeypatch)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        code = main(
            [
                "--backbone",
                "torchvision:small",
                "--weights",
                str(tmp_path / "w.pth"),
                "--data",
                str(tmp_path / "imgs"),
                "--image-size",
                "16",
                "--probe-epochs",
                "5",
                "--grid",
            ]
        )
    finally:
        torch.set_num_threads(threads)
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "features: train (12, 16), test (4, 16)" in err  # 75/25 split of 16 images
    assert re.search(r"^probe accuracy: \d\.\d+$", out, re.M)
    assert "encoder state unchanged: True" in out and "chosen probe:" in out


def test_zoo_small_encoder_gets_the_zoo_normalisation():
    """`--backbone zoo:NAME --data fashion-mnist` feeds the small zoo encoders exactly what
    they were trained on: ``zoo.inputs.to_tensor`` of the uint8 images (not just / 255)."""
    import torch

    from repeval_ref.cli import _loop_data, _loop_settings
    from repeval_ref.datasets import fashion_mnist
    from repeval_ref.zoo.inputs import to_tensor

    try:
        images, labels = fashion_mnist("test")
    except (FileNotFoundError, OSError) as exc:  # pragma: no cover - `make data` installs it
        pytest.skip(f"Fashion-MNIST not installed: {exc}")
    args = _loop_settings.parse_loop_args(
        ["--backbone", "zoo:supervised_cnn", "--data", "fashion-mnist", "--limit", "50"], "loop"
    )
    enc = _loop_data.build_encoder(args, None, 10, lambda *_: None)
    _, (x, y), _, _ = _loop_data.load_data(args, enc)
    assert torch.equal(y, torch.from_numpy(labels[:50]))
    torch.testing.assert_close(x, to_tensor(images[:50]), rtol=0, atol=1e-6)
    assert (
        abs(float(x.mean())) < 0.5
    )  # normalised, where / 255 alone has mean ~0.29 and no negatives
    assert float(x.min()) < 0


# ------------------------------------------ errors name the command typed


@pytest.mark.slow
def test_repeval_loop_errors_name_the_command_typed(capsys):
    from repeval_ref.cli import main as repeval

    with pytest.raises(SystemExit) as info:
        repeval(["loop", "--probe-epochs", "0"])
    assert info.value.code == 2
    assert capsys.readouterr().err == "repeval loop: error: --probe-epochs must be >= 1, got 0\n"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", COLUMNS="100")
    proc = subprocess.run(
        [sys.executable, "-m", "repeval_ref.cli", "loop", "--batch-size", "1"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(PREFIX) and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------ settings, run_loop and the command


def test_loop_settings_refuse_bad_values_naming_the_option():
    from repeval_ref.cli._loop_settings import LoopSettings

    for bad, option in (
        ({"probe_epochs": 0}, "--probe-epochs"),
        ({"batch_size": 1}, "--batch-size"),
        ({"backbone": "resnet"}, "--backbone"),
        ({"backbone": "torchvision:resnet18"}, "needs weights"),
        ({"data": "no/such/folder"}, "--data"),
    ):
        with pytest.raises(ValueError, match=option):
            LoopSettings(**bad)


def test_run_loop_returns_what_the_loop_prints_and_saves(tmp_path, capsys):
    import numpy as np
    import torch

    from repeval_ref import knn_classify
    from repeval_ref.cli._evaluate import KNN_TAU
    from repeval_ref.cli._loop_settings import LoopSettings
    from repeval_ref.cli.loop import main, run_loop

    result = run_loop(LoopSettings(pretrain_epochs=0, probe_epochs=3, limit=300, seed=1))
    xtr, ytr, xte, yte = (
        result[k] for k in ("train_features", "train_labels", "test_features", "test_labels")
    )
    assert xtr.shape[0] == xte.shape[0] == 300 and result["n_classes"] == 10
    # the probe's accuracy is that of its own predictions on the returned test features
    with torch.no_grad():
        pred = result["probe"](torch.from_numpy(xte)).argmax(1).numpy()
    assert result["probe_accuracy"] == pytest.approx(np.mean(pred == yte))
    # the report's weighted k-NN, recomputed by the package's k-NN on the same features
    knn = result["summary"]["knn"][0]
    pred = knn_classify(xtr.astype(np.float64), ytr, xte.astype(np.float64), knn["k"], KNN_TAU, 10)
    assert knn["correct"] == int(np.sum(pred == yte)) and knn["n"] == 300
    assert result["state_changed"] == [] and result["restored"] is True
    assert result["fold_max_diff"] < 1e-4 and result["running_mean_shift"] > 0
    out = tmp_path / "feats"
    argv = ["--pretrain-epochs", "0", "--probe-epochs", "3", "--limit", "300", "--seed", "1"]
    assert main(argv + ["--save-features", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"probe accuracy: {result['probe_accuracy']:.3f}\n" in printed
    assert f"moved a running mean by {result['running_mean_shift']:.3f}" in printed
    for part, x, y in (("train", xtr, ytr), ("test", xte, yte)):
        with np.load(out / f"{part}.npz") as z:
            np.testing.assert_array_equal(z["features"], x)
            np.testing.assert_array_equal(z["labels"], y)
