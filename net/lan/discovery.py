"""Finding sdschat peers on the LAN with zeroconf (mDNS/DNS-SD).

Each node advertises one ``_sdschat._tcp.local.`` service: its gossip
websocket endpoint (addresses + port) and a TXT record with only

==========  ==============================================================
``v``       gossip protocol version (``1``)
``id``      the node's random per-run id (32 hex digits)
``role``    ``node`` or ``store``
``store``   (store peers only) the TCP port of its query listener
==========  ==============================================================

Never a channel name, topic, key or SDS sender id: anyone on the LAN can read
the record. Each node also browses for that service type and reports
:class:`PeerFound` (resolved, possibly again when the record changes) and
:class:`PeerGone` (the service was withdrawn or expired) to its callback.

Interfaces: ``interfaces=["192.168.1.20"]`` binds discovery to those IPv4
addresses (and advertises them); ``None`` means every interface (what a
person running sdschat on a LAN wants). Tests always pass
``["127.0.0.1"]`` or addresses inside network namespaces they created.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from zeroconf import IPVersion, ServiceStateChange, Zeroconf
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

__all__ = [
    "SERVICE_TYPE",
    "DiscoveryEvent",
    "LanDiscovery",
    "PeerFound",
    "PeerGone",
    "local_ipv4_addresses",
]

logger = logging.getLogger("sdschat.lan.discovery")

SERVICE_TYPE = "_sdschat._tcp.local."
"""The DNS-SD service type every sdschat node advertises and browses."""

RESOLVE_TIMEOUT_MS = 3000
"""How long one resolution of a discovered service may take."""


@dataclass(frozen=True, slots=True)
class PeerFound:
    """A peer's service was resolved (or its record changed).

    Attributes:
        peer_id: its random node id (16 bytes).
        addresses: IPv4 addresses it advertises.
        port: its gossip websocket port.
        version: the gossip protocol version it speaks.
        role: ``"node"`` or ``"store"``.
        store_port: a store peer's query port (``None`` for nodes).
    """

    peer_id: bytes
    addresses: tuple[str, ...]
    port: int
    version: int
    role: str
    store_port: int | None


@dataclass(frozen=True, slots=True)
class PeerGone:
    """A peer's service was withdrawn (or expired)."""

    peer_id: bytes


DiscoveryEvent = PeerFound | PeerGone


def local_ipv4_addresses() -> list[str]:
    """IPv4 addresses of this host's interfaces, loopback excluded (for ``interfaces=None``)."""
    import ifaddr  # zeroconf's own dependency

    out: list[str] = []
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if isinstance(ip.ip, str) and not ip.ip.startswith("127."):
                out.append(ip.ip)
    return sorted(set(out))


def _txt(props: dict[bytes, bytes | None], key: bytes) -> str | None:
    value = props.get(key)
    return None if value is None else value.decode("utf-8", errors="replace")


