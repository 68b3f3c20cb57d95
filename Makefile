# Two commands for learners (see README): `make lab` and `make test`.
# Both create .venv and install fp16lab with its dev tools on first use; later runs reuse it.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.fp16lab-installed
PORT   ?= 8888

.PHONY: setup browser lab test check types doctor lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

# Jupyter refuses to start as root without --allow-root (containers, lab servers): add it only then.
ROOT_FLAG = $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) $(ROOT_FLAG)

# tests/test_browser.py drives Debian's chromium with Playwright (never a downloaded browser).
# As root with apt-get (CI), install it when missing; elsewhere the test skips with the reason.
browser:
	@if command -v chromium >/dev/null 2>&1 || [ -n "$$FP16LAB_CHROMIUM" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium for the browser test (apt-get)"; \
	  ( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium ) \
	  || { echo "chromium could not be installed: tests/test_browser.py will be skipped (an error when CI is set)"; [ -z "$$CI" ] || exit 1; }; \
	else echo "note: no chromium here, so tests/test_browser.py will be skipped (notebooks/README.md)"; fi

# The whole gate (CI runs this): lint, types, unit tests and every notebook.
test: setup browser lint types
	$(BIN)/python -m pytest

# The fast lane for day-to-day work: lint, types and the unit tests, no notebooks.
check: setup lint types
	$(BIN)/python -m pytest tests

doctor: setup
	$(BIN)/python -m fp16lab doctor

lint: setup
	$(BIN)/ruff check fp16lab tests

types: setup
	$(BIN)/python -m mypy

clean:
	rm -rf $(VENV)
