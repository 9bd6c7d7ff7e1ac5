# Every step a fresh machine needs: a virtualenv, the package (which builds the C++ kernels
# with CMake and fetches onnxruntime's headers on first use) with oneDNN for the onednn backend,
# then the job or the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.quantgraph-installed
NATIVE_SOURCES := $(shell find custom_ops -type f 2>/dev/null) pyproject.toml
# The package's module files, listed: the editable install maps each file it saw, so a module
# added, moved or made a package (validation/inputs.py -> validation/inputs/) needs it again.
# Their list's checksum is rewritten only when it changes (its time then says so).
MODULES := $(VENV)/.quantgraph-modules
MODULE_LIST := $(shell find quantgraph -name '*.py' -not -path '*/__pycache__/*' 2>/dev/null | LC_ALL=C sort | cksum)

.PHONY: setup browser demo test lint bench docs clean FORCE

# The echo lines say what each slow step is doing (pip is --quiet; the C++ build takes a minute).
$(MODULES): FORCE
	@mkdir -p $(VENV)
	@echo "$(MODULE_LIST)" | cmp -s - $@ || echo "$(MODULE_LIST)" > $@

$(STAMP): $(NATIVE_SOURCES) $(MODULES)
	@echo "setup: virtualenv $(VENV)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "setup: upgrading pip"
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "setup: installing quantgraph and its dependencies, building the C++ kernels (about a minute; the first time also fetches onnxruntime's headers)"
	$(BIN)/python -m pip install --quiet -e '.[dev,onednn]'
	@echo "setup: onnx-neural-compressor for its tests, without its numpy<2 pin (pyproject.toml's dev extra has what it imports)"
	$(BIN)/python -m pip install --quiet --no-deps onnx-neural-compressor==1.0
	touch $(STAMP)
	@echo "setup: done"

setup: $(STAMP)

# The main job on a bundled model: rewrite its Q/DQ nodes and prove the result agrees.
demo: setup
	@echo "demo: converting models/cnn_u8.onnx and validating the result against it"
	$(BIN)/quantgraph convert models/cnn_u8.onnx build/demo/cnn_u8.quantgraph.onnx --validate --force

# A headless Chromium for the HTML report's tests: Debian's chromium-headless-shell, installed
# when missing and this runs as root on Debian (as CI does); elsewhere those tests skip and say why.
browser:
	@if command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's chromium-headless-shell for the HTML report tests (~2 min)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    chromium-headless-shell >/dev/null; \
	else echo "no headless Chromium and no root: the HTML report's browser tests will skip"; fi

# Tests, including ruff and mypy (tests/test_quality.py).
test: setup browser
	@echo "test: pytest, with ruff and mypy (a few minutes)"
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check quantgraph tools tests models benchmarks
	$(BIN)/ruff format --check quantgraph tools tests models benchmarks
	$(BIN)/mypy

# The documentation site, built strictly (a broken link fails) into build/site.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d build/site
	@echo "docs: open build/site/index.html"

bench: setup
	$(BIN)/quantgraph bench

clean:
	rm -rf build $(VENV)
