"""Kernels forked from a warm process behave as kernels started from nothing
(autograder.kernel_fork): same working directory, environment, arguments, path and
``__main__``; fresh random seeds; none of the grader's modules; interrupts, crashes and
the end of the server handled as for an ordinary kernel; and a fallback whenever the
server cannot fork."""

import os
import time

import pytest
from jupyter_client import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_code_cell, new_notebook

from autograder import kernel_fork, protection, sandbox
from autograder.fork_client import ForkServer
from autograder.settings import KERNEL_LIMITS

PROBE = """\
import json, os, sys
print(json.dumps({
    "cwd": os.getcwd(), "marker": os.environ.get("KERNEL_FORK_MARKER"),
    "path0": sys.path[0] if sys.path[0] else os.getcwd(), "main": sys.modules["__main__"].__name__,
    "grader": sorted(m for m in sys.modules if m.split(".")[0] in ("autograder", "repeval_ref")),
    "numpy_loaded": "numpy" in sys.modules, "pid": os.getpid(), "ppid": os.getppid(),
    "sid": os.getsid(0),
}))
"""


def _start(mp):
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        mp.setenv(var, "1")
    mp.setenv("KERNEL_FORK_MARKER", "from-the-grader")
    mp.setattr(kernel_fork, "_server", None)
    server = kernel_fork.start_server()
    assert server is not None and server.ready(120.0)
    return server


def _stop(server):
    server.close()


@pytest.fixture(scope="module")
def warm():
    """One fork server started from an environment where forking is safe (one thread:
    BLAS pools of one), as the grading sandbox's environment is."""
    with pytest.MonkeyPatch.context() as mp:
        server = _start(mp)
        yield server
        _stop(server)


def _run(nb, cwd, manager=kernel_fork.ForkKernelManager, **kw):
    client = NotebookClient(
        nb,
        timeout=kw.pop("timeout", 60),
        kernel_name="python3",
        kernel_manager_class=manager,
        resources={"metadata": {"path": str(cwd)}},
        **kw,
    )
    kinds = []
    with client.setup_kernel():
        kinds.append(type(client.km.provisioner.process).__name__)
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
    return kinds[0]


def _probe(nb):
    import json

    out = "".join(o.get("text", "") for o in nb.cells[0].outputs if o.output_type == "stream")
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_forked_kernel_sees_what_a_fresh_kernel_sees(warm, tmp_path):
    forked, fresh = (
        new_notebook(cells=[new_code_cell(PROBE)]),
        new_notebook(cells=[new_code_cell(PROBE)]),
    )
    assert _run(forked, tmp_path) == "ForkedProcess"
    assert _run(fresh, tmp_path, manager=AsyncKernelManager) == "Popen"
    a, b = _probe(forked), _probe(fresh)
    for key in ("cwd", "marker", "path0", "main", "grader"):
        assert a[key] == b[key], key
    assert a["cwd"] == str(tmp_path) and a["marker"] == "from-the-grader"
    assert a["grader"] == []  # nothing of the grader or the reference rides along
    assert a["numpy_loaded"]  # ... only the libraries' import state
    assert a["sid"] == a["pid"]  # a session of its own
    if protection.kernel_namespaces_allowed():  # process 1 of its PID namespace, its parent outside
        assert (a["pid"], a["ppid"]) == (1, 0)
    else:  # its watcher, a child of the server
        assert a["ppid"] != warm.proc.pid


#: what a graded submission's kernel tries to read of the grader and the reference
READS = """\
import json, os
from pathlib import Path
got = {}
for rel in ("repeval_ref/knn.py", "autograder/checks/knn_classify.py",
            "solutions/knn/knn_classify.ipynb", "pyproject.toml"):
    try:
        got[rel] = len((Path(ROOT) / rel).read_bytes())
    except OSError as exc:
        got[rel] = type(exc).__name__
try:
    import repeval_ref
    got["import"] = "imported"
except ImportError as exc:
    got["import"] = str(exc)
from autograder.checks import grade
got["grade"] = grade("knn_classify/ties", "knn_classify")
import sklearn.svm  # read from the interpreter's packages, which stay readable
got["sklearn"] = sklearn.svm.__name__
print(json.dumps(got))
"""


@pytest.mark.skipif(
    not protection.kernel_namespaces_allowed(),
    reason="the kernels' namespaces are refused here (a named gap)",
)
def test_a_graded_submissions_kernel_reads_nothing_of_the_reference_or_the_grader(
    warm, tmp_path, monkeypatch
):
    """With ``KERNEL_ENV`` (set by the sandbox), the kernel sees the repository and the
    packages ``autograder``, ``repeval_ref`` and ``repeval_book`` as empty folders but for
    the stand-ins of :func:`autograder.checks.kernel_stub_files`; the same probe in an
    ordinary forked kernel reads them (the control)."""
    from autograder import REPO_ROOT
    from autograder.checks import KERNEL_ENV, KERNEL_NOTE

    code = READS.replace("ROOT", repr(str(REPO_ROOT)))
    plain = new_notebook(cells=[new_code_cell(code)])
    _run(plain, tmp_path)
    seen = _probe(plain)
    assert isinstance(seen["repeval_ref/knn.py"], int) and seen["import"] == "imported"
    monkeypatch.setenv(KERNEL_ENV, "1")
    graded = new_notebook(cells=[new_code_cell(code)])
    assert _run(graded, tmp_path) == "ForkedProcess"
    got = _probe(graded)
    for rel in (
        "repeval_ref/knn.py",
        "autograder/checks/knn_classify.py",
        "solutions/knn/knn_classify.ipynb",
        "pyproject.toml",
    ):
        assert got[rel] == "FileNotFoundError", (rel, got)
    assert got["import"] == "the reference package cannot be read while a submission is graded"
    assert got["grade"] == 0.0 and got["sklearn"] == "sklearn.svm"
    printed = "".join(o.get("text", "") for o in graded.cells[0].outputs)
    assert KERNEL_NOTE in printed


