"""Gaps that a grading run must say or refuse, each tested on its own.

* item 1: grading with less than full confinement (no root, no namespaces, an interpreter
  other users cannot run, a Dask worker that is not root) is said at grading time and in
  ``grading_issues.csv`` for every student;
* item 2 and finding 5: the Dask path authenticates. A ``tcp://`` scheduler is refused
  before anything is graded (unless the instructor says the cluster is out of every
  student's reach), a ``tls://`` one needs the grader's credentials with a key only its
  owner can read, and a TLS cluster runs nothing for a client without them;
* item 4: a notebook whose nbgrader run crashed or went past its time limit is graded
  as the blank release, with the reason, in the clean room too: it scores 0;
* item 7: lateness in one unit (hours) and on the feedback page; feedback links point at
  the published book (``book_url``), never into the instructor's clone.

The nbgrader run is stubbed where only what the grader does with its result is under
test (the clean room runs for real).
"""

import json
import os
import shutil

import nbformat
import pytest
from helpers.answer_notebooks import with_answer
from helpers.course_roster import import_roster

from autograder import REPO_ROOT, protection, sandbox_runs
from autograder.build import solution_source
from autograder.checks import check_points
from autograder.cli import main
from autograder.course import Course
from autograder.course.term import late_text
from autograder.dask_tls import cluster_security, grader_tls, have_openssl, make_credentials
from autograder.exercises import load
from autograder.scheduling import dask_settings, scheduler_config

TLS = pytest.mark.skipif(not have_openssl(), reason="needs the openssl command")
#: a course set up with nbgrader, or a TLS cluster started: seconds each, left out of
#: make test-fast (make test and CI run them)
SLOW = pytest.mark.slow


# ----------------------------------------------------------------- a small course
@pytest.fixture(scope="module")
def set_up(tmp_path_factory):
    """A course of the rank chapter, two honest students collected (set up once)."""
    base = tmp_path_factory.mktemp("trust")
    repo = base / "repo"
    (repo / "solutions" / "rank").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "solutions" / "rank" / "rank_bound.ipynb", repo / "solutions" / "rank")
    course = Course(base / "course", repo=repo, timeout=10, log=lambda *a: None)
    course.setup()
    spec = load("rank_bound")
    for student in ("ann", "ben"):
        path = base / "subs" / student / "rank" / "rank_bound.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(with_answer(spec, solution_source(spec)), str(path))
    import_roster(course, ["ann", "ben"], base)
    course.collect(base / "subs")
    return course


@pytest.fixture
def course(set_up, tmp_path):
    shutil.copytree(set_up.root, tmp_path / "course")
    messages = []
    c = Course(tmp_path / "course", repo=set_up.repo, timeout=10, log=messages.append)
    c.messages = messages
    return c


def _stub_sandboxes(monkeypatch, **by_student):
    """nbgrader's run stubbed: each student's result says only what ``by_student`` gives
    (``confined``, ``blanked``), nothing graded in the kernel."""

    def run(jobs, workers, scheduler):
        out = {}
        for job in jobs:
            res = {
                "student": job["student"],
                "gradebook": None,
                "autograded": {},
                "blanked": [],
                "ungraded": [],
                "confined": True,
                "log": "",
            }
            res.update(by_student.get(job["student"], {}))
            out[job["student"]] = res
        return out

    monkeypatch.setattr(sandbox_runs, "run_sandboxes", run)


def _score(course, student):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        return gb.find_submission_notebook("rank_bound", "rank", student).score


def _problems(course, student):
    return [r["problem"] for r in course.issues() if r["student_id"] == student]


# ----------------------------------------------------------------- item 1
def test_protection_gaps_name_a_grader_without_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    gaps = protection.protection_gaps()
    assert len(gaps) == 1 and "does not run as root" in gaps[0]
    assert not protection.namespaces_allowed()


@pytest.mark.skipif(os.geteuid() != 0, reason="as root the probe can unshare here")
def test_as_root_here_nothing_is_missing():
    assert protection.namespaces_allowed()
    assert protection.protection_gaps() == []


@SLOW
def test_less_than_full_confinement_is_said_for_every_student(course, monkeypatch):
    gap = "the grader does not run as root (a stand-in for this test)"
    monkeypatch.setattr(protection, "protection_gaps", lambda: [gap])
    monkeypatch.setattr(Course, "verify", lambda self, answers, seed, workers=1: {})
    _stub_sandboxes(monkeypatch)
    course.autograde(seed=1)
    assert any(m == f"WARNING: {gap}" for m in course.messages), course.messages
    for student in ("ann", "ben"):
        assert [p for p in _problems(course, student) if gap in p] == [
            f"graded without full confinement: {gap}"
        ], student


