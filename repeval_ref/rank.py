"""Deprecated alias of :mod:`repeval_ref.probe_rank` (the old module name, kept for one release).

``import repeval_ref.rank`` warns with ``DeprecationWarning`` and gives the module
:mod:`repeval_ref.probe_rank` itself (private names and monkeypatching included).
"""
import sys
import warnings

from . import probe_rank as _m

warnings.warn("repeval_ref.rank is now repeval_ref.probe_rank; import it from there "
              "(the old name will be removed in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _m
