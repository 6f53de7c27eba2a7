"""Progress on stderr: tqdm bars on a terminal, plain lines otherwise, nothing with --quiet.

A bar redraws itself with carriage returns, which a log file keeps as clutter; so bars
are drawn only when stderr is a terminal (``isatty``). Elsewhere each stage writes one
line when it starts (``linear probe: 8 fits ...``) and one when it ends
(``linear probe: 8/8 fits in 1.2 s``), each flushed at once, so a log shows at every
moment which step is running.
"""

from __future__ import annotations

import sys
import time


class _Silent:
    def update(self, n=1):
        pass

    def close(self):
        pass


class _Line:
    """A stage's progress as one line, written when the stage ends: no carriage return."""

    def __init__(self, label, total, unit, stream):
        self.label, self.total, self.unit, self.stream = label, total, unit, stream
        self.done = 0
        self.start = time.perf_counter()
        stream.write(f"{label}: {total} {unit} ...\n")
        stream.flush()

    def update(self, n=1):
        self.done += n

    def close(self):
        seconds = time.perf_counter() - self.start
        self.stream.write(
            f"{self.label}: {self.done}/{self.total} {self.unit} in {seconds:.1f} s\n"
        )
        self.stream.flush()


def is_terminal(stream):
    """Whether ``stream`` is an open terminal (False for files, pipes and closed streams)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """Hands out one progress reporter per stage; ``enabled=False`` gives silent stand-ins.

    Parameters
    ----------
    enabled : bool
        False for ``--quiet``: nothing is written to stderr.
    """

    def __init__(self, enabled=True):
        if not isinstance(enabled, bool):
            raise ValueError(f"enabled must be True or False, got {enabled!r}")
        self.enabled = enabled

    def task(self, label, total, unit="steps"):
        """A reporter for one stage of ``total`` units; call ``update(n)`` and ``close()``.

        A tqdm bar when stderr is a terminal, else one line at once and one at ``close()``.
        """
        if not self.enabled:
            return _Silent()
        stream = sys.stderr
        if not is_terminal(stream):
            return _Line(label, total, unit, stream)
        from tqdm import tqdm

        return tqdm(
            total=total,
            desc=label,
            unit=f" {unit}",
            file=stream,
            leave=True,
            dynamic_ncols=True,
            mininterval=0.5,
        )

    def stage(self, label):
        """A stage with no natural units: one line, written (and flushed) when it starts."""
        if self.enabled:
            sys.stderr.write(f"{label} ...\n")
            sys.stderr.flush()
