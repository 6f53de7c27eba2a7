"""Every byte from a student process is hostile input: attacks on the clean room's channel,
handed in as real submissions and graded by ``autograde``, judged from outside.

The answer runs inside the clean-room child, the process that writes the replies, so it
can write replies of its own. Each attacker below hands in the shipped solution (it would
earn full marks) plus one attack; two honest students (``a_honest`` graded before every
attacker, ``z_honest`` after) hand in the same notebooks.

==============  ==========================================================================
student         attack
==============  ==========================================================================
``fakeline``    prints a reply line, and writes it into every pipe it holds (top level)
``shape``       writes valid JSON of a shape no message has, during a call
``nested``      writes 200,000 nested brackets (a recursion bomb for a JSON parser)
``flood``       writes a 128 MiB reply (the grader's peak memory is measured)
``badgen``      returns a random generator whose bit generator is a subclass named
                ``test``, after ``np.random.test`` (NumPy's test suite)
``forge_in``    changes its input in place, then forges the reply: "inputs untouched"
``forge_rng``   makes extra random calls, then forges the generator's state after the
                right calls ("random calls made"), on ``low_shot_eval``
``forge_time``  forges a reply at once ("returned in no time"), then keeps working
``daemon``      leaves a process running in a session of its own
``encoded``     the shipped solution compressed, base64-encoded and passed to ``exec``
==============  ==========================================================================

Each protocol attack scores 0 with a line naming the cause in ``grading_issues.csv`` and
in its feedback notebook; the daemon is gone when ``autograde`` returns and is named;
the encoded copy keeps its marks but is named in ``grading_issues.csv`` and paired with
the course's solution in the similarity report; both honest students get full marks and
no line. The class is graded serially; a smaller class of the attacks that used to stop
``autograde`` is graded with ``autograde --workers 2`` (the command line) and on a Dask
cluster.
"""

import base64
import os
import re
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import nbformat
import pytest
from helpers.answer_notebooks import with_answer
from helpers.course_roster import import_roster

from autograder.build import solution_source
from autograder.checks import check_points
from autograder.course import Course
from autograder.exercises import load

pytestmark = [
    pytest.mark.slow,  # a class of twelve graded end to end, and one of five twice more
    pytest.mark.skipif(
        os.geteuid() != 0, reason="the clean room and the sandboxes are confined only as root"
    ),
]

SEED = 4646
TIMEOUT = 10
CHAPTERS = {"rank_bound": "rank", "low_shot_eval": "noise"}
#: the other notebook of the noise chapter, which the honest students hand in too
OTHERS = {"wilson_interval": "noise"}
HONEST = ("a_honest", "z_honest")
PROTOCOL = ("fakeline", "shape", "nested", "flood", "badgen", "forge_in", "forge_rng", "forge_time")
MARKER = f"autograder-protocol-daemon-{os.getpid()}"

#: write ``data`` into every pipe the answer holds (the clean room's reply channel among
#: them), and a reply forged from the child's own request and encoder, found on the stack
TOOLS = """
import copy as _copy
import json as _json
import os as _os
import stat as _stat
import sys as _sys
import time as _time

import numpy as _np

_ROOM = "ipykernel" not in _sys.modules     # the clean room, not nbgrader's kernel


def _write_all(data):
    for _fd in range(3, 64):
        try:
            if _stat.S_ISFIFO(_os.fstat(_fd).st_mode):
                _os.write(_fd, data)
        except OSError:
            pass


def _forge(result, swap=None):
    f = _sys._getframe(1)
    while f is not None and not ("req" in f.f_locals and "enc" in f.f_locals):
        f = f.f_back
    if f is None:
        return
    loc, swap = f.f_locals, swap or {}
    enc = loc["enc"]
    msg = {"seq": loc["req"]["seq"], "result": enc(result),
           "args": [enc(swap.get(id(a), a)) for a in loc["args"]],
           "kwargs": {k: enc(swap.get(id(v), v)) for k, v in loc["kwargs"].items()},
           "warnings": [], "peak_bytes": 0, "forbidden": [], "noticed": [], "compiled": []}
    _write_all((_json.dumps(msg) + "\\n").encode())
"""

