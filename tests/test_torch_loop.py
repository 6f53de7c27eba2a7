"""`python -m repeval_ref.loop` end to end on the digits default (subprocess)."""
import os
import re
import subprocess
import sys

import pytest


def _run(*args, timeout=240):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "repeval_ref.loop", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, proc.stderr


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


def test_loop_grid_with_cache_reuses_features(tmp_path, capsys):
    # In-process (the subprocess run above covers the command itself): faster on 2 cores.
    import torch

    from repeval_ref.loop import main

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


def test_loop_clear_errors(monkeypatch):
    from repeval_ref.loop import main

    monkeypatch.setitem(sys.modules, "timm", None)  # as on a machine without timm
    with pytest.raises(SystemExit, match="timm is not installed"):
        main(["--backbone", "timm:vit_base_patch16_224"])
    with pytest.raises(SystemExit, match="--backbone must be"):
        main(["--backbone", "keras:resnet"])
    with pytest.raises(SystemExit, match="small CNN is for --data digits"):
        main(["--data", str(os.path.dirname(__file__))])


def test_loop_on_an_image_folder_with_a_local_torchvision_backbone(tmp_path, monkeypatch, capsys):
    """The image-folder path, with a stand-in for torchvision (not installed here)."""
    import types

    import numpy as np
    import torch
    from PIL import Image

    from repeval_ref.loop import main
    from repeval_ref.torch import SmallCNN

    rng = np.random.default_rng(0)
    for c, name in enumerate(["cats", "dogs"]):
        (tmp_path / "imgs" / name).mkdir(parents=True)
        for i in range(8):
            arr = np.clip(rng.normal(60 + 120 * c, 30, size=(20, 24, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(arr).save(tmp_path / "imgs" / name / f"{i}.png")
    torch.manual_seed(0)
    torch.save(SmallCNN(in_channels=3, width=4).state_dict(), tmp_path / "w.pth")
    tv = types.ModuleType("torchvision")
    tv.models = types.SimpleNamespace(get_model=lambda name, weights=None: SmallCNN(in_channels=3, width=4))
    monkeypatch.setitem(sys.modules, "torchvision", tv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        code = main(["--backbone", "torchvision:small", "--weights", str(tmp_path / "w.pth"), "--data",
                     str(tmp_path / "imgs"), "--image-size", "16", "--probe-epochs", "5", "--grid"])
    finally:
        torch.set_num_threads(threads)
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "features: train (12, 16), test (4, 16)" in err  # 75/25 split of 16 images
    assert re.search(r"^probe accuracy: \d\.\d+$", out, re.M)
    assert "encoder state unchanged: True" in out and "chosen probe:" in out
