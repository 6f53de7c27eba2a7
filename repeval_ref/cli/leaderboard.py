"""``repeval leaderboard``: many encoders on the same split, one ranked table with error bars.

Inputs name one encoder each (a features file, or a folder the loop wrote), a folder of
such inputs, or a TOML list::

    [[encoder]]
    name = "supervised"          # optional; default: the file name
    path = "feats/sup.npz"       # relative to the TOML file
    method = "supervised"        # optional; the training method

Every encoder must hold the same images in the same order (same labels). The rows are
split by the rule of every ``repeval`` command: the loop's own train/test parts are the
split and are never re-split; single files are split once (stratified, seeded). Every
encoder is evaluated on that split: weighted k-NN, the linear probe with C chosen on a
split of TRAIN, low-shot nearest class mean (mean and std over the shared default number
of draws), label-free metrics and verdicts. An all-zero feature row is refused with one
line naming the file and the row, as in ``repeval report``. Every pair of encoders gets a
paired bootstrap interval and an exact McNemar p-value per protocol, corrected across
pairs (Holm or Benjamini-Hochberg).

Outputs (``--out``): ``leaderboard.csv``, ``leaderboard.md``, ``leaderboard.json`` and
``leaderboard.html`` (self-contained: plots inline as base64 PNG, no external files).
All inputs are read and checked before anything is written; the files are written to
temporary names and renamed, so bad input leaves nothing behind.
"""
from __future__ import annotations

import argparse
import base64
import csv
import html
import io
import itertools
import json
from pathlib import Path

import numpy as np

from . import _render as R
from ._evaluate import (KNN_HEADLINE_KS, KNN_TAU, LOW_SHOT_DRAWS, PAIRED_BOOTSTRAP, PROBE_CS, SHOTS,
                        TEST_FRACTION, acc_entry, blas_threads, knn_curve_predictions, label_free_section,
                        low_shot_section, probe_section)
from ._inputs import (InputError, _short, prepare_split, read_input, refuse_zero_rows, split_folder,
                      split_text)
from ._progress import Progress

FEATURE_SUFFIXES = (".npz", ".npy", ".pt", ".pth")

#: label-free metrics ranked beside accuracy: key -> (name, sign that makes "better" larger, why)
LABEL_FREE_RANKINGS = {
    "rankme": ("RankMe (effective rank)", +1, "higher: more directions used (Garrido et al.)"),
    "ne_sum": ("NE-sum", +1, "higher: variance spread over more directions"),
    "alpha_req_gap": ("|alpha-ReQ - 1|", -1, "lower: spectrum decay close to 1/i (Agrawal et al.)"),
    "self_cluster": ("Self-Cluster", -1, "lower: closer to uniform on the sphere (Tsitsulin et al.)"),
    "two_nn_id_batched": ("TwoNN intrinsic dimension, batched", -1,
                          "lower: the comparative study of label-free metrics found low intrinsic "
                          "dimension the most consistent sign of quality"),
}
METHOD_WARNING = ("label-free scores compare encoders only within one training method: the "
                  "comparative study of label-free metrics found their correlation with accuracy "
                  "changes strength and even sign between supervised and self-supervised models "
                  "and between architectures")


# ----------------------------------------------------------------------------- inputs


def _is_encoder_path(path):
    path = Path(path)
    if path.is_file():
        return path.suffix.lower() in FEATURE_SUFFIXES and not path.name.endswith("labels.npy")
    if path.is_dir():
        try:
            if split_folder(path) is not None:
                return True
        except InputError:
            return True  # an encoder folder with a problem: reported when read
        # one folder of the loop's cache: labels.npy beside the feature arrays
        return (path / "labels.npy").is_file() and any(
            p.suffix == ".npy" and p.name != "labels.npy" for p in path.iterdir())
    return False


