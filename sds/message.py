"""SDS messages: the public dataclasses and their protobuf wire form.

The schema (``sds.proto``) is js-waku's ``SdsMessage`` field for field, so the
bytes we produce are read by ``@waku/sds`` and the other way round. The codec is
the generated protobuf module (``sds_pb2``); this module only converts between
it and plain frozen dataclasses and classifies what a message is.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from typing import cast

from google.protobuf.message import DecodeError as _PbDecodeError

from sds import sds_pb2
from sds.errors import SdsError
from sds.ids import id_form

__all__ = [
    "DecodeError",
    "HistoryEntry",
    "Message",
    "MessageKind",
    "SharedMessage",
    "classify",
    "decode",
    "encode",
]

#: Largest value a ``uint64`` field carries.
_UINT64_MAX = (1 << 64) - 1


class DecodeError(SdsError, ValueError):
    """The bytes are not a valid SDS message.

    ``reason`` is a short stable string (``"malformed"``, ``"invalid_kind"``,
    ``"empty_message_id"``...) suitable for counters.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class MessageKind(enum.Enum):
    """What a decoded message is, by the rules in PROTOCOL.md."""

    CONTENT = "content"  #: lamport set, content non-empty
    EPHEMERAL = "ephemeral"  #: lamport unset, content non-empty
    SYNC = "sync"  #: lamport set, content unset or empty


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """A reference to an earlier message: its id and how to fetch it.

    ``sender_id`` is the referenced message's original sender (used by SDS-R to
    decide who answers a repair request); ``None`` when unknown.
    """

    message_id: str
    retrieval_hint: bytes | None = None
    sender_id: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """An SDS message, field names as in the protobuf schema.

    Unset optional fields are ``None``; repeated fields are tuples.
    """

    sender_id: str
    message_id: str
    channel_id: str
    lamport_timestamp: int | None = None
    causal_history: tuple[HistoryEntry, ...] = ()
    bloom_filter: bytes | None = None
    content: bytes | None = None
    repair_request: tuple[HistoryEntry, ...] = ()

    @property
    def kind(self) -> MessageKind:
        """Content, ephemeral or sync. Raises :class:`DecodeError` for the invalid fourth case."""
        return classify(self.lamport_timestamp, self.content)


def classify(lamport_timestamp: int | None, content: bytes | None) -> MessageKind:
    """Classify by the presence of the Lamport timestamp and content (PROTOCOL.md table)."""
    if lamport_timestamp is not None:
        return MessageKind.CONTENT if content else MessageKind.SYNC
    if content:
        return MessageKind.EPHEMERAL
    raise DecodeError("invalid_kind", "neither lamport_timestamp nor content is set")


def _entry_to_pb(entry: HistoryEntry, pb: sds_pb2.HistoryEntry) -> None:
    pb.message_id = entry.message_id
    if entry.retrieval_hint is not None:
        pb.retrieval_hint = entry.retrieval_hint
    if entry.sender_id is not None:
        pb.sender_id = entry.sender_id


def _entry_from_pb(pb: sds_pb2.HistoryEntry) -> HistoryEntry:
    return HistoryEntry(
        pb.message_id,
        pb.retrieval_hint if pb.HasField("retrieval_hint") else None,
        pb.sender_id if pb.HasField("sender_id") else None,
    )


def to_pb(message: Message) -> sds_pb2.SdsMessage:
    """Build the protobuf object for ``message``."""
    pb = sds_pb2.SdsMessage(
        sender_id=message.sender_id,
        message_id=message.message_id,
        channel_id=message.channel_id,
    )
    if message.lamport_timestamp is not None:
        if not 0 <= message.lamport_timestamp <= _UINT64_MAX:
            raise ValueError("lamport_timestamp must fit in uint64")
        pb.lamport_timestamp = message.lamport_timestamp
    for entry in message.causal_history:
        _entry_to_pb(entry, pb.causal_history.add())
    if message.bloom_filter is not None:
        pb.bloom_filter = message.bloom_filter
    for entry in message.repair_request:
        _entry_to_pb(entry, pb.repair_request.add())
    if message.content is not None:
        pb.content = message.content
    return pb


