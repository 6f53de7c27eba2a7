"""The instructor's course: one object for a grading course directory, whose steps are
done by the modules named for them.

===============================  ===========================================================
step                             module
===============================  ===========================================================
running nbgrader, the gradebook  :mod:`autograder.nbgrader_run` (and the release)
the term                         :mod:`autograder.course.term` (chapters, due dates, late policy,
                                 ``term.json``, submission times)
collecting                       :mod:`autograder.course.collect` (folders and zip files, the issue
                                 log), :mod:`autograder.course.notebook_repair`
autograding                      :mod:`autograder.course.autograde` (nbgrader in one sandbox per
                                 student, :mod:`autograder.sandbox_runs`, here or on Dask,
                                 :mod:`autograder.scheduling`), :mod:`autograder.verification`
                                 (the clean room's scores, which are recorded)
feedback                         :mod:`autograder.course.feedback`
exporting                        :mod:`autograder.course.export` (nbgrader's CSV annotated, one
                                 row per notebook, Canvas)
===============================  ===========================================================

Every problem met on the way is written to ``<course>/grading_issues.csv``
(:class:`autograder.course.issue_log.IssueLog`); a failure in one student's submission, or in
one notebook, never stops the grading of the others.
"""

from __future__ import annotations

from pathlib import Path

from .. import REPO_ROOT, nbgrader_run
from ..verification import verify_answers
from .autograde import autograde_class, students, submissions
from .collect import collect_folder
from .export import export_grades
from .feedback import refresh_pages, write_feedback
from .gradebook import read_grades
from .issue_log import IssueLog
from .roster import active_roster, import_roster, imported_ids, remove_student, removed_ids
from .term import book_url, parse_due, read_submission_times, set_up_term, term_record

__all__ = ["ISSUES_FILE", "Course"]