def _toml_entries(path):
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the list {path}: {_short(exc)}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"the list {path} is not valid TOML ({_short(exc)})") from None
    items = data.get("encoder", [])
    if not isinstance(items, list) or not all(isinstance(e, dict) for e in items):
        raise InputError(f"the list {path} must hold [[encoder]] tables with a 'path' each")
    out = []
    for i, e in enumerate(items):
        if "path" not in e or not isinstance(e["path"], str):
            raise InputError(f"the list {path}: encoder {i + 1} has no 'path'")
        extra = set(e) - {"path", "name", "method"}
        if extra:
            raise InputError(f"the list {path}: encoder {i + 1} has unknown keys {', '.join(sorted(extra))} "
                             "(allowed: path, name, method)")
        p = Path(e["path"])
        p = p if p.is_absolute() else Path(path).parent / p
        out.append({"path": p, "name": str(e.get("name", p.stem if p.is_file() else p.name)),
                    "method": e.get("method")})
    return out


def resolve_entries(inputs):
    """The encoders named by the command line: ``[{"path", "name", "method"}, ...]``."""
    entries = []
    for item in inputs:
        p = Path(item)
        if p.suffix.lower() == ".toml":
            if not p.is_file():
                raise InputError(f"list file not found: {p}")
            entries += _toml_entries(p)
        elif p.is_dir() and not _is_encoder_path(p):
            found = sorted(q for q in p.iterdir() if _is_encoder_path(q))
            if not found:
                raise InputError(f"folder {p} holds no feature files (.npz, .npy, .pt) or encoder folders")
            entries += [{"path": q, "name": q.stem if q.is_file() else q.name, "method": None} for q in found]
        elif not p.exists():
            raise InputError(f"file not found: {p}")
        else:
            entries.append({"path": p, "name": p.stem if p.is_file() else p.name, "method": None})
    if not entries:
        raise InputError("no encoders given (an empty list)")
    seen = {}
    for e in entries:
        key = e["path"].resolve()
        if key in seen:
            raise InputError(f"encoder {e['path']} is given twice (as {seen[key]} and {e['name']}); "
                             "each encoder may appear once")
        seen[key] = e["name"]
    names = [e["name"] for e in entries]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InputError(f"two encoders are both named {dup!r}; give them distinct names (in a TOML list)")
    if len(entries) < 2:
        raise InputError(f"a leaderboard needs at least 2 encoders, got 1 ({entries[0]['path']})")
    return entries


def _load_entry(e, progress=None):
    """One encoder read and checked (all-zero rows refused); an :class:`~._inputs.Input`."""
    inp = read_input(e["path"], f"encoder {e['name']}", progress=progress)
    refuse_zero_rows(inp)
    return inp


def load_encoders(entries, progress=None):
    """Read every encoder and check that they describe the same images in the same order."""
    data = [_load_entry(e, progress) for e in entries]
    check_same_images(entries, data)
    return data


def check_same_images(entries, data):
    """Raise :class:`InputError` unless every input holds the first one's images in its order.

    ``entries`` name the inputs (``{"name", "path"}`` each), ``data`` are their
    :class:`~._inputs.Input`; the sizes of the parts and the labels must be equal.
    """
    ref, ref_e = data[0], entries[0]
    ref_name = ref_e["name"]
    for e, d in zip(entries[1:], data[1:]):
        paths = f"({e['path']} vs {ref_e['path']})"
        if d.x.shape[0] != ref.x.shape[0]:
            raise InputError(f"{e['name']} has {d.x.shape[0]} rows but {ref_name} has "
                             f"{ref.x.shape[0]} {paths}; every encoder needs the same images in the same order")
        if d.sizes != ref.sizes:
            raise InputError(f"{e['name']} and {ref_name} are split differently into train and test {paths} "
                             "(give every encoder as one file, or every one as a loop folder)")
        if not np.array_equal(d.y, ref.y):
            a, b = set(np.unique(ref.y).tolist()), set(np.unique(d.y).tolist())
            if a != b:
                extra = sorted(b - a)[:3] or sorted(a - b)[:3]
                raise InputError(f"{e['name']} and {ref_name} have mismatched classes (class "
                                 f"{extra[0]} occurs in only one of them) {paths}; every encoder needs the "
                                 "same labelled images")
            row = int(np.flatnonzero(d.y != ref.y)[0])
            raise InputError(f"{e['name']} and {ref_name} list their labels in a different order "
                             f"(first difference at row {row}) {paths}; every encoder needs the same images "
                             "in the same order")


