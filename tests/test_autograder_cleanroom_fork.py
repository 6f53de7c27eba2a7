"""Clean-room children forked from a warm server (autograder/fork_server.py, cleanroom role).

A forked child must be indistinguishable, to the answer and to the grade, from a child
started from nothing: the same environment, working directory, path, program name and
``__main__``; no grader or reference module; its own seeds; the same confinement (user
id, hidden repository, private ``/tmp``, limits); the same exit codes; and the same
verdicts on honest, wrong and cheating answers. Each property is checked on both kinds of
child, in this file's own process.
"""

import json
import os
from pathlib import Path

import pytest
from helpers.tmp_listing import allowed_in_private_tmp
from test_autograder_cleanroom import (
    DYNAMIC_IMPORT,
    IMPORT_REF,
    PATCH,
    RANK_SCIPY,
    RETRIEVAL_LOOPS,
    TRANSFORMER,
    WRONG_KNN,
    WRONG_RANK,
)

from autograder import cleanroom_process as cp
from autograder.build import solution_source
from autograder.checks import CheckTimeout
from autograder.cleanroom import verify_source
from autograder.cleanroom_calls import remote_function
from autograder.exercises import load

#: verdicts graded twice in the clean room: left out of make test-fast (make test and CI
#: run it)
pytestmark = pytest.mark.slow

SEED = 4242
FAST = {"call_s": 5.0, "start_s": 30.0, "cpu_s": 30, "memory_bytes": 2 << 30}

#: what the answer can see of its own process
LOOK = """
import os, sys, random
import numpy as np
import torch

def look():
    return json_text({
        "cwd": sorted(os.listdir(".")),
        "env": sorted(k for k in os.environ),
        "env_values": {k: v for k, v in os.environ.items() if k not in ("HOME", "TMPDIR")},
        "path": [p for p in sys.path],
        "argv0": os.path.basename(sys.argv[0]),
        "argv_len": len(sys.argv),
        "main": sys.modules["__main__"].__file__.rsplit("/", 1)[-1],
        "grader_modules": sorted(m for m in sys.modules if m.split(".")[0] in
                                 ("autograder", "repeval_ref", "repeval_book")
                                 or "confine" in m or "fork_" in m),
        "threads": len(os.listdir("/proc/self/task")),
        "uid_is_grader": os.getuid() == GRADER_UID,
        "repo_visible": os.path.exists(REPO + "/autograder/fork_server.py"),
        "tmp": sorted(os.listdir("/tmp")) if os.getuid() != GRADER_UID else None,
        "hashseed": os.environ.get("PYTHONHASHSEED"),
    })

def seeds():
    return [random.random(), float(np.random.rand()), float(torch.rand(1))]

def json_text(x):
    import json
    return json.dumps(x, sort_keys=True)
"""


@pytest.fixture(params=["spawned", "forked"])
def kind(request, monkeypatch, cleanroom_fork_server):
    """Children started from nothing, or forked from this worker's server."""
    if request.param == "spawned":
        monkeypatch.setenv(cp.FORK_ENV, "0")
    return request.param


def _look_source():
    return LOOK.replace("GRADER_UID", str(os.getuid())).replace(
        "REPO", repr(str(Path(cp.__file__).resolve().parents[1]))
    )


def _verdicts_both_ways(spec, code, monkeypatch):
    """``{kind: [(grade_id, points, max_points, message), ...]}`` of :func:`verify_source` with a
    child started from nothing and with a forked one."""
    got = {}
    for kind in ("spawned", "forked"):
        monkeypatch.setenv(cp.FORK_ENV, "0" if kind == "spawned" else "1")
        got[kind] = [
            (v.grade_id, v.points, v.max_points, v.message)
            for v in verify_source(spec, code, SEED, FAST)
        ]
    return got


def _sandbox(source, kind, limits=None):
    box = cp.Sandbox(source, {**FAST, **(limits or {})})
    assert box.forked == (kind == "forked")
    return box


def test_the_answer_sees_the_same_process_either_way(cleanroom_fork_server, monkeypatch):
    seen = {}
    for kind in ("spawned", "forked"):
        monkeypatch.setenv(cp.FORK_ENV, "0" if kind == "spawned" else "1")
        with _sandbox(_look_source(), kind) as box:
            assert box.started == {
                "seq": 0,
                "ok": True,
                "forbidden": [],
                "noticed": [],
                "compiled": [],
            }
            seen[kind] = json.loads(remote_function(box, "look")())
    assert seen["forked"] == seen["spawned"]
    got = seen["forked"]
    assert (
        got["cwd"] == ["answer.py", "cleanroom_child.py", "codec.py"]
        and got["argv0"] == "cleanroom_child.py"
        and got["argv_len"] == 2
    )
    assert got["main"] == "cleanroom_child.py" and got["grader_modules"] == []
    assert got["threads"] == 1 and got["hashseed"] == "0"
    if os.geteuid() == 0:  # confined: its own user, no repository, an empty /tmp
        assert not got["uid_is_grader"] and not got["repo_visible"]
        assert set(got["tmp"]) <= allowed_in_private_tmp()


