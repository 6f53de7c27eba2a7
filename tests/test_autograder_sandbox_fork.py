"""Students' nbgrader runs started by the fork server's sandbox role (autograder/fork_server.py,
autograder/fork_role_sandbox.py).

A run started by the server must be the run :class:`autograder.sandbox.Confinement`
starts from nothing: same user, groups, session, limits, mounts, network, environment and
open files, except for the warm kernel server forked beside it, whose socket and process
id it is told in ``$AUTOGRADER_KERNEL_SOCKET``. nbgrader's kernel manager
adopts that server, and the kernels it forks never see the variable. A run past its
wall-clock limit is killed with its kernel server.
"""

import json
import os
import socket
import sys
import time

import pytest
from helpers.tmp_listing import allowed_in_private_tmp

from autograder import sandbox
from autograder.kernel_fork import SOCKET_ENV
from autograder.sandbox import Confinement

#: a grading run of its own per case, and one kernel: left out of make test-fast
pytestmark = pytest.mark.slow

ROOT = os.geteuid() == 0

PROBE = r"""
import json, os, resource, socket, sys
limits = {n: resource.getrlimit(getattr(resource, n)) for n in
          ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_CORE")}
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    machine = "reached"
except OSError:
    machine = "unreachable"
own = socket.socket(); own.bind(("127.0.0.1", 0)); own.listen(1)
socket.create_connection(own.getsockname(), timeout=2).close()
fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
fds = [f for f in fds if os.path.exists(f"/proc/self/fd/{f}")]  # not the listing's own
kinds = {}
for f in fds:
    target = os.readlink(f"/proc/self/fd/{f}")
    kinds[str(f)] = target.split(":")[0] if ":[" in target else target
print("PROBE" + json.dumps({
    "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "own_session": os.getsid(0) == os.getpid(), "cwd": os.getcwd(),
    "listing": sorted(os.listdir(".")), "env": dict(os.environ), "argv": sys.argv[1:],
    "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")),
    "hidden": os.path.exists(HIDDEN), "limits": limits, "machine": machine,
    "fds": fds, "fd_kinds": kinds,
}), flush=True)
"""


def _listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    return srv


@pytest.fixture(scope="module")
def server():
    got = sandbox.start_sandbox_server()
    assert got is not None and got.ready(60), "the sandbox fork server did not start"
    return got


def _top(tmp_path, name):
    top = tmp_path / name
    (top / "course").mkdir(parents=True)
    (top / "course" / "answer.txt").write_text("mine\n")
    os.chmod(tmp_path, 0o755)
    return top


def _probe(tmp_path, name, forked, server, port, hidden, nbgrader=False):
    """What the probe saw in a run started by the server (``forked``) or from nothing; with
    ``nbgrader``, the run is ``python -m nbgrader db student list`` and the probe is the
    course's ``nbgrader_config.py``, which nbgrader executes as it starts (the server runs
    that command line in its child, not executed)."""
    top = _top(tmp_path, name)
    conf = Confinement(str(top), hide=[str(hidden)])
    code = PROBE.replace("PORT", str(port)).replace("HIDDEN", repr(str(hidden / "secret.txt")))
    if nbgrader:
        code = code.replace(
            '"listing": sorted(os.listdir("."))',
            '"listing": sorted(os.listdir(".")), "path0": sys.path[0]',
        )
        (top / "course" / "nbgrader_config.py").write_text(code)
        cmd = [sys.executable, "-m", "nbgrader", "db", "student", "list"]
    else:
        cmd = [sys.executable, "-c", code, "one", "two"]
    conf.own(str(top))
    conf.server = server if forked else None
    # nbgrader runs the ``alembic`` script of its environment to make the gradebook
    env = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin",
        "HOME": str(top),
        "LANG": "C.UTF-8",
    }
    rc, out = conf.run(cmd, str(top / "course"), env, 60)
    line = next((x for x in out.splitlines() if x.startswith("PROBE")), None)
    assert rc == 0 and line, out
    return json.loads(line[len("PROBE") :]), conf


