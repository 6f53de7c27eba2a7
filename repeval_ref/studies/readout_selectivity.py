"""Selectivity of a read-out: its gain on a trained encoder beyond its gain on a random one.

Book: chapter ``book/attentive.md`` ("Gains over the random initialisation"). A read-out with
more capacity than a linear probe can score higher on any network, trained or not. Here each
read-out is run on every trained ViT of the zoo and on ``random_vit``, the same architecture at
the initialisation every ViT objective starts from, on the same training rows and scored on the
same test images:

* ``linear``: logistic regression on the class token (``C`` chosen on a validation fifth,
  :func:`repeval_ref.linear_probe.linear_probe_warm_path`);
* ``attentive``: the attentive probe of the zoo table on the frozen tokens
  (:func:`repeval_ref.torch.attentive.train_attentive_probe`, the table's settings);
* ``last_block``: the encoder's last Transformer block, its final LayerNorm and a random linear
  head trained together on the frozen output of the blocks below, the rate and the number of
  steps chosen on a validation split (:func:`repeval_ref.train_with_validation`,
  :func:`repeval_ref.select_on_validation`) with seed 0 and reused for every seed.

The attentive probe and the last block train once per seed (its initialisation and batch
order); the linear probe has no seed. :func:`contrast_interval` gives a per-image contrast of
read-outs (for example ``(R_E - L_E) - (R_random - L_random)``) averaged over seeds, with
bootstrap intervals over test images and over test images and seeds together.
"""

from __future__ import annotations

import copy
import time

import numpy as np

from . import array_to_flags
from ._common import check_settings_keys, evaluation_split

__all__ = ["SETTINGS", "READOUTS", "run", "contrast_interval", "summarise"]

READOUTS = ("linear", "attentive", "last_block")

SETTINGS = {
    "full": {
        "encoders": ["mae_vit", "simclr_vit", "dino_vit"],
        "random": "random_vit",
        "train": 10000,
        "test": 10000,
        "subset_seed": 0,
        "seeds": [0, 1, 2],
        "Cs": [0.01, 0.1, 1.0],
        "attentive": {
            "epochs": 15,
            "lr": 3e-3,
            "weight_decay": 1e-4,
            "heads": 4,
            "batch_size": 256,
        },
        "last_block": {
            "fit": 9000,
            "val": 1000,
            "split_seed": 0,
            "lrs": [3e-4, 1e-3, 3e-3],
            "steps": 1000,
            "eval_every": 100,
            "batch_size": 64,
            "weight_decay": 0.05,
        },
    },
    "small": {
        "encoders": ["mae_vit"],
        "random": "random_vit",
        "train": 1000,
        "test": 500,
        "subset_seed": 0,
        "seeds": [0, 1],
        "Cs": [0.1, 1.0],
        "attentive": {"epochs": 2, "lr": 3e-3, "weight_decay": 1e-4, "heads": 4, "batch_size": 128},
        "last_block": {
            "fit": 800,
            "val": 200,
            "split_seed": 0,
            "lrs": [1e-3, 3e-3],
            "steps": 40,
            "eval_every": 20,
            "batch_size": 64,
            "weight_decay": 0.05,
        },
    },
}


# ----------------------------------------------------------------------------- statistics


