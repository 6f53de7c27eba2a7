"""The clean-room verifier: grades computed outside the student's kernel.

The verifier is tested directly (fast): honest answers written differently from the
reference, answers that cheat on three exercises, resource limits, and that nothing is
written outside the sandbox. One small class is then graded end to end with nbgrader, and
the gradebook and ``grading_issues.csv`` are read from outside afterwards.
"""

import os
import sqlite3
import sys
import time
from pathlib import Path

import nbformat
import pytest
from helpers.answer_notebooks import with_answer
from helpers.autograder_cases import WRONG
from helpers.course_roster import import_roster
from helpers.worker_traces import sandbox_user_processes as _sandbox_user_processes
from helpers.worker_traces import started_here, temp_root

from autograder import REPO_ROOT
from autograder.build import grade_ids, solution_source
from autograder.checks import check_points, run_check
from autograder.cleanroom import static_imports, verify_source
from autograder.cleanroom_process import DEFAULT_LIMITS, Sandbox
from autograder.codec import decode, encode
from autograder.exercises import load

#: graded as a class is: every clean-room child forked from this worker's warm server
#: (tests/test_autograder_cleanroom_fork.py holds both kinds of child to the same verdicts)
pytestmark = pytest.mark.usefixtures("cleanroom_fork_server")

SEED = 4242
FAST = {"call_s": 5.0, "start_s": 30.0, "cpu_s": 30, "memory_bytes": 2 << 30}

# ---------------------------------------------------------------- answers
RANK_SCIPY = """import collections
import numpy as np
import scipy.linalg


def rank_bound(H, y, n_classes):
    H = np.array(H, dtype=float)
    n = H.shape[0]
    Y = np.zeros((n, n_classes))
    for i, label in enumerate(y):
        Y[i, int(label)] = 1.0
    X = np.column_stack([H, np.ones(n)])
    coef = scipy.linalg.lstsq(X, Y)[0]
    residual = float(((Y - X @ coef) ** 2).sum())
    r = int(np.linalg.matrix_rank(H))
    counts = collections.Counter(int(v) for v in y)
    sizes = sorted(counts.get(c, 0) for c in range(n_classes))
    dropped = n_classes - r - 1
    return residual, int(sum(sizes[:dropped])) if dropped > 0 else 0
"""

RETRIEVAL_LOOPS = """import math
import numpy as np
from sklearn.preprocessing import normalize


def retrieval_metrics(query_h, query_y, corpus_h, corpus_y, ks=(1, 5, 10)):
    q = normalize(np.asarray(query_h, dtype=float))
    c = normalize(np.asarray(corpus_h, dtype=float))
    sims = q @ c.T
    per = []
    for i in range(len(q)):
        order = sorted(range(len(c)), key=lambda j: (-sims[i, j], j))
        rel = [corpus_y[j] == query_y[i] for j in order]
        R = sum(rel)
        if R == 0:
            continue
        row = {}
        for k in ks:
            top = rel[:k]
            row[f"recall@{k}"] = sum(top) / R
            row[f"hit@{k}"] = float(any(top))
            dcg = sum(1.0 / math.log2(j + 2) for j, r in enumerate(top) if r)
            ideal = sum(1.0 / math.log2(j + 2) for j in range(min(R, len(top))))
            row[f"ndcg@{k}"] = dcg / ideal
        first = rel.index(True)
        row["mrr"] = 1.0 / (first + 1)
        hits, ap = 0, 0.0
        for j, r in enumerate(rel):
            if r:
                hits += 1
                ap += hits / (j + 1)
        row["map"] = ap / R
        per.append(row)
    if not per:
        raise ValueError("no query has a relevant item in the corpus")
    return {key: float(np.mean([row[key] for row in per])) for key in per[0]}
"""

WRONG_RANK = "def rank_bound(H, y, n_classes):\n    return 0.0, 0\n"
WRONG_RETRIEVAL = (
    "def retrieval_metrics(query_h, query_y, corpus_h, corpus_y, ks=(1, 5, 10)):\n"
    '    out = {f"{m}@{k}": 0.0 for k in ks for m in ("recall", "hit", "ndcg")}\n'
    "    out.update(mrr=0.0, map=0.0)\n    return out\n"
)
WRONG_KNN = (
    "import numpy as np\n\n\ndef knn_classify(*args, **kwargs):\n"
    "    queries = args[2] if len(args) > 2 else kwargs['test_h']\n"
    "    return np.zeros(len(queries), dtype=np.int64)\n"
)

