"""Memory property checks against answers that hide their n x n matrix.

Three exercises have a memory check: ``linear_cka`` (no n x n Gram matrix),
``two_nn_id`` (no N x N distance matrix) and ``ridge_loo`` (no n x n hat matrix). Each is
attacked here with answers that compute the right result through the forbidden matrix
and try to keep the grader from seeing it: a plain NumPy array; a buffer that
:mod:`tracemalloc` does not trace (torch's allocator, an anonymous ``mmap``, the C
library's ``malloc`` through ``ctypes``); a buffer it does trace but that NumPy did not
allocate (a ``bytearray``); the matrix in float32; the work done in a thread or in a
forked process; the matrix freed before the function returns, with the trace restarted or
the resident-memory high-water mark reset from inside. Every one is graded the way a
class is (:func:`autograder.cleanroom.verify_source`, the student's code in the clean-room
child) and must lose the memory point and nothing else; the honest reference keeps every
point, also while the machine is busy, with wide margins on both sides of the limit.

Last, the visible-test points: no answer may push a visible cell out of the clean room
(back to the score of nbgrader's kernel, which its code can patch).
"""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from autograder.build import grade_ids, solution_source
from autograder.checks._helpers import RSS_BACKSTOP
from autograder.cleanroom import graded_functions, run_visible, verify_source
from autograder.cleanroom_calls import remote_function
from autograder.cleanroom_process import Sandbox
from autograder.exercises import EXERCISES, load

#: every attack graded end to end in the clean room (tens of seconds): left out of
#: make test-fast
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cleanroom_fork_server")]

SEED = 20240611
FAST = {"call_s": 10.0, "start_s": 30.0, "cpu_s": 60, "memory_bytes": 3 << 30}

#: exercise -> (its memory check, the words of the check's hint naming the mistake)
CHECKS = {
    "linear_cka": ("linear_cka/no_gram_matrix", "n x n Gram matrices"),
    "two_nn_id": ("two_nn_id/no_n_by_n_matrix", "builds all pairwise distances"),
    "ridge_loo": ("ridge_loo/no_hat_matrix", "forms an n x n matrix"),
}

# ------------------------------------------------------------------ the answers
#: each exercise computed through its n x n matrix, written into ``_matrix(n)`` (a float64
#: n x n array from one of the ROUTES below) and never copied: the result is exact, so
#: only the memory property is broken. ``_done()`` runs before the function returns.
THROUGH_THE_MATRIX = {
    "linear_cka": """
def _cka(X, Y):
    Xc = np.asarray(X, dtype=float) - np.mean(X, axis=0)
    Yc = np.asarray(Y, dtype=float) - np.mean(Y, axis=0)
    n = len(Xc)
    K = np.matmul(Xc, Xc.T, out=_matrix(n))          # the n x n Gram matrices
    L = np.matmul(Yc, Yc.T, out=_matrix(n))
    kl, kk, ll = (float(np.einsum("ij,ij->", A, B)) for A, B in ((K, L), (K, K), (L, L)))
    del K, L
    _done()
    return float(kl / np.sqrt(kk * ll))


def linear_cka(X, Y):
    return _run(_cka, X, Y)
""",
    "two_nn_id": """
from scipy.spatial.distance import cdist


def _twonn(X):
    X = np.asarray(X, dtype=float)
    n = len(X)
    D = cdist(X, X, out=_matrix(n))                  # all pairwise distances
    np.fill_diagonal(D, np.inf)
    D.partition(1, axis=1)
    r1, r2 = D[:, 0].copy(), D[:, 1].copy()
    del D
    _done()
    if np.any(r1 == 0):
        raise ValueError("X holds duplicate points")
    return float(n / np.sum(np.log(r2 / r1)))


def two_nn_id(X):
    return _run(_twonn, X)
""",
    "ridge_loo": """
def _loo(train_h, train_y, lams):
    H = np.asarray(train_h, dtype=float)
    y = np.asarray(train_y).astype(int)
    grid = np.asarray(lams, dtype=float)
    n, K = len(H), int(y.max()) + 1
    T = -np.ones((n, K))
    T[np.arange(n), y] = 1.0
    Hc, Tc = H - H.mean(axis=0), T - T.mean(axis=0)
    U, s, _ = np.linalg.svd(Hc, full_matrices=False)
    press = np.empty(len(grid))
    for j, lam in enumerate(grid):
        hat = np.matmul(U * (s**2 / (s**2 + lam)), U.T, out=_matrix(n))   # centred part
        e = (Tc - hat @ Tc) / (1.0 - 1.0 / n - np.diag(hat))[:, None]
        press[j] = np.sum(e**2) / (n * K)
        del hat
    _done()
    return float(grid[int(np.argmin(press))]), press


def ridge_loo(train_h, train_y, lams):
    return _run(_loo, train_h, train_y, lams)
""",
}

