"""The clean room's scores of a class, recorded: every answer verified
(:mod:`autograder.cleanroom`), its verdicts written over nbgrader's scores in the
gradebook, its findings into the autograded notebooks, and what the instructor should
know into the issue log.

The hidden tests are scored only here (the kernel of a graded submission runs none,
:data:`autograder.checks.KERNEL_ENV`; a check that cannot be verified scores 0). A
notebook whose verification failed (its clean-room child died, broke the protocol, sent
a reply that cannot be decoded or ran out of time; grading it raised) scores 0 in every
graded cell, with the cause in ``grading_issues.csv``, in each graded cell's output and
in a note at the top of its feedback notebook; the other notebooks are graded as usual,
with or without worker processes.
"""

from __future__ import annotations

import numbers
from pathlib import Path

import nbformat

from .course.notebook_repair import add_note
from .nbgrader_run import shared_db_url
from .scheduling import check_workers

__all__ = [
    "FORK_FROM",
    "VERIFICATION_NOTE_ID",
    "cleanroom_limits",
    "noticed_message",
    "verify_answers",
    "verify_one",
    "write_findings",
]

#: notebooks per grading process from which its clean-room children are forked from a
#: warm server (:func:`autograder.cleanroom_process.start_fork_server`): the server's own
#: imports cost about what three children started from nothing do
FORK_FROM = 3
#: the cell id of the note that names a failed verification in the feedback notebook
VERIFICATION_NOTE_ID = "autograder-verification-note"


def cleanroom_limits(timeout, exercise):
    """The clean room's limits for one notebook of ``exercise`` graded with the per-cell
    timeout ``timeout`` (seconds).

    Each call of the answer gets 80 % of a cell's time (the check then stops first and
    says why), its top level a cell's time, and the whole notebook the budget its kernel
    has (:data:`autograder.sandbox_limits.NOTEBOOK_BASE_S` plus the cell timeout for each cell
    the clean room runs: the answer's top level, the visible tests and each hidden check),
    past which the child is stopped and the notebook scores 0 with that reason.

    Returns
    -------
    dict
        ``{"call_s", "start_s", "total_s"}`` over
        :data:`autograder.cleanroom_process.DEFAULT_LIMITS`.

    Raises
    ------
    ValueError
        If ``timeout`` is not a positive number or ``exercise`` is not an exercise.
    """
    from .exercises import EXERCISES, load
    from .sandbox_limits import NOTEBOOK_BASE_S

    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if exercise not in EXERCISES:
        raise ValueError(f"exercise must be one of the course's exercises, got {exercise!r}")
    cells = 2 + len(load(exercise).HIDDEN)
    return {
        "call_s": max(1.0, 0.8 * timeout),
        "start_s": float(timeout),
        "total_s": float(NOTEBOOK_BASE_S + timeout * cells),
    }


def noticed_message(noticed):
    """The ``grading_issues.csv`` line for what an answer tried beyond its clean room
    (:attr:`autograder.cleanroom.CellVerdict.noticed`)."""
    return (
        "in the clean room the answer tried to "
        + "; ".join(noticed)
        + " (an answer to the exercise has no reason to: look for an attempt on the "
        "reference package, the course, the grader or the network)"
    )


def verify_one(exercise, nb, seed, limits, hide=()):
    """Clean-room verdicts of one notebook (module level, so that a worker process of
    :func:`verify_answers` can run it from plain, picklable arguments); ``hide``: folders
    the answer must not see (the course).

    The reference's side of the checks runs on one BLAS/OpenMP thread, as the answer's
    side does in its clean-room child: the checks' problems are small (a logistic
    regression of 150 rows), on which a second thread only spins against the other
    workers, and both sides then take the same arithmetic path.

    Never raises: whatever goes wrong while one notebook is verified (the child broke
    the protocol, grading it raised, its clean room could not start) scores that
    notebook 0 with the reason (:func:`autograder.cleanroom.failed_verdicts`), and the
    other notebooks are graded as usual."""
    from threadpoolctl import threadpool_limits

    from .checks._framework import CheckTimeout
    from .cleanroom import failed_verdicts, verify_notebook
    from .exercises import load

    spec = load(exercise)
    try:
        with threadpool_limits(limits=1):
            return verify_notebook(spec, nb, seed, limits, hide)
    except (Exception, CheckTimeout) as exc:  # contained: this notebook alone scores 0
        return failed_verdicts(
            spec,
            f"grading this notebook stopped on an error in the "
            f"grader ({type(exc).__name__}: {str(exc)[:300]})",
        )