#: wraps every later cell in try/except, so failing asserts and checks pass silently
TRANSFORMER = """
from IPython import get_ipython

_ip = get_ipython()
if _ip is not None:
    def _swallow(lines):
        body = ["    " + line for line in lines] or ["    pass\\n"]
        return ["try:\\n"] + body + ["\\nexcept BaseException:\\n    pass\\n"]
    _ip.input_transformers_post.append(_swallow)
"""

#: the reference and the grader's helpers replaced in sys.modules
PATCH = """
import sys
import types

_fake = types.ModuleType("fake_reference")
_fake.{fn} = {fn}
for _name in list(sys.modules):
    if _name.split(".")[0] in ("repeval_" + "ref", "auto" + "grader"):
        _mod = sys.modules[_name]
        setattr(_mod, "{fn}", {fn})
        for _helper in ("differs", "gate", "call_student", "finding"):
            if hasattr(_mod, _helper):
                setattr(_mod, _helper, lambda *a, **k: "")
sys.modules["repeval_" + "ref"] = _fake
"""

IMPORT_REF = "from repeval_ref import {fn}\n"
DYNAMIC_IMPORT = (
    "import importlib\n\n_ref = importlib.import_module('repeval' + '_ref')\n"
    "{fn} = getattr(_ref, '{fn}')\n"
)

EXERCISES = {
    "rank_bound": WRONG_RANK,
    "retrieval_metrics": WRONG_RETRIEVAL,
    "knn_classify": WRONG_KNN,
}


def _score(verdicts):
    return sum(v.points for v in verdicts), sum(v.max_points for v in verdicts)


def _sandbox_processes():
    """Processes running the clean room's child program: started ones (the program's file
    name is on their command line) and forked ones (children of a fork server)."""

    def cmdline(pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                return fh.read()
        except OSError:
            return b""

    def ppid(pid):
        try:
            with open(f"/proc/{pid}/status") as fh:
                return next(int(line.split()[1]) for line in fh if line.startswith("PPid:"))
        except (OSError, StopIteration):
            return 0

    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or not started_here(entry):
            continue
        line = cmdline(entry)
        server = b"fork_server.py\x00cleanroom\x00"
        if b"cleanroom_child.py" in line or (server in line and server in cmdline(ppid(entry))):
            found.append(int(entry))
    return found


# ---------------------------------------------------------------- the codec
def test_plain_data_round_trip_without_pickle():
    import numpy as np

    x = {
        "a": (np.arange(6.0).reshape(2, 3), [1, 2.5, None, True, "s"]),
        "g": np.random.default_rng(3),
        "s": np.float32(1.5),
        "i": 2**70,
    }
    y = decode(encode(x))
    assert np.array_equal(y["a"][0], x["a"][0]) and y["a"][0].dtype == x["a"][0].dtype
    assert y["a"][1] == [1, 2.5, None, True, "s"] and isinstance(y["a"], tuple)
    assert y["g"].random() == np.random.default_rng(3).random()
    assert type(y["s"]) is np.float32 and y["i"] == 2**70
    with pytest.raises(TypeError):
        encode(np.array([object()], dtype=object))
    with pytest.raises(TypeError):
        encode(lambda: 0)


def test_torch_modules_travel_as_layers_and_state():
    """A Sequential of standard layers goes to the child as its layers and state and
    comes back as state (weights, running statistics, training flags, gradients); any
    other module is refused, so its check is left to nbgrader's score."""
    import torch

    from autograder.codec import ModuleState, Unsupported
    from autograder.codec import write_back as _write_back

    torch.manual_seed(0)
    enc = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Dropout(0.2)
    )
    enc[1].running_mean.fill_(2.0)
    enc.train()
    enc[1].eval()
    back = decode(encode(enc))
    assert isinstance(back, ModuleState)
    other = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Dropout(0.2)
    )
    _write_back(other, back)
    for (k, a), (k2, b) in zip(enc.state_dict().items(), other.state_dict().items()):
        assert k == k2 and torch.equal(a, b)
    assert [m.training for m in other.modules()] == [m.training for m in enc.modules()]
    x = torch.ones(2, 3, requires_grad=True)
    assert decode(encode(x)).requires_grad and not decode(encode(x.detach())).requires_grad

    class Custom(torch.nn.Module):
        def forward(self, x):
            return x

    for bad in (Custom(), torch.nn.Sequential(Custom()), torch.nn.Conv1d(1, 1, 1)):
        with pytest.raises(Unsupported):
            encode(bad)


