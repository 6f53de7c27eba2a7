"""Rendering of ``repeval suite``: the terminal table, Markdown, CSV, the heat map and the HTML
page.

Every function takes the suite's result as :func:`repeval_ref.cli.suite.run_suite`
returns it (made JSON-safe) and returns text or PNG bytes; nothing is computed here but
the layout.
"""

from __future__ import annotations

import csv
import io

import numpy as np

from . import _render as R
from ._evaluate import KNN_TAU
from ._inputs import split_text
from ._leaderboard_render import PAIR_HEADERS as LEADERBOARD_PAIR_HEADERS
from ._leaderboard_render import pair_cells

#: protocols with one right/wrong answer per test image: paired tests and bootstrap intervals
PAIRED = ("knn", "probe")


def protocol_title(p, s):
    if p == "knn":
        return f"weighted k-NN (k={s['k']}, tau={KNN_TAU})"
    if p == "probe":
        return "linear probe (C chosen on a split of TRAIN)"
    return f"{s['shots']}-shot nearest class mean (mean ± std over {s['draws']} draws)"


def _cell(suite, p, t, i, plus="±", rank=True, spread=True):
    r = suite["per_task"][t]["results"][i][p]
    rk = suite["ranking"].get(p)
    if p == "fewshot":
        if r["mean"] is None:
            return "skipped"
        text = f"{100 * r['mean']:.2f}" + (f" {plus} {100 * r['std']:.2f}" if spread else "")
    else:
        lo, hi = r["wilson95"]
        text = f"{100 * r['accuracy']:.2f}" + (
            f" [{100 * lo:.2f}, {100 * hi:.2f}]" if spread else ""
        )
    if rank and rk is not None and t in rk["tasks"]:
        text += f" ({_rank_text(rk['ranks'][i][rk['tasks'].index(t)])})"
    return text


def _rank_text(r):
    return f"{r:g}"


def _mean_rank_text(rk, i):
    if rk is None:
        return "n/a"
    text = f"{rk['mean_rank'][i]:.2f}"
    if rk["mean_rank_interval"] is not None:
        lo, hi = rk["mean_rank_interval"][i]
        text += f" [{lo:.2f}, {hi:.2f}]"
    return text


def _order(suite, p):
    rk = suite["ranking"].get(p)
    n = len(suite["encoders"])
    if rk is None:
        return list(range(n))
    return sorted(range(n), key=lambda i: (rk["mean_rank"][i], i))


def accuracy_rows(suite, p, plus="±", spread=True):
    """One row per encoder (best mean rank first): its cell on every task, then its mean rank.

    ``spread=False`` leaves the Wilson intervals and standard deviations out of the cells
    (the terminal's table; the files keep them).
    """
    rows = []
    for i in _order(suite, p):
        rows.append(
            [suite["encoders"][i]["name"]]
            + [_cell(suite, p, t, i, plus, spread=spread) for t in suite["tasks"]]
            + [_mean_rank_text(suite["ranking"].get(p), i)]
        )
    return rows


def accuracy_headers(suite, p):
    rk = suite["ranking"].get(p)
    what = (
        "mean rank"
        if rk is None or rk["mean_rank_interval"] is None
        else f"mean rank [95% bootstrap, {rk['n_boot']} replicates]"
    )
    return ["encoder"] + list(suite["tasks"]) + [what]


def tau_rows(suite, p):
    rk = suite["ranking"][p]
    ts = rk["tasks"]
    rows = []
    for a, ta in enumerate(ts):
        row = [ta]
        for b in range(len(ts)):
            v = rk["tau"][a][b]
            text = "n/a" if v is None or not np.isfinite(v) else f"{v:+.2f}"
            if rk["tau_interval"] is not None and a != b:
                lo, hi = rk["tau_interval"][a][b]
                if lo is not None and np.isfinite(lo):
                    text += f" [{lo:+.2f}, {hi:+.2f}]"
            row.append(text)
        rows.append(row)
    return rows


