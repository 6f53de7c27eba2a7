"""Deprecated alias: ``repeval_ref.relational`` is now ``repeval_ref.labelfree.relational``.

Kept importable for one release. The old name is the new module itself
(``sys.modules``), so its names, private ones included, and monkeypatching work as
before. Book: ``book/rankme.md``.
"""
import sys
import warnings

from .labelfree import relational as _m

warnings.warn(
    "repeval_ref.relational is now repeval_ref.labelfree.relational; import it from there "
    "(the old path will be removed in the next release)",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _m
