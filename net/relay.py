"""``sdschat relay``: a websocket relay that forwards envelopes by topic.

Clients (``net/relay_client.py``) open a websocket, send ``Subscribe`` frames
for their channels' topics and ``Publish`` frames carrying envelopes; the relay
reads only the envelope's ``topic`` and sends one ``Deliver`` frame to every
OTHER connection subscribed to it. It never holds a key and never decrypts.

Defences, all set by :class:`~net.relay_config.RelayConfig`:

* frame size: websockets' ``max_size``; a bigger message closes the
  connection with 1009 (counted as ``frame_too_large``);
* rate: a token bucket per connection (``rate`` frames/s, ``burst``); a frame
  over the limit is dropped and answered with ``Error{rate_limited}``; more
  than ``abuse_strikes`` such frames (refilled at one per second) close the
  connection with 1008;
* memory, bounded in bytes: each connection has one writer task fed by its
  send queue, bounded by ``queue_bytes`` (and ``queue`` frames); a subscriber
  whose queue would overflow is disconnected with 1008 (``slow_consumer``)
  and its queue discarded at once. A reader whose oldest queued frame has
  waited more than ``max_lag`` seconds is disconnected too (``lagging``), so
  a client reading slowly cannot hold its queue for long. All queues together
  hold at most ``memory_budget`` bytes: past it, the connections holding the
  most are disconnected (``memory_budget``). While a connection keeps up
  (nothing queued, write buffer <= 32 KiB) frames skip the queue and are
  written at once with ``websockets.broadcast``;
* ``max_clients_per_ip``: connections beyond it from one host are closed with
  1013 after the handshake. A host is an IPv4 /24 (all of ``127.0.0.0/8`` is
  one) or an IPv6 /64, both prefixes configurable (``ipv4_host_prefix``,
  ``ipv6_host_prefix``; :mod:`net.hosts`): addresses are what an attacker has
  many of, networks are not;
* ``max_clients``: when that many connections are open, a newcomer still gets
  a slot (:meth:`RelayServer._shed_for_newcomer`, the shed one is closed with
  1013, ``shed``): first, a newcomer from a host holding fewer connections than
  the biggest host by two or more takes the slot of that host's longest-silent
  connection (busy or not: so a full relay always keeps room for a new host,
  and one host, however busy its connections, cannot hold every slot); else
  the connection that costs most and carries least gives way, if one has been
  open and without traffic for ``idle_timeout`` (first those whose topics no
  other host subscribes to, then those of the host with the most connections,
  the most topics, the longest silence). Only when neither applies is the
  newcomer closed with 1013;
* ``idle_timeout``: a connection that has subscribed to nothing that long
  after opening is closed with 1008 (``idle``);
* malformed input (undecodable frame, text frame, bad envelope, bad topic,
  unknown version) is answered with an ``Error`` frame; the connection stays.

TLS: with ``certfile`` (``--certfile/--keyfile``) the relay serves ``wss://``;
SIGHUP (:meth:`RelayServer.reload_tls`) reads the files again so new
connections get a renewed certificate without a restart (:mod:`net.tls`).

Fan-out encodes the ``Deliver`` frame once per publish: one ``broadcast`` call
writes it to every subscriber that keeps up, and the same ``bytes`` object goes
on the queue of every subscriber that lags.

With ``RelayConfig.cluster`` (``--cluster nats://HOST:4222``) the relay is
one member of a relay cluster on NATS (``net/relay_cluster.py``): what its
clients publish also goes to the other relays, what they publish arrives
through NATS, and every defence above still holds per relay. Without it,
nothing of NATS is imported.

Logs are structured (``net/relay_log.py``): ``relay_listening`` (with the bound
``port``, useful with ``--port 0``), connection events, ``relay_stats`` every
``stats_interval`` seconds and at shutdown, ``relay_stopped``. SIGINT and
SIGTERM close every connection (1001) and exit with status 0.

In-process use (tests, benchmarks)::

    server = RelayServer(RelayConfig(port=0))
    await server.start()
    url = server.url            # ws://127.0.0.1:<port>
    ...
    await server.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import Server, ServerConnection, broadcast, serve
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from net import runner
from net.envelope import EnvelopeError, peek_topic
from net.forwarded import client_address, parse_networks
from net.hosts import host_group
from net.relay_config import MAX_TOPIC_BYTES, RelayConfig
from net.relay_frames import (
    FrameDecodeError,
    decode_frame,
    encode_deliver,
    encode_error,
    encode_pong,
)
from net.relay_log import RelayLogger
from net.signals import StopSignals
from net.tls import ServerTLS

if TYPE_CHECKING:  # imported at run time only with --cluster (it needs nats-py)
    from net.relay_cluster import RelayCluster

__all__ = [
    "CLOSE_ABUSE",
    "CLOSE_FULL",
    "CLOSE_IDLE",
    "CLOSE_SHUTDOWN",
    "CLOSE_SLOW_CONSUMER",
    "RelayServer",
    "RelayStats",
    "TokenBucket",
    "host_group",
    "run_relay",
]

CLOSE_SLOW_CONSUMER = 1008
"""Close code for a subscriber whose send queue overflowed (policy violation)."""

CLOSE_ABUSE = 1008
"""Close code for a connection that kept exceeding its rate limit."""

CLOSE_FULL = 1013
"""Close code for a connection refused because ``max_clients`` are connected."""

CLOSE_IDLE = 1008
"""Close code for a connection that subscribed to nothing within ``idle_timeout``."""

CLOSE_SHUTDOWN = 1001
"""Close code used when the relay shuts down (going away)."""

DIRECT_WRITE_LIMIT = 2**15
"""A frame bypasses a connection's queue only while its socket write buffer
holds at most this many bytes (websockets' default write high-water mark)."""


def _rss_kib() -> int | None:
    """Resident memory of this process in KiB (Linux), for ``relay_stats``."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * (_PAGE_SIZE // 1024)


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class TokenBucket:
    """A classic token bucket: ``capacity`` tokens, refilled at ``rate`` per second.

    Time is passed in (seconds, monotonic) so the bucket is trivially testable.
    """

    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.stamp = now

    def take(self, now: float) -> bool:
        """Spend one token if available; return whether one was spent."""
        elapsed = now - self.stamp
        if elapsed > 0:
            self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
            self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass
class RelayStats:
    """Counters a relay keeps for its whole lifetime (logged as ``relay_stats``).

    Attributes:
        connections_total: connections accepted.
        connections_rejected: connections refused because the relay was full.
        frames_received: websocket messages received.
        published: valid Publish frames accepted.
        unrouted: accepted publishes that had no other subscriber.
        deliveries: Deliver frames queued to subscribers.
        frames_sent: frames (Deliver, Error, Pong) written to sockets.
        dropped: frames or connections dropped, by reason (``malformed``,
            ``unsupported_version``, ``bad_topic``, ``too_many_topics``,
            ``oversized``, ``rate_limited``, ``unexpected_frame`` count frames;
            ``slow_consumer``, ``lagging``, ``memory_budget``, ``idle``,
            ``abuse``, ``frame_too_large``, ``shed`` (to make room for a
            newcomer) count closed connections;
            ``queue_discarded`` counts frames thrown away from the queues of
            disconnected connections).
        rejected_per_ip: connections refused by ``max_clients_per_ip`` (per host:
            an IPv4 /24, ``127.0.0.0/8``, an IPv6 /64; :mod:`net.hosts`).
        queued_bytes_peak: the most bytes queued for all connections at once.
    """

    connections_total: int = 0
    connections_rejected: int = 0
    frames_received: int = 0
    published: int = 0
    unrouted: int = 0
    deliveries: int = 0
    frames_sent: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    rejected_per_ip: int = 0
    queued_bytes_peak: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy of the counters."""
        return {
            "connections_total": self.connections_total,
            "connections_rejected": self.connections_rejected,
            "frames_received": self.frames_received,
            "published": self.published,
            "unrouted": self.unrouted,
            "deliveries": self.deliveries,
            "frames_sent": self.frames_sent,
            "dropped": dict(sorted(self.dropped.items())),
            "rejected_per_ip": self.rejected_per_ip,
            "queued_bytes_peak": self.queued_bytes_peak,
        }


class _Conn:
    """Per-connection state: subscriptions, limits, send queue and writer task."""

    __slots__ = (
        "busy",
        "cid",
        "close_task",
        "closing",
        "ever_subscribed",
        "group",
        "ip",
        "last_carried",
        "opened",
        "peer",
        "queue",
        "queued_bytes",
        "rate",
        "strikes",
        "topics",
        "wake",
        "writer",
        "ws",
    )

    def __init__(
        self,
        cid: int,
        ws: ServerConnection,
        config: RelayConfig,
        now: float,
        client: tuple[str, str] | None = None,
    ) -> None:
        self.cid = cid
        self.ws = ws
        # (ip, peer) of the client behind a trusted proxy, else the socket's
        self.ip, self.peer = client if client is not None else (_peer_ip(ws), _peer_name(ws))
        self.group = config.host_grouping.group(self.ip)  # what max_clients_per_ip counts
        self.opened = now
        self.last_carried = now  # the last publish from it or delivery to it
        # (time queued, frame), oldest first; bounded by config.queue and config.queue_bytes
        self.queue: deque[tuple[float, bytes]] = deque()
        self.queued_bytes = 0
        self.wake = asyncio.Event()  # set when the queue gets a frame
        self.ever_subscribed = False
        self.topics: set[bytes] = set()
        self.rate = TokenBucket(config.rate, config.burst, now)
        self.strikes = TokenBucket(1.0, config.abuse_strikes, now)
        self.writer: asyncio.Task[None] | None = None
        self.close_task: asyncio.Task[None] | None = None
        self.closing = False
        self.busy = False  # the writer task holds a frame it has not finished sending


def _peer_ip(ws: ServerConnection) -> str:
    try:
        addr = ws.remote_address
    except Exception:  # transport already gone
        return "?"
    if isinstance(addr, tuple) and addr:
        return str(addr[0])
    return str(addr)


def _address(sockname: Any) -> str:
    """``127.0.0.1:8765`` or ``[::1]:8765`` of a bound socket."""
    host, port = str(sockname[0]), int(sockname[1])
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _peer_name(ws: ServerConnection) -> str:
    try:
        addr = ws.remote_address
    except Exception:  # transport already gone
        return "?"
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr)


