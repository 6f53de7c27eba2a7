"""The instructor pipeline around nbgrader: release, roster, collect, autograde, feedback, export.

Every step runs nbgrader as a child process (``python -m nbgrader ...``) with the course's
configuration (``autograder/nbgrader_config.py``, found through ``JUPYTER_CONFIG_PATH``)
and ``--CourseDirectory.root`` set to the course directory, so a crash in nbgrader or in a
kernel can never take the command down with it.

Robustness (what :meth:`Course.collect` and :meth:`Course.autograde` add to nbgrader):

* a submitted file that is not valid notebook JSON, that cannot be matched to an exercise,
  or that is missing is replaced by the blank release notebook with a Markdown cell at the
  top explaining why; it is graded (zero) like any other, and the problem is logged in
  ``<course>/grading_issues.csv`` and shown in the feedback;
* a renamed notebook is matched to its exercise through the nbgrader cell ids it carries;
* nbgrader grades a whole class in one run; if one notebook brings nbgrader down for its
  submission (a kernel that dies, e.g. ``os._exit``, or one that cannot be interrupted),
  the submission is re-graded notebook by notebook, and a notebook that fails again is
  graded as blank with the reason stated. The other students are never affected, and the
  gradebook only ever holds complete results;
* ``autograde(workers=N)`` grades N students at a time, one nbgrader process per student,
  all sharing the SQLite gradebook with a long busy timeout; the grades are those of the
  single run;
* an infinite loop costs one cell: the per-cell timeout (``--timeout``) interrupts it.
"""
from __future__ import annotations

import csv
import datetime as _dt
import glob
import numbers
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import nbformat

from . import PACKAGE_DIR, REPO_ROOT
from .checks import SEED_ENV

ISSUES_FILE = "grading_issues.csv"
SEED_LOG = "grading_seeds.log"
GRADEBOOK = "gradebook.db"
#: seconds an nbgrader process waits for the gradebook while another one writes to it
#: (SQLite's busy timeout; the default of 5 s is too short for parallel grading)
GRADEBOOK_BUSY_TIMEOUT = 300


def _nbgrader_env(timeout=None, extra=None):
    env = dict(os.environ)
    paths = [str(PACKAGE_DIR)] + [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep)
                                  if p]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(paths)
    # nbgrader calls the `alembic` script of its environment: put that on PATH
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if timeout is not None:
        env["AUTOGRADER_CELL_TIMEOUT"] = str(int(timeout))
    env.pop("AUTOGRADER_COURSE_ROOT", None)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    if extra:
        env.update(extra)
    return env


def _check_workers(workers):
    """Return ``workers`` if it is an integer >= 1, else raise ValueError."""
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    return int(workers)


def run_nbgrader(root, *args, timeout=None, env_extra=None, log=None):
    """Run ``python -m nbgrader <args>`` on course directory ``root``; return the process."""
    cmd = [sys.executable, "-m", "nbgrader", *map(str, args),
           f"--CourseDirectory.root={Path(root).resolve()}"]
    proc = subprocess.run(cmd, cwd=str(root), env=_nbgrader_env(timeout, env_extra),
                          capture_output=True, text=True)
    if log is not None:
        log(f"$ nbgrader {' '.join(map(str, args))}  (exit {proc.returncode})")
    return proc


def _exercise_index(repo):
    """Map exercise name -> assignment, from the source notebooks in ``repo/solutions``."""
    index = {}
    for nb in sorted((Path(repo) / "solutions").glob("*/*.ipynb")):
        index[nb.stem] = nb.parent.name
    return index


