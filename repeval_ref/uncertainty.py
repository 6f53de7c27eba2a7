"""How much a top-1 number moves by chance: intervals and paired tests.

Book: chapter ``book/noise.md`` (honest error bars); seed 000, "How much a top-1
number moves by chance" and the warning "Tuning on the test set".

Two models A and B are scored on the same ``n`` test images; ``a_i, b_i`` are 1 when
the model gets image ``i`` right. The four cells of the paired outcome are indexed
``2 a + b``: 0 both wrong, 1 only B right, 2 only A right, 3 both right.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy import integrate, stats

from ._validation import (
    as_float_array,
    check_bool_vector,
    check_int,
    check_positive,
    check_probability_level,
    check_rng,
)

__all__ = [
    "wilson_interval",
    "binomial_standard_error",
    "paired_standard_error",
    "mcnemar_exact",
    "paired_bootstrap_ci",
    "expected_max_of_normals",
    "item_bootstrap_ci",
    "paired_item_bootstrap_ci",
    "paired_comparison",
    "prediction_verdict",
]

_Z95 = 1.959963984540054


def _pair(a_correct, b_correct):
    a = check_bool_vector(a_correct, "a_correct")
    b = check_bool_vector(b_correct, "b_correct", n=a.shape[0])
    return a, b


def _bootstrap_args(n_boot, rng, level):
    """The checked replicate count (``>= 1``), random generator and confidence level."""
    return (check_int(n_boot, "n_boot", minimum=1), check_rng(rng), check_probability_level(level))


def _percentile_interval(values, level):
    """``(lo, hi) = np.percentile(values, [100 (1 - level) / 2, 100 (1 + level) / 2])``."""
    lo, hi = np.percentile(values, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(lo), float(hi)


def wilson_interval(k, n, z=_Z95):
    """Wilson score interval for a binomial proportion ``k / n``.

    With ``p = k / n``::

        centre = (p + z^2 / (2n)) / (1 + z^2 / n),
        half   = z sqrt(p (1 - p) / n + z^2 / (4 n^2)) / (1 + z^2 / n),

    and the interval is ``[centre - half, centre + half]``. It inverts the normal test
    rather than plugging in ``p``, so it stays inside [0, 1]; rounding is clipped so
    that ``lo`` is exactly 0.0 at ``k = 0`` and ``hi`` exactly 1.0 at ``k = n``.

    Parameters
    ----------
    k : int
        Number of successes, ``0 <= k <= n``.
    n : int
        Number of trials, ``>= 1``.
    z : float, default 1.959963984540054
        Normal quantile (the default gives a 95 percent interval); ``> 0``.

    Returns
    -------
    (float, float)
        ``(lo, hi)``.

    Notes
    -----
    Book ``book/noise.md``; seed 000, "How much a top-1 number moves by chance".
    """
    n = check_int(n, "n", minimum=1)
    k = check_int(k, "k", minimum=0, maximum=n)
    z = check_positive(z, "z")
    p = k / n
    z2 = z * z
    if z2 / n <= 1.0:
        denom = 1.0 + z2 / n
        centre = (p + z2 / (2 * n)) / denom
        half = z * np.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    else:
        # the same formulas multiplied through by n / z^2 = r2, so that a huge z
        # (z^2 overflowing to inf) gives the limit (0, 1) instead of inf / inf = NaN
        r2 = n / z / z
        centre = (p * r2 + 0.5) / (r2 + 1.0)
        half = np.sqrt(p * (1.0 - p) * r2 + 0.25) / (r2 + 1.0)
    lo = 0.0 if k == 0 else min(max(centre - half, 0.0), 1.0)
    hi = 1.0 if k == n else min(max(centre + half, 0.0), 1.0)
    return float(lo), float(hi)


def binomial_standard_error(p, n):
    """Standard error ``sqrt(p (1 - p) / n)`` of an accuracy ``p`` measured on ``n`` images.

    Parameters
    ----------
    p : float
        Accuracy in [0, 1].
    n : int
        Number of test images, ``>= 1``.

    Returns
    -------
    float
        ``sqrt(p (1 - p) / n)``, a share like ``p``.

    Notes
    -----
    Book ``book/noise.md``; seed 000, "How much a top-1 number moves by chance".
    """
    p = check_positive(p, "p", allow_zero=True)
    if p > 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    n = check_int(n, "n", minimum=1)
    return float(np.sqrt(p * (1.0 - p) / n))


def paired_standard_error(a_correct, b_correct):
    """Standard error of the paired accuracy gain ``mean(b) - mean(a)``.

    Each image contributes ``b_i - a_i`` in {-1, 0, 1}; its square is 1 exactly on
    discordant images, so one difference has variance ``delta - g^2`` with ``delta``
    the discordant fraction and ``g`` the gain, and the mean over ``n`` images has
    standard error ``sqrt((delta - g^2) / n)``.

    Parameters
    ----------
    a_correct, b_correct : array_like of 0/1 or bool, shape (n,)
        Per-image correctness of models A and B on the same images.

    Returns
    -------
    float
        The standard error of the gain, a share like the accuracies.

    Notes
    -----
    Book ``book/noise.md``; seed 000, "How much a top-1 number moves by chance".
    """
    a, b = _pair(a_correct, b_correct)
    n = a.shape[0]
    delta = np.count_nonzero(a != b) / n
    gain = (np.count_nonzero(b) - np.count_nonzero(a)) / n
    return float(np.sqrt(max(delta - gain * gain, 0.0) / n))


def mcnemar_exact(a_correct, b_correct):
    """Two-sided exact McNemar test of two models scored on the same images.

    With ``n01`` images only B gets right and ``n10`` only A gets right, under the null
    hypothesis each discordant image goes either way with probability 1/2::

        p = min(1, 2 P(X <= min(n01, n10))),    X ~ Binomial(n01 + n10, 1/2),

    and ``p = 1`` when there is no discordant image.

    Parameters
    ----------
    a_correct, b_correct : array_like of 0/1 or bool, shape (n,)

    Returns
    -------
    float
        The p-value.

    Notes
    -----
    Book ``book/noise.md``; seed 000, "How much a top-1 number moves by chance".
    """
    a, b = _pair(a_correct, b_correct)
    n01 = int(np.count_nonzero(~a & b))
    n10 = int(np.count_nonzero(a & ~b))
    m = n01 + n10
    if m == 0:
        return 1.0
    return float(min(1.0, 2.0 * stats.binom.cdf(min(n01, n10), m, 0.5)))


def paired_bootstrap_ci(a_correct, b_correct, n_boot, rng, level=0.95):
    """Paired bootstrap percentile interval of the accuracy gain of B over A.

    Resampling the ``n`` images with replacement only changes how many fall into each
    of the four cells ``2 a + b``, so one replicate is one multinomial draw of the
    cell counts with the observed cell frequencies. Exactly one random call is made::

        counts = rng.multinomial(n, cell_counts / n, size=n_boot)     # (n_boot, 4)
        gains  = (counts[:, 1] - counts[:, 2]) / n

    and the interval is ``np.percentile(gains, [100 (1 - level) / 2,
    100 (1 + level) / 2])`` (NumPy's default linear interpolation).

    Parameters
    ----------
    a_correct, b_correct : array_like of 0/1 or bool, shape (n,)
    n_boot : int
        Number of bootstrap replicates, ``>= 1``.
    rng : numpy.random.Generator or int
        Random generator (an int seeds a new one).
    level : float, default 0.95
        Confidence level in (0, 1).

    Returns
    -------
    (float, float, float)
        ``(gain, lo, hi)`` with ``gain = mean(b) - mean(a)``.

    Notes
    -----
    Book ``book/noise.md``; seed 000, "How much a top-1 number moves by chance".
    """
    a, b = _pair(a_correct, b_correct)
    n_boot, rng, level = _bootstrap_args(n_boot, rng, level)
    n = a.shape[0]
    cell_counts = np.bincount(2 * a.astype(np.int64) + b.astype(np.int64), minlength=4)
    gain = (cell_counts[1] - cell_counts[2]) / n
    counts = rng.multinomial(n, cell_counts / n, size=n_boot)
    gains = (counts[:, 1] - counts[:, 2]) / n
    return (float(gain),) + _percentile_interval(gains, level)


def expected_max_of_normals(m):
    """Expected maximum of ``m`` independent standard normal variables.

    ``E[max] = integral x m phi(x) Phi(x)^(m-1) dx``, with the density of the maximum
    evaluated in log space and integrated numerically (``scipy.integrate.quad``),
    split at the median of the maximum. About 2.26 for ``m = 52``: the optimism of
    reporting the best of 52 equally good configurations, in units of the
    test-set standard deviation (seed 000, "Tuning on the test set").

    Parameters
    ----------
    m : int
        Number of variables, ``>= 1``.

    Returns
    -------
    float

    Notes
    -----
    Book ``book/protocols.md`` ("Tuning on the test set"); seed 000, same section.
    """
    m = check_int(m, "m", minimum=1)
    if m == 1:
        return 0.0
    log_m = np.log(m)

    def integrand(x):
        return x * np.exp(log_m + stats.norm.logpdf(x) + (m - 1) * stats.norm.logcdf(x))

    median = float(stats.norm.ppf(0.5 ** (1.0 / m)))
    left = integrate.quad(integrand, -np.inf, median, epsabs=1e-13, epsrel=1e-12, limit=200)[0]
    right = integrate.quad(integrand, median, np.inf, epsabs=1e-13, epsrel=1e-12, limit=200)[0]
    return float(left + right)


# ------------------------------------------------ bootstrap over items, any additive metric
#: Rows of the (replicates x items) count matrix drawn at once, as a number of entries;
#: the blocks only bound memory, the stream of random numbers is the same (the totals agree
#: up to rounding: BLAS may sum a block of another shape in another order).
_BLOCK_ENTRIES = 1 << 22


def _item_stats(x, name):
    return as_float_array(x, name, ndim=tuple(range(1, 8)))


def _replicate_totals(stats_list, n_boot, rng):
    """Yield, block by block, the per-replicate totals of each array in ``stats_list``.

    One replicate draws the multiplicities of the ``n`` items from
    ``Multinomial(n, (1/n, ..., 1/n))``, which is what resampling ``n`` items with
    replacement does to them; the totals are the multiplicity-weighted sums.
    """
    n = stats_list[0].shape[0]
    flat = [s.reshape(n, -1) for s in stats_list]
    p = np.full(n, 1.0 / n)
    block = max(1, _BLOCK_ENTRIES // n)
    done = 0
    while done < n_boot:
        b = min(block, n_boot - done)
        counts = rng.multinomial(n, p, size=b).astype(np.float64)  # (b, n)
        yield [(counts @ f).reshape((b,) + s.shape[1:]) for f, s in zip(flat, stats_list)]
        done += b


def _apply_metric(metric, totals, m):
    if not callable(metric):
        raise TypeError(f"metric must be callable, got {type(metric).__name__}")
    out = np.asarray(metric(totals), dtype=np.float64)
    if out.shape != (m,):
        raise ValueError(
            f"metric must map totals of shape {totals.shape} to shape ({m},), got shape {out.shape}"
        )
    if not np.all(np.isfinite(out)):
        raise ValueError(
            "metric returned NaN or infinite values (is it defined on every resample?)"
        )
    return out


def item_bootstrap_ci(item_stats, metric, n_boot, rng, level=0.95):
    """Percentile bootstrap interval of a metric built from per-item totals.

    Many metrics are not averages of a per-item score but functions of sums over items:
    mean IoU over tiles is a mean over classes of (total intersection) / (total union),
    precision is (total true positives) / (total predicted positives). Give each item
    (a tile, an image, a query) its additive statistics, ``item_stats[i]``; the metric is
    then ``metric(item_stats.sum(axis=0))``. The bootstrap resamples the ``n`` items with
    replacement. A resample changes only how often each item appears, so one replicate
    is one draw ``w ~ Multinomial(n, (1/n, ..., 1/n))`` of the multiplicities, and its
    totals are ``w @ item_stats``::

        W      = rng.multinomial(n, np.full(n, 1 / n), size=n_boot)     # (n_boot, n)
        values = metric(W @ item_stats)                                 # (n_boot,)

    (drawn in blocks of rows when ``n_boot * n`` is large, which leaves the random stream
    unchanged). The interval is ``np.percentile(values, [100 (1 - level) / 2,
    100 (1 + level) / 2])``. Because whole items are resampled, dependence *within* an
    item (the pixels of one tile) is kept; items must be independent of each other.

    Parameters
    ----------
    item_stats : array_like of float, shape (n, ...)
        Additive statistics of each of the ``n >= 1`` items, e.g. shape (n, 2, K) for
        the intersection and union pixel counts of K classes on n tiles
        (:func:`repeval_ref.tile_iou_counts`); finite.
    metric : callable
        Maps totals of shape ``(m, ...)`` (a leading axis of ``m`` replicates, then the
        shape of one item) to an array of shape ``(m,)``; it must be finite on every
        resample. Every replicate totals exactly ``n`` items, so an average is
        ``totals / n``.
    n_boot, rng, level
        As in :func:`paired_bootstrap_ci`: replicates (``>= 1``), the random generator
        (an int seeds a new one) and the confidence level in (0, 1), default 0.95.

    Returns
    -------
    (float, float, float)
        ``(value, lo, hi)`` with ``value = metric(item_stats.sum(axis=0)[None])[0]``.

    Raises
    ------
    ValueError
        ``item_stats`` empty, of dimension 0 or above 7, or not finite; ``n_boot < 1``;
        ``level`` outside (0, 1); a metric output of the wrong shape or not finite.
    TypeError
        Non-numeric ``item_stats``, a ``metric`` that is not callable, or a bad ``rng``.

    Notes
    -----
    Book ``book/noise.md`` ("A bootstrap over tiles"); seed 000, "Choosing a frozen
    backbone for aerial segmentation" (report mIoU with a bootstrap over validation
    tiles). :func:`paired_bootstrap_ci` is the special case of two 0/1 correctness
    vectors, where only four cells matter.
    """
    stats_ = _item_stats(item_stats, "item_stats")
    n_boot, rng, level = _bootstrap_args(n_boot, rng, level)
    value = _apply_metric(metric, stats_.sum(axis=0)[None], 1)[0]
    values = np.concatenate(
        [_apply_metric(metric, t, t.shape[0]) for (t,) in _replicate_totals([stats_], n_boot, rng)]
    )
    return (float(value),) + _percentile_interval(values, level)


def paired_item_bootstrap_ci(a_stats, b_stats, metric, n_boot, rng, level=0.95):
    """Paired bootstrap interval of ``metric(B) - metric(A)`` on the same items.

    Both models are scored on the same ``n`` items (tiles, images). Each replicate draws
    one set of multiplicities ``w ~ Multinomial(n, (1/n, ..., 1/n))`` and applies it to
    both: the replicate's gain is ``metric(w @ b_stats) - metric(w @ a_stats)``. Using
    the same resample for both is what makes the bootstrap paired: an item that is hard
    for both models moves both totals together and cancels in the difference.

    Parameters
    ----------
    a_stats, b_stats : array_like of float, shape (n, ...)
        Additive per-item statistics of models A and B on the same ``n`` items (same
        first axis; as in :func:`item_bootstrap_ci`).
    metric, n_boot, rng, level
        As in :func:`item_bootstrap_ci`; ``metric`` is applied to the totals of A and of B
        separately.

    Returns
    -------
    (float, float, float)
        ``(gain, lo, hi)`` with ``gain = metric(B totals) - metric(A totals)``.

    Raises
    ------
    ValueError
        As :func:`item_bootstrap_ci`, and when ``b_stats`` has a different number of
        items than ``a_stats``.
    TypeError
        As :func:`item_bootstrap_ci`.

    Notes
    -----
    Book ``book/noise.md`` ("A bootstrap over tiles"); seed 000, "Choosing a frozen
    backbone for aerial segmentation".
    """
    a = _item_stats(a_stats, "a_stats")
    b = _item_stats(b_stats, "b_stats")
    if b.shape[0] != a.shape[0]:
        raise ValueError(f"b_stats has {b.shape[0]} items but a_stats has {a.shape[0]}")
    n_boot, rng, level = _bootstrap_args(n_boot, rng, level)
    gain = (
        _apply_metric(metric, b.sum(axis=0)[None], 1)[0]
        - _apply_metric(metric, a.sum(axis=0)[None], 1)[0]
    )
    gains = np.concatenate(
        [
            _apply_metric(metric, tb, tb.shape[0]) - _apply_metric(metric, ta, ta.shape[0])
            for ta, tb in _replicate_totals([a, b], n_boot, rng)
        ]
    )
    return (float(gain),) + _percentile_interval(gains, level)


# ------------------------------------------------------------- one paired comparison, in words
SHOWN = "shown"
NOT_SHOWN = "not shown at this scale"

#: the four readings of an interval against a predicted effect (:func:`prediction_verdict`)
NOT_DETECTED = "not detected"
CONTRADICTED_IN_SIZE = "contradicted in size"
OPPOSITE = "opposite"


def paired_comparison(a_correct, b_correct, n_boot, rng, level=0.95, power=0.8):
    """Everything one paired accuracy comparison should report, and whether it shows a difference.

    The gain of B over A is called ``"shown"`` only when its paired bootstrap interval
    (:func:`paired_bootstrap_ci`) excludes zero; otherwise the verdict is ``"not shown
    at this scale"``. Alongside come the exact McNemar p-value (:func:`mcnemar_exact`),
    the counts of discordant items, and what a rerun would need: the smallest
    difference this many items can detect at the observed discordance
    (:func:`repeval_ref.power.paired_detectable_difference`), and the items needed to
    detect the observed difference at the observed discordance
    (:func:`repeval_ref.power.paired_sample_size`), both at two-sided level
    ``1 - level`` with the given power.

    Parameters
    ----------
    a_correct, b_correct : array_like of 0/1 or bool, shape (n,)
        Per-item correctness of models A and B on the same items.
    n_boot : int
        Bootstrap replicates, ``>= 1``.
    rng : numpy.random.Generator or int
    level : float, default 0.95
        Confidence level of the interval, in (0, 1); the power calculations use
        ``alpha = 1 - level``.
    power : float, default 0.8
        Power of the two sample-size numbers, in [0.5, 1).

    Returns
    -------
    dict
        ``gain`` (``mean(b) - mean(a)``), ``lo``, ``hi`` (paired bootstrap interval),
        ``mcnemar_p``, ``n``, ``only_a`` and ``only_b`` (items only A, only B gets
        right), ``discordance`` (``(only_a + only_b) / n``), ``verdict`` (``"shown"``
        or ``"not shown at this scale"``), ``detectable`` (smallest detectable
        difference at ``n`` items; ``inf`` when none is) and ``needed_n`` (items
        needed for the observed gain; ``None`` when the gain is zero).

    Raises
    ------
    ValueError
        As :func:`paired_bootstrap_ci`, or ``power`` outside [0.5, 1).

    Notes
    -----
    Book ``book/noise.md``; seed 000, "How much a top-1 number moves by chance".
    Connor (1987) for the sample sizes (see :mod:`repeval_ref.power`).
    """
    from .power import paired_detectable_difference, paired_sample_size

    a, b = _pair(a_correct, b_correct)
    n_boot, rng, level = _bootstrap_args(n_boot, rng, level)
    gain, lo, hi = paired_bootstrap_ci(a, b, n_boot, rng, level)
    n = a.shape[0]
    only_a = int(np.count_nonzero(a & ~b))
    only_b = int(np.count_nonzero(~a & b))
    psi = (only_a + only_b) / n
    alpha = 1.0 - level
    # power is validated here even when the discordance leaves nothing to compute
    detectable = paired_detectable_difference(n, psi if psi > 0 else 1.0, alpha, power)
    if psi == 0:
        detectable = float("inf")
    needed = None if gain == 0 else paired_sample_size(abs(gain), psi, alpha, power)
    shown = lo > 0 or hi < 0
    return {
        "gain": gain,
        "lo": lo,
        "hi": hi,
        "mcnemar_p": mcnemar_exact(a, b),
        "n": int(n),
        "only_a": only_a,
        "only_b": only_b,
        "discordance": float(psi),
        "verdict": SHOWN if shown else NOT_SHOWN,
        "detectable": detectable,
        "needed_n": needed,
    }


def prediction_verdict(lo, hi, predicted):
    """Read an interval for an effect against a prediction of its size and sign.

    A published result predicts that an effect (a gain of B over A, say) is about
    ``predicted``; a run measures the interval ``[lo, hi]`` for it. The reading is one of:

    * ``"shown"``: the interval excludes 0 on the predicted side (``lo > 0`` for a
      positive prediction, ``hi < 0`` for a negative one);
    * ``"opposite"``: the interval excludes 0 on the other side, so the run contradicts
      the prediction's sign;
    * ``"contradicted in size"``: the interval covers 0 but excludes ``predicted``, so an
      effect as large as predicted is ruled out although none is shown either way;
    * ``"not detected"``: the interval covers both 0 and ``predicted``: the run is too
      small to tell.

    Parameters
    ----------
    lo, hi : float
        The interval's ends, finite, ``lo <= hi``.
    predicted : float
        The predicted effect, finite and non-zero (its sign is the predicted direction).

    Returns
    -------
    dict
        ``verdict`` (one of the four strings above), ``lo``, ``hi``, ``predicted``, and
        ``size_in_interval`` (whether ``lo <= predicted <= hi``: a "shown" effect may
        still be smaller or larger than predicted).

    Raises
    ------
    ValueError
        A non-finite or non-real bound or prediction, ``lo > hi``, or ``predicted == 0``.

    Examples
    --------
    >>> prediction_verdict(0.01, 0.05, 0.03)["verdict"]
    'shown'
    >>> prediction_verdict(-0.006, 0.009, 0.07)["verdict"]
    'contradicted in size'
    """
    values = {}
    for name, value in (("lo", lo), ("hi", hi), ("predicted", predicted)):
        if (
            isinstance(value, (bool, np.bool_))
            or not isinstance(value, (numbers.Real, np.floating, np.integer))
            or not np.isfinite(value)
        ):
            raise ValueError(f"{name} must be a finite real number, got {value!r}")
        values[name] = float(value)
    lo, hi, predicted = values["lo"], values["hi"], values["predicted"]
    if lo > hi:
        raise ValueError(f"lo must be <= hi, got lo={lo!r} > hi={hi!r}")
    if predicted == 0:
        raise ValueError("predicted must be non-zero: its sign is the predicted direction")
    sign = 1.0 if predicted > 0 else -1.0
    if lo > 0 or hi < 0:
        verdict = SHOWN if (lo > 0) == (sign > 0) else OPPOSITE
    else:
        verdict = NOT_DETECTED if lo <= predicted <= hi else CONTRADICTED_IN_SIZE
    return {
        "verdict": verdict,
        "lo": lo,
        "hi": hi,
        "predicted": predicted,
        "size_in_interval": bool(lo <= predicted <= hi),
    }
