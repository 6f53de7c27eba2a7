"""A red team's attacks, kept as a class graded end to end.

Two honest students (``a_honest`` is graded before every attacker, ``z_honest`` after)
and one student per attack hand in the same three exercises (``knn_classify``,
``rank_bound``, ``retrieval_metrics``). The class is collected twice (a regrade collects
again) and graded once on a Dask ``LocalCluster`` that speaks TLS only, as root; then
everything is read from outside: the gradebook, every student's files and grades, the
course's own notebooks, the machine's shared temporary folders, a port that stands in
for a service of the grader, and the processes left behind.

=============  ===========================================================  ===========
student        attack                                                       underneath
=============  ===========================================================  ===========
``pathload``   loads the reference package by its file path, after          the
               removing the clean room's import hook (finding 1)            reference
``blocker``    writes half a reply into every pipe, then blocks             honest
               (finding 4: the clean room's protocol)
``kcrash``     kills its kernel, only when it runs under nbgrader           honest
               (item 4: a notebook whose grading run fails scores 0)
``snoop``      reads the gradebook and another student's answer, leaves     wrong
               files in ``/tmp``, ``/dev/shm``, ``/var/tmp``, ``/run/lock``
               and an IPython startup file, calls the grader's port and
               the Dask scheduler (findings 5, 7, 8)
``linker``     hands in links to another student's submitted notebook,      (links)
               the course's solution notebook, a file only root may read
               and ``/dev/zero`` (finding 3)
``backdater``  a zip whose entries and ``timestamp.txt`` say 2019, past     honest
               the due date under the late policy ``zero`` (finding 6)
=============  ===========================================================  ===========

Each attack scores 0 on each exercise and changes nothing outside its sandbox; every
attack is named in ``grading_issues.csv`` for each exercise (a score that differs between
the kernel and the clean room, a crashed run, a refused link, a claimed time, and what
the answer tried beyond its clean room: the reads and the calls of ``snoop``, the
reference package that ``pathload`` opens by path); the honest students keep full marks
and get no line. That ``snoop`` got nothing, and left nothing, is checked from outside. The
visible-test patch and the kernel tampering of finding 2 are graded the same way in
``tests/test_autograder_cleanroom.py``.
"""

import datetime as dt
import hashlib
import inspect
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import nbformat
import pytest
from helpers.answer_notebooks import with_answer
from helpers.course_roster import import_roster
from helpers.listener import listener as _listener
from helpers.listener import was_reached as _was_reached
from helpers.worker_traces import sandbox_user_processes as _sandbox_processes

import repeval_ref
from autograder.build import solution_source
from autograder.checks import check_points
from autograder.course import Course
from autograder.dask_tls import cluster_security, grader_tls, have_openssl, make_credentials
from autograder.exercises import load

pytestmark = [
    pytest.mark.slow,  # a class of eight graded end to end
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="the attacks are confined only as root "
        "(a user id, mounts and a network of their own); without root every "
        "student is named as graded without full confinement",
    ),
    pytest.mark.skipif(not have_openssl(), reason="the TLS cluster needs the openssl command"),
]

SEED = 3030
TIMEOUT = 10
EXERCISES = {"knn_classify": "knn", "rank_bound": "rank", "retrieval_metrics": "retrieval"}
HONEST = ("a_honest", "z_honest")
ATTACKERS = ("backdater", "blocker", "kcrash", "linker", "pathload", "snoop")

WRONG = {
    "knn_classify": (
        "import numpy as np\n\n\ndef knn_classify(*args, **kwargs):\n"
        "    queries = args[2] if len(args) > 2 else kwargs['test_h']\n"
        "    return np.zeros(len(queries), dtype=np.int64)\n"
    ),
    "rank_bound": "def rank_bound(H, y, n_classes):\n    return 0.0, 0\n",
    "retrieval_metrics": (
        "def retrieval_metrics(query_h, query_y, corpus_h, corpus_y, ks=(1, 5, 10)):\n"
        "    out = {f'{m}@{k}': 0.0 for k in ks for m in ('recall', 'hit', 'ndcg')}\n"
        "    out.update(mrr=0.0, map=0.0)\n    return out\n"
    ),
}

