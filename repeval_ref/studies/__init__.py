"""Measured studies behind the book's comparative claims, run once and shipped as results.

Book: the noise, LP-FT, attentive-probe and RankMe chapters read the JSON files these studies write
under ``benchmarks/results/studies/``; no page retrains. Each study is one module with

* ``SETTINGS``: ``{"full": dict, "small": dict}``, the budgets (``full`` is what the book
  reads; ``small`` is a reduced run the tests repeat in under a minute);
* ``run(settings, log=None) -> dict``: the pure computation, returning the record (every
  run's seed, sizes, CPU seconds and per-image correct flags);
* summary functions that turn a record into the numbers a page prints.

``python -m repeval_ref.studies run STUDY --budget full|small --out DIR`` runs one study and
writes ``DIR/STUDY.json`` (``DIR/STUDY.small.json`` for the small budget); ``make studies``
runs all of them at full budget into ``benchmarks/results/studies``.
"""

from __future__ import annotations

import importlib

__all__ = ["STUDIES", "study_module", "load_result", "flags_to_array", "array_to_flags"]

#: The studies, in the order ``make studies`` runs them.
STUDIES = ("seed_spread", "lpft_kumar", "readout_selectivity", "rankme_family")


def study_module(name):
    """The module of study ``name`` (a key of :data:`STUDIES`).

    Raises
    ------
    ValueError
        ``name`` is not a known study.
    """
    if name not in STUDIES:
        raise ValueError(f"name must be one of {STUDIES}, got {name!r}")
    return importlib.import_module(f".{name}", __name__)


def flags_to_array(flags):
    """A string of ``"0"``/``"1"`` (one per test image) as a boolean NumPy array.

    Raises
    ------
    ValueError
        ``flags`` is not a non-empty string of 0 and 1.
    """
    import numpy as np

    if not isinstance(flags, str) or not flags or set(flags) - {"0", "1"}:
        raise ValueError("flags must be a non-empty string of '0' and '1'")
    return np.frombuffer(flags.encode("ascii"), dtype=np.uint8) == ord("1")


def array_to_flags(correct):
    """Boolean per-image correctness as the compact string :func:`flags_to_array` reads.

    Raises
    ------
    ValueError
        ``correct`` is not a non-empty 1-D array.
    """
    import numpy as np

    a = np.asarray(correct)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"correct must be a non-empty 1-D array, got shape {a.shape}")
    return "".join("1" if v else "0" for v in a.astype(bool))


def load_result(name, budget="full", directory=None):
    """The committed record of study ``name`` (``budget`` ``"full"`` or ``"small"``).

    ``directory`` defaults to ``benchmarks/results/studies`` of the repository.
    """
    import json
    import os

    study_module(name)
    if budget not in ("full", "small"):
        raise ValueError(f"budget must be 'full' or 'small', got {budget!r}")
    if directory is None:
        here = os.path.dirname(os.path.abspath(__file__))
        directory = os.path.join(here, "..", "..", "benchmarks", "results", "studies")
    suffix = ".json" if budget == "full" else ".small.json"
    with open(os.path.join(directory, name + suffix), encoding="utf-8") as fh:
        return json.load(fh)
