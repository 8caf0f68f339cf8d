"""A relay cluster on NATS: relays share envelopes through NATS subjects derived from topics.

``sdschat relay --cluster nats://HOST:4222`` (repeatable: the servers of one
NATS cluster) makes a relay one member of a cluster. A client on relay A and
a client on relay B of the same cluster chat as if on one relay:

* **Subjects.** An envelope of topic ``t`` travels on the NATS subject
  :func:`subject_for` ``(t)`` = ``sdschat.relay.v1.`` + the first 16 bytes of
  ``SHA-256(b"sdschat-nats-subject-v1" + t)`` in hex. The topic is already an
  opaque hash of the channel key (``net/channel_key.py``); the subject is a
  hash of that, so NATS (its monitoring, its logs) never sees a channel name,
  a key, or even the topic the clients use. The payload is the envelope bytes,
  unchanged (encrypted and signed end to end; relays hold no key).
* **Interest.** A relay subscribes in NATS only to the topics its own clients
  want: the NATS subscription is made when the first local client subscribes
  to a topic and dropped when the last one leaves (or disconnects). NATS then
  forwards an envelope only to the relays (and, inside a NATS cluster, only
  over the routes) that have interest in it.
* **Every publish once per client, repairs included.** A relay publishes what
  its clients publish (after its own local fan-out) and delivers what arrives
  from NATS to its local subscribers; it never publishes again what came from
  NATS, so nothing loops between relays. Each NATS message carries one header,
  :data:`PUBLISH_HEADER` = ``"RELAY CONN SEQ"``: the publishing relay's random
  id, the client connection's number on it and a per-relay sequence number.
  Its own publications never come back (the NATS connection is made with
  ``no_echo``, and a message stamped with this relay's id is dropped and
  counted ``echo``). A copy of one publish arriving again (a NATS reconnect, a
  misconfigured subject) is dropped and counted ``duplicate``: each message's
  header plus its nonce and AEAD tag (:func:`dedup_key`) is remembered for
  :data:`DEDUP_WINDOW_S` seconds (at most :data:`DEDUP_CAPACITY` keys). Two
  publishes of the same bytes are two publishes, as on a lone relay: an SDS
  resend or an SDS-R answer re-sends the identical stored envelope (it is
  *not* sealed again), and every relay carries it to every subscriber, so a
  lossy client is repaired through a cluster as through one relay (the
  receiving nodes drop what they already hold, by message id). Only a
  message without the header (not published by an sdschat relay) is still
  deduplicated on its bytes alone.
* **Floods through NATS are shed per publisher.** Before fan-out, what
  arrives from NATS is charged to its publisher (the header's ``RELAY CONN``;
  every message without the header shares one budget): at most ``rate``
  frames per second (``burst`` at once), as a client connection on a lone
  relay, and at most ``publisher_bytes`` bytes per second (two seconds' worth
  at once). Beyond it a message is dropped and counted ``shed_publisher``, so
  a flood from one publisher costs that publisher's envelopes, not the
  local clients' connections (SDS resends anything shed). At most
  :data:`MAX_PUBLISHERS` publishers are tracked; the least recently seen is
  forgotten first. The header is declared by the publisher: someone who can
  publish on NATS can forge it and spread a flood over many names. That is
  why ``sdschat relay --cluster`` refuses NATS without credentials or TLS
  (``--cluster-insecure`` aside): whoever can publish on NATS is an operator.
* **Defences stay per relay.** Client frames are rate limited, size limited
  and queued per connection by ``net/relay.py`` exactly as on a lone relay;
  what arrives from NATS goes to local clients through the same bounded
  per-connection queues (a slow client is still disconnected). Outgoing NATS
  traffic waits in a backlog of at most :data:`BACKLOG_BYTES` bytes (beyond it
  an envelope is dropped and counted: SDS resends it); each NATS subscription
  buffers at most :data:`SUB_PENDING_BYTES` (beyond it NATS-py drops and we
  count ``nats_slow_consumer``). An envelope from NATS larger than
  ``MAX_ENVELOPE_BYTES`` or that does not parse is dropped and counted.
* **Failures.** NATS is at-most-once: an envelope published while a relay
  is reconnecting to another NATS server may be lost. SDS (acks, resends,
  sync, repair) makes that good, as it does for any lossy transport. The NATS
  client reconnects forever (to any server of the list or that the cluster
  announced; the first of the list first, so list the nearest first) and
  subscribes again. A relay that cannot reach any NATS server
  within ``connect_timeout`` when it starts does not start (``sdschat relay``
  exits with status 1 and logs ``relay_start_failed``).

This module is imported by ``net/relay.py`` only when ``RelayConfig.cluster``
is non-empty: without ``--cluster`` nothing of NATS is imported or needed.
The NATS client is ``nats-py`` (``pip install 'sdschat[cluster]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from net import envelope_pb2
from net.envelope import MAX_ENVELOPE_BYTES, EnvelopeError, MalformedEnvelope
from net.nats_connect import NatsConnector, NatsSettings, NatsUnavailable, server_name, server_tls
from net.relay_log import RelayLogger

__all__ = [
    "BACKLOG_BYTES",
    "DEDUP_CAPACITY",
    "DEDUP_WINDOW_S",
    "MAX_PUBLISHERS",
    "PUBLISH_HEADER",
    "SUBJECT_PREFIX",
    "SUB_PENDING_BYTES",
    "ClusterUnavailable",
    "PublisherBudgets",
    "RecentDigests",
    "RelayCluster",
    "dedup_key",
    "subject_for",
]

SUBJECT_PREFIX = "sdschat.relay.v1."
"""Every subject the cluster uses starts with this (one NATS account may host other things)."""

_SUBJECT_DOMAIN = b"sdschat-nats-subject-v1"

DEDUP_WINDOW_S = 10.0
"""Seconds an envelope's key is remembered to drop a copy that comes by another path."""