def flips(suite, p):
    """Pairs of tasks whose rankings may disagree: tau's interval reaches 0 (or tau <= 0 without
    one)."""
    rk = suite["ranking"].get(p)
    if rk is None:
        return []
    ts, out = rk["tasks"], []
    for a in range(len(ts)):
        for b in range(a + 1, len(ts)):
            tau = rk["tau"][a][b]
            if rk["tau_interval"] is not None:
                lo = rk["tau_interval"][a][b][0]
                if lo is None or not np.isfinite(lo) or lo <= 0:
                    out.append((ts[a], ts[b]))
            elif tau is None or not np.isfinite(tau) or tau <= 0:
                out.append((ts[a], ts[b]))
    return out


def agreement_sentence(suite, p):
    """One sentence on which pairs of tasks may rank the encoders differently under protocol ``p``.

    It reads what the ranking holds: with bootstrap intervals on tau, a pair is flagged when its
    interval reaches 0; without them (the low-shot protocol), only tau's sign is known, and the
    sentence says that no agreement is shown.

    Parameters
    ----------
    suite : dict
        The suite's result, as :func:`repeval_ref.cli.suite.run_suite` returns it.
    p : str
        A protocol of ``suite["ranking"]``.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``p`` has no ranking in ``suite``.
    """
    rk = suite["ranking"].get(p) if isinstance(suite, dict) and "ranking" in suite else None
    if rk is None:
        raise ValueError(f"p must be a protocol with a ranking, got {p!r}")
    n_tasks = len(rk["tasks"])
    n_pairs = n_tasks * (n_tasks - 1) // 2
    if n_pairs == 0:
        return "With a single task there is no pair of tasks to compare."
    fl = [f"{a} / {b}" for a, b in flips(suite, p)]
    listed = fl[0] if len(fl) == 1 else ", ".join(fl[:-1]) + " and " + fl[-1] if fl else ""
    if n_pairs == 1:
        subject = "The two tasks"
    elif len(fl) == n_pairs:
        subject = f"All {n_pairs} pairs of tasks"
    else:
        subject = f"{len(fl)} of the {n_pairs} pairs of tasks"
    if rk["tau_interval"] is not None:
        if fl:
            return f"{subject} may rank the encoders differently (tau's 95% interval reaches 0)" + (
                "." if n_pairs == 1 else f": {listed}."
            )
        return (
            "The two tasks rank the encoders alike beyond the noise: tau's interval lies above 0."
            if n_pairs == 1
            else "Every pair of tasks ranks the encoders alike beyond the noise: "
            f"each of the {n_pairs} tau intervals lies above 0."
        )
    if fl:
        one = n_pairs == 1 or len(fl) == 1
        return (
            f"{subject} {'has' if one else 'have'} a tau of 0 or below"
            + ("" if n_pairs == 1 else f": {listed}")
            + "; these ranks carry no interval, so no agreement between tasks is shown."
        )
    return (
        ("The two tasks have" if n_pairs == 1 else "Every pair of tasks has")
        + " a tau above 0, but these ranks carry no interval, so the data do not show that the "
        "tasks rank the encoders alike."
    )


PAIR_HEADERS = [*LEADERBOARD_PAIR_HEADERS, "separated"]


def pair_rows(suite, p, t, alpha):
    rows = []
    for q in suite["per_task"][t]["pairs"][p]:
        lo, hi = q["bootstrap95"]
        sep = q["mcnemar_p_adjusted"] < alpha and (lo > 0 or hi < 0)
        rows.append(pair_cells(q) + ["yes" if sep else "no"])
    return rows


def task_rows(suite):
    rows = []
    for t in suite["tasks"]:
        d = suite["per_task"][t]
        c = d["card"]
        size = c.get("image_size")
        rows.append(
            [
                t,
                c.get("title", "—"),
                str(d["n_train"]),
                str(d["n_test"]),
                str(d["n_classes"]),
                "—" if size is None else " x ".join(map(str, size)),
                c.get("shift", "—"),
                c.get("licence", "—"),
            ]
        )
    return rows


TASK_HEADERS = ["task", "title", "train", "test", "classes", "image size", "shift", "licence"]


