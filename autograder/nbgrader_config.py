# nbgrader configuration of the repeval course (nbgrader 0.9.x).
#
# Every `autograder` command passes this file to nbgrader (`--config`) together with
# `--CourseDirectory.root=<course dir>`; instructors who call nbgrader by hand can do the
# same. The course directory is the repository root for `autograder release` (which writes
# exercises/) and a separate folder (default ./course) for grading a class.
import os

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades

from autograder import REPO_ROOT
from autograder.feedback import SafeOutputs, ScrubTestTracebacks
from autograder.settings import CELL_TIMEOUT_ENV, COURSE_ROOT_ENV

c = get_config()  # noqa: F821  (provided by traitlets when nbgrader loads this file)

# Layout: nbgrader's "source" is solutions/, its "release" is exercises/.
c.CourseDirectory.root = os.environ.get(COURSE_ROOT_ENV, str(REPO_ROOT))
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.course_id = "repeval"

# Release: the stub every solution region becomes.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Execution while grading and validating: a per-cell limit, so an infinite loop costs
# one cell (CellTimeoutError, zero for what depends on it), not the grading run.
_timeout = int(os.environ.get(CELL_TIMEOUT_ENV, "60"))
c.Execute.timeout = _timeout
c.Execute.interrupt_on_timeout = True
c.Execute.error_on_timeout = {
    "ename": "CellTimeoutError",
    "evalue": f"this cell ran longer than {_timeout} s and was stopped (an infinite loop?)",
    "traceback": [
        f"CellTimeoutError: this cell ran longer than {_timeout} s and was "
        "stopped: check your code for an infinite loop"
    ],
}
c.Execute.raise_on_iopub_timeout = False
# Every output is in once the last cell has run: stop the kernel at once (a graceful
# shutdown waits about half a second per notebook for the kernel to wind down).
c.Execute.shutdown_kernel = "immediate"

# Autograding forks each notebook's kernel from a process that has already imported the
# scientific stack (autograder.kernel_fork; AUTOGRADER_KERNEL_FORK=0 turns it off).
from nbgrader.converters.autograde import Autograde as _Autograde  # noqa: E402
from nbgrader.preprocessors import Execute as _Execute  # noqa: E402

from autograder.kernel_fork import ForkExecute, fork_enabled, start_server  # noqa: E402

if fork_enabled():
    import sys as _sys

    if "autograde" in _sys.argv[1:2]:  # the imports overlap nbgrader's own start-up
        start_server()
    c.Autograde.autograde_preprocessors = [
        ForkExecute if pp is _Execute else pp
        for pp in _Autograde.class_traits()["autograde_preprocessors"].make_dynamic_default()
    ]

# Inside a sandbox the gradebook is a scratch copy: SQLite need not wait for the disk
# after each of nbgrader's commits (autograder.sandbox.unsynced_scratch_gradebook).
from autograder.sandbox import SCRATCH_GRADEBOOK_ENV, unsynced_scratch_gradebook  # noqa: E402

if os.environ.get(SCRATCH_GRADEBOOK_ENV) == "1":
    unsynced_scratch_gradebook()

# Output limits keep a runaway print loop from bloating the gradebook and the feedback.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 40

# Feedback: remove hidden test regions (nbgrader shows them by default), reduce any
# error in a test cell to its last line, and drop or clean every output that could run
# code (SafeOutputs, nbconvert's SanitizeHTML). After generation
# autograder.feedback.make_feedback_offline cleans each page's body, adds its
# Content-Security-Policy and makes MathJax offline (nbgrader's template loads it from
# a CDN).
c.GenerateFeedback.preprocessors = [
    GetGrades,
    CSSHTMLHeaderPreprocessor,
    ClearHiddenTests,
    ScrubTestTracebacks,
    SafeOutputs,
]
