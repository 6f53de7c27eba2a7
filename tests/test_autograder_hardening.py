"""Holes a third attacker found in the grader, each attacked on its own.

* the clean room's protocol: an answer that writes half a reply, or floods the pipe, or
  keeps the child busy call after call, cannot keep the grader waiting past the
  exercise's wall-clock budget (``total_s``), and its checks score 0 with that reason;
* nbgrader's run: a process that leaves the session and holds the output pipe open does
  not stall the grader past the run's limit;
* as root: the clean room sees neither the repository (the reference package, the
  solutions, the grader) nor the course, and neither the clean room nor nbgrader's
  sandbox reaches a service listening on the machine's loopback.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

import pytest
from helpers.listener import listener as _listener
from helpers.listener import was_reached as _was_reached

from autograder import REPO_ROOT
from autograder.build import solution_source
from autograder.cleanroom import verify_source
from autograder.exercises import load

ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, user ids)")
SEED = 4
FAST = {"call_s": 3.0, "start_s": 20.0, "cpu_s": 60, "memory_bytes": 2 << 30}

#: for every pipe the answer can write to: {action}
_EVERY_PIPE = """
import os, stat, time
for _fd in range(3, 64):
    try:
        if stat.S_ISFIFO(os.fstat(_fd).st_mode):
{action}
    except OSError:
        pass