def settings_text(suite):
    s = suite["settings"]
    rules = set()
    for t in suite["tasks"]:
        sp = suite["per_task"][t]["split"]
        rules.add(
            split_text(sp).split("(", 1)[1].rstrip(")")
            if sp["rule"] == "stratified"
            else "each task's own train and test parts, never re-split"
        )
    n_t = len(suite["tasks"])
    return (
        f"{len(suite['encoders'])} encoders on {n_t} task{'s' if n_t != 1 else ''}; split rule: "
        f"{'; '.join(sorted(rules))}; seed {s['seed']} (probe validation split, low-shot draws, "
        f"bootstraps); {s['shots']}-shot figures are the mean and standard deviation over "
        f"{s['draws']} draws of the support set, not an interval."
    )


def stats_text(suite):
    s = suite["settings"]
    return (
        "Each accuracy carries its 95% Wilson interval in brackets and the encoder's rank "
        "within the task in parentheses (1 is best; equal accuracies share the average rank). "
        f"The mean rank's interval and Kendall's tau-b intervals come from {s['rank_boot']} "
        "bootstrap replicates that resample the test images within each task (the same images "
        "for every encoder) and re-rank. Pairs within each task: paired bootstrap interval "
        f"({s['n_boot']} replicates) and exact McNemar p, adjusted across the pairs of that task "
        f"by {s['correction_name']}; a pair is separated when the adjusted p is below "
        f"{s['alpha']} and the interval excludes 0."
    )


def render_markdown(suite):
    s = suite["settings"]
    md = [
        "# repeval suite",
        "",
        settings_text(suite),
        "",
        stats_text(suite),
        "",
        "## Tasks",
        "",
        R.md_table(task_rows(suite), TASK_HEADERS),
        "",
    ]
    for p in s["protocols"]:
        title = protocol_title(p, s)
        md += [
            f"## {title}",
            "",
            R.md_table(accuracy_rows(suite, p), accuracy_headers(suite, p)),
            "",
        ]
        rk = suite["ranking"].get(p)
        if rk is None:
            md += ["No task has this figure for every encoder; no ranking.", ""]
            continue
        if p == "fewshot":
            md += [f"Ranks and tau without intervals: {rk['interval']}.", ""]
        md += [
            f"### Rank agreement between tasks ({title})",
            "",
            "Kendall's tau-b between the two tasks' rankings of the encoders"
            + (" [95% bootstrap interval]." if rk["tau_interval"] is not None else "."),
            "",
            R.md_table(tau_rows(suite, p), ["task"] + rk["tasks"]),
            "",
        ]
        md += [agreement_sentence(suite, p), ""]
    md += [
        "## Heat map",
        "",
        "![Accuracy of every encoder on every task, one panel per protocol](suite_heatmap.png)",
        "",
    ]
    for p in s["protocols"]:
        if p not in PAIRED:
            continue
        md += [f"## Pairs within each task: {protocol_title(p, s)}", ""]
        for t in suite["tasks"]:
            md += [f"### {t}", "", R.md_table(pair_rows(suite, p, t, s["alpha"]), PAIR_HEADERS), ""]
    return "\n".join(md) + "\n"


def render_csv(suite):
    buf = io.StringIO()
    w = csv.writer(buf)
    head = ["protocol", "encoder", "kind", "mean_rank", "mean_rank_low", "mean_rank_high"]
    for t in suite["tasks"]:
        head += [t, f"{t}_wilson_low", f"{t}_wilson_high", f"{t}_std_over_draws", f"{t}_rank"]
    head += ["seed"]
    w.writerow(head)
    s = suite["settings"]
    for p in s["protocols"]:
        rk = suite["ranking"].get(p)
        for i in _order(suite, p):
            e = suite["encoders"][i]
            row = [p, e["name"], e["kind"]]
            if rk is None:
                row += ["", "", ""]
            else:
                lo, hi = (
                    rk["mean_rank_interval"][i]
                    if rk["mean_rank_interval"] is not None
                    else ("", "")
                )
                row += [rk["mean_rank"][i], lo, hi]
            for t in suite["tasks"]:
                r = suite["per_task"][t]["results"][i][p]
                rank = (
                    rk["ranks"][i][rk["tasks"].index(t)]
                    if rk is not None and t in rk["tasks"]
                    else ""
                )
                if p == "fewshot":
                    row += [
                        "" if r["mean"] is None else r["mean"],
                        "",
                        "",
                        "" if r["std"] is None else r["std"],
                        rank,
                    ]
                else:
                    row += [r["accuracy"], *r["wilson95"], "", rank]
            w.writerow(row + [s["seed"]])
    return buf.getvalue()


