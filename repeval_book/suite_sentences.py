"""Book plumbing: the sentences the suite and encoder chapters build from counted values.

Each function takes counts or names computed by a chapter and returns one sentence (or a
clause) that reads right when a count is zero, one or many, when a list is empty, and when
two values that a sentence contrasts are equal. The chapters glue the result, so that what a
page says follows the committed tables rather than the numbers they held when the page was
written.
"""

from __future__ import annotations

from .phrasing import _count, count_noun, count_of, number, series, verb

__all__ = [
    "tau_interval_counts",
    "others_reaching",
    "leader_sentence",
    "near_chance_sentence",
    "flip_sentence",
    "protocol_flip_sentence",
    "range_counts",
    "best_block_sentence",
]


def _names(items, name):
    items = list(items)
    if any(not isinstance(i, str) or not i for i in items):
        raise ValueError(f"{name} must hold non-empty strings")
    return items


def tau_interval_counts(n_above, n_zero, n_below, lead=None):
    """How many pairs of tasks have a tau interval above, across and below zero.

    Parameters
    ----------
    n_above, n_zero, n_below : int
        Pairs whose interval lies entirely above zero, contains zero, lies entirely below.
    lead : str, optional
        Words put in front, such as ``"Under the k-NN"``: the sentence then reads
        "Under the k-NN, of the <total> pairs of tasks, ...".

    Returns
    -------
    str
        A sentence starting "Of the <total> pairs of tasks" (or with ``lead``).

    Raises
    ------
    ValueError
        If a count is negative or not whole, or all are zero.
    """
    n_above, n_zero, n_below = (
        _count(v, k) for v, k in ((n_above, "n_above"), (n_zero, "n_zero"), (n_below, "n_below"))
    )
    total = n_above + n_zero + n_below
    if total == 0:
        raise ValueError("n_above + n_zero + n_below must be >= 1")
    if n_above == 0:
        above = "none has an interval entirely above zero"
    else:
        word = "all" if n_above == total and total > 1 else str(n_above)
        above = f"{word} {verb(n_above, 'has', 'have')} an interval entirely above zero"
    if n_zero:
        those = "those two tasks" if n_zero == 1 else "the tasks of each"
        zero = (
            f"{n_zero} {verb(n_zero, 'has', 'have')} one that contains zero, so the data do not "
            "show "
            f"{those} ordering the encoders alike"
        )
    else:
        zero = "none has one that contains zero"
    below = (
        f"{n_below} {verb(n_below, 'lies', 'lie')} entirely below zero, a reversal"
        if n_below
        else "none lies entirely below zero, which would be a reversal"
    )
    if lead is not None and (not isinstance(lead, str) or not lead.strip()):
        raise ValueError("lead must be a non-empty string")
    start = f"{lead}, of the" if lead else "Of the"
    return f"{start} {count_noun(total, 'pair')} of tasks, {above}; {zero}; and {below}."


def others_reaching(names):
    """The encoders whose mean-rank interval reaches the best one's, as a clause.

    Parameters
    ----------
    names : list of str
        Those encoders (the best one excluded), possibly empty.

    Returns
    -------
    str
        ``"no other encoder has an interval that reaches it"``, or the count, the names and the
        verb in agreement.

    Raises
    ------
    ValueError
        If a name is not a non-empty string.
    """
    names = _names(names, "names")
    if not names:
        return "no other encoder has an interval that reaches it"
    return (
        f"{count_noun(len(names), 'other encoder')} ({series(names)}) "
        f"{verb(len(names), 'has', 'have')} an interval that reaches it"
    )


