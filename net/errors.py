"""The root of every error :mod:`net` raises: ``except net.NetError`` catches them all."""

from __future__ import annotations

__all__ = ["NetError"]


class NetError(Exception):
    """Something that crosses a process boundary failed: an envelope, a frame, a relay,
    the store peer, TLS files, an identity file, a NATS cluster."""
