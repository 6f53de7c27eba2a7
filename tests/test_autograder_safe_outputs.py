"""What people open after grading is safe, and no grader write follows a planted link.

A class of four is set up, collected, autograded, given feedback and exported by the real
commands (``python -m autograder ...``), as root, then judged from outside:

=============  =================================================================
student        attack
=============  =================================================================
``a_honest``   none: the other students' victim
``xss``        a raw-HTML Markdown cell with a script and an event handler, a cell
               whose HTML and JavaScript outputs carry scripts, and a notebook
               renamed ``<img src=x onerror=alert(1)>.ipynb``, which the grader's
               own note names
``linker``     its kernel replaces the student's ``submitted/linker/knn`` folder in
               nbgrader's copy by a link to ``a_honest``'s folder of the real
               course, then crashes (the blank re-run used to write through it)
``linksol``    the same, with a link to the course's ``solutions/knn``
=============  =================================================================

Every feedback page holds no ``<script>`` but the page's own MathJax and no event-handler
attribute at all, and carries its Content-Security-Policy; no CSV cell that is not a
number starts with ``= + - @``; ``a_honest``'s notebook and the solution are byte
for byte what they were and still owned by root; the linkers score 0 with the reason.
"""

import csv
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from helpers.answer_notebooks import with_answer

from autograder import REPO_ROOT
from autograder.build import solution_source
from autograder.csv_safe import FORMULA_STARTS, safe_cell
from autograder.exercises import load
from autograder.feedback import CSP_META, MATHJAX_FILE

pytestmark = [
    pytest.mark.slow,  # a class of four graded end to end
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="the sandbox's user id and mounts, which the link case is about, exist only as root",
    ),
]

EXERCISES = {"knn_classify": "knn", "rank_bound": "rank"}
STUDENTS = ("a_honest", "linker", "linksol", "xss")
XSS_NAME = "<img src=x onerror=alert(1)>.ipynb"

#: in nbgrader's kernel only: put a link in place of this student's folder in the copy
#: of the course, then crash the kernel
LINK_AND_CRASH = """
import os as _os
import sys as _sys
from pathlib import Path as _Path

if "ipykernel" in _sys.modules:
    _here = _Path.cwd()
    for _up in (_here, *_here.parents):
        _mine = _up / "submitted" / {student!r} / "knn"
        if _mine.is_dir() and not _mine.is_symlink():
            try:
                _os.rename(_mine, _mine.with_name(f"knn-moved-{{_os.getpid()}}"))
                _os.symlink({target!r}, _mine)
            except OSError:
                pass
            break
    _os._exit(1)
"""

#: a kernel's HTML and JavaScript outputs with scripts and handlers
OUTPUTS = """
from IPython.display import HTML, Javascript, display
display(HTML("<script>alert('html output')</script><b onmouseover=\\"alert(1)\\">bold</b>"
             "<a href=\\"javascript:alert(2)\\">link</a>"))
display(Javascript("alert('javascript output')"))
"""

MARKDOWN = (
    "<script>alert('markdown')</script>\n\n<img src=x onerror=\"alert('md')\"> "
    '<a href="javascript:alert(3)">click</a> <svg onload=alert(4)></svg>'
)


