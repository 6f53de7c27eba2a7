"""Each student's sandbox is bounded as a whole, whatever the submission holds.

A class of five hands in ``knn_classify`` (each with the right answer in its solution
cell) and is set up, collected and autograded by the real commands (``python -m
autograder ...``), as root, with a sandbox memory of 2 GiB and a sandbox disk of 512 MiB
(``$AUTOGRADER_SANDBOX_MEMORY``, ``$AUTOGRADER_SANDBOX_DISK``: the test's scale on a
shared machine) and a cell timeout of 10 s, then judged from outside:

=============  ===================================================================
student        attack
=============  ===================================================================
``a_honest``   none: full marks
``sleeper``    100 added cells of ``time.sleep(8)`` (800 s); the release notebook's 8
               code cells give a budget of 30 + 10 x 8 = 110 s, and a budget counted
               from the submitted notebook would have been 1,110 s
``memhog``     its kernel forks 8 processes that each fill 750 MiB (6 GiB in all, each
               far under the 8 GiB address space allowed per process)
``diskfill``   its kernel writes 2,000 files of 1 MiB into its working folder (each
               far under the 256 MiB allowed per file)
``daemon``     its answer forks a process that leaves the session and sleeps 600 s,
               in the kernel and in the clean room
=============  ===================================================================

Measured from outside while ``autograde`` runs (a thread samples every 0.1 s): the
private memory of this run's sandbox-user processes never exceeds the sandbox's memory
limit by more than a margin, while the attack did fill the sandbox up to its limit; the
disk of the grader's temporary folder never grows by the 2,000 MiB written (at most the
cap and a margin for the other users of the machine); the whole ``autograde`` takes less
than the 800 s the sleeper's cells alone would take, and the sleeper's notebook scores 0
with the 110 s limit named in ``grading_issues.csv``; after ``autograde`` no process of a
sandbox user started by this run is left, no cgroup and no tmpfs of its sandboxes; the
honest student keeps full marks.
"""

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest
from helpers.answer_notebooks import with_answer
from helpers.worker_traces import sandbox_user_processes

from autograder import REPO_ROOT
from autograder.build import solution_source
from autograder.checks import check_points
from autograder.exercises import load

pytestmark = [
    pytest.mark.slow,  # a class of five graded end to end, one of them for its full budget
    pytest.mark.skipif(
        os.geteuid() != 0, reason="the sandbox's cgroups, tmpfs and user id exist only as root"
    ),
    pytest.mark.skipif(
        not (os.path.isdir("/sys/fs/cgroup/memory") and os.path.isdir("/sys/fs/cgroup/pids")),
        reason="no cgroup v1 memory and pids controllers on this machine",
    ),
]

EXERCISE, CHAPTER = "knn_classify", "knn"
STUDENTS = ("a_honest", "daemon", "diskfill", "memhog", "sleeper")
TIMEOUT = 10
MEMORY = 2 << 30
DISK = 512 << 20
#: the sleeper's added cells and how long each sleeps
SLEEP_CELLS, SLEEP_S = 100, 8

#: in nbgrader's kernel only: 8 processes of 750 MiB each, touched page by page
MEMHOG = """
import os as _os
import sys as _sys
import time as _time

if "ipykernel" in _sys.modules:
    _kids = []
    for _i in range(8):
        _pid = _os.fork()
        if _pid == 0:
            try:
                _block = bytearray(750 << 20)
                for _j in range(0, len(_block), 4096):
                    _block[_j] = 1
                _time.sleep(15)
            finally:
                _os._exit(0)
        _kids.append(_pid)
    for _pid in _kids:
        _os.waitpid(_pid, 0)
"""

#: in nbgrader's kernel only: 2,000 files of 1 MiB in the working folder
DISKFILL = """
import sys as _sys

if "ipykernel" in _sys.modules:
    _written = 0
    try:
        for _i in range(2000):
            with open(f"fill-{_i:04d}.bin", "wb") as _fh:
                _fh.write(b"x" * (1 << 20))
            _written += 1
    except OSError as _exc:
        print("stopped:", type(_exc).__name__)
    print(f"wrote {_written} MiB")
"""

