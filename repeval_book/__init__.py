"""repeval_book: the tooling of the course book, beside the reference package.

Nothing here is course material. The formulas live in :mod:`repeval_ref`; this package
only serves the book that is built from ``book/`` with Jupyter Book, and it may import
:mod:`repeval_ref`, never the other way round.

Modules
-------
:mod:`repeval_book.glue`
    :func:`~repeval_book.glue.glue_all` hands a chapter's numbers to the prose (myst-nb's
    ``glue``); the colour-blind-safe palette, markers and line styles of every figure.
:mod:`repeval_book.phrasing`
    Sentences built from values that read right for zero, one and many (counts, lists,
    ranges, differences) and numbers written as a reader writes them.
:mod:`repeval_book.suite_sentences`
    The counted sentences of the suite and encoder chapters, built on ``phrasing``.
:mod:`repeval_book.bench_tables`
    The performance appendix's tables, read from the committed benchmark files.
:mod:`repeval_book.interactive`
    Interactive figures made of precomputed Plotly frames (no kernel, no network).
:mod:`repeval_book.interview`
    The chapters' interview questions, gathered for ``book/interview.md`` and written as an
    Anki package by ``python -m repeval_book.interview OUT.apkg`` (``make deck``).
:mod:`repeval_book.interview_deck`
    The same questions as an Anki deck, written from the committed glued values without
    executing any chapter.
:mod:`repeval_book.glued_values`
    The glued numbers the interview answers quote, kept in ``book/_data/interview_glue.json``.
:mod:`repeval_book.exercise_index`
    The index of graded exercise notebooks shown in ``book/exercises.md``.
:mod:`repeval_book.sphinx_ext`
    Sphinx extension: plotly.js from ``_static``, the Colab notebooks with their set-up
    cell, an accessible hide-input toggle.
:mod:`repeval_book.sphinx_generated_pages`
    Sphinx extension: re-reads the generated interview and exercise pages on every build.
:mod:`repeval_book.sphinx_deck`
    Sphinx extension: refreshes the committed glued values and writes the deck as a
    download of the built book.

The extensions are listed by module name under ``sphinx.extra_extensions`` in
``_config.yml``. The modules import what only the ``book`` extra installs (myst-nb, plotly,
genanki, ...) inside the functions that need it, so ``import repeval_book.<module>`` works
where only the reference package is installed.
"""
