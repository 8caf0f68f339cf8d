"""What crosses a process boundary.

Envelopes, the relay, LAN gossip, the store-peer protocol and the in-memory network.
"""

from net.errors import NetError

__all__ = ["NetError"]
