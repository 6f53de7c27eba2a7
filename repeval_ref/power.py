"""Power of an accuracy comparison: the smallest difference a test set of n items can detect.

Book: chapter ``book/noise.md`` (honest error bars); seed 000, "How much a top-1 number
moves by chance".

Two models A and B are scored on the same ``n`` test items. Write ``p01`` for the share
of items only B gets right and ``p10`` for the share only A gets right; the accuracy
difference is ``delta = p01 - p10`` and the discordance is ``psi = p01 + p10``, the share
of items on which the two disagree. McNemar's test looks only at the discordant items.
With ``z_a = Phi^-1(1 - alpha / 2)`` and ``z_b = Phi^-1(power)``, the normal
approximation of Connor (1987) gives the items needed to detect ``delta`` at two-sided
level ``alpha`` with the given power::

    n = (z_a sqrt(psi) + z_b sqrt(psi - delta^2))^2 / delta^2.                       (1)

Solved for ``delta`` (the root with ``sqrt(n) delta >= z_a sqrt(psi)``), it gives the
smallest detectable difference at ``n`` items::

    delta_min = sqrt(psi) (sqrt(n) z_a + z_b sqrt(n - z_a^2 + z_b^2)) / (n + z_b^2),   (2)

defined when ``n >= z_a^2`` and ``delta_min <= psi`` (a difference can never exceed the
discordance). ``delta_min`` grows with ``psi``: models that disagree on more items need a
larger difference to be told apart, which is why the discordance must be stated. When it
is unknown, :func:`discordance_upper_bound` bounds it from the two accuracies, and the
``delta_min`` it gives is then an upper bound too (conservative).

For comparison, :func:`unpaired_detectable_difference` is the same question for two
*independent* test sets of ``n`` items each (Cohen's arcsine effect size ``h``, as in
``statsmodels.stats.power.NormalIndPower``). Pairing helps exactly when the models agree
on most items, which is the usual case for two encoders.

Defaults: ``alpha = 0.05`` (a 95 % two-sided test) and ``power = 0.8``.

References: Connor, R. J. (1987), "Sample size for testing differences in proportions
for the paired-sample design", Biometrics 43(1), 207-211; Cohen, J. (1988), Statistical
Power Analysis for the Behavioral Sciences, 2nd ed., chapter 6.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ._validation import check_int, check_positive, check_probability_level

__all__ = [
    "paired_sample_size",
    "paired_detectable_difference",
    "discordance_upper_bound",
    "unpaired_detectable_difference",
]


def _z(alpha, power):
    alpha = check_probability_level(alpha, "alpha")
    if isinstance(power, bool) or not isinstance(power, (int, float, np.floating, np.integer)):
        raise TypeError(f"power must be a real number, got {power!r}")
    power = float(power)
    if not (0.5 <= power < 1.0):
        raise ValueError(f"power must lie in [0.5, 1), got {power}")
    return float(stats.norm.ppf(1.0 - alpha / 2.0)), float(stats.norm.ppf(power))


def _share(value, name):
    value = check_positive(value, name, allow_zero=True)
    if value > 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def paired_sample_size(difference, discordance, alpha=0.05, power=0.8):
    """Test items needed to detect a paired accuracy difference (Connor 1987, formula (1)).

    Parameters
    ----------
    difference : float
        The absolute accuracy difference ``|p01 - p10|`` to detect, ``> 0``.
    discordance : float
        The share of items on which the two models disagree, ``p01 + p10``, with
        ``difference <= discordance <= 1``.
    alpha : float, default 0.05
        Two-sided level of McNemar's test, in (0, 1).
    power : float, default 0.8
        Probability of rejecting when the difference is real, in [0.5, 1).

    Returns
    -------
    int
        The smallest whole number of items at least equal to formula (1).

    Raises
    ------
    ValueError
        ``difference`` not in (0, 1], ``discordance`` not in [difference, 1], or
        ``alpha``/``power`` out of range.
    """
    delta = _share(difference, "difference")
    if delta <= 0:
        raise ValueError(f"difference must be > 0, got {delta}")
    psi = _share(discordance, "discordance")
    if psi < delta:
        raise ValueError(
            f"discordance ({psi}) must be at least the difference ({delta}): "
            "the accuracies can only differ on items where the models disagree"
        )
    z_a, z_b = _z(alpha, power)
    n = (z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - delta * delta, 0.0))) ** 2 / (
        delta * delta
    )
    return int(math.ceil(n - 1e-9))


def paired_detectable_difference(n, discordance, alpha=0.05, power=0.8):
    """Smallest paired accuracy difference McNemar's test detects on ``n`` items (formula (2)).

    Parameters
    ----------
    n : int
        Number of test items both models are scored on, ``>= 1``.
    discordance : float
        Share of items on which the two models disagree, in (0, 1]; use
        :func:`discordance_upper_bound` when only the accuracies are known.
    alpha, power : float
        As in :func:`paired_sample_size`: the two-sided level in (0, 1), default 0.05,
        and the target power in [0.5, 1), default 0.8.

    Returns
    -------
    float
        ``delta_min`` of formula (2), as a share (multiply by 100 for points); ``inf``
        when no difference is detectable (``n < z_a^2`` or ``delta_min > discordance``:
        too few discordant items for the test ever to reach the power).

    Raises
    ------
    ValueError
        ``n < 1``, ``discordance`` not in (0, 1], or ``alpha``/``power`` out of range.

    Notes
    -----
    Connor (1987), Biometrics 43, 207-211, solved for the difference; see the module
    docstring.
    """
    n = check_int(n, "n", minimum=1)
    psi = _share(discordance, "discordance")
    if psi <= 0:
        raise ValueError("discordance must be > 0: models that never disagree cannot be told apart")
    z_a, z_b = _z(alpha, power)
    if n < z_a * z_a:
        return math.inf
    delta = (
        math.sqrt(psi)
        * (math.sqrt(n) * z_a + z_b * math.sqrt(n - z_a * z_a + z_b * z_b))
        / (n + z_b * z_b)
    )
    return float(delta) if delta <= psi else math.inf


def discordance_upper_bound(accuracy_a, accuracy_b):
    """Largest share of items on which two models with these accuracies can disagree.

    With ``p11`` the share both get right, the discordance is ``a + b - 2 p11``, and
    ``p11 >= max(0, a + b - 1)``, so::

        discordance <= min(a + b, 2 - a - b).

    Parameters
    ----------
    accuracy_a, accuracy_b : float
        Accuracies in [0, 1].

    Returns
    -------
    float
        The bound; it is reached when the errors of the two models overlap as little as
        possible. Used in :func:`paired_detectable_difference` it gives an upper bound
        on the detectable difference.

    Raises
    ------
    ValueError
        An accuracy outside [0, 1].
    """
    a = _share(accuracy_a, "accuracy_a")
    b = _share(accuracy_b, "accuracy_b")
    return float(min(a + b, 2.0 - a - b))


def unpaired_detectable_difference(n, accuracy, alpha=0.05, power=0.8):
    """Smallest accuracy gain over ``accuracy`` detectable with two independent test sets of ``n``
    items.

    The two-sample test of two proportions on the arcsine scale: with Cohen's effect
    size ``h = 2 asin(sqrt(p + delta)) - 2 asin(sqrt(p))``, the power against the far
    tail neglected, the test reaches the power when ``h = (z_a + z_b) sqrt(2 / n)``, so::

        delta_min = sin(asin(sqrt(p)) + h / 2)^2 - p.

    Parameters
    ----------
    n : int
        Items in each of the two test sets, ``>= 1``.
    accuracy : float
        Accuracy ``p`` of the baseline, in [0, 1].
    alpha, power : float
        The two-sided level and the target power, in the ranges and with the defaults of
        :func:`paired_sample_size`.

    Returns
    -------
    float
        ``delta_min`` as a share; ``inf`` when even an accuracy of 1 would not be
        detected.

    Raises
    ------
    ValueError
        ``n < 1``, ``accuracy`` outside [0, 1], or ``alpha``/``power`` out of range.

    Notes
    -----
    Cohen (1988), chapter 6; ``statsmodels.stats.power.NormalIndPower`` with
    ``statsmodels.stats.proportion.proportion_effectsize`` computes the same ``h``.
    """
    n = check_int(n, "n", minimum=1)
    p = _share(accuracy, "accuracy")
    z_a, z_b = _z(alpha, power)
    h = (z_a + z_b) * math.sqrt(2.0 / n)
    angle = math.asin(math.sqrt(p)) + h / 2.0
    if angle > math.pi / 2:
        return math.inf
    return float(math.sin(angle) ** 2 - p)
