"""CSV files that a spreadsheet opens without evaluating anything a student wrote.

Every CSV the course writes (``grading_issues.csv``, the grade exports, the Canvas file,
the similarity report) carries text a student chose: a file name, a folder name taken
as a student id, an exception message, a roster name. A spreadsheet that opens the file
evaluates a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula (and some
also one that starts with a tab or a carriage return), which can call out to the network
or, through DDE, start a program. :func:`safe_cell` applies the OWASP rule to one cell:
such a cell gets a leading apostrophe (``'=1+1``), which the spreadsheet shows as text.
A cell that is a number (an ``int`` or ``float``, or text that spells a plain decimal
number such as ``-2.5``) is left as it is, so a negative grade stays a number.

:func:`writer` and :func:`dict_writer` are :mod:`csv`'s writers with every cell passed
through :func:`safe_cell`; every CSV writer of the course uses one of them.
"""

from __future__ import annotations

import csv
import math
import numbers
import re

__all__ = ["FORMULA_STARTS", "dict_writer", "safe_cell", "safe_row", "writer"]

#: first characters that make a spreadsheet evaluate a cell
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

#: a plain decimal number, optionally negative, with an optional exponent: what a
#: spreadsheet reads as a number, never as a formula
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def safe_cell(value):
    """``value`` as a CSV cell that no spreadsheet evaluates.

    Parameters
    ----------
    value : object
        The cell. ``None`` becomes ``""``; a real number (``int``, ``float``, NumPy's
        numbers; not ``bool``) is returned unchanged when it is finite; anything else is
        turned into text with ``str``.

    Returns
    -------
    object
        The number itself, or text: when the text starts with one of
        :data:`FORMULA_STARTS` and does not spell a plain decimal number, it is prefixed
        with an apostrophe.
    """
    if value is None:
        return ""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if math.isfinite(float(value)):
            return value
        value = str(value)  # "-inf" is text to a spreadsheet: neutralised below
    text = value if isinstance(value, str) else str(value)
    if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def safe_row(row):
    """A list of the cells of ``row`` (an iterable), each passed through :func:`safe_cell`.

    Raises
    ------
    ValueError
        If ``row`` is a string or not iterable (a row is a sequence of cells).
    """
    if isinstance(row, (str, bytes)):
        raise ValueError(f"row must be a sequence of cells, got the text {row[:40]!r}")
    try:
        return [safe_cell(v) for v in row]
    except TypeError:
        raise ValueError(f"row must be a sequence of cells, got {type(row).__name__}") from None


class _SafeWriter:
    """A :func:`csv.writer` whose rows pass through :func:`safe_row`."""

    def __init__(self, fh, **kwargs):
        self._w = csv.writer(fh, **kwargs)

    def writerow(self, row):
        return self._w.writerow(safe_row(row))

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)


class _SafeDictWriter(csv.DictWriter):
    """A :class:`csv.DictWriter` whose values (and header) pass through :func:`safe_cell`."""

    def writeheader(self):
        return self.writer.writerow(safe_row(self.fieldnames))

    def _dict_to_list(self, rowdict):
        return safe_row(super()._dict_to_list(rowdict))


def writer(fh, **kwargs):
    """:func:`csv.writer` on the open text file ``fh``, every cell made safe.

    Parameters
    ----------
    fh : file object
        Opened for writing, with ``newline=""``.
    **kwargs
        Passed to :func:`csv.writer` (dialect and formatting parameters).

    Returns
    -------
    object
        With ``writerow`` and ``writerows`` as :func:`csv.writer`'s.

    Raises
    ------
    ValueError
        If ``fh`` has no ``write`` method.
    """
    if not callable(getattr(fh, "write", None)):
        raise ValueError(f"fh must be a file opened for writing, got {type(fh).__name__}")
    return _SafeWriter(fh, **kwargs)


def dict_writer(fh, fieldnames, **kwargs):
    """:class:`csv.DictWriter` on ``fh`` with ``fieldnames``, every cell made safe.

    Raises
    ------
    ValueError
        If ``fh`` has no ``write`` method or ``fieldnames`` is a string.
    """
    if not callable(getattr(fh, "write", None)):
        raise ValueError(f"fh must be a file opened for writing, got {type(fh).__name__}")
    if isinstance(fieldnames, (str, bytes)):
        raise ValueError(f"fieldnames must be a sequence of names, got {fieldnames!r}")
    return _SafeDictWriter(fh, fieldnames=list(fieldnames), **kwargs)