#: loads the reference package from its folder by path, under another name, after
#: removing the import hooks that a program defines for itself (the clean room's)
PATHLOAD = """
import importlib.util as _util
import sys as _sys

for _hook in list(_sys.meta_path):
    if type(_hook).__module__ == "__main__":
        _sys.meta_path.remove(_hook)
_spec = _util.spec_from_file_location("_stolen", {init!r},
                                      submodule_search_locations=[{folder!r}])
_stolen = _util.module_from_spec(_spec)
_sys.modules["_stolen"] = _stolen
_spec.loader.exec_module(_stolen)
{fn} = _stolen.{fn}
"""

#: the start of a reply written into every pipe the answer holds, then a wait
BLOCKER = """
import os as _os
import stat as _stat
import time as _time

for _fd in range(3, 64):
    try:
        if _stat.S_ISFIFO(_os.fstat(_fd).st_mode):
            _os.write(_fd, b'{"ok": tr')
    except OSError:
        pass
_time.sleep(10 ** 6)
"""

#: the kernel dies, only under nbgrader (the clean room has no IPython kernel)
KCRASH = """
import os as _os
import sys as _sys

if "ipykernel" in _sys.modules:
    _os._exit(1)
"""

#: read what a kernel must not see, leave it where the next student might, call out
SNOOP = """
import os as _os
import socket as _socket

_loot = []
for _path in ({gradebook!r}, {victim!r}):
    try:
        with open(_path, "rb") as _fh:
            _loot.append(_fh.read(4096))
    except OSError:
        pass
for _where in ("/tmp", "/dev/shm", "/var/tmp", "/run/lock"):
    try:
        with open(_os.path.join(_where, {marker!r} + "-left"), "wb") as _fh:
            _fh.write(b"".join(_loot) or b"nothing")
    except OSError:
        pass
for _startup in (_os.path.join(_os.environ.get("IPYTHONDIR", ""), "profile_default", "startup"),
                 _os.path.expanduser("~/.ipython/profile_default/startup")):
    try:
        _os.makedirs(_startup, exist_ok=True)
        with open(_os.path.join(_startup, "00-left.py"), "w") as _fh:
            _fh.write("print({marker!r} + ' startup ran')\\n")
    except OSError:
        pass
for _port in ({port}, {scheduler_port}):
    try:
        _socket.create_connection(("127.0.0.1", _port), timeout=2).sendall(b"payload")
    except OSError:
        pass
if _loot:
    print(_loot)
"""


def _outside_dir(name):
    """A folder outside /tmp (/var/tmp where possible): the course there is kept out of
    reach by the sandbox's cover over it, not by the private /tmp."""
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix=f"autograder-redteam-{name}-", dir=base))


def _notebook(ex, code):
    return with_answer(load(ex), code)


def _reference_folder():
    init = inspect.getsourcefile(repeval_ref)
    return init, os.path.dirname(init)


