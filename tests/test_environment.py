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
        if item.endswith(":") or item.startswith("-") or item == "pip":   # -e ., --extra-index-url
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
        assert env[name] == spec, f"{name}: pyproject says {spec!r}, environment.yml says {env[name]!r}"


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
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "grading" in extras and any(_name(r) == "nbgrader" for r in extras["grading"])
    student = _pip_lines(_dry_run("venv-student").stdout)
    assert len(student) == 1 and '-e ".[grading]"' in student[0] and "-c constraints.txt" in student[0]
    full = _pip_lines(_dry_run("venv").stdout)
    installed = re.search(r'"\.\[([^\]]*)\]"', full[-1]).group(1).split(",")
    assert "grading" in installed and "book" in installed
    # `make check` (what students run) needs only the student install, which the full one implies
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^check:\s*\$\(STUDENT_STAMP\)\s*$", makefile, flags=re.M)
    full_rule = re.search(r"^\$\(STAMP\):.*\n((?:\t.*\n)+)", makefile, flags=re.M).group(1)
    assert "$(STUDENT_STAMP)" in full_rule.splitlines()[-1] and "touch" in full_rule.splitlines()[-1]


def test_install_variants_are_named_for_users():
    readme = (ROOT / "README.md").read_text()
    students = (ROOT / "book" / "students.md").read_text()
    for text, where in ((readme, "README.md"), (students, "book/students.md")):
        assert "make venv-student" in text, f"{where} does not name the light install"
        assert "TORCH=cpu" in text, f"{where} does not name the CPU-only install"
