"""``repeval report`` on a 1 GiB float32 ``.npy`` file: peak memory, refusal time, first line.

Three measurements of the practitioner's path at the size of a real feature file, each
in a fresh ``repeval`` process (``python -m repeval_ref.cli``), stdout and stderr going
to pipes as in a log, never to a terminal:

* ``refuse_seconds``: a labels file with one label too few beside the 1 GiB features;
  the wall time until the process has exited (status 2, one line on stderr). Goal:
  under a second.
* ``first_line_seconds``: the wall time from the start of a full report until the first
  line reaches stderr. Goal: within a second.
* ``peak_rss_bytes``: the peak resident memory of that full report (``ru_maxrss`` of the
  child, from ``os.wait4``), and ``peak_over_file`` its ratio to the file's size. Goal:
  at most 1.5. The memory map of the features counts in it once its pages are read.
  ``peak_rss_sampled_bytes`` cross-checks it: the child's ``VmRSS`` read from
  ``/proc/PID/status`` every 20 ms; ``stage_peak_over_file`` gives the largest sample
  between each stage line on stderr and the next (a stage ``X ...`` runs until its
  closing line or the next stage's line).
* ``test_fraction_path``: the same figures for the report of TRAIN alone, split inside
  the command (``--test-fraction``, :data:`SPLIT_TEST_FRACTION`: about as many test rows
  as TEST); same goal, ``peak_over_file`` at most 1.5.

Linux folds the resident peak of the address space a child process is started from
into the child's ``ru_maxrss`` when it executes the new program, so the benchmark
process itself stays small: the feature files are written by a separate process, a
block of rows at a time.

The features are clustered (class centres in a low-rank subspace plus isotropic noise),
written block by block into the ``.npy`` file; TEST is a separate, small file of the
same kind, so that the size under test is TRAIN's. The report runs with cheap settings
(one C, two low-shot draws, small subsamples of the all-pairs metrics); what it reads
and holds is what the full defaults read and hold.

Usage::

    python -m benchmarks.bench_report_memory  # writes benchmarks/results/report_memory.json
    python -m benchmarks.bench_report_memory --gib 0.1 --out /tmp/r.json   # a quick check
    python -m benchmarks.bench_report_memory --only-test-fraction  # that path, into the result
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "report_memory.json"
GOALS = {"refuse_seconds": 1.0, "first_line_seconds": 1.0, "peak_over_file": 1.5}
#: the share of TRAIN the ``--test-fraction`` run holds out
SPLIT_TEST_FRACTION = 0.01
#: the report's settings: cheap where the setting only sets how much is computed
REPORT_ARGS = [
    "--probe-c",
    "1",
    "--draws",
    "2",
    "--dse-samples",
    "500",
    "--pair-samples",
    "1000",
    "--id-samples",
    "2000",
    "--id-batch",
    "2000",
]


def write_features(path, n, d, n_classes, seed, block_rows=8192):
    """Clustered float32 features ``(n, d)`` at ``path`` (a ``.npy``), labels returned.

    Parameters
    ----------
    path : path-like
    n, d, n_classes : int, positive
    seed : int

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
    """
    if min(n, d, n_classes) < 1:
        raise ValueError(f"n, d and n_classes must be positive, got {n}, {d}, {n_classes}")
    rng = np.random.default_rng(seed)
    rank = min(32, d)
    basis = np.linalg.qr(np.random.default_rng(0).standard_normal((d, rank)))[0]
    centres = (np.random.default_rng(1).standard_normal((n_classes, rank)) * 3.0) @ basis.T
    y = np.arange(n) % n_classes
    rng.shuffle(y)
    X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))
    for lo in range(0, n, block_rows):
        hi = min(n, lo + block_rows)
        X[lo:hi] = centres[y[lo:hi]] + 4.0 * rng.standard_normal((hi - lo, d))
    X.flush()
    del X
    return y.astype(np.int64)


def _write_inputs(folder, n, d, n_test, n_classes, seed):
    """TRAIN and TEST features and labels in ``folder`` (run in a process of its own)."""
    folder = Path(folder)
    y = write_features(folder / "train_features.npy", n, d, n_classes, seed)
    np.save(folder / "train_labels.npy", y)
    y_test = write_features(folder / "test_features.npy", n_test, d, n_classes, seed + 1)
    np.save(folder / "test_labels.npy", y_test)
    short = folder / "short"
    short.mkdir()
    os.link(folder / "train_features.npy", short / "train_features.npy")
    np.save(short / "train_labels.npy", y[:-1])


def _command(*args):
    return [sys.executable, "-m", "repeval_ref.cli", *map(str, args)]


def _env():
    return dict(os.environ, COLUMNS="100", PYTHONUNBUFFERED="1")


def time_refusal(features, labels_short, cwd):
    """Seconds until ``repeval report`` refuses ``features`` with short labels; its stderr."""
    start = time.perf_counter()
    proc = subprocess.run(
        _command("report", features, "--test-fraction", "0.2", "--out", Path(cwd) / "refused"),
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=600,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 2:
        raise RuntimeError(f"expected exit status 2, got {proc.returncode}: {proc.stderr[-500:]}")
    return seconds, proc.stderr


def run_report(inputs, out, cwd):
    """One full report of ``inputs`` (its positional arguments and split options): seconds to
    the first stderr line, total seconds, peak RSS, status."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        _command("report", *inputs, "--out", out, *REPORT_ARGS),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=cwd,
    )
    sampled = [0]
    stages = [["(start)", 0]]  # each stderr line and the largest VmRSS seen until the next

    def sample():
        status = Path(f"/proc/{proc.pid}/status")
        while proc.returncode is None:
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1]) * 1024
                        sampled[0] = max(sampled[0], rss)
                        stages[-1][1] = max(stages[-1][1], rss)
            except (OSError, ValueError):
                return
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    first = proc.stderr.readline()
    first_seconds = time.perf_counter() - start
    stages.append([first.decode().rstrip(), 0])
    rest = {}

    def drain(stream, key):
        rest[key] = stream.read()

    def drain_lines(stream, key):
        lines = []
        for line in iter(stream.readline, b""):
            lines.append(line)
            stages.append([line.decode().rstrip(), 0])
        rest[key] = b"".join(lines)

    threads = [
        threading.Thread(target=drain_lines, args=(proc.stderr, "err")),
        threading.Thread(target=drain, args=(proc.stdout, "out")),
    ]
    for t in threads:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    total = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in threads:
        t.join()
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    sampler.join()
    return {
        "first_line_seconds": round(first_seconds, 3),
        "first_line": first.decode().rstrip(),
        "total_seconds": round(total, 1),
        "peak_rss_bytes": int(usage.ru_maxrss) * scale,
        "peak_rss_sampled_bytes": sampled[0],
        "stage_peak_rss_bytes": [{"stage": line, "peak_rss_bytes": peak} for line, peak in stages],
        "exit_status": proc.returncode,
        "stderr_tail": rest["err"].decode()[-2000:],
    }


