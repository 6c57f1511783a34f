# Two promises: `make demo` and `make test` each do all their set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# A uv on PATH (CI installs one with setup-uv) or, failing that, the one pip installs for $(PYTHON).
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
GPURT := $(BIN)/gpurt

# Every process of the tests and the demo (schedulers, brokers, Dask workers, CLI runs, the test workers) imports
# Dask, numba, the Google clients and the project. Python caches each module's bytecode the first time any
# process imports it, and every later process loads that instead of compiling the source again: half the CPU of
# starting a local platform. A machine that turns the cache off for everything (PYTHONDONTWRITEBYTECODE, as the
# CI machine does) would have each of those processes compile from source again, so the recipes here run with
# Python's default. Only what is imported gets compiled: about a third of the environment's 23,000 modules
# (compiling all of them at install, `uv sync --compile-bytecode`, took a minute of the set-up). The images
# still compile theirs at build: their trees are read-only at run time (docker/*.Dockerfile).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup system-deps demo-system-deps lint collected test test-fast demo bench lock clean

# uv installs exactly what uv.lock pins; the stamp is refreshed whenever the lock changes.
$(VENV)/.synced: uv.lock pyproject.toml
	$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet "uv>=0.5"
	$(UV) sync --frozen
	touch $@

# The kernels' CPU twins compiled once, into numba's cache beside their sources, as the worker image compiles
# them at build (runtime/worker/kernel_cache.py, one process per core): every process of the tests and the demo
# then loads them in a second instead of compiling them on first use (a minute of CPU), several processes at
# once compiling the same kernels on a fresh checkout. Redone whenever a kernel's source changes; numba itself
# recompiles only what changed.
$(VENV)/.kernels: $(VENV)/.synced $(wildcard kernels/*.py)
	$(BIN)/python -m runtime.worker.kernel_cache build
	touch $@

setup: $(VENV)/.synced $(VENV)/.kernels

# System packages (Debian), each for one feature, installed only where that feature is used:
#   prometheus               promtool, which checks the alert rules (tests), and the Prometheus server
#                            of `gpurt local up --monitoring` (tests, demo)
#   prometheus-alertmanager  the Alertmanager of `gpurt local up --monitoring` (tests, demo)
# Installing needs root or password-less sudo; nothing else in `make test` or `make demo` does.
MONITORING_COMMANDS := promtool prometheus prometheus-alertmanager
MONITORING_PACKAGES := prometheus prometheus-alertmanager
define install_monitoring
missing=$$(for c in $(MONITORING_COMMANDS); do command -v $$c >/dev/null 2>&1 || echo $$c; done); \
[ -z "$$missing" ] && exit 0; \
if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else exit 3; fi; \
echo "installing $(MONITORING_PACKAGES) (Debian) for: $$missing"; \
$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
  --no-install-recommends $(MONITORING_PACKAGES) >/dev/null
endef

# The tests need them: fail with the command to run where they cannot be installed.
system-deps:
	@( $(install_monitoring) ) || { \
	  echo "make test needs Debian packages $(MONITORING_PACKAGES) and cannot install them without root:"; \
	  echo "  sudo apt-get install $(MONITORING_PACKAGES)"; exit 1; }

# The demo can do without them: it runs without live monitoring and says so.
demo-system-deps:
	@( $(install_monitoring) ) || \
	  echo "notice: no Prometheus/Alertmanager (needs root: sudo apt-get install $(MONITORING_PACKAGES)); the demo runs without live monitoring"

lint: $(VENV)/.synced
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# Everything, on every core (meant to stay within 10 minutes on a quiet 2-core machine: README.md,
# Development). Each test module runs on one worker, so its platform or plan is made once (tests/conftest.py
# groups them); the modules spread over the workers, those that start processes first.
# Before them, three things side by side, so that neither core waits: the kernels' compile, the lint, and one
# collection of the tests. The test workers all start by importing every test module; one collection ahead of
# them leaves pytest's rewritten test modules and the bytecode of what they import, which the five workers then
# load instead of each making them at once (measured on a clean checkout: 129 CPU-seconds of four cold
# collections, against 37 for the one ahead and 45 for the four after it). Its log is reports/collect.log;
# an error there shows again, in full, in the run itself.
# The run's whole output is kept in reports/pytest.log. When an xdist worker fails outside a test (an
# "INTERNALERROR"), the controller's last words are a generic "assert not crashitem" from xdist itself, and the
# worker's own traceback scrolls away far above; the tail of that first worker traceback is printed again
# last, where a CI log's tail shows it.
test: $(VENV)/.synced system-deps
	@mkdir -p reports
	@$(MAKE) --no-print-directory --output-sync=target -j3 $(VENV)/.kernels lint collected
	@set -o pipefail; $(BIN)/pytest -n auto --dist loadgroup --durations=25 2>&1 | tee reports/pytest.log || { \
	  status=$$?; \
	  cause=$$(awk '/def worker_internal_error/{on=1; next} on && /^INTERNALERROR> E/{seen=1; print; next} \
	    on && seen{exit}' reports/pytest.log | tail -15); \
	  [ -z "$$cause" ] || printf '\nA worker failed outside any test; the end of its traceback:\n%s\n' "$$cause"; \
	  exit $$status; }

# The tests collected once, for what it leaves behind (see test).
collected: $(VENV)/.synced
	@mkdir -p reports
	@$(BIN)/pytest --collect-only -q > reports/collect.log 2>&1 || echo "collecting the tests failed (reports/collect.log); the run will say why"

# The inner loop (meant to stay under 3 minutes on a quiet 2-core machine): unit tests only, on every core;
# nothing that starts a process, nothing marked slow (numerical reference tests, benches, simulator runs).
test-fast: setup system-deps
	$(BIN)/pytest -n auto -m "not slow and not integration"

demo: setup demo-system-deps
	$(GPURT) demo

bench: setup
	$(GPURT) bench kernels --write
	$(GPURT) bench accuracy --write
	$(GPURT) bench runtime --write
	$(GPURT) bench scaling --write

lock:
	$(UV) lock

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .gpurt reports
