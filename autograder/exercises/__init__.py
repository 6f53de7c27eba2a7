"""One compact spec per exercise; :mod:`autograder.build` turns them into notebooks.

A spec is a small Python module in this package with these names (see
``autograder/README.md`` for a full example):

``NAME``           function the student writes, also the notebook's file name
``TITLE``          title shown at the top of the notebook
``LEVEL``          ``"warm-up"``, ``"core"``, ``"interview"`` or ``"research"``
``ASSIGNMENT``     nbgrader assignment (the book chapter's short name): the notebook is
                   ``solutions/<ASSIGNMENT>/<NAME>.ipynb``
``CHAPTER``        book page it belongs to, e.g. ``"knn"`` for ``book/knn.md`` (the link in the
                   notebook reads that page's title and opens the published page)
``STATEMENT``      the task in Markdown, with the exact contract
``SOLUTION``       code of the solution cell; the part between ``### BEGIN SOLUTION`` and
                   ``### END SOLUTION`` is replaced by a stub in the release
``VISIBLE_TESTS``  code of the visible test cell (plain asserts with messages)
``VISIBLE_POINTS`` points of the visible test cell
``HIDDEN``         names of registered checks (``autograder.checks``), one hidden test
                   cell each, worth the check's registered points
"""

from __future__ import annotations

import importlib

#: Every exercise, in the order of the book: the one list of them. Add a new spec module's
#: name here; its checks are the module of the same name in :mod:`autograder.checks`
#: (``autograder.checks.CHECK_MODULES`` is this list).
EXERCISES = [
    "linear_probe_done_right",
    "ridge_loo",
    "fold_batchnorm",
    "frozen_features",
    "rank_bound",
    "knn_classify",
    "attentive_probe",
    "transfer",
    "low_shot_eval",
    "wilson_interval",
    "region_bootstrap_miou",
    "merge_topk",
    "rankme",
    "two_nn_id",
    "retrieval_metrics",
    "linear_cka",
]

LEVELS = ("warm-up", "core", "interview", "research")
REQUIRED = (
    "NAME",
    "TITLE",
    "LEVEL",
    "ASSIGNMENT",
    "CHAPTER",
    "STATEMENT",
    "SOLUTION",
    "VISIBLE_TESTS",
    "VISIBLE_POINTS",
    "HIDDEN",
)


def load(name):
    """Import and validate the spec module of exercise ``name``."""
    spec = importlib.import_module(f"{__name__}.{name}")
    missing = [k for k in REQUIRED if not hasattr(spec, k)]
    if missing:
        raise ValueError(f"exercise spec {name} lacks {', '.join(missing)}")
    if spec.NAME != name:
        raise ValueError(f"exercise spec {name} has NAME = {spec.NAME!r}")
    if spec.LEVEL not in LEVELS:
        raise ValueError(f"exercise spec {name}: LEVEL must be one of {LEVELS}")
    if "### BEGIN SOLUTION" not in spec.SOLUTION or "### END SOLUTION" not in spec.SOLUTION:
        raise ValueError(f"exercise spec {name}: SOLUTION needs BEGIN/END SOLUTION markers")
    return spec


def all_specs():
    return [load(n) for n in EXERCISES]