def _peak_figures(report, size):
    """The peaks of ``report`` (from :func:`run_report`) over the file size ``size``."""
    return {
        "peak_over_file": round(report["peak_rss_bytes"] / size, 3),
        "sampled_peak_over_file": round(report["peak_rss_sampled_bytes"] / size, 3),
        "stage_peak_over_file": [
            {"stage": e["stage"], "peak_over_file": round(e["peak_rss_bytes"] / size, 3)}
            for e in report["stage_peak_rss_bytes"]
        ],
    }


def measure(gib=1.0, d=1024, n_test=2000, n_classes=10, seed=0, folder=None, files_path=True):
    """The measurements on a TRAIN file of ``gib`` GiB of float32 features of width ``d``.

    With ``files_path`` False only ``test_fraction_path`` is measured (and ``file``).
    """
    if not gib > 0 or d < 1:
        raise ValueError(f"gib must be positive and d at least 1, got {gib}, {d}")
    n = int(gib * 2**30) // (4 * d)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        tmp = Path(tmp)
        train = tmp / "train_features.npy"
        t0 = time.perf_counter()
        code = (
            "from benchmarks.bench_report_memory import _write_inputs; "
            f"_write_inputs({str(tmp)!r}, {n}, {d}, {n_test}, {n_classes}, {seed})"
        )
        subprocess.run(
            [sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1]
        )
        written = time.perf_counter() - t0
        size = train.stat().st_size
        split = run_report([train, "--test-fraction", SPLIT_TEST_FRACTION], tmp / "out_split", tmp)
        if files_path:
            short = tmp / "short"
            refuse_seconds, refuse_err = time_refusal(
                short / "train_features.npy", short / "train_labels.npy", tmp
            )
            report = run_report([train, tmp / "test_features.npy"], tmp / "out", tmp)
    split_result = {
        "test_fraction": SPLIT_TEST_FRACTION,
        **split,
        **_peak_figures(split, size),
        "goal_met": bool(split["peak_rss_bytes"] / size <= GOALS["peak_over_file"]),
    }
    file_info = {
        "shape": [n, d],
        "dtype": "float32",
        "bytes": size,
        "n_test": n_test,
        "n_classes": n_classes,
        "seconds_to_write": round(written, 1),
    }
    if not files_path:
        return {"file": file_info, "test_fraction_path": split_result}
    result = {
        "file": file_info,
        "refuse_seconds": round(refuse_seconds, 3),
        "refuse_message": refuse_err.strip(),
        **report,
        **_peak_figures(report, size),
        "test_fraction_path": split_result,
        "report_args": REPORT_ARGS,
        "goals": GOALS,
    }
    result["goals_met"] = {k: bool(result[k] <= v) for k, v in GOALS.items()}
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_report_memory", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--gib", type=float, default=1.0, help="size of the TRAIN features file (default: 1)"
    )
    parser.add_argument("--d", type=int, default=1024, help="feature width (default: 1024)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="where to write the JSON result")
    parser.add_argument(
        "--tmp", default=None, help="folder for the temporary files (default: the system's)"
    )
    parser.add_argument(
        "--only-test-fraction",
        action="store_true",
        help="measure only the --test-fraction report and write it into the result at --out",
    )
    args = parser.parse_args(argv)
    result = measure(args.gib, args.d, folder=args.tmp, files_path=not args.only_test_fraction)
    machine = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d"),
    }
    result["test_fraction_path"]["machine"] = machine
    if args.only_test_fraction:
        measured = result
        result = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
        if result.get("file", measured["file"])["bytes"] != measured["file"]["bytes"]:
            parser.error(f"{args.out} records a file of another size; give --out a new path")
        result.setdefault("file", measured["file"])
        result["test_fraction_path"] = measured["test_fraction_path"]
    result.setdefault("machine", machine)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(
        json.dumps(
            {
                k: result.get(k)
                for k in (
                    "refuse_seconds",
                    "first_line_seconds",
                    "peak_over_file",
                    "sampled_peak_over_file",
                    "total_seconds",
                    "exit_status",
                    "goals_met",
                )
            }
            | {"test_fraction_peak_over_file": result["test_fraction_path"]["peak_over_file"]},
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
