"""The GPU run of the zoo (``make zoo DEVICE=cuda``), checked on a machine without one.

What can be checked here: the device is validated; naming the CPU changes nothing (the run
is bit-identical to the default); every objective's loss, and the augmentations it draws,
follow the batch to another device instead of mixing it with CPU tensors (PyTorch's "meta"
device stands in for the GPU: an operation that mixes it with a CPU tensor fails, as one
that mixes a CUDA tensor with a CPU tensor does); the command line refuses a device run that
would overwrite the shipped CPU weights, and the Makefile passes the device, the longer
epochs and a folder of its own.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from repeval_ref.zoo import augment
from repeval_ref.zoo.registry import build_encoder
from repeval_ref.zoo.train import encoder_config, resolve_device, train_encoder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_resolve_device_accepts_the_cpu_and_refuses_what_this_machine_lacks():
    assert resolve_device(None) == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    for bad in ("no-such-device", "meta", 3):
        with pytest.raises(ValueError, match="device"):
            resolve_device(bad)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            resolve_device("cuda")


def test_naming_the_cpu_is_the_default_run_bit_for_bit():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(600, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=600)
    for name in ("simclr_vit", "dino_resnet"):
        default = train_encoder(name, images, labels, epochs=1, n_images=512)
        named = train_encoder(name, images, labels, epochs=1, n_images=512, device="cpu")
        assert default["device"] == named["device"] == "cpu"
        assert default["curve"] == named["curve"]
        for (n1, _, _, a), (n2, _, _, b) in zip(default["checkpoints"], named["checkpoints"]):
            assert n1 == n2 and a.keys() == b.keys()
            assert all(torch.equal(a[k], b[k]) and b[k].device.type == "cpu" for k in a)


@pytest.mark.parametrize(
    "name",
    [
        "supervised_vit",
        "supervised_resnet",
        "simclr_vit",
        "simclr_resnet",
        "dino_vit",
        "mae_vit",
        "collapsed_vit",
    ],
)
def test_each_objective_follows_the_batch_to_another_device(name, monkeypatch):
    import importlib

    cfg = encoder_config(name)
    objective = importlib.import_module(f"repeval_ref.zoo.{cfg['objective']}")
    if cfg["objective"] == "mae":
        # the masked loss checks that some patch is hidden, a value a meta tensor does not have;
        # what matters here is that its three inputs reach it on the batch's device
        def on_device(pred, target, mask):
            assert {t.device.type for t in (pred, target, mask)} == {"meta"}
            return (pred - target).pow(2).mean(dim=2).mul(mask).sum() / mask.shape[0]

        monkeypatch.setattr(objective, "masked_reconstruction_loss", on_device)
    encoder = build_encoder(cfg["arch"], 0)
    heads = torch.nn.ModuleDict(objective.make_heads(encoder, cfg))
    encoder.to("meta")
    heads.to("meta")
    state = objective.init_state(encoder, heads, cfg) if hasattr(objective, "init_state") else {}
    x = torch.zeros(8, 1, 28, 28, device="meta")
    y = torch.zeros(8, dtype=torch.int64, device="meta")
    loss = objective.training_loss(
        encoder, heads, x, y, torch.Generator().manual_seed(0), cfg, state
    )
    assert loss.device.type == "meta" and loss.ndim == 0
    if hasattr(objective, "after_step"):
        objective.after_step(encoder, heads, state, cfg, 0.5)


def test_the_augmentations_draw_on_the_cpu_generator_whatever_the_device():
    """The same generator state gives the same draws, so a GPU batch gets the views its CPU
    copy would get; here the draws after a meta-device view equal those after a CPU view."""
    x = torch.randn(4, 1, 28, 28)
    g_cpu, g_meta = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    augment.random_view(x, g_cpu)
    out = augment.random_view(x.to("meta"), g_meta)
    assert out.device.type == "meta" and out.shape == x.shape
    assert torch.equal(torch.rand(3, generator=g_cpu), torch.rand(3, generator=g_meta))


def _zoo(*args):
    return subprocess.run(
        [sys.executable, "-m", "repeval_ref.zoo", "train", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_command_refuses_a_device_run_into_the_shipped_weights_and_a_missing_device():
    out = _zoo("--epochs-scale", "2", "--only", "supervised_cnn")
    assert out.returncode == 2 and "--weights-dir" in out.stderr
    out = _zoo("--epochs-scale", "0", "--weights-dir", "x")
    assert out.returncode == 2 and "--epochs-scale must be an integer >= 1" in out.stderr
    out = _zoo("--device", "nonsense", "--weights-dir", "x")
    assert out.returncode == 2 and "--device" in out.stderr
    if not torch.cuda.is_available():
        out = _zoo("--device", "cuda", "--weights-dir", "x")
        assert out.returncode == 2 and "no CUDA device" in out.stderr


def test_train_and_save_validates_epochs_scale():
    from repeval_ref.zoo.build import train_and_save

    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match="epochs_scale"):
            train_and_save("supervised_cnn", epochs_scale=bad)


def test_make_zoo_passes_the_device_the_longer_epochs_and_a_folder_of_its_own():
    def dry(*args):
        out = subprocess.run(
            ["make", "-n", "zoo", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        return [line for line in out.stdout.splitlines() if "repeval_ref.zoo train" in line][
            -1
        ].strip()

    assert dry().endswith("train --device cpu --epochs-scale 1")
    assert dry("DEVICE=cuda").endswith(
        "train --device cuda --epochs-scale 4 --weights-dir zoo-cuda"
    )
    assert dry("DEVICE=cuda", "ZOO_EPOCHS_SCALE=8").endswith(
        "--epochs-scale 8 --weights-dir zoo-cuda"
    )
