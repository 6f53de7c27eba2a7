"""``repeval loop``: the PyTorch reference loop of the course, end to end.

Book: chapter "Linear probes", the PyTorch reference loop; seed 000, "Frozen means
evaluation mode" and "In PyTorch". The loop

1. builds an encoder: by default the built-in :class:`~repeval_ref.torch.models.SmallCNN`,
   briefly trained here on the ``sklearn.datasets.load_digits`` images (8x8, offline);
   or a torchvision / timm backbone with weights from a local file; or an encoder of
   :mod:`repeval_ref.zoo` (``--backbone zoo:efficientnet_lite0``: EfficientNet-Lite0 with
   its ImageNet weights, installed with the package);
2. extracts the features frozen (evaluation mode and ``torch.no_grad()``), optionally
   through the disk cache;
3. fits a linear classifier behind a BatchNorm without scale or shift, and prints
   its test accuracy (``probe accuracy: ...``, the loop's own probe), then the numbers
   ``repeval report`` computes on the same features (weighted k-NN, the linear probe
   with C chosen on a validation split, low-shot nearest class mean; the same calls and
   defaults, so a report on ``--save-features DIR`` prints the same numbers; skip them
   with ``--no-summary``);
4. compares every parameter and buffer of the encoder (BatchNorm statistics too) with
   a snapshot taken before extraction, bit by bit;
5. folds the BatchNorm into the linear layer and prints the largest logit difference;
6. shows the pitfall: one forward pass in training mode moves a running mean (the
   encoder is restored afterwards).

With ``--grid`` it also trains the DINOv2-style grid of probes (learning rates x last
1 or 4 blocks x poolings) at once and reports the configuration chosen on validation.

A torchvision / timm backbone needs weights: ``--weights PATH`` (a local state dict),
``--hub`` (downloaded by the library; needs internet), or, knowingly, ``--random-init``
(an untrained network: the loop runs, but the features mean nothing). A zoo encoder
brings its own weights. An encoder with a ``prepare_inputs(images, size)`` method (the
zoo's EfficientNet-Lite0) receives the digits or Fashion-MNIST images through it:
resized to ``--image-size`` pixels (default 96), grayscale repeated on three
channels, normalised as the encoder expects, one item at a time.

Errors in the arguments or the data (a missing folder, an unavailable device, a
weights file that is not a checkpoint, ...) are reported as one line
``repeval loop: error: ...`` on stderr, with exit status 2.

The small CNN's training is :func:`repeval_ref.cli.pretrain.pretrain_encoder`, the
loaders of named backbones :mod:`repeval_ref.backbones`.

Examples::

    repeval loop
    repeval loop --grid --cache-dir /tmp/feats
    repeval loop --save-features feats && repeval report feats
    repeval loop --backbone torchvision:resnet50 --weights resnet50.pth --data /data/pets
    repeval loop --backbone zoo:efficientnet_lite0 --data fashion-mnist --limit 2000
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

from ._arguments import check_prog

PROG = "repeval loop"
DESCRIPTION = "``{prog}``: the PyTorch reference loop of the course, end to end."


class _UsageError(Exception):
    """A problem with the command line or the data it names, reported as one line."""


def _parse(argv, prog=PROG):
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


def _check_args(args):
    """Check the arguments before any work; raise _UsageError with a one-line explanation."""
    if args.probe_epochs < 1:
        raise _UsageError(f"--probe-epochs must be >= 1, got {args.probe_epochs}")
    if args.pretrain_epochs < 0:
        raise _UsageError(f"--pretrain-epochs must be >= 0, got {args.pretrain_epochs}")
    if args.batch_size < 2:
        raise _UsageError(
            "--batch-size must be >= 2 (the probe's BatchNorm needs two samples), got "
            f"{args.batch_size}"
        )
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise _UsageError(f"--lr must be a positive number, got {args.lr}")
    if args.image_size is not None and args.image_size < 1:
        raise _UsageError(f"--image-size must be >= 1, got {args.image_size}")
    if args.limit is not None and args.limit < 2:
        raise _UsageError(
            f"--limit must be >= 2 (the probe's BatchNorm needs two samples), got {args.limit}"
        )
    weight_flags = [
        flag
        for flag, on in (
            ("--weights", args.weights is not None),
            ("--hub", args.hub),
            ("--random-init", args.random_init),
        )
        if on
    ]
    if args.backbone == "small-cnn":
        if args.data != "digits":
            raise _UsageError(
                "the built-in small CNN is for --data digits; choose a --backbone for images"
            )
        extra = [
            flag
            for flag, on in (
                ("--weights", args.weights is not None),
                ("--hub", args.hub),
                ("--random-init", args.random_init),
            )
            if on
        ]
        if extra:
            raise _UsageError(
                f"{extra[0]} is for a torchvision/timm --backbone; the built-in small CNN is "
                "trained here (--pretrain-epochs 0 leaves it at random initialisation)"
            )
    else:
        library, _, arch = args.backbone.partition(":")
        if library not in ("torchvision", "timm", "zoo") or not arch:
            raise _UsageError(
                "--backbone must be small-cnn, torchvision:ARCH, timm:ARCH or zoo:NAME, "
                f"got {args.backbone!r}"
            )
    if args.backbone.startswith("zoo:"):
        if weight_flags:
            raise _UsageError(
                f"{weight_flags[0]} is for a torchvision/timm --backbone; "
                f"{args.backbone} loads the weights shipped with it"
            )
    elif args.backbone != "small-cnn":
        chosen = [
            flag
            for flag, on in (
                ("--weights", args.weights is not None),
                ("--hub", args.hub),
                ("--random-init", args.random_init),
            )
            if on
        ]
        if not chosen:
            raise _UsageError(
                f"--backbone {args.backbone} needs weights: pass --weights PATH (a local state "
                "dict), --hub (download them; needs internet), or --random-init (an untrained "
                "network, whose features mean nothing)"
            )
        if len(chosen) > 1:
            raise _UsageError(
                f"choose one of --weights, --hub and --random-init, not {' and '.join(chosen)}"
            )
        if args.weights is not None and not os.path.isfile(args.weights):
            raise _UsageError(f"--weights file not found: {args.weights!r}")
    if args.data not in ("digits", "fashion-mnist") and not os.path.isdir(args.data):
        raise _UsageError(
            f"--data folder not found: {args.data!r} (use 'digits', 'fashion-mnist' or an image "
            "folder)"
        )


def _image_arrays(args):
    """Images and labels of ``--data digits`` or ``fashion-mnist``: (train, test, n_classes,
    name)."""
    import torch

    if args.data == "digits":
        from repeval_ref.datasets import digits_images

        xtr, xte, ytr, yte = digits_images(seed=args.seed)
        return (xtr, torch.from_numpy(ytr)), (xte, torch.from_numpy(yte)), 10, "digits"
    from repeval_ref.datasets import fashion_mnist

    def part(split):  # (n, 1, 28, 28) float32 in [0, 1], as the digits
        x, y = fashion_mnist(split)
        return torch.from_numpy(x[:, None].astype(np.float32) / 255.0), torch.from_numpy(y)

    return part("train"), part("test"), 10, "fashion-mnist"


def _load_data(args, encoder=None):
    """(train, test, n_classes, data name); ``encoder.prepare_inputs``, when it exists, prepares
    arrays."""
    from torch.utils.data import Subset

    from repeval_ref.torch.data import PreparedImages

    limit = args.limit
    if args.data in ("digits", "fashion-mnist"):
        train, test, n_classes, name = _image_arrays(args)
        if limit is not None:
            train, test = tuple(t[:limit] for t in train), tuple(t[:limit] for t in test)
            name = f"{name}-first{limit}"
        prepare = getattr(encoder, "prepare_inputs", None)
        if callable(prepare):
            size = 96 if args.image_size is None else args.image_size
            train, test = (PreparedImages(x, y, prepare, size) for x, y in (train, test))
            name = f"{name}-{size}px"
        elif args.backbone.startswith("zoo:"):
            # the zoo's small encoders were trained on (x / 255 - MEAN) / STD (zoo.inputs.to_tensor)
            from repeval_ref.zoo.registry import MEAN, STD

            train, test = (((x - MEAN) / STD, y) for x, y in (train, test))
        return train, test, n_classes, name
    from sklearn.model_selection import train_test_split

    from repeval_ref.torch.data import IMAGENET_MEAN, IMAGENET_STD, ImageFolder

    crop = 224 if args.image_size is None else args.image_size
    norm = dict(
        mean=getattr(encoder, "input_mean", IMAGENET_MEAN),
        std=getattr(encoder, "input_std", IMAGENET_STD),
    )
    root = args.data
    name = os.path.basename(os.path.abspath(root))
    test_dir = next(
        (os.path.join(root, s) for s in ("test", "val") if os.path.isdir(os.path.join(root, s))),
        None,
    )
    if os.path.isdir(os.path.join(root, "train")) and test_dir:
        train = ImageFolder(os.path.join(root, "train"), crop=crop, **norm)
        test = ImageFolder(test_dir, crop=crop, **norm)
        if test.classes != train.classes:
            raise _UsageError(f"{test_dir} and the training folder have different classes")
        n_classes = len(train.classes)
    else:
        full = ImageFolder(root, crop=crop, **norm)
        idx = np.arange(len(full))
        tr, te = train_test_split(
            idx, test_size=0.25, random_state=args.seed, stratify=full.targets
        )
        train, test, n_classes = (
            Subset(full, np.sort(tr)),
            Subset(full, np.sort(te)),
            len(full.classes),
        )
    if limit is not None:
        train, test = (Subset(d, np.arange(min(limit, len(d)))) for d in (train, test))
    return train, test, n_classes, name


def _build_encoder(args, train, n_classes, log):
    import torch

    from repeval_ref.backbones import load_backbone
    from repeval_ref.torch.models import SmallCNN

    from .pretrain import pretrain_encoder

    if args.backbone == "small-cnn":
        torch.manual_seed(args.seed)
        enc = SmallCNN(in_channels=1, width=16)
        if args.pretrain_epochs > 0:
            log(
                f"training the small CNN for {args.pretrain_epochs} epoch(s) on the digits "
                "training split"
            )
            pretrain_encoder(
                enc,
                train[0],
                train[1].numpy(),
                n_classes,
                epochs=args.pretrain_epochs,
                seed=args.seed,
            )
        else:
            log(
                "small CNN at random initialisation (its BatchNorm statistics are the initial ones)"
            )
        return enc.eval()
    library, _, arch = args.backbone.partition(":")
    if library == "zoo":
        return load_backbone(arch, library="zoo")
    if args.random_init:
        log(
            f"warning: --random-init: {args.backbone} is untrained (random initialisation); "
            "its features, and the accuracies below, say nothing about a pretrained model"
        )
    return load_backbone(arch, args.weights, library=library, hub=args.hub)


def _batches(data, batch_size):
    from torch.utils.data import DataLoader, TensorDataset

    if isinstance(data, tuple):
        data = TensorDataset(*data)
    return DataLoader(data, batch_size=batch_size, shuffle=False)


def main(argv=None, prog=PROG):
    """Run the loop; return 0 on success, 1 if the encoder state changed.

    Errors in the arguments or the data end the program with one line
    ``PROG: error: ...`` on stderr and exit status 2 (``SystemExit(2)``), as argparse
    does for a malformed command line.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).
    prog : str
        Program name of the usage and error lines (default ``repeval loop``).
    """
    check_prog(prog)
    args = _parse(argv, prog)
    from repeval_ref.backbones import BackboneUnavailable

    try:
        return _main(args)
    except (_UsageError, ValueError, TypeError, OSError, BackboneUnavailable) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) not in text:
            text += f": {exc.filename!r}"
        print(f"{prog}: error: {text}", file=sys.stderr)
        raise SystemExit(2) from None


def _main(args):
    import torch

    from repeval_ref.torch.extract import extract_features, resolve_device
    from repeval_ref.torch.freeze import frozen_features, state_diff, state_snapshot
    from repeval_ref.torch.probe import fold_probe, probe_accuracy, running_mean_shift, train_probe

    def log(msg):
        print(msg, file=sys.stderr)

    _check_args(args)
    try:
        device = resolve_device(args.device)
    except (TypeError, ValueError) as exc:
        raise _UsageError(f"--device: {exc}") from None
    torch.manual_seed(args.seed)
    encoder = None
    if args.backbone != "small-cnn":  # fail fast, before reading any image
        encoder = _build_encoder(args, None, None, log)
    train, test, n_classes, data_name = _load_data(args, encoder)
    if encoder is None:
        encoder = _build_encoder(args, train, n_classes, log)
    encoder.to(device)
    snapshot = state_snapshot(encoder)

    # Frozen extraction: evaluation mode and no gradients.
    if args.cache_dir is None and isinstance(train, tuple):
        h_train = frozen_features(encoder, _batches(train, args.batch_size))
        h_test = frozen_features(encoder, _batches(test, args.batch_size))
        y_train, y_test = train[1].numpy(), test[1].numpy()
    else:
        kw = dict(
            layers=[""],
            poolings=("flat",),
            batch_size=args.batch_size,
            device=device,
            cache_dir=args.cache_dir,
            model_name=args.backbone,
            progress=_bars(args),
        )
        f_train = extract_features(encoder, train, data_name=f"{data_name}-train", **kw)
        f_test = extract_features(encoder, test, data_name=f"{data_name}-test", **kw)
        if args.cache_dir is not None:
            log(
                f"features: train {'read from' if f_train.from_cache else 'written to'} the cache, "
                f"test {'read from' if f_test.from_cache else 'written to'} the cache"
            )
        h_train, h_test = (
            torch.from_numpy(f_train.view(1, "flat")),
            torch.from_numpy(f_test.view(1, "flat")),
        )
        y_train, y_test = f_train.labels, f_test.labels
    log(f"features: train {tuple(h_train.shape)}, test {tuple(h_test.shape)}")
    if args.save_features is not None:
        _save_features(args.save_features, h_train, y_train, h_test, y_test, log)
    elif args.cache_dir is not None:
        from repeval_ref.torch.extract import cache_name

        log(
            "evaluate these features: repeval report "
            f"{os.path.join(args.cache_dir, cache_name(args.backbone))}"
        )

    probe = train_probe(
        h_train,
        y_train,
        n_classes,
        epochs=args.probe_epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        seed=args.seed,
    )
    print(f"probe accuracy: {probe_accuracy(probe, h_test, y_test):.3f}")
    print(
        f"  (the loop's own probe: BatchNorm without scale or shift and a linear layer, SGD for "
        f"{args.probe_epochs} epochs, seed {args.seed}; not the tuned probe of repeval report)"
    )
    if args.summary:
        _print_summary(args, h_train, y_train, h_test, y_test, log)

    changed = state_diff(encoder, snapshot)
    if changed:
        print(f"encoder state CHANGED: {', '.join(changed[:5])}")
        return 1
    print("encoder state unchanged: True (parameters and buffers bit-for-bit equal)")

    folded = fold_probe(probe)
    with torch.no_grad():
        diff = (folded(h_test) - probe(h_test)).abs().max().item()
    print(f"BatchNorm folded into the linear layer: max |logit difference| = {diff:.2e}")

    if args.grid:
        _run_grid(args, encoder, train, test, n_classes, data_name, device)
        if state_diff(encoder, snapshot):
            print("encoder state CHANGED during the grid extraction")
            return 1

    batch = next(iter(_batches(train, 64)))[0]
    shift = running_mean_shift(encoder, batch)
    print(f"one training-mode forward pass moved a running mean by {shift:.3f}")
    restored = not state_diff(encoder, snapshot)
    log(f"(the encoder was restored after that demonstration: {restored})")
    return 0 if restored else 1


def _bars(args):
    """Whether extraction draws progress bars: asked for, and stderr is a terminal."""
    from ._progress import is_terminal

    return bool(args.progress) and is_terminal(sys.stderr)


def _print_summary(args, h_train, y_train, h_test, y_test, log):
    """Print the headline numbers of ``repeval report`` on these features (same calls, same
    defaults).

    Features are taken as float64, as the report reads the saved files. When the
    report would refuse the features (an all-zero row, a class with one image), the
    summary says so in one line instead.
    """
    from . import _render as R
    from ._evaluate import summary_section
    from ._inputs import InputError, zero_rows, zero_rows_message
    from ._progress import Progress

    parts = [
        (
            np.asarray(h.detach().cpu() if hasattr(h, "detach") else h, dtype=np.float64),
            np.asarray(y, dtype=np.int64),
        )
        for h, y in ((h_train, y_train), (h_test, y_test))
    ]
    (xtr, ytr), (xte, yte) = parts
    who = ("the training features", "the test features")
    if args.save_features is not None:
        who = tuple(os.path.join(args.save_features, f"{n}.npz") for n in ("train", "test"))
    try:
        for (x, _), w in zip(parts, who):
            zero = zero_rows(x)
            if zero.size:
                raise InputError(zero_rows_message(w, zero, x.shape[0]))
        summ = summary_section(
            xtr,
            ytr,
            xte,
            yte,
            seed=args.seed,
            who=who,
            progress=Progress(enabled=bool(args.progress)),
        )
    except InputError as exc:
        print(f"the protocols of repeval report: not computed ({exc})")
        return
    print(
        f"the protocols of repeval report on these features ({summ['n_train']} training and "
        f"{summ['n_test']} test images, seed {summ['seed']}; low-shot: mean +- std over "
        f"{summ['draws']} draws):"
    )
    rows = R.headline_rows(summ["knn"], summ["linear_probe"], summ["low_shot"], plus="+-")
    text = R.table(rows, ["protocol", R.ACCURACY_HEADER.replace("±", "+-")])
    print("\n".join("  " + line for line in text.splitlines()))


def _save_features(folder, h_train, y_train, h_test, y_test, log):
    """Write ``folder/train.npz`` and ``folder/test.npz`` (arrays ``features``, ``labels``)."""
    os.makedirs(folder, exist_ok=True)
    for name, h, y in (("train", h_train, y_train), ("test", h_test, y_test)):
        tmp = os.path.join(folder, f".{name}.tmp.npz")
        np.savez(
            tmp,
            features=np.asarray(h.detach().cpu() if hasattr(h, "detach") else h),
            labels=np.asarray(y, dtype=np.int64),
        )
        os.replace(tmp, os.path.join(folder, f"{name}.npz"))
    log(
        f"features written to {os.path.join(folder, 'train.npz')} and test.npz; "
        f"evaluate them: repeval report {folder}"
    )


def _run_grid(args, encoder, train, test, n_classes, data_name, device):
    import torch

    from repeval_ref.torch.extract import BlockTaps, extract_features
    from repeval_ref.torch.grid import grid_views, probe_grid_search
    from repeval_ref.torch.models import default_blocks

    layers = default_blocks(encoder)
    x0 = next(iter(_batches(train, 2)))[0].to(device)
    from repeval_ref.torch.freeze import evaluation_mode

    with evaluation_mode(encoder), torch.no_grad(), BlockTaps(encoder, layers[-1:]) as taps:
        encoder(x0)
        tokens = taps.outputs[layers[-1]].ndim == 3
    poolings = ("cls", "mean") if tokens else ("mean",)
    kw = dict(
        layers=layers,
        poolings=poolings,
        batch_size=args.batch_size,
        device=device,
        cache_dir=args.cache_dir,
        model_name=args.backbone,
        progress=_bars(args),
    )
    f_train = extract_features(encoder, train, data_name=f"{data_name}-train-blocks", **kw)
    f_test = extract_features(encoder, test, data_name=f"{data_name}-test-blocks", **kw)
    views = ("cls", "cls+mean") if tokens else ("mean",)
    lrs = [0.01, 0.03, 0.1, 0.3, 1.0]
    result = probe_grid_search(
        grid_views(f_train, (1, 4), views),
        f_train.labels,
        grid_views(f_test, (1, 4), views),
        f_test.labels,
        n_classes,
        lrs,
        epochs=args.probe_epochs,
        batch_size=args.batch_size,
        seed=args.seed,
    )
    print(result.report())


if __name__ == "__main__":
    sys.exit(main())