#: the function graded, wrapping the shipped one (renamed ``_shipped``)
WRAP = {
    "shape": """
def rank_bound(H, y, n_classes):
    if _ROOM:
        _write_all(b'{"seq": 1, "error": "x", "forbidden": {}, "noticed": [], '
                   b'"compiled": []}\\n')
    return _shipped(H, y, n_classes)
""",
    "nested": """
def rank_bound(H, y, n_classes):
    if _ROOM:
        _write_all(b"[" * 200000 + b"]" * 200000 + b"\\n")
    return _shipped(H, y, n_classes)
""",
    "flood": """
def rank_bound(H, y, n_classes):
    if _ROOM:
        _write_all(b'{"seq": 1, "result": {"t": "str", "v": "' + b"x" * (128 << 20)
                   + b'"}}\\n')
    return _shipped(H, y, n_classes)
""",
    "badgen": """
class test(_np.random.PCG64):
    pass


def rank_bound(H, y, n_classes):
    return _np.random.Generator(test(0))
""",
    "forge_in": """
def rank_bound(H, y, n_classes):
    out = _shipped(H, y, n_classes)
    if isinstance(H, _np.ndarray) and H.flags.writeable:
        before = H.copy()
        H[...] = 0.0                      # the input changed in place ...
        _forge(out, {id(H): before})      # ... and a report that it was not
    return out
""",
    "forge_time": """
_first = [True]


def rank_bound(H, y, n_classes):
    out = _shipped(H, y, n_classes)
    if _ROOM and _first[0]:
        _first[0] = False
        _forge(out)                       # "returned at once" ...
        _time.sleep(3)                    # ... while it goes on working
    return out
""",
    "forge_rng": """
def low_shot_eval(*args):
    out = _shipped(*args)
    rng = args[-1]                        # the generator comes last
    right = _copy.deepcopy(rng)           # the state the right calls leave ...
    rng.random(7)                         # ... then calls nobody asked for
    _forge(out, {id(rng): right})
    return out
""",
}

FAKELINE = """
_line = b'{"seq": 0, "ok": true, "forbidden": [], "noticed": [], "compiled": []}\\n'
print(_line.decode())
_write_all(_line)
"""

DAEMON = f"""
import subprocess as _sp
_sp.Popen([_sys.executable, "-c", "import time; time.sleep(900)", {MARKER!r}],
          start_new_session=True, stdin=_sp.DEVNULL, stdout=_sp.DEVNULL,
          stderr=_sp.DEVNULL)
"""


def _answer(student, ex):
    """The solution cell ``student`` hands in for exercise ``ex``."""
    shipped = solution_source(load(ex))
    if student in HONEST:
        return shipped
    if student == "encoded":
        blob = base64.b64encode(zlib.compress(shipped.encode())).decode()
        return (
            f"import base64, zlib\n\nexec(zlib.decompress(base64.b64decode({blob!r})).decode())\n"
        )
    if student == "daemon":
        return TOOLS + shipped + DAEMON
    if student == "fakeline":
        return TOOLS + shipped + FAKELINE
    return TOOLS + shipped.replace(f"def {ex}(", "def _shipped(") + WRAP[student]


def _exercises(student):
    if student in HONEST:
        return [*CHAPTERS, *OTHERS]
    return ["low_shot_eval"] if student == "forge_rng" else ["rank_bound"]


def _top(ex):
    spec = load(ex)
    return float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)


def _course(base, students):
    course = Course(base / "course", timeout=TIMEOUT, log=lambda *a: None)
    course.setup(sorted(set(CHAPTERS.values())))
    import_roster(course, students, base)
    subs = base / "submissions"
    for s in students:
        for ex in _exercises(s):
            path = subs / s / {**CHAPTERS, **OTHERS}[ex] / f"{ex}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(with_answer(load(ex), _answer(s, ex)), str(path))
    course.collect(subs)
    return course


def _scores(course):
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        for st in gb.students:
            for ex, chapter in CHAPTERS.items():
                try:
                    out[st.id, ex] = gb.find_submission_notebook(ex, chapter, st.id).score
                except MissingEntry:
                    pass
    return out


def _lines(course):
    by = {}
    for r in course.issues():
        by.setdefault(r["student_id"], []).append(r["problem"])
    return by


def _daemons():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if MARKER.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def _peak_rss_kib():
    with open("/proc/self/status") as fh:
        return int(re.search(r"VmHWM:\s+(\d+)", fh.read()).group(1))


