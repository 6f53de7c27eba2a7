# repeval: one entry point for set-up, book, tests and benchmarks.
# Everything is installed into .venv from pyproject.toml, pinned by constraints.txt.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
STUDENT_STAMP := $(VENV)/.student-stamp

# TORCH=cpu takes torch from PyTorch's CPU wheel index instead of PyPI, whose Linux wheel is
# the multi-GB CUDA build: `make venv TORCH=cpu` (or `make venv-student TORCH=cpu`) on a
# fresh clone. Only torch (and what it needs) comes from that index, pinned by
# constraints.txt like everything else. Leave it empty where pip already finds a CPU wheel
# (the course machines). conda users: environment.yml (pytorch channel, cpuonly).
TORCH       ?=
TORCH_INDEX := https://download.pytorch.org/whl/cpu
ifneq ($(filter-out cpu,$(TORCH)),)
$(error TORCH must be empty or cpu, got "$(TORCH)")
endif
define make_venv
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH),$(PY) -m pip install --quiet -c constraints.txt --index-url $(TORCH_INDEX) torch)
endef

# ranx (the test suite's trec_eval-style cross-check) compiles its metrics with numba on
# first use, about a minute on 2 cores; numba caches the machine code next to ranx in the
# venv, so it is compiled once here, at install time, on the test's own input.
WARM_NUMBA = $(PY) tests/helpers/ranx_case.py

.PHONY: venv venv-student data data-extra lint test test-fast test-blas book bench bench-class bench-term clean axe publish zoo zoo-table calibration deck studies

# Everything: the package and the book, grading, test and benchmark tool chains.
$(STAMP): pyproject.toml constraints.txt
	$(make_venv)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[book,grading,dev,bench,zoo,suite]"
	$(WARM_NUMBA)
	touch $(STAMP) $(STUDENT_STAMP)

venv: $(STAMP)

# Students who only check their exercises: the package and nbgrader (the grading extra);
# no book tool chain, no test or benchmark libraries. `make check` needs no more than this.
$(STUDENT_STAMP): pyproject.toml constraints.txt
	$(make_venv)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[grading]"
	touch $(STUDENT_STAMP)

venv-student: $(STUDENT_STAMP)

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

# Optional data of the transfer suite (repeval_ref.datasets.transfer): OpenCV's 5,000
# hand-written digits (digits.png), shipped by Debian's opencv-doc (about 96 MB to
# download, 270 MB installed, hence not part of `make data`). Read from
# $REPEVAL_DATA/digits.png when that exists, else from where the package puts it; a root
# shell with apt-get installs the package, otherwise this says how and fails. Without it
# the suite skips the opencv_digits task. (The loader checks the pixels' SHA-256.)
OPENCV_DIGITS := /usr/share/doc/opencv-doc/examples/data/digits.png

data-extra:
	@if [ -n "$(REPEVAL_DATA)" ] && [ -f "$(REPEVAL_DATA)/digits.png" ]; then \
	  echo "OpenCV digits: $(REPEVAL_DATA)/digits.png"; exit 0; fi; \
	if [ -f "$(OPENCV_DIGITS)" ]; then echo "OpenCV digits: $(OPENCV_DIGITS)"; exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends opencv-doc \
	    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends opencv-doc; } \
	    || exit 1; \
	  test -f "$(OPENCV_DIGITS)" || { echo "still missing: $(OPENCV_DIGITS)"; exit 1; }; \
	  echo "OpenCV digits: $(OPENCV_DIGITS)"; \
	else \
	  echo "OpenCV digits: missing; run: sudo apt-get install opencv-doc (Debian/Ubuntu)"; \
	  echo "or copy samples/data/digits.png of https://github.com/opencv/opencv into a directory and set REPEVAL_DATA to it"; \
	  exit 1; \
	fi

# The suite includes the browser test of the built book, so the book is built first.
# It runs on TEST_WORKERS processes (pytest-xdist), one test file at a time per worker,
# so a module's shared fixture (a graded class, a browser) is made once. TEST_WORKERS=0 runs it in this process, serially.
# test-fast leaves out the end-to-end tests marked slow (graded classes, the browser, real
# zoo runs) and needs no built book: the loop a contributor runs between changes.
# The project's modules are byte-compiled first (only what changed): the suite starts
# hundreds of processes (commands, nbgrader runs, kernels running the hidden checks) that
# import them, and an environment with PYTHONDONTWRITEBYTECODE set (as on the course
# machine) would otherwise compile them from source in every one. The suite itself may
# write its caches (pytest's rewritten test modules), so a second run starts sooner.
TEST_WORKERS ?= 2
PYTEST = PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
COMPILE = $(PY) -m compileall -q repeval_ref repeval_book autograder benchmarks