def _verify_all(keys, answers, seed, limits, hide, workers, log):
    """key -> verdicts of every key of ``keys``: here, or by ``workers`` processes."""
    from .cleanroom_process import start_fork_server

    if workers == 1 or len(keys) < 2:
        if len(keys) >= FORK_FROM:
            start_fork_server()
        return {key: verify_one(key[2], answers[key], seed, limits[key[2]], hide) for key in keys}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawned, not forked: the grader may hold threads (and their locks) here; each
    # worker forks its clean-room children from a warm server of its own
    n = min(workers, len(keys))
    with ProcessPoolExecutor(
        max_workers=n,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=start_fork_server if len(keys) >= FORK_FROM * n else None,
    ) as pool:
        futures = {
            key: pool.submit(verify_one, key[2], answers[key], seed, limits[key[2]], hide)
            for key in keys
        }
        verdicts, lost = {}, []
        for key in keys:
            try:
                verdicts[key] = futures[key].result()
            except Exception as exc:  # a worker died (the pool is then broken)
                lost.append((key, exc))
    for key, exc in lost:  # verified again here, one at a time
        log(
            f"clean-room worker failed on {'/'.join(key)} "
            f"({type(exc).__name__}: {exc}); verified in the grader's process"
        )
        verdicts[key] = verify_one(key[2], answers[key], seed, limits[key[2]], hide)
    return {key: verdicts[key] for key in keys}


def verify_answers(root, answers, seed, timeout, issues, late_policy, workers=1, log=print):
    """Grade every answer in the clean room and record its scores in the gradebook of
    course directory ``root``.

    The visible tests ran in the kernel too: a notebook where the two scores of that cell
    differ gets a line in ``issues`` (:class:`autograder.course.issue_log.IssueLog`), as does an
    answer that imports the reference or the grader, one whose verification failed, one
    that tried something beyond its clean room, and one that runs code it builds at run
    time (kept in ``runtime_code.json`` for the similarity report). The findings become
    the graded cells' output in the autograded notebooks (:func:`write_findings`).

    With ``workers > 1`` the notebooks are verified by that many worker processes (not
    threads: the checks swap ``sys.stdout`` and the warnings filters while they run,
    process-wide state that two threads of checks would corrupt). The verdicts do not
    depend on the number of workers. The answers' own work runs in the clean-room
    children either way.

    Parameters
    ----------
    root : Path
        The course directory.
    answers : dict
        (student, assignment, notebook) -> the notebook node as submitted; notebooks that
        are not exercises are left out.
    seed : int
        The grading seed.
    timeout : number
        The per-cell timeout, from which the clean room's limits follow
        (:func:`cleanroom_limits`).
    issues : IssueLog
        Where the lines go.
    late_policy : {"mark", "zero"}
        Under ``"zero"`` a late notebook's penalty follows its new score.
    workers : int
        Worker processes.
    log : callable
        Given one line at a time.

    Returns
    -------
    dict
        (student, assignment, notebook) -> list of
        :class:`autograder.cleanroom.CellVerdict`.

    Raises
    ------
    ValueError
        If ``workers`` is not an integer >= 1 or ``timeout`` is not a positive number.
    """
    from nbgrader.api import Gradebook

    from .cleanroom import runtime_code_message, solution_source
    from .exercises import EXERCISES
    from .similarity import write_runtime_code

    workers = check_workers(workers)
    root = Path(root)
    keys = [k for k in sorted(answers) if k[2] in EXERCISES]
    limits = {ex: cleanroom_limits(timeout, ex) for ex in {k[2] for k in keys}}
    verdicts = _verify_all(keys, answers, seed, limits, (str(root),), workers, log)
    runtime_code = {}
    for (student, assignment, notebook), cells in verdicts.items():
        compiled = next((v.compiled for v in cells if v.compiled), [])
        said = runtime_code_message(
            solution_source(answers[student, assignment, notebook]), compiled
        )
        for line in _findings(cells, said):
            issues.record(student, assignment, notebook, line)
        if compiled:
            runtime_code[student, assignment, notebook] = [
                c["source"] for c in compiled if c.get("source")
            ]
    write_runtime_code(root, runtime_code)
    with Gradebook(shared_db_url(root)) as gb:
        for key, cells in verdicts.items():
            _record_scores(gb, key, cells, answers[key], issues, late_policy)
    write_findings(root, verdicts)
    return verdicts


def _findings(cells, runtime_code):
    """The lines of one notebook's verdicts ``cells`` that do not depend on the kernel, in
    order: what the answer tried, why its verification failed, the code it built at run
    time (``runtime_code``, the line of
    :func:`autograder.cleanroom.runtime_code_message` or ``""``), an import of the
    reference."""
    from .cleanroom import imports_reference

    lines = []
    noticed = next((v.noticed for v in cells if v.noticed), [])
    if noticed:
        lines.append(noticed_message(noticed))
    failure = next((v.failure for v in cells if v.failure), "")
    if failure:
        lines.append(
            f"the clean-room verification of this notebook failed: {failure}; every "
            "test of it scores 0"
        )
    if runtime_code:
        lines.append(runtime_code)
    if imports_reference(cells):
        lines.append(
            "the answer imports the course's reference package or the grader: every cell scores 0"
        )
    return lines


