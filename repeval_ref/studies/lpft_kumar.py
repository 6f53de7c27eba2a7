"""LP-FT against fine-tuning where Kumar et al. (2022) predict a gain, over seeds and test images.

Book: chapter ``book/lpft.md`` ("LP-FT in its own setting"). Three read-outs of one frozen
pretrained encoder, all fitted on the same clean Fashion-MNIST training images:

* ``probe``: a linear head trained on the frozen encoder's features (the LP of LP-FT);
* ``ft``: the encoder and a randomly initialised linear head trained together;
* ``lpft``: the encoder trained together with the probe's head as its starting head.

Fine-tuning and LP-FT run for the same fixed number of steps (LP-FT is never allowed to stop
at its starting probe); the probe runs its own fixed number of steps on the features. Each
method's learning rate is chosen on a validation split carved out of the training images
(:func:`repeval_ref.carve_validation`): the rate of highest validation accuracy after the
last step (ties to the smaller rate), with training seed 0. The chosen rates are then run
with every training seed (the seed sets the head's initialisation and the order of the
batches), and only then are the test images read: the in-distribution test images and a
shifted version of the same garments, so that every comparison is paired on the same images.

Two settings share the code:

* ``zoo``: the zoo's self-supervised ViTs, out of distribution on ``fashion_shifted``;
* ``kumar``: EfficientNet-Lite0 with its ImageNet weights, whose pretraining saw photographs
  under many lighting, blur and noise conditions, fine-tuned on clean garments and tested on
  the corrupted garments of the transfer suite (``fashion_corrupted``). Its BatchNorm
  statistics stay at their pretrained values during fine-tuning (the affine weights train).

:func:`seed_image_interval` summarises a comparison: the gain of one method over another,
averaged over training seeds, with a bootstrap interval over test images alone and one over
test images and seeds together.
"""

from __future__ import annotations

import copy
import time

import numpy as np

from . import array_to_flags

__all__ = ["SETTINGS", "METHODS", "run", "seed_image_interval", "summarise"]

METHODS = ("probe", "ft", "lpft")

_ZOO_FULL = {
    "encoders": ["simclr_vit", "dino_vit"],
    "ood": "fashion_shifted",
    "fit": 9000,
    "val": 1000,
    "split_seed": 0,
    "test": 10000,
    "test_seed": 1,
    "seeds": [0, 1, 2],
    "steps": 1000,
    "batch_size": 64,
    "weight_decay": 0.05,
    "eval_every": 100,
    "lrs": [1e-4, 3e-4, 1e-3],
    "probe_steps": 1000,
    "probe_lrs": [3e-3, 1e-2, 3e-2],
    "image_size": None,
}

_KUMAR_FULL = {
    **_ZOO_FULL,
    "encoders": ["efficientnet_lite0"],
    "ood": "fashion_corrupted",
    "fit": 2000,
    "val": 500,
    "test": 2000,
    "steps": 150,
    "batch_size": 32,
    "eval_every": 50,
    "lrs": [3e-5, 1e-4, 3e-4],
    "image_size": 64,
}

SETTINGS = {
    "full": {"zoo": _ZOO_FULL, "kumar": _KUMAR_FULL},
    "small": {
        "zoo": {
            **_ZOO_FULL,
            "encoders": ["simclr_vit"],
            "fit": 500,
            "val": 200,
            "test": 500,
            "seeds": [0, 1],
            "steps": 20,
            "eval_every": 10,
            "lrs": [1e-4, 1e-3],
            "probe_steps": 100,
            "probe_lrs": [1e-2, 3e-2],
        },
        "kumar": {
            **_KUMAR_FULL,
            "fit": 100,
            "val": 64,
            "test": 100,
            "seeds": [0, 1],
            "steps": 3,
            "batch_size": 8,
            "eval_every": 3,
            "lrs": [1e-4],
            "probe_steps": 50,
            "probe_lrs": [1e-2],
            "image_size": 32,
        },
    },
}


# ----------------------------------------------------------------------------- statistics


