# The two commands a person needs (see README.md):
#   make demo   - set everything up and start the local demo
#   make test   - set everything up and run the whole test suite (what .ci/run runs)
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup tools demo test lint proto bench clean

$(STAMP): pyproject.toml | tools
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

# apt packages, each only when missing: tmux runs the demo (and the TUI's end-to-end
# test), python3-venv makes .venv on Debian/Ubuntu, libicu-dev (with pkg-config and g++)
# is what PyICU builds against, a Java 17 runtime runs Spark
# (sdschat report and tests/pipeline); openssl, sqlite3 and jq run the examples of
# docs/deploy.md (tests/test_docs.py skips a block whose tool is missing).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL = $(SUDO) apt-get install -y $(1) || { $(SUDO) apt-get update && $(SUDO) apt-get install -y $(1); }
tools:
	@command -v tmux >/dev/null 2>&1 || { echo "installing tmux (apt-get)"; $(call APT_INSTALL,tmux); }
	@command -v nats-server >/dev/null 2>&1 || test -x /usr/sbin/nats-server || { echo "installing nats-server (apt-get)"; $(call APT_INSTALL,nats-server); }
	@$(PY) -c "import ensurepip, venv" >/dev/null 2>&1 || { echo "installing python3-venv (apt-get)"; \
	  $(call APT_INSTALL,python3-venv); }
	@command -v java >/dev/null 2>&1 || { echo "installing a Java 17 runtime (apt-get)"; \
	  $(call APT_INSTALL,openjdk-17-jre-headless); }
	@command -v chromium >/dev/null 2>&1 || { echo "installing chromium (apt-get; the HTML report's screenshot test)"; \
	  $(call APT_INSTALL,chromium); }
	@command -v faketime >/dev/null 2>&1 || { echo "installing faketime (apt-get; the skewed-clock tests)"; \
	  $(call APT_INSTALL,faketime); }
	@pkg-config --exists icu-uc 2>/dev/null && command -v g++ >/dev/null 2>&1 || { \
	  echo "installing libicu-dev, pkg-config and g++ (apt-get; PyICU builds against them: confusable names)"; \
	  $(call APT_INSTALL,libicu-dev pkg-config g++); }
	@for t in openssl sqlite3 jq; do command -v $$t >/dev/null 2>&1 || { \
	  echo "installing $$t (apt-get; docs/deploy.md's runnable examples use it)"; \
	  $(call APT_INSTALL,$$t); }; done

setup: $(STAMP) tools

demo: $(STAMP) tools
	$(BIN)/sdschat demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy --strict sds app net storage pipeline
	$(BIN)/mypy bench

# Tests side by side in TEST_WORKERS processes (pytest-xdist): most of the suite waits on
# real processes and sockets, not on the CPU. Spark tests share one worker (tests/conftest.py).
TEST_WORKERS ?= 4
test: lint tools
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -Iapp/chat --python_out=app/chat --pyi_out=app/chat app/chat/content.proto
	$(BIN)/python -m grpc_tools.protoc -Isds --python_out=sds --pyi_out=sds sds/sds.proto
	$(BIN)/python -m grpc_tools.protoc -Inet --python_out=net --pyi_out=net net/envelope.proto
	$(BIN)/python -m grpc_tools.protoc -Inet --python_out=net --pyi_out=net net/store.proto
	$(BIN)/python -m grpc_tools.protoc -Inet/lan --python_out=net/lan --pyi_out=net/lan net/lan/gossip.proto
	$(BIN)/python -m grpc_tools.protoc -Iapp/chat --python_out=app/chat --pyi_out=app/chat app/chat/chat_content.proto
	$(BIN)/python -m grpc_tools.protoc -Iapp/members --python_out=app/members --pyi_out=app/members app/members/members.proto
	$(BIN)/python -m grpc_tools.protoc -Iapp/members --python_out=app/members --pyi_out=app/members app/members/invite.proto
	$(BIN)/python -m grpc_tools.protoc -Iapp/members --python_out=app/members --pyi_out=app/members app/members/devices.proto
	$(BIN)/python -m grpc_tools.protoc -Iapp/members --python_out=app/members --pyi_out=app/members app/members/link.proto

bench: $(STAMP)
	$(BIN)/python bench/core.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