def contrast_interval(flags, weights, n_boot, rng, level=0.95):
    """A signed sum of read-outs' per-image correctness, averaged over seeds, with intervals.

    For read-outs ``k`` with 0/1 arrays ``flags[k]`` of shape (m, n) (seed ``s``, test image
    ``i``) and weights ``w_k``, the contrast of seed ``s`` is
    ``c_s = mean_i sum_k w_k flags[k][s, i]`` and the estimate is ``mean_s c_s``. Intervals
    (percentile, ``level``):

    * ``images``: the test images resampled, the same draw for every read-out and seed;
    * ``images_and_seeds``: the images resampled and, in the same replicate, the ``m`` seeds
      drawn with replacement.

    The replicates come from two calls, in this order:
    ``rng.multinomial(n, [1/n] * n, size=n_boot)`` and ``rng.integers(0, m, size=(n_boot, m))``.

    Parameters
    ----------
    flags : sequence of array_like, each of shape (m, n), 0/1 or bool
    weights : sequence of float, one per array of ``flags``
    n_boot, rng, level
        The replicates, their generator (or its seed) and the interval's level, as for
        :func:`repeval_ref.studies.rankme_family.spearman_interval`.

    Returns
    -------
    dict
        ``estimate``, ``per_seed`` (list of ``m``), ``seed_sd`` (0 for one seed), ``images``
        and ``images_and_seeds`` (``[lo, hi]``), ``m``, ``n``.

    Raises
    ------
    ValueError
        ``flags`` empty, of unequal shapes or not 0/1; ``weights`` of another length or not
        finite; ``n_boot`` < 1; ``level`` outside (0, 1).
    """
    if not isinstance(flags, (list, tuple)) or not flags:
        raise ValueError("flags must be a non-empty list of (m, n) arrays")
    arrays = [np.asarray(f) for f in flags]
    shape = arrays[0].shape
    if len(shape) != 2 or 0 in shape or any(a.shape != shape for a in arrays):
        raise ValueError(
            f"flags must all have one 2-D shape (m, n), got {[a.shape for a in arrays]}"
        )
    if any(not np.all((a == 0) | (a == 1)) for a in arrays):
        raise ValueError("flags must hold only 0/1 or booleans")
    w = np.asarray(weights, dtype=float)
    if w.shape != (len(arrays),) or not np.all(np.isfinite(w)):
        raise ValueError(f"weights must be {len(arrays)} finite numbers, got {weights!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")
    if not (isinstance(level, float) and 0 < level < 1):
        raise ValueError(f"level must be a float in (0, 1), got {level!r}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    m, n = shape
    c = sum(wk * a.astype(np.float64) for wk, a in zip(w, arrays))  # (m, n)
    per_seed = c.mean(axis=1)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)
    g = counts @ c.T / n  # (n_boot, m)
    pick = rng.integers(0, m, size=(n_boot, m))
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    return {
        "estimate": float(per_seed.mean()),
        "per_seed": per_seed.tolist(),
        "seed_sd": float(per_seed.std(ddof=1)) if m > 1 else 0.0,
        "images": [float(v) for v in np.percentile(g.mean(axis=1), q)],
        "images_and_seeds": [
            float(v) for v in np.percentile(np.take_along_axis(g, pick, axis=1).mean(axis=1), q)
        ],
        "m": int(m),
        "n": int(n),
    }


# ----------------------------------------------------------------------------- read-outs


def _check_settings(settings):
    check_settings_keys(settings, SETTINGS["full"])
    seeds = settings["seeds"]
    if not isinstance(seeds, list) or not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(
            f"settings['seeds'] must be a non-empty list of distinct seeds, got {seeds!r}"
        )
    lb = settings["last_block"]
    if lb["fit"] + lb["val"] > settings["train"]:
        raise ValueError(
            "settings['last_block']: fit + val exceeds the training rows they are carved from"
        )