# ---------------------------------------------------------------- honest answers
@pytest.mark.parametrize(
    "name,code",
    [
        ("rank_bound", RANK_SCIPY),
        ("retrieval_metrics", RETRIEVAL_LOOPS),
        ("knn_classify", None),
        ("wilson_interval", None),
        ("frozen_features", None),
    ],
)
def test_honest_answers_written_differently_get_full_marks(name, code):
    spec = load(name)
    verdicts = verify_source(spec, code or solution_source(spec), SEED, FAST)
    assert all(v.points is not None for v in verdicts)  # every cell verified here
    got, top = _score(verdicts)
    assert top == float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)
    assert got == top, [v.message for v in verdicts if v.points != v.max_points]


@pytest.mark.parametrize(
    "name,lost",
    [
        ("wilson_interval", {}),
        ("rank_bound", {"rank_bound/properties": "Python float"}),
        ("linear_cka", {"linear_cka/properties": "Python float"}),
    ],
)
def test_answers_returning_numpy_scalars_are_graded_on_their_values(name, lost):
    """An answer that returns numpy.float64 where a float is expected (NumPy reductions do)
    is graded like any other: such values used to come back from the child as the text
    "np.float64(...)", which failed to decode. Only the exercises whose statement asks for
    a Python float lose that one check, with a message that says so."""
    spec = load(name)
    wrap = (
        f"\n\nimport numpy as _np\n_reference = {name}\n\n\n"
        f"def {name}(*args, **kwargs):\n"
        "    out = _reference(*args, **kwargs)\n"
        "    if isinstance(out, tuple):\n"
        "        return tuple(_np.float64(v) if isinstance(v, float) else v for v in out)\n"
        "    return _np.float64(out) if isinstance(out, float) else out\n"
    )
    verdicts = verify_source(spec, solution_source(spec) + wrap, SEED, FAST)
    short = {v.grade_id: v for v in verdicts if v.points != v.max_points}
    by_check = grade_ids(spec)
    assert set(short) == {by_check[c] for c in lost}, [v.message for v in short.values()]
    for check, words in lost.items():
        v = short[by_check[check]]
        assert v.points == 0 and words in v.message and "float64" in v.message


@pytest.mark.parametrize(
    "exercise,variant",
    [
        (e, v)
        for e in ("knn_classify", "rank_bound", "retrieval_metrics", "rankme", "frozen_features")
        for v in WRONG.get(e, {})
    ],
)
def test_verifier_agrees_with_the_in_process_checks_on_wrong_answers(exercise, variant):
    spec = load(exercise)
    code = WRONG[exercise][variant][0]
    ns = {}
    exec(code, ns)
    verdicts = {v.grade_id: v.points for v in verify_source(spec, code, SEED, FAST)}
    for check, gid in grade_ids(spec).items():
        want = sum(f.points for f in run_check(check, ns[check.split("/")[0]], SEED))
        assert verdicts[gid] == pytest.approx(want), (check, verdicts[gid], want)


# ---------------------------------------------------------------- cheating
@pytest.mark.parametrize("exercise", sorted(EXERCISES))
@pytest.mark.parametrize("attack", ["transformer", "patch", "import", "dynamic_import"])
def test_cheating_answers_score_zero(exercise, attack):
    spec = load(exercise)
    wrong = EXERCISES[exercise]
    code = {
        "transformer": TRANSFORMER + "\n" + wrong,
        "patch": wrong + PATCH.format(fn=exercise),
        "import": IMPORT_REF.format(fn=exercise),
        "dynamic_import": DYNAMIC_IMPORT.format(fn=exercise),
    }[attack]
    verdicts = verify_source(spec, code, SEED, FAST)
    assert _score(verdicts)[0] == 0.0
    if attack in ("import", "dynamic_import"):
        assert all("repeval_ref" in v.message and "scores 0" in v.message for v in verdicts)
    if attack == "import":
        assert static_imports(code) == ["repeval_ref"]


