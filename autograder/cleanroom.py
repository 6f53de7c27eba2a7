"""The clean-room verifier: hidden checks graded outside the student's kernel.

nbgrader runs the student's notebook and the hidden test cells in one kernel, so code in
the notebook can change what the tests see (an IPython input transformer, a patched
``repeval_ref`` in ``sys.modules``). The verifier computes the recorded grade elsewhere:

* the source of the solution cells is taken from the submitted notebook (IPython magics
  turned into plain Python by IPython's own transformer, nothing executed,
  :func:`solution_source`) and run alone in a fresh, limited interpreter that cannot
  import ``repeval_ref`` or ``autograder`` (:class:`autograder.cleanroom_process.Sandbox`,
  running the program :mod:`autograder.cleanroom_child`; the OS-level parts in
  :mod:`autograder.confine`);
* the registered check runs in the grader's process: it draws the inputs, calls a
  stand-in for the student's function (:func:`autograder.cleanroom_calls.remote_function`)
  that sends the arguments to the child as plain data (:mod:`autograder.codec`: arrays as
  ``.npy`` bytes loaded with ``allow_pickle=False``; a ``torch.nn.Sequential`` of standard
  layers as its layers and state dict, rebuilt in the child, its state sent back after the
  call) and receives the result, the arguments after the call (so "inputs untouched" is
  still tested) or the name and text of the exception in the same plain form, and
  compares with ``repeval_ref`` where no student code ever ran;
* the visible test cell runs in the grader's process too (:func:`run_visible`), its calls
  of the graded functions going to the child through the same stand-ins: its assertions,
  ``numpy`` and the builtins they use live where no student code ever ran, so an answer
  that patches ``np.allclose``, ``abs`` or ``exec`` at the top of its cell (which fools
  nbgrader's kernel) does not keep the visible-test points;
* an answer that imports (or tries to import) ``repeval_ref`` or ``autograder`` scores 0
  for the exercise, with a message that says why.

:func:`verify_notebook` returns one :class:`CellVerdict` per graded cell; the course
(:meth:`autograder.course.Course.autograde`) records these scores in the gradebook and
logs every cell where nbgrader's in-kernel score differs, with :func:`likely_cause`.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import warnings

from .cleanroom_calls import remote_function
from .cleanroom_child import FORBIDDEN
from .cleanroom_process import DEFAULT_LIMITS, Sandbox
from .codec import Unsupported

__all__ = [
    "CellVerdict",
    "FORBIDDEN",
    "DEFAULT_LIMITS",
    "static_imports",
    "solution_source",
    "forbidden_message",
    "graded_functions",
    "run_visible",
    "verify_source",
    "verify_notebook",
    "failed_verdicts",
    "likely_cause",
    "tampering",
    "imports_reference",
    "runtime_code_calls",
    "runtime_code_message",
]


# ----------------------------------------------------------------- verdicts
@dataclasses.dataclass
class CellVerdict:
    """The clean-room score of one graded cell of a notebook."""

    grade_id: str
    points: float | None  # None: not verifiable here (the visible tests: nbgrader's
    #                           score stands; a hidden check, which no kernel runs: 0)
    max_points: float
    message: str
    #: what the answer tried beyond its room (:attr:`Sandbox.noticed`), the same list on
    #: every cell of the notebook
    noticed: list = dataclasses.field(default_factory=list)
    #: why the verification of the whole notebook failed (the child died, broke the
    #: protocol or ran out of time, or grading it raised): every cell then scores 0 with
    #: this reason; "" otherwise
    failure: str = ""
    #: the code the answer compiled at run time (:attr:`Sandbox.compiled`), the same on
    #: every cell of the notebook
    compiled: list = dataclasses.field(default_factory=list)


def static_imports(source):
    """Forbidden packages named by the answer's ``import`` statements (dynamic imports
    are caught at run time by the child's import hook)."""
    found = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for n in names:
            if n.split(".")[0] in FORBIDDEN and n not in found:
                found.append(n)
    return found


def solution_source(nb):
    """Plain Python of the notebook's solution cells that come before its first test
    cell (IPython magics transformed): a definition moved below the tests is not defined
    when nbgrader runs them, and it is not graded here either."""
    from IPython.core.inputtransformer2 import TransformerManager

    parts = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            break
        if cell.cell_type == "code" and meta.get("solution"):
            try:
                parts.append(TransformerManager().transform_cell(cell.source))
            except Exception:
                parts.append(cell.source)
    return "\n\n".join(parts)