def _record_scores(gb, key, cells, nb, issues, late_policy):
    """Write the verdicts ``cells`` of notebook ``key`` = (student, assignment, notebook)
    over nbgrader's scores in gradebook ``gb``, and name a difference of the visible
    tests' two scores (``nb``: the notebook as submitted)."""
    from nbgrader.api import MissingEntry

    from .cleanroom import likely_cause

    student, assignment, notebook = key
    kernel_total = verifier_total = top = 0.0
    changed, flagged = [], []
    for v in cells:
        hidden = not v.grade_id.endswith("_visible_tests")
        if v.points is None and not hidden:
            continue  # the visible tests did run in the kernel: its score stands
        points = 0.0 if v.points is None else float(v.points)
        try:
            grade = gb.find_grade(v.grade_id, notebook, assignment, student)
        except MissingEntry:
            continue
        kernel = (
            float(grade.auto_score or 0.0)
            if grade.manual_score is None
            else float(grade.manual_score)
        )
        if abs(kernel - points) > 1e-9:
            changed.append(f"{v.grade_id} {kernel:g} -> {points:g}")
            grade.auto_score = points
            grade.manual_score = None
        if hidden:  # the kernel ran no hidden test (KERNEL_ENV): nothing to compare
            continue
        kernel_total += kernel
        verifier_total += points
        top += v.max_points
        if abs(kernel - points) > 1e-9:
            flagged.append(f"{v.grade_id} {kernel:g} -> {points:g}")
    if not changed:
        _name_tampering(key, nb, cells, flagged, issues)
        return
    gb.db.commit()
    try:
        sub = gb.find_submission_notebook(notebook, assignment, student)
        # late under "zero": the penalty is the new score (a late notebook whose
        # in-kernel score was 0 was given a penalty of 0 when it was merged)
        if late_policy == "zero" and (sub.assignment.total_seconds_late or 0) > 0:
            sub.late_submission_penalty = sub.score
            gb.db.commit()
    except MissingEntry:
        pass
    if _name_tampering(key, nb, cells, flagged, issues):
        return
    cause = likely_cause(nb, cells, kernel_total, verifier_total)
    issues.record(
        student,
        assignment,
        notebook,
        f"in-kernel (nbgrader) score {kernel_total:g} / {top:g} of the visible "
        f"tests, clean-room score {verifier_total:g} / {top:g}: the clean-room "
        f"score is recorded ({'; '.join(flagged)}); likely cause: {cause}",
    )


def _name_tampering(key, nb, cells, flagged, issues):
    """Record the line of an answer whose source reaches into the kernel that runs the
    tests (:func:`autograder.cleanroom.tampering`) when no score difference of the
    visible tests names it (no hidden test runs in the kernel, so such an answer
    changes nothing there; it is named all the same). Returns True when the caller
    has nothing more to say: no difference to report, or an import of the reference,
    which has its own line."""
    from .cleanroom import imports_reference, tampering

    if imports_reference(cells):
        return True
    if flagged:
        return False
    hits = tampering(nb)
    if hits:
        got = sum(0.0 if v.points is None else float(v.points) for v in cells)
        top = sum(float(v.max_points) for v in cells)
        issues.record(
            *key,
            f"the answer reaches into the kernel that runs the tests ({', '.join(hits)}): "
            f"tampering; no test it could change runs there, and the clean-room score "
            f"{got:g} / {top:g} is recorded",
        )
    return True


def write_findings(root, verdicts):
    """Put the clean room's findings into the autograded notebooks of course directory
    ``root``, so that the feedback shows what was recorded.

    Each hidden test cell gets its verdict's message as its output (where the kernel only
    printed :data:`autograder.checks.KERNEL_NOTE`); the visible tests keep the kernel's
    output. A notebook whose verification failed
    (:attr:`autograder.cleanroom.CellVerdict.failure`) also gets a note at its top naming
    the cause and saying that every test scores 0 (cell id :data:`VERIFICATION_NOTE_ID`)."""
    for (student, assignment, notebook), cells in verdicts.items():
        path = Path(root) / "autograded" / student / assignment / f"{notebook}.ipynb"
        if not path.is_file() or path.is_symlink():
            continue
        try:
            nb = nbformat.read(str(path), as_version=4)
        except Exception:
            continue
        failure = next((v.failure for v in cells if v.failure), "")
        by_id = {v.grade_id: v for v in cells if not v.grade_id.endswith("_visible_tests")}
        for cell in nb.cells:
            v = by_id.get(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id"))
            if v is None or cell.cell_type != "code":
                continue
            points = 0.0 if v.points is None else float(v.points)
            cell.outputs = [
                nbformat.v4.new_output("stream", name="stdout", text=v.message + "\n"),
                nbformat.v4.new_output(
                    "execute_result",
                    data={"text/plain": repr(points)},
                    execution_count=cell.get("execution_count"),
                ),
            ]
        if failure:
            add_note(
                nb,
                f"The clean-room grading of this notebook failed: {failure}. Every test "
                "of this notebook therefore scores 0. Ask your instructor if you think "
                "this is wrong.",
                cell_id=VERIFICATION_NOTE_ID,
            )
        nbformat.write(nb, str(path))
