"""The fork server: one warm process that imports what its children import once, then
forks each of them on request (standard library only; run by path).

Starting a process that runs a student's code from nothing spends most of its start
importing: NumPy, SciPy, scikit-learn and torch for a clean-room child, nbgrader for a
student's run, IPython and ipykernel for a notebook's kernel. This program does those
imports once and forks one child per request, in one of three *roles*:

``cleanroom`` (:mod:`autograder.fork_role_cleanroom`)
    a clean-room child that holds one answer; started as
    ``python -I -S fork_server.py cleanroom FD OPTIONS`` with the children's interpreter
    and environment;
``sandbox`` (:mod:`autograder.fork_role_sandbox`)
    a student's nbgrader run, with a server of the ``kernel`` role forked beside it inside
    the same sandbox (so its kernels are forked from warm imports too);
``kernel`` (:mod:`autograder.fork_role_kernel`)
    a notebook's kernel in namespaces of its own, under a watcher that enforces its time
    limit; started beside an nbgrader run, or by :mod:`autograder.kernel_fork` itself.

Every child confines itself with the specification the grader sent
(:func:`autograder.confine.apply`, exactly as a started child does in its
``preexec_fn``). The protocol on the Unix socket ``FD`` is one for all roles
(:mod:`autograder.fork_children`), and one client speaks it
(:class:`autograder.fork_client.ForkServer`). ``OPTIONS`` is a JSON object of the role's
settings, read by the grader from :mod:`autograder.settings` (this program reads no
environment variable of the grader's).

The program never imports ``autograder`` or ``repeval_ref``: the modules it needs are
loaded from the files beside it (:func:`load_by_path`) into module objects that are not
in :data:`sys.modules`, so no process a student can reach holds the grader's code.
"""

import json
import os
import socket
import sys

#: the roles, each the module ``fork_role_<role>.py`` beside this file
ROLES = ("cleanroom", "sandbox", "kernel")
HERE = os.path.dirname(os.path.abspath(__file__))


def load_by_path(name, path):
    """The module executed from the file ``path`` under the name ``name`` (importlib's
    file loader), not registered in :data:`sys.modules`; no package is imported to
    reach it and no bytecode is written for it.

    Raises
    ------
    ValueError
        If ``path`` is not a Python file or ``name`` names an ``autograder`` module.
    """
    import importlib.util

    if not isinstance(path, str) or not path.endswith(".py") or not os.path.isfile(path):
        raise ValueError(f"path must name a Python file, got {path!r}")
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("autograder"):
        raise ValueError(f"name must be a private module name, got {name!r}")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes
    return module


class Tools:
    """What every role gets: the shared server code (``common``,
    :mod:`autograder.fork_children`), the confinement (``confine``,
    :mod:`autograder.confine`) and :meth:`role`, which makes another role (the sandbox
    role forks a kernel server)."""

    def __init__(self):
        self.common = load_by_path("_fork_children", os.path.join(HERE, "fork_children.py"))
        self.confine = load_by_path("_fork_confine", os.path.join(HERE, "confine.py"))
        self._modules = {}

    def role(self, name, options):
        """A new instance of the role ``name`` with the settings ``options`` (a dict)."""
        if name not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {name!r}")
        if not isinstance(options, dict):
            raise ValueError(f"options must be a dict, got {type(options).__name__}")
        if name not in self._modules:
            path = os.path.join(HERE, f"fork_role_{name}.py")
            self._modules[name] = load_by_path(f"_fork_role_{name}", path)
        return self._modules[name].Role(self, options)


def main(argv):
    """``argv``: ``[program, ROLE, FD, OPTIONS]``; serves until the socket ``FD`` ends."""
    if len(argv) != 4:
        raise ValueError("argv must be [program, role, socket descriptor, options]")
    name, fd, options = argv[1], int(argv[2]), json.loads(argv[3])
    control = socket.socket(fileno=fd)
    tools = Tools()
    tools.common.serve(control, tools.role(name, options))


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        # the grading process is gone (or stopped it): end quietly
        os._exit(0)
