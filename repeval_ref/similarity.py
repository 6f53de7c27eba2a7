"""Deprecated alias of :mod:`repeval_ref.cka` (the old module name, kept for one release).

``import repeval_ref.similarity`` warns with ``DeprecationWarning`` and gives the module
:mod:`repeval_ref.cka` itself (private names and monkeypatching included).
"""
import sys
import warnings

from . import cka as _m

warnings.warn("repeval_ref.similarity is now repeval_ref.cka; import it from there "
              "(the old name will be removed in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _m