def from_pb(pb: sds_pb2.SdsMessage) -> Message:
    """Convert a parsed protobuf object to a :class:`Message`."""
    return Message(
        sender_id=pb.sender_id,
        message_id=pb.message_id,
        channel_id=pb.channel_id,
        lamport_timestamp=pb.lamport_timestamp if pb.HasField("lamport_timestamp") else None,
        causal_history=tuple(_entry_from_pb(e) for e in pb.causal_history),
        bloom_filter=pb.bloom_filter if pb.HasField("bloom_filter") else None,
        content=pb.content if pb.HasField("content") else None,
        repair_request=tuple(_entry_from_pb(e) for e in pb.repair_request),
    )


def encode(message: Message) -> bytes:
    """Serialise ``message`` to its wire bytes."""
    return to_pb(message).SerializeToString()


def parse_pb(data: bytes) -> sds_pb2.SdsMessage:
    """Parse wire bytes into the protobuf object; raise :class:`DecodeError` on garbage.

    Any failure of the parser (truncated varint, wrong wire type, invalid
    UTF-8 in a string field...) becomes ``DecodeError("malformed")``.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise DecodeError("malformed", f"expected bytes, got {type(data).__name__}")
    pb = sds_pb2.SdsMessage()
    try:
        pb.ParseFromString(bytes(data))
    except _PbDecodeError as exc:
        raise DecodeError("malformed", str(exc)) from None
    except Exception as exc:  # the upb parser may raise others on hostile input
        raise DecodeError("malformed", f"{type(exc).__name__}: {exc}") from None
    return pb


def decode(data: bytes) -> Message:
    """Parse wire bytes into a :class:`Message`.

    Raises :class:`DecodeError` (and nothing else) when the bytes are not a
    protobuf ``SdsMessage``. The message kind is not checked here; see
    :attr:`Message.kind`.
    """
    return from_pb(parse_pb(data))


class SharedMessage:
    """A received message parsed once for many receivers (one simulated broadcast
    reaching thousands of :class:`sds.Channel`\\ s): the fields the core reads, as
    plain attributes under the protobuf names, ids interned once.

    :meth:`sds.Channel.receive_parsed` takes it where it takes a parsed
    ``SdsMessage``, with the same result; each access of a protobuf field makes a
    new object, so per receiver that cost an id string per field read and a list of
    fresh history-id strings (50 at the default size) per message.
    ``causal_history`` and ``repair_request`` are the parsed entries, shared and
    never changed.
    """

    __slots__ = (
        "_has_bloom", "_has_lamport", "_id_form", "_pb", "bloom_filter", "causal_history",
        "channel_id", "content", "history_ids", "lamport_timestamp", "message_id",
        "repair_request", "sender_id",
    )

    def __init__(self, pb: sds_pb2.SdsMessage) -> None:
        self._pb = pb
        self.message_id = sys.intern(pb.message_id)
        self.sender_id = sys.intern(pb.sender_id)
        self.channel_id = pb.channel_id
        self._has_lamport = pb.HasField("lamport_timestamp")
        self.lamport_timestamp = pb.lamport_timestamp
        self._has_bloom = pb.HasField("bloom_filter")
        self.bloom_filter = pb.bloom_filter
        self.content = pb.content
        self.causal_history = tuple(pb.causal_history)
        self.repair_request = tuple(pb.repair_request)
        #: the history's ids, interned (the one list every receiver reads)
        self.history_ids = [sys.intern(h.message_id) for h in self.causal_history]
        self._id_form: str | bool | None = False  # not checked yet

    def id_form(self) -> str | None:
        """:func:`sds.ids.id_form` of the message's own fields, worked out once for
        every receiver (a SHA-256 over the content each)."""
        form = self._id_form
        if form is False:
            form = self._id_form = id_form(
                self.message_id, self.channel_id, self.sender_id, self.lamport_timestamp,
                self.content,
            )
        return cast("str | None", form)

    def HasField(self, name: str) -> bool:
        """As ``SdsMessage.HasField``."""
        if name == "lamport_timestamp":
            return self._has_lamport
        if name == "bloom_filter":
            return self._has_bloom
        return self._pb.HasField(name)

