"""The ``autograder`` command (also ``python -m autograder``).

Student::

    autograder check exercises/knn/knn_classify.ipynb   # visible tests + nbgrader validate
    autograder check --hidden exercises/knn/knn_classify.ipynb   # + hidden checks, clean room
    (make check NB=exercises/knn/knn_classify.ipynb [HIDDEN=1])

Author of exercises::

    autograder build          # specs (autograder/exercises/*.py) -> solutions/*.ipynb
    autograder release        # solutions/ -> exercises/ (nbgrader generate_assignment)
    autograder checks         # list the registered hidden checks and their points

Instructor (course directory: --course, default ./course; every command but setup and
grade-all refuses a course folder that does not exist)::

    autograder setup --assign knn=2026-03-01T23:59 noise   # add or update these chapters;
                                             # the others keep their dates and policies
                                             # (--replace: these are the whole term;
                                             #  --late-policy mark|zero: the term's policy;
                                             #  --chapter-policy knn=zero: one chapter's)
    autograder roster students.csv           # bulk import (id,first_name,last_name,email)
    autograder roster --remove ID            # files archived under archive/ID/, out of the
                                             # exports and of later grading runs
    autograder collect submissions/          # <student>/ folders or <student>.zip files
                                             # (--times LMS.csv, --roster students.csv)
    autograder autograde [--seed N] [--student ID] [--workers N | --scheduler tls://host:8786
                          --tls-ca-file ca.pem --tls-cert me.pem --tls-key me.key]
                                             # one line per student graded; nbgrader's
                                             # messages go to autograder.log in the course
    autograder feedback                      # HTML, hidden tests removed, maths offline
    autograder export grades.csv             # + grades_by_notebook.csv, grades_canvas.csv,
                                             # the current due dates and late policies applied
    autograder similarity                    # similarity.csv + similarity.html (informs only)
    autograder grade-all submissions/ grades.csv   # setup+collect+autograde+feedback+export
                                             # (--workers N: N students graded at a time;
                                             #  --scheduler ADDRESS: on a Dask cluster)
"""

from __future__ import annotations

import argparse
import sys
import time

from . import REPO_ROOT
from .check_notebook import cmd_check

#: the course's log file: nbgrader's commands and everything grading processes print
LOG_FILE = "autograder.log"


def _course(args, create=False):
    """The course of ``--course``; unless ``create``, a missing folder is refused (a
    mistyped ``--course`` must not start a new course)."""
    from pathlib import Path

    from .course import Course

    root = Path(args.course)
    if not create and not root.is_dir():
        raise ValueError(
            f"no course folder {root} (a mistyped --course?); create one with "
            f"`autograder --course {root} setup`"
        )
    course = Course(root, repo=args.repo, timeout=args.timeout)
    course.log = _logger(course.root)
    return course


def _logger(root):
    """A ``log`` for a course: every line goes to the course's :data:`LOG_FILE`; all but
    nbgrader's command lines are also printed."""

    def log(line):
        line = str(line)
        if root.is_dir():
            with (root / LOG_FILE).open("a", encoding="utf-8") as fh:
                fh.write(line.rstrip("\n") + "\n")
        if not line.startswith("$ nbgrader"):
            print(line, flush=True)

    return log


class _QuietStderr:
    """While open, what this process and its children write to standard error (nbgrader's
    warnings, a kernel's messages) goes to the course's :data:`LOG_FILE` instead."""

    def __init__(self, root):
        self.path = root / LOG_FILE

    def __enter__(self):
        import os

        sys.stderr.flush()
        self.saved = os.dup(2)
        self.fh = self.path.open("ab")
        os.dup2(self.fh.fileno(), 2)
        return self

    def __exit__(self, *exc):
        import os

        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.fh.close()
        return False


def cmd_build(args):
    from .build import build_all

    for p in build_all(args.repo, args.names or None):
        print(p)
    return 0


def cmd_release(args):
    from .nbgrader_run import release

    for p in release(args.repo, args.dest):
        print(p)
    return 0


def cmd_checks(args):
    from .checks import registry

    for name, (points, summary) in registry().items():
        print(f"{name:55s} {points:4g}  {summary}")
    return 0


def _pairs(items, what):
    """``{name: value}`` of ``NAME=VALUE`` items; ValueError naming ``what`` otherwise."""
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ValueError(f"{what}: {item!r} is not CHAPTER=VALUE")
        out[name.strip()] = value.strip()
    return out


