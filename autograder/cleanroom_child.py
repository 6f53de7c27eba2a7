"""The clean room's child program: holds one answer and calls its functions on request.

Run by :class:`autograder.cleanroom_process.Sandbox` as ``python -I -S <room>/
cleanroom_child.py SITE`` in the room (an empty temporary folder holding ``answer.py``,
a copy of this file and of ``codec.py``), where ``SITE`` is the site-packages it may
import NumPy, SciPy, scikit-learn and torch from. It holds no grading code:

1. an import hook (:class:`RefuseForbidden`) refuses :data:`FORBIDDEN`, the course's
   reference package and the grader, and records every attempt; only then is ``SITE``
   put on ``sys.path`` and the codec loaded, by its path (:func:`load_codec`), without
   the ``autograder`` package ever being importable;
2. the answer (``answer.py``) runs as ``__main__`` with a ``get_ipython`` that does
   nothing; the result (``{"seq": 0, "ok": true}`` or the exception) is one JSON line on
   the original standard output, whose descriptors 0 to 2 now point to ``/dev/null``;
3. then one JSON request per line on standard input, each with a sequence number
   ``seq`` that its reply repeats: ``{"op": "call", "seq", "name", "args", "kwargs",
   "cap"}`` calls the answer's function on the decoded arguments and sends back the
   result and the arguments after the call (:func:`autograder.codec.encode` with
   ``lenient=True``), or the exception's type, text and the answer's frames of its
   traceback; a reply that would be longer than ``cap`` bytes is replaced by an error
   naming its size. ``{"op": "end", "seq"}`` is answered with the report alone. The
   visible tests do not run here: the grader runs them in its own process and sends
   their calls (:func:`autograder.cleanroom.run_visible`). A call with
   ``"measure": true`` also sends ``"peak_bytes"``, the largest memory the call held at
   once as :mod:`tracemalloc` saw it (:func:`traced_peak`, the measure a memory check
   takes in the kernel), so that the check judges the answer where it ran.

The answer runs in this process and can write into the reply channel itself; the grader
reads every message as hostile (:mod:`autograder.wire`: a byte cap, a schema, the
sequence number) and ends the child at the first one that breaks the protocol.

Every message carries the report: the forbidden imports attempted so far, what
:class:`Watch` noted so far, and the code the answer compiled at run time since the last
message. The grader's modules import this
file only for :data:`FORBIDDEN` and :func:`traced_peak`; nothing runs unless it is the
main program.
"""

import json
import os
import sys
import traceback
import tracemalloc
import warnings

#: packages an answer may not import (it scores 0 for the exercise)
FORBIDDEN = ("repeval_ref", "autograder")


def _errstate_warn():
    """``np.errstate(all="warn")`` (as :func:`autograder.checks.call_student` sets it),
    or a context that does nothing where NumPy is absent."""
    import contextlib

    try:
        import numpy as np
    except ImportError:
        return contextlib.nullcontext()
    return np.errstate(all="warn")


def traced_peak(call, tracer=tracemalloc):
    """Run ``call()``; return ``(result, peak)``, ``peak`` being the largest number of
    bytes the call held at once beyond what was allocated before it.

    ``tracer`` is the :mod:`tracemalloc` module (or an object with its ``is_tracing``,
    ``start``, ``stop``, ``reset_peak`` and ``get_traced_memory``): the child passes the
    functions it took before the answer ran. NumPy reports its buffers to tracemalloc;
    a trace that was already running is left running.
    """
    if not callable(call):
        raise ValueError(f"call must be callable, got {type(call).__name__}")
    running = tracer.is_tracing()
    if not running:
        tracer.start()
    tracer.reset_peak()
    base = tracer.get_traced_memory()[0]
    try:
        result = call()
        peak = tracer.get_traced_memory()[1] - base
    finally:
        if not running:
            tracer.stop()
    return result, max(0, int(peak))