# --------------------------------------------------------------------------- release
def release(repo=REPO_ROOT, dest=None, log=print):
    """Generate the student release of every assignment from ``repo/solutions``.

    nbgrader runs in a temporary course directory (so that no gradebook or checkpoint
    lands in the repository); the generated ``exercises/<assignment>/`` folders then
    replace those in ``dest`` (default ``repo/exercises``). Returns the written paths.
    """
    repo = Path(repo)
    dest = Path(dest) if dest is not None else repo / "exercises"
    with tempfile.TemporaryDirectory(prefix="autograder-release-") as tmp:
        shutil.copytree(repo / "solutions", Path(tmp) / "solutions")
        proc = run_nbgrader(tmp, "generate_assignment", "*", "--no-db", "--force", log=log)
        if proc.returncode != 0:
            raise RuntimeError("nbgrader generate_assignment failed:\n" + proc.stdout + proc.stderr)
        written = []
        for folder in sorted((Path(tmp) / "exercises").iterdir()):
            target = dest / folder.name
            target.mkdir(parents=True, exist_ok=True)
            for stale in target.glob("*.ipynb"):
                if not (folder / stale.name).exists():
                    stale.unlink()
            for nb in sorted(folder.glob("*.ipynb")):
                text = nb.read_text()
                out = target / nb.name
                if not out.exists() or out.read_text() != text:
                    out.write_text(text)
                written.append(out)
    return written


