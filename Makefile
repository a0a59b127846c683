# Transformers from Scratch: the two commands of the README, and the tools behind them.
#   make lab    set up .venv and open the course in JupyterLab
#   make test   set up .venv and run every test (unit tests, solutions with strict nbval, student notebooks)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Stable, quiet notebook runs: a writable matplotlib cache, no busy-waiting OpenMP threads.
export MPLCONFIGDIR := $(CURDIR)/.cache/matplotlib
export OMP_WAIT_POLICY := PASSIVE
export PYDEVD_DISABLE_FILE_VALIDATION := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# JupyterLab refuses to run as root unless told to.
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

NBVAL := --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: setup lab test unit nbval-solutions nbval-notebooks student-notebooks check-student-notebooks outputs grade benchmark clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip 2>&1 | grep -v "is ignored" || true
	$(PY) -m pip install --quiet -r requirements.txt 2>&1 | grep -v "is ignored" || true
	$(PY) -m pip install --quiet --no-deps -e . 2>&1 | grep -v "is ignored" || true
	$(PY) -c "import torch, numpy, matplotlib, nbval, helpers"   # fail here, not later, if an install broke
	mkdir -p $(MPLCONFIGDIR) && $(PY) -c "import matplotlib.pyplot"   # build the font cache once
	touch $(STAMP)

lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=. $(ROOT_FLAG) notebooks/01_positional_encoding.ipynb

test: setup
	$(MAKE) --no-print-directory unit check-student-notebooks nbval-solutions nbval-notebooks

unit: setup
	$(PY) -m pytest tests -q

nbval-solutions: setup
	$(PY) -m pytest $(NBVAL) --nbval solutions -q

nbval-notebooks: setup
	$(PY) -m pytest $(NBVAL) --nbval-lax notebooks -q

# Regenerate the student notebooks from the solution notebooks (the single source).
student-notebooks: setup
	$(PY) -m helpers.make_student solutions notebooks

check-student-notebooks: setup
	$(PY) -m helpers.make_student solutions notebooks --check

# Re-execute the solution notebooks, store their outputs, then regenerate the student notebooks.
outputs: setup
	$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.record_timing=False --ExecutePreprocessor.timeout=900 solutions/*.ipynb
	$(MAKE) --no-print-directory student-notebooks

# Grade a student's notebook:  make grade NB=path/to/01_positional_encoding.ipynb
grade: setup
	$(PY) -m helpers.grade $(NB)

benchmark: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .cache
