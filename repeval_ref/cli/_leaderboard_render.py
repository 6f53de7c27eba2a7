"""Rendering of ``repeval leaderboard``: the terminal table, Markdown, CSV, the plots and the HTML
page.

Every function takes the board as :func:`repeval_ref.cli.leaderboard.run_leaderboard`
returns it and returns text, figures or PNG bytes (:func:`print_leaderboard` prints);
nothing is computed here but the layout.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json

import numpy as np

from . import _render as R
from ._evaluate import SHOTS
from ._inputs import split_text
from ._label_free_section import LABEL_FREE_RANKINGS


def _acc_cell(e):
    lo, hi = e["wilson95"]
    return f"{100 * e['accuracy']:.2f} [{100 * lo:.2f}, {100 * hi:.2f}]"


def _lowshot_cell(entries, shots, plus="±"):
    e = next((x for x in entries if x["shots"] == shots), None)
    return (
        "skipped"
        if e is None or e["mean"] is None
        else f"{100 * e['mean']:.2f} {plus} {100 * e['std']:.2f}"
    )


def _main_rows(board, plus="±"):
    results, rank = board["encoders"], board["ranking"]
    by_name = {r["name"]: r for r in results}
    rows = []
    for row in rank:
        r = by_name[row["name"]]
        mark = ""
        if "separated_from_next" in row:
            mark = (
                "separated"
                if row["separated_from_next"]
                else f"NOT separated (p_adj {row['p_adjusted_vs_next']:.3g})"
            )
        fired = [v["name"].replace("_", " ") for v in r["verdicts"] if v["fired"]]
        rows.append(
            [
                str(row["rank"]),
                r["name"],
                r["method"] or "—",
                _acc_cell(r["knn"]),
                _acc_cell(r["probe"]),
                *[_lowshot_cell(r["low_shot"], s, plus) for s in SHOTS],
                mark,
                ", ".join(fired) or "none",
            ]
        )
    return rows


def _headers(board, plus="±"):
    s = board["settings"]
    return [
        "rank",
        "encoder",
        "method",
        f"k-NN k={s['k']} % [95% Wilson]",
        "linear probe % [95% Wilson]",
        *[f"{k}-shot nearest class mean %, mean {plus} std over {s['draws']} draws" for k in SHOTS],
        f"vs next ({s['rank_by']})",
        "verdicts",
    ]


#: columns of the main table printed on the terminal: rank, encoder, k-NN, probe, vs next
TERMINAL_COLUMNS = (0, 1, 3, 4, -2)


def _terminal_table(board):
    """``(rows, headers)`` of the main table's :data:`TERMINAL_COLUMNS` (the files hold them
    all)."""
    rows, headers = _main_rows(board, "+-"), _headers(board, "+-")
    return [[r[i] for i in TERMINAL_COLUMNS] for r in rows], [headers[i] for i in TERMINAL_COLUMNS]


def _settings_text(board):
    """Sizes, split rule, seed and low-shot draws in one sentence (Markdown, HTML and terminal)."""
    s = board["settings"]
    return (
        f"{len(board['encoders'])} encoders on the same {split_text(s['split'])}, "
        f"{s['n_classes']} classes, seed {s['seed']} (split, probe validation split, low-shot "
        f"draws, bootstrap); low-shot columns: mean and standard deviation over {s['draws']} "
        "draws of the support set, not an interval."
    )


def _lf_rows(board):
    rows = []
    for r in board["encoders"]:
        lf = r["label_free"]
        rows.append([r["name"]] + [R.fmt(lf.get(k)) for k in LABEL_FREE_RANKINGS])
    return rows


def pair_cells(pair):
    """The cells of one paired comparison under :data:`PAIR_HEADERS` (leaderboard and suite).

    ``pair`` is an entry of :func:`repeval_ref.cli._leaderboard_stats.pairwise`: the names ``a``
    and ``b``, ``gain_b_minus_a`` and its ``bootstrap95`` interval, ``discordant`` and the
    McNemar p values.
    """
    lo, hi = pair["bootstrap95"]
    return [
        f"{pair['b']} - {pair['a']}",
        f"{100 * pair['gain_b_minus_a']:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]",
        str(pair["discordant"]),
        R.fmt(pair["mcnemar_p"]),
        R.fmt(pair["mcnemar_p_adjusted"]),
    ]


def _pair_rows(board, protocol):
    return [pair_cells(p) for p in board["pairs"][protocol]]


def _lf_rank_rows(board):
    """Per label-free metric: its name, which way is better, the ranking and Spearman's rho."""
    return [
        [
            e["metric"],
            e["better"],
            " > ".join(e["order"]) if e["order"] else "n/a",
            "n/a" if e["spearman_rho"] is None else f"{e['spearman_rho']:+.2f}",
        ]
        for e in board["label_free_rankings"].values()
    ]


