"""The student's ``autograder check NOTEBOOK``: the notebook's visible tests through
nbgrader's validator, and with ``--hidden`` the exercise's hidden checks in the clean
room, each failure named by its test, line and expectation, and one score line.

:func:`cmd_check` is what :mod:`autograder.cli` runs; it returns the exit status (0: every
test passes; 1: a test fails or a cell was edited; 2: no such notebook).

Where the grader's verdict is known without running anything, it is the verdict: an answer
that imports the reference package or the grader scores 0 on every test when graded, so
``check`` says so once and exits 1 without running its tests in a kernel where the import
would work. In the kernel ``check`` starts (never in a grading kernel) a failed ``assert``
also reports the values its comparison got (:data:`_PROBE_SOURCE`).
"""

from __future__ import annotations

import sys
import tempfile
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
    verdict = _reference_verdict(nb)
    if verdict is not None:
        print(verdict)
        return 1
    print(
        f"Running {path} from top to bottom in a fresh Python kernel, as the grader does; "
        f"each cell may take up to {args.timeout} s before it is stopped"
        + (", then the hidden checks run on your code." if args.hidden else "."),
        flush=True,
    )
    cfg = PyFileConfigLoader(NBGRADER_CONFIG.name, path=str(NBGRADER_CONFIG.parent)).load_config()
    cfg.Execute.timeout = args.timeout
    with tempfile.TemporaryDirectory(prefix="autograder-check-") as tmp:
        probe, record = Path(tmp, "assert_probe.py"), Path(tmp, "imports.txt")
        probe.write_text(
            f"{_PROBE_SOURCE}\n_autograder_install({str(record)!r}, {_FORBIDDEN!r})\n"
            "del _autograder_install\n"
        )
        cfg.Execute.extra_arguments = [
            "--HistoryManager.hist_file=:memory:",
            f"--InteractiveShellApp.exec_files={probe}",
        ]
        validator = Validator(config=cfg)
        results = _quiet_kernel(validator.validate, str(path.resolve()))
        imported = _imported_by_answer(nb, record)
    if imported:  # the grader refuses the import: every test of the notebook scores 0
        print(_reference_verdict(nb, imported))
        return 1
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
        hidden_status, got_hidden, max_hidden, whole = _run_hidden_isolated(path, args.timeout)
        status = max(status, hidden_status)
        if whole and got_visible is not None:
            got_visible = 0.0  # the grader scores every test of this notebook 0
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


#: the packages an answer may not import (the clean room refuses them)
_FORBIDDEN = ("repeval_ref", "autograder")
#: how the kernel's assert probe marks the lines it adds to a failed assert's message
_MARK = "[check] "

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
    probed = [line[len(_MARK) :] for line in lines if line.startswith(_MARK)]
    if probed:  # the kernel's probe: the values the condition saw
        out += [f"  {p}" for p in probed]
        said = [line for line in lines if line.strip() and not line.startswith(_MARK)]
        last = next((line for line in reversed(said) if "AssertionError" in line), last).strip()
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
    from .cleanroom import imports_reference, solution_source, verify_notebook
    from .exercises import all_specs

    nb = nbformat.read(str(path), as_version=4)
    ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "") for c in nb.cells}
    spec = next((s for s in all_specs() if f"{s.NAME}_solution" in ids), None)
    if spec is None:
        print("hidden checks: this notebook is not one of the course's exercises")
        return 1, 0.0, 0.0, False
    seed = grading_seed()
    limits = {"call_s": max(1.0, 0.8 * timeout), "start_s": float(timeout)}
    cells = verify_notebook(spec, nb, seed, limits)
    verdicts = {v.grade_id: v for v in cells}
    if imports_reference(cells) or any(v.failure for v in cells):
        # one verdict for the whole notebook, as the grader gives it: said once
        print("FAILED: " + cells[0].message)
        total = sum(float(verdicts[g].max_points) for g in grade_ids(spec).values())
        return 1, 0.0, total, True
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
    return status, got, total, False


