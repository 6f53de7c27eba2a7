"""The data, encoder and features of ``repeval loop``: images in, frozen features out.

The digits (``sklearn.datasets.load_digits``), Fashion-MNIST or an image folder; the
built-in small CNN (trained here), a torchvision / timm backbone or a zoo encoder; their
features extracted frozen, through the disk cache when asked; and the DINOv2-style grid
of probes on the last blocks.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from ._loop_settings import UsageError


def image_arrays(args):
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


def load_data(args, encoder=None):
    """(train, test, n_classes, data name); ``encoder.prepare_inputs``, when it exists, prepares
    arrays."""
    from torch.utils.data import Subset

    from repeval_ref.torch.data import PreparedImages

    limit = args.limit
    if args.data in ("digits", "fashion-mnist"):
        train, test, n_classes, name = image_arrays(args)
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
            raise UsageError(f"{test_dir} and the training folder have different classes")
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


def build_encoder(args, train, n_classes, log):
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


def batches(data, batch_size):
    from torch.utils.data import DataLoader, TensorDataset

    if isinstance(data, tuple):
        data = TensorDataset(*data)
    return DataLoader(data, batch_size=batch_size, shuffle=False)


def extract(args, encoder, parts, data_name, device, log):
    """Frozen features of the train and test ``parts`` (evaluation mode, no gradients).

    Returns ``(h_train, y_train, h_test, y_test, cache)``: torch tensors of the features,
    numpy labels, and None or whether each part came from the cache.
    """
    import torch

    from repeval_ref.torch.freeze import frozen_features

    train, test = parts
    if args.cache_dir is None and isinstance(train, tuple):
        h_train = frozen_features(encoder, batches(train, args.batch_size))
        h_test = frozen_features(encoder, batches(test, args.batch_size))
        return h_train, train[1].numpy(), h_test, test[1].numpy(), None
    f_train, f_test = _extract_parts(args, encoder, parts, device, data_name, [""], ("flat",))
    cache = None
    if args.cache_dir is not None:
        cache = {"train_from_cache": f_train.from_cache, "test_from_cache": f_test.from_cache}
        log(
            f"features: train {'read from' if f_train.from_cache else 'written to'} the cache, "
            f"test {'read from' if f_test.from_cache else 'written to'} the cache"
        )
    h_train, h_test = (torch.from_numpy(f.view(1, "flat")) for f in (f_train, f_test))
    return h_train, f_train.labels, h_test, f_test.labels, cache


def _extract_parts(args, encoder, parts, device, data_name, layers, poolings, suffix=""):
    """The features of the train and test ``parts`` at ``layers`` and ``poolings``.

    Extracted with the loop's batch size, cache and progress bars; the cache names them
    ``DATA-train`` and ``DATA-test`` (then ``suffix``). Returns the two extractions.
    """
    from repeval_ref.torch.extract import extract_features

    kw = dict(
        layers=layers,
        poolings=poolings,
        batch_size=args.batch_size,
        device=device,
        cache_dir=args.cache_dir,
        model_name=args.backbone,
        progress=bars(args),
    )
    return tuple(
        extract_features(encoder, part, data_name=f"{data_name}-{role}{suffix}", **kw)
        for part, role in zip(parts, ("train", "test"))
    )


def bars(args):
    """Whether extraction draws progress bars: asked for, and stderr is a terminal."""
    from ._progress import is_terminal

    return bool(args.progress) and is_terminal(sys.stderr)


def train_probe_grid(args, encoder, train, test, n_classes, data_name, device):
    """The DINOv2-style grid of probes on the last 1 or 4 blocks; the grid search's result."""
    import torch

    from repeval_ref.torch.extract import BlockTaps
    from repeval_ref.torch.grid import grid_views, probe_grid_search
    from repeval_ref.torch.models import default_blocks

    layers = default_blocks(encoder)
    x0 = next(iter(batches(train, 2)))[0].to(device)
    from repeval_ref.torch.freeze import evaluation_mode

    with evaluation_mode(encoder), torch.no_grad(), BlockTaps(encoder, layers[-1:]) as taps:
        encoder(x0)
        tokens = taps.outputs[layers[-1]].ndim == 3
    poolings = ("cls", "mean") if tokens else ("mean",)
    f_train, f_test = _extract_parts(
        args, encoder, (train, test), device, data_name, layers, poolings, suffix="-blocks"
    )
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
    return result