@pytest.mark.parametrize("nbgrader", [False, True], ids=["executed", "nbgrader_in_the_child"])
def test_a_forked_run_is_the_run_started_from_nothing(tmp_path, server, nbgrader):
    hidden = tmp_path / "real-course"
    hidden.mkdir()
    (hidden / "secret.txt").write_text("gradebook")
    srv = _listener()
    try:
        started, _ = _probe(tmp_path, "a", False, server, srv.getsockname()[1], hidden, nbgrader)
        forked, _ = _probe(tmp_path, "b", True, server, srv.getsockname()[1], hidden, nbgrader)
    finally:
        srv.close()
    if nbgrader:  # ``python -m`` puts the working folder first
        assert forked.pop("path0").replace("/b/course", "/a/course") == started.pop("path0")
        assert started["argv"] == ["db", "student", "list"]
    value = forked["env"].pop(SOCKET_ENV)
    sock, pid = (int(x) for x in value.split(","))
    # the only difference: the kernel server's socket, left open for nbgrader
    assert sock in forked["fds"] and forked["fd_kinds"][str(sock)] == "socket"
    # the run's own descriptors, numbered around the socket: compared by kind
    rest = [
        k.replace("/b/course/", "/a/course/")
        for f, k in forked["fd_kinds"].items()
        if int(f) != sock
    ]
    assert sorted(rest) == sorted(started["fd_kinds"].values())
    assert len(forked["fds"]) == len(started["fds"]) + 1
    del forked["fds"], started["fds"], forked["fd_kinds"], started["fd_kinds"]
    assert forked.pop("cwd").replace("/b/course", "/a/course") == started.pop("cwd")
    assert forked["env"].pop("HOME").endswith("/b") and started["env"].pop("HOME").endswith("/a")
    if ROOT:  # each run has a user id of its own
        assert forked.pop("uid") != started.pop("uid")
        for info in (forked, started):
            info.pop("euid"), info.pop("gid")
    assert forked == started
    assert started["own_session"] and started["machine"] == "unreachable"
    assert started["listing"] == ["answer.txt"] + ["nbgrader_config.py"] * nbgrader
    if ROOT:
        # the private /tmp holds only the way back to the folders bound back in it
        assert set(started["tmp"]) <= allowed_in_private_tmp(tmp_path)
        assert started["shm"] == []
        assert not started["hidden"]
        assert started["groups"] == []


def test_the_kernel_server_beside_the_run_is_its_child_in_its_sandbox(tmp_path, server):
    top = _top(tmp_path, "k")
    conf = Confinement(str(top))
    conf.own(str(top))
    conf.server = server
    code = (
        "import os, socket, sys\n"
        "fd, pid = (int(x) for x in os.environ['" + SOCKET_ENV + "'].split(','))\n"
        "status = dict(l.split(':', 1) for l in open(f'/proc/{pid}/status') if ':' in l)\n"
        "print('PPID', status['PPid'].strip() == str(os.getpid()))\n"
        "print('UID', status['Uid'].split()[0] == str(os.getuid()))\n"
        "print('READY', socket.socket(fileno=fd).recv(1 << 16).decode())\n"
    )
    rc, out = conf.run(
        [sys.executable, "-c", code], str(top / "course"), {"PATH": "/usr/bin:/bin"}, 60
    )
    assert rc == 0, out
    assert "PPID True" in out and "UID True" in out, out
    ready = json.loads(out.split("READY", 1)[1].strip().splitlines()[0])
    assert ready["ready"] is True and ready["threads"] == 1
    assert {"numpy", "torch", "ipykernel.kernelapp"} <= set(ready["loaded"])


