"""The page of ``repeval suite``: ``suite.html``, self-contained (inline style, the heat map
as an inline PNG, no outside request), built from the tables of :mod:`._suite_render`.
"""

from __future__ import annotations

import base64
import html

from . import _render as R
from ._suite_render import (
    PAIR_HEADERS,
    PAIRED,
    TASK_HEADERS,
    accuracy_headers,
    accuracy_rows,
    agreement_sentence,
    pair_rows,
    protocol_title,
    settings_text,
    stats_text,
    task_rows,
    tau_rows,
)

__all__ = ["render_html", "HEATMAP_ALT"]


HEATMAP_ALT = (
    "Heat map of test accuracy, one panel per protocol: rows are the encoders (ordered by mean "
    "rank), columns the tasks; each cell shows the accuracy in percent and the encoder's rank on "
    "that task. The same numbers are in the tables above."
)

_STYLE = (
    "body{font-family:sans-serif;color:#1a1a1a;background:#fff;max-width:80em;margin:2em "
    "auto;padding:0 1em;"
    "line-height:1.45}table{border-collapse:collapse;margin:1em "
    "0}caption{text-align:left;font-weight:bold;"
    "padding:.3em 0}td,th{border:1px solid #767676;padding:3px 7px;font-size:90%;text-align:left}"
    "thead th{background:#e8e8e8;color:#1a1a1a}tbody "
    "th{background:#f4f4f4;color:#1a1a1a;font-weight:normal}"
    ".wide{overflow-x:auto}img{max-width:100%;height:auto}"
)


def _table(rows, headers, caption):
    """An HTML table of the page: a caption, each row headed by its first cell."""
    return R.html_table(rows, headers, caption, row_headers=True)


def render_html(suite, heatmap):
    s = suite["settings"]
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>repeval suite</title><style>{_STYLE}</style></head><body><main>",
        "<h1>repeval suite</h1>",
        f"<p>{e(settings_text(suite))}</p>",
        f"<p>{e(stats_text(suite))}</p>",
        "<h2>Tasks</h2>",
        _table(task_rows(suite), TASK_HEADERS, "The tasks of the suite"),
    ]
    for p in s["protocols"]:
        title = protocol_title(p, s)
        parts += [
            f"<h2>{e(title)}</h2>",
            _table(
                accuracy_rows(suite, p),
                accuracy_headers(suite, p),
                f"{title}: accuracy in % by encoder and task",
            ),
        ]
        rk = suite["ranking"].get(p)
        if rk is None:
            parts.append("<p>No task has this figure for every encoder; no ranking.</p>")
            continue
        if p == "fewshot":
            parts.append(f"<p>Ranks and tau without intervals: {e(rk['interval'])}.</p>")
        parts.append(
            _table(
                tau_rows(suite, p),
                ["task"] + rk["tasks"],
                f"{title}: Kendall's tau-b between tasks' rankings",
            )
        )
        parts.append("<p>" + e(agreement_sentence(suite, p)) + "</p>")
    data = base64.b64encode(heatmap).decode()
    parts += [
        "<h2>Heat map</h2>",
        f'<figure><img alt="{e(HEATMAP_ALT)}" src="data:image/png;base64,{data}">'
        "<figcaption>Accuracy (colour and number) and rank (#) of every encoder on every task."
        "</figcaption></figure>",
    ]
    for p in s["protocols"]:
        if p not in PAIRED:
            continue
        title = protocol_title(p, s)
        parts.append(f"<h2>Pairs within each task: {e(title)}</h2>")
        for t in suite["tasks"]:
            parts += [
                f"<h3>{e(t)}</h3>",
                _table(
                    pair_rows(suite, p, t, s["alpha"]),
                    PAIR_HEADERS,
                    f"{title}, task {t}: every pair of encoders",
                ),
            ]
    parts.append("</main></body></html>\n")
    return "".join(parts)