class _Tracer:
    """The :mod:`tracemalloc` functions as they were when the child started (an answer
    that rebinds the module's names does not change what the child measures)."""

    def __init__(self):
        for name in ("is_tracing", "start", "stop", "reset_peak", "get_traced_memory"):
            setattr(self, name, getattr(tracemalloc, name))


#: path components an answer has no business opening, wherever they lie (a copy of the
#: course installed into the site-packages, the course's solutions, its gradebook)
WATCHED_NAMES = FORBIDDEN + ("repeval_book", "solutions", "gradebook.db")
#: the most notices one child keeps (the first ones; an answer that loops over a folder
#: does not flood the grader), and the longest notice
MAX_NOTICES, NOTICE_CHARS = 20, 200
#: the most records of code the answer compiled at run time, the longest source kept of
#: one, and the most characters of source kept in all (escaped as JSON, at most twelve
#: bytes a character, they stay well within the reader's allowance for a message)
MAX_COMPILED, COMPILED_CHARS, COMPILED_TOTAL = 20, 32 << 10, 64 << 10


class Watch:
    """Audit hook (:func:`sys.addaudithook`, which no Python code can take back) noting
    what the answer tries beyond its room: opening or listing a path outside the room,
    the Python installation and ``site``, or any path through a :data:`WATCHED_NAMES`
    folder; a network connection, bind or datagram; starting a process; loading a
    shared library through :mod:`ctypes` from the answer's own code. Each notice is a
    short text in :attr:`noticed` (at most :data:`MAX_NOTICES`), sent to the grader with
    every reply, which names them in ``grading_issues.csv``.

    It also records the code the answer builds and runs itself (:attr:`compiled`): a
    ``compile`` or ``exec`` called from the answer's own code (``exec``, ``eval`` and
    ``compile`` of a text, of decoded or decompressed bytes, a code object from
    :mod:`marshal`), and a module compiled from a file in the room (one the answer wrote
    and imported). Each record is ``{"how", "source"}``, the source as text where there is
    one (at most :data:`COMPILED_CHARS` characters; :data:`MAX_COMPILED` records).

    It prevents nothing (the confinement does: the course is not mounted, there is no
    network); it names what an answer tried, so that an attack that failed is still
    seen. An answer that reaches into this object (through :mod:`gc`) could empty its
    list; :class:`RefuseForbidden`'s record is kept apart from it.
    """

    def __init__(self, allowed):
        # folders, and the files read about the machine (scikit-learn's and torch's CPU
        # counts, the allocator's map); the room also through the working folder's link
        self.allowed = tuple(
            dict.fromkeys(os.path.join(os.path.abspath(a), "") for a in allowed if a)
        ) + ("/sys/devices/system/cpu/", "/sys/fs/cgroup/", "/proc/self/cwd/")
        self.devices = (
            "/dev/null",
            "/dev/urandom",
            "/dev/random",
            "/proc/stat",
            "/proc/cpuinfo",
            "/proc/meminfo",
            "/proc/self/maps",
            "/proc/self/status",
        )
        self.noticed = []
        self.compiled = []
        self._compiled_chars = 0
        #: file names of the answer's code: its cell, and what it compiled itself
        self.answer_files = {"answer.py"}
        self.room = os.path.join(os.path.abspath(os.getcwd()), "")
        self._stdlib = (os.path.dirname(os.__file__), "<frozen")

    def _note(self, text):
        text = text[:NOTICE_CHARS]
        if text not in self.noticed and len(self.noticed) < MAX_NOTICES:
            self.noticed.append(text)

    def _record(self, how, source):
        """Keep one record of code compiled at run time (within the bounds)."""
        if len(self.compiled) >= MAX_COMPILED:
            return
        if isinstance(source, (bytes, bytearray, memoryview)):
            source = bytes(source).decode("utf-8", "replace")
        elif not isinstance(source, str):
            try:
                import ast

                source = ast.unparse(source) if isinstance(source, ast.AST) else ""
            except Exception:  # an AST the answer built need not unparse
                source = ""
        room = max(0, min(COMPILED_CHARS, COMPILED_TOTAL - self._compiled_chars))
        source = source[:room]
        self._compiled_chars += len(source)
        self.compiled.append({"how": how[:NOTICE_CHARS], "source": source})

    def _answer_frame(self, frame):
        """Whether ``frame`` (the caller of a builtin) runs the answer's code."""
        return frame is not None and frame.f_code.co_filename in self.answer_files

    def _compiled_event(self, event, args, caller):
        if event == "compile":
            source, filename = args[0], args[1]
            name = os.fsdecode(filename) if isinstance(filename, (str, bytes)) else "?"
            full = os.path.abspath(name)
            in_room = (
                name != "answer.py"
                and not name.startswith("<")
                and full.startswith(self.room)
                and os.path.isfile(full)
            )
            if self._answer_frame(caller) or in_room:
                self.answer_files.add(name)
                self._record(f"compile ({name})", source)
        elif event == "exec":
            code = args[0]
            if (
                self._answer_frame(caller)
                and getattr(code, "co_filename", None) not in self.answer_files
            ):
                self._record(f"exec of a code object ({getattr(code, 'co_filename', '?')})", "")
        elif event == "marshal.loads" and self._answer_frame(caller):
            self._record("marshal.loads (code or data unpacked from bytes)", "")

    def _outside(self, path):
        if isinstance(path, int):
            return False
        try:
            path = os.fsdecode(path)
        except (TypeError, ValueError):
            return True
        full = os.path.abspath(path)
        parts = full.split(os.sep)
        if any(name in parts for name in WATCHED_NAMES):
            return True
        if full in self.devices:
            return False
        return not os.path.join(full, "").startswith(self.allowed)

    def _from_answer(self):
        """Whether the innermost frame outside the standard library is the answer's."""
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if not name.startswith(self._stdlib):
                return name == "answer.py"
            frame = frame.f_back
        return False

    def __call__(self, event, args):
        try:
            if event in ("compile", "exec", "marshal.loads"):
                self._compiled_event(event, args, sys._getframe(1))
            elif event in ("open", "os.listdir", "os.scandir"):
                if args and self._outside(args[0]):
                    verb = "open" if event == "open" else "list"
                    self._note(f"{verb} {os.fsdecode(args[0])}")
            elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
                self._note(f"{event.split('.')[1]} to {args[1]!r}"[:200])
            elif event in (
                "subprocess.Popen",
                "os.system",
                "os.exec",
                "os.posix_spawn",
                "os.spawn",
                "os.fork",
                "os.forkpty",
                "pty.spawn",
            ):
                self._note(f"start a process ({event})")
            elif event in ("ctypes.dlopen", "ctypes.dlsym") and self._from_answer():
                what = args[0] if event == "ctypes.dlopen" else args[-1]
                self._note(f"load native code through ctypes ({event} {what!r})"[:200])
        except Exception:  # the hook must never break the answer's own call
            pass


