"""The limits of one student's nbgrader run, and the reasons given when one is reached.

Every time limit here is computed from the release notebooks (the instructor's), never
from what a student handed in (:func:`time_budget`): added cells, added notebooks or a
longer notebook cannot extend a student's time. What the run may hold and write is
bounded for the run as a whole where the machine allows it (a memory and a pids cgroup,
:mod:`autograder.cgroups`; one size-capped tmpfs, :func:`autograder.sandbox_disk.mount_disk`);
the sizes, :data:`SANDBOX_LIMITS` itself and its variables are those of
:mod:`autograder.settings`.
"""

from __future__ import annotations

from .settings import NOTEBOOK_LIMIT_ENV, SANDBOX_LIMITS

__all__ = [
    "SANDBOX_LIMITS",
    "NOTEBOOK_BASE_S",
    "WALL_BASE_S",
    "NOTEBOOK_LIMIT_ENV",
    "TIME_LIMIT_KEY",
    "WALL_MARK",
    "MEMORY_MARK",
    "why_failed",
    "blank_with_reason",
    "time_limit_reason",
    "time_limit_of",
    "code_cells",
    "time_budget",
]

#: the part of the default per-notebook limit that does not depend on its cells
NOTEBOOK_BASE_S = 30
#: the part of a student's default budget that does not depend on the cells
WALL_BASE_S = 120
#: :data:`autograder.kernel_fork.TIME_LIMIT_KEY` (not imported: that module loads nbgrader)
TIME_LIMIT_KEY = "autograder_time_limit_s"
#: the line that ends a run's output when its time ran out, then the limit in seconds
WALL_MARK = "[autograder] stopped at the wall-clock limit of"
#: the line that ends a run's output when its memory cgroup's limit killed processes
MEMORY_MARK = "[autograder] processes killed at the sandbox's memory limit of"


def why_failed(text):
    """Why nbgrader's run with the output ``text`` could not grade a notebook, in the
    student's words (the end of a sentence: "While grading this notebook ...")."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a run's output (str), got {type(text).__name__}")
    memory = text.rfind(MEMORY_MARK)
    if memory >= 0:
        limit = text[memory + len(MEMORY_MARK) :].split("\n")[0].strip()
        return (
            f"its processes went past the sandbox's memory limit of {limit}, all of "
            "them together, and were killed"
        )
    wall = text.rfind(WALL_MARK)
    if wall >= 0:
        limit = text[wall + len(WALL_MARK) :].split("\n")[0].strip()
        return (
            f"the grading of this student's notebooks went past its time budget of "
            f"{limit} (set by the release notebooks' cells, whatever was handed in), "
            "and everything it ran was stopped"
        )
    if "DeadKernelError" in text or "Kernel died" in text:
        return "the Python kernel crashed (for example os._exit or a fatal error)"
    if "UnresponsiveKernelError" in text or "unresponsive" in text:
        return "the kernel stopped responding and could not be interrupted"
    last = [line for line in text.splitlines() if "Error" in line][-1:]
    return "nbgrader could not grade it" + (f" ({last[0].strip()[:200]})" if last else "")


def blank_with_reason(release_bytes, reason):
    """The release notebook (bytes) with a Markdown note at the top giving ``reason``
    (plain text, escaped: :func:`autograder.feedback.note_markdown`)."""
    import nbformat

    from .feedback import note_markdown

    nb = nbformat.reads(release_bytes.decode("utf-8"), as_version=4)
    note = nbformat.v4.new_markdown_cell(
        note_markdown(
            reason + " This notebook was therefore graded as the blank exercise (zero points). "
            "Ask your instructor if you think this is wrong."
        )
    )
    note["id"] = "autograder-grading-note"
    nb.cells = [c for c in nb.cells if c.get("id") != "autograder-grading-note"]
    nb.cells.insert(0, note)
    return nbformat.writes(nb).encode("utf-8")


def time_limit_reason(limit_s):
    """The reason given for a notebook stopped at its per-notebook limit of ``limit_s``
    seconds (in ``grading_issues.csv`` and at the top of its feedback)."""
    return (
        f"While grading this notebook, its kernel (with everything it started) ran "
        f"longer than the limit of {float(limit_s):g} s per notebook and was stopped."
    )


def time_limit_of(data):
    """The per-notebook limit an autograded notebook (bytes) was stopped at, or None."""
    import json

    try:
        value = json.loads(data.decode("utf-8")).get("metadata", {}).get(TIME_LIMIT_KEY)
        return float(value) if value is not None else None
    except (ValueError, TypeError, AttributeError):
        return None


def code_cells(data):
    try:
        import nbformat

        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        return sum(1 for c in nb.cells if c.cell_type == "code")
    except Exception:
        return 1


def time_budget(job, limits=None):
    """One student's time limits, from the release notebooks only: ``(wall_s,
    notebook_s)``.

    ``wall_s``, the whole budget of the student's nbgrader runs, is :data:`WALL_BASE_S`
    plus the cell timeout per code cell of the release notebook of each notebook handed
    in; ``notebook_s``, one notebook's kernel, :data:`NOTEBOOK_BASE_S` plus the cell
    timeout per code cell of the longest of them. A notebook without a release notebook
    adds nothing, and added cells change nothing: a submission cannot extend its time.
    ``limits`` (over :data:`SANDBOX_LIMITS`) may set either value outright.

    Parameters
    ----------
    job : dict
        As :func:`grade_in_sandbox` takes it (``assignments`` with ``files`` and
        ``release``; ``timeout``, the per-cell limit in seconds).
    limits : dict, optional

    Returns
    -------
    (float, float)
    """
    if not isinstance(job, dict) or not isinstance(job.get("assignments"), dict):
        raise ValueError("job must be a dict with the student's assignments")
    timeout = job.get("timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"job['timeout'] must be a positive number, got {timeout!r}")
    lim = {**SANDBOX_LIMITS, **(limits or {})}
    cells = longest = 0
    for parts in job["assignments"].values():
        release = parts.get("release", {})
        for name in parts["files"]:
            stem = name[: -len(".ipynb")] if name.endswith(".ipynb") else None
            if stem is not None and stem in release:
                n = code_cells(release[stem])
                cells += n
                longest = max(longest, n)
    wall = lim["wall_s"] or WALL_BASE_S + timeout * max(cells, 1)
    notebook = lim["notebook_s"] or NOTEBOOK_BASE_S + timeout * max(longest, 1)
    return float(wall), float(notebook)