# ------------------------------------------------------------------------ evaluation


def _evaluate_one(entry, d, tr, te, args, classes, counts, progress):
    X = d.x
    yi = np.searchsorted(classes, d.y)
    Xtr, Xte, ytr, yte = X[tr], X[te], yi[tr], yi[te]
    res = {"name": entry["name"], "path": str(entry["path"]), "method": entry["method"],
           "dim": int(X.shape[1])}
    pred_knn = knn_curve_predictions(Xtr, ytr, Xte, (args.k,), classes.size, progress,
                                     label=f"{entry['name']}: k-NN")[0]
    with blas_threads(args.blas_threads):
        return _evaluate_rest(entry, res, pred_knn, X, Xtr, Xte, ytr, yte, args, counts, progress)


def _evaluate_rest(entry, res, pred_knn, X, Xtr, Xte, ytr, yte, args, counts, progress):
    from ..labelfree.spectrum import gram_spectrum
    from ..verdicts import (chance_verdict, collapse_verdict, dropped_features_verdict,
                            spectrum_cliff_verdict)

    info, probe_acc, pred_probe = probe_section(Xtr, ytr, Xte, yte, args.seed, args.probe_c, progress,
                                                f"the training part of {entry['name']} ({entry['path']})")
    res["knn"] = acc_entry(pred_knn == yte)
    res["probe"] = {**probe_acc, "best_C": info["best_C"],
                    "dropped_constant_features": info["dropped_constant_features"]}
    res["low_shot"] = low_shot_section(Xtr, ytr, Xte, yte, counts, args.draws, args.seed,
                                       shots_list=SHOTS)
    lf = label_free_section(Xtr, seed=args.seed, id_batch=args.id_batch, full=False)
    res["label_free"] = {k: v["value"] for k, v in lf.items() if k != "alignment"}
    a = res["label_free"].get("alpha_req")
    res["label_free"]["alpha_req_gap"] = None if a is None else abs(a - 1.0)
    spectrum = gram_spectrum(Xtr, center=True)
    res["verdicts"] = [
        chance_verdict(res["knn"]["correct"], res["knn"]["n"], yte, f"weighted k-NN (k={args.k})"),
        chance_verdict(res["probe"]["correct"], res["probe"]["n"], yte, "the linear probe"),
        collapse_verdict(lf["rankme"]["value"], lf["mean_pairwise_cosine"]["value"], int(X.shape[1]),
                         lf["participation_ratio"]["value"]),
        spectrum_cliff_verdict(spectrum),
        dropped_features_verdict(info["dropped_constant_features"], 0, int(X.shape[1]), int(X.shape[0])),
    ]
    return res, {"knn": pred_knn == yte, "probe": pred_probe == yte}


