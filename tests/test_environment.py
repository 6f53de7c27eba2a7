"""The conda environment file lists the same dependencies as pyproject.toml, and the
install pins (constraints.txt) stay out of the metadata users install."""
from __future__ import annotations

import re
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
        if item.endswith(":") or item.startswith("-e") or item == "pip":
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
