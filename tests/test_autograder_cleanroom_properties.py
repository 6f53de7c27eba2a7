"""Property checks and visible tests that a wrong answer cannot pass.

The clean room runs the student's function in a child process while the checks run in the
grader's. A check that measured the call in the grader's own process (its memory) used to
credit an answer that builds an N x N matrix. Here every such property is graded in the
clean room on an answer that breaks exactly that property (it must lose that check's
points and keep every other) and on an honest answer (it keeps them), with the same text
as the check prints in the kernel.

The visible-test points are recorded from a run whose assertions live in the grader's
process (:func:`autograder.cleanroom.run_visible`): an answer that passes the visible
tests only by patching NumPy or the builtins at the top of its cell (which fools a
shared interpreter, tested here) keeps no visible-test point.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers.autograder_cases_more import CKA_GRAM_MATRICES, TWONN_DISTANCE_MATRIX

from autograder.build import grade_ids, solution_source
from autograder.checks import format_findings, run_check
from autograder.checks._framework import CheckTimeout, _time_limit
from autograder.checks._helpers import RSS_BACKSTOP, call_peak, metered
from autograder.cleanroom import run_visible, verify_source
from autograder.cleanroom_calls import RemoteFunction, remote_function
from autograder.cleanroom_child import traced_peak
from autograder.cleanroom_process import Sandbox
from autograder.exercises import EXERCISES, load

#: answers graded end to end in the clean room: left out of make test-fast (make test and CI
#: run it)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cleanroom_fork_server")]

SEED = 20240611
FAST = {"call_s": 5.0, "start_s": 30.0, "cpu_s": 30, "memory_bytes": 2 << 30}

# ------------------------------------------------------------------ answers
#: the distance-matrix answer that also hides its peak from tracemalloc: it restarts the
#: trace after dropping the matrix (only the process's resident memory still shows it)
TWONN_HIDDEN_PEAK = """
import tracemalloc
import numpy as np
from scipy.spatial.distance import cdist

def two_nn_id(X):
    D = cdist(X, X)
    np.fill_diagonal(D, np.inf)
    D.sort(axis=1)
    if np.any(D[:, 0] == 0):
        raise ValueError("duplicate points")
    est = float(len(X) / np.sum(np.log(D[:, 1] / D[:, 0])))
    del D
    if tracemalloc.is_tracing():
        tracemalloc.stop()
        tracemalloc.start()
    return est
"""

#: the same, also resetting its own resident-memory high-water mark before it returns
#: (the grader's samples taken while it works still see the matrix)
TWONN_HIDDEN_MARK = TWONN_HIDDEN_PEAK.replace(
    """    return est
""",
    """    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    return est
""",
)

#: the distance matrix built by torch, whose buffers tracemalloc does not see (computed
#: without the matrix-product shortcut, so that the distances are exact)
TWONN_TORCH_MATRIX = """
import numpy as np
import torch

def two_nn_id(X):
    T = torch.as_tensor(np.asarray(X, dtype=float))
    D = torch.cdist(T, T, compute_mode="donot_use_mm_for_euclid_dist")
    D.fill_diagonal_(float("inf"))
    r = torch.topk(D, 2, dim=1, largest=False).values.numpy()
    if np.any(r[:, 0] == 0):
        raise ValueError("duplicate points")
    return float(len(X) / np.sum(np.log(r[:, 1] / r[:, 0])))
"""

#: the same matrix in float32 (half the memory), used only to find each point's three
#: nearest candidates, whose distances are then recomputed exactly in float64
TWONN_TORCH_FLOAT32 = """
import numpy as np
import torch

def two_nn_id(X):
    X = np.asarray(X, dtype=float)
    T = torch.as_tensor(X, dtype=torch.float32)
    D = torch.cdist(T, T, compute_mode="donot_use_mm_for_euclid_dist")
    D.fill_diagonal_(float("inf"))
    idx = torch.topk(D, 3, dim=1, largest=False).indices.numpy()
    del D
    r = np.sort(np.linalg.norm(X[idx] - X[:, None, :], axis=2), axis=1)
    if np.any(r[:, 0] == 0):
        raise ValueError("duplicate points")
    return float(len(X) / np.sum(np.log(r[:, 1] / r[:, 0])))