DEDUP_CAPACITY = 32_768
"""Most envelope keys remembered (about 4 MB); the oldest go first."""

BACKLOG_BYTES = 8 * 1024 * 1024
"""Envelope bytes waiting to be handed to the NATS client; beyond it new ones are dropped."""

SUB_PENDING_BYTES = 16 * 1024 * 1024
"""Bytes one NATS subscription may buffer before NATS-py drops (slow consumer)."""

PUBLISH_HEADER = "Sdschat-Publish"
"""The NATS header naming a publish: ``"RELAY CONN SEQ"`` (see the module docstring)."""

MAX_PUBLISHERS = 4096
"""Publishers whose NATS budget is tracked at once (the least recently seen go first)."""

DEFAULT_PUBLISHER_BYTES = 8 * 1024 * 1024
"""Bytes/s one publisher may send a relay through NATS (``--cluster-publisher-bytes``).

A node publishes at most 160 envelopes/s (320 at once): a file's 48 KB segments
make 7.7 MB/s and a 15 MB burst, which 8 MiB/s with 16 MiB at once carries unshed."""

SETTLE_TIMEOUT_S = 2.0
"""Longest a Pong waits for this relay's NATS subscriptions to be in place."""


def subject_for(topic: bytes) -> str:
    """The NATS subject of ``topic`` (see the module docstring); never a channel name."""
    digest = hashlib.sha256(_SUBJECT_DOMAIN + topic).digest()[:16]
    return SUBJECT_PREFIX + digest.hex()


def _parse(envelope: bytes) -> envelope_pb2.Envelope:
    try:
        return envelope_pb2.Envelope.FromString(envelope)
    except Exception as exc:  # any decoder failure is "malformed"
        raise MalformedEnvelope("not an Envelope") from exc


def _key(env: envelope_pb2.Envelope) -> bytes:
    return env.nonce + env.ciphertext[-16:] + len(env.ciphertext).to_bytes(4, "big")


