"""The zoo's evaluation table (``make zoo-table``): every encoder under every read-out.

Book: the Performance appendix, section "The zoo's evaluation table". Rows: raw
pixels, each zoo encoder (final checkpoint) and EfficientNet-Lite0. Columns, each
accuracy with its 95 % Wilson interval (:func:`repeval_ref.wilson_interval`):

* ``knn20``: 20-NN, ``tau = 0.07``, class token (a CNN's global average);
* ``probe_cls`` / ``probe_mean``: logistic-regression probe, ``C`` tuned on a
  validation fifth of the training rows (:func:`repeval_ref.linear_probe_done_right`),
  on the class token / on the mean of the patch tokens;
* ``attentive``: :class:`~repeval_ref.zoo.probes.AttentiveProbe` trained on the
  frozen token sequence;
* ``ft_id``/``ft_ood``, ``lpft_id``/``lpft_ood``: fine-tuning from a random head and
  LP-FT (head fitted on frozen features first, same fine-tuning budget after), scored on the Fashion-MNIST test
  images (in distribution) and on the same garments blended onto photographs
  (:func:`repeval_ref.datasets.fashion_mnist_shifted` at the blend the calibration record
  chose, :func:`repeval_ref.datasets.calibration.calibrated_images`, out of distribution);
* ``rankme``: :func:`repeval_ref.rankme` of the test features (class token);
* the encoder's pre-training time, from the manifest.

Raw pixels: the image itself is the feature (784 grey levels / 255; columns constant
on the training rows dropped for the probe, which standardises); its "tokens" are the
sixteen 7 x 7 patches. Budgets (epochs, subsets) are in :data:`TABLE_PROTOCOL` and
written into the JSON next to the numbers.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np
import torch

from .evaluate import PROTOCOL, subset_indices

__all__ = ["TABLE_PROTOCOL", "zoo_table", "write_table", "render_markdown"]

TABLE_PROTOCOL = {
    "train": 5000, "test": 5000, "subset_seed": 0,
    "efficientnet": {"train": 2000, "test": 1000, "size": 96},
    "k": PROTOCOL["k"], "tau": PROTOCOL["tau"], "Cs": PROTOCOL["Cs"],
    "attentive": {"epochs": 15, "lr": 3e-3, "weight_decay": 1e-4, "heads": 4, "batch_size": 256},
    "finetune": {"epochs": 3, "lr": 5e-4, "weight_decay": 0.05, "batch_size": 256, "head": "random (FT) / linear probe (LP-FT)"},
    "lp_head": {"epochs": 10, "lr": 1e-2},
    "ood": "calibrated_images('fashion_shifted', 'test', seed=0)",
}

COLUMNS = ("knn20", "probe_cls", "probe_mean", "attentive", "ft_id", "ft_ood", "lpft_id", "lpft_ood")


def _acc(pred, y):
    from ..uncertainty import wilson_interval

    k, n = int(np.sum(pred == y)), int(y.size)
    lo, hi = wilson_interval(k, n)
    return {"acc": k / n, "lo": float(lo), "hi": float(hi), "n": n}


def _probe(htr, ytr, hte, yte):
    from ..linear_probe import linear_probe_done_right

    # columns constant on the probe's fitting rows (the recipe's split: all but the first
    # n // 5 of default_rng(0).permutation(n)) cannot be standardised; raw pixels have some
    n = htr.shape[0]
    keep = htr[np.random.default_rng(0).permutation(n)[n // 5:]].std(axis=0) > 0
    best_c, acc = linear_probe_done_right(htr[:, keep], ytr, hte[:, keep], yte, TABLE_PROTOCOL["Cs"], seed=0)
    from ..uncertainty import wilson_interval

    n = int(yte.size)
    k = int(round(acc * n))
    lo, hi = wilson_interval(k, n)
    return {"acc": k / n, "lo": float(lo), "hi": float(hi), "n": n, "C": best_c}


def _knn(htr, ytr, hte, yte):
    from ..knn import knn_classify

    return _acc(knn_classify(htr, ytr, hte, TABLE_PROTOCOL["k"], TABLE_PROTOCOL["tau"], 10), yte)


def _attentive(ttr, ytr, tte, yte, heads):
    from .probes import predict, train_attentive_probe

    a = TABLE_PROTOCOL["attentive"]
    probe, transform = train_attentive_probe(ttr, ytr, n_heads=heads, epochs=a["epochs"], lr=a["lr"],
                                             weight_decay=a["weight_decay"], batch_size=a["batch_size"])
    return _acc(predict(lambda t: probe(t)[0], transform(tte)), yte)


def _raw_row(tr, te):
    from .extraction import load_images

    xtr, ytr = load_images("fashion", "train")
    xte, yte = load_images("fashion", "test")
    xtr, ytr, xte, yte = xtr[tr], ytr[tr], xte[te], yte[te]
    htr = xtr.reshape(len(tr), -1).astype(np.float64) / 255
    hte = xte.reshape(len(te), -1).astype(np.float64) / 255
    from .mae import patchify

    def tokens(x):
        p = patchify(torch.from_numpy(x[:, None].astype(np.float32) / 255), 7).numpy()
        return np.concatenate([p.mean(axis=1, keepdims=True), p], axis=1)

    from ..labelfree import rankme

    row = {"name": "raw_pixels", "objective": "none (the 784 grey levels)", "params": 0, "train_seconds": 0.0,
           "knn20": _knn(htr, ytr, hte, yte), "probe_cls": _probe(htr, ytr, hte, yte)}
    row["probe_mean"] = None
    row["attentive"] = _attentive(tokens(xtr), ytr, tokens(xte), yte, heads=7)
    row["rankme"] = float(rankme(hte))
    for c in ("ft_id", "ft_ood", "lpft_id", "lpft_ood"):
        row[c] = "n/a: no encoder"
    return row


def _encoder_row(name, tr, te, *, finetune=True, log=print):
    from .loader import load, manifest
    from ..labelfree import rankme
    from .extraction import encoder_inputs, features, load_images
    from .probes import finetune as run_finetune, linear_head, predict

    t0 = time.perf_counter()
    # one extraction of the token sequences; the class token and the mean patch token are read from it
    ttr, ytr = features(name, "train", "tokens", indices=tr)
    tte, yte = features(name, "test", "tokens", indices=te)
    htr, hte = ttr[:, 0], tte[:, 0]
    mtr, mte = ttr[:, 1:].mean(axis=1), tte[:, 1:].mean(axis=1)
    row = {"name": name, "knn20": _knn(htr, ytr, hte, yte), "probe_cls": _probe(htr, ytr, hte, yte),
           "probe_mean": _probe(mtr, ytr, mte, yte), "rankme": float(rankme(hte))}
    heads = 4 if ttr.shape[2] % 4 == 0 else 1
    row["attentive"] = _attentive(ttr, ytr, tte, yte, heads)
    log(f"  {name}: frozen read-outs {time.perf_counter() - t0:.0f} s")
    if name == "efficientnet_lite0":
        enc = load(name)
        row.update(objective="supervised, ImageNet-1k (installed wheel)",
                   params=int(sum(p.numel() for p in enc.parameters()) - enc.classifier.weight.numel()
                              - enc.classifier.bias.numel()),
                   train_seconds=None)
    else:
        entry = manifest()["encoders"][name]
        row.update(objective=entry["objective"], params=entry["parameters"],
                   train_seconds=entry["training"]["seconds"],
                   train_images=entry["data"]["subset_size"],
                   epochs=entry["hyperparameters"]["epochs"])
    if not finetune:
        for c in ("ft_id", "ft_ood", "lpft_id", "lpft_ood"):
            row[c] = "not run: cost"
        return row
    t1 = time.perf_counter()
    enc = load(name)
    xtr_img, ytr_img = load_images("fashion", "train")
    x_tr = encoder_inputs(name, xtr_img[tr])
    x_te = encoder_inputs(name, load_images("fashion", "test")[0][te])
    xo, yo = load_images("shifted", "test")
    x_ood, y_ood = encoder_inputs(name, xo[te]), yo[te]
    f = TABLE_PROTOCOL["finetune"]
    kw = dict(epochs=f["epochs"], lr=f["lr"], weight_decay=f["weight_decay"], batch_size=f["batch_size"], seed=0)
    ft = run_finetune(enc, x_tr, ytr_img[tr], **kw)
    row["ft_id"], row["ft_ood"] = _acc(predict(ft, x_te), yte), _acc(predict(ft, x_ood), y_ood)
    lp = TABLE_PROTOCOL["lp_head"]
    head = linear_head(enc, x_tr, ytr_img[tr], epochs=lp["epochs"], lr=lp["lr"], seed=0)
    lpft = run_finetune(enc, x_tr, ytr_img[tr], head_init=head, **kw)
    row["lpft_id"], row["lpft_ood"] = _acc(predict(lpft, x_te), yte), _acc(predict(lpft, x_ood), y_ood)
    log(f"  {name}: fine-tuning and LP-FT {time.perf_counter() - t1:.0f} s")
    return row


def row_names():
    """The table's rows in order: raw pixels, the zoo's encoders, EfficientNet-Lite0."""
    from .registry import ENCODERS

    return ["raw_pixels", *ENCODERS, "efficientnet_lite0"]


def zoo_table(names=None, *, log=print):
    """Compute the table: a dict with ``rows`` (one dict per row name, see :func:`row_names`),
    ``protocol`` and ``seconds`` (each row also records its own ``seconds``)."""
    from .train import deterministic_torch

    deterministic_torch()
    t0 = time.perf_counter()
    p = TABLE_PROTOCOL
    tr = subset_indices(60000, p["train"], p["subset_seed"])
    te = subset_indices(10000, p["test"], p["subset_seed"] + 1)
    names = row_names() if names is None else list(names)
    unknown = [n for n in names if n not in row_names()]
    if unknown:
        raise ValueError(f"names: unknown table rows {unknown}; known: {row_names()}")
    rows = []
    for name in names:
        t1 = time.perf_counter()
        if name == "raw_pixels":
            row = _raw_row(tr, te)
        elif name == "efficientnet_lite0":
            e = p["efficientnet"]
            row = _encoder_row(name, subset_indices(60000, e["train"], p["subset_seed"]),
                               subset_indices(10000, e["test"], p["subset_seed"] + 1), finetune=False, log=log)
        else:
            row = _encoder_row(name, tr, te, log=log)
        row["seconds"] = round(time.perf_counter() - t1, 1)
        rows.append(row)
        log(f"{name} done ({time.perf_counter() - t0:.0f} s)")
    return {"rows": rows, "protocol": p, "seconds": round(time.perf_counter() - t0, 1),
            "torch": torch.__version__, "date": time.strftime("%Y-%m-%d", time.gmtime())}


def _fmt(v):
    if isinstance(v, dict):
        return f"{100 * v['acc']:.1f} [{100 * v['lo']:.1f}, {100 * v['hi']:.1f}]"
    if v is None:
        return "-"
    return str(v)


def render_markdown(table):
    """The table as Markdown text (accuracies in percent with their 95 % Wilson intervals)."""
    head = ["encoder", "objective", "params", "pre-training s", "20-NN", "probe (cls)", "probe (mean)",
            "attentive", "FT in-dist.", "FT OOD", "LP-FT in-dist.", "LP-FT OOD", "RankMe"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table["rows"]:
        cells = [r["name"], r["objective"], str(r["params"]),
                 "-" if r.get("train_seconds") is None else f"{r['train_seconds']:.0f}"]
        cells += [_fmt(r[c]) for c in COLUMNS] + [f"{r['rankme']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    p = table["protocol"]
    lines.append("")
    lines.append(f"Accuracies in percent [95 % Wilson interval]. Zoo rows and raw pixels: {p['train']} "
                 f"seeded training images (bank, probe and fine-tuning set), {p['test']} test images; "
                 f"EfficientNet-Lite0: {p['efficientnet']['train']} / {p['efficientnet']['test']} at "
                 f"{p['efficientnet']['size']} px. Fine-tuning: {p['finetune']['epochs']} epochs, AdamW "
                 f"lr {p['finetune']['lr']}. OOD: {p['ood']}. Computed in {table['seconds']:.0f} s.")
    return "\n".join(lines) + "\n"


def write_table(path, names=None, *, merge=False):
    """Compute :func:`zoo_table`, write it as JSON at ``path`` and as Markdown beside it (``.md``).

    With ``merge=True`` the rows computed now replace those of the same name in the
    existing file and the others are kept (so rows can be computed in several runs);
    ``seconds`` is then the sum of the rows' own times.

    Parameters
    ----------
    path : str or os.PathLike
        The JSON file to write; the caller chooses it (``make zoo-table`` writes
        ``benchmarks/results/zoo_table.json``). Its folder is created if needed.
    names : list of str, optional
        Rows to compute (see :func:`row_names`); default all.
    merge : bool
        Keep the rows of an existing ``path`` that are not computed now.

    Returns
    -------
    dict
        The table written.
    """
    import fcntl

    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ValueError(f"path must be the JSON file to write (a non-empty path), got {path!r}")
    path = os.fspath(path)
    table = zoo_table(names)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if merge and os.path.isfile(path):
            with open(path) as f:
                old = json.load(f)
            by_name = {r["name"]: r for r in old["rows"]}
            by_name.update({r["name"]: r for r in table["rows"]})
            table["rows"] = [by_name[n] for n in row_names() if n in by_name]
            table["seconds"] = round(sum(r.get("seconds", 0.0) for r in table["rows"]), 1)
        with open(path, "w") as f:
            json.dump(table, f, indent=1)
            f.write("\n")
        with open(os.path.splitext(path)[0] + ".md", "w") as f:
            f.write(render_markdown(table))
    os.remove(path + ".lock")
    return table