"""

#: variants seen only by the resident memory (their numbers differ between the places)
BY_RESIDENT_MEMORY = {"hidden_peak", "hidden_mark", "torch_matrix", "torch_float32"}
#: variants that fool the kernel's own measure (the clean room's grade is the one recorded)
FOOL_THE_KERNEL = {"hidden_mark"}

#: (exercise, answer that breaks only the memory property, its check, the cause it names)
MEMORY = {
    "distance_matrix": (
        "two_nn_id",
        TWONN_DISTANCE_MATRIX,
        "two_nn_id/no_n_by_n_matrix",
        "builds all pairwise distances",
    ),
    "gram_matrices": (
        "linear_cka",
        CKA_GRAM_MATRICES,
        "linear_cka/no_gram_matrix",
        "n x n Gram matrices",
    ),
    "hidden_peak": (
        "two_nn_id",
        TWONN_HIDDEN_PEAK,
        "two_nn_id/no_n_by_n_matrix",
        "builds all pairwise distances",
    ),
    "hidden_mark": (
        "two_nn_id",
        TWONN_HIDDEN_MARK,
        "two_nn_id/no_n_by_n_matrix",
        "builds all pairwise distances",
    ),
    "torch_matrix": (
        "two_nn_id",
        TWONN_TORCH_MATRIX,
        "two_nn_id/no_n_by_n_matrix",
        "builds all pairwise distances",
    ),
    "torch_float32": (
        "two_nn_id",
        TWONN_TORCH_FLOAT32,
        "two_nn_id/no_n_by_n_matrix",
        "builds all pairwise distances",
    ),
}

#: right results from functions that centre their inputs in place: (exercise, answer, the
#: one check that must fail, its words)
IN_PLACE = {
    "two_nn_id": (
        "two_nn_id",
        """
def two_nn_id(X):
    X -= X.mean(axis=0)              # distances do not change, the caller's X does
    dist, _ = cKDTree(X).query(X, k=3)
    r1, r2 = dist[:, 1], dist[:, 2]
    if np.any(r1 == 0):
        raise ValueError("duplicate points")
    return float(len(X) / np.sum(np.log(r2 / r1)))
""",
        "two_nn_id/properties",
        "modified X in place",
    ),
    "linear_cka": (
        "linear_cka",
        """
def linear_cka(X, Y):
    X -= X.mean(axis=0)
    Y -= Y.mean(axis=0)
    cross = np.linalg.norm(X.T @ Y) ** 2
    return float(cross / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y)))
""",
        "linear_cka/properties",
        "modified X, Y in place",
    ),
}

#: patches of an answer's cell, each enough to pass that exercise's visible tests with a
#: wrong function in a shared interpreter: (exercise, patch at the top of the cell, the
#: wrong function, patch at its end: one of ``compile`` must follow the cell's imports)
PATCHED_VISIBLE = {
    "exec_rank_bound": (
        "rank_bound",
        """
import builtins
builtins.exec = lambda *args, **kwargs: None
""",
        """
def rank_bound(H, y, n_classes):
    return 0.0, 0
""",
        "",
    ),
    "allclose_fold_batchnorm": (
        "fold_batchnorm",
        """
import numpy as np
np.allclose = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
""",
        """
def fold_batchnorm(W, b, mu, s):
    return np.zeros_like(np.asarray(W, float)), np.zeros_like(np.asarray(b, float))
""",
        "",
    ),
    "abs_linear_cka": (
        "linear_cka",
        """
import builtins
builtins.abs = lambda x: 0.0
""",
        """
def linear_cka(X, Y):
    return 0.1
""",
        "",
    ),
    "compile_two_nn_id": (
        "two_nn_id",
        "",
        """
def two_nn_id(X):
    return 2.0
""",
        """