def test_each_fork_draws_its_own_seeds(warm, tmp_path):
    code = "import numpy as np, random\nprint(np.random.rand(), random.random())"
    draws = set()
    for _ in range(2):
        nb = new_notebook(cells=[new_code_cell(code)])
        _run(nb, tmp_path)
        draws.add(nb.cells[0].outputs[0]["text"])
    assert len(draws) == 2


@pytest.mark.slow
def test_a_timeout_interrupts_the_forked_kernel_and_the_next_cell_runs(warm, tmp_path):
    nb = new_notebook(
        cells=[
            new_code_cell("import time\nwhile True:\n    time.sleep(0.1)"),
            new_code_cell("print('after')"),
        ]
    )
    start = time.monotonic()
    _run(
        nb,
        tmp_path,
        timeout=3,
        interrupt_on_timeout=True,
        allow_errors=True,
        error_on_timeout={"ename": "CellTimeoutError", "evalue": "", "traceback": []},
    )
    assert time.monotonic() - start < 30
    assert nb.cells[1].outputs[0]["text"] == "after\n"


def test_a_crashing_answer_is_a_dead_kernel(warm, tmp_path):
    nb = new_notebook(cells=[new_code_cell("import os\nos._exit(3)")])
    with pytest.raises(DeadKernelError):
        _run(nb, tmp_path)


def _alive(pid):
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_kernels_end_with_their_server(monkeypatch, tmp_path):
    server = _start(monkeypatch)
    nb = new_notebook(cells=[new_code_cell("import os\nprint(os.getpid())")])
    client = NotebookClient(
        nb, timeout=60, kernel_name="python3", kernel_manager_class=kernel_fork.ForkKernelManager
    )
    with client.setup_kernel():
        client.execute_cell(nb.cells[0], 0)
        pid = client.km.provisioner.process.pid  # as this process sees it
        server.proc.kill()
        server.proc.wait(10)
        deadline = time.monotonic() + 20
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        gone = not _alive(pid)
        assert gone
    _stop(server)


def test_without_a_ready_server_the_kernel_starts_as_usual(monkeypatch, tmp_path):
    monkeypatch.setenv(kernel_fork.ENV, "0")
    monkeypatch.setattr(kernel_fork, "_server", None)
    nb = new_notebook(cells=[new_code_cell("print(1)")])
    assert _run(nb, tmp_path) == "Popen"
    assert nb.cells[0].outputs[0]["text"] == "1\n"


def test_a_kernel_waits_for_the_server_then_falls_back(monkeypatch):
    """A kernel asked for while the server still imports waits for it (the imports a
    kernel started from nothing would repeat cost more), at most READY_WAIT_S seconds;
    a server not ready by then, or one that failed, means the usual launch."""
    waits = []

    class Slow:
        def __init__(self, after):
            self.after = after

        def ready(self, timeout=0.0):
            waits.append(timeout)
            if self.after is None:
                raise OSError("the kernel fork server did not start")
            return self.after <= timeout

    for after, expect in ((5.0, True), (kernel_fork.READY_WAIT_S + 1, False), (None, False)):
        server = Slow(after)
        monkeypatch.setattr(kernel_fork, "start_server", lambda s=server: s)
        assert (kernel_fork._ready_server() is server) is expect
    assert waits == [kernel_fork.READY_WAIT_S] * 3


@pytest.mark.slow
def test_a_server_holding_threads_refuses_to_fork(tmp_path):
    """BLAS thread pools left on (no OPENBLAS_NUM_THREADS=1): the server answers with an
    error, and the provisioner then launches the kernel itself."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    }
    options = {"preload": True, "tmp_bytes": KERNEL_LIMITS["tmp_bytes"]}
    server = ForkServer.start("kernel", options, "a kernel server", env=lambda _: env)
    try:
        with pytest.raises(OSError, match="cannot fork"):
            if server.ready(120.0):
                pytest.skip("the BLAS libraries started no thread here")
        assert "error" in server.ask({"op": "spawn", "argv": [], "env": {}, "cwd": "/"})
        assert server.spawn({"argv": [], "env": {}, "cwd": "/"}) is None
    finally:
        server.close()


def test_the_sandbox_names_the_switch_kernel_fork_reads():
    assert sandbox.KERNEL_FORK_ENV == kernel_fork.ENV
