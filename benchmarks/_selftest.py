"""Tiny child tasks used by ``tests/test_benchmarks.py`` to check the memory accounting."""

from __future__ import annotations

import numpy as np


def allocate(mb):
    def work():
        a = np.ones(int(mb * 2**20 // 8))  # touched, so resident
        s = float(a.sum() - a.size)
        del a
        return {"sum": s}

    return work


def fail():
    def work():
        raise RuntimeError("deliberate failure")

    return work
