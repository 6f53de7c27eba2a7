"""The OS-level confinement shared by the sandbox and the clean room (autograder/confine.py,
autograder/sandbox_users.py, autograder/protection.py).

The end-to-end attacks on both are in tests/test_autograder_cleanroom.py; here each part
on its own: user ids, killing a user's processes, what other users reach, the private
/tmp of a child, the limits.
"""

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from autograder import confine, protection, sandbox_users

ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (user ids, mount namespaces)")


def _preexec(uid=None, mounts=None, **limits):
    """The ``preexec_fn`` of a child confined by the specification of ``uid``, ``mounts``
    and the limits ``limits``."""
    return confine.preexec(confine.make_spec(limits=limits, uid=uid, mounts=mounts))


def test_new_uids_are_in_the_sandbox_range():
    uids = {sandbox_users.new_uid() for _ in range(200)}
    assert all(confine.FIRST_UID <= u < confine.FIRST_UID + confine.UID_COUNT for u in uids)
    assert len(uids) > 150


@pytest.mark.parametrize(
    "uid",
    [0, 1000, confine.FIRST_UID - 1, confine.FIRST_UID + confine.UID_COUNT, True, "200001", 2.5e5],
)
def test_no_real_account_can_be_killed_or_become_the_child(uid):
    with pytest.raises(ValueError, match="uid"):
        sandbox_users.kill_uid(uid)
    with pytest.raises(ValueError, match="uid"):
        sandbox_users.uid_processes(uid)
    with pytest.raises(ValueError, match="uid"):
        confine.drop_to(uid)
    with pytest.raises(ValueError, match="uid"):
        _preexec(
            uid=uid,
            cpu_s=1,
            cpu_grace_s=1,
            memory_bytes=1 << 30,
            file_bytes=1 << 20,
            processes=4,
        )


def test_limits_must_be_positive():
    good = dict(
        uid=None,
        cpu_s=10,
        cpu_grace_s=1,
        memory_bytes=1 << 30,
        file_bytes=1 << 20,
        processes=4,
    )
    assert callable(_preexec(**good))
    for name, bad in (
        ("cpu_s", 0),
        ("memory_bytes", -1),
        ("file_bytes", None),
        ("processes", 0),
        ("cpu_grace_s", -1),
    ):
        with pytest.raises(ValueError, match=name):
            _preexec(**{**good, name: bad})
    with pytest.raises(ValueError, match="rounds"):
        sandbox_users.kill_uid(confine.FIRST_UID, rounds=0)
    with pytest.raises(ValueError, match="mode"):
        protection.world_can("/", 0)