def _protocol_findings(course, student, ex, lines):
    assert any("breaks the clean room's protocol" in p for p in lines), (student, lines)
    nb = nbformat.read(
        str(course.root / "autograded" / student / CHAPTERS[ex] / f"{ex}.ipynb"), as_version=4
    )
    hidden = [
        "".join(o.get("text", "") for o in c.get("outputs", []))
        for c in nb.cells
        if c.get("metadata", {}).get("nbgrader", {}).get("grade")
        and not c.metadata.nbgrader.get("grade_id", "").endswith("_visible_tests")
    ]
    assert hidden and all("not graded:" in t and "protocol" in t for t in hidden), hidden


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("protocol")
    students = [*HONEST, *PROTOCOL, "daemon", "encoded"]
    course = _course(base, students)
    cwd = os.getcwd()
    here = Path(tempfile.mkdtemp(prefix="autograder-protocol-cwd-"))
    os.chdir(here)  # where a test suite run by the grader would leave .pytest_cache
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak to the present
        before = _peak_rss_kib()
        course.autograde(seed=SEED)
        rise = _peak_rss_kib() - before
        daemons = _daemons()
    finally:
        os.chdir(cwd)
    yield {"course": course, "rise_kib": rise, "daemons": daemons, "cwd": here}
    for pid in _daemons():  # never left for the next test, whatever happened
        os.kill(pid, 9)


def test_every_attack_on_the_channel_scores_zero_and_the_honest_keep_full_marks(graded):
    course = graded["course"]
    scores, lines = _scores(course), _lines(course)
    for s in HONEST:
        for ex in CHAPTERS:
            assert scores[s, ex] == pytest.approx(_top(ex)), (s, ex)
        assert s not in lines, lines[s]
    for s in PROTOCOL:
        ex = _exercises(s)[0]
        assert scores[s, ex] == 0.0, (s, scores[s, ex], lines.get(s))
        _protocol_findings(course, s, ex, lines.get(s, []))


def test_a_generator_name_from_the_child_is_never_looked_up(graded):
    lines = _lines(graded["course"])
    assert any("'test'" in p and "bit generators" in p for p in lines["badgen"]), lines["badgen"]
    for where in (graded["cwd"], graded["course"].root):
        assert not (where / ".pytest_cache").exists(), where


def test_the_grader_memory_stays_bounded_under_a_128_mib_reply(graded):
    """The grader took at most the cap of the flood's reply (a few MiB); its own peak,
    grading the whole class, rose by far less than the reply's 128 MiB."""
    rise_mib = graded["rise_kib"] / 1024
    print(f"grader's peak resident memory rose by {rise_mib:.0f} MiB during autograde")
    assert rise_mib < 128, rise_mib


def test_no_process_of_a_student_survives_and_the_attempt_is_named(graded):
    assert graded["daemons"] == []
    course = graded["course"]
    assert _scores(course)["daemon", "rank_bound"] == pytest.approx(_top("rank_bound"))
    assert any("start a process" in p for p in _lines(course)["daemon"])


def test_an_encoded_copy_is_named_and_fingerprinted(graded):
    from autograder.similarity import similarity_report

    course = graded["course"]
    assert _scores(course)["encoded", "rank_bound"] == pytest.approx(_top("rank_bound"))
    said = [p for p in _lines(course)["encoded"] if "code that is not in its cells" in p]
    assert len(said) == 1 and "exec()" in said[0] and "compile (<string>)" in said[0], said
    _, _, pairs = similarity_report(course.root)
    mine = [p for p in pairs if p["student"] == "encoded" or p["other"] == "encoded"]
    assert any(
        p["other"] in ("instructor's solution", "a_honest", "z_honest") or p["student"] in HONEST
        for p in mine
    ), pairs


def test_the_attacks_that_stopped_autograde_are_contained_with_workers_and_dask(tmp_path_factory):
    from distributed import LocalCluster

    from autograder.dask_tls import cluster_security, grader_tls, have_openssl, make_credentials

    base = tmp_path_factory.mktemp("protocol-workers")
    attackers = ("shape", "nested", "flood")
    course = _course(base, [*HONEST, *attackers])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder",
            "--course",
            str(course.root),
            "--timeout",
            str(TIMEOUT),
            "autograde",
            "--workers",
            "2",
            "--seed",
            str(SEED),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    runs = ["--workers 2"]
    if have_openssl():
        creds = make_credentials(base / "tls")
        with LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            protocol="tls://",
            security=cluster_security(creds),
        ) as cluster:
            course.autograde(seed=SEED, scheduler=cluster.scheduler_address, tls=grader_tls(creds))
        runs.append("dask")
    # the scores and lines of the last run (each run records its own)
    scores, lines = _scores(course), _lines(course)
    for s in HONEST:
        for ex in CHAPTERS:
            assert scores[s, ex] == pytest.approx(_top(ex)), (runs, s, ex)
        assert s not in lines, (runs, lines[s])
    for s in attackers:
        assert scores[s, "rank_bound"] == 0.0, (runs, s)
        _protocol_findings(course, s, "rank_bound", lines.get(s, []))