def test_no_reference_or_grader_on_the_childs_path():
    spec = load("rank_bound")
    probe = (
        "import importlib.util, sys\n"
        "_found = [m for m in ('repeval_ref', 'autograder')\n"
        "          if any(m in p for p in sys.path)]\n"
        + RANK_SCIPY
        + "\n_orig = rank_bound\n\n\ndef rank_bound(H, y, n_classes):\n"
        "    assert not _found, _found\n    return _orig(H, y, n_classes)\n"
    )
    got, top = _score(verify_source(spec, probe, SEED, FAST))
    assert got == top


def test_the_child_loads_the_codec_yet_the_grader_stays_out_of_reach():
    """The child program loads the codec from its file: no ``autograder`` module is in
    the answer's ``sys.modules`` or importable, statically or dynamically, afterwards."""
    import autograder.cleanroom_child as child

    assert not any(type(h).__name__ == "RefuseForbidden" for h in sys.meta_path)
    spec = load("rank_bound")
    probe = (
        "import sys\n_seen = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('autograder', 'repeval_ref', 'cleanroom_codec', 'codec'))\n"
        + RANK_SCIPY
        + "\n_orig = rank_bound\n\n\ndef rank_bound(H, y, n_classes):\n"
        "    assert not _seen, _seen\n    return _orig(H, y, n_classes)\n"
    )
    got, top = _score(verify_source(spec, probe, SEED, FAST))
    assert got == top
    for code in (
        "import autograder.codec\n" + RANK_SCIPY,
        "import importlib\n_c = importlib.import_module('auto' + 'grader.codec')\n" + RANK_SCIPY,
    ):
        verdicts = verify_source(spec, code, SEED, FAST)
        assert _score(verdicts)[0] == 0.0
        assert all("autograder" in v.message and "scores 0" in v.message for v in verdicts)
    assert child.FORBIDDEN == ("repeval_ref", "autograder")


def test_answer_cannot_write_outside_its_folder(tmp_path):
    course = tmp_path / "course"
    (course / "autograded" / "other").mkdir(parents=True)
    db = course / "gradebook.db"
    sqlite3.connect(db).execute("create table t (x)").connection.commit()
    before = db.read_bytes()
    marker = f"autograder-cleanroom-test-{os.getpid()}"
    code = (
        f"import os\nfor _p in ({str(db)!r}, {str(course / 'autograded' / 'other' / 'x')!r},"
        f" '/tmp/{marker}', {str(REPO_ROOT / marker)!r}):\n"
        "    try:\n        open(_p, 'wb').write(b'garbage')\n    except OSError:\n        pass\n"
        + WRONG_RANK
    )
    assert _score(verify_source(load("rank_bound"), code, SEED, FAST))[0] == 0.0
    assert db.read_bytes() == before
    assert not (course / "autograded" / "other" / "x").exists()
    assert not Path("/tmp", marker).exists() and not (REPO_ROOT / marker).exists()
    assert not list(Path(temp_root()).glob("autograder-cleanroom-*/answer.py"))


# ---------------------------------------------------------------- resource limits
BOMBS = {
    "loop": "def rank_bound(H, y, n_classes):\n    while True:\n        pass\n",
    "memory": (
        "import numpy as np\n\n\ndef rank_bound(H, y, n_classes):\n"
        "    blocks = []\n    while True:\n        blocks.append(np.ones(1 << 27))\n"
    ),
    "fork": (
        "import os\n\n\ndef rank_bound(H, y, n_classes):\n    while True:\n"
        "        try:\n            os.fork()\n        except OSError:\n            pass\n"
    ),
}