def test_limits_apply_to_the_child():
    import json

    start = _preexec(
        uid=None,
        cpu_s=7,
        cpu_grace_s=2,
        memory_bytes=3 << 30,
        file_bytes=5 << 20,
        processes=9,
    )
    code = (
        "import json, os, resource as r\nprint(json.dumps([os.getsid(0) == os.getpid()]"
        " + [r.getrlimit(getattr(r, 'RLIMIT_' + k)) for k in ('CPU', 'AS', 'FSIZE',"
        " 'CORE')]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], preexec_fn=start, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == [True, [7, 9], [3 << 30, 3 << 30], [5 << 20, 5 << 20], [0, 0]]


def test_what_other_users_reach():
    import shutil
    import tempfile
    from pathlib import Path

    top = Path(tempfile.mkdtemp(prefix="autograder-test-reach-", dir="/tmp"))
    closed = top / "closed"
    inner = closed / "inner"
    inner.mkdir(parents=True)
    (inner / "f.txt").write_text("x")
    (top / "g.txt").write_text("x")
    for path, mode in (
        (top, 0o755),
        (inner, 0o755),
        (inner / "f.txt", 0o644),
        (top / "g.txt", 0o600),
        (closed, 0o700),
    ):
        os.chmod(path, mode)
    try:
        assert protection.world_can(top, 0o004) and protection.world_can(top, 0o001)
        assert not protection.world_can(top / "g.txt", 0o004)  # the file itself
        assert not protection.world_can(inner / "f.txt", 0o004)  # a closed folder on the way
        assert not protection.world_can(top / "missing", 0o001)
        assert protection.closed_ancestor(inner / "f.txt") == closed
        assert protection.closed_ancestor(top / "g.txt") is None
    finally:
        os.chmod(closed, 0o755)
        shutil.rmtree(top)


def test_sandbox_python_names_an_interpreter_and_its_site_packages():
    python, site, drop = protection.sandbox_python()
    assert os.path.isfile(python) and os.access(python, os.X_OK)
    assert os.path.isdir(site) and os.path.isdir(os.path.join(site, "numpy"))
    assert drop == (os.geteuid() == 0 and protection.world_can(site, 0o004))


def test_sandbox_python_skips_a_copied_interpreter_whose_library_is_closed(monkeypatch):
    """A venv made with ``--copies`` outside /root holds a world-runnable copy of an
    interpreter whose standard library stays under /root: a sandbox user could start it
    but import nothing, so the system interpreter of the same version is taken."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    exe = os.path.realpath(sys.executable)
    stdlib = protection.sysconfig.get_paths()["stdlib"]
    closed = {stdlib}
    monkeypatch.setattr(protection, "world_can", lambda path, mode: path not in closed)
    python, _, drop = protection.sandbox_python()
    assert python != exe and drop
    closed.clear()
    assert protection.sandbox_python()[0] == exe


@pytest.mark.slow
@ROOT
def test_kill_uid_leaves_no_process_of_that_user():
    uid = sandbox_users.new_uid()
    start = _preexec(
        uid=uid,
        cpu_s=30,
        cpu_grace_s=1,
        memory_bytes=1 << 30,
        file_bytes=1 << 20,
        processes=8,
    )
    # the child leaves a grandchild in a session of its own and exits: only its user id
    # still finds the grandchild
    code = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
        "else:\n    time.sleep(0.5)\n"
    )
    python = protection.sandbox_python()[0]  # one the sandbox user may run
    proc = subprocess.run([python, "-I", "-S", "-c", code], preexec_fn=start, cwd="/", timeout=60)
    assert proc.returncode == 0
    assert len(sandbox_users.uid_processes(uid)) == 1
    assert sandbox_users.kill_uid(uid)
    assert sandbox_users.uid_processes(uid) == []


@ROOT
def test_a_zombie_is_not_a_process_left_to_kill():
    """A sandboxed process that has ended but is not yet collected by its parent (a
    zombie) is not listed, and kill_uid returns at once; a living one is listed."""

    uid = sandbox_users.new_uid()
    start = _preexec(
        uid=uid,
        cpu_s=30,
        cpu_grace_s=1,
        memory_bytes=1 << 30,
        file_bytes=1 << 20,
        processes=8,
    )
    python = protection.sandbox_python()[0]
    proc = subprocess.Popen(
        [python, "-I", "-S", "-c", "import time; time.sleep(60)"], preexec_fn=start, cwd="/"
    )
    try:
        assert sandbox_users.uid_processes(uid) == [proc.pid]
        os.kill(proc.pid, 9)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # not collected: a zombie
            with open(f"/proc/{proc.pid}/status") as fh:
                if any(line.split()[1] == "Z" for line in fh if line.startswith("State:")):
                    break
            time.sleep(0.01)
        else:
            pytest.fail("the killed process did not become a zombie")
        assert sandbox_users.uid_processes(uid) == []
        t0 = time.monotonic()
        assert sandbox_users.kill_uid(uid)
        assert time.monotonic() - t0 < 0.5  # no rounds waited out
    finally:
        proc.kill()
        proc.wait()


@ROOT
def test_private_tmp_hides_the_machines_tmp_but_keeps_what_the_child_needs():
    import tempfile

    keep = tempfile.mkdtemp(prefix="autograder-test-keep-", dir="/tmp")
    marker = tempfile.mkdtemp(prefix="autograder-test-hidden-", dir="/tmp")
    try:
        pathlib.Path(keep, "needed.txt").write_text("yes")
        os.chmod(keep, 0o777)  # only the read-only bind mount keeps the child out
        os.chmod(marker, 0o755)  # visible to the child but for its private /tmp
        uid = sandbox_users.new_uid()
        start = _preexec(
            uid=uid,
            mounts=protection.cleanroom_mounts(1 << 20, keep=(keep,)),
            cpu_s=30,
            cpu_grace_s=1,
            memory_bytes=2 << 30,
            file_bytes=1 << 20,
            processes=8,
        )
        code = (
            f"import os\nprint(open({os.path.join(keep, 'needed.txt')!r}).read(),"
            f" os.path.exists({marker!r}), os.getuid())\n"
            f"try:\n    open({os.path.join(keep, 'new.txt')!r}, 'w')\n"
            "except OSError:\n    print('read-only')\n"
        )
        python = protection.sandbox_python()[0]  # one the sandbox user may run
        out = subprocess.run(
            [python, "-I", "-S", "-c", code],
            preexec_fn=start,
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        assert out.stdout.split() == ["yes", "False", str(uid), "read-only"], out.stderr
        assert os.path.isdir(marker) and not os.path.exists(os.path.join(keep, "new.txt"))
        sandbox_users.kill_uid(uid)
    finally:
        for d in (keep, marker):
            subprocess.run(["rm", "-rf", d], check=False)


#: what a confined process reports of itself: working folder, own session, user, limits
SELF_REPORT = (
    "import json, os, resource as r\n"
    "print(json.dumps([os.getcwd(), os.getsid(0) == os.getpid(), os.getuid()]"
    " + [list(r.getrlimit(getattr(r, 'RLIMIT_' + k))) for k in ('CPU', 'AS', 'FSIZE', 'CORE',"
    " 'NPROC')]))"
)


def test_one_specification_confines_a_started_and_a_forked_child_alike(tmp_path):
    """The same specification, applied between fork and exec (``preexec``) and in a child
    that runs on without exec (``apply(forked=True)``, as the fork server's children do),
    gives the same working folder, session, user id and limits; as root both run under
    the sandbox user."""
    uid = sandbox_users.new_uid() if os.geteuid() == 0 else None
    os.chmod(tmp_path, 0o755)
    spec = confine.make_spec(
        limits=dict(cpu_s=7, cpu_grace_s=2, memory_bytes=3 << 30, file_bytes=5 << 20, processes=9),
        uid=uid,
        cwd=str(tmp_path),
    )
    assert json.loads(json.dumps(spec)) == spec  # it travels to the fork server as JSON
    python = protection.sandbox_python()[0]
    started = subprocess.run(
        [python, "-I", "-S", "-c", SELF_REPORT],
        preexec_fn=confine.preexec(spec),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked child
        try:
            os.close(read)
            os.dup2(write, 1)
            confine.apply(spec, forked=True)
            os.execv(python, [python, "-I", "-S", "-c", SELF_REPORT])
        finally:
            os._exit(1)
    os.close(write)
    with os.fdopen(read) as fh:
        forked = fh.read()
    os.waitpid(pid, 0)
    assert json.loads(forked) == json.loads(started)
    cwd, own_session, user, cpu, space, size, core, nproc = json.loads(started)
    assert cwd == str(tmp_path) and own_session and cpu == [7, 9] and space == [3 << 30] * 2
    assert size == [5 << 20] * 2 and core == [0, 0]
    assert user == (os.getuid() if uid is None else uid)
    assert uid is None or nproc == [9, 9]
    with pytest.raises(ValueError, match="spec"):
        confine.apply({"uid": None})
    with pytest.raises(ValueError, match="mounts"):
        confine.make_spec(limits=spec["limits"], mounts={"tmp_bytes": 1})
    if uid is not None:
        sandbox_users.kill_uid(uid)