def pairwise(names, correct, n_boot, seed, correction):
    """Every pair's paired bootstrap interval and McNemar p, corrected across pairs."""
    from ..multiple_testing import adjust_pvalues
    from ..uncertainty import mcnemar_exact, paired_bootstrap_ci

    pairs = []
    for i, j in itertools.combinations(range(len(names)), 2):
        gain, lo, hi = paired_bootstrap_ci(correct[i], correct[j], n_boot, seed)
        pairs.append({"a": names[i], "b": names[j], "gain_b_minus_a": gain, "bootstrap95": [lo, hi],
                      "mcnemar_p": mcnemar_exact(correct[i], correct[j]),
                      "discordant": int(np.sum(correct[i] != correct[j]))})
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
        row = {"rank": pos + 1, "name": results[i]["name"], "accuracy": results[i][protocol]["accuracy"]}
        if pos + 1 < len(order):
            nxt = results[order[pos + 1]]["name"]
            p = by_pair[(row["name"], nxt)]
            lo, hi = p["bootstrap95"]
            row["separated_from_next"] = bool(p["mcnemar_p_adjusted"] < alpha and (lo > 0 or hi < 0))
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
        entry = {"metric": name, "better": why, "order": None, "spearman_rho": None, "spearman_p": None}
        if all(v is not None for v in vals):
            score = sign * np.array(vals, dtype=float)
            entry["order"] = [results[i]["name"] for i in np.argsort(-score, kind="stable")]
            if len(results) >= 3 and np.ptp(score) > 0 and np.ptp(acc) > 0:
                rho, p = spearmanr(score, acc)
                entry["spearman_rho"], entry["spearman_p"] = float(rho), float(p)
        out[key] = entry
    return out


# ---------------------------------------------------------------------------- output


def _acc_cell(e):
    lo, hi = e["wilson95"]
    return f"{100 * e['accuracy']:.2f} [{100 * lo:.2f}, {100 * hi:.2f}]"


def _lowshot_cell(entries, shots, plus="±"):
    e = next((x for x in entries if x["shots"] == shots), None)
    return "skipped" if e is None or e["mean"] is None else f"{100 * e['mean']:.2f} {plus} {100 * e['std']:.2f}"


def _main_rows(board, plus="±"):
    results, rank = board["encoders"], board["ranking"]
    by_name = {r["name"]: r for r in results}
    rows = []
    for row in rank:
        r = by_name[row["name"]]
        mark = ""
        if "separated_from_next" in row:
            mark = "separated" if row["separated_from_next"] else f"NOT separated (p_adj {row['p_adjusted_vs_next']:.3g})"
        fired = [v["name"].replace("_", " ") for v in r["verdicts"] if v["fired"]]
        rows.append([str(row["rank"]), r["name"], r["method"] or "—", _acc_cell(r["knn"]), _acc_cell(r["probe"]),
                     *[_lowshot_cell(r["low_shot"], s, plus) for s in SHOTS], mark, ", ".join(fired) or "none"])
    return rows


def _headers(board, plus="±"):
    s = board["settings"]
    return ["rank", "encoder", "method", f"k-NN k={s['k']} % [95% Wilson]",
            "linear probe % [95% Wilson]",
            *[f"{k}-shot nearest class mean %, mean {plus} std over {s['draws']} draws" for k in SHOTS],
            f"vs next ({s['rank_by']})", "verdicts"]


#: columns of the main table printed on the terminal: rank, encoder, k-NN, probe, vs next
TERMINAL_COLUMNS = (0, 1, 3, 4, -2)


def _terminal_table(board):
    """``(rows, headers)`` of the main table's :data:`TERMINAL_COLUMNS` (the files hold them all)."""
    rows, headers = _main_rows(board, "+-"), _headers(board, "+-")
    return [[r[i] for i in TERMINAL_COLUMNS] for r in rows], [headers[i] for i in TERMINAL_COLUMNS]


def _settings_text(board):
    """Sizes, split rule, seed and low-shot draws in one sentence (Markdown, HTML and terminal)."""
    s = board["settings"]
    return (f"{len(board['encoders'])} encoders on the same {split_text(s['split'])}, "
            f"{s['n_classes']} classes, seed {s['seed']} (split, probe validation split, low-shot "
            f"draws, bootstrap); low-shot columns: mean and standard deviation over {s['draws']} "
            "draws of the support set, not an interval.")


def _lf_rows(board):
    rows = []
    for r in board["encoders"]:
        lf = r["label_free"]
        rows.append([r["name"]] + [R.fmt(lf.get(k)) for k in LABEL_FREE_RANKINGS])
    return rows