def test_nbgrader_adopts_the_warm_kernel_server_and_its_kernels_never_see_it(tmp_path, server):
    """A notebook run by the kernel manager nbgrader uses, inside a forked run: the kernel
    is forked by the adopted server (its parent is that server's watcher of it, a fork of
    a fork of the sandbox fork server), and the variable naming the server's socket is gone
    from its environment."""
    top = _top(tmp_path, "nb")
    home = top / "home"
    for d in ("tmp", "runtime", "ipython", "mpl"):
        (home / d).mkdir(parents=True)
    conf = Confinement(str(top))
    conf.own(str(top))
    conf.server = server
    # the kernel's parent is its watcher (outside the kernel's own PID namespace, where
    # the kernel cannot see it): read from the run's side
    code = (
        "import json, nbformat\nfrom nbclient import NotebookClient\n"
        "from autograder import kernel_fork\n"
        'cell = nbformat.v4.new_code_cell("import os\\n'
        "print(os.environ.get('" + SOCKET_ENV + "'))\")\n"
        "nb = nbformat.v4.new_notebook(cells=[cell])\n"
        "client = NotebookClient(nb, timeout=60, kernel_name='python3',\n"
        "                        kernel_manager_class=kernel_fork.ForkKernelManager)\n"
        "with client.setup_kernel():\n"
        "    client.execute_cell(cell, 0)\n"
        "    pid = client.km.provisioner.process.pid\n"
        "    status = dict(l.split(':', 1) for l in open(f'/proc/{pid}/status') if ':' in l)\n"
        "    watcher = status['PPid'].strip()\n"
        "    parent = open(f'/proc/{watcher}/cmdline', 'rb').read().decode(errors='replace')\n"
        "seen = cell.outputs[0]['text'].strip()\n"
        "print('KERNEL' + json.dumps([None if seen == 'None' else seen, parent]))\n"
    )
    env = sandbox._env(str(top / "course"), 30, 1, str(home))
    rc, out = conf.run([sys.executable, "-c", code], str(top / "course"), env, 120)
    assert rc == 0, out
    seen, parent = json.loads(out.split("KERNEL", 1)[1].splitlines()[0])
    assert seen is None
    assert "fork_server.py\x00sandbox\x00" in parent, parent


def test_a_forked_run_past_its_limit_is_killed_with_its_kernel_server(tmp_path, server):
    top = _top(tmp_path, "w")
    conf = Confinement(str(top))
    conf.own(str(top))
    conf.server = server
    code = (
        "import os, time\nprint(os.environ['"
        + SOCKET_ENV
        + "'], flush=True)\ntime.sleep(10 ** 6)\n"
    )
    t0 = time.monotonic()
    rc, out = conf.run(
        [sys.executable, "-c", code], str(top / "course"), {"PATH": "/usr/bin:/bin"}, 3
    )
    assert time.monotonic() - t0 < 30
    assert "wall-clock limit" in out
    pid = int(out.split(",")[1].split()[0])
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}")
    if ROOT:
        from autograder.sandbox_users import uid_processes

        assert not uid_processes(conf.uid)


def test_without_the_server_or_when_it_refuses_a_run_starts_from_nothing(
    tmp_path, server, monkeypatch
):
    class Refusing:
        def spawn(self, request, **pipes):
            return None

    top = _top(tmp_path, "f")
    conf = Confinement(str(top))
    conf.own(str(top))
    conf.server = Refusing()
    rc, out = conf.run(
        [sys.executable, "-c", "import os; print(os.environ.get('" + SOCKET_ENV + "'))"],
        str(top / "course"),
        {"PATH": "/usr/bin:/bin"},
        60,
    )
    assert rc == 0 and out.strip() == "None", out
    monkeypatch.setenv(sandbox.SANDBOX_FORK_ENV, "0")
    assert sandbox._ready_sandbox_server(True, 0) is None
    monkeypatch.setenv(sandbox.SANDBOX_FORK_ENV, "1")
    monkeypatch.setenv(sandbox.KERNEL_FORK_ENV, "0")
    assert sandbox.start_sandbox_server() is None