def _hashes(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(folder).rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _write(nb, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


def _submissions(subs, course_root, marker, secret, port, scheduler_port, root_only):
    init, folder = _reference_folder()
    victim = course_root / "submitted" / "a_honest" / "rank" / "rank_bound.ipynb"
    for ex, chapter in EXERCISES.items():
        honest = solution_source(load(ex))
        _write(
            _notebook(ex, honest + f"\n# {secret}\n"), subs / "a_honest" / chapter / f"{ex}.ipynb"
        )
        _write(_notebook(ex, honest), subs / "z_honest" / chapter / f"{ex}.ipynb")
        _write(
            _notebook(ex, PATHLOAD.format(init=init, folder=folder, fn=ex)),
            subs / "pathload" / chapter / f"{ex}.ipynb",
        )
        _write(_notebook(ex, honest + BLOCKER), subs / "blocker" / chapter / f"{ex}.ipynb")
        _write(_notebook(ex, honest + KCRASH), subs / "kcrash" / chapter / f"{ex}.ipynb")
        _write(
            _notebook(
                ex,
                SNOOP.format(
                    gradebook=str(course_root / "gradebook.db"),
                    victim=str(victim),
                    marker=marker,
                    port=port,
                    scheduler_port=scheduler_port,
                )
                + WRONG[ex],
            ),
            subs / "snoop" / chapter / f"{ex}.ipynb",
        )
    # links: to another student's submitted notebook, to the course's solution notebook
    # (with its hidden tests), to a file only root may read, and to a device
    links = {
        "rank/rank_bound.ipynb": victim,
        "knn/knn_classify.ipynb": course_root / "solutions" / "knn" / "knn_classify.ipynb",
        "retrieval/retrieval_metrics.ipynb": root_only,
        "knn/endless.ipynb": Path("/dev/zero"),
    }
    for rel, target in links.items():
        (subs / "linker" / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, subs / "linker" / rel)
    # a zip dated 2019, with a timestamp.txt that says so too
    with zipfile.ZipFile(subs / "backdater.zip", "w") as zf:
        for ex, chapter in EXERCISES.items():
            info = zipfile.ZipInfo(f"{chapter}/{ex}.ipynb", date_time=(2019, 12, 31, 12, 0, 0))
            zf.writestr(info, nbformat.writes(_notebook(ex, solution_source(load(ex)))))
            zf.writestr(
                zipfile.ZipInfo(f"{chapter}/timestamp.txt", date_time=(2019, 12, 31, 12, 0, 0)),
                "2019-12-31 12:00:00 UTC",
            )


def _scores(course):
    """(student, exercise) -> the score the exports give (the raw score the grader recorded,
    the term's late policy applied), None for a notebook never graded."""
    grades = {(g.student, g.notebook): g for g in course.grades()}
    out = {}
    for sid in course.roster():
        for ex in EXERCISES:
            g = grades.get((sid, ex))
            out[sid, ex] = g.score if g is not None and g.graded else None
    return out


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    from distributed import LocalCluster

    outside = _outside_dir("course")
    base = tmp_path_factory.mktemp("redteam")
    marker = f"autograder-redteam-{os.getpid()}"
    secret = f"a_honest's secret {os.urandom(6).hex()}"
    root_only = outside / "root_only.txt"
    root_only.write_text(f"only root may read this: {secret}\n")
    os.chmod(root_only, 0o600)
    srv = _listener()
    creds = make_credentials(base / "tls")
    course = Course(outside / "course", timeout=TIMEOUT, log=lambda *a: None)
    now = dt.datetime.now(dt.timezone.utc)
    due = (now - dt.timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
    course.setup(
        list(EXERCISES.values()), due={c: due for c in EXERCISES.values()}, late_policy="zero"
    )
    students = [*HONEST, *ATTACKERS]
    import_roster(course, students, base)
    times = base / "lms_times.csv"
    on_time = (now - dt.timedelta(days=2)).strftime("%Y-%m-%d %H:%M")
    times.write_text(
        "student,timestamp\n" + "".join(f"{s},{on_time}\n" for s in students if s != "backdater")
    )
    try:
        with LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            protocol="tls://",
            security=cluster_security(creds),
        ) as cluster:
            address = cluster.scheduler_address
            subs = base / "submissions"
            _submissions(
                subs,
                course.root,
                marker,
                secret,
                srv.getsockname()[1],
                int(address.rsplit(":", 1)[1]),
                root_only,
            )
            course.collect(subs, times=times)
            before = {
                "honest": {s: _hashes(course.root / "submitted" / s) for s in HONEST},
                "solutions": _hashes(course.root / "solutions"),
                "exercises": _hashes(course.root / "exercises"),
            }
            course.collect(subs, times=times)  # a regrade collects again
            course.autograde(seed=SEED, scheduler=address, tls=grader_tls(creds))
        reached = _was_reached(srv)
        yield {
            "course": course,
            "before": before,
            "marker": marker,
            "secret": secret,
            "reached": reached,
            "scores": _scores(course),
            "outside": outside,
        }
    finally:
        srv.close()
        shutil.rmtree(outside, ignore_errors=True)


def _top(ex):
    spec = load(ex)
    return float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)


def test_every_attack_scores_zero_and_the_honest_keep_full_marks(attacked):
    scores = attacked["scores"]
    for ex in EXERCISES:
        for student in HONEST:
            assert scores[student, ex] == pytest.approx(_top(ex)), (student, ex)
        for student in ATTACKERS:
            assert scores[student, ex] == 0.0, (student, ex, scores[student, ex])


def test_every_attack_the_grader_can_see_is_named_per_exercise(attacked):
    rows = attacked["course"].issues()
    by = {}
    for r in rows:
        by.setdefault((r["student_id"], r["notebook"]), []).append(r["problem"])
    assert not [r for r in rows if r["student_id"] in HONEST], rows
    assert not [r for r in rows if "full confinement" in r["problem"]]
    init, _ = _reference_folder()
    course = attacked["course"]
    for ex in EXERCISES:
        for student in ATTACKERS:  # the backdater's line is its chapter's (below)
            assert student == "backdater" or by.get((student, ex)), (student, ex, rows)
        assert any("kernel crashed" in p for p in by["kcrash", ex]), by["kcrash", ex]
        assert any("symbolic link" in p for p in by["linker", ex]), by.get(("linker", ex))
        # what the clean room's watch saw: every read and call of snoop, the path load
        tried = [p for p in by["snoop", ex] if p.startswith("in the clean room the answer tried")]
        assert len(tried) == 1, by["snoop", ex]
        for what in (
            f"open {course.root / 'gradebook.db'}",
            "rank_bound.ipynb",
            "/var/tmp/",
            "connect to ('127.0.0.1'",
        ):
            assert what in tried[0], (what, tried[0])
        assert any(f"open {init}" in p for p in by["pathload", ex]), by["pathload", ex]
    claimed = {
        r["assignment"]
        for r in rows
        if r["student_id"] == "backdater"
        and "2019-12-31" in r["problem"]
        and "not trusted" in r["problem"]
    }
    assert claimed == set(EXERCISES.values()), rows


def test_the_kernel_could_not_read_the_reference_and_ran_no_hidden_test(attacked):
    """In nbgrader's kernel the reference's files are stand-ins (the path load fails with
    the stand-in's reason); every hidden cell of every autograded notebook shows the
    clean room's findings, never the kernel's placeholder."""
    from autograder.checks import KERNEL_NOTE

    course = attacked["course"]
    for ex, chapter in EXERCISES.items():
        nb = nbformat.read(
            str(course.root / "autograded" / "pathload" / chapter / f"{ex}.ipynb"), as_version=4
        )
        errors = [
            o
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        assert any(
            o.get("ename") == "ImportError"
            and "cannot be read while a submission is graded" in o.get("evalue", "")
            for o in errors
        ), (ex, errors)
        for student in (*HONEST, *ATTACKERS):
            path = course.root / "autograded" / student / chapter / f"{ex}.ipynb"
            if not path.is_file():
                continue
            nb = nbformat.read(str(path), as_version=4)
            for cell in nb.cells:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                if not meta.get("grade") or meta.get("grade_id", "").endswith("_visible_tests"):
                    continue
                text = "".join(o.get("text", "") for o in cell.get("outputs", []))
                assert text.strip() and KERNEL_NOTE not in text, (student, ex, text)


def test_nothing_changed_outside_the_sandboxes(attacked):
    course, before = attacked["course"], attacked["before"]
    import sqlite3

    with sqlite3.connect(course.root / "gradebook.db") as con:
        assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    for student, hashes in before["honest"].items():
        assert _hashes(course.root / "submitted" / student) == hashes, student
    assert _hashes(course.root / "solutions") == before["solutions"]
    assert _hashes(course.root / "exercises") == before["exercises"]
    for p in (course.root / "submitted").rglob("*"):
        assert not p.is_symlink(), p
    # nothing was read through a link or left for a later student
    secret, marker = attacked["secret"], attacked["marker"]
    assert secret not in (course.root / "grading_issues.csv").read_text()
    for student in ("z_honest", *ATTACKERS):
        for folder in ("submitted", "autograded"):
            for p in (course.root / folder / student).rglob("*"):
                if p.is_file():
                    text = p.read_text(errors="replace")
                    assert secret not in text and f"{marker} startup ran" not in text, p
    for where in ("/tmp", "/dev/shm", "/var/tmp", "/run/lock"):
        if os.path.isdir(where):
            assert not [n for n in os.listdir(where) if n.startswith(marker)], where
    # no sandbox called the stand-in for the grader's services; none is still running
    assert not attacked["reached"]
    assert _sandbox_processes() == []
