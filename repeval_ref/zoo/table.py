"""The zoo's evaluation table (``make zoo-table``): every encoder under every read-out.

Book: the Performance appendix, section "The zoo's evaluation table". Rows: raw
pixels, each encoder of :data:`repeval_ref.zoo.registry.ENCODERS` in the registry's
order (final checkpoint) and EfficientNet-Lite0. Each zoo row records its
architecture (``arch``, the manifest's ``architecture["name"]``).

Rows of data. The training rows are a seeded subset of 10,000 Fashion-MNIST training
images, the subset of :data:`repeval_ref.zoo.evaluate.PROTOCOL` ``["test"]``: the 20-NN
bank, the probes' training set, the pool of the 10-shot supports and the pool the
fine-tuning split is carved from. Every column is scored on all 10,000 test images
(out of distribution: the same 10,000 garments blended onto photographs), so a
Wilson interval is about 0.7 points either side of an accuracy near 85 %.

Columns, each test accuracy with its 95 % Wilson interval over the test images
(:func:`repeval_ref.wilson_interval`) unless said otherwise:

* ``knn20``: 20-NN, ``tau = 0.07``, class token (a CNN's global average);
* ``probe_cls`` / ``probe_mean``: logistic-regression probe, ``C`` tuned on a
  validation fifth of the training rows (:func:`repeval_ref.linear_probe.linear_probe_warm_path`,
  the recipe of :func:`repeval_ref.linear_probe_done_right` with warm starts), on the
  class token / on the mean of the patch tokens. For a CNN the class token *is* the
  mean of its map positions, so ``probe_mean`` repeats ``probe_cls`` (with a note);
* ``fewshot10``: :func:`fewshot_probe`, a logistic-regression probe fitted on 10
  labelled training images per class (standardised on those 100 images, ``C`` chosen
  by 5-fold cross-validation on them), mean over 5 seeded support draws; its interval
  is the lowest and the highest draw (the spread that the choice of the 100 labelled
  images causes), not a Wilson interval;
* ``attentive``: :class:`~repeval_ref.zoo.probes.AttentiveProbe` trained on the frozen
  token sequence, with as many heads as :func:`attentive_heads` gives for the width;
* ``ft_id``/``ft_ood``, ``lpft_id``/``lpft_ood``: fine-tuning from a random head, and
  LP-FT (a linear head trained on the frozen features first, then everything), chosen
  as a user would (:func:`search_rate`): a validation split is carved out of the
  training rows (:func:`repeval_ref.carve_validation`), every learning rate of a grid
  gets one run whose validation accuracy is recorded every ``eval_every`` steps
  (:func:`repeval_ref.train_with_validation`), and the (rate, checkpoint) of highest
  validation accuracy is kept (:func:`repeval_ref.select_on_validation`: ties to the
  smaller rate, then to fewer steps), the way ``book/lpft.md`` chooses them. The LP-FT
  head is chosen the same way on the frozen features. Only then are the test images
  read: the in-distribution test images and
  ``calibrated_images('fashion_shifted', 'test', seed=0)`` (out of distribution). The
  choice of each row is recorded (``ft_recipe``, ``lpft_recipe``);
* ``rankme``: :func:`repeval_ref.rankme` of the test features (class token);
* the encoder's pre-training time, from the manifest.

Raw pixels: the image itself is the feature (784 grey levels / 255; columns constant
on the training rows dropped for the probe, which standardises); its "tokens" are the
sixteen 7 x 7 patches after their mean. Budgets (sizes, epochs, grids) are in
:data:`TABLE_PROTOCOL` and written into the JSON next to the numbers; ``protocol=``
overrides them (tests run tiny tables). :func:`floors` checks the training floor: every
trained encoder at least 10 points above the random initialisation of its architecture
on the linear probe and on the 10-shot probe.

The seconds of each piece are recorded per row (``piece_seconds``); the cost of the whole
table is in ``repeval_ref/zoo/BUDGET.md``.
"""

from __future__ import annotations

import copy
import json
import math
import numbers
import os
import time
from collections import OrderedDict

import numpy as np
import torch
from torch import nn

from .evaluate import PROTOCOL, subset_indices

__all__ = [
    "TABLE_PROTOCOL",
    "COLUMNS",
    "resolve_protocol",
    "row_names",
    "fewshot_supports",
    "fewshot_probe",
    "attentive_heads",
    "search_rate",
    "finetune_columns",
    "zoo_table",
    "floors",
    "render_markdown",
    "write_table",
]

TABLE_PROTOCOL = {
    "train": 10000,
    "test": 10000,
    "subset_seed": 0,
    "efficientnet": {"train": 10000, "test": 10000, "size": 96},
    "k": PROTOCOL["k"],
    "tau": PROTOCOL["tau"],
    "Cs": list(PROTOCOL["Cs"]),
    "fewshot": {
        "shots": 10,
        "draws": 5,
        "seed": 0,
        "Cs": list(PROTOCOL["Cs"]),
        "folds": 5,
        "features": "class token (a CNN's global average; raw pixels: the pixels)",
    },
    "attentive": {"epochs": 15, "lr": 3e-3, "weight_decay": 1e-4, "heads": 4, "batch_size": 256},
    # the fine-tuning pool is the 10,000 training rows: 9,000 fitted on, 1,000 for validation
    # (a step costs the same whatever the pool; the steps and validation checks are the cost)
    "finetune": {
        "fit": 9000,
        "val": 1000,
        "split_seed": 0,
        "lrs": [1e-4, 3e-4, 1e-3],
        "steps": 500,
        "eval_every": 50,
        "batch_size": 64,
        "weight_decay": 0.05,
        "seed": 0,
        "head": "random (FT) / the linear head chosen on validation (LP-FT)",
    },
    # the LP-FT head trains on frozen features, so its search is cheap and may run longer
    "lp_head": {
        "lrs": [3e-3, 1e-2, 3e-2],
        "steps": 1000,
        "eval_every": 50,
        "batch_size": 64,
        "weight_decay": 0.0,
        "seed": 0,
    },
    "ood": "calibrated_images('fashion_shifted', 'test', seed=0)",
}

