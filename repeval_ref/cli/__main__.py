"""``python -m repeval_ref.cli``: the ``repeval`` command."""

import sys

from . import main

sys.exit(main())
