"""The clean-room verifier: hidden checks graded outside the student's kernel.

nbgrader runs the student's notebook and the hidden test cells in one kernel, so code in
the notebook can change what the tests see (an IPython input transformer, a patched
``repeval_ref`` in ``sys.modules``). The verifier computes the recorded grade elsewhere:

* the source of the solution cells is taken from the submitted notebook (IPython magics
  turned into plain Python by IPython's own transformer, nothing executed) and written,
  alone, into an empty temporary folder, the working directory of a fresh interpreter
  (``-I -S``: no user site, no ``.pth`` files, so the project's editable install of
  ``repeval_ref`` and ``autograder`` is not on the path; the venv's site-packages is
  appended by hand for NumPy, SciPy and scikit-learn, and an import hook refuses both
  packages and records the attempt);
* that child has CPU-time, address-space, process-count and file-size limits
  (``resource.setrlimit`` before it starts) and a wall-clock limit per call; when the
  grader runs as root the child also runs under a user id of its own that owns only the
  temporary folder, so it cannot write to the course directory, and every process left
  under that id is killed afterwards;
* the registered check runs in the grader's process: it draws the inputs, calls a
  stand-in for the student's function that sends the arguments to the child as JSON
  (arrays as ``.npy`` bytes, loaded with ``allow_pickle=False``; a ``torch.nn.Sequential``
  of standard layers as its layers and state dict, rebuilt in the child, its state sent
  back after the call) and receives the result,
  the arguments after the call (so "inputs untouched" is still tested) or the name and
  text of the exception in the same plain form, and compares with ``repeval_ref`` where
  no student code ever ran;
* the visible test cell is run in the child after the answer, as nbgrader would;
* an answer that imports (or tries to import) ``repeval_ref`` or ``autograder`` scores 0
  for the exercise, with a message that says why.

:func:`verify_notebook` returns one :class:`CellVerdict` per graded cell; the course
(:meth:`autograder.course.Course.autograde`) records these scores in the gradebook and
logs every cell where nbgrader's in-kernel score differs.
"""
from __future__ import annotations

import ast
import base64
import dataclasses
import io
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

FORBIDDEN = ("repeval_ref", "autograder")

#: limits of one clean-room process (one exercise of one student)
DEFAULT_LIMITS = {
    "cpu_s": 120,              # CPU seconds of the whole child (RLIMIT_CPU)
    "memory_bytes": 4 << 30,   # address space (RLIMIT_AS)
    "processes": 16,           # processes and threads of the sandbox user (RLIMIT_NPROC)
    "file_bytes": 64 << 20,    # largest file it may write (RLIMIT_FSIZE)
    "call_s": 30.0,            # wall clock of one call of the student's function
    "start_s": 60.0,           # wall clock to start and run the answer's top level
}


# ----------------------------------------------------------------- plain-data codec
class Unsupported(TypeError):
    """An argument of a check that cannot travel as plain data (a model, a callable)."""


