# Transformers from Scratch: the two commands of the README, and the tools behind them.
#   make lab      set up .venv and open the course in JupyterLab (make lab-es, lab-pt, lab-vi: an edition)
#   make test     set up .venv and run every test (lint, unit tests with the drift checks, every notebook,
#                 in every language)
# Setting up and opening are course.py's (standard library only), which does the same without make, on Windows too:
# python course.py (an edition: python course.py es), python course.py setup, python course.py test.
#   make test-setup     course.py on a fresh copy of the repository, from nothing, then notebook 01 in its .venv
#                       (one of make test's runs)
#   make test-pythons   the unit tests and strict nbval of the solutions on every other Python from 3.11 up here

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

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

.PHONY: setup lab lab-instructor test test-pythons checkpoints lint unit unit-nbgrader unit-grader unit-others unit-colab browser \
        nbval-solutions nbval-editions nbval-notebooks student-notebooks check-student-notebooks \
        outputs translations check-translations review-translations grade versions benchmark clean

# course.py setup: .venv created and the pinned packages and the course installed into it when requirements.txt or
# pyproject.toml changed (the stamp .venv/.installed holds their hash; pip's whole output in .cache/setup.log), then
# the students' JupyterLab settings (course_tools/jupyter/: nbgrader's interface off, no news pop-up) merged into
# the environment, where every `jupyter lab` it starts reads them (conda users run that command once).
setup:
	@$(PYTHON) course.py setup

lab:
	$(PYTHON) course.py lab

# make test-setup (one of make test's runs): the README's one command from nothing, on a fresh copy of the
# repository's files (tracked, and new ones not ignored): `python course.py setup` with the Python .venv was made
# from, then notebook 01 executed in the .venv it made, and setup run again as a no-op (tests/test_course_script.py;
# pip's cache keeps it to minutes).
.PHONY: test-setup
test-setup: setup
	TFS_TEST_SETUP=1 $(PY) -m pytest tests/test_course_script.py -q -p no:cacheprovider -rs -k fresh_copy

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
lab-%:
	@[ -f editions/$*/EDITION ] || { echo "There is no edition '$*': make lab-XX opens one of: $(EDITIONS)." >&2; exit 2; }
	$(PYTHON) course.py lab --edition $*

# make test: lint, then the tests as small independent runs, four at a time (make -j4), the longest first, so
# that the two cores stay busy to the end: the browser test, the grader's end-to-end tests, the nbgrader course,
# the other unit tests, the Colab-style runs, the setup command from nothing (test-setup), strict nbval on the
# English solutions and on each edition's. The runs beyond two use the time the others spend waiting (JupyterLab
# rendering, pip, process start-ups). docs/ci.md gives the measured times.
# The unit tests and the grader's end-to-end tests run under a Latin-1 locale with Python's UTF-8 mode off and no
# PYTHONIOENCODING, as under a Windows code page (what the course prints and writes must still be UTF-8), where
# that locale is installed (Debian: apt-get install locales; localedef -i en_US -f ISO-8859-1 en_US.ISO-8859-1;
# .ci/run does both); elsewhere they run in this locale, and make test says so.
# The student notebooks run where a student runs them: the English ones and notebook 01 of every edition in
# JupyterLab (the browser test), or, where Chromium is missing, the English ones in lax nbval. The editions'
# other student notebooks are not run again: they are generated from their solutions (the drift tests check
# it), which strict nbval runs, and only their exercise cells differ (stubs, as in the English ones).
BROWSER_HERE := $(and $(wildcard /usr/bin/chromium),$(wildcard /usr/bin/chromedriver))
GRADER_TESTS := tests/test_grade.py tests/test_forging.py tests/test_grade_wrong_answers.py tests/test_isolation.py
TEST_RUNS := browser unit-grader unit-nbgrader unit-others test-setup unit-colab nbval-solutions \
             $(EDITIONS:%=nbval-solutions-%) $(if $(BROWSER_HERE),,nbval-notebooks-en)
LATIN_1_LOCALE := en_US.ISO-8859-1
LATIN_1_HERE := $(filter ISO-8859-1,$(shell LC_ALL=$(LATIN_1_LOCALE) locale charmap 2>/dev/null))
IN_LATIN_1 := $(if $(LATIN_1_HERE),env -u PYTHONIOENCODING LC_ALL=$(LATIN_1_LOCALE) PYTHONUTF8=0)
test: setup
	$(MAKE) --no-print-directory lint
	@[ -n "$(LATIN_1_HERE)" ] || echo "make test: the unit tests run in this locale, not under Latin-1: $(LATIN_1_LOCALE)" \
	  "is not installed (Debian: apt-get install locales; localedef -i en_US -f ISO-8859-1 $(LATIN_1_LOCALE))"
	$(MAKE) --no-print-directory -j4 --output-sync=target $(TEST_RUNS)