class LanDiscovery:
    """Advertise this node and browse for others (see the module docstring).

    Args:
        node_id: this node's random per-run id (16 bytes).
        port: the gossip websocket port to advertise.
        on_event: called (in the loop) with every :class:`PeerFound`/:class:`PeerGone`.
        interfaces: IPv4 addresses to bind and advertise; ``None`` = all.
        role: ``"node"`` or ``"store"``.
        store_port: a store peer's query port (advertised as TXT ``store``).
        version: the gossip protocol version to advertise.
    """

    def __init__(
        self,
        node_id: bytes,
        port: int,
        on_event: Callable[[DiscoveryEvent], None],
        *,
        interfaces: list[str] | None = None,
        role: str = "node",
        store_port: int | None = None,
        version: int = 1,
    ) -> None:
        self.node_id = node_id
        self.port = port
        self.interfaces = list(interfaces) if interfaces else None
        self.role = role
        self.store_port = store_port
        self.version = version
        self._on_event = on_event
        self._azc: AsyncZeroconf | None = None
        self._browser: AsyncServiceBrowser | None = None
        self._info: AsyncServiceInfo | None = None
        self._names: dict[str, bytes] = {}  # service name -> peer id
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def instance_name(self) -> str:
        """This node's service instance name (random per run)."""
        return f"sdschat-{self.node_id.hex()}.{SERVICE_TYPE}"

    def advertised_addresses(self) -> list[str]:
        """The IPv4 addresses this node advertises."""
        return list(self.interfaces) if self.interfaces else local_ipv4_addresses()

    async def start(self) -> None:
        """Register the service and start browsing.

        Raises:
            OSError: zeroconf could not open its sockets on the interfaces.
        """
        interfaces = self.interfaces if self.interfaces else None
        if interfaces is not None:
            self._azc = AsyncZeroconf(interfaces=interfaces, ip_version=IPVersion.V4Only)
        else:
            self._azc = AsyncZeroconf(ip_version=IPVersion.V4Only)
        props: dict[str, str] = {
            "v": str(self.version),
            "id": self.node_id.hex(),
            "role": self.role,
        }
        if self.store_port is not None:
            props["store"] = str(self.store_port)
        self._info = AsyncServiceInfo(
            SERVICE_TYPE,
            self.instance_name,
            addresses=[socket.inet_aton(a) for a in self.advertised_addresses()],
            port=self.port,
            properties=props,
            server=f"sdschat-{self.node_id.hex()[:16]}.local.",
        )
        await self._azc.async_register_service(self._info, allow_name_change=False)
        self._browser = AsyncServiceBrowser(
            self._azc.zeroconf, SERVICE_TYPE, handlers=[self._on_change]
        )

    async def close(self) -> None:
        """Withdraw the service (goodbye packets) and stop browsing. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        azc = self._azc
        if azc is None:
            return
        if self._browser is not None:
            with contextlib.suppress(Exception):
                await self._browser.async_cancel()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(3.0):
                await azc.async_unregister_all_services()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(3.0):
                await azc.async_close()

    def refresh(self, name: str | None = None) -> None:
        """Resolve every known service again (or one): re-emits :class:`PeerFound`."""
        for n in [name] if name else list(self._names):
            self._spawn(self._resolve(n))

    # ------------------------------------------------------------ internals

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_change(
        self,
        zeroconf: Zeroconf,
        service_type: str,
        name: str,
        state_change: ServiceStateChange,
    ) -> None:
        if self._closed or name == self.instance_name:
            return
        if state_change is ServiceStateChange.Removed:
            peer_id = self._names.pop(name, None)
            if peer_id is not None:
                self._emit(PeerGone(peer_id))
            return
        self._spawn(self._resolve(name))

    async def _resolve(self, name: str) -> None:
        azc = self._azc
        if azc is None or self._closed:
            return
        info = AsyncServiceInfo(SERVICE_TYPE, name)
        try:
            ok = await info.async_request(azc.zeroconf, RESOLVE_TIMEOUT_MS)
        except Exception as exc:
            logger.debug("resolving %s failed: %s", name, exc)
            return
        if not ok or self._closed:
            return
        props = info.properties or {}
        id_hex = _txt(props, b"id")
        try:
            peer_id = bytes.fromhex(id_hex or "")
            version = int(_txt(props, b"v") or "0")
            store = _txt(props, b"store")
            store_port = int(store) if store else None
        except ValueError:
            logger.debug("ignoring %s: unreadable TXT record", name)
            return
        if len(peer_id) != 16 or peer_id == self.node_id or info.port is None:
            return
        addresses = tuple(info.parsed_addresses(IPVersion.V4Only))
        if not addresses:
            return
        self._names[name] = peer_id
        self._emit(
            PeerFound(
                peer_id,
                addresses,
                int(info.port),
                version,
                _txt(props, b"role") or "node",
                store_port,
            )
        )

    def _emit(self, event: DiscoveryEvent) -> None:
        try:
            self._on_event(event)
        except Exception:
            logger.exception("discovery callback failed")
