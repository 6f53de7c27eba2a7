# repeval: one entry point for set-up, book, tests and benchmarks.
# Everything is installed into .venv from pyproject.toml, pinned by constraints.txt.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: venv test book bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[book,grading,dev]"
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . --warningiserror --nitpick --keep-going

bench: $(STAMP)
	$(PY) -m benchmarks.run

clean:
	rm -rf _build
