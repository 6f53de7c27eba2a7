"""The clean-room verifier (issue 17): grades computed outside the student's kernel.

The verifier is tested directly (fast): honest answers written differently from the
reference, answers that cheat on three exercises, resource limits, and that nothing is
written outside the sandbox. One small class is then graded end to end with nbgrader, and
the gradebook and ``grading_issues.csv`` are read from outside afterwards.
"""
import csv
import os
import sqlite3
import sys
import time
from pathlib import Path

import nbformat
import pytest

from autograder import REPO_ROOT
from autograder.build import grade_ids, solution_source
from autograder.checks import check_points, run_check
from autograder.cleanroom import (DEFAULT_LIMITS, Sandbox, decode, encode, static_imports,
                                  verify_source)
from autograder.exercises import load

sys.path.insert(0, str(Path(__file__).parent))
from autograder_cases import WRONG  # noqa: E402

SEED = 4242
FAST = {"call_s": 5.0, "start_s": 30.0, "cpu_s": 30, "memory_bytes": 2 << 30}

# ---------------------------------------------------------------- answers
RANK_SCIPY = '''import collections
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
'''

RETRIEVAL_LOOPS = '''import math
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
'''

WRONG_RANK = "def rank_bound(H, y, n_classes):\n    return 0.0, 0\n"
WRONG_RETRIEVAL = ('def retrieval_metrics(query_h, query_y, corpus_h, corpus_y, ks=(1, 5, 10)):\n'
                   '    out = {f"{m}@{k}": 0.0 for k in ks for m in ("recall", "hit", "ndcg")}\n'
                   '    out.update(mrr=0.0, map=0.0)\n    return out\n')
WRONG_KNN = ("import numpy as np\n\n\ndef knn_classify(*args, **kwargs):\n"
             "    queries = args[2] if len(args) > 2 else kwargs['test_h']\n"
             "    return np.zeros(len(queries), dtype=np.int64)\n")

#: wraps every later cell in try/except, so failing asserts and checks pass silently
TRANSFORMER = '''
from IPython import get_ipython

_ip = get_ipython()
if _ip is not None:
    def _swallow(lines):
        body = ["    " + line for line in lines] or ["    pass\\n"]
        return ["try:\\n"] + body + ["\\nexcept BaseException:\\n    pass\\n"]
    _ip.input_transformers_post.append(_swallow)
'''

#: the reference and the grader's helpers replaced in sys.modules
PATCH = '''
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
'''

IMPORT_REF = "from repeval_ref import {fn}\n"
DYNAMIC_IMPORT = ("import importlib\n\n_ref = importlib.import_module('repeval' + '_ref')\n"
                  "{fn} = getattr(_ref, '{fn}')\n")

EXERCISES = {"rank_bound": WRONG_RANK, "retrieval_metrics": WRONG_RETRIEVAL,
             "knn_classify": WRONG_KNN}


def _score(verdicts):
    return sum(v.points for v in verdicts), sum(v.max_points for v in verdicts)


