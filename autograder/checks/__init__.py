"""Hidden checks of the repeval exercises (see ``autograder/README.md``).

Entry points
------------
``run_check(name, student_fn, seed)``
    Run one registered check in this process; returns a list of :class:`Finding`.
``grade(name, fn_or_name)``
    What a hidden test cell calls: runs the check with the grading run's seed, prints
    the findings and returns the score as a plain float, which nbgrader records as
    partial credit. It never raises, so no hidden test line ever appears in a traceback.
    In the kernel of a graded submission (``$AUTOGRADER_KERNEL_GRADING=1``, set by the
    sandbox) it runs nothing: the clean room scores every hidden check, and the kernel
    there cannot read this package at all (:func:`kernel_stub_files`).
``run_check_isolated(name, source, func_name, seed)``
    Run a check in a fresh Python process on the student's source code and receive only
    plain numbers and strings back (:mod:`autograder.checks.worker`).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

from ..exercises import EXERCISES
from ..settings import CELL_TIMEOUT_ENV, KERNEL_GRADING_ENV
from ._framework import (  # noqa: F401  (re-exported)
    SEED_ENV,
    CheckTimeout,
    Finding,
    StudentError,
    call_student,
    check_points,
    checks_for,
    finding,
    grading_seed,
    register,
    registry,
    rng_for,
    run_check,
)

__all__ = [
    "Finding",
    "StudentError",
    "register",
    "registry",
    "check_points",
    "checks_for",
    "run_check",
    "run_check_isolated",
    "grade",
    "format_findings",
    "grading_seed",
    "rng_for",
    "call_student",
    "finding",
    "SEED_ENV",
    "CHECK_MODULES",
    "KERNEL_ENV",
    "KERNEL_NOTE",
    "kernel_stub_files",
]

#: Modules holding checks: one per exercise of :data:`autograder.exercises.EXERCISES`, of
#: the exercise's name (a module may also register the checks of further functions of its
#: notebook). Add a new exercise there, not here.
CHECK_MODULES = list(EXERCISES)

_loaded = False


def _load_check_modules():
    global _loaded
    if _loaded:
        return
    for mod in CHECK_MODULES:
        importlib.import_module(f"{__name__}.{mod}")
    _loaded = True


def format_findings(name, findings, seed):
    """Human-readable report of one check's findings (what the feedback page shows)."""
    got = sum(f.points for f in findings)
    total = sum(f.max_points for f in findings)
    lines = [f"{name}: {got:g} / {total:g} points (grading seed {seed})"]
    for f in findings:
        if f.passed:
            lines.append(f"  [PASS] {f.name} ({f.points:g}/{f.max_points:g})")
        else:
            msg = f.message.replace("\n", "\n      ")
            lines.append(f"  [FAIL] {f.name} ({f.points:g}/{f.max_points:g}): {msg}")
    return "\n".join(lines)


#: environment variable of the kernels that run submitted notebooks: "1" there
KERNEL_ENV = KERNEL_GRADING_ENV
#: what a hidden test cell prints in such a kernel; the grader replaces it with the clean
#: room's findings before the feedback is made
KERNEL_NOTE = (
    "This hidden test runs outside your notebook, in the clean room; "
    "your feedback shows its findings."
)


def kernel_stub_files():
    """``{relative path: text}``: the only files of ``autograder`` and ``repeval_ref``
    that the kernel of a graded submission sees (written into the empty folders that
    cover the real ones, :func:`autograder.confine.kernel_namespaces`). ``grade`` there
    prints :data:`KERNEL_NOTE` and scores 0 (the clean room's score is recorded); importing
    the reference package fails with a reason."""
    return {
        "autograder/__init__.py": '"""Not readable while a submission is graded."""\n',
        "autograder/checks/__init__.py": (
            '"""Stand-in for the grader in the kernel of a graded submission."""\n\n\n'
            "def grade(name, fn_or_name=None, seed=None):\n"
            f"    print({KERNEL_NOTE!r})\n"
            "    return 0.0\n"
        ),
        "repeval_ref/__init__.py": (
            "raise ImportError('the reference package cannot be read while a submission "
            "is graded')\n"
        ),
        "repeval_book/__init__.py": (
            "raise ImportError('repeval_book cannot be read while a submission is graded')\n"
        ),
    }


