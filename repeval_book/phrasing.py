"""Book plumbing: sentences that read right for zero, one and many; numbers as readers write them.

A chapter that builds a sentence from computed values (a count, a list of names, an
interval, a difference) passes them through these helpers before gluing the result, so
that the page never reads "1 have one", "from 0 encoders, on these tasks: none",
"between 1.000 and 1.000", "differ by 0.0e+00" or an integer printed as ``3.0``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["number", "count_noun", "count_of", "series", "span", "difference", "verb"]


def _real(value, name):
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number, got a bool")
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(()).item()
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {type(value).__name__}")
    return value


def _count(n, name="n"):
    n = _real(n, name)
    if isinstance(n, float):
        if not n.is_integer():
            raise ValueError(f"{name} must be a whole number, got {n!r}")
        n = int(n)
    if n < 0:
        raise ValueError(f"{name} must be >= 0, got {n}")
    return int(n)


def number(value, digits=2):
    """Write ``value`` the way a sentence should show it.

    Parameters
    ----------
    value : int or float (or a NumPy scalar)
        The number.
    digits : int, default 2
        Decimal places for a value that is not a whole number.

    Returns
    -------
    str
        A whole number (an ``int``, or a float equal to one) without decimals and with
        thousands separators (``"1,024"``); any other finite value with ``digits``
        decimals (``"0.37"``), ``"-0"`` written as ``"0"``; ``"undefined"`` for NaN and
        ``"infinite"`` / ``"minus infinity"`` for the infinities.

    Raises
    ------
    ValueError
        If ``value`` is not a real number or ``digits`` is not an int >= 0.
    """
    value = _real(value, "value")
    if not isinstance(digits, numbers.Integral) or isinstance(digits, bool) or digits < 0:
        raise ValueError(f"digits must be an int >= 0, got {digits!r}")
    if isinstance(value, float):
        if math.isnan(value):
            return "undefined"
        if math.isinf(value):
            return "infinite" if value > 0 else "minus infinity"
        if value.is_integer():
            value = int(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,d}"
    text = f"{value:,.{int(digits)}f}"
    if float(text.replace(",", "")) == 0.0:
        text = text.lstrip("-")
    return text


def count_noun(n, singular, plural=None, zero="no"):
    """``n`` things, for 0, 1 and many: ``"no encoders"``, ``"1 encoder"``, ``"3 encoders"``.

    Parameters
    ----------
    n : int (or a float equal to one)
        How many, >= 0.
    singular : str
        The noun for one.
    plural : str, optional
        The noun for many (default: ``singular + "s"``).
    zero : str, default "no"
        The word that stands for 0 (``"no"``, ``"none of the"``, or ``"0"``).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``n`` is negative or not a whole number, or a noun is not a non-empty string.
    """
    n = _count(n)
    for name, noun in (("singular", singular), ("plural", plural)):
        if noun is not None and (not isinstance(noun, str) or not noun.strip()):
            raise ValueError(f"{name} must be a non-empty string")
    if not isinstance(zero, str):
        raise ValueError("zero must be a string")
    many = plural if plural is not None else singular + "s"
    if n == 0:
        return f"{zero} {many}".strip()
    if n == 1:
        return f"1 {singular}"
    return f"{n:,d} {many}"


def count_of(n, total, noun, plural=None):
    """``n`` of ``total`` things: ``"1 of the 15 pairs"``, ``"all 15 pairs"``.

    Parameters
    ----------
    n, total : int (or floats equal to whole numbers)
        The part and the whole, ``0 <= n <= total``.
    noun : str
        The noun for one thing.
    plural : str, optional
        The noun for many (default: ``noun + "s"``).

    Returns
    -------
    str
        ``"none of the <total> <plural>"`` for 0 (``"none of the <plural>"`` when ``total``
        is 1), ``"all <total> <plural>"`` when ``n == total``
        (``"the one <noun>"`` when both are 1, ``"both <plural>"`` when both are 2), and
        ``"<n> of the <total> <plural>"`` otherwise. Pair it with :func:`verb` on ``n``.

    Raises
    ------
    ValueError
        If a count is negative or not whole, ``n > total``, or a noun is empty.
    """
    n, total = _count(n, "n"), _count(total, "total")
    if n > total:
        raise ValueError(f"n must be <= total, got {n} > {total}")
    for name, word in (("noun", noun), ("plural", plural)):
        if word is not None and (not isinstance(word, str) or not word.strip()):
            raise ValueError(f"{name} must be a non-empty string")
    many = plural if plural is not None else noun + "s"
    whole = noun if total == 1 else many
    if n == 0:
        return f"none of the {total:,d} {whole}" if total != 1 else f"none of the {many}"
    if n == total:
        if total == 1:
            return f"the one {noun}"
        return f"both {many}" if total == 2 else f"all {total:,d} {many}"
    return f"{n:,d} of the {total:,d} {whole}"


def verb(n, one, many):
    """The verb form agreeing with ``n`` things: ``verb(1, "has", "have") == "has"``.

    Parameters
    ----------
    n : int
        How many, >= 0 (zero takes the plural, as in "no encoders have").
    one, many : str
        The singular and plural forms.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``n`` is negative or not a whole number.
    """
    return one if _count(n) == 1 else many


def series(items, empty="none", conjunction="and"):
    """A list for a sentence: ``"none"``, ``"a"``, ``"a and b"``, ``"a, b and c"``.

    Parameters
    ----------
    items : iterable of str
        The names, in order.
    empty : str, default "none"
        What an empty list reads as.
    conjunction : str, default "and"
        The word before the last item.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If an item is not a string.
    """
    items = list(items)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise ValueError(f"items[{i}] must be a string, got {type(item).__name__}")
    if not items:
        return empty
    if len(items) == 1:
        return items[0]
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def span(lo, hi, digits=2):
    """A range in words: ``"between 0.31 and 0.45"``, or ``"exactly 1"`` when both ends read alike.

    Parameters
    ----------
    lo, hi : float
        The ends, ``lo <= hi``.
    digits : int, default 2
        Decimal places, as :func:`number`.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If an end is not a real number or ``lo > hi``.
    """
    lo, hi = _real(lo, "lo"), _real(hi, "hi")
    if lo > hi:
        raise ValueError(f"lo must be <= hi, got {lo} > {hi}")
    a, b = number(lo, digits), number(hi, digits)
    if a == b:
        return f"exactly {a}" if lo == hi else f"about {a}"
    return f"between {a} and {b}"


def difference(a, b, digits=2, unit=""):
    """``a`` against ``b`` in words: ``"0.42 points higher"``, ``"0.10 lower"``, ``"the same"``.

    Parameters
    ----------
    a, b : float
        The two values.
    digits : int, default 2
        Decimal places of the difference, as :func:`number`.
    unit : str, default ""
        Written after the number (``"points"``); empty for none.

    Returns
    -------
    str
        ``"the same"`` when the difference rounds to zero at ``digits`` decimals,
        otherwise its size, the unit and ``"higher"`` or ``"lower"``.

    Raises
    ------
    ValueError
        If a value is not a finite real number.
    """
    a, b = _real(a, "a"), _real(b, "b")
    for name, v in (("a", a), ("b", b)):
        if not math.isfinite(v):
            raise ValueError(f"{name} must be finite, got {v}")
    if not isinstance(unit, str):
        raise ValueError("unit must be a string")
    d = a - b
    size = number(abs(d), digits)
    if size == "0" or float(size.replace(",", "")) == 0.0:
        return "the same"
    return f"{size} {unit + ' ' if unit else ''}{'higher' if d > 0 else 'lower'}"
