"""The options of ``repeval loop``: its parser and :class:`LoopSettings`, checked before any work.

Every refusal is a :class:`UsageError` (a ``ValueError``) whose message names the option
as the command line spells it; :mod:`.loop` prints it as one line.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass

from ._arguments import Settings

DESCRIPTION = "``{prog}``: the PyTorch reference loop of the course, end to end."


class UsageError(ValueError):
    """A problem with the command line or the data it names, reported as one line."""


def parse_loop_args(argv, prog):
    """The parsed command line of ``repeval loop`` (an :class:`argparse.Namespace`)."""
    p = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION.format(prog=prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--backbone",
        default="small-cnn",
        help="small-cnn (default), torchvision:ARCH, timm:ARCH or zoo:NAME",
    )
    p.add_argument(
        "--weights", default=None, help="local weights file for a torchvision/timm backbone"
    )
    p.add_argument(
        "--hub", action="store_true", help="let torchvision/timm download weights (needs internet)"
    )
    p.add_argument(
        "--random-init",
        action="store_true",
        help="run a torchvision/timm backbone at random initialisation, knowingly "
        "(its features are those of an untrained network)",
    )
    p.add_argument(
        "--data",
        default="digits",
        help="'digits' (default), 'fashion-mnist' (its train and test splits), or an image "
        "folder: DIR/train and DIR/test (or DIR/val) with class subfolders, or DIR with "
        "class subfolders (split 75/25)",
    )
    p.add_argument(
        "--image-size",
        type=int,
        default=None,
        help="center-crop size for image folders (default 224); side the digits or "
        "Fashion-MNIST images are resized to for an encoder that prepares its inputs "
        "(default 96)",
    )
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="use only the first N training and the first N test images (a quick run)",
    )
    p.add_argument(
        "--pretrain-epochs",
        type=int,
        default=3,
        help="epochs of supervised training of the small CNN (0: random initialisation)",
    )
    p.add_argument("--probe-epochs", type=int, default=30, help="epochs of probe training (>= 1)")
    p.add_argument(
        "--lr", type=float, default=0.1, help="probe learning rate (SGD, cosine schedule)"
    )
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument(
        "--grid", action="store_true", help="also train a DINOv2-style probe grid at once"
    )
    p.add_argument(
        "--cache-dir", default=None, help="cache extracted features here (memory-mapped .npy)"
    )
    p.add_argument(
        "--save-features",
        default=None,
        metavar="DIR",
        help="write the frozen features with their labels to DIR/train.npz and DIR/test.npz, "
        "the layout `repeval report DIR` reads",
    )
    p.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda if available)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--progress",
        action="store_true",
        help="progress bars (needs tqdm), drawn only when stderr is a terminal",
    )
    p.add_argument(
        "--summary",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after the loop's own probe, print the numbers repeval report computes on "
        "these features: weighted k-NN, the linear probe with C chosen on a "
        "validation split, low-shot nearest class mean (default: on; --no-summary "
        "skips them, e.g. on a large set where the probe's sweep over C is slow)",
    )
    return p.parse_args(argv)


@dataclass(frozen=True)
class LoopSettings(Settings):
    """Everything ``repeval loop`` computes from; the fields are its options (``repeval loop
    --help``) under the same names, with the same defaults.

    Raises
    ------
    ValueError
        Naming the option whose value is refused, as the command line spells it (a weights
        file or ``--data`` folder that does not exist included).
    """

    backbone: str = "small-cnn"
    weights: str | None = None
    hub: bool = False
    random_init: bool = False
    data: str = "digits"
    image_size: int | None = None
    limit: int | None = None
    pretrain_epochs: int = 3
    probe_epochs: int = 30
    lr: float = 0.1
    batch_size: int = 128
    grid: bool = False
    cache_dir: str | None = None
    save_features: str | None = None
    device: str | None = None
    seed: int = 0
    progress: bool = False
    summary: bool = True

    def __post_init__(self):
        _check_numbers(self)
        _check_backbone(self)
        if self.data not in ("digits", "fashion-mnist") and not os.path.isdir(self.data):
            raise UsageError(
                f"--data folder not found: {self.data!r} (use 'digits', 'fashion-mnist' or an "
                "image folder)"
            )


def _check_numbers(s):
    """Refuse the numeric options of :class:`LoopSettings` ``s`` out of their range."""
    if s.probe_epochs < 1:
        raise UsageError(f"--probe-epochs must be >= 1, got {s.probe_epochs}")
    if s.pretrain_epochs < 0:
        raise UsageError(f"--pretrain-epochs must be >= 0, got {s.pretrain_epochs}")
    if s.batch_size < 2:
        raise UsageError(
            "--batch-size must be >= 2 (the probe's BatchNorm needs two samples), got "
            f"{s.batch_size}"
        )
    if not (math.isfinite(s.lr) and s.lr > 0):
        raise UsageError(f"--lr must be a positive number, got {s.lr}")
    if s.image_size is not None and s.image_size < 1:
        raise UsageError(f"--image-size must be >= 1, got {s.image_size}")
    if s.limit is not None and s.limit < 2:
        raise UsageError(
            f"--limit must be >= 2 (the probe's BatchNorm needs two samples), got {s.limit}"
        )


def _check_backbone(s):
    """Refuse a ``--backbone`` of :class:`LoopSettings` ``s`` with the wrong weight options."""
    flags = [
        flag
        for flag, on in (
            ("--weights", s.weights is not None),
            ("--hub", s.hub),
            ("--random-init", s.random_init),
        )
        if on
    ]
    library, _, arch = s.backbone.partition(":")
    if s.backbone == "small-cnn":
        if s.data != "digits":
            raise UsageError(
                "the built-in small CNN is for --data digits; choose a --backbone for images"
            )
        if flags:
            raise UsageError(
                f"{flags[0]} is for a torchvision/timm --backbone; the built-in small CNN is "
                "trained here (--pretrain-epochs 0 leaves it at random initialisation)"
            )
    elif library not in ("torchvision", "timm", "zoo") or not arch:
        raise UsageError(
            "--backbone must be small-cnn, torchvision:ARCH, timm:ARCH or zoo:NAME, "
            f"got {s.backbone!r}"
        )
    elif library == "zoo":
        if flags:
            raise UsageError(
                f"{flags[0]} is for a torchvision/timm --backbone; "
                f"{s.backbone} loads the weights shipped with it"
            )
    elif not flags:
        raise UsageError(
            f"--backbone {s.backbone} needs weights: pass --weights PATH (a local state "
            "dict), --hub (download them; needs internet), or --random-init (an untrained "
            "network, whose features mean nothing)"
        )
    elif len(flags) > 1:
        raise UsageError(
            f"choose one of --weights, --hub and --random-init, not {' and '.join(flags)}"
        )
    elif s.weights is not None and not os.path.isfile(s.weights):
        raise UsageError(f"--weights file not found: {s.weights!r}")
