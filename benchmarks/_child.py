"""Entry point of one measured child process: ``python -m benchmarks._child TASK KWARGS``.

``TASK`` is ``module:function`` relative to the ``benchmarks`` package. The function
receives the JSON ``KWARGS`` and returns a zero-argument callable (its inputs already
built); that callable is the measured call and returns a JSON-serialisable dict.
The child prints one line ``@@RESULT {...}`` with the wall time of the call, the
resident size before it and the peak resident size of the process.
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
import threading
import time


def _rss_mb():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def _anon_mb():
    """Resident anonymous memory (heap, arrays), without pages of mapped files."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return 0.0


class _AnonSampler(threading.Thread):
    """Samples RssAnon every 20 ms: the peak of anonymous memory during the call.

    ``ru_maxrss`` also counts the pages of a memory-mapped file that were read, which
    the kernel can drop at any time; this peak leaves them out.
    """

    def __init__(self):
        super().__init__(daemon=True)
        self.peak = _anon_mb()
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, _anon_mb())


def main(argv):
    task, kwargs = argv[0], json.loads(argv[1])
    module, func = task.split(":")
    prepare = getattr(importlib.import_module(f"benchmarks.{module}"), func)
    work = prepare(**kwargs)
    before = _rss_mb()
    anon_before = _anon_mb()
    sampler = _AnonSampler()
    sampler.start()
    t0 = time.perf_counter()
    out = work()
    seconds = time.perf_counter() - t0
    sampler.stop.set()
    sampler.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB -> MB on Linux
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        "@@RESULT "
        + json.dumps(
            {
                "seconds": seconds,
                "rss_before_mb": before,
                "peak_rss_mb": peak,
                "peak_anon_beyond_inputs_mb": max(sampler.peak, _anon_mb()) - anon_before,
                "peak_rss_grandchildren_mb": children,
                "out": out or {},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