#: a daemon, wherever the answer runs (kernel and clean room)
DAEMON = """
import os as _os
import time as _time

if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        _time.sleep(600)
    _os._exit(0)
"""


def _autograder(course, *args, env=None, timeout=1500):
    cmd = [
        sys.executable,
        "-m",
        "autograder",
        "--course",
        str(course),
        "--timeout",
        str(TIMEOUT),
        *args,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=env
    )
    assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def _submissions(subs):
    spec = load(EXERCISE)
    honest = solution_source(spec)
    for student in STUDENTS:
        nb = with_answer(spec, honest + (DAEMON if student == "daemon" else ""))
        if student == "sleeper":
            nb.cells += [
                nbformat.v4.new_code_cell(f"import time\ntime.sleep({SLEEP_S})")
                for _ in range(SLEEP_CELLS)
            ]
        elif student == "memhog":
            nb.cells.append(nbformat.v4.new_code_cell(MEMHOG))
        elif student == "diskfill":
            nb.cells.append(nbformat.v4.new_code_cell(DISKFILL))
        path = subs / student / CHAPTER / f"{EXERCISE}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(path))


def _private_bytes(pid):
    """Private memory (clean and dirty) of process ``pid`` in bytes (0 if gone)."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return total


def _uid(pid):
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
    except (OSError, StopIteration, ValueError):
        return None


class _Sampler(threading.Thread):
    """Samples, every 0.1 s until stopped: the private memory of this run's sandbox-user
    processes together, the disk used under the temporary folder, and for each sandbox
    user id (one per student's nbgrader run, one per clean-room child) when a process of
    it was first and last seen."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.memory = 0
        self.disk0 = shutil.disk_usage(tempfile.gettempdir()).used
        self.disk = self.disk0
        self.seen = {}

    def run(self):
        while not self.stop.wait(0.1):
            pids = sandbox_user_processes()
            now = time.monotonic()
            for pid in pids:
                uid = _uid(pid)
                if uid is not None:
                    self.seen[uid] = (self.seen.get(uid, (now, now))[0], now)
            self.memory = max(self.memory, sum(_private_bytes(p) for p in pids))
            self.disk = max(self.disk, shutil.disk_usage(tempfile.gettempdir()).used)

    def longest_sandbox_s(self):
        """The longest time a sandbox user id had processes."""
        return max((last - first for first, last in self.seen.values()), default=0.0)


def _release_code_cells():
    nb = nbformat.read(str(REPO_ROOT / "exercises" / CHAPTER / f"{EXERCISE}.ipynb"), as_version=4)
    return sum(c.cell_type == "code" for c in nb.cells)


def _own_memory_cgroup():
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                return Path("/sys/fs/cgroup/memory", path.lstrip("/"))
    return Path("/sys/fs/cgroup/memory")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    outside = Path(tempfile.mkdtemp(prefix="autograder-bounds-", dir=base))
    work = tmp_path_factory.mktemp("bounds")
    course = outside / "course"
    env = {
        **os.environ,
        "AUTOGRADER_SANDBOX_MEMORY": str(MEMORY),
        "AUTOGRADER_SANDBOX_DISK": str(DISK),
    }
    try:
        _autograder(course, "setup", "--assign", CHAPTER)
        roster = work / "roster.csv"
        roster.write_text(
            "id,first_name,last_name,email\n"
            + "".join(f"{s},{s.title()},Student,{s}@example.org\n" for s in STUDENTS)
        )
        _autograder(course, "roster", str(roster))
        subs = work / "submissions"
        _submissions(subs)
        _autograder(course, "collect", str(subs))
        groups_before = set(os.listdir(_own_memory_cgroup()))
        sampler = _Sampler()
        sampler.start()
        t0 = time.monotonic()
        try:
            proc = _autograder(course, "autograde", "--seed", "46", env=env)
        finally:
            took = time.monotonic() - t0
            sampler.stop.set()
            sampler.join()
        left = sandbox_user_processes()
        groups_after = set(os.listdir(_own_memory_cgroup()))
        export = work / "grades.csv"
        _autograder(course, "export", str(export))
        with (course / "grading_issues.csv").open(newline="") as fh:
            issues = list(csv.DictReader(fh))
        rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader(export.open(newline=""))}
        with open("/proc/self/mountinfo") as fh:
            mounts = [line.split()[4] for line in fh]
        yield {
            "course": course,
            "took": took,
            "sampler": sampler,
            "left": left,
            "new_groups": groups_after - groups_before,
            "issues": issues,
            "rows": rows,
            "mounts": mounts,
            "stderr": proc.stderr,
        }
    finally:
        for pid in sandbox_user_processes():  # never leave an attack running
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        shutil.rmtree(outside, ignore_errors=True)