# ruff, pinned in constraints.txt, with the settings of pyproject.toml: the linter, then the
# formatter's check (it rewrites nothing; `.venv/bin/ruff format FILE` does). CI's first stage.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: $(STAMP) data book axe
	$(COMPILE)
	$(PYTEST)

test-fast: $(STAMP) data
	$(COMPILE)
	$(PYTEST) -m "not slow"

# The tests that recompute a committed result (marked `recompute`: the zoo's manifest and
# table, the plateau evidence, the calibration record) once under each OpenBLAS kernel of
# BLAS_KERNELS: another kernel sums in another order, as another processor would, and each
# test's tolerance comes from the computation's own variability. Writes one JUnit file per
# kernel into _build/test-blas/ and prints the largest deviation of each committed quantity.
BLAS_KERNELS ?= Sandybridge Haswell Zen
test-blas: $(STAMP) data
	$(COMPILE)
	@mkdir -p _build/test-blas
	@for k in $(BLAS_KERNELS); do \
	  echo "== OPENBLAS_CORETYPE=$$k"; \
	  OPENBLAS_CORETYPE=$$k $(PYTEST) -m recompute --junitxml=_build/test-blas/$$k.xml || exit 1; \
	done
	$(PY) tests/helpers/deviations.py $(foreach k,$(BLAS_KERNELS),_build/test-blas/$(k).xml)

# axe-core (Deque's accessibility rule engine, MPL-2.0) for the browser test of the built
# book, from the npm registry into .node/ (ignored by git); needs node and npm.
AXE_VERSION := 4.14.1
AXE_JS      := .node/node_modules/axe-core/axe.min.js

$(AXE_JS):
	npm install --prefix .node --no-save --no-package-lock --no-audit --no-fund axe-core@$(AXE_VERSION)

axe: $(AXE_JS)

# Executes every chapter (cached in _build/.jupyter_cache: an unchanged rebuild only
# re-renders) and writes _build/html. Any cell error or Sphinx warning fails the build;
# a failed build drops Sphinx's saved environment so the next run re-reads every page
# (otherwise the warnings of unchanged pages would not be reported again).
# The build's output is also kept in _build/book-build.log; when the build fails, its
# warnings and errors are printed again at the end, where a CI log's tail shows them.
book: $(STAMP) data
	@mkdir -p _build
	@{ $(VENV)/bin/jupyter-book build . --warningiserror --nitpick --keep-going 2>&1; \
	   echo $$? > _build/book-build.status; } | tee _build/book-build.log; \
	  status=$$(cat _build/book-build.status); \
	  if [ "$$status" != 0 ]; then \
	    echo "== the book build failed (exit $$status); its warnings and errors:"; \
	    grep -n -i -E "warning|error|traceback|exception" _build/book-build.log \
	      | grep -v -E "Location 'file://|Kernel is running over TCP|build finished with problems" | tail -40; \
	    rm -rf _build/.doctrees; exit 1; fi

# Benchmarks compare with faiss-cpu and scikit-learn (the bench extra, installed with the rest
# so that the harness test in `make test` runs it in quick mode). `make bench` grades a class
# of 2 students; `make bench-class` re-measures only the autograder row with the issue's class
# of 20 students (roughly half an hour: serially and with 2 workers) and merges that row into
# benchmarks/results.json, keeping the other rows.
bench: $(STAMP) data
	$(PY) -m benchmarks.run

bench-class: $(STAMP)
	$(PY) -m benchmarks.run --rows autograder --students 20 --reps 1 --merge

# A simulated term: 200 students' 16 notebooks graded on a Dask LocalCluster of 2 workers
# (2 threads each) over TLS (about 15 to 20 minutes on 2 cores), the first 10 also serially to
# compare the grades;
# merged into benchmarks/results.json as the row "term".
bench-term: $(STAMP)
	$(PY) -m benchmarks.run --rows term --merge