def test_the_server_refuses_requests_it_cannot_serve(server):
    assert "error" in server.ask({"op": "nothing"})
    assert "error" in server.ask({"op": "spawn"})  # no output pipe attached
    assert "error" in server.ask({"op": "spawn"}, fds=(0, 1))  # two are one too many
    assert server.exit_code(2**22 + 12345) == -1  # no such process
    assert "error" in server.ask(["not", "a", "request"])
    assert "error" in server.ask({"op": "status"})
    assert "error" in server.ask(
        {"op": "spawn", "argv": [], "env": {}, "cwd": "/", "limits": {}}, fds=(0,)
    )


#: the top-level modules that nbgrader's imports bring and a kernel server does not hold
NBGRADER_ONLY = (
    "nbgrader",
    "nbconvert",
    "nbclient",
    "sqlalchemy",
    "alembic",
    "bleach",
    "urllib3",
    "requests",
)


def test_a_kernel_beside_nbgrader_run_in_the_child_holds_none_of_its_imports(tmp_path, server):
    """The server imports nbgrader's modules and runs ``python -m nbgrader`` in its child;
    the kernel server forked beside that run drops them again: a kernel forked from it
    imports none of them, and has none of the warnings filters, import hooks or path
    entries they added. The probe is the course's ``nbgrader_config.py``, which the
    nbgrader run executes; it runs a cell in a kernel of the adopted server."""
    top = _top(tmp_path, "nbk")
    home = top / "home"
    for d in ("tmp", "runtime", "ipython", "mpl"):
        (home / d).mkdir(parents=True)
    cell = (
        "import json, sys, warnings\n"
        f"tops = {NBGRADER_ONLY!r}\n"
        "print('STATE' + json.dumps({\n"
        "    'modules': sorted(m for m in sys.modules if m.split('.')[0] in tops),\n"
        "    'filters': [str(f[2]) for f in warnings.filters\n"
        "                if any(t in str(f[2]) + str(f[3]) for t in tops)],\n"
        "    'hooks': [repr(h) for h in sys.meta_path if 'six' in repr(h)],\n"
        "    'path': [p for p in sys.path if '_vendor' in p]}))\n"
    )
    probe = (  # nbgrader loads the file once per (sub)command: the probe runs once
        "import os\nif not os.environ.get('PROBED'):\n    os.environ['PROBED'] = '1'\n"
        "    exec(compile(PROBE, 'probe', 'exec'))\n"
    )
    body = (
        "import nbformat\nfrom nbclient import NotebookClient\n"
        "from autograder import kernel_fork\n"
        f"cell = nbformat.v4.new_code_cell({cell!r})\n"
        "nb = nbformat.v4.new_notebook(cells=[cell])\n"
        "client = NotebookClient(nb, timeout=60, kernel_name='python3',\n"
        "                        kernel_manager_class=kernel_fork.ForkKernelManager)\n"
        "with client.setup_kernel():\n"
        "    client.execute_cell(cell, 0)\n"
        "    print('ADOPTED', client.km.provisioner.__class__.__name__)\n"
        "print(cell.outputs[0]['text'].strip())\n"
        "import sys\nprint('RUN_HOLDS', 'numpy' in sys.modules, flush=True)\n"
    )
    (top / "course" / "nbgrader_config.py").write_text(f"PROBE = {body!r}\n" + probe)
    conf = Confinement(str(top))
    conf.own(str(top))
    conf.server = server
    env = sandbox._env(str(top / "course"), 30, 1, str(home))
    # (the command itself then fails on the missing gradebook: only the probe matters)
    rc, out = conf.run(
        [sys.executable, "-m", "nbgrader", "db", "student", "list"], str(top / "course"), env, 120
    )
    # the run itself is the server's child, with the kernel server's imports (NumPy): it
    # was not executed
    assert "RUN_HOLDS True" in out, out
    state = json.loads(out.split("STATE", 1)[1].splitlines()[0])
    assert state == {"modules": [], "filters": [], "hooks": [], "path": []}, state