def test_every_forked_child_draws_its_own_seeds(cleanroom_fork_server):
    draws = []
    for _ in range(3):
        with _sandbox(_look_source(), "forked") as box:
            draws.append(tuple(remote_function(box, "seeds")()))
    for i in range(3):  # random, NumPy and torch each differ between children
        assert len({d[i] for d in draws}) == 3, draws


def test_exit_codes_and_limits_are_those_of_a_started_child(kind):
    with _sandbox("import os\n\ndef quit():\n    os._exit(7)\n", kind) as box:
        with pytest.raises(RuntimeError, match="exit code 7"):
            remote_function(box, "quit")()
    with _sandbox(
        "def spin():\n    while True:\n        pass\n", kind, {"cpu_s": 1, "call_s": 20.0}
    ) as box:
        with pytest.raises(RuntimeError, match="CPU-time limit"):
            remote_function(box, "spin")()
    # the address-space limit holds in both: 2 GiB leave 256 MB of data room beside the
    # libraries (which a started child maps inside its limit, about 0.9 GB with torch, and a
    # forked one beside it) and refuse 4 GiB; wide margins, as the mapped sizes vary
    src = "import numpy as np\nimport torch\n\ndef fill(n):\n    return float(np.ones(n).sum())\n"
    with _sandbox(src, kind, {"memory_bytes": 2 << 30}) as box:
        assert remote_function(box, "fill")(2**25) == 2.0**25
        with pytest.raises(MemoryError):
            remote_function(box, "fill")(2**29)


def test_a_killed_child_leaves_no_process(kind):
    with _sandbox("import time\n\ndef nap():\n    time.sleep(60)\n", kind, {"call_s": 0.5}) as box:
        pid = box.proc.pid
        with pytest.raises(CheckTimeout):
            remote_function(box, "nap")()
    assert box.proc.returncode == -9  # killed, and reaped by its parent
    assert not Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize(
    "name,code",
    [
        ("rank_bound", RANK_SCIPY),
        ("retrieval_metrics", RETRIEVAL_LOOPS),
        ("knn_classify", None),
        ("linear_cka", None),
    ],
)
def test_the_same_verdicts_on_honest_answers(name, code, cleanroom_fork_server, monkeypatch):
    spec = load(name)
    got = _verdicts_both_ways(spec, code or solution_source(spec), monkeypatch)
    assert got["forked"] == got["spawned"]
    assert all(p == top for _, p, top, _ in got["forked"])  # full marks


@pytest.mark.parametrize(
    "exercise,wrong", [("rank_bound", WRONG_RANK), ("knn_classify", WRONG_KNN)]
)
@pytest.mark.parametrize("attack", ["plain", "transformer", "patch", "import", "dynamic_import"])
def test_the_same_verdicts_on_wrong_and_cheating_answers(
    exercise, wrong, attack, cleanroom_fork_server, monkeypatch
):
    code = {
        "plain": wrong,
        "transformer": TRANSFORMER + "\n" + wrong,
        "patch": wrong + PATCH.format(fn=exercise),
        "import": IMPORT_REF.format(fn=exercise),
        "dynamic_import": DYNAMIC_IMPORT.format(fn=exercise),
    }[attack]
    got = _verdicts_both_ways(load(exercise), code, monkeypatch)
    assert got["forked"] == got["spawned"]
    assert sum(p or 0 for _, p, _, _ in got["forked"]) == 0.0


def test_without_a_ready_server_children_start_from_nothing(monkeypatch):
    monkeypatch.setattr(cp._fork_slot, "server", None)
    assert not cp.fork_server_ready(0)
    with cp.Sandbox("x = 1\n", FAST) as box:
        assert not box.forked and box.started["ok"]
    monkeypatch.setenv(cp.FORK_ENV, "0")
    assert cp.start_fork_server() is None


def test_the_server_refuses_a_request_it_cannot_serve(cleanroom_fork_server):
    server = cp._ready_fork_server()
    assert server is not None
    assert "error" in server.ask({"op": "nothing"})
    assert "error" in server.ask({"op": "spawn"})  # no pipe ends attached
    assert server.exit_code(2**22 + 12345) == -1  # no such process
    with cp.Sandbox("x = 1\n", FAST) as box:  # and serves the next one
        assert box.forked and box.started["ok"]


