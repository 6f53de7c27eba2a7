"""Row ``report``: ``repeval report`` end to end against the one-module report of an older commit.

Both sides read the same two ``.npz`` files (TRAIN and TEST float32 features with
integer labels) and write a complete report (tables, JSON, plots) to a fresh folder.
The competitor is the command-line code of commit :data:`BEFORE_COMMIT`
(``repeval_ref/cli.py`` there, one module), which runs one full similarity pass per k of
the k-NN curve and fits the logistic-regression probe from scratch for every C. It is
not kept in the tree: :func:`write_before` takes it from git history (``git show``) into
a temporary folder at run time, with its relative imports made absolute and its module
names mapped by :data:`RENAMED`, so that it calls the package's formula modules
(``knn_classify``, the probe, the label-free metrics) as that report called them. The
subject is :func:`repeval_ref.cli.main`: one similarity pass for the whole k-NN curve and
the C sweep warm-started along the regularisation path.

Where the history is not there (a tarball, a shallow clone, no git), :func:`write_before`
raises :class:`HistoryUnavailable` and the row is written as not run, with the reason.

Each child returns the k-NN curve (correct counts per k) and the probe's chosen C and
test accuracy, so the parent checks that the k-NN numbers are identical and that the
probe accuracies lie within the stated tolerance.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

#: The commit whose ``repeval_ref/cli.py`` is the competitor: the last commit where the
#: command line was one module.
BEFORE_COMMIT = "41cec37b29c0b93d46ec16630d69c54963b4298b"
#: Where that command-line code lived at :data:`BEFORE_COMMIT`.
BEFORE_PATH = "repeval_ref/cli.py"
#: The package its relative imports (``from .knn import knn_classify``) refer to.
BEFORE_PACKAGE = "repeval_ref"
#: The repository whose history holds :data:`BEFORE_COMMIT`: this checkout.
REPO = Path(__file__).resolve().parent.parent
#: Modules of :data:`BEFORE_PACKAGE` the old command line imports under names the package
#: no longer has: old name -> the module (relative to the package) that holds those names.
RENAMED = {
    "noise": "uncertainty",
    "similarity": "cka",
    "geometry": "labelfree",
    "spectral": "labelfree",
    "manifold": "labelfree.intrinsic_dimension",
    "relational": "labelfree.relational",
}


class HistoryUnavailable(RuntimeError):
    """The old report cannot be taken from git: no git, no repository, or no such commit."""


def old_source(commit=BEFORE_COMMIT, repo=REPO, path=BEFORE_PATH):
    """Text of ``path`` at ``commit`` in the git repository ``repo``.

    Parameters
    ----------
    commit : str
        A commit (hash or any name git accepts).
    repo : str or path-like
        The repository's top folder. Git does not look above it for another repository.
    path : str
        The file's path inside the repository (POSIX).

    Returns
    -------
    str
        The file as committed.

    Raises
    ------
    ValueError
        If ``commit`` or ``path`` is not a non-empty string.
    HistoryUnavailable
        If ``repo`` is not a folder, git is not installed, ``repo`` is not a git repository,
        or the commit (or the file in it) is not in its history, as in a shallow clone.
    """
    if not isinstance(commit, str) or not commit.strip() or commit.startswith("-"):
        raise ValueError(f"commit must be a commit name, got {commit!r}")
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"path must be a file path inside the repository, got {path!r}")
    repo = Path(repo).resolve()
    if not repo.is_dir():
        raise HistoryUnavailable(f"{repo} is not a folder")
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(repo.parent), GIT_PAGER="cat", LC_ALL="C")
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), "show", f"{commit}:{path}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except FileNotFoundError:
        raise HistoryUnavailable("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise HistoryUnavailable(f"git show {commit}:{path} took over 120 s") from None
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise HistoryUnavailable(f"git show {commit}:{path} in {repo}: {why}")
    return proc.stdout


def _renamed_module(module, renamed):
    """``module`` (dotted, relative to the package) with its first component renamed."""
    head, dot, rest = module.partition(".")
    return renamed[head] + dot + rest if head in renamed else module


def _import_names(package, names, renamed):
    """``from package import a, b as c`` as statements, renamed modules taken from their homes."""
    groups = []
    for alias in names:
        bound = alias.asname or alias.name
        parent, _, leaf = _renamed_module(alias.name, renamed).rpartition(".")
        source = f"{package}.{parent}" if parent else package
        groups.append(f"from {source} import {leaf}" + (f" as {bound}" if leaf != bound else ""))
    return "; ".join(groups)


def absolute_imports(source, package=BEFORE_PACKAGE, renamed=None):
    """``source`` with its one-level relative imports made imports of ``package``.

    Parameters
    ----------
    source : str
        Python source of a module of ``package`` (``from .knn import x``, ``from . import y``).
    package : str
        The package the module belonged to.
    renamed : dict of str to str, optional
        Old submodule name -> the submodule of ``package`` that holds its names now (such as
        :data:`RENAMED`). Default: none renamed.

    Returns
    -------
    str
        The same source with ``from .knn import x`` as ``from package.knn import x`` and
        ``from . import y`` as ``from package import y``; a renamed module ``old`` becomes
        ``from package.new import x`` and ``from package import new as old`` (for a dotted
        ``new = a.b``, ``from package.a import b as old``). Nothing else changes.

    Raises
    ------
    ValueError
        If ``source`` does not parse, ``package`` is not a dotted name, ``renamed`` is not a
        mapping of module names, an import is relative by more than one level (the old
        command line had none), or a ``from . import`` of a renamed module spans lines.
    """
    if not isinstance(package, str) or not all(p.isidentifier() for p in package.split(".")):
        raise ValueError(f"package must be a dotted module name, got {package!r}")
    renamed = {} if renamed is None else renamed
    if not isinstance(renamed, dict) or not all(
        isinstance(k, str)
        and k.isidentifier()
        and isinstance(v, str)
        and all(p.isidentifier() for p in v.split("."))
        for k, v in renamed.items()
    ):
        raise ValueError(f"renamed must map module names to dotted module names, got {renamed!r}")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, TypeError) as exc:
        raise ValueError(f"source must be Python source: {exc}") from None
    lines = source.splitlines(keepends=True)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.level != 1:
                raise ValueError(f"source line {node.lineno}: an import {node.level} levels up")
            i = node.lineno - 1
            if node.module is None and any(a.name.split(".")[0] in renamed for a in node.names):
                if node.end_lineno != node.lineno:
                    raise ValueError(
                        f"source line {node.lineno}: an import of a renamed module "
                        "over several lines"
                    )
                line = lines[i]
                lines[i] = (
                    line[: node.col_offset]
                    + _import_names(package, node.names, renamed)
                    + line[node.end_col_offset :]
                )
                continue
            target = f"from {package}" + (
                f".{_renamed_module(node.module, renamed)}" if node.module else ""
            )
            head = re.compile(
                r"\bfrom\s+\." + (re.escape(node.module) + r"\b" if node.module else r"(?=\s)")
            )
            new = head.sub(target, lines[i], count=1)
            if new == lines[i]:
                raise ValueError(
                    f"source line {node.lineno}: the relative import is not on its first line"
                )
            lines[i] = new
    out = "".join(lines)
    left = [n.lineno for n in ast.walk(ast.parse(out)) if isinstance(n, ast.ImportFrom) and n.level]
    if left:
        raise ValueError(f"source lines {left}: relative imports that could not be rewritten")
    return out


def write_before(folder, commit=BEFORE_COMMIT, repo=REPO):
    """Rebuild the report of ``commit`` from git history as one module in ``folder``.

    Parameters
    ----------
    folder : str or path-like
        A temporary folder (created if missing).
    commit : str, default :data:`BEFORE_COMMIT`
    repo : str or path-like, default :data:`REPO`
        Where to look for ``commit``; see :func:`old_source`.

    Returns
    -------
    str
        Path of the written module, ``folder/report_before.py``; :func:`before` imports it.

    Raises
    ------
    HistoryUnavailable
        As in :func:`old_source`.
    """
    source = absolute_imports(old_source(commit, repo), renamed=RENAMED)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "report_before.py"
    target.write_text(source, encoding="utf-8")
    return str(target)


def load_before(module):
    """Import the module :func:`write_before` wrote (under the name ``report_before``).

    Raises
    ------
    ValueError
        If ``module`` is not a file, or it has no ``main``.
    """
    if not Path(module).is_file():
        raise ValueError(f"module must be the file write_before wrote, got {module!r}")
    spec = importlib.util.spec_from_file_location("report_before", module)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    if not callable(getattr(mod, "main", None)):
        raise ValueError(f"module {module!r} has no main()")
    return mod


def make_data(tmp, n_train, n_test, d, n_classes, noise=4.0, rank=48, seed=0):
    """Clustered float32 features written as ``train.npz`` and ``test.npz`` in ``tmp``.

    Class centres live in a ``rank``-dimensional subspace, and every row adds isotropic
    Gaussian noise of scale ``noise`` in all ``d`` dimensions, which gives a spectrum
    with a visible bend and a k-NN accuracy well between chance and 100 %.
    """
    rng = np.random.default_rng(seed)
    rank = min(rank, d)
    basis = np.linalg.qr(rng.standard_normal((d, rank)))[0]  # (d, rank), orthonormal
    centres = (rng.standard_normal((n_classes, rank)) * 3.0) @ basis.T
    paths = {}
    for name, n in (("train", n_train), ("test", n_test)):
        y = np.arange(n) % n_classes  # balanced: every class in both files
        rng.shuffle(y)
        X = (centres[y] + noise * rng.standard_normal((n, d))).astype(np.float32)
        path = Path(tmp) / f"report_{name}.npz"
        np.savez(path, features=X, labels=y)
        paths[name] = str(path)
    return paths


def _summary(rep):
    curve = {str(e["k"]): e["correct"] for e in rep["knn"]["curve"]}
    probe = rep["linear_probe"]
    return {
        "knn_correct": curve,
        "probe_C": probe["best_C"],
        "probe_accuracy": probe["accuracy"],
        "n_test": rep["inputs"]["n_test"],
    }


def _runner(main, paths, out):
    def work():
        with contextlib.redirect_stdout(io.StringIO()):
            rc = main(["report", paths["train"], paths["test"], "--out", out, "--quiet"])
        if rc != 0:
            raise RuntimeError(f"report exited with status {rc}")
        return _summary(json.loads((Path(out) / "report.json").read_text()))

    return work


def before(paths, out, module):
    """The competitor: ``main`` of the module :func:`write_before` wrote, on ``paths``."""
    return _runner(load_before(module).main, paths, out)


def repeval(paths, out):
    """The subject: today's :func:`repeval_ref.cli.main` on ``paths``."""
    from repeval_ref.cli import main

    return _runner(main, paths, out)
