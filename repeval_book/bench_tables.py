"""Book plumbing: the performance appendix's tables, read from the committed benchmark files.

``benchmarks/results.json`` holds one row per benchmark and, in each row, one line per
comparison (a measure of the package against a named competitor, their ratio, the goal and
whether it is met). :func:`benchmark_table` turns one row into the rows of a table a reader can
scan, :func:`machine_sentence` says in one sentence where the row was measured, and
:func:`open_goals` lists the goals not (or not fully) met. The GPU line of the k-NN row, which
the CPU harness cannot measure, is filled from the GPU script's own results file when one is
given (:func:`gpu_knn_line`).
"""

from __future__ import annotations

import math

from .phrasing import count_noun, number, series

__all__ = [
    "TABLE_COLUMNS",
    "ratio_text",
    "result_word",
    "gpu_knn_line",
    "benchmark_table",
    "machine_sentence",
    "open_goals",
]

#: the columns of :func:`benchmark_table`, in order
TABLE_COLUMNS = (
    "measure",
    "repeval",
    "competitor",
    "ratio [lowest, highest paired]",
    "goal",
    "result",
)


def _line_ok(line, name="line"):
    if not isinstance(line, dict) or "status" not in line or "what" not in line:
        raise ValueError(f"{name} must be a benchmark line (a dict with 'what' and 'status')")
    return line


def ratio_text(line):
    """The line's ratio with the range of its paired repetitions, as a table cell.

    Parameters
    ----------
    line : dict
        A line of a benchmark row: ``ratio`` (float or None) and, optionally,
        ``paired_ratios`` (list of float, one per interleaved repetition).

    Returns
    -------
    str
        ``"—"`` without a ratio; ``"2.65 [2.19, 3.04] (5 paired)"`` with paired repetitions;
        ``"9.18 (one comparison)"`` otherwise.

    Raises
    ------
    ValueError
        If ``line`` is not a benchmark line or a ratio is not a finite number.
    """
    _line_ok(line)
    ratio = line.get("ratio")
    if ratio is None:
        return "—"
    if not isinstance(ratio, (int, float)) or not math.isfinite(ratio):
        raise ValueError(f"line['ratio'] must be a finite number, got {ratio!r}")
    paired = line.get("paired_ratios") or []
    if any(not isinstance(r, (int, float)) or not math.isfinite(r) for r in paired):
        raise ValueError("line['paired_ratios'] must hold finite numbers")
    if len(paired) >= 2:
        return f"{ratio:.2f} [{min(paired):.2f}, {max(paired):.2f}] ({len(paired)} paired)"
    return f"{ratio:.2f} (one comparison)"


def result_word(line):
    """Whether the line's goal is met, in words (met, met on the median only, not met, ...).

    Parameters
    ----------
    line : dict
        A benchmark line: ``status`` (``"measured"`` or another word), ``goal`` (str or None)
        and ``met`` (True, False, ``"median"`` or None).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``line`` is not a benchmark line or ``met`` is none of the values above.
    """
    _line_ok(line)
    if line["status"] != "measured":
        return str(line["status"])
    met = line.get("met")
    if line.get("goal") is None or met is None:
        return "no goal (for reference)"
    words = {True: "met", "median": "met on the median only", False: "not met"}
    if met not in words or isinstance(met, int) and not isinstance(met, bool):
        raise ValueError(f"line['met'] must be True, False, 'median' or None, got {met!r}")
    return words[met]


