"""The check framework: findings, the registry, seeds, and safe calls of student code.

A *check* is a plain function ``check(student_fn, rng) -> list[Finding]``. It draws its
inputs from ``rng`` (a :class:`numpy.random.Generator`), calls the student's function and
the reference in :mod:`repeval_ref`, compares them and returns findings. A finding carries
plain Python numbers and a message in the student's terms, so the same check runs inside
the notebook kernel or in a separate process that only sends findings back.

Checks are registered under a name ``"<exercise>/<aspect>"`` with their total points::

    @register("knn_classify/small_tau", points=2, summary="no overflow at tau = 1e-3")
    def small_tau(knn_classify, rng):
        ...

:func:`run_check` runs a registered check with a seed and always returns findings whose
``max_points`` add up to the registered points: a crash of the student's function (or of
the check) becomes a failed finding with an explanation, never an exception.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import secrets
import traceback
import warnings
import zlib

import numpy as np

from .. import settings

__all__ = [
    "Finding",
    "StudentError",
    "register",
    "registry",
    "check_points",
    "checks_for",
    "run_check",
    "grading_seed",
    "rng_for",
    "call_student",
    "finding",
    "SEED_ENV",
    "CheckTimeout",
]

#: Environment variable holding the grading run's seed (set by ``autograder autograde``).
SEED_ENV = settings.SEED_ENV


@dataclasses.dataclass
class Finding:
    """One verdict of a check.

    Attributes
    ----------
    name : str
        Short name of what was tested (``"ties go to the smaller label"``).
    points : float
        Points earned (``0 <= points <= max_points``).
    max_points : float
        Points at stake.
    passed : bool
        Whether the property held.
    message : str
        What was checked and, on failure, what is wrong in the student's terms.
    """

    name: str
    points: float
    max_points: float
    passed: bool
    message: str

    def to_dict(self):
        """The finding as a dict of plain Python values (JSON-ready)."""
        return {
            "name": str(self.name),
            "points": float(self.points),
            "max_points": float(self.max_points),
            "passed": bool(self.passed),
            "message": str(self.message),
        }

    @classmethod
    def from_dict(cls, d):
        return cls(
            str(d["name"]),
            float(d["points"]),
            float(d["max_points"]),
            bool(d["passed"]),
            str(d["message"]),
        )


def finding(name, passed, max_points, message_if_failed, message_if_passed="ok"):
    """Build a :class:`Finding` worth ``max_points`` if ``passed`` and 0 otherwise."""
    passed = bool(passed)
    return Finding(
        name,
        float(max_points) if passed else 0.0,
        float(max_points),
        passed,
        message_if_passed if passed else message_if_failed,
    )


class StudentError(Exception):
    """The student's function failed in a way the check explains (raised by call_student)."""


class NotWritten(Exception):
    """The student's function is still the stub (it raised ``NotImplementedError``).

    Not a :class:`StudentError`: a check that explains a failing call (and catches
    StudentError to say what the inputs need) must not send a blank stub after a cause
    it cannot have; :func:`run_check` reports the stub alone.
    """


class CheckTimeout(BaseException):
    """The time limit of a check ran out (raised by an interval timer; BaseException so
    that a student's ``except Exception`` cannot swallow it). ``seconds``: the limit that
    ran out when it is not the check's own (one call's limit in the clean room), else
    None."""

    def __init__(self, seconds=None):
        super().__init__(seconds)
        self.seconds = seconds


@dataclasses.dataclass
class _Registered:
    name: str
    func: object
    points: float
    summary: str


_REGISTRY: dict[str, _Registered] = {}


def register(name, *, points, summary):
    """Decorator registering ``check(student_fn, rng)`` as ``name`` worth ``points``."""
    if "/" not in name:
        raise ValueError(f"check name must look like 'exercise/aspect', got {name!r}")

    def deco(func):
        if name in _REGISTRY and _REGISTRY[name].func is not func:
            raise ValueError(f"check {name!r} is registered twice")
        _REGISTRY[name] = _Registered(name, func, float(points), str(summary))
        func.check_name = name
        func.points = float(points)
        return func

    return deco


def _load_exercise(exercise):
    """Import only the check module of one exercise (cheap inside a grading kernel)."""
    import importlib

    from . import CHECK_MODULES

    if exercise in CHECK_MODULES:
        importlib.import_module(f"{__package__}.{exercise}")
    else:
        _load_all()


def _load_all():
    # importing the package imports every check module (see checks/__init__.py)
    from . import _load_check_modules

    _load_check_modules()


def registry():
    """Dict ``name -> (points, summary)`` of every registered check."""
    _load_all()
    return {k: (v.points, v.summary) for k, v in sorted(_REGISTRY.items())}


def check_points(name):
    """Total points of the registered check ``name``."""
    return _lookup(name).points


def checks_for(exercise):
    """Names of the checks of one exercise, in registration order."""
    _load_all()
    return [k for k in _REGISTRY if k.split("/", 1)[0] == exercise]


