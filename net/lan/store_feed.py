"""A store peer on the LAN: receive envelopes by gossip and advertise the query port.

``sdschat store --lan`` adds a :class:`LanStoreFeed` to its
:class:`net.store_peer.StorePeer`: a :class:`net.lan.transport.LanTransport`
with role ``store`` that joins the store's topics (so peers flood them to it)
and announces its query port in the zeroconf TXT record ``store``, where nodes
without ``--store`` find it; a query port bound to loopback is not announced
to a LAN that is not loopback too (no node there could reach it; a warning
says so).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import TYPE_CHECKING

from net.lan.gossip import LanPeerEvent
from net.lan.transport import LanOptions, LanStatus, LanTransport

if TYPE_CHECKING:
    from net.store_peer import StorePeer

__all__ = ["LanStoreFeed", "reachable_from_lan"]


def reachable_from_lan(listen_host: str, interfaces: Sequence[str] | None) -> bool:
    """Whether a query port bound to ``listen_host`` can be reached by the LAN
    nodes that discovery on ``interfaces`` (``None``: all) announces it to.

    A loopback bind is reachable only when discovery itself is loopback-only
    (tests and single-machine demos); any other bind is taken as reachable.
    """
    if not _is_loopback(listen_host):
        return True
    return bool(interfaces) and all(_is_loopback(i) for i in interfaces or ())


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LanStoreFeed:
    """LAN gossip feeding a running store peer (build with :meth:`create`)."""

    def __init__(self, peer: StorePeer, transport: LanTransport) -> None:
        self.peer = peer
        self.transport = transport

    @classmethod
    async def create(cls, peer: StorePeer, options: LanOptions) -> LanStoreFeed:
        """A feed for ``peer`` (already started: its query port is advertised)."""
        listen = peer.config.listen
        store_port = peer.port if listen is not None else None
        if listen is not None and not reachable_from_lan(listen[0], options.interfaces):
            # Announcing it would send every LAN node to a port it cannot reach.
            store_port = None
            peer.log.warning(
                "store_query_port_not_announced",
                listen=f"{listen[0]}:{peer.port}",
                note="the query port listens on loopback only, so LAN nodes could not reach "
                "it: give --listen 0.0.0.0:PORT or this host's LAN address to serve them",
            )

        def on_peer(ev: LanPeerEvent) -> None:
            peer.log.info(
                "lan_peer", state=ev.state, peer=ev.peer, address=ev.address, role=ev.role,
                reason=ev.reason, connected=ev.connected,
            )

        transport = LanTransport(options, role="store", store_port=store_port, on_peer=on_peer)
        await transport.subscribe(sorted(peer.topics))
        return cls(peer, transport)

    def start(self) -> None:
        def on_status(status: LanStatus) -> None:
            self.peer.log.info("lan_state", state=status.state, reason=status.reason)

        self.transport.start(self.peer.ingest, on_status)

    async def close(self) -> None:
        await self.transport.close()