PAIR_HEADERS = [
    "pair",
    "difference, pts [95% paired bootstrap]",
    "images only one gets right",
    "McNemar p",
    "adjusted p",
]


def render_markdown(board):
    s = board["settings"]
    md = [
        "# repeval leaderboard",
        "",
        f"{_settings_text(board)} Ranked by {s['rank_by']} accuracy; "
        f"neighbours in the ranking count as separated when the {s['correction_name']}-adjusted "
        f"McNemar p is below {s['alpha']} and the paired bootstrap interval excludes 0.",
        "",
    ]
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
    md += [
        R.md_table(_lf_rows(board), ["encoder"] + [v[0] for v in LABEL_FREE_RANKINGS.values()]),
        "",
    ]
    lf_rank = _lf_rank_rows(board)
    acc_order = " > ".join(r["name"] for r in board["ranking"])
    md += [
        f"Accuracy ranking ({s['rank_by']}): {acc_order}.",
        "",
        R.md_table(
            lf_rank,
            ["metric", "better is", "ranking", f"Spearman rho with {s['rank_by']} accuracy"],
        ),
        "",
    ]
    for proto in ("knn", "probe"):
        md += [
            f"## Pairs: {'weighted k-NN' if proto == 'knn' else 'linear probe'}",
            "",
            R.md_table(_pair_rows(board, proto), PAIR_HEADERS),
            "",
        ]
    md += [
        f"p-values adjusted across the {len(board['pairs']['probe'])} pairs of each protocol by "
        f"{s['correction_name']}.",
        "",
    ]
    return "\n".join(md) + "\n"


def render_csv(board):
    buf = io.StringIO()
    w = csv.writer(buf)
    lf_keys = list(LABEL_FREE_RANKINGS)
    w.writerow(
        [
            "rank",
            "encoder",
            "method",
            "path",
            "knn_accuracy",
            "knn_wilson_low",
            "knn_wilson_high",
            "probe_accuracy",
            "probe_wilson_low",
            "probe_wilson_high",
            "probe_C",
            *[f"lowshot_{s}_mean" for s in SHOTS],
            *[f"lowshot_{s}_std_over_draws" for s in SHOTS],
            *lf_keys,
            "separated_from_next",
            "verdicts",
        ]
    )
    by_name = {r["name"]: r for r in board["encoders"]}
    for row in board["ranking"]:
        r = by_name[row["name"]]
        low = {e["shots"]: e["mean"] for e in r["low_shot"]}
        std = {e["shots"]: e["std"] for e in r["low_shot"]}
        w.writerow(
            [
                row["rank"],
                r["name"],
                r["method"] or "",
                r["path"],
                r["knn"]["accuracy"],
                *r["knn"]["wilson95"],
                r["probe"]["accuracy"],
                *r["probe"]["wilson95"],
                r["probe"]["best_C"],
                *["" if low.get(s) is None else low[s] for s in SHOTS],
                *["" if std.get(s) is None else std[s] for s in SHOTS],
                *["" if r["label_free"].get(k) is None else r["label_free"][k] for k in lf_keys],
                row.get("separated_from_next", ""),
                ";".join(v["name"] for v in r["verdicts"] if v["fired"]),
            ]
        )
    return buf.getvalue()