def _pair_rows(board, protocol):
    rows = []
    for p in board["pairs"][protocol]:
        lo, hi = p["bootstrap95"]
        rows.append([f"{p['b']} - {p['a']}", f"{100 * p['gain_b_minus_a']:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]",
                     str(p["discordant"]), R.fmt(p["mcnemar_p"]), R.fmt(p["mcnemar_p_adjusted"])])
    return rows


PAIR_HEADERS = ["pair", "difference, pts [95% paired bootstrap]", "images only one gets right",
                "McNemar p", "adjusted p"]


def render_markdown(board):
    s = board["settings"]
    md = ["# repeval leaderboard", "",
          f"{_settings_text(board)} Ranked by {s['rank_by']} accuracy; "
          f"neighbours in the ranking count as separated when the {s['correction_name']}-adjusted "
          f"McNemar p is below {s['alpha']} and the paired bootstrap interval excludes 0.", ""]
    md += [R.md_table(_main_rows(board), _headers(board)), ""]
    md += ["## Verdicts", ""]
    for r in board["encoders"]:
        for v in r["verdicts"]:
            if v["fired"]:
                md.append(f"- **{r['name']}**: {v['message']}. Rule: {v['rule']}.")
    if not any(v["fired"] for r in board["encoders"] for v in r["verdicts"]):
        md.append("No verdict fired for any encoder.")
    md += ["", "## Label-free metrics (TRAIN part)", ""]
    if board["method_warning"]:
        md += [f"**Warning:** {board['method_warning']}", ""]
    md += [R.md_table(_lf_rows(board), ["encoder"] + [v[0] for v in LABEL_FREE_RANKINGS.values()]), ""]
    lf_rank = [[e["metric"], e["better"], " > ".join(e["order"]) if e["order"] else "n/a",
                "n/a" if e["spearman_rho"] is None else f"{e['spearman_rho']:+.2f}"]
               for e in board["label_free_rankings"].values()]
    acc_order = " > ".join(r["name"] for r in board["ranking"])
    md += [f"Accuracy ranking ({s['rank_by']}): {acc_order}.", "",
           R.md_table(lf_rank, ["metric", "better is", "ranking", f"Spearman rho with {s['rank_by']} accuracy"]), ""]
    for proto in ("knn", "probe"):
        md += [f"## Pairs: {'weighted k-NN' if proto == 'knn' else 'linear probe'}", "",
               R.md_table(_pair_rows(board, proto), PAIR_HEADERS), ""]
    md += [f"p-values adjusted across the {len(board['pairs']['probe'])} pairs of each protocol by "
           f"{s['correction_name']}.", ""]
    return "\n".join(md) + "\n"


def render_csv(board):
    buf = io.StringIO()
    w = csv.writer(buf)
    lf_keys = list(LABEL_FREE_RANKINGS)
    w.writerow(["rank", "encoder", "method", "path", "knn_accuracy", "knn_wilson_low", "knn_wilson_high",
                "probe_accuracy", "probe_wilson_low", "probe_wilson_high", "probe_C",
                *[f"lowshot_{s}_mean" for s in SHOTS], *[f"lowshot_{s}_std_over_draws" for s in SHOTS],
                *lf_keys, "separated_from_next", "verdicts"])
    by_name = {r["name"]: r for r in board["encoders"]}
    for row in board["ranking"]:
        r = by_name[row["name"]]
        low = {e["shots"]: e["mean"] for e in r["low_shot"]}
        std = {e["shots"]: e["std"] for e in r["low_shot"]}
        w.writerow([row["rank"], r["name"], r["method"] or "", r["path"],
                    r["knn"]["accuracy"], *r["knn"]["wilson95"],
                    r["probe"]["accuracy"], *r["probe"]["wilson95"], r["probe"]["best_C"],
                    *["" if low.get(s) is None else low[s] for s in SHOTS],
                    *["" if std.get(s) is None else std[s] for s in SHOTS],
                    *["" if r["label_free"].get(k) is None else r["label_free"][k] for k in lf_keys],
                    row.get("separated_from_next", ""),
                    ";".join(v["name"] for v in r["verdicts"] if v["fired"])])
    return buf.getvalue()