def _npy(arr):
    buf = io.BytesIO()
    np.save(buf, np.array(arr, order="C", copy=True), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _unnpy(text):
    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


def encode(x):
    """``x`` as tagged JSON-ready data; raises :class:`Unsupported` for anything else."""
    if x is None:
        return {"t": "none"}
    if isinstance(x, bool):
        return {"t": "bool", "v": x}
    if isinstance(x, int):
        return {"t": "int", "v": str(x)}
    if isinstance(x, float):
        return {"t": "float", "v": repr(x)}
    if isinstance(x, str):
        return {"t": "str", "v": x}
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            raise Unsupported("an object array")
        return {"t": "nd", "v": _npy(x)}
    if isinstance(x, np.generic):
        if isinstance(x, np.object_):
            raise Unsupported("an object scalar")
        return {"t": "np", "v": _npy(np.asarray(x))}
    if isinstance(x, (tuple, list)):
        return {"t": type(x).__name__ if type(x) in (tuple, list) else "list",
                "v": [encode(v) for v in x]}
    if isinstance(x, dict):
        return {"t": "dict", "v": [[encode(k), encode(v)] for k, v in x.items()]}
    if type(x).__module__.startswith("torch") and type(x).__name__ == "Tensor":
        return {"t": "torch", "v": _npy(x.detach().cpu().numpy()), "rg": bool(x.requires_grad)}
    if _is_module(x):
        return {"t": "module", "spec": _module_spec(x), **_module_state(x)}
    if type(x) is np.random.Generator:      # its state is a dict of plain numbers
        return {"t": "gen", "bg": type(x.bit_generator).__name__,
                "v": json.dumps(x.bit_generator.state)}
    raise Unsupported(type(x).__name__)


#: torch.nn layers that travel as plain data: constructor arguments read from the layer
_LAYER_ARGS = {
    "Linear": lambda m: [m.in_features, m.out_features, m.bias is not None],
    "BatchNorm1d": lambda m: [m.num_features, m.eps, m.momentum, m.affine,
                              m.track_running_stats],
    "BatchNorm2d": lambda m: [m.num_features, m.eps, m.momentum, m.affine,
                              m.track_running_stats],
    "Dropout": lambda m: [m.p],
    **{k: (lambda m: []) for k in ("ReLU", "Tanh", "GELU", "Sigmoid", "Identity")},
}


def _is_module(x):
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return isinstance(x, torch.nn.Module)


def _module_spec(m):
    """A torch module as nested plain data (``Sequential`` of the layers of
    :data:`_LAYER_ARGS`); raises :class:`Unsupported` for anything else (hooks, custom
    classes, subclasses of those layers)."""
    name = type(m).__name__
    if type(m).__module__.split(".")[:3] != ["torch", "nn", "modules"]:
        raise Unsupported(f"a torch module of class {name}")
    if m._forward_hooks or m._forward_pre_hooks or m._backward_hooks:
        raise Unsupported(f"a torch module {name} with hooks")
    if name == "Sequential":
        return {"k": name, "c": [_module_spec(c) for c in m]}
    if name not in _LAYER_ARGS:
        raise Unsupported(f"a torch module {name}")
    return {"k": name, "a": _LAYER_ARGS[name](m)}


def _module_state(m):
    """The parts of a module's state a check can observe, as plain data: its state dict,
    every submodule's training flag, each parameter's requires_grad and gradient."""
    params = dict(m.named_parameters())
    return {"state": {k: _npy(v.detach().cpu().numpy()) for k, v in m.state_dict().items()},
            "train": {n: bool(mod.training) for n, mod in m.named_modules()},
            "rg": {n: bool(p.requires_grad) for n, p in params.items()},
            "grad": {n: (None if p.grad is None else _npy(p.grad.detach().cpu().numpy()))
                     for n, p in params.items()}}


class ModuleState:
    """A module's state as it came back from the child (see :func:`_module_state`)."""

    def __init__(self, d):
        self.d = d

    def apply(self, m):
        """Copy this state into the grader's module ``m`` (same architecture)."""
        import torch

        state = {k: torch.from_numpy(_unnpy(v).copy()) for k, v in self.d["state"].items()}
        m.load_state_dict(state)
        for name, mod in m.named_modules():
            if name in self.d["train"]:
                mod.training = bool(self.d["train"][name])
        for name, p in m.named_parameters():
            g = self.d["grad"].get(name)
            p.grad = None if g is None else torch.from_numpy(_unnpy(g).copy())

    def __repr__(self):
        return "<torch module state>"


def decode(d):
    """Inverse of :func:`encode` (arrays loaded with ``allow_pickle=False``)."""
    t = d["t"]
    if t == "none":
        return None
    if t == "bool":
        return bool(d["v"])
    if t == "int":
        return int(d["v"])
    if t == "float":
        return float(d["v"])
    if t == "str":
        return str(d["v"])
    if t == "nd":
        return _unnpy(d["v"])
    if t == "np":
        return _unnpy(d["v"])[()]
    if t == "tuple":
        return tuple(decode(v) for v in d["v"])
    if t == "list":
        return [decode(v) for v in d["v"]]
    if t == "dict":
        return {decode(k): decode(v) for k, v in d["v"]}
    if t == "torch":
        import torch

        out = torch.from_numpy(_unnpy(d["v"]).copy())
        if d.get("rg") and out.is_floating_point():
            out.requires_grad_(True)   # "still attached to a graph" is observable
        return out
    if t == "module":
        return ModuleState(d)
    if t == "gen":
        gen = np.random.Generator(getattr(np.random, d["bg"])())
        gen.bit_generator.state = json.loads(d["v"])
        return gen
    if t == "opaque":      # something the child could not send: a stand-in of that name
        return type(str(d.get("type", "object")), (), {"__repr__": lambda self: d["repr"]})()
    raise ValueError(f"unknown tag {t!r}")


# ----------------------------------------------------------------- the child process
#: the child's program (run with ``python -I -S -c``); it holds no grading code
CHILD = r'''
import sys
SITE = sys.argv[1]
FORBIDDEN = ("repeval_ref", "autograder")
ATTEMPTS = []


class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            ATTEMPTS.append(name)
            raise ImportError(f"{name} may not be imported by an answer (it scores 0)")
        return None


sys.meta_path.insert(0, _Refuse())
sys.path[:] = [p for p in sys.path if p and "site-packages" not in p] + [SITE]
import base64, io, json, os, traceback
import numpy as np

proto_in = os.fdopen(os.dup(0), "r")
proto_out = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)


def npy(a):
    b = io.BytesIO(); np.save(b, np.array(a, order="C", copy=True), allow_pickle=False)
    return base64.b64encode(b.getvalue()).decode("ascii")


def enc(x):
    if x is None: return {"t": "none"}
    if isinstance(x, bool): return {"t": "bool", "v": x}
    if isinstance(x, int): return {"t": "int", "v": str(x)}
    if isinstance(x, float): return {"t": "float", "v": repr(x)}
    if isinstance(x, str): return {"t": "str", "v": x}
    if isinstance(x, np.ndarray) and x.dtype != object: return {"t": "nd", "v": npy(x)}
    if isinstance(x, np.generic) and not isinstance(x, np.object_):
        return {"t": "np", "v": npy(np.asarray(x))}
    if type(x) in (tuple, list): return {"t": type(x).__name__, "v": [enc(v) for v in x]}
    if type(x) is dict: return {"t": "dict", "v": [[enc(k), enc(v)] for k, v in x.items()]}
    if type(x).__module__.startswith("torch") and type(x).__name__ == "Tensor":
        return {"t": "torch", "v": npy(x.detach().cpu().numpy()), "rg": bool(x.requires_grad)}
    if type(x) is np.random.Generator:
        return {"t": "gen", "bg": type(x.bit_generator).__name__,
                "v": json.dumps(x.bit_generator.state)}
    if "torch" in sys.modules and isinstance(x, sys.modules["torch"].nn.Module):
        ps = dict(x.named_parameters())
        return {"t": "module",
                "state": {k: npy(v.detach().cpu().numpy()) for k, v in x.state_dict().items()},
                "train": {n: bool(m.training) for n, m in x.named_modules()},
                "rg": {n: bool(p.requires_grad) for n, p in ps.items()},
                "grad": {n: (None if p.grad is None else npy(p.grad.detach().cpu().numpy()))
                         for n, p in ps.items()}}
    return {"t": "opaque", "type": type(x).__name__, "repr": repr(x)[:200]}


def build(spec):
    import torch.nn as nn
    k, a = spec["k"], spec.get("a", [])
    if k == "Sequential": return nn.Sequential(*[build(c) for c in spec["c"]])
    if k == "Linear": return nn.Linear(a[0], a[1], bias=a[2])
    if k in ("BatchNorm1d", "BatchNorm2d"):
        return getattr(nn, k)(a[0], eps=a[1], momentum=a[2], affine=a[3],
                              track_running_stats=a[4])
    if k == "Dropout": return nn.Dropout(a[0])
    if k in ("ReLU", "Tanh", "GELU", "Sigmoid", "Identity"): return getattr(nn, k)()
    raise ValueError(k)


def arr(v):
    return np.load(io.BytesIO(base64.b64decode(v)), allow_pickle=False)


def dec(d):
    t = d["t"]
    if t == "none": return None
    if t in ("bool", "str"): return d["v"]
    if t == "int": return int(d["v"])
    if t == "float": return float(d["v"])
    if t in ("nd", "np", "torch"):
        a = np.load(io.BytesIO(base64.b64decode(d["v"])), allow_pickle=False)
        if t == "np": return a[()]
        if t == "torch":
            import torch
            out = torch.from_numpy(a.copy())
            if d.get("rg") and out.is_floating_point(): out.requires_grad_(True)
            return out
        return a
    if t == "module":
        import torch
        m = build(d["spec"])
        m.load_state_dict({k: torch.from_numpy(arr(v).copy()) for k, v in d["state"].items()})
        for n, sub in m.named_modules(): sub.training = bool(d["train"].get(n, sub.training))
        for n, p in m.named_parameters():
            p.requires_grad_(bool(d["rg"].get(n, True)))
            g = d["grad"].get(n)
            p.grad = None if g is None else torch.from_numpy(arr(g).copy())
        return m
    if t == "gen":
        g = np.random.Generator(getattr(np.random, d["bg"])())
        g.bit_generator.state = json.loads(d["v"])
        return g
    if t == "tuple": return tuple(dec(v) for v in d["v"])
    if t == "list": return [dec(v) for v in d["v"]]
    if t == "dict": return {dec(k): dec(v) for k, v in d["v"]}
    raise ValueError(t)


def where(tb):
    frames = [f for f in traceback.extract_tb(tb) if f.filename == "answer.py"]
    return "".join(traceback.format_list(frames[-3:]))


def fail(exc):
    return {"error": {"type": type(exc).__name__, "message": str(exc)[:2000],
                      "where": where(exc.__traceback__)}, "forbidden": ATTEMPTS}


def send(msg):
    proto_out.write(json.dumps(msg) + "\n"); proto_out.flush()


class _Shell:
    def __getattr__(self, name):
        return lambda *a, **k: None


ns = {"__name__": "__main__", "get_ipython": lambda: _Shell()}
try:
    code = open("answer.py").read()
    exec(compile(code, "answer.py", "exec"), ns)
    send({"ok": True, "forbidden": ATTEMPTS})
except BaseException as exc:
    send(fail(exc))
for line in proto_in:
    req = json.loads(line)
    try:
        if req["op"] == "visible":
            exec(compile(req["source"], "visible_tests.py", "exec"), ns)
            send({"ok": True, "forbidden": ATTEMPTS})
            continue
        fn = ns.get(req["name"])
        if not callable(fn):
            raise NameError(f"name {req['name']!r} is not defined")
        args = [dec(a) for a in req["args"]]
        kwargs = {k: dec(v) for k, v in req["kwargs"].items()}
        out = fn(*args, **kwargs)
        send({"result": enc(out), "args": [enc(a) for a in args],
              "kwargs": {k: enc(v) for k, v in kwargs.items()}, "forbidden": ATTEMPTS})
    except BaseException as exc:
        send(fail(exc))
'''


def _sandbox_python():
    """(interpreter, site-packages) for the child: this interpreter, or, when it lives
    where another user cannot read (``/root``), a system interpreter of the same version."""
    site = sysconfig.get_paths()["purelib"]
    exe = os.path.realpath(sys.executable)
    if os.geteuid() != 0:
        return exe, site, False
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"

    def world_ok(path, mode):
        p = Path(path)
        for parent in [p, *p.parents]:
            try:
                m = parent.stat().st_mode
            except OSError:
                return False
            need = 0o001 if parent != p else mode
            if not m & need:
                return False
        return True

    for cand in (exe, shutil.which(f"python{ver}") or "", f"/usr/bin/python{ver}"):
        if cand and world_ok(os.path.realpath(cand), 0o001) and world_ok(site, 0o004):
            return os.path.realpath(cand), site, True
    return exe, site, False


def _uid_processes(uid):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                for line in fh:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry))
                        break
        except OSError:
            continue
    return pids


