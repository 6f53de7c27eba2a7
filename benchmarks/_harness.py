"""Measurement helpers: every measured call runs in a fresh child process.

A child (``python -m benchmarks._child``) imports what it needs, builds its inputs
(usually by loading ``.npy`` files written once by the parent), records its resident set
size, then times the one call under test. The parent reaps the child with
``os.wait4``, whose resource usage gives that child's *peak* resident set size
(``ru_maxrss``, kB on Linux). The memory "beyond the inputs" is that peak minus the
resident size just before the call (interpreter, libraries and inputs).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MB = 2**20


class ChildError(RuntimeError):
    """A measured child process failed; the message holds the end of its stderr."""


def run_child(task, kwargs, *, timeout=None, env=None):
    """Run ``task`` (``"module:function"`` under ``benchmarks``) in a fresh interpreter.

    Returns
    -------
    dict
        ``seconds`` (wall time of the measured call), ``rss_before_mb`` (resident size
        just before it), ``peak_rss_mb`` (peak resident size of the child),
        ``beyond_inputs_mb`` (their difference) and ``out`` (what the task returned).
    """
    cmd = [sys.executable, "-m", "benchmarks._child", task, json.dumps(kwargs)]
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, text=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise ChildError(f"{task} ran past its {timeout} s limit") from None
    # communicate() has waited for the child already; its rusage is in RUSAGE_CHILDREN
    # only as a running maximum, so the child reports its own peak too (see _child).
    if proc.returncode != 0:
        raise ChildError(f"{task} exited with {proc.returncode}: {stderr[-2000:]}")
    lines = [ln for ln in stdout.splitlines() if ln.startswith("@@RESULT ")]
    if not lines:
        raise ChildError(f"{task} printed no result: {stderr[-2000:]}")
    res = json.loads(lines[-1][len("@@RESULT ") :])
    res["beyond_inputs_mb"] = res["peak_rss_mb"] - res["rss_before_mb"]
    return res


def repeat(task, kwargs, reps, **kw):
    """Run a child ``reps`` times; return the list of results."""
    return [run_child(task, kwargs, **kw) for _ in range(reps)]


def summarise(results):
    """Medians (and all values) of the seconds and memory of repeated child runs."""
    secs = [r["seconds"] for r in results]
    peak = [r["peak_rss_mb"] for r in results]
    beyond = [r["beyond_inputs_mb"] for r in results]
    return {
        "repetitions": len(results),
        "seconds_median": statistics.median(secs),
        "seconds_all": secs,
        "peak_rss_mb_median": statistics.median(peak),
        "beyond_inputs_mb_median": statistics.median(beyond),
        "anon_beyond_inputs_mb_median": statistics.median(
            [r["peak_anon_beyond_inputs_mb"] for r in results]
        ),
        "peak_rss_grandchildren_mb_median": statistics.median(
            [r["peak_rss_grandchildren_mb"] for r in results]
        ),
    }


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_gb():
    try:
        import psutil

        return round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:  # pragma: no cover - psutil is in the bench extra
        return None


def _version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001 - an absent package is reported as absent
        return None


def _blas():
    try:
        import numpy  # noqa: F401 - load numpy's BLAS so that it is listed
        from threadpoolctl import threadpool_info

        return [
            {k: info.get(k) for k in ("internal_api", "version", "num_threads", "filepath")}
            for info in threadpool_info()
        ]
    except Exception:  # noqa: BLE001
        return []


def machine_info():
    """The machine, the software and the date of the run."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    packages = [
        "numpy",
        "scipy",
        "scikit-learn",
        "torch",
        "faiss-cpu",
        "psutil",
        "jupyter-book",
        "nbgrader",
        "repeval_ref",
    ]
    return {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "memory_gb": _mem_total_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {p: _version(p) for p in packages},
        "blas": [b for b in _blas() if b.get("internal_api")],
        "load_average_at_start": [round(x, 2) for x in load] if load else None,
    }


def now():
    return time.perf_counter()