ISSUES_FILE = "grading_issues.csv"


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
    log : callable
        Given one line of progress at a time.

    Attributes
    ----------
    submission_times : dict
        The instructor's submission times of the last :meth:`collect`
        (:func:`autograder.course.term.read_submission_times`), empty without a times file.
    submitted_at : datetime or None
        The one submission time of the last :meth:`collect`, if one was given.
    """

    def __init__(self, root, repo=REPO_ROOT, timeout=60, log=print):
        self.submission_times, self.submitted_at = {}, None
        self.root = Path(root).resolve()
        self.repo = Path(repo).resolve()
        self.timeout = int(timeout)
        self.log = log
        self._issue_log = None

    # -- nbgrader and the course's folders
    def nbgrader(self, *args, env_extra=None):
        """Run nbgrader with ``args`` on this course (:func:`autograder.nbgrader_run.
        run_nbgrader`); ``autograde`` records raw scores (no late penalty: the term's late
        policy is applied when grades are read, :meth:`grades`)."""
        if args and args[0] == "autograde":  # raw scores: the policy applies on reading
            args = (*args, "--LateSubmissionPlugin.penalty_method=none")
        return nbgrader_run.run_nbgrader(
            self.root, *args, timeout=self.timeout, env_extra=env_extra, log=self.log
        )

    def assignments(self):
        """The chapters set up in this course (folders of its ``solutions/``), sorted."""
        return sorted(p.name for p in (self.root / "solutions").iterdir() if p.is_dir())

    def exercise_index(self):
        """Map exercise name -> assignment of this course's chapters."""
        return nbgrader_run.exercise_index(self.root)

    def shared_db_url(self):
        """URL of the course's gradebook for processes that write to it at the same time
        (:func:`autograder.nbgrader_run.shared_db_url`)."""
        return nbgrader_run.shared_db_url(self.root)

    def submissions(self):
        """(student, assignment) of every collected submission, sorted."""
        return submissions(self.root)

    def students(self):
        """Ids of the students with a folder under ``submitted/``, sorted."""
        return students(self.root)

    # -- the issue log
    @property
    def issue_log(self):
        """This course's :class:`autograder.course.issue_log.IssueLog` (``grading_issues.csv``)."""
        if self._issue_log is None:
            self._issue_log = IssueLog(self.root / ISSUES_FILE, log=lambda line: self.log(line))
        return self._issue_log

    def record_issue(self, student, assignment, notebook, problem):
        """Append a problem to ``grading_issues.csv`` (once: a problem already listed for
        the same student, assignment and notebook is not repeated; past
        :data:`autograder.course.issue_log.MAX_PER_NOTEBOOK` for one notebook they are counted
        in one line). Returns True if the problem was listed."""
        return self.issue_log.record(student, assignment, notebook, problem)

    def issues(self):
        """Every line of ``grading_issues.csv`` as a dict."""
        return self.issue_log.rows()

    # -- the term
    def term(self):
        """The term (:class:`autograder.course.records.Term`, from ``term.json``); before
        :meth:`setup`, the course's chapters with no due dates."""
        chapters = self.assignments() if (self.root / "solutions").is_dir() else []
        return term_record(self.root, chapters)

    def due_dates(self):
        """Dict assignment -> aware UTC due date (assignments without one are left out)."""
        return {e.chapter: e.due for e in self.term().entries if e.due is not None}

    def book_url(self):
        """Where the feedback pages send students to read a chapter: the ``book_url`` of
        the course (:meth:`setup`), else the GitHub Pages address of the repository."""
        return book_url({"book_url": self.term().book_url}, self.repo)

    def setup(
        self,
        assignments=None,
        due=None,
        late_policy=None,
        book_url=None,
        policies=None,
        replace=False,
    ):
        """Create the course directory and register the term's assignments in its gradebook.

        Parameters
        ----------
        assignments : list of str, optional
            Chapters (assignment folders of ``solutions/``) to add to the term, or to
            update; every other chapter of the term keeps its due date and policy. The
            first setup without any: all chapters.
        due : dict, optional
            Assignment -> due date (text such as ``"2026-03-01 23:59"``, UTC unless an
            offset is given).
        late_policy : {"mark", "zero"}, optional
            The term's policy (default: as before, else ``"mark"``): ``"mark"`` keeps a
            late notebook's points and reports the lateness; ``"zero"`` gives it 0.
        book_url : str, optional
            Where students read the book (default: as set up before, else the GitHub
            Pages address of the repository).
        policies : dict, optional
            Assignment -> its own late policy, over the term's.
        replace : bool
            The chapters named are the whole term (others are dropped).

        Returns
        -------
        list of str
            The registered assignments.

        Raises
        ------
        ValueError
            If an assignment is not a folder of ``solutions/``, a due date or policy names
            an assignment that is not assigned, a date is not a date, or a policy is
            unknown.

        Existing feedback pages get the new submission and score lines at once
        (:func:`autograder.course.feedback.refresh_pages`); the exports read the term when
        they are written.
        """
        set_up_term(
            self.root,
            self.repo,
            self.nbgrader,
            assignments,
            due,
            late_policy,
            book_url,
            policies=policies,
            replace=replace,
        )
        if (self.root / "feedback").is_dir():
            refresh_pages(self.root, self.grades())
        return self.assignments()

    # -- roster
    def roster(self):
        """Ids of the class (:func:`autograder.course.roster.active_roster`), sorted."""
        return [e.id for e in active_roster(self.root)]

    def import_roster(self, csv_path):
        """Add every student of a roster CSV (columns id, first_name, last_name, email);
        returns ``(class, new ids)`` (:func:`autograder.course.roster.import_roster`)."""
        return import_roster(self.root, csv_path)

    def remove_student(self, student):
        """Archive ``student``'s files and take them out of the class
        (:func:`autograder.course.roster.remove_student`); returns the archive folder."""
        mine = self.grades([student]) if (self.root / nbgrader_run.GRADEBOOK).exists() else []
        return remove_student(self.root, student, mine)

    def grades(self, students=None):
        """Every notebook's grade of the class (or of ``students``) as
        :class:`autograder.course.records.Grade` records, the term's current due dates and
        late policies applied (:func:`autograder.course.gradebook.read_grades`)."""
        return read_grades(self.root, self.term(), self.roster() if students is None else students)

    # -- collect
    def collect(self, folder, times=None, submitted_at=None, require_roster=False):
        """Copy a folder of submissions into ``submitted/<student>/<assignment>/``.

        The submission time nbgrader compares with the due date comes from the
        instructor's side only: the row of ``times`` (a CSV file such as an LMS export,
        :func:`autograder.course.term.read_submission_times`), else ``submitted_at`` (one time
        for everyone), else when the files reached this machine (their inode change
        time). A ``timestamp.txt``, a file's modification time or a zip entry's date are
        written by the student's tools and never used; one earlier than the time used by
        more than an hour gets a line in ``grading_issues.csv``.

        Without a roster every folder name is taken as a student id: each one gets a line
        in ``grading_issues.csv`` saying so (a typo then becomes a student of its own), and
        with ``require_roster`` collecting refuses to start (ValueError).

        ``folder`` holds one entry per student, named by the student id: a directory of
        notebooks (any nesting) or a ``.zip`` file. Each notebook is matched to its
        exercise by its nbgrader cell ids, so renamed files are found; a notebook that is
        not valid JSON is matched by file name if possible. Every exercise of an assignment
        the student submitted anything for gets a notebook: a missing or unreadable one
        becomes the blank release with an explanation (:mod:`autograder.course.collect`). Returns
        ``{student: [assignments]}``.
        """
        self.submission_times = read_submission_times(times) if times is not None else {}
        self.submitted_at = parse_due(submitted_at) if submitted_at is not None else None
        return collect_folder(
            self.root,
            self.repo,
            folder,
            self.issue_log,
            times=self.submission_times if times is not None else None,
            submitted_at=self.submitted_at,
            roster=imported_ids(self.root),
            removed=removed_ids(self.root),
            require_roster=require_roster,
            log=self.log,
        )

    # -- autograde
    def autograde(
        self,
        seed=None,
        workers=1,
        scheduler=None,
        tls=None,
        insecure_scheduler=False,
        students=None,
        progress=None,
    ):
        """Autograde every collected submission; returns the grading seed.

        Each student's notebooks are run by nbgrader in a throwaway course of their own
        (:mod:`autograder.sandbox`: a copy holding only that student's submission and a
        gradebook without students, under its own user id when the grader is root); the
        grader merges the results into the real gradebook and ``autograded/`` folder, and
        the clean-room verifier (:meth:`verify`) then records its scores over nbgrader's
        (:mod:`autograder.course.autograde`).

        Parameters
        ----------
        seed : int, optional
            Grading seed (default: drawn at random). It is logged in ``grading_seeds.log``
            and reaches the hidden checks through ``$AUTOGRADER_SEED``, so a run can be
            reproduced exactly.
        workers : int
            Number of students graded at the same time on this machine (and processes of
            the clean-room verifier). The grades are the same for any number.
        scheduler : str, optional
            Address of a Dask distributed scheduler (``tls://host:8786``): one task per
            student is submitted there instead (the workers need the project installed;
            a task receives and returns plain data, no shared file system is needed).
        tls : dict, optional
            The grader's credentials for a ``tls://`` scheduler: ``{"ca_file": ...,
            "cert": ..., "key": ...}`` (paths; the key readable by its owner only), see
            :func:`autograder.scheduling.scheduler_config`.
        insecure_scheduler : bool
            Accept a scheduler without authentication (``tcp://``): only for a cluster
            that no student code can reach.
        students : list of str, optional
            Grade these students only; nobody else's grades or pages change.
        progress : callable, optional
            Given one line per student graded (default: the course's ``log``).

        Returns
        -------
        int
            The grading seed.

        Raises
        ------
        ValueError
            If ``workers`` is not an integer >= 1, ``scheduler`` is not a non-empty
            string, or its credentials are missing or readable by others.
        """
        return autograde_class(
            self.root,
            self.timeout,
            "mark",  # raw scores are recorded; the policy applies when they are read
            self.issue_log,
            self.verify,
            seed=seed,
            workers=workers,
            scheduler=scheduler,
            tls=tls,
            insecure_scheduler=insecure_scheduler,
            log=self.log,
            only=students,
            progress=progress,
        )

    def verify(self, answers, seed, workers=1):
        """Grade every answer (``{(student, assignment, notebook): notebook}``) in the
        clean room and record its scores in the gradebook, its findings in the autograded
        notebooks and what the instructor should know in ``grading_issues.csv``
        (:func:`autograder.verification.verify_answers`). A notebook whose verification
        failed (its child died, broke the protocol or ran out of time) scores 0 with the
        cause named. Returns the verdicts by key."""
        return verify_answers(
            self.root,
            answers,
            seed,
            self.timeout,
            self.issue_log,
            "mark",
            workers=workers,
            log=self.log,
        )

    # -- feedback and export
    def feedback(self, students=None):
        """Generate feedback HTML for every graded submission (or only ``students``'),
        maths typeset offline, with submission and score lines after the term's current
        late policy (:func:`autograder.course.feedback.write_feedback`); returns the pages."""
        return write_feedback(
            self.root,
            self.nbgrader,
            self.book_url(),
            self.grades(students),
            students=students,
            log=self.log,
        )

    def export(self, path):
        """Write the grades of the class in the assigned chapters in three layouts, the
        term's current due dates and late policies applied; return their paths
        (:func:`autograder.course.export.export_grades`).

        * ``path``: nbgrader's export's columns (one row per student and assignment), with
          ``late``, ``flags`` and the student's ``student_total``, ``student_max`` and
          ``student_percent`` added;
        * ``<name>_by_notebook.csv``: one row per student and notebook;
        * ``<name>_canvas.csv``: Canvas's gradebook layout.
        """
        return export_grades(
            self.root,
            path,
            self.grades(),
            active_roster(self.root),
            self.term().chapters,
            self.issue_log,
        )