def _imported_by_answer(nb, record):
    """The packages the grader refuses that the kernel imported while it ran the
    notebook's code, once each, from the probe's ``record`` (lines ``package
    cell-sha256``): the hidden-test cells of an instructor's source notebook, which call
    the grader, aside (a release notebook's are comments only)."""
    import hashlib

    if not record.is_file():
        return []
    hidden = {
        hashlib.sha256(c.source.encode()).hexdigest()
        for c in nb.cells
        if c.cell_type == "code" and "### BEGIN HIDDEN TESTS" in c.source
    }
    pairs = [line.split() for line in record.read_text().splitlines()]
    return list(dict.fromkeys(p[0] for p in pairs if len(p) == 2 and p[1] not in hidden))


def _reference_verdict(nb, names=None):
    """The grader's verdict on an answer that imports the reference package or the
    grader (every test scores 0), with its score line: ``names`` are the packages its
    kernel imported, or None to read them from its ``import`` statements; None when
    there are none."""
    from .checks import check_points
    from .cleanroom import forbidden_message, solution_source, static_imports
    from .exercises import all_specs

    names = static_imports(solution_source(nb)) if names is None else names
    if not names:
        return None
    ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "") for c in nb.cells}
    spec = next((s for s in all_specs() if f"{s.NAME}_solution" in ids), None)
    line = f"FAILED: {forbidden_message(names)} (as graded)."
    if spec is None:
        return line
    hidden = sum(check_points(c) for c in spec.HIDDEN)
    return (
        f"{line}\nSCORE: visible tests 0 / {float(spec.VISIBLE_POINTS):g}; hidden checks "
        f"0 / {hidden:g}; total 0 / {float(spec.VISIBLE_POINTS) + hidden:g} points"
    )