def _term_options(args):
    """(assignments, due, late_policy, policies) from ``--assign knn=2026-03-01T23:59
    noise`` and ``--chapter-policy knn=zero``."""
    policies = _pairs(getattr(args, "chapter_policy", None), "--chapter-policy")
    if not args.assign:
        return None, None, args.late_policy, policies
    assignments, due = [], {}
    for item in args.assign:
        name, _, when = item.partition("=")
        assignments.append(name.strip())
        if when.strip():
            due[name.strip()] = when.strip()
    return assignments, due, args.late_policy, policies


def _print_term(course):
    term = course.term()
    print(
        "assignments:",
        ", ".join(
            e.chapter
            + (f" (due {e.due:%Y-%m-%d %H:%M} UTC)" if e.due else "")
            + (f" [late policy {e.policy}]" if e.policy else "")
            for e in term.entries
        ),
    )
    print("late policy:", term.late_policy)
    print("feedback links the book at:", course.book_url() or "nowhere (no --book-url)")


def _setup_course(args):
    """The course of ``args`` (created if missing) with the term its options set."""
    course = _course(args, create=True)
    assignments, due, policy, policies = _term_options(args)
    course.setup(
        assignments,
        due=due,
        late_policy=policy,
        book_url=args.book_url,
        policies=policies,
        replace=args.replace,
    )
    return course


def cmd_setup(args):
    course = _setup_course(args)
    _print_term(course)
    return 0


def cmd_roster(args):
    course = _course(args)
    if not args.csv and not args.remove:
        raise ValueError("give a roster CSV to import, or --remove ID")
    if args.csv:
        after, new = course.import_roster(args.csv)
        print(
            f"roster: {len(after)} student{'s' if len(after) != 1 else ''} in the course, "
            f"{len(new)} new from {args.csv}"
        )
    for student in args.remove or []:
        where = course.remove_student(student)
        print(f"removed {student}: files archived in {where}")
    return 0


def _time_options(parser):
    parser.add_argument(
        "--times",
        metavar="CSV",
        help="submission times stated by the "
        "instructor (an LMS export): columns student, timestamp and "
        "optionally assignment; default: when each file reached this machine",
    )
    parser.add_argument(
        "--submitted-at",
        metavar="TIME",
        help="one submission time for "
        "every student (YYYY-MM-DD HH:MM, UTC unless an offset is given)",
    )
    parser.add_argument(
        "--require-roster",
        action="store_true",
        help="refuse to collect into a course without a roster",
    )
    parser.add_argument(
        "--roster",
        default=None,
        metavar="CSV",
        help="import this roster (id, first_name, last_name, email) before collecting",
    )


def _check_folder(folder):
    from pathlib import Path

    if not Path(folder).is_dir():
        raise ValueError(f"no submissions folder {folder}")


def cmd_collect(args):
    course = _course(args)
    _check_folder(args.folder)
    if not (course.root / "exercises").exists():
        raise ValueError(
            f"course {course.root} is not set up: run `autograder --course {args.course} setup`"
        )
    if args.roster:
        course.import_roster(args.roster)
    got = course.collect(
        args.folder,
        times=args.times,
        submitted_at=args.submitted_at,
        require_roster=args.require_roster,
    )
    for student, assignments in got.items():
        print(f"{student}: {', '.join(assignments) or 'nothing recognised'}")
    return 0


def cmd_autograde(args):
    dask = _scheduler_options(args)
    course = _course(args)
    only = sorted(set(args.student)) if args.student else None
    before = {(g.student, g.assignment, g.notebook): g.score for g in course.grades(only)}
    t0 = time.time()
    with _QuietStderr(course.root):
        seed = course.autograde(
            seed=args.seed, workers=args.workers, students=only, progress=print, **dask
        )
    graded = only or course.students()
    print(
        f"autograded {len(graded)} student(s) in {time.time() - t0:.1f} s "
        f"(seed {seed}); problems, if any: {course.root / 'grading_issues.csv'}; "
        f"nbgrader's messages: {course.root / LOG_FILE}"
    )
    if only is not None:
        changed = [
            (g, before.get((g.student, g.assignment, g.notebook)))
            for g in course.grades(only)
            if before.get((g.student, g.assignment, g.notebook)) != g.score
        ]
        for g, old in changed:
            was = "-" if old is None else f"{old:g}"
            print(f"{g.student} {g.assignment}/{g.notebook}: {was} -> {g.score:g}")
        if not changed:
            print("no grade changed")
    # a page older than the grade is never left as it is: it is written again
    stale = [s for s in graded if (course.root / "feedback" / s).is_dir()]
    if stale:
        with _QuietStderr(course.root):
            pages = course.feedback(stale)
        print(f"{len(pages)} feedback page(s) of {len(stale)} student(s) written again")
    return 0


