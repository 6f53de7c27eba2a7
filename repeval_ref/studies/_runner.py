"""The thin writer of the studies: settings in, one JSON record out, with the code version."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time

from . import study_module

__all__ = ["code_version", "run_study", "write_study"]


def code_version(name):
    """``{"git": HEAD commit or None, "module_sha256": hash of the study's source}``."""
    mod = study_module(name)
    with open(mod.__file__, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=os.path.dirname(mod.__file__),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = None
    return {"git": head, "module_sha256": digest}


def run_study(name, budget, log=None):
    """Run study ``name`` at ``budget`` (``"full"`` or ``"small"``) and return its record."""
    mod = study_module(name)
    if budget not in mod.SETTINGS:
        raise ValueError(f"budget must be one of {sorted(mod.SETTINGS)}, got {budget!r}")
    settings = mod.SETTINGS[budget]
    t0, c0 = time.perf_counter(), time.process_time()
    record = mod.run(settings, log=log)
    return {
        "study": name,
        "budget": budget,
        "settings": settings,
        "code_version": code_version(name),
        "wall_seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1),
        **record,
    }


def write_study(name, budget, out, log=None):
    """Run study ``name`` and write ``out/NAME.json`` (``NAME.small.json`` for ``small``)."""
    record = run_study(name, budget, log=log)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, name + (".json" if budget == "full" else ".small.json"))
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)
    return path
