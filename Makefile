# Two promises: `make demo` and `make test` each do all their set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := $(PYTHON) -m uv
GPURT := $(BIN)/gpurt

.PHONY: setup system-deps lint test test-fast demo bench lock clean

# uv installs exactly what uv.lock pins; the stamp is refreshed whenever the lock changes.
$(VENV)/.synced: uv.lock pyproject.toml
	$(PYTHON) -m uv --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet "uv>=0.5"
	$(UV) sync --frozen
	touch $@

setup: $(VENV)/.synced system-deps

# promtool checks the alert rules; Prometheus and Alertmanager run them live on the local platform
# (`gpurt local up --monitoring`). Debian ships them in `prometheus` and `prometheus-alertmanager`.
system-deps:
	@{ command -v promtool && command -v prometheus && command -v prometheus-alertmanager; } >/dev/null 2>&1 || { \
	  echo "installing Prometheus and Alertmanager (Debian packages prometheus, prometheus-alertmanager)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    prometheus prometheus-alertmanager >/dev/null || \
	  echo "warning: could not install them; the demo runs without monitoring and their tests will fail"; }

lint: setup
	$(BIN)/ruff check .

test: setup lint
	$(BIN)/pytest

test-fast: setup
	$(BIN)/pytest -m "not slow"

demo: setup
	$(GPURT) demo

bench: setup
	$(GPURT) bench kernels --write
	$(GPURT) bench accuracy --write
	$(GPURT) bench runtime --write

lock:
	$(UV) lock

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .gpurt reports
