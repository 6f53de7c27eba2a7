"""Deprecated alias: ``repeval_ref.geometry`` is now ``repeval_ref.labelfree``.

Kept importable for one release. Its functions are now in
:mod:`repeval_ref.labelfree.spectral` (participation ratio, explained-variance
dimension, isotropy) and :mod:`repeval_ref.labelfree.sphere` (mean pairwise cosine,
alignment, uniformity); the package re-exports them all. The old name is bound to the
package itself (``sys.modules``); the old module's private helpers are not carried over.
Book: ``book/rankme.md``.
"""
import sys
import warnings

from . import labelfree as _m

warnings.warn(
    "repeval_ref.geometry is now repeval_ref.labelfree; import it from there "
    "(the old path will be removed in the next release)",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _m
