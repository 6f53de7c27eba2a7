"""Row 3: 52 linear probes trained in one pass over cached features, against 52 runs.

``repeval_ref.torch.train_probe_grid`` trains 13 learning rates x 4 feature views (the
DINOv2 grid: last block or last 4 blocks, class token with or without the mean patch
token) with one optimizer step per mini-batch for all heads. The competitor trains the
same 52 configurations one after the other with ``repeval_ref.torch.train_probe``
(same seed, same batches, same schedule). Accuracy is measured on held-out samples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

VIEW_WIDTHS = {"last1/cls": 1, "last1/cls+mean": 2, "last4/cls": 4, "last4/cls+mean": 8}


def make_data(tmp, n_train, n_test, d, n_classes, seed=0):
    """Cached features of four views (widths d, 2d, 4d, 8d), float32, in one ``.npz``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n_train + n_test)
    arrays = {"y": y}
    for name, w in VIEW_WIDTHS.items():
        centres = rng.standard_normal((n_classes, w * d)).astype(np.float32)
        X = centres[y] + 3.0 * rng.standard_normal((y.size, w * d)).astype(np.float32)
        arrays[name.replace("/", "__")] = X
    path = str(Path(tmp) / "grid_views.npz")
    np.savez(path, **arrays)
    return {"path": path, "n_train": n_train}


def lrs(n):
    return np.logspace(-4, 0, n).tolist()


def _load(path, n_train):
    import torch

    z = np.load(path)
    y = z["y"]
    views = {k.replace("__", "/"): torch.from_numpy(z[k]) for k in z.files if k != "y"}
    train = {k: v[:n_train] for k, v in views.items()}
    test = {k: v[n_train:] for k, v in views.items()}
    return train, y[:n_train], test, y[n_train:]


def grid(data, n_classes, lr_values, epochs, batch_size):
    import torch

    from repeval_ref.torch import grid_accuracies, train_probe_grid

    torch.set_num_threads(2)
    train, y, test, y_test = _load(data["path"], data["n_train"])

    def work():
        heads, configs = train_probe_grid(
            train, y, n_classes, lr_values, epochs=epochs, batch_size=batch_size, seed=0
        )
        acc = grid_accuracies(heads, configs, test, y_test)
        return {
            "configs": [f"{c['view']}@{c['lr']:.3g}" for c in configs],
            "accuracy": acc.tolist(),
        }

    return work


def sequential(data, n_classes, lr_values, epochs, batch_size):
    import torch

    from repeval_ref.torch import train_probe

    torch.set_num_threads(2)
    train, y, test, y_test = _load(data["path"], data["n_train"])
    y_test_t = torch.from_numpy(y_test)

    def work():
        names, acc = [], []
        for view in train:  # views outer, rates inner: the grid's order
            for lr in lr_values:
                probe = train_probe(
                    train[view], y, n_classes, epochs=epochs, lr=lr, batch_size=batch_size, seed=0
                )
                with torch.no_grad():
                    pred = probe(test[view]).argmax(dim=1)
                acc.append(float((pred == y_test_t).double().mean()))
                names.append(f"{view}@{lr:.3g}")
        return {"configs": names, "accuracy": acc}

    return work
