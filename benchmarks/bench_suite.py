"""Row 9: ``repeval suite`` on the zoo's encoders over the transfer suite, from an empty cache and
from a full one.

The goal: the zoo's encoders with EfficientNet-Lite0 (:func:`repeval_ref.zoo.known_names`,
which lists EfficientNet-Lite0 among them), every installed task of the suite, k-NN,
probe and 10-shot, in at most 20 minutes on 2 cores from nothing cached and at most
1 minute from the cache. The cold run gets a fresh cache folder
(``--cache-dir``, nothing extracted or evaluated yet); the warm run repeats the same
command on that folder.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path


def installed_tasks():
    """The suite's tasks whose data are installed here (empty when none is)."""
    from repeval_ref.datasets.transfer import available_tasks

    return list(available_tasks())


def suite(encoders, tasks, cache, out, rank_boot=1000, blas_threads=1):
    """The measured call: ``repeval suite`` with every protocol, returning what it computed."""
    from repeval_ref.cli import main

    argv = [
        "suite",
        *encoders,
        "--tasks",
        ",".join(tasks),
        "--out",
        out,
        "--cache-dir",
        cache,
        "--rank-boot",
        str(rank_boot),
        "--blas-threads",
        str(blas_threads),
        "--quiet",
    ]

    def work():
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(argv)
        if rc != 0:
            raise RuntimeError(f"repeval suite exited with {rc}")
        s = json.loads((Path(out) / "suite.json").read_text())
        cells = {
            f"{p}|{r['name']}|{t}": (r[p]["mean"] if p == "fewshot" else r[p]["accuracy"])
            for t in s["tasks"]
            for r in s["per_task"][t]["results"]
            for p in s["settings"]["protocols"]
        }
        return {
            "cache": s["cache"],
            "cells": cells,
            "n_encoders": len(s["encoders"]),
            "n_tasks": len(s["tasks"]),
        }

    return work
