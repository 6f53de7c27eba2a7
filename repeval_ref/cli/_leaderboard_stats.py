"""The statistics of ``repeval leaderboard`` across encoders evaluated on the same images.

Every pair compared by a paired bootstrap interval and McNemar's exact test, corrected
across pairs; the ranking by accuracy with, for each encoder, whether it is separated
from the next; and each label-free metric's ranking beside the accuracy ranking.
``repeval suite`` compares the encoders of each task with :func:`pairwise`.
"""

from __future__ import annotations

import itertools

import numpy as np

from ._label_free_section import LABEL_FREE_RANKINGS

__all__ = ["pairwise", "ranking", "label_free_rankings"]


def pairwise(names, correct, n_boot, seed, correction):
    """Every pair's paired bootstrap interval and McNemar p, corrected across pairs."""
    from ..multiple_testing import adjust_pvalues
    from ..uncertainty import mcnemar_exact, paired_bootstrap_ci

    pairs = []
    for i, j in itertools.combinations(range(len(names)), 2):
        gain, lo, hi = paired_bootstrap_ci(correct[i], correct[j], n_boot, seed)
        pairs.append(
            {
                "a": names[i],
                "b": names[j],
                "gain_b_minus_a": gain,
                "bootstrap95": [lo, hi],
                "mcnemar_p": mcnemar_exact(correct[i], correct[j]),
                "discordant": int(np.sum(correct[i] != correct[j])),
            }
        )
    adjusted = adjust_pvalues([p["mcnemar_p"] for p in pairs], correction)
    for p, q in zip(pairs, adjusted):
        p["mcnemar_p_adjusted"] = float(q)
    return pairs


def ranking(results, protocol, pairs, alpha):
    """Encoders by accuracy (best first); each marked when not separated from the next one."""
    order = sorted(range(len(results)), key=lambda i: (-results[i][protocol]["accuracy"], i))
    by_pair = {}
    for p in pairs:
        by_pair[(p["a"], p["b"])] = by_pair[(p["b"], p["a"])] = p
    out = []
    for pos, i in enumerate(order):
        row = {
            "rank": pos + 1,
            "name": results[i]["name"],
            "accuracy": results[i][protocol]["accuracy"],
        }
        if pos + 1 < len(order):
            nxt = results[order[pos + 1]]["name"]
            p = by_pair[(row["name"], nxt)]
            lo, hi = p["bootstrap95"]
            row["separated_from_next"] = bool(
                p["mcnemar_p_adjusted"] < alpha and (lo > 0 or hi < 0)
            )
            row["next"] = nxt
            row["p_adjusted_vs_next"] = p["mcnemar_p_adjusted"]
        out.append(row)
    return out


def label_free_rankings(results, protocol):
    """Each label-free metric's ranking beside the accuracy ranking, with Spearman's rho."""
    from scipy.stats import spearmanr

    acc = np.array([r[protocol]["accuracy"] for r in results])
    out = {}
    for key, (name, sign, why) in LABEL_FREE_RANKINGS.items():
        vals = [r["label_free"].get(key) for r in results]
        entry = {
            "metric": name,
            "better": why,
            "order": None,
            "spearman_rho": None,
            "spearman_p": None,
        }
        if all(v is not None for v in vals):
            score = sign * np.array(vals, dtype=float)
            entry["order"] = [results[i]["name"] for i in np.argsort(-score, kind="stable")]
            if len(results) >= 3 and np.ptp(score) > 0 and np.ptp(acc) > 0:
                rho, p = spearmanr(score, acc)
                entry["spearman_rho"], entry["spearman_p"] = float(rho), float(p)
        out[key] = entry
    return out
