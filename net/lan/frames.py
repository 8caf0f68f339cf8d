"""Encoding and decoding LAN gossip frames (``net/lan/gossip.proto``)."""

from __future__ import annotations

from collections.abc import Iterable

from net.errors import NetError
from net.lan import gossip_pb2

__all__ = [
    "GOSSIP_PROTOCOL_VERSION",
    "GossipFrameError",
    "decode_gossip_frame",
    "encode_error",
    "encode_gossip",
    "encode_hello",
    "encode_subscribe",
    "encode_unsubscribe",
]

GOSSIP_PROTOCOL_VERSION = 1
"""The gossip protocol version this code speaks (zeroconf TXT ``v``, ``Hello``, frames)."""

GossipFrame = gossip_pb2.GossipFrame


class GossipFrameError(NetError):
    """Bytes that are not a ``GossipFrame`` this code understands (``code`` as in Error)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


def decode_gossip_frame(data: bytes) -> gossip_pb2.GossipFrame:
    """Parse one frame; check version and body.

    Raises:
        GossipFrameError: undecodable, unknown version, or no body.
    """
    try:
        frame = GossipFrame.FromString(data)
    except Exception as exc:  # the decoder's error types vary by backend
        raise GossipFrameError("malformed", "undecodable gossip frame") from exc
    if frame.version == 0:
        raise GossipFrameError("malformed", "gossip frame without a version")
    if frame.version != GOSSIP_PROTOCOL_VERSION:
        raise GossipFrameError("unsupported_version", f"gossip frame version {frame.version}")
    if frame.WhichOneof("body") is None:
        raise GossipFrameError("malformed", "gossip frame without a body")
    return frame


def encode_hello(node_id: bytes, role: str) -> bytes:
    return GossipFrame(
        version=GOSSIP_PROTOCOL_VERSION,
        hello=gossip_pb2.Hello(
            protocol_version=GOSSIP_PROTOCOL_VERSION, node_id=node_id, role=role
        ),
    ).SerializeToString()


def encode_subscribe(topics: Iterable[bytes]) -> bytes:
    return GossipFrame(
        version=GOSSIP_PROTOCOL_VERSION, subscribe=gossip_pb2.Subscribe(topics=list(topics))
    ).SerializeToString()


def encode_unsubscribe(topics: Iterable[bytes]) -> bytes:
    return GossipFrame(
        version=GOSSIP_PROTOCOL_VERSION, unsubscribe=gossip_pb2.Unsubscribe(topics=list(topics))
    ).SerializeToString()


def encode_gossip(envelope: bytes, hops_left: int) -> bytes:
    return GossipFrame(
        version=GOSSIP_PROTOCOL_VERSION,
        gossip=gossip_pb2.Gossip(envelope=envelope, hops_left=hops_left),
    ).SerializeToString()


def encode_error(code: str, reason: str = "") -> bytes:
    return GossipFrame(
        version=GOSSIP_PROTOCOL_VERSION, error=gossip_pb2.Error(code=code, reason=reason)
    ).SerializeToString()
