"""The fork server's ``cleanroom`` role: clean-room children (standard library only;
loaded by path by :mod:`autograder.fork_server`).

A clean-room child (:mod:`autograder.cleanroom_child`) started from nothing spends most of
its start importing what the answer imports (NumPy, SciPy, scikit-learn, torch), for each
of a student's notebooks. The server of this role runs with the children's interpreter and
environment (``python -I -S``), puts only the site-packages ``options["site"]`` last on
its path, as a started child does, imports :data:`PRELOAD`, then forks one child per
request. The forked child confines itself with the request's specification
(:func:`autograder.confine.apply` with ``forked=True``: its room as working directory, its
cgroups, a session, the mounts, the sandbox user id, the limits), takes the pipes the
grader passed as its standard input and output, fresh seeds, and runs the room's copy of
the child program as ``__main__`` (:func:`runpy.run_path`).

Spawn request: ``{"op": "spawn", "confinement": spec, "env": {...}, "program": str}`` with
the child's two pipe ends attached (its standard input, then its standard output).
"""

import os
import sys

#: the libraries imported before the first fork (each optional)
PRELOAD = (
    "numpy",
    "scipy",
    "scipy.linalg",
    "scipy.special",
    "scipy.stats",
    "scipy.spatial",
    "scipy.spatial.distance",
    "sklearn",
    "sklearn.linear_model",
    "sklearn.neighbors",
    "sklearn.model_selection",
    "sklearn.metrics",
    "sklearn.preprocessing",
    "sklearn.svm",
    "torch",
    "torch.nn",
    "torch.nn.functional",
)


class Role:
    """The ``cleanroom`` role (see the module's description).

    Parameters
    ----------
    tools : autograder.fork_server.Tools
        The shared server code and the confinement.
    options : dict
        ``{"site": str}``: the site-packages the children import from.
    """

    def __init__(self, tools, options):
        site = options.get("site")
        if not isinstance(site, str) or not site.startswith("/"):
            raise ValueError(f"options must name the site-packages, got {options!r:.200}")
        self.site = site
        self.common, self.confine = tools.common, tools.confine
        self.children = self.common.Children()

    def preload(self):
        """Put the site-packages on the path (last, never the repository) and import
        :data:`PRELOAD`; the names imported."""
        sys.path[:] = [p for p in sys.path if p and "site-packages" not in p] + [self.site]
        return self.common.import_optional(PRELOAD)

    def spawn_error(self, req, fds):
        """Why the spawn request ``req`` with the descriptors ``fds`` cannot be served."""
        if len(fds) != 2:
            return "a spawn request needs two pipe ends"
        if not isinstance(req.get("env"), dict) or not isinstance(req.get("program"), str):
            return "a spawn request needs env (a dict) and program (a path)"
        return self.common.confinement_error(self.confine, req)

    def spawn(self, req, fds, control):
        return self.common.fork_and_become(
            self.children, lambda: self._become_child(req, fds, control)
        )

    def status(self, pid):
        return {"code": self.children.status(pid)}

    def _become_child(self, req, fds, control):
        """In the forked child: confine, then run the room's child program; never
        returns."""
        import runpy

        code = 1
        try:
            control.close()
            child_in, child_out = fds
            os.dup2(child_in, 0)
            os.dup2(child_out, 1)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 2)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            self.confine.apply(
                req["confinement"], forked=True, memory_base=self.confine.mapped_bytes()
            )
            self.common.fresh_process(req["env"])
            program = req["program"]
            sys.argv = [program, self.site]
            runpy.run_path(program, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # pragma: no cover - the grader reads the exit code
            code = 1
        finally:
            try:
                sys.stdout.flush()
            finally:
                os._exit(code)