@pytest.mark.parametrize(
    "bomb", [pytest.param(b, marks=pytest.mark.slow) if b == "fork" else b for b in sorted(BOMBS)]
)
def test_bombs_end_within_limits_and_leave_nothing_behind(bomb):
    # a short call limit: the loop and fork bombs spin on every core until it ends
    limits = {**FAST, "call_s": 1.0, "memory_bytes": 1 << 30, "cpu_s": 20}
    t0 = time.monotonic()
    verdicts = verify_source(load("rank_bound"), BOMBS[bomb], SEED, limits)
    took = time.monotonic() - t0
    assert _score(verdicts)[0] == 0.0
    # the visible tests and every hidden check: at most one call limit each (the first
    # time-out skips the rest), plus start-up
    assert took < 4 * limits["call_s"] * 4 + 30, took
    assert _sandbox_processes() == []
    # the next answer is unaffected
    spec = load("rank_bound")
    got, top = _score(verify_source(spec, solution_source(spec), SEED, FAST))
    assert got == top


def test_sandbox_limits_are_the_documented_defaults():
    with Sandbox("x = 1\n") as box:
        assert box.started.get("ok") is True
        assert box.limits == DEFAULT_LIMITS
        folder = box.dir
    assert not folder.exists()


# ---------------------------------------------------------------- end to end
#: the gradebook attack: at the top of the answer, overwrite every gradebook in reach,
#: write into every other student's folders, the course root, a sentinel folder outside
#: the course and the machine's /tmp and /dev/shm (paths filled in per test run)
VANDAL = """
import glob as _glob
import os as _os

_COURSE, _SENTINEL, _MARK = {course!r}, {sentinel!r}, {marker!r}


def _scribble(path):
    try:
        _os.makedirs(_os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(b"garbage")
    except OSError:
        pass


for _db in (_os.path.join(_COURSE, "gradebook.db"), _os.path.abspath("gradebook.db"),
            _os.path.abspath(_os.path.join("..", "..", "..", "gradebook.db"))):
    _scribble(_db)
for _folder in (_glob.glob(_os.path.join(_COURSE, "autograded", "*", "*"))
                + _glob.glob(_os.path.join(_COURSE, "submitted", "*", "*"))):
    _scribble(_os.path.join(_folder, "pwned.ipynb"))
for _name in _os.listdir(_os.path.join(_COURSE, "submitted")) if _os.path.isdir(_COURSE) else ():
    _scribble(_os.path.join(_COURSE, "autograded", _name, "rank", "pwned.txt"))
for _path in (_os.path.join(_COURSE, "pwned.txt"), _os.path.join(_SENTINEL, "pwned.txt"),
              "/tmp/" + _MARK, "/dev/shm/" + _MARK):
    _scribble(_path)
"""

#: the visible-test attack: at the top of the cell, ``exec`` is made to
#: do nothing, so nbgrader's kernel runs no later cell and the visible tests "pass"
VISIBLE_PATCH = "import builtins\nbuiltins.exec = lambda *args, **kwargs: None\n"

EXERCISE_ASSIGNMENTS = ["knn", "rank", "retrieval"]


def _honest():
    return {
        "rank_bound": RANK_SCIPY,
        "retrieval_metrics": RETRIEVAL_LOOPS,
        "knn_classify": solution_source(load("knn_classify")),
    }


def _attackers(course, sentinel, marker):
    vandal = VANDAL.format(course=str(course), sentinel=str(sentinel), marker=marker)
    return {
        "transformer": {ex: TRANSFORMER + "\n" + w for ex, w in EXERCISES.items()},
        "patcher": {ex: w + PATCH.format(fn=ex) for ex, w in EXERCISES.items()},
        "importer": {ex: IMPORT_REF.format(fn=ex) for ex in EXERCISES},
        "vandal": {ex: vandal + "\n" + w for ex, w in EXERCISES.items()},
        "visible_patcher": {ex: VISIBLE_PATCH + "\n" + w for ex, w in EXERCISES.items()},
    }


def _grade_class(base, course_root, answers, workers=2):
    from autograder.course import Course

    subs = base / "submissions"
    for student, by_ex in answers.items():
        for ex, code in by_ex.items():
            spec = load(ex)
            path = subs / student / spec.ASSIGNMENT / f"{ex}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(with_answer(spec, code), str(path))
    course = Course(course_root, timeout=20, log=lambda *a: None)
    course.setup(EXERCISE_ASSIGNMENTS)
    import_roster(course, answers, base)
    course.collect(subs)
    return course


