"""LAN gossip: a small flooding mesh of websocket connections between discovered peers.

Every node runs a websocket server (:class:`GossipMesh`) on the addresses it
was given and keeps connections to at most ``max_peers`` peers found by
discovery (``net/lan/discovery.py``). Frames are ``net/lan/gossip.proto``.

A connection starts with ``Hello`` both ways (protocol version, random node
id, role) and a ``Subscribe`` with the sender's topics. Then:

* **Flooding.** An envelope this node publishes goes to every connected peer
  subscribed to its topic, with ``hops_left = hop_limit - 1``. An envelope
  received from peer P is dropped if it is oversized, malformed, of a topic
  this node has not joined, or already **seen** (its hash is in the seen
  cache); otherwise it is forwarded (``hops_left - 1``, only while
  ``hops_left > 0``) to every OTHER peer subscribed to its topic, never back
  to P, and handed to ``on_envelope``. Only joined topics are flooded.
* **Seen cache.** Envelope hashes, each remembered for ``seen_ttl_s`` (and at
  most ``seen_capacity`` of them). It stops flood copies from circulating; it
  is deliberately short-lived, because SDS resends and repairs re-send the
  *identical* envelope (same hash) seconds later and they must travel again
  to whoever missed it. The node's own replay guard drops what it already has.
* **Connections.** Of two peers that discover each other, the one with the
  lower node id dials at once, the other only after ``dial_grace_s`` (if still
  unconnected). If both connections exist anyway, both sides keep the one
  dialled by the lower id. A peer that goes away (closed connection, or its
  zeroconf record withdrawn) is reported; while its record exists it is
  dialled again with exponential backoff. Beyond ``max_peers`` connections a
  new one is refused with close code 1013.
* **Backpressure.** Each connection has one writer task and a queue of
  ``queue`` frames; when it is full further frames to that peer are dropped
  (counted as ``dropped_slow_peer``): gossip is best effort, SDS recovers.

Peer changes go to ``on_peer(LanPeerEvent)``; the number of connected peers to
``on_links(count)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from net.envelope import MAX_ENVELOPE_BYTES, EnvelopeError, peek_topic
from net.errors import NetError
from net.lan.discovery import PeerFound, PeerGone
from net.lan.frames import (
    GOSSIP_PROTOCOL_VERSION,
    GossipFrameError,
    decode_gossip_frame,
    encode_error,
    encode_gossip,
    encode_hello,
    encode_subscribe,
    encode_unsubscribe,
)
from net.relay_client import backoff_delay

__all__ = [
    "CLOSE_DUPLICATE",
    "CLOSE_FULL",
    "GossipMesh",
    "LanPeerEvent",
    "LanPeerInfo",
    "SeenCache",
]

logger = logging.getLogger("sdschat.lan.gossip")

CLOSE_FULL = 1013
"""Close code: this node already has ``max_peers`` connections."""

CLOSE_DUPLICATE = 4001
"""Close code: a second connection between the same two nodes (the other one is kept)."""

CLOSE_GOING_AWAY = 1001
"""Close code used when the node shuts down."""

MAX_TOPIC_BYTES = 64

KEEPALIVE_S = 10.0
"""A link that heard nothing for this long is pinged (a websocket ping)."""

DEAD_AFTER_S = 90.0
"""A link that heard nothing at all for this long is closed as dead.

