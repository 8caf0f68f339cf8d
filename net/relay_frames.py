"""Encoding and decoding the frames a relay client and a relay exchange.

One websocket binary message carries one ``RelayFrame`` (``net/envelope.proto``).
These helpers keep the version field and the oneof layout in one place.
"""

from __future__ import annotations

from collections.abc import Iterable

from net import envelope_pb2
from net.errors import NetError

__all__ = [
    "RELAY_FRAME_VERSION",
    "FrameDecodeError",
    "decode_frame",
    "encode_deliver",
    "encode_error",
    "encode_ping",
    "encode_pong",
    "encode_publish",
    "encode_subscribe",
    "encode_unsubscribe",
]

RELAY_FRAME_VERSION = 1
"""The relay frame format version this code writes and accepts."""

RelayFrame = envelope_pb2.RelayFrame


class FrameDecodeError(NetError):
    """Bytes that are not a ``RelayFrame`` this code understands.

    ``code`` is the ``Error.code`` a relay answers with: ``"malformed"`` or
    ``"unsupported_version"``.
    """

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


def decode_frame(data: bytes) -> envelope_pb2.RelayFrame:
    """Parse one relay frame and check its version and that a body is set.

    Raises:
        FrameDecodeError: undecodable bytes, unknown version, or no body.
    """
    try:
        frame = RelayFrame.FromString(data)
    except Exception as exc:  # the decoder's own error types vary by backend
        raise FrameDecodeError("malformed", "undecodable relay frame") from exc
    if frame.version == 0:
        raise FrameDecodeError("malformed", "relay frame without a version")
    if frame.version != RELAY_FRAME_VERSION:
        raise FrameDecodeError("unsupported_version", f"relay frame version {frame.version}")
    if frame.WhichOneof("body") is None:
        raise FrameDecodeError("malformed", "relay frame without a body")
    return frame


def encode_subscribe(topics: Iterable[bytes]) -> bytes:
    """A Subscribe frame for ``topics``."""
    return RelayFrame(
        version=RELAY_FRAME_VERSION, subscribe=envelope_pb2.Subscribe(topics=list(topics))
    ).SerializeToString()


def encode_unsubscribe(topics: Iterable[bytes]) -> bytes:
    """An Unsubscribe frame for ``topics``."""
    return RelayFrame(
        version=RELAY_FRAME_VERSION, unsubscribe=envelope_pb2.Unsubscribe(topics=list(topics))
    ).SerializeToString()


def encode_publish(envelope: bytes) -> bytes:
    """A Publish frame carrying serialised envelope bytes."""
    return RelayFrame(
        version=RELAY_FRAME_VERSION, publish=envelope_pb2.Publish(envelope=envelope)
    ).SerializeToString()


def encode_deliver(envelope: bytes) -> bytes:
    """A Deliver frame carrying serialised envelope bytes."""
    return RelayFrame(
        version=RELAY_FRAME_VERSION, deliver=envelope_pb2.Deliver(envelope=envelope)
    ).SerializeToString()


def encode_error(code: str, reason: str = "") -> bytes:
    """An Error frame (``code`` is one of the stable codes in envelope.proto)."""
    return RelayFrame(
        version=RELAY_FRAME_VERSION, error=envelope_pb2.Error(code=code, reason=reason)
    ).SerializeToString()


def encode_ping(nonce: int) -> bytes:
    """A Ping frame; ``nonce`` is an unsigned 64-bit integer echoed in the Pong."""
    return RelayFrame(
        version=RELAY_FRAME_VERSION, ping=envelope_pb2.Ping(nonce=nonce)
    ).SerializeToString()


def encode_pong(nonce: int) -> bytes:
    """A Pong frame answering the Ping with ``nonce``."""
    return RelayFrame(
        version=RELAY_FRAME_VERSION, pong=envelope_pb2.Pong(nonce=nonce)
    ).SerializeToString()
