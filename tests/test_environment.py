"""The conda environment file lists the same dependencies as pyproject.toml, and the
install pins (constraints.txt) stay out of the metadata users install."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import pytest

    tomllib = pytest.importorskip("tomli")
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject_requirements() -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in meta["optional-dependencies"].values():
        reqs.extend(extra)
    return {_name(r): r.replace(" ", "") for r in reqs}


def _environment_requirements() -> dict[str, str]:
    """Parse environment.yml's conda and pip lists without a YAML dependency."""
    found = {}
    text = (ROOT / "environment.yml").read_text()
    for line in text.split("\ndependencies:", 1)[1].splitlines():
        m = re.match(r"^\s*-\s+(\S.*)$", line)
        if not m:
            continue
        item = m.group(1).split("#")[0].strip()
        if item.endswith(":") or item.startswith("-") or item == "pip":  # -e ., --extra-index-url
            continue
        name = _name(item)
        if name == "python":
            continue
        # conda spells "numpy>=1.24" the same way pip does
        found[name] = item.replace(" ", "")
    return found


def test_environment_yml_matches_pyproject():
    py = _pyproject_requirements()
    env = _environment_requirements()
    assert set(env) == set(py), (
        f"only in pyproject.toml: {sorted(set(py) - set(env))}; "
        f"only in environment.yml: {sorted(set(env) - set(py))}"
    )
    for name, spec in py.items():
        assert env[name] == spec, (
            f"{name}: pyproject says {spec!r}, environment.yml says {env[name]!r}"
        )


def test_torch_is_pinned_only_by_the_constraints_file():
    py = _pyproject_requirements()
    assert "==" not in py["torch"], "the package metadata must not pin torch exactly"
    constraints = (ROOT / "constraints.txt").read_text()
    assert re.search(r"^torch==2\.13\.0$", constraints, flags=re.M)
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in makefile


