"""Deprecated alias of :mod:`repeval_ref.lpft_theory` (the old module name, kept for one release).

``import repeval_ref.finetune`` warns with ``DeprecationWarning`` and gives the module
:mod:`repeval_ref.lpft_theory` itself (private names and monkeypatching included).
"""
import sys
import warnings

from . import lpft_theory as _m

warnings.warn("repeval_ref.finetune is now repeval_ref.lpft_theory; import it from there "
              "(the old name will be removed in the next release)",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _m
