"""The JetStream engine of the store peer's archive (:class:`net.store_engine.Archive`):
a replicated stream that any number of store peers share.

``sdschat store --jetstream nats://HOST:4222`` (repeatable: the servers of one NATS
cluster with JetStream, ``nats-server -js``) keeps every envelope it accepts in a
JetStream stream instead of its own SQLite file, and answers every query from
it. Every store peer given the same cluster and stream name answers the same,
one started afterwards on an empty data directory included.

**What is stored.** One stream (``--jetstream-stream``, default ``SDSCHAT_STORE``),
file storage, ``--replicas`` copies (default 3 when the cluster has 3 servers or
more; JetStream writes through a quorum of them). One subject per topic:
:func:`subject_for` = ``sdschat.store.v1.<stream>.`` + the first 16 bytes of
``SHA-256("sdschat-store-subject-v1" + topic)`` in hex, so NATS never sees a topic
(itself a hash of the channel key). The payload is the envelope exactly as
received (ciphertext, signed and encrypted end to end: the store holds no key).
Three headers: ``Nats-Msg-Id`` = the envelope's hash in hex (the SDS retrieval
hint), ``Sdschat-Arrival`` = its arrival time on the archiving peer's arrival
clock (ms), ``Sdschat-Writer`` = :func:`writer_id` of the writer the store
attributed it to (a 16-byte hash of the signer's key or of the sending host, so
neither reaches NATS; empty when unattributed).

**Stored once, for good.** A KV bucket ``<stream>_INDEX`` maps each envelope hash to
its stream sequence. Archiving an envelope: if the index already has it (and that
message is still there) it is a duplicate; else it is published with
``Nats-Msg-Id`` (JetStream drops a second publish of the same id within its
2-minute window and answers with the first one's sequence, so two store peers
archiving the same relay traffic at the same moment store it once) and the index
entry is created with ``create()``, which succeeds for one writer only. A copy
published outside the window by a peer that lost that race is deleted again. A
peer killed between the publish and the index leaves a message without an entry;
the retention lease holder audits every message once and writes the missing
entries (and removes true duplicates), so by-hash queries find everything.

**Queries.** By hash: the index gives the sequence, a direct get (any replica
answers) the message. By time: pages in stream order of the topic's subject, read
by :class:`net.jetstream_reader.PushReader` (one consumer per query connection and
topic, kept from page to page). A cursor ``(arrival_ms, hash)`` resolves through
the index to its sequence, so a page continues exactly after it at any store peer
of the archive; ``since`` resolves by a binary search of arrival times over the
subject's messages (direct gets). Arrival times come from several store peers'
clocks: they are in stream order as far as those clocks agree (keep them
synchronised; the node's catch-up starts 60 s early anyway).

**Retention** (``--max-age``, ``--max-bytes``, the store's rule of
:mod:`storage.retention`) runs on one store peer at a time: the one holding the
lease (:mod:`net.store_jetstream_retention`). The stream's own limits are a
backstop only (:meth:`JetStreamSettings.backstop`: twice ``--max-bytes``, half as
long again as ``--max-age``, discarding the oldest), for an archive no store peer
runs retention on.

**Failures.** Writes go to a quorum: a publish that JetStream acknowledged is on a
majority of the replicas and survives the loss of any minority (a server killed,
or cut off: its side refuses writes, and it catches up when it comes back).
Unreachable, or full (JetStream's storage limits): :class:`ArchiveUnavailable`;
the store peer says so once and retries, and nats-py reconnects by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import api
from nats.js.client import JetStreamContext
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.errors import NotFoundError as JsNotFoundError
from nats.js.kv import KeyValue

from net.envelope import MAX_ENVELOPE_BYTES
from net.jetstream_reader import (
    CREATE_TIMEOUT_S,
    NATS_ERRORS,
    PushReader,
    ReaderBroken,
    StreamMessage,
)
from net.nats_connect import NatsConnector, NatsSettings, server_name
from net.relay_log import RelayLogger
from net.store_engine import ArchiveUnavailable, Cursor, RetentionRun
from storage.lock import DataDirLock
from storage.records import ArchivedEnvelope
from storage.retention import RetentionRule

if TYPE_CHECKING:
    from net.store_config import StorePeerConfig
    from net.store_jetstream_retention import RetentionLease

__all__ = [
    "ARRIVAL_HEADER",
    "SUBJECT_PREFIX",
    "WRITER_HEADER",
    "JetStreamArchive",
    "JetStreamSettings",
    "subject_for",
    "writer_id",
]

T = TypeVar("T")

SUBJECT_PREFIX = "sdschat.store.v1."
ARRIVAL_HEADER = "Sdschat-Arrival"
WRITER_HEADER = "Sdschat-Writer"
MSG_ID = "Nats-Msg-Id"
_SUBJECT_DOMAIN = b"sdschat-store-subject-v1"
_WRITER_DOMAIN = b"sdschat-store-writer-v1"
DUPLICATE_WINDOW_S = 120.0
"""JetStream's window for ``Nats-Msg-Id``: a second publish within it is dropped."""
CONCURRENCY = 64
"""Requests one store peer has in flight to JetStream for one batch."""
KNOWN_HASHES = 65_536
"""Hashes of envelopes archived (or found archived) lately, remembered to skip the index."""
CONSUMER_ATTEMPTS = 6
"""Attempts to make a consumer (see ``net.jetstream_reader.CREATE_TIMEOUT_S``)."""
READERS_PER_CONNECTION = 4
"""Topics one query connection keeps a reading position on."""
_FULL_CODES = {10023, 10027, 10028, 10047, 10054, 10077}  # insufficient resources, limits