import builtins
_compile = builtins.compile
builtins.compile = lambda source, filename, mode, *args, **kwargs: _compile("pass", filename, mode)
""",
    ),
}


def _verdicts(spec, code):
    return {v.grade_id: v for v in verify_source(spec, code, SEED, FAST)}


def _in_kernel(spec, code, check):
    """What the check prints when it runs in the same interpreter as the answer."""
    namespace = {}
    exec(compile(code, "answer.py", "exec"), namespace)
    fn = namespace[check.split("/", 1)[0]]
    return format_findings(check, run_check(check, fn, SEED), SEED)


# ------------------------------------------------------------------ the measures
def test_traced_peak_sees_a_numpy_buffer_and_names_a_bad_call():
    result, peak = traced_peak(lambda: float(np.ones((1000, 1000)).sum()))
    assert result == 1e6
    assert 7.5e6 < peak < 9e6  # one 8 MB buffer, nothing else of size
    with pytest.raises(ValueError, match="call"):
        traced_peak(42)


def test_call_peak_trusts_the_trace_unless_resident_memory_rose_far_more():
    mb = 2**20
    assert call_peak({"traced": 3 * mb, "rss": None}) == 3 * mb
    assert call_peak({"traced": 70 * mb, "rss": 72 * mb}) == 70 * mb  # the kernel's number
    assert call_peak({"traced": 0, "rss": RSS_BACKSTOP - 1}) == 0  # noise of a library
    assert call_peak({"traced": mb, "rss": 100 * mb}) == 100 * mb  # a trace evaded
    with pytest.raises(ValueError, match="cost"):
        call_peak({"rss": 5})


def test_metered_records_the_peak_of_each_call_in_process():
    meter = metered(lambda n: np.zeros(n).sum())
    meter(10)
    meter(2**20)
    assert meter.peaks[0] < 2**16 < 2**23 <= meter.peaks[1] < 2**24
    with pytest.raises(ValueError, match="fn"):
        metered(None)


def test_remote_function_names_its_bad_arguments():
    with pytest.raises(ValueError, match="box"):
        RemoteFunction(object(), "f")
    with Sandbox("def f(x):\n    return x\n", FAST) as box:
        with pytest.raises(ValueError, match="name"):
            remote_function(box, "")
        assert remote_function(box, "f")(3) == 3


def test_the_child_reports_the_calls_peak_and_the_grader_its_resident_memory():
    src = "import numpy as np\n\ndef f(n):\n    return float(np.ones((n, n)).sum())\n"
    with Sandbox(src, FAST) as box:
        f = remote_function(box, "f")
        small = f.measured_call(10)[1]
        out, big = f.measured_call(3000)
    assert out == 9e6
    assert small["traced"] < 2**16 and big["traced"] > 68 * 2**20
    if big["rss"] is not None:  # where the grader may reset the child's high-water mark
        assert big["rss"] > 60 * 2**20 and small["rss"] < RSS_BACKSTOP


def test_a_check_that_outlives_its_call_ends_the_child_instead_of_reading_a_late_reply():
    src = "import time\n\ndef f(x):\n    time.sleep(x)\n    return x\n"
    with Sandbox(src, FAST) as box:
        f = remote_function(box, "f")
        with pytest.raises(CheckTimeout):
            with _time_limit(0.3):
                f(1.5)
        with pytest.raises(CheckTimeout):  # not the late reply 1.5 to this call
            f(0.0)
        assert box.dead and "did not return" in box.dead


def test_a_call_past_its_own_limit_is_named_with_that_limit():
    """A call that runs past the clean room's per-call limit (1 s here) inside a check whose
    own limit is longer (60 s) is reported with the limit that fired."""
    src = "import time\n\ndef rank_bound(H, y, n_classes):\n    time.sleep(30)\n"
    with Sandbox(src, {**FAST, "call_s": 1.0}) as box:
        f = run_check("rank_bound/properties", remote_function(box, "rank_bound"), 1, time_limit=60)
    assert f[0].points == 0
    assert "stopped after 1 s (one call of your function)" in f[0].message, f[0].message


# ------------------------------------------------------------------ memory checks
def _the_only_cell_short(spec, code, check):
    """The clean room's verdict of ``check`` on ``code``, asserting that no other cell of
    the exercise lost a point."""
    verdicts = _verdicts(spec, code)
    short = {g: v for g, v in verdicts.items() if v.points != v.max_points}
    assert set(short) == {grade_ids(spec)[check]}, [v.message for v in short.values()]
    return short[grade_ids(spec)[check]]


@pytest.mark.parametrize("variant", sorted(MEMORY))
def test_an_answer_building_the_matrix_loses_only_the_memory_check(variant):
    exercise, answer, check, cause = MEMORY[variant]
    if variant in BY_RESIDENT_MEMORY and not os.access("/proc/self/clear_refs", os.W_OK):
        pytest.skip("the grader may not reset a process's resident-memory high-water mark")
    spec = load(exercise)
    code = solution_source(spec) + "\n" + answer
    v = _the_only_cell_short(spec, code, check)
    assert v.points == 0.0 and cause in v.message and "MB at once" in v.message
    if variant in FOOL_THE_KERNEL:
        return
    kernel = _in_kernel(spec, code, check)
    if variant in BY_RESIDENT_MEMORY:  # the kernel sees it too, with its own number
        assert ": 0 / 1 points" in kernel and cause in kernel
    else:  # the same verdict and text as in the kernel
        assert v.message == kernel


@pytest.mark.parametrize(
    "exercise,check",
    [("two_nn_id", "two_nn_id/no_n_by_n_matrix"), ("linear_cka", "linear_cka/no_gram_matrix")],
)
def test_an_honest_answer_keeps_the_memory_check_and_every_other(exercise, check):
    spec = load(exercise)
    code = solution_source(spec)
    verdicts = _verdicts(spec, code)
    assert all(v.points == v.max_points for v in verdicts.values()), verdicts
    v = verdicts[grade_ids(spec)[check]]
    assert v.points == 1.0 and v.message == _in_kernel(spec, code, check)


@pytest.mark.parametrize("variant", sorted(IN_PLACE))
def test_an_answer_changing_its_inputs_loses_only_the_check_that_says_so(variant):
    """The arguments travel back from the child after the call, so "inputs untouched"
    is judged on what the student's function did to them there."""
    exercise, answer, check, words = IN_PLACE[variant]
    spec = load(exercise)
    code = solution_source(spec) + "\n" + answer
    v = _the_only_cell_short(spec, code, check)
    assert v.points == 0.0 and words in v.message
    assert v.message == _in_kernel(spec, code, check)