def heatmap_png(suite):
    """One panel per protocol: accuracy (colour and number) and rank of every encoder on every
    task."""
    plt = R._pyplot()
    s = suite["settings"]
    ps = s["protocols"]
    names = [e["name"] for e in suite["encoders"]]
    tasks = suite["tasks"]
    w = 1.0 + 0.95 * len(tasks)
    fig, axes = plt.subplots(
        1, len(ps), figsize=(w * len(ps) + 1.5, 0.45 * len(names) + 2.2), squeeze=False
    )
    for ax, p in zip(axes[0], ps):
        order = _order(suite, p)
        acc = np.full((len(order), len(tasks)), np.nan)
        for r, i in enumerate(order):
            for c, t in enumerate(tasks):
                e = suite["per_task"][t]["results"][i][p]
                v = e["mean"] if p == "fewshot" else e["accuracy"]
                acc[r, c] = np.nan if v is None else 100 * v
        im = ax.imshow(acc, vmin=0, vmax=100, cmap="viridis", aspect="auto")
        rk = suite["ranking"].get(p)
        for r, i in enumerate(order):
            for c, t in enumerate(tasks):
                if not np.isfinite(acc[r, c]):
                    continue
                label = f"{acc[r, c]:.1f}"
                if rk is not None and t in rk["tasks"]:
                    label += f"\n#{_rank_text(rk['ranks'][i][rk['tasks'].index(t)])}"
                ax.text(
                    c,
                    r,
                    label,
                    ha="center",
                    va="center",
                    fontsize=6.5,
                    color="black" if acc[r, c] > 55 else "white",
                )
        ax.set_xticks(range(len(tasks)), tasks, rotation=40, ha="right", fontsize=7)
        ax.set_yticks(range(len(order)), [names[i] for i in order], fontsize=7)
        ax.set_title(
            {
                "knn": f"k-NN (k={s['k']})",
                "probe": "linear probe",
                "fewshot": f"{s['shots']}-shot NCM",
            }[p],
            fontsize=9,
        )
    fig.colorbar(im, ax=list(axes[0]), shrink=0.8, label="accuracy, %")
    return R.figure_bytes(fig, tight=True)


def print_suite(suite, written):
    s = suite["settings"]
    print(R._wrap(settings_text(suite)))
    for p in s["protocols"]:
        print(f"\n{protocol_title(p, s).replace('±', '+-')}, % (rank):")
        print(R.table(accuracy_rows(suite, p, "+-", spread=False), accuracy_headers(suite, p)))
        fl = flips(suite, p)
        if fl:
            print(
                R._wrap(
                    "task pairs whose rankings may disagree: "
                    + ", ".join(f"{a} / {b}" for a, b in fl)
                )
            )
    c = suite["cache"]
    print()
    print(
        R._wrap(
            f"features: {c['features_read']} read from the cache, {c['features_computed']} "
            f"computed; evaluations: {c['evaluations_read']} read from the cache, "
            f"{c['evaluations_computed']} computed; {suite['seconds']:.1f} s",
            R.TABLE_WIDTH,
        )
    )
    print(R._wrap("intervals, standard deviations and every pair: suite.md and suite.html"))
    print(f"wrote {', '.join(str(w) for w in written)}")


__all__ = [
    "PAIRED",
    "protocol_title",
    "accuracy_rows",
    "accuracy_headers",
    "tau_rows",
    "flips",
    "agreement_sentence",
    "pair_rows",
    "task_rows",
    "settings_text",
    "stats_text",
    "render_markdown",
    "render_csv",
    "heatmap_png",
    "print_suite",
]