COLUMNS = (
    "knn20",
    "probe_cls",
    "probe_mean",
    "fewshot10",
    "attentive",
    "ft_id",
    "ft_ood",
    "lpft_id",
    "lpft_ood",
)
FINETUNE_COLUMNS = ("ft_id", "ft_ood", "lpft_id", "lpft_ood")

#: Rows that :func:`floors` does not hold to the floor besides the random ones: the
#: baselines that are no zoo encoder, and the deliberately collapsed control.
FLOOR_EXEMPT = ("raw_pixels", "efficientnet_lite0", "collapsed_vit")


# ----------------------------------------------------------------------------- protocol


def _merge(base, new, where):
    """Write ``new`` into ``base`` key by key (nested dicts merged); unknown keys refused."""
    for key, value in new.items():
        if key not in base:
            raise ValueError(f"{where}: unknown key {key!r}; known: {sorted(base)}")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise ValueError(f"{where}[{key!r}] must be a dict, got {value!r}")
            _merge(base[key], value, f"{where}[{key!r}]")
        else:
            base[key] = copy.deepcopy(value)


def _count(value, where, minimum=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{where} must be an integer >= {minimum}, got {value!r}")


def _rates(value, where):
    if (
        not isinstance(value, (list, tuple))
        or not value
        or any(
            isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 < v < math.inf
            for v in value
        )
    ):
        raise ValueError(f"{where} must be a non-empty list of positive numbers, got {value!r}")


def _check_protocol(p):
    for key in ("train", "test", "k"):
        _count(p[key], f"protocol[{key!r}]")
    for key in ("train", "test", "size"):
        _count(p["efficientnet"][key], f"protocol['efficientnet'][{key!r}]")
    _count(p["subset_seed"], "protocol['subset_seed']", 0)
    _rates(p["Cs"], "protocol['Cs']")
    f, lp, fs = p["finetune"], p["lp_head"], p["fewshot"]
    for key in ("fit", "val", "steps", "eval_every", "batch_size"):
        _count(f[key], f"protocol['finetune'][{key!r}]", 0 if key == "steps" else 1)
    for key in ("steps", "eval_every", "batch_size"):
        _count(lp[key], f"protocol['lp_head'][{key!r}]", 0 if key == "steps" else 1)
    for key in ("shots", "draws", "folds"):
        _count(fs[key], f"protocol['fewshot'][{key!r}]", 2 if key != "shots" else 1)
    _rates(f["lrs"], "protocol['finetune']['lrs']")
    _rates(lp["lrs"], "protocol['lp_head']['lrs']")
    _rates(fs["Cs"], "protocol['fewshot']['Cs']")
    if f["fit"] + f["val"] > p["train"]:
        raise ValueError(
            f"protocol: finetune fit + val = {f['fit'] + f['val']} exceeds the "
            f"{p['train']} training rows they are carved from"
        )
    if fs["folds"] > fs["shots"]:
        raise ValueError(
            f"protocol['fewshot']['folds'] = {fs['folds']} exceeds the {fs['shots']} shots "
            "per class (each fold needs an image of every class)"
        )


def resolve_protocol(protocol=None):
    """:data:`TABLE_PROTOCOL` with ``protocol`` merged into it (a deep copy; nested dicts merged).

    Parameters
    ----------
    protocol : dict, optional
        Entries to override, e.g. ``{"train": 600, "finetune": {"steps": 20}}``; only keys
        of :data:`TABLE_PROTOCOL` are accepted.

    Returns
    -------
    dict
        The protocol a table is computed under (what its JSON records).

    Raises
    ------
    ValueError
        ``protocol`` not a dict, an unknown key, or a value out of range (the key is named).
    """
    p = copy.deepcopy(TABLE_PROTOCOL)
    if protocol is None:
        return p
    if not isinstance(protocol, dict):
        raise ValueError(
            f"protocol must be a dict of entries of TABLE_PROTOCOL, got {type(protocol).__name__}"
        )
    _merge(p, protocol, "protocol")
    _check_protocol(p)
    return json.loads(json.dumps(p))  # what the JSON will hold (tuples become lists)


# ----------------------------------------------------------------------------- frozen read-outs


def _wilson(k, n):
    from ..uncertainty import wilson_interval

    lo, hi = wilson_interval(k, n)
    return {"acc": k / n, "lo": float(lo), "hi": float(hi), "n": n}


def _acc(pred, y):
    return _wilson(int(np.sum(np.asarray(pred) == np.asarray(y))), int(np.asarray(y).size))


def _probe(htr, ytr, hte, yte, p):
    from ..linear_probe import linear_probe_warm_path

    # columns constant on the probe's fitting rows (the recipe's split: all but the first
    # n // 5 of default_rng(0).permutation(n)) cannot be standardised; raw pixels have some
    n = htr.shape[0]
    keep = htr[np.random.default_rng(0).permutation(n)[n // 5 :]].std(axis=0) > 0
    best_c, _, pred = linear_probe_warm_path(htr[:, keep], ytr, hte[:, keep], yte, p["Cs"], seed=0)
    return {**_acc(pred, yte), "C": best_c}


def _knn(htr, ytr, hte, yte, p):
    from ..knn import knn_classify

    return _acc(knn_classify(htr, ytr, hte, p["k"], p["tau"], 10), yte)


def fewshot_supports(train_y, shots, draws, seed):
    """Seeded support sets: ``shots`` training rows of every class, ``draws`` times.

    One generator ``np.random.default_rng(seed)``; each draw takes, for every class of
    ``np.unique(train_y)`` in increasing order,
    ``rng.choice(np.flatnonzero(train_y == c), size=shots, replace=False)`` (the draw of
    :func:`repeval_ref.low_shot_eval`, so the same seed gives the same supports).

    Parameters
    ----------
    train_y : array_like of int, shape (n,)
        Labels of the training rows the supports are drawn from.
    shots : int
        Rows per class, ``1 <= shots <=`` the smallest class.
    draws : int
        Number of support sets, ``>= 1``.
    seed : int
        Seed of the generator, ``>= 0``.

    Returns
    -------
    list of numpy.ndarray of int64, each of shape (n_classes * shots,)
        Row positions into ``train_y``, class by class.

    Raises
    ------
    ValueError
        ``train_y`` not a non-empty 1-D integer array, or ``shots``, ``draws``, ``seed``
        out of range (a class too small for ``shots`` is named).
    """
    y = np.asarray(train_y)
    if y.ndim != 1 or y.size == 0 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(
            f"train_y must be a non-empty 1-D array of integer labels, got shape {y.shape}"
        )
    _count(shots, "shots")
    _count(draws, "draws")
    _count(seed, "seed", 0)
    classes, sizes = np.unique(y, return_counts=True)
    if shots > sizes.min():
        c = classes[int(np.argmin(sizes))]
        raise ValueError(f"shots={shots} exceeds the {sizes.min()} rows of class {c} in train_y")
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(y == c) for c in classes]
    return [
        np.concatenate([rng.choice(m, size=shots, replace=False) for m in members]).astype(np.int64)
        for _ in range(draws)
    ]


def _fewshot_fit(h, y, Cs, folds):
    """Standardise-then-logistic-regression on one support, ``C`` by stratified k-fold CV."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    # GridSearchCV keeps the first C of the list among equal mean fold accuracies
    search = GridSearchCV(pipe, {"logisticregression__C": list(Cs)}, cv=StratifiedKFold(folds))
    return search.fit(h, y)


def fewshot_probe(htr, ytr, hte, yte, p):
    """The ``fewshot10`` cell: a logistic-regression probe on a few labelled rows per class.

    For each support set of :func:`fewshot_supports` (``p["fewshot"]``: ``shots``,
    ``draws``, ``seed``), a pipeline of ``StandardScaler`` and
    ``LogisticRegression(C, max_iter=2000)`` is fitted on the support alone, ``C`` chosen
    among ``Cs`` by stratified ``folds``-fold cross-validation on the support (the first
    ``C`` of the best mean fold accuracy) and refitted on the whole support; it is scored
    on every row of ``hte``. Only the support's labels are read.

    Parameters
    ----------
    htr : numpy.ndarray, shape (n, d)
        Training features (the pool of the supports).
    ytr : numpy.ndarray of int, shape (n,)
    hte : numpy.ndarray, shape (m, d)
        Test features.
    yte : numpy.ndarray of int, shape (m,)
    p : dict
        The table's protocol (:func:`resolve_protocol`).

    Returns
    -------
    dict
        ``acc`` (mean over draws), ``lo``/``hi`` (the lowest and highest draw),
        ``std`` (sample standard deviation over draws; 0 for one draw), ``draws`` (each
        draw's test accuracy), ``C`` (each draw's chosen ``C``), ``shots``, ``n`` (test
        rows) and ``interval`` (what ``lo``/``hi`` are).
    """
    f = p["fewshot"]
    accs, Cs = [], []
    for support in fewshot_supports(ytr, f["shots"], f["draws"], f["seed"]):
        search = _fewshot_fit(htr[support], ytr[support], f["Cs"], f["folds"])
        accs.append(float(np.mean(search.predict(hte) == yte)))
        Cs.append(float(search.best_params_["logisticregression__C"]))
    a = np.asarray(accs)
    return {
        "acc": float(a.mean()),
        "lo": float(a.min()),
        "hi": float(a.max()),
        "std": float(a.std(ddof=1)) if a.size > 1 else 0.0,
        "draws": accs,
        "C": Cs,
        "shots": f["shots"],
        "n": int(np.asarray(yte).size),
        "interval": (
            f"lowest and highest of {a.size} support draws (spread over draws, not a Wilson "
            "interval)"
        ),
    }


def attentive_heads(width, wanted=4):
    """The divisor of ``width`` closest to ``wanted`` (ties to the larger): the probe's heads.

    64 and 128 channels (the zoo's ViT, its ResNets) and 1280 (EfficientNet-Lite0) get
    ``wanted = 4``; the 49 grey levels of a raw 7 x 7 patch get 7.
    """
    _count(width, "width")
    _count(wanted, "wanted")
    divisors = [h for h in range(1, width + 1) if width % h == 0]
    return min(divisors, key=lambda h: (abs(h - wanted), -h))


def _attentive(ttr, ytr, tte, yte, p):
    from .probes import predict, train_attentive_probe

    a = p["attentive"]
    heads = attentive_heads(ttr.shape[2], a["heads"])
    probe, transform = train_attentive_probe(
        ttr,
        ytr,
        n_heads=heads,
        epochs=a["epochs"],
        lr=a["lr"],
        weight_decay=a["weight_decay"],
        batch_size=a["batch_size"],
    )
    return {**_acc(predict(lambda t: probe(t)[0], transform(tte)), yte), "heads": heads}


def _frozen_columns(ttr, ytr, tte, yte, p, features, timer, *, mean_probe=True):
    """20-NN, the two probes, 10-shot, attentive and RankMe from token arrays (class token first).

    ``features`` is what the class-token columns read: ``(htr, hte)``; ``mean_probe=False``
    leaves ``probe_mean`` out (``None``).
    """
    from ..labelfree import rankme

    htr, hte = features
    out = {
        "knn20": timer("knn", _knn, htr, ytr, hte, yte, p),
        "probe_cls": timer("probe_cls", _probe, htr, ytr, hte, yte, p),
    }
    mtr, mte = ttr[:, 1:].mean(axis=1), tte[:, 1:].mean(axis=1)
    if not mean_probe:
        out["probe_mean"] = None
    elif htr.shape == mtr.shape and np.allclose(htr, mtr, rtol=1e-5, atol=1e-6):
        out["probe_mean"] = {
            **out["probe_cls"],
            "note": "the class token is the mean of the positions",
        }
    else:
        out["probe_mean"] = timer("probe_mean", _probe, mtr, ytr, mte, yte, p)
    out["fewshot10"] = timer("fewshot10", fewshot_probe, htr, ytr, hte, yte, p)
    out["attentive"] = timer("attentive", _attentive, ttr, ytr, tte, yte, p)
    out["rankme"] = float(rankme(hte))
    return out


# ----------------------------------------------------------------------------- fine-tuning


def _with_head(encoder, seed, head=None, n_classes=10):
    """A trainable copy of ``encoder`` and a seeded linear head (``head``'s weights if given)."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        OrderedDict(encoder=copy.deepcopy(encoder), head=nn.Linear(encoder.out_dim, n_classes))
    )
    if head is not None:
        model.head.load_state_dict(head.state_dict())
    for q in model.parameters():
        q.requires_grad_(True)
    return model.train()


def _linear(width, seed, n_classes=10):
    torch.manual_seed(seed)
    return nn.Linear(width, n_classes)


def search_rate(make, inputs, labels, fit, val, lrs, settings):
    """Every rate of ``lrs`` trained and tracked on validation; the best (rate, checkpoint) kept.

    For each rate, in order, ``make()`` gives a fresh module (the same start for every
    rate), AdamW (``settings["weight_decay"]``) trains it with
    :func:`repeval_ref.train_with_validation` on ``inputs[fit]`` for ``settings["steps"]``
    steps of ``settings["batch_size"]``, scoring ``inputs[val]`` every
    ``settings["eval_every"]`` steps. :func:`repeval_ref.select_on_validation` picks the
    highest validation accuracy over rates and checkpoints (ties: the first rate listed,
    then the earliest checkpoint). Nothing but the rows ``fit`` and ``val`` of ``inputs``
    is read.

    Parameters
    ----------
    make : callable
        ``() -> torch.nn.Module`` mapping a batch of ``inputs`` to logits.
    inputs : torch.Tensor, shape (n, ...)
    labels : array_like of int, shape (n,)
    fit, val : numpy.ndarray of int
        Disjoint positions into ``inputs`` (:func:`repeval_ref.carve_validation`).
    lrs : sequence of float
        The learning-rate grid.
    settings : dict
        ``steps``, ``eval_every``, ``batch_size``, ``weight_decay``, ``seed``.

    Returns
    -------
    recipe : dict
        ``lr`` and ``steps`` chosen, their ``val_acc``, ``n_fit``, ``n_val``, the grid
        ``lrs`` and every rate's validation curve (``curve_steps``, ``curves``).
    module : torch.nn.Module
        A fresh ``make()`` loaded with the chosen checkpoint, in evaluation mode.
    """
    from ..torch.tuning import select_on_validation, train_with_validation

    lrs = [float(lr) for lr in lrs]
    curves = []
    for lr in lrs:
        module = make()
        opt = torch.optim.AdamW(
            [q for q in module.parameters() if q.requires_grad],
            lr=lr,
            weight_decay=settings["weight_decay"],
        )
        curves.append(
            train_with_validation(
                module,
                opt,
                inputs,
                labels,
                fit,
                val,
                steps=settings["steps"],
                eval_every=settings["eval_every"],
                batch_size=settings["batch_size"],
                seed=settings["seed"],
            )
        )
    i, j = select_on_validation(np.array([c.accuracy for c in curves]))
    chosen = curves[i]
    module = make()
    module.load_state_dict(chosen.state)
    module.eval()
    recipe = {
        "lr": lrs[i],
        "steps": int(chosen.steps[j]),
        "val_acc": float(chosen.accuracy[j]),
        "n_fit": int(np.size(fit)),
        "n_val": int(np.size(val)),
        "lrs": lrs,
        "curve_steps": [int(s) for s in chosen.steps],
        "curves": [[float(a) for a in c.accuracy] for c in curves],
    }
    return recipe, module


def _forward(module, x, batch_size=1024):
    with torch.no_grad():
        return torch.cat([module(x[i : i + batch_size]) for i in range(0, x.shape[0], batch_size)])


def finetune_columns(name, encoder, train_rows, test_rows, p, *, timer=None):
    """FT and LP-FT of ``encoder``, rate and steps chosen on training rows, then tested.

    A validation split is carved out of ``train_rows``
    (:func:`repeval_ref.carve_validation` with ``p["finetune"]``'s ``fit``, ``val`` and
    ``split_seed``). Fine-tuning: :func:`search_rate` over ``p["finetune"]["lrs"]`` from a
    seeded random head. LP-FT: the linear head is first chosen by :func:`search_rate` on
    the frozen encoder's features of the same split (``p["lp_head"]``), then the encoder
    and that head are searched as fine-tuning is. The two chosen models are then scored
    on ``test_rows`` of the Fashion-MNIST test images and of the shifted ones (the only
    read of either).

    Parameters
    ----------
    name : str
        The zoo encoder (chooses its input preparation).
    encoder : torch.nn.Module with ``out_dim``
        The frozen encoder; it is copied, never changed.
    train_rows, test_rows : numpy.ndarray of int
        Rows of the training and the test split.
    p : dict
        The protocol (:func:`resolve_protocol`).
    timer : callable, optional
        ``timer(piece, function, *args)`` runs ``function(*args)`` and may record its time.

    Returns
    -------
    dict
        ``ft_id``, ``ft_ood``, ``lpft_id``, ``lpft_ood`` (Wilson cells), ``ft_recipe``,
        ``lpft_recipe`` (``lpft_recipe["head"]``: the head's search).
    """
    from ..torch.tuning import carve_validation
    from .extraction import encoder_inputs, load_images

    timer = timer or (lambda piece, fn, *a: fn(*a))
    f, lp = p["finetune"], p["lp_head"]
    images, labels = load_images("fashion", "train")
    fit, val = carve_validation(len(train_rows), f["fit"], f["val"], seed=f["split_seed"])
    pool = np.asarray(train_rows)[np.concatenate([fit, val])]  # the only images the search reads
    x_pool, y_pool = encoder_inputs(name, images[pool]), labels[pool]
    FIT, VAL = np.arange(f["fit"]), np.arange(f["fit"], f["fit"] + f["val"])
    ft_recipe, ft = timer(
        "ft_search",
        search_rate,
        lambda: _with_head(encoder, f["seed"]),
        x_pool,
        y_pool,
        FIT,
        VAL,
        f["lrs"],
        f,
    )
    h_pool = _forward(encoder.eval(), x_pool)
    head_recipe, head = timer(
        "lp_head_search",
        search_rate,
        lambda: _linear(h_pool.shape[1], lp["seed"]),
        h_pool,
        y_pool,
        FIT,
        VAL,
        lp["lrs"],
        lp,
    )
    lpft_recipe, lpft = timer(
        "lpft_search",
        search_rate,
        lambda: _with_head(encoder, f["seed"], head=head),
        x_pool,
        y_pool,
        FIT,
        VAL,
        f["lrs"],
        f,
    )
    out = {"ft_recipe": ft_recipe, "lpft_recipe": {**lpft_recipe, "head": head_recipe}}
    for domain, suffix in (("fashion", "id"), ("shifted", "ood")):  # the test images, read now
        x, y = load_images(domain, "test")
        x, y = encoder_inputs(name, x[test_rows]), y[test_rows]
        for method, model in (("ft", ft), ("lpft", lpft)):
            out[f"{method}_{suffix}"] = timer(
                f"{method}_{suffix}",
                lambda m=model, x=x, y=y: _acc(_forward(m, x).argmax(1).numpy(), y),
            )
    return out


# ----------------------------------------------------------------------------- rows


def _timer(seconds):
    def run(piece, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        seconds[piece] = round(seconds.get(piece, 0.0) + time.perf_counter() - t0, 1)
        return out

    return run


def _raw_row(tr, te, p):
    from .extraction import load_images
    from .mae import patchify

    xtr, ytr = load_images("fashion", "train")
    xte, yte = load_images("fashion", "test")
    xtr, ytr, xte, yte = xtr[tr], ytr[tr], xte[te], yte[te]

    def tokens(x):
        q = patchify(torch.from_numpy(x[:, None].astype(np.float32) / 255), 7).numpy()
        return np.concatenate([q.mean(axis=1, keepdims=True), q], axis=1)

    seconds = {}
    htr = xtr.reshape(len(tr), -1).astype(np.float64) / 255
    hte = xte.reshape(len(te), -1).astype(np.float64) / 255
    row = {
        "name": "raw_pixels",
        "arch": None,
        "objective": "none (the 784 grey levels)",
        "params": 0,
        "train_seconds": 0.0,
    }
    row.update(
        _frozen_columns(
            tokens(xtr), ytr, tokens(xte), yte, p, (htr, hte), _timer(seconds), mean_probe=False
        )
    )
    for c in FINETUNE_COLUMNS:
        row[c] = "n/a: no encoder"
    row["ft_recipe"] = row["lpft_recipe"] = None
    row["piece_seconds"] = seconds
    return row


def _describe(name):
    """The row's description: objective, parameters, pre-training, architecture."""
    from .loader import load, manifest

    if name == "efficientnet_lite0":
        enc = load(name)
        return {
            "arch": "efficientnet_lite0",
            "objective": "supervised, ImageNet-1k (installed wheel)",
            "params": int(
                sum(q.numel() for q in enc.parameters())
                - enc.classifier.weight.numel()
                - enc.classifier.bias.numel()
            ),
            "train_seconds": None,
        }
    entry = manifest()["encoders"][name]
    return {
        "arch": entry["architecture"]["name"],
        "objective": entry["objective"],
        "params": entry["parameters"],
        "train_seconds": entry["training"]["seconds"],
        "train_images": entry["data"]["subset_size"],
        "epochs": entry["hyperparameters"]["epochs"],
    }


def _encoder_row(name, tr, te, p, *, finetune=True, log=print):
    from .extraction import features
    from .loader import load

    seconds = {}
    timer = _timer(seconds)
    ttr, ytr = timer("extraction", lambda: features(name, "train", "tokens", indices=tr))
    tte, yte = timer("extraction", lambda: features(name, "test", "tokens", indices=te))
    row = {"name": name, **_describe(name)}
    row.update(_frozen_columns(ttr, ytr, tte, yte, p, (ttr[:, 0], tte[:, 0]), timer))
    log(f"  {name}: frozen read-outs {sum(seconds.values()):.0f} s")
    if not finetune:
        for c in FINETUNE_COLUMNS:
            row[c] = "not run: cost"
        row["ft_recipe"] = row["lpft_recipe"] = None
    else:
        t0 = time.perf_counter()
        row.update(finetune_columns(name, load(name), tr, te, p, timer=timer))
        log(
            f"  {name}: FT and LP-FT searched and tested {time.perf_counter() - t0:.0f} s "
            f"(FT lr {row['ft_recipe']['lr']:g}, {row['ft_recipe']['steps']} steps; "
            f"LP-FT lr {row['lpft_recipe']['lr']:g}, {row['lpft_recipe']['steps']} steps)"
        )
    row["piece_seconds"] = seconds
    return row


def row_names():
    """The table's rows in order: raw pixels, the zoo's encoders (registry order),
    EfficientNet-Lite0."""
    from .registry import ENCODERS

    return ["raw_pixels", *ENCODERS, "efficientnet_lite0"]


def _check_names(names):
    if names is None:
        return row_names()
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names:
        raise ValueError(f"names must be a non-empty list of table rows, got {names!r}")
    unknown = [n for n in names if n not in row_names()]
    if unknown:
        raise ValueError(f"names: unknown table rows {unknown}; known: {row_names()}")
    return list(names)


def zoo_table(names=None, *, protocol=None, log=print):
    """Compute the table.

    Parameters
    ----------
    names : list of str, optional
        Rows to compute (see :func:`row_names`); default all, in that order.
    protocol : dict, optional
        Overrides merged into :data:`TABLE_PROTOCOL` (:func:`resolve_protocol`).
    log : callable
        Progress lines.

    Returns
    -------
    dict
        ``rows`` (one dict per row: the :data:`COLUMNS`, ``rankme``, ``ft_recipe``,
        ``lpft_recipe``, the description, ``seconds`` and ``piece_seconds``), ``floors``
        (:func:`floors`), ``protocol`` (the one used), ``seconds``, ``torch``, ``date``.
    """
    from .train import deterministic_torch

    p = resolve_protocol(protocol)
    names = _check_names(names)
    deterministic_torch()
    t0 = time.perf_counter()
    tr = subset_indices(60000, p["train"], p["subset_seed"])
    te = subset_indices(10000, p["test"], p["subset_seed"] + 1)
    rows = []
    for name in names:
        t1 = time.perf_counter()
        if name == "raw_pixels":
            row = _raw_row(tr, te, p)
        elif name == "efficientnet_lite0":
            e = p["efficientnet"]
            row = _encoder_row(
                name,
                subset_indices(60000, e["train"], p["subset_seed"]),
                subset_indices(10000, e["test"], p["subset_seed"] + 1),
                p,
                finetune=False,
                log=log,
            )
        else:
            row = _encoder_row(name, tr, te, p, log=log)
        row["seconds"] = round(time.perf_counter() - t1, 1)
        rows.append(row)
        log(f"{name} done ({time.perf_counter() - t0:.0f} s)")
    table = {
        "rows": rows,
        "protocol": p,
        "seconds": round(time.perf_counter() - t0, 1),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    table["floors"] = floors(table)
    return table


# ----------------------------------------------------------------------------- floors


def _cell_acc(row, column):
    cell = row.get(column)
    if (
        not isinstance(cell, dict)
        or isinstance(cell.get("acc"), bool)
        or not isinstance(cell.get("acc"), numbers.Real)
    ):
        raise ValueError(f"table: row {row['name']!r} has no accuracy in {column!r} (got {cell!r})")
    return float(cell["acc"])


def _floor_check(trained, random, column, margin):
    a, b = _cell_acc(trained, column), _cell_acc(random, column)
    # 1e-9: accuracies are counts over n images, so a difference of exactly the margin
    # must not fail on the last bit of its floating-point subtraction
    return {"trained": a, "random": b, "difference": a - b, "clears": bool(a - b >= margin - 1e-9)}


def floors(table, margin=0.10):
    """The training floor: each trained encoder against the random initialisation of its
    architecture.

    A trained zoo row is every row but raw pixels, EfficientNet-Lite0, the random
    initialisations (``random_*``) and ``collapsed_vit``, the deliberately collapsed
    Siamese control (its point is to fail, so holding it to a floor says nothing). Its
    counterpart is the row ``random_<arch>`` (``arch`` as the row records it). The
    floor: the trained row's ``probe_cls`` (the linear probe on the class token) and its
    ``fewshot10`` each at least ``margin`` above the counterpart's.

    Parameters
    ----------
    table : dict
        A table of :func:`zoo_table` (or of the same shape): ``rows``, each with ``name``;
        trained rows with ``arch``, and they and their counterparts with ``probe_cls`` and
        ``fewshot10`` cells holding ``acc``.
    margin : float
        The required difference of accuracy, in ``[0, 1)`` (0.10: ten points).

    Returns
    -------
    list of dict
        One per trained row, in table order: ``name``, ``arch``, ``random`` (the
        counterpart's name), ``probe`` and ``fewshot10`` (``trained``, ``random``,
        ``difference``, ``clears``; ``None`` without a counterpart), ``margin`` and
        ``verdict``: ``"pass"`` (both clear), ``"fail"`` (either does not) or
        ``"no random row"`` (``random_<arch>`` is not in the table: not checked, not passed).

    Raises
    ------
    ValueError
        ``table`` without a list of named rows, a repeated name, a trained row without
        ``arch`` or a row without the cells the check reads; ``margin`` not a number in
        ``[0, 1)``.
    """
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 <= margin < 1:
        raise ValueError(f"margin must be an accuracy difference in [0, 1), got {margin!r}")
    if not isinstance(table, dict) or not isinstance(table.get("rows"), list):
        raise ValueError(f"table must be a dict with a list of rows, got {type(table).__name__}")
    rows = table["rows"]
    if any(not isinstance(r, dict) or not isinstance(r.get("name"), str) for r in rows):
        raise ValueError("table: every row must be a dict with a 'name'")
    by_name = {r["name"]: r for r in rows}
    if len(by_name) != len(rows):
        raise ValueError("table: a row name appears twice")
    out = []
    for row in rows:
        name = row["name"]
        if name in FLOOR_EXEMPT or name.startswith("random_"):
            continue
        if not isinstance(row.get("arch"), str) or not row["arch"]:
            raise ValueError(
                f"table: trained row {name!r} has no 'arch' to find its random counterpart by"
            )
        random_name = f"random_{row['arch']}"
        entry = {"name": name, "arch": row["arch"], "random": random_name, "margin": float(margin)}
        if random_name not in by_name:
            for column in ("probe_cls", "fewshot10"):  # the row itself must still be well formed
                _cell_acc(row, column)
            out.append({**entry, "probe": None, "fewshot10": None, "verdict": "no random row"})
            continue
        random = by_name[random_name]
        checks = {c: _floor_check(row, random, c, margin) for c in ("probe_cls", "fewshot10")}
        verdict = "pass" if all(c["clears"] for c in checks.values()) else "fail"
        out.append(
            {
                **entry,
                "probe": checks["probe_cls"],
                "fewshot10": checks["fewshot10"],
                "verdict": verdict,
            }
        )
    return out


# ----------------------------------------------------------------------------- Markdown


def _fmt(v):
    if isinstance(v, dict):
        return f"{100 * v['acc']:.1f} [{100 * v['lo']:.1f}, {100 * v['hi']:.1f}]"
    if v is None:
        return "-"
    return str(v)


def _recipe(r):
    if not isinstance(r, dict):
        return "-"
    return f"lr {r['lr']:.0e}, {r['steps']} steps"


def _line(cells):
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def _floor_lines(table):
    checks = floors(table)
    if not checks:
        return ["Floors: no trained zoo row in this table."]
    lines = [
        "Floors: each trained encoder against the random initialisation of its architecture; "
        f"both differences must be at least {100 * checks[0]['margin']:.0f} points (raw pixels, "
        "EfficientNet-Lite0 and collapsed_vit, a deliberately collapsed control, are not held "
        "to it).",
        "",
        _line(
            [
                "encoder",
                "random counterpart",
                "probe (cls) difference",
                "10-shot logistic-probe difference",
                "verdict",
            ]
        ),
        "|" + "---|" * 5,
    ]
    for c in checks:
        cells = [c["name"], c["random"]]
        for key in ("probe", "fewshot10"):
            d = c[key]
            cells.append(
                "-"
                if d is None
                else (
                    f"{100 * d['difference']:+.1f} ({100 * d['trained']:.1f} vs "
                    f"{100 * d['random']:.1f})"
                )
            )
        cells.append(
            c["verdict"]
            + (f": {c['random']} is not in the table" if c["verdict"] == "no random row" else "")
        )
        lines.append(_line(cells))
    return lines


def render_markdown(table):
    """The table as Markdown text: the accuracies in percent, what each interval is, the floors."""
    p = table["protocol"]
    shots = p.get("fewshot", {}).get("shots", 10)
    head = [
        "encoder",
        "arch",
        "objective",
        "params",
        "pre-training s",
        "20-NN",
        "probe (cls)",
        "probe (mean)",
        f"{shots}-shot logistic probe",
        "attentive",
        "FT in-dist.",
        "FT OOD",
        "LP-FT in-dist.",
        "LP-FT OOD",
        "FT recipe",
        "LP-FT recipe",
        "RankMe (uncentred)",
    ]
    lines = [_line(head), "|" + "---|" * len(head)]
    for r in table["rows"]:
        cells = [
            r["name"],
            r.get("arch") or "-",
            r["objective"],
            str(r["params"]),
            "-" if r.get("train_seconds") is None else f"{r['train_seconds']:.0f}",
        ]
        cells += [_fmt(r.get(c)) for c in COLUMNS]
        cells += [_recipe(r.get("ft_recipe")), _recipe(r.get("lpft_recipe")), f"{r['rankme']:.1f}"]
        lines.append(_line(cells))
    e, f = p["efficientnet"], p.get("finetune", {})
    notes = [
        "Accuracies in percent. 20-NN, probes, attentive probe, FT and LP-FT: accuracy on the "
        "test images [95 % Wilson interval over those images]. Zoo rows and raw pixels: "
        f"{p['train']} seeded training images (20-NN bank, probes, support pool), {p['test']} "
        f"test images; EfficientNet-Lite0: {e['train']} / {e['test']} at {e['size']} px, not "
        "fine-tuned."
    ]
    if "fewshot" in p:
        fs = p["fewshot"]
        notes.append(
            f"{shots}-shot: logistic-regression probe on {shots} labelled training images per "
            f"class (C by {fs['folds']}-fold cross-validation on them), mean over {fs['draws']} "
            "support draws [lowest, highest draw]: the spread over draws of the support, not a "
            "Wilson interval."
        )
    if "lrs" in f:
        notes.append(
            f"FT and LP-FT: rate from {', '.join(f'{lr:g}' for lr in f['lrs'])} and steps (best "
            f"of a check every {f['eval_every']} up to {f['steps']}, batch {f['batch_size']}, "
            f"AdamW) chosen on {f['val']} validation images carved from the training rows "
            f"({f['fit']} fitted on); LP-FT's head from rates "
            f"{', '.join(f'{lr:g}' for lr in p['lp_head']['lrs'])} the same way; the recipe "
            "columns give the choice."
        )
    notes.append(f"OOD: {p['ood']}. Computed in {table['seconds']:.0f} s.")
    lines += ["", " ".join(notes), ""] + _floor_lines(table)
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- file


def write_table(path, names=None, *, merge=False, protocol=None):
    """Compute :func:`zoo_table`, write it as JSON at ``path`` and as Markdown beside it (``.md``).

    With ``merge=True`` the rows computed now replace those of the same name in the
    existing file and the others are kept (so rows can be computed in several runs);
    ``seconds`` is then the sum of the rows' own times and the floors are recomputed.

    Parameters
    ----------
    path : str or os.PathLike
        The JSON file to write; the caller chooses it (``make zoo-table`` writes
        ``benchmarks/results/zoo_table.json``). Its folder is created if needed.
    names : list of str, optional
        Rows to compute (see :func:`row_names`); default all.
    merge : bool
        Keep the rows of an existing ``path`` that are not computed now; its rows must
        have been computed under the same protocol.
    protocol : dict, optional
        Overrides of :data:`TABLE_PROTOCOL` (:func:`resolve_protocol`); the JSON records
        the protocol used.

    Returns
    -------
    dict
        The table written.

    Raises
    ------
    ValueError
        A ``path`` that is not a non-empty path, bad ``names`` or ``protocol``, or (with
        ``merge``) an existing file computed under another protocol; all before any
        computation.
    """
    import fcntl

    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ValueError(f"path must be the JSON file to write (a non-empty path), got {path!r}")
    path = os.fspath(path)
    p = resolve_protocol(protocol)
    _check_names(names)
    if merge and os.path.isfile(path):
        with open(path) as fh:
            old = json.load(fh)
        if old.get("protocol") != p:
            raise ValueError(
                f"merge: the rows of {path} were computed under another protocol; "
                "recompute every row (merge=False) or use the same protocol"
            )
    table = zoo_table(names, protocol=p)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if merge and os.path.isfile(path):
            with open(path) as fh:
                old = json.load(fh)
            by_name = {r["name"]: r for r in old["rows"]}
            by_name.update({r["name"]: r for r in table["rows"]})
            table["rows"] = [by_name[n] for n in row_names() if n in by_name]
            table["seconds"] = round(sum(r.get("seconds", 0.0) for r in table["rows"]), 1)
            table["floors"] = floors(table)
        with open(path, "w") as fh:
            json.dump(table, fh, indent=1)
            fh.write("\n")
        with open(os.path.splitext(path)[0] + ".md", "w") as fh:
            fh.write(render_markdown(table))
    os.remove(path + ".lock")
    return table
