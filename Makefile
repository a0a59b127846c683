# Transformers from Scratch: the two commands of the README, and the tools behind them.
#   make lab      set up .venv and open the course in JupyterLab (make lab-es, lab-pt, lab-vi: an edition)
#   make test     set up .venv and run every test (lint, unit tests with the drift checks, every notebook,
#                 in every language)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Every recipe line runs in bash with pipefail, so a failing pip is never hidden behind a filter.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# Stable, quiet notebook runs: a writable matplotlib cache, no busy-waiting OpenMP threads.
export MPLCONFIGDIR := $(CURDIR)/.cache/matplotlib
export OMP_WAIT_POLICY := PASSIVE
export PYDEVD_DISABLE_FILE_VALIDATION := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# nbgrader starts the `alembic` program: the environment's own bin/ comes first on PATH.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# JupyterLab refuses to run as root unless told to.
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

NBVAL := --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
# pip's notes about the machine's extra package folders are noise; everything else it says is shown.
QUIET_PIP := { grep -v "is ignored" || true; }

.PHONY: setup lab lab-instructor test lint unit unit-nbgrader unit-grader unit-others browser nbval-solutions nbval-editions nbval-notebooks student-notebooks check-student-notebooks \
        outputs translations check-translations review-translations grade versions benchmark clean

# The students' JupyterLab settings (course_tools/jupyter/: nbgrader's interface off, no news pop-up), merged into
# the environment, where every `jupyter lab` it starts reads them (conda users run the same command once).
setup: $(STAMP)
	@$(PY) -m course_tools.jupyter

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip 2>&1 | $(QUIET_PIP)
	$(PY) -m pip install --quiet -r requirements.txt 2>&1 | $(QUIET_PIP)
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install --quiet --no-deps -e . 2>&1 | $(QUIET_PIP)
	$(PY) -c "import torch, numpy, matplotlib, nbval, nbgrader, helpers, course_tools"
	mkdir -p $(MPLCONFIGDIR) && $(PY) -c "import matplotlib.pyplot"   # build the font cache once
	touch $(STAMP)

lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=. $(ROOT_FLAG) notebooks/01_positional_encoding.ipynb

# For instructors: JupyterLab in an nbgrader course folder (the one with nbgrader_config.py), with nbgrader's
# menus, formgrader and server extensions on: course_tools/jupyter/instructor/ first on JUPYTER_CONFIG_PATH, for
# this JupyterLab only (the environment keeps the students' settings).
#   make lab-instructor COURSE=/path/to/course        LAB_ARGS="--port=8890" passes options to jupyter lab
lab-instructor: setup
	@[ -n "$(COURSE)" ] || { echo "Say which nbgrader course folder to open: make lab-instructor COURSE=/path/to/course" >&2; exit 2; }
	@[ -f "$(COURSE)/nbgrader_config.py" ] || { echo "$(COURSE) has no nbgrader_config.py: give the folder of your nbgrader course, or create one with $(CURDIR)/$(VENV)/bin/nbgrader quickstart COURSE_NAME" >&2; exit 2; }
	cd "$(COURSE)" && JUPYTER_CONFIG_PATH="$(CURDIR)/course_tools/jupyter/instructor$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
		"$(CURDIR)/$(VENV)/bin/jupyter" lab $(ROOT_FLAG) $(LAB_ARGS)

