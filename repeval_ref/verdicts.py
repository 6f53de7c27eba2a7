"""Verdicts in plain words: rules that say what went wrong with an evaluation, and why.

Each rule takes plain numbers or arrays and returns a :class:`dict` with

* ``name``: a short identifier (``"chance"``, ``"collapse"``, ...);
* ``fired``: whether the rule applies;
* ``message``: one sentence in plain words with the numbers it rests on (also when
  the rule did not fire, saying why not);
* ``rule``: the rule itself, stated once, with its thresholds.

``repeval report`` and ``repeval leaderboard`` print the verdicts that fired, so a
reader who reads nothing else learns what went wrong. The thresholds are deliberate
round numbers, not fitted values; each is stated in the rule text.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array

__all__ = [
    "chance_verdict",
    "collapse_verdict",
    "spectrum_cliff_verdict",
    "dropped_features_verdict",
    "few_per_class_verdict",
    "unseen_labels_verdict",
]

COLLAPSE_RANK = 2.0
COLLAPSE_COSINE = 0.95
CLIFF_RATIO = 1e4
ZERO_EIGEN = 1e-12
MIN_PER_CLASS = 20


def _out(name, fired, message, rule, **numbers):
    return {
        "name": name,
        "fired": bool(fired),
        "message": message,
        "rule": rule,
        "numbers": numbers,
    }


def _check_count(value, name, minimum):
    """Check that ``value`` is an integer ``>= minimum`` (1 or 0), else ``ValueError``.

    The message reads ``"{name} must be a positive integer"`` (``minimum=1``) or
    ``"... a non-negative integer"`` (``minimum=0``). A count of the wrong type is a
    ``ValueError`` here too, since the verdicts are fed numbers read from a report.
    """
    if not (isinstance(value, (int, np.integer)) and value >= minimum):
        kind = "positive" if minimum == 1 else "non-negative"
        raise ValueError(f"{name} must be a {kind} integer, got {value!r}")


def chance_verdict(correct, n, test_labels, protocol="accuracy"):
    """Does an accuracy lie at or below chance?

    Chance is the accuracy of always answering the most frequent TEST class (for
    balanced classes ``1 / K``). The rule fires when the lower end of the 95 % Wilson
    interval of the accuracy is at or below chance, i.e. the test set does not show the
    protocol doing better than that constant answer.

    Parameters
    ----------
    correct : int
        Correct test predictions, ``0 <= correct <= n``.
    n : int
        Test predictions, ``n >= 1``.
    test_labels : array_like of int, shape (n_test,)
        The test labels (for the chance level).
    protocol : str
        Name of the protocol, used in the message.

    Returns
    -------
    dict
        See the module docstring; ``numbers`` holds ``accuracy``, ``wilson95`` and ``chance``.
    """
    from .uncertainty import wilson_interval

    _check_count(n, "n", 1)
    if not (isinstance(correct, (int, np.integer)) and 0 <= correct <= n):
        raise ValueError(f"correct must be an integer in [0, n], got {correct!r}")
    labels = np.asarray(test_labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError("test_labels must be a non-empty 1-D array")
    _, counts = np.unique(labels, return_counts=True)
    chance = float(counts.max() / labels.size)
    lo, hi = wilson_interval(int(correct), int(n))
    acc = correct / n
    rule = (
        "fires when the lower end of the 95% Wilson interval of the accuracy is at or "
        "below chance, the accuracy of always answering the most frequent TEST class"
    )
    where = "below" if hi < chance else "at"
    if lo <= chance:
        msg = (
            f"{protocol} is {where} chance: {100 * acc:.2f}% [{100 * lo:.2f}, {100 * hi:.2f}] "
            f"against a chance level of {100 * chance:.2f}% (most frequent TEST class); these "
            "features do not let this protocol tell the classes apart"
        )
    else:
        msg = (
            f"{protocol} is above chance: {100 * acc:.2f}%, lower 95% bound {100 * lo:.2f}% "
            f"> chance {100 * chance:.2f}%"
        )
    return _out("chance", lo <= chance, msg, rule, accuracy=acc, wilson95=[lo, hi], chance=chance)


def collapse_verdict(rankme, mean_cosine, d, centred_dimension=None):
    """Have the features collapsed to (nearly) one direction?

    Fires when the effective rank (RankMe) is at most 2 or the mean pairwise cosine
    is at least 0.95. Both are computed without centring, so a large common offset of
    otherwise healthy features also fires it; when ``centred_dimension`` (for example
    the participation ratio of the centred covariance) exceeds 2, the message says that
    an offset, not a collapse of the spread, is the likely cause.

    Parameters
    ----------
    rankme : float or None
        RankMe of the features (``None`` when undefined).
    mean_cosine : float or None
        Mean pairwise cosine similarity of the rows (``None`` when undefined).
    d : int
        Feature dimension.
    centred_dimension : float or None
        A dimension measured after centring (participation ratio), optional.

    Returns
    -------
    dict
    """
    _check_count(d, "d", 1)
    for name, v in (("rankme", rankme), ("mean_cosine", mean_cosine)):
        if v is not None and not np.isfinite(v):
            raise ValueError(f"{name} must be finite or None, got {v!r}")
    rule = (
        f"fires when the effective rank (RankMe) is at most {COLLAPSE_RANK:g} or the mean "
        f"pairwise cosine similarity is at least {COLLAPSE_COSINE:g}"
    )
    low_rank = rankme is not None and rankme <= COLLAPSE_RANK
    aligned = mean_cosine is not None and mean_cosine >= COLLAPSE_COSINE
    rk = "n/a" if rankme is None else f"{rankme:.2f}"
    cs = "n/a" if mean_cosine is None else f"{mean_cosine:.4f}"
    if low_rank or aligned:
        msg = (
            f"the features look collapsed: effective rank (RankMe) {rk} of d = {d}, mean "
            f"pairwise cosine {cs}; nearly every row points the same way, so cosine-based "
            "protocols (k-NN, low-shot) see one cluster"
            + (
                f"; after centring they spread over about {centred_dimension:.1f} directions "
                "(participation ratio), so a large common offset is the likely cause: centre "
                "the features before cosine k-NN"
                if centred_dimension is not None and centred_dimension > COLLAPSE_RANK
                else ""
            )
        )
    else:
        msg = f"no collapse: effective rank (RankMe) {rk} of d = {d}, mean pairwise cosine {cs}"
    return _out(
        "collapse",
        low_rank or aligned,
        msg,
        rule,
        rankme=rankme,
        mean_cosine=mean_cosine,
        d=d,
        centred_dimension=centred_dimension,
    )


def spectrum_cliff_verdict(eigenvalues):
    """Does the covariance spectrum fall off a cliff?

    Fires when, among the eigenvalues of the centred covariance (largest first), one
    is at least ``10^4`` times smaller than the one before it, or when some
    eigenvalues are numerically zero (below ``1e-12`` of the largest): the features
    then span fewer directions than their dimension, and metrics that fit the
    spectrum's decay across the cliff (alpha-ReQ) or divide by its smallest values
    (condition number, isotropy ratio) describe the cliff rather than the features.

    Parameters
    ----------
    eigenvalues : array_like of float, shape (m,)
        Eigenvalues of the centred covariance (or Gram) matrix, any order, ``>= 0``
        up to rounding; at most ``min(n - 1, d)`` of them can be non-zero.

    Returns
    -------
    dict
        ``numbers``: ``position`` (the eigenvalue index after which the cliff lies,
        1-based), ``ratio`` and ``numerically_zero`` (count).
    """
    lam = as_float_array(eigenvalues, "eigenvalues", ndim=1)
    lam = np.sort(np.maximum(lam, 0.0))[::-1]
    rule = (
        f"fires when an eigenvalue of the centred covariance is at least {CLIFF_RATIO:.0e} "
        f"times smaller than the one before it, or some eigenvalues are numerically zero "
        f"(below {ZERO_EIGEN:g} of the largest)"
    )
    if lam[0] <= 0:
        return _out(
            "spectrum_cliff",
            True,
            "every eigenvalue of the covariance is zero: the features are constant",
            rule,
            position=0,
            ratio=None,
            numerically_zero=int(lam.size),
        )
    zero = lam <= ZERO_EIGEN * lam[0]
    pos = lam[~zero]
    ratios = pos[:-1] / pos[1:] if pos.size > 1 else np.zeros(0)
    i = int(np.argmax(ratios)) if ratios.size else -1
    big = ratios.size and ratios[i] >= CLIFF_RATIO
    n_zero = int(zero.sum())
    if big:
        msg = (
            f"the spectrum has a cliff: eigenvalue {i + 2} is {ratios[i]:.3g} times smaller "
            f"than eigenvalue {i + 1}, so the features span about {i + 1} directions; "
            "spectrum-fitting metrics (alpha-ReQ, condition number) describe the cliff"
        )
        return _out(
            "spectrum_cliff",
            True,
            msg,
            rule,
            position=i + 1,
            ratio=float(ratios[i]),
            numerically_zero=n_zero,
        )
    if n_zero:
        msg = (
            f"the spectrum ends in a cliff: {n_zero} of {lam.size} eigenvalues are numerically "
            f"zero, so the features span only {pos.size} direction(s)"
        )
        return _out(
            "spectrum_cliff",
            True,
            msg,
            rule,
            position=int(pos.size),
            ratio=None,
            numerically_zero=n_zero,
        )
    worst = f"{ratios[i]:.3g}" if ratios.size else "n/a"
    return _out(
        "spectrum_cliff",
        False,
        f"no spectrum cliff: the largest ratio of consecutive eigenvalues is {worst}",
        rule,
        position=None,
        ratio=float(ratios[i]) if ratios.size else None,
        numerically_zero=0,
    )


def dropped_features_verdict(n_constant, n_zero_rows, d, n):
    """Were constant feature columns dropped, or are some rows all zero?

    Fires when ``n_constant > 0`` (columns constant on the probe's fitting part carry
    no information and are left out of the probe) or ``n_zero_rows > 0`` (rows with no
    direction, for which cosine similarity is undefined).

    Parameters
    ----------
    n_constant, n_zero_rows : int
        Counts, ``>= 0``.
    d, n : int
        Feature dimension and number of rows, for the message.

    Returns
    -------
    dict
    """
    for name, v in (("n_constant", n_constant), ("n_zero_rows", n_zero_rows), ("d", d), ("n", n)):
        _check_count(v, name, 0)
    rule = (
        "fires when some feature columns are constant (dropped from the probe) or some "
        "rows are all zeros (no cosine similarity)"
    )
    parts = []
    if n_constant:
        parts.append(
            f"{n_constant} of {d} feature columns are constant and were dropped from the "
            "linear probe"
            + (" (more than half: check the extraction)" if 2 * n_constant > d else "")
        )
    if n_zero_rows:
        parts.append(
            f"{n_zero_rows} of {n} rows are all zeros, so the cosine-based protocols were skipped"
        )
    msg = "; ".join(parts) if parts else "no constant feature columns and no all-zero rows"
    return _out(
        "dropped_features",
        bool(parts),
        msg,
        rule,
        n_constant=int(n_constant),
        n_zero_rows=int(n_zero_rows),
        d=int(d),
        n=int(n),
    )


def few_per_class_verdict(train_labels, needed=MIN_PER_CLASS):
    """Too few training samples per class for the protocols?

    Fires when the smallest TRAIN class has fewer than ``needed`` samples (default
    20: the largest low-shot protocol draws 20 per class, and the probe's validation
    split keeps only a fifth of each class).

    Parameters
    ----------
    train_labels : array_like of int, shape (n,)
    needed : int, default 20

    Returns
    -------
    dict
    """
    labels = np.asarray(train_labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError("train_labels must be a non-empty 1-D array")
    _check_count(needed, "needed", 1)
    classes, counts = np.unique(labels, return_counts=True)
    j = int(np.argmin(counts))
    small = int(np.sum(counts < needed))
    rule = (
        f"fires when the smallest TRAIN class has fewer than {needed} samples (the "
        f"{needed}-shot protocol needs {needed}; the probe validates on a fifth of each class)"
    )
    if small:
        msg = (
            f"too few samples per class: {small} of {classes.size} TRAIN classes have fewer than "
            f"{needed} (smallest: class {classes[j]} with {counts[j]}); protocols that need more "
            "are skipped and the probe's choice of C rests on few validation samples"
        )
    else:
        msg = f"every TRAIN class has at least {needed} samples (smallest: {counts[j]})"
    return _out(
        "few_per_class",
        small > 0,
        msg,
        rule,
        smallest=int(counts[j]),
        smallest_class=classes[j].item(),
        classes_below=small,
        needed=int(needed),
    )


def unseen_labels_verdict(train_labels, test_labels):
    """Do TEST labels occur that TRAIN never shows?

    Fires when some TEST rows carry a class absent from TRAIN: no protocol trained on
    TRAIN can predict it, so those rows count as errors.

    Parameters
    ----------
    train_labels, test_labels : array_like of int, 1-D

    Returns
    -------
    dict
    """
    tr, te = np.asarray(train_labels), np.asarray(test_labels)
    if tr.ndim != 1 or te.ndim != 1 or tr.size == 0 or te.size == 0:
        raise ValueError("train_labels and test_labels must be non-empty 1-D arrays")
    unseen = np.setdiff1d(np.unique(te), np.unique(tr))
    rows = int(np.isin(te, unseen).sum())
    rule = "fires when some TEST labels never occur in TRAIN"
    if unseen.size:
        shown = ", ".join(str(u) for u in unseen[:5].tolist()) + (
            ", ..." if unseen.size > 5 else ""
        )
        msg = (
            f"{unseen.size} TEST label(s) never occur in TRAIN ({shown}): {rows} of {te.size} "
            f"TEST rows ({100 * rows / te.size:.1f}%) cannot be predicted and count as errors"
        )
    else:
        msg = "every TEST label occurs in TRAIN"
    return _out("unseen_labels", unseen.size > 0, msg, rule, labels=unseen.tolist(), rows=rows)