def leader_sentence(best, protocol, n_overlap, n_in_flips, n_flips):
    """Whether the encoder with the best mean rank is a leader the data single out.

    Parameters
    ----------
    best : str
        The encoder with the best mean rank.
    protocol : str
        The protocol's name as the sentence writes it ("probe", "k-NN").
    n_overlap : int
        Other encoders whose mean-rank interval reaches the best one's.
    n_in_flips : int
        Flips (pairs of encoders that two tasks separate in opposite directions) involving it.
    n_flips : int
        All flips under the protocol, ``>= n_in_flips``.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If a name is empty or a count is invalid.
    """
    best, protocol = _names([best, protocol], "best and protocol")
    n_overlap, n_in_flips, n_flips = (
        _count(n_overlap, "n_overlap"),
        _count(n_in_flips, "n_in_flips"),
        _count(n_flips, "n_flips"),
    )
    if n_in_flips > n_flips:
        raise ValueError("n_in_flips must be <= n_flips")
    if n_overlap == 0 and n_in_flips == 0:
        flips = (
            "and there is no flip at all"
            if n_flips == 0
            else f"and it is in none of the {count_noun(n_flips, 'flip')}"
        )
        return (
            f"{best} is a clear leader under the {protocol}: no other encoder's interval reaches "
            "its "
            f"mean rank, {flips}"
        )
    why = []
    if n_overlap:
        why.append(
            f"{count_noun(n_overlap, 'other encoder')} {verb(n_overlap, 'reaches', 'reach')} "
            "its mean rank's interval"
        )
    if n_in_flips:
        why.append(f"it is in {count_of(n_in_flips, n_flips, 'flip')}")
    return f"{best} is not a clear leader under the {protocol}: " + " and ".join(why)


def near_chance_sentence(cells, n_cells):
    """What the cells near chance leave unsaid, from the list of those cells.

    Parameters
    ----------
    cells : list of (str, str)
        ``(task, encoder)`` of every cell near chance (one per protocol, so a pair may repeat).
    n_cells : int
        All cells examined, ``>= len(cells)``.

    Returns
    -------
    str
        One or two sentences; with no such cell, a sentence saying every rank is informative
        in this respect.

    Raises
    ------
    ValueError
        If ``len(cells) > n_cells`` or a name is empty.
    """
    cells = [tuple(c) for c in cells]
    if any(len(c) != 2 for c in cells):
        raise ValueError("cells must hold (task, encoder) pairs")
    _names([x for c in cells for x in c], "cells")
    n_cells = _count(n_cells, "n_cells")
    if len(cells) > n_cells:
        raise ValueError("cells must not outnumber n_cells")
    if not cells:
        return (
            f"{count_of(0, n_cells, 'cell').capitalize()} is that close to chance, so no rank "
            "below owes its place to an encoder that learnt nothing about the task."
        )
    tasks = list(dict.fromkeys(t for t, _ in cells))
    encoders = list(dict.fromkeys(e for _, e in cells))
    one_enc = len(encoders) == 1
    head = count_of(len(cells), n_cells, "cell")
    return (
        f"{head[0].upper()}{head[1:]} "
        f"{verb(len(cells), 'falls', 'fall')} there, from {count_noun(len(encoders), 'encoder')} "
        f"({series(encoders)}) on {series(tasks)}. "
        f"{'Its' if len(cells) == 1 else 'Their'} ranks, and the flips and values of tau "
        f"{'it enters' if len(cells) == 1 else 'they enter'}, say nothing about "
        f"{'that encoder' if one_enc else 'those encoders'} on "
        f"{'that task' if len(tasks) == 1 else 'those tasks'}."
    )


def flip_sentence(n_flips, n_pairs):
    """The flips among the separated comparisons, and the distinct pairs of encoders they involve.

    Parameters
    ----------
    n_flips : int
        Pairs of (task, task) separations of one pair of encoders in opposite directions.
    n_pairs : int
        Distinct pairs of encoders among them (``<= n_flips``, ``>= 1`` when ``n_flips`` is).

    Returns
    -------
    str
        A clause starting "there is" or "there are".

    Raises
    ------
    ValueError
        If the counts are inconsistent.
    """
    n_flips, n_pairs = _count(n_flips, "n_flips"), _count(n_pairs, "n_pairs")
    if n_pairs > n_flips or (n_flips > 0) != (n_pairs > 0):
        raise ValueError("n_pairs must be between 1 and n_flips when there are flips, else 0")
    if n_flips == 0:
        return (
            "there is no flip: no pair of encoders is separated in opposite directions by two tasks"
        )
    if n_flips == 1:
        return "there is 1 flip, of 1 pair of encoders"
    pairs = count_noun(n_pairs, "distinct pair of encoders", "distinct pairs of encoders")
    return f"there are {n_flips:,d} flips, involving {pairs}"