def dedup_key(envelope: bytes) -> bytes:
    """What identifies an envelope's bytes for the duplicate check: nonce, AEAD tag, length.

    The nonce is 12 random bytes drawn for every seal and the last 16 bytes
    of the ciphertext are its Poly1305 tag, so two envelopes sealed apart never
    share this key, whereas copies of one envelope always do. Reading it costs
    a protobuf parse (~3 us at 40 KB); a SHA-256 of the whole envelope cost
    20 to 110 us at 40 KB on the benchmark machine (``bench/relay_cluster.py
    --dedup-keys``), most of what a cluster added per envelope. Someone who
    could forge a different envelope with the key of a real one, and get it
    to a relay before the real one, would make that relay drop the real one
    (the relay cannot check the tag: it holds no key); SDS repairs that loss
    like any other.

    Raises:
        MalformedEnvelope: not an Envelope.
    """
    return _key(_parse(envelope))


ClusterUnavailable = NatsUnavailable
"""No NATS server of the list could be reached when the relay started (an ``OSError``,
like a port that cannot be bound: the relay does not start; :mod:`net.nats_connect`)."""


class RecentDigests:
    """Envelope hashes seen in the last ``window`` seconds (at most ``capacity``).

    Time is passed in (monotonic seconds), so it is testable without sleeping.
    """

    __slots__ = ("_seen", "capacity", "window")

    def __init__(self, window: float = DEDUP_WINDOW_S, capacity: int = DEDUP_CAPACITY) -> None:
        if window <= 0 or capacity < 1:
            raise ValueError("need window > 0 and capacity >= 1")
        self.window = window
        self.capacity = capacity
        self._seen: OrderedDict[bytes, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def seen_before(self, digest: bytes, now: float) -> bool:
        """True if ``digest`` was seen within the window; else remember it and return False."""
        seen = self._seen
        horizon = now - self.window
        while seen:  # expire from the oldest; bounded by the entries present
            stamp = next(iter(seen.values()))
            if stamp >= horizon:
                break
            seen.popitem(last=False)
        if digest in seen:
            return True
        seen[digest] = now
        if len(seen) > self.capacity:
            seen.popitem(last=False)
        return False


class _Budget:
    """Two token buckets (frames and bytes) of one publisher; time passed in."""

    __slots__ = ("bytes", "frames", "stamp")

    def __init__(self, frames: float, nbytes: float, now: float) -> None:
        self.frames = frames
        self.bytes = nbytes
        self.stamp = now


class PublisherBudgets:
    """What each publisher may still send through NATS: ``rate`` frames/s (``burst`` at
    once) and ``byte_rate`` bytes/s (``byte_burst`` at once), per publisher key.

    At most ``capacity`` publishers are tracked (least recently seen forgotten
    first). Time is passed in (monotonic seconds), so it is testable without
    sleeping.
    """

    __slots__ = ("_budgets", "burst", "byte_burst", "byte_rate", "capacity", "rate")

    def __init__(
        self,
        rate: float,
        burst: float,
        byte_rate: float,
        byte_burst: float,
        capacity: int = MAX_PUBLISHERS,
    ) -> None:
        if min(rate, burst, byte_rate, byte_burst) <= 0 or capacity < 1:
            raise ValueError("publisher budgets must be positive")
        self.rate, self.burst = rate, burst
        self.byte_rate, self.byte_burst = byte_rate, byte_burst
        self.capacity = capacity
        self._budgets: OrderedDict[str, _Budget] = OrderedDict()

    def __len__(self) -> int:
        return len(self._budgets)

    def take(self, publisher: str, size: int, now: float) -> bool:
        """Charge one frame of ``size`` bytes to ``publisher``; False: over its budget."""
        budgets = self._budgets
        b = budgets.get(publisher)
        if b is None:
            b = budgets[publisher] = _Budget(self.burst, self.byte_burst, now)
            if len(budgets) > self.capacity:
                budgets.popitem(last=False)
        else:
            budgets.move_to_end(publisher)
            elapsed = now - b.stamp
            if elapsed > 0:
                b.frames = min(self.burst, b.frames + elapsed * self.rate)
                b.bytes = min(self.byte_burst, b.bytes + elapsed * self.byte_rate)
                b.stamp = now
        if b.frames < 1.0 or b.bytes < size:
            return False
        b.frames -= 1.0
        b.bytes -= size
        return True


DeliverCallback = Callable[[bytes, bytes], None]
"""``deliver(topic, envelope)``: hand an envelope from the cluster to local subscribers."""


class RelayCluster:
    """One relay's membership in the cluster (see the module docstring).

    The relay calls :meth:`want` / :meth:`unwant` when a topic gets its first
    local subscriber / loses its last one, and :meth:`publish` for every
    envelope a client publishes (each publish, a resend too, goes to the
    other relays). Envelopes from other relays come back through
    ``deliver(topic, envelope)``.

    Args:
        servers: ``nats://HOST:PORT`` URLs of NATS servers (one cluster).
        deliver: called (synchronously) with each envelope from another relay.
        log: the relay's structured logger.
        connect_timeout: seconds :meth:`start` tries to reach a server.
        reconnect_wait: seconds between reconnection attempts to one server.
        cafile: PEM CA certificates to verify NATS servers with (TLS).
        certfile: PEM client certificate (TLS), ``keyfile`` its key.
        token_file: a file holding the NATS authentication token.
        publisher_rate: frames per second one publisher may send us through NATS.
        publisher_burst: frames one publisher may send at once.
        publisher_bytes: bytes per second one publisher may send us (twice that at once).

    Credentials (``USER:PASSWORD@`` or ``TOKEN@`` in a URL, the token file) are
    never logged: URLs are logged through :func:`net.urls.redact_url`.
    """

    def __init__(
        self,
        servers: Iterable[str],
        deliver: DeliverCallback,
        log: RelayLogger,
        *,
        connect_timeout: float = 10.0,
        reconnect_wait: float = 0.5,
        cafile: str | None = None,
        certfile: str | None = None,
        keyfile: str | None = None,
        token_file: str | None = None,
        publisher_rate: float = 200.0,
        publisher_burst: float = 400.0,
        publisher_bytes: int = DEFAULT_PUBLISHER_BYTES,
    ) -> None:
        self.servers = list(servers)
        if not self.servers:
            raise ValueError("a cluster needs at least one NATS server URL")
        self._connector = NatsConnector(
            NatsSettings(tuple(self.servers), cafile, certfile, keyfile, token_file,
                         connect_timeout, reconnect_wait, flag="--cluster"),
            on_error=self._on_error,
            on_disconnected=self._on_disconnected,
            on_reconnected=self._on_reconnected,
        )
        self.relay_id = secrets.token_hex(4)
        self._deliver = deliver
        self.log = log
        self._nc: NatsClient | None = None
        self._dedup = RecentDigests()
        self._budgets = PublisherBudgets(
            publisher_rate, publisher_burst, publisher_bytes, 2 * publisher_bytes
        )
        self._seq = 0  # numbers this relay's publishes (the header's SEQ)
        self._wanted: set[bytes] = set()
        self._subjects: dict[bytes, str] = {}
        self._subs: dict[bytes, Subscription] = {}
        self._changes = 0  # bumped by want/unwant
        self._settled_changes = 0  # changes the subscriber task has put in place
        self._progress = asyncio.Condition()
        self._dirty = asyncio.Event()
        self._out: deque[tuple[str, bytes, str]] = deque()
        self._out_bytes = 0
        self._out_ready = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self.counters: Counter[str] = Counter()

    # ------------------------------------------------------------------ life

    async def start(self) -> None:
        """Connect to NATS and start the publisher and subscriber tasks.

        Raises:
            ClusterUnavailable: no server reachable within ``connect_timeout``,
                or at once when a server refuses the credentials or the TLS
                certificates (retrying cannot help), or a TLS or token file
                does not load.
        """
        nc = await self._connector.connect(f"sdschat-relay-{self.relay_id}", no_echo=True)
        self._nc = nc
        self.log.info(
            "cluster_connected",
            relay_id=self.relay_id,
            server=server_name(nc),
            servers=self._connector.settings.redacted(),
            tls=self._connector.settings.wants_tls or server_tls(nc),
        )
        self._tasks = [
            asyncio.create_task(self._publisher(), name="cluster-publisher"),
            asyncio.create_task(self._subscriber(), name="cluster-subscriber"),
        ]
        if self._wanted:
            self._dirty.set()

    async def close(self) -> None:
        """Stop the tasks and close the NATS connection (pending publishes are flushed)."""
        if self._closing:
            return
        self._closing = True
        self._connector.closing = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:  # bounded: a nats-py call inside may swallow the cancellation
            await asyncio.wait(self._tasks, timeout=3.0)
        nc = self._nc
        if nc is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(3.0):
                    await nc.close()
        self.log.info("cluster_closed", **self.stats())

    @property
    def connected(self) -> bool:
        """Whether the NATS connection is up right now."""
        return self._nc is not None and self._nc.is_connected

    @property
    def subscribed_topics(self) -> frozenset[bytes]:
        """Topics with a NATS subscription in place (for tests and metrics)."""
        return frozenset(self._subs)

    def stats(self) -> dict[str, Any]:
        """Counters for ``relay_stats`` (the key ``cluster``)."""
        return {
            "relay_id": self.relay_id,
            "connected": self.connected,
            "topics": len(self._subs),
            "backlog_bytes": self._out_bytes,
            **dict(sorted(self.counters.items())),
        }

    # ------------------------------------------------------------ the relay's hooks

    def want(self, topic: bytes) -> None:
        """A topic got its first local subscriber: subscribe to it in NATS (soon)."""
        if topic not in self._wanted:
            self._wanted.add(topic)
            self._changes += 1
            self._dirty.set()

    def unwant(self, topic: bytes) -> None:
        """A topic lost its last local subscriber: unsubscribe from it in NATS (soon)."""
        if topic in self._wanted:
            self._wanted.discard(topic)
            self._changes += 1
            self._dirty.set()

    def publish(self, topic: bytes, envelope: bytes, conn: int = 0) -> None:
        """Send an envelope that local connection ``conn`` published to the other relays
        (never blocks; see BACKLOG_BYTES). Every call is a new publish, a resend too."""
        if self._out_bytes + len(envelope) > BACKLOG_BYTES:
            self.counters["backlog_full"] += 1
            return
        self._seq += 1
        stamp = f"{self.relay_id} {conn} {self._seq}"
        self._out.append((self._subject(topic), envelope, stamp))
        self._out_bytes += len(envelope)
        self._out_ready.set()

    @property
    def settled(self) -> bool:
        """True when every want/unwant so far is in place on the NATS server."""
        return self._settled_changes >= self._changes

    async def wait_settled(self, timeout: float = SETTLE_TIMEOUT_S) -> bool:
        """Wait until the subscriptions wanted now are in place; False on timeout."""
        target = self._changes
        try:
            async with asyncio.timeout(timeout), self._progress:
                await self._progress.wait_for(lambda: self._settled_changes >= target)
        except TimeoutError:
            return False
        return True

    # ------------------------------------------------------------------ internals

    def _subject(self, topic: bytes) -> str:
        subject = self._subjects.get(topic)
        if subject is None:
            if len(self._subjects) > 4 * DEDUP_CAPACITY:  # topics published but never wanted
                self._subjects.clear()
            subject = self._subjects[topic] = subject_for(topic)
        return subject

    async def _publisher(self) -> None:
        """The one task that hands envelopes to the NATS client, in order."""
        nc = self._nc
        assert nc is not None
        out = self._out
        while True:  # ends when close() cancels it
            await self._out_ready.wait()
            self._out_ready.clear()
            while out:
                subject, data, stamp = out.popleft()
                self._out_bytes -= len(data)
                try:
                    await nc.publish(subject, data, headers={PUBLISH_HEADER: stamp})
                except (nats.errors.Error, OSError) as exc:
                    self.counters["publish_failed"] += 1
                    self.log.debug("cluster_publish_failed", error=type(exc).__name__)
                else:
                    self.counters["published"] += 1

    async def _subscriber(self) -> None:
        """The one task that makes the NATS subscriptions match the wanted topics."""
        nc = self._nc
        assert nc is not None
        while True:  # ends when close() cancels it
            await self._dirty.wait()
            self._dirty.clear()
            target = self._changes
            try:
                for topic in [t for t in self._wanted if t not in self._subs]:
                    self._subs[topic] = await nc.subscribe(
                        self._subject(topic),
                        cb=self._on_msg,
                        pending_bytes_limit=SUB_PENDING_BYTES,
                    )
                    self.counters["subscribed"] += 1
                for topic in [t for t in self._subs if t not in self._wanted]:
                    sub = self._subs.pop(topic)
                    await sub.unsubscribe()
                    self.counters["unsubscribed"] += 1
                # nats-py writes a flush's PING straight to the socket, while
                # SUB/UNSUB wait in its buffer for its flusher task: one PONG
                # may come back before the SUB was even sent. By the time it
                # does the flusher has run, so a second PONG proves the server
                # has the SUB (seen in a trace; tests/cluster caught it).
                await nc.flush(timeout=10)
                await nc.flush(timeout=10)
            except (nats.errors.Error, OSError, TimeoutError) as exc:
                # Reconnecting: NATS-py sends every subscription again once connected.
                self.log.debug("cluster_subscribe_deferred", error=type(exc).__name__)
            async with self._progress:
                self._settled_changes = max(self._settled_changes, target)
                self._progress.notify_all()

    async def _on_msg(self, msg: Msg) -> None:
        """An envelope from another relay (NATS-py calls this in order per subscription)."""
        data = msg.data
        counters = self.counters
        counters["received"] += 1
        if len(data) > MAX_ENVELOPE_BYTES:
            counters["dropped_oversized"] += 1
            return
        try:
            env = _parse(data)
        except EnvelopeError:
            counters["dropped_malformed"] += 1
            return
        topic = env.topic
        if topic not in self._wanted:
            counters["dropped_unwanted"] += 1  # raced an unsubscribe
            return
        if msg.subject != self._subject(topic):
            counters["dropped_wrong_subject"] += 1
            return
        headers = msg.headers
        stamp = headers.get(PUBLISH_HEADER) if headers else None
        now = time.monotonic()
        if stamp is None:  # not from an sdschat relay: one budget, bytes-only dedup
            publisher, key = "", _key(env)
        else:
            origin, _, rest = stamp.partition(" ")
            if origin == self.relay_id:
                counters["echo"] += 1
                return
            publisher = f"{origin} {rest.partition(' ')[0]}"
            key = stamp.encode("utf-8", "replace") + b"\0" + _key(env)
        if self._dedup.seen_before(key, now):
            counters["duplicate"] += 1
            return
        if not self._budgets.take(publisher, len(data), now):
            counters["shed_publisher"] += 1
            return
        self._deliver(topic, data)

    async def _on_error(self, exc: Exception) -> None:
        if isinstance(exc, nats.errors.SlowConsumerError):
            self.counters["nats_slow_consumer"] += 1
            return
        self.counters["nats_errors"] += 1
        self.log.warning("cluster_error", error=f"{type(exc).__name__}: {exc}")

    async def _on_disconnected(self) -> None:
        if not self._closing:
            self.counters["disconnects"] += 1
            self.log.warning("cluster_disconnected", relay_id=self.relay_id)

    async def _on_reconnected(self) -> None:
        self.counters["reconnects"] += 1
        nc = self._nc
        self.log.info(
            "cluster_reconnected",
            relay_id=self.relay_id,
            server=server_name(nc) if nc is not None else None,
        )