# make test-pythons: the unit tests (without the browser, the grader's end-to-end tests and the nbgrader course) and
# strict nbval of the English solutions, on every other Python from 3.11 up that this machine has: python3.X on
# PATH, else pyenv's newest 3.X (in $PYENV_ROOT/versions: no pyenv shim or command needed). Each runs in its own
# environment under PYTHONS_DIR, installed from requirements.txt once (pip then downloads torch for that Python
# from PyPI: gigabytes of CUDA packages, so CI keeps PYTHONS_DIR outside its fresh clone) and brought up to date
# when requirements.txt, pyproject.toml or the checkout's folder change; the students' JupyterLab settings are
# merged into it as `make setup` merges them into .venv. It says which Pythons ran and which it
# skipped and why, and fails if one failed.
#   make test-pythons PYTHONS_DIR=$HOME/.cache/tfs-pythons PYTHON_VERSIONS="3.12 3.13"
PYTHON_VERSIONS ?= 3.11 3.12 3.13 3.14 3.15
PYTHONS_DIR ?= $(CURDIR)/.cache/pythons
# (tests/test_colab.py runs the notebooks as Colab does, in make test: CI's 90 minutes do not hold it twice.)
OTHER_PYTHONS_TESTS := tests -p no:cacheprovider --ignore=tests/test_nbgrader.py --ignore=tests/test_browser.py \
                       --ignore=tests/test_colab.py $(GRADER_TESTS:%=--ignore=%)
test-pythons: setup checkpoints
	@own=$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])'); ran=(); failed=(); \
	key="$$(cat requirements.txt pyproject.toml | sha256sum | cut -c1-16) $(CURDIR)"; \
	for version in $(PYTHON_VERSIONS); do \
	  if [ "$$version" = "$$own" ]; then \
	    echo "Python $$version: skipped, it is .venv's own (make test runs it)"; continue; fi; \
	  python=$$(command -v python$$version 2>/dev/null || true); \
	  if [ -z "$$python" ] || ! "$$python" -c "" >/dev/null 2>&1; then \
	    python=$$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$$version.*/bin/python$$version 2>/dev/null \
	              | sort -V | tail -n 1 || true); fi; \
	  if [ -z "$$python" ] || ! "$$python" -c "" >/dev/null 2>&1; then \
	    echo "Python $$version: skipped, there is none here (no python$$version on PATH, none in" \
	         "$${PYENV_ROOT:-$$HOME/.pyenv}/versions)"; continue; fi; \
	  venv=$(PYTHONS_DIR)/$$version; start=$$SECONDS; \
	  if ! "$$venv/bin/python" -c "" >/dev/null 2>&1; then rm -f "$$venv/.installed"; fi; \
	  if [ "$$(cat $$venv/.installed 2>/dev/null)" != "$$key" ]; then \
	    echo "Python $$version ($$python): installing $$venv (log: $$venv.log)"; mkdir -p $(PYTHONS_DIR); \
	    { { "$$venv/bin/python" -c "" 2>/dev/null || "$$python" -m venv --clear "$$venv"; } \
	      && "$$venv/bin/python" -m pip install --upgrade pip \
	      && "$$venv/bin/python" -m pip install -r requirements.txt \
	      && PYTHONWARNINGS="ignore:Editable installation" "$$venv/bin/python" -m pip install --no-deps -e . ; \
	    } > "$$venv.log" 2>&1 || { \
	      echo "Python $$version: FAILED to install (see $$venv.log)"; failed+=($$version); continue; }; \
	    echo "$$key" > "$$venv/.installed"; fi; \
	  echo "Python $$version ($$("$$venv/bin/python" -c 'import platform; print(platform.python_version())')):" \
	       "unit tests and strict nbval of solutions/"; \
	  ok=1; "$$venv/bin/python" -m course_tools.jupyter || ok=0; \
	  PATH="$$venv/bin:$$PATH" OMP_NUM_THREADS=1 "$$venv/bin/python" -m pytest $(OTHER_PYTHONS_TESTS) -q || ok=0; \
	  PATH="$$venv/bin:$$PATH" "$$venv/bin/python" -m pytest $(NBVAL) --nbval solutions -q || ok=0; \
	  if [ $$ok = 1 ]; then ran+=("$$version ($$((SECONDS - start)) s)"); \
	  else failed+=("$$version ($$((SECONDS - start)) s)"); fi; \
	done; \
	echo "make test-pythons: passed on: $${ran[*]:-none}; failed on: $${failed[*]:-none}"; \
	[ $${#failed[@]} = 0 ]

