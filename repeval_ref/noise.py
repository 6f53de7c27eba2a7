"""Deprecated alias of :mod:`repeval_ref.uncertainty` (the old module name, kept for one release).

``import repeval_ref.noise`` warns with ``DeprecationWarning`` and gives the module
:mod:`repeval_ref.uncertainty` itself (private names and monkeypatching included).
"""
import sys
import warnings

from . import uncertainty as _m

warnings.warn("repeval_ref.noise is now repeval_ref.uncertainty; import it from there "
              "(the old name will be removed in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _m