def _kill_uid(uid, rounds=50):
    """Kill every process of user ``uid`` (a helper that becomes ``uid`` sends SIGKILL to
    all it may signal, i.e. exactly those); returns True when none is left."""
    for _ in range(rounds):
        if not _uid_processes(uid):
            return True
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the helper
            try:
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.02)
    return not _uid_processes(uid)


def _libc():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except (OSError, ImportError):  # pragma: no cover
        return None


def _private_tmp(libc, size, keep=()):
    """In the child (as root, before dropping to the sandbox user): a mount namespace of
    its own with an empty, size-limited ``/tmp`` and ``/dev/shm``, so the answer cannot
    touch the machine's temporary directory; nothing happens where that is not allowed.

    ``keep`` lists directories the child still needs (the site-packages it imports
    NumPy from) that may lie under ``/tmp`` (a clone checked out there): each is reached
    through a descriptor opened before the empty ``/tmp`` hides it, and bind-mounted
    read-only at the same path inside the new one."""
    CLONE_NEWNS, MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
        0x00020000, 0x1, 0x20, 0x1000, 0x4000, 0x40000)
    if libc.unshare(CLONE_NEWNS) != 0:
        return False
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return False
    hidden = [os.path.realpath(k) for k in keep
              if any(os.path.realpath(k).startswith(w + "/") for w in ("/tmp", "/dev/shm"))]
    fds = [(k, os.open(k, os.O_PATH | os.O_DIRECTORY)) for k in hidden]
    opts = f"size={int(size)},mode=1777".encode()
    for where in (b"/tmp", b"/dev/shm"):
        libc.mount(b"tmpfs", where, b"tmpfs", 0, opts)
    for path, fd in fds:
        os.makedirs(path, exist_ok=True)
        src = f"/proc/self/fd/{fd}".encode()
        if libc.mount(src, path.encode(), None, MS_BIND | MS_REC, None) == 0:
            libc.mount(b"none", path.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
        os.close(fd)
    return True


class Sandbox:
    """One clean-room process holding one answer; call it through :meth:`call`."""

    def __init__(self, source, limits=None):
        self.limits = {**DEFAULT_LIMITS, **(limits or {})}
        self.dir = Path(tempfile.mkdtemp(prefix="autograder-cleanroom-"))
        (self.dir / "answer.py").write_text(source)
        python, site, drop = _sandbox_python()
        self.uid = (200000 + secrets.randbelow(700000)) if drop else None
        if self.uid is not None:
            for p in (self.dir, self.dir / "answer.py"):
                os.chown(p, self.uid, self.uid)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.dir), "TMPDIR": str(self.dir),
               "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        lim = self.limits
        uid = self.uid
        libc = _libc() if uid is not None else None

        def limit():  # runs in the child before the interpreter starts
            import resource

            os.setsid()
            if libc is not None:
                _private_tmp(libc, lim["file_bytes"], keep=(site,))
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            resource.setrlimit(resource.RLIMIT_CPU, (int(lim["cpu_s"]), int(lim["cpu_s"]) + 1))
            resource.setrlimit(resource.RLIMIT_AS, (int(lim["memory_bytes"]),) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (int(lim["file_bytes"]),) * 2)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if uid is not None:
                resource.setrlimit(resource.RLIMIT_NPROC, (int(lim["processes"]),) * 2)

        self.proc = subprocess.Popen(
            [python, "-I", "-S", "-c", CHILD, site], cwd=str(self.dir), env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, preexec_fn=limit, close_fds=True)
        self.forbidden = []
        self.dead = None
        self.unsupported = None
        self.started = self._receive(self.limits["start_s"])

    def _receive(self, seconds):
        """The child's next message, or a dict ``{"dead": reason}``."""
        if self.dead:
            return {"dead": self.dead}
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout=seconds)
        sel.close()
        line = self.proc.stdout.readline() if ready else None
        if not line:
            if ready:
                self.proc.wait(timeout=5)
                code = self.proc.returncode
                why = (f"your code ended the grading process (exit code {code}"
                       + (", killed: CPU-time limit" if code == -signal.SIGXCPU else
                          ", killed by a signal" if code and code < 0 else "") + ")")
            else:
                why = (f"your code did not return within {seconds:g} s (an infinite loop, "
                       "or far too slow for these small inputs)")
            self.dead = why
            self.close()
            return {"dead": why}
        try:
            msg = json.loads(line)
        except ValueError:
            self.dead = "the grading process sent something that is not a result"
            self.close()
            return {"dead": self.dead}
        for name in msg.get("forbidden", []):
            if name not in self.forbidden:
                self.forbidden.append(name)
        return msg

    def request(self, req, seconds):
        if self.dead:
            return {"dead": self.dead}
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        return self._receive(seconds)

    def close(self):
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
        if self.uid is not None:
            _kill_uid(self.uid)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _raise_like(error):
    """Re-raise the child's exception as the same builtin class (else a stand-in)."""
    import builtins

    name, message = error["type"], error["message"]
    if error.get("where"):
        message = message + "\n" + error["where"].rstrip()
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = type(name, (Exception,), {})
    try:
        exc = cls(message)
    except Exception:
        exc = type(name, (Exception,), {})(message)
    raise exc