def forbidden_message(names):
    return (
        f"your answer imports {', '.join(sorted(set(names)))}: answers may not use the "
        "course's reference package or the grader, so this exercise scores 0"
    )


def graded_functions(spec):
    """The names of the functions exercise ``spec`` grades (those its hidden checks call),
    in order."""
    hidden = getattr(spec, "HIDDEN", None)
    if not hidden:
        raise ValueError("spec must be an exercise spec with a HIDDEN list of checks")
    return list(dict.fromkeys(c.split("/", 1)[0] for c in hidden))


def _visible_failure(exc, box):
    """Why the visible tests failed, from the exception they ended with."""
    from .checks import CheckTimeout

    if isinstance(exc, CheckTimeout):
        return box.dead or "your code did not return in time (an infinite loop?)"
    if isinstance(exc, RuntimeError) and box.dead and str(exc) == box.dead:
        return box.dead
    return f"{type(exc).__name__}: {exc}"


def run_visible(spec, box, seconds):
    """Run exercise ``spec``'s visible test cell against the answer held by ``box``.

    The cell runs in this (the grader's) process, in a fresh namespace whose graded
    functions are stand-ins (:func:`autograder.cleanroom_calls.remote_function`):
    only the calls run in the child. Whatever the answer patched there (NumPy,
    ``builtins``, ``exec``) cannot touch the assertions that decide the points.

    Parameters
    ----------
    spec : module
        The exercise spec (``NAME``, ``VISIBLE_TESTS``, ``VISIBLE_POINTS``, ``HIDDEN``).
    box : Sandbox
        The clean-room process holding the answer (its top level already run).
    seconds : float
        Wall-clock limit of the whole cell (each call also has ``box.limits["call_s"]``).

    Returns
    -------
    CellVerdict
        Full points if the cell ran to its end, 0 with the failure otherwise; ``None``
        points (nbgrader's score stands) if the cell passes an argument that cannot
        travel to the child.
    """
    from .checks._framework import CheckTimeout, _time_limit

    if not isinstance(box, Sandbox):
        raise ValueError(f"box must be a Sandbox, got {type(box).__name__}")
    try:
        limit = float(seconds)
    except (TypeError, ValueError):
        limit = 0.0
    if not limit > 0:
        raise ValueError(f"seconds must be a positive number of seconds, got {seconds!r}")
    grade_id, top = f"{spec.NAME}_visible_tests", float(spec.VISIBLE_POINTS)
    names = {"__name__": "__main__"}
    names.update({f: remote_function(box, f) for f in graded_functions(spec)})
    code = compile(spec.VISIBLE_TESTS, "visible_tests.py", "exec")
    sink = io.StringIO()
    box.unsupported = None
    try:
        with (
            _time_limit(limit),
            warnings.catch_warnings(),
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
        ):
            warnings.simplefilter("ignore")
            exec(code, names)
    except Unsupported as exc:
        return CellVerdict(
            grade_id,
            None,
            top,
            f"not verified in the clean room (the visible tests pass {exc}); "
            "nbgrader's score stands",
        )
    except (Exception, CheckTimeout) as exc:
        return CellVerdict(grade_id, 0.0, top, f"visible tests fail: {_visible_failure(exc, box)}")
    return CellVerdict(grade_id, top, top, "visible tests pass")