def _tree_hashes(folder):
    import hashlib

    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(folder).rglob("*"))
        if p.is_file()
    }


def _outside_dir(tmp_path_factory, name):
    """A folder outside /tmp where possible (/var/tmp), so that the sandbox's cover over
    the real course directory is what keeps an answer out, not its private /tmp."""
    import tempfile

    if os.path.isdir("/var/tmp") and os.access("/var/tmp", os.W_OK):
        return Path(tempfile.mkdtemp(prefix=f"autograder-test-{name}-", dir="/var/tmp"))
    return tmp_path_factory.mktemp(name)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """An honest student and five attackers (each attack on all three exercises, on an
    otherwise wrong answer), graded with two workers; and the honest student alone, the
    class without the attackers, graded the same way for comparison."""
    import shutil

    outside = _outside_dir(tmp_path_factory, "course")
    sentinel = _outside_dir(tmp_path_factory, "sentinel")
    marker = f"autograder-sandbox-test-{os.getpid()}"
    root = outside / "course"
    answers = {"honest": _honest(), **_attackers(root, sentinel, marker)}
    course = _grade_class(tmp_path_factory.mktemp("attacked"), root, answers)
    before = {s: _tree_hashes(course.root / "submitted" / s) for s in answers}
    course.autograde(seed=SEED, workers=2)
    alone = _grade_class(tmp_path_factory.mktemp("alone"), outside / "alone", {"honest": _honest()})
    alone.autograde(seed=SEED, workers=2)
    yield {
        "course": course,
        "alone": alone,
        "before": before,
        "sentinel": sentinel,
        "marker": marker,
        "students": sorted(answers),
    }
    shutil.rmtree(outside, ignore_errors=True)
    shutil.rmtree(sentinel, ignore_errors=True)


def _gradebook_scores(course):
    """(student, notebook) -> score, read with sqlite3 from outside nbgrader."""
    from nbgrader.api import Gradebook

    with sqlite3.connect(course.root / "gradebook.db") as con:
        assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    out = {}
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        for st in gb.students:
            for a in gb.assignments:
                for nb in a.notebooks:
                    out[st.id, nb.name] = gb.find_submission_notebook(nb.name, a.name, st.id).score
    return out


def _cell_grades(course, student):
    """(table, notebook, cell) -> auto score or comment of one student's graded cells,
    read with plain sqlite3."""
    out = {}
    with sqlite3.connect(course.root / "gradebook.db") as con:
        for table, column in (("grade", "auto_score"), ("comment", "auto_comment")):
            rows = con.execute(
                f"select n.name, b.name, g.{column} from {table} g "
                "join submitted_notebook sn on g.notebook_id = sn.id "
                "join submitted_assignment sa on sn.assignment_id = sa.id "
                "join notebook n on sn.notebook_id = n.id "
                "join base_cell b on g.cell_id = b.id "
                "where sa.student_id = ?",
                (student,),
            ).fetchall()
            out.update({(table, nb, cell): v for nb, cell, v in rows})
    return out


def _cell_view(cell):
    """(source, text of each output stream, the other outputs) of one cell, as a reader sees
    it: a kernel may send one printed line as one stream message or as several (under load
    "...(1/1)" and "\\n" came apart), and a notebook shows the pieces as one text."""
    streams, other = {}, []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            streams[o.get("name")] = streams.get(o.get("name"), "") + o.get("text", "")
        else:
            other.append(o.get("text", "") or o.get("ename", ""))
    return cell.source, sorted(streams.items()), other


def _feedback_view(folder):
    """The cells (see :func:`_cell_view`) of every autograded notebook under ``folder``."""
    out = {}
    for p in sorted(Path(folder).rglob("*.ipynb")):
        nb = nbformat.read(str(p), as_version=4)
        out[str(p.relative_to(folder))] = [_cell_view(c) for c in nb.cells]
    return out


