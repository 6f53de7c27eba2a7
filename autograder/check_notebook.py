"""The student's ``autograder check NOTEBOOK``: the notebook's visible tests through
nbgrader's validator, and with ``--hidden`` the exercise's hidden checks in the clean
room, each failure named by its test, line and expectation, and one score line.

:func:`cmd_check` is what :mod:`autograder.cli` runs; it returns the exit status (0: every
test passes; 1: a test fails or a cell was edited; 2: no such notebook).
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import NBGRADER_CONFIG

__all__ = ["cmd_check"]


def cmd_check(args):
    """Student command: run the notebook's visible tests through nbgrader's validator."""
    import nbformat
    from nbgrader.validator import Validator
    from traitlets.config.loader import PyFileConfigLoader

    path = Path(args.notebook)
    if not path.is_file():
        print(f"{path}: no such notebook")
        return 2
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:
        print(
            f"{path} is not a valid notebook ({type(exc).__name__}: {exc}). Restore it "
            "from the release (exercises/) and paste your code back in."
        )
        return 1
    broken = _syntax_errors(nb)
    if broken:
        for line in broken:
            print(line)
        print(
            "Fix the syntax first: until the cell runs, every test reports the function as "
            "undefined."
        )
        return 1
    cfg = PyFileConfigLoader(NBGRADER_CONFIG.name, path=str(NBGRADER_CONFIG.parent)).load_config()
    cfg.Execute.timeout = args.timeout
    validator = Validator(config=cfg)
    results = _quiet_kernel(validator.validate, str(path.resolve()))
    by_source = {c.source.strip(): c for c in nb.cells}
    status = 0
    if results.get("type_changed"):
        names = [_cell_label(by_source.get(d["source"])) for d in results["type_changed"]]
        print(
            f"{len(names)} cell(s) changed type (code <-> markdown): {'; '.join(names)}. "
            "Restore them from the release."
        )
        status = 1
    if results.get("changed"):
        names = [_cell_label(by_source.get(d["source"])) for d in results["changed"]]
        print(
            f"{len(names)} read-only cell(s) were edited: {'; '.join(names)}. Graders "
            "restore them, so your edits there are lost. Undo them (copy the cell from "
            "the release)."
        )
        status = 1
    visible = [c for c in nb.cells if c.cell_type == "code" and _is_visible_test(c)]
    lost = 0.0
    for failed in results.get("failed", []):
        status = 1
        error = failed["raw_error"].strip()
        if not sys.stdout.isatty():
            from nbconvert.filters import strip_ansi

            error = strip_ansi(error)
        cell = by_source.get(failed["source"])
        if cell is not None and _is_visible_test(cell):
            lost += float(cell.metadata["nbgrader"].get("points") or 0)
        print(_describe_failure(cell, failed["source"], error))
    got_visible = sum(float(c.metadata["nbgrader"].get("points") or 0) for c in visible) - lost
    max_visible = sum(float(c.metadata["nbgrader"].get("points") or 0) for c in visible)
    if results.get("changed") or results.get("type_changed"):
        got_visible = None  # nbgrader does not run the tests of an edited notebook
    got_hidden = max_hidden = None
    if args.hidden:
        hidden_status, got_hidden, max_hidden = _run_hidden_isolated(path, args.timeout)
        status = max(status, hidden_status)
    print(_score_line(got_visible, max_visible, got_hidden, max_hidden))
    if status == 0:
        print(
            f"{path}: visible tests pass and nbgrader validate is happy."
            + (
                ""
                if args.hidden
                else " The hidden tests run when your notebook is graded "
                "(try them now with --hidden, or make check NB=... HIDDEN=1)."
            )
        )
    return status


#: the kernel's warning about TCP without encryption: local kernels always use TCP here
_KERNEL_NOISE = ("Kernel is running over TCP without encryption",)


def _quiet_kernel(func, *args):
    """Run ``func`` with file descriptor 2 captured; replay its output without the
    kernel's transport warning (which every local run prints and students cannot act on)."""
    import os
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            return func(*args)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            for line in text.splitlines():
                if line.strip() and not any(n in line for n in _KERNEL_NOISE):
                    print(line, file=sys.stderr)


def _is_visible_test(cell):
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not cell.source.lstrip().startswith("# Hidden test")


def _cell_label(cell):
    """A cell named for a student: its role, its nbgrader id and its first line."""
    if cell is None:
        return "a cell that no longer matches the release"
    meta = cell.get("metadata", {}).get("nbgrader", {})
    gid = meta.get("grade_id", "") or cell.get("id", "")
    if _is_visible_test(cell):
        role = "the visible tests"
    elif cell.source.lstrip().startswith("# Hidden test"):
        role = "a hidden-test cell"
    elif meta.get("solution"):
        role = "your solution cell"
    elif cell.cell_type == "markdown":
        role = "the " + ("statement" if gid.endswith("_statement") else "text cell")
    else:
        role = "a read-only code cell"
    if role == "the visible tests":
        return f"{role} (cell {gid})"
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    return f"{role} (cell {gid}: {first[:60]!r})"