def verify_source(spec, source, seed, limits=None, hide=()):
    """Clean-room verdicts for exercise ``spec`` on the answer ``source``.

    ``limits`` go over :data:`DEFAULT_LIMITS` (``total_s`` bounds the whole exercise);
    ``hide`` lists folders the answer must not see (the course directory), besides the
    repository and the installed packages.

    Whenever the child is gone before the end of the verification (it exited or was
    killed, broke the protocol, sent a reply that cannot be decoded, did not answer a
    call or its top level in time, or kept the grader past ``total_s``), or grading it
    raised, every graded cell scores 0, the checks already scored included, and each
    verdict's :attr:`CellVerdict.failure` names the cause (:func:`failed_verdicts`). The
    one exception is an answer that tried a forbidden import: its cells score 0 with
    :func:`forbidden_message`.

    Returns
    -------
    list of CellVerdict
        One per graded cell (the visible tests, then each hidden check), with the
        nbgrader grade ids of :func:`autograder.build.grade_ids`.
    """
    from .build import grade_ids
    from .checks import check_points

    ids = grade_ids(spec)
    limits = {**DEFAULT_LIMITS, **(limits or {})}
    vis_id = f"{spec.NAME}_visible_tests"
    cells = [(vis_id, float(spec.VISIBLE_POINTS))] + [
        (ids[c], check_points(c)) for c in spec.HIDDEN
    ]
    banned = static_imports(source)
    if banned:
        msg = forbidden_message(banned)
        return [CellVerdict(g, 0.0, p, msg) for g, p in cells]
    from .checks._framework import CheckTimeout

    with Sandbox(source, limits, hide) as box:
        try:
            out = _verify_in(spec, box, cells, ids, seed, limits)
            box.finish()
        except (Exception, CheckTimeout) as exc:  # contained: this notebook scores 0
            out = failed_verdicts(spec, _grader_failure(exc))
    if box.violation or (box.dead and not box.forbidden):
        # the child died, broke the protocol or ran out of time: nothing it answered
        # before is kept, so that no answer can bank early checks and then escape the rest
        out = failed_verdicts(spec, box.dead)
    for v in out:
        v.noticed = list(box.noticed)
        v.compiled = [dict(c) for c in box.compiled]
    return out


def _grader_failure(exc):
    """The reason given when grading a notebook raised ``exc`` in the grader."""
    return (
        f"grading this notebook stopped on an error in the grader "
        f"({type(exc).__name__}: {str(exc)[:300]})"
    )


def failed_verdicts(spec, why):
    """Every graded cell of exercise ``spec`` at 0 points, its message and
    :attr:`CellVerdict.failure` ``why``: what a notebook whose verification failed
    scores (its child died, broke the protocol, sent a reply that cannot be decoded or
    ran out of time; grading it raised; its clean room could not start).

    Raises
    ------
    ValueError
        If ``why`` is not a non-empty text.
    """
    from .build import grade_ids
    from .checks import check_points

    if not isinstance(why, str) or not why.strip():
        raise ValueError(f"why must be a non-empty reason, got {why!r}")
    ids = grade_ids(spec)
    cells = [(f"{spec.NAME}_visible_tests", float(spec.VISIBLE_POINTS))] + [
        (ids[c], check_points(c)) for c in spec.HIDDEN
    ]
    message = (
        f"not graded: {why}. Every test of this notebook scores 0; if your code "
        "did nothing of the kind, tell your instructor and quote this message."
    )
    return [CellVerdict(g, 0.0, p, message, failure=why) for g, p in cells]


def _verify_in(spec, box, cells, ids, seed, limits):
    """The verdicts of :func:`verify_source`, the answer held by ``box``."""
    from .checks import check_points, format_findings, run_check

    out = []
    start = box.started
    if "dead" in start or "error" in start:
        if box.forbidden:
            msg = forbidden_message(box.forbidden)
            return [CellVerdict(g, 0.0, p, msg) for g, p in cells]
        if "dead" in start:  # the whole notebook scores 0 with the reason (verify_source)
            return []
        e = start["error"]
        why = f"running your code raised {e['type']}: {e['message']}"
        return [CellVerdict(g, 0.0, p, why) for g, p in cells]
    out.append(run_visible(spec, box, limits["call_s"] * 4))
    for check in spec.HIDDEN:
        if box.dead:  # the whole notebook scores 0 (verify_source): no check runs on
            break
        func = check.split("/", 1)[0]
        pts = check_points(check)
        box.unsupported = None
        findings = run_check(
            check, remote_function(box, func), seed, time_limit=limits["call_s"] * 10
        )
        if box.unsupported:  # this check passes a model or a callable: not verifiable
            out.append(
                CellVerdict(
                    ids[check],
                    None,
                    pts,
                    f"not verified in the clean room (it passes {box.unsupported}), so it scores 0",
                )
            )
            continue
        got = float(sum(f.points for f in findings))
        out.append(CellVerdict(ids[check], got, pts, format_findings(check, findings, seed)))
    if box.forbidden:
        msg = forbidden_message(box.forbidden)
        return [CellVerdict(g, 0.0, p, msg) for g, p in cells]
    return out


def verify_notebook(spec, nb, seed, limits=None, hide=()):
    """:func:`verify_source` on the solution cells of notebook ``nb``."""
    return verify_source(spec, solution_source(nb), seed, limits, hide)