def seed_image_interval(a_correct, b_correct, n_boot, rng, level=0.95):
    """Gain of B over A averaged over seeds, with bootstrap intervals over images and seeds.

    ``a_correct[s, i]`` is whether method A, trained with seed ``s``, gets test image ``i``
    right (likewise B, seed for seed: row ``s`` of both comes from the same seed). The gain is
    ``mean_s (mean_i b[s, i] - mean_i a[s, i])``. Two percentile intervals:

    * ``images``: the test images are resampled (the same draw for every seed and both
      methods), the seeds kept: the noise of the test set alone;
    * ``images_and_seeds``: each replicate also resamples the ``m`` seeds with replacement
      (a two-level bootstrap), so the spread between training runs is in it too.

    One replicate draws image counts ``rng.multinomial(n, [1/n] * n)`` and then, for the
    second interval, ``rng.integers(0, m, size=m)``; all replicates are drawn as two arrays
    in that order.

    Parameters
    ----------
    a_correct, b_correct : array_like of bool or 0/1, shape (m, n)
        ``m >= 1`` seeds, ``n >= 1`` images.
    n_boot : int
        Replicates, ``>= 1``.
    rng : numpy.random.Generator or int
    level : float, default 0.95

    Returns
    -------
    dict
        ``gain``, ``per_seed`` (list of ``m`` gains), ``seed_sd`` (sample SD of the
        per-seed gains; 0 for one seed), ``images`` and ``images_and_seeds`` (``[lo, hi]``),
        ``m``, ``n``.

    Raises
    ------
    ValueError
        Arrays not 2-D of equal shape with 0/1 values, ``n_boot`` < 1, ``level`` outside
        (0, 1).
    """
    a = np.asarray(a_correct)
    b = np.asarray(b_correct)
    if a.ndim != 2 or a.shape != b.shape or a.size == 0:
        raise ValueError(
            f"a_correct and b_correct must be 2-D arrays of equal shape (m, n), got "
            f"{a.shape} and {b.shape}"
        )
    for name, x in (("a_correct", a), ("b_correct", b)):
        if not np.all((x == 0) | (x == 1)):
            raise ValueError(f"{name} must hold only 0/1 or booleans")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")
    if not (isinstance(level, float) and 0 < level < 1):
        raise ValueError(f"level must be a float in (0, 1), got {level!r}")
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    m, n = a.shape
    d = b.astype(np.float64) - a.astype(np.float64)  # (m, n)
    per_seed = d.mean(axis=1)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)
    g = counts @ d.T / n  # (n_boot, m): each seed's gain on each resample of the images
    pick = rng.integers(0, m, size=(n_boot, m))
    img = g.mean(axis=1)
    both = np.take_along_axis(g, pick, axis=1).mean(axis=1)
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    return {
        "gain": float(per_seed.mean()),
        "per_seed": per_seed.tolist(),
        "seed_sd": float(per_seed.std(ddof=1)) if m > 1 else 0.0,
        "images": [float(v) for v in np.percentile(img, q)],
        "images_and_seeds": [float(v) for v in np.percentile(both, q)],
        "m": int(m),
        "n": int(n),
    }


# ----------------------------------------------------------------------------- training


def _check_part(part, where):
    if not isinstance(part, dict):
        raise ValueError(f"{where} must be a dict, got {type(part).__name__}")
    missing = sorted(set(_ZOO_FULL) - set(part))
    if missing:
        raise ValueError(f"{where} lacks {missing}")
    for key in ("fit", "val", "test", "steps", "batch_size", "eval_every", "probe_steps"):
        v = part[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{where}[{key!r}] must be an integer >= 1, got {v!r}")
    seeds = part["seeds"]
    if not isinstance(seeds, list) or not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"{where}['seeds'] must be a non-empty list of distinct seeds")
    for key in ("lrs", "probe_lrs"):
        if not part[key] or any(not (isinstance(v, float) and v > 0) for v in part[key]):
            raise ValueError(f"{where}[{key!r}] must be a non-empty list of positive floats")


def _inputs(name, images, size):
    if name == "efficientnet_lite0":
        from ..zoo.efficientnet import prepare_images

        return prepare_images(images, size=size)
    from ..zoo.inputs import to_tensor

    return to_tensor(images)


def _encoder(name):
    from .. import zoo

    return zoo.load(name)


class _Classifier:
    """Builds the trainable encoder-plus-head module of one run."""

    @staticmethod
    def build(encoder, head_state, seed, n_classes=10):
        import torch
        from torch import nn

        torch.manual_seed(seed)
        model = nn.Sequential()
        model.add_module("encoder", copy.deepcopy(encoder))
        model.add_module("head", nn.Linear(encoder.out_dim, n_classes))
        if head_state is not None:
            model.head.load_state_dict(head_state)
        for q in model.parameters():
            q.requires_grad_(True)
        return model


def _set_train(model):
    """Training mode, with every BatchNorm kept at its pretrained statistics."""
    from torch import nn

    model.train()
    for mod in model.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            mod.eval()


def _predict(model, x, batch=500):
    import torch

    model.eval()
    with torch.no_grad():
        return torch.cat([model(x[i : i + batch]).argmax(1) for i in range(0, len(x), batch)])