# ------------------------------------------------------------------ visible tests
def _passes_in_one_interpreter(spec, code):
    """Whether the visible tests pass when they run after the answer in one fresh
    interpreter, as in nbgrader's kernel (the answer's patches then reach them)."""
    program = textwrap.dedent("""
        import sys
        answer, tests = sys.stdin.read().split("\\0")
        namespace = {}
        exec(compile(answer, "answer", "exec"), namespace)
        try:
            exec(compile(tests, "tests", "exec"), namespace)
        except BaseException:
            print("FAILED")
        else:
            print("PASSED")
        """)
    out = subprocess.run(
        [sys.executable, "-c", program],
        input=code + "\0" + spec.VISIBLE_TESTS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout.strip().splitlines()[-1:] == ["PASSED"]


@pytest.mark.parametrize("attack", sorted(PATCHED_VISIBLE))
def test_patching_at_the_top_of_the_cell_keeps_no_visible_point(attack):
    exercise, top, wrong, end = PATCHED_VISIBLE[attack]
    spec = load(exercise)
    vis = f"{exercise}_visible_tests"
    plain = solution_source(spec) + "\n" + wrong
    patched = top + "\n" + plain + "\n" + end
    # the wrong function fails the visible tests, the patch hides it in a shared
    # interpreter (the attack is real) ...
    assert not _passes_in_one_interpreter(spec, plain)
    assert _passes_in_one_interpreter(spec, patched)
    # ... and the clean room scores the visible tests 0 either way
    for code in (plain, patched):
        v = _verdicts(spec, code)[vis]
        assert v.points == 0.0 and v.message.startswith("visible tests fail"), v.message


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_honest_answers_keep_the_visible_points(exercise):
    """Every exercise's visible cell travels (no verdict left to nbgrader's kernel)."""
    spec = load(exercise)
    with Sandbox(solution_source(spec), FAST) as box:
        v = run_visible(spec, box, 60.0)
    assert v.points == v.max_points == float(spec.VISIBLE_POINTS), v.message


def test_run_visible_names_its_bad_arguments():
    spec = load("rank_bound")
    with pytest.raises(ValueError, match="box"):
        run_visible(spec, None, 10.0)
    with Sandbox(solution_source(spec), FAST) as box:
        with pytest.raises(ValueError, match="seconds"):
            run_visible(spec, box, 0)


def test_the_reference_side_of_a_verification_runs_on_one_thread(monkeypatch, two_threads):
    """``verification.verify_one`` holds BLAS and OpenMP at one thread while it verifies (the
    answer's clean-room child runs at one too), and gives the grader its threads back."""
    from threadpoolctl import threadpool_info

    import autograder.cleanroom as cleanroom
    from autograder.verification import verify_one

    seen = []
    monkeypatch.setattr(
        cleanroom,
        "verify_notebook",
        lambda *a, **k: seen.append([p["num_threads"] for p in threadpool_info()]),
    )
    before = [p["num_threads"] for p in threadpool_info()]
    assert max(before) == 2
    verify_one("rank_bound", None, 0, {})
    assert seen == [[1] * len(before)]
    assert [p["num_threads"] for p in threadpool_info()] == before


def test_the_clean_room_gets_the_kernels_budget_for_each_notebook():
    """``verification.cleanroom_limits``: the per-notebook allowance plus a cell timeout for the
    answer's top level, the visible tests and each hidden check; bad arguments named."""
    from autograder.sandbox_limits import NOTEBOOK_BASE_S
    from autograder.verification import cleanroom_limits

    for name in EXERCISES:
        got = cleanroom_limits(10, name)
        assert got == {
            "call_s": 8.0,
            "start_s": 10.0,
            "total_s": NOTEBOOK_BASE_S + 10.0 * (2 + len(load(name).HIDDEN)),
        }
    assert cleanroom_limits(0.5, "rank_bound")["call_s"] == 1.0
    for bad in (0, -3, True, "60", None):
        with pytest.raises(ValueError, match="timeout"):
            cleanroom_limits(bad, "rank_bound")
    with pytest.raises(ValueError, match="exercise"):
        cleanroom_limits(10, "no_such_exercise")
