"""Real ``nats-server`` processes for the relay-cluster and JetStream store tests and benchmarks.

:func:`start_nats` starts one server or a cluster of several (routes between
them), with JetStream (``jetstream=True``: file storage in a directory of each
server's own) or without, waits until every server delivers to every other (a
real publish/subscribe probe through nats-py) and, with JetStream, until every
server answers JetStream requests (a meta leader is elected), and the returned
:class:`NatsServers` stops each server by its PID. Each server is configured by a
file written next to its log (``nats-N.conf``), so a test can add authorization,
TLS or JetStream limits (``extra``, ``max_file_store``).

Client and route ports are chosen free. Servers listen on 127.0.0.1, or, for a
partition test, on the addresses of a network namespace the test created and of
its link (:mod:`partition_netns`): ``placement`` gives each server its ``(client host, route
host, namespace)``.
Nothing listens on or talks to another address.
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
from collections.abc import Sequence
from pathlib import Path

from tests.procs import free_port

__all__ = ["NATS_SERVER", "NatsServer", "NatsServers", "free_port", "restart", "start_nats"]

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
"""The ``nats-server`` binary (Debian package ``nats-server``)."""


class NatsServer:
    """One ``nats-server`` child process (client port ``port``, route port ``route_port``).

    Args:
        store_dir: JetStream's directory (``None``: no JetStream).
        host: the address it listens on for clients (and routes, unless ``route_host``).
        netns: the network namespace it runs in (``ip netns exec``), or ``None``.
        extra: more configuration (authorization, TLS, ...), appended to the file.
        max_file_store: JetStream's file storage limit in bytes (``None``: the default).
    """

    def __init__(
        self,
        name: str,
        port: int,
        route_port: int | None,
        log: Path,
        *,
        store_dir: Path | None = None,
        host: str = "127.0.0.1",
        netns: str | None = None,
        extra: str = "",
        max_file_store: int | None = None,
        route_host: str | None = None,
    ) -> None:
        self.name = name
        self.route_host = route_host or host
        self.port = port
        self.route_port = route_port
        self.log = log
        self.store_dir = store_dir
        self.host = host
        self.netns = netns
        self.extra = extra
        self.max_file_store = max_file_store
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def route_url(self) -> str:
        return f"nats-route://{self.route_host}:{self.route_port}"

    def config(self, routes: Sequence[str], cluster_name: str) -> str:
        """The server's configuration file (``routes``: every server's route URL)."""
        lines = [f"server_name: {self.name}", f"listen: {self.host}:{self.port}"]
        if self.store_dir is not None:
            limit = f", max_file_store: {self.max_file_store}" if self.max_file_store else ""
            lines.append(f'jetstream {{ store_dir: "{self.store_dir}"{limit} }}')
        if self.route_port is not None:
            others = ", ".join(r for r in routes if r != self.route_url)
            lines.append(f"cluster {{ name: {cluster_name}, listen: {self.route_host}:"
                         f"{self.route_port},"
                         f" routes: [ {others} ] }}")
        return "\n".join(lines) + "\n" + self.extra

    def start(self, routes: Sequence[str], cluster_name: str) -> None:
        conf = self.log.with_suffix(".conf")
        conf.write_text(self.config(routes, cluster_name))
        argv = [NATS_SERVER, "-c", str(conf), "-l", str(self.log)]
        if self.netns is not None:
            argv = ["ip", "netns", "exec", self.netns, *argv]  # ip execs the server: same PID
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

    def __init__(self, servers: list[NatsServer], cluster_name: str = "sdschat-test") -> None:
        self.servers = servers
        self.cluster_name = cluster_name

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    @property
    def route_urls(self) -> list[str]:
        return [s.route_url for s in self.servers if s.route_port is not None]

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
            (server.host, server.port), timeout=0.5
        ):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nats-server {server.name} did not listen:\n{server.tail()}")


async def _probe_mesh(urls: list[str], deadline: float, options: dict[str, object]) -> None:
    """Until every server delivers a message published on every other one (bounded)."""
    import nats

    ncs = [await nats.connect(u, connect_timeout=2, max_reconnect_attempts=0, **options)  # type: ignore[arg-type]
           for u in urls]  # fmt: skip
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


async def wait_jetstream(urls: Sequence[str], deadline: float,
                         options: dict[str, object] | None = None) -> None:  # fmt: skip
    """Until every server of ``urls`` answers a JetStream request (its meta leader is known)."""
    import nats

    for url in urls:
        nc = await nats.connect(url, connect_timeout=2, max_reconnect_attempts=0,
                                **(options or {}))  # type: ignore[arg-type]
        try:
            js = nc.jetstream(timeout=1.0)
            while True:  # bounded by the deadline
                try:
                    await js.account_info()
                    break
                except Exception as exc:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"JetStream of {url} not ready: {exc!r}") from None
                    await asyncio.sleep(0.2)
        finally:
            with contextlib.suppress(Exception):
                await nc.close()


def start_nats(
    log_dir: Path,
    n: int = 1,
    *,
    timeout: float = 20.0,
    jetstream: bool = False,
    extra: str = "",
    client_options: dict[str, object] | None = None,
    max_file_store: int | None = None,
    placement: Sequence[tuple[str, str, str | None]] | None = None,
) -> NatsServers:
    """Start ``n`` nats-servers (a cluster with routes when ``n > 1``).

    Args:
        jetstream: enable JetStream (file storage under ``log_dir/js-N``).
        extra: configuration added to every server (authorization, TLS).
        client_options: what the readiness probes pass to ``nats.connect`` (credentials).
        max_file_store: JetStream's file storage limit of each server, in bytes.
        placement: ``(client host, route host, network namespace or None)`` of each
            server (default: 127.0.0.1 in this namespace).

    Returns once every server is reachable, routes messages to every other (a
    cluster), and answers JetStream requests (with ``jetstream``). On failure
    every started server is stopped.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    where = list(placement) if placement is not None else [("127.0.0.1", "127.0.0.1", None)] * n
    assert len(where) == n
    servers = []
    taken: set[int] = set()

    def port(host: str) -> int:  # free, and not given to another server of this cluster
        for _ in range(100):  # bounded
            p = free_port(host)
            if p not in taken:
                taken.add(p)
                return p
        raise RuntimeError("no free port")

    for i, (host, route_host, ns) in enumerate(where):
        port_host = host if ns is None else "127.0.0.1"  # a namespace's ports: free anyway
        servers.append(NatsServer(
            f"nats-{i}", port(port_host), port(port_host) if n > 1 else None,
            log_dir / f"nats-{i}.log", store_dir=log_dir / f"js-{i}" if jetstream else None,
            host=host, netns=ns, extra=extra, max_file_store=max_file_store,
            route_host=route_host,
        ))
    group = NatsServers(servers)
    try:
        for s in servers:
            s.start(group.route_urls, group.cluster_name)
        deadline = time.monotonic() + timeout
        for s in servers:
            _wait_port(s, deadline)
        asyncio.run(_probe_mesh(group.urls, deadline, client_options or {}))
        if jetstream:
            asyncio.run(wait_jetstream(group.urls, deadline, client_options))
    except BaseException:
        group.close()
        raise
    return group


def restart(server: NatsServer, servers: NatsServers, timeout: float = 20.0) -> None:
    """Start a stopped or killed server again on the same ports and directory (it
    rejoins the cluster's routes; JetStream catches its replicas up)."""
    server.start(servers.route_urls, servers.cluster_name)
    _wait_port(server, time.monotonic() + timeout)