def _write_back(sent, got):
    """Copy the child's post-call arguments into the grader's arrays (mutation checks)."""
    if isinstance(got, ModuleState) and _is_module(sent):
        got.apply(sent)
    elif (type(sent).__name__ == "Tensor" and type(got).__name__ == "Tensor"
          and type(sent).__module__.startswith("torch")):
        if tuple(sent.shape) == tuple(got.shape) and not sent.requires_grad:
            try:
                sent.data.copy_(got.detach())
            except (TypeError, RuntimeError):
                pass
    elif isinstance(sent, np.random.Generator) and isinstance(got, np.random.Generator):
        sent.bit_generator.state = got.bit_generator.state
    elif isinstance(sent, np.ndarray) and isinstance(got, np.ndarray):
        if sent.shape == got.shape and sent.flags.writeable:
            try:
                np.copyto(sent, got, casting="unsafe")
            except (TypeError, ValueError):
                pass
    elif isinstance(sent, list) and isinstance(got, list) and len(sent) == len(got):
        for i, (s, g) in enumerate(zip(sent, got)):
            if isinstance(s, np.ndarray) or _is_module(s) or type(s).__name__ == "Tensor":
                _write_back(s, g)
            elif not isinstance(s, (list, dict)):
                sent[i] = g
    elif isinstance(sent, dict) and isinstance(got, dict):
        for k in sent:
            if k in got:
                if isinstance(sent[k], np.ndarray):
                    _write_back(sent[k], got[k])


