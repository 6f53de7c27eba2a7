"""What the zoo holds: each encoder's architecture, objective and training budget.

Book: the Performance appendix (the zoo). These settings are the ones the shipped
weights were trained with; ``python -m repeval_ref.zoo train`` reads them, and the
manifest records a copy next to the weights.
"""

from __future__ import annotations

import torch

from ..torch.models import SmallCNN, SmallResNet, TinyViT

__all__ = ["ARCHITECTURES", "ENCODERS", "build_encoder", "MEAN", "STD", "CHECKPOINT_FRACTIONS"]

#: Fashion-MNIST pixel mean and standard deviation (of ``images / 255``, training split),
#: used to normalise every input of the zoo's encoders.
MEAN, STD = 0.2860, 0.3530

#: Checkpoints are kept after these shares of the training steps.
CHECKPOINT_FRACTIONS = (0.25, 0.5, 0.75, 1.0)

ARCHITECTURES = {
    # 28 x 28 images in 7 x 7 patches: 16 patch tokens + 1 class token; about 138k parameters
    "vit": {
        "kind": "vit",
        "image_size": 28,
        "patch_size": 7,
        "in_channels": 1,
        "dim": 64,
        "depth": 4,
        "heads": 4,
        "mlp_ratio": 2,
    },
    # three conv blocks, 16/32/64 channels; about 23k parameters
    "cnn": {"kind": "cnn", "in_channels": 1, "width": 16},
    # ResNet-style: a 3x3 stem and three stride-2 stages of basic blocks (32/64/128
    # channels, 1/1/2 blocks: 28 -> 14 -> 7 -> 4), BatchNorm, global average pool;
    # about 0.6 M parameters.
    "resnet": {
        "kind": "resnet",
        "in_channels": 1,
        "widths": [32, 64, 128],
        "depths": [1, 1, 2],
        "norm": "batch",
    },
}

_COMMON = {
    "seed": 0,
    "batch_size": 256,
    "lr": 1e-3,
    "weight_decay": 0.05,
    "warmup": 0.05,
    "train_images": 60000,
    "n_classes": 10,
}
_VIEWS = {"crop_scale": [0.35, 1.0]}

#: the DINO head and its temperatures and momenta, shared by the DINO encoders
_DINO_HEAD = {
    "head_hidden": 128,
    "head_bottleneck": 64,
    "prototypes": 256,
    "student_temperature": 0.1,
    "teacher_temperature": 0.04,  # teacher's searched
    "center_momentum": 0.9,
    "momentum": 0.99,
}

# The plateau zoo (``python -m repeval_ref.zoo plateau``, then ``ship``): every
# setting marked "searched" was chosen on a validation split of the training images
# (benchmarks/zoo_plateau/NAME/search.json); the epochs are those of BUDGET.md. These
# encoders train on all 60,000 images; the collapsed control, which only has to collapse,
# on a seeded third of them.
ENCODERS = {
    # random initialisations: the floor every trained encoder of the architecture must clear
    "random_vit": {"objective": "random_init", "arch": "vit", "epochs": 0, **_COMMON},
    "random_cnn": {"objective": "random_init", "arch": "cnn", "epochs": 0, **_COMMON},
    "random_resnet": {"objective": "random_init", "arch": "resnet", "epochs": 0, **_COMMON},
    "supervised_cnn": {
        "objective": "supervised",
        "arch": "cnn",
        "epochs": 3,
        **_COMMON,
        "lr": 6e-3,
    },  # searched
    "supervised_vit": {
        "objective": "supervised",
        "arch": "vit",
        "epochs": 15,
        **_COMMON,
        "lr": 3e-3,
    },  # searched
    "supervised_resnet": {
        "objective": "supervised",
        "arch": "resnet",
        "epochs": 10,
        **_COMMON,
        "lr": 1e-3,
    },  # searched
    "simclr_vit": {
        "objective": "simclr",
        "arch": "vit",
        "epochs": 30,
        **_COMMON,
        **_VIEWS,
        "lr": 3e-3,  # searched
        "temperature": 0.1,
        "proj_hidden": 128,
        "proj_dim": 64,
    },  # temperature searched
    "simclr_resnet": {
        "objective": "simclr",
        "arch": "resnet",
        "epochs": 10,
        **_COMMON,
        **_VIEWS,
        "lr": 1e-3,
        "temperature": 0.1,  # both searched
        "proj_hidden": 128,
        "proj_dim": 64,
    },
    "dino_vit": {
        "objective": "dino",
        "arch": "vit",
        "epochs": 30,
        **_COMMON,
        **_VIEWS,
        "lr": 3e-3,  # searched
        **_DINO_HEAD,
    },
    "dino_resnet": {
        "objective": "dino",
        "arch": "resnet",
        "epochs": 8,
        **_COMMON,
        **_VIEWS,
        "lr": 2.7e-2,  # searched, past the grid's edge twice
        **_DINO_HEAD,
    },
    "mae_vit": {
        "objective": "mae",
        "arch": "vit",
        "epochs": 70,
        **_COMMON,
        "lr": 1e-4,  # searched
        "mask_ratio": 0.75,
        "decoder_dim": 32,
        "decoder_depth": 1,
        "decoder_heads": 2,
    },  # mask searched
    "collapsed_vit": {
        "objective": "collapsed",
        "arch": "vit",
        "epochs": 2,
        **_COMMON,
        "train_images": 20000,
        **_VIEWS,
        "proj_hidden": 128,
        "proj_dim": 64,
    },
}


def build_encoder(arch, seed=0):
    """A freshly initialised encoder of architecture ``arch`` (a key of :data:`ARCHITECTURES`
    or its dict), seeded so that the same seed gives the same weights."""
    spec = ARCHITECTURES[arch] if isinstance(arch, str) else dict(arch)
    torch.manual_seed(int(seed))
    if spec["kind"] == "vit":
        return TinyViT(
            spec["image_size"],
            spec["patch_size"],
            spec["in_channels"],
            spec["dim"],
            spec["depth"],
            spec["heads"],
            spec["mlp_ratio"],
        )
    if spec["kind"] == "cnn":
        return SmallCNN(spec["in_channels"], spec["width"])
    if spec["kind"] == "resnet":
        return SmallResNet(
            spec["in_channels"],
            spec["widths"],
            spec["depths"],
            spec.get("norm", "batch"),
            spec.get("groups", 8),
        )
    raise ValueError(f"unknown architecture kind {spec['kind']!r}")
