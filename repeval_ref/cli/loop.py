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
loaders of named backbones :mod:`repeval_ref.backbones`. The command is cut as the
others: :class:`LoopSettings` (its options), :func:`run_loop` (computes and returns the
loop's numbers, writes nothing) and :func:`cmd_loop` (prints them and writes
``--save-features``).

Examples::

    repeval loop
    repeval loop --grid --cache-dir /tmp/feats
    repeval loop --save-features feats && repeval report feats
    repeval loop --backbone torchvision:resnet50 --weights resnet50.pth --data /data/pets
    repeval loop --backbone zoo:efficientnet_lite0 --data fashion-mnist --limit 2000
"""

from __future__ import annotations

import os
import sys

import numpy as np

from ._arguments import check_prog
from ._loop_data import batches, build_encoder, extract, load_data, train_probe_grid
from ._loop_settings import LoopSettings, UsageError, parse_loop_args

PROG = "repeval loop"


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
    args = parse_loop_args(argv, prog)
    from repeval_ref.backbones import BackboneUnavailable

    try:
        return cmd_loop(LoopSettings.from_args(args))
    except (ValueError, TypeError, OSError, BackboneUnavailable) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) not in text:
            text += f": {exc.filename!r}"
        print(f"{prog}: error: {text}", file=sys.stderr)
        raise SystemExit(2) from None


def _log(msg):
    print(msg, file=sys.stderr)


def run_loop(settings: LoopSettings, log=None):
    """The loop on :class:`LoopSettings`: its features, probe and checks; nothing is written.

    Parameters
    ----------
    settings : LoopSettings
    log : callable, optional
        Receives the lines that say what is being done (default: none).

    Returns
    -------
    dict
        ``data`` (the data's name), ``n_classes``; ``train_features``, ``test_features``
        (numpy.ndarray, shape (n, d), as extracted) and ``train_labels``,
        ``test_labels`` (int64, shape (n,)); ``cache`` (None, or whether each part was
        ``train_from_cache`` / ``test_from_cache``); ``probe`` (the loop's trained probe)
        and ``probe_accuracy`` (its test accuracy); ``summary`` (None without
        ``settings.summary``, else :func:`._evaluate.summary_section` on the features, or
        ``{"refused": reason}``); ``state_changed`` (the parameters and buffers that
        differ from the snapshot after the probe); and, when that is empty,
        ``fold_max_diff`` (largest logit difference of the folded probe), ``grid`` (the
        grid search's result, or None), ``grid_state_changed``, then
        ``running_mean_shift`` and ``restored``. Keys not reached are None.
    """
    if not isinstance(settings, LoopSettings):
        raise ValueError(f"settings must be a LoopSettings, got {type(settings).__name__}")
    import torch

    from repeval_ref.torch.extract import resolve_device
    from repeval_ref.torch.freeze import state_diff, state_snapshot
    from repeval_ref.torch.probe import fold_probe, probe_accuracy, running_mean_shift, train_probe

    args, log = settings, log if log is not None else (lambda line: None)
    try:
        device = resolve_device(args.device)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--device: {exc}") from None
    torch.manual_seed(args.seed)
    encoder = None
    if args.backbone != "small-cnn":  # fail fast, before reading any image
        encoder = build_encoder(args, None, None, log)
    train, test, n_classes, data_name = load_data(args, encoder)
    if encoder is None:
        encoder = build_encoder(args, train, n_classes, log)
    encoder.to(device)
    snapshot = state_snapshot(encoder)
    h_train, y_train, h_test, y_test, cache = extract(
        args, encoder, (train, test), data_name, device, log
    )
    log(f"features: train {tuple(h_train.shape)}, test {tuple(h_test.shape)}")
    probe = train_probe(
        h_train,
        y_train,
        n_classes,
        epochs=args.probe_epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        seed=args.seed,
    )
    result = dict.fromkeys(
        ("fold_max_diff", "grid", "grid_state_changed", "running_mean_shift", "restored")
    )
    result.update(
        data=data_name,
        n_classes=n_classes,
        train_features=h_train.detach().cpu().numpy(),
        train_labels=np.asarray(y_train, dtype=np.int64),
        test_features=h_test.detach().cpu().numpy(),
        test_labels=np.asarray(y_test, dtype=np.int64),
        cache=cache,
        probe=probe,
        probe_accuracy=probe_accuracy(probe, h_test, y_test),
        summary=_summary(args, _float_parts(h_train, y_train, h_test, y_test))
        if args.summary
        else None,
        state_changed=state_diff(encoder, snapshot),
    )
    if result["state_changed"]:
        return result
    folded = fold_probe(probe)
    with torch.no_grad():
        result["fold_max_diff"] = (folded(h_test) - probe(h_test)).abs().max().item()
    if args.grid:
        result["grid"] = train_probe_grid(args, encoder, train, test, n_classes, data_name, device)
        result["grid_state_changed"] = state_diff(encoder, snapshot)
        if result["grid_state_changed"]:
            return result
    batch = next(iter(batches(train, 64)))[0]
    result["running_mean_shift"] = running_mean_shift(encoder, batch)
    result["restored"] = not state_diff(encoder, snapshot)
    return result


def cmd_loop(settings):
    """``repeval loop``: :func:`run_loop` on ``settings``, then its lines and files.

    Writes ``--save-features`` (``DIR/train.npz``, ``DIR/test.npz``), prints the probe's
    accuracy, the report's numbers, the state checks, the folded probe, the grid and the
    running-mean demonstration. Returns 0, or 1 when the encoder state changed.
    """
    result = run_loop(settings, log=_log)
    if settings.save_features is not None:
        _save_features(settings.save_features, result)
    elif settings.cache_dir is not None:
        from repeval_ref.torch.extract import cache_name

        _log(
            "evaluate these features: repeval report "
            f"{os.path.join(settings.cache_dir, cache_name(settings.backbone))}"
        )
    print(f"probe accuracy: {result['probe_accuracy']:.3f}")
    print(
        f"  (the loop's own probe: BatchNorm without scale or shift and a linear layer, SGD for "
        f"{settings.probe_epochs} epochs, seed {settings.seed}; not the tuned probe of repeval "
        "report)"
    )
    if result["summary"] is not None:
        _print_summary(result["summary"])
    if result["state_changed"]:
        print(f"encoder state CHANGED: {', '.join(result['state_changed'][:5])}")
        return 1
    print("encoder state unchanged: True (parameters and buffers bit-for-bit equal)")
    print(
        "BatchNorm folded into the linear layer: max |logit difference| = "
        f"{result['fold_max_diff']:.2e}"
    )
    if result["grid"] is not None:
        print(result["grid"].report())
        if result["grid_state_changed"]:
            print("encoder state CHANGED during the grid extraction")
            return 1
    print(
        f"one training-mode forward pass moved a running mean by {result['running_mean_shift']:.3f}"
    )
    _log(f"(the encoder was restored after that demonstration: {result['restored']})")
    return 0 if result["restored"] else 1


def _float_parts(h_train, y_train, h_test, y_test):
    """The features as float64 arrays and the labels as int64: ``((xtr, ytr), (xte, yte))``."""
    return tuple(
        (
            np.asarray(h.detach().cpu() if hasattr(h, "detach") else h, dtype=np.float64),
            np.asarray(y, dtype=np.int64),
        )
        for h, y in ((h_train, y_train), (h_test, y_test))
    )


def _summary(args, parts):
    """The headline numbers of ``repeval report`` on these features (same calls, same defaults).

    Features are taken as float64, as the report reads the saved files. When the
    report would refuse the features (an all-zero row, a class with one image), the
    result is ``{"refused": reason}`` instead.
    """
    from ._evaluate import summary_section
    from ._inputs import InputError, zero_rows, zero_rows_message
    from ._progress import Progress

    (xtr, ytr), (xte, yte) = parts
    who = ("the training features", "the test features")
    if args.save_features is not None:
        who = tuple(os.path.join(args.save_features, f"{n}.npz") for n in ("train", "test"))
    try:
        for (x, _), w in zip(parts, who):
            zero = zero_rows(x)
            if zero.size:
                raise InputError(zero_rows_message(w, zero, x.shape[0]))
        return summary_section(
            xtr, ytr, xte, yte, seed=args.seed, who=who, progress=Progress(enabled=args.progress)
        )
    except InputError as exc:
        return {"refused": str(exc)}


def _print_summary(summ):
    """Print :func:`_summary`'s numbers as ``repeval report`` shows them, or why there are none."""
    from . import _render as R

    if "refused" in summ:
        print(f"the protocols of repeval report: not computed ({summ['refused']})")
        return
    print(
        f"the protocols of repeval report on these features ({summ['n_train']} training and "
        f"{summ['n_test']} test images, seed {summ['seed']}; low-shot: mean +- std over "
        f"{summ['draws']} draws):"
    )
    rows = R.headline_rows(summ["knn"], summ["linear_probe"], summ["low_shot"], plus="+-")
    text = R.table(rows, ["protocol", R.ACCURACY_HEADER.replace("±", "+-")], R.TABLE_WIDTH - 2)
    print("\n".join("  " + line for line in text.splitlines()))


def _save_features(folder, result):
    """Write ``folder/train.npz`` and ``folder/test.npz`` (arrays ``features``, ``labels``)."""
    os.makedirs(folder, exist_ok=True)
    for name in ("train", "test"):
        tmp = os.path.join(folder, f".{name}.tmp.npz")
        np.savez(tmp, features=result[f"{name}_features"], labels=result[f"{name}_labels"])
        os.replace(tmp, os.path.join(folder, f"{name}.npz"))
    _log(
        f"features written to {os.path.join(folder, 'train.npz')} and test.npz; "
        f"evaluate them: repeval report {folder}"
    )


if __name__ == "__main__":
    sys.exit(main())