@pytest.mark.slow  # a class graded end to end
def test_class_graded_by_the_clean_room(graded):
    course = graded["course"]
    scores = _gradebook_scores(course)
    attackers = [s for s in graded["students"] if s != "honest"]
    for ex in EXERCISES:
        spec = load(ex)
        top = float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)
        assert scores["honest", ex] == pytest.approx(top), ex
        for student in attackers:
            assert scores[student, ex] == 0.0, (student, ex)
    rows = course.issues()
    assert not [r for r in rows if r["student_id"] == "honest"]
    for student in attackers:
        flagged = {r["notebook"]: r["problem"] for r in rows if r["student_id"] == student}
        for ex in EXERCISES:
            assert ex in flagged, (student, ex, rows)
    by = {}  # every problem of a notebook (one notebook can have several findings)
    for r in rows:
        by[r["student_id"], r["notebook"]] = (
            by.get((r["student_id"], r["notebook"]), "") + "\n" + r["problem"]
        )
    # the vandal's kernel sees only its own working folder of the copy (not even the
    # scratch gradebook beside it), and the clean room refuses what it tries: it is named
    # for the attempt (the real gradebook is checked below)
    assert (
        "tried to open" in by["vandal", "rank_bound"] and "tampering" in by["vandal", "rank_bound"]
    )
    for ex in EXERCISES:
        assert "imports the course's reference" in by["importer", ex]
        # the transformer passes the visible tests in the kernel: both scores are named;
        # the patcher's sys.modules patch has no hidden test to change in the kernel (none
        # runs there): it is named as tampering with the clean room's score
        assert "in-kernel (nbgrader) score" in by["transformer", ex]
        for student in ("transformer", "patcher"):
            assert "clean-room score 0" in by[student, ex] and "tampering" in by[student, ex]


@pytest.mark.slow  # a class graded end to end
def test_visible_points_are_recorded_from_the_clean_room_not_the_patched_kernel(graded):
    """The answer that disables ``exec`` passes the visible tests in nbgrader's kernel;
    the gradebook holds the clean room's 0 for that cell, and the change is logged."""
    course = graded["course"]
    cells = _cell_grades(course, "visible_patcher")
    rows = {
        r["notebook"]: r["problem"] for r in course.issues() if r["student_id"] == "visible_patcher"
    }
    for ex in EXERCISES:
        top = float(load(ex).VISIBLE_POINTS)
        assert cells["grade", ex, f"{ex}_visible_tests"] == 0.0, ex
        assert f"{ex}_visible_tests {top:g} -> 0" in rows[ex], rows.get(ex)


@pytest.mark.slow  # a class graded end to end
@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="the OS-level confinement of nbgrader's run "
    "(own user id, private /tmp, the real course covered) needs root; "
    "without it a submission runs with the grader's rights",
)
def test_gradebook_attack_reaches_nothing_outside_its_sandbox(graded):
    course, alone = graded["course"], graded["alone"]
    # the real gradebook is an intact SQLite file; the honest student's grades are those
    # of the class graded without the attackers, cell by cell
    assert _gradebook_scores(course)
    assert _cell_grades(course, "honest") == _cell_grades(alone, "honest")
    assert _cell_grades(course, "honest")
    # other students' files: the submissions are byte for byte what was collected, the
    # autograded notebooks (the feedback) are those of the class without the attackers
    for student, hashes in graded["before"].items():
        if student != "vandal":
            assert _tree_hashes(course.root / "submitted" / student) == hashes, student
    ours, theirs = (_feedback_view(c.root / "autograded" / "honest") for c in (course, alone))
    assert ours.keys() == theirs.keys()
    differ = [
        (nb, i, a, b) for nb in ours for i, (a, b) in enumerate(zip(ours[nb], theirs[nb])) if a != b
    ]
    assert not differ and all(len(ours[nb]) == len(theirs[nb]) for nb in ours), (
        "the honest student's feedback differs from the class without attackers: "
        + "; ".join(f"{nb} cell {i}: {a[1]!r:.300} != {b[1]!r:.300}" for nb, i, a, b in differ[:3])
    )
    # nothing written outside the sandbox: the course root, a sentinel folder, /tmp
    assert not [p for p in course.root.rglob("pwned*")]
    assert not list(graded["sentinel"].iterdir())
    assert not Path("/tmp", graded["marker"]).exists()
    assert not Path("/dev/shm", graded["marker"]).exists()
    assert not list(Path(temp_root()).glob("autograder-sandbox-*"))
    assert _sandbox_user_processes() == []
