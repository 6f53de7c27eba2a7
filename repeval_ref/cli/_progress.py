"""Progress on stderr that moves within each stage (tqdm bars), or nothing with --quiet."""
from __future__ import annotations

import sys


class _Silent:
    def update(self, n=1):
        pass

    def close(self):
        pass


class Progress:
    """Hands out one tqdm bar per stage; ``enabled=False`` gives silent stand-ins.

    Parameters
    ----------
    enabled : bool
        False for ``--quiet``: nothing is written to stderr.
    """

    def __init__(self, enabled=True):
        self.enabled = enabled

    def task(self, label, total, unit="steps"):
        """A bar for one stage of ``total`` units; call ``update(n)`` and ``close()``."""
        if not self.enabled:
            return _Silent()
        from tqdm import tqdm

        return tqdm(total=total, desc=label, unit=f" {unit}", file=sys.stderr, leave=True,
                    dynamic_ncols=True, mininterval=0.5)

    def stage(self, label):
        """A stage with no natural units: one line, written when it starts."""
        if self.enabled:
            sys.stderr.write(f"{label} ...\n")
            sys.stderr.flush()