# The zoo of small encoders pretrained on Fashion-MNIST (repeval_ref/zoo): retrains every
# encoder with its recorded recipe, one at a time, deterministically on one thread, and rewrites
# the committed weights and manifest (about 3.2 hours of training, the longest encoder 47 minutes;
# `python -m repeval_ref.zoo train --only NAME` retrains one). Tests and the book never retrain; they load the shipped weights.
# zoo-table writes the evaluation table of the Performance appendix (about 48 minutes on 2
# cores; `python -m repeval_ref.zoo table --out benchmarks/results/zoo_table.json
# --only ROW --merge` redoes one).
# `make zoo DEVICE=cuda` is the GPU run: the same recipes, each for ZOO_EPOCHS_SCALE
# times its epochs (default 4), written into zoo-cuda/ with a manifest that records the device;
# the shipped CPU weights stay the default (nothing on a machine without a GPU runs it).
DEVICE ?= cpu
ZOO_EPOCHS_SCALE ?= $(if $(filter cpu,$(DEVICE)),1,4)
ZOO_OUT = $(if $(filter cpu,$(DEVICE)),$(if $(filter 1,$(ZOO_EPOCHS_SCALE)),,--weights-dir zoo-cpu-x$(ZOO_EPOCHS_SCALE)),--weights-dir zoo-$(DEVICE))
zoo: $(STAMP) data
	$(PY) -m repeval_ref.zoo train --device $(DEVICE) --epochs-scale $(ZOO_EPOCHS_SCALE) $(ZOO_OUT)

zoo-table: $(STAMP) data
	$(PY) -m repeval_ref.zoo table --out benchmarks/results/zoo_table.json

# The measured studies the book's noise, LP-FT, attentive-probe and RankMe pages read
# (repeval_ref/studies): the training-seed spread of the small CNN, LP-FT against fine-tuning
# over three seeds (the zoo's self-supervised ViTs; EfficientNet-Lite0 on corrupted garments),
# each read-out's gain over the random ViT, and RankMe over a sweep of short SimCLR runs. Full
# budget and then the small one the tests compare with, one thread, low priority; writes
# benchmarks/results/studies/*.json (each record holds its CPU seconds; about an hour in all
# on 2 cores).
STUDY_NAMES = seed_spread lpft_kumar readout_selectivity rankme_family
studies: $(STAMP) data
	@for s in $(STUDY_NAMES); do \
	  OMP_NUM_THREADS=1 nice -n 10 $(PY) -m repeval_ref.studies run $$s --budget full --out benchmarks/results/studies || exit 1; \
	  OMP_NUM_THREADS=1 nice -n 10 $(PY) -m repeval_ref.studies run $$s --budget small --out benchmarks/results/studies || exit 1; \
	done

# The knob of each comparison task (shifted blend, cluttered garment side, corruption
# severity), set with a raw-pixel probe alone on training images so that it lands in the
# 40-85 % band, and each task's detectable paired difference: writes
# repeval_ref/datasets/calibration.json (one thread, about 15 minutes on 2 cores).
calibration: $(STAMP) data
	OMP_NUM_THREADS=1 $(PY) -W ignore -m repeval_ref.datasets.calibration

# The interview questions of every chapter as an Anki deck (genanki, the book extra), from the
# same chapter sources as book/interview.md, in a few seconds: the numbers the answers quote
# come from book/_data/interview_glue.json, which `make book` refreshes from the executed
# chapters, so no chapter runs. Needs the student install and the book extra (installed
# here when missing). The built book also carries the deck (_static/repeval-interview.apkg).
DECK ?= _build/repeval-interview.apkg
deck: $(STUDENT_STAMP)
	@$(PY) -c "import genanki, myst_nb" 2>/dev/null || $(PY) -m pip install --quiet -c constraints.txt -e ".[book]"
	$(PY) -m repeval_book.interview $(DECK) --root .

clean:
	rm -rf _build

# Publish the built book to the gh-pages branch of the repository (ghp-import, from the book
# extra). The Colab buttons open _sources/<chapter>.ipynb on that branch (see
# repeval_book/sphinx_ext.py; the branch is repeval_pages_branch in _config.yml).
publish: book
	$(VENV)/bin/ghp-import -n -p -f -b gh-pages _build/html