class RelayServer:
    """The relay, runnable in-process: ``await start()``, use ``port``/``url``, ``await close()``.

    Args:
        config: limits and addresses (``RelayConfig(port=0)`` for tests).
        logger: where structured events go (default: JSON or text on stderr
            per ``config.log_format``).
    """

    def __init__(self, config: RelayConfig | None = None, *, logger: RelayLogger | None = None):
        self.config = config if config is not None else RelayConfig()
        self.log = logger if logger is not None else RelayLogger(self.config.log_format)
        self.stats = RelayStats()
        self._conns: dict[int, _Conn] = {}
        self._per_ip: Counter[str] = Counter()
        self._queued_bytes = 0
        self._sweeper: asyncio.Task[None] | None = None
        self._topics: dict[bytes, set[_Conn]] = {}
        self._ids = itertools.count(1)
        self._server: Server | None = None
        self._port: int | None = None
        self._stats_task: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = asyncio.Event()
        self.tls: ServerTLS | None = None
        """The TLS context when ``config.certfile`` is set (``wss://``)."""
        self._cluster: RelayCluster | None = None
        self._pongs: set[asyncio.Task[None]] = set()  # Pongs waiting for the cluster
        self._trusted = parse_networks(self.config.trusted_proxies)

    # ------------------------------------------------------------------ API

    @property
    def port(self) -> int:
        """The bound TCP port (useful after ``RelayConfig(port=0)``)."""
        if self._port is None:
            raise RuntimeError("relay not started")
        return self._port

    @property
    def url(self) -> str:
        """``ws://host:port`` (``wss://`` with TLS) of the running relay."""
        host = self.config.hosts[0]
        if ":" in host:
            host = f"[{host}]"
        return f"{'wss' if self.tls is not None else 'ws'}://{host}:{self.port}"

    def reload_tls(self) -> bool:
        """Read ``certfile``/``keyfile`` again (SIGHUP): new connections get the new
        certificate. Logs ``tls_reloaded`` or, keeping the old one, ``tls_reload_failed``."""
        if self.tls is None:
            self.log.warning("tls_reload_ignored", reason="no --certfile: serving ws://")
            return False
        try:
            self.tls.reload()
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            self.log.error("tls_reload_failed", certfile=self.tls.certfile, error=str(exc))
            return False
        self.log.info("tls_reloaded", certfile=self.tls.certfile, reloads=self.tls.reloads)
        return True

    @property
    def connection_count(self) -> int:
        """Connections currently open."""
        return len(self._conns)

    def queue_sizes(self) -> list[int]:
        """Current send-queue length of every connection (for tests and metrics)."""
        return [len(c.queue) for c in self._conns.values()]

    @property
    def queued_bytes(self) -> int:
        """Bytes queued for all connections right now (bounded by ``memory_budget``)."""
        return self._queued_bytes

    async def start(self) -> None:
        """Bind and start accepting connections; logs ``relay_listening``.

        Raises:
            OSError: the address cannot be bound.
        """
        if self._server is not None:
            raise RuntimeError("relay already started")
        cfg = self.config
        if cfg.cluster and self._cluster is None:  # before listening: no cluster, no relay
            try:
                from net.relay_cluster import RelayCluster
            except ImportError as exc:  # an OSError, so the relay does not start (status 1)
                raise ConnectionError(
                    f"--cluster needs the NATS client nats-py "
                    f"(pip install 'sdschat[cluster]'): {exc}"
                ) from None

            cluster = RelayCluster(
                cfg.cluster,
                self._deliver_from_cluster,
                self.log,
                connect_timeout=cfg.cluster_timeout,
                cafile=cfg.cluster_cafile,
                certfile=cfg.cluster_certfile,
                keyfile=cfg.cluster_keyfile,
                token_file=cfg.cluster_token_file,
                publisher_rate=cfg.rate,
                publisher_burst=cfg.burst,
                publisher_bytes=cfg.cluster_publisher_bytes,
            )
            await cluster.start()  # ClusterUnavailable (an OSError) if NATS is unreachable
            self._cluster = cluster
        if cfg.certfile is not None:
            self.tls = ServerTLS(cfg.certfile, cfg.keyfile)
        # several addresses: a list, which websockets hands to loop.create_server as it is
        hosts: Any = list(cfg.hosts) if len(cfg.hosts) > 1 else cfg.hosts[0]
        try:
            self._server = await serve(
                self._handle,
                hosts,
                cfg.port,
                ssl=self.tls.context if self.tls is not None else None,
                max_size=cfg.max_frame,
                compression=None,
                close_timeout=cfg.close_timeout,
                ping_interval=cfg.ping_interval,
                ping_timeout=cfg.ping_timeout,
            )
        except BaseException:
            if self._cluster is not None:
                await self._cluster.close()
                self._cluster = None
            raise
        self._port = int(self._server.sockets[0].getsockname()[1])
        self.log.info(
            "relay_listening",
            host=cfg.host,
            addresses=[_address(s.getsockname()) for s in self._server.sockets],
            port=self._port,
            tls=self.tls is not None,
            max_clients=cfg.max_clients,
            max_frame=cfg.max_frame,
            rate=cfg.rate,
            burst=cfg.burst,
            queue=cfg.queue,
            queue_bytes=cfg.queue_bytes,
            max_lag=cfg.max_lag,
            memory_budget=cfg.memory_budget,
            max_clients_per_ip=cfg.max_clients_per_ip,
            ipv4_host_prefix=cfg.ipv4_host_prefix,
            ipv6_host_prefix=cfg.ipv6_host_prefix,
            idle_timeout=cfg.idle_timeout,
            trusted_proxies=list(cfg.trusted_proxies),
        )
        self._sweeper = asyncio.create_task(self._sweep_periodically())
        if cfg.stats_interval > 0:
            self._stats_task = asyncio.create_task(self._log_stats_periodically())

    async def close(self) -> None:
        """Stop accepting, close every connection (1001), log final stats. Idempotent.

        Bounded in time: each connection gets ``close_timeout`` seconds for its
        closing handshake and is then aborted.
        """
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        for task in (self._stats_task, self._sweeper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        server = self._server
        if server is not None:
            server.close(close_connections=False)
            for conn in list(self._conns.values()):
                self._disconnect(conn, CLOSE_SHUTDOWN, "relay shutting down", None)
            tasks = [c.close_task for c in list(self._conns.values()) if c.close_task]
            if tasks:
                await asyncio.wait(tasks, timeout=self.config.close_timeout + 1.0)
            try:
                async with asyncio.timeout(self.config.close_timeout + 2.0):
                    await server.wait_closed()
            except TimeoutError:
                self.log.warning("relay_close_timeout", connections=len(self._conns))
        if self._cluster is not None:
            await self._cluster.close()
        self.log.info("relay_stats", final=True, connections=len(self._conns), **self._stats())
        self.log.info("relay_stopped", port=self._port)
        self._closed.set()

    async def __aenter__(self) -> RelayServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ------------------------------------------------------------ internals

    def _stats(self) -> dict[str, Any]:
        stats = {**self.stats.as_dict(), "queued_bytes": self._queued_bytes, "rss_kib": _rss_kib()}
        if self._cluster is not None:
            stats["cluster"] = self._cluster.stats()
        return stats

    @property
    def cluster(self) -> RelayCluster | None:
        """This relay's membership in a NATS relay cluster (``None`` without ``--cluster``)."""
        return self._cluster

    async def _sweep_periodically(self) -> None:
        """Once a second: disconnect readers behind by more than ``max_lag`` and
        connections that never subscribed within ``idle_timeout``."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        while not self._closing:  # ends when close() cancels this task
            await asyncio.sleep(min(1.0, cfg.max_lag / 4))
            now = loop.time()
            for conn in list(self._conns.values()):
                if conn.closing:
                    continue
                if conn.queue and now - conn.queue[0][0] > cfg.max_lag:
                    self._disconnect(conn, CLOSE_SLOW_CONSUMER, "too far behind", "lagging")
                elif (
                    cfg.idle_timeout > 0
                    and not conn.ever_subscribed
                    and now - conn.opened > cfg.idle_timeout
                ):
                    self._disconnect(conn, CLOSE_IDLE, "no subscription", "idle")

    async def _log_stats_periodically(self) -> None:
        interval = self.config.stats_interval
        while not self._closing:  # ends when close() cancels this task
            await asyncio.sleep(interval)
            self.log.info("relay_stats", connections=len(self._conns), **self._stats())

    async def _handle(self, ws: ServerConnection) -> None:
        """One connection's lifetime: admit, read frames in order, clean up."""
        if self._closing:
            await self._close_ws(ws, CLOSE_SHUTDOWN, "relay shutting down")
            return
        ip, peer = self._client(ws)
        group = self.config.host_grouping.group(ip)
        per_ip = self.config.max_clients_per_ip
        if per_ip and self._per_ip[group] >= per_ip:
            self.stats.connections_rejected += 1
            self.stats.rejected_per_ip += 1
            if self.stats.rejected_per_ip & (self.stats.rejected_per_ip - 1) == 0:
                # logged at the 1st, 2nd, 4th, 8th... refusal: a flood must not flood the log
                self.log.warning(
                    "connection_rejected", peer=peer, reason="too many from address",
                    host=group, max_clients_per_ip=per_ip,
                    rejected_per_ip=self.stats.rejected_per_ip,
                )
            await self._close_ws(ws, CLOSE_FULL, "too many connections from your address")
            return
        if self._open_count() >= self.config.max_clients and not self._shed_for_newcomer(
            asyncio.get_running_loop().time(), group
        ):
            self.stats.connections_rejected += 1
            self.log.warning("connection_rejected", peer=peer, reason="relay full")
            await self._close_ws(ws, CLOSE_FULL, "relay full")
            return
        loop = asyncio.get_running_loop()
        conn = _Conn(next(self._ids), ws, self.config, loop.time(), (ip, peer))
        self._conns[conn.cid] = conn
        self._per_ip[conn.group] += 1
        self.stats.connections_total += 1
        conn.writer = asyncio.create_task(self._write_loop(conn))
        self.log.info("connection_opened", conn=conn.cid, peer=conn.peer, open=len(self._conns))
        reason = "closed by peer"
        try:
            async for message in ws:
                self._on_message(conn, message, loop.time())
                if conn.closing:
                    break
        except ConnectionClosed as exc:
            if exc.sent is not None and exc.sent.code == 1009:
                self.stats.dropped["frame_too_large"] += 1
                reason = "frame too large"
            else:
                reason = f"connection lost ({exc.rcvd.code if exc.rcvd else 'no close frame'})"
        finally:
            self._forget(conn)
            if conn.writer is not None:
                conn.writer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await conn.writer
            self._release(conn)
            if conn.close_task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await conn.close_task
            self.log.info("connection_closed", conn=conn.cid, reason=reason, open=len(self._conns))

    def _open_count(self) -> int:
        """Connections open and not being closed (a shed one no longer takes a slot)."""
        return sum(1 for c in self._conns.values() if not c.closing)

    def _shed_for_newcomer(self, now: float, newcomer: str) -> bool:
        """The relay is full: close one connection so that a newcomer from host
        ``newcomer`` gets its slot; False if none qualifies (the newcomer is refused).

        First the host rule: when the biggest host holds at least two connections more
        than the newcomer's host, its longest-silent connection (the longest since it
        published or was delivered anything) gives way, whatever its traffic. After
        that the biggest host still holds at least as many as the newcomer's, so two
        hosts never take turns, and a relay of N slots holds room for a new host until
        every host holds at most one more connection than the newcomer's.

        Else the idle rule: a connection qualifies once it has been open, and has
        neither published nor been delivered anything, for ``idle_timeout`` seconds
        (never when it is 0): a member of a live channel is delivered its peers'
        messages and syncs. Of those, first the ones whose topics no other host
        subscribes to here (they carry nothing to anyone), then those of the host
        with the most connections, with the most topics, silent the longest.
        """
        live = [c for c in self._conns.values() if not c.closing]
        per_host = Counter(c.group for c in live)
        if per_host:
            biggest = max(per_host.values())
            if biggest >= per_host[newcomer] + 2:
                victim = min(
                    (c for c in live if per_host[c.group] == biggest),
                    key=lambda c: (c.last_carried, c.cid),
                )
                self._shed_one(victim, now, "new_host", newcomer, per_host[victim.group])
                return True
        grace = self.config.idle_timeout
        if grace <= 0:
            return False
        candidates = [
            c for c in live if now - c.opened >= grace and now - c.last_carried >= grace
        ]
        if not candidates:
            return False

        def shared(c: _Conn) -> bool:
            topics = self._topics
            return any(
                any(o.group != c.group for o in topics.get(t, ())) for t in c.topics
            )

        victim = min(
            candidates,
            key=lambda c: (shared(c), -per_host[c.group], -len(c.topics), c.last_carried),
        )
        self._shed_one(victim, now, "idle", newcomer, per_host[victim.group], shared(victim))
        return True

    def _shed_one(self, victim: _Conn, now: float, rule: str, newcomer: str, held: int,
              shared: bool | None = None) -> None:  # fmt: skip
        """Close ``victim`` (``shed``) to make room for a newcomer from host ``newcomer``."""
        self.log.info(
            "connection_shed", conn=victim.cid, peer=victim.peer, host=victim.group,
            host_connections=held, rule=rule, for_host=newcomer, topics=len(victim.topics),
            shared=shared, silent_s=round(now - victim.last_carried, 1),
        )
        self._disconnect(victim, CLOSE_FULL, "relay full: connection shed", "shed")

    def _client(self, ws: ServerConnection) -> tuple[str, str]:
        """``(ip, peer)`` of the client: the socket's, or behind a trusted proxy the
        address ``X-Forwarded-For`` names (``peer`` then says ``IP via PROXY:PORT``)."""
        ip = _peer_ip(ws)
        if not self._trusted:
            return ip, _peer_name(ws)
        request = ws.request
        values = request.headers.get_all("X-Forwarded-For") if request is not None else []
        client, forwarded = client_address(ip, values, self._trusted)
        if not forwarded:
            return ip, _peer_name(ws)
        return client, f"{client} via {_peer_name(ws)}"

    def _forget(self, conn: _Conn) -> None:
        if self._conns.pop(conn.cid, None) is not None:
            self._per_ip[conn.group] -= 1
            if self._per_ip[conn.group] <= 0:
                del self._per_ip[conn.group]
        for topic in conn.topics:
            subs = self._topics.get(topic)
            if subs is not None:
                subs.discard(conn)
                if not subs:
                    del self._topics[topic]
                    if self._cluster is not None:
                        self._cluster.unwant(topic)
        conn.topics.clear()

    async def _write_loop(self, conn: _Conn) -> None:
        """The only task that writes to this connection (one per connection).

        A frame stays in the queue (and counted) until it is written, so the
        age of ``queue[0]`` is how far behind the reader is.
        """
        ws = conn.ws
        stats = self.stats
        try:
            while not conn.closing:  # ends on closing, ConnectionClosed or cancellation
                if not conn.queue:
                    conn.wake.clear()
                    await conn.wake.wait()
                    continue
                data = conn.queue[0][1]
                conn.busy = True
                await ws.send(data)
                conn.busy = False
                if conn.closing:  # _disconnect discarded the queue meanwhile
                    return
                conn.queue.popleft()
                conn.queued_bytes -= len(data)
                self._queued_bytes -= len(data)
                stats.frames_sent += 1
        except ConnectionClosed:
            return

    def _release(self, conn: _Conn) -> int:
        """Discard ``conn``'s queue at once (a slow reader must not pin memory);
        returns the number of frames thrown away."""
        discarded = len(conn.queue)
        self._queued_bytes -= conn.queued_bytes
        conn.queued_bytes = 0
        conn.queue = deque()
        return discarded

    def _shed(self, need: int, keep: _Conn) -> None:
        """Disconnect the connections holding the most queued bytes until ``need``
        more bytes fit in ``memory_budget`` (``keep`` last)."""
        budget = self.config.memory_budget
        for _ in range(len(self._conns)):  # bounded: one connection per round
            if self._queued_bytes + need <= budget:
                return
            holders = [c for c in self._conns.values() if c.queued_bytes and not c.closing]
            if not holders:
                return
            worst = max(holders, key=lambda c: (c is not keep, c.queued_bytes))
            self._disconnect(worst, CLOSE_SLOW_CONSUMER, "relay memory budget", "memory_budget")

    def _can_write_now(self, conn: _Conn) -> bool:
        """True if ``data`` may be written straight to the socket, bypassing the queue.

        Only when nothing is queued or being sent (so order is kept) and the
        socket's write buffer is at most :data:`DIRECT_WRITE_LIMIT` (so memory
        stays bounded: one frame beyond that limit at most).
        """
        return (
            not conn.busy
            and not conn.queue
            and conn.ws.transport.get_write_buffer_size() <= DIRECT_WRITE_LIMIT
        )

    def _enqueue(self, conn: _Conn, data: bytes, now: float | None = None) -> bool:
        """Send ``data`` to ``conn`` in order: directly if it keeps up, else via its queue.

        A queue that would exceed ``queue`` frames or ``queue_bytes`` disconnects
        the connection as a slow consumer; one whose oldest frame is older than
        ``max_lag`` as lagging; past ``memory_budget`` the biggest queues go.
        """
        if conn.closing:
            return False
        if self._can_write_now(conn):
            broadcast((conn.ws,), data)
            self.stats.frames_sent += 1
            return True
        cfg = self.config
        if now is None:
            now = asyncio.get_running_loop().time()
        size = len(data)
        queue = conn.queue
        if len(queue) >= cfg.queue or conn.queued_bytes + size > cfg.queue_bytes:
            self._disconnect(conn, CLOSE_SLOW_CONSUMER, "send queue full", "slow_consumer")
            return False
        if queue and now - queue[0][0] > cfg.max_lag:
            self._disconnect(conn, CLOSE_SLOW_CONSUMER, "too far behind", "lagging")
            return False
        if self._queued_bytes + size > cfg.memory_budget:
            self._shed(size, conn)
            if conn.closing:
                return False
        queue.append((now, data))
        conn.queued_bytes += size
        self._queued_bytes += size
        if self._queued_bytes > self.stats.queued_bytes_peak:
            self.stats.queued_bytes_peak = self._queued_bytes
        conn.wake.set()
        return True

    def _reject(self, conn: _Conn, code: str, reason: str) -> None:
        self.stats.dropped[code] += 1
        self._enqueue(conn, encode_error(code, reason))

    def _disconnect(self, conn: _Conn, code: int, reason: str, counter: str | None) -> None:
        """Start closing ``conn`` now; never blocks. Its queue is discarded."""
        if conn.closing:
            return
        conn.closing = True
        queued_bytes = conn.queued_bytes
        # Free the queued frames at once: a slow consumer must not pin memory.
        discarded = self._release(conn)
        if counter is not None:
            self.stats.dropped[counter] += 1
            self.stats.dropped["queue_discarded"] += discarded
            self.log.warning(
                "connection_dropped",
                conn=conn.cid,
                peer=conn.peer,
                reason=counter,
                close_code=code,
                discarded_frames=discarded,
                discarded_bytes=queued_bytes,
            )
        if conn.writer is not None:
            conn.writer.cancel()
        conn.close_task = asyncio.create_task(self._close_ws(conn.ws, code, reason))

    async def _close_ws(self, ws: ServerConnection, code: int, reason: str) -> None:
        """Closing handshake bounded by ``close_timeout``, then abort the TCP connection.

        The bound matters: a peer that never reads keeps the write buffer full,
        so websockets' own close() would wait forever for it to drain.
        """
        try:
            async with asyncio.timeout(self.config.close_timeout):
                await ws.close(code, reason)
        except (TimeoutError, ConnectionClosed, OSError):
            pass
        finally:
            if ws.state is not State.CLOSED:
                ws.transport.abort()

    def _on_message(self, conn: _Conn, message: str | bytes, now: float) -> None:
        """Handle one incoming websocket message (synchronous: frames stay in order)."""
        stats = self.stats
        stats.frames_received += 1
        if not conn.rate.take(now):
            self._reject(conn, "rate_limited", "over the per-connection frame rate")
            if not conn.strikes.take(now):
                self._disconnect(conn, CLOSE_ABUSE, "rate limit exceeded repeatedly", "abuse")
            return
        if isinstance(message, str):
            self._reject(conn, "malformed", "text frames are not accepted")
            return
        try:
            frame = decode_frame(message)
        except FrameDecodeError as exc:
            self._reject(conn, exc.code, exc.reason)
            return
        kind = frame.WhichOneof("body")
        if kind == "publish":
            self._publish(conn, frame.publish.envelope)
        elif kind == "subscribe":
            self._subscribe(conn, frame.subscribe.topics)
        elif kind == "unsubscribe":
            self._unsubscribe(conn, frame.unsubscribe.topics)
        elif kind == "ping":
            if self._cluster is not None and not self._cluster.settled:
                # The Pong confirms a subscription: only once NATS has it too.
                task = asyncio.create_task(self._pong_when_settled(conn, frame.ping.nonce))
                self._pongs.add(task)
                task.add_done_callback(self._pongs.discard)
            else:
                self._enqueue(conn, encode_pong(frame.ping.nonce))
        elif kind in ("pong", "error"):
            pass  # never answer these, so two peers cannot loop on each other
        else:  # deliver: only the relay sends those
            self._reject(conn, "unexpected_frame", f"clients may not send {kind}")

    def _publish(self, conn: _Conn, envelope: bytes) -> None:
        try:
            topic = peek_topic(envelope)
        except EnvelopeError as exc:
            self._reject(conn, exc.reason, "publish does not carry a valid envelope")
            return
        if not topic or len(topic) > MAX_TOPIC_BYTES:
            self._reject(conn, "bad_topic", f"topic of {len(topic)} bytes")
            return
        self.stats.published += 1
        cluster = self._cluster
        if cluster is not None:  # every publish, a resend of the same bytes too
            cluster.publish(topic, envelope, conn.cid)
        if self._fan_out(topic, envelope, conn) or cluster is not None:
            # it carried something to someone (in a cluster, perhaps to another relay)
            conn.last_carried = asyncio.get_running_loop().time()

    def _deliver_from_cluster(self, topic: bytes, envelope: bytes) -> None:
        """An envelope another relay of the cluster forwarded: to every local subscriber."""
        self._fan_out(topic, envelope, None)

    async def _pong_when_settled(self, conn: _Conn, nonce: int) -> None:
        if self._cluster is not None:
            await self._cluster.wait_settled()
        self._enqueue(conn, encode_pong(nonce))

    def _fan_out(self, topic: bytes, envelope: bytes, conn: _Conn | None) -> bool:
        """Deliver ``envelope`` to the local subscribers of ``topic`` except ``conn``;
        False if there was nobody to deliver it to."""
        subscribers = self._topics.get(topic)
        if not subscribers or (len(subscribers) == 1 and conn in subscribers):
            self.stats.unrouted += 1
            return False
        # Encode once; every subscriber's queue holds the same bytes object.
        data = encode_deliver(envelope)
        # Subscribers that keep up get the frame written at once, all in one
        # websockets.broadcast call; the others get it through their queue.
        direct: list[ServerConnection] = []
        queued = 0
        now = asyncio.get_running_loop().time()
        for other in tuple(subscribers):
            if other is conn or other.closing:
                continue
            other.last_carried = now
            if self._can_write_now(other):
                direct.append(other.ws)
            elif self._enqueue(other, data, now):
                queued += 1
        if direct:
            broadcast(direct, data)
            self.stats.frames_sent += len(direct)
        self.stats.deliveries += queued + len(direct)
        return True

    def _subscribe(self, conn: _Conn, topics: Iterable[bytes]) -> None:
        wanted = list(topics)
        for topic in wanted:
            if not topic or len(topic) > MAX_TOPIC_BYTES:
                self._reject(conn, "bad_topic", f"topic of {len(topic)} bytes")
                return
        if len(conn.topics | set(wanted)) > self.config.max_topics:
            self._reject(conn, "too_many_topics", f"at most {self.config.max_topics} topics")
            return
        for topic in wanted:
            conn.topics.add(topic)
            subs = self._topics.get(topic)
            if subs is None:
                subs = self._topics[topic] = set()
                if self._cluster is not None:
                    self._cluster.want(topic)
            subs.add(conn)
        if wanted:
            conn.ever_subscribed = True
        self.log.debug("subscribed", conn=conn.cid, topics=len(conn.topics))

    def _unsubscribe(self, conn: _Conn, topics: Iterable[bytes]) -> None:
        for topic in topics:
            if topic in conn.topics:
                conn.topics.discard(topic)
                subs = self._topics.get(topic)
                if subs is not None:
                    subs.discard(conn)
                    if not subs:
                        del self._topics[topic]
                        if self._cluster is not None:
                            self._cluster.unwant(topic)


async def serve_until_signal(config: RelayConfig, logger: RelayLogger | None = None) -> int:
    """Run a relay until SIGINT or SIGTERM, then shut it down cleanly.

    Returns:
        0 after a clean shutdown, 1 if the relay could not start.
    """
    log = logger if logger is not None else RelayLogger(config.log_format)
    server = RelayServer(config, logger=log)
    stop = StopSignals().install()  # before it listens: a signal while it starts is a stop
    try:
        try:
            await server.start()
        except OSError as exc:
            log.error("relay_start_failed", host=config.host, port=config.port, error=str(exc))
            return 1
        try:
            reload_tls = server.reload_tls if server.tls is not None else None
            log.info("relay_shutdown", signal=await stop.stopped(reload_tls))
        finally:
            await server.close()
    finally:
        stop.remove()
    return 0


def run_relay(config: RelayConfig, logger: RelayLogger | None = None) -> int:
    """Blocking entry point for ``sdschat relay``; returns the process exit status."""
    return runner.run(serve_until_signal(config, logger))
