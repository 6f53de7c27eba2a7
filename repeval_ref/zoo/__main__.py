"""``python -m repeval_ref.zoo``: the same program as ``repeval zoo``
(:mod:`repeval_ref.cli.zoo`)."""

import sys

from ..cli.zoo import main

if __name__ == "__main__":
    sys.exit(main())