def _autograder(course, *args, timeout=1500):
    cmd = [sys.executable, "-m", "autograder", "--course", str(course), "--timeout", "20", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)
    assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def _write(nb, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


def _submissions(subs, course):
    for ex, chapter in EXERCISES.items():
        honest = solution_source(load(ex))
        for student in STUDENTS:
            nb = with_answer(load(ex), honest)
            name = f"{ex}.ipynb"
            if ex == "knn_classify" and student in ("linker", "linksol"):
                target = (
                    course / "submitted" / "a_honest" / "knn"
                    if student == "linker"
                    else course / "solutions" / "knn"
                )
                nb.cells.append(
                    nbformat.v4.new_code_cell(
                        LINK_AND_CRASH.format(student=student, target=str(target))
                    )
                )
            if student == "xss" and ex == "knn_classify":
                nb.cells.insert(1, nbformat.v4.new_markdown_cell(MARKDOWN))
                nb.cells.append(nbformat.v4.new_code_cell(OUTPUTS))
            if student == "xss" and ex == "rank_bound":
                name = XSS_NAME
            _write(nb, subs / student / chapter / name)


def _hash(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class _Tags(HTMLParser):
    """Every start tag of a page, with its attributes, as a browser's tokenizer sees it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self._in_script = None
        self.scripts = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag == "script":
            self._in_script = [dict(attrs).get("src"), ""]
            self.scripts.append(self._in_script)

    def handle_data(self, data):
        if self._in_script is not None:
            self._in_script[1] += data

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    outside = Path(tempfile.mkdtemp(prefix="autograder-safe-outputs-", dir=base))
    work = tmp_path_factory.mktemp("safe_outputs")
    course = outside / "course"
    try:
        _autograder(course, "setup", "--assign", *EXERCISES.values())
        roster = work / "roster.csv"
        roster.write_text(
            "id,first_name,last_name,email\n"
            + "".join(f"{s},{s.title()},Student,{s}@example.org\n" for s in STUDENTS)
        )
        _autograder(course, "roster", str(roster))
        subs = work / "submissions"
        _submissions(subs, course)
        _autograder(course, "collect", str(subs))
        victims = [
            course / "submitted" / "a_honest" / "knn" / "knn_classify.ipynb",
            course / "solutions" / "knn" / "knn_classify.ipynb",
        ]
        before = {p: (_hash(p), os.stat(p).st_uid) for p in victims}
        _autograder(course, "autograde", "--seed", "46")
        _autograder(course, "feedback")
        export = work / "grades.csv"
        _autograder(course, "export", str(export))
        with (course / "grading_issues.csv").open(newline="") as fh:
            issues = list(csv.DictReader(fh))
        yield {"course": course, "before": before, "export": export, "issues": issues}
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_no_grader_write_follows_a_link_planted_in_the_copy(graded):
    course = graded["course"]
    for path, (digest, uid) in graded["before"].items():
        assert not path.is_symlink() and not path.parent.is_symlink(), path
        assert _hash(path) == digest, path
        assert os.stat(path).st_uid == uid == 0, (path, os.stat(path).st_uid)
    for p in (course / "submitted").rglob("*"):
        assert not p.is_symlink(), p
    by = {}
    for r in graded["issues"]:
        by.setdefault((r["student_id"], r["notebook"]), []).append(r["problem"])
    for student in ("linker", "linksol"):
        assert any("kernel crashed" in p for p in by[student, "knn_classify"]), by
    rows = {
        (r["student_id"], r["assignment"]): float(r["score"])
        for r in csv.DictReader(graded["export"].open(newline=""))
    }
    for student in ("linker", "linksol"):
        nb = nbformat.read(
            str(course / "autograded" / student / "knn" / "knn_classify.ipynb"), as_version=4
        )
        assert "kernel crashed" in nb.cells[0].source
    assert rows["a_honest", "knn"] > 0 and rows["a_honest", "rank"] > 0
    assert rows["linker", "rank"] == rows["a_honest", "rank"]


def test_no_feedback_page_runs_anything_from_a_student(graded):
    course = graded["course"]
    pages = sorted((course / "feedback").glob("*/*/*.html"))
    assert {p.parts[-3] for p in pages} == set(STUDENTS), pages
    for page in pages:
        raw = page.read_text(encoding="utf-8")
        parsed = _Tags()
        parsed.feed(raw)
        handlers = [
            (t, a)
            for t, a in parsed.tags
            for a, _ in [(n, v) for n, v in a]
            if a.lower().startswith("on")
        ]
        assert handlers == [], (page, handlers)
        links = [
            v
            for _, attrs in parsed.tags
            for n, v in attrs
            if n in ("href", "src") and v and v.strip().lower().startswith("javascript:")
        ]
        assert links == [], (page, links)
        assert [
            t for t, _ in parsed.tags if t in ("iframe", "object", "embed", "svg", "form", "base")
        ] == [], page
        # the page's own scripts only: the MathJax configuration and the shared bundle
        for src, body in parsed.scripts:
            if src is not None:
                assert src.endswith("/" + MATHJAX_FILE) and body.strip() == "", (page, src)
            else:
                assert body.strip().startswith("window.MathJax = {"), (page, body[:200])
        assert len(parsed.scripts) == 2, (page, parsed.scripts)
        head = raw[: raw.index("<body")]
        assert CSP_META in head and head.index(CSP_META) < head.index("<script"), page
    xss = course / "feedback" / "xss"
    knn = (xss / "knn" / "knn_classify.html").read_text(encoding="utf-8")
    assert "bold" in knn  # the harmless part of the HTML output is kept
    rank = (xss / "rank" / "rank_bound.html").read_text(encoding="utf-8")
    # the grader's note names the file as written, escaped
    assert "&lt;img src=x onerror=alert(1)&gt;.ipynb" in rank


def _risky(path):
    with open(path, newline="") as fh:
        return [
            c
            for row in csv.reader(fh)
            for c in row
            if c.startswith(FORMULA_STARTS) and safe_cell(c) != c
        ]


def test_no_csv_cell_is_a_formula(graded):
    course, export = graded["course"], graded["export"]
    for path in (
        course / "grading_issues.csv",
        export,
        export.with_name("grades_by_notebook.csv"),
        export.with_name("grades_canvas.csv"),
    ):
        assert path.is_file(), path
        assert _risky(path) == [], path