#: where the matrix lives: route -> source defining ``_matrix(n)`` (a writable float64
#: n x n array) and ``_done()``
ROUTES = {
    "numpy": """
def _matrix(n):
    return np.empty((n, n))


def _done():
    pass
""",
    "torch": """
import torch


def _matrix(n):                  # torch's allocator: tracemalloc does not see it
    return torch.empty((n, n), dtype=torch.float64).numpy()


def _done():
    pass
""",
    "bytearray": """
def _matrix(n):
    return np.frombuffer(bytearray(8 * n * n), dtype=np.float64).reshape(n, n)


def _done():
    pass
""",
    "mmap": """
import mmap


def _matrix(n):                  # anonymous pages straight from the kernel
    return np.frombuffer(mmap.mmap(-1, 8 * n * n), dtype=np.float64).reshape(n, n)


def _done():
    pass
""",
    "malloc": """
import ctypes

_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_held = []


def _matrix(n):                  # the C library's malloc, outside Python's allocators
    address = _libc.malloc(8 * n * n)
    _held.append(address)
    return np.ctypeslib.as_array((ctypes.c_double * (n * n)).from_address(address)).reshape(n, n)


def _done():
    while _held:
        _libc.free(_held.pop())
""",
    # freed before returning, then the trace restarted: tracemalloc forgets the peak
    "restart_trace": """
import tracemalloc


def _matrix(n):
    return np.empty((n, n))


def _done():
    import gc
    gc.collect()
    if tracemalloc.is_tracing():
        tracemalloc.stop()
        tracemalloc.start()
""",
    # torch's buffer, freed, and the process's resident-memory high-water mark reset
    # from inside: only the grader's samples taken while it worked can see it
    "torch_clear_refs": """
import torch


def _matrix(n):
    return torch.empty((n, n), dtype=torch.float64).numpy()


def _done():
    import gc
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
""",
}

#: how the exercise's function runs: here, in a thread, or in a forked process
RUNNERS = {
    "here": """
def _run(f, *args):
    return f(*args)
""",
    "thread": """
import threading


def _run(f, *args):
    box = {}

    def work():
        try:
            box["out"] = f(*args)
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["out"]
""",
    "fork": """
import os
import pickle


def _run(f, *args):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                 # the child computes, sends the result back, and leaves
        os.close(read)
        try:
            data = pickle.dumps(("out", f(*args)))
        except BaseException as exc:
            data = pickle.dumps(("error", exc))
        with os.fdopen(write, "wb") as fh:
            fh.write(data)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    kind, value = pickle.loads(data)
    if kind == "error":
        raise value
    return value
""",
}

#: the matrix in float32 (half the memory), for each exercise in a way that keeps the
#: result exact: the float32 distances only pick each point's three nearest candidates,
#: the float32 hat matrix only gives the leverages (well within PRESS's tolerance), the
#: float32 Gram matrices only check that neither input is constant
FLOAT32 = {
    "linear_cka": """
def linear_cka(X, Y):
    Xc = np.asarray(X, dtype=float) - np.mean(X, axis=0)
    Yc = np.asarray(Y, dtype=float) - np.mean(Y, axis=0)
    for Z in (Xc, Yc):
        G = Z.astype(np.float32) @ Z.T.astype(np.float32)
        if not np.any(G):
            raise ValueError("a constant representation")
        del G
    cross = np.linalg.norm(Xc.T @ Yc) ** 2
    return float(cross / (np.linalg.norm(Xc.T @ Xc) * np.linalg.norm(Yc.T @ Yc)))
""",
    "two_nn_id": """
def two_nn_id(X):
    X = np.asarray(X, dtype=float)
    Z = X.astype(np.float32)
    D = np.sqrt(np.maximum(np.sum(Z * Z, axis=1)[:, None] + np.sum(Z * Z, axis=1)[None, :]
                           - 2 * Z @ Z.T, 0))
    np.fill_diagonal(D, np.inf)
    k = min(3, len(X) - 1)                 # three candidates (fewer points: all others)
    near = np.argpartition(D, k - 1, axis=1)[:, :k]   # never the point itself (inf)
    del D
    r = np.sort(np.linalg.norm(X[near] - X[:, None, :], axis=2), axis=1)
    r1, r2 = r[:, 0], r[:, 1]
    if np.any(r1 == 0):
        raise ValueError("X holds duplicate points")
    return float(len(X) / np.sum(np.log(r2 / r1)))
""",
    "ridge_loo": """
def ridge_loo(train_h, train_y, lams):
    H = np.asarray(train_h, dtype=float)
    y = np.asarray(train_y).astype(int)
    grid = np.asarray(lams, dtype=float)
    n, K = len(H), int(y.max()) + 1
    T = -np.ones((n, K))
    T[np.arange(n), y] = 1.0
    Hc, Tc = H - H.mean(axis=0), T - T.mean(axis=0)
    U, s, _ = np.linalg.svd(Hc, full_matrices=False)
    press = np.empty(len(grid))
    for j, lam in enumerate(grid):
        shrink = s**2 / (s**2 + lam)
        hat = (U * shrink).astype(np.float32) @ U.T.astype(np.float32)
        leverage = 1.0 / n + np.diag(hat).astype(float)
        del hat
        residual = Tc - U @ (shrink[:, None] * (U.T @ Tc))
        press[j] = np.sum((residual / (1.0 - leverage)[:, None]) ** 2) / (n * K)
    return float(grid[int(np.argmin(press))]), press
""",
}


