"""The glued numbers that the interview answers quote, kept in one committed file.

Book plumbing, not course material. An interview answer may quote a number that its
chapter computes (a myst-nb ``{glue:text}`` role). The book reads such numbers from the
executed chapters; the Anki deck (``make deck``) reads them from
``book/_data/interview_glue.json`` instead, so that the deck is written without executing
any chapter. The book build refreshes that file from the executed chapters
(:mod:`repeval_book.sphinx_deck`), and the tests compare it with a built book, so it cannot
drift from the chapters unnoticed.

The file maps each chapter's document name to the plain-text form (``text/plain``) of
every value its questions and answers glue::

    {"book/knn": {"knn_factor": "4.172733883598094", ...}, ...}
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = [
    "VALUES_PATH",
    "GLUE_ROLE",
    "glue_key",
    "used_keys",
    "values_from_build",
    "read_values",
    "write_values",
    "refresh",
]

#: Where the values live, relative to the book's root.
VALUES_PATH = "book/_data/interview_glue.json"

#: A myst-nb glue role and its argument (``key``, ``key:fmt``, ``doc.md::key:fmt``).
GLUE_ROLE = re.compile(r"\{(glue(?::[a-z]+)?)\}`([^`]+)`")


def glue_key(role, arg):
    """The glued key that a glue role's argument names (format and document removed).

    Parameters
    ----------
    role : str
        ``"glue"``, ``"glue:text"``, ``"glue:md"``, ...
    arg : str
        The role's argument: ``key``, ``key:fmt`` or ``doc.md::key:fmt``.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``role`` is not a glue role or ``arg`` is not a non-empty str.
    """
    if not isinstance(role, str) or not role.startswith("glue"):
        raise ValueError(f"role must be a glue role, got {role!r}")
    if not isinstance(arg, str) or not arg:
        raise ValueError(f"arg must be a non-empty str, got {arg!r}")
    key = arg.split("::")[-1]
    return key.partition(":")[0] if role == "glue:text" else key


def used_keys(questions):
    """The glued keys each chapter's questions and answers quote.

    Parameters
    ----------
    questions : sequence of repeval_book.interview.Question

    Returns
    -------
    dict of str -> list of str
        Document name -> sorted keys, only for chapters that quote at least one.

    Raises
    ------
    ValueError
        If ``questions`` is a string or holds something without ``docname``, ``question``,
        ``answer`` and ``section``.
    """
    if isinstance(questions, (str, bytes)):
        raise ValueError("questions must be a sequence of Question")
    out = {}
    for q in questions:
        try:
            texts = (q.question, q.answer, q.section)
            doc = q.docname
        except AttributeError as err:
            raise ValueError(f"questions must hold Question objects, got {q!r}") from err
        for text in texts:
            for role, arg in GLUE_ROLE.findall(text):
                out.setdefault(doc, set()).add(glue_key(role, arg))
    return {doc: sorted(keys) for doc, keys in sorted(out.items())}


def values_from_build(questions, build_dir):
    """The quoted values as the executed chapters of a built book hold them.

    Parameters
    ----------
    questions : sequence of repeval_book.interview.Question
    build_dir : str or path-like
        The book's build directory (``_build``); myst-nb writes each executed chapter's
        glued values to ``<build_dir>/jupyter_execute/<docname>.glue.json``.

    Returns
    -------
    values : dict of str -> dict of str -> str
        Document name -> key -> ``text/plain`` of the glued value.
    missing : list of str
        ``"<docname>::<key>"`` for each quoted key the build does not hold.

    Raises
    ------
    ValueError
        If ``build_dir`` is not a directory.
    """
    build = Path(build_dir)
    if not build.is_dir():
        raise ValueError(f"build_dir must be a directory, got {str(build_dir)!r}")
    values, missing = {}, []
    for doc, keys in used_keys(questions).items():
        path = build / "jupyter_execute" / f"{doc}.glue.json"
        glued = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        values[doc] = {}
        for key in keys:
            if key in glued and "text/plain" in glued[key].get("data", {}):
                values[doc][key] = glued[key]["data"]["text/plain"]
            else:
                missing.append(f"{doc}::{key}")
    return values, missing


def read_values(path):
    """Read a values file written by :func:`write_values`.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    dict of str -> dict of str -> str

    Raises
    ------
    ValueError
        If the file does not exist or does not map names to mappings of strings.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"path must be an existing values file, got {str(path)!r}")
    data = json.loads(p.read_text(encoding="utf-8"))
    ok = isinstance(data, dict) and all(
        isinstance(v, dict) and all(isinstance(x, str) for x in v.values()) for v in data.values()
    )
    if not ok:
        raise ValueError(f"path must hold a mapping of documents to glued strings: {p}")
    return data


def _dump(values):
    return json.dumps(values, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_values(values, path):
    """Write ``values`` as sorted, indented JSON (stable diffs); create the folder.

    Parameters
    ----------
    values : dict of str -> dict of str -> str
    path : str or path-like

    Returns
    -------
    bool
        Whether the file changed.

    Raises
    ------
    ValueError
        If ``values`` is not a mapping of documents to mappings of strings.
    """
    if not isinstance(values, dict) or not all(
        isinstance(v, dict) and all(isinstance(x, str) for x in v.values()) for v in values.values()
    ):
        raise ValueError("values must map document names to mappings of key -> str")
    p = Path(path)
    text = _dump(values)
    if p.is_file() and p.read_text(encoding="utf-8") == text:
        return False
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return True


def refresh(root, build_dir):
    """Rewrite ``<root>/book/_data/interview_glue.json`` from a built book.

    Parameters
    ----------
    root : str or path-like
        The book's root directory (holding ``_toc.yml``).
    build_dir : str or path-like
        Its build directory.

    Returns
    -------
    changed : bool
        Whether the file was rewritten (never when a value is missing).
    missing : list of str
        Quoted keys the build does not hold (see :func:`values_from_build`).

    Raises
    ------
    ValueError
        If ``root`` has no ``_toc.yml`` or ``build_dir`` is not a directory.
    """
    from .interview import collect_questions

    values, missing = values_from_build(collect_questions(root), build_dir)
    if missing:
        return False, missing
    return write_values(values, Path(root) / VALUES_PATH), []


def main(argv=None):
    """``python -m repeval_book.glued_values [--root .] [--build _build] [--check]``."""
    import argparse

    parser = argparse.ArgumentParser(
        description="Refresh (or, with --check, compare) the interview answers' glued values."
    )
    parser.add_argument("--root", default=".")
    parser.add_argument("--build", default="_build")
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    args = parser.parse_args(argv)
    path = Path(args.root) / VALUES_PATH
    if args.check:
        from .interview import collect_questions

        values, missing = values_from_build(collect_questions(args.root), args.build)
        same = not missing and path.is_file() and read_values(path) == values
        print(f"{path}: {'up to date' if same else 'differs from the build'}")
        raise SystemExit(0 if same else 1)
    changed, missing = refresh(args.root, args.build)
    if missing:
        raise SystemExit(f"the build lacks {len(missing)} glued values: {', '.join(missing)}")
    print(f"{path}: {'rewritten' if changed else 'unchanged'}")


if __name__ == "__main__":
    main()