# ---------------------------------------------------------------------------------------
# Exercises and grading (autograder/; nbgrader 0.9). See book/instructors.md.
#   make check NB=exercises/knn/knn_classify.ipynb          student: visible tests + validate
#   make check NB=exercises/knn/knn_classify.ipynb HIDDEN=1 ... and the hidden checks (clean room)
#   make exercises                                          specs -> solutions/ -> exercises/
#   make roster ROSTER=students.csv                         bulk-import the class
#   make grade SUBMISSIONS=submissions/ GRADES=grades.csv   collect, autograde, feedback, export
#   TIMES=lms_times.csv (collect, grade): the LMS's submission times (without it, the time
#   the files reached this machine); ROSTER=students.csv (roster, collect, grade)
#   make grades GRADES=grades.csv CANVAS=canvas_export.csv   the grades written into the
#   instructor's own Canvas gradebook export (grades_canvas.csv beside GRADES)
# COURSE is the grading course directory (default: course/, never committed).
# WORKERS=N (autograde, grade) grades N students at a time, each in a sandbox of its own
# (default 1); SCHEDULER=tls://host:8786 sends one task per student to a Dask cluster
# instead, with the grader's credentials TLS_CA, TLS_CERT and TLS_KEY (a tcp:// scheduler
# authenticates no one and is refused). The grades are the same either way.
# ---------------------------------------------------------------------------------------
# a path as one shell word, whatever it holds (spaces, parentheses, quotes): LMS downloads
# are named like "knn_classify (1).ipynb"
shell_quote = '$(subst ','\'',$(1))'
AUTOGRADER  = $(PY) -m autograder --course $(call shell_quote,$(COURSE)) --timeout $(CELL_TIMEOUT)
COURSE      ?= course
CELL_TIMEOUT ?= 60
SUBMISSIONS ?= submissions
GRADES      ?= grades.csv
ROSTER      ?=
TIMES       ?=
CANVAS      ?=
COLLECT_OPTS = $(if $(TIMES),--times $(call shell_quote,$(TIMES))) \
  $(if $(ROSTER),--roster $(call shell_quote,$(ROSTER)))
WORKERS     ?= 1
SCHEDULER   ?=
TLS_CA      ?=
TLS_CERT    ?=
TLS_KEY     ?=
DASK_OPTS    = $(if $(SCHEDULER),--scheduler $(SCHEDULER)) \
  $(if $(TLS_CA),--tls-ca-file $(call shell_quote,$(TLS_CA))) \
  $(if $(TLS_CERT),--tls-cert $(call shell_quote,$(TLS_CERT))) \
  $(if $(TLS_KEY),--tls-key $(call shell_quote,$(TLS_KEY)))
NB          ?=
HIDDEN      ?=
# the term (course, grade): ASSIGN="rank=2026-01-10T23:59 noise" LATE_POLICY=mark|zero
ASSIGN      ?=
LATE_POLICY ?=
TERM_OPTS    = $(if $(ASSIGN),--assign $(ASSIGN)) $(if $(LATE_POLICY),--late-policy $(LATE_POLICY))

.PHONY: check exercises release-exercises course roster collect autograde feedback grades grade

check: $(STUDENT_STAMP)
	@test -n $(call shell_quote,$(NB)) || { echo "usage: make check NB=exercises/<chapter>/<name>.ipynb"; exit 2; }
	$(AUTOGRADER) check $(if $(HIDDEN),--hidden) $(call shell_quote,$(NB))

exercises: $(STAMP)
	$(AUTOGRADER) build
	$(AUTOGRADER) release

release-exercises: $(STAMP)
	$(AUTOGRADER) release

course: $(STAMP)
	$(AUTOGRADER) setup $(TERM_OPTS)

roster: $(STAMP)
	$(AUTOGRADER) roster $(call shell_quote,$(or $(ROSTER),roster.csv))

collect: $(STAMP)
	$(AUTOGRADER) collect $(call shell_quote,$(SUBMISSIONS)) $(COLLECT_OPTS)

autograde: $(STAMP)
	$(AUTOGRADER) autograde --workers $(WORKERS) $(DASK_OPTS)

feedback: $(STAMP)
	$(AUTOGRADER) feedback

grades: $(STAMP)
	$(AUTOGRADER) export $(call shell_quote,$(GRADES)) \
	  $(if $(CANVAS),--canvas-template $(call shell_quote,$(CANVAS)))

grade: $(STAMP)
	$(AUTOGRADER) grade-all $(call shell_quote,$(SUBMISSIONS)) $(call shell_quote,$(GRADES)) --workers $(WORKERS) \
	  $(DASK_OPTS) $(TERM_OPTS) $(COLLECT_OPTS)