def _attack(exercise, route, runner):
    return "import numpy as np\n" + ROUTES[route] + RUNNERS[runner] + THROUGH_THE_MATRIX[exercise]


#: (route, runner) pairs graded on every exercise
ATTACKS = [
    ("numpy", "here"),
    ("torch", "here"),
    ("bytearray", "here"),
    ("mmap", "here"),
    ("malloc", "here"),
    ("restart_trace", "here"),
    ("torch_clear_refs", "here"),
    ("numpy", "thread"),
    ("torch", "thread"),
    ("numpy", "fork"),
]
#: attacks that only the child's resident memory shows (tracemalloc sees no matrix)
UNTRACED = {"torch", "mmap", "malloc", "restart_trace", "torch_clear_refs", "fork"}


def _verdicts(exercise, code):
    spec = load(exercise)
    return {v.grade_id: v for v in verify_source(spec, code, SEED, FAST)}, grade_ids(spec)


def _loses_only_the_memory_point(exercise, code):
    check, words = CHECKS[exercise]
    verdicts, ids = _verdicts(exercise, code)
    short = {g: v.message for g, v in verdicts.items() if v.points != v.max_points}
    assert set(short) == {ids[check]}, short
    v = verdicts[ids[check]]
    assert v.points == 0.0 and words in v.message and "MB at once" in v.message, v.message
    return v.message


def _needs_resident_memory(route, runner):
    if (route in UNTRACED or runner == "fork") and not os.access("/proc/self/clear_refs", os.W_OK):
        pytest.skip("the grader may not reset a process's resident-memory high-water mark")


# ------------------------------------------------------------------ the attacks
@pytest.mark.parametrize("exercise", sorted(CHECKS))
@pytest.mark.parametrize("route,runner", ATTACKS, ids=[f"{r}-{w}" for r, w in ATTACKS])
def test_a_hidden_matrix_loses_the_memory_point_and_nothing_else(exercise, route, runner):
    _needs_resident_memory(route, runner)
    _loses_only_the_memory_point(exercise, _attack(exercise, route, runner))


@pytest.mark.parametrize("exercise", sorted(CHECKS))
def test_the_matrix_in_float32_loses_the_memory_point_and_nothing_else(exercise):
    code = solution_source(load(exercise)) + "\n" + FLOAT32[exercise]
    message = _loses_only_the_memory_point(exercise, code)
    # a float32 n x n matrix of 6000 rows is 137 MB: the traced peak says so itself
    assert int(message.split(" MB at once")[0].rsplit(" ", 1)[1]) >= 130, message


# ------------------------------------------------------------------ the honest answers
def _memory_call(exercise, rng):
    """Arguments of the memory check's call (its sizes; the values do not matter)."""
    if exercise == "linear_cka":
        X = rng.normal(size=(6000, 3))
        return (X, X @ rng.normal(size=(3, 2)) + rng.normal(size=(6000, 2)))
    if exercise == "two_nn_id":
        return (rng.normal(size=(6000, 3)),)
    y = rng.integers(0, 3, size=6000)
    y[:3] = np.arange(3)
    return (rng.normal(size=(3, 4))[y] + rng.normal(size=(6000, 4)), y, np.array([0.1, 10.0]))