def cmd_feedback(args):
    course = _course(args)
    with _QuietStderr(course.root):
        pages = course.feedback()
    print(f"{len(pages)} feedback page(s) under {course.root / 'feedback'}")
    return 0


def cmd_export(args):
    course = _course(args)
    out = course.export(args.csv)
    if args.canvas_template:  # the grades written into the instructor's Canvas export
        from .course.canvas import canvas_from_template

        canvas_from_template(out[0], args.canvas_template, out[2], log=print)
    for p in out:
        print(p)
    return 0


def cmd_similarity(args):
    from .similarity import similarity_report

    course = _course(args)
    csv_path, html_path, pairs = similarity_report(
        course.root, threshold=args.threshold, repo=course.repo
    )
    print(
        f"{len(pairs)} pair(s) at or above similarity {args.threshold:g}: {csv_path}, "
        f"{html_path} (informs only; grades are unchanged)"
    )
    return 0


def cmd_grade_all(args):
    from .similarity import DEFAULT_THRESHOLD, similarity_report

    dask = _scheduler_options(args)
    _check_folder(args.folder)
    course = _setup_course(args)
    if args.roster:
        course.import_roster(args.roster)
    course.collect(
        args.folder,
        times=args.times,
        submitted_at=args.submitted_at,
        require_roster=args.require_roster,
    )
    with _QuietStderr(course.root):
        seed = course.autograde(seed=args.seed, workers=args.workers, progress=print, **dask)
        course.feedback()
    out = course.export(args.csv)
    sim_csv, sim_html, pairs = similarity_report(
        course.root, threshold=DEFAULT_THRESHOLD, repo=course.repo
    )
    print(
        f"seed {seed}; grades: {out[0]}; per notebook: {out[1]}; LMS (Canvas): {out[2]}; "
        f"problems: {course.root / 'grading_issues.csv'}; similarity: {len(pairs)} "
        f"pair(s) in {sim_html}"
    )
    return 0