@SLOW
def test_a_worker_that_ran_nbgrader_unconfined_is_named(course, monkeypatch):
    """A Dask worker (or any grading process) that is not root returns ``confined:
    False``: that student gets a line even where the grader itself is fully confined."""
    monkeypatch.setattr(protection, "protection_gaps", lambda: [])
    monkeypatch.setattr(Course, "verify", lambda self, answers, seed, workers=1: {})
    _stub_sandboxes(monkeypatch, ben={"confined": False})
    course.autograde(seed=1)
    assert not [p for p in _problems(course, "ann") if "confinement" in p]
    assert [p for p in _problems(course, "ben") if "confinement" in p] == [
        "graded without full confinement: nbgrader's run of these notebooks (their "
        "kernel) had no user id, private folders or network cut of its own: the process "
        "that ran it, a Dask worker for instance, was not root"
    ]


# ----------------------------------------------------------------- item 4
@SLOW
def test_a_notebook_whose_grading_run_was_stopped_scores_zero(course, monkeypatch):
    """nbgrader's run of ben's notebook went past its wall-clock limit (stubbed): the
    sandbox graded it as the blank release, and the clean room, which would have given
    his honest functions full marks, grades that blank too. Ann keeps full marks."""
    why = "While grading this notebook the grading run of this submission went past its time limit."
    _stub_sandboxes(monkeypatch, ben={"blanked": [("rank", "rank_bound", why)]})
    course.autograde(seed=1)
    spec = load("rank_bound")
    top = float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)
    assert _score(course, "ann") == top
    assert _score(course, "ben") == 0.0
    assert why in _problems(course, "ben")
    kept = course.root / "submitted_original" / "ben" / "rank" / "rank_bound.ipynb"
    assert kept.is_file()  # the answer itself is kept for the instructor


@SLOW
def test_a_late_notebook_scores_zero_under_the_zero_policy_whatever_the_kernel_said(
    course, monkeypatch
):
    """Ben's nbgrader run returned nothing (stubbed: in-kernel 0, as after a failed
    sandbox), so the clean room raises his score; under the late policy ``zero`` a late
    notebook must still score 0 (its penalty was the in-kernel score, 0, until then)."""
    import datetime as dt

    from nbgrader.api import Gradebook

    past = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
    course.setup(due={"rank": past}, late_policy="zero")
    _stub_sandboxes(monkeypatch)
    course.autograde(seed=1)
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        raw = {
            s: gb.find_submission_notebook("rank_bound", "rank", s).score for s in ("ann", "ben")
        }
    # the gradebook keeps the clean room's raw score; the policy applies when it is read
    grades = {g.student: g for g in course.grades(["ann", "ben"]) if g.notebook == "rank_bound"}
    for student in ("ann", "ben"):
        g = grades[student]
        assert g.late_seconds > 0 and g.raw_score == raw[student] > 0, student
        assert g.score == 0.0 and g.penalty == raw[student], student


# ----------------------------------------------------------------- item 2, finding 5
def test_an_unauthenticated_scheduler_is_refused(tmp_path):
    with pytest.raises(ValueError, match="authenticates no one"):
        scheduler_config("tcp://127.0.0.1:8786")
    assert scheduler_config("tcp://127.0.0.1:8786", insecure=True) == {}
    assert scheduler_config(None) == {}
    with pytest.raises(ValueError, match="without a scheduler"):
        scheduler_config(None, {"ca_file": "x"})
    with pytest.raises(ValueError, match="ca_file, cert, key"):
        scheduler_config("tls://127.0.0.1:8786")
    files = {}
    for k in ("ca_file", "cert", "key"):
        files[k] = tmp_path / f"{k}.pem"
        files[k].write_text("-----BEGIN-----\n")
    with pytest.raises(ValueError, match="no such file"):
        scheduler_config("tls://h:1", {**files, "cert": tmp_path / "missing.pem"})
    os.chmod(files["key"], 0o644)
    with pytest.raises(ValueError, match="readable by other users"):
        scheduler_config("tls://h:1", files)
    os.chmod(files["key"], 0o600)
    got = scheduler_config("tls://h:1", files)
    assert got["distributed.comm.require-encryption"] is True
    assert got["distributed.comm.tls.client.key"] == str(files["key"].resolve())


def test_the_command_refuses_a_tcp_scheduler_before_grading(tmp_path, capsys):
    code = main(
        [
            "--course",
            str(tmp_path / "c"),
            "autograde",
            "--seed",
            "1",
            "--scheduler",
            "tcp://127.0.0.1:8786",
        ]
    )
    assert code == 2
    assert "authenticates no one" in capsys.readouterr().err
    assert not (tmp_path / "c" / "grading_seeds.log").exists()
    code = main(
        [
            "--course",
            str(tmp_path / "c"),
            "grade-all",
            str(tmp_path / "subs"),
            str(tmp_path / "g.csv"),
            "--scheduler",
            "tls://127.0.0.1:8786",
        ]
    )
    assert code == 2 and "--tls-ca-file" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()  # refused before the course was set up


def _cluster_main(creds, queue):  # pragma: no cover - runs in a spawned process
    """A TLS LocalCluster (one worker) in a process of its own; puts its address on
    ``queue`` and lives until it is killed."""
    import time

    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        dashboard_address=None,
        protocol="tls://",
        security=cluster_security(creds),
    ) as cluster:
        queue.put(cluster.scheduler_address)
        time.sleep(600)