def _train(model, x, y, fit, val, *, steps, lr, part, seed):
    """AdamW for ``steps`` steps on batches drawn with replacement from ``fit``; its curve."""
    import torch
    import torch.nn.functional as F

    opt = torch.optim.AdamW(
        [q for q in model.parameters() if q.requires_grad],
        lr=lr,
        weight_decay=part["weight_decay"],
    )
    gen = torch.Generator().manual_seed(int(seed))
    fit_t, y_t = torch.as_tensor(fit), torch.as_tensor(y)
    curve = [[0, float((_predict(model, x[val]) == y_t[val]).float().mean())]]
    for t in range(1, steps + 1):
        idx = fit_t[torch.randint(len(fit_t), (part["batch_size"],), generator=gen)]
        _set_train(model)
        loss = F.cross_entropy(model(x[idx]), y_t[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if t % part["eval_every"] == 0 or t == steps:
            curve.append([t, float((_predict(model, x[val]) == y_t[val]).float().mean())])
    return curve


def _choose(curves, lrs):
    """The rate of highest validation accuracy after the last step (ties: the smaller rate)."""
    from ..torch.tuning import select_on_validation

    order = np.argsort(lrs, kind="stable")
    (i,) = select_on_validation([curves[k][-1][1] for k in order])
    return float(lrs[order[i]])


def _run_encoder(name, part, log):
    """Every method of one encoder: the searches with seed 0, then every seed, then the tests."""
    import torch
    from torch import nn

    from ..datasets import fashion_mnist
    from ..datasets.calibration import calibrated_images
    from ..datasets.transfer import load_task
    from ..torch.tuning import carve_validation
    from ..zoo.evaluate import subset_indices

    size = part["image_size"]
    c_start = time.process_time()
    encoder = _encoder(name)
    train_px, train_y = fashion_mnist("train")  # clean garments, the only training images
    fit, val = carve_validation(len(train_y), part["fit"], part["val"], seed=part["split_seed"])
    pool = np.concatenate([fit, val])  # the only training images read
    x = _inputs(name, train_px[pool], size)
    y = np.asarray(train_y[pool], dtype=np.int64)
    FIT, VAL = np.arange(part["fit"]), np.arange(part["fit"], part["fit"] + part["val"])
    with torch.no_grad():
        encoder.eval()
        h = torch.cat([encoder(x[i : i + 500]) for i in range(0, len(x), 500)])

    def probe_run(lr, seed):
        torch.manual_seed(seed)
        head = nn.Linear(h.shape[1], 10)
        curve = _train(head, h, y, FIT, VAL, steps=part["probe_steps"], lr=lr, part=part, seed=seed)
        return head, curve

    def ft_run(lr, seed, head_state):
        model = _Classifier.build(encoder, head_state, seed)
        curve = _train(model, x, y, FIT, VAL, steps=part["steps"], lr=lr, part=part, seed=seed)
        return model, curve

    search = {}
    s0 = part["seeds"][0]
    probes = [probe_run(lr, s0) for lr in part["probe_lrs"]]
    lr_probe = _choose([c for _, c in probes], part["probe_lrs"])
    head0 = probes[part["probe_lrs"].index(lr_probe)][0]
    search["probe"] = {"lrs": part["probe_lrs"], "curves": [c for _, c in probes], "lr": lr_probe}
    fts = [ft_run(lr, s0, None) for lr in part["lrs"]]
    lr_ft = _choose([c for _, c in fts], part["lrs"])
    search["ft"] = {"lrs": part["lrs"], "curves": [c for _, c in fts], "lr": lr_ft}
    lpfts = [ft_run(lr, s0, copy.deepcopy(head0.state_dict())) for lr in part["lrs"]]
    lr_lpft = _choose([c for _, c in lpfts], part["lrs"])
    search["lpft"] = {"lrs": part["lrs"], "curves": [c for _, c in lpfts], "lr": lr_lpft}
    search_cpu = time.process_time() - c_start
    if log is not None:
        log(f"{name}: rates probe {lr_probe:g} ft {lr_ft:g} lpft {lr_lpft:g} ({search_cpu:.0f} s)")

    # the test images, read only now: the same garments clean (ID) and shifted (OOD)
    if name == "efficientnet_lite0":
        id_px, id_y = load_task("fashion", "test")
        ood_px, ood_y = load_task(part["ood"], "test")
    else:
        id_px, id_y = fashion_mnist("test")
        ood_px, ood_y = calibrated_images(part["ood"], "test", seed=0)
    if not np.array_equal(id_y, ood_y):
        raise ValueError(f"{name}: the ID and OOD test sets do not hold the same garments")
    rows = subset_indices(len(id_y), part["test"], part["test_seed"])
    test = {"id": _inputs(name, id_px[rows], size), "ood": _inputs(name, ood_px[rows], size)}
    test_y = torch.as_tensor(np.asarray(id_y[rows], dtype=np.int64))

    runs = []
    for seed in part["seeds"]:
        c0 = time.process_time()
        if seed == s0:
            head = head0
            ft = fts[part["lrs"].index(lr_ft)][0]
            lpft = lpfts[part["lrs"].index(lr_lpft)][0]
            curves = {
                "probe": probes[part["probe_lrs"].index(lr_probe)][1],
                "ft": fts[part["lrs"].index(lr_ft)][1],
                "lpft": lpfts[part["lrs"].index(lr_lpft)][1],
            }
        else:
            head, c_probe = probe_run(lr_probe, seed)
            ft, c_ft = ft_run(lr_ft, seed, None)
            lpft, c_lpft = ft_run(lr_lpft, seed, copy.deepcopy(head.state_dict()))
            curves = {"probe": c_probe, "ft": c_ft, "lpft": c_lpft}
        probe_model = nn.Sequential()
        probe_model.add_module("encoder", encoder)
        probe_model.add_module("head", head)
        row = {"seed": int(seed), "val_curves": curves}
        for method, model in (("probe", probe_model), ("ft", ft), ("lpft", lpft)):
            row[method] = {}
            for dom in ("id", "ood"):
                ok = (_predict(model, test[dom]) == test_y).numpy()
                row[method][dom] = {"acc": float(ok.mean()), "correct": array_to_flags(ok)}
        row["cpu_seconds"] = round(time.process_time() - c0, 1)
        runs.append(row)
        if log is not None:
            log(
                f"{name} seed {seed}: "
                + " ".join(
                    f"{m} {row[m]['id']['acc']:.3f}/{row[m]['ood']['acc']:.3f}" for m in METHODS
                )
            )
    return {
        "encoder": name,
        "ood": part["ood"],
        "rates": {"probe": lr_probe, "ft": lr_ft, "lpft": lr_lpft},
        "search": search,
        "search_cpu_seconds": round(search_cpu, 1),
        "cpu_seconds": round(time.process_time() - c_start, 1),
        "n_fit": int(part["fit"]),
        "n_val": int(part["val"]),
        "n_test": int(rows.size),
        "runs": runs,
    }


def run(settings, log=None):
    """Both settings (``settings["zoo"]``, ``settings["kumar"]``), every encoder of each.

    Returns
    -------
    dict
        ``zoo`` and ``kumar``: lists of per-encoder records (``encoder``, ``ood``, ``rates``,
        ``search`` with every rate's validation curve, ``runs`` per seed with each method's
        ``id``/``ood`` accuracy and per-image correct flags, sizes and CPU seconds).
    """
    from ..zoo.train import deterministic_torch

    if not isinstance(settings, dict) or set(settings) != {"zoo", "kumar"}:
        raise ValueError("settings must be a dict with the parts 'zoo' and 'kumar'")
    out = {}
    for part_name in ("zoo", "kumar"):
        part = settings[part_name]
        _check_part(part, f"settings[{part_name!r}]")
        deterministic_torch()
        out[part_name] = [_run_encoder(name, part, log) for name in part["encoders"]]
    return out


def summarise(entry, n_boot=2000, seed=0, level=0.95):
    """Per comparison and domain, :func:`seed_image_interval` for one encoder's record.

    Comparisons: ``lpft_vs_ft`` (LP-FT minus fine-tuning), ``probe_vs_ft`` (probe minus
    fine-tuning), ``lpft_vs_probe`` (LP-FT minus probe); domains ``id`` and ``ood``. Also
    ``acc``: each method's accuracy per domain, averaged over seeds.

    Raises
    ------
    ValueError
        ``entry`` has no runs.
    """
    from . import flags_to_array

    if not isinstance(entry, dict) or not entry.get("runs"):
        raise ValueError("entry must be one encoder's record with its 'runs'")
    flags = {
        (m, d): np.stack([flags_to_array(r[m][d]["correct"]) for r in entry["runs"]])
        for m in METHODS
        for d in ("id", "ood")
    }
    out = {"acc": {m: {d: float(flags[m, d].mean()) for d in ("id", "ood")} for m in METHODS}}
    k = 0
    for name, (a, b) in (
        ("lpft_vs_ft", ("ft", "lpft")),
        ("probe_vs_ft", ("ft", "probe")),
        ("lpft_vs_probe", ("probe", "lpft")),
    ):
        out[name] = {}
        for d in ("id", "ood"):
            out[name][d] = seed_image_interval(
                flags[a, d], flags[b, d], n_boot, np.random.default_rng([seed, k]), level
            )
            k += 1
    return out
