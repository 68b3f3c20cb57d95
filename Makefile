# Two commands for learners (see README): `make lab` and `make test`.
# Both create .venv and install fp16lab with its dev tools on first use; later runs reuse it.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.fp16lab-installed
PORT   ?= 8888

.PHONY: setup lab test doctor lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

lab: setup
	$(BIN)/jupyter lab --notebook-dir=notebooks --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT)

test: setup
	$(BIN)/python -m pytest

doctor: setup
	$(BIN)/python -m fp16lab doctor

lint: setup
	$(BIN)/ruff check fp16lab tests

clean:
	rm -rf $(VENV)