def remote_function(box, name):
    """A stand-in for the student's ``name`` that runs it in ``box``."""
    from .checks import CheckTimeout

    def student_function(*args, **kwargs):
        try:
            req = {"op": "call", "name": name, "args": [encode(a) for a in args],
                   "kwargs": {k: encode(v) for k, v in kwargs.items()}}
        except Unsupported as exc:
            box.unsupported = str(exc)
            raise
        msg = box.request(req, box.limits["call_s"])
        if "dead" in msg:
            if "did not return" in msg["dead"]:
                raise CheckTimeout()
            raise RuntimeError(msg["dead"])
        if "error" in msg:
            _raise_like(msg["error"])
        for s, g in zip(args, msg.get("args", [])):
            _write_back(s, decode(g))
        for k, g in msg.get("kwargs", {}).items():
            _write_back(kwargs[k], decode(g))
        return decode(msg["result"])

    student_function.__name__ = name
    return student_function


# ----------------------------------------------------------------- verdicts
@dataclasses.dataclass
class CellVerdict:
    """The clean-room score of one graded cell of a notebook."""

    grade_id: str
    points: float | None      # None: not verifiable here (nbgrader's score stands)
    max_points: float
    message: str


def static_imports(source):
    """Forbidden packages named by the answer's ``import`` statements (dynamic imports
    are caught at run time by the child's import hook)."""
    found = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for n in names:
            if n.split(".")[0] in FORBIDDEN and n not in found:
                found.append(n)
    return found