def _busy(seconds):
    """Keep the machine busy: a process spinning on a core, and a thread of the grader
    that allocates and frees 200 MB buffers (the grader's memory is not the answer's)."""
    spinner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n",
        ]
    )
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            np.ones(25 * 2**20).sum()

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    return spinner, stop, thread


@pytest.mark.parametrize("exercise", sorted(CHECKS))
def test_the_honest_answer_keeps_every_point_on_a_busy_machine(exercise):
    spinner, stop, thread = _busy(120)
    try:
        verdicts, _ = _verdicts(exercise, solution_source(load(exercise)))
    finally:
        stop.set()
        thread.join()
        spinner.kill()
        spinner.wait()
    assert all(v.points == v.max_points for v in verdicts.values()), {
        g: v.message for g, v in verdicts.items() if v.points != v.max_points
    }


def test_the_margins_on_both_sides_of_the_limit_are_wide():
    """What the clean room measures for the memory check's call: the honest answers stay
    far below both the 16 MB limit and the resident backstop, every matrix far above."""
    from autograder.checks._helpers import call_peak

    rng = np.random.default_rng(0)
    for exercise in CHECKS:
        args = _memory_call(exercise, rng)
        honest = solution_source(load(exercise))
        with Sandbox(honest, FAST) as box:
            f = remote_function(box, exercise)
            f.measured_call(*args)  # warm: lazy imports, BLAS buffers
            costs = [f.measured_call(*args)[1] for _ in range(3)]
        for cost in costs:
            assert call_peak(cost) < 4 * 2**20, (exercise, cost)
            assert cost["rss"] is None or cost["rss"] < RSS_BACKSTOP / 2, (exercise, cost)
        with Sandbox(_attack(exercise, "torch", "here"), FAST) as box:
            cost = remote_function(box, exercise).measured_call(*args)[1]
        if cost["rss"] is not None:
            assert call_peak(cost) > 200 * 2**20, (exercise, cost)


# ------------------------------------------------------------------ visible tests
#: wraps every graded function so that, after computing the right result, it leaves a
#: value in each list or dict argument that cannot travel back to the child (a lambda):
#: a visible cell passing that argument again would raise ``Unsupported`` in the grader,
#: and an unverifiable visible cell keeps nbgrader's in-kernel score, which the answer's
#: code can patch
POISON_ARGUMENTS = """
import functools as _functools


def _poison(f):
    @_functools.wraps(f)
    def wrapped(*args, **kwargs):
        out = f(*args, **kwargs)
        for a in list(args) + list(kwargs.values()):
            if type(a) is list:
                a.append(lambda: 0)
            elif type(a) is dict:
                a["_"] = lambda: 0
        return out
    return wrapped
"""


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_no_answer_can_make_its_visible_cell_unverifiable(exercise):
    """Item 5: visible-test points come from the clean room's run of the cell (the
    assertions in the grader's process, the calls in the child), never from the kernel.
    The one way back to the kernel's score is a cell the clean room cannot run; an answer
    that plants values which cannot travel in its arguments does not reach it."""
    spec = load(exercise)
    code = (
        solution_source(spec)
        + POISON_ARGUMENTS
        + "".join(f"\n{f} = _poison({f})\n" for f in graded_functions(spec))
    )
    with Sandbox(code, FAST) as box:
        v = run_visible(spec, box, 120.0)
    assert v.points is not None, v.message


# ------------------------------------------------------------------ the measures
def test_private_memory_counts_what_a_forked_process_writes_not_what_it_inherits():
    from autograder.checks._helpers import private_memory

    with pytest.raises(ValueError, match="pid"):
        private_memory(-3)
    mine = private_memory()
    if mine is None:
        pytest.skip("no /proc/<pid>/smaps_rollup here")
    inherited = np.ones(40 * 2**20 // 8)  # 40 MB this process wrote
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read first, then write
        os.close(read)
        first = private_memory()
        float(inherited.sum())
        np.ones(80 * 2**20 // 8).fill(2.0)  # freed again: not in `after`
        own = np.full(60 * 2**20 // 8, 3.0)
        after = private_memory()
        os.write(write, f"{first} {after} {float(own[0])}".encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        first, after, _ = fh.read().split()
    os.waitpid(pid, 0)
    # reading the inherited 40 MB does not make them private; writing 60 MB does
    assert int(first) < 30 * 2**20 and 55 * 2**20 < int(after) - int(first) < 100 * 2**20