"""
#: the start of a reply that never ends
HALF_LINE = (
    _EVERY_PIPE.format(action="            os.write(_fd, b'{\"ok\": tr')") + "time.sleep(10 ** 6)\n"
)
#: a reply line that never ends: megabytes of one JSON string
FLOOD = _EVERY_PIPE.format(
    action='            os.write(_fd, b\'{"ok": true, "x": "\')\n'
    "            while True:\n"
    "                os.write(_fd, b'x' * (1 << 20))"
)


def _score(verdicts):
    return sum(v.points or 0.0 for v in verdicts), sum(v.max_points for v in verdicts)


@pytest.mark.parametrize("attack", [pytest.param("HALF_LINE", marks=pytest.mark.slow), "FLOOD"])
def test_a_broken_reply_cannot_stall_the_grader(attack):
    spec = load("rank_bound")
    t0 = time.monotonic()
    verdicts = verify_source(spec, globals()[attack], SEED, {**FAST, "start_s": 4.0})
    took = time.monotonic() - t0
    assert _score(verdicts)[0] == 0.0
    assert took < 40, took
    assert all(v.message for v in verdicts)


@pytest.mark.slow
def test_the_whole_exercise_has_a_wall_clock_budget():
    """Each call stays just under the call limit, so only the exercise's budget ends it:
    past ``total_s`` the child is stopped and every check not yet scored scores 0,
    naming the limit."""
    spec = load("rank_bound")
    slow = (
        "import time\n"
        + solution_source(spec)
        + "\n_orig = rank_bound\n\n\ndef rank_bound(H, y, n_classes):\n"
        "    time.sleep(2.0)\n    return _orig(H, y, n_classes)\n"
    )
    t0 = time.monotonic()
    verdicts = verify_source(spec, slow, SEED, {**FAST, "call_s": 3.0, "total_s": 8.0})
    took = time.monotonic() - t0
    assert took < 8.0 + 25, took
    stopped = [v for v in verdicts if "wall-clock limit of 8 s" in v.message]
    assert stopped and all(v.points == 0.0 for v in stopped)
    # an honest, quick answer under the same budget keeps every point
    got, top = _score(verify_source(spec, solution_source(spec), SEED, {**FAST, "total_s": 60.0}))
    assert got == top


@pytest.mark.slow
def test_a_run_whose_daemon_holds_the_pipe_ends_at_its_limit(tmp_path):
    from autograder.sandbox import Confinement

    conf = Confinement(tmp_path)
    code = (
        "import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n"
        "    time.sleep(600)\nprint('parent done', flush=True)\ntime.sleep(600)\n"
    )
    t0 = time.monotonic()
    rc, out = conf.run([sys.executable, "-c", code], str(tmp_path), {"PATH": "/usr/bin:/bin"}, 3)
    took = time.monotonic() - t0
    assert "parent done" in out and "wall-clock limit" in out
    assert took < 30, took


def _reference_file():
    """The file of the reference package that defines ``rank_bound``."""
    import inspect

    import repeval_ref

    return inspect.getsourcefile(repeval_ref.rank_bound)


@ROOT
def test_the_clean_room_cannot_load_the_reference_by_its_path(tmp_path):
    spec = load("rank_bound")
    path = _reference_file()
    assert Path(path).is_file() and str(REPO_ROOT) in path or "site-packages" in path
    course = tmp_path / "course"
    (course / "submitted" / "other").mkdir(parents=True)
    (course / "gradebook.db").write_bytes(b"SQLite format 3\x00secret")
    outside = Path(tempfile.mkdtemp(prefix="autograder-test-course-", dir="/var/tmp"))
    try:
        (outside / "gradebook.db").write_bytes(b"secret")
        os.chmod(outside, 0o755)
        os.chmod(outside / "gradebook.db", 0o644)
        # loads the reference module from its file, as the red team did, and checks that
        # neither the course nor the solutions can be listed
        code = (
            "import importlib.util, os\n"
            f"_seen = [p for p in ({str(outside / 'gradebook.db')!r}, "
            f"{str(REPO_ROOT / 'solutions')!r}) if os.path.exists(p)]\n"
            f"_spec = importlib.util.spec_from_file_location('ref', {path!r})\n"
            "_mod = importlib.util.module_from_spec(_spec)\n"
            "_spec.loader.exec_module(_mod)\n"
            "def rank_bound(H, y, n_classes):\n"
            "    assert not _seen, _seen\n"
            "    return _mod.rank_bound(H, y, n_classes)\n"
        )
        verdicts = verify_source(spec, code, SEED, FAST, hide=(str(outside),))
        assert _score(verdicts)[0] == 0.0
        assert any(
            "No such file" in v.message or "FileNotFound" in v.message or "Permission" in v.message
            for v in verdicts
        ), verdicts[0].message
        # without the reference, the same course visible: the answer cannot see it either
        peek = (
            f"import os\n_seen = os.path.exists({str(outside / 'gradebook.db')!r})\n"
            + solution_source(spec)
            + "\n_orig = rank_bound\n\n\n"
            "def rank_bound(H, y, n_classes):\n    assert not _seen\n"
            "    return _orig(H, y, n_classes)\n"
        )
        got, top = _score(verify_source(spec, peek, SEED, FAST, hide=(str(outside),)))
        assert got == top
    finally:
        for p in sorted(outside.rglob("*"), reverse=True):
            p.unlink()
        outside.rmdir()


@ROOT
def test_the_clean_room_has_no_network():
    spec = load("rank_bound")
    srv = _listener()
    port = srv.getsockname()[1]
    try:
        code = (
            "import socket\n_reached = None\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
            "    _reached = True\nexcept OSError as exc:\n    _reached = False\n"
            + solution_source(spec)
            + "\n_orig = rank_bound\n\n\n"
            "def rank_bound(H, y, n_classes):\n    assert _reached is False\n"
            "    return _orig(H, y, n_classes)\n"
        )
        got, top = _score(verify_source(spec, code, SEED, FAST))
        assert got == top
        assert not _was_reached(srv)
    finally:
        srv.close()


@pytest.mark.slow
@ROOT
def test_nbgrader_sandbox_reaches_its_own_loopback_but_not_the_machines(tmp_path):
    """The kernel and nbgrader talk over a loopback of their own; a service listening on
    the machine's loopback (a Dask scheduler) is out of reach."""
    from autograder.sandbox import Confinement

    srv = _listener()
    port = srv.getsockname()[1]
    top = tmp_path / "top"
    top.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(top, 0o777)
    try:
        code = (
            "import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
            "c = socket.create_connection(s.getsockname(), timeout=2); c.close()\n"
            "print('own loopback works', flush=True)\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
            "    print('machine reached')\nexcept OSError:\n    print('machine unreachable')\n"
        )
        conf = Confinement(str(top))
        rc, out = conf.run([sys.executable, "-c", code], str(top), {"PATH": "/usr/bin:/bin"}, 60)
        assert "own loopback works" in out and "machine unreachable" in out, out
        assert not _was_reached(srv)
    finally:
        srv.close()
