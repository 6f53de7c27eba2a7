"""Sphinx extension: re-read the generated pages whenever the book is rebuilt.

``book/interview.md`` and ``book/exercises.md`` are built from other files (the chapters'
interview questions, the exercise notebooks) that Sphinx does not know they depend on, so
an edited question would otherwise leave a stale page behind until the page itself changed.
Both pages set ``execution_mode: force`` for the same reason on the myst-nb side.
"""

GENERATED = ("book/interview", "book/exercises")


def _always_outdated(app, env, added, changed, removed):
    return [doc for doc in GENERATED if doc in env.found_docs]


def setup(app):
    app.connect("env-get-outdated", _always_outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
