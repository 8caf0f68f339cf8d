"""``sdschat store``: a store peer that archives envelopes and answers history queries.

A store peer subscribes to topics (over any number of relays, and/or LAN
gossip) and keeps every envelope of those topics in SQLite (the ``archive``
table of :mod:`storage.archive`) with its arrival time, byte for byte as it
arrived. It holds no channel key and never decrypts: it reads an envelope's
``topic`` and hashes its bytes, nothing else. Nodes that were away ask it for
what they missed; nodes missing a dependency ask it by retrieval hint.

Ingest (:meth:`StorePeer.ingest`): an envelope is checked (size, canonical v1
``Envelope`` encoding, 12-byte nonce, a topic this store archives), stamped
with its arrival time and buffered. Arrival times are on the store's *arrival
clock*: its wall clock plus an offset that only grows, so arrival times
strictly increase, within a run and across restarts: a store that finds
envelopes stamped later than its clock (its clock was ahead, then corrected)
continues from the newest of them at the clock's rate (``store_clock_behind``
in the log), and a clock stepped back while running does the same. Envelopes
arriving in the same millisecond get the next ones (a burst's arrival times run
ahead of the clock until it catches up; ``Info.store_time_ms`` stays on the clock,
behind them, so a client's "since" never passes an envelope). Clients'
cursors and "since" times (``Info.store_time_ms`` is the arrival clock) stay
valid, so a catch-up never skips what arrived after a correction. A writer
task commits the buffer in one transaction every ``flush_interval_s`` or
every ``flush_max`` envelopes. A crash (``kill -9``) loses at most that
unflushed buffer; what was committed survives (SQLite WAL). Duplicates (same
hash) are ignored.

Queries (``net/store.proto``, one ``StoreFrame`` per websocket binary
message, answered in order per connection):

* ``InfoRequest`` -> ``Info`` (limits, the store's clock);
* ``QueryByHash`` (1..``max_hashes`` hashes of 32 bytes) -> the envelopes
  found, in frames of about ``response_frame_bytes``;
* ``QueryByTime`` (topic, since/until, cursor, page size) -> one page, oldest
  first, with the ``next`` cursor when the range has more.

Refusals are ``Error`` frames with a stable ``code`` (see store.proto); the
connection stays open. Frames above ``max_frame`` close it with 1009.
Connections beyond ``max_clients``, or beyond ``max_clients_per_ip`` from one
host (an IPv4 /24, all of ``127.0.0.0/8``, an IPv6 /64: :mod:`net.hosts`), are
closed with 1013 at once; a connection that sends no request for
``idle_timeout`` is closed with 1008, so idle sockets cannot hold every slot
(clients reconnect when they next ask, and a node's catch-up retries while the
store is full: ``net/store_sync.py``).

Retention by age and by size runs at start and every ``retention_interval_s``
(:mod:`net.store_config` documents the flags), by the store's rule
(:mod:`storage.retention`): unattributed envelopes are kept only in the room the
attributed ones leave, and within each tier the writers holding the most lose
their oldest envelopes first, down to an equal share, so a flood cannot push out
the others. A writer is what the store can attribute an envelope to: on a topic
whose channel key it knows (a public channel archived by name,
``public_channel_keys``) the signer whose Ed25519 signature verifies; on a topic
with a write key the host that sent it in a ``Put`` whose proof checked (a store
may hold several write keys of a topic, one per epoch of a members channel, and
lists their ids in ``Info``); otherwise nobody (``b""``, unattributed: garbage
nobody signed, a ``Put`` on a topic without a write key, relay and LAN envelopes
of a topic whose key the store does not hold). Logs are JSON lines on stderr
(``store_listening`` with the bound ``port``, ``store_stats``, ...). SIGINT and
SIGTERM flush the buffer, close connections and exit 0.

In-process use (tests, benchmarks)::

    peer = StorePeer(StorePeerConfig(data_dir, topics=(topic,), listen=("127.0.0.1", 0)))
    await peer.start()
    url = peer.url                        # ws://127.0.0.1:<port>
    await peer.ingest(envelope_bytes)     # what the relay/LAN feeds call
    await peer.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from net import envelope_pb2, runner, store_pb2
from net.envelope import (
    ENVELOPE_VERSION,
    MAX_ENVELOPE_BYTES,
    NONCE_BYTES,
    EnvelopeError,
    envelope_hash,
    open_envelope,
)
from net.errors import NetError
from net.relay import TokenBucket
from net.relay_client import RelayClient, StateChange
from net.relay_log import RelayLogger
from net.signals import StopSignals
from net.store_config import StorePeerConfig
from net.store_engine import Archive, ArchiveUnavailable
from net.store_frames import (
    HASH_BYTES,
    STORE_PROTOCOL_VERSION,
    StoreFrameError,
    decode_store_frame,
    encode_envelopes,
    encode_error,
    encode_info,
    encode_put_result,
)
from net.store_proof import key_id, proof_checks
from net.store_sqlite import SqliteArchive
from net.tls import ServerTLS
from storage import ArchivedEnvelope, Store

__all__ = [
    "CLOSE_FULL",
    "CLOSE_IDLE",
    "CLOSE_SHUTDOWN",
    "EnvelopeFeed",
    "StorePeer",
    "StoreStats",
    "check_envelope",
    "run_store",
    "serve_store_until_signal",
]

CLOSE_FULL = 1013
"""Close code for a query connection refused because ``max_clients`` are connected."""

CLOSE_SHUTDOWN = 1001
"""Close code used when the store shuts down."""

CLOSE_IDLE = 1008
"""Close code for a query connection that sent no request within ``idle_timeout_s``."""

def _oversized(message: bytes, cfg: StorePeerConfig) -> str:
    return f"request of {len(message)} bytes > {cfg.max_request_bytes}"


def _peer_ip(ws: ServerConnection) -> str:
    try:
        addr = ws.remote_address
    except Exception:  # transport already gone
        return "?"
    return str(addr[0]) if isinstance(addr, tuple) and addr else str(addr)


def wall_ms() -> int:
    """Wall-clock milliseconds (arrival times)."""
    return time.time_ns() // 1_000_000


class EnvelopeFeed(Protocol):
    """Where envelopes come from (a relay subscription, LAN gossip): started once, closed once."""

    def start(self) -> None: ...

    async def close(self) -> None: ...


def check_envelope(data: bytes, topics: frozenset[bytes]) -> tuple[bytes | None, str | None]:
    """``(topic, None)`` for an envelope a store may archive, else ``(None, reason)``.

    The checks need no key: size, canonical ``Envelope`` encoding (the form
    whose hash every participant computes the same) of version
    :data:`~net.envelope.ENVELOPE_VERSION`, a 12-byte nonce, and a topic in
    ``topics``.
    """
    if len(data) > MAX_ENVELOPE_BYTES:
        return None, "oversized"
    try:
        env = envelope_pb2.Envelope.FromString(data)
    except Exception:
        return None, "malformed"
    if env.version != ENVELOPE_VERSION:
        return None, "unsupported_version"
    canonical = envelope_pb2.Envelope(
        version=env.version, topic=env.topic, nonce=env.nonce, ciphertext=env.ciphertext
    ).SerializeToString()
    if canonical != data or len(env.nonce) != NONCE_BYTES:
        return None, "malformed"
    if env.topic not in topics:
        return None, "unknown_topic"
    return env.topic, None


@dataclass
class StoreStats:
    """Counters over the store's lifetime (logged as ``store_stats``).

    Attributes:
        received: envelopes handed to :meth:`StorePeer.ingest`.
        archived: envelopes newly written (duplicates excluded).
        duplicates: received envelopes whose hash was already archived or buffered.
        rejected: received envelopes refused, by reason.
        flushes: write transactions.
        queries: answered requests, by kind (``info``, ``by_hash``, ``by_time``).
        served_envelopes, served_bytes: envelopes sent in answers.
        errors: ``Error`` answers, by code.
        retention_deleted: envelopes deleted by retention.
        vacuumed_bytes: bytes the database file gave back to the file system after
            retention (incremental vacuum).
        connections_total, connections_rejected: query connections (rejected:
            ``max_clients`` or ``max_clients_per_ip``).
        rejected_per_ip: query connections refused by ``max_clients_per_ip``.
        idle_closed: query connections closed after ``idle_timeout_s`` without a request.
        unattributed: archived envelopes the store could attribute to no writer
            (they share one writer's part of ``max_bytes``).
        archive_failures: writes the archive refused or could not take (retried).
    """

    received: int = 0
    archived: int = 0
    duplicates: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    flushes: int = 0
    queries: Counter[str] = field(default_factory=Counter)
    served_envelopes: int = 0
    served_bytes: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    retention_deleted: int = 0
    vacuumed_bytes: int = 0
    connections_total: int = 0
    connections_rejected: int = 0
    rejected_per_ip: int = 0
    idle_closed: int = 0
    unattributed: int = 0
    archive_failures: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "received": self.received,
            "archived": self.archived,
            "duplicates": self.duplicates,
            "rejected": dict(sorted(self.rejected.items())),
            "flushes": self.flushes,
            "queries": dict(sorted(self.queries.items())),
            "served_envelopes": self.served_envelopes,
            "served_bytes": self.served_bytes,
            "errors": dict(sorted(self.errors.items())),
            "retention_deleted": self.retention_deleted,
            "vacuumed_bytes": self.vacuumed_bytes,
            "connections_total": self.connections_total,
            "connections_rejected": self.connections_rejected,
            "rejected_per_ip": self.rejected_per_ip,
            "idle_closed": self.idle_closed,
            "unattributed": self.unattributed,
            "archive_failures": self.archive_failures,
        }


class _RejectedRequest(NetError):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


class _RelayFeed:
    """Subscribes to the store's topics on one relay and feeds :meth:`StorePeer.ingest`."""

    def __init__(self, peer: StorePeer, url: str) -> None:
        self.url = url
        self._peer = peer

        def on_state(change: StateChange) -> None:
            peer.log.info(
                "relay_state",
                relay=url,
                state=change.state.value,
                reason=change.reason,
                retry_in=change.retry_in,
            )

        self._client = RelayClient(
            url, sorted(peer.topics), peer.ingest, on_state=on_state, backoff_max=10.0
        )

    def start(self) -> None:
        self._client.start()

    async def close(self) -> None:
        await self._client.close()

    async def wait_connected(self, timeout: float | None = None) -> bool:
        return await self._client.wait_connected(timeout)


class StorePeer:
    """The store peer, runnable in-process (see the module docstring).

    Args:
        config: data directory, topics, feeds, limits.
        logger: where structured events go (default: ``config.log_format`` on stderr).
        feeds: extra envelope sources (LAN gossip) started and closed with the
            store; relays in ``config.relays`` get one feed each automatically.
        clock: wall-clock milliseconds (injectable in tests: retention by age).
        archive: the engine that keeps the envelopes (default: from ``config``, SQLite in
            ``data_dir`` or JetStream with ``config.jetstream``; :mod:`net.store_engine`).
    """

    def __init__(
        self,
        config: StorePeerConfig,
        *,
        logger: RelayLogger | None = None,
        feeds: Iterable[EnvelopeFeed] = (),
        clock: Callable[[], int] = wall_ms,
        archive: Archive | None = None,
    ) -> None:
        self.config = config
        self.log = logger if logger is not None else RelayLogger(config.log_format)
        self.topics: frozenset[bytes] = frozenset(config.topics)
        self._write_keys: dict[bytes, list[bytes]] = {}
        for topic, wkey in config.write_keys:  # several per topic: a key rotation
            self._write_keys.setdefault(topic, []).append(wkey)
        self._open_keys: dict[bytes, bytes] = dict(config.public_channel_keys)
        self.stats = StoreStats()
        self._clock = clock
        self._opened = False
        self.archive_down: str | None = None
        """Why the archive cannot be used right now (``None``: it can)."""
        self._oldest_arrival = 0  # the last oldest arrival time the archive gave
        self._feeds: list[EnvelopeFeed] = list(feeds)
        self._relay_feeds: list[_RelayFeed] = []
        self._pending: list[ArchivedEnvelope] = []
        self._inflight: list[ArchivedEnvelope] = []  # the batch being written
        self._flush_lock = asyncio.Lock()
        self._pending_hashes: set[bytes] = set()
        self._last_arrival = 0
        self._clock_offset = 0  # arrival clock = wall clock + this (never decreases)
        self._last_wall = 0  # the wall clock's last reading (to see it step back)
        self._flush_wake = asyncio.Event()
        self._retention_wake = asyncio.Event()
        self._since_retention = 0  # envelope bytes written since retention last ran
        self._space = asyncio.Event()
        self._space.set()
        self._flushed = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._retention: asyncio.Task[None] | None = None
        self._stats_task: asyncio.Task[None] | None = None
        self._server: Server | None = None
        self._port: int | None = None
        self._conns: set[ServerConnection] = set()
        self._per_host: Counter[str] = Counter()
        self._ids = itertools.count(1)
        self._closing = False
        self._closed = asyncio.Event()
        self.tls: ServerTLS | None = None
        """The query listener's TLS context when ``config.certfile`` is set."""
        self._archive: Archive = archive if archive is not None else self._make_archive()

    # ------------------------------------------------------------------ API

    @property
    def store(self) -> Store:
        """The open :class:`storage.Store` of a SQLite-backed store (its ``archive``
        holds the envelopes)."""
        if not isinstance(self._archive, SqliteArchive) or not self._opened:
            raise RuntimeError("store peer not started, or not backed by SQLite")
        return self._archive.store

    @property
    def archive(self) -> Archive:
        """The engine that keeps the envelopes (:mod:`net.store_engine`)."""
        return self._archive

    def _make_archive(self) -> Archive:
        cfg = self.config
        if not cfg.jetstream:
            return SqliteArchive(cfg.data_dir)
        try:
            from net.store_jetstream import JetStreamArchive
        except ImportError as exc:  # nats-py missing: an OSError, the store does not start
            raise ConnectionError(f"--jetstream needs the NATS client nats-py "
                                  f"(pip install 'sdschat[cluster]'): {exc}") from None
        return JetStreamArchive.from_config(cfg, self.log, wake_retention=self._retention_wake.set)

    @property
    def port(self) -> int:
        """The bound query port (useful with port 0)."""
        if self._port is None:
            raise RuntimeError("store peer has no query listener")
        return self._port

    @property
    def url(self) -> str:
        """``ws://host:port`` (``wss://`` with TLS) of the query listener."""
        assert self.config.listen is not None
        host = self.config.listen[0]
        if ":" in host:
            host = f"[{host}]"
        return f"{'wss' if self.tls is not None else 'ws'}://{host}:{self.port}"

    def reload_tls(self) -> bool:
        """Read ``certfile``/``keyfile`` again (SIGHUP): new query connections get the
        new certificate. Logs ``tls_reloaded`` or, keeping the old one, ``tls_reload_failed``."""
        if self.tls is None:
            self.log.warning("tls_reload_ignored", reason="no --certfile: serving ws://")
            return False
        try:
            self.tls.reload()
        except OSError as exc:
            self.log.error("tls_reload_failed", certfile=self.tls.certfile, error=str(exc))
            return False
        self.log.info("tls_reloaded", certfile=self.tls.certfile, reloads=self.tls.reloads)
        return True

    @property
    def pending(self) -> int:
        """Received envelopes not yet written."""
        return len(self._pending)

    async def start(self) -> None:
        """Open the archive, run retention once, start listening and the feeds.

        Raises:
            storage.DataDirLockedError, storage.CorruptDatabaseError,
            storage.NewerSchemaError: from :meth:`storage.Store.open`.
            OSError: the query address cannot be bound.
        """
        cfg = self.config
        await self._archive.open()
        self._opened = True
        try:
            try:
                count, size = await self._archive.stats()
                newest = await self._archive.newest_arrival()
            except ArchiveUnavailable as exc:  # it opened, then went: start all the same
                count = size = newest = 0
                self._archive_failed(exc, 0)
            self._last_arrival = newest
            wall = self._clock()
            if newest >= wall:
                self._clock_offset = newest + 1 - wall
            if self._clock_offset > 1000:  # not a burst's few ms: a clock corrected back
                self.log.warning("store_clock_behind", newest_arrival_ms=newest,
                                 offset_ms=self._clock_offset,
                                 note="the archive has envelopes stamped later than this "
                                 "clock: arrival times continue from them")
            self.log.info(
                "store_opened",
                data_dir=str(cfg.data_dir),
                engine=self._archive.engine,
                archive_id=self._archive.archive_id.hex(),
                envelopes=count,
                bytes=size,
                topics=[t.hex() for t in cfg.topics],
            )
            unproven = [t.hex() for t in cfg.topics
                        if t not in self._write_keys and t not in self._open_keys]  # fmt: skip
            if unproven:
                self.log.warning(
                    "store_topics_unattributed", topics=unproven,
                    note="no write key for these topics: their envelopes are attributed to "
                    "nobody, and anyone who knows a topic can push the others of it out; "
                    "give a members or passphrase channel --write-key (--print-write-key)",
                )
            with contextlib.suppress(ArchiveUnavailable):  # retried by the retention loop
                await self.run_retention()
            self._writer = asyncio.create_task(self._write_loop(), name="store-writer")
            if cfg.listen is not None:
                host, port = cfg.listen
                if cfg.certfile is not None:
                    self.tls = ServerTLS(cfg.certfile, cfg.keyfile)
                self._server = await serve(
                    self._handle,
                    host,
                    port,
                    ssl=self.tls.context if self.tls is not None else None,
                    max_size=cfg.max_frame,
                    compression=None,
                    close_timeout=5.0,
                    ping_interval=20.0,
                    ping_timeout=20.0,
                )
                self._port = int(self._server.sockets[0].getsockname()[1])
                self.log.info(
                    "store_listening", host=host, port=self._port, tls=self.tls is not None
                )
        except BaseException:
            await self._archive.close()
            self._opened = False
            raise
        self._retention = asyncio.create_task(self._retention_loop(), name="store-retention")
        if cfg.stats_interval_s > 0:
            self._stats_task = asyncio.create_task(self._stats_loop(), name="store-stats")
        for url in cfg.relays:
            feed = _RelayFeed(self, url)
            self._relay_feeds.append(feed)
            self._feeds.append(feed)
        for f in self._feeds:
            f.start()

    async def wait_relays_connected(self, timeout: float | None = None) -> bool:
        """Wait until every relay subscription is confirmed (tests)."""
        results = [await f.wait_connected(timeout) for f in self._relay_feeds]
        return all(results)

    def add_feed(self, feed: EnvelopeFeed) -> None:
        """Add an envelope source; started now if the store is running."""
        self._feeds.append(feed)
        if self._opened and not self._closing:
            feed.start()

    async def close(self) -> None:
        """Stop feeds, flush the buffer, close connections and the archive. Idempotent."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        for f in self._feeds:
            with contextlib.suppress(Exception):
                await f.close()
        for task in (self._retention, self._stats_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._server is not None:
            self._server.close(close_connections=False)
            for ws in list(self._conns):
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(2.0):
                        await ws.close(CLOSE_SHUTDOWN, "store shutting down")
                if ws.state is not State.CLOSED:
                    ws.transport.abort()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5.0):
                    await self._server.wait_closed()
        if self._writer is not None:
            self._flush_wake.set()
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        if self._opened:
            with contextlib.suppress(Exception):
                await self._flush()
            self.log.info("store_stats", final=True, **self.stats.as_dict())
            self._opened = False
            await self._archive.close()
        self.log.info("store_stopped")
        self._closed.set()

    async def __aenter__(self) -> StorePeer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def ingest(self, data: bytes, *, proven: bool = False, writer: bytes = b"") -> None:
        """Archive one received envelope (checked; buffered; written within ``flush_interval_s``).

        An envelope of a topic with a write key (``config.write_keys``) is
        refused (``unproven``) unless ``proven`` (a ``Put`` whose write proof
        was checked). ``writer`` is who sent it as far as the caller knows (a
        ``Put``: ``b"h"`` + its host); on a topic whose key the store knows, the
        verified signer (``b"k"`` + public key) replaces it. Waits only when
        ``ingest_limit`` envelopes are already waiting to be written
        (backpressure for the feed that called it).
        """
        self.stats.received += 1
        topic, reason = check_envelope(data, self.topics)
        if topic is None:
            assert reason is not None
            self.stats.rejected[reason] += 1
            return
        if not proven and topic in self._write_keys:
            self.stats.rejected["unproven"] += 1
            return
        digest = envelope_hash(data)
        if digest in self._pending_hashes:
            self.stats.duplicates += 1
            return
        writer = self._attribute(data, topic, writer)
        if not writer:
            self.stats.unattributed += 1
        arrival = self._now()
        if arrival <= self._last_arrival:  # the same millisecond, or the clock went back
            arrival = self._last_arrival + 1
        self._last_arrival = arrival
        self._pending.append(ArchivedEnvelope(digest, topic, arrival, data, writer))
        self._pending_hashes.add(digest)
        if len(self._pending) >= self.config.flush_max:
            self._flush_wake.set()
        for _ in range(1000):  # bounded: each pass waits for a flush
            if len(self._pending) < self.config.ingest_limit or self._closing:
                break
            self._space.clear()
            self._flush_wake.set()
            await self._space.wait()

    def _now(self) -> int:
        """The arrival clock: the wall clock plus an offset that only grows (see the module
        docstring); arrival times, ``store_time_ms`` and retention by age use it. A wall
        clock stepped back (by more than a second) since the last reading is absorbed
        into the offset, so the arrival clock goes on from where it was."""
        wall = self._clock()
        if wall < self._last_wall - 1000:
            self._clock_offset += self._last_wall - wall
            self.log.warning("store_clock_behind", stepped_back_ms=self._last_wall - wall,
                             offset_ms=self._clock_offset)
        self._last_wall = wall
        return wall + self._clock_offset

    def _attribute(self, data: bytes, topic: bytes, writer: bytes) -> bytes:
        """The signer of an envelope on a topic whose key this store knows (``b"k"`` +
        public key, once the signature verifies), else ``writer`` as given; ``b""`` for
        one that does not open or verify (garbage, a forged signer)."""
        key = self._open_keys.get(topic)
        if key is None:
            return writer
        try:
            return b"k" + open_envelope(data, key, topic).sender_public_key
        except EnvelopeError:
            return b""

    async def flush(self) -> None:
        """Write everything buffered now (tests; the writer task does it on its own)."""
        await self._flush()

    async def run_retention(self) -> int:
        """Apply retention by age, then by size (the store's rule, :mod:`storage.retention`,
        run by the archive: a JetStream archive runs it on the one store peer holding
        its lease); returns how many envelopes were deleted."""
        run = await self._archive.run_retention(self.config.retention, self._now())
        self._since_retention = 0
        if run.deleted:
            self.stats.retention_deleted += run.deleted
            vacuumed = run.details.get("vacuumed_bytes", 0)
            self.stats.vacuumed_bytes += vacuumed if isinstance(vacuumed, int) else 0
            self.log.info("store_retention", deleted=run.deleted, **run.details)
        return run.deleted

    # ------------------------------------------------------------ ingest

    async def _flush(self) -> None:
        """Write the buffer; a flush already running is waited for first (so a flush
        that returns has written everything received before it was called)."""
        if (not self._pending and not self._inflight) or not self._opened:
            return
        async with self._flush_lock:
            await self._flush_now()

    async def _flush_now(self) -> None:
        if not self._pending or not self._opened:
            return
        batch, self._pending = self._pending, []
        self._inflight = batch
        try:
            new = await self._archive.put(batch)
        except ArchiveUnavailable as exc:
            self._pending = batch + self._pending  # keep them; retried on the next flush
            self._archive_failed(exc, len(self._pending))
            raise
        except Exception as exc:
            self.log.error("store_write_failed", error=str(exc), envelopes=len(batch))
            self._pending = batch + self._pending  # keep them; retried on the next flush
            raise
        finally:
            self._inflight = []
            self._pending_hashes = {a.hash for a in self._pending}
            self._space.set()
        self._archive_works()
        self.stats.flushes += 1
        self.stats.archived += new
        self.stats.duplicates += len(batch) - new
        if new and self.config.max_bytes > 0:
            # retention runs at once when an eighth of --max-bytes arrived since the
            # last run: a flood cannot grow the file far past the limit in between
            self._since_retention += sum(len(a.envelope) for a in batch)
            if self._since_retention > max(self.config.max_bytes // 8, 1):
                self._retention_wake.set()

    def _archive_failed(self, exc: ArchiveUnavailable, pending: int) -> None:
        """The archive refused or could not be reached: one log line when it starts."""
        self.stats.archive_failures += 1
        if self.archive_down is None:
            self.log.error("store_archive_unavailable", engine=self._archive.engine,
                           full=exc.full, error=exc.reason, pending=pending,
                           note="keeps the envelopes received meanwhile (at most "
                           f"{self.config.ingest_limit}) and retries; serves what it can")
        self.archive_down = exc.reason

    def _archive_works(self) -> None:
        if self.archive_down is not None:
            self.archive_down = None
            self.log.info("store_archive_recovered", engine=self._archive.engine,
                          pending=len(self._pending))

    async def _write_loop(self) -> None:
        interval = self.config.flush_interval_s
        failures = 0
        while True:  # ends when close() cancels it
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._flush_wake.wait()
            self._flush_wake.clear()
            try:
                await self._flush()
                failures = 0
            except Exception:
                failures += 1  # retried ever more slowly, up to 2 s apart
                await asyncio.sleep(min(2.0, interval * 2 ** min(failures, 6)))

    async def _retention_loop(self) -> None:
        while True:  # ends when close() cancels it
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.retention_interval_s):
                    await self._retention_wake.wait()
            self._retention_wake.clear()
            try:
                await self.run_retention()
            except Exception as exc:
                self.log.error("store_retention_failed", error=str(exc))

    async def _stats_loop(self) -> None:
        while True:  # ends when close() cancels it
            await asyncio.sleep(self.config.stats_interval_s)
            self.log.info("store_stats", connections=len(self._conns), **self.stats.as_dict())

    # ------------------------------------------------------------ queries

    async def _handle(self, ws: ServerConnection) -> None:
        cfg = self.config
        host = cfg.host_grouping.group(_peer_ip(ws))
        refusal = None
        if self._closing or len(self._conns) >= cfg.max_clients:
            refusal = "store full"
        elif cfg.max_clients_per_ip and self._per_host[host] >= cfg.max_clients_per_ip:
            refusal = "too many connections from your address"
            self.stats.rejected_per_ip += 1
            if self.stats.rejected_per_ip & (self.stats.rejected_per_ip - 1) == 0:
                self.log.warning("query_connection_rejected", host=host,
                                 reason="too many from address",
                                 rejected_per_ip=self.stats.rejected_per_ip)
        if refusal is not None:
            self.stats.connections_rejected += 1
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await ws.close(CLOSE_FULL, refusal)
            if ws.state is not State.CLOSED:
                ws.transport.abort()
            return
        self._conns.add(ws)
        self._per_host[host] += 1
        self.stats.connections_total += 1
        cid = next(self._ids)
        loop = asyncio.get_running_loop()
        bucket = TokenBucket(cfg.rate, cfg.burst, loop.time())
        idle = cfg.idle_timeout_s or None
        self.log.debug("query_connection_opened", conn=cid, open=len(self._conns))
        try:
            while True:  # ends when the connection closes or idles out
                try:
                    async with asyncio.timeout(idle):
                        message = await ws.recv()
                except TimeoutError:
                    self.stats.idle_closed += 1
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(2.0):
                            await ws.close(CLOSE_IDLE, "idle")
                    if ws.state is not State.CLOSED:
                        ws.transport.abort()
                    break
                await self._answer(ws, message, bucket, loop.time())
        except ConnectionClosed:
            pass
        finally:
            self._archive.release(ws)
            self._conns.discard(ws)
            self._per_host[host] -= 1
            if self._per_host[host] <= 0:
                del self._per_host[host]
            self.log.debug("query_connection_closed", conn=cid, open=len(self._conns))

    async def _error(self, ws: ServerConnection, request_id: int, code: str, reason: str) -> None:
        self.stats.errors[code] += 1
        await ws.send(encode_error(request_id, code, reason))

    async def _answer(
        self, ws: ServerConnection, message: str | bytes, bucket: TokenBucket, now: float
    ) -> None:
        if not bucket.take(now):
            await self._error(ws, 0, "rate_limited", "over the per-connection request rate")
            return
        if isinstance(message, str):
            await self._error(ws, 0, "malformed", "text frames are not accepted")
            return
        try:
            frame = decode_store_frame(message)
        except StoreFrameError as exc:
            if len(message) > self.config.max_request_bytes:
                await self._error(ws, 0, "oversized", _oversized(message, self.config))
            else:
                await self._error(ws, 0, exc.code, exc.reason)
            return
        rid = frame.request_id
        kind = frame.WhichOneof("body")
        if kind != "put" and len(message) > self.config.max_request_bytes:
            # a Put carries envelopes: it may use the whole frame (max_frame)
            await self._error(ws, 0, "oversized", _oversized(message, self.config))
            return
        try:
            if kind == "info_request":
                await self._info(ws, rid)
            elif kind == "query_by_hash":
                await self._by_hash(ws, rid, frame.query_by_hash)
            elif kind == "query_by_time":
                await self._by_time(ws, rid, frame.query_by_time)
            elif kind == "put":
                await self._put(ws, rid, frame.put)
            else:
                raise _RejectedRequest("unexpected_frame", f"clients may not send {kind}")
        except _RejectedRequest as exc:
            await self._error(ws, rid, exc.code, exc.reason)
        except ConnectionClosed:
            raise
        except Exception as exc:  # a store problem must not kill the connection silently
            self.log.error("query_failed", kind=kind, error=f"{type(exc).__name__}: {exc}")
            await self._error(ws, rid, "internal", "the store could not answer")

    async def _info(self, ws: ServerConnection, rid: int) -> None:
        cfg = self.config
        with contextlib.suppress(ArchiveUnavailable):  # else the last one known: Info is
            self._oldest_arrival = await self._archive.oldest_arrival()  # always answered
        info = store_pb2.Info(
            protocol_version=STORE_PROTOCOL_VERSION,
            store_time_ms=self._now(),
            max_hashes=cfg.max_hashes,
            max_page_size=cfg.max_page_size,
            default_page_size=cfg.default_page_size,
            max_request_bytes=cfg.max_request_bytes,
            oldest_arrival_ms=self._oldest_arrival,
            proven_topics=sorted(self._write_keys),
            proven_key_ids=[key_id(k) for keys in self._write_keys.values() for k in keys],
            archive_id=self._archive.archive_id,
            engine=self._archive.engine,
        )
        self.stats.queries["info"] += 1
        await ws.send(encode_info(rid, info))

    async def _by_hash(self, ws: ServerConnection, rid: int, query: store_pb2.QueryByHash) -> None:
        hashes = list(query.hashes)
        if not hashes:
            raise _RejectedRequest("malformed", "no hashes")
        if len(hashes) > self.config.max_hashes:
            raise _RejectedRequest(
                "too_many_hashes", f"{len(hashes)} hashes > {self.config.max_hashes}"
            )
        for h in hashes:
            if len(h) != HASH_BYTES:
                raise _RejectedRequest("bad_hash", f"a hash of {len(h)} bytes")
        self.stats.queries["by_hash"] += 1
        wanted = list(dict.fromkeys(hashes))
        asked = set(wanted)
        buffered = {a.hash: a for a in (*self._inflight, *self._pending) if a.hash in asked}
        if self._pending:
            with contextlib.suppress(Exception):  # logged by _flush; the buffer answers
                await self._flush()  # a just-received envelope is findable at once
        try:
            found = await self._archive.by_hashes(wanted)
        except ArchiveUnavailable as exc:
            if not buffered:
                raise _RejectedRequest("unavailable", f"the archive: {exc.reason}") from None
            found = {}  # what is still buffered here is all this store can answer now
        found = {**buffered, **found}
        frame: list[tuple[bytes, int]] = []
        size = 0
        limit = self.config.response_frame_bytes
        for h in wanted:
            item = found.get(h)
            if item is None:
                continue
            if frame and size + len(item.envelope) > limit:
                await self._send_items(ws, rid, frame, final=False)
                frame, size = [], 0
            frame.append((item.envelope, item.arrival_ms))
            size += len(item.envelope)
        await self._send_items(ws, rid, frame, final=True, store_time_ms=self._now())

    async def _put(self, ws: ServerConnection, rid: int, put: store_pb2.Put) -> None:
        """Archive envelopes sent with write proofs (``net/store_proof.py``)."""
        items = put.envelopes
        if not items:
            raise _RejectedRequest("malformed", "no envelopes")
        if len(items) > self.config.max_hashes:
            raise _RejectedRequest(
                "too_many_hashes", f"{len(items)} envelopes > {self.config.max_hashes}"
            )
        self.stats.queries["put"] += 1
        host = b"h" + self.config.host_grouping.group(_peer_ip(ws)).encode()
        accepted = 0
        refused: list[str] = []
        for item in items:
            topic, reason = check_envelope(item.envelope, self.topics)
            keys = self._write_keys.get(topic, ()) if topic is not None else ()
            if keys and not any(proof_checks(k, topic or b"", item.envelope, item.proof)
                                for k in keys):  # fmt: skip
                reason = "bad_proof"
            if reason is not None:
                self.stats.received += 1
                self.stats.rejected[reason] += 1
                refused.append(reason)
                continue
            # a checked proof attributes the envelope to the sending host; without a
            # write key a Put proves nothing: unattributed, as from a relay
            await self.ingest(item.envelope, proven=True, writer=host if keys else b"")
            accepted += 1
        await ws.send(encode_put_result(rid, accepted, refused))

    async def _by_time(self, ws: ServerConnection, rid: int, query: store_pb2.QueryByTime) -> None:
        cfg = self.config
        topic = query.topic
        if not 1 <= len(topic) <= 64:
            raise _RejectedRequest("bad_topic", f"topic of {len(topic)} bytes")
        if topic not in self.topics:
            raise _RejectedRequest("unknown_topic", "this store does not archive that topic")
        page_size = query.page_size or cfg.default_page_size
        if page_size > cfg.max_page_size:
            raise _RejectedRequest("page_too_large", f"page_size {page_size} > {cfg.max_page_size}")
        since, until = query.since_ms, query.until_ms
        if until and until <= since:
            raise _RejectedRequest("bad_range", "until_ms must be after since_ms")
        cursor: tuple[int, bytes] | None = None
        if query.HasField("cursor"):
            if len(query.cursor.hash) != HASH_BYTES:
                raise _RejectedRequest("malformed", "cursor hash is not 32 bytes")
            cursor = (query.cursor.arrival_ms, query.cursor.hash)
        if since >= 2**63 or (cursor is not None and cursor[0] >= 2**63):
            raise _RejectedRequest("bad_range", "time out of range")
        self.stats.queries["by_time"] += 1
        if self._pending:
            with contextlib.suppress(Exception):  # logged by _flush; serve what is archived
                await self._flush()
        store_time = self._now()
        try:
            await self._page(ws, rid, topic, since, until, cursor, page_size, query.want_total,
                             store_time)  # fmt: skip
        except ArchiveUnavailable as exc:
            raise _RejectedRequest("unavailable", f"the archive: {exc.reason}") from None

    async def _page(self, ws: ServerConnection, rid: int, topic: bytes, since: int, until: int,
                    cursor: tuple[int, bytes] | None, page_size: int, want_total: bool,
                    store_time: int) -> None:  # fmt: skip
        cfg = self.config
        archive = self._archive
        total = (await archive.count(topic, since_ms=since, until_ms=until, cursor=cursor)
                 if want_total else 0)  # fmt: skip
        sent = 0
        page_bytes = 0
        frame: list[tuple[bytes, int]] = []
        size = 0
        per_call = 32
        exhausted = False
        last: tuple[int, bytes] | None = cursor
        for _ in range(page_size + 1):  # bounded: every pass fetches >= 1 row or ends
            want = min(per_call, page_size - sent)
            if want <= 0 or page_bytes >= cfg.max_page_bytes:
                break
            rows = await archive.range(topic, since_ms=since, cursor=last, limit=want, reader=ws)
            consumed = 0
            for row in rows:
                if until and row.arrival_ms >= until:
                    exhausted = True
                    break
                consumed += 1
                if frame and size + len(row.envelope) > cfg.response_frame_bytes:
                    await self._send_items(ws, rid, frame, final=False)
                    frame, size = [], 0
                frame.append((row.envelope, row.arrival_ms))
                size += len(row.envelope)
                page_bytes += len(row.envelope)
                sent += 1
                last = row.cursor
                if page_bytes >= cfg.max_page_bytes:
                    break
            if exhausted:
                break
            if consumed == len(rows) < want:  # the archive has no more rows
                exhausted = True
                break
            avg = max(1, page_bytes // max(1, sent))
            per_call = max(1, min(256, cfg.response_frame_bytes // avg))
        next_cursor = None if exhausted or last is None else last
        await self._send_items(
            ws,
            rid,
            frame,
            final=True,
            next_cursor=next_cursor,
            store_time_ms=store_time,
            total=total,
        )

    async def _send_items(
        self,
        ws: ServerConnection,
        rid: int,
        items: list[tuple[bytes, int]],
        *,
        final: bool,
        next_cursor: tuple[int, bytes] | None = None,
        store_time_ms: int = 0,
        total: int = 0,
    ) -> None:
        self.stats.served_envelopes += len(items)
        self.stats.served_bytes += sum(len(e) for e, _ in items)
        await ws.send(
            encode_envelopes(
                rid,
                items,
                final=final,
                next_cursor=next_cursor,
                store_time_ms=store_time_ms,
                total=total,
            )
        )


FeedFactory = Callable[["StorePeer"], Awaitable[EnvelopeFeed]]
"""Builds a feed that needs the running store (its query port): LAN gossip."""


async def serve_store_until_signal(
    config: StorePeerConfig,
    logger: RelayLogger | None = None,
    feeds: Iterable[EnvelopeFeed] = (),
    feed_factories: Iterable[FeedFactory] = (),
) -> int:
    """Run a store peer until SIGINT or SIGTERM, then shut it down cleanly.

    Returns:
        0 after a clean shutdown, 1 if the store could not start, 3 if its data
        directory is in use, 4 if the database is unusable.
    """
    from storage import DataDirLockedError, StorageError

    log = logger if logger is not None else RelayLogger(config.log_format)
    peer = StorePeer(config, logger=log, feeds=feeds)
    stop = StopSignals().install()  # before it listens: a signal while it starts is a stop
    try:
        try:
            await peer.start()
        except DataDirLockedError as exc:
            log.error("store_start_failed", error=str(exc))
            return 3
        except StorageError as exc:  # newer schema, damaged file, unusable directory
            log.error("store_start_failed", error=str(exc))
            return 4
        except OSError as exc:
            log.error("store_start_failed", listen=config.listen, error=str(exc))
            return 1
        try:
            for factory in feed_factories:
                peer.add_feed(await factory(peer))
            if not peer._feeds:
                log.warning("store_no_feeds",
                            note="no --relay and no --lan: serving the archive only")
            reload_tls = peer.reload_tls if peer.tls is not None else None
            log.info("store_shutdown", signal=await stop.stopped(reload_tls))
        finally:
            await peer.close()
    finally:
        stop.remove()
    return 0


def run_store(
    config: StorePeerConfig,
    feeds: Iterable[EnvelopeFeed] = (),
    feed_factories: Iterable[FeedFactory] = (),
) -> int:
    """Blocking entry point for ``sdschat store``; returns the process exit status."""
    return runner.run(serve_store_until_signal(config, feeds=feeds, feed_factories=feed_factories))