def solution_source(nb):
    """Plain Python of the notebook's solution cells that come before its first test
    cell (IPython magics transformed): a definition moved below the tests is not defined
    when nbgrader runs them, and it is not graded here either."""
    from IPython.core.inputtransformer2 import TransformerManager

    parts = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            break
        if cell.cell_type == "code" and meta.get("solution"):
            try:
                parts.append(TransformerManager().transform_cell(cell.source))
            except Exception:
                parts.append(cell.source)
    return "\n\n".join(parts)


def forbidden_message(names):
    return (f"your answer imports {', '.join(sorted(set(names)))}: answers may not use the "
            "course's reference package or the grader, so this exercise scores 0")


def verify_source(spec, source, seed, limits=None):
    """Clean-room verdicts for exercise ``spec`` on the answer ``source``.

    Returns
    -------
    list of CellVerdict
        One per graded cell (the visible tests, then each hidden check), with the
        nbgrader grade ids of :func:`autograder.build.grade_ids`.
    """
    from .build import grade_ids
    from .checks import check_points, format_findings, run_check

    ids = grade_ids(spec)
    limits = {**DEFAULT_LIMITS, **(limits or {})}
    vis_id = f"{spec.NAME}_visible_tests"
    cells = [(vis_id, float(spec.VISIBLE_POINTS))] + [(ids[c], check_points(c))
                                                      for c in spec.HIDDEN]
    banned = static_imports(source)
    if banned:
        msg = forbidden_message(banned)
        return [CellVerdict(g, 0.0, p, msg) for g, p in cells]
    out = []
    with Sandbox(source, limits) as box:
        start = box.started
        if "dead" in start or "error" in start:
            if "error" in start:
                e = start["error"]
                why = f"running your code raised {e['type']}: {e['message']}"
            else:
                why = start["dead"]
            if box.forbidden:
                why = forbidden_message(box.forbidden)
            return [CellVerdict(g, 0.0, p, why) for g, p in cells]
        vis = box.request({"op": "visible", "source": spec.VISIBLE_TESTS}, limits["call_s"] * 4)
        if "ok" in vis:
            out.append(CellVerdict(vis_id, float(spec.VISIBLE_POINTS), float(spec.VISIBLE_POINTS),
                                   "visible tests pass"))
        else:
            why = vis.get("dead") or "{type}: {message}".format(**vis["error"])
            out.append(CellVerdict(vis_id, 0.0, float(spec.VISIBLE_POINTS),
                                   f"visible tests fail: {why}"))
        for check in spec.HIDDEN:
            func = check.split("/", 1)[0]
            pts = check_points(check)
            if box.dead and "did not return" in box.dead:
                out.append(CellVerdict(ids[check], 0.0, pts,
                                       f"not run: {func} timed out in an earlier check"))
                continue
            box.unsupported = None
            findings = run_check(check, remote_function(box, func), seed,
                                 time_limit=limits["call_s"] * 10)
            if box.unsupported:   # this check passes a model or a callable: not verifiable
                out.append(CellVerdict(ids[check], None, pts,
                                       f"not verified in the clean room (it passes "
                                       f"{box.unsupported}); nbgrader's score stands"))
                continue
            got = float(sum(f.points for f in findings))
            out.append(CellVerdict(ids[check], got, pts, format_findings(check, findings, seed)))
        if box.forbidden:
            msg = forbidden_message(box.forbidden)
            out = [CellVerdict(v.grade_id, 0.0, v.max_points, msg) for v in out]
    return out


def verify_notebook(spec, nb, seed, limits=None):
    """:func:`verify_source` on the solution cells of notebook ``nb``."""
    return verify_source(spec, solution_source(nb), seed, limits)


#: source fragments of code that reaches into the kernel that runs the tests
_TAMPERING = ("input_transformers", "ast_transformers", "sys.modules", "get_ipython",
              "register_magic", "events.register", "showtraceback", "set_custom_exc",
              "builtins", "gradebook", "autograded")


def likely_cause(nb, cells, kernel_total, verifier_total):
    """A short guess, for the instructor, at why the two scores of a notebook differ."""
    if any(v.message.startswith("your answer imports") for v in cells):
        return "the answer imports the course's reference package or the grader"
    source = solution_source(nb)
    hits = [t for t in _TAMPERING if t in source]
    if kernel_total > verifier_total:
        if hits:
            return ("the answer reaches into the kernel that runs the tests ("
                    + ", ".join(hits) + "): tampering")
        return ("the answer passes in the notebook but not on its own: it depends on state "
                "outside its cells, or it tampers with the kernel")
    return ("the notebook's kernel run failed or was cut short (a crash, a time-out, an "
            "edited or broken notebook)")
