# repeval: one entry point for set-up, book, tests and benchmarks.
# Everything is installed into .venv from pyproject.toml, pinned by constraints.txt.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: venv data test book bench bench-class clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[book,grading,dev,bench,zoo]"
	touch $(STAMP)

venv: $(STAMP)

# Fashion-MNIST: the four gzipped idx files of Debian's dataset-fashion-mnist, read from
# $REPEVAL_DATA when set, else from where the package puts them. When they are missing,
# a root shell with apt-get installs the package; otherwise this says how to place the
# files and fails. (repeval_ref.datasets checks their SHA-256 when it reads them.)
FASHION_DIR   := $(or $(REPEVAL_DATA),/usr/share/datasets/fashion-mnist)
FASHION_FILES := train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz \
                 t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz
FASHION_HINT  := place the four files of https://github.com/zalandoresearch/fashion-mnist \
                 ($(FASHION_FILES)) in one directory and set REPEVAL_DATA to it

data:
	@missing=""; for f in $(FASHION_FILES); do \
	  test -f "$(FASHION_DIR)/$$f" || test -f "$(FASHION_DIR)/$${f%.gz}" || missing="$$missing $$f"; \
	done; \
	if [ -z "$$missing" ]; then echo "Fashion-MNIST: the four files are in $(FASHION_DIR)"; exit 0; fi; \
	echo "Fashion-MNIST: missing in $(FASHION_DIR):$$missing"; \
	if [ -n "$(REPEVAL_DATA)" ]; then echo "REPEVAL_DATA is set: $(FASHION_HINT)"; exit 1; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y dataset-fashion-mnist \
	    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y dataset-fashion-mnist; } \
	    || exit 1; \
	  for f in $(FASHION_FILES); do test -f "$(FASHION_DIR)/$$f" || { echo "still missing: $$f"; exit 1; }; done; \
	else \
	  echo "to install them run: sudo apt-get install dataset-fashion-mnist (Debian/Ubuntu)"; \
	  echo "or $(FASHION_HINT)"; exit 1; \
	fi

# The suite includes the browser test of the built book, so the book is built first.
test: $(STAMP) data book
	$(PY) -m pytest -q

# Executes every chapter (cached in _build/.jupyter_cache: an unchanged rebuild only
# re-renders) and writes _build/html. Any cell error or Sphinx warning fails the build;
# a failed build drops Sphinx's saved environment so the next run re-reads every page
# (otherwise the warnings of unchanged pages would not be reported again).
book: $(STAMP) data
	$(VENV)/bin/jupyter-book build . --warningiserror --nitpick --keep-going \
	  || { rm -rf _build/.doctrees; exit 1; }

# Benchmarks compare with faiss-cpu and scikit-learn (the bench extra, installed with the rest
# so that the harness test in `make test` runs it in quick mode). `make bench` grades a class
# of 2 students; `make bench-class` re-measures only the autograder row with the issue's class
# of 20 students (roughly half an hour: serially and with 2 workers) and merges that row into
# benchmarks/results.json, keeping the other rows.
bench: $(STAMP) data
	$(PY) -m benchmarks.run

bench-class: $(STAMP)
	$(PY) -m benchmarks.run --rows autograder --students 20 --reps 1 --merge

clean:
	rm -rf _build

# ---------------------------------------------------------------------------------------
# Exercises and grading (autograder/; nbgrader 0.9). See book/instructors.md.
#   make check NB=exercises/knn/knn_classify.ipynb          student: visible tests + validate
#   make exercises                                          specs -> solutions/ -> exercises/
#   make roster ROSTER=students.csv                         bulk-import the class
#   make grade SUBMISSIONS=submissions/ GRADES=grades.csv   collect, autograde, feedback, export
# COURSE is the grading course directory (default: course/, never committed).
# WORKERS=N (autograde, grade) grades N students at a time, one nbgrader process and kernel
# each (default 1: the whole class in one nbgrader run); the grades are the same.
# ---------------------------------------------------------------------------------------
AUTOGRADER  = $(PY) -m autograder --course $(COURSE) --timeout $(CELL_TIMEOUT)
COURSE      ?= course
CELL_TIMEOUT ?= 60
SUBMISSIONS ?= submissions
GRADES      ?= grades.csv
ROSTER      ?= roster.csv
WORKERS     ?= 1
NB          ?=

.PHONY: check exercises release-exercises course roster collect autograde feedback grades grade

check: $(STAMP)
	@test -n "$(NB)" || { echo "usage: make check NB=exercises/<chapter>/<name>.ipynb"; exit 2; }
	$(AUTOGRADER) check $(NB)

exercises: $(STAMP)
	$(AUTOGRADER) build
	$(AUTOGRADER) release

release-exercises: $(STAMP)
	$(AUTOGRADER) release

course: $(STAMP)
	$(AUTOGRADER) setup

roster: $(STAMP)
	$(AUTOGRADER) roster $(ROSTER)

collect: $(STAMP)
	$(AUTOGRADER) collect $(SUBMISSIONS)

autograde: $(STAMP)
	$(AUTOGRADER) autograde --workers $(WORKERS)

feedback: $(STAMP)
	$(AUTOGRADER) feedback

grades: $(STAMP)
	$(AUTOGRADER) export $(GRADES)

grade: $(STAMP)
	$(AUTOGRADER) grade-all $(SUBMISSIONS) $(GRADES) --workers $(WORKERS)