#: Loaded into the kernel ``check`` starts (``InteractiveShellApp.exec_files``), never into a
#: grading kernel: an IPython AST transformer that rewrites each ``assert`` so that, when it
#: fails, its message gains a ``[check] got: ...`` line with the values of its comparison
#: (each operand evaluated once, in its order, short-circuits kept).
_PROBE_SOURCE = r'''"""Loaded into the kernel of ``autograder check`` only: a failed
``assert`` also says what its comparison got (the grader's kernels never load it)."""


def _autograder_install(record, forbidden):
    import ast
    import sys

    shell = get_ipython()  # noqa: F821  (the kernel's shell)
    mark = "[check] "

    import hashlib

    class Watch:
        """Notes, in the file ``record``, each import of a package the grader refuses,
        with the SHA-256 of the cell that ran it."""

        cell = ""

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in forbidden:
                with open(record, "a") as fh:
                    fh.write(f"{name.split('.')[0]} {self.cell}\n")
            return None

        def started(self, info):
            self.cell = hashlib.sha256(info.raw_cell.encode()).hexdigest()

    watch = Watch()
    sys.meta_path.insert(0, watch)
    shell.events.register("pre_run_cell", watch.started)

    class Probe:
        def __init__(self):
            self.seen = {}
            self.descs = {}

        def rec(self, key, value):
            self.seen[key] = value
            return value

        def clear(self, k):
            for key in [key for key in self.seen if key[0] == k]:
                del self.seen[key]
            return False

        def show(self, value):
            try:
                np = sys.modules.get("numpy")
                if np is not None and isinstance(value, np.ndarray):
                    with np.printoptions(threshold=12, edgeitems=3, precision=8):
                        text = repr(value)
                else:
                    text = repr(value)
            except Exception:
                text = f"<a {type(value).__name__} that cannot be printed>"
            text = " ".join(text.split())
            return text if len(text) <= 200 else text[:197] + "..."

        def value(self, part):  # part: ("const", src) or ("plain", src, key)
            if part[0] == "const" or part[2] not in self.seen:
                return None
            return f"{part[1]} = {self.show(self.seen[part[2]])}"

        def lines(self, desc):
            """The ``got:`` line of one comparison: the value of each operand that is not
            a literal and was evaluated (the condition itself is the expectation)."""
            kind = desc[0]
            if kind == "isinstance":
                if desc[2] not in self.seen:
                    return []
                t = type(self.seen[desc[2]])
                name = t.__qualname__
                if t.__module__ != "builtins":
                    name = f"{t.__module__}.{name}"
                return [f"got: {desc[1]} of type {name}"]
            shown = []
            for p in desc[2] if kind == "compare" else desc[2:4]:
                shown += [p[1], p[2]] if p[0] == "abs" else [p]
            got = [v for v in map(self.value, shown) if v]
            return ["got: " + "; ".join(got)] if got else []

        def explain(self, k, mode, message):
            descs = self.descs.get(k, [])
            marked = [g for g in range(len(descs)) if (k, g, "m") in self.seen]
            extra = []
            for g in marked[-1:] if mode == "last" else marked:
                if descs[g] is not None:
                    extra += [mark + line for line in self.lines(descs[g]) if line]
            if not extra:
                return message
            # the probe's lines start lines of their own, after the test's message if any
            return "\n".join(["" if message is None else str(message), *extra])

    probe = Probe()
    shell.user_ns["_autograder_probe"] = probe
    closeness = {"allclose": "close to", "isclose": "close to", "array_equal": "equal to",
                 "equal": "equal to", "array_equiv": "equal to"}

    class Rewrite(ast.NodeTransformer):
        count = 0

        def call(self, method, *args):
            return ast.Call(
                ast.Attribute(ast.Name("_autograder_probe", ast.Load()), method, ast.Load()),
                list(args), [])

        def const(self, node):
            try:
                ast.literal_eval(node)
                return True
            except Exception:
                return False

        def part(self, node, key):
            """(description, node to evaluate in its place) of one operand."""
            src = ast.unparse(node)
            if self.const(node):
                return ("const", src), node
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "abs" and len(node.args) == 1 and not node.keywords
                    and isinstance(node.args[0], ast.BinOp)
                    and isinstance(node.args[0].op, ast.Sub)):
                a, na = self.part(node.args[0].left, key + ("a",))
                b, nb = self.part(node.args[0].right, key + ("b",))
                new = ast.Call(node.func, [ast.BinOp(na, ast.Sub(), nb)], [])
                return ("abs", a, b), new
            return ("plain", src, key), self.call("rec", ast.Constant(key), node)

        def group(self, node, key):
            if isinstance(node, ast.Compare):
                parts, nodes = zip(*(self.part(n, key + (j,)) for j, n in
                                     enumerate([node.left, *node.comparators])))
                ops = [ast.unparse(ast.Compare(ast.Name("a"), [op], [ast.Name("b")]))[2:-2]
                       for op in node.ops]
                new = ast.Compare(nodes[0], node.ops, list(nodes[1:]))
                return ("compare", ops, list(parts)), new
            f = getattr(node, "func", None)
            if isinstance(node, ast.Call) and len(node.args) >= 2:
                if isinstance(f, ast.Name) and f.id == "isinstance":
                    new = ast.Call(f, [self.call("rec", ast.Constant(key), node.args[0]),
                                       *node.args[1:]], node.keywords)
                    return ("isinstance", ast.unparse(node.args[0]), key,
                            ast.unparse(node.args[1])), new
                name = getattr(f, "attr", None)
                if name in closeness:
                    a, na = self.part(node.args[0], key + (0,))
                    b, nb = self.part(node.args[1], key + (1,))
                    if a[0] != "plain" or b[0] == "abs":
                        return None, node
                    new = ast.Call(f, [na, nb, *node.args[2:]], node.keywords)
                    return ("close", closeness[name], a, b), new
            return None, node

        def visit_Assert(self, node):
            try:
                Rewrite.count += 1
                k = Rewrite.count
                test = node.test
                if isinstance(test, ast.BoolOp):
                    values, mode = test.values, "last" if isinstance(test.op, ast.And) else "all"
                else:
                    values, mode = [test], "all"
                descs, news = [], []
                for g, v in enumerate(values):
                    desc, new = self.group(v, (k, g))
                    descs.append(desc)
                    news.append(ast.BoolOp(ast.Or(), [self.call("rec", ast.Constant((k, g, "m")),
                                                                ast.Constant(None)), new]))
                body = ast.BoolOp(test.op, news) if isinstance(test, ast.BoolOp) else news[0]
                new_test = ast.BoolOp(ast.Or(), [self.call("clear", ast.Constant(k)), body])
                probe.descs[k] = descs
                msg = self.call("explain", ast.Constant(k), ast.Constant(mode),
                                node.msg or ast.Constant(None))
                out = ast.copy_location(ast.Assert(new_test, msg), node)
                return ast.fix_missing_locations(out)
            except Exception:
                return node

    shell.ast_transformers.append(Rewrite())
'''