def _describe_failure(cell, source, error):
    """Which test failed, at which line, and what it expected."""
    import re

    lines = error.splitlines()
    last = next((line for line in reversed(lines) if line.strip()), "").strip()
    at = next((m for m in (re.match(r"\s*-+>\s*(\d+)\s(.*)", line) for line in lines) if m), None)
    label = _cell_label(cell) if cell is not None else "a test cell"
    out = [f"FAILED: {label}"]
    if at is not None:
        number, code = int(at.group(1)), at.group(2).strip()
        # the test's name: the comment that opens its block in the test cell
        above = source.splitlines()[:number] if source else []
        title = next(
            (
                line.strip().lstrip("# ").strip()
                for line in reversed(above)
                if line.strip().startswith("#")
            ),
            "",
        )
        if title:
            out.append(f"  test: {title}")
        out.append(f"  line {number}: {code}")
        if code.startswith("assert "):
            condition = code[len("assert ") :]
            condition = re.split(r",\s*(?:f?[\"'])", condition, maxsplit=1)[0]
            condition = condition.rstrip("\\ ").rstrip(",").strip()
            out.append(f"  expected: {condition}")
    if last.startswith("AssertionError"):
        message = last[len("AssertionError") :].lstrip(": ").strip()
        if message:
            out.append(f"  message: {message}")
    elif "NotImplementedError" in last:
        out.append("  -> your function is still the stub: replace raise NotImplementedError()")
    elif "Partial credit" in last or cell is None or not _is_visible_test(cell):
        out.append("  " + last)
    else:
        out.append(f"  the test raised {last}; the traceback:")
        out.append("  " + error.replace("\n", "\n  "))
    return "\n".join(out)


def _score_line(got_visible, max_visible, got_hidden, max_hidden):
    parts = []
    if got_visible is None:
        parts.append(f"visible tests: not run (restore the edited cells) / {max_visible:g}")
    else:
        parts.append(f"visible tests {got_visible:g} / {max_visible:g}")
    if got_hidden is not None:
        parts.append(f"hidden checks {got_hidden:g} / {max_hidden:g}")
        total = (got_visible or 0.0) + got_hidden
        parts.append(f"total {total:g} / {max_visible + max_hidden:g} points")
    else:
        parts.append("hidden checks not run (use --hidden)")
    return "SCORE: " + "; ".join(parts)


def _syntax_errors(nb):
    """One message per solution cell that does not compile (IPython magics allowed)."""
    from .course.notebook_repair import solution_syntax_failures

    out = []
    for i, exc in solution_syntax_failures(nb):
        where = f"line {exc.lineno}" if exc.lineno else "somewhere"
        out.append(
            f"FAILED: your solution cell {i} has a syntax error on {where}: {exc.msg}"
            + (f"\n  {exc.text.rstrip()}" if exc.text else "")
        )
    return out


def _run_hidden_isolated(path, timeout):
    """Run the exercise's hidden checks on the notebook's solution cells in the clean room
    (:mod:`autograder.cleanroom`: a fresh, limited process that holds only the student's
    code and cannot import the reference or the grader), as grading does. A check whose
    arguments cannot travel as plain data (a torch model) runs in a separate process on
    the student's code instead (``run_check_isolated``)."""
    import nbformat

    from .build import grade_ids
    from .checks import format_findings, grading_seed, run_check_isolated
    from .cleanroom import solution_source, verify_notebook
    from .exercises import all_specs

    nb = nbformat.read(str(path), as_version=4)
    ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "") for c in nb.cells}
    spec = next((s for s in all_specs() if f"{s.NAME}_solution" in ids), None)
    if spec is None:
        print("hidden checks: this notebook is not one of the course's exercises")
        return 1, 0.0, 0.0
    seed = grading_seed()
    limits = {"call_s": max(1.0, 0.8 * timeout), "start_s": float(timeout)}
    verdicts = {v.grade_id: v for v in verify_notebook(spec, nb, seed, limits)}
    status = 0
    got = total = 0.0
    for check, gid in grade_ids(spec).items():
        v = verdicts[gid]
        if v.points is None:
            findings = run_check_isolated(
                check, solution_source(nb), check.split("/", 1)[0], seed, timeout=timeout
            )
            print(format_findings(check, findings, seed))
            points = sum(f.points for f in findings)
        else:
            print(v.message)
            points = v.points
        got += points
        total += v.max_points
        if points < v.max_points:
            status = 1
    return status, got, total