# --------------------------------------------------------------------------- course
class Course:
    """A grading course directory (nbgrader layout) for one class.

    Parameters
    ----------
    root : path
        The course directory (created if needed). ``solutions/`` is copied into it from
        ``repo`` by :meth:`setup`.
    repo : path
        The repository holding ``solutions/`` and ``exercises/``.
    timeout : int
        Per-cell execution limit in seconds while grading.
    """

    def __init__(self, root, repo=REPO_ROOT, timeout=60, log=print):
        self.root = Path(root).resolve()
        self.repo = Path(repo).resolve()
        self.timeout = int(timeout)
        self.log = log

    # -- helpers
    def nbgrader(self, *args, env_extra=None):
        return run_nbgrader(self.root, *args, timeout=self.timeout, env_extra=env_extra,
                            log=self.log)

    def assignments(self):
        return sorted(p.name for p in (self.root / "solutions").iterdir() if p.is_dir())

    def exercise_index(self):
        return _exercise_index(self.root)

    def record_issue(self, student, assignment, notebook, problem):
        path = self.root / ISSUES_FILE
        new = not path.exists()
        with path.open("a", newline="") as fh:
            w = csv.writer(fh)
            if new:
                w.writerow(["time", "student_id", "assignment", "notebook", "problem"])
            w.writerow([_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                        student, assignment, notebook, problem])
        self.log(f"  ! {student}/{assignment}/{notebook}: {problem}")

    def issues(self):
        path = self.root / ISSUES_FILE
        if not path.exists():
            return []
        with path.open() as fh:
            return list(csv.DictReader(fh))

    # -- setup
    def setup(self):
        """Create the course directory and register every assignment in its gradebook."""
        self.root.mkdir(parents=True, exist_ok=True)
        src = self.root / "solutions"
        if src.exists():
            shutil.rmtree(src)
        shutil.copytree(self.repo / "solutions", src)
        proc = self.nbgrader("generate_assignment", "*", "--force")
        if proc.returncode != 0:
            raise RuntimeError("nbgrader generate_assignment failed:\n" + proc.stdout + proc.stderr)
        return self.assignments()

    # -- roster
    def import_roster(self, csv_path):
        """Add every student of a CSV (columns id, first_name, last_name, email) at once."""
        proc = self.nbgrader("db", "student", "import", str(Path(csv_path).resolve()))
        if proc.returncode != 0:
            raise RuntimeError("nbgrader db student import failed:\n" + proc.stdout + proc.stderr)
        return proc

    # -- collect
    @staticmethod
    def _add_note(nb, text):
        """Insert a Markdown note at the top of a notebook (shown in the feedback)."""
        note = nbformat.v4.new_markdown_cell("**Grading note.** " + text)
        note["id"] = "autograder-grading-note"
        nb.cells = [c for c in nb.cells if c.get("id") != "autograder-grading-note"]
        nb.cells.insert(0, note)

    def _blank(self, assignment, notebook, reason):
        nb = nbformat.read(str(self.root / "exercises" / assignment / f"{notebook}.ipynb"),
                           as_version=4)
        self._add_note(nb, reason + " This notebook was therefore graded as the blank "
                       "exercise (zero points). Ask your instructor if you think this is wrong.")
        return nb

    def _restore_deleted_cells(self, nb, assignment, notebook):
        """Put back read-only cells (statement, tests) that a student deleted.

        nbgrader restores the *contents* of read-only cells but not deleted cells, which
        would then simply be missing from the grade. Tests belong to the instructor, so a
        deleted one is re-inserted after the cell that precedes it in the release; the
        student's own code still decides whether it passes. Returns the restored grade ids.
        """
        release = nbformat.read(str(self.root / "exercises" / assignment / f"{notebook}.ipynb"),
                                as_version=4)
        gid = lambda c: c.get("metadata", {}).get("nbgrader", {}).get("grade_id")  # noqa: E731
        present = {gid(c) for c in nb.cells}
        restored = []
        for i, cell in enumerate(release.cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if not meta.get("locked") or gid(cell) in present:
                continue
            pos = len(nb.cells)
            for prev in reversed(release.cells[:i]):
                ids = [gid(c) for c in nb.cells]
                if gid(prev) in ids:
                    pos = ids.index(gid(prev)) + 1
                    break
            else:
                pos = 0
            nb.cells.insert(pos, cell)
            present.add(gid(cell))
            restored.append(gid(cell))
        return restored

    @staticmethod
    def _identify(nb, index):
        """Exercise name of a notebook, from the nbgrader grade ids of its cells."""
        votes = {}
        for cell in nb.get("cells", []):
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            for name in index:
                if gid.startswith(name + "_"):
                    votes[name] = votes.get(name, 0) + 1
        return max(votes, key=votes.get) if votes else None

    def _student_files(self, entry):
        """(name, bytes) of every .ipynb of one student's folder or zip file."""
        files = []
        if entry.is_dir():
            for p in sorted(entry.rglob("*.ipynb")):
                if ".ipynb_checkpoints" not in p.parts:
                    files.append((p.name, p.read_bytes()))
        elif entry.suffix == ".zip":
            try:
                with zipfile.ZipFile(entry) as zf:
                    for info in zf.infolist():
                        name = info.filename
                        if name.endswith(".ipynb") and ".ipynb_checkpoints" not in name \
                                and not name.startswith("__MACOSX"):
                            files.append((Path(name).name, zf.read(info)))
            except zipfile.BadZipFile:
                return None
        return files

    def collect(self, folder):
        """Copy a folder of submissions into ``submitted/<student>/<assignment>/``.

        ``folder`` holds one entry per student, named by the student id: a directory of
        notebooks (any nesting) or a ``.zip`` file. Each notebook is matched to its
        exercise by its nbgrader cell ids, so renamed files are found; a notebook that is
        not valid JSON is matched by file name if possible. Every exercise of an assignment
        the student submitted anything for gets a notebook: a missing or unreadable one
        becomes the blank release with an explanation. Returns ``{student: [assignments]}``.
        """
        folder = Path(folder)
        index = self.exercise_index()
        collected = {}
        for entry in sorted(folder.iterdir()):
            if entry.name.startswith("."):
                continue
            student = entry.stem if entry.suffix == ".zip" else entry.name
            files = self._student_files(entry)
            if files is None:
                self.record_issue(student, "*", "*", f"{entry.name} is not a readable zip file")
                files = []
            found = {}      # exercise -> notebook node
            problems = {}   # exercise -> reason
            for fname, data in files:
                try:
                    nb = nbformat.reads(data.decode("utf-8"), as_version=4)
                except Exception as exc:  # invalid JSON, wrong encoding, not a notebook
                    ex = Path(fname).stem if Path(fname).stem in index else None
                    if ex is None:
                        self.record_issue(student, "?", fname,
                                          f"unreadable file ignored ({type(exc).__name__})")
                        continue
                    problems[ex] = (f"Your file {fname} could not be read as a notebook "
                                    f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]}).")
                    continue
                ex = self._identify(nb, index) or (Path(fname).stem if Path(fname).stem in index
                                                   else None)
                if ex is None:
                    self.record_issue(student, "?", fname,
                                      "not recognised as any exercise notebook; ignored")
                    continue
                notes = []
                if fname != f"{ex}.ipynb":
                    self.record_issue(student, index[ex], ex,
                                      f"submitted as {fname}; graded as {ex}.ipynb")
                    notes.append(f"Your file {fname} was recognised as {ex}.ipynb and "
                                 "graded as such.")
                if ex in found:
                    self.record_issue(student, index[ex], ex,
                                      f"several files for this exercise; used {fname}")
                restored = self._restore_deleted_cells(nb, index[ex], ex)
                if restored:
                    self.record_issue(student, index[ex], ex,
                                      "deleted read-only cell(s) restored from the release: "
                                      + ", ".join(restored))
                    notes.append("Read-only cells were missing from your notebook and were "
                                 "put back from the release before grading: "
                                 + ", ".join(restored) + ".")
                if notes:
                    self._add_note(nb, " ".join(notes))
                found[ex] = nb
                problems.pop(ex, None)
            assignments = sorted({index[e] for e in list(found) + list(problems)})
            for a in assignments:
                dest = self.root / "submitted" / student / a
                if dest.exists():
                    shutil.rmtree(dest)
                dest.mkdir(parents=True)
                (dest / "timestamp.txt").write_text(
                    _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
                for ex in sorted(e for e, aa in index.items() if aa == a):
                    if ex in found:
                        nbformat.write(found[ex], str(dest / f"{ex}.ipynb"))
                        continue
                    reason = problems.get(ex, "No notebook for this exercise was submitted.")
                    self.record_issue(student, a, ex, reason)
                    nbformat.write(self._blank(a, ex, reason), str(dest / f"{ex}.ipynb"))
            collected[student] = assignments
        return collected

    # -- autograde
    def submissions(self):
        out = []
        base = self.root / "submitted"
        if base.exists():
            for sdir in sorted(p for p in base.iterdir() if p.is_dir()):
                for adir in sorted(p for p in sdir.iterdir() if p.is_dir()):
                    out.append((sdir.name, adir.name))
        return out

    def _graded(self, student, assignment):
        sub = self.root / "submitted" / student / assignment
        done = self.root / "autograded" / student / assignment
        return all((done / nb.name).exists() for nb in sub.glob("*.ipynb"))

    def students(self):
        """Ids of the students with a folder under ``submitted/``, sorted."""
        base = self.root / "submitted"
        if not base.exists():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_dir())

    def shared_db_url(self):
        """URL of the course's gradebook for processes that write to it at the same time.

        The same file as nbgrader's default (``sqlite:///<root>/gradebook.db``), with a
        long SQLite busy timeout (``?timeout=``, read by SQLAlchemy's pysqlite dialect)
        so that a process waits for the lock instead of failing with "database is locked".
        """
        path = quote(str(self.root / GRADEBOOK), safe="/")
        return f"sqlite:///{path}?timeout={GRADEBOOK_BUSY_TIMEOUT}"

    def autograde(self, seed=None, workers=1):
        """Autograde every collected submission; returns the grading seed.

        Parameters
        ----------
        seed : int, optional
            Grading seed (default: drawn at random). It is logged in ``grading_seeds.log``
            and reaches the hidden checks through ``$AUTOGRADER_SEED``, so a run can be
            reproduced exactly.
        workers : int
            Number of nbgrader processes that grade at the same time. With 1 (default),
            one nbgrader run grades the whole class; with more, each student is graded by
            their own ``nbgrader autograde --student <id>`` process, ``workers`` at a time,
            all writing to the same gradebook. The grades are the same either way.

        Returns
        -------
        int
            The grading seed.

        Raises
        ------
        ValueError
            If ``workers`` is not an integer >= 1.
        """
        workers = _check_workers(workers)
        if seed is None:
            seed = secrets.randbits(32)
        seed = int(seed)
        with (self.root / SEED_LOG).open("a") as fh:
            fh.write(f"{_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} "
                     f"autograde seed {seed}\n")
        env = {SEED_ENV: str(seed)}
        self.log(f"grading seed {seed}")
        if workers == 1:
            proc = self.nbgrader("autograde", "*", "--create", "--force", env_extra=env)
            (self.root / "autograde.log").write_text(proc.stdout + proc.stderr)
        else:
            self._autograde_parallel(env, workers)
        for student, assignment in self.submissions():
            if not self._graded(student, assignment):
                self._regrade_in_isolation(student, assignment, env)
        return seed

    def _autograde_parallel(self, env, workers):
        """One ``nbgrader autograde "*" --student <id>`` process per student, ``workers``
        at a time; their output goes to ``autograde.log`` in student order."""
        db_url = f"--CourseDirectory.db_url={self.shared_db_url()}"

        def grade(student):
            # --student is a file glob in nbgrader: escape it so the id matches only itself
            return self.nbgrader("autograde", "*", "--student", glob.escape(student),
                                 "--create", "--force", db_url, env_extra=env)

        students = self.students()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            procs = list(pool.map(grade, students))
        with (self.root / "autograde.log").open("w") as fh:
            for student, proc in zip(students, procs):
                fh.write(f"===== student {student}: nbgrader exit {proc.returncode}\n")
                fh.write(proc.stdout + proc.stderr)

    def _regrade_in_isolation(self, student, assignment, env):
        """Grade one failed submission notebook by notebook; blank out what still fails."""
        sub = self.root / "submitted" / student / assignment
        self.log(f"  re-grading {student}/{assignment} notebook by notebook")
        for nb_path in sorted(sub.glob("*.ipynb")):
            args = ("autograde", assignment, "--student", student,
                    "--notebook", nb_path.stem, "--force", "--create")
            done = self.root / "autograded" / student / assignment / nb_path.name
            if done.exists():
                continue
            proc = self.nbgrader(*args, env_extra=env)
            if done.exists():
                continue
            text = proc.stdout + proc.stderr
            if "DeadKernelError" in text or "Kernel died" in text:
                why = "the Python kernel crashed (for example os._exit or a fatal error)"
            elif "UnresponsiveKernelError" in text or "unresponsive" in text:
                why = "the kernel stopped responding and could not be interrupted"
            else:
                last = [line for line in text.splitlines() if "Error" in line][-1:]
                why = "nbgrader could not grade it" + (f" ({last[0].strip()[:200]})" if last else "")
            reason = f"While grading this notebook {why}."
            self.record_issue(student, assignment, nb_path.stem, reason)
            keep = self.root / "submitted_original" / student / assignment
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy2(nb_path, keep / nb_path.name)
            nbformat.write(self._blank(assignment, nb_path.stem, reason), str(nb_path))
            self.nbgrader(*args, env_extra=env)
            if not done.exists():
                self.record_issue(student, assignment, nb_path.stem,
                                  "could not be graded even as a blank notebook")

    # -- feedback
    def feedback(self):
        """Generate feedback HTML for every graded submission, maths typeset offline."""
        from .feedback import make_feedback_offline

        proc = self.nbgrader("generate_feedback", "*", "--force")
        if proc.returncode != 0:
            self.log(proc.stdout + proc.stderr)
        make_feedback_offline(self.root / "feedback")
        return sorted((self.root / "feedback").glob("*/*/*.html"))

    # -- export
    def export(self, path):
        """Write the gradebook as CSV (nbgrader's exporter: one row per student and
        assignment) and, next to it, ``<name>_by_notebook.csv`` with one row per notebook."""
        path = Path(path).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        proc = self.nbgrader("export", f"--to={path}")
        if proc.returncode != 0 or not path.exists():
            raise RuntimeError("nbgrader export failed:\n" + proc.stdout + proc.stderr)
        detail = path.with_name(path.stem + "_by_notebook.csv")
        self._export_by_notebook(detail)
        return path, detail

    def _export_by_notebook(self, path):
        from nbgrader.api import Gradebook, MissingEntry

        url = f"sqlite:///{self.root / GRADEBOOK}"
        issues = {}
        for row in self.issues():
            issues.setdefault((row["student_id"], row["notebook"]), []).append(row["problem"])
        with Gradebook(url) as gb, path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["student_id", "assignment", "notebook", "score", "max_score",
                        "issues"])
            for assignment in gb.assignments:
                for student in gb.students:
                    for nb in assignment.notebooks:
                        try:
                            sub = gb.find_submission_notebook(nb.name, assignment.name,
                                                              student.id)
                            score = sub.score
                        except MissingEntry:
                            score = 0.0
                        w.writerow([student.id, assignment.name, nb.name, f"{score:g}",
                                    f"{nb.max_score:g}",
                                    " | ".join(issues.get((student.id, nb.name), []))])
        return path


def summary_table(csv_path):
    """Rows of an exported grades CSV as dicts (helper for the command line and tests)."""
    with open(csv_path, newline="") as fh:
        return list(csv.DictReader(fh))

