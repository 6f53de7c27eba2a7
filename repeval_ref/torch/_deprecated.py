"""Names that left :mod:`repeval_ref.torch` for their own floor, reachable from the old place for one release.

:mod:`repeval_ref.torch` holds evaluation code and architectures only. The model loaders
moved one floor up, to :mod:`repeval_ref.backbones` (above :mod:`repeval_ref.zoo` too,
which they load from), the digits images to the datasets, and the pre-training of the
loop's small CNN beside the loop. ``repeval_ref.torch.NAME`` and
``repeval_ref.torch.models.NAME`` still give these names, through the module
``__getattr__`` of those two modules, with a :class:`DeprecationWarning` that names the
new home. The lookup is lazy: ``import repeval_ref.torch`` imports neither the loader
module nor :mod:`repeval_ref.zoo`; only asking for a moved name does.

This is the one place where the ``torch`` floor reaches upward, and only for one release;
``tests/test_layout_imports.py`` checks it and leaves it out of the floor order.
"""
from __future__ import annotations

import importlib
import warnings

#: old name -> module that defines it now
MOVED = {
    "load_backbone": "repeval_ref.backbones",
    "BackboneUnavailable": "repeval_ref.backbones",
    "digits_images": "repeval_ref.datasets",
    "pretrain_encoder": "repeval_ref.cli.pretrain",
}


def moved_attribute(module_name, name):
    """The object ``name`` that left ``module_name``, with a DeprecationWarning naming its new home.

    Parameters
    ----------
    module_name : str
        The module whose ``__getattr__`` was asked (for the messages).
    name : str
        The attribute asked for.

    Returns
    -------
    object
        ``getattr(importlib.import_module(MOVED[name]), name)``.

    Raises
    ------
    AttributeError
        If ``name`` is not one of :data:`MOVED` (what a plain missing attribute raises,
        so ``hasattr`` and ``from M import *`` keep working).
    """
    if name not in MOVED:
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
    home = MOVED[name]
    warnings.warn(
        f"{module_name}.{name} is now {home}.{name}; import it from there "
        f"(the old name will be removed in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(home), name)
