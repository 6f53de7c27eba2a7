"""Sphinx extension: the interview deck as a download of the built book.

Book plumbing, not course material. Listed as ``repeval_book.sphinx_deck`` under
``sphinx.extra_extensions`` in ``_config.yml``. When an HTML build finishes without an
error, it

1. refreshes ``book/_data/interview_glue.json`` (:mod:`repeval_book.glued_values`) from
   the chapters the build executed, when every value the interview answers quote is there
   (a changed file shows in ``git status``, to be committed with the chapter that changed
   the number), and
2. writes the Anki deck from that file to ``<outdir>/_static/repeval-interview.apkg``,
   which ``book/interview.md`` links as ``../_static/repeval-interview.apkg``.
"""

from __future__ import annotations

from pathlib import Path

DECK_FILE = "repeval-interview.apkg"


def write_book_deck(app, exception):
    """``build-finished`` handler: refresh the committed values, write the deck."""
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.util import logging

    from .glued_values import VALUES_PATH, read_values, refresh
    from .interview import collect_questions
    from .interview_deck import write_deck

    logger = logging.getLogger(__name__)
    root = Path(app.srcdir)
    build = Path(app.outdir).parent  # jupyter-book writes html into <build>/html
    changed, missing = refresh(root, build)
    if missing:
        logger.warning(
            "interview deck: the executed chapters lack %d quoted values (%s); "
            "%s was left as it was",
            len(missing),
            ", ".join(missing[:5]),
            VALUES_PATH,
        )
    elif changed:
        logger.info("interview deck: %s refreshed from the executed chapters", VALUES_PATH)
    target = Path(app.outdir) / "_static" / DECK_FILE
    values = read_values(root / VALUES_PATH)
    n = write_deck(collect_questions(root), target, values, "placeholder" if missing else "raise")
    logger.info("interview deck: %s (%d notes)", target, n)


def setup(app):
    app.connect("build-finished", write_book_deck)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
