"""The cgroup of one sandbox (:mod:`autograder.cgroups`), the settings it reads
(:mod:`autograder.settings`) and a student's time budget (:func:`time_budget`).

A child started through :func:`autograder.confine.preexec` with a group's
folders joins it before it runs anything: a memory limit then bounds the child and every
process it forks together (the OOM killer ends one of them, nothing outside), a pids
limit bounds their number, and :meth:`SandboxCgroup.remove` leaves no process and no
folder behind, also of a process that left the session. Without the controllers (or
with ``$AUTOGRADER_CGROUPS=0``) :func:`make` says so once and returns None.
"""

import os
import subprocess
import sys
import time

import nbformat
import pytest

from autograder import cgroups, confine, settings
from autograder.sandbox_limits import NOTEBOOK_BASE_S, WALL_BASE_S, time_budget

HAVE = cgroups.unavailable() is None
NEEDS = pytest.mark.skipif(not HAVE, reason=f"no cgroups here: {cgroups.unavailable()}")


def _start(group, code):
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=confine.preexec(
            confine.make_spec(
                limits={
                    "cpu_s": 60,
                    "cpu_grace_s": 1,
                    "memory_bytes": 8 << 30,
                    "file_bytes": 1 << 20,
                    "processes": 64,
                },
                cgroups=group.join_paths,
            )
        ),
    )


@NEEDS
def test_the_memory_of_all_processes_is_bounded_together():
    """Four processes of 200 MiB in a group of 256 MiB: each is far under any
    per-process limit, together they are over the group's, so the OOM killer ends
    processes of the group until the rest fits."""
    code = (
        "import os, time\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n"
        "    if pid == 0:\n        b = bytearray(200 << 20)\n"
        "        for i in range(0, len(b), 4096):\n            b[i] = 1\n"
        "        time.sleep(30)\n        os._exit(0)\n    kids.append(pid)\n"
        "time.sleep(30)\n"
    )
    with cgroups.make(256 << 20, 64, "test") as group:
        proc = _start(group, code)
        end = time.monotonic() + 20
        while time.monotonic() < end and not group.oom_kills():
            time.sleep(0.1)
        assert group.oom_kills() >= 1
        assert group.memory_peak() <= 256 << 20
        assert proc.pid in group.pids() or proc.poll() is not None
        group.kill()
        assert group.pids() == []
    proc.wait(timeout=10)
    assert not group.paths  # removed


@NEEDS
def test_the_number_of_processes_is_bounded_and_none_survives_removal():
    code = (
        "import os, time\nn = 0\ntry:\n    for _ in range(100):\n"
        "        if os.fork() == 0:\n            os.setsid()\n            time.sleep(600)\n"
        "        n += 1\nexcept OSError:\n    pass\nprint(n, flush=True)\ntime.sleep(600)\n"
    )
    group = cgroups.make(1 << 30, 20, "test")
    paths = list(group.join_paths)
    proc = _start(group, code)
    count = int(proc.stdout.readline())
    assert count < 20
    pids = group.pids()
    assert len(pids) == count + 1
    group.remove()
    proc.wait(timeout=10)
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid), pid
    assert not any(os.path.exists(p) for p in paths)


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_without_cgroups_make_says_so_once(monkeypatch, capsys):
    monkeypatch.setenv(settings.CGROUPS_ENV, "0")
    monkeypatch.setattr(cgroups, "_said_once", [])
    assert cgroups.make(1 << 30, 16) is None
    assert cgroups.make(1 << 30, 16) is None
    err = capsys.readouterr().err
    assert err.count("no cgroup per sandbox") == 1 and settings.CGROUPS_ENV in err


def test_bad_limits_and_settings_are_refused(monkeypatch):
    for bad in (0, -1, 1.5, True, "1G"):
        with pytest.raises(ValueError, match="memory_bytes"):
            cgroups.make(bad, 16)
        with pytest.raises(ValueError, match="processes"):
            cgroups.make(1 << 30, bad)
    assert settings.positive_bytes("X", "4G") == 4 << 30
    assert settings.positive_bytes("X", "512M") == 512 << 20
    assert settings.positive_bytes("X", "512MiB") == 512 << 20
    assert settings.positive_bytes("X", 1024) == 1024
    for bad in ("", "0", "-1G", "lots", "1.5G", True, None, 0):
        with pytest.raises(ValueError, match="X"):
            settings.positive_bytes("X", bad)
    monkeypatch.setenv(settings.SANDBOX_MEMORY_ENV, "2G")
    assert settings.sandbox_memory_bytes() == 2 << 30
    monkeypatch.setenv(settings.SANDBOX_DISK_ENV, "oops")
    with pytest.raises(ValueError, match=settings.SANDBOX_DISK_ENV):
        settings.sandbox_disk_bytes()
    monkeypatch.setenv(settings.CGROUPS_ENV, "yes")
    with pytest.raises(ValueError, match=settings.CGROUPS_ENV):
        settings.cgroups_wanted()
    with pytest.raises(ValueError, match="paths"):
        confine.join_cgroups("/sys/fs/cgroup/memory")


def _notebook(code_cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("pass") for _ in range(code_cells)]
    nb.cells.append(nbformat.v4.new_markdown_cell("text"))
    return nbformat.writes(nb).encode()


def test_the_time_budget_comes_from_the_release_notebooks():
    """Added cells and notebooks that have no release change nothing."""
    release = {"one": _notebook(5), "two": _notebook(3)}

    def job(files):
        return {"timeout": 10, "assignments": {"a": {"files": files, "release": release}}}

    honest = {"one.ipynb": _notebook(5), "two.ipynb": _notebook(3), "timestamp.txt": b"x"}
    padded = {
        "one.ipynb": _notebook(1000),
        "two.ipynb": _notebook(3),
        "extra.ipynb": _notebook(500),
        "timestamp.txt": b"x",
    }
    want = (WALL_BASE_S + 10 * 8, NOTEBOOK_BASE_S + 10 * 5)
    assert time_budget(job(honest)) == want
    assert time_budget(job(padded)) == want
    assert time_budget(job({"one.ipynb": _notebook(1000)})) == (
        WALL_BASE_S + 50,
        NOTEBOOK_BASE_S + 50,
    )
    assert time_budget(job(honest), {"wall_s": 7, "notebook_s": 3}) == (7.0, 3.0)
    with pytest.raises(ValueError, match="timeout"):
        time_budget({"timeout": 0, "assignments": {}})
    with pytest.raises(ValueError, match="job"):
        time_budget([])