def subject_for(stream: str, topic: bytes) -> str:
    """The subject of ``topic`` in ``stream`` (see the module docstring); never a name."""
    return f"{SUBJECT_PREFIX}{stream}.{hashlib.sha256(_SUBJECT_DOMAIN + topic).digest()[:16].hex()}"


def writer_id(writer: bytes) -> str:
    """What NATS is told of a writer: 32 hex digits of a domain-separated SHA-256 of it
    (the same writer gives the same id at every store peer), ``""`` for nobody."""
    if not writer:
        return ""
    return hashlib.sha256(_WRITER_DOMAIN + writer).digest()[:16].hex()


def _unavailable(exc: BaseException) -> ArchiveUnavailable:
    code = getattr(exc, "err_code", None)
    description = getattr(exc, "description", None) or str(exc) or type(exc).__name__
    full = code in _FULL_CODES or "insufficient resources" in description.lower()
    return ArchiveUnavailable(f"JetStream: {description}" + (f" ({code})" if code else ""),
                              full=full)  # fmt: skip


_ERRORS = NATS_ERRORS


@dataclass(frozen=True)
class JetStreamSettings:
    """Where and how the archive lives in JetStream.

    Attributes:
        nats: the NATS cluster (servers, TLS, credentials).
        stream: the stream's name; its KV buckets are ``<stream>_INDEX``,
            ``<stream>_META`` and ``<stream>_LEASE``.
        replicas: copies of each message (0: see :meth:`JetStreamArchive.replicas_for`).
        lease_s: the retention lease's lifetime (:mod:`net.store_jetstream_retention`).
        max_bytes, max_age_ms: the store's retention limits (the stream's own limits
            are a backstop beyond them, :meth:`backstop`; 0: none).
        request_timeout: seconds a JetStream request may take.
        audit_delay_s: how long after a message appeared the lease holder checks its
            index entry (:mod:`net.store_jetstream_retention`).
    """

    nats: NatsSettings
    stream: str = "SDSCHAT_STORE"
    replicas: int = 0
    lease_s: float = 15.0
    max_bytes: int = 0
    max_age_ms: int = 0
    request_timeout: float = 5.0
    audit_delay_s: float = 10.0

    @property
    def index_bucket(self) -> str:
        return f"{self.stream}_INDEX"

    @property
    def meta_bucket(self) -> str:
        return f"{self.stream}_META"

    @property
    def lease_bucket(self) -> str:
        return f"{self.stream}_LEASE"

    @property
    def subjects(self) -> str:
        return f"{SUBJECT_PREFIX}{self.stream}.>"

    def backstop(self) -> tuple[int, float]:
        """``(max_bytes, max_age seconds)`` of the stream itself (-1 / 0: none): room for a
        burst that outpaces retention, so that they never cut what the rule would keep
        unless no store peer runs retention at all: twice ``max_bytes`` and at least
        256 MiB more; ``max_age`` and half as much again, at least an hour more."""
        size = max(2 * self.max_bytes, self.max_bytes + 256 * 2**20) if self.max_bytes > 0 else -1
        age_s = self.max_age_ms / 1000
        age = age_s + max(age_s / 2, 3600.0) if self.max_age_ms > 0 else 0.0
        return size, age


class _Reading:
    """One query connection's reading position on one topic."""

    __slots__ = ("last", "reader", "skip")

    def __init__(self, reader: PushReader, last: Cursor | None, skip: Cursor | None) -> None:
        self.reader = reader
        self.last = last  # the last envelope given: a page continuing from it reads on
        self.skip = skip  # skip envelopes up to this one (a cursor no longer indexed)


