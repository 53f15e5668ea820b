# `make run` and `make test` set everything up on first use: the virtual environment, the package and its models.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export ANONYMIZED_TELEMETRY ?= False
export MPLCONFIGDIR ?= $(CURDIR)/.coffeebot/matplotlib

.PHONY: run test test-fast index bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/coffeebot serve

# one pytest worker per core, at most 4 (each builds the sample index once); plain `pytest` runs in one process
PYTEST := $(BIN)/python -m pytest -q -n auto --maxprocesses 4

test: $(STAMP)
	$(PYTEST)

test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

index: $(STAMP)
	$(BIN)/coffeebot index

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/retrieval.py

clean:
	rm -rf .coffeebot
