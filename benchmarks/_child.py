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
import time


def _rss_mb():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def main(argv):
    task, kwargs = argv[0], json.loads(argv[1])
    module, func = task.split(":")
    prepare = getattr(importlib.import_module(f"benchmarks.{module}"), func)
    work = prepare(**kwargs)
    before = _rss_mb()
    t0 = time.perf_counter()
    out = work()
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB -> MB on Linux
    print("@@RESULT " + json.dumps({"seconds": seconds, "rss_before_mb": before,
                                    "peak_rss_mb": peak, "out": out or {}}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