class _LastBlock:
    """The trainable top of a TinyViT: its last block, its final norm and a linear head."""

    @staticmethod
    def build(encoder, seed, n_classes=10):
        import torch
        from torch import nn

        class Top(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = copy.deepcopy(encoder.blocks[-1])
                self.norm = copy.deepcopy(encoder.norm)
                torch.manual_seed(seed)
                self.head = nn.Linear(encoder.out_dim, n_classes)

            def forward(self, t):
                return self.head(self.norm(self.block(t))[:, 0])

        top = Top()
        for q in top.parameters():
            q.requires_grad_(True)
        return top.train()


def _below_last(encoder, x, batch=1000):
    """Tokens entering the last block (the residual stream after all blocks but the last)."""
    import torch

    out = []
    with torch.no_grad():
        for i in range(0, len(x), batch):
            t = encoder.tokens(x[i : i + batch])
            for block in encoder.blocks[:-1]:
                t = block(t)
            out.append(t)
    return torch.cat(out)


def _predict(forward, x, batch=1000):
    import torch

    with torch.no_grad():
        return torch.cat([forward(x[i : i + batch]).argmax(1) for i in range(0, len(x), batch)])


def _encoder_readouts(name, data, settings, log):
    """Every read-out of one encoder, the last block's search included."""
    import torch

    from ..linear_probe import linear_probe_warm_path
    from ..torch.attentive import train_attentive_probe
    from ..torch.tuning import select_on_validation, train_with_validation
    from ..zoo import load
    from ..zoo.extraction import extract
    from ..zoo.table import attentive_heads

    c0 = time.process_time()
    encoder = load(name).eval()
    xtr, ytr, xte, yte, FIT, VAL = data
    with torch.no_grad():
        ttr, tte = extract(encoder, xtr, "tokens"), extract(encoder, xte, "tokens")
    htr, hte = ttr[:, 0], tte[:, 0]
    n = htr.shape[0]
    keep = htr[np.random.default_rng(0).permutation(n)[n // 5 :]].std(axis=0) > 0
    best_c, _, pred = linear_probe_warm_path(
        htr[:, keep], ytr, hte[:, keep], yte, settings["Cs"], seed=0
    )
    out = {"encoder": name, "linear": {"C": float(best_c), "correct": array_to_flags(pred == yte)}}
    a = settings["attentive"]
    heads = attentive_heads(ttr.shape[2], a["heads"])
    out["attentive"] = {"heads": heads, "runs": []}
    for seed in settings["seeds"]:
        probe, transform = train_attentive_probe(
            ttr, ytr, n_heads=heads, epochs=a["epochs"], lr=a["lr"],
            weight_decay=a["weight_decay"], batch_size=a["batch_size"], seed=int(seed),
        )  # fmt: skip
        ok = _predict(lambda t, p=probe: p(t)[0], transform(tte)).numpy() == yte
        out["attentive"]["runs"].append({"seed": int(seed), "correct": array_to_flags(ok)})
    lb = settings["last_block"]
    below_tr, below_te = _below_last(encoder, xtr), _below_last(encoder, xte)
    y_t = torch.as_tensor(ytr)

    def fit_top(lr, seed, steps, eval_every):
        top = _LastBlock.build(encoder, seed)
        opt = torch.optim.AdamW(top.parameters(), lr=lr, weight_decay=lb["weight_decay"])
        curve = train_with_validation(
            top, opt, below_tr, y_t, FIT, VAL, steps=steps, eval_every=eval_every,
            batch_size=lb["batch_size"], seed=int(seed),
        )  # fmt: skip
        return top.eval(), curve

    seeds = settings["seeds"]
    # the search, with the first seed (its chosen run is that seed's run); the other seeds
    # train at the chosen rate for exactly the chosen number of steps
    tried = [fit_top(lr, seeds[0], lb["steps"], lb["eval_every"]) for lr in lb["lrs"]]
    i, j = select_on_validation(np.array([c.accuracy for _, c in tried]))
    lr, steps = float(lb["lrs"][i]), int(tried[i][1].steps[j])
    search = {
        "lrs": lb["lrs"],
        "curve_steps": [int(s) for s in tried[i][1].steps],
        "curves": [[float(v) for v in c.accuracy] for _, c in tried],
        "lr": lr,
        "steps": steps,
    }
    out["last_block"] = {"runs": [], "search": search}
    for k, seed in enumerate(seeds):
        top = tried[i][0] if k == 0 else fit_top(lr, seed, steps, max(steps, 1))[0]
        ok = _predict(top, below_te).numpy() == yte
        out["last_block"]["runs"].append(
            {"seed": int(seed), "lr": lr, "steps": steps, "correct": array_to_flags(ok)}
        )
    out["cpu_seconds"] = round(time.process_time() - c0, 1)
    if log is not None:
        accs = {
            "linear": np.mean(pred == yte),
            "attentive": np.mean(
                [r["correct"].count("1") / len(yte) for r in out["attentive"]["runs"]]
            ),
            "last_block": np.mean(
                [r["correct"].count("1") / len(yte) for r in out["last_block"]["runs"]]
            ),
        }
        log(f"{name}: " + " ".join(f"{k} {v:.3f}" for k, v in accs.items()))
    return out


def run(settings, log=None):
    """Every read-out of every encoder of ``settings["encoders"]`` and of ``settings["random"]``.

    The last block's rate and number of steps are chosen separately for each encoder, on its
    own validation curves (seed 0), and then reused for its other seeds.

    Returns
    -------
    dict
        ``encoders``: per network (the random one included) its ``linear`` flags and ``C``,
        ``attentive`` and ``last_block`` runs per seed (correct flags), the last block's search
        and ``cpu_seconds``; ``n_train``, ``n_test``, ``n_fit``, ``n_val``.
    """

    from ..torch.tuning import carve_validation
    from ..zoo.inputs import to_tensor
    from ..zoo.train import deterministic_torch

    _check_settings(settings)
    deterministic_torch()
    px_tr, y_tr, px_te, y_te, tr, te = evaluation_split(
        settings["train"], settings["test"], settings["subset_seed"]
    )
    lb = settings["last_block"]
    FIT, VAL = carve_validation(len(tr), lb["fit"], lb["val"], seed=lb["split_seed"])
    ytr = np.asarray(y_tr[tr], dtype=np.int64)
    yte = np.asarray(y_te[te], dtype=np.int64)
    data = (to_tensor(px_tr[tr]), ytr, to_tensor(px_te[te]), yte, FIT, VAL)
    names = [settings["random"], *settings["encoders"]]
    return {
        "encoders": {name: _encoder_readouts(name, data, settings, log) for name in names},
        "n_train": int(tr.size),
        "n_test": int(te.size),
        "n_fit": int(FIT.size),
        "n_val": int(VAL.size),
    }


def _flags(entry, readout):
    from . import flags_to_array

    if readout == "linear":
        return flags_to_array(entry["linear"]["correct"])
    return np.stack([flags_to_array(r["correct"]) for r in entry[readout]["runs"]])


def summarise(record, n_boot=2000, seed=0, level=0.95):
    """Per trained encoder and read-out (``attentive``, ``last_block``), the page's contrasts.

    * ``gain``: ``R_E - L_E``, the read-out over the linear probe on the encoder;
    * ``random_gain``: ``R_rand - L_rand``, the same on the random network;
    * ``selectivity``: ``gain - random_gain``, paired on the same images;
    * ``over_random``: ``R_E - R_rand``, the read-out on the encoder over the same read-out on
      the random network.

    Each is :func:`contrast_interval` (images; images and seeds); also ``acc`` per network and
    read-out (mean over seeds).
    """
    if not isinstance(record, dict) or "encoders" not in record:
        raise ValueError("record must be a record of run() with its 'encoders'")
    nets = record["encoders"]
    rand = next(iter(nets))
    out = {"acc": {}, "random": rand}
    for name, entry in nets.items():
        out["acc"][name] = {r: float(np.mean(_flags(entry, r))) for r in READOUTS}
    k = 0
    for name in list(nets)[1:]:
        out[name] = {}
        for r in ("attentive", "last_block"):
            re_, rr_ = _flags(nets[name], r), _flags(nets[rand], r)
            m = re_.shape[0]
            le = np.broadcast_to(_flags(nets[name], "linear"), re_.shape)
            lr_ = np.broadcast_to(_flags(nets[rand], "linear"), re_.shape)
            parts = {
                "gain": ([re_, le], [1, -1]),
                "random_gain": ([rr_, lr_], [1, -1]),
                "selectivity": ([re_, le, rr_, lr_], [1, -1, -1, 1]),
                "over_random": ([re_, rr_], [1, -1]),
            }
            out[name][r] = {}
            for what, (fl, w) in parts.items():
                out[name][r][what] = contrast_interval(
                    fl, w, n_boot, np.random.default_rng([seed, k]), level
                )
                k += 1
            out[name][r]["seeds"] = int(m)
    return out
