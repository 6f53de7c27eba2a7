"""Old home of the loop program, now :mod:`repeval_ref.cli.loop` (the ``repeval loop`` command).

``python -m repeval_ref.loop ARGS`` still runs the loop: the same code, arguments and
output as ``repeval loop ARGS`` (its usage and error lines keep the program name
``python -m repeval_ref.loop``). Importing ``repeval_ref.loop`` gives the module
:mod:`repeval_ref.cli.loop` itself, with a DeprecationWarning, for one release.
"""
import sys
import warnings

from .cli import loop as _loop

if __name__ == "__main__":  # python -m repeval_ref.loop: a command, not an import
    sys.exit(_loop.main())

warnings.warn("repeval_ref.loop is now repeval_ref.cli.loop (the `repeval loop` command); "
              "import it from there", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _loop
