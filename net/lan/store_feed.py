"""A store peer on the LAN: receive envelopes by gossip and advertise the query port.

``sdschat store --lan`` adds a :class:`LanStoreFeed` to its
:class:`net.store_peer.StorePeer`: a :class:`net.lan.transport.LanTransport`
with role ``store`` that joins the store's topics (so peers flood them to it)
and announces its query port in the zeroconf TXT record ``store``, where nodes
without ``--store`` find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from net.lan.gossip import LanPeerEvent
from net.lan.transport import LanOptions, LanStatus, LanTransport

if TYPE_CHECKING:
    from net.store_peer import StorePeer

__all__ = ["LanStoreFeed"]


class LanStoreFeed:
    """LAN gossip feeding a running store peer (build with :meth:`create`)."""

    def __init__(self, peer: StorePeer, transport: LanTransport) -> None:
        self.peer = peer
        self.transport = transport

    @classmethod
    async def create(cls, peer: StorePeer, options: LanOptions) -> LanStoreFeed:
        """A feed for ``peer`` (already started: its query port is advertised)."""
        store_port = peer.port if peer.config.listen is not None else None

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