class RefuseForbidden:
    """Import hook (first on ``sys.meta_path``) refusing :data:`FORBIDDEN` packages and
    recording each attempt in :attr:`attempts`."""

    def __init__(self):
        self.attempts = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            if name not in self.attempts and len(self.attempts) < MAX_NOTICES:
                self.attempts.append(name[:NOTICE_CHARS])
            raise ImportError(f"{name} may not be imported by an answer (it scores 0)")
        return None


def load_codec(path):
    """The codec module executed from the file ``path`` by importlib's file loader (no
    ``sys.path`` entry, no entry in ``sys.modules``, no bytecode written)."""
    import importlib.util

    if not os.path.isfile(path):
        raise ValueError(f"path must name the codec's file, got {path!r}")
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location("cleanroom_codec", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: the file name the answer's code runs under (its frames are the answer's)
ANSWER_FILE = "answer.py"


def run_answer(source, namespace):
    """Run the answer's source text ``source`` in the dict ``namespace``, its code named
    :data:`ANSWER_FILE` (the one place the child compiles code of the answer's)."""
    if not isinstance(source, str) or not isinstance(namespace, dict):
        raise ValueError("source must be text and namespace a dict")
    code = compile(source, ANSWER_FILE, "exec")
    exec(code, namespace)


class _Shell:
    """``get_ipython()`` of the answer: every method does nothing."""

    def __getattr__(self, name):
        return lambda *a, **k: None


