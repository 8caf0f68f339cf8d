"""Fixtures of the relay-cluster tests: real nats-server processes on 127.0.0.1.

``nats`` (module scope): one nats-server; ``nats3``: a 3-server NATS cluster
with routes on loopback ports; ``js1`` and ``js3`` (module scope): the same with
JetStream (file storage in the test's temporary directory). Every one is stopped
by PID when its scope ends.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# this folder's helpers (nats_servers) and the relay test helpers of tests/net (net_helpers)
for _dir in (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1] / "net"):
    if str(_dir) not in sys.path:
        sys.path.insert(0, str(_dir))

from nats_servers import NatsServers, start_nats  # noqa: E402

from tests.procs import T  # noqa: E402


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServers]:
    servers = start_nats(tmp_path_factory.mktemp("nats"), 1)
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture
def nats3(tmp_path: Path) -> Iterator[NatsServers]:
    servers = start_nats(tmp_path / "nats", 3)
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture(scope="module")
def js1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServers]:
    servers = start_nats(tmp_path_factory.mktemp("js1"), 1, jetstream=True, timeout=T(30))
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture(scope="module")
def js3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServers]:
    servers = start_nats(tmp_path_factory.mktemp("js3"), 3, jetstream=True, timeout=T(60))
    try:
        yield servers
    finally:
        servers.close()