def test_readme_opens_with_the_two_commands_and_ci_calls_the_test_one():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", readme, flags=re.S).group(1)
    commands = [ln.split("#")[0].strip() for ln in block.splitlines() if ln.strip()]
    assert commands == ["make book", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^\s*make test\s*$", ci, flags=re.M)


def test_top_level_exports_resolve():
    import repeval_ref

    for name in repeval_ref._EXPORTS:
        module = repeval_ref._EXPORTS[name]
        path = ROOT / "repeval_ref" / (module.replace(".", "/"))
        if not (path.with_suffix(".py").exists() or (path / "__init__.py").exists()):
            raise AssertionError(f"{name} maps to missing module repeval_ref.{module}")
        assert callable(getattr(repeval_ref, name)), name


# --------------------------------------------------------------------------- install variants
def _dry_run(*args: str) -> subprocess.CompletedProcess:
    """`make -n -B ARGS`: the commands make would run, whatever is installed already."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    return subprocess.run(["make", "-n", "-B", *args], cwd=ROOT, capture_output=True, text=True)


def _pip_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if "pip install" in ln]


def test_cpu_torch_comes_from_the_pytorch_cpu_index_only_when_asked():
    makefile = (ROOT / "Makefile").read_text()
    index = re.search(r"^TORCH_INDEX\s*:=\s*(\S+)", makefile, flags=re.M).group(1)
    assert index == "https://download.pytorch.org/whl/cpu"
    for target in ("venv", "venv-student"):
        cpu = _pip_lines(_dry_run(target, "TORCH=cpu").stdout)
        plain = _pip_lines(_dry_run(target).stdout)
        # with TORCH=cpu: torch alone from the CPU index, first, pinned by the constraints
        assert f"--index-url {index}" in cpu[0] and cpu[0].split()[-1] == "torch"
        assert "-c constraints.txt" in cpu[0] and len(cpu) == len(plain) + 1
        assert cpu[1:] == plain and not any(index in ln for ln in plain)
    bad = _dry_run("venv", "TORCH=cuda")
    assert bad.returncode != 0 and "TORCH must be empty or cpu" in bad.stderr
    # the conda file makes the same choice for pip's torch (Binder has no GPU)
    env = (ROOT / "environment.yml").read_text()
    assert re.search(rf"^\s*-\s+--extra-index-url {re.escape(index)}\s*$", env, flags=re.M)


def test_student_install_is_the_package_and_grading_only():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert "grading" in extras and any(_name(r) == "nbgrader" for r in extras["grading"])
    student = _pip_lines(_dry_run("venv-student").stdout)
    assert (
        len(student) == 1 and '-e ".[grading]"' in student[0] and "-c constraints.txt" in student[0]
    )
    full = _pip_lines(_dry_run("venv").stdout)
    installed = re.search(r'"\.\[([^\]]*)\]"', full[-1]).group(1).split(",")
    assert "grading" in installed and "book" in installed
    # `make check` (what students run) needs only the student install, which the full one implies
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^check:\s*\$\(STUDENT_STAMP\)\s*$", makefile, flags=re.M)
    full_rule = re.search(r"^\$\(STAMP\):.*\n((?:\t.*\n)+)", makefile, flags=re.M).group(1)
    assert (
        "$(STUDENT_STAMP)" in full_rule.splitlines()[-1] and "touch" in full_rule.splitlines()[-1]
    )


def test_install_variants_are_named_for_users():
    readme = (ROOT / "README.md").read_text()
    students = (ROOT / "book" / "students.md").read_text()
    for text, where in ((readme, "README.md"), (students, "book/students.md")):
        assert "make venv-student" in text, f"{where} does not name the light install"
        assert "TORCH=cpu" in text, f"{where} does not name the CPU-only install"


# --------------------------------------------------------------------------- what the book imports
# top-level module -> the distribution that provides it, where the two names differ
_DISTRIBUTION = {
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "PIL": "pillow",
    "myst_nb": "jupyter-book",
    "IPython": "ipykernel",
    "yaml": "pyyaml",
    "pytrec_eval": "pytrec-eval-terrier",
    "faiss": "faiss-cpu",
    "skdim": "scikit-dimension",
}


def _book_imports() -> dict[str, set[str]]:
    """Top-level modules imported by the code cells of book/*.md -> the pages importing them."""
    import ast
    import sys

    found: dict[str, set[str]] = {}
    for page in sorted((ROOT / "book").glob("*.md")):
        text = page.read_text()
        for cell in re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", text, flags=re.M | re.S):
            cell = re.sub(r"\A---\n.*?\n---\n", "", cell, flags=re.S)  # cell metadata
            cell = "\n".join(ln for ln in cell.splitlines() if not ln.startswith(":"))
            for node in ast.walk(ast.parse(cell)):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in (
                        "repeval_ref",
                        "repeval_book",
                    ):
                        found.setdefault(top, set()).add(page.name)
    return found


def _declared(groups=("core", "book")) -> dict[str, list[str]]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"]) if "core" in groups else []
    for group in groups:
        if group != "core":
            reqs.extend(meta["optional-dependencies"][group])
    out: dict[str, list[str]] = {}
    for r in reqs:
        out.setdefault(_name(r), []).append(r.split(";")[0].replace(" ", ""))
    return out


def _minimum(specs: list[str]) -> tuple[int, ...]:
    """The strictest lower bound (>=) among the specifiers of one distribution."""
    lows = [
        tuple(int(p) for p in m.split(".")) for s in specs for m in re.findall(r">=([\d.]+)", s)
    ]
    return max(lows, default=(0,))


def test_every_module_the_book_imports_is_declared_for_the_book():
    declared = _declared()
    imports = _book_imports()
    assert {"pandas", "sklearn", "numpy"} <= set(imports), imports  # the scan sees the cells
    missing = {
        mod: sorted(pages)
        for mod, pages in imports.items()
        if _DISTRIBUTION.get(mod, mod).lower() not in declared
    }
    assert not missing, (
        f"imported by the book but declared neither in core nor in the book extra: {missing}"
    )


def test_the_book_extra_asks_for_the_scikit_learn_its_solver_needs():
    # multinomial logistic regression with solver="newton-cholesky" exists from scikit-learn 1.6;
    # older versions fall back to one-vs-rest and the invariance page's numbers change
    pages = [p.name for p in (ROOT / "book").glob("*.md") if "newton-cholesky" in p.read_text()]
    assert pages, "no page uses the newton-cholesky solver any more: revisit this minimum"
    assert _minimum(_declared(("book",))["scikit-learn"]) >= (1, 6)
    env = (ROOT / "environment.yml").read_text()
    assert re.search(r"^\s*-\s+scikit-learn>=1\.6\b", env, flags=re.M)


def test_installed_versions_meet_the_declared_minimums_of_the_book():
    from importlib import metadata

    short = []
    for name, specs in _declared().items():
        low = _minimum(specs)
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # an extra not installed here (the test is about the book)
        parts = tuple(int(p) for p in re.findall(r"\d+", have)[: len(low)])
        if parts < low:
            short.append(f"{name} {have} < {'.'.join(map(str, low))}")
    assert not short, short


@pytest.mark.slow
def test_make_check_takes_a_file_name_with_spaces_parentheses_and_quotes(tmp_path):
    """LMS downloads are named like "fold_batchnorm (1).ipynb": `make check NB=...` passes
    the path to the checker as one word, whatever it holds."""
    folder = tmp_path / "my work"
    folder.mkdir()
    nb = folder / "fold_batchnorm (1) it's mine.ipynb"
    shutil.copy(ROOT / "exercises" / "batchnorm" / "fold_batchnorm.ipynb", nb)
    out = subprocess.run(
        ["make", "-s", "check", f"NB={nb}"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    text = out.stdout + out.stderr
    assert "SCORE: visible tests 0 / 2" in text, text  # the blank notebook was checked
    assert "still the stub" in text and "No such file" not in text, text
    for var in ("ROSTER", "SUBMISSIONS", "GRADES", "COURSE"):
        dry = _dry_run("grade" if var != "ROSTER" else "roster", f"{var}=a b's (1)")
        assert dry.returncode == 0, dry.stderr
        assert "'a b'\\''s (1)'" in dry.stdout, (var, dry.stdout)