"Heard" is any frame from the peer, a pong, or one of our own frames written
to the socket (the peer's TCP acknowledgements made room for it). A
websocket keepalive (a pong within 10 s) closed links on a slow or congested
link, where the ping waits behind the data already queued: at 64 kbit/s
behind a deep queue every link dropped and redialled again and again
(``tests/lan/test_lan_slow_link.py``)."""

_Ws = ServerConnection | ClientConnection


@dataclass(frozen=True, slots=True)
class LanPeerEvent:
    """A LAN peer changed.

    Attributes:
        state: ``"discovered"``, ``"connected"``, ``"disconnected"``, ``"gone"``
            (its zeroconf record was withdrawn) or ``"incompatible"`` (another
            protocol version).
        peer: its node id in hex (random per run; not an SDS sender id).
        address: ``host:port`` when known.
        role: ``"node"`` or ``"store"``.
        reason: why (``disconnected``, ``incompatible``).
        connected: connected peers after this change.
    """

    state: str
    peer: str
    address: str | None = None
    role: str = "node"
    reason: str | None = None
    connected: int = 0


@dataclass(frozen=True, slots=True)
class LanPeerInfo:
    """A connected peer, for ``/who``-style listings."""

    peer: str
    address: str
    role: str
    outgoing: bool
    topics: int
    since: float


class SeenCache:
    """Envelope hashes remembered for ``ttl_s`` seconds, at most ``capacity`` of them."""

    def __init__(
        self, ttl_s: float, capacity: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if ttl_s <= 0 or capacity < 1:
            raise ValueError("need ttl_s > 0 and capacity >= 1")
        self.ttl_s = ttl_s
        self.capacity = capacity
        self._clock = clock
        self._expiry: OrderedDict[bytes, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._expiry)

    def _purge(self, now: float) -> None:
        expiry = self._expiry
        while expiry:  # bounded by the cache size
            until = next(iter(expiry.values()))
            if until > now and len(expiry) <= self.capacity:
                break
            expiry.popitem(last=False)

    def add(self, digest: bytes) -> None:
        """Remember ``digest`` (again) for ``ttl_s`` from now."""
        now = self._clock()
        self._expiry[digest] = now + self.ttl_s
        self._expiry.move_to_end(digest)
        self._purge(now)

    def check_and_add(self, digest: bytes) -> bool:
        """True (and remember it) if ``digest`` was not seen within ``ttl_s``; else False."""
        now = self._clock()
        self._purge(now)
        until = self._expiry.get(digest)
        if until is not None and until > now:
            return False
        self.add(digest)
        return True


@dataclass(eq=False)
class _Link:
    ws: _Ws
    peer_id: bytes
    role: str
    address: str
    outgoing: bool
    dialer: bytes
    queue: asyncio.Queue[bytes]
    since: float = field(default_factory=time.time)
    topics: set[bytes] = field(default_factory=set)
    writer: asyncio.Task[None] | None = None
    keepalive: asyncio.Task[None] | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    registered: bool = False
    heard: float = field(default_factory=time.monotonic)  # see DEAD_AFTER_S


@dataclass
class _Candidate:
    found: PeerFound
    task: asyncio.Task[None] | None = None


class _HandshakeError(NetError):
    pass


class GossipMesh:
    """The gossip half of LAN transport (see the module docstring).

    Args:
        node_id: this node's random per-run id (16 bytes).
        on_envelope: awaited with each new envelope of a joined topic.
        on_peer: called with every :class:`LanPeerEvent`.
        on_links: called with the number of connected peers after each change.
        hosts: IPv4 addresses to listen on (``None``: all, ``0.0.0.0``).
        port: TCP port (0 picks one; every host gets the same port).
        role: ``"node"`` or ``"store"`` (sent in Hello).
        max_peers: connections kept at most.
        hop_limit: longest path (in hops) an envelope travels from its origin.
        seen_ttl_s, seen_capacity: the seen cache.
        queue: frames waiting per peer before frames to it are dropped.
        max_topics: topics a peer may subscribe to.
        connect_timeout, hello_timeout: seconds for dialling and for the Hello.
        dial_grace_s: how long the higher-id side waits for the lower-id side to dial.
        redial_base, redial_max: reconnection backoff in seconds.
    """

    def __init__(
        self,
        node_id: bytes,
        on_envelope: Callable[[bytes], Awaitable[None]],
        *,
        on_peer: Callable[[LanPeerEvent], None] | None = None,
        on_links: Callable[[int], None] | None = None,
        hosts: list[str] | None = None,
        port: int = 0,
        role: str = "node",
        max_peers: int = 8,
        hop_limit: int = 6,
        seen_ttl_s: float = 1.0,
        seen_capacity: int = 65_536,
        queue: int = 1024,
        max_topics: int = 64,
        connect_timeout: float = 5.0,
        hello_timeout: float = 5.0,
        dial_grace_s: float = 1.0,
        redial_base: float = 0.5,
        redial_max: float = 15.0,
    ) -> None:
        if len(node_id) != 16:
            raise ValueError("a node id is 16 bytes")
        if max_peers < 1 or hop_limit < 1 or queue < 1:
            raise ValueError("max_peers, hop_limit and queue must be >= 1")
        self.node_id = node_id
        self.role = role
        self.hosts = list(hosts) if hosts else ["0.0.0.0"]
        self.max_peers = max_peers
        self.hop_limit = hop_limit
        self.queue_size = queue
        self.max_topics = max_topics
        self.topics: set[bytes] = set()
        self.seen = SeenCache(seen_ttl_s, seen_capacity)
        self.counters: Counter[str] = Counter()
        """``received``, ``delivered``, ``forwarded`` (frames), ``published`` (frames),
        ``duplicates``, ``dropped_<reason>``, ``connections_<in|out>``..."""
        self._requested_port = port
        self._port: int | None = None
        self._on_envelope = on_envelope
        self._on_peer = on_peer
        self._on_links = on_links
        self._connect_timeout = connect_timeout
        self._hello_timeout = hello_timeout
        self._dial_grace = dial_grace_s
        self._redial = (redial_base, redial_max)
        self._servers: list[Server] = []
        self._links: dict[bytes, _Link] = {}
        self._pending: set[_Link] = set()
        self._candidates: dict[bytes, _Candidate] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        import random

        self._rng = random.Random()

    # ------------------------------------------------------------------ API

    @property
    def port(self) -> int:
        """The bound gossip port."""
        if self._port is None:
            raise RuntimeError("mesh not started")
        return self._port

    @property
    def connected_count(self) -> int:
        """Peers connected right now."""
        return len(self._links)

    def peers(self) -> list[LanPeerInfo]:
        """The connected peers."""
        return [
            LanPeerInfo(
                link.peer_id.hex(), link.address, link.role, link.outgoing, len(link.topics),
                link.since,
            )
            for link in self._links.values()
        ]

    async def start(self) -> None:
        """Listen on every host (same port on each).

        Raises:
            OSError: an address cannot be bound.
        """
        port = self._requested_port
        try:
            for host in self.hosts:
                server = await serve(
                    self._accept,
                    host,
                    port,
                    max_size=MAX_ENVELOPE_BYTES + 4096,
                    compression=None,
                    ping_interval=None,  # liveness is _keepalive's (slow links)
                    ping_timeout=None,
                    close_timeout=2.0,
                )
                self._servers.append(server)
                if port == 0:
                    port = int(server.sockets[0].getsockname()[1])
        except BaseException:
            for s in self._servers:
                s.close()
            raise
        self._port = port

    async def close(self) -> None:
        """Close every connection and the servers. Idempotent."""
        if self._closing:
            return
        self._closing = True
        for s in self._servers:
            s.close(close_connections=False)
        for cand in self._candidates.values():
            if cand.task is not None:
                cand.task.cancel()
        links = list(self._links.values()) + list(self._pending)
        await asyncio.gather(
            *(self._close_ws(link.ws, CLOSE_GOING_AWAY, "node shutting down") for link in links),
            return_exceptions=True,
        )
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for s in self._servers:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(3.0):
                    await s.wait_closed()

    def on_discovery(self, event: PeerFound | PeerGone) -> None:
        """Feed discovery results in (pass this as the discovery callback)."""
        if self._closing:
            return
        if isinstance(event, PeerGone):
            cand = self._candidates.pop(event.peer_id, None)
            if cand is not None:
                if cand.task is not None:
                    cand.task.cancel()
                self._peer_event("gone", event.peer_id, None, cand.found.role)
            return
        if event.version != GOSSIP_PROTOCOL_VERSION:
            self.counters["incompatible_peers"] += 1
            self._peer_event(
                "incompatible", event.peer_id, None, event.role,
                reason=f"gossip protocol version {event.version}",
            )
            return
        cand = self._candidates.get(event.peer_id)
        if cand is None:
            cand = _Candidate(event)
            self._candidates[event.peer_id] = cand
            self._peer_event(
                "discovered", event.peer_id, f"{event.addresses[0]}:{event.port}", event.role
            )
        else:
            cand.found = event
        if cand.task is None or cand.task.done():
            cand.task = self._spawn(self._keep_connected(event.peer_id))

    async def publish(self, envelope: bytes) -> int:
        """Flood one own envelope; returns how many peers it was queued to.

        Raises:
            ValueError: envelope over ``MAX_ENVELOPE_BYTES`` or unreadable.
        """
        if len(envelope) > MAX_ENVELOPE_BYTES:
            raise ValueError(f"envelope of {len(envelope)} bytes > {MAX_ENVELOPE_BYTES}")
        try:
            topic = peek_topic(envelope)
        except EnvelopeError as exc:
            raise ValueError(f"not an envelope: {exc}") from None
        self.seen.add(hashlib.sha256(envelope).digest())
        frame = encode_gossip(envelope, self.hop_limit - 1)
        sent = 0
        for link in list(self._links.values()):
            if topic in link.topics and self._send(link, frame):
                sent += 1
        self.counters["published"] += sent
        return sent

    async def subscribe(self, topics: Iterable[bytes]) -> None:
        """Join topics: tell every peer (and future ones)."""
        new = [t for t in topics if t not in self.topics]
        for t in new:
            if not 0 < len(t) <= MAX_TOPIC_BYTES:
                raise ValueError(f"a topic is 1..{MAX_TOPIC_BYTES} bytes")
        if not new:
            return
        self.topics.update(new)
        frame = encode_subscribe(new)
        for link in list(self._links.values()):
            self._send(link, frame)

    async def unsubscribe(self, topics: Iterable[bytes]) -> None:
        """Leave topics."""
        gone = [t for t in topics if t in self.topics]
        if not gone:
            return
        self.topics.difference_update(gone)
        frame = encode_unsubscribe(gone)
        for link in list(self._links.values()):
            self._send(link, frame)

    # ------------------------------------------------------------ connections

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _peer_event(
        self,
        state: str,
        peer_id: bytes,
        address: str | None,
        role: str,
        *,
        reason: str | None = None,
    ) -> None:
        if self._on_peer is None:
            return
        try:
            self._on_peer(
                LanPeerEvent(state, peer_id.hex(), address, role, reason, len(self._links))
            )
        except Exception:
            logger.exception("on_peer callback failed")

    def _links_changed(self) -> None:
        if self._on_links is not None:
            try:
                self._on_links(len(self._links))
            except Exception:
                logger.exception("on_links callback failed")

    async def _keep_connected(self, peer_id: bytes) -> None:
        """While the peer's record exists: dial it when it is our turn, redial after losses."""
        if self.node_id > peer_id:
            await asyncio.sleep(self._dial_grace)  # the lower id dials first
        attempt = 0
        while not self._closing and peer_id in self._candidates:  # ends when gone or closing
            link = self._links.get(peer_id)
            if link is not None:
                await link.closed.wait()
                attempt = 0
                await asyncio.sleep(backoff_delay(0, *self._redial, self._rng))
                continue
            if len(self._links) >= self.max_peers:
                await asyncio.sleep(backoff_delay(attempt, *self._redial, self._rng))
                attempt = min(attempt + 1, 16)
                continue
            cand = self._candidates.get(peer_id)
            if cand is None:
                return
            if not await self._dial(cand.found):
                await asyncio.sleep(backoff_delay(attempt, *self._redial, self._rng))
                attempt = min(attempt + 1, 16)

    async def _dial(self, found: PeerFound) -> bool:
        """Try each advertised address; True once a link is registered (or one exists)."""
        for address in found.addresses:
            if self._closing or found.peer_id in self._links:
                return True
            url = f"ws://{address}:{found.port}"
            try:
                async with asyncio.timeout(self._connect_timeout):
                    ws = await connect(
                        url,
                        compression=None,
                        open_timeout=None,
                        max_size=MAX_ENVELOPE_BYTES + 4096,
                        ping_interval=None,  # liveness is _keepalive's (slow links)
                        ping_timeout=None,
                        close_timeout=2.0,
                        proxy=None,
                    )
            except (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed) as exc:
                logger.debug("dialling %s failed: %s", url, exc)
                continue
            try:
                await ws.send(encode_hello(self.node_id, self.role))
                await ws.send(encode_subscribe(sorted(self.topics)))
                peer_id, role = await self._read_hello(ws)
                if peer_id != found.peer_id:
                    raise _HandshakeError("node id differs from its zeroconf record")
            except (_HandshakeError, ConnectionClosed, OSError, TimeoutError) as exc:
                logger.debug("handshake with %s failed: %s", url, exc)
                await self._close_ws(ws, 1002, "handshake failed")
                continue
            link = self._new_link(ws, peer_id, role, f"{address}:{found.port}", outgoing=True)
            if not await self._register(link):
                return found.peer_id in self._links
            self.counters["connections_out"] += 1
            self._spawn(self._run_link(link))
            return True
        return False

    async def _accept(self, ws: ServerConnection) -> None:
        """An incoming connection: Hello both ways, then the same read loop."""
        if self._closing:
            await self._close_ws(ws, CLOSE_GOING_AWAY, "node shutting down")
            return
        try:
            peer_id, role = await self._read_hello(ws)
            await ws.send(encode_hello(self.node_id, self.role))
            await ws.send(encode_subscribe(sorted(self.topics)))
        except (_HandshakeError, ConnectionClosed, OSError, TimeoutError) as exc:
            logger.debug("incoming handshake failed: %s", exc)
            await self._close_ws(ws, 1002, "handshake failed")
            return
        addr = ws.remote_address
        address = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) else str(addr)
        link = self._new_link(ws, peer_id, role, address, outgoing=False)
        if not await self._register(link):
            return
        self.counters["connections_in"] += 1
        await self._run_link(link)

    def _new_link(
        self, ws: _Ws, peer_id: bytes, role: str, address: str, *, outgoing: bool
    ) -> _Link:
        return _Link(
            ws=ws,
            peer_id=peer_id,
            role=role,
            address=address,
            outgoing=outgoing,
            dialer=self.node_id if outgoing else peer_id,
            queue=asyncio.Queue(maxsize=self.queue_size),
        )

    async def _read_hello(self, ws: _Ws) -> tuple[bytes, str]:
        async with asyncio.timeout(self._hello_timeout):
            message = await ws.recv()
        if isinstance(message, str):
            raise _HandshakeError("text frame")
        try:
            frame = decode_gossip_frame(message)
        except GossipFrameError as exc:
            with contextlib.suppress(Exception):
                await ws.send(encode_error(exc.code, exc.reason))
            raise _HandshakeError(str(exc)) from None
        if frame.WhichOneof("body") != "hello":
            raise _HandshakeError("first frame is not a Hello")
        hello = frame.hello
        if hello.protocol_version != GOSSIP_PROTOCOL_VERSION:
            with contextlib.suppress(Exception):
                await ws.send(encode_error("unsupported_version", str(hello.protocol_version)))
            raise _HandshakeError(f"gossip protocol version {hello.protocol_version}")
        if len(hello.node_id) != 16 or hello.node_id == self.node_id:
            raise _HandshakeError("bad node id")
        return bytes(hello.node_id), hello.role or "node"

    async def _register(self, link: _Link) -> bool:
        """Admit a handshaken link, or close it (full, duplicate, closing)."""
        if self._closing:
            await self._close_ws(link.ws, CLOSE_GOING_AWAY, "node shutting down")
            return False
        old = self._links.get(link.peer_id)
        if old is not None:
            keep_dialer = min(self.node_id, link.peer_id)
            if link.dialer == keep_dialer and old.dialer != keep_dialer:
                self._links.pop(link.peer_id)
                self._spawn(self._close_ws(old.ws, CLOSE_DUPLICATE, "duplicate connection"))
                old.closed.set()
            else:
                await self._close_ws(link.ws, CLOSE_DUPLICATE, "duplicate connection")
                return False
        elif len(self._links) >= self.max_peers:
            self.counters["refused_full"] += 1
            await self._close_ws(link.ws, CLOSE_FULL, "peer limit reached")
            return False
        self._links[link.peer_id] = link
        link.registered = True
        link.writer = self._spawn(self._write_loop(link))
        link.keepalive = self._spawn(self._keepalive(link))
        self._peer_event("connected", link.peer_id, link.address, link.role)
        self._links_changed()
        return True

    async def _run_link(self, link: _Link) -> None:
        reason = "closed"
        try:
            async for message in link.ws:
                link.heard = time.monotonic()
                if isinstance(message, str):
                    self.counters["bad_frame_text"] += 1
                    continue
                await self._on_frame(link, message)
        except ConnectionClosed as exc:
            reason = f"connection closed ({exc.rcvd.code if exc.rcvd else 'no close frame'})"
        except OSError as exc:
            reason = f"connection lost: {exc}"
        else:
            rcvd = link.ws.protocol.close_rcvd
            if rcvd is not None:
                reason = f"closed by peer ({rcvd.code}{' ' + rcvd.reason if rcvd.reason else ''})"
        finally:
            for task in (link.writer, link.keepalive):
                if task is not None:
                    task.cancel()
            if self._links.get(link.peer_id) is link:
                del self._links[link.peer_id]
                self._links_changed()
                self._peer_event("disconnected", link.peer_id, link.address, link.role,
                                 reason=reason)
            link.closed.set()
            await self._close_ws(link.ws, 1000, "bye")

    async def _write_loop(self, link: _Link) -> None:
        try:
            while True:  # ends on ConnectionClosed or cancellation
                data = await link.queue.get()
                await link.ws.send(data)  # returns once the socket took it: the peer ACKs
                link.heard = time.monotonic()
        except (ConnectionClosed, OSError):
            return

    async def _keepalive(self, link: _Link) -> None:
        """Ping a link that heard nothing for :data:`KEEPALIVE_S`; close it as dead after
        :data:`DEAD_AFTER_S` without hearing anything (frames, pongs, our writes)."""

        def pong(f: asyncio.Future[float]) -> None:
            if not f.cancelled() and f.exception() is None:
                link.heard = time.monotonic()

        ws = link.ws
        try:
            while True:  # ends on cancellation (the link closed) or a dead peer
                await asyncio.sleep(KEEPALIVE_S)
                silent = time.monotonic() - link.heard
                if silent >= DEAD_AFTER_S:
                    self.counters["dead_links"] += 1
                    ws.transport.abort()  # the reader ends and reports "disconnected"
                    return
                if silent >= KEEPALIVE_S:
                    asyncio.ensure_future(await ws.ping()).add_done_callback(pong)
        except (ConnectionClosed, OSError):
            return

    def _send(self, link: _Link, frame: bytes) -> bool:
        try:
            link.queue.put_nowait(frame)
        except asyncio.QueueFull:
            self.counters["dropped_slow_peer"] += 1
            return False
        return True

    async def _close_ws(self, ws: _Ws, code: int, reason: str) -> None:
        try:
            async with asyncio.timeout(2.0):
                await ws.close(code, reason)
        except (TimeoutError, ConnectionClosed, OSError):
            pass
        finally:
            if ws.transport is not None and not ws.transport.is_closing():
                ws.transport.abort()

    # ------------------------------------------------------------ frames

    async def _on_frame(self, link: _Link, message: bytes) -> None:
        try:
            frame = decode_gossip_frame(message)
        except GossipFrameError as exc:
            self.counters[f"bad_frame_{exc.code}"] += 1
            self._send(link, encode_error(exc.code, exc.reason))
            return
        kind = frame.WhichOneof("body")
        if kind == "gossip":
            await self._on_gossip(link, frame.gossip.envelope, frame.gossip.hops_left)
        elif kind == "subscribe":
            wanted = [bytes(t) for t in frame.subscribe.topics]
            if any(not 0 < len(t) <= MAX_TOPIC_BYTES for t in wanted):
                self._send(link, encode_error("bad_topic", "a topic is 1..64 bytes"))
                return
            if len(link.topics | set(wanted)) > self.max_topics:
                self._send(link, encode_error("too_many_topics", f"at most {self.max_topics}"))
                return
            link.topics.update(wanted)
        elif kind == "unsubscribe":
            link.topics.difference_update(bytes(t) for t in frame.unsubscribe.topics)
        elif kind == "error":
            logger.debug("peer %s: error %s %s", link.address, frame.error.code,
                         frame.error.reason)
        elif kind == "hello":
            pass  # a repeated Hello changes nothing
        else:
            self._send(link, encode_error("unexpected_frame", str(kind)))

    async def _on_gossip(self, link: _Link, envelope: bytes, hops_left: int) -> None:
        self.counters["received"] += 1
        if len(envelope) > MAX_ENVELOPE_BYTES:
            self.counters["dropped_oversized"] += 1
            return
        try:
            topic = peek_topic(envelope)
        except EnvelopeError:
            self.counters["dropped_malformed"] += 1
            return
        if topic not in self.topics:
            self.counters["dropped_unwanted_topic"] += 1
            return
        if not self.seen.check_and_add(hashlib.sha256(envelope).digest()):
            self.counters["duplicates"] += 1
            return
        hops = min(hops_left, self.hop_limit - 1)
        if hops > 0:
            frame = encode_gossip(envelope, hops - 1)
            for other in list(self._links.values()):
                if other is not link and topic in other.topics and self._send(other, frame):
                    self.counters["forwarded"] += 1
        self.counters["delivered"] += 1
        await self._on_envelope(envelope)