def _resolve(fn_or_name):
    if callable(fn_or_name):
        return fn_or_name
    # look the function up in the notebook's namespace (the caller's globals)
    frame = sys._getframe(2)
    ns = {**frame.f_globals, **frame.f_locals}
    try:  # inside IPython the user namespace is the authority
        ip = get_ipython()  # type: ignore[name-defined]  # noqa: F821
        ns = ip.user_ns
    except NameError:
        pass
    return ns.get(fn_or_name)


def grade(name, fn_or_name, seed=None):
    """Run check ``name`` on the student's function, print the findings, return the score.

    Parameters
    ----------
    name : str
        Registered check name, ``"<exercise>/<aspect>"``.
    fn_or_name : callable or str
        The student's function, or its name looked up in the notebook's namespace (so a
        deleted definition is reported instead of raising ``NameError``).
    seed : int, optional
        Grading seed; default ``$AUTOGRADER_SEED`` or a fresh random seed (printed).

    Returns
    -------
    float
        Points earned; nbgrader reads it as the cell's partial credit.
    """
    if os.environ.get(KERNEL_ENV) == "1":  # a graded submission's kernel: see KERNEL_ENV
        print(KERNEL_NOTE)
        return 0.0
    fn = _resolve(fn_or_name)
    if seed is None:
        seed = grading_seed()
    exercise = name.split("/", 1)[0]
    if exercise in _TIMED_OUT:
        findings = [
            Finding(
                "skipped",
                0.0,
                check_points(name),
                False,
                f"{exercise} did not return in time in an earlier hidden test, "
                "so this one was not run",
            )
        ]
    else:
        findings = run_check(name, fn, seed, time_limit=_time_budget())
        if any(f.message.startswith("stopped after") for f in findings):
            _TIMED_OUT.add(exercise)
    print(format_findings(name, findings, seed))
    return float(sum(f.points for f in findings))


_TIMED_OUT = set()


def _time_budget():
    """Seconds one hidden check may take: 80 % of the per-cell limit nbgrader enforces
    (``$AUTOGRADER_CELL_TIMEOUT``), so the check stops first and explains why."""
    try:
        cell = float(os.environ.get(CELL_TIMEOUT_ENV, "60"))
    except ValueError:
        cell = 60.0
    return max(1.0, 0.8 * cell)


def run_check_isolated(name, source, func_name, seed, timeout=120, python=None):
    """Run check ``name`` in a separate Python process on the student's source code.

    The child process executes ``source`` (the student's code, e.g. the solution cell),
    looks up ``func_name``, runs the check and sends back JSON with plain numbers. The
    grader's process never executes student code.

    Returns
    -------
    list of Finding
        A crash, a timeout or garbage output of the child becomes one failed finding
        worth the check's points.
    """
    points = check_points(name)
    payload = json.dumps(
        {"name": name, "source": source, "func_name": func_name, "seed": int(seed)}
    )
    env = dict(os.environ)
    env.pop(SEED_ENV, None)
    try:
        proc = subprocess.run(
            [python or sys.executable, "-m", "autograder.checks.worker"],
            input=payload,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return [
            Finding(
                name,
                0.0,
                points,
                False,
                f"your code did not finish within {timeout} s (an infinite loop?)",
            )
        ]
    marker = "AUTOGRADER-FINDINGS:"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(marker):
            try:
                data = json.loads(line[len(marker) :])
                findings = [Finding.from_dict(d) for d in data]
            except (ValueError, KeyError, TypeError):
                break
            if abs(sum(f.max_points for f in findings) - points) < 1e-9:
                return findings
            break
    tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
    return [
        Finding(
            name,
            0.0,
            points,
            False,
            f"the grading process ended without a result (exit code "
            f"{proc.returncode}); last output: {' | '.join(tail) or 'none'}",
        )
    ]
