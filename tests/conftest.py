"""Shared fixtures."""

import os
import shutil
import tempfile

import pytest

#: one BLAS/OpenMP thread in every test process and in every process a test starts (they
#: inherit the environment). ``make test`` runs two workers on two cores, and each grading
#: test runs kernels, clean-room children and verifier workers beside its own process: a
#: second BLAS thread per process only spins against the other jobs. On the small problems
#: of the suite (a logistic regression of 150 rows, a 200 x 8 k-NN) OpenBLAS's threads cost
#: far more than they compute: one hints file took 74 s of CPU with two threads and 36 s
#: with one. Tests that need more threads (the thread limits of ``repeval_ref.cli.suite``,
#: the k-NN's restored pools) raise them themselves (:func:`two_threads`); the pooled k-NN
#: paths are tested with their worker count set explicitly. A variable the caller has
#: already set is kept.
ONE_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _var in ONE_THREAD_VARS:
    os.environ.setdefault(_var, "1")


def _worker_tmpdir():
    """Under pytest-xdist, give each worker its own temporary folder.

    Several tests check that grading leaves nothing behind in the temporary folder and no
    sandbox process running. With two workers, the other worker's grading (in flight at
    that moment) would be counted; a folder per worker (``TMPDIR``, which every sandbox
    and clean-room child inherits as a prefix of its own) keeps each worker's checks to
    its own traces (``tests/helpers/worker_traces.py``). A serial run keeps the machine's
    folder.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return None
    base = tempfile.mkdtemp(prefix=f"repeval-tests-{worker}-")
    os.chmod(base, 0o755)  # sandbox users must pass through it to their own folders
    os.environ["TMPDIR"] = os.environ["REPEVAL_WORKER_TMPDIR"] = base
    tempfile.tempdir = None
    return base


WORKER_TMPDIR = _worker_tmpdir()


def _throwaway_gradebooks():
    """Every gradebook a test makes is a throwaway in a temporary folder, like a sandbox's
    scratch copy: SQLite skips the wait for the disk after each commit, in this process
    and in every nbgrader process the tests start (they inherit the environment). The
    course machine's disk made each commit wait about 20 ms, and the graded classes of
    the suite commit many thousands of times. Locking, and so parallel grading, work as
    before; ``tests/test_autograder_sandbox.py`` checks the switch itself with its own
    environment."""
    from autograder.sandbox import SCRATCH_GRADEBOOK_ENV, unsynced_scratch_gradebook

    os.environ[SCRATCH_GRADEBOOK_ENV] = "1"
    unsynced_scratch_gradebook()


_throwaway_gradebooks()


#: the longest test files, longest first (measured on the 2-core machine): pytest-xdist's
#: ``--dist loadfile`` hands out files in collection order, so these start first and the
#: short files fill the gaps at the end (longest-first scheduling) instead of one long file
#: starting last on a worker while the other one idles. The Makefile passes
#: ``--no-loadscope-reorder``: xdist would otherwise sort the files by their number of tests
LONGEST_FIRST = (
    "test_autograder_pipeline.py",
    "test_autograder_dask.py",
    "test_book_browser.py",
    "test_autograder_redteam.py",
    "test_autograder_cleanroom.py",
    "test_autograder_memory_attacks.py",
    "test_autograder_hints_heavy.py",
    "test_datasets_calibration.py",
    "test_autograder_term.py",
    "test_benchmarks.py",
    "test_cli.py",
    "test_zoo.py",
    "test_datasets_transfer.py",
    "test_cli_loop.py",
    "test_autograder_hints.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(
        key=lambda item: rank.get(item.path.name, len(rank))
    )  # stable: the rest keep their order


def pytest_unconfigure(config):
    if WORKER_TMPDIR:
        shutil.rmtree(WORKER_TMPDIR, ignore_errors=True)


@pytest.fixture
def one_torch_thread():
    """Small tensors: one intra-op thread avoids spinning against other jobs on 2 cores."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def two_threads():
    """Two BLAS and two torch threads for the test (the suite runs at one, see
    :data:`ONE_THREAD_VARS`), so that a test of a thread limit sees it change something;
    the counts before are restored after it."""
    import torch
    from threadpoolctl import threadpool_limits

    n = torch.get_num_threads()
    torch.set_num_threads(2)
    with threadpool_limits(2):
        yield
    torch.set_num_threads(n)


@pytest.fixture
def one_blas_thread_for_training():
    """One BLAS thread for the probes of a zoo training test; the training loop's switch to
    deterministic algorithms is undone after it."""
    import torch
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield
    torch.use_deterministic_algorithms(False)


@pytest.fixture(scope="session")
def cleanroom_fork_server():
    """This worker's clean-room fork server (as a grading process starts one): the test
    files that grade many answers in the clean room fork every child from it, as a class
    is graded. ``tests/test_autograder_cleanroom_fork.py`` compares both ways of starting a
    child; the files that do not ask for it start theirs from nothing."""
    from autograder.cleanroom_process import fork_server_ready, start_fork_server

    start_fork_server()
    assert fork_server_ready(), "the clean-room fork server did not start"
    yield