def _lookup(name):
    if name not in _REGISTRY:
        _load_exercise(name.split("/", 1)[0])
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no check named {name!r}; known: {sorted(_REGISTRY)}") from None


def grading_seed():
    """The seed of this grading run: ``$AUTOGRADER_SEED`` if set, else a fresh random one."""
    value = os.environ.get(SEED_ENV, "").strip()
    if value:
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{SEED_ENV} must be an integer, got {value!r}") from None
    return secrets.randbits(32)


def rng_for(name, seed):
    """Generator of check ``name`` for grading seed ``seed`` (independent across checks)."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())])


def _student_frames(tb):
    """Format only the traceback frames that belong to the student's own code."""
    frames = [
        fs
        for fs in traceback.extract_tb(tb)
        if "autograder" not in fs.filename.replace("\\", "/").split("/")[-2:]
        and "/autograder/" not in fs.filename.replace("\\", "/")
        and "site-packages" not in fs.filename
        and "/repeval_ref/" not in fs.filename.replace("\\", "/")
    ]
    if not frames:
        return ""
    return "".join(traceback.format_list(frames[-3:]))


def call_student(fn, *args, what=None, **kwargs):
    """Call the student's ``fn``, capturing prints and warnings.

    Returns ``(result, warnings_list)``. Any exception is turned into
    :class:`StudentError` with a message that names the call and the error (and, for
    ``NotImplementedError``, :class:`NotWritten` telling the student to write the
    function), showing only the
    student's own frames of the traceback.
    """
    label = what or getattr(fn, "__name__", "your function")
    sink = io.StringIO()
    with (
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(sink),
    ):
        warnings.simplefilter("always")
        with np.errstate(all="warn"):
            try:
                result = fn(*args, **kwargs)
            except NotImplementedError:
                raise NotWritten(
                    f"{label} raised NotImplementedError: replace the stub with your implementation"
                ) from None
            except (KeyboardInterrupt, SystemExit, CheckTimeout):
                raise
            except BaseException as exc:  # the student's code may raise anything
                where = _student_frames(exc.__traceback__)
                msg = f"{label} raised {type(exc).__name__}: {exc}"
                if where:
                    msg += "\n" + where.rstrip()
                raise StudentError(msg) from None
    return result, [str(w.message) for w in caught]


def _quiet_call(func, *args):
    """Run a check with warnings and stray output from library code silenced."""
    sink = io.StringIO()
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(sink),
    ):
        warnings.simplefilter("ignore")
        return func(*args)


@contextlib.contextmanager
def _time_limit(seconds):
    """Raise CheckTimeout after ``seconds`` of wall time (Unix main thread; else no limit)."""
    import signal
    import threading

    usable = (
        seconds
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def _alarm(signum, frame):
        raise CheckTimeout()

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_check(name, student_fn, seed=None, time_limit=None):
    """Run the registered check ``name`` on ``student_fn`` with grading seed ``seed``.

    Never raises because of the student's code: a crash becomes one failed finding, and
    so does running past ``time_limit`` seconds (an infinite loop). The findings'
    ``max_points`` always sum to the check's registered points.

    Returns
    -------
    list of Finding
    """
    reg = _lookup(name)
    if seed is None:
        seed = grading_seed()
    if student_fn is None or not callable(student_fn):
        func = name.split("/", 1)[0]
        return [
            Finding(
                "function defined",
                0.0,
                reg.points,
                False,
                f"{func} is not defined (or not a function) when this test runs: "
                "keep the cell that defines it above the tests, and do not rename, "
                "move or delete it",
            )
        ]
    rng = rng_for(name, seed)
    try:
        with _time_limit(time_limit):
            findings = list(_quiet_call(reg.func, student_fn, rng))
    except CheckTimeout as exc:
        limit = exc.seconds if exc.seconds is not None else time_limit
        what = "one call of your function" if exc.seconds is not None else "this check"
        return [
            Finding(
                reg.summary,
                0.0,
                reg.points,
                False,
                f"stopped after {limit:g} s ({what}): your function did not return "
                "in time (an infinite loop, or far too slow for these small inputs)",
            )
        ]
    except (StudentError, NotWritten) as exc:
        return [Finding(reg.summary, 0.0, reg.points, False, str(exc))]
    except Exception as exc:  # a bug in the check must not stop grading
        return [
            Finding(
                reg.summary,
                0.0,
                reg.points,
                False,
                f"the check could not run ({type(exc).__name__}: {exc}); "
                "tell your instructor and quote the seed",
            )
        ]
    total = sum(f.max_points for f in findings)
    if abs(total - reg.points) > 1e-9:
        raise AssertionError(
            f"check {name} returned findings worth {total} points, registered {reg.points}"
        )
    for f in findings:
        f.points = float(min(max(f.points, 0.0), f.max_points))
    return findings
