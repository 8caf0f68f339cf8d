"""LAN gossip as a node transport: zeroconf discovery plus the gossip mesh.

:class:`LanTransport` has the shape of ``app.node.transport.Transport`` (``connected``,
``start(on_envelope, on_status)``, ``publish``, ``subscribe``, ``unsubscribe``,
``close``), so the node drives it like a relay connection:

* status ``connecting`` while the listener and zeroconf start, then
  ``disconnected`` (reason ``"no LAN peers yet"``) until the first peer is
  connected, ``connected`` while at least one is, ``disconnected`` (``"no LAN
  peers connected"``) when the last one goes, ``closed`` at the end;
* :meth:`publish` floods the envelope and returns False when no connected peer
  is subscribed to its topic (the node then keeps it and republishes on the
  next ``connected``);
* every peer change is also passed to ``on_peer`` (a :class:`LanPeerEvent`),
  and store peers announced on the LAN are listed by :meth:`stores` (and
  reported to ``on_store``).

Nothing about channels is advertised: the zeroconf record carries the gossip
port, protocol version, a random per-run id and the role only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from net.lan.discovery import DiscoveryEvent, LanDiscovery, PeerFound, PeerGone
from net.lan.frames import GOSSIP_PROTOCOL_VERSION
from net.lan.gossip import GossipMesh, LanPeerEvent, LanPeerInfo

__all__ = ["LanOptions", "LanStatus", "LanTransport"]

logger = logging.getLogger("sdschat.lan")


@dataclass(frozen=True, slots=True)
class LanStatus:
    """A status change, shaped like ``app.node.transport.TransportStatus``."""

    state: str
    reason: str | None = None
    retry_in: float | None = None
    attempt: int = 0

    @property
    def connected(self) -> bool:
        return self.state == "connected"


@dataclass(frozen=True)
class LanOptions:
    """Tunables of LAN gossip (see :class:`net.lan.gossip.GossipMesh` for each).

    Attributes:
        interfaces: IPv4 addresses for discovery and gossip; ``None`` = all.
        port: gossip TCP port (0: any free one).
        max_peers, hop_limit, seen_ttl_s, queue: as in the mesh.
        dial_grace_s, redial_base, redial_max: connection timing.
    """

    interfaces: tuple[str, ...] | None = None
    port: int = 0
    max_peers: int = 8
    hop_limit: int = 6
    seen_ttl_s: float = 1.0
    queue: int = 1024
    dial_grace_s: float = 1.0
    redial_base: float = 0.5
    redial_max: float = 15.0


class LanTransport:
    """Discovery + gossip mesh behind the node's transport interface (module docstring).

    Args:
        options: interfaces, port and mesh tunables.
        role: ``"node"`` or ``"store"``.
        store_port: a store peer's query port, advertised on the LAN.
        on_peer: called with each :class:`LanPeerEvent`.
        on_store: called with ``(url, present)`` when a LAN store appears/goes.
        node_id: random per-run id (16 bytes; generated when omitted).
    """

    def __init__(
        self,
        options: LanOptions | None = None,
        *,
        role: str = "node",
        store_port: int | None = None,
        on_peer: Callable[[LanPeerEvent], None] | None = None,
        on_store: Callable[[str, bool], None] | None = None,
        node_id: bytes | None = None,
    ) -> None:
        self.options = options if options is not None else LanOptions()
        self.role = role
        self.store_port = store_port
        self.on_peer = on_peer
        self.on_store = on_store
        self.node_id = node_id if node_id is not None else os.urandom(16)
        o = self.options
        self.mesh = GossipMesh(
            self.node_id,
            self._deliver,
            on_peer=self._peer_event,
            on_links=self._links_changed,
            hosts=list(o.interfaces) if o.interfaces else None,
            port=o.port,
            role=role,
            max_peers=o.max_peers,
            hop_limit=o.hop_limit,
            seen_ttl_s=o.seen_ttl_s,
            queue=o.queue,
            dial_grace_s=o.dial_grace_s,
            redial_base=o.redial_base,
            redial_max=o.redial_max,
        )
        self.discovery: LanDiscovery | None = None
        self._on_envelope: Callable[[bytes], Awaitable[None]] | None = None
        self._on_status: Callable[[LanStatus], None] | None = None
        self._stores: dict[bytes, str] = {}
        self._startup: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self._closed = False
        self._state = "disconnected"

    # ------------------------------------------------------------------ Transport

    @property
    def connected(self) -> bool:
        return self.mesh.connected_count > 0 and not self._closed

    def start(
        self,
        on_envelope: Callable[[bytes], Awaitable[None]],
        on_status: Callable[[LanStatus], None] | Callable[..., None],
    ) -> None:
        """Start listening, advertising and browsing in the background (inside the loop)."""
        if self._startup is not None:
            raise RuntimeError("LanTransport already started")
        self._on_envelope = on_envelope
        self._on_status = on_status
        self._status("connecting")
        self._startup = asyncio.create_task(self._start(), name="lan-start")

    async def wait_started(self, timeout: float | None = None) -> bool:
        """Wait until listening and advertised (tests); False on timeout or failure."""
        try:
            async with asyncio.timeout(timeout):
                await self._started.wait()
        except TimeoutError:
            return False
        return self.discovery is not None

    async def publish(self, envelope: bytes) -> bool:
        if self._closed:
            return False
        try:
            return await self.mesh.publish(envelope) > 0
        except ValueError as exc:
            logger.warning("not publishing: %s", exc)
            return False

    async def subscribe(self, topics: Iterable[bytes]) -> None:
        await self.mesh.subscribe(topics)

    async def unsubscribe(self, topics: Iterable[bytes]) -> None:
        await self.mesh.unsubscribe(topics)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._startup is not None and not self._startup.done():
            self._startup.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._startup
        if self.discovery is not None:
            await self.discovery.close()
        await self.mesh.close()
        self._status("closed", "closed by the application")

    # ------------------------------------------------------------------ extras

    @property
    def port(self) -> int:
        """The gossip port (after start)."""
        return self.mesh.port

    def peers(self) -> list[LanPeerInfo]:
        """Connected LAN peers."""
        return self.mesh.peers()

    def stores(self) -> list[str]:
        """Query URLs of store peers announced on the LAN."""
        return sorted(set(self._stores.values()))

    def stats(self) -> dict[str, int]:
        """The mesh's counters plus connected peers."""
        out = dict(self.mesh.counters)
        out["lan_peers"] = self.mesh.connected_count
        return out

    # ------------------------------------------------------------ internals

    async def _start(self) -> None:
        try:
            await self.mesh.start()
            self.discovery = LanDiscovery(
                self.node_id,
                self.mesh.port,
                self._discovered,
                interfaces=list(self.options.interfaces) if self.options.interfaces else None,
                role=self.role,
                store_port=self.store_port,
                version=GOSSIP_PROTOCOL_VERSION,
            )
            await self.discovery.start()
        except Exception as exc:
            logger.error("LAN gossip could not start: %s", exc)
            self._closed = True
            self._status("closed", f"LAN unavailable: {exc}")
            self._started.set()
            return
        self._started.set()
        if self.mesh.connected_count == 0:
            self._status("disconnected", "no LAN peers yet")

    def _discovered(self, event: DiscoveryEvent) -> None:
        if isinstance(event, PeerFound) and event.role == "store" and event.store_port:
            url = f"ws://{event.addresses[0]}:{event.store_port}"
            if self._stores.get(event.peer_id) != url:
                self._stores[event.peer_id] = url
                self._store_event(url, True)
        elif isinstance(event, PeerGone) and event.peer_id in self._stores:
            self._store_event(self._stores.pop(event.peer_id), False)
        self.mesh.on_discovery(event)

    def _store_event(self, url: str, present: bool) -> None:
        if self.on_store is not None:
            try:
                self.on_store(url, present)
            except Exception:
                logger.exception("on_store callback failed")

    async def _deliver(self, envelope: bytes) -> None:
        if self._on_envelope is not None:
            await self._on_envelope(envelope)

    def _peer_event(self, event: LanPeerEvent) -> None:
        if self.on_peer is not None:
            self.on_peer(event)

    def _links_changed(self, count: int) -> None:
        if self._closed:
            return
        if count > 0 and self._state != "connected":
            self._status("connected")
        elif count == 0 and self._state == "connected":
            self._status("disconnected", "no LAN peers connected")

    def _status(self, state: str, reason: str | None = None) -> None:
        self._state = state
        if self._on_status is None:
            return
        try:
            self._on_status(LanStatus(state, reason))
        except Exception:
            logger.exception("on_status callback failed")