def protocol_flip_sentence(n_tasks_with, n_tasks, n_flips, n_comparisons):
    """On how many tasks the k-NN and the probe reverse a separated pair, and how often.

    Parameters
    ----------
    n_tasks_with, n_tasks : int
        Tasks with at least one protocol flip, and all tasks.
    n_flips : int
        Protocol flips in all (``>= n_tasks_with``; 0 exactly when ``n_tasks_with`` is).
    n_comparisons : int
        Comparisons of two encoders on one task, ``>= n_flips``.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If the counts are inconsistent.
    """
    a, t, f, c = (
        _count(v, k)
        for v, k in (
            (n_tasks_with, "n_tasks_with"),
            (n_tasks, "n_tasks"),
            (n_flips, "n_flips"),
            (n_comparisons, "n_comparisons"),
        )
    )
    if a > t or f < a or (f > 0) != (a > 0) or f > c:
        raise ValueError("need n_tasks_with <= n_tasks, n_tasks_with <= n_flips <= n_comparisons")
    if f == 0:
        return (
            f"On {count_of(0, t, 'task')} do the two protocols reverse a separated "
            "pair, "
            f"among the {c:,d} comparisons of two encoders on one task."
        )
    where = count_of(a, t, "task")
    return (
        f"On {where} the two protocols reverse at least one separated pair: "
        f"{count_noun(f, 'protocol flip')} in all, among the {c:,d} comparisons of two encoders on "
        "one task."
    )


def range_counts(n_above0, n_below1, n_tasks):
    """On how many tasks the allowed range of tau lies above zero, and stays below one.

    Parameters
    ----------
    n_above0, n_below1, n_tasks : int
        Tasks whose range lies entirely above zero, whose top is below one, and all tasks.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If a count exceeds ``n_tasks``.
    """
    a, b, t = _count(n_above0, "n_above0"), _count(n_below1, "n_below1"), _count(n_tasks, "n_tasks")
    if a > t or b > t:
        raise ValueError("n_above0 and n_below1 must be <= n_tasks")
    return (
        f"The range lies entirely above zero on {count_of(a, t, 'task')}, where the two orders are "
        f"shown to agree in part, and its top stays below one on {count_of(b, t, 'task')}, where "
        "the orders are shown to differ somewhere, which is what a protocol flip says pair by pair."
    )


def best_block_sentence(
    name, best_block, last_block, best_value, last_value, interval=None, digits=2
):
    """Which block of an encoder reads out best, against its last block.

    Parameters
    ----------
    name : str
        The encoder.
    best_block, last_block : int
        The best block (1-based) and the last one.
    best_value, last_value : float
        Their scores.
    interval : (float, float), optional
        The paired interval of best minus last, quoted when the best is an earlier block.
    digits : int, default 2
        Decimals of the scores.

    Returns
    -------
    str
        "for <name> the last block, block <n>, is best (<value>)" when the best is the last
        block; otherwise the best block with both values and, if given, the interval.

    Raises
    ------
    ValueError
        If a block is not a whole number >= 1 or ``best_block > last_block``.
    """
    (name,) = _names([name], "name")
    best_block, last_block = _count(best_block, "best_block"), _count(last_block, "last_block")
    if best_block < 1 or best_block > last_block:
        raise ValueError("need 1 <= best_block <= last_block")
    if best_block == last_block:
        return (
            f"for {name} the last block, block {last_block}, is best ({number(best_value, digits)})"
        )
    text = (
        f"for {name} it is block {best_block}, at {number(best_value, digits)} against "
        f"{number(last_value, digits)} for the last block"
    )
    if interval is not None:
        lo, hi = interval
        lo, hi = number(lo, digits), number(hi, digits)
        text += f" (paired interval of the difference from {lo} to {hi})"
    return text