def _plots(board):
    plt = R._pyplot()
    s = board["settings"]
    names = [r["name"] for r in board["ranking"]]
    by_name = {r["name"]: r for r in board["encoders"]}
    fig, ax = plt.subplots(figsize=(6.4, 0.5 * len(names) + 1.6))
    y = np.arange(len(names))
    for off, proto, label in ((-0.15, "knn", f"k-NN (k={s['k']})"), (0.15, "probe", "linear probe")):
        acc = np.array([by_name[n][proto]["accuracy"] for n in names])
        lo = np.array([by_name[n][proto]["wilson95"][0] for n in names])
        hi = np.array([by_name[n][proto]["wilson95"][1] for n in names])
        ax.errorbar(100 * acc, y + off, xerr=[100 * (acc - lo), 100 * (hi - acc)], fmt="o", capsize=3, label=label)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel("test accuracy, % (95% Wilson interval)")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Accuracy by encoder")
    fig.tight_layout()
    plots = {"accuracy": R.figure_bytes(fig)}
    fig = label_free_figure(board)
    if fig is not None:
        plots["label_free"] = R.figure_bytes(fig)
    return plots


def label_free_figure(board):
    """Scatter plots of each label-free score against accuracy, names kept inside the axes; or None."""
    plt = R._pyplot()
    s = board["settings"]
    names = [r["name"] for r in board["ranking"]]
    by_name = {r["name"]: r for r in board["encoders"]}
    keys = [k for k in LABEL_FREE_RANKINGS if all(by_name[n]["label_free"].get(k) is not None for n in names)]
    if not keys:
        return None
    fig, axes = plt.subplots(1, len(keys), figsize=(2.6 * len(keys), 2.8), squeeze=False)
    for ax, k in zip(axes[0], keys):
        xs = [by_name[n]["label_free"][k] for n in names]
        ys = [100 * by_name[n][s["rank_by"]]["accuracy"] for n in names]
        ax.scatter(xs, ys)
        for x_, y_, n in zip(xs, ys, names):
            ax.annotate(n, (x_, y_), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel(LABEL_FREE_RANKINGS[k][0], fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel(f"{s['rank_by']} accuracy, %", fontsize=8)
    fig.suptitle("Label-free metrics against accuracy", fontsize=9)
    fig.tight_layout()
    for ax in axes[0]:
        R.place_labels_inside(fig, ax)
    return fig


def render_html(board, plots):
    s = board["settings"]
    img = "".join(f'<figure><img alt="{k}" src="data:image/png;base64,{base64.b64encode(v).decode()}"></figure>'
                  for k, v in plots.items())
    verdicts = "".join(f"<li><b>{html.escape(r['name'])}</b>: {html.escape(v['message'])}. "
                       f"<i>Rule: {html.escape(v['rule'])}.</i></li>"
                       for r in board["encoders"] for v in r["verdicts"] if v["fired"])
    warn = (f'<p class="warn"><b>Warning:</b> {html.escape(board["method_warning"])}</p>'
            if board["method_warning"] else "")
    lf_rank = [[e["metric"], e["better"], " > ".join(e["order"]) if e["order"] else "n/a",
                "n/a" if e["spearman_rho"] is None else f"{e['spearman_rho']:+.2f}"]
               for e in board["label_free_rankings"].values()]
    pairs = "".join(f"<h3>{'weighted k-NN' if p == 'knn' else 'linear probe'}</h3>"
                    + R.html_table(_pair_rows(board, p), PAIR_HEADERS) for p in ("knn", "probe"))
    style = ("body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 7px;"
             "font-size:90%}th{background:#eee}.warn{background:#fff3cd;padding:.6em;border:1px solid #e0c36b}"
             "img{max-width:100%}")
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>repeval leaderboard</title>"
            f"<style>{style}</style></head><body><h1>repeval leaderboard</h1>"
            f"<p>{html.escape(_settings_text(board))} Ranked by {html.escape(s['rank_by'])} accuracy; "
            f"pairwise McNemar p-values adjusted by {html.escape(s['correction_name'])}.</p>"
            + R.html_table(_main_rows(board), _headers(board)) + img
            + "<h2>Verdicts</h2>" + (f"<ul>{verdicts}</ul>" if verdicts else "<p>No verdict fired.</p>")
            + "<h2>Label-free metrics</h2>" + warn
            + R.html_table(_lf_rows(board), ["encoder"] + [v[0] for v in LABEL_FREE_RANKINGS.values()])
            + R.html_table(lf_rank, ["metric", "better is", "ranking", "Spearman rho with accuracy"])
            + "<h2>Pairs</h2>" + pairs + "</body></html>\n")


# ---------------------------------------------------------------------------- command


def cmd_leaderboard(args):
    from ..multiple_testing import CORRECTIONS

    progress = Progress(enabled=not args.quiet)
    entries = resolve_entries(args.inputs)
    outdir = Path(args.out)
    if outdir.exists() and not outdir.is_dir():
        raise InputError(f"cannot create output directory {outdir}: a file of that name exists")
    data = load_encoders(entries, progress)
    ref = data[0]
    tr, te, split, classes, counts = prepare_split(ref, args.test_fraction, args.seed,
                                                   f"the labels of {ref.files[0]}")
    results, correct = [], {"knn": [], "probe": []}
    for e, d in zip(entries, data):
        res, corr = _evaluate_one(e, d, tr, te, args, classes, counts, progress)
        results.append(res)
        for k in correct:
            correct[k].append(corr[k])
    names = [r["name"] for r in results]
    pairs = {p: pairwise(names, correct[p], args.boot, args.seed, args.correction) for p in correct}
    methods = {e["method"] for e in entries}
    if None in methods and len(methods) > 1 or None not in methods and len(methods) > 1:
        given = sorted(m for m in methods if m)
        warning = (f"these encoders come from different training methods ({', '.join(given)}"
                   f"{', and some without a method' if None in methods else ''}); " + METHOD_WARNING)
    elif methods == {None}:
        warning = ("the training methods of these encoders are not given (add method = \"...\" to "
                   "each entry of a TOML list); " + METHOD_WARNING)
    else:
        warning = None
    board = {
        "settings": {"k": args.k, "tau": KNN_TAU, "rank_by": args.rank_by, "alpha": args.alpha,
                     "correction": args.correction, "correction_name": CORRECTIONS[args.correction],
                     "seed": args.seed, "test_fraction": split.get("test_fraction"), "split": split,
                     "n_train": int(tr.size), "n_test": int(te.size), "n_classes": int(classes.size),
                     "n_boot": args.boot, "draws": args.draws, "probe_C_grid": list(args.probe_c)},
        "encoders": results, "pairs": pairs,
        "ranking": ranking(results, args.rank_by, pairs[args.rank_by], args.alpha),
        "label_free_rankings": label_free_rankings(results, args.rank_by),
        "method_warning": warning,
    }
    plots = _plots(board)
    files = {"leaderboard.json": json.dumps(board, indent=2, default=R.json_default),
             "leaderboard.md": render_markdown(board), "leaderboard.csv": render_csv(board),
             "leaderboard.html": render_html(board, plots)}
    try:
        written = R.write_files(outdir, files)
    except OSError as exc:
        raise InputError(f"cannot write the leaderboard to {outdir}: {_short(exc)}") from None
    print(R._wrap(_settings_text(board)))
    print()
    print(R.table(*_terminal_table(board)))
    print(R._wrap("low-shot columns, label-free metrics and every pair: leaderboard.md and .html"))
    if warning:
        print("\n" + R._wrap("warning: " + warning))
    for r in results:
        for v in r["verdicts"]:
            if v["fired"]:
                print(R._wrap(f"{r['name']}: {v['message']}"))
    print(f"\nwrote {', '.join(str(w) for w in written)}")
    return 0


BLAS_HELP = ("threads of BLAS and LAPACK in the probe fits, the SVDs and eigenproblems (the "
             "k-NN's large products keep every thread); on a busy machine one thread is often "
             "faster (default: %(default)s)")


def add_leaderboard_parser(sub, files_help, positive_int, fraction, c_grid, wrap):
    from ..multiple_testing import CORRECTIONS

    lp = sub.add_parser(
        "leaderboard", help="rank many encoders of the same images, with error bars",
        description=wrap("Evaluate every encoder on the same split: weighted k-NN, the linear "
                         "probe (C chosen on a split of TRAIN), low-shot nearest class mean, "
                         "label-free metrics and verdicts; rank them with 95% Wilson intervals, "
                         "compare every pair (paired bootstrap interval, exact McNemar p corrected "
                         "across pairs by Holm or Benjamini-Hochberg) and mark neighbours in the "
                         "ranking that are not separated. Writes leaderboard.csv, .md, .json and a "
                         "self-contained .html page to --out. Inputs: feature files, loop folders, "
                         "a folder of them, or a TOML list ([[encoder]] tables with path, and "
                         "optionally name and method)."),
        epilog=files_help, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lp.add_argument("inputs", metavar="INPUT", nargs="*",
                    help="feature files or loop folders (one encoder each), a folder of them, or a .toml list")
    lp.add_argument("--out", default="repeval_leaderboard", metavar="DIR",
                    help="output directory, created if needed (default: %(default)s)")
    lp.add_argument("--test-fraction", type=fraction, default=TEST_FRACTION,
                    help="share of images held out for testing when the encoders are single files; "
                         "loop folders keep their own parts (default: %(default)s)")
    lp.add_argument("--seed", type=int, default=0, help="seed of the split, probe split, draws and "
                    "bootstrap (default: %(default)s)")
    lp.add_argument("--k", type=positive_int, default=KNN_HEADLINE_KS[0],
                    help="k of the weighted k-NN (default: %(default)s)")
    lp.add_argument("--rank-by", choices=("probe", "knn"), default="probe",
                    help="protocol of the ranking (default: %(default)s)")
    lp.add_argument("--correction", choices=tuple(CORRECTIONS), default="holm",
                    help="multiple-comparison correction across pairs: holm (family-wise error) or "
                         "bh (Benjamini-Hochberg false discovery rate) (default: %(default)s)")
    lp.add_argument("--alpha", type=fraction, default=0.05,
                    help="level below which an adjusted p separates two encoders (default: %(default)s)")
    lp.add_argument("--boot", type=positive_int, default=PAIRED_BOOTSTRAP,
                    help="paired bootstrap replicates per pair (default: %(default)s)")
    lp.add_argument("--draws", type=positive_int, default=LOW_SHOT_DRAWS,
                    help="low-shot support draws per shot count, >= 2 (default: %(default)s)")
    lp.add_argument("--id-batch", type=positive_int, default=1000, metavar="N",
                    help="batch size of the batched TwoNN dimension (default: %(default)s)")
    lp.add_argument("--probe-c", type=c_grid, default=PROBE_CS, metavar="C1,C2,...",
                    help="candidate C of the probe (default: 1e-4,...,100)")
    lp.add_argument("--blas-threads", type=positive_int, default=1, metavar="N",
                    help=BLAS_HELP)
    lp.add_argument("--quiet", action="store_true", help="no progress bars")
    lp.set_defaults(func=cmd_leaderboard)