def positive_int(text):
    """argparse type: an integer >= 1 (``--workers``; the benchmarks' ``--students``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def _add_workers(parser):
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="grade this many students at a time on this machine, each in "
        "a sandbox of its own (default: 1)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="address of a Dask distributed scheduler (tls://host:8786): "
        "one grading task per student runs on its workers (which need "
        "the project installed)",
    )
    parser.add_argument(
        "--tls-ca-file",
        default=None,
        metavar="PEM",
        help="the certificate authority of the cluster's TLS certificates",
    )
    parser.add_argument(
        "--tls-cert",
        default=None,
        metavar="PEM",
        help="this grader's TLS certificate for the scheduler",
    )
    parser.add_argument(
        "--tls-key",
        default=None,
        metavar="PEM",
        help="this grader's TLS key (readable by its owner only)",
    )
    parser.add_argument(
        "--insecure-scheduler",
        action="store_true",
        help="accept a scheduler without TLS (tcp://): only for a cluster "
        "that no student code can reach",
    )


def _scheduler_options(args):
    """The keyword arguments of ``Course.autograde`` that reach the Dask scheduler,
    checked before anything runs (:func:`autograder.scheduling.scheduler_config`)."""
    from .scheduling import scheduler_config

    tls = {
        k: v
        for k, v in (("ca_file", args.tls_ca_file), ("cert", args.tls_cert), ("key", args.tls_key))
        if v
    }
    scheduler_config(args.scheduler, tls or None, args.insecure_scheduler)
    return {
        "scheduler": args.scheduler,
        "tls": tls or None,
        "insecure_scheduler": args.insecure_scheduler,
    }


def _add_term(parser):
    parser.add_argument(
        "--assign",
        nargs="+",
        metavar="CHAPTER[=DUE]",
        default=None,
        help="the chapters given this term, each with an optional due date "
        "(UTC unless an offset is given), e.g. knn=2026-03-01T23:59 "
        "noise=2026-03-15T23:59 (default: as set up before, else all)",
    )
    parser.add_argument(
        "--late-policy",
        choices=["mark", "zero"],
        default=None,
        help="mark: late submissions keep their points and are marked late "
        "(default); zero: they score 0",
    )
    parser.add_argument(
        "--book-url",
        default=None,
        metavar="URL",
        help="where students read the book; the feedback pages link each "
        "chapter there (default: as set up before, else the GitHub "
        "Pages address that make publish writes to)",
    )
    parser.add_argument(
        "--chapter-policy",
        nargs="+",
        metavar="CHAPTER=POLICY",
        default=None,
        help="a late policy (mark or zero) for one chapter, over the term's "
        "--late-policy, e.g. knn=zero",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="the chapters of --assign become the whole term (without it, they are "
        "added or updated and every other chapter keeps its due date and policy)",
    )


def build_parser():
    p = argparse.ArgumentParser(
        prog="autograder", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--repo",
        default=str(REPO_ROOT),
        help="repository holding solutions/ and exercises/ (default: %(default)s)",
    )
    p.add_argument(
        "--course", default="course", help="grading course directory (default: ./course)"
    )
    p.add_argument(
        "--timeout", type=int, default=60, help="per-cell execution limit in seconds (default: 60)"
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("build", help="write solutions/*.ipynb from the exercise specs")
    s.add_argument("names", nargs="*", help="only these exercises")
    s.set_defaults(func=cmd_build)
    s = sub.add_parser("release", help="generate exercises/ from solutions/")
    s.add_argument("--dest", default=None, help="write the release here instead of exercises/")
    s.set_defaults(func=cmd_release)
    s = sub.add_parser("checks", help="list the hidden checks")
    s.set_defaults(func=cmd_checks)
    s = sub.add_parser("setup", help="create the course directory and its gradebook")
    _add_term(s)
    s.set_defaults(func=cmd_setup)
    s = sub.add_parser(
        "roster", help="import students from a CSV in one command, or remove students"
    )
    s.add_argument("csv", nargs="?", default=None)
    s.add_argument(
        "--remove",
        nargs="+",
        metavar="ID",
        default=None,
        help="take these students out of the course: their files move to "
        "archive/<id>/, they leave every export and later grading run",
    )
    s.set_defaults(func=cmd_roster)
    s = sub.add_parser("collect", help="collect a folder of student folders or zip files")
    s.add_argument("folder")
    _time_options(s)
    s.set_defaults(func=cmd_collect)
    s = sub.add_parser("autograde", help="autograde every collected submission")
    s.add_argument("--seed", type=int, default=None, help="grading seed (default: random, logged)")
    s.add_argument(
        "--student",
        action="append",
        metavar="ID",
        default=None,
        help="grade this student only (repeatable): the grades that changed are "
        "listed and the student's feedback is written again",
    )
    _add_workers(s)
    s.set_defaults(func=cmd_autograde)
    s = sub.add_parser("feedback", help="generate feedback HTML")
    s.set_defaults(func=cmd_feedback)
    s = sub.add_parser("export", help="export grades as CSV")
    s.add_argument("csv")
    s.add_argument(
        "--canvas-template",
        default=None,
        metavar="PATH",
        help="Canvas's own gradebook export: <csv>_canvas.csv is that file with the "
        "grades written into the chapters' assignment columns",
    )
    s.set_defaults(func=cmd_export)
    s = sub.add_parser("grade-all", help="setup, collect, autograde, feedback, export")
    s.add_argument("folder")
    s.add_argument("csv")
    s.add_argument("--seed", type=int, default=None)
    _time_options(s)
    _add_workers(s)
    _add_term(s)
    s.set_defaults(func=cmd_grade_all)
    s = sub.add_parser(
        "similarity",
        help="answers that resemble the reference or each other (CSV + HTML; grades unchanged)",
    )
    from .similarity import DEFAULT_THRESHOLD

    s.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help="list pairs whose shared fraction of code is at least this (default: %(default)s)",
    )
    s.set_defaults(func=cmd_similarity)
    s = sub.add_parser("check", help="student: run a notebook's visible tests and validate it")
    s.add_argument("notebook")
    s.add_argument(
        "--hidden",
        action="store_true",
        help="also run the hidden checks on your code (in a separate process)",
    )
    s.set_defaults(func=cmd_check)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except RuntimeError as exc:
        print(f"autograder {args.command}: {exc}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:  # bad input the user gave (a folder, a date)
        print(f"autograder {args.command}: {exc}".splitlines()[0], file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
