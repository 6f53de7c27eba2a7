"""Deprecated alias: ``repeval_ref._streaming`` is now ``repeval_ref.labelfree._streaming``.

Kept importable for one release. The old name is the new module itself
(``sys.modules``), so its names, private ones included, and monkeypatching work as
before. Book: ``book/rankme.md``.
"""
import sys
import warnings

from .labelfree import _streaming as _m

warnings.warn(
    "repeval_ref._streaming is now repeval_ref.labelfree._streaming; import it from there "
    "(the old path will be removed in the next release)",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _m