def main(argv):
    """Run the child (``argv``: ``[program, SITE]``)."""
    if len(argv) != 2:
        raise ValueError("argv must be [program, site-packages]")
    site = argv[1]
    refuse = RefuseForbidden()
    sys.meta_path.insert(0, refuse)
    sys.path[:] = [p for p in sys.path if p and "site-packages" not in p] + [site]
    codec = load_codec(os.path.join(os.path.dirname(argv[0]), "codec.py"))
    watch = Watch(
        (os.getcwd(), site, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    )
    sys.addaudithook(watch)

    proto_in = os.fdopen(os.dup(0), "r")
    proto_out = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)

    def where(tb):
        frames = [f for f in traceback.extract_tb(tb) if f.filename == "answer.py"]
        return "".join(traceback.format_list(frames[-3:]))[-4000:]

    sent = [0]  # records of compiled code already sent

    def report():
        new = watch.compiled[sent[0] :]
        sent[0] = len(watch.compiled)
        return {"forbidden": list(refuse.attempts), "noticed": list(watch.noticed), "compiled": new}

    def fail(seq, exc):
        return {
            "seq": seq,
            "error": {
                "type": type(exc).__name__[:200],
                "message": str(exc)[:2000],
                "where": where(exc.__traceback__),
            },
            **report(),
        }

    def send(msg):
        proto_out.write(json.dumps(msg) + "\n")
        proto_out.flush()

    def enc(x):
        return codec.encode(x, lenient=True)

    def dec(d):
        return codec.decode(d, build_modules=True)

    tracer = _Tracer()
    ns = {"__name__": "__main__", "get_ipython": lambda: _Shell()}
    try:
        with open(ANSWER_FILE) as fh:
            source = fh.read()
        run_answer(source, ns)
        send({"seq": 0, "ok": True, **report()})
    except BaseException as exc:
        send(fail(0, exc))
    for line in proto_in:
        req = json.loads(line)
        seq = req.get("seq")
        try:
            if req.get("op") == "end":
                send({"seq": seq, "end": True, **report()})
                continue
            if req.get("op") != "call":
                # the visible tests run in the grader's process (cleanroom.run_visible)
                raise ValueError(f"unknown request {req.get('op')!r}")
            fn = ns.get(req["name"])
            if not callable(fn):
                raise NameError(f"name {req['name']!r} is not defined")
            args = [dec(a) for a in req["args"]]
            kwargs = {k: dec(v) for k, v in req["kwargs"].items()}
            # warnings travel back, so the grader's checks see what the kernel's would
            peak = None
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with _errstate_warn():
                    if req.get("measure"):
                        out, peak = traced_peak(
                            lambda fn=fn, args=args, kwargs=kwargs: fn(*args, **kwargs), tracer
                        )
                    else:
                        out = fn(*args, **kwargs)
            rep = report()
            reply = json.dumps(
                {
                    "seq": seq,
                    "result": enc(out),
                    "args": [enc(a) for a in args],
                    "kwargs": {k: enc(v) for k, v in kwargs.items()},
                    "warnings": [str(w.message)[:2000] for w in caught][:50],
                    "peak_bytes": peak,
                    **rep,
                }
            )
            cap = req.get("cap")
            if isinstance(cap, int) and len(reply) > cap:
                too_big = ValueError(
                    f"{req['name']} returned {len(reply) >> 10} KiB of data (with its "
                    f"arguments), more than this test can need ({cap >> 10} KiB): check "
                    "what it returns"
                )
                reply = json.dumps({**fail(seq, too_big), **rep})
            proto_out.write(reply + "\n")
            proto_out.flush()
        except BaseException as exc:
            send(fail(seq, exc))


if __name__ == "__main__":
    main(sys.argv)