def _plots(board):
    plt = R._pyplot()
    s = board["settings"]
    names = [r["name"] for r in board["ranking"]]
    by_name = {r["name"]: r for r in board["encoders"]}
    fig, ax = plt.subplots(figsize=(6.4, 0.5 * len(names) + 1.6))
    y = np.arange(len(names))
    for off, proto, label in (
        (-0.15, "knn", f"k-NN (k={s['k']})"),
        (0.15, "probe", "linear probe"),
    ):
        acc = np.array([by_name[n][proto]["accuracy"] for n in names])
        lo = np.array([by_name[n][proto]["wilson95"][0] for n in names])
        hi = np.array([by_name[n][proto]["wilson95"][1] for n in names])
        ax.errorbar(
            100 * acc,
            y + off,
            xerr=[100 * (acc - lo), 100 * (hi - acc)],
            fmt="o",
            capsize=3,
            label=label,
        )
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
    """Scatter plots of each label-free score against accuracy, names kept inside the axes; or
    None."""
    plt = R._pyplot()
    s = board["settings"]
    names = [r["name"] for r in board["ranking"]]
    by_name = {r["name"]: r for r in board["encoders"]}
    keys = [
        k
        for k in LABEL_FREE_RANKINGS
        if all(by_name[n]["label_free"].get(k) is not None for n in names)
    ]
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
    img = "".join(
        f'<figure><img alt="{k}" '
        f'src="data:image/png;base64,{base64.b64encode(v).decode()}"></figure>'
        for k, v in plots.items()
    )
    verdicts = "".join(
        f"<li><b>{html.escape(r['name'])}</b>: {html.escape(v['message'])}. "
        f"<i>Rule: {html.escape(v['rule'])}.</i></li>"
        for r in board["encoders"]
        for v in r["verdicts"]
        if v["fired"]
    )
    warn = (
        f'<p class="warn"><b>Warning:</b> {html.escape(board["method_warning"])}</p>'
        if board["method_warning"]
        else ""
    )
    lf_rank = _lf_rank_rows(board)
    pairs = "".join(
        f"<h3>{'weighted k-NN' if p == 'knn' else 'linear probe'}</h3>"
        + R.html_table(_pair_rows(board, p), PAIR_HEADERS)
        for p in ("knn", "probe")
    )
    style = (
        "body{font-family:sans-serif;max-width:70em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 7px;"
        "font-size:90%}th{background:#eee}.warn{background:#fff3cd;padding:.6em;border:1px solid "
        "#e0c36b}"
        "img{max-width:100%}"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>repeval '
        "leaderboard</title>"
        f"<style>{style}</style></head><body><h1>repeval leaderboard</h1>"
        f"<p>{html.escape(_settings_text(board))} Ranked by {html.escape(s['rank_by'])} accuracy; "
        f"pairwise McNemar p-values adjusted by {html.escape(s['correction_name'])}.</p>"
        + R.html_table(_main_rows(board), _headers(board))
        + img
        + "<h2>Verdicts</h2>"
        + (f"<ul>{verdicts}</ul>" if verdicts else "<p>No verdict fired.</p>")
        + "<h2>Label-free metrics</h2>"
        + warn
        + R.html_table(_lf_rows(board), ["encoder"] + [v[0] for v in LABEL_FREE_RANKINGS.values()])
        + R.html_table(lf_rank, ["metric", "better is", "ranking", "Spearman rho with accuracy"])
        + "<h2>Pairs</h2>"
        + pairs
        + "</body></html>\n"
    )


def render_files(board):
    """The leaderboard's files: ``{name: text}`` of its JSON, Markdown, CSV and HTML page."""
    return {
        "leaderboard.json": json.dumps(board, indent=2, default=R.json_default),
        "leaderboard.md": render_markdown(board),
        "leaderboard.csv": render_csv(board),
        "leaderboard.html": render_html(board, _plots(board)),
    }


def print_leaderboard(board, written):
    """Print the settings, the ranked table, the warning, the fired verdicts and the files
    ``written``."""
    print(R._wrap(_settings_text(board)))
    print()
    print(R.table(*_terminal_table(board)))
    print(R._wrap("low-shot columns, label-free metrics and every pair: leaderboard.md and .html"))
    if board["method_warning"]:
        print("\n" + R._wrap("warning: " + board["method_warning"]))
    for r in board["encoders"]:
        for v in r["verdicts"]:
            if v["fired"]:
                print(R._wrap(f"{r['name']}: {v['message']}"))
    print(f"\nwrote {', '.join(str(w) for w in written)}")
