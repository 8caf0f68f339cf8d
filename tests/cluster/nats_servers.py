"""Real ``nats-server`` processes on 127.0.0.1 for the relay-cluster tests and benchmark.

:func:`start_nats` starts one server or a cluster of several (routes between
them on loopback ports), waits until every server delivers to every other
(a real publish/subscribe probe through nats-py), and the returned
:class:`NatsServers` stops each server by its PID. Client and route ports are
chosen free on 127.0.0.1; nothing listens on or talks to another address.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["NATS_SERVER", "NatsServer", "NatsServers", "free_port", "start_nats"]

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
"""The ``nats-server`` binary (Debian package ``nats-server``)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NatsServer:
    """One ``nats-server`` child process (client port ``port``, route port ``route_port``)."""

    def __init__(self, name: str, port: int, route_port: int | None, log: Path) -> None:
        self.name = name
        self.port = port
        self.route_port = route_port
        self.log = log
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, routes: list[int], cluster_name: str) -> None:
        argv = [NATS_SERVER, "-a", "127.0.0.1", "-p", str(self.port), "-n", self.name,
                "-l", str(self.log)]
        if self.route_port is not None:
            argv += ["--cluster", f"nats://127.0.0.1:{self.route_port}",
                     "--cluster_name", cluster_name]
            others = [p for p in routes if p != self.route_port]
            if others:
                argv += ["--routes", ",".join(f"nats://127.0.0.1:{p}" for p in others)]
        self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill9(self) -> None:
        """SIGKILL by PID, then reap."""
        if self.running():
            os.kill(self.pid, signal.SIGKILL)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(10)

    def stop(self) -> None:
        """SIGTERM by PID (SIGKILL after 5 s), then reap."""
        if self.running():
            os.kill(self.pid, signal.SIGTERM)
            try:
                assert self.popen is not None
                self.popen.wait(5)
            except subprocess.TimeoutExpired:
                self.kill9()

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"


class NatsServers:
    """The servers :func:`start_nats` started; :meth:`close` stops every one by PID."""

    def __init__(self, servers: list[NatsServer]) -> None:
        self.servers = servers

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def close(self) -> None:
        for s in self.servers:
            s.stop()

    def __enter__(self) -> NatsServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _wait_port(server: NatsServer, deadline: float) -> None:
    while time.monotonic() < deadline:  # bounded
        if not server.running():
            raise RuntimeError(f"nats-server {server.name} exited:\n{server.tail()}")
        with contextlib.suppress(OSError), socket.create_connection(
            ("127.0.0.1", server.port), timeout=0.5
        ):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nats-server {server.name} did not listen:\n{server.tail()}")


async def _probe_mesh(urls: list[str], deadline: float) -> None:
    """Until every server delivers a message published on every other one (bounded)."""
    import nats

    ncs = [await nats.connect(u, connect_timeout=2, max_reconnect_attempts=0) for u in urls]
    try:
        got: set[tuple[int, int]] = set()
        subs = []
        for i, nc in enumerate(ncs):
            async def cb(msg: object, i: int = i) -> None:
                got.add((int(msg.data), i))  # type: ignore[attr-defined]

            subs.append(await nc.subscribe(f"probe.{i}", cb=cb))
            await nc.flush()
        want = {(a, b) for a in range(len(ncs)) for b in range(len(ncs))}
        while got < want:  # bounded by the deadline
            if time.monotonic() > deadline:
                raise RuntimeError(f"NATS cluster not meshed: {sorted(want - got)[:5]}")
            for a, nc in enumerate(ncs):
                for b in range(len(ncs)):
                    if (a, b) not in got:
                        await nc.publish(f"probe.{b}", str(a).encode())
                await nc.flush()
            await asyncio.sleep(0.1)
    finally:
        for nc in ncs:
            with contextlib.suppress(Exception):
                await nc.close()


def start_nats(log_dir: Path, n: int = 1, *, timeout: float = 20.0) -> NatsServers:
    """Start ``n`` nats-servers (a cluster with routes when ``n > 1``) on 127.0.0.1.

    Returns once every server is reachable and (for a cluster) routes messages
    to every other. On failure every started server is stopped.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    route_ports = [free_port() for _ in range(n)] if n > 1 else []
    servers = [
        NatsServer(f"nats-{i}", free_port(), route_ports[i] if n > 1 else None,
                   log_dir / f"nats-{i}.log")
        for i in range(n)
    ]
    group = NatsServers(servers)
    try:
        for s in servers:
            s.start(route_ports, "sdschat-test")
        deadline = time.monotonic() + timeout
        for s in servers:
            _wait_port(s, deadline)
        asyncio.run(_probe_mesh(group.urls, deadline))
    except BaseException:
        group.close()
        raise
    return group


def restart(server: NatsServer, servers: NatsServers, timeout: float = 20.0) -> None:
    """Start a killed server again on the same ports (rejoins the cluster's routes)."""
    routes = [s.route_port for s in servers.servers if s.route_port is not None]
    server.start(routes, "sdschat-test")
    _wait_port(server, time.monotonic() + timeout)