def _problems(graded, student):
    return [r["problem"] for r in graded["issues"] if r["student_id"] == student]


def test_the_honest_student_keeps_full_marks(graded):
    spec = load(EXERCISE)
    top = float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)
    assert graded["rows"]["a_honest"] == pytest.approx(top), graded["rows"]
    assert not _problems(graded, "a_honest"), _problems(graded, "a_honest")


def test_added_cells_cannot_extend_the_time_budget(graded):
    budget = 30 + TIMEOUT * _release_code_cells()
    assert budget == 110  # the release notebook's 8 code cells
    # no sandbox (the sleeper's included) lived past its budget, the blank re-run's own
    # budget (the release notebook's: the same 110 s) and a margin for nbgrader's start
    # and its writing of the result on a loaded 2-core machine, while the sleeper's cells
    # alone would take 800 s and a budget counted from the submitted notebook 1,110 s
    longest = graded["sampler"].longest_sandbox_s()
    assert budget * 0.8 < longest < 2 * budget + 150, longest
    assert (
        2 * budget + 150
        < SLEEP_CELLS * SLEEP_S
        < 30 + TIMEOUT * (_release_code_cells() + SLEEP_CELLS)
    )
    named = [p for p in _problems(graded, "sleeper") if f"limit of {budget:g} s" in p]
    assert named, _problems(graded, "sleeper")
    assert graded["rows"]["sleeper"] == 0.0


def test_the_sandbox_memory_is_bounded_as_a_whole(graded):
    got = graded["sampler"].memory
    assert got < MEMORY + (384 << 20), got / (1 << 30)
    assert got > 1 << 30, got / (1 << 30)  # the attack filled the sandbox up to its limit


def test_the_sandbox_cannot_write_more_than_its_disk(graded):
    grew = graded["sampler"].disk - graded["sampler"].disk0
    assert grew < DISK + (1 << 30), grew / (1 << 20)  # 2,000 MiB were written
    nb_path = graded["course"] / "autograded" / "diskfill" / CHAPTER / f"{EXERCISE}.ipynb"
    if nb_path.is_file():  # graded: its own count of what it wrote
        text = nb_path.read_text()
        import re

        counts = [int(n) for n in re.findall(r"wrote (\d+) MiB", text)]
        assert all(n * (1 << 20) <= DISK for n in counts), counts


def _orphaned(group):
    """Whether a cgroup named ``autograder-<label>-<creator pid>-<token>`` outlived the
    process that made it (a live creator is another test's grading, still running)."""
    parts = group.split("-")
    if len(parts) < 4 or parts[0] != "autograder" or not parts[-2].isdigit():
        return group.startswith("autograder-")
    return not os.path.exists(f"/proc/{parts[-2]}")


def test_orphaned_names_a_group_whose_maker_is_gone():
    assert not _orphaned(f"autograder-cleanroom-{os.getpid()}-00ff00ff")
    assert _orphaned("autograder-cleanroom-999999999-00ff00ff")
    assert _orphaned("autograder-oddname")
    assert not _orphaned("user.slice")


def test_nothing_of_a_sandbox_survives_autograde(graded):
    assert graded["left"] == [], graded["left"]
    # every group the run made is gone once its grader exited (groups of a grading that
    # runs beside this one, in another test process, belong to a live process)
    assert not [g for g in graded["new_groups"] if _orphaned(g)], graded["new_groups"]
    ours = tempfile.gettempdir().rstrip("/") + "/"  # another test run's sandboxes may be live
    assert not [m for m in graded["mounts"] if m.startswith(ours) and "autograder-sandbox-" in m], (
        graded["mounts"]
    )
    assert "no cgroup per sandbox" not in graded["stderr"], graded["stderr"][-2000:]
