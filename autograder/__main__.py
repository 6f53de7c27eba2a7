"""``python -m autograder ...`` is the same as the ``autograder`` command."""

import sys

from .cli import main

sys.exit(main())