# One thread per process in every run but the strict run of the English solutions: four runs share two cores,
# where a second thread per process only adds its overhead. The English solutions run at the machine's default
# (2 threads on 2 cores), the editions' solutions, whose computations are the same, at 1: the stored outputs
# hold at both.
ONE_THREAD := unit unit-others unit-grader unit-nbgrader unit-colab test-setup browser nbval-editions nbval-notebooks
$(ONE_THREAD) nbval-solutions-% nbval-notebooks-%: export OMP_NUM_THREADS := 1

# Every model that a notebook 06 or 07 loads, trained once, before the runs that execute notebooks 06 and 07
# (several at a time would each train it, on shared cores); a model already in .cache/checkpoints is loaded (seconds).
# Each model is trained on one thread, two notebooks at a time: the stored outputs are those of one-thread models.
# Notebook 07's language model is keyed by its text, this Python's standard library: make test-pythons trains it
# once more for each other Python, in that Python's strict nbval of the solutions.
NEEDS_CHECKPOINTS := unit unit-others unit-grader unit-nbgrader unit-colab browser nbval-solutions nbval-editions nbval-notebooks \
                     nbval-notebooks-en
checkpoints: setup
	$(PY) -m course_tools.pretrain
$(NEEDS_CHECKPOINTS): checkpoints

lint: setup
	$(VENV)/bin/ruff check helpers course_tools tests benchmarks course.py

unit: setup
	$(PY) -m pytest tests -q --durations=10

unit-nbgrader: setup
	$(PY) -m pytest tests/test_nbgrader.py -q -p no:cacheprovider

# The grader end to end (a kernel and a verdicts process for each notebook it grades), under Latin-1 where it is here.
unit-grader: setup
	$(IN_LATIN_1) $(PY) -m pytest $(GRADER_TESTS) -q -p no:cacheprovider

unit-others: setup
	$(IN_LATIN_1) $(PY) -m pytest tests -q -p no:cacheprovider --ignore=tests/test_nbgrader.py \
		--ignore=tests/test_browser.py --ignore=tests/test_colab.py $(GRADER_TESTS:%=--ignore=%) --durations=10

# Every English student notebook run as Colab runs it (tests/test_colab.py).
unit-colab: setup
	$(PY) -m pytest tests/test_colab.py -q -p no:cacheprovider

# The course in JupyterLab, in a real headless Chromium (skipped, with the reason, where Chromium is missing).
browser: setup
	$(PY) -m pytest tests/test_browser.py -q -p no:cacheprovider -rs

# Strict nbval: every stored output of the solutions compared (nbval-solutions-es: one edition's).
nbval-solutions: setup
	$(PY) -m pytest $(NBVAL) --nbval solutions -q

nbval-editions: setup
	$(PY) -m pytest $(NBVAL) --nbval $(EDITIONS:%=editions/%/solutions) -q

nbval-solutions-%: setup checkpoints
	@[ -f editions/$*/EDITION ] || { echo "There is no edition '$*': one of $(EDITIONS)." >&2; exit 2; }
	$(PY) -m pytest $(NBVAL) --nbval editions/$*/solutions -q

# Every pristine student notebook runs top to bottom without error, in lax nbval (nbval-notebooks-en: the English
# ones, which make test runs this way where Chromium is missing; nbval-notebooks-es: one edition's). Not part of
# make test otherwise: see above.
nbval-notebooks: setup
	$(PY) -m pytest $(NBVAL) --nbval-lax notebooks $(EDITIONS:%=editions/%/notebooks) -q

nbval-notebooks-en: setup
	$(PY) -m pytest $(NBVAL) --nbval-lax notebooks -q

nbval-notebooks-%: setup checkpoints
	@[ -f editions/$*/EDITION ] || { echo "There is no edition '$*': one of $(EDITIONS)." >&2; exit 2; }
	$(PY) -m pytest $(NBVAL) --nbval-lax editions/$*/notebooks -q

# Stamp the nbgrader metadata (from the exercise registry) into solutions/, then regenerate notebooks/ (one notebook
# alone: .venv/bin/tfs-make-student solutions/07_gpt.ipynb notebooks).
student-notebooks: setup
	$(VENV)/bin/tfs-make-student solutions notebooks

check-student-notebooks: setup
	$(VENV)/bin/tfs-make-student solutions notebooks --check

# Re-execute the solution notebooks, store their outputs, then regenerate the student notebooks.
outputs: setup checkpoints
	$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.record_timing=False --ExecutePreprocessor.timeout=900 solutions/*.ipynb
	$(MAKE) --no-print-directory student-notebooks

# Every edition: bring editions/*/po/*.po in step with the English, then write editions/*/solutions and notebooks.
translations: setup
	$(VENV)/bin/tfs-translate extract
	$(VENV)/bin/tfs-translate build

# Re-execute one edition's solution notebooks (make outputs-es, outputs-pt, outputs-vi), store their outputs,
# then regenerate its student notebooks.
outputs-%: translations checkpoints
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