def test_the_servers_children_are_reaped_with_their_exit_codes():
    from autograder.fork_children import Children
    from autograder.fork_server import load_by_path

    kids = Children()
    pid = os.fork()
    if pid == 0:
        os._exit(5)
    while kids.status(pid) is None:
        pass
    assert kids.status(pid) == 5 and not Path(f"/proc/{pid}").exists()
    assert kids.status(1) == -1  # not a child of this process
    with pytest.raises(ValueError, match="pid"):
        kids.status(0)
    with pytest.raises(ValueError, match="path"):
        load_by_path("x", "/nonexistent.py")


def test_fresh_process_names_a_bad_environment():
    from autograder.fork_children import fresh_process

    with pytest.raises(ValueError, match="env"):
        fresh_process(["PATH=/bin"])


def test_honest_answers_are_noticed_for_nothing(kind):
    """The top level of every exercise's solution in one child (every library they
    import), and, in a forked child, the calls of two whole verifications (scikit-learn
    and torch at work): nothing beyond the room."""
    from autograder.exercises import EXERCISES

    every = "\n\n".join(solution_source(load(name)) for name in EXERCISES)
    with _sandbox(every, kind) as box:
        assert box.started["ok"], box.started
        assert box.noticed == [] and box.started["noticed"] == []
    for name in ("linear_probe_done_right", "frozen_features") if kind == "forked" else ():
        verdicts = verify_source(load(name), solution_source(load(name)), SEED, FAST)
        assert all(v.points == v.max_points for v in verdicts), verdicts
        assert all(v.noticed == [] for v in verdicts), verdicts


#: an answer that tries, one after the other, what the clean room hides or refuses
TRIES = """
import ctypes, importlib.util, os, socket, subprocess

def _try(f):
    try:
        f()
    except BaseException:
        pass

_try(lambda: open({init!r}).read())
_try(lambda: importlib.util.spec_from_file_location("_r", {init!r}).loader.get_data({init!r}))
_try(lambda: open("/proc/self/root" + {init!r}))
_try(lambda: os.listdir("/var/tmp"))
_try(lambda: socket.create_connection(("127.0.0.1", 9), timeout=0.5))
_try(lambda: subprocess.run(["true"]))
_try(lambda: ctypes.CDLL(None).malloc)
for _i in range(100):
    _try(lambda: open("/etc/nothing-%d" % _i))

def rank_bound(H, y, n_classes):
    return 0.0, 0
"""


def test_what_an_answer_tries_beyond_its_room_is_noticed(kind):
    init = str(Path(cp.REPO_ROOT, "repeval_ref", "__init__.py"))
    with _sandbox(TRIES.format(init=init), kind) as box:
        assert box.started["ok"], box.started
        noticed = list(box.noticed)
    assert noticed[:7] == [
        f"open {init}",
        f"open /proc/self/root{init}",
        "list /var/tmp",
        "connect to ('127.0.0.1', 9)",
        "start a process (subprocess.Popen)",
        "load native code through ctypes (ctypes.dlopen None)",
        "load native code through ctypes (ctypes.dlsym 'malloc')",
    ]
    assert len(noticed) == cp.MAX_NOTICES  # the flood is cut short
    assert noticed[7:] == [f"open /etc/nothing-{i}" for i in range(cp.MAX_NOTICES - 7)]
    verdicts = verify_source(load("rank_bound"), TRIES.format(init=init), SEED, FAST)
    assert sum(v.points for v in verdicts) == 0.0
    assert all(v.noticed == verdicts[0].noticed for v in verdicts)
    assert verdicts[0].noticed[:2] == [f"open {init}", f"open /proc/self/root{init}"]


#: an answer that writes files of ``chunk`` bytes into ``where`` until refused
DISK_FILLER = """
import os

def fill(where, chunk, count):
    written = 0
    try:
        for i in range(count):
            with open(os.path.join(where, "fill-%d" % i), "wb") as fh:
                fh.write(b"x" * chunk)
            written += chunk
    except OSError as exc:
        return [written, type(exc).__name__]
    return [written, None]
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the room's disk is a tmpfs mounted as root")
def test_an_answer_writes_no_more_than_its_disk_in_its_room_and_tmp_together(kind):
    """The room and the answer's temporary folders lie on one size-capped tmpfs: files of
    its own in the room, then in ``/tmp`` and ``/dev/shm``, each below the per-file limit,
    are refused once all of them together reach the cap, forked or started alike."""
    cap = 8 << 20
    with _sandbox(DISK_FILLER, kind, {"disk_bytes": cap, "file_bytes": 2 << 20}) as box:
        assert box.started["ok"], box.started
        assert box.disk
        fill = remote_function(box, "fill")
        written = []
        for where in (".", "/tmp", "/dev/shm"):
            got, error = fill(where, 1 << 20, 32)
            assert error == "OSError", (where, got, error)
            written.append(got)
    assert written[0] >= cap // 2  # the room took what the disk had
    assert sum(written) <= cap