def gpu_knn_line(line, gpu):
    """The k-NN row's pending GPU line, filled from the GPU script's results when they exist.

    Parameters
    ----------
    line : dict
        The pending line (its goal: the search within twice the matrix-product bound).
    gpu : dict or None
        The GPU results file, with ``knn.seconds_total``, ``knn.seconds_at_matmul_bound`` and
        ``device_name``; None leaves the line as it is.

    Returns
    -------
    dict
        A copy of ``line``; measured from ``gpu`` when given: ``ratio`` is the search time over
        the bound, the goal ``<= 2``.

    Raises
    ------
    ValueError
        If ``gpu`` lacks those fields or the bound is not positive.
    """
    out = dict(_line_ok(line))
    if gpu is None:
        return out
    try:
        total, bound = (
            float(gpu["knn"]["seconds_total"]),
            float(gpu["knn"]["seconds_at_matmul_bound"]),
        )
        device = str(gpu["device_name"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(
            "gpu must hold knn.seconds_total, knn.seconds_at_matmul_bound and device_name"
        ) from None
    if not bound > 0 or not math.isfinite(total):
        raise ValueError("gpu's bound must be positive and its time finite")
    ratio = total / bound
    out.update(
        status="measured",
        subject_value=f"{total:.2f} s on the {device}",
        competitor="the bfloat16 matrix-product bound",
        competitor_value=f"{bound:.2f} s",
        ratio=ratio,
        paired_ratios=None,
        goal="<= 2x the bound",
        met=bool(ratio <= 2.0),
    )
    return out


def benchmark_table(row, gpu=None):
    """The table of one benchmark: one list of cells per line, in :data:`TABLE_COLUMNS` order.

    Parameters
    ----------
    row : dict
        A row of ``benchmarks/results.json``: ``lines`` (list of benchmark lines) with
        ``what``, ``subject_value``, ``competitor``, ``competitor_value``, ``ratio``,
        ``paired_ratios``, ``goal``, ``met`` and ``status``.
    gpu : dict, optional
        The GPU results file, used for a pending line whose measure starts with ``"GPU"``.

    Returns
    -------
    list of list of str
        One row of cells per line.

    Raises
    ------
    ValueError
        If ``row`` has no list of lines.
    """
    if not isinstance(row, dict) or not isinstance(row.get("lines"), list):
        raise ValueError("row must be a benchmark row with a list 'lines'")
    out = []
    for i, line in enumerate(row["lines"]):
        _line_ok(line, f"row['lines'][{i}]")
        if line["status"] == "pending" and str(line["what"]).startswith("GPU"):
            line = gpu_knn_line(line, gpu)
        mine = line.get("subject_value") or "—"
        theirs = line.get("competitor") or "—"
        if line.get("competitor_value"):
            theirs += f": {line['competitor_value']}"
        out.append(
            [
                str(line["what"]),
                str(mine),
                theirs,
                ratio_text(line),
                str(line.get("goal") or "—"),
                result_word(line),
            ]
        )
    return out


def machine_sentence(row, machine):
    """One sentence on where and when a benchmark row was measured.

    Parameters
    ----------
    row : dict
        The row; its ``run`` (date_utc, cpu_model, logical_cores, load_average_at_start) is
        used when the row was measured in a run of its own.
    machine : dict
        The file's ``machine`` (the same fields, and ``memory_gb``), used otherwise.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If neither holds a CPU model, a core count and a date.
    """
    if not isinstance(row, dict) or not isinstance(machine, dict):
        raise ValueError("row and machine must be dicts")
    src = row.get("run") or machine
    try:
        cpu, cores, date = src["cpu_model"], src["logical_cores"], src["date_utc"]
    except KeyError:
        raise ValueError("machine must name cpu_model, logical_cores and date_utc") from None
    day = str(date).split(" ")[0]
    text = f"Measured on {day} on an {cpu} machine with {count_noun(cores, 'logical core')}"
    if machine.get("memory_gb"):
        text += f" and {number(machine['memory_gb'], 1)} GiB of memory"
    load = src.get("load_average_at_start")
    if load:
        busy = load[0] > cores
        text += f"; the one-minute load average was {number(load[0])} at the start" + (
            ", above the core count, so other work shared the machine" if busy else ""
        )
    return text + "."


def open_goals(results, gpu=None):
    """One sentence naming the goals that are not met, met on the median only, or still pending.

    Parameters
    ----------
    results : dict
        ``benchmarks/results.json``: ``rows``, each with ``title`` and ``lines``.
    gpu : dict, optional
        The GPU results file (see :func:`gpu_knn_line`).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``results`` has no list of rows.
    """
    if not isinstance(results, dict) or not isinstance(results.get("rows"), list):
        raise ValueError("results must hold a list 'rows'")
    groups = {"not met": [], "met on the median only": [], "pending": []}
    n_goals = 0
    for row in results["rows"]:
        for cells in benchmark_table(row, gpu):
            what, goal, word = cells[0], cells[4], cells[5]
            n_goals += goal != "—"
            if word in groups:
                groups[word].append(
                    f"{row['title']}, {what}" + (f", goal {goal}" if goal != "—" else "")
                )
    if not any(groups.values()):
        if n_goals == 0:
            return "No line states a goal; every line is measured."
        if n_goals == 1:
            return "The one stated goal is met, on every paired repetition where there are any."
        return (
            f"All {n_goals} stated goals are met, on every paired repetition where there are any."
        )
    parts = []
    for word, items in groups.items():
        if items:
            is_ = "is" if len(items) == 1 else "are"
            parts.append(f"{len(items)} {is_} {word} ({'; '.join(items)})")
    return f"Of the {count_noun(n_goals, 'stated goal')}, " + series(parts) + "."