class JetStreamArchive:
    """The archive in a JetStream stream (see the module docstring).

    Args:
        settings: the cluster, the stream, the limits.
        topics: the topics this store peer archives and answers for.
        log: the store's logger.
        data_dir: locked while the store runs (one store per data directory), else unused.
        wake_retention: called when retention should run soon (the archive grew by an
            eighth of ``max_bytes`` since it last ran), on the lease holder.
        retention: take part in retention (try to hold the lease); False for a tool that
            only writes or reads (``--migrate-to-jetstream``).
    """

    engine = "jetstream"

    def __init__(
        self,
        settings: JetStreamSettings,
        topics: Iterable[bytes],
        log: RelayLogger,
        *,
        data_dir: Path | None = None,
        wake_retention: Callable[[], None] | None = None,
        retention: bool = True,
    ) -> None:
        self.settings = settings
        self._with_lease = retention
        self.log = log
        self._subjects = {t: subject_for(settings.stream, t) for t in topics}
        self._topics = {s: t for t, s in self._subjects.items()}
        self._data_dir = data_dir
        self._wake = wake_retention
        self._lock: DataDirLock | None = None
        self._connector = NatsConnector(settings.nats, on_error=self._on_error,
                                        on_disconnected=self._on_disconnected,
                                        on_reconnected=self._on_reconnected)  # fmt: skip
        self._nc: NatsClient | None = None
        self._js: JetStreamContext | None = None
        self._index: KeyValue | None = None
        self._id = b""
        self.replicas = 0
        """Copies JetStream keeps of each message (the stream's setting)."""
        self._known: OrderedDict[bytes, None] = OrderedDict()
        self._acks: tuple[str, Subscription] | None = None  # inbox prefix of publish acks
        self._ack_futures: dict[str, asyncio.Future[api.PubAck]] = {}
        self._readings: dict[int, dict[bytes, _Reading]] = {}
        self._first_seq = (0, 0.0)  # (the stream's first sequence, monotonic time read)
        self._oldest: tuple[int, float] = (0, 0.0)
        self.lease: RetentionLease | None = None
        """The retention lease (:mod:`net.store_jetstream_retention`) once open."""
        self.counters: dict[str, int] = {"published": 0, "duplicates": 0, "copies_deleted": 0,
                                         "reader_restarts": 0, "consumer_retries": 0}  # fmt: skip

    @classmethod
    def from_config(
        cls,
        cfg: StorePeerConfig,
        log: RelayLogger,
        wake_retention: Callable[[], None] | None = None,
    ) -> JetStreamArchive:
        """The archive ``sdschat store --jetstream …`` configured."""
        nats_settings = NatsSettings(
            cfg.jetstream, cfg.jetstream_cafile, cfg.jetstream_certfile, cfg.jetstream_keyfile,
            cfg.jetstream_token_file, connect_timeout=cfg.jetstream_timeout, flag="--jetstream",
        )
        settings = JetStreamSettings(
            nats_settings, cfg.jetstream_stream, cfg.jetstream_replicas, cfg.jetstream_lease_s,
            cfg.max_bytes, cfg.max_age_ms,
        )
        return cls(settings, cfg.topics, log, data_dir=cfg.data_dir, wake_retention=wake_retention)

    # ------------------------------------------------------------------ life

    @property
    def archive_id(self) -> bytes:
        return self._id

    @property
    def connected(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    @property
    def js(self) -> JetStreamContext:
        if self._js is None:
            raise ArchiveUnavailable("JetStream archive not open")
        return self._js

    @property
    def nc(self) -> NatsClient:
        if self._nc is None:
            raise ArchiveUnavailable("JetStream archive not open")
        return self._nc

    @property
    def index(self) -> KeyValue:
        if self._index is None:
            raise ArchiveUnavailable("JetStream archive not open")
        return self._index

    async def open(self) -> None:
        """Connect, create the stream and buckets if new, start the retention lease.

        Raises:
            storage.DataDirLockedError: another store uses the data directory.
            net.nats_connect.NatsUnavailable: no NATS server usable (an OSError).
            ConnectionError: JetStream refused to create the stream or buckets.
        """
        if self._data_dir is not None:
            self._data_dir.mkdir(parents=True, exist_ok=True)
            self._lock = DataDirLock.acquire(self._data_dir)
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise

    async def _open(self) -> None:
        s = self.settings
        nc = await self._connector.connect(f"sdschat-store-{secrets.token_hex(4)}")
        self._nc = nc
        self._js = nc.jetstream(timeout=s.request_timeout)
        deadline = time.monotonic() + max(s.nats.connect_timeout, 10.0)
        for _ in range(1000):  # bounded by the deadline: a leader may be being elected
            try:
                await self._ensure_stream()
                self._index = await self.bucket(s.index_bucket, ttl=s.backstop()[1] or None)
                meta = await self.bucket(s.meta_bucket)
                self._id = await self._archive_id(meta)
                break
            except (TimeoutError, nats.errors.Error) as exc:
                if time.monotonic() > deadline:
                    raise ConnectionError(
                        f"JetStream did not set up the archive: {_unavailable(exc)}") from None
                await asyncio.sleep(0.5)
        from net.store_jetstream_retention import RetentionLease

        if self._with_lease:
            self.lease = RetentionLease(self, meta, self.log, wake=self._wake)
            await self.lease.start()
        self.log.info("jetstream_connected", server=server_name(nc), stream=s.stream,
                      replicas=self.replicas, servers=s.nats.redacted(),
                      tls=s.nats.wants_tls or bool(nc._server_info.get("tls_required")))

    async def close(self) -> None:
        if self.lease is not None:
            lease, self.lease = self.lease, None
            await lease.close()
        for readings in list(self._readings.values()):
            for r in readings.values():
                await r.reader.close()
        self._readings.clear()
        nc, self._nc, self._js = self._nc, None, None
        self._connector.closing = True
        if nc is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(3.0):
                    await nc.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def replicas_for(self) -> int:
        """The replicas a new stream gets without ``--replicas``: 1 on a lone server, else
        3 when the cluster has 3 servers or more (as many as it has below that)."""
        nc = self.nc
        if not nc._server_info.get("cluster"):
            return 1
        known = {(u.hostname, u.port) for u in nc.servers}
        for url in nc._server_info.get("connect_urls") or []:
            known.add(tuple(str(url).rsplit(":", 1)))  # type: ignore[arg-type]
        return max(1, min(3, len(known)))

    async def _ensure_stream(self) -> None:
        s = self.settings
        js = self.js
        max_bytes, max_age = s.backstop()
        try:
            info = await js.stream_info(s.stream)
        except JsNotFoundError:
            info = None
        if info is None:
            self.replicas = s.replicas or self.replicas_for()
            config = api.StreamConfig(
                name=s.stream,
                description="sdschat store: envelopes (ciphertext), one subject per topic",
                subjects=[s.subjects],
                retention=api.RetentionPolicy.LIMITS,
                storage=api.StorageType.FILE,
                num_replicas=self.replicas,
                allow_direct=True,
                duplicate_window=DUPLICATE_WINDOW_S,
                max_bytes=max_bytes,
                max_age=max_age,
                max_msgs=-1,
                max_msg_size=MAX_ENVELOPE_BYTES,
                discard=api.DiscardPolicy.OLD,
            )
            try:
                await js.add_stream(config)
                self.log.info("jetstream_stream_created", stream=s.stream, replicas=self.replicas,
                              backstop_bytes=max_bytes, backstop_age_s=max_age)  # fmt: skip
                return
            except nats.js.errors.BadRequestError:  # made by another store peer meanwhile
                info = await js.stream_info(s.stream)
        cfg = info.config
        self.replicas = int(cfg.num_replicas or 1)
        changes: dict[str, Any] = {}
        if s.replicas and s.replicas != self.replicas:
            changes["num_replicas"] = s.replicas
        if (cfg.max_bytes or -1) != max_bytes:
            changes["max_bytes"] = max_bytes
        if abs((cfg.max_age or 0.0) - max_age) > 1.0:
            changes["max_age"] = max_age
        if changes:
            cfg.num_replicas = changes.get("num_replicas", cfg.num_replicas)
            cfg.max_bytes = changes.get("max_bytes", cfg.max_bytes)
            cfg.max_age = changes.get("max_age", cfg.max_age)
            await js.update_stream(cfg)
            self.replicas = int(cfg.num_replicas or 1)
            self.log.warning("jetstream_stream_updated", stream=s.stream, **changes,
                             note="another store peer with other limits or --replicas would "
                             "change them back: give every store peer the same")

    async def bucket(self, name: str, ttl: float | None = None) -> KeyValue:
        js = self.js
        try:
            return await js.key_value(name)
        except nats.js.errors.BucketNotFoundError:
            pass
        try:
            return await js.create_key_value(api.KeyValueConfig(
                bucket=name, history=1, ttl=ttl, storage=api.StorageType.FILE,
                replicas=self.replicas, direct=True,
            ))
        except nats.js.errors.BadRequestError:  # made by another store peer meanwhile
            return await js.key_value(name)

    async def _archive_id(self, meta: KeyValue) -> bytes:
        """The archive's id: made by the first store peer ever, read by the others."""
        new = secrets.token_bytes(16)
        try:
            await meta.create("archive-id", new.hex().encode())
            return new
        except KeyWrongLastSequenceError:
            pass
        for _ in range(50):  # bounded: a replica answering direct gets may lag a moment
            try:
                entry = await meta.get("archive-id")
                return bytes.fromhex((entry.value or b"").decode())
            except KeyNotFoundError:
                await asyncio.sleep(0.1)
        raise ConnectionError("JetStream: the archive's id cannot be read")

    async def _on_error(self, exc: Exception) -> None:
        if isinstance(exc, nats.errors.SlowConsumerError):
            return  # a reader's gap: it notices by itself
        self.log.warning("jetstream_error", error=f"{type(exc).__name__}: {exc}")

    async def _on_disconnected(self) -> None:
        self.log.warning("jetstream_disconnected")

    async def _on_reconnected(self) -> None:
        for readings in self._readings.values():  # consumers may be gone with their server
            for r in readings.values():
                r.reader.broken = True
        nc = self._nc
        self.log.info("jetstream_reconnected", server=server_name(nc) if nc else None)

    async def _call(self, fn: Callable[[], Awaitable[T]], attempts: int = 1) -> T:
        """``fn()``, with the errors of NATS as :class:`ArchiveUnavailable`; a read that
        may be repeated is given ``attempts`` (a stream leader may be being elected)."""
        for attempt in range(attempts):  # bounded
            try:
                return await fn()
            except ArchiveUnavailable:
                raise
            except _ERRORS as exc:
                if attempt + 1 >= attempts:
                    raise _unavailable(exc) from None
                await asyncio.sleep(0.5)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ writing

    def _remember(self, digest: bytes) -> None:
        known = self._known
        known[digest] = None
        known.move_to_end(digest)
        if len(known) > KNOWN_HASHES:
            known.popitem(last=False)

    async def first_seq(self, max_age_s: float = 2.0) -> int:
        """The stream's first sequence (cached ``max_age_s``): an index entry below it
        names a message the stream's backstop limits discarded."""
        seq, at = self._first_seq
        if time.monotonic() - at > max_age_s:
            info = await self.js.stream_info(self.settings.stream)
            seq = int(info.state.first_seq)
            self._first_seq = (seq, time.monotonic())
        return seq

    async def _direct(self, subject: str, payload: bytes = b"") -> Msg | None:
        """One direct get (any current replica answers); ``None``: no such message. Sent
        as a plain request: nats-py's ``get_msg`` and ``KeyValue.get`` cost twice the
        Python per message (measured: by-hash queries 2,700/s through them)."""
        msg = await self.nc.request(subject, payload, timeout=self.settings.request_timeout)
        status = (msg.headers or {}).get("Status")
        if status == "404":
            return None
        if status:
            raise ArchiveUnavailable(f"JetStream: direct get answered {status} "
                                     f"{(msg.headers or {}).get('Description', '')}".rstrip())
        return msg

    async def _index_entry(self, digest: bytes) -> tuple[int, int] | None:
        """``(sequence named, index revision)``; sequence 0 for a deleted entry; ``None``:
        no entry."""
        b = self.settings.index_bucket
        msg = await self._direct(f"$JS.API.DIRECT.GET.KV_{b}.$KV.{b}.{digest.hex()}")
        if msg is None:
            return None
        headers = msg.headers or {}
        revision = int(headers.get("Nats-Sequence", "0") or 0)
        if headers.get("KV-Operation") in ("DEL", "PURGE"):
            return 0, revision
        try:
            return int(msg.data or b"0"), revision
        except ValueError:
            return 0, revision

    async def _message(self, seq: int) -> Msg | None:
        """The stream's message ``seq`` (``None``: not there)."""
        return await self._direct(f"$JS.API.DIRECT.GET.{self.settings.stream}",
                                  json.dumps({"seq": seq}).encode())  # fmt: skip

    async def indexed(self, digest: bytes) -> tuple[int, int] | None:
        """``(sequence, index revision)`` of an envelope whose message is still stored;
        ``(0, revision)`` for an entry naming a message gone, or a deleted entry
        (re-archive over it); ``None``: not indexed."""
        entry = await self._index_entry(digest)
        if entry is None or not entry[0]:
            return entry
        seq, revision = entry
        if seq < await self.first_seq():
            return 0, revision
        msg = await self._message(seq)
        if msg is None or (msg.headers or {}).get(MSG_ID) != digest.hex():
            return 0, revision
        return seq, revision

    async def put(self, items: Sequence[ArchivedEnvelope]) -> int:
        """Archive each envelope once (see the module docstring); the new ones count.

        Three steps, each for the whole batch: the index is asked about every envelope
        (concurrently); those not archived are published in their order (pipelined on
        the connection, so the stream keeps the order of their arrival times); then
        their index entries are made (concurrently)."""
        try:
            return await self._put(items)
        except ArchiveUnavailable:
            raise
        except _ERRORS as exc:  # the store peer keeps the batch and tries it again
            raise _unavailable(exc) from None

    async def _put(self, items: Sequence[ArchivedEnvelope]) -> int:
        sem = asyncio.Semaphore(CONCURRENCY)
        todo: list[ArchivedEnvelope] = []
        batch_hashes: set[bytes] = set()
        for item in items:
            if item.hash in self._known or item.hash in batch_hashes:
                self.counters["duplicates"] += 1
            else:
                batch_hashes.add(item.hash)
                todo.append(item)

        async def ask(item: ArchivedEnvelope) -> tuple[int, int] | None:
            async with sem:
                return await self.indexed(item.hash)

        found = await asyncio.gather(*(ask(i) for i in todo))
        fresh = []
        for item, entry in zip(todo, found, strict=True):
            if entry is not None and entry[0]:
                self._remember(item.hash)
                self.counters["duplicates"] += 1
            else:
                fresh.append((item, entry))
        futures = []
        try:
            for item, _entry in fresh:  # in order: the stream's order is the arrival order
                subject = self._subjects.get(item.topic) or subject_for(self.settings.stream,
                                                                         item.topic)  # fmt: skip
                futures.append(await self._publish(subject, item.envelope, {
                    MSG_ID: item.hash.hex(), ARRIVAL_HEADER: str(item.arrival_ms),
                    WRITER_HEADER: writer_id(item.writer),
                    "Nats-Expected-Stream": self.settings.stream}))
            timeout = self.settings.request_timeout + len(futures) * 0.01
            acks = await asyncio.wait_for(asyncio.gather(*futures), timeout)
        finally:
            for f in futures:
                f.cancel()

        async def index(item: ArchivedEnvelope, entry: tuple[int, int] | None,
                        ack: api.PubAck) -> bool:  # fmt: skip
            async with sem:
                return await self._index_one(item, entry, ack)

        made = await asyncio.gather(*(index(i, e, a) for (i, e), a in zip(fresh, acks,
                                                                          strict=True)))
        return sum(made)

    async def _index_one(self, item: ArchivedEnvelope, entry: tuple[int, int] | None,
                         ack: api.PubAck) -> bool:  # fmt: skip
        """Make the index entry of a published envelope; False: another store peer's
        copy was indexed first (this one, if it is another message, is deleted)."""
        hexh = item.hash.hex()
        value = str(ack.seq).encode()
        try:
            if entry is None:
                await self.index.create(hexh, value)
            else:  # an entry naming a message gone: this copy replaces it
                await self.index.update(hexh, value, last=entry[1])
        except KeyWrongLastSequenceError:
            # another store peer indexed its copy first (outside the dedup window)
            winner = await self.indexed(item.hash)
            if winner is not None and winner[0] and winner[0] != ack.seq and not ack.duplicate:
                await self.delete_message(ack.seq)
                self.counters["copies_deleted"] += 1
            self._remember(item.hash)
            self.counters["duplicates"] += 1
            return False
        self._remember(item.hash)
        self.counters["published"] += 1
        return True

    async def delete_message(self, seq: int) -> bool:
        """Delete one message (without overwriting it on disk: it is ciphertext and the
        erase costs a write of its size); False when it was gone already."""
        req = json.dumps({"seq": seq, "no_erase": True}).encode()
        msg = await self.nc.request(f"$JS.API.STREAM.MSG.DELETE.{self.settings.stream}", req,
                                    timeout=self.settings.request_timeout)  # fmt: skip
        return bool(json.loads(msg.data).get("success"))

    async def _publish(self, subject: str, data: bytes,
                       headers: dict[str, str]) -> asyncio.Future[api.PubAck]:  # fmt: skip
        """Publish to JetStream without waiting: the future gets its acknowledgement or
        its error. (nats-py's ``publish_async`` loses an error answer: its handler
        raises where it should set the future's exception, so the future hangs.)"""
        nc = self.nc
        if self._acks is None:
            prefix = f"{nc._inbox_prefix.decode()}.{secrets.token_hex(8)}."
            self._acks = (prefix, await nc.subscribe(prefix + "*", cb=self._on_ack))
        prefix, _sub = self._acks
        token = secrets.token_hex(8)
        future: asyncio.Future[api.PubAck] = asyncio.get_running_loop().create_future()
        self._ack_futures[token] = future
        futures = self._ack_futures

        def forget(_f: asyncio.Future[api.PubAck]) -> None:
            futures.pop(token, None)

        future.add_done_callback(forget)
        await nc.publish(subject, data, reply=prefix + token, headers=headers)
        return future

    async def _on_ack(self, msg: Msg) -> None:
        future = self._ack_futures.get(msg.subject.rpartition(".")[2])
        if future is None or future.done():
            return
        if msg.headers and msg.headers.get("Status") == "503":  # no stream for the subject
            future.set_exception(nats.js.errors.NoStreamResponseError())
            return
        try:
            resp = json.loads(msg.data)
        except ValueError:
            future.set_exception(ArchiveUnavailable("JetStream: an unreadable acknowledgement"))
            return
        error = resp.get("error")
        if error:
            code = error.get("err_code")
            text = error.get("description", "error")
            future.set_exception(ArchiveUnavailable(
                f"JetStream: {text}" + (f" ({code})" if code else ""),
                full=code in _FULL_CODES or "insufficient resources" in text.lower()))
            return
        future.set_result(api.PubAck.from_response(resp))

    # ------------------------------------------------------------------ reading

    def _envelope(self, m: StreamMessage | api.RawStreamMsg) -> ArchivedEnvelope:
        headers = m.headers or {}
        data = bytes(m.data or b"")
        hexh = headers.get(MSG_ID, "")
        try:
            digest = bytes.fromhex(hexh)
        except ValueError:
            digest = b""
        if len(digest) != 32:
            digest = hashlib.sha256(data).digest()  # not published by a store peer
        try:
            arrival = int(headers.get(ARRIVAL_HEADER, ""))
        except ValueError:
            arrival = m.time_ms if isinstance(m, StreamMessage) else (
                int(m.time.timestamp() * 1000) if m.time else 0)
        topic = self._topics.get(m.subject or "", b"")
        return ArchivedEnvelope(digest, topic, arrival, data)

    async def by_hashes(self, hashes: Sequence[bytes]) -> dict[bytes, ArchivedEnvelope]:
        """Each hash: the index gives its sequence, a direct get its message (checked to be
        that envelope)."""
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one(digest: bytes) -> ArchivedEnvelope | None:
            async with sem:
                entry = await self._index_entry(digest)
                if entry is None or not entry[0]:
                    return None
                msg = await self._message(entry[0])
                if msg is None:
                    return None
                item = self._envelope_of(msg)
                return item if item.hash == digest else None

        results = await self._call(lambda: asyncio.gather(*(one(h) for h in hashes)))
        return {r.hash: r for r in results if r is not None}

    def _envelope_of(self, msg: Msg) -> ArchivedEnvelope:
        """An envelope from a direct get's answer (its headers name the message)."""
        headers = msg.headers or {}
        raw = api.RawStreamMsg(subject=headers.get("Nats-Subject", ""),
                               seq=int(headers.get("Nats-Sequence", "0") or 0),
                               data=msg.data, headers=headers)  # fmt: skip
        return self._envelope(raw)

    async def _seq_of(self, subject: str, cursor: Cursor) -> int | None:
        """The sequence of the message at ``cursor`` (``None``: no longer in the index)."""
        entry = await self._index_entry(cursor[1])
        return entry[0] if entry is not None and entry[0] else None

    async def _next_on(self, subject: str, seq: int) -> api.RawStreamMsg | None:
        try:
            return await self.js.get_msg(self.settings.stream, seq=seq, subject=subject,
                                         next=True, direct=True)  # fmt: skip
        except JsNotFoundError:
            return None

    async def seq_at(self, subject: str, since_ms: int) -> int:
        """The first sequence from which ``subject``'s messages arrived at or after
        ``since_ms`` (a binary search over their arrival times, by direct gets)."""
        info = await self.js.stream_info(self.settings.stream)
        lo, hi = max(1, int(info.state.first_seq)), int(info.state.last_seq) + 1
        if since_ms <= 0:
            return lo
        for _ in range(80):  # bounded: the interval halves each pass
            if lo >= hi:
                break
            mid = (lo + hi) // 2
            m = await self._next_on(subject, mid)
            if m is None or (m.seq or 0) >= hi:
                hi = mid
            elif self._envelope(m).arrival_ms < since_ms:
                lo = int(m.seq or mid) + 1
            else:
                hi = mid
        return lo

    async def _start_of(self, subject: str, since_ms: int,
                        cursor: Cursor | None) -> tuple[int, Cursor | None]:  # fmt: skip
        """Where a read of ``subject`` starts, and the cursor to skip up to (when the
        cursor's envelope is no longer indexed: retention took it)."""
        if cursor is None:
            return await self.seq_at(subject, since_ms), None
        seq = await self._seq_of(subject, cursor)
        if seq is not None:
            return seq + 1, None
        return await self.seq_at(subject, max(since_ms, cursor[0])), cursor

    async def range(
        self,
        topic: bytes,
        *,
        since_ms: int = 0,
        cursor: Cursor | None = None,
        limit: int = 100,
        reader: object = None,
    ) -> list[ArchivedEnvelope]:
        """In stream order of the topic's subject; a page that continues the last one of
        the same ``reader`` reads on from the same consumer."""
        return await self._call(lambda: self._range(topic, since_ms, cursor, limit, reader))

    async def _range(self, topic: bytes, since_ms: int, cursor: Cursor | None, limit: int,
                     reader: object) -> list[ArchivedEnvelope]:  # fmt: skip
        subject = self._subjects.get(topic) or subject_for(self.settings.stream, topic)
        readings = self._readings.setdefault(id(reader), {})
        reading = readings.get(topic)
        if reading is not None and (reading.reader.broken or cursor is None
                                    or reading.last != cursor):  # fmt: skip
            await readings.pop(topic).reader.close()
            reading = None
        out: list[ArchivedEnvelope] = []
        restart_at: int | None = None
        for _attempt in range(3):  # bounded: a broken reader is made again from where it was
            if reading is None:
                skip: Cursor | None = None
                if restart_at is None:
                    start, skip = await self._start_of(subject, since_ms, cursor)
                else:
                    start = restart_at
                push = await self._reader(subject, start)
                reading = readings[topic] = _Reading(push, out[-1].cursor if out else cursor, skip)
                while len(readings) > READERS_PER_CONNECTION:
                    await readings.pop(next(iter(readings))).reader.close()
            try:
                for m in await reading.reader.take(limit - len(out)):
                    item = self._envelope(m)
                    if item.arrival_ms < since_ms:
                        continue
                    if reading.skip is not None:
                        if (item.arrival_ms, item.hash) <= reading.skip:
                            continue
                        reading.skip = None
                    out.append(item)
                    reading.last = item.cursor
                return out
            except ReaderBroken:
                self.counters["reader_restarts"] += 1
                restart_at = reading.reader.next_seq
                await readings.pop(topic).reader.close()
                reading = None
        raise ArchiveUnavailable("JetStream: the consumer reading the topic keeps failing")

    async def _reader(self, subject: str, start: int) -> PushReader:
        """A started reader; its consumer is made again when JetStream does not answer
        (it may have placed it on a server that is down and not yet known to be)."""
        for attempt in range(CONSUMER_ATTEMPTS):  # bounded
            push = PushReader(self.nc, self.js, self.settings.stream, subject, start)
            try:
                await push.start()
                return push
            except _ERRORS:
                await push.close()
                if attempt == CONSUMER_ATTEMPTS - 1:
                    raise
                self.counters["consumer_retries"] += 1
        raise AssertionError("unreachable")

    async def count(
        self, topic: bytes, *, since_ms: int = 0, until_ms: int = 0, cursor: Cursor | None = None
    ) -> int:
        async def run() -> int:
            subject = self._subjects.get(topic) or subject_for(self.settings.stream, topic)
            start, _skip = await self._start_of(subject, since_ms, cursor)
            total = await self._pending(subject, start)
            if until_ms:
                total -= await self._pending(subject, await self.seq_at(subject, until_ms))
            return max(0, total)

        return await self._call(run)

    async def _pending(self, subject: str, start: int) -> int:
        """Messages of ``subject`` from sequence ``start`` on (a consumer's count of them)."""
        config = api.ConsumerConfig(
            filter_subject=subject, deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start, ack_policy=api.AckPolicy.NONE, inactive_threshold=5.0,
            mem_storage=True, num_replicas=1,
        )
        for attempt in range(CONSUMER_ATTEMPTS):  # bounded: as for a reader's consumer
            try:
                info = await self.js._jsm.add_consumer(self.settings.stream, config=config,
                                                       timeout=CREATE_TIMEOUT_S)  # fmt: skip
                break
            except _ERRORS:
                if attempt == CONSUMER_ATTEMPTS - 1:
                    raise
                self.counters["consumer_retries"] += 1
        with contextlib.suppress(*_ERRORS):
            await self.js._jsm.delete_consumer(self.settings.stream, info.name)
        return int(info.num_pending or 0)

    async def oldest_arrival(self) -> int:
        value, at = self._oldest
        if time.monotonic() - at < 5.0:
            return value

        async def run() -> int:
            arrivals = []
            for subject in self._subjects.values():
                m = await self._next_on(subject, 1)
                if m is not None:
                    arrivals.append(self._envelope(m).arrival_ms)
            return min(arrivals, default=0)

        value = await self._call(run, attempts=3)
        self._oldest = (value, time.monotonic())
        return value

    async def newest_arrival(self) -> int:
        async def run() -> int:
            newest = 0
            for subject in self._subjects.values():
                try:
                    m = await self.js.get_last_msg(self.settings.stream, subject, direct=True)
                except JsNotFoundError:
                    continue
                newest = max(newest, self._envelope(m).arrival_ms)
            return newest

        return await self._call(run, attempts=3)

    async def stats(self) -> tuple[int, int]:
        info = await self._call(lambda: self.js.stream_info(self.settings.stream), attempts=3)
        return int(info.state.messages), int(info.state.bytes)

    async def run_retention(self, rule: RetentionRule, now_ms: int) -> RetentionRun:
        """The store's rule, on the lease holder only (others: nothing to do)."""
        if self.lease is None:
            return RetentionRun()
        return await self.lease.run(rule, now_ms)

    def release(self, reader: object) -> None:
        readings = self._readings.pop(id(reader), None)
        if readings:
            for r in readings.values():
                asyncio.get_running_loop().create_task(r.reader.close())