def _sandbox_processes():
    """Processes running the clean room's child program (its import hook's class name)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if b"class _Refuse" in fh.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


# ---------------------------------------------------------------- the codec
def test_plain_data_round_trip_without_pickle():
    import numpy as np

    x = {"a": (np.arange(6.0).reshape(2, 3), [1, 2.5, None, True, "s"]),
         "g": np.random.default_rng(3), "s": np.float32(1.5), "i": 2**70}
    y = decode(encode(x))
    assert np.array_equal(y["a"][0], x["a"][0]) and y["a"][0].dtype == x["a"][0].dtype
    assert y["a"][1] == [1, 2.5, None, True, "s"] and isinstance(y["a"], tuple)
    assert y["g"].random() == np.random.default_rng(3).random()
    assert type(y["s"]) is np.float32 and y["i"] == 2**70
    with pytest.raises(TypeError):
        encode(np.array([object()], dtype=object))
    with pytest.raises(TypeError):
        encode(lambda: 0)


# ---------------------------------------------------------------- honest answers
@pytest.mark.parametrize("name,code", [("rank_bound", RANK_SCIPY),
                                       ("retrieval_metrics", RETRIEVAL_LOOPS),
                                       ("knn_classify", None), ("wilson_interval", None)])
def test_honest_answers_written_differently_get_full_marks(name, code):
    spec = load(name)
    verdicts = verify_source(spec, code or solution_source(spec), SEED, FAST)
    got, top = _score(verdicts)
    assert top == float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)
    assert got == top, [v.message for v in verdicts if v.points != v.max_points]


@pytest.mark.parametrize("exercise,variant", [(e, v) for e in ("knn_classify", "rank_bound",
                                                              "retrieval_metrics", "rankme")
                                              for v in WRONG.get(e, {})])
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
    code = {"transformer": TRANSFORMER + "\n" + wrong,
            "patch": wrong + PATCH.format(fn=exercise),
            "import": IMPORT_REF.format(fn=exercise),
            "dynamic_import": DYNAMIC_IMPORT.format(fn=exercise)}[attack]
    verdicts = verify_source(spec, code, SEED, FAST)
    assert _score(verdicts)[0] == 0.0
    if attack in ("import", "dynamic_import"):
        assert all("repeval_ref" in v.message and "scores 0" in v.message for v in verdicts)
    if attack == "import":
        assert static_imports(code) == ["repeval_ref"]


def test_no_reference_or_grader_on_the_childs_path():
    spec = load("rank_bound")
    probe = ("import importlib.util, sys\n"
             "_found = [m for m in ('repeval_ref', 'autograder')\n"
             "          if any(m in p for p in sys.path)]\n" + RANK_SCIPY +
             "\n_orig = rank_bound\n\n\ndef rank_bound(H, y, n_classes):\n"
             "    assert not _found, _found\n    return _orig(H, y, n_classes)\n")
    got, top = _score(verify_source(spec, probe, SEED, FAST))
    assert got == top


def test_answer_cannot_write_outside_its_folder(tmp_path):
    course = tmp_path / "course"
    (course / "autograded" / "other").mkdir(parents=True)
    db = course / "gradebook.db"
    sqlite3.connect(db).execute("create table t (x)").connection.commit()
    before = db.read_bytes()
    marker = f"autograder-cleanroom-test-{os.getpid()}"
    code = (f"import os\nfor _p in ({str(db)!r}, {str(course / 'autograded' / 'other' / 'x')!r},"
            f" '/tmp/{marker}', {str(REPO_ROOT / marker)!r}):\n"
            "    try:\n        open(_p, 'wb').write(b'garbage')\n    except OSError:\n        pass\n"
            + WRONG_RANK)
    assert _score(verify_source(load("rank_bound"), code, SEED, FAST))[0] == 0.0
    assert db.read_bytes() == before
    assert not (course / "autograded" / "other" / "x").exists()
    assert not Path("/tmp", marker).exists() and not (REPO_ROOT / marker).exists()
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("autograder-cleanroom-*/answer.py"))


# ---------------------------------------------------------------- resource limits
BOMBS = {
    "loop": "def rank_bound(H, y, n_classes):\n    while True:\n        pass\n",
    "memory": ("import numpy as np\n\n\ndef rank_bound(H, y, n_classes):\n"
               "    blocks = []\n    while True:\n        blocks.append(np.ones(1 << 27))\n"),
    "fork": ("import os\n\n\ndef rank_bound(H, y, n_classes):\n    while True:\n"
             "        try:\n            os.fork()\n        except OSError:\n            pass\n"),
}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_bombs_end_within_limits_and_leave_nothing_behind(bomb):
    limits = {**FAST, "call_s": 2.0, "memory_bytes": 1 << 30, "cpu_s": 20}
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
def _with_code(spec, code):
    nb = nbformat.read(str(REPO_ROOT / "exercises" / spec.ASSIGNMENT / f"{spec.NAME}.ipynb"),
                       as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = code
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from autograder.course import Course

    base = tmp_path_factory.mktemp("cleanroom")
    subs = base / "submissions"
    answers = {
        "honest": {"rank_bound": RANK_SCIPY, "retrieval_metrics": RETRIEVAL_LOOPS,
                   "knn_classify": solution_source(load("knn_classify"))},
        "cheater": {"rank_bound": TRANSFORMER + "\n" + WRONG_RANK,
                    "retrieval_metrics": WRONG_RETRIEVAL + PATCH.format(fn="retrieval_metrics"),
                    "knn_classify": IMPORT_REF.format(fn="knn_classify")},
    }
    for student, by_ex in answers.items():
        for ex, code in by_ex.items():
            spec = load(ex)
            path = subs / student / spec.ASSIGNMENT / f"{ex}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(_with_code(spec, code), str(path))
    course = Course(base / "course", timeout=20, log=lambda *a: None)
    course.setup(["rank", "retrieval", "knn"])
    course.collect(subs)
    course.autograde(seed=SEED)
    return course


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
                    out[st.id, nb.name] = gb.find_submission_notebook(nb.name, a.name,
                                                                      st.id).score
    return out


def test_class_graded_by_the_clean_room(graded):
    scores = _gradebook_scores(graded)
    for ex in EXERCISES:
        spec = load(ex)
        top = float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)
        assert scores["honest", ex] == pytest.approx(top), ex
        assert scores["cheater", ex] == 0.0, ex
    with (graded.root / "grading_issues.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["student_id"] == "cheater"]
    flagged = {r["notebook"]: r["problem"] for r in rows}
    for ex in EXERCISES:
        assert ex in flagged, (ex, rows)
        assert "in-kernel (nbgrader) score" in flagged[ex] and "clean-room score 0" in flagged[ex]
    assert "imports the course's reference" in flagged["knn_classify"]
    assert "tampering" in flagged["rank_bound"] and "tampering" in flagged["retrieval_metrics"]
    assert not [r for r in csv.DictReader((graded.root / "grading_issues.csv").open())
                if r["student_id"] == "honest"]