#: source fragments of code that reaches into the kernel that runs the tests
_TAMPERING = (
    "input_transformers",
    "ast_transformers",
    "sys.modules",
    "get_ipython",
    "register_magic",
    "events.register",
    "showtraceback",
    "set_custom_exc",
    "builtins",
    "gradebook",
    "autograded",
)


def tampering(nb):
    """The fragments of :data:`_TAMPERING` in the solution cells of notebook ``nb``: code
    that reaches into the kernel that runs the tests (none in an honest answer)."""
    source = solution_source(nb)
    return [t for t in _TAMPERING if t in source]


#: names whose call runs code built at run time
_RUNTIME_CODE = ("exec", "eval", "compile", "__import__")
#: modules that turn bytes into code (imported by an answer that decodes code)
_CODE_MODULES = ("marshal", "codeop", "runpy", "importlib")


def runtime_code_calls(source):
    """What the answer ``source`` names that runs code built at run time: calls of the
    built-ins ``exec``, ``eval``, ``compile`` or ``__import__`` (by name, or as an attribute
    of the ``builtins`` module under any alias, as ``builtins.exec``) and imports of
    :data:`_CODE_MODULES`, each once, in order. A method of another object that shares a
    name (``model.eval()``, ``re.compile(...)``) is not one of them. Read from the source,
    so no report of the child can hide it (code that reaches these names by a computed
    string is seen at run time instead, :attr:`CellVerdict.compiled`)."""
    if not isinstance(source, str):
        raise ValueError(f"source must be Python source text, got {type(source).__name__}")
    found = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    builtins_names = {"builtins", "__builtins__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            builtins_names.update(a.asname for a in node.names if a.name == "builtins" and a.asname)
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                name = f.id
            elif (
                isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and f.value.id in builtins_names
            ):
                name = f.attr
            name = name if name in _RUNTIME_CODE else None
        elif isinstance(node, ast.Import):
            name = next((a.name for a in node.names if a.name.split(".")[0] in _CODE_MODULES), None)
        elif isinstance(node, ast.ImportFrom) and node.module == "builtins":
            name = next((a.name for a in node.names if a.name in _RUNTIME_CODE), None)
        elif isinstance(node, ast.ImportFrom) and node.module:
            name = node.module if node.module.split(".")[0] in _CODE_MODULES else None
        if name is not None:
            found.append(f"{name}()" if name in _RUNTIME_CODE else f"import {name}")
    return list(dict.fromkeys(found))


def runtime_code_message(source, compiled):
    """The ``grading_issues.csv`` line of an answer that runs code it builds at run time,
    or ``""``: ``source`` is the answer's source (:func:`runtime_code_calls`), ``compiled``
    what the clean room recorded it compiling (:attr:`CellVerdict.compiled`)."""
    calls = runtime_code_calls(source)
    if not calls and not compiled:
        return ""
    parts = []
    if calls:
        parts.append("its source calls " + ", ".join(calls))
    if compiled:
        hows = list(dict.fromkeys(str(c.get("how", "?")) for c in compiled))
        size = sum(len(str(c.get("source", ""))) for c in compiled)
        parts.append(
            f"in the clean room it ran {len(compiled)} piece(s) of code it built "
            f"itself ({'; '.join(hows[:5])}; {size} characters of source, "
            "fingerprinted in the similarity report)"
        )
    return (
        "the answer runs code that is not in its cells as written: "
        + "; ".join(parts)
        + " (an answer to the exercise has no reason to: look for an encoded copy)"
    )


def imports_reference(cells):
    """Whether the verdicts ``cells`` of a notebook say that its answer imports the
    reference package or the grader (:func:`forbidden_message`)."""
    return any(v.message.startswith("your answer imports") for v in cells)


def likely_cause(nb, cells, kernel_total, verifier_total):
    """A short guess, for the instructor, at why the two scores of a notebook differ."""
    if imports_reference(cells):
        return "the answer imports the course's reference package or the grader"
    hits = tampering(nb)
    if kernel_total > verifier_total:
        if hits:
            return (
                "the answer reaches into the kernel that runs the tests ("
                + ", ".join(hits)
                + "): tampering"
            )
        return (
            "the answer passes in the notebook but not on its own: it depends on state "
            "outside its cells, or it tampers with the kernel"
        )
    return (
        "the notebook's kernel run failed or was cut short (a crash, a time-out, an "
        "edited or broken notebook)"
    )