@SLOW
@TLS
def test_a_tls_cluster_runs_nothing_for_a_client_without_its_credentials(tmp_path):
    """The grader's credentials reach the cluster; a client with a certificate of its own
    making (another authority), or none over plain TCP, is turned away and runs nothing."""
    import multiprocessing

    from distributed import Client, Security

    creds = make_credentials(tmp_path / "tls")
    other = make_credentials(tmp_path / "forged")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_cluster_main, args=(creds, queue), daemon=True)
    proc.start()
    try:
        address = queue.get(timeout=60)
        assert address.startswith("tls://")
        with (
            dask_settings(scheduler_config(address, grader_tls(creds))),
            Client(address, set_as_default=False, timeout=20) as client,
        ):
            assert client.submit(sum, [20, 22], pure=False).result(timeout=20) == 42
        marker = tmp_path / "ran"
        forged = Security(
            tls_ca_file=other["ca_file"],
            tls_client_cert=other["cert"],
            tls_client_key=other["key"],
            require_encryption=True,
        )
        for where, security in ((address, forged), (address.replace("tls://", "tcp://"), None)):
            with pytest.raises((OSError, TimeoutError)):
                with Client(where, set_as_default=False, timeout=5, security=security) as client:
                    client.run_on_scheduler(marker.write_text, "reached")
        assert not marker.exists()
    finally:
        proc.kill()
        proc.join(10)


# ----------------------------------------------------------------- item 7
def test_lateness_is_always_in_hours():
    due = "2026-01-10 23:59:00 UTC"
    assert late_text("2026-01-10 23:00:00 UTC", due) == ""
    assert late_text("2026-01-11 00:29:00 UTC", due) == "late by 0.50 h"
    assert late_text("2026-01-13 11:59:00 UTC", due) == "late by 60.00 h"
    assert late_text("2026-01-17 07:11:00 UTC", due) == "late by 151.20 h"
    assert late_text("2026-01-10 23:59:05 UTC", due) == "late by 0.01 h"


def test_feedback_links_the_published_book_and_states_the_submission(tmp_path):
    from autograder.feedback import (
        default_book_url,
        link_chapters,
        make_feedback_offline,
        mark_submission,
    )

    assert default_book_url() == "https://repeval.github.io/repeval/"
    repo = tmp_path / "fork"
    repo.mkdir()
    (repo / "_config.yml").write_text(
        "title: x\nrepository:\n  url: "
        "https://github.com/Some-Teacher/course-book.git\n"
        "  branch: main\n"
    )
    assert default_book_url(repo) == "https://some-teacher.github.io/course-book/"
    (repo / "_config.yml").write_text("title: x\nrepository:\n  url: https://example.org/x\n")
    assert default_book_url(repo) is None
    page = tmp_path / "feedback" / "ann" / "rank" / "rank_bound.html"
    page.parent.mkdir(parents=True)
    html = (
        "<html><head></head><body><h4>rank_bound (Score: 1 / 9)</h4>"
        '<a href="../../book/rank.md#the-floor">Chapter</a></body></html>'
    )
    page.write_text(html)
    make_feedback_offline(tmp_path / "feedback", book_url="https://example.org/book/")
    text = page.read_text()
    assert 'href="https://example.org/book/book/rank.html#the-floor"' in text
    assert "../" not in text.split("<body>", 1)[1].split("mathjax", 1)[0]
    page.write_text(html)
    assert link_chapters(page) == 1 and "href" not in page.read_text().split("<body>", 1)[1]
    # a statement built by `autograder build` links the default published page: the
    # course's own book_url replaces it too
    published = default_book_url() + "book/rank.html#the-floor"
    page.write_text(html.replace("../../book/rank.md#the-floor", published))
    assert link_chapters(page, book_url="https://example.org/book/") == 1
    assert 'href="https://example.org/book/book/rank.html#the-floor"' in page.read_text()
    assert mark_submission(
        page, "Submitted 2026-01-11 00:29 UTC, due 2026-01-10 23:59 UTC. Late by 0.50 h."
    )
    assert mark_submission(page, "Submitted 2026-01-11 00:29 UTC. On time.")
    text = page.read_text()
    assert text.count('id="autograder-submission"') == 1 and "On time." in text
    assert text.index("</h4>") < text.index("autograder-submission")


@SLOW
def test_setup_keeps_the_book_url(tmp_path, set_up):
    c = Course(tmp_path / "c", repo=set_up.repo, log=lambda *a: None)
    shutil.copytree(set_up.root, c.root)
    assert c.book_url() == "https://repeval.github.io/repeval/"
    with pytest.raises(ValueError, match="book_url"):
        c.setup(book_url="file:///root/repeval/_build/html")
    c.setup(book_url="https://teacher.example.org/book/")
    assert (
        json.loads((c.root / "term.json").read_text())["book_url"]
        == "https://teacher.example.org/book/"
    )
    c.setup()  # kept by a later setup
    assert c.book_url() == "https://teacher.example.org/book/"


def test_the_instructors_page_names_the_environment():
    text = (REPO_ROOT / "book" / "instructors.md").read_text()
    assert "source .venv/bin/activate" in text and ".venv/bin/autograder" in text