# The editions: the same course in Spanish, Brazilian Portuguese and Vietnamese (README.es.md, README.pt.md,
# README.vi.md), each in editions/<language>/. make lab-es (lab-pt, lab-vi) opens one at its notebook 01.
EDITIONS := $(sort $(patsubst editions/%/EDITION,%,$(wildcard editions/*/EDITION)))
lab-%: setup
	@[ -f editions/$*/EDITION ] || { echo "There is no edition '$*': make lab-XX opens one of: $(EDITIONS)." >&2; exit 2; }
	$(VENV)/bin/jupyter lab --notebook-dir=. $(ROOT_FLAG) editions/$*/notebooks/01_positional_encoding.ipynb

# make test: lint, then the tests as small independent runs, four at a time (make -j4), the longest first, so
# that the two cores stay busy to the end: the browser test, the grader's end-to-end tests, the nbgrader course,
# the other unit tests, strict nbval on the English solutions, then, per edition, strict nbval on its solutions
# and lax nbval on its student notebooks. The runs beyond two use the time the others spend waiting (JupyterLab
# rendering, time-outs, process start-ups). README.md, CI, gives the measured times.
BROWSER_HERE := $(and $(wildcard /usr/bin/chromium),$(wildcard /usr/bin/chromedriver))
GRADER_TESTS := tests/test_grade.py tests/test_forging.py tests/test_grade_wrong_answers.py
TEST_RUNS := browser unit-grader unit-nbgrader unit-others nbval-solutions $(EDITIONS:%=nbval-solutions-%) \
             $(EDITIONS:%=nbval-notebooks-%) $(if $(BROWSER_HERE),,nbval-notebooks-en)
test: setup
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory -j4 --output-sync=target $(TEST_RUNS)

# One thread per process in every run but the strict run of the English solutions: four runs share two cores,
# where a second thread per process only adds its overhead. The English solutions run at the machine's default
# (2 threads on 2 cores), the editions' solutions, whose computations are the same, at 1: the stored outputs
# hold at both.
ONE_THREAD := unit unit-others unit-grader unit-nbgrader browser nbval-editions nbval-notebooks
$(ONE_THREAD) nbval-solutions-% nbval-notebooks-%: export OMP_NUM_THREADS := 1

# Every test run forks its kernels from a warm process that imported torch once (course_tools/warm_kernels.py: the
# same ipykernel, without 2 s of CPU each to start Python and import torch); make lab starts them as usual.
WARM_KERNELS := unit unit-others unit-grader unit-nbgrader browser nbval-solutions nbval-editions nbval-notebooks
$(WARM_KERNELS) nbval-solutions-% nbval-notebooks-%: export JUPYTER_DEFAULT_PROVISIONER_NAME := tfs-warm-kernels

lint: setup
	$(VENV)/bin/ruff check helpers course_tools tests benchmarks

unit: setup
	$(PY) -m pytest tests -q --durations=10

unit-nbgrader: setup
	$(PY) -m pytest tests/test_nbgrader.py -q -p no:cacheprovider

# The grader end to end (a kernel and a verdicts process for each notebook it grades).
unit-grader: setup
	$(PY) -m pytest $(GRADER_TESTS) -q -p no:cacheprovider

unit-others: setup
	$(PY) -m pytest tests -q -p no:cacheprovider --ignore=tests/test_nbgrader.py --ignore=tests/test_browser.py \
		$(GRADER_TESTS:%=--ignore=%) --durations=10

# The course in JupyterLab, in a real headless Chromium (skipped, with the reason, where Chromium is missing).
browser: setup
	$(PY) -m pytest tests/test_browser.py -q -p no:cacheprovider -rs

# Strict nbval: every stored output of the solutions compared (nbval-solutions-es: one edition's).
nbval-solutions: setup
	$(PY) -m pytest $(NBVAL) --nbval solutions -q

nbval-editions: setup
	$(PY) -m pytest $(NBVAL) --nbval $(EDITIONS:%=editions/%/solutions) -q

nbval-solutions-%: setup
	@[ -f editions/$*/EDITION ] || { echo "There is no edition '$*': one of $(EDITIONS)." >&2; exit 2; }
	$(PY) -m pytest $(NBVAL) --nbval editions/$*/solutions -q

# Every pristine student notebook runs top to bottom without error (nbval-notebooks-es: one edition's; -en: the
# English). Where Chromium is installed, the browser test runs the English ones and notebook 01 of every edition
# from JupyterLab's Run menu, which checks that and more, so lax nbval runs only the editions' other notebooks.
lax_notebooks = $(if $(BROWSER_HERE),$(filter-out %/01_positional_encoding.ipynb,$(wildcard $(1)/*.ipynb)),$(1))
LAX_NOTEBOOKS := $(if $(BROWSER_HERE),,notebooks) $(foreach e,$(EDITIONS),$(call lax_notebooks,editions/$(e)/notebooks))
nbval-notebooks: setup
	$(PY) -m pytest $(NBVAL) --nbval-lax $(LAX_NOTEBOOKS) -q

nbval-notebooks-en: setup
	$(PY) -m pytest $(NBVAL) --nbval-lax notebooks -q

nbval-notebooks-%: setup
	@[ -f editions/$*/EDITION ] || { echo "There is no edition '$*': one of $(EDITIONS)." >&2; exit 2; }
	$(PY) -m pytest $(NBVAL) --nbval-lax $(call lax_notebooks,editions/$*/notebooks) -q

# Stamp the nbgrader metadata (from the exercise registry) into solutions/, then regenerate notebooks/.
student-notebooks: setup
	$(VENV)/bin/tfs-make-student solutions notebooks

check-student-notebooks: setup
	$(VENV)/bin/tfs-make-student solutions notebooks --check

# Re-execute the solution notebooks, store their outputs, then regenerate the student notebooks.
outputs: setup
	$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.record_timing=False --ExecutePreprocessor.timeout=900 solutions/*.ipynb
	$(MAKE) --no-print-directory student-notebooks

# Every edition: bring editions/*/po/*.po in step with the English, then write editions/*/solutions and notebooks.
translations: setup
	$(VENV)/bin/tfs-translate extract
	$(VENV)/bin/tfs-translate build

# Re-execute one edition's solution notebooks (make outputs-es, outputs-pt, outputs-vi), store their outputs,
# then regenerate its student notebooks.
outputs-%: translations
	@[ -f editions/$*/EDITION ] || { echo "There is no edition '$*': one of $(EDITIONS)." >&2; exit 2; }
	$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.record_timing=False --ExecutePreprocessor.timeout=900 editions/$*/solutions/*.ipynb
	$(VENV)/bin/tfs-make-student editions/$*/solutions editions/$*/notebooks

# Every piece of every edition translated and reviewed, editions/ up to date (the unit tests run this too).
check-translations: setup
	$(VENV)/bin/tfs-translate check

# The pieces to translate or review after an English change, per edition, with the English diff.
review-translations: setup
	$(VENV)/bin/tfs-translate review

# Grade students' notebooks:  make grade NB=path/to/01_positional_encoding.ipynb  (or a folder of them)
grade: setup
	$(VENV)/bin/tfs-grade $(NB)

# The versions that matter, and whether they match the pins (paste this into a bug report).
versions: setup
	$(VENV)/bin/tfs-versions

benchmark: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .cache
