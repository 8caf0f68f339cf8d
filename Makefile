# The two commands a person needs (see README.md):
#   make demo   - set everything up and start the local demo
#   make test   - set everything up and run the whole test suite (what .ci/run runs)
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint proto bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/sdschat demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy --strict sds/

test: lint
	$(BIN)/python -m pytest -q

proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -Isds --python_out=sds --pyi_out=sds sds/sds.proto
	$(BIN)/python -m grpc_tools.protoc -Inet --python_out=net --pyi_out=net net/envelope.proto

bench: $(STAMP)
	$(BIN)/python bench/core.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
