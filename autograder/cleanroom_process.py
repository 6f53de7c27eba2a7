"""One clean-room process holding one answer, and stand-ins that call its functions.

:class:`Sandbox` writes the answer's source, alone with a copy of the child program
(:mod:`autograder.cleanroom_child`) and of the codec (:mod:`autograder.codec`), into an
empty temporary folder (the *room*) and starts ``python -I -S cleanroom_child.py SITE``
there with a minimal environment:

* ``-I -S``: no user site, no ``.pth`` files, so the project's editable install of
  ``repeval_ref`` and ``autograder`` is not on the path; the venv's site-packages is
  appended by the child for NumPy, SciPy, scikit-learn and torch, after its import hook
  that refuses both packages;
* one confinement specification (:func:`autograder.confine.make_spec`), applied the same
  way whether the child is forked by the fork server or started from nothing: CPU-time,
  address-space and file-size limits (:data:`DEFAULT_LIMITS`) and a wall-clock limit per
  call; when the grader runs as root, also a user id of its own that owns only the room
  (with a process-count limit), the repository and the grader's packages covered, no
  network, and a room and temporary folders (``/tmp``, ``/dev/shm``) that lie on one
  size-capped tmpfs (``DEFAULT_LIMITS["disk_bytes"]``, :mod:`autograder.sandbox_disk`), so
  all the child writes counts against one cap; every process left under that id is killed
  afterwards; where the machine offers cgroups, a memory and a pids cgroup of its own
  (:mod:`autograder.cgroups`) bound the child and everything it starts together, and are
  emptied and removed with it. The private ``/tmp`` covers the room itself when it lies
  there, so the program is then named through the child's own working directory
  (``/proc/self/cwd/cleanroom_child.py``), which stays the room.

:func:`remote_function` (:mod:`autograder.cleanroom_calls`) is the stand-in a check calls
instead of the student's function.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from . import REPO_ROOT, cgroups, cleanroom_child, codec, confine, protection, wire
from .fork_client import ForkServer, ServerSlot
from .sandbox_disk import make_tmp_folders, mount_disk, unmount_disk
from .sandbox_users import descendants, kill_uid, new_uid, owned_by
from .settings import CLEANROOM_FORK_ENV, CLEANROOM_LIMITS

MAX_NOTICES = cleanroom_child.MAX_NOTICES
MAX_COMPILED = cleanroom_child.MAX_COMPILED

__all__ = [
    "DEFAULT_LIMITS",
    "FORK_ENV",
    "Sandbox",
    "fork_server_ready",
    "start_fork_server",
]

#: limits of one clean-room process (one exercise of one student):
#: :data:`autograder.settings.CLEANROOM_LIMITS`
DEFAULT_LIMITS = CLEANROOM_LIMITS
#: how often the child's resident memory is sampled during a measured call (seconds)
WATCH_INTERVAL_S = 0.002
#: how often the other processes of the sandbox (those the child started) are looked for
#: and their memory read during a measured call (seconds): a scan of ``/proc`` costs
#: one to two milliseconds of the grader's time
OTHERS_INTERVAL_S = 0.02

#: environment variable: "0" starts every child from nothing even where a fork server runs
#: (:data:`autograder.settings.CLEANROOM_FORK_ENV`)
FORK_ENV = CLEANROOM_FORK_ENV
#: the longest a new child waits for a started fork server's imports before it is
#: started from nothing (the server started with the grading, so it is usually ready)
FORK_READY_WAIT_S = 30.0

#: the files of the child's program copied into every room (read-only)
_PROGRAM = (Path(cleanroom_child.__file__), Path(codec.__file__))
#: the child's program inside the room, named through the child's working directory
_PROGRAM_VIA_CWD = "/proc/self/cwd/" + _PROGRAM[0].name


def _hidden_folders(site, hide=()):
    """What the clean room covers, as root: ``(cover, packages)``.

    ``cover``: the repository (its solutions, the reference package and the grader, unless
    the "repository" is the site-packages folder of an installed copy) and ``hide``;
    ``packages``: the folders of ``repeval_ref``, ``autograder`` and ``repeval_book``
    wherever they are installed, covered after the site-packages is bound back. An answer
    then finds no file of the reference to load by path, whatever it tries."""
    site = os.path.realpath(site)
    repo, packages = protection.reference_folders(REPO_ROOT)
    cover = [os.path.realpath(h) for h in hide]
    if repo is not None and repo != site:
        cover.append(repo)
    return sorted(set(c for c in cover if os.path.isdir(c))), packages


class Sandbox:
    """One clean-room process holding one answer; call it through :meth:`request`.

    Parameters
    ----------
    source : str
        The answer's Python source (``answer.py`` in the room).
    limits : dict, optional
        Over :data:`DEFAULT_LIMITS`.
    hide : sequence of str, optional
        More folders the child must not see (the course directory), covered as root
        like the repository (:func:`_hidden_folders`).

    Attributes
    ----------
    started : dict
        The child's first message: ``{"ok": True}``, ``{"error": ...}`` (the answer's top
        level raised) or ``{"dead": reason}``.
    forbidden : list of str
        Forbidden imports the answer attempted so far.
    noticed : list of str
        What the answer tried beyond its room so far (paths it opened or listed outside
        it, connections, processes, native code), as the child's audit hook
        (:class:`autograder.cleanroom_child.Watch`) noted it; at most
        :data:`~autograder.cleanroom_child.MAX_NOTICES`.
    compiled : list of dict
        The code the answer compiled at run time, as the child's audit hook recorded it
        (``{"how", "source"}``, at most :data:`MAX_COMPILED`).
    dead : str or None
        Why the child is gone (it is then closed).
    violation : str or None
        Set with ``dead`` when the child sent a message the protocol does not allow
        (:mod:`autograder.wire`): the answer wrote into the channel, so nothing it
        reported is trusted and the notebook scores 0.
    unsupported : str or None
        Set by :func:`remote_function` when an argument could not travel.
    """

    def __init__(self, source, limits=None, hide=()):
        if not isinstance(source, str):
            raise ValueError(f"source must be Python source text, got {type(source).__name__}")
        self.limits = {**DEFAULT_LIMITS, **(limits or {})}
        lim = self.limits
        self.deadline = time.monotonic() + float(lim["total_s"])
        python, site, drop = protection.sandbox_python()
        self.uid = new_uid() if drop else None
        self.libc = confine.load_libc() if os.geteuid() == 0 else None
        #: the room's disk: one size-capped tmpfs for all the child writes (as root)
        self.top = tempfile.mkdtemp(prefix="autograder-cleanroom-")
        self.disk = self.libc is not None and mount_disk(self.libc, self.top, lim["disk_bytes"])
        self.cgroup = None
        try:
            self._start(source, hide, python, site)
        except BaseException:
            self._release()
            raise
        os.set_blocking(self.proc.stdin.fileno(), False)
        self._inbox = bytearray()
        self._pending = False
        self._seq = 0
        self._watched = 0
        self._watch_others(None)
        self.forbidden = []
        self.noticed = []
        self.compiled = []
        self.dead = None
        self.violation = None
        self.unsupported = None
        self.started = self._receive(self.limits["start_s"])

    def _start(self, source, hide, python, site):
        """Make the room on the disk, the cgroup and the specification, then fork the
        child from the warm server or start it from nothing."""
        self.dir = Path(self.top, "room")
        self.dir.mkdir(mode=0o700)
        make_tmp_folders(self.top)
        (self.dir / "answer.py").write_text(source)
        for path in _PROGRAM:
            shutil.copyfile(path, self.dir / path.name)
            os.chmod(self.dir / path.name, 0o444)
        if self.uid is not None:
            for p in (self.dir, self.dir / "answer.py"):
                os.chown(p, self.uid, self.uid)
        env, lim = _child_env(self.dir), self.limits
        #: the child's cgroup (:mod:`autograder.cgroups`), joined before it runs anything
        self.cgroup = cgroups.make(
            int(lim["cgroup_memory_bytes"]), int(lim["processes"]), "cleanroom"
        )
        cover, packages = _hidden_folders(site, hide)
        mounts = None
        if self.uid is not None and self.libc is not None:
            mounts = protection.cleanroom_mounts(
                lim["file_bytes"],
                keep=(site, os.path.dirname(python)),
                cover=cover,
                hide=packages,
                tmp_from=self.top if self.disk else None,
            )
        spec = confine.make_spec(
            limits={k: lim[k] for k in confine.LIMIT_KEYS},
            uid=self.uid,
            cgroups=self.cgroup.join_paths if self.cgroup is not None else (),
            mounts=mounts,
            cwd=str(self.dir),
        )
        program = _PROGRAM_VIA_CWD if mounts is not None else str(self.dir / _PROGRAM[0].name)
        server = _ready_fork_server()
        self.proc = None
        if server is not None:
            request = {"confinement": spec, "env": env, "program": program}
            self.proc = server.spawn(request, stdin=True, stdout=True)
        #: whether the child was forked from the warm server (else started from nothing)
        self.forked = self.proc is not None
        if self.proc is None:
            self.proc = subprocess.Popen(
                [python, "-I", "-S", program, site],
                cwd=str(self.dir),
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
                preexec_fn=confine.preexec(spec),
                close_fds=True,
            )

    def _remaining(self, seconds):
        """``seconds``, cut to what is left of the whole exercise's wall-clock budget."""
        return max(0.0, min(float(seconds), self.deadline - time.monotonic()))

    def _over_budget(self):
        why = (
            f"the grading of this exercise went past its wall-clock limit of "
            f"{self.limits['total_s']:g} s (your code kept it busy), so it was stopped"
        )
        self.dead = why
        self.close()
        return {"dead": why}

    def _receive(self, seconds):
        """The child's first message, or a dict ``{"dead": reason}``.

        The pipe is read in pieces with a deadline (``seconds``, and never past the whole
        exercise's budget ``limits["total_s"]``), so a child that writes half a line, or
        floods the pipe, cannot keep the grader waiting or fill its memory (at most
        :data:`autograder.wire.REPLY_BASE_BYTES` are taken for this message)."""
        if self.dead:
            return {"dead": self.dead}
        return self._receive_until(
            *self._window(seconds), seconds, cap=wire.reply_cap(0), check=wire.start_message
        )

    def _window(self, seconds):
        """``(end, budget_cut)``: when a wait of ``seconds`` ends, and whether the whole
        exercise's budget ends it first."""
        now = time.monotonic()
        return now + self._remaining(seconds), self.deadline - now < seconds

    def _violate(self, why):
        """End the child for a message the protocol does not allow (``why``)."""
        self.violation = str(why)
        self.dead = (
            f"the grading process sent a message that breaks the clean room's "
            f"protocol ({self.violation}): an answer's code can only do that by "
            "writing into the grader's channel"
        )
        self.close()
        return {"dead": self.dead, "violation": self.violation}

    def _receive_until(self, end, budget_cut, seconds, watch=False, cap=None, check=None):
        """The next message, waiting until ``end`` at most; with ``watch``, the child's
        resident memory is sampled every :data:`WATCH_INTERVAL_S` meanwhile.

        At most ``cap`` bytes are taken (:func:`autograder.wire.reply_cap`); the line is
        read by :func:`autograder.wire.parse` and checked by ``check`` (one of the
        schemas of :mod:`autograder.wire`); bytes after it (a second message for one
        request) break the protocol too."""
        cap = wire.reply_cap(0) if cap is None else int(cap)
        fd = self.proc.stdout.fileno()
        inbox = self._inbox
        scanned = 0
        while inbox.find(b"\n", scanned) < 0:
            scanned = len(inbox)
            if len(inbox) > cap:
                return self._violate(
                    f"a message longer than the {cap >> 10} KiB this request allows"
                )
            if watch:
                self._sample_rss()
            left = end - time.monotonic()
            if left <= 0:
                if budget_cut:
                    return self._over_budget()
                why = (
                    f"your code did not return within {seconds:g} s (an infinite loop, "
                    "or far too slow for these small inputs)"
                )
                self.dead = why
                self.close()
                return {"dead": why}
            ready, _, _ = select.select(
                [fd], [], [], min(left, WATCH_INTERVAL_S) if watch else left
            )
            if not ready:
                continue
            chunk = os.read(fd, max(1, min(1 << 20, cap + 1 - len(inbox))))
            if not chunk:
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                code = self.proc.returncode
                why = (
                    f"your code ended the grading process (exit code {code}"
                    + (
                        ", killed: CPU-time limit"
                        if code == -signal.SIGXCPU
                        else ", killed by a signal"
                        if code and code < 0
                        else ""
                    )
                    + ")"
                )
                self.dead = why
                self.close()
                return {"dead": why}
            inbox += chunk
        cut = inbox.find(b"\n")
        line, rest = bytes(inbox[:cut]), bytes(inbox[cut + 1 :])
        inbox.clear()
        if rest:
            return self._violate("more than one message for one request")
        try:
            msg = wire.parse(line, cap)
            if check is not None:
                msg = check(msg)
        except wire.ProtocolError as exc:
            return self._violate(str(exc))
        _gather(self.forbidden, msg["forbidden"], limit=MAX_NOTICES)
        _gather(self.noticed, msg["noticed"], limit=MAX_NOTICES)
        self.compiled.extend(msg["compiled"][: max(0, MAX_COMPILED - len(self.compiled))])
        return msg

    def request(self, req, seconds, watch=False):
        """Send the request ``req`` (a JSON-ready dict: a call, or ``{"op": "end"}``) and
        return the child's reply, checked (:mod:`autograder.wire`), or ``{"dead": reason}``
        when it is gone, breaks the protocol or does not answer within ``seconds``.
        With ``watch``, the child's resident memory is sampled while it works (read
        back by :meth:`peak_rss`).

        Each request carries the next sequence number, which its reply must repeat, and
        the most bytes its reply may take (:func:`autograder.wire.reply_cap`). The request
        is written without blocking, under the same deadline as the reply: a child that
        stops reading its input cannot stall the grader either."""
        if not isinstance(req, dict) or req.get("op") not in ("call", "end"):
            raise ValueError(f"req must be a call or end request, got {req!r:.80}")
        if self.dead:
            return {"dead": self.dead}
        if self._pending:
            # an earlier request was cut short (a check's own time limit went off while
            # it waited): its late reply would be read as this one's, so the child ends
            self.dead = (
                "your code did not return within the time of an earlier test "
                "(it was still running when the next one started)"
            )
            self.close()
            return {"dead": self.dead}
        self._pending = True
        self._seq += 1
        seq = self._seq
        cap = wire.reply_cap(len(json.dumps(req)))
        data = (json.dumps({**req, "seq": seq, "cap": cap}) + "\n").encode("utf-8")
        end, budget_cut = self._window(seconds)
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        while view:
            left = end - time.monotonic()
            if left <= 0:
                if budget_cut:
                    return self._over_budget()
                self.dead = (
                    f"your code did not return within {seconds:g} s (it stopped "
                    "reading the grader's requests)"
                )
                self.close()
                return {"dead": self.dead}
            _, ready, _ = select.select([], [fd], [], left)
            if not ready:
                continue
            try:
                view = view[os.write(fd, view[: 1 << 16]) :]
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError):
                break
        if self.dead:
            return {"dead": self.dead}
        if req["op"] == "end":
            check = lambda m: wire.end_reply(m, seq)  # noqa: E731
        else:
            check = lambda m: wire.call_reply(m, seq)  # noqa: E731
        reply = self._receive_until(end, budget_cut, seconds, watch, cap=cap, check=check)
        self._pending = False
        return reply

    def finish(self, seconds=5.0):
        """Ask the child for its report a last time (``{"op": "end"}``): a reply to an
        earlier request still on its way (the answer wrote one of its own) then breaks
        the protocol here, and what the answer did during the last call is reported.
        Nothing happens when the child is gone already."""
        if not self.dead:
            self.request({"op": "end"}, seconds)

    def reset_peak_rss(self):
        """Reset the child's resident-memory high-water mark to its present resident
        memory; return that level in bytes, or ``None`` where the grader may not
        (:func:`autograder.checks._helpers.reset_peak_rss`). Written from outside, so the
        answer's code does not take part."""
        from .checks._helpers import reset_peak_rss

        self._watched = 0
        if self.dead or self.proc.poll() is not None:
            return None
        self._watch_others({})
        return reset_peak_rss(self.proc.pid)

    def _other_processes(self):
        """The sandbox's processes besides the child: its descendants, and when it has a
        user id of its own every process of that id (one that left the tree by forking
        twice still has it). Cheap enough to run every :data:`OTHERS_INTERVAL_S`: the
        owner of ``/proc/<pid>`` is read with one ``stat`` per process, no file opened."""
        pids = set(descendants(self.proc.pid))
        if self.uid is not None:
            pids.update(owned_by(self.uid))
        pids.discard(self.proc.pid)
        return sorted(pids)

    def _watch_others(self, base):
        """Start watching the memory of the sandbox's other processes: ``base`` maps the
        ones present now to what they hold (``{}``: read it here; ``None``: nothing is
        watched)."""
        from .checks._helpers import private_memory

        if base == {}:
            base = {p: private_memory(p) or 0 for p in self._other_processes()}
        self._others_base = base
        self._others_high = 0
        self._others_read = 0.0

    def _sample_rss(self):
        from .checks._helpers import private_memory, resident

        self._watched = max(self._watched, resident(self.proc.pid) or 0)
        now = time.monotonic()
        if self._others_base is None or now - self._others_read < OTHERS_INTERVAL_S:
            return
        self._others_read = now
        rise = sum(
            max(0, (private_memory(p) or 0) - self._others_base.get(p, 0))
            for p in self._other_processes()
        )
        self._others_high = max(self._others_high, rise)

    def peak_rss(self):
        """The child's highest resident memory since :meth:`reset_peak_rss` in bytes: its
        high-water mark, or more where a sample taken while it worked was higher (an
        answer that resets its own mark from inside cannot hide a matrix that lived
        longer than :data:`WATCH_INTERVAL_S`), plus the largest rise of what the
        sandbox's other processes held on their own meanwhile (a matrix built in a
        forked process, seen if it lived longer than :data:`OTHERS_INTERVAL_S`);
        ``None`` if unreadable."""
        from .checks._helpers import peak_rss

        high = peak_rss(self.proc.pid)
        return None if high is None else max(high, self._watched) + self._others_high

    def close(self):
        """Kill the child's process group, every process of its cgroup (then removed)
        and, as root, every process of its user id, and remove the room."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._release()

    def _release(self):
        """Remove the cgroup, end the sandbox user's processes, take the disk off and
        remove the room."""
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.uid is not None:
            kill_uid(self.uid)
        if self.disk:
            unmount_disk(self.libc, self.top)
            self.disk = False
        shutil.rmtree(self.top, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _gather(kept, sent, limit=None):
    """Add to the list ``kept`` the texts of the child's list ``sent`` not yet in it (one
    ``"(garbled list)"`` if it is not a list; each text at most 200 characters; at most
    ``limit`` in all)."""
    for item in sent if isinstance(sent, list) else ["(garbled list)"]:
        item = str(item)[:200]
        if item not in kept and (limit is None or len(kept) < limit):
            kept.append(item)


def _child_env(room):
    """The whole environment of a clean-room child whose room is ``room``."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(room),
        "TMPDIR": str(room),
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _start_server():
    """Start this process's clean-room fork server (:mod:`autograder.fork_role_cleanroom`)
    with the children's interpreter and environment."""
    python, site, _ = protection.sandbox_python()
    return ForkServer.start(
        "cleanroom",
        {"site": site},
        "the clean-room fork server",
        python=python,
        isolated=True,
        env=_child_env,
    )


#: this process's clean-room fork server (started by :func:`start_fork_server`)
_fork_slot = ServerSlot(_start_server, FORK_ENV)


def start_fork_server():
    """Start this process's clean-room fork server without waiting for its imports (a
    no-op when it runs already or ``$AUTOGRADER_CLEANROOM_FORK`` is ``0``); every
    :class:`Sandbox` made afterwards in this process forks its child from it.

    Worth it where many answers are graded (a class, a test suite): the server imports
    NumPy, SciPy, scikit-learn and torch once (a few seconds), and each child then starts
    in milliseconds instead of importing what its answer imports. A single ``check``
    starts its child from nothing. Returns the server, or ``None``."""
    return _fork_slot.start()


def fork_server_ready(wait=FORK_READY_WAIT_S):
    """Whether this process has a fork server that is ready (waiting at most ``wait``
    seconds for its imports)."""
    return _ready_fork_server(wait) is not None


def _ready_fork_server(wait=FORK_READY_WAIT_S):
    """The started fork server once ready, else ``None`` (the child is then started from
    nothing): none was started, it is turned off, it died, or it is still importing after
    ``wait`` seconds."""
    return _fork_slot.ready(wait)
