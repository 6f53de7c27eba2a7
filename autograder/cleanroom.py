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
  stand-in for the student's function (:func:`autograder.cleanroom_process.remote_function`)
  that sends the arguments to the child as plain data (:mod:`autograder.codec`: arrays as
  ``.npy`` bytes loaded with ``allow_pickle=False``; a ``torch.nn.Sequential`` of standard
  layers as its layers and state dict, rebuilt in the child, its state sent back after the
  call) and receives the result, the arguments after the call (so "inputs untouched" is
  still tested) or the name and text of the exception in the same plain form, and
  compares with ``repeval_ref`` where no student code ever ran;
* the visible test cell is run in the child after the answer, as nbgrader would;
* an answer that imports (or tries to import) ``repeval_ref`` or ``autograder`` scores 0
  for the exercise, with a message that says why.

:func:`verify_notebook` returns one :class:`CellVerdict` per graded cell; the course
(:meth:`autograder.course.Course.autograde`) records these scores in the gradebook and
logs every cell where nbgrader's in-kernel score differs, with :func:`likely_cause`.
"""
from __future__ import annotations

import ast
import dataclasses

from .cleanroom_child import FORBIDDEN
from .cleanroom_process import DEFAULT_LIMITS, Sandbox, remote_function

__all__ = ["CellVerdict", "FORBIDDEN", "DEFAULT_LIMITS", "static_imports", "solution_source",
           "forbidden_message", "verify_source", "verify_notebook", "likely_cause"]


# ----------------------------------------------------------------- verdicts
@dataclasses.dataclass
class CellVerdict:
    """The clean-room score of one graded cell of a notebook."""

    grade_id: str
    points: float | None      # None: not verifiable here (nbgrader's score stands)
    max_points: float
    message: str


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
    return (f"your answer imports {', '.join(sorted(set(names)))}: answers may not use the "
            "course's reference package or the grader, so this exercise scores 0")


def verify_source(spec, source, seed, limits=None, hide=()):
    """Clean-room verdicts for exercise ``spec`` on the answer ``source``.

    ``limits`` go over :data:`DEFAULT_LIMITS` (``total_s`` bounds the whole exercise: a
    child that keeps the grader busy past it is stopped and every check not yet scored
    scores 0 with that reason); ``hide`` lists folders the answer must not see (the
    course directory), besides the repository and the installed packages.

    Returns
    -------
    list of CellVerdict
        One per graded cell (the visible tests, then each hidden check), with the
        nbgrader grade ids of :func:`autograder.build.grade_ids`.
    """
    from .build import grade_ids
    from .checks import check_points, format_findings, run_check

    ids = grade_ids(spec)
    limits = {**DEFAULT_LIMITS, **(limits or {})}
    vis_id = f"{spec.NAME}_visible_tests"
    cells = [(vis_id, float(spec.VISIBLE_POINTS))] + [(ids[c], check_points(c))
                                                      for c in spec.HIDDEN]
    banned = static_imports(source)
    if banned:
        msg = forbidden_message(banned)
        return [CellVerdict(g, 0.0, p, msg) for g, p in cells]
    out = []
    with Sandbox(source, limits, hide) as box:
        start = box.started
        if "dead" in start or "error" in start:
            if "error" in start:
                e = start["error"]
                why = f"running your code raised {e['type']}: {e['message']}"
            else:
                why = start["dead"]
            if box.forbidden:
                why = forbidden_message(box.forbidden)
            return [CellVerdict(g, 0.0, p, why) for g, p in cells]
        vis = box.request({"op": "visible", "source": spec.VISIBLE_TESTS}, limits["call_s"] * 4)
        if "ok" in vis:
            out.append(CellVerdict(vis_id, float(spec.VISIBLE_POINTS), float(spec.VISIBLE_POINTS),
                                   "visible tests pass"))
        else:
            why = vis.get("dead") or "{type}: {message}".format(**vis["error"])
            out.append(CellVerdict(vis_id, 0.0, float(spec.VISIBLE_POINTS),
                                   f"visible tests fail: {why}"))
        for check in spec.HIDDEN:
            func = check.split("/", 1)[0]
            pts = check_points(check)
            if box.dead and "did not return" in box.dead:
                out.append(CellVerdict(ids[check], 0.0, pts,
                                       f"not run: {func} timed out in an earlier check"))
                continue
            if box.dead and "wall-clock limit" in box.dead:
                out.append(CellVerdict(ids[check], 0.0, pts, f"not run: {box.dead}"))
                continue
            box.unsupported = None
            findings = run_check(check, remote_function(box, func), seed,
                                 time_limit=limits["call_s"] * 10)
            if box.unsupported:   # this check passes a model or a callable: not verifiable
                out.append(CellVerdict(ids[check], None, pts,
                                       f"not verified in the clean room (it passes "
                                       f"{box.unsupported}); nbgrader's score stands"))
                continue
            got = float(sum(f.points for f in findings))
            out.append(CellVerdict(ids[check], got, pts, format_findings(check, findings, seed)))
        if box.forbidden:
            msg = forbidden_message(box.forbidden)
            out = [CellVerdict(v.grade_id, 0.0, v.max_points, msg) for v in out]
    return out


def verify_notebook(spec, nb, seed, limits=None, hide=()):
    """:func:`verify_source` on the solution cells of notebook ``nb``."""
    return verify_source(spec, solution_source(nb), seed, limits, hide)


#: source fragments of code that reaches into the kernel that runs the tests
_TAMPERING = ("input_transformers", "ast_transformers", "sys.modules", "get_ipython",
              "register_magic", "events.register", "showtraceback", "set_custom_exc",
              "builtins", "gradebook", "autograded")


def likely_cause(nb, cells, kernel_total, verifier_total):
    """A short guess, for the instructor, at why the two scores of a notebook differ."""
    if any(v.message.startswith("your answer imports") for v in cells):
        return "the answer imports the course's reference package or the grader"
    source = solution_source(nb)
    hits = [t for t in _TAMPERING if t in source]
    if kernel_total > verifier_total:
        if hits:
            return ("the answer reaches into the kernel that runs the tests ("
                    + ", ".join(hits) + "): tampering")
        return ("the answer passes in the notebook but not on its own: it depends on state "
                "outside its cells, or it tampers with the kernel")
    return ("the notebook's kernel run failed or was cut short (a crash, a time-out, an "
            "edited or broken notebook)")
