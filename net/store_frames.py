"""Encoding and decoding the frames of the store-peer query protocol (``net/store.proto``).

One websocket binary message carries one ``StoreFrame``. These helpers keep the
version field, the request id and the oneof layout in one place; the store
(``net/store_peer.py``) and its client (``net/store_client.py``) use nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable

from net import store_pb2
from net.errors import NetError

__all__ = [
    "HASH_BYTES",
    "STORE_PROTOCOL_VERSION",
    "StoreFrameError",
    "decode_store_frame",
    "encode_envelopes",
    "encode_error",
    "encode_info",
    "encode_info_request",
    "encode_put",
    "encode_put_result",
    "encode_query_by_hash",
    "encode_query_by_time",
]

STORE_PROTOCOL_VERSION = 1
"""The store frame format version this code writes and accepts."""

HASH_BYTES = 32
"""Length of an envelope hash (sha256), the key of by-hash queries."""

StoreFrame = store_pb2.StoreFrame


class StoreFrameError(NetError):
    """Bytes that are not a ``StoreFrame`` this code understands.

    ``code`` is the ``Error.code`` a store answers with (``"malformed"`` or
    ``"unsupported_version"``).
    """

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


def decode_store_frame(data: bytes) -> store_pb2.StoreFrame:
    """Parse one store frame, check its version and that a body is set.

    Raises:
        StoreFrameError: undecodable bytes, unknown version, or no body.
    """
    try:
        frame = StoreFrame.FromString(data)
    except Exception as exc:  # the decoder's error types vary by backend
        raise StoreFrameError("malformed", "undecodable store frame") from exc
    if frame.version == 0:
        raise StoreFrameError("malformed", "store frame without a version")
    if frame.version != STORE_PROTOCOL_VERSION:
        raise StoreFrameError("unsupported_version", f"store frame version {frame.version}")
    if frame.WhichOneof("body") is None:
        raise StoreFrameError("malformed", "store frame without a body")
    return frame


def encode_info_request(request_id: int) -> bytes:
    """An InfoRequest."""
    return StoreFrame(
        version=STORE_PROTOCOL_VERSION,
        request_id=request_id,
        info_request=store_pb2.InfoRequest(),
    ).SerializeToString()


def encode_info(request_id: int, info: store_pb2.Info) -> bytes:
    """An Info answer."""
    return StoreFrame(
        version=STORE_PROTOCOL_VERSION, request_id=request_id, info=info
    ).SerializeToString()


def encode_query_by_hash(request_id: int, hashes: Iterable[bytes]) -> bytes:
    """A QueryByHash for ``hashes`` (32 bytes each)."""
    return StoreFrame(
        version=STORE_PROTOCOL_VERSION,
        request_id=request_id,
        query_by_hash=store_pb2.QueryByHash(hashes=list(hashes)),
    ).SerializeToString()


def encode_query_by_time(
    request_id: int,
    topic: bytes,
    *,
    since_ms: int = 0,
    until_ms: int = 0,
    cursor: tuple[int, bytes] | None = None,
    page_size: int = 0,
    want_total: bool = False,
) -> bytes:
    """A QueryByTime (``cursor``: ``(arrival_ms, hash)`` from a previous answer)."""
    query = store_pb2.QueryByTime(
        topic=topic, since_ms=since_ms, until_ms=until_ms, page_size=page_size,
        want_total=want_total,
    )
    if cursor is not None:
        query.cursor.arrival_ms = cursor[0]
        query.cursor.hash = cursor[1]
    return StoreFrame(
        version=STORE_PROTOCOL_VERSION, request_id=request_id, query_by_time=query
    ).SerializeToString()


def encode_envelopes(
    request_id: int,
    items: Iterable[tuple[bytes, int]],
    *,
    next_cursor: tuple[int, bytes] | None = None,
    final: bool = False,
    store_time_ms: int = 0,
    total: int = 0,
) -> bytes:
    """One frame of an answer: ``items`` are ``(envelope bytes, arrival_ms)``.

    Encoded by the generated protobuf code (the project never writes protobuf
    wire format by hand). The frame is filled in place (``add``): building
    ``StoredEnvelope`` objects first and passing them in copies every envelope
    once more, which was half of a store's CPU time.
    """
    frame = StoreFrame(version=STORE_PROTOCOL_VERSION, request_id=request_id)
    body = frame.envelopes
    add = body.envelopes.add
    for envelope, arrival in items:
        add(envelope=envelope, arrival_ms=arrival)
    body.final = final
    body.store_time_ms = store_time_ms
    body.total = total
    if next_cursor is not None:
        body.next.arrival_ms = next_cursor[0]
        body.next.hash = next_cursor[1]
    return frame.SerializeToString()


def encode_error(request_id: int, code: str, reason: str = "") -> bytes:
    """An Error answer (``code`` is one of the stable codes in store.proto)."""
    return StoreFrame(
        version=STORE_PROTOCOL_VERSION,
        request_id=request_id,
        error=store_pb2.Error(code=code, reason=reason),
    ).SerializeToString()


def encode_put(request_id: int, items: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A Put: ``items`` are ``(envelope bytes, write proof)`` (``net/store_proof.py``)."""
    frame = StoreFrame(version=STORE_PROTOCOL_VERSION, request_id=request_id)
    add = frame.put.envelopes.add
    for envelope, proof in items:
        add(envelope=envelope, proof=proof)
    return frame.SerializeToString()


def encode_put_result(request_id: int, accepted: int, refused: Iterable[str]) -> bytes:
    """The answer to a Put: how many were archived, and why the others were refused."""
    return StoreFrame(
        version=STORE_PROTOCOL_VERSION,
        request_id=request_id,
        put_result=store_pb2.PutResult(accepted=accepted, refused=list(refused)),
    ).SerializeToString()
